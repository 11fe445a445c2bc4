#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# compare.sh: siw<->siw against xsock<->xsock, both inside the same QEMU
# guest (TCG, one boot), both ends of every run in the guest (client to
# 10.0.2.15).  Issue 14.
#
#   tests/interop/compare.sh [--rounds N] [--bw-iters N] [--lat-iters N]
#                            [--out DIR] [--no-install]
#
# Metrics: ib_write_bw -R -s 65536 -n BW_ITERS (default 3000; BW average,
# MB/s) and ib_write_lat -R -C -s 64 -n LAT_ITERS (default 1000; t_typical
# and t_avg), each from the client's report.  The latency is reported in
# TSC cycles (-C) and converted with the guest kernel's TSC rate
# (/proc/cpuinfo "cpu MHz"): perftest's own per-run calibration of the
# clock fails often under TCG ("Correlation coefficient r^2 < 0.9") and it
# then reports inf.  Runs interleave (per round: bw siw, bw xsock, lat siw,
# lat xsock), N rounds (default 9; about 5 minutes); the table has the
# medians and the ratio xsock/siw.
# xsock in the guest: this build's libiwarp.so.0 and the libraries it needs
# beyond glibc (ldd: liburing, libisal, libcrypto ...) are copied to
# DIR/guest-lib on the 9p share, from there to the guest's /tmp/xs, and
# preloaded as xsock-run does: LD_LIBRARY_PATH=/tmp/xs
# LD_PRELOAD=/tmp/xs/libiwarp.so.0 (xsock-run itself names the host
# build's path).  libiwarp's defaults: no XSOCK_* variable.
# A run that fails or has no figure (ib_write_bw reports 0 when that
# calibration fails) is repeated, at most 4 attempts per measurement; the
# table counts those attempts.  Writes DIR/compare.md (default DIR: a
# temporary directory, kept).  Needs XS_TOP_BUILDDIR (or a build in ./) and
# root.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bld=${XS_TOP_BUILDDIR:-$PWD}
# shellcheck source=tests/interop/lib.sh
. "$here/lib.sh"
rounds=9 bw_iters=3000 lat_iters=1000 out="" prep=()
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) rounds=${2:?}; shift ;;
        --bw-iters) bw_iters=${2:?}; shift ;;
        --lat-iters) lat_iters=${2:?}; shift ;;
        --out) out=${2:?}; shift ;;
        --no-install) prep+=(--no-install) ;;
        -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
        *) echo "compare: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
lib=$bld/verbs/.libs/libiwarp.so.0
[ -e "$lib" ] || { echo "compare: no $lib (set XS_TOP_BUILDDIR)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "SKIP: compare needs root (QEMU guest cache, apt)"; exit 77; }
no_xsock_env
[ -z "$xs_unset" ] || echo "compare: unset $xs_unset (libiwarp's defaults)"

"$here/guest-prepare.sh" "${prep[@]}" || { echo "compare: guest preparation failed" >&2; exit 1; }

[ -n "$out" ] || out=$(mktemp -d /tmp/xsock-compare.XXXXXX)
mkdir -p "$out"; out=$(cd "$out" && pwd)
chmod 0777 "$out"
# libiwarp and what it loads, glibc excepted (the guest has the host's)
rm -rf "$out/guest-lib"; mkdir -p "$out/guest-lib"
cp -L "$lib" "$out/guest-lib/libiwarp.so.0"
for l in $(ldd "$lib" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'); do
    case ${l##*/} in libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*) continue ;; esac
    cp -L "$l" "$out/guest-lib/"
done
echo "compare: guest-lib: $(cd "$out/guest-lib" && echo *)"

g="$here/guest.sh"
name=compare-$$
cleanup() {
    "$g" stop --name "$name"
    rm -rf "${XS_INTEROP_CACHE:-/var/cache/xsock-interop}/run/$name"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
boot=$("$g" start --name "$name" --share "$out" --lifetime $((900 + 300 * rounds))) ||
    { echo "compare: guest did not boot" >&2; exit 1; }
echo "compare: $boot"
gx() { "$g" exec --name "$name" --timeout "${GX_TIMEOUT:-200}" -- sh -c "$1"; }
gx 'mkdir -p /tmp/xs && cp /host/guest-lib/* /tmp/xs/' || { echo "compare: cannot copy guest-lib" >&2; exit 1; }
xs_env="env LD_LIBRARY_PATH=/tmp/xs LD_PRELOAD=/tmp/xs/libiwarp.so.0"
gx "$xs_env ibv_devices" > "$out/xs-devices.txt" 2>&1
echo "compare: xsock in the guest: $(grep -v -e '^ *device' -e '^ *---' "$out/xs-devices.txt" | awk '{print $1}' | tr '\n' ' ')"
# the guest kernel's TSC rate, for ib_write_lat -C's cycles
mhz=$(gx "awk -F': *' '/^cpu MHz/ { print \$2; exit }' /proc/cpuinfo")
[[ $mhz =~ ^[0-9.]+$ ]] || { echo "compare: no cpu MHz in the guest ($mhz)" >&2; exit 1; }
echo "compare: guest TSC $mhz MHz"
# Warm-up, as in matrix.sh: siw's cold accept code under TCG
gx 'rping -s -a 10.0.2.15 -p 7000 -C 1 >/dev/null 2>&1 & xs-wait-port 7000 10 &&
    timeout 20 rping -c -a 10.0.2.15 -p 7000 -C 1 >/dev/null 2>&1; wait' > /dev/null 2>&1 || true

port=18600
# measure STACK(siw|xsock) TOOL(bw|lat) K -> sets m_vals ("V1 [V2]") or ""
# (one attempt; its log in $out/runs/STACK-TOOL-K.log)
measure() {
    local stack=$1 tool=$2 k=$3 pre="" args log rc
    [ "$stack" = xsock ] && pre=$xs_env
    case $tool in
        bw) args="ib_write_bw -R -F -s 65536 -n $bw_iters" ;;
        lat) args="ib_write_lat -R -F -C -s 64 -n $lat_iters" ;;
    esac
    port=$((port + 1))
    log=$out/runs/$stack-$tool-$k.log
    # server and client in one guest job: server in the background, the
    # client once it listens, then the server's exit status
    rc=0
    gx "$pre $args -p $port > /tmp/server.out 2>&1 & sp=\$!
        xs-wait-port $port 20 || echo 'server did not listen'
        sleep 0.3
        timeout 150 $pre $args -p $port 10.0.2.15; crc=\$?
        timeout 30 sh -c \"while kill -0 \$sp 2>/dev/null; do sleep 0.2; done\" || kill \$sp
        wait \$sp; src=\$?
        echo '## server'; cat /tmp/server.out
        echo \"## client rc \$crc, server rc \$src\"; [ \$crc = 0 ] && [ \$src = 0 ]" > "$log" 2>&1 || rc=$?
    m_vals=""
    [ $rc = 0 ] || return 0
    local line; line=$(awk -v s="$([ "$tool" = bw ] && echo 65536 || echo 64)" \
        '/^## server/ { exit } $1 == s && $2 ~ /^[0-9]+$/ && NF >= 4 { print; exit }' "$log")
    case $tool in
        bw) m_vals=$(echo "$line" | awk '$4 ~ /^[0-9.]+$/ && $4 + 0 > 0 { print $4 }') ;;
        lat) m_vals=$(echo "$line" | awk -v mhz="$mhz" '$5 ~ /^[0-9.]+$/ && $6 ~ /^[0-9.]+$/ && $5 + 0 > 0 {
                 printf "%.2f %.2f\n", $5 / mhz, $6 / mhz }') ;;
    esac
}

mkdir -p "$out/runs"
: > "$out/values"
t0=$(now_s)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A tries=() fails=()
for r in $(seq "$rounds"); do
    for tool in bw lat; do
        for stack in siw xsock; do
            a=0
            while [ $a -lt 4 ]; do
                a=$((a + 1))
                tries[$stack-$tool]=$(( ${tries[$stack-$tool]:-0} + 1 ))
                measure "$stack" "$tool" "$r.$a"
                [ -n "$m_vals" ] && break
                fails[$stack-$tool]=$(( ${fails[$stack-$tool]:-0} + 1 ))
                echo "compare: round $r $tool $stack attempt $a: no figure ($(grep -m1 -iE 'error|fail|bad|refused|Correlation|rc [1-9]' "$out/runs/$stack-$tool-$r.$a.log" | sed 's/^ *//'))"
            done
            [ -n "$m_vals" ] || continue
            echo "$stack $tool $m_vals" >> "$out/values"
            printf 'compare: round %d %-3s %-5s %s\n' "$r" "$tool" "$stack" "$m_vals"
        done
    done
done
secs=$(elapsed "$t0")

med() { awk -v s="$1" -v t="$2" -v f="$3" '$1 == s && $2 == t { print $f }' "$out/values" | stats | cut -d' ' -f1; }
vals() { awk -v s="$1" -v t="$2" -v f="$3" '$1 == s && $2 == t { printf "%s%s", sep, $f; sep = " " }' "$out/values"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", b / a; else print "-" }'; }
row() { # row LABEL TOOL FIELD
    local s x
    s=$(med siw "$2" "$3"); x=$(med xsock "$2" "$3")
    echo "| $1 | $s ($(vals siw "$2" "$3")) | $x ($(vals xsock "$2" "$3")) | $(ratio "$s" "$x") |"
}
{ echo "| metric | siw<->siw | xsock<->xsock | ratio xsock/siw |"
  echo "|---|---|---|---|"
  row "ib_write_bw -s 65536 -n $bw_iters, BW average MB/s" bw 3
  row "ib_write_lat -s 64 -n $lat_iters, t_typical usec" lat 3
  row "ib_write_lat -s 64 -n $lat_iters, t_avg usec" lat 4
  echo
  echo "Medians of $rounds rounds (each run's figure in parentheses), $(date -u '+%Y-%m-%d'), $boot,"
  echo "latency: cycles (-C) / guest TSC $mhz MHz,"
  echo "commit $(git -C "$here" log -1 --format=%h 2>/dev/null), $secs s of runs, host load average $load0 at the"
  echo "start, $(cut -d' ' -f1-3 /proc/loadavg) at the end ($(nproc) host CPUs)."
  echo "Attempts without a figure (failed, or perftest's clock calibration failed):"
  for k in siw-bw xsock-bw siw-lat xsock-lat; do echo "$k ${fails[$k]:-0} of ${tries[$k]:-0};"; done | paste -sd' '
} > "$out/compare.md"
echo; cat "$out/compare.md"
echo "compare: logs in $out/runs, table in $out/compare.md"
