#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Debian's unmodified redis-server over libxsock (an epoll server with
# non-blocking sockets set through fcntl64, an [::]-style listener, a
# SIGTERM shutdown):
#   a) server and clients under `xsock-run --iwarp`: redis-benchmark
#      (set, get, lpush, lpop; 50 connections) completes, 100 keys with
#      random values and a 1 MiB binary value written by redis-cli are read
#      back identical, and SIGTERM ends the server within 5 s;
#   b) the same server kind with plain redis-cli/redis-benchmark clients
#      (the mixed listener): no MPA Request from them on the wire;
#   c) plain server and clients: the reference for the requests/s ratios
#      printed for SET and GET (informational, not checked);
#   d) server and clients under `xsock-run --iwarp --roce` (the sockets
#      carried over RoCE v2, xsock(7) IWARP_MODE SOCKETS OVER ROCE), the
#      server with redis' default bind (0.0.0.0 and [::] with IPV6_V6ONLY on
#      one port: two RoCE CM listeners); redis-benchmark's 50 connections
#      (their UDP ports share a 4-tuple 1 run in 3: xs_roce_fwd.c) and the
#      data, then
#      plain clients against the same server (the mixed listener over RoCE:
#      the port's TCP listener serves them).
# With tcpdump and root, a) must show the MPA Request and Reply, b) none.
# Exit 77 only if redis is not installed.
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
for p in redis-server redis-cli redis-benchmark; do
    command -v $p >/dev/null 2>&1 || { echo "SKIP: no $p (apt-get install redis-server redis-tools)"; exit 77; }
done

xs_scratch
xs_capture_ok "redis data and shutdown"
fail=0
n=10000 # requests per benchmark test

# start_redis NAME RUN [BIND]: a server on a free port ($port), its pid in
# $rpid; BIND: redis' --bind (127.0.0.1; "default": redis' own, * and -::*)
start_redis() {
    port=$(xs_free_port)
    rm -f "$tmp/$1.pid"
    bind="--bind ${3:-127.0.0.1}"
    [ "${3:-}" = default ] && bind=
    # shellcheck disable=SC2086 # $bind: none or two words
    $2 timeout 120 redis-server --port "$port" $bind --save '' --appendonly no \
        --daemonize no --pidfile "$tmp/$1.pid" >"$tmp/$1.srv" 2>&1 &
    srv=$!
    if [ "$2" = roce_run ]; then
        # over RoCE a listener is the CM's, with no TCP socket to see
        i=0
        while ! grep -q 'Ready to accept' "$tmp/$1.srv" && [ $i -lt 200 ]; do i=$((i + 1)); sleep 0.05; done
        grep -q 'Ready to accept' "$tmp/$1.srv" || { echo "FAIL $1: server not ready"; cat "$tmp/$1.srv"; fail=1; }
    else
        xs_wait_listen "$port" || { echo "FAIL $1: server did not listen"; cat "$tmp/$1.srv"; fail=1; }
    fi
    i=0
    while [ ! -s "$tmp/$1.pid" ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.05; done
    rpid=$(cat "$tmp/$1.pid" 2>/dev/null)
}

# term_redis NAME: SIGTERM; the server must exit (status 0) within 5 s
term_redis() {
    if [ -z "$rpid" ] || ! kill -0 "$rpid" 2>/dev/null; then
        echo "FAIL $1: server died"; cat "$tmp/$1.srv"; fail=1; xs_reap "$srv"; srv=; return
    fi
    kill -TERM "$rpid"
    i=0
    while kill -0 "$rpid" 2>/dev/null && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.05; done
    if kill -0 "$rpid" 2>/dev/null; then
        echo "FAIL $1: still running 5 s after SIGTERM"; fail=1
        xs_reap "$srv"
    else
        wait "$srv"; rc=$?
        echo "$1: SIGTERM: exit $rc after about $((i * 50)) ms"
        [ "$rc" = 0 ] || { echo "FAIL $1: server exit $rc"; cat "$tmp/$1.srv"; fail=1; }
        grep -q "ready to exit" "$tmp/$1.srv" || { echo "FAIL $1: no clean shutdown"; cat "$tmp/$1.srv"; fail=1; }
    fi
    srv=
}

# bench NAME RUN TESTS: redis-benchmark; every test must report requests/s
# (kept in $tmp/NAME.csv: "TEST","RPS",...)
bench() {
    if ! $2 timeout 60 redis-benchmark -p "$port" -t "$3" -c 50 -n $n --csv \
        >"$tmp/$1.csv" 2>"$tmp/$1.err"; then
        echo "FAIL $1: redis-benchmark failed"; cat "$tmp/$1.err"; fail=1
    fi
    for t in $(echo "$3" | tr a-z, A-Z' '); do
        r=$(rps "$1" "$t")
        if awk -v r="$r" 'BEGIN { exit !(r + 0 > 0) }'; then
            echo "$1: $t $r requests/s"
        else
            echo "FAIL $1: no $t result"; cat "$tmp/$1.csv"; fail=1
        fi
    done
}
rps() {
    awk -F'"' -v t="$2" '$2 == t { print $4 }' "$tmp/$1.csv" 2>/dev/null | head -1
}

# data NAME RUN: 100 keys with random values and a 1 MiB binary value,
# written and read back with redis-cli
data() {
    cli="$2 timeout 60 redis-cli -p $port"
    : >"$tmp/set.txt"; : >"$tmp/want.txt"
    i=1
    od -An -tx1 -v -w64 -N 6400 /dev/urandom | tr -d ' ' >"$tmp/vals.txt"
    while read -r v; do
        v=$(printf '%s' "$v" | cut -c1-$((i % 64 * 2 + 2)))
        echo "SET $1:k$i $v" >>"$tmp/set.txt"
        echo "$v" >>"$tmp/want.txt"
        i=$((i + 1))
    done <"$tmp/vals.txt"
    keys=$(seq 1 100 | sed "s/^/$1:k/" | tr '\n' ' ')
    $cli <"$tmp/set.txt" >"$tmp/set.out" 2>&1
    # shellcheck disable=SC2086
    $cli --raw MGET $keys >"$tmp/got.txt" 2>&1
    if [ "$(grep -c '^OK$' "$tmp/set.out")" = 100 ] && cmp -s "$tmp/want.txt" "$tmp/got.txt"; then
        echo "$1: 100 random values read back"
    else
        echo "FAIL $1: values differ"; head -3 "$tmp/set.out" "$tmp/got.txt"; fail=1
    fi
    head -c 1048576 /dev/urandom >"$tmp/big.bin"
    $cli -x SET "$1:big" <"$tmp/big.bin" >"$tmp/bigset.out" 2>&1
    $cli --raw GET "$1:big" >"$tmp/big.got" 2>&1
    len=$($cli STRLEN "$1:big" 2>&1)
    # --raw ends the value with a newline
    if [ "$len" = 1048576 ] && [ "$(wc -c <"$tmp/big.got")" = 1048577 ] &&
        head -c 1048576 "$tmp/big.got" | cmp -s - "$tmp/big.bin"; then
        echo "$1: 1 MiB value read back"
    else
        echo "FAIL $1: 1 MiB value differs (STRLEN $len)"; cat "$tmp/bigset.out"; fail=1
    fi
}

t0=$(date +%s)
# a) all iWARP
start_redis a iwarp_run
capture_begin a "$port"
bench a iwarp_run set,get,lpush,lpop
data a iwarp_run
capture_end a iwarp
term_redis a

# b) iWARP server, plain clients (the mixed listener)
start_redis b iwarp_run
capture_begin b "$port"
bench b plain_run set,get
data b plain_run
capture_end b plain
term_redis b

# d) all over RoCE v2
start_redis d roce_run default
bench d roce_run set,get
data d roce_run
bench d-plain plain_run set,get
data d-plain plain_run
term_redis d

# c) plain reference
start_redis c plain_run
bench c plain_run set,get
term_redis c

for t in SET GET; do
    a=$(rps a $t); b=$(rps b $t); c=$(rps c $t)
    awk -v t=$t -v a="$a" -v b="$b" -v c="$c" 'BEGIN { if (c + 0 > 0)
        printf "%s requests/s: xsock %s, mixed (plain clients) %s, plain %s; xsock/plain %.2f, mixed/plain %.2f\n",
            t, a, b, c, a / c, b / c }'
done
echo "time $(($(date +%s) - t0)) s"
exit $fail
