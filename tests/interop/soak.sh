#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# soak.sh: repeated runs of xsock (this build, through xsock-run) against the
# Linux kernel's siw in one QEMU guest, with libiwarp's DEFAULT settings: no
# XSOCK_* variable (inherited ones are unset), no rerun, no retry.  Issue 14.
#
#   tests/interop/soak.sh [--runs N] [--rping-runs N] [--perftest-runs N]
#                         [--only REGEX] [--list] [--out DIR] [--keep-logs]
#                         [--no-install]
#
# Blocks (hc: xsock-run client on the host -> siw server in the guest; gc: siw
# client in the guest -> xsock-run server on the host):
#   rping-{hc,gc}-{c0,c1}    rping -V -C 20 -S 3000, CRC off (siw
#                            mpa_crc_required=0) / on (=1, xsock-run --crc);
#                            20 runs each
#   {write,read}_bw-{hc,gc}  ib_{write,read}_bw -R -s 65536 -n 200, CRC off;
#                            10 runs each
# --runs N sets both counts (a quick subset: --runs 3); --only runs the blocks
# whose name matches REGEX (grep -E).  A run passes when both sides exit 0
# (rping: and the client printed and verified all its pings).  Prints one
# line per run and a table per block (runs, passes, median/max seconds,
# perftest: median BW of the client's report over the passed runs); writes
# DIR/soak.md and keeps the logs of failed runs in DIR/failed/ (--keep-logs:
# of every run, in DIR/runs/) (default DIR: a temporary
# directory, removed when every run passed).  Exit 0 only if every run
# passed.  Needs XS_TOP_BUILDDIR (or a build in ./) and root.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bld=${XS_TOP_BUILDDIR:-$PWD}
xs_run=$bld/tools/xsock-run
# shellcheck source=tests/interop/lib.sh
. "$here/lib.sh"
rping_runs=20 pt_runs=10 only="" list=0 out="" prep=() keep_logs=0
# the work of one run
rping_count=20 rping_size=3000 pt_size=65536 pt_iters=200
while [ $# -gt 0 ]; do
    case $1 in
        --runs) rping_runs=${2:?}; pt_runs=$2; shift ;;
        --rping-runs) rping_runs=${2:?}; shift ;;
        --perftest-runs) pt_runs=${2:?}; shift ;;
        --only) only=${2:?}; shift ;;
        --list) list=1 ;;
        --out) out=${2:?}; shift ;;
        --no-install) prep+=(--no-install) ;;
        --keep-logs) keep_logs=1 ;;
        -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
        *) echo "soak: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

# name tool direction crc(0|1) runs
blocks=()
for dir in hc gc; do
    for crc in 0 1; do blocks+=("rping-$dir-c$crc rping $dir $crc $rping_runs"); done
done
for tool in write_bw read_bw; do
    for dir in hc gc; do blocks+=("$tool-$dir $tool $dir 0 $pt_runs"); done
done
sel=()
for b in "${blocks[@]}"; do
    if [ -n "$only" ] && ! echo "${b%% *}" | grep -qE "$only"; then continue; fi
    sel+=("$b")
done
if [ $list = 1 ]; then printf '%s\n' "${sel[@]}"; exit 0; fi
[ ${#sel[@]} -gt 0 ] || { echo "soak: no block matches $only" >&2; exit 2; }
[ -x "$xs_run" ] || { echo "soak: no $xs_run (set XS_TOP_BUILDDIR)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "SKIP: soak needs root (QEMU guest cache, apt)"; exit 77; }

# libiwarp's defaults: nothing of the caller's XSOCK_* reaches the runs
no_xsock_env
[ -z "$xs_unset" ] || echo "soak: unset $xs_unset (the soak runs libiwarp's defaults)"

"$here/guest-prepare.sh" "${prep[@]}" || { echo "soak: guest preparation failed" >&2; exit 1; }

keep=1
[ -n "$out" ] || { out=$(mktemp -d /tmp/xsock-soak.XXXXXX); keep=$keep_logs; }
mkdir -p "$out"; out=$(cd "$out" && pwd)
rm -rf "$out/failed"; mkdir -p "$out/failed"
runs=$out/runs
rm -rf "$runs"; mkdir -p "$runs"
g="$here/guest.sh"
name=soak-$$
guest_trap

total=0
for b in "${sel[@]}"; do total=$((total + ${b##* })); done
# guest ports 7174 (rping) and 18515 (perftest) forwarded; the guest's
# lifetime covers every run at its timeouts' worst (about 150 s)
hp_cm=$(free_port); hp_pt=$(free_port)
t_soak=$(now_s) load0=$(cut -d' ' -f1-3 /proc/loadavg)
boot=$("$g" start --name "$name" --fwd "$hp_cm:7174" --fwd "$hp_pt:18515" \
       --lifetime $((600 + 150 * total))) || { echo "soak: guest did not boot" >&2; exit 1; }
echo "soak: $boot"
gx() { "$g" exec --name "$name" --timeout "${GX_TIMEOUT:-60}" -- sh -c "$1"; }

# cmds TOOL -> srv, cli (@BIND, @ADDR, @PORT substituted per direction)
cmds() {
    case $1 in
        rping) srv="rping -s -a @BIND -p @PORT -C $rping_count -V -S $rping_size"
               cli="rping -c -a @ADDR -p @PORT -C $rping_count -V -v -S $rping_size" ;;
        *) srv="ib_$1 -R -F -p @PORT -s $pt_size -n $pt_iters"
           cli="ib_$1 -R -F -p @PORT -s $pt_size -n $pt_iters @ADDR" ;;
    esac
}

# rcword RC: what an exit status of timeout(1) or the harness's kill means
rcword() { case $1 in 124) echo " (timed out)" ;; 143) echo " (killed after the peer failed)" ;; 139) echo " (SIGSEGV)" ;; esac; }

# errlines LOG: the first lines of LOG that say what went wrong, else the
# last two lines of each side's output
errlines() {
    local e
    e=$(sed '/^## guest dmesg/,$d' "$1" | grep -v '^##' |
        grep -iE 'error|fail|mismatch|bad|refused|reset|timed out|segmentation|abort|unable|cannot|couldn' | head -n 4)
    if [ -n "$e" ]; then echo "$e"; return 0; fi
    local side
    for side in host guest; do
        e=$(sed -n "/^## $side output/,/^## [a-z]* \(output\|dmesg\)/p" "$1" | grep -v -e '^##' -e '^Terminated$' |
            grep . | tail -n 2 | paste -sd'/')
        echo "$side's last lines: ${e:-(none)}"
    done
}

# run_once BLOCK TOOL DIR CRC I -> r_ok r_note r_secs r_bw (the files of the
# run are $runs/BLOCK-I.{log,host,guest})
run_once() {
    local blk=$1 tool=$2 dir=$3 crc=$4 i=$5 xo=() t0 hrc grc job c s
    local base=$runs/$blk-$i log hf gf
    log=$base.log hf=$base.host gf=$base.guest
    r_ok=1 r_note="" r_bw="" r_err=""
    [ "$crc" = 1 ] && xo+=(--crc)
    cmds "$tool"
    : > "$log"; : > "$hf"; : > "$gf"
    gx "cd /sys/module/siw/parameters && echo $crc > mpa_crc_required && echo 2 > mpa_version &&
        echo 0 > peer_to_peer && dmesg -c > /dev/null" >> "$log" 2>&1 || { r_ok=0; r_note="siw parameters failed"; }
    t0=$(now_s)
    if [ "$dir" = hc ]; then
        local gport=7174 hp=$hp_cm
        [ "$tool" = rping ] || { gport=18515; hp=$hp_pt; }
        s=$(echo "$srv" | sed -e "s|@BIND|10.0.2.15|; s|@PORT|$gport|")
        c=$(echo "$cli" | sed -e "s|@ADDR|127.0.0.1|; s|@PORT|$hp|")
        echo "## guest server: $s" >> "$log"
        job=$("$g" bg --name "$name" -- sh -c "echo \$\$ > /tmp/server.pid; exec timeout 90 $s")
        gx "xs-wait-port $gport 20" >> "$log" 2>&1 || { r_ok=0; r_note="guest server did not listen"; }
        sleep 0.3   # rping and perftest servers listen before they are ready
        echo "## host client: xsock-run ${xo[*]} $c" >> "$log"
        hrc=0
        # shellcheck disable=SC2086 # $c: the command's words
        timeout 60 "$xs_run" "${xo[@]}" $c > "$hf" 2>&1 || hrc=$?
        # a server whose client gave up waits for the next one
        [ $hrc = 0 ] || gx 'sleep 3; kill $(cat /tmp/server.pid) 2>/dev/null; true' > /dev/null 2>&1
        grc=0; "$g" wait --name "$name" --timeout 60 "$job" > "$gf" 2>&1 || grc=$?
    else
        local hport; hport=$(free_port)
        s=$(echo "$srv" | sed -e "s|@BIND|127.0.0.1|; s|@PORT|$hport|")
        c=$(echo "$cli" | sed -e "s|@ADDR|10.0.2.2|; s|@PORT|$hport|")
        echo "## host server: xsock-run ${xo[*]} $s" >> "$log"
        # shellcheck disable=SC2086 # $s: the command's words
        timeout 90 "$xs_run" "${xo[@]}" $s > "$hf" 2>&1 &
        local spid=$!; hostpids+=("$spid")
        listening "$hport" || { r_ok=0; r_note="host server did not listen"; }
        sleep 0.3
        echo "## guest client: $c" >> "$log"
        grc=0; GX_TIMEOUT=70 gx "timeout 60 $c" > "$gf" 2>&1 || grc=$?
        [ $grc = 0 ] || { sleep 3; kill "$spid" 2>/dev/null; }
        hrc=0; wait "$spid" || hrc=$?
        hostpids=()   # one host server at a time
    fi
    r_secs=$(elapsed "$t0")
    { echo "## host rc $hrc, guest rc $grc, $r_secs s"
      echo "## host output"; cat "$hf"; echo "## guest output"; cat "$gf"; } >> "$log"
    [ $hrc = 0 ] && [ $grc = 0 ] ||
        { r_ok=0; r_note="${r_note:+$r_note; }host rc $hrc$(rcword $hrc), guest rc $grc$(rcword $grc)"; }
    local cf=$hf; [ "$dir" = gc ] && cf=$gf   # the client's output
    if [ "$tool" = rping ]; then
        local pings; pings=$(grep -c '^ping data' "$cf")
        [ "$pings" = "$rping_count" ] || { r_ok=0; r_note="${r_note:+$r_note; }$pings of $rping_count pings"; }
        grep -qi 'mismatch' "$hf" "$gf" && { r_ok=0; r_note="${r_note:+$r_note; }data mismatch"; }
    else
        # BW average [MB/sec], the 4th field of the client's result line
        r_bw=$(perftest_result "$pt_size" "$cf" | awk '{ print $4 }')
        [ -n "$r_bw" ] || { r_ok=0; r_note="${r_note:+$r_note; }no result line"; }
        # perftest reports 0 when its calibration of the CPU clock failed
        # ("Correlation coefficient r^2: ... < 0.9", frequent under TCG):
        # no figure, not a failure
        if [ "$r_bw" = 0.00 ] && grep -q 'Correlation coefficient' "$cf"; then
            r_bw="" r_note="${r_note:+$r_note; }no BW (perftest's clock calibration failed)"
        fi
    fi
    if [ $r_ok = 1 ]; then
        [ $keep_logs = 1 ] || rm -f "$log"
        rm -f "$hf" "$gf"
    else
        { echo "## guest dmesg"; gx dmesg 2>&1 | grep -v 'speed is unknown' | tail -n 40; } >> "$log"
        # a stuck guest process would hold the next run's port
        gx 'kill $(cat /tmp/server.pid) 2>/dev/null; true' > /dev/null 2>&1
        cp "$log" "$out/failed/"; [ $keep_logs = 1 ] || rm -f "$log"
        rm -f "$hf" "$gf"
        r_err=$(errlines "$out/failed/$blk-$i.log" | sed 's/^[[:space:]]*//; s/|/\//g' | paste -sd';' | cut -c1-400)
    fi
}

md=$out/soak.md
commit=$(git -C "$here" log -1 --format='%h %cd' --date=short 2>/dev/null || echo unknown)
{ echo "# soak: xsock against siw, libiwarp defaults"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit, $boot"
  echo
  echo "rping: \`-C $rping_count -V -S $rping_size\`; perftest: \`-R -F -s $pt_size -n $pt_iters\`;"
  echo "no XSOCK_* variable (CRC on: \`xsock-run --crc\`), no rerun, no retry."
  echo; } > "$md"
summary=() failures=() nfail=0 nruns=0
for b in "${sel[@]}"; do
    # shellcheck disable=SC2086
    set -- $b
    blk=$1 tool=$2 dir=$3 crc=$4 n=$5
    pass=0
    : > "$runs/$blk.secs"; : > "$runs/$blk.bw"
    for i in $(seq "$n"); do
        run_once "$blk" "$tool" "$dir" "$crc" "$i"
        nruns=$((nruns + 1))
        echo "$r_secs" >> "$runs/$blk.secs"
        if [ $r_ok = 1 ]; then
            [ -n "$r_bw" ] && echo "$r_bw" >> "$runs/$blk.bw"
            pass=$((pass + 1))
            printf 'soak: %-14s run %3d/%-3d PASS %6ss%s%s\n' "$blk" "$i" "$n" "$r_secs" "${r_bw:+  $r_bw MB/s}" "${r_note:+  $r_note}"
        else
            nfail=$((nfail + 1))
            printf 'soak: %-14s run %3d/%-3d FAIL %6ss  %s | %s\n' "$blk" "$i" "$n" "$r_secs" "$r_note" "$r_err"
            failures+=("| $blk | $i | $r_secs | $r_note | $r_err |")
        fi
    done
    read -r tmed tmax < <(stats < "$runs/$blk.secs")
    read -r bmed _ < <(stats < "$runs/$blk.bw")
    bcol=-
    [ "$tool" = rping ] || bcol="$bmed ($(wc -l < "$runs/$blk.bw") of $pass)"
    summary+=("| $blk | $n | $pass | $tmed | $tmax | $bcol |")
    echo "soak: $blk: $pass of $n passed, median ${tmed} s, max ${tmax} s$([ "$tool" = rping ] || [ "$bmed" = - ] || echo ", median BW $bmed MB/s")"
done
{ echo "| block | runs | passed | median s | max s | median BW MB/s (figures) |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${summary[@]}"
  echo
  echo "$((nruns - nfail)) of $nruns runs passed in $(elapsed "$t_soak") s (boot included); host load average"
  echo "$load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end ($(nproc) host CPUs)."
  if [ $nfail -gt 0 ]; then
      echo
      echo "Failed runs (logs: \`failed/BLOCK-RUN.log\`):"
      echo
      echo "| block | run | s | result | first error lines |"
      echo "|---|---|---|---|---|"
      printf '%s\n' "${failures[@]}"
  fi; } >> "$md"
echo
sed -n '/^| block | runs/,$p' "$md"
echo "soak: $((nruns - nfail)) of $nruns runs passed (summary: $md)"
[ $nfail = 0 ] && [ $keep = 0 ] && rm -rf "$out"
[ $nfail = 0 ] && [ $keep_logs = 0 ] && rm -rf "$runs"
[ $nfail = 0 ]
