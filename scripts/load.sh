#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Load: many concurrent verbs/CM connections on loopback echoing messages.
# Not part of `make check` (it runs for minutes).
#
#   scripts/load.sh [BUILDDIR]
#
# 1. $LOAD_CONNS connections (default 1000) between two processes
#    (tests/xsock-load server / client) echo 16-octet messages for
#    $LOAD_SECONDS (default 60): every echo compared, 0 errors wanted;
#    RSS per connection on both sides.
# 2. Then more connections, doubling from 2000 up to $LOAD_MAX (default
#    10000), 5 s of echoes each, until a step fails; prints the largest
#    count reached and the error that stopped the next step (the fd limit
#    is raised to its hard limit first).
# 3. $LOAD_SOCK_CONNS (default 1000) IWARP sockets (scripts/load-sockets.py
#    on both ends under `xsock-run --iwarp`) echoing for $LOAD_SECONDS.
# Exit 0 if parts 1 and 3 passed.  BUILDDIR defaults to build/.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
bdir=$(cd "${1:-$top/build}" && pwd) || exit 2
conns=${LOAD_CONNS:-1000}
secs=${LOAD_SECONDS:-60}
max=${LOAD_MAX:-10000}

[ -x "$bdir/tests/xsock-load" ] || make -C "$bdir" -s tests/xsock-load || exit 2
XS_TOP_BUILDDIR=$bdir
. "$top/tests/xs_test_lib.sh"
ulimit -n "$(ulimit -Hn)" 2>/dev/null
echo "fd limit: $(ulimit -n)"
tmp=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && xs_reap "$srv"; rm -rf "$tmp"' EXIT INT TERM

# one run: $1 connections, $2 seconds; sets ok=1 if the client passed
run() {
    n=$1 s=$2
    port=$(xs_free_port)
    "$bdir/tests/xsock-load" server "$port" >"$tmp/srv.$n" 2>&1 &
    srv=$!
    xs_wait_listen "$port" || { echo "server did not listen"; cat "$tmp/srv.$n"; ok=0; return; }
    ok=1
    timeout $((s + 200)) "$bdir/tests/xsock-load" client "$port" "$n" "$s" >"$tmp/cli.$n" 2>&1 || ok=0
    sleep 1
    xs_reap "$srv"
    srv=
    grep -E '^(client|load):' "$tmp/cli.$n"
    # the server's line with the most connections
    sort -t' ' -k2,2n "$tmp/srv.$n" | grep -E '^server: [0-9]+ connections' | tail -1
    if [ $ok = 0 ]; then
        grep -vE '^(client|load):' "$tmp/cli.$n" | sort | uniq -c | sort -rn | head -5
        grep -vE '^server:' "$tmp/srv.$n" | sort | uniq -c | sort -rn | head -5
    fi
}

echo "== $conns connections, $secs s =="
run "$conns" "$secs"
fail=$((1 - ok))

best=$conns
n=2000
[ $fail = 0 ] || n=$((max + 1))
while [ "$n" -le "$max" ]; do
    echo "== $n connections, 5 s =="
    run "$n" 5
    [ $ok = 1 ] || break
    best=$n
    [ "$n" = "$max" ] && break
    n=$((n * 2))
    [ "$n" -gt "$max" ] && n=$max
done
echo "load: $conns connections for $secs s: $([ $fail = 0 ] && echo PASS || echo FAIL); largest count passed: $best"

sconns=${LOAD_SOCK_CONNS:-1000}
echo "== IWARP sockets: $sconns connections, $secs s =="
if command -v python3 >/dev/null 2>&1; then
    port=$(xs_free_port)
    "$XS_RUN" --iwarp python3 "$top/scripts/load-sockets.py" server "$port" >"$tmp/ssrv" 2>&1 &
    srv=$!
    if xs_wait_listen "$port" &&
        timeout $((secs + 300)) "$XS_RUN" --iwarp python3 "$top/scripts/load-sockets.py" \
            client "$port" "$sconns" "$secs"; then
        tail -1 "$tmp/ssrv"
    else
        echo "FAIL: IWARP sockets load"; tail -5 "$tmp/ssrv"; fail=1
    fi
    xs_reap "$srv"
    srv=
else
    echo "skipped: no python3"
fi
exit $fail
