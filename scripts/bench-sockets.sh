#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# A plain sockets program against raw TCP on loopback (issue 5):
# scripts/bench-sockets.sh [--plot DIR] [BUILDDIR]
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
# then the CPU each column used (user+sys s of the receiving and the sending
# thread, the whole process, and per GB or per round trip): a row limited by
# CPU shows there.  The timed bandwidth runs check the data on a sample
# (every write's sequence stamp, every octet of one read in 16); one run per
# column before them checks every octet (-c full), so checking never sets
# the pace.
#
# --plot DIR: instead, sweep the write size 64 B .. 4 MiB (powers of 4) for
# tcp, iwarp and iwarp+crc, and 64 B latency percentiles (p50/p90/p99/p99.9
# of 50000 round trips), medians of XS_BENCH_REPS (default 3) interleaved
# runs; writes DIR/sockets-bw.dat, DIR/sockets-lat.dat and, through
# scripts/bench-plot.sh (gnuplot), DIR/sockets-bw.png, DIR/sockets-lat.png.
#
# Environment: XS_BENCH_REPS, XS_BENCH_MIB (MiB per bandwidth run, default
# 256), XS_BENCH_ITERS (round trips per latency run, default 20000),
# XS_BENCH_QUICK=1 (tiny counts: a smoke test, the figures mean nothing),
# XS_BENCH_STRICT=1 (exit 1 when a first bar is missed).  Exit 1 when a run
# fails (its data check included).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
plot=
while [ $# -gt 0 ]; do
    case $1 in
    --plot) [ $# -ge 2 ] || { echo "bench-sockets.sh: --plot needs a directory" >&2; exit 2; }
        plot=$2; shift 2 ;;
    --plot=*) plot=${1#--plot=}; shift ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench-sockets.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
    esac
done
bdir=${1:-$top/build}
bench=$bdir/tools/xsock-sockbench
run=$bdir/tools/xsock-run

if [ ! -x "$bench" ] || [ ! -x "$run" ]; then
    "$top/scripts/build.sh" "$bdir" >/dev/null
    make -s -C "$bdir" tools/xsock-sockbench tools/xsock-run >/dev/null
fi

reps=${XS_BENCH_REPS:-5}
[ -n "$plot" ] && reps=${XS_BENCH_REPS:-3}
mib=${XS_BENCH_MIB:-256}
iters=${XS_BENCH_ITERS:-20000}
[ -n "$plot" ] && iters=${XS_BENCH_ITERS:-50000}
warm=1000
chkmib=64
if [ "${XS_BENCH_QUICK:-0}" = 1 ]; then
    reps=1 mib=4 iters=200 warm=20 chkmib=4
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
res=$tmp/results
cpu=$tmp/cpu
: >"$res"; : >"$cpu"
libs="$bdir/verbs/.libs/libiwarp.so.0 $bdir/libxsock/.libs/libxsock.so.0"

# one COLUMN CASE -- bench args: append "CASE COLUMN value p99" to $res,
# "CASE COLUMN srv cli all value p50 p90 p99 p999" to $cpu
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
    awk -v c="$case" -v k="$col" '/^RESULT / {
        for (i = 3; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        v = ("bw_MBps" in f) ? f["bw_MBps"] : f["lat_us"]
        print c, k, f["cpu_srv_s"], f["cpu_cli_s"], f["cpu_all_s"], v,
            f["p50_us"], f["p90_us"], f["p99_us"], f["p999_us"] }' "$tmp/out" >>"$cpu"
}

. "$top/scripts/bench-lib.sh"
# medc CASE COLUMN FIELD: the median of FIELD of $cpu
medc() { med_in "$cpu" "$@"; }

if [ -n "$plot" ]; then
    mkdir -p "$plot"
    sizes="64 256 1024 4096 16384 65536 262144 1048576 4194304"
    echo "xsock-sockbench sweep: $reps run(s) per point, up to $mib MiB per bandwidth run, $iters round trips per latency run"
    i=0
    while [ $i -lt "$reps" ]; do
        i=$((i + 1))
        for sz in $sizes; do
            # small writes are slow: fewer MiB keeps a point under ~2 s
            m=$mib
            [ "$sz" -le 4096 ] && [ "$m" -gt 64 ] && m=64
            [ "$sz" -le 256 ] && [ "$m" -gt 8 ] && m=8
            [ $((m * 1048576 % sz)) = 0 ] || m=$(( (m * 1048576 / sz + 1) * sz / 1048576 ))
            for col in tcp iwarp crc; do
                one $col "bw$sz" bw -s "$sz" -t "$m"
            done
        done
        for col in tcp iwarp crc; do
            one $col lat lat -n "$iters" -w $warm
        done
        printf '.' >&2
    done
    echo >&2
    {
        echo "# write_size tcp_MBps iwarp_MBps crc_MBps (medians of $reps)"
        for sz in $sizes; do
            echo "$sz $(medc "bw$sz" tcp 6) $(medc "bw$sz" iwarp 6) $(medc "bw$sz" crc 6)"
        done
    } >"$plot/sockets-bw.dat"
    {
        echo "# percentile tcp_us iwarp_us crc_us (64 B one-way, medians of $reps)"
        n=7
        for p in p50 p90 p99 p99.9; do
            echo "$p $(medc lat tcp $n) $(medc lat iwarp $n) $(medc lat crc $n)"
            n=$((n + 1))
        done
    } >"$plot/sockets-lat.dat"
    printf '\n%-12s %10s %10s %10s   (MB/s)\n' "write size" tcp iwarp iwarp+crc
    grep -v '^#' "$plot/sockets-bw.dat" | awk '{ printf "%-12s %10s %10s %10s\n", $1, $2, $3, $4 }'
    printf '\n%-12s %10s %10s %10s   (us, 64 B one-way)\n' percentile tcp iwarp iwarp+crc
    grep -v '^#' "$plot/sockets-lat.dat" | awk '{ printf "%-12s %10s %10s %10s\n", $1, $2, $3, $4 }'
    "$top/scripts/bench-plot.sh" sockets "$plot"
    exit 0
fi

echo "xsock-sockbench: $reps run(s) per case, $mib MiB per bandwidth run, $iters round trips per latency run"
# the checked runs: every octet compared, outside the timed ones
for col in tcp preload iwarp crc; do
    one $col chk bw -s 65536 -t $chkmib -c full
done
echo "full data check ($chkmib MiB, every octet): passed for tcp, preload, iwarp, iwarp+crc"
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

# med CASE COLUMN FIELD (bench-lib.sh): column 3, and the p99s

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

# the CPU behind each figure: a row whose process used about 2 CPU-seconds a
# second (2 cores) is limited by CPU, not by the stack's waiting
printf '\n%-22s %10s %9s %9s %9s %12s\n' "CPU (user+sys, median)" figure "srv s" "cli s" "all s" "per unit"
for c in bw lat; do
    for col in tcp preload iwarp crc; do
        v=$(medc $c $col 6); s=$(medc $c $col 3); cl=$(medc $c $col 4); a=$(medc $c $col 5)
        lab=$col; [ $col = crc ] && lab=iwarp+crc
        if [ $c = bw ]; then
            awk -v l="$lab" -v v="$v" -v s="$s" -v c="$cl" -v a="$a" -v m="$mib" 'BEGIN {
                printf "%-22s %5.0f MB/s %9.3f %9.3f %9.3f %7.2f s/GB\n", "64 KiB bw " l, v, s, c, a, a / (m * 1048576 / 1e9) }'
        else
            awk -v l="$lab" -v v="$v" -v s="$s" -v c="$cl" -v a="$a" -v n=$((iters + warm)) 'BEGIN {
                printf "%-22s %7.2f us %9.3f %9.3f %9.3f %7.2f us/RT\n", "64 B lat " l, v, s, c, a, a / n * 1e6 }'
        fi
    done
done

if [ "$missed" = 1 ] && [ "${XS_BENCH_STRICT:-0}" = 1 ]; then
    exit 1
fi
exit 0
