#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# A NON-BLOCKING connect of an IWARP socket to a destination not known yet
# (xsock(7) PLAIN SERVERS): connect returns EINPROGRESS at once, the stack
# tries MPA on a connection of its own while the program waits, and a
# plain server gets the program's own connection as a kernel TCP socket.
# Three plain servers (tests/xsock-plain-peer.py: one that waits for the
# client and echoes, one that speaks first, one that stays silent past
# XSOCK_PLAIN_PROBE_MS), each listening on one port per way of waiting
# (poll, select, epoll, EPOLLET, an epoll set joined before the connect
# level- and edge-triggered, a blocking send at once, a non-blocking send
# and recv at once), so that every client's first connection is to a
# destination not known yet; two connections per client:
#   - both get their answer and are plain (IWARP_MODE 0 after the
#     exchange), SO_ERROR 0 once the wait saw the socket writable;
#   - the server saw the stack's one MPA try, then two connections that
#     began with the client's own octets (none of the stack's);
#   - XSOCK_DEBUG says why for the first, "lately" for the second (the
#     destination was learnt);
#   - the early non-blocking send and recv gave EAGAIN, as a kernel
#     socket's while it connects (checked where the try surely still
#     runs: the silent server's).
# Then: an xsock server is still iWARP for a non-blocking connect (no
# fallback), whichever way the client waits; options set while the try
# runs are the plain socket's; a port nobody listens on gives
# ECONNREFUSED through SO_ERROR; and xsock-stat of a live client whose
# non-blocking connects went plain counts them by reason.
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
. "${XS_TOP_SRCDIR:-.}/tests/xs_plain_lib.sh"
command -v python3 >/dev/null 2>&1 || { echo "FAIL: no python3 (scripts/install-deps.sh)"; exit 1; }
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
peer=${XS_TOP_SRCDIR:-.}/tests/xsock-plain-peer.py

xs_scratch
fail=0
mpa=4d504120494420526571204672616d65 # "MPA ID Req Frame"
ping=50494e4720 # "PING "
ways="poll select epoll epollet epollpre epollpreet readnow writenow"

for kind in echo greet silent; do
    ports= plist=
    for how in $ways; do
        p=$(xs_free_port)
        ports="$ports $p"
        plist="$plist${plist:+,}$p"
    done
    : >"$tmp/$kind.log"
    env -u LD_PRELOAD python3 "$peer" server $kind "$plist" "$tmp/$kind.log" 2>"$tmp/srv.err" &
    srv=$!
    for p in $ports; do
        xs_wait_listen "$p" || { echo "FAIL: $kind server did not listen"; cat "$tmp/srv.err"; exit 1; }
    done
    case $kind in
    silent) want_why="no MPA Reply in XSOCK_PLAIN_PROBE_MS (or SO_SNDTIMEO)" ;;
    *) want_why="the peer answered octets that are no MPA Reply" ;;
    esac
    set -- $ports
    for how in $ways; do
        port=$1
        shift
        plain_client_run "$port" "$how" "$kind"
        nok=$(grep -c ' ok iwarp_mode 0 ' "$tmp/c.out")
        early=ok
        # (the silent server's try lasts XSOCK_PLAIN_PROBE_MS: the others'
        # may be decided, and the kernel's loopback connect done, before
        # the client's first send)
        if [ $how = writenow ] && [ $kind = silent ] &&
            ! grep -q '^conn 0: .* early send EAGAIN recv EAGAIN ' "$tmp/c.out"; then
            early="not EAGAIN"
        fi
        res="$kind/$how: rc $rc, $nok plain answers, server saw $nmpa MPA try + $nping client connections ($nother other), first: $why"
        if [ $rc = 0 ] && [ "$nok" = 2 ] && [ "$nmpa" = 1 ] && [ "$nping" = 2 ] &&
            [ "$nother" = 0 ] && [ "$tries" = 2 ] && [ "$lately" = 1 ] &&
            [ "$why" = "$want_why" ] && [ "$early" = ok ]; then
            echo "ok   $res; $(sed -n 's/.*connect \(.*\)/\1/p' "$tmp/c.out" | tr '\n' ' ')"
        else
            echo "FAIL $res; lately $lately, early calls $early"; cat "$tmp/c.out"; tail -5 "$tmp/c.err"; fail=1
        fi
    done
    xs_reap "$srv"
    srv=
done

# an xsock server: the non-blocking connects are iWARP, each one after its
# probe (XSOCK_PLAIN_TTL_S=0: nothing remembered) in each way of waiting
port=$(xs_free_port)
: >"$tmp/x.log"
XSOCK_RULES= XSOCK_CONFIG= "$XS_RUN" --iwarp python3 "$peer" server echo "$port" "$tmp/x.log" 2>"$tmp/srv.err" &
srv=$!
xs_wait_listen "$port" || { echo "FAIL: xsock server did not listen"; cat "$tmp/srv.err"; exit 1; }
for how in epoll epollet epollpre poll select writenow; do
    XSOCK_PLAIN_TTL_S=0 XSOCK_DEBUG=1 XSOCK_RULES= XSOCK_CONFIG= timeout 60 "$XS_RUN" --iwarp \
        python3 "$peer" client "$port" $how 2 >"$tmp/c.out" 2>"$tmp/c.err"
    rc=$?
    if [ $rc = 0 ] && [ "$(grep -c ' ok iwarp_mode 1 ' "$tmp/c.out")" = 2 ] &&
        ! grep -q 'plain TCP' "$tmp/c.err"; then
        echo "ok   xsock server/$how: 2 IWARP connections, no fallback; $(sed -n 's/.*connect \(.*\)/\1/p' "$tmp/c.out" | tr '\n' ' ')"
    else
        echo "FAIL xsock server/$how: rc $rc"; cat "$tmp/c.out"; tail -5 "$tmp/c.err"; fail=1
    fi
done
sleep 0.1
if [ "$(grep -c "^$ping" "$tmp/x.log")" != 12 ]; then
    echo "FAIL xsock server: saw $(grep -c "^$ping" "$tmp/x.log") PINGs, not 12"; cat "$tmp/x.log"; fail=1
fi
xs_reap "$srv"
srv=

# options set while the try runs (as an event loop sets TCP_NODELAY right
# after its connect) are the kernel socket's once it went plain (a silent
# server: the try surely runs when they are set)
port=$(xs_free_port)
env -u LD_PRELOAD python3 "$peer" server silent "$port" "$tmp/o.log" 2>"$tmp/srv.err" &
srv=$!
xs_wait_listen "$port" || { echo "FAIL: silent server did not listen"; cat "$tmp/srv.err"; exit 1; }
out=$(XSOCK_PLAIN_PROBE_MS=300 XSOCK_RULES= XSOCK_CONFIG= timeout 30 "$XS_RUN" --iwarp python3 -c "
import select, socket
s = socket.socket()
s.setblocking(False)
s.connect_ex(('127.0.0.1', $port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
p = select.poll()
p.register(s.fileno(), select.POLLOUT)
p.poll(10000)
print(s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR),
      s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0,
      s.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) != 0,
      s.getsockopt(0x69774152, 1))" 2>&1)
if [ "$out" = "0 True True 0" ]; then
    echo "ok   options set during the try: TCP_NODELAY, SO_KEEPALIVE on the plain socket"
else
    echo "FAIL options set during the try: $out (want: 0 True True 0)"; fail=1
fi
xs_reap "$srv"
srv=

# nobody listens: the non-blocking connect's SO_ERROR says ECONNREFUSED
port=$(xs_free_port)
out=$(XSOCK_RULES= XSOCK_CONFIG= timeout 30 "$XS_RUN" --iwarp python3 -c "
import errno, select, socket
s = socket.socket()
s.setblocking(False)
r = s.connect_ex(('127.0.0.1', $port))
p = select.poll()
p.register(s.fileno(), select.POLLOUT)
ev = p.poll(10000)
e = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
print(errno.errorcode.get(r, r), 'polled' if ev else 'nothing', errno.errorcode.get(e, e))" 2>&1)
if [ "$out" = "EINPROGRESS polled ECONNREFUSED" ]; then
    echo "ok   nobody listens: EINPROGRESS, then SO_ERROR ECONNREFUSED"
else
    echo "FAIL nobody listens: $out"; fail=1
fi

# xsock-stat sees the fallbacks of a live process's non-blocking
# connects (epoll), with the default settings
plain_stat_run epoll
want=$plain_stat_want
if plain_stat_ok; then
    echo "ok   xsock-stat of a live non-blocking client: $want"
else
    echo "FAIL xsock-stat of a live non-blocking client ($state, rc $crc)"; cat "$tmp/stay.out" "$tmp/stat.txt"
    tail -5 "$tmp/stay.err"; fail=1
fi
exit $fail
