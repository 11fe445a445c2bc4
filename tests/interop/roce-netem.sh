#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# roce-netem.sh: out-of-order placement (XSOCK_ROCE_OOO) on the wire
# against the Linux kernel's rdma_rxe (issue 18 item 3).  The --rxe guest
# gets sch_netem on its eth1 (the host kernel has none), so that rxe's
# packets to the host arrive lost and reordered; rxe as client (perftest
# ib_write_bw without -R, ibv_rc_pingpong --chk) against xsock as server on
# the host (xsock-run, xsock_roce0), XSOCK_ROCE_OOO=1 and =0 interleaved,
# ROUNDS rounds, median goodput; then xsock as client against rxe as server
# under the same netem (rxe has no out-of-order placement: correctness
# only).  Prints a markdown table (condition | OOO on MB/s | OOO off MB/s |
# placements ahead | data ok) and exits 0 only if every run passed.
#
#   flock /tmp/xs-guest.lock tests/interop/roce-netem.sh [--rounds N] [--only REGEX] [--out DIR]
#
# /usr/sbin/tc: busybox has a tc without netem.  netem reorders only with
# a delay (the packets it does not send at once wait that long): the
# reordering rows add "delay 1ms".  Env as roce.sh: XS_TOP_BUILDDIR,
# XS_INTEROP_CACHE.  Root only.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/interop/lib.sh
. "$here/lib.sh"
bld=${XS_TOP_BUILDDIR:-$PWD}
xs_run=$bld/tools/xsock-run
xdev=xsock_roce0
rounds=3 only="" out=""
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) rounds=${2:?}; shift ;;
        --only) only=${2:?}; shift ;;
        --out) out=${2:?}; shift ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *) echo "roce-netem: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
[[ $rounds =~ ^[1-9][0-9]?$ ]] || { echo "roce-netem: --rounds 1..99" >&2; exit 2; }
conds=("reorder+loss|delay 1ms reorder 25% 50% loss 1%" "loss|loss 1%"
       "reorder|delay 1ms reorder 25% 50%")
[ "$(id -u)" = 0 ] || { echo "SKIP: roce-netem needs root (QEMU guest, tap device)"; exit 77; }
[ -x "$xs_run" ] || { echo "roce-netem: no $xs_run (set XS_TOP_BUILDDIR)" >&2; exit 2; }
timeout 20 "$xs_run" ibv_devices 2>/dev/null | grep -qw "$xdev" ||
    { echo "roce-netem: FAIL: $xs_run ibv_devices does not list $xdev (every build has it)"; exit 1; }
"$here/guest-prepare.sh" --no-install ||
    { echo "roce-netem: guest preparation failed" >&2; exit 1; }

keep=1
[ -n "$out" ] || { out=$(mktemp -d /tmp/xsock-roce-netem.XXXXXX); keep=0; }
mkdir -p "$out"; out=$(cd "$out" && pwd)
g="$here/guest.sh"
name=roce-netem-$$
guest_trap
boot=$("$g" start --name "$name" --rxe --share "$out" --lifetime 1800) ||
    { echo "roce-netem: guest did not boot" >&2; exit 1; }
echo "roce-netem: $boot"
gx() { "$g" exec --name "$name" --timeout "${GX_TIMEOUT:-120}" -- sh -c "$1"; }
gaddr=10.0.3.2 haddr=10.0.3.1 mtu=1024
gidx=$(gx "xs-rxe gid") || { echo "roce-netem: no RoCE v2 GID on rxe0" >&2; exit 1; }
hidx=$(timeout 20 "$xs_run" ibv_devinfo -d "$xdev" -v 2>/dev/null |
       awk -v a="::ffff:$haddr" '/GID\[/ && index($0, a) {
               gsub(/.*GID\[ */, ""); sub(/\].*/, ""); print; exit }')
[ -n "$hidx" ] || { echo "roce-netem: $xdev has no GID ::ffff:$haddr" >&2; exit 1; }
# shellcheck disable=SC2016 # expanded in the guest
gx 'for m in $(cat /etc/xs/modules.netem); do
        insmod /lib/modules/$(uname -r)/kernel/$m.ko 2>/dev/null; done
    /usr/sbin/tc qdisc add dev eth1 root netem limit 1000 && /usr/sbin/tc qdisc del dev eth1 root' \
    > "$out/netem.log" 2>&1 ||
    { echo "roce-netem: no netem in the guest: $(cat "$out/netem.log")" >&2; exit 1; }

# shellcheck disable=SC2317 # called through $tool
wbw() { echo "ib_write_bw -d $1 -x $2 -m $mtu -s 65536 -n 60 -t 8 -F -p $3 ${4:-}"; }
# shellcheck disable=SC2317 # called through $tool
pp() { echo "ibv_rc_pingpong -d $1 -g $2 -m $mtu -s 65536 -n 10 -c -p $3 ${4:-}"; }
median() { sort -n | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "?" }'; }

# gc TOOL OOO LOG -> rc; rxe client in the guest, xsock server on the host
gc() {
    local tool=$1 ooo=$2 log=$3 port hp grc=0 hrc=0 sc cc
    port=$(free_port)
    sc=$($tool "$xdev" "$hidx" "$port") cc=$($tool rxe0 "$gidx" "$port" "$haddr")
    # shellcheck disable=SC2086 # CMD: words
    XSOCK_ROCE_OOO=$ooo XSOCK_DEBUG=1 timeout 90 "$xs_run" $sc > "$log.xsock" 2>&1 &
    hp=$!; hostpids+=("$hp")
    listening "$port" ||
        { kill "$hp" 2>/dev/null; echo "xsock server did not listen" > "$log.rxe"; return 1; }
    gx "timeout 80 $cc > /host/$(basename "$log").rxe 2>&1" || grc=$?
    if [ $grc != 0 ]; then sleep 3; kill "$hp" 2>/dev/null; fi
    wait "$hp" || hrc=$?
    [ $grc = 0 ] && [ $hrc = 0 ]
}

# hc TOOL LOG -> rc; xsock client on the host, rxe server in the guest
hc() {
    local tool=$1 log=$2 port job grc=0 hrc=0 sc cc
    port=$(free_port)
    sc=$($tool rxe0 "$gidx" "$port") cc=$($tool "$xdev" "$hidx" "$port" "$gaddr")
    job=$("$g" bg --name "$name" -- sh -c "exec timeout 90 $sc > /host/$(basename "$log").rxe 2>&1")
    gx "xs-wait-port $port 20" > /dev/null 2>&1 || return 1
    # shellcheck disable=SC2086 # CMD: words
    timeout 80 "$xs_run" $cc > "$log.xsock" 2>&1 || hrc=$?
    [ $hrc = 0 ] || gx "sleep 2; pkill -f 'timeout 90 $sc' 2>/dev/null; true" > /dev/null 2>&1
    "$g" wait --name "$name" --timeout 90 "$job" > /dev/null 2>&1 || grc=$?
    [ $grc = 0 ] && [ $hrc = 0 ]
}

table=$out/roce-netem.md
{ echo "| condition (guest eth1 netem) | OOO on MB/s | OOO off MB/s |" \
       "placements ahead (on/off) | data ok |"
  echo "|---|---|---|---|---|"; } > "$table"
fail=0
for c in "${conds[@]}"; do
    cname=${c%%|*} qd=${c#*|}
    if [ -n "$only" ] && ! echo "$cname" | grep -qE -- "$only"; then continue; fi
    gx "/usr/sbin/tc qdisc replace dev eth1 root netem $qd" > /dev/null 2>&1 ||
        { echo "roce-netem: tc qdisc replace dev eth1 root netem $qd failed" >&2; exit 1; }
    declare -A bw=() ahead=()
    ok=yes notes=""
    for r in $(seq "$rounds"); do
        for ooo in 1 0; do
            l=$out/${cname//+/_}.r$r.ooo$ooo
            b="?"
            if gc wbw $ooo "$l.wbw"; then
                b=$(perftest_result 65536 "$l.wbw.rxe" | awk '{ print $(NF-1) }')
                bw[$ooo]+="$b "
            else
                ok=no; notes+=" wbw r$r ooo=$ooo failed;"
            fi
            n=$(sed -n 's/.* \([0-9]*\) Write packets placed ahead.*/\1/p' "$l.wbw.xsock" |
                awk '{ n += $1 } END { print n + 0 }')
            ahead[$ooo]=$(( ${ahead[$ooo]:-0} + n ))
            gc pp $ooo "$l.pp" || { ok=no; notes+=" pingpong --chk r$r ooo=$ooo failed;"; }
            echo "roce-netem: $cname round $r ooo=$ooo: write_bw $b MB/s," \
                "pingpong $(grep -h 'usec/iter' "$l.pp.rxe" 2>/dev/null)"
        done
    done
    # rxe as responder (xsock writes to it): correctness only
    hc wbw "$out/${cname//+/_}.hc.wbw" || { ok=no; notes+=" hc write_bw failed;"; }
    hc pp "$out/${cname//+/_}.hc.pp" || { ok=no; notes+=" hc pingpong --chk failed;"; }
    on=$(echo "${bw[1]:-}" | tr ' ' '\n' | grep . | median)
    off=$(echo "${bw[0]:-}" | tr ' ' '\n' | grep . | median)
    [ $ok = yes ] || fail=1
    echo "| $qd | $on | $off | ${ahead[1]}/${ahead[0]} | $ok${notes:+ ($notes)} |" >> "$table"
    echo "roce-netem: $cname: OOO on $on MB/s (${bw[1]:-}), off $off MB/s (${bw[0]:-})," \
        "ahead ${ahead[1]}/${ahead[0]}, data ok: $ok"
    unset bw ahead
done
gx "/usr/sbin/tc qdisc del dev eth1 root" > /dev/null 2>&1
cat "$table"
[ $fail = 0 ] && [ $keep = 0 ] && rm -rf "$out"
exit $fail
