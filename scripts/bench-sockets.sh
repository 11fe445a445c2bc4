#!/bin/sh
# A plain sockets program against raw TCP on loopback (issue 5):
# scripts/bench-sockets.sh [BUILDDIR]
#
# Runs tools/xsock-sockbench three (four) ways, XS_BENCH_REPS times each
# (default 5), interleaved so that noise hits all of them:
#   tcp       raw TCP, nothing preloaded
#   preload   libiwarp + libxsock preloaded, no IWARP socket (fall-through)
#   iwarp     xsock-run --iwarp (both ends IWARP sockets)
#   iwarp+crc xsock-run --iwarp --crc
# and prints the medians with the ratios against raw TCP of the same run:
#   fall-through latency and bandwidth    goal <= 2% overhead, bar <= 5%
#   64 B ping-pong one-way latency        goal <= 1.2x, bar <= 2x
#   64 KiB-write stream bandwidth, CRC    goal >= 0.95x, bar >= 0.7x
#
# Environment: XS_BENCH_REPS, XS_BENCH_MIB (MiB per bandwidth run, default
# 256), XS_BENCH_ITERS (round trips per latency run, default 20000),
# XS_BENCH_QUICK=1 (tiny counts: a smoke test, the figures mean nothing),
# XS_BENCH_STRICT=1 (exit 1 when a first bar is missed).  Exit 1 when a run
# fails (its data check included).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bdir=${1:-$top/build}
bench=$bdir/tools/xsock-sockbench
run=$bdir/tools/xsock-run

if [ ! -x "$bench" ] || [ ! -x "$run" ]; then
    "$top/scripts/build.sh" "$bdir" >/dev/null
    make -s -C "$bdir" tools/xsock-sockbench tools/xsock-run >/dev/null
fi

reps=${XS_BENCH_REPS:-5}
mib=${XS_BENCH_MIB:-256}
iters=${XS_BENCH_ITERS:-20000}
warm=1000
if [ "${XS_BENCH_QUICK:-0}" = 1 ]; then
    reps=1 mib=4 iters=200 warm=20
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
res=$tmp/results
libs="$bdir/verbs/.libs/libiwarp.so.0 $bdir/libxsock/.libs/libxsock.so.0"

# one COLUMN CASE -- bench args: append "CASE COLUMN value p99"
one() {
    col=$1 case=$2
    shift 2
    case $col in
    tcp) set -- env XSOCK_IWARP= "$bench" "$@" ;;
    preload) set -- env XSOCK_IWARP= XSOCK_RULES= XSOCK_CONFIG=/dev/null \
        LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD }$libs" "$bench" "$@" ;;
    iwarp) set -- env XSOCK_MPA_CRC=0 "$run" --iwarp "$bench" "$@" ;;
    crc) set -- "$run" --iwarp --crc "$bench" "$@" ;;
    esac
    if ! timeout 300 "$@" >"$tmp/out" 2>"$tmp/err"; then
        echo "bench-sockets.sh: FAILED: $col $case: $*" >&2
        cat "$tmp/out" "$tmp/err" >&2
        exit 1
    fi
    awk -v c="$case" -v k="$col" -f "$top/scripts/bench-result.awk" "$tmp/out" >>"$res"
    grep -q '^RESULT ' "$tmp/out" || { echo "bench-sockets.sh: no result from $*" >&2; exit 1; }
}

echo "xsock-sockbench: $reps run(s) per case, $mib MiB per bandwidth run, $iters round trips per latency run"
i=0
while [ $i -lt "$reps" ]; do
    i=$((i + 1))
    for col in tcp preload iwarp crc; do
        one $col lat lat -n "$iters" -w $warm
        one $col bw bw -s 65536 -t "$mib"
    done
    printf '.' >&2
done
echo >&2

# med CASE COLUMN FIELD: median over the runs (column 3, and the p99s)
. "$top/scripts/bench-lib.sh"

missed=0
# row LABEL CASE COLUMN KIND(lat|bw|ftlat|ftbw)
row() {
    t=$(med "$2" tcp 3)
    x=$(med "$2" "$3" 3)
    out=$(awk -v t="$t" -v x="$x" -v kind="$4" -v label="$1" 'BEGIN {
        r = x / t
        if (kind == "lat") { bar = "<=2x (goal 1.2x)"; ok = r <= 2 }
        else if (kind == "bw") { bar = ">=0.7x (goal 0.95x)"; ok = r >= 0.7 }
        else if (kind == "ftlat") { bar = "<=1.05x (goal 1.02x)"; ok = r <= 1.05 }
        else { bar = ">=0.95x (goal 0.98x)"; ok = r >= 0.95 }
        printf "%-34s %10.2f %10.2f %7.3fx  %-20s %s\n", label, t, x, r, bar, ok ? "PASS" : "MISS"
    }')
    echo "$out"
    case $out in *MISS) missed=1 ;; esac
}

printf '\n%-34s %10s %10s %8s  %-20s\n' case "raw TCP" xsock ratio bar
row "fall-through 64 B latency (us)" lat preload ftlat
row "fall-through 64 KiB bw (MB/s)" bw preload ftbw
row "IWARP 64 B one-way latency (us)" lat iwarp lat
row "IWARP+CRC 64 B latency (us)" lat crc lat
row "IWARP 64 KiB bw (MB/s)" bw iwarp bw
row "IWARP+CRC 64 KiB bw (MB/s)" bw crc bw
printf '\np99 one-way latency (us): TCP %s, preload %s, IWARP %s, IWARP+CRC %s\n' \
    "$(med lat tcp 4)" "$(med lat preload 4)" "$(med lat iwarp 4)" "$(med lat crc 4)"

if [ "$missed" = 1 ] && [ "${XS_BENCH_STRICT:-0}" = 1 ]; then
    exit 1
fi
exit 0
