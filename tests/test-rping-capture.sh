#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# A capture of Debian's unmodified rping over xsock, decoded by tshark's
# iwarp_mpa / iwarp_ddp_rdmap dissectors: zero malformed frames and every
# CRC good, with MPA CRC on (rev 2, rev 1) and in RFC 6581 peer-to-peer mode
# with a Write and a Read RTR, where the initiator's first FPDU must be that
# zero-length RTR (and, for Read, the responder's first a zero-length Read
# Response).  Skips (77) only where tcpdump/tshark cannot capture.
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
command -v rping >/dev/null 2>&1 || { echo "SKIP: rping (rdmacm-utils) not installed"; exit 77; }
xs_need_capture

tmp=$(mktemp -d)
cleanup() {
    [ -n "$xs_tdpid" ] && kill "$xs_tdpid" 2>/dev/null
    [ -n "${XS_KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

fail=0
run_case() {
    name=$1; shift
    port=$(xs_free_port)
    pcap=$tmp/$name.pcap
    xs_capture_start "$pcap" "$tmp/$name.tcpdump" "$port" || exit 99
    timeout 60 "$XS_RUN" "$@" rping -s -a 127.0.0.1 -p "$port" -C 20 -S 65535 >"$tmp/$name.srv" 2>&1 &
    spid=$!
    if ! xs_wait_listen "$port"; then
        echo "FAIL $name: server did not listen"; cat "$tmp/$name.srv"; xs_reap $spid; fail=1
    else
        timeout 60 "$XS_RUN" "$@" rping -c -a 127.0.0.1 -p "$port" -V -C 20 -S 65535 >"$tmp/$name.cli" 2>&1
        crc=$?
        wait $spid; src=$?
        [ $crc -eq 0 ] && [ $src -eq 0 ] || { echo "FAIL $name: rping client rc $crc server rc $src"; tail -3 "$tmp/$name.cli" "$tmp/$name.srv"; fail=1; }
    fi
    xs_capture_stop "$tmp/$name.tcpdump" # drops: the decode checks below decide

    ts="xs_tshark -r $pcap"
    # FPDUs, not packets: one segment may carry several
    fpdus=$($ts -Y iwarp_mpa.fpdu -T fields -E occurrence=a -E aggregator=' ' -e iwarp_mpa.ulpdulength 2>/dev/null | wc -w)
    malformed=$($ts -Y '_ws.malformed || _ws.expert.severity == error' 2>/dev/null | wc -l)
    badcrc=$($ts -V 2>/dev/null | grep -c 'Bad CRC32')
    goodcrc=$($ts -V 2>/dev/null | grep -c 'Good CRC32')
    req=$($ts -Y iwarp_mpa.req 2>/dev/null | wc -l)
    rep=$($ts -Y iwarp_mpa.rep 2>/dev/null | wc -l)
    # each segment's first FPDU: source port, RDMAP opcode, ULPDU length
    $ts -Y iwarp_rdma -T fields -E occurrence=f -e tcp.srcport -e iwarp_rdma.opcode \
        -e iwarp_mpa.ulpdulength 2>/dev/null >"$tmp/$name.ops"
    echo "$name: FPDUs $fpdus; malformed/errors $malformed; CRC good $goodcrc bad $badcrc; req $req rep $rep"
    echo "$name: tcpdump: $(grep -h 'packets' "$tmp/$name.tcpdump" | tr '\n' ';')"
    # rping -C 20: 20 x (Send, Read, Send, Write, Send) + disconnect: well over 100 FPDUs
    [ "$fpdus" -ge 100 ] || { echo "FAIL $name: only $fpdus FPDUs decoded"; fail=1; }
    [ "$malformed" -eq 0 ] || { echo "FAIL $name: malformed frames"; $ts -Y '_ws.malformed || _ws.expert.severity == error' | head; fail=1; }
    [ "$badcrc" -eq 0 ] && [ "$goodcrc" -eq "$fpdus" ] || { echo "FAIL $name: CRC good $goodcrc of $fpdus, bad $badcrc"; fail=1; }
    [ "$req" -eq 1 ] && [ "$rep" -eq 1 ] || { echo "FAIL $name: MPA Request/Reply not decoded"; fail=1; }
    case "$*" in
    *"--p2p write"*)
        first=$(awk -v p="$port" '$1 != p {print $2 "/" $3; exit}' "$tmp/$name.ops")
        # a zero-length Write: the ULPDU is the 14-octet tagged header
        [ "$first" = "0x00/14" ] || { echo "FAIL $name: initiator's first FPDU is opcode $first, not a Write RTR"; fail=1; } ;;
    *"--p2p read"*)
        first=$(awk -v p="$port" '$1 != p {print $2; exit}' "$tmp/$name.ops")
        rfirst=$(awk -v p="$port" '$1 == p {print $2 "/" $3; exit}' "$tmp/$name.ops")
        [ "$first" = "0x01" ] || { echo "FAIL $name: initiator's first FPDU is opcode $first, not a Read RTR"; fail=1; }
        [ "$rfirst" = "0x02/14" ] || { echo "FAIL $name: responder's first FPDU is opcode $rfirst, not the Read Response"; fail=1; } ;;
    esac
}

run_case rev2-crc --crc
run_case rev1-crc --crc --rev 1
run_case rev2-crc-p2p-write --crc --p2p write
run_case rev2-crc-p2p-read --crc --p2p read
exit $fail
