#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Raw TCP against xsock on loopback (issue 3): scripts/bench.sh [BUILDDIR]
#
# Builds tools/xsock-bench if needed, runs every case XS_BENCH_REPS times
# (default 5), interleaving raw TCP, xsock and xsock with MPA CRC so that
# noise hits all three, and prints the medians with the ratios against raw
# TCP measured in the same run:
#   RDMA Write bandwidth, 64 KiB and 1 MiB writes    bar: xsock >= 0.8x TCP
#   Send/Recv 64 B one-way latency (RTT/2): a busy-polled CQ against TCP
#   busy-polling a nonblocking recv, completion channel events against a
#   blocking TCP recv                                  bar: xsock <= 2x TCP
# then the thread hand-off micro-benchmark.
#
# Environment: XS_BENCH_REPS (runs per case), XS_BENCH_MIB (MiB per
# bandwidth run, default 256), XS_BENCH_ITERS (round trips per latency run,
# default 20000), XS_BENCH_QUICK=1 (tiny counts: a smoke test of the data
# checks, the figures mean nothing), XS_BENCH_STRICT=1 (exit 1 when a bar is
# missed).  Exit status 1 when a run fails (its data check included).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bdir=${1:-$top/build}
bench=$bdir/tools/xsock-bench

if [ ! -x "$bench" ]; then
    "$top/scripts/build.sh" "$bdir" >/dev/null
    make -s -C "$bdir" tools/xsock-bench >/dev/null
fi

reps=${XS_BENCH_REPS:-5}
mib=${XS_BENCH_MIB:-256}
iters=${XS_BENCH_ITERS:-20000}
warm=1000
hoiters=20000
if [ "${XS_BENCH_QUICK:-0}" = 1 ]; then
    reps=1 mib=4 iters=200 warm=20 hoiters=200
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
res=$tmp/results

# run COLUMN CASE [env...] -- xsock-bench args: append "CASE COLUMN value p99"
run() {
    col=$1 case=$2
    shift 2
    if ! env "$@" >"$tmp/out" 2>"$tmp/err"; then
        echo "bench.sh: FAILED: $col $case: $*" >&2
        cat "$tmp/out" "$tmp/err" >&2
        exit 1
    fi
    awk -v c="$case" -v k="$col" -f "$top/scripts/bench-result.awk" "$tmp/out" >>"$res"
    grep -q '^RESULT ' "$tmp/out" || { echo "bench.sh: no result from $*" >&2; exit 1; }
}

plain="XSOCK_MPA_CRC=0"
crc="XSOCK_MPA_CRC=1"
b=$bench
echo "xsock-bench: $reps run(s) per case, $mib MiB per bandwidth run, $iters round trips per latency run"
i=0
while [ $i -lt "$reps" ]; do
    i=$((i + 1))
    for sz in 65536 1048576; do
        c=bw$sz
        run tcp $c $plain $b tcp-bw -s $sz -t $mib
        run xsock $c $plain $b rdma-bw -s $sz -t $mib
        run crc $c $crc $b rdma-bw -s $sz -t $mib
    done
    run tcp lat $plain $b tcp-lat -S -n $iters -w $warm
    run xsock lat $plain $b rdma-lat -n $iters -w $warm
    run crc lat $crc $b rdma-lat -n $iters -w $warm
    run tcp latev $plain $b tcp-lat -n $iters -w $warm
    run xsock latev $plain $b rdma-lat -e -n $iters -w $warm
    run crc latev $crc $b rdma-lat -e -n $iters -w $warm
    printf '.' >&2
done
echo >&2

# med CASE COLUMN FIELD: median over the runs (column 3, and the p99s)
. "$top/scripts/bench-lib.sh"

missed=0
line() {
    case=$1 label=$2 unit=$3 kind=$4
    t=$(med "$case" tcp 3)
    x=$(med "$case" xsock 3)
    y=$(med "$case" crc 3)
    out=$(awk -v t="$t" -v x="$x" -v y="$y" -v kind="$kind" -v label="$label" -v unit="$unit" 'BEGIN {
        rx = x / t; ry = y / t
        if (kind == "bw") { bx = rx >= 0.8 ? "PASS" : "MISS"; by = ry >= 0.8 ? "PASS" : "MISS"; bar = ">=0.8x" }
        else { bx = rx <= 2 ? "PASS" : "MISS"; by = ry <= 2 ? "PASS" : "MISS"; bar = "<=2x" }
        printf "%-26s %-5s %9.2f %9.2f %6.2fx %-6s %4s %9.2f %6.2fx %4s\n", label, unit, t, x, rx, bar, bx, y, ry, by
    }')
    echo "$out"
    case $out in *MISS*) missed=1 ;; esac
}

printf '\n%-26s %-5s %9s %9s %7s %-6s %4s %9s %7s %4s\n' case unit "raw TCP" xsock ratio bar "" "xsock+CRC" ratio ""
line bw65536 "RDMA Write bw 64 KiB" MB/s bw
line bw1048576 "RDMA Write bw 1 MiB" MB/s bw
line lat "Send/Recv 64 B, spin/poll" us lat
line latev "Send/Recv 64 B, blocking" us lat
printf '\np99 one-way latency (us): TCP %s / %s, xsock poll %s (CRC %s), xsock events %s (CRC %s)\n' \
    "$(med lat tcp 4)" "$(med latev tcp 4)" "$(med lat xsock 4)" "$(med lat crc 4)" \
    "$(med latev xsock 4)" "$(med latev crc 4)"

echo
echo "thread hand-off (one wake-up = half a ping-pong between two threads):"
"$bench" handoff -n $hoiters -w $warm | grep -v '^RESULT'

if [ "$missed" = 1 ] && [ "${XS_BENCH_STRICT:-0}" = 1 ]; then
    exit 1
fi
exit 0
