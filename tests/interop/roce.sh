#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# roce.sh: the RoCE v2 interop cells (issue 17).  xsock (this build's
# libiwarp through xsock-run, device xsock_roce0) on the host against the
# Linux kernel's rdma_rxe on the guest's tap NIC (guest.sh --rxe), both
# directions, no CM: the programs exchange their QP data over TCP through
# the tap too.  Every cell is captured on the host tap and decoded by
# tshark's InfiniBand dissector (RoCE v2 on UDP 4791, "RRoCE"); every ICRC
# is recomputed by tests/vectors/roce/pcap2vec.py.
# The *-cm-* cells (issue 18) connect through rdma_cm (IB CM MADs on QP 1):
# rping, ucmatose, perftest -R, rstream, iw-errpeer --roce, and rdma_cm
# programs no issue named (rdma_server/rdma_client, rdma_xserver/
# rdma_xclient, cmtime, rcopy); the xsock half runs under xsock-run --roce
# (--iwarp --roce for rstream -T s); each cell's note counts the CM MADs
# per sender and type.  --only -cm- selects them.
#
#   tests/interop/roce.sh [--only REGEX] [--list] [--out DIR] [--soak]
#                         [--loopback] [--no-install]
#
# --soak adds the slow cells (more iterations, 256 KiB and 1 MiB messages,
# rstream 1 MiB).
# --loopback runs the xsock halves in the guest on rxe0 instead (rxe's own
# loopback, no packet on the tap): it checks the harness and every
# guest-side command line without xsock_roce0.  Without it the cells need
# xsock_roce0 in this build; when xsock-run ibv_devices does not list it
# (crashed, hung or no such device) the script fails (exit 1).  Not root,
# it prints "SKIP: roce needs root ..." and exits 77.  Env: XS_TOP_BUILDDIR
# (or a build in ./), XS_ROCE_DEV (default xsock_roce0), XS_ROCE_RUN (what
# runs the xsock halves, default the build's tools/xsock-run).  Prints one
# line per cell and a table (cell | result | note) to DIR/roce.md; exit 0
# only if every cell passed.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/interop/lib.sh
. "$here/lib.sh"
top=$(cd "$here/../.." && pwd)
bld=${XS_TOP_BUILDDIR:-$PWD}
# XS_ROCE_RUN: another runner for the xsock halves (tests of this script)
xs_run=${XS_ROCE_RUN:-$bld/tools/xsock-run}
xdev=${XS_ROCE_DEV:-xsock_roce0}
only="" list=0 out="" soak=0 loop=0 prep=()
while [ $# -gt 0 ]; do
    case $1 in
        --only) only=${2:?}; shift ;;
        --list) list=1 ;;
        --out) out=${2:?}; shift ;;
        --soak) soak=1 ;;
        --loopback) loop=1 ;;
        --no-install) prep+=(--no-install) ;;
        -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
        *) echo "roce: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

# ---- the cells ---------------------------------------------------------------
# name  direction(hc: xsock host client -> rxe guest server | gc: rxe guest
# client -> xsock host server)  tool  sizes
# ibv_rc_pingpong: one cell per size (the MTU edges: 1024 = one packet,
# 1025 = First + Last); perftest: one cell per tool, its sizes in turn.
cells=()
pp_sizes="1 64 1000 1024 1025 4096 65536"
pt_sizes="64 1024 4000 65536"
[ $soak = 1 ] && { pp_sizes+=" 262144 1048576"; pt_sizes+=" 1048576"; }
for dir in hc gc; do
    for s in $pp_sizes; do cells+=("$dir-pp-$s $dir pingpong $s"); done
    for tool in send_bw write_bw read_bw write_lat; do
        cells+=("$dir-$tool $dir $tool ${pt_sizes// /,}")
    done
    cells+=("$dir-atomic_bw $dir atomic_bw 8")
done
# rdma_cm over RoCE (issue 18): DIR-cm-TOOL, the tool cm_TOOL; the sizes of
# perftest's atomic cell are its -A operations
cm_rping="23 64 1024 4096 65535" cm_uc="100 4000" cm_pt="64 65536" cm_rs="64 4096 65536"
# cmtime: connections at once; rcopy: the file's size
[ $soak = 1 ] && cm_rs+=" 1048576"
for dir in hc gc; do
    cells+=("$dir-cm-rping $dir cm_rping ${cm_rping// /,}" "$dir-cm-ucmatose $dir cm_ucmatose ${cm_uc// /,}")
    for tool in send_bw write_bw read_bw write_lat; do
        cells+=("$dir-cm-$tool $dir cm_$tool ${cm_pt// /,}")
    done
    cells+=("$dir-cm-atomic_bw $dir cm_atomic_bw FETCH_AND_ADD,CMP_AND_SWAP"
            "$dir-cm-rstream $dir cm_rstream ${cm_rs// /,}" "$dir-cm-errpeer $dir cm_errpeer 0"
            "$dir-cm-rdma_server $dir cm_rdma_server 0" "$dir-cm-rdma_xserver $dir cm_rdma_xserver 0"
            "$dir-cm-cmtime $dir cm_cmtime 20" "$dir-cm-rcopy $dir cm_rcopy 3145728")
done
# port 4791 shared: two xsock processes on the host at once, each with its
# own pingpong against its own rxe server (docs/interop.md, RoCE)
cells+=("hc-pp2-4096 hc pingpong2 4096")

if [ $list = 1 ]; then printf '%s\n' "${cells[@]}" | cut -d' ' -f1; exit 0; fi
[ "$(id -u)" = 0 ] || { echo "SKIP: roce needs root (QEMU guest, tap device)"; exit 77; }
if [ $loop = 0 ]; then
    [ -x "$xs_run" ] || { echo "roce: no $xs_run (set XS_TOP_BUILDDIR)" >&2; exit 2; }
    # every build has xsock_roce0: a listing without it (a crash, a hang,
    # a missing device) is the stack's failure, not a reason to skip
    devs=$(timeout 20 "$xs_run" ibv_devices 2>&1); drc=$?
    if [ $drc != 0 ] || ! printf '%s\n' "$devs" | grep -qw "$xdev"; then
        why="exit $drc"; [ $drc = 124 ] && why="timed out after 20 s"
        echo "roce: FAIL: $xs_run ibv_devices ($why) does not list $xdev:"
        printf '%s\n' "$devs" | tail -20
        exit 1
    fi
fi

"$here/guest-prepare.sh" "${prep[@]}" || { echo "roce: guest preparation failed" >&2; exit 1; }
for t in tshark tcpdump python3; do
    command -v $t > /dev/null || { echo "roce: $t missing" >&2; exit 1; }
done

keep=1
[ -n "$out" ] || { out=$(mktemp -d /tmp/xsock-roce.XXXXXX); keep=0; }
mkdir -p "$out"; out=$(cd "$out" && pwd)
g="$here/guest.sh"
name=roce-$$
guest_trap
boot=$("$g" start --name "$name" --rxe --share "$out" --lifetime 3000) ||
    { echo "roce: guest did not boot" >&2; exit 1; }
echo "roce: $boot"
gx() { "$g" exec --name "$name" --timeout "${GX_TIMEOUT:-90}" -- sh -c "$1"; }
# the rdma_cm error-path peer (iw-errpeer --roce), built against rdma-core
# for the guest (and the --loopback host half) as matrix.sh does
if printf '%s\n' "${cells[@]}" | cut -d' ' -f1 | grep -E -- "${only:-.}" | grep -q -- '-cm-errpeer'; then
    gcc -O2 -Wall -Wextra -o "$out/iw-errpeer" "$here/iw-errpeer.c" -libverbs -lrdmacm ||
        { echo "roce: cannot build iw-errpeer" >&2; exit 1; }
fi
tap=$("$g" tapname --name "$name")
gaddr=10.0.3.2 haddr=10.0.3.1
# rxe0's RoCE v2 GID of 10.0.3.2: the index depends on the order the
# guest's addresses came up in (the link-local one first): ask
gidx=$(gx "xs-rxe gid") || { echo "roce: no RoCE v2 GID for $gaddr on rxe0" >&2; exit 1; }
gmtu=$(gx "xs-rxe mtu")
echo "roce: rxe0 GID index $gidx (::ffff:$gaddr), active MTU $gmtu"
if [ $loop = 1 ]; then
    hidx=$gidx hdev=rxe0 haddr=$gaddr
    echo "roce: --loopback: the xsock halves run in the guest on rxe0 (no packet on the tap)"
else
    hdev=$xdev
    # xsock's GID of 10.0.3.1 as ibv_devinfo -v shows it ("GID[  3]: ::ffff:10.0.3.1, RoCE v2")
    hidx=$(timeout 20 "$xs_run" ibv_devinfo -d "$xdev" -v 2>/dev/null |
           awk -v a="::ffff:$haddr" '/GID\[/ && (index($0, a ",") || substr($0, length($0) - length(a) + 1) == a) {
                   gsub(/.*GID\[ */, ""); sub(/\].*/, ""); print; exit }')
    [ -n "$hidx" ] || { echo "roce: $xdev has no GID ::ffff:$haddr (ibv_devinfo -d $xdev -v)" >&2; exit 1; }
    echo "roce: $xdev GID index $hidx (::ffff:$haddr)"
fi

# Both ends use a path MTU of 1024: rxe's active MTU for the 1500-byte tap
# (perftest would otherwise take each port's own active MTU).
mtu=1024
# pick SERVER CLIENT: the command line of cmd_of's role
pick() { if [ "$role" = srv ]; then echo "$1"; else echo "$2"; fi; }
# cmd_of TOOL SIZE SIDE(g|h) ROLE(srv|cli) PORT -> the command line
cmd_of() {
    local tool=$1 size=$2 side=$3 role=$4 port=$5 dev idx peer n  # $6: iterations
    if [ "$side" = g ]; then dev=rxe0 idx=$gidx peer=$haddr; else dev=$hdev idx=$hidx peer=$gaddr; fi
    [ $loop = 1 ] && peer=$gaddr
    [ "$role" = srv ] && peer=""
    # bind: the side's own address (rdma_cm servers and rstream bind to it)
    local bind=$gaddr
    [ "$side" = h ] && bind=$haddr
    case $tool in
        cm_rping)
            n=10; [ "$size" -ge 65535 ] && n=4
            [ $soak = 1 ] && n=$((n * 10))
            # -V: the client verifies what it reads back; -v: one line a ping
            pick "rping -s -a $bind -p $port -C $n -V -S $size" \
                 "rping -c -a $peer -p $port -C $n -V -v -S $size" ;;
        cm_ucmatose)
            pick "ucmatose -b $bind -p $port -c 10 -C 20 -S $size" \
                 "ucmatose -s $peer -p $port -c 10 -C 20 -S $size" ;;
        cm_rstream)
            # counts as matrix.sh's; -T v: both sides verify.  The xsock half
            # is the plain-sockets program (-T s, carried by libxsock: the
            # runner adds --iwarp); rsockets' own needs a 16 MiB ring (-B,
            # matrix.sh).  --loopback: rsockets on both ends
            n=100; [ "$size" -ge 4096 ] && n=50; [ "$size" -ge 65536 ] && n=20; [ "$size" -ge 1048576 ] && n=4
            local mode="-B 8388608"
            [ "$side" = h ] && [ $loop = 0 ] && mode="-T s"
            pick "rstream -b $bind -p $port -S $size -C $n -T v $mode" \
                 "rstream -s $peer -p $port -S $size -C $n -T v $mode" ;;
        cm_rdma_server)
            # librdmacm's synchronous calls (rdma_create_ep, rdma_get_request,
            # rdma_post_send/recv): one message each way
            pick "rdma_server -s $bind -p $port" \
                 "rdma_client -s $peer -p $port" ;;
        cm_rdma_xserver)
            # the same with -c r (RC; XRC, its other mode, is not carried)
            pick "rdma_xserver -c r -p $port" \
                 "rdma_xclient -c r -s $peer -p $port" ;;
        cm_cmtime)
            # SIZE connections set up at once, then torn down; its server
            # never exits (the cell stops it)
            pick "cmtime -b $bind -p $port -c $size" \
                 "cmtime -s $peer -p $port -c $size" ;;
        cm_rcopy)
            # rsockets' file copy: the server maps the destination (the
            # guest's /tmp: its /host share cannot be mapped shared) and
            # never exits; the source is the cell's random file
            local src=$out/rc.src dst=/tmp/rc.dst
            { [ "$side" = g ] || [ $loop = 1 ]; } && src=/host/rc.src
            [ "$side" = g ] && [ $loop = 0 ] && dst=$out/rc.dst
            pick "rcopy -p $port" \
                 "rcopy $src $peer:$dst -p $port" ;;
        cm_errpeer)
            local ep=/host/iw-errpeer
            [ "$side" = h ] && [ $loop = 0 ] && ep=$out/iw-errpeer
            pick "$ep --roce --server -a $bind -p $port" \
                 "$ep --roce --client -a $peer -p $port" ;;
        cm_*)
            # perftest -R: the connection by rdma_cm; -d and -x as without
            n=20; [ "$size" = 65536 ] && n=8
            [ $soak = 1 ] && n=$((n * 10))
            local t=${tool#cm_} sz="-s $size"
            [ "$t" = atomic_bw ] && sz="-A $size"
            echo "ib_$t -R -d $dev -x $idx -m $mtu -n $n -p $port -F $sz $([ "${t#*_}" = bw ] && echo "-t 8") $peer" ;;
        pingpong)
            n=${6:-10}; [ "$size" -ge 65536 ] && n=4
            [ $soak = 1 ] && n=$((n * 10))
            # -c: both ends check the data they receive
            echo "ibv_rc_pingpong -d $dev -g $idx -m $mtu -s $size -n $n -p $port -c $peer" ;;
        *)
            n=20; [ "$size" -ge 65536 ] && n=8
            [ $soak = 1 ] && n=$((n * 10))
            # -t: perftest's default send queue (128) exceeds the short runs
            echo "ib_$tool -d $dev -x $idx -m $mtu -n $n -p $port -F $([ "$tool" = atomic_bw ] || echo "-s $size") $([ "${tool#*_}" = bw ] && echo "-t 8") $peer" ;;
    esac
}

# host_bg CMD LOG -> hpid: the xsock half as a server (host, or the guest
# with --loopback: then hjob)
host_bg() {
    if [ $loop = 1 ]; then
        hjob=$("$g" bg --name "$name" -- sh -c "exec timeout 90 $1 > /host/$(basename "$2") 2>&1")
    else
        # shellcheck disable=SC2086 # CMD, xo: words
        timeout 90 "$xs_run" $xo $1 > "$2" 2>&1 &
        hpid=$!; hostpids+=("$hpid")
    fi
}
host_wait() { # host_wait LOG -> rc of the server half
    if [ $loop = 1 ]; then "$g" wait --name "$name" --timeout 90 "$hjob" > /dev/null 2>&1
    else wait "$hpid"; fi
}
host_fg() { # host_fg CMD LOG -> rc: the xsock half as a client
    if [ $loop = 1 ]; then gx "timeout 60 $1 > /host/$(basename "$2") 2>&1"; return; fi
    # shellcheck disable=SC2086 # CMD, xo: words
    timeout 60 "$xs_run" $xo $1 > "$2" 2>&1
}

# guest_listening PORT: the guest's server is up.  An rdma_cm listener has
# no TCP socket on rxe: rdma(8) lists its cm_id in state LISTEN
guest_listening() {
    case $tool in
        cm_*) gx "i=0; until rdma res show cm_id 2>/dev/null | grep -qE 'LISTEN.*[:.]$1( |\$)'; do
                    i=\$((i + 1)); [ \$i -ge 200 ] && { echo 'no cm_id listens on $1' >&2; exit 1; }
                    sleep 0.1; done" ;;
        *) gx "xs-wait-port $1 20" ;;
    esac
}
# host_listening PORT: the host's xsock server is up.  Over RoCE the CM
# listens on QP 1, nothing per port to see: a TCP listener if the stack
# shows one (rstream -T s, the iWARP CM), else 2 s and go
host_listening() {
    case $tool in
        cm_*) for _ in $(seq 20); do
                  grep -q ":$(printf '%04X' "$1") [0-9A-F:]* 0A " /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
                  sleep 0.1
              done; return 0 ;;
        *) listening "$1" ;;
    esac
}

# run_two: two host pingpong clients at once (two processes on 4791),
# each against its own rxe server (dynamic scope: run_cell's locals)
run_two() {
    local size=$1 p1 p2 j1 j2 h1 h2 rc1=0 rc2=0 g1=0 g2=0 s1 s2 c1 c2
    p1=$(free_port); p2=$(free_port)
    while [ "$p2" = "$p1" ]; do p2=$(free_port); done
    s1=$(cmd_of pingpong "$size" g srv "$p1" 100); s2=$(cmd_of pingpong "$size" g srv "$p2" 100)
    c1=$(cmd_of pingpong "$size" h cli "$p1" 100); c2=$(cmd_of pingpong "$size" h cli "$p2" 100)
    echo "## rxe (guest servers): $s1 | $s2" >> "$log"
    j1=$("$g" bg --name "$name" -- sh -c "exec timeout 90 $s1 > /host/$cn.1.rxe 2>&1")
    j2=$("$g" bg --name "$name" -- sh -c "exec timeout 90 $s2 > /host/$cn.2.rxe 2>&1")
    gx "xs-wait-port $p1 20 && xs-wait-port $p2 20" >> "$log" 2>&1 ||
        { ok=0; note="rxe servers did not listen"; return; }
    echo "## xsock (two host clients at once): $c1 | $c2" >> "$log"
    # shellcheck disable=SC2086 # CMD: words
    timeout 60 "$xs_run" $c1 > "$out/$cn.1.xsock" 2>&1 &
    h1=$!
    # shellcheck disable=SC2086
    timeout 60 "$xs_run" $c2 > "$out/$cn.2.xsock" 2>&1 &
    h2=$!
    wait "$h1" || rc1=$?
    wait "$h2" || rc2=$?
    "$g" wait --name "$name" --timeout 90 "$j1" > /dev/null 2>&1 || g1=$?
    "$g" wait --name "$name" --timeout 90 "$j2" > /dev/null 2>&1 || g2=$?
    for f in "$out/$cn".[12].*; do echo "## $(basename "$f"):"; cat "$f"; done >> "$log" 2>/dev/null
    if [ $rc1 != 0 ] || [ $rc2 != 0 ] || [ $g1 != 0 ] || [ $g2 != 0 ]; then
        ok=0; note="xsock rc $rc1/$rc2, rxe rc $g1/$g2"; return
    fi
    res="$size:$(grep -h 'usec/iter' "$out/$cn.1.xsock" | awk '{print $(NF-1)}')+$(grep -h 'usec/iter' "$out/$cn.2.xsock" | awk '{print $(NF-1)}') us/iter (2 processes)"
    rm -f "$out/$cn".[12].*
}

# run_one: one server/client run (dynamic scope: run_cell's locals)
run_one() {
    local size=$1 port hrc=0 grc=0 job sc cc hl gl
    if [ "$tool" = pingpong2 ]; then run_two "$size"; return; fi
    hl=$out/$cn.$size.xsock gl=$out/$cn.$size.rxe
    port=$(free_port)
    # servers that never exit (cmtime, rcopy): stopped once the client is
    # done; their rc is then 143 (timeout's, from the SIGTERM)
    local forever=0 prog
    case $tool in cm_cmtime|cm_rcopy) forever=1 ;; esac
    if [ "$tool" = cm_rcopy ]; then
        head -c "$size" /dev/urandom > "$out/rc.src"
        rm -f "$out/rc.dst"; gx "rm -f /tmp/rc.dst" > /dev/null 2>&1
    fi
    if [ "$dir" = hc ]; then
        sc=$(cmd_of "$tool" "$size" g srv "$port"); cc=$(cmd_of "$tool" "$size" h cli "$port")
        echo "## rxe (guest server): $sc" >> "$log"
        job=$("$g" bg --name "$name" -- sh -c "exec timeout 90 $sc > /host/$(basename "$gl") 2>&1")
        guest_listening "$port" >> "$log" 2>&1 || { ok=0; note="size $size: rxe server did not listen"; return; }
        # rping's and perftest's servers listen before they are ready (matrix.sh)
        case $tool in cm_*) sleep 0.3 ;; esac
        echo "## xsock (host client): $xo $cc" >> "$log"
        host_fg "$cc" "$hl" || hrc=$?
        # a server whose client failed may wait for ever (busybox has
        # killall, not pkill)
        prog=${sc%% *}
        if [ $forever = 1 ]; then gx "sleep 0.5; killall $prog 2>/dev/null; true" > /dev/null 2>&1
        elif [ $hrc != 0 ]; then gx "sleep 2; killall $prog 2>/dev/null; true" > /dev/null 2>&1; fi
        "$g" wait --name "$name" --timeout 90 "$job" > /dev/null 2>&1 || grc=$?
        [ $forever = 1 ] && [ $grc = 143 ] && grc=0
    else
        sc=$(cmd_of "$tool" "$size" h srv "$port"); cc=$(cmd_of "$tool" "$size" g cli "$port")
        echo "## xsock (host server): $xo $sc" >> "$log"
        host_bg "$sc" "$hl"
        if [ $loop = 1 ]; then guest_listening "$port" >> "$log" 2>&1
        else host_listening "$port"; fi || { ok=0; note="size $size: xsock server did not listen"; return; }
        case $tool in cm_*) sleep 0.3 ;; esac
        echo "## rxe (guest client): $cc" >> "$log"
        GX_TIMEOUT=70 gx "timeout 60 $cc > /host/$(basename "$gl") 2>&1" || grc=$?
        # a server whose client failed may wait for ever: 3 s, then it goes
        if [ $loop = 0 ] && [ $forever = 1 ]; then sleep 0.5; kill "$hpid" 2>/dev/null
        elif [ $grc != 0 ] && [ $loop = 0 ]; then sleep 3; kill "$hpid" 2>/dev/null; fi
        if [ $loop = 1 ] && [ $forever = 1 ]; then gx "killall ${sc%% *} 2>/dev/null; true" > /dev/null 2>&1; fi
        host_wait "$hl" || hrc=$?
        [ $forever = 1 ] && [ $hrc = 143 ] && hrc=0
    fi
    { echo "## xsock side (rc $hrc):"; cat "$hl" 2>/dev/null
      echo "## rxe side (rc $grc):"; cat "$gl" 2>/dev/null; } >> "$log"
    if [ $hrc != 0 ] || [ $grc != 0 ]; then
        ok=0; note="size $size: xsock rc $hrc, rxe rc $grc: $(grep -hiE 'fail|error|couldn|unable' "$hl" "$gl" 2>/dev/null | head -n 2 | tr '\n|' '  ')"
        return
    fi
    # the client's figures (a perftest bw server often prints 0.00)
    local r cl=$gl
    [ "$dir" = hc ] && cl=$hl
    case $tool in
        pingpong) r=$(grep -h 'usec/iter' "$cl" | head -n 1 | awk '{print $(NF-1) " us/iter"}') ;;
        cm_rping) r="$(grep -c '^ping data' "$cl") pings"
                  [ "${r% *}" -gt 0 ] || { ok=0; note="size $size: the client printed no ping"; return; } ;;
        cm_ucmatose) r="10 conns"
                     grep -q 'test complete' "$cl" || { ok=0; note="size $size: ucmatose: no 'test complete'"; return; } ;;
        cm_rstream) r=$(awk 'NF >= 8 && $3 ~ /^[0-9]+$/ { l = $7 } END { print l }' "$cl")
                    r="${r:-?} Gb/s" ;;
        cm_rdma_server|cm_rdma_xserver)
            r="1 message each way"
            grep -q 'end 0' "$cl" || { ok=0; note="the client did not end 0"; return; } ;;
        cm_cmtime)
            # every connection up and down: the step table, no event error
            if grep -qE '^event:|error' "$cl" || ! grep -q '^disconnect' "$cl"; then
                ok=0; note="cmtime: $(grep -E '^event:|error' "$cl" | head -n 1)"; return
            fi
            r="$size conns, connect $(awk '/^connect +:/ { print $3 }' "$cl") ms" ;;
        cm_rcopy)
            local want got
            want=$(sha256sum < "$out/rc.src" | cut -c1-64)
            if [ "$dir" = hc ] || [ $loop = 1 ]; then got=$(gx "sha256sum /tmp/rc.dst" 2>/dev/null | cut -c1-64)
            else got=$(sha256sum < "$out/rc.dst" 2>/dev/null | cut -c1-64); fi
            [ "$want" = "$got" ] || { ok=0; note="size $size: the copy differs (sha256 ${got:-none})"; return; }
            r="copied, sha256 ok, $(grep -ho '= [0-9.]* Gb/sec' "$cl" | cut -c3-)" ;;
        cm_errpeer) errpeer_check "$hl" "$gl"; r=$ep_res
                    [ "$ep_bad" = 0 ] || { ok=0; note="$ep_res"; return; } ;;
        cm_atomic_bw) r=$(perftest_result 8 "$cl" | awk '{print $(NF-1) " MB/s"}') ;;
        *_lat) r=$(perftest_result "$size" "$cl" | awk '{print $5 " us"}') ;;
        *) r=$(perftest_result "$size" "$cl" | awk '{print $(NF-1) " MB/s"}') ;;
    esac
    res="$res${res:+, }$size:${r:-?}"
    rm -f "$hl" "$gl"
}

# errpeer_check FILE... -> ep_res (summary), ep_bad (count of mismatches).
# What each side must see on RoCE (Linux 6.1 rxe as the reference):
# write-badstag, write-oob, write-noaccess, read-badstag: the victim's
# responder NAKs "remote access error" and moves its QP to error (class C,
# rxe_resp.c:1396-1401 -> RESPST_ERROR, :1472-1475), so its posted receive
# is flushed before any disconnect; the attacker's WR completes with
# IBV_WC_REM_ACCESS_ERR (rxe_comp.c:320-321) and its QP goes to error
# (:758).  send-norecv: RNR NAK (rxe_resp.c:1381-1386), which the attacker
# retries rnr_retry (1) times, then IBV_WC_RNR_RETRY_EXC_ERR
# (rxe_comp.c:733-750); the victim's QP stays in RTS with nothing to flush.
errpeer_check() {
    local out
    out=$(cat "$@" 2>/dev/null | awk '
        /^case .* FAILED/ { bad = bad " " $2 "/" $3 ":FAILED"; next }
        /^case / {
            n++; c = $2; who = $3; role = $4; sub(/:$/, "", role)
            rnr = (c == "send-norecv")
            if (role == "attacker")
                want = rnr ? "wc op:RNR retry counter exceeded qp error flushed 1 disconnect ok" \
                           : "wc op:remote access error qp error flushed 1 disconnect ok"
            else
                want = rnr ? "qp rts flushed 0 disconnect ok" : "qp error flushed 1 disconnect ok"
            got = $0; sub(/^[^:]*: /, "", got)
            if (got != want) bad = bad " " c "/" who "/" role ": \"" got "\" (want \"" want "\")"
        }
        END { printf "%d %d%s\n", n, (bad != ""), bad }')
    local n ; read -r n ep_bad _ <<< "$out"
    if [ "$n" != 20 ]; then ep_bad=1; ep_res="$n of 20 case lines${out#* * }"
    elif [ "$ep_bad" = 0 ]; then ep_res="20 case lines as expected (REM_ACCESS_ERR x16, RNR_RETRY_EXC_ERR x4)"
    else ep_res="statuses differ:${out#* * }"; fi
}

# CM MAD attribute names (IBTA Vol. 1 16.7: the CM class, 0x07)
cmnames='BEGIN { split("REQ MRA REJ REP RTU DREQ DREP", a, " "); for (i = 1; i <= 7; i++) an[sprintf("%x", 15 + i)] = a[i] }'

# opcode names for the counts (IBTA Vol. 1 table 38, RC and UD)
opnames='BEGIN { nn = split("SEND_FIRST SEND_MIDDLE SEND_LAST SEND_LAST_IMM SEND_ONLY SEND_ONLY_IMM " \
    "WRITE_FIRST WRITE_MIDDLE WRITE_LAST WRITE_LAST_IMM WRITE_ONLY WRITE_ONLY_IMM READ_REQ " \
    "READ_RESP_FIRST READ_RESP_MIDDLE READ_RESP_LAST READ_RESP_ONLY ACK ATOMIC_ACK CMP_SWAP " \
    "FETCH_ADD RESYNC SEND_LAST_INV SEND_ONLY_INV", nm, " ")
    for (i = 1; i <= nn; i++) name[i - 1] = nm[i]; name[100] = "UD_SEND_ONLY"; name[101] = "UD_SEND_ONLY_IMM" }'

run_cell() { # run_cell NAME DIR TOOL SIZES
    local cn=$1 dir=$2 tool=$3 sizes=${4//,/ } ok=1 note="" res="" t0 td s xo=""
    # the xsock half's runner options: rdma_cm binds xsock_roce0; rstream -T s
    # is sockets made IWARP by libxsock
    if [ $loop = 0 ]; then
        case $tool in cm_rstream) xo="--iwarp --roce" ;; cm_*) xo="--roce" ;; esac
    fi
    local log=$out/$cn.log pcap=$out/$cn.pcap
    t0=$(date +%s)
    : > "$log"
    # -B: a 64 MiB ring; the default 2 MiB lost 99 of 520 packets of a 64 KiB
    # pingpong while QEMU took the CPUs
    tcpdump -i "$tap" -U --immediate-mode -B 65536 -s 0 -w "$pcap" udp port 4791 > "$out/$cn.tcpdump" 2>&1 &
    td=$!; hostpids+=("$td")
    for _ in $(seq 100); do grep -qs 'listening on' "$out/$cn.tcpdump" && break; sleep 0.1; done
    for s in $sizes; do
        run_one "$s"
        [ $ok = 1 ] || break
    done
    sleep 0.5   # the last ACKs
    kill -INT "$td" 2>/dev/null; wait "$td" 2>/dev/null
    # the decode: no malformed packet, no error-level expert info; the ICRC
    # recomputed independently; packets per sender and opcode into the log
    local npk mal bad counts
    npk=$(tshark -n -r "$pcap" -Y infiniband 2>/dev/null | wc -l)
    mal=$(tshark -n -r "$pcap" --disable-protocol rpcordma \
          -Y '_ws.malformed || _ws.expert.severity == "error"' 2>/dev/null | wc -l)
    bad=$(python3 "$top/tests/vectors/roce/pcap2vec.py" checkpcap "$pcap" 2>/dev/null | grep -c 'bad ICRC')
    counts=$(tshark -n -r "$pcap" --disable-protocol rpcordma -Y infiniband -T fields \
             -e ip.src -e infiniband.bth.opcode 2>/dev/null |
             awk -v g="$gaddr" "$opnames"'{ k = ($1 == g ? "rxe" : "xsock") ":" (($2 + 0) in name ? name[$2 + 0] : $2); c[k]++ }
                 END { for (k in c) printf "%s=%d\n", k, c[k] }' | sort | tr '\n' ' ')
    # NAKs (AETH syndrome 011xxxxx) and RNR NAKs (001xxxxx) by sender: not
    # failures (a retransmission can follow a loss), but worth seeing
    local naks
    naks=$(tshark -n -r "$pcap" --disable-protocol rpcordma -Y infiniband.aeth -T fields \
           -e ip.src -e infiniband.aeth.syndrome 2>/dev/null |
           awk -v g="$gaddr" '{ s = int($2 / 32); w = ($1 == g ? "rxe" : "xsock")
                                if (s == 3) n[w " NAK"]++; else if (s == 1) n[w " RNR-NAK"]++ }
                              END { for (k in n) printf "%s x%d, ", k, n[k] }')
    [ -n "$naks" ] && note="$note${note:+; }${naks%, }"
    # the error paths' NAKs: each side is the victim of 4 remote access
    # errors (AETH NAK code 2, syndrome 0x62) and of one RNR case (rnr_retry
    # 1: the first RNR NAK and the retry's, 001xxxxx)
    if [ "$tool" = cm_errpeer ] && [ $loop = 0 ] && [ $ok = 1 ]; then
        local w
        w=$(tshark -n -r "$pcap" --disable-protocol rpcordma -Y infiniband.aeth -T fields \
            -e ip.src -e infiniband.aeth.syndrome 2>/dev/null |
            awk -v g="$gaddr" '{ w = ($1 == g ? "rxe" : "xsock"); s = $2 + 0
                                 if (s == 98) a[w]++; else if (int(s / 32) == 1) r[w]++ }
                               END { for (w in a) if (a[w] != 4) print w " sent " a[w] " remote-access NAKs, not 4"
                                     for (w in r) if (r[w] < 2) print w " sent " r[w] " RNR NAKs, not 2"
                                     if (!("rxe" in a) || !("xsock" in a)) print "a side sent no remote-access NAK"
                                     if (!("rxe" in r) || !("xsock" in r)) print "a side sent no RNR NAK" }')
        [ -z "$w" ] || { ok=0; note="$note${note:+; }$(echo "$w" | tr '\n' ';')"; }
    fi
    local drop
    drop=$(awk '/dropped by kernel/ { print $1 }' "$out/$cn.tcpdump")
    [ "${drop:-0}" = 0 ] || note="$note${note:+; }tcpdump lost $drop packets"
    # CM MADs (class 0x07) per sender and attribute: which of REQ/REP/RTU/
    # DREQ/DREP went through
    local mads=""
    case $tool in
        cm_*) mads=$(tshark -n -r "$pcap" --disable-protocol rpcordma -Y 'infiniband.mad.mgmtclass == 0x07' \
                     -T fields -e ip.src -e infiniband.mad.attributeid 2>/dev/null |
                     awk -v g="$gaddr" "$cmnames"'{ v = tolower($2); sub(/^0x0*/, "", v)
                          k = ($1 == g ? "rxe" : "xsock") ":" (v in an ? an[v] : "0x" v); c[k]++ }
                          END { for (k in c) printf "%s=%d\n", k, c[k] }' | sort | tr '\n' ' ')
              note="$note${note:+; }CM MADs: ${mads:-none}"
              # every DREQ rxe sends gets xsock's DREP (a crossing DREQ of
              # xsock's may go without rxe's: cm.c:2909-2914)
              local dq dp
              dq=$(echo "$mads" | tr ' ' '\n' | awk -F= '$1 == "rxe:DREQ" { print $2 }')
              dp=$(echo "$mads" | tr ' ' '\n' | awk -F= '$1 == "xsock:DREP" { print $2 }')
              if [ "${dq:-0}" -gt "${dp:-0}" ]; then
                  ok=0; note="$note; rxe sent ${dq} DREQs, xsock ${dp:-0} DREPs"
              fi ;;
    esac
    { echo "## capture: $npk RoCE packets, $mal malformed/error, $bad bad ICRC, ${naks:-no NAKs}"
      echo "## opcodes: $counts"; echo "## CM MADs: ${mads:-none}"; } >> "$log"
    [ "$mal" = 0 ] || { ok=0; note="$note${note:+; }tshark: $mal malformed/error packets"; }
    [ "$bad" = 0 ] || { ok=0; note="$note${note:+; }$bad bad ICRCs"; }
    if [ $loop = 0 ] && [ "$npk" = 0 ]; then ok=0; note="$note${note:+; }no RoCE packet on the tap"; fi
    [ $ok = 1 ] && note="$res; $npk packets: $counts${note:+; $note}"
    # a failed cell keeps its MAD counts (which of the handshake got through)
    [ $ok = 0 ] && [ -n "$mads" ] && case $note in *"CM MADs:"*) ;; *) note="$note; CM MADs: $mads" ;; esac
    local r=PASS
    if [ $ok = 1 ]; then npass=$((npass + 1)); else r=FAIL; nfail=$((nfail + 1)); fi
    printf 'roce: %-18s %-4s %3ss  %s\n' "$cn" "$r" "$(( $(date +%s) - t0 ))" "$note"
    echo "| $cn | $r | $note |" >> "$results"
}

results=$out/roce.md
{ echo "| cell | result | note |"; echo "|---|---|---|"; } > "$results"
nfail=0 npass=0
t_all=$(date +%s)
for c in "${cells[@]}"; do
    # shellcheck disable=SC2086
    set -- $c
    if [ -n "$only" ] && ! echo "$1" | grep -qE -- "$only"; then continue; fi
    run_cell "$@"
done
echo "roce: $npass passed, $nfail failed in $(( $(date +%s) - t_all )) s (table: $results)"
[ $nfail = 0 ] && [ $keep = 0 ] && rm -rf "$out"
[ $nfail = 0 ]
