#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# matrix.sh: the siw interop matrix.  xsock (this build, through xsock-run)
# on the host against the Linux kernel's siw in a QEMU guest, both
# directions, every cell captured at the guest's NIC (by QEMU) and decoded by tshark.
#
#   tests/interop/matrix.sh [--only REGEX] [--list] [--out DIR] [--no-install]
#
# --only runs the cells whose name matches REGEX (grep -E).  --out keeps the
# per-cell logs and captures in DIR (default: a temporary directory, removed
# on success).  Needs XS_TOP_BUILDDIR (or a build in ./) and root.
# Prints one line per cell and a table (cell | expected | result | note) to
# DIR/matrix.md; exit 0 only if every cell gave its expected result.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/interop/lib.sh
. "$here/lib.sh"
top=$(cd "$here/../.." && pwd)
bld=${XS_TOP_BUILDDIR:-$PWD}
xs_run=$bld/tools/xsock-run
only="" list=0 out="" prep=()
while [ $# -gt 0 ]; do
    case $1 in
        --only) only=${2:?}; shift ;;
        --list) list=1 ;;
        --out) out=${2:?}; shift ;;
        --no-install) prep+=(--no-install) ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "matrix: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

# ---- the cells ---------------------------------------------------------------
# name  direction(hc: xsock host client -> siw guest server | gc: siw guest
# client -> xsock host server)  tool  mpa-mode  expected(pass|fail)
# Modes: r2c0 r2c1 (rev 2, CRC off/on), r1c0 r1c1 (rev 1), p2pw p2pr (rev 2
# P2P with Write/Read RTR), mk (xsock asks for Markers).
cells=()
for dir in hc gc; do
    for mode in r2c0 r2c1; do
        for tool in rping ucmatose send_bw write_bw read_bw write_lat; do
            cells+=("$dir-$mode-$tool $dir $tool $mode pass")
        done
    done
    for mode in r1c0 r1c1; do
        for tool in ucmatose send_bw write_bw; do
            cells+=("$dir-$mode-$tool $dir $tool $mode pass")
        done
    done
    for mode in p2pw p2pr; do cells+=("$dir-$mode-rping $dir rping $mode pass"); done
    # rsockets (issue 5): rdma-core's rstream on siw <-> the same program in
    # its plain-sockets mode (-T s) on the host, carried by libxsock
    for mode in r2c0 r2c1 r1c0 p2pw; do cells+=("$dir-$mode-rstream $dir rstream $mode pass"); done
done
# siw gives a rev-1 initiator IRD/ORD 0: rping's server-side RDMA Read fails
# and siw closes; the xsock client must end with an error, not hang.
cells+=("hc-r1c0-rping hc rping r1c0 fail")
# siw has no Markers: it answers M=1 with a Reject; xsock must say so.
cells+=("hc-mk-rping hc rping mk fail")
cells+=("hc-err-errpeer hc errpeer r2c0 pass" "gc-err-errpeer gc errpeer r2c0 pass")
# The kernel-level path (issue 14): socat under libxsock in the guest with
# rdma-core's librdmacm/libibverbs on siw0 (xsock-run --stack rdma-core, no
# libiwarp) against socat under xsock-run --iwarp (libiwarp) on the host: a
# file each way, and a fork server with several clients (run_kpair)
cells+=("hc-k-xfer hc kxfer r2c0 pass" "gc-k-xfer gc kxfer r2c0 pass"
        "hc-k-fork hc kfork r2c0 pass" "gc-k-fork gc kfork r2c0 pass")

if [ $list = 1 ]; then printf '%s\n' "${cells[@]}" | cut -d' ' -f1; exit 0; fi
[ -x "$xs_run" ] || { echo "matrix: no $xs_run (set XS_TOP_BUILDDIR)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "SKIP: matrix needs root (QEMU guest cache, apt)"; exit 77; }

"$here/guest-prepare.sh" "${prep[@]}" || { echo "matrix: guest preparation failed" >&2; exit 1; }
command -v tshark > /dev/null || { echo "matrix: tshark missing" >&2; exit 1; }

# xsock runs with the defaults a user gets: no XSOCK_* variable is set
# here, and a cell that fails once fails the matrix (docs/interop.md says
# what the stack does by default where siw needs it).

keep=1
[ -n "$out" ] || { out=$(mktemp -d /tmp/xsock-interop.XXXXXX); keep=0; }
mkdir -p "$out"; out=$(cd "$out" && pwd)
chmod 0777 "$out"
g="$here/guest.sh"
name=matrix-$$
guest_trap

# guest ports 7174 (rping/ucmatose/errpeer) and 18515 (perftest) forwarded
hp_cm=$(free_port); hp_pt=$(free_port)
boot=$("$g" start --name "$name" --fwd "$hp_cm:7174" --fwd "$hp_pt:18515" --share "$out" --lifetime 3000) ||
    { echo "matrix: guest did not boot" >&2; exit 1; }
echo "matrix: $boot"
gx() { "$g" exec --name "$name" --timeout "${GX_TIMEOUT:-60}" -- sh -c "$1"; }

# The iw-errpeer verbs peer, built against rdma-core for the guest.
gcc -O2 -Wall -Wextra -o "$out/iw-errpeer" "$here/iw-errpeer.c" -libverbs -lrdmacm ||
    { echo "matrix: cannot build iw-errpeer" >&2; exit 1; }

# tool -> "server args" "client args" (PORT/ADDR/SIZE substituted), sizes
tool_cmds() { # tool_cmds TOOL SIZE -> sets srv cli
    local n=20
    case $1 in
        rping) srv="rping -s -a @BIND -p @PORT -C 20 -V -S $2"
               cli="rping -c -a @ADDR -p @PORT -C 20 -V -v -S $2" ;;
        ucmatose) srv="ucmatose -b @BIND -p @PORT -c 2 -C 20 -S $2"
                  cli="ucmatose -s @ADDR -p @PORT -c 2 -C 20 -S $2" ;;
        send_bw|write_bw|read_bw|write_lat)
            [ "$2" -gt 65536 ] && n=10
            srv="ib_$1 -R -F -p @PORT -s $2 -n $n"
            cli="ib_$1 -R -F -p @PORT -s $2 -n $n @ADDR" ;;
        errpeer) srv="@EP --server -a @BIND -p @PORT"
                 cli="@EP --client -a @ADDR -p @PORT" ;;
        rstream) # ping-pong of SIZE each way, both sides verify the data
                 # (-T v); @SOCK is -T s on the host (sockets, through
                 # xsock-run --iwarp) and -B 8388608 in the guest (rsockets
                 # with a 16 MiB ring: it gives no ring half back while the
                 # xsock side sends, whose close would otherwise meet that
                 # message unread and reset the stream's tail, see below)
            # counts: rstream sends all COUNT transfers one way, then all back
            n=100; [ "$2" -ge 4096 ] && n=50; [ "$2" -ge 65536 ] && n=20; [ "$2" -ge 1048576 ] && n=4
            # rs_opt (-T a, -T b) on the server only: in -T a rstream polls
            # before each recv and fails on POLLHUP even with POLLIN set; a
            # client's last poll can see the server's data and its
            # disconnect together (rsockets does the same, docs/interop.md)
            srv="rstream -b @BIND -p @PORT -S $2 -C $n -T v $rs_opt @SOCK"
            cli="rstream -s @ADDR -p @PORT -S $2 -C $n -T v @SOCK" ;;
    esac
}
sizes() { case $1 in rping) echo "100 65535" ;; ucmatose) echo "100 8000" ;;
                     errpeer) echo "0" ;; rstream) echo "64 4096 65536 1048576" ;;
                     kxfer) echo "4194304" ;; kfork) echo "262144" ;;
                     *) echo "4096 131072" ;; esac; }

results=$out/matrix.md
{ echo "| cell | expected | result | note |"; echo "|---|---|---|---|"; } > "$results"
nfail=0 npass=0
t_matrix=$(date +%s)

# ---- the kernel-path cells (kxfer, kfork) ------------------------------------
# The guest side is socat under libxsock alone, with the host-built libxsock
# and xsock-run from the share (/host/kpath): its IWARP sockets run on siw0
# through the guest's real librdmacm/libibverbs.  The host side is socat
# under xsock-run --iwarp (libiwarp).
kpath_stage() { # once: the guest's libxsock, xsock-run, the data
    [ -f "$out/kpath/.staged" ] && return 0
    mkdir -p "$out/kpath" && chmod 0777 "$out/kpath" &&
    cp -L "$bld/libxsock/.libs/libxsock.so.0" "$out/kpath/libxsock.so.0" &&
    cp "$xs_run" "$out/kpath/xsock-run" &&
    # where xsock-run looks for libxsock by default: the build tree's path
    # it was made with, in the guest too (no XSOCK_SOCK_LIB needed)
    gx "mkdir -p '$bld/libxsock/.libs' && cp /host/kpath/libxsock.so.0 '$bld/libxsock/.libs/'" &&
    touch "$out/kpath/.staged"
}
# the guest's command prefix: libxsock over rdma-core
kg_run="sh /host/kpath/xsock-run --stack rdma-core --iwarp"
ksha() { sha256sum "$1" | cut -d' ' -f1; }

# kxfer: SIZE random octets client -> server, then another SIZE server ->
# client, over two connections; SHA-256 compared on the receiving end.
# kfork: a socat fork server (EXEC:sha256sum per connection) and 4 clients
# one after another, each sending SIZE octets and checking the digest it
# gets back; the server must still be there after the last.
run_kpair() {
    kpath_stage || { ok=0; note="cannot stage $out/kpath"; return 0; }
    local kd=$out/kpath i gp=7174 hport want got rc job spid
    local srv_addr cli_addr h_srv h_cli
    if [ "$dir" = hc ]; then hport=$hp_cm; else hport=$(free_port); fi
    # kg: a command in the guest under libxsock/rdma-core; kh: on the host
    # under libiwarp
    kg() { gx "cd /tmp && $kg_run $1"; }
    kh() { timeout 60 "$xs_run" --iwarp "$@"; }
    if [ "$tool" = kxfer ]; then
        head -c "$size" /dev/urandom > "$kd/$cn.up"
        head -c "$size" /dev/urandom > "$kd/$cn.down"
        gx "cp /host/kpath/$cn.up /host/kpath/$cn.down /tmp/" >> "$log" 2>&1
        local step src dst
        for step in up down; do
            # up: the client sends; down: the server sends
            want=$(ksha "$kd/$cn.$step"); rc=0
            if [ "$dir" = hc ]; then
                if [ $step = up ]; then src="TCP-LISTEN:$gp,bind=10.0.2.15,reuseaddr"; dst="CREATE:/tmp/$cn.$step.out"
                else src="OPEN:/tmp/$cn.$step"; dst="TCP-LISTEN:$gp,bind=10.0.2.15,reuseaddr"; fi
                echo "## guest: socat -u $src $dst; host: socat ($step)" >> "$log"
                job=$("$g" bg --name "$name" -- sh -c "echo \$\$ > /tmp/server.pid; cd /tmp; exec timeout 90 env $kg_run socat -u $src $dst")
                gx "xs-wait-port $gp 20" >> "$log" 2>&1 || { ok=0; note="guest server did not listen ($step)"; return 0; }
                if [ $step = up ]; then kh socat -u "OPEN:$kd/$cn.up" "TCP:127.0.0.1:$hport" >> "$log" 2>&1 || rc=$?
                else kh socat -u "TCP:127.0.0.1:$hport" "CREATE:$kd/$cn.down.out" >> "$log" 2>&1 || rc=$?; fi
                [ $rc = 0 ] || gx 'sleep 3; kill $(cat /tmp/server.pid) 2>/dev/null; true' > /dev/null 2>&1
                "$g" wait --name "$name" --timeout 60 "$job" >> "$log" 2>&1 || rc="$rc/guest $?"
                if [ $step = up ]; then got=$(gx "sha256sum /tmp/$cn.up.out" 2>/dev/null | cut -d' ' -f1)
                else got=$(ksha "$kd/$cn.down.out" 2>/dev/null); fi
            else
                if [ $step = up ]; then src="TCP-LISTEN:$hport,bind=127.0.0.1,reuseaddr"; dst="CREATE:$kd/$cn.up.out"
                else src="OPEN:$kd/$cn.down"; dst="TCP-LISTEN:$hport,bind=127.0.0.1,reuseaddr"; fi
                echo "## host: socat -u $src $dst; guest: socat ($step)" >> "$log"
                timeout 90 "$xs_run" --iwarp socat -u "$src" "$dst" >> "$log" 2>&1 &
                spid=$!; hostpids+=("$spid")
                listening "$hport" || { ok=0; note="host server did not listen ($step)"; return 0; }
                if [ $step = up ]; then kg "socat -u OPEN:/tmp/$cn.up TCP:10.0.2.2:$hport" >> "$log" 2>&1 || rc=$?
                else kg "socat -u TCP:10.0.2.2:$hport CREATE:/tmp/$cn.down.out" >> "$log" 2>&1 || rc=$?; fi
                [ $rc = 0 ] || { sleep 3; kill "$spid" 2>/dev/null; }
                wait "$spid" || rc="$rc/host $?"
                if [ $step = up ]; then got=$(ksha "$kd/$cn.up.out" 2>/dev/null)
                else got=$(gx "sha256sum /tmp/$cn.down.out" 2>/dev/null | cut -d' ' -f1); fi
            fi
            echo "## $step: rc $rc, sha256 sent $want, received ${got:-none}" >> "$log"
            if [ "$rc" != 0 ] || [ "$got" != "$want" ]; then
                ok=0; note="$step ($((size / 1048576)) MiB): rc $rc, sha256 $([ "$got" = "$want" ] && echo ok || echo MISMATCH)"
                return 0
            fi
        done
        note="$((size / 1048576)) MiB each way, sha256 ok"
        gx "rm -f /tmp/$cn.*" > /dev/null 2>&1
        return 0
    fi
    # kfork
    local n=4 alive
    for i in $(seq $n); do head -c "$size" /dev/urandom > "$kd/$cn.c$i"; done
    if [ "$dir" = hc ]; then
        echo "## guest: socat fork server (libxsock/rdma-core); host: $n clients" >> "$log"
        job=$("$g" bg --name "$name" -- sh -c "echo \$\$ > /tmp/server.pid; cd /tmp; exec timeout 150 env $kg_run socat TCP-LISTEN:$gp,bind=10.0.2.15,fork,reuseaddr EXEC:sha256sum")
        gx "xs-wait-port $gp 20" >> "$log" 2>&1 || { ok=0; note="guest server did not listen"; return 0; }
    else
        echo "## host: socat fork server (libiwarp); guest: $n clients" >> "$log"
        timeout 150 "$xs_run" --iwarp socat "TCP-LISTEN:$hport,bind=127.0.0.1,fork,reuseaddr" EXEC:sha256sum >> "$log" 2>&1 &
        spid=$!; hostpids+=("$spid")
        listening "$hport" || { ok=0; note="host server did not listen"; return 0; }
    fi
    for i in $(seq $n); do
        want=$(ksha "$kd/$cn.c$i"); rc=0
        if [ "$dir" = hc ]; then
            kh socat -t 30 - "TCP:127.0.0.1:$hport" < "$kd/$cn.c$i" > "$kd/$cn.r$i" 2>> "$log" || rc=$?
        else
            kg "socat -t 30 - TCP:10.0.2.2:$hport < /host/kpath/$cn.c$i > /host/kpath/$cn.r$i" >> "$log" 2>&1 || rc=$?
        fi
        got=$(cut -d' ' -f1 "$kd/$cn.r$i" 2>/dev/null)
        echo "## client $i: rc $rc, sha256 sent $want, server said ${got:-nothing}" >> "$log"
        if [ $rc != 0 ] || [ "$got" != "$want" ]; then
            ok=0; note="client $i of $n: rc $rc, digest $([ -n "$got" ] && echo wrong || echo missing)"; break
        fi
    done
    if [ "$dir" = hc ]; then
        alive=$(gx 'kill -0 $(cat /tmp/server.pid) 2>/dev/null && echo yes; kill $(cat /tmp/server.pid) 2>/dev/null; true' 2>/dev/null)
        "$g" wait --name "$name" --timeout 30 "$job" >> "$log" 2>&1
    else
        alive=$(kill -0 "$spid" 2>/dev/null && echo yes); kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
    fi
    [ $ok = 1 ] && [ "$alive" != yes ] && { ok=0; note="the fork server died"; }
    [ $ok = 1 ] && note="$n clients x $((size / 1024)) KiB, each digest ok, server alive"
    return 0
}

# run_pair: one server/client run of a cell (dynamic scope: the caller's
# locals).
run_pair() {
        case $tool in kxfer|kfork) run_kpair; return 0 ;; esac

        tool_cmds "$tool" "$size"
        local hrc grc job hport sub
        if [ "$dir" = hc ]; then
            local gport=7174 hp=$hp_cm
            case $tool in *_bw|*_lat) gport=18515; hp=$hp_pt ;; esac
            sub() { sed -e "s|@BIND|10.0.2.15|; s|@PORT|$gport|; s|@EP|/host/iw-errpeer|; s|@SOCK|-B 8388608|"; }
            job=$("$g" bg --name "$name" -- sh -c "echo \$\$ > /tmp/server.pid; exec timeout 90 $(echo "$srv" | sub)")
            gx "xs-wait-port $gport 20" >> "$log" 2>&1 || { ok=0; note="guest server did not listen"; }
            local c; c=$(echo "$cli" | sed -e "s|@ADDR|127.0.0.1|; s|@PORT|$hp|; s|@EP|$out/iw-errpeer|; s|@SOCK|-T s|")
            [ $ok = 1 ] && sleep 0.3   # perftest/rping servers listen before they are ready
            echo "## host: xsock-run ${xo[*]} $c" >> "$log"
            hrc=0; timeout 60 "$xs_run" "${xo[@]}" $c > "$out/$cn.host" 2>&1 || hrc=$?
            cat "$out/$cn.host" >> "$log"
            echo "## guest job" >> "$log"
            # a server whose client gave up would wait for the next one
            [ $hrc = 0 ] || gx 'sleep 3; kill $(cat /tmp/server.pid) 2>/dev/null; true' > /dev/null 2>&1
            grc=0; "$g" wait --name "$name" --timeout 60 "$job" >> "$log" 2>&1 || grc=$?
        else
            hport=$(free_port)
            local s; s=$(echo "$srv" | sed -e "s|@BIND|127.0.0.1|; s|@PORT|$hport|; s|@EP|$out/iw-errpeer|; s|@SOCK|-T s|")
            echo "## host: xsock-run ${xo[*]} $s" >> "$log"
            timeout 90 "$xs_run" "${xo[@]}" $s > "$out/$cn.host" 2>&1 &
            local spid=$!; hostpids+=("$spid")
            listening "$hport" || { ok=0; note="host server did not listen"; }
            sleep 0.3
            local c; c=$(echo "$cli" | sed -e "s|@ADDR|10.0.2.2|; s|@PORT|$hport|; s|@EP|/host/iw-errpeer|; s|@SOCK|-B 8388608|")
            echo "## guest: $c" >> "$log"
            grc=0; GX_TIMEOUT=70 gx "timeout 60 $c" >> "$log" 2>&1 || grc=$?
            [ $grc = 0 ] || { sleep 3; kill "$spid" 2>/dev/null; }
            hrc=0; wait "$spid" || hrc=$?
            cat "$out/$cn.host" >> "$log"
        fi
        echo "## size $size: host rc $hrc, guest rc $grc" >> "$log"
        if [ "$expect" = pass ]; then
            if [ $hrc != 0 ] || [ $grc != 0 ]; then ok=0; note="size $size: host rc $hrc, guest rc $grc"; fi
        else
            # an expected failure: the xsock side must fail by itself, quickly
            # (rping exits 0 after an early DISCONNECT: count its pings)
            local pings; pings=$(grep -c '^ping data' "$out/$cn.host")
            if [ $hrc = 124 ] || { [ $hrc -gt 128 ] && [ $hrc != 255 ]; } || { [ $hrc = 0 ] && [ "$pings" -ge 20 ]; }; then
                ok=0; note="size $size: xsock side rc $hrc, $pings pings (expected a clean failure)"
            else
                note="xsock side rc $hrc after $pings pings: $(grep -v '^##' "$out/$cn.host" | head -n 2 | tr '|\n' '/ ')"
            fi
            return 0
        fi
    
    return 0
}

run_cell_once() { # run_cell_once NAME DIR TOOL MODE EXPECT -> cell_ok, cell_note
    local cn=$1 dir=$2 tool=$3 mode=$4 expect=$5
    local xo=() crc=0 rev=2 p2p=0 rtr=3 size ok=1 note="" t0 log=$out/$cn.log
    case $mode in
        r2c0) ;; r2c1) crc=1 ;; r1c0) rev=1 ;; r1c1) rev=1; crc=1 ;;
        p2pw) p2p=1; rtr=1 ;; p2pr) p2p=1; rtr=2 ;; mk) xo+=(--markers) ;;
    esac
    # --iwarp: libxsock makes every TCP socket of the host program an IWARP
    # socket (rsockets protocol); rstream's I/O style varies with the mode
    local rs_opt=""
    if [ "$tool" = rstream ]; then
        xo+=(--iwarp)
        case $mode in r2c1) rs_opt="-T a" ;; r1c0) rs_opt="-T b" ;; esac
    fi
    [ $crc = 1 ] && xo+=(--crc)
    [ $rev = 1 ] && xo+=(--rev 1)
    if [ $p2p = 1 ] && [ "$dir" = hc ]; then
        [ $rtr = 1 ] && xo+=(--p2p write) || xo+=(--p2p read)
    fi
    t0=$(date +%s)
    : > "$log"
    gx "cd /sys/module/siw/parameters && echo $crc > mpa_crc_required && echo $rev > mpa_version &&
        echo $p2p > peer_to_peer && echo $rtr > p2p_rtr" >> "$log" 2>&1 || { ok=0; note="siw parameters failed"; }
    # QEMU records the guest's frames itself: a complete capture (guest.sh)
    "$g" capture --name "$name" start "$out/$cn.pcap" >> "$log" 2>&1 || { ok=0; note="capture failed"; }
    for size in $(sizes "$tool"); do
        [ $ok = 1 ] || break
        run_pair
        [ $ok = 1 ] || break
        [ "$expect" = fail ] && break
    done
    sleep 0.3 # the last segments (FINs) still on their way
    "$g" capture --name "$name" stop >> "$log" 2>&1 || { ok=0; note="$note${note:+; }capture stop failed"; }
    # independent decode: no malformed frames, CRCs good where negotiated
    local f=$out/$cn.pcap mal fpdus bad good holes
    if [ -s "$f" ]; then
        # malformed frames: none from siw.  xsock's FPDUs over this path
        # are its loopback MSS long and slirp cuts them into 1460-octet
        # segments (see the CRC note below): tshark's MPA dissector,
        # reading each frame as it was on the guest's wire, loses their
        # framing at times and calls a frame inside one malformed (siw,
        # which checks every FPDU it gets, would terminate the connection
        # on a bad one); those are counted in the note, not as failures
        local xmal
        mal=$(mpa_tshark -r "$f" -Y '(_ws.malformed || _ws.expert.severity == "error") && ip.src == 10.0.2.15' 2>/dev/null | wc -l)
        xmal=$(mpa_tshark -r "$f" -Y '(_ws.malformed || _ws.expert.severity == "error") && ip.src == 10.0.2.2' 2>/dev/null | wc -l)
        [ "$xmal" = 0 ] || note="$note${note:+; }tshark lost FPDU framing on $xmal xsock->siw frames"
        fpdus=$(mpa_tshark -r "$f" -Y 'iwarp_mpa' 2>/dev/null | wc -l)
        # a hole in a recorded stream would make the decode's verdicts
        # meaningless (QEMU writes every frame, so there must be none)
        holes=$(mpa_tshark -r "$f" -Y 'tcp.analysis.lost_segment || tcp.analysis.ack_lost_segment' 2>/dev/null | wc -l)
        [ "$holes" = 0 ] || { ok=0; note="$note; capture has $holes holes"; }
        mpa_tshark -r "$f" -V > "$out/$cn.decode" 2>/dev/null
        # CRC: siw's FPDUs (one per guest TCP segment) must all check.  xsock
        # sizes its FPDUs from its host socket's MSS, which behind QEMU's
        # user networking is loopback's (65483): slirp re-segments them to
        # 1460 bytes and tshark, which does not reassemble FPDUs across
        # segments, loses alignment on some; siw checks those CRCs itself.
        mpa_tshark -r "$f" -V -Y 'ip.src == 10.0.2.15' > "$out/$cn.decode" 2>/dev/null
        # siw's FPDUs are at most one guest segment (1456 bytes); a "PDU"
        # tshark reassembled from more is its own loss of framing (siw also
        # sends a CRC as a segment of its own), not a CRC siw got wrong
        read -r bad sbad < <(awk '/^Frame [0-9]+:/ { pdu = 0 } /\[PDU Size: [0-9]+\]/ { pdu = $3 + 0 }
            /Bad CRC32/ { if (pdu > 1456) m++; else b++ } END { print b + 0, m + 0 }' "$out/$cn.decode")
        good=$(grep -c 'Good CRC32' "$out/$cn.decode")
        [ "$sbad" = 0 ] || note="$note${note:+; }tshark lost FPDU alignment on $sbad siw->xsock frames"
        local xbad; xbad=$(mpa_tshark -r "$f" -V -Y 'ip.src == 10.0.2.2' 2>/dev/null | grep -c 'Bad CRC32')
        [ "$xbad" = 0 ] || note="$note${note:+; }tshark lost FPDU alignment on $xbad xsock->siw frames"
        rm -f "$out/$cn.decode"
        [ "$mal" = 0 ] || { ok=0; note="$note; tshark: $mal malformed/error frames from siw"; }
        [ "$bad" = 0 ] || { ok=0; note="$note; tshark: $bad bad CRCs"; }
        [ "$fpdus" -gt 0 ] || { ok=0; note="$note; tshark: no MPA traffic decoded"; }
        if [ "$expect" = pass ] && [ $crc = 1 ] && [ "$good" = 0 ]; then ok=0; note="$note; tshark: no CRC checked"; fi
        if [ "$tool" = errpeer ]; then
            # what each side sent: source, control word (layer|etype, code)
            # (the 4 control bytes follow MPA length 2 + DDP/RDMAP header 18)
            mpa_tshark -r "$f" -Y iwarp_rdma.terminate -T fields \
                -e ip.src -e tcp.payload 2>/dev/null |
                awk '{print ($1 == "10.0.2.15" ? "siw" : "xsock") ":" substr($2, 41, 8)}' > "$out/$cn.terms"
            note="$note${note:+; }Terminate control words in order: $(tr '\n' ' ' < "$out/$cn.terms")"
            grep -q . "$out/$cn.terms" || { ok=0; note="$note no Terminate seen"; }
            grep -q 'FAILED' "$log" && ok=0
        fi
        note="$note${note:+; }$fpdus MPA frames${crc:+}$([ $crc = 1 ] && echo ", $good good CRCs")"
    else
        ok=0; note="$note; no capture"
    fi
    cell_ok=$ok cell_note=$note
}

run_cell() { # run_cell NAME DIR TOOL MODE EXPECT
    local cn=$1 expect=$5 t0 cell_ok cell_note
    t0=$(date +%s)
    run_cell_once "$@"
    local res=PASS
    [ "$cell_ok" = 1 ] || res=FAIL
    [ "$cell_ok" = 1 ] && npass=$((npass + 1)) || nfail=$((nfail + 1))
    local verdict=$res; [ "$expect" = fail ] && [ "$cell_ok" = 1 ] && verdict="PASS (fails as expected)"
    printf 'matrix: %-22s %-4s %3ss  %s\n' "$cn" "$res" "$(( $(date +%s) - t0 ))" "$cell_note"
    echo "| $cn | $expect | $verdict | $cell_note |" >> "$results"
}

for c in "${cells[@]}"; do
    # shellcheck disable=SC2086
    set -- $c
    if [ -n "$only" ] && ! echo "$1" | grep -qE "$only"; then continue; fi
    run_cell "$@"
done
echo "matrix: $npass passed, $nfail failed in $(( $(date +%s) - t_matrix )) s (table: $results)"
[ $nfail = 0 ] && [ $keep = 0 ] && rm -rf "$out"
[ $nfail = 0 ]
