#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# fork(2) over RoCE v2 (xsock(7) FORK), every process under
# `xsock-run --iwarp --roce`:
#   (a) socat TCP-LISTEN,fork PIPE: the parent accepts, a child echoes the
#       connection and the parent closes its copy at once; a RoCE
#       connection is its maker's (engine thread, memory), so the child's
#       copy is relayed through the parent's (xsk_maker_only), which
#       serves it alone once orphaned.  3 clients one after another and 2
#       at once, 1 MiB each, echoed whole;
#   (b) socat TCP-LISTEN,fork EXEC:cat: the child's relayed copy carries
#       cat's socketpair;
#   (d) socat EXEC,nofork of a program that asks its stdin for its
#       addresses (sshd's re-exec, inetd services, tcpd): the connection
#       on the new program's stdio is the relay's socket and keeps its TCP
#       addresses across the exec (XSOCK_RELAY_ADDR);
#   (e) the same program under systemd-socket-activate --inetd, which
#       execs it with a clean environment (libxsock keeps itself there);
#   (c) a server that forks a child using no socket (redis's BGSAVE) and
#       goes on accepting: libxsock releases the listener in the parent at
#       the fork and the parent claims it back at its next accept (the
#       child's copy is dormant); the next client connects and is echoed.
# Pre-forked workers sharing a listener over RoCE: test-prog-nginx.sh (d).
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
command -v socat >/dev/null 2>&1 || { echo "SKIP: no socat (scripts/install-deps.sh)"; exit 77; }
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
py=/usr/bin/python3

xs_scratch
fail=0

# echo_client NAME PORT N: N octets through the echo, compared
echo_client() {
    head -c "$3" /dev/urandom >"$tmp/$1.in"
    roce_run timeout 20 socat -t 5 - TCP:127.0.0.1:"$2" <"$tmp/$1.in" >"$tmp/$1.out" 2>"$tmp/$1.cli" ||
        { echo "FAIL $1: client exit $?"; xs_tail "$tmp/$1.cli"; fail=1; return; }
    if cmp -s "$tmp/$1.in" "$tmp/$1.out"; then
        echo "$1: $3 octets echoed"
    else
        echo "FAIL $1: $(stat -c %s "$tmp/$1.out") of $3 octets echoed, or different"; fail=1
    fi
}

# server_ready NAME: the server printed "ready" (a listener over RoCE is
# the CM's: no TCP socket to see in /proc/net/tcp)
server_ready() {
    i=0
    while ! grep -q ready "$tmp/$1.srv" 2>/dev/null && [ $i -lt 200 ]; do i=$((i + 1)); sleep 0.05; done
    grep -q ready "$tmp/$1.srv" || { echo "FAIL $1: server not ready"; xs_tail "$tmp/$1.srv"; fail=1; }
}

# socat's own listener prints nothing: it listens once it has run a moment
socat_case() {
    name=$1; port=$(xs_free_port)
    roce_run timeout 60 socat TCP-LISTEN:"$port",bind=127.0.0.1,fork,reuseaddr "$2" \
        2>"$tmp/$name.srv" &
    srv=$!
    sleep 1
    for i in 1 2 3; do echo_client "$name$i" "$port" 1048576; done
    if [ "$name" = a ]; then
        echo_client a4 "$port" 1048576 &
        c4=$!
        echo_client a5 "$port" 1048576
        wait "$c4" || fail=1
    fi
    xs_reap "$srv"; srv=
}

socat_case a PIPE
socat_case b EXEC:cat

# (d) the addresses an exec'd program sees on its stdin
port=$(xs_free_port)
cat >"$tmp/peer.py" <<'EOF'
import socket
s = socket.socket(fileno=0)
print(s.family.name, s.getpeername()[0], s.getsockname()[1], flush=True)
s.detach()
EOF
roce_run timeout 60 socat TCP-LISTEN:"$port",bind=127.0.0.1,fork,reuseaddr EXEC:"$py $tmp/peer.py",nofork \
    2>"$tmp/d.srv" &
srv=$!
sleep 1
got=$(roce_run timeout 20 socat -t 5 - TCP:127.0.0.1:"$port" </dev/null 2>"$tmp/d.cli")
if [ "$got" = "AF_INET 127.0.0.1 $port" ]; then
    echo "d: the exec'd program's stdin is $got"
else
    echo "FAIL d: the exec'd program's stdin is '$got', not 'AF_INET 127.0.0.1 $port'"
    xs_tail "$tmp/d.srv"; xs_tail "$tmp/d.cli"; fail=1
fi
xs_reap "$srv"; srv=

# (e) systemd-socket-activate --inetd
if command -v systemd-socket-activate >/dev/null 2>&1; then
    port=$(xs_free_port)
    roce_run timeout 60 systemd-socket-activate -a -l 127.0.0.1:"$port" --inetd "$py" "$tmp/peer.py" \
        >"$tmp/e.srv" 2>&1 &
    srv=$!
    sleep 1
    got=$(roce_run timeout 20 socat -t 5 - TCP:127.0.0.1:"$port" </dev/null 2>"$tmp/e.cli")
    if [ "$got" = "AF_INET 127.0.0.1 $port" ]; then
        echo "e: under systemd-socket-activate the program's stdin is $got"
    else
        echo "FAIL e: under systemd-socket-activate the program's stdin is '$got'"
        xs_tail "$tmp/e.srv"; xs_tail "$tmp/e.cli"; fail=1
    fi
    xs_reap "$srv"; srv=
else
    echo "e: no systemd-socket-activate here, case not run"
fi

# (c) the BGSAVE pattern
port=$(xs_free_port)
roce_run timeout 60 "$py" -c '
import os, socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
print("ready", flush=True)
for n in range(2):
    c, _ = s.accept()
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.close()
    if n == 0:
        pid = os.fork()
        if pid == 0:
            time.sleep(0.5)
            os._exit(0)
        t = time.monotonic()
print("second client %.2f s after the fork" % (time.monotonic() - t), flush=True)
os.waitpid(pid, 0)
' "$port" >"$tmp/c.srv" 2>&1 &
srv=$!
server_ready c
echo_client c1 "$port" 262144
echo_client c2 "$port" 262144
wait "$srv" || { echo "FAIL c: server exit $?"; xs_tail "$tmp/c.srv"; fail=1; }
srv=
grep "second client" "$tmp/c.srv"
exit $fail
