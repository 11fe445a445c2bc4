#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# An IWARP client of a server that is not an iWARP peer goes on as plain
# TCP (xsock(7) PLAIN SERVERS).  Four plain servers (tests/
# xsock-plain-peer.py: one that echoes what it gets and waits for the
# client, one that speaks first, one that answers an error and closes, one
# that stays silent) and, for each, a client under `xsock-run --iwarp` per
# way of waiting for its connect (blocking; non-blocking then select, poll,
# epoll, EPOLLET, an epoll set it joined before the connect, a read at
# once), two connections each:
#   - both get their answer, and neither is an IWARP socket (IWARP_MODE 0);
#   - the server saw, for the first client, three connections: the
#     stack's MPA try, then two that began with the client's own octets
#     (the program's connections carry none of the stack's); for every
#     later client (other processes) only its two: the user's processes
#     share what they learnt (/dev/shm/xsock-peers-UID);
#   - XSOCK_DEBUG says why for the first try, and that every other
#     connection was plain at once (the destination was remembered).
# Then: a client of an xsock server is an IWARP socket (no fallback), and a
# client of a port nobody listens on gets ECONNREFUSED.  Last, xsock-stat
# of a live client that connected to a greeting server twice (non-MPA
# octets, then remembered), one that hangs up (closed) and a silent one
# (the probe's time is past): its table, its --json and the listing show
# the four plain connects by reason and the last destinations.
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

for kind in echo greet error silent; do
    port=$(xs_free_port)
    : >"$tmp/$kind.log"
    env -u LD_PRELOAD python3 "$peer" server $kind "$port" "$tmp/$kind.log" 2>"$tmp/srv.err" &
    srv=$!
    xs_wait_listen "$port" || { echo "FAIL: $kind server did not listen"; cat "$tmp/srv.err"; exit 1; }
    want_mpa=1 # the first client tries; the others know
    for how in block select poll epoll epollet epollpre readnow; do
        plain_client_run "$port" "$how" "$kind"
        res="$kind/$how: rc $rc, $(grep -c ' ok iwarp_mode 0 ' "$tmp/c.out") plain answers,"
        res="$res server saw $nmpa MPA try + $nping client connections ($nother other), first: $why"
        if [ $rc = 0 ] && [ "$(grep -c ' ok iwarp_mode 0 ' "$tmp/c.out")" = 2 ] &&
            [ "$nmpa" = $want_mpa ] && [ "$nping" = 2 ] && [ "$nother" = 0 ] &&
            [ "$tries" = 2 ] && [ "$lately" = $((2 - want_mpa)) ]; then
            echo "ok   $res; $(sed -n 's/.*connect \(.*\)/\1/p' "$tmp/c.out" | tr '\n' ' ')"
        else
            echo "FAIL $res; lately $lately"; cat "$tmp/c.out"; tail -5 "$tmp/c.err"; fail=1
        fi
        want_mpa=0
    done
    xs_reap "$srv"
    srv=
done

# an xsock server: no fallback, the connections are the stack's
port=$(xs_free_port)
: >"$tmp/x.log"
XSOCK_RULES= XSOCK_CONFIG= "$XS_RUN" --iwarp python3 "$peer" server echo "$port" "$tmp/x.log" 2>"$tmp/srv.err" &
srv=$!
xs_wait_listen "$port" || { echo "FAIL: xsock server did not listen"; cat "$tmp/srv.err"; exit 1; }
XSOCK_DEBUG=1 XSOCK_RULES= XSOCK_CONFIG= timeout 60 "$XS_RUN" --iwarp \
    python3 "$peer" client "$port" epoll 2 >"$tmp/c.out" 2>"$tmp/c.err"
rc=$?
if [ $rc = 0 ] && [ "$(grep -c ' ok iwarp_mode 1 ' "$tmp/c.out")" = 2 ] &&
    ! grep -q 'plain TCP' "$tmp/c.err" && [ "$(grep -c "^$ping" "$tmp/x.log")" = 2 ]; then
    echo "ok   xsock server: 2 IWARP connections, no fallback"
else
    echo "FAIL xsock server: rc $rc"; cat "$tmp/c.out"; tail -5 "$tmp/c.err"; fail=1
fi
xs_reap "$srv"
srv=

# nobody listens: refused, as TCP's connect says, and at once (no dialling
# again, no probe time: hwloc in each Open MPI rank tries 20 X displays)
port=$(xs_free_port)
out=$(XSOCK_RULES= XSOCK_CONFIG= timeout 30 "$XS_RUN" --iwarp python3 -c "
import socket, time
s = socket.socket()
t = time.monotonic()
try:
    s.connect(('127.0.0.1', $port)); print('connected')
except ConnectionRefusedError:
    ms = (time.monotonic() - t) * 1000
    print('refused' if ms < 500 else 'refused after %.0f ms' % ms)" 2>&1)
if [ "$out" = refused ]; then
    echo "ok   nobody listens: ECONNREFUSED at once"
else
    echo "FAIL nobody listens: $out"; fail=1
fi
# xsock-stat sees the fallbacks of a live process, with the default
# settings (a server that hangs up is "closed" at once: a libxsock connect
# is not dialled again)
plain_stat_run
want=$plain_stat_want
if plain_stat_ok &&
    python3 - "$tmp/stat.json" "$tmp/list.json" "$cpid" "$p_greet" "$p_close" "$p_silent" <<'PY'
import json, sys
snap = json.load(open(sys.argv[1]))
pid, greet, close, silent = (int(a) for a in sys.argv[3:])
p = snap["plain"]
assert snap["pid"] == pid and snap["opened"] == 0, snap
assert {k: p[k] for k in ("connects", "octets", "closed", "silent", "remembered", "other")} == \
    {"connects": 4, "octets": 1, "closed": 1, "silent": 1, "remembered": 1, "other": 0}, p
assert [(d["peer"], d["why"]) for d in p["last"]] == [
    ("127.0.0.1:%d" % silent, "silent"), ("127.0.0.1:%d" % close, "closed"),
    ("127.0.0.1:%d" % greet, "remembered"), ("127.0.0.1:%d" % greet, "octets")], p["last"]
row = [r for r in json.load(open(sys.argv[2])) if r["pid"] == pid]
assert row and row[0]["plain"] == 4 and row[0]["connections"] == 0, row
PY
then
    echo "ok   xsock-stat of a live client: $want; last: $(grep '^plain  -> ' "$tmp/stat.txt" | awk '{print $3 "=" $4}' | tr '\n' ' ')"
    echo "     listing: $(grep "^ *$cpid " "$tmp/list.txt")"
else
    echo "FAIL xsock-stat of a live client ($state, rc $crc)"; cat "$tmp/stay.out" "$tmp/stat.txt" "$tmp/stat.json" "$tmp/list.txt"
    tail -5 "$tmp/stay.err"; fail=1
fi
exit $fail
