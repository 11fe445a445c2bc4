#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Unmodified Debian programs over xsock against plain TCP (issue 15):
# scripts/bench-programs.sh [--only NAME] [--quick] [--netns [--netem]]
#                           [--markers] [--plot DIR] [BUILDDIR]
#
# Each program runs in these rows, server and client alike:
#   tcp            plain TCP, nothing preloaded
#   preload        libiwarp + libxsock preloaded, no IWARP socket (fall-through)
#   iwarp          xsock-run --iwarp, MPA CRC off (XSOCK_MPA_CRC=0)
#   iwarp+crc      xsock-run --iwarp --crc
#   iwarp+markers  (--markers) xsock-run --iwarp --markers, CRC off
# XS_BENCH_REPS times (default 5), the rows interleaved within each
# repetition so that noise hits all of them.  One table: program, row, the
# median figure, its ratio to the tcp row's median of the same run, and the
# medians of the CPU (user+sys s) the server (its whole process tree:
# postgres backends, nginx workers) and the client used during the
# measurement (server: /proc/PID/stat of the tree, before and after; client:
# /usr/bin/time).
#
# Programs (--only NAME runs one; iperf3 runs both iperf3 rows):
#   iperf3        iperf3 -t 4 -J, one stream (server iperf3 -s -1)
#   iperf3-P4     iperf3 -t 4 -J -P 4
#   redis         redis-benchmark -t set, then -t get (-c 50, 100000
#                 requests) against redis-server --save '' --appendonly no;
#                 a value written and read back with redis-cli
#   pgbench       pgbench -S -c 4 -j 2 -T 5 against a scratch postgres
#                 cluster (initdb as the postgres user, fsync off)
#   nginx         wrk -c 16 -t 2 -d 4 on a 4 KiB file, nginx with 2 workers
#                 and sendfile; a 1 MiB file fetched by curl and compared
#   memcached     one python3 client speaking the text protocol: set then get
#                 3000 items of 100-1000 octets, 5 passes, every value compared
#   nginx-ab      (with nginx) ab -c 8 without keep-alive on the 4 KiB file:
#                 a connection per request
#   lighttpd      ab -c 8 without keep-alive on a 4 KiB file from lighttpd
#                 (one process, its defaults): a connection per request
#   churn         a python3 client: connect, a 32-octet echo checked, close,
#                 2000 times in a row against a python3 echo server
#   churn-c16     the same from 16 client processes at once
#
# --quick        1 repetition, short durations: a smoke run
# --netns        server in one network namespace (10.77.0.1), client in
#                another (10.77.0.2), joined by a veth pair with MTU 1500
# --netem        with --netns: netem delay 1ms loss 0.1% on both veth ends;
#                a kernel without sch_netem gets a tap in each namespace
#                joined by tools/xsock-impair, which delays and drops the
#                same way (1 ms and 0.1% each direction)
# --markers      add the iwarp+markers row (when xsock-run has --markers)
# --plot DIR     also DIR/programs.dat and DIR/programs.png (ratios to tcp)
#
# Exit 1 when a run fails (a program's error or a data check), 2 for a
# usage or setup error; a ratio is never judged here.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
me=bench-programs.sh
only='' quick=0 netns=0 netem=0 markers=0 plot=''
while [ $# -gt 0 ]; do
    case $1 in
    --only) [ $# -ge 2 ] || { echo "$me: --only needs a name" >&2; exit 2; }; only=$2; shift 2 ;;
    --only=*) only=${1#--only=}; shift ;;
    --quick) quick=1; shift ;;
    --netns) netns=1; shift ;;
    --netem) netem=1; shift ;;
    --markers) markers=1; shift ;;
    --plot) [ $# -ge 2 ] || { echo "$me: --plot needs a directory" >&2; exit 2; }; plot=$2; shift 2 ;;
    --plot=*) plot=${1#--plot=}; shift ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "$me: unknown option $1 (--help)" >&2; exit 2 ;;
    *) break ;;
    esac
done
bdir=$(cd "${1:-$top/build}" 2>/dev/null && pwd) || { echo "$me: no build directory ${1:-$top/build}" >&2; exit 2; }
run=$bdir/tools/xsock-run
libs="$bdir/verbs/.libs/libiwarp.so.0 $bdir/libxsock/.libs/libxsock.so.0"
[ -x "$run" ] || { echo "$me: $run missing (./scripts/build.sh build)" >&2; exit 2; }
[ $netem = 1 ] && [ $netns = 0 ] && { echo "$me: --netem needs --netns" >&2; exit 2; }
[ $netns = 1 ] && [ "$(id -u)" != 0 ] && { echo "$me: --netns needs root" >&2; exit 2; }
case $only in
''|iperf3|iperf3-1|iperf3-P4|redis|pgbench|nginx|lighttpd|memcached|churn|churn-c16) ;;
*) echo "$me: --only: one of iperf3 iperf3-P4 redis pgbench nginx lighttpd memcached churn churn-c16" >&2; exit 2 ;;
esac
command -v /usr/bin/time >/dev/null 2>&1 || { echo "$me: no /usr/bin/time (apt-get install time)" >&2; exit 2; }

reps=${XS_BENCH_REPS:-5}
dur=4 rn=100000 pgt=5 wrkd=4 mcpass=5 abn=3000 chn=2000
[ $quick = 1 ] && { reps=1 dur=1 rn=5000 pgt=1 wrkd=1 mcpass=1 abn=300 chn=200; }

rows="tcp preload iwarp crc"
if [ $markers = 1 ]; then
    if "$run" --help 2>&1 | grep -q -- --markers; then
        rows="$rows markers"
    else
        echo "$me: note: xsock-run has no --markers: no iwarp+markers row" >&2
    fi
fi

tmp=$(mktemp -d)
chmod 711 "$tmp" # postgres and nginx's workers run as other users
hz=$(getconf CLK_TCK)
srvjob='' pgdata='' sns='' cns='' impjob='' failed=0
# shellcheck disable=SC2317 # (called by the EXIT trap)
cleanup() {
    set +e
    stop_server
    [ -n "$impjob" ] && kill "$impjob" 2>/dev/null && wait "$impjob" && cat "$tmp/impair.out" >&2
    [ -n "$sns" ] && ip netns del "$sns" 2>/dev/null
    [ -n "$cns" ] && ip netns del "$cns" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

saddr=127.0.0.1

# rowrun ROW SIDE(srv|cli) TIMEFILE CMD...: CMD in ROW's way, in SIDE's
# namespace, with its user+sys seconds written to TIMEFILE ("" for none)
rowrun() {
    r=$1 side=$2 tf=$3
    shift 3
    case $r in
    tcp) set -- env XSOCK_IWARP= "$@" ;;
    preload) set -- env XSOCK_IWARP= XSOCK_RULES= XSOCK_CONFIG=/dev/null \
        LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD }$libs" "$@" ;;
    iwarp) set -- env XSOCK_MPA_CRC=0 XSOCK_RULES= XSOCK_CONFIG= "$run" --iwarp "$@" ;;
    crc) set -- env XSOCK_RULES= XSOCK_CONFIG= "$run" --iwarp --crc "$@" ;;
    markers) set -- env XSOCK_MPA_CRC=0 XSOCK_RULES= XSOCK_CONFIG= "$run" --iwarp --markers "$@" ;;
    esac
    [ -n "$tf" ] && set -- /usr/bin/time -f '%U %S' -o "$tf" "$@"
    if [ $netns = 1 ]; then
        if [ "$side" = srv ]; then set -- ip netns exec "$sns" "$@"; else set -- ip netns exec "$cns" "$@"; fi
    fi
    "$@"
}
label() { case $1 in crc) echo iwarp+crc ;; markers) echo iwarp+markers ;; *) echo "$1" ;; esac; }

# in_srv CMD: CMD in the server's namespace (its /proc/net/tcp)
in_srv() { if [ $netns = 1 ]; then ip netns exec "$sns" "$@"; else "$@"; fi; }

free_port() { python3 "$top/scripts/free-port.py"; }
# wait_listen PORT: bounded (15 s) until the server's namespace listens on it
wait_listen() {
    hex=$(printf '%04X' "$1") i=0
    while ! in_srv grep -q ":$hex [0-9A-F:]* 0A " /proc/net/tcp /proc/net/tcp6 2>/dev/null; do
        i=$((i + 1)); [ $i -gt 300 ] && return 1
        sleep 0.05
    done
}

# tree_cpu PID: user+sys s of PID and every descendant, the reaped ones
# included (a process's cutime/cstime hold its waited-for children's)
tree_cpu() {
    cat /proc/[0-9]*/stat 2>/dev/null | awk -v root="$1" -v hz="$hz" '{
        pid = $1; s = $0; sub(/^.*\) /, "", s); split(s, f, " ")
        pp[pid] = f[2]; t[pid] = f[12] + f[13] + f[14] + f[15] }
        END { sum = 0
            for (p in t) { q = p; n = 0
                while (q != root && q + 0 > 1 && n++ < 64) q = pp[q]
                if (q == root) sum += t[p] }
            printf "%.2f\n", sum / hz }'
}
time_s() { awk 'NF >= 2 { printf "%.2f\n", $1 + $2; exit }' "$1" 2>/dev/null; }

# start_server NAME ROW CMD...: in the background ($srvjob)
start_server() {
    n=$1 r=$2
    shift 2
    rowrun "$r" srv "" "$@" >"$tmp/$n.srv" 2>&1 &
    srvjob=$!
}
# stop_server: end the server's tree (TERM, then KILL): timeout's signal
# does not cross runuser, so every process of the tree is signalled
stop_server() {
    [ -n "$srvjob" ] || return 0
    if [ -n "$pgdata" ] && [ -f "$pgdata/postmaster.pid" ]; then
        pm=$(head -1 "$pgdata/postmaster.pid")
        kill -INT "$pm" 2>/dev/null || true
        i=0
        while [ -f "$pgdata/postmaster.pid" ] && [ $i -lt 200 ]; do i=$((i + 1)); sleep 0.05; done
    fi
    for sig in TERM KILL; do
        pids=$(tree_pids "$srvjob")
        [ -n "$pids" ] || break
        # shellcheck disable=SC2086
        kill -$sig $pids 2>/dev/null || true
        i=0
        while [ $i -lt 40 ] && [ -n "$(tree_pids "$srvjob")" ]; do i=$((i + 1)); sleep 0.05; done
    done
    wait "$srvjob" 2>/dev/null || true
    srvjob=
    return 0
}
tree_pids() {
    cat /proc/[0-9]*/stat 2>/dev/null | awk -v root="$1" '{
        pid = $1; s = $0; sub(/^.*\) /, "", s); split(s, f, " "); pp[pid] = f[2] }
        END { for (p in pp) { q = p; n = 0
                while (q != root && q + 0 > 1 && n++ < 64) q = pp[q]
                if (q == root) printf "%s ", p } }'
}

# record PROG ROW VALUE SRVCPU CLICPU: a result line; fail PROG ROW WHY LOG...
res=$tmp/results
: >"$res"
record() { echo "$1 $2 $3 ${4:-nan} ${5:-nan}" >>"$res"; }
fail() {
    p=$1 r=$2 why=$3
    shift 3
    echo "$me: FAILED: $p $(label "$r"): $why" >&2
    for f in "$@"; do [ -s "$f" ] && { echo "---- $(basename "$f")" >&2; tail -15 "$f" >&2; }; done
    failed=1
}
want() { [ -z "$only" ] || [ "$only" = "$1" ] || [ "$only-1" = "$1" ] || case $1 in "$only"-*) true ;; *) false ;; esac; }

# ---- the programs: each NAME_run ROW REP does one run and records it ----

# iperf3: the server exits after one test (-1): its CPU from /usr/bin/time
iperf3_run() {
    p=$1 r=$2 k=$1-$2-$3 port=$(free_port)
    par=; [ "$p" = iperf3-P4 ] && par="-P 4"
    rowrun "$r" srv "$tmp/$k.stime" timeout $((dur + 60)) iperf3 -s -1 -B "$saddr" -p "$port" \
        >"$tmp/$k.srv" 2>&1 &
    srvjob=$!
    wait_listen "$port" || { fail "$p" "$r" "server did not listen" "$tmp/$k.srv"; stop_server; return; }
    # shellcheck disable=SC2086
    if ! rowrun "$r" cli "$tmp/$k.ctime" timeout $((dur + 60)) iperf3 -c "$saddr" -p "$port" \
        -t "$dur" -J $par >"$tmp/$k.json" 2>"$tmp/$k.err"; then
        fail "$p" "$r" "iperf3 client failed" "$tmp/$k.json" "$tmp/$k.err" "$tmp/$k.srv"
        stop_server; return
    fi
    wait "$srvjob" 2>/dev/null || true
    srvjob=
    v=$(python3 -c 'import json, sys
e = json.load(open(sys.argv[1]))["end"]
r = e["sum_received"]
print("%.3f" % (r["bits_per_second"] / 1e9) if r["bytes"] > 0 else "")' "$tmp/$k.json" 2>/dev/null) || v=
    [ -n "$v" ] || { fail "$p" "$r" "no bytes received" "$tmp/$k.json"; return; }
    record "$p" "$r" "$v" "$(time_s "$tmp/$k.stime")" "$(time_s "$tmp/$k.ctime")"
}

redis_run() {
    r=$1 k=redis-$1-$2 port=$(free_port)
    # protected mode refuses clients from the other namespace (--netns);
    # the server listens on a private address only
    start_server "$k" "$r" timeout 600 redis-server --port "$port" --bind "$saddr" --save '' \
        --appendonly no --daemonize no --protected-mode no
    wait_listen "$port" || { fail redis "$r" "server did not listen" "$tmp/$k.srv"; stop_server; return; }
    val=$(od -An -tx1 -N 48 /dev/urandom | tr -d ' \n')
    got=$(rowrun "$r" cli "" timeout 30 redis-cli -h "$saddr" -p "$port" SET xsb:check "$val" 2>&1 &&
        rowrun "$r" cli "" timeout 30 redis-cli -h "$saddr" -p "$port" --raw GET xsb:check 2>&1) || true
    [ "$got" = "OK
$val" ] || { fail redis "$r" "value read back differs: $(echo "$got" | head -c 200)"; stop_server; return; }
    for t in set get; do
        c0=$(tree_cpu "$srvjob")
        if ! rowrun "$r" cli "$tmp/$k.$t.ctime" timeout 300 redis-benchmark -h "$saddr" -p "$port" \
            -t $t -c 50 -n "$rn" --csv >"$tmp/$k.$t.csv" 2>"$tmp/$k.$t.err"; then
            fail "redis-$t" "$r" "redis-benchmark failed" "$tmp/$k.$t.err" "$tmp/$k.srv"; continue
        fi
        c1=$(tree_cpu "$srvjob")
        v=$(awk -F'"' -v t="$(echo $t | tr '[:lower:]' '[:upper:]')" '$2 == t { print $4 }' "$tmp/$k.$t.csv" | head -1)
        awk -v v="$v" 'BEGIN { exit !(v + 0 > 0) }' ||
            { fail "redis-$t" "$r" "no requests/s" "$tmp/$k.$t.csv" "$tmp/$k.$t.err"; continue; }
        record "redis-$t" "$r" "$v" "$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')" \
            "$(time_s "$tmp/$k.$t.ctime")"
    done
    kill -0 "$srvjob" 2>/dev/null || fail redis "$r" "server died" "$tmp/$k.srv"
    stop_server
}

pgbin=/usr/lib/postgresql/15/bin
pg_setup() {
    for b in initdb postgres pgbench psql; do
        [ -x "$pgbin/$b" ] || { echo "$me: note: no $pgbin/$b: pgbench skipped" >&2; return 1; }
    done
    as_pg=
    if [ "$(id -u)" = 0 ]; then
        id postgres >/dev/null 2>&1 || { echo "$me: note: no postgres user: pgbench skipped" >&2; return 1; }
        as_pg="runuser -u postgres --"
        # ld.so ignores a preload the server's user cannot read
        for l in $libs; do
            $as_pg test -r "$l" || { echo "$me: note: postgres cannot read $l: pgbench skipped" >&2; return 1; }
        done
    fi
    pgdata=$tmp/pg
    mkdir "$pgdata" "$tmp/pgsock"
    [ -n "$as_pg" ] && chown postgres "$pgdata" "$tmp/pgsock"
    $as_pg "$pgbin/initdb" -D "$pgdata" -U postgres --auth=trust -E UTF8 --no-sync \
        >"$tmp/initdb.log" 2>&1 || { fail pgbench setup initdb "$tmp/initdb.log"; return 1; }
    # trust from the client's namespace too
    echo "host all all 10.77.0.0/24 trust" >>"$pgdata/pg_hba.conf"
    pg_start tcp init || return 1
    c="-h $saddr -p $port -U postgres"
    # shellcheck disable=SC2086
    rowrun tcp cli "" timeout 120 "$pgbin/pgbench" $c -i -q postgres >"$tmp/pginit.log" 2>&1 ||
        { fail pgbench setup "pgbench -i" "$tmp/pginit.log"; stop_server; return 1; }
    stop_server
}
# pg_start ROW KEY: postgres on a free port ($port), ready for queries
pg_start() {
    port=$(free_port)
    # shellcheck disable=SC2086
    start_server "pg-$2" "$1" timeout 600 $as_pg "$pgbin/postgres" -D "$pgdata" \
        -c listen_addresses="$saddr" -c port="$port" -c unix_socket_directories="$tmp/pgsock" \
        -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=20
    wait_listen "$port" || { fail pgbench "$1" "postgres did not listen" "$tmp/pg-$2.srv"; stop_server; return 1; }
    i=0 # the listener comes before recovery ends
    until rowrun "$1" cli "" "$pgbin/psql" -h "$saddr" -p "$port" -U postgres -tAc 'select 1' \
        >/dev/null 2>&1; do
        i=$((i + 1)); [ $i -gt 150 ] && { fail pgbench "$1" "postgres not ready" "$tmp/pg-$2.srv"; stop_server; return 1; }
        sleep 0.1
    done
}
pgbench_run() {
    r=$1 k=pgbench-$1-$2
    pg_start "$r" "$k" || return 0
    c="-h $saddr -p $port -U postgres"
    c0=$(tree_cpu "$srvjob")
    # shellcheck disable=SC2086
    if ! rowrun "$r" cli "$tmp/$k.ctime" timeout $((pgt + 120)) "$pgbin/pgbench" $c -S -c 4 -j 2 \
        -T "$pgt" postgres >"$tmp/$k.out" 2>&1; then
        fail pgbench "$r" "pgbench failed" "$tmp/$k.out" "$tmp/pg-$k.srv"; stop_server; return
    fi
    c1=$(tree_cpu "$srvjob")
    v=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$tmp/$k.out" | tail -1)
    nf=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$tmp/$k.out")
    if [ -z "$v" ] || [ "$nf" != 0 ]; then
        fail pgbench "$r" "no tps or failed transactions ($nf)" "$tmp/$k.out"
    else
        record pgbench "$r" "$v" "$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')" \
            "$(time_s "$tmp/$k.ctime")"
    fi
    grep -q "cannot be preloaded" "$tmp/pg-$k.srv" && fail pgbench "$r" "the server ran without the preload" "$tmp/pg-$k.srv"
    stop_server
}

nginx_setup() {
    [ -x /usr/sbin/nginx ] || { echo "$me: note: no nginx: skipped" >&2; return 1; }
    command -v wrk >/dev/null 2>&1 || { echo "$me: note: no wrk: nginx skipped" >&2; return 1; }
    mkdir "$tmp/www" "$tmp/ngx"
    chmod 755 "$tmp/www"
    head -c 4096 /dev/urandom >"$tmp/www/small.bin"
    head -c 1048576 /dev/urandom >"$tmp/www/big.bin"
    chmod 644 "$tmp/www/"*
}
nginx_run() {
    r=$1 k=nginx-$1-$2 port=$(free_port)
    cat >"$tmp/ngx/$k.conf" <<EOF
worker_processes 2;
daemon off;
master_process on;
pid $tmp/ngx/$k.pid;
error_log $tmp/ngx/$k.error.log error;
events { worker_connections 256; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    client_body_temp_path $tmp/ngx/body;
    proxy_temp_path $tmp/ngx/proxy;
    fastcgi_temp_path $tmp/ngx/fastcgi;
    uwsgi_temp_path $tmp/ngx/uwsgi;
    scgi_temp_path $tmp/ngx/scgi;
    types { application/octet-stream bin; }
    server { listen $saddr:$port; root $tmp/www; }
}
EOF
    start_server "$k" "$r" timeout 600 /usr/sbin/nginx -c "$tmp/ngx/$k.conf" -e "$tmp/ngx/$k.error.log"
    wait_listen "$port" || { fail nginx "$r" "nginx did not listen" "$tmp/$k.srv"; stop_server; return; }
    url=http://$saddr:$port
    if ! rowrun "$r" cli "" timeout 60 curl -sS --max-time 50 -o "$tmp/$k.got" "$url/big.bin" 2>"$tmp/$k.curl" ||
        ! cmp -s "$tmp/$k.got" "$tmp/www/big.bin"; then
        fail nginx "$r" "1 MiB fetch differs" "$tmp/$k.curl" "$tmp/ngx/$k.error.log"; stop_server; return
    fi
    c0=$(tree_cpu "$srvjob")
    if ! rowrun "$r" cli "$tmp/$k.ctime" timeout $((wrkd + 60)) wrk -c 16 -t 2 -d "$wrkd" \
        "$url/small.bin" >"$tmp/$k.wrk" 2>&1; then
        fail nginx "$r" "wrk failed" "$tmp/$k.wrk"; stop_server; return
    fi
    c1=$(tree_cpu "$srvjob")
    v=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$tmp/$k.wrk")
    if [ -z "$v" ] || grep -q "Socket errors\|Non-2xx" "$tmp/$k.wrk"; then
        fail nginx "$r" "wrk: errors" "$tmp/$k.wrk"
    elif grep -qE "\[(emerg|alert|crit|error)\]" "$tmp/ngx/$k.error.log"; then
        fail nginx "$r" "errors in nginx's log" "$tmp/ngx/$k.error.log"
    else
        record nginx "$r" "$v" "$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')" \
            "$(time_s "$tmp/$k.ctime")"
    fi
    # a connection per request: ab without -k
    if command -v ab >/dev/null 2>&1; then ab_row nginx-ab "$r" "$k" "$url/small.bin"; fi
    stop_server
}

# ab_row PROG ROW KEY URL: ab -c 8 without keep-alive on URL (a 4 KiB file)
# from the row's client side, recorded as PROG with the server's CPU; a
# failed request or another length is a failure (fail, then return 0).
ab_row() {
    c0=$(tree_cpu "$srvjob")
    if ! rowrun "$2" cli "$tmp/$3.abtime" timeout 300 ab -q -n "$abn" -c 8 "$4" >"$tmp/$3.ab" 2>&1; then
        fail "$1" "$2" "ab failed" "$tmp/$3.ab"; return 0
    fi
    c1=$(tree_cpu "$srvjob")
    v=$(sed -n 's/^Requests per second: *\([0-9.]*\).*/\1/p' "$tmp/$3.ab")
    if [ -z "$v" ] || ! grep -q "^Failed requests: *0$" "$tmp/$3.ab" ||
        ! grep -q "^Document Length: *4096 bytes" "$tmp/$3.ab"; then
        fail "$1" "$2" "ab: failed requests" "$tmp/$3.ab"
    else
        record "$1" "$2" "$v" "$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')" \
            "$(time_s "$tmp/$3.abtime")"
    fi
}

# churn: a connection per exchange, from python3 on both sides
churn_setup() {
    cat >"$tmp/churn-srv.py" <<'EOF2'
import socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(256)
while True:
    c, _ = s.accept()
    d = b""
    while len(d) < 32:  # the client's 32 octets, in as many parts as they come
        b = c.recv(64)
        if not b:
            break
        d += b
    if d:
        c.sendall(d)
    c.close()
EOF2
    cat >"$tmp/churn-cli.py" <<'EOF2'
# HOST PORT N PROCS: N connections in all, each with a 32-octet echo checked;
# prints the median time to the reply (us), then connections per second
import os, socket, sys, time
host, port, n, procs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def run(k, w):
    t = []
    for i in range(k):
        a = time.perf_counter()
        c = socket.create_connection((host, port))
        m = b"%032d" % i
        c.sendall(m)
        d = b""
        while len(d) < len(m):  # a stream may hand the echo over in parts
            b = c.recv(64)
            if not b:
                break
            d += b
        if d != m:
            sys.exit("echo differs")
        t.append(time.perf_counter() - a)
        c.close()
    t.sort()
    os.write(w, b"%f\n" % t[len(t) // 2])
t0 = time.perf_counter()
r, w = os.pipe()
kids = []
for p in range(procs):
    pid = os.fork()
    if pid == 0:
        run(n // procs, w)
        os._exit(0)
    kids.append(pid)
ok = all([os.waitpid(k, 0)[1] == 0 for k in kids])  # every child reaped
el = time.perf_counter() - t0
os.close(w)
meds = sorted(float(x) for x in os.read(r, 65536).split())
if not ok or len(meds) != procs:
    sys.exit("a client failed")
print("%.1f" % (meds[len(meds) // 2] * 1e6))
print("%.0f" % (n // procs * procs / el))
EOF2
}
churn_run() {
    p=$1 r=$2 k=$1-$2-$3 port=$(free_port) np=1
    [ "$p" = churn-c16 ] && np=16
    start_server "$k" "$r" timeout 600 python3 "$tmp/churn-srv.py" "$saddr" "$port"
    wait_listen "$port" || { fail "$p" "$r" "server did not listen" "$tmp/$k.srv"; stop_server; return; }
    c0=$(tree_cpu "$srvjob")
    if ! rowrun "$r" cli "$tmp/$k.ctime" timeout 300 python3 "$tmp/churn-cli.py" "$saddr" "$port" \
        "$chn" "$np" >"$tmp/$k.out" 2>&1; then
        fail "$p" "$r" "client failed" "$tmp/$k.out" "$tmp/$k.srv"; stop_server; return
    fi
    c1=$(tree_cpu "$srvjob")
    kill -0 "$srvjob" 2>/dev/null || fail "$p" "$r" "server died" "$tmp/$k.srv"
    record "$p" "$r" "$(tail -1 "$tmp/$k.out")" "$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')" \
        "$(time_s "$tmp/$k.ctime")"
    record "$p-reply" "$r" "$(head -1 "$tmp/$k.out")"
    stop_server
}

# lighttpd: a connection per request (ab without -k), every request checked
lighttpd_setup() {
    [ -x /usr/sbin/lighttpd ] || { echo "$me: note: no lighttpd (scripts/install-deps.sh): skipped" >&2; return 1; }
    command -v ab >/dev/null 2>&1 || { echo "$me: note: no ab (apache2-utils): lighttpd skipped" >&2; return 1; }
    mkdir -p "$tmp/lwww" "$tmp/lhttpd"
    chmod 755 "$tmp/lwww"
    head -c 4096 /dev/urandom >"$tmp/lwww/small.bin"
    chmod 644 "$tmp/lwww/small.bin"
}
lighttpd_run() {
    r=$1 k=lighttpd-$1-$2 port=$(free_port)
    cat >"$tmp/lhttpd/$k.conf" <<EOF
server.document-root = "$tmp/lwww"
server.bind = "$saddr"
server.port = $port
server.errorlog = "$tmp/lhttpd/$k.error.log"
server.pid-file = "$tmp/lhttpd/$k.pid"
mimetype.assign = ( ".bin" => "application/octet-stream" )
EOF
    start_server "$k" "$r" timeout 600 /usr/sbin/lighttpd -D -f "$tmp/lhttpd/$k.conf"
    wait_listen "$port" || { fail lighttpd-ab "$r" "lighttpd did not listen" "$tmp/$k.srv"; stop_server; return; }
    url=http://$saddr:$port
    if ! rowrun "$r" cli "" timeout 60 curl -sS --max-time 50 -o "$tmp/$k.got" "$url/small.bin" 2>"$tmp/$k.curl" ||
        ! cmp -s "$tmp/$k.got" "$tmp/lwww/small.bin"; then
        fail lighttpd-ab "$r" "4 KiB fetch differs" "$tmp/$k.curl" "$tmp/lhttpd/$k.error.log"; stop_server; return
    fi
    ab_row lighttpd-ab "$r" "$k" "$url/small.bin"
    stop_server
}

memcached_setup() {
    command -v memcached >/dev/null 2>&1 ||
        { echo "$me: note: no memcached (scripts/install-deps.sh): skipped" >&2; return 1; }
    # one connection, the text protocol: set every item, then get and compare
    cat >"$tmp/mc.py" <<'EOF'
import random, socket, sys, time
host, port, passes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(15)
items = [(b"xsb:%d" % i, rnd.randbytes(rnd.randint(100, 1000))) for i in range(3000)]
s = socket.create_connection((host, port), timeout=30)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
f = s.makefile("rb")
ops = 0
t0 = time.monotonic()
for p in range(passes):
    for k, v in items:
        s.sendall(b"set %s 0 0 %d\r\n%s\r\n" % (k, len(v), v))
        if f.readline() != b"STORED\r\n":
            sys.exit("set %s: not stored" % k.decode())
    for k, v in items:
        s.sendall(b"get %s\r\n" % k)
        h = f.readline().split()
        if len(h) != 4 or h[0] != b"VALUE" or int(h[3]) != len(v):
            sys.exit("get %s: header %r" % (k.decode(), h))
        d = f.read(len(v) + 2)
        if d[:-2] != v or f.readline() != b"END\r\n":
            sys.exit("get %s: value differs" % k.decode())
    ops += 2 * len(items)
print("%.1f" % (ops / (time.monotonic() - t0)))
EOF
}
memcached_run() {
    r=$1 k=memcached-$1-$2 port=$(free_port)
    u=; [ "$(id -u)" = 0 ] && u="-u nobody"
    # shellcheck disable=SC2086
    start_server "$k" "$r" timeout 600 memcached -l "$saddr" -p "$port" -U 0 -t 2 -m 64 $u
    wait_listen "$port" || { fail memcached "$r" "memcached did not listen" "$tmp/$k.srv"; stop_server; return; }
    c0=$(tree_cpu "$srvjob")
    if ! rowrun "$r" cli "$tmp/$k.ctime" timeout 300 python3 "$tmp/mc.py" "$saddr" "$port" "$mcpass" \
        >"$tmp/$k.out" 2>&1; then
        fail memcached "$r" "client failed" "$tmp/$k.out" "$tmp/$k.srv"; stop_server; return
    fi
    c1=$(tree_cpu "$srvjob")
    record memcached "$r" "$(tail -1 "$tmp/$k.out")" \
        "$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')" "$(time_s "$tmp/$k.ctime")"
    stop_server
}

# ---- where each side runs ----
if [ $netns = 1 ]; then
    # the namespaces' names carry our pid: a second run does not collide
    sns=xsb-s$$ cns=xsb-c$$ sv=xsbs$$ cv=xsbc$$
    {
        ip netns add "$sns" && ip netns add "$cns" &&
            ip link add "$sv" type veth peer name "$cv" &&
            ip link set "$sv" netns "$sns" && ip link set "$cv" netns "$cns" &&
            ip -n "$sns" link set lo up && ip -n "$cns" link set lo up
    } || { echo "$me: could not set up the network namespaces" >&2; exit 2; }
    wire="veth MTU 1500"
    if [ $netem = 1 ] && ! tc -n "$sns" qdisc add dev "$sv" root netem delay 1ms loss 0.1% 2>"$tmp/tc.err"; then
        # no sch_netem in this kernel: a tap in each namespace, joined by
        # tools/xsock-impair, which delays and drops as netem would
        [ -x "$bdir/tools/xsock-impair" ] || { echo "$me: netem unavailable ($(cat "$tmp/tc.err")) and no $bdir/tools/xsock-impair" >&2; exit 2; }
        ip -n "$sns" link del "$sv"
        sv=xsbts$$ cv=xsbtc$$
        { ip -n "$sns" tuntap add dev "$sv" mode tap && ip -n "$cns" tuntap add dev "$cv" mode tap; } ||
            { echo "$me: could not make the tap devices" >&2; exit 2; }
        "$bdir/tools/xsock-impair" "$sns" "$sv" "$cns" "$cv" 1000 1000 >"$tmp/impair.out" 2>&1 &
        impjob=$!
        wire="taps joined by xsock-impair (no sch_netem): MTU 1500, delay 1ms loss 0.1% each way"
    elif [ $netem = 1 ]; then
        tc -n "$cns" qdisc add dev "$cv" root netem delay 1ms loss 0.1% ||
            { echo "$me: netem on $cv failed" >&2; exit 2; }
        wire="veth MTU 1500, netem delay 1ms loss 0.1% on both ends"
    fi
    {
        ip -n "$sns" addr add 10.77.0.1/24 dev "$sv" &&
            ip -n "$cns" addr add 10.77.0.2/24 dev "$cv" &&
            ip -n "$sns" link set "$sv" mtu 1500 up && ip -n "$cns" link set "$cv" mtu 1500 up
    } || { echo "$me: could not set up the network namespaces" >&2; exit 2; }
    saddr=10.77.0.1
fi

# ---- setup, then the repetitions: within each, every program and row ----
progs=
for p in iperf3-1 iperf3-P4 redis pgbench nginx lighttpd memcached churn churn-c16; do
    want "$p" || continue
    case $p in
    churn*) [ -f "$tmp/churn-srv.py" ] || churn_setup ;;
    pgbench) pg_setup || continue ;;
    nginx) nginx_setup || continue ;;
    lighttpd) lighttpd_setup || continue ;;
    memcached) memcached_setup || continue ;;
    redis) if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-benchmark >/dev/null 2>&1; then
        echo "$me: note: no redis-server/redis-benchmark: skipped" >&2; continue
    fi ;;
    iperf3*) command -v iperf3 >/dev/null 2>&1 || { echo "$me: note: no iperf3: skipped" >&2; continue; } ;;
    esac
    progs="$progs $p"
done
[ -n "$progs" ] || { echo "$me: nothing to run" >&2; exit 2; }

where="loopback"
[ $netns = 1 ] && where="two network namespaces, $wire"
echo "bench-programs: $reps repetition(s), rows: $(for r in $rows; do printf '%s ' "$(label "$r")"; done)($where)"
# (the functions share the short variable names: these loops use their own)
rep=0
while [ $rep -lt "$reps" ]; do
    rep=$((rep + 1))
    for prog in $progs; do
        for row in $rows; do
            case $prog in
            iperf3-1) iperf3_run iperf3 "$row" $rep ;;
            iperf3-P4) iperf3_run iperf3-P4 "$row" $rep ;;
            redis) redis_run "$row" $rep ;;
            pgbench) pgbench_run "$row" $rep ;;
            nginx) nginx_run "$row" $rep ;;
            lighttpd) lighttpd_run "$row" $rep ;;
            memcached) memcached_run "$row" $rep ;;
            churn*) churn_run "$prog" "$row" $rep ;;
            esac
            printf '.' >&2
        done
    done
done
echo >&2

# ---- the table ----
# med PROG ROW FIELD (bench-lib.sh): the median of FIELD over the runs recorded
. "$top/scripts/bench-lib.sh"
unit() {
    case $1 in iperf3*) echo Gbit/s ;; pgbench) echo tps ;; memcached) echo ops/s ;;
    churn*-reply) echo us ;; churn*) echo conn/s ;; *) echo req/s ;; esac
}
[ -n "$plot" ] && { mkdir -p "$plot"; echo "# program row ratio_to_tcp (medians)" >"$plot/programs.dat"; }
printf '\n%-12s %-14s %10s %-7s %8s %9s %9s %5s\n' program row median unit "vs tcp" "srv cpu s" "cli cpu s" runs
for p in iperf3 iperf3-P4 redis-set redis-get pgbench nginx nginx-ab lighttpd-ab memcached churn churn-reply \
    churn-c16 churn-c16-reply; do
    grep -q "^$p " "$res" || continue
    t=$(med "$p" tcp 3)
    for r in $rows; do
        v=$(med "$p" "$r" 3)
        n=$(awk -v p="$p" -v r="$r" '$1 == p && $2 == r' "$res" | wc -l)
        line=$(awk -v p="$p" -v l="$(label "$r")" -v v="$v" -v t="$t" -v u="$(unit "$p")" \
            -v s="$(med "$p" "$r" 4)" -v c="$(med "$p" "$r" 5)" -v n="$n" 'BEGIN {
            ratio = (v != "nan" && t != "nan" && t + 0 > 0) ? sprintf("%.3fx", v / t) : "-"
            if (v != "nan") v = sprintf(u == "Gbit/s" ? "%.2f" : "%.0f", v)
            printf "%-12s %-14s %10s %-7s %8s %9s %9s %5d\n", p, l, v, u, ratio, s, c, n }')
        echo "$line"
        if [ -n "$plot" ] && [ "$v" != nan ] && [ "$t" != nan ]; then
            awk -v p="$p" -v l="$(label "$r")" -v v="$v" -v t="$t" 'BEGIN { printf "%s %s %.4f\n", p, l, v / t }' \
                >>"$plot/programs.dat"
        fi
    done
done
echo "(medians of $reps; CPU: user+sys seconds during the measurement, server's whole process tree)"
if [ -n "$plot" ]; then
    "$top/scripts/bench-plot.sh" programs "$plot" || failed=1
fi
exit $failed
