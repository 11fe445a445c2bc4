#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The exec hand-over (xsock(7) EXEC), with tests/xsock-exec-check, a plain
# sockets program under `xsock-run --iwarp`:
#   inetd: accept, fork, greet, dup2 the connection onto stdin/stdout and
#     exec the echo service (3 connections, 1 MB each echoed and checked;
#     the client sends at once, so data waits in the old process's ring);
#   a chain of two execs (env, then the service);
#   systemd-socket-activate --inetd, which execs the service (a shell that
#     greets, then execs the echo) with a clean environment;
#   reexec: a client execs itself (no fork) and goes on with its socket;
#   a service exec'ed WITHOUT libxsock: its first read fails with
#     ECONNRESET (never a hang, never MPA framing as data).
# With tcpdump and root, the capture shows the MPA handshake.
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
chk=${XS_TOP_BUILDDIR:-.}/tests/xsock-exec-check
[ -x "$chk" ] || { echo "FAIL: $chk missing"; exit 99; }
xs_scratch
xs_capture_ok "the transfers"

# case NAME CLIENTS BYTES SERVICE...: inetd under iwarp_run, CLIENTS clients
case_inetd() {
    name=$1; n=$2; bytes=$3; shift 3
    port=$(xs_free_port)
    capture_begin "$name" "$port"
    iwarp_run timeout 60 "$chk" inetd "$port" "$n" "$@" >"$tmp/$name.srv" 2>&1 &
    srv=$!
    xs_wait_listen "$port" || { echo "FAIL $name: no listener"; fail=1; }
    i=0
    while [ $i -lt "$n" ]; do
        if ! iwarp_run timeout 30 "$chk" client "$port" "$bytes" >"$tmp/$name.cli" 2>&1; then
            echo "FAIL $name: client $i"; cat "$tmp/$name.cli"; fail=1
        else
            cat "$tmp/$name.cli"
        fi
        i=$((i + 1))
    done
    wait "$srv"; rc=$?; srv=
    capture_end "$name" iwarp
    [ "$rc" = 0 ] || { echo "FAIL $name: inetd exit $rc"; cat "$tmp/$name.srv"; fail=1; }
}

case_inetd inetd 3 1000000 "$chk" echo
case_inetd chain 1 300000 env XSOCK_X=1 "$chk" echo
# the counts travel with the connection through both execs (before, the
# service counted only what came after the last execve, often nothing):
# what the service sent is what the client received (it reads to the
# end), and the service received the 300,000 octets it echoed and at
# most what the client sent (the client's credit updates sent after its
# shutdown may come after the service's last read)
num() { sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p"; }
cli_tx=$(grep '"initiator": true' "$tmp/chain.stack" | num tx_octets)
cli_rx=$(grep '"initiator": true' "$tmp/chain.stack" | num rx_octets)
srv_tx=$(grep '"initiator": false' "$tmp/chain.stack" | num tx_octets | sort -n | tail -1)
srv_rx=$(grep '"initiator": false' "$tmp/chain.stack" | num rx_octets | sort -n | tail -1)
if [ -n "$cli_tx" ] && [ -n "$srv_rx" ] && [ "$cli_rx" = "$srv_tx" ] &&
    [ "$srv_rx" -gt 300000 ] && [ "$srv_rx" -le "$cli_tx" ]; then
    echo "chain: the service's account is the connection's: rx $srv_rx, tx $srv_tx octets"
else
    echo "FAIL chain: the client sent ${cli_tx:-?} and got ${cli_rx:-?} octets, the service's line says rx ${srv_rx:-?} tx ${srv_tx:-?}"
    cat "$tmp/chain.stack"; fail=1
fi
# closefrom(3) and close_range(2) in the service (sshd, Python's subprocess)
# pass over the stack's descriptors, before an exec and after one
case_inetd closefrom 2 500000 "$chk" closefrom "$chk" echo

# systemd-socket-activate --inetd: its child execs the service with a
# clean environment (no LD_PRELOAD, no XSOCK_*): libxsock keeps itself in
# the environment of a program it hands IWARP sockets to
if command -v systemd-socket-activate >/dev/null 2>&1; then
    port=$(xs_free_port)
    iwarp_run timeout 60 systemd-socket-activate -a -l 127.0.0.1:"$port" --inetd \
        sh -c "echo HELLO 0; exec $chk echo" >"$tmp/sa.srv" 2>&1 &
    srv=$!
    xs_wait_listen "$port" || { echo "FAIL socket-activate: no listener"; fail=1; }
    for i in 1 2; do
        if iwarp_run timeout 30 "$chk" client "$port" 300000 >"$tmp/sa.cli" 2>&1; then
            echo "socket-activate $i: $(cat "$tmp/sa.cli")"
        else
            echo "FAIL socket-activate: client $i"; cat "$tmp/sa.cli"; xs_tail "$tmp/sa.srv"; fail=1
        fi
    done
    xs_reap "$srv"; srv=
else
    echo "socket-activate: no systemd-socket-activate here, case not run"
fi

# Python's subprocess (vfork, then close_range in the child, which shares
# the parent's memory) between the turns of an IWARP conversation
if command -v python3 >/dev/null 2>&1; then
    cat >"$tmp/pysub.py" <<'EOF'
import socket, subprocess, sys
port = int(sys.argv[1])
if sys.argv[2] == "srv":
    s = socket.socket()
    s.bind(("127.0.0.1", port)); s.listen(4)
    c, _ = s.accept()
    for i in range(3):
        c.sendall(subprocess.run(["echo", "sub%d" % i], capture_output=True).stdout)
        c.sendall(c.recv(100).upper())
    c.close()
else:
    c = socket.create_connection(("127.0.0.1", port))
    got = b""
    for i in range(3):
        while not got.endswith(b"\n"):
            got += c.recv(100)
        c.sendall(b"hello%d" % i)
        want = b"HELLO%d" % i
        while not got.endswith(want):
            got += c.recv(100)
    print(got.decode().replace("\n", " "))
EOF
    port=$(xs_free_port)
    iwarp_run timeout 60 python3 "$tmp/pysub.py" "$port" srv >"$tmp/py.srv" 2>&1 &
    srv=$!
    xs_wait_listen "$port"
    out=$(iwarp_run timeout 30 python3 "$tmp/pysub.py" "$port" cli 2>&1)
    wait "$srv"; rc=$?; srv=
    if [ "$out" = "sub0 HELLO0sub1 HELLO1sub2 HELLO2" ] && [ "$rc" = 0 ]; then
        echo "python subprocess: three children spawned between turns, the connection intact"
    else
        echo "FAIL python subprocess: '$out' (server exit $rc)"; cat "$tmp/py.srv"; fail=1
    fi
fi

# reexec: no fork, the same process image replaced
port=$(xs_free_port)
iwarp_run timeout 60 "$chk" inetd "$port" 1 "$chk" echo >"$tmp/re.srv" 2>&1 &
srv=$!
xs_wait_listen "$port"
if iwarp_run timeout 30 "$chk" reexec "$port" >"$tmp/re.cli" 2>&1; then
    cat "$tmp/re.cli"
else
    echo "FAIL reexec"; cat "$tmp/re.cli"; fail=1
fi
wait "$srv"; srv=

# reexec-lim: the new process can take the socket over under one fd number
# but not the other (above its RLIMIT_NOFILE): it gives up both cleanly
port=$(xs_free_port)
iwarp_run timeout 60 "$chk" inetd "$port" 1 "$chk" echo >"$tmp/rl.srv" 2>&1 &
srv=$!
xs_wait_listen "$port"
if iwarp_run timeout 30 "$chk" reexec-lim "$port" >"$tmp/rl.cli" 2>&1; then
    cat "$tmp/rl.cli"
else
    echo "FAIL reexec-lim"; cat "$tmp/rl.cli"; fail=1
fi
wait "$srv"; srv=

# without libxsock: a clear failure on first use, within the timeout
port=$(xs_free_port)
iwarp_run timeout 60 "$chk" inetd "$port" 1 env -u LD_PRELOAD "$chk" echo >"$tmp/no.srv" 2>&1 &
srv=$!
xs_wait_listen "$port"
iwarp_run timeout 30 "$chk" client "$port" 1000 >"$tmp/no.cli" 2>&1
crc=$?
wait "$srv"; srv=
if grep -q "echo: read: Connection reset by peer" "$tmp/no.srv" && [ "$crc" != 124 ]; then
    echo "without libxsock: the service's first read failed: $(grep 'echo: read' "$tmp/no.srv")"
else
    echo "FAIL without libxsock: no clear failure (client exit $crc)"; cat "$tmp/no.srv" "$tmp/no.cli"; fail=1
fi
exit $fail
