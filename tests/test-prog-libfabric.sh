#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Debian's libfabric (issue 13): fi_pingpong over the verbs provider on
# xsock0, both ends under xsock-run on loopback, data checked (-c), all
# sizes (64 B .. 1 MiB):
#   msg         FI_EP_MSG straight on verbs (rdma_cm + RC QP)
#   rdm         FI_EP_RDM, ofi_rxm over verbs (eager, SAR, RDMA Read rendezvous)
#   rdm-tagged  the same with tagged messages
# Every size must report #ack = #sent on both sides; the figures are printed.
set -u
XS_TMP=$(mktemp /tmp/xsock-libfabric.XXXXXX)
trap 'rm -f "$XS_TMP" "$XS_TMP".*' EXIT
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
command -v fi_pingpong >/dev/null 2>&1 || { echo "SKIP: fi_pingpong (libfabric-bin) not installed"; exit 77; }
fail=0
iters=50

# result lines: "1k      50      =50      100k        0.00s     41.46      24.70       0.04"
check_table() {
    n=$(grep -Ec "^[0-9]+[km]? +$iters +=$iters +" "$1")
    [ "$n" = 6 ]
}

# pp NAME FLAGS...
pp() {
    name=$1; shift
    port=$(xs_free_port)
    timeout 60 "$XS_RUN" fi_pingpong -p verbs -c -I "$iters" -B "$port" "$@" >"$XS_TMP.s" 2>&1 &
    spid=$!
    if ! xs_wait_listen "$port"; then
        echo "FAIL $name: server did not listen"; cat "$XS_TMP.s"; xs_reap $spid; fail=1; return
    fi
    timeout 60 "$XS_RUN" fi_pingpong -p verbs -c -I "$iters" -P "$port" "$@" 127.0.0.1 >"$XS_TMP.c" 2>&1
    crc=$?
    wait $spid; src=$?
    if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
        echo "FAIL $name: client rc $crc, server rc $src"
        echo "-- client:"; tail -12 "$XS_TMP.c"; echo "-- server:"; tail -12 "$XS_TMP.s"; fail=1
        return
    fi
    if ! check_table "$XS_TMP.c" || ! check_table "$XS_TMP.s"; then
        echo "FAIL $name: not 6 sizes with #ack = #sent = $iters"
        echo "-- client:"; cat "$XS_TMP.c"; echo "-- server:"; cat "$XS_TMP.s"; fail=1
        return
    fi
    # size: usec/xfer, MB/s (the client's)
    echo "ok fi_pingpong $name: $(awk -v n="$iters" '$2 == n && $3 == "=" n {
        printf "%s%s %s us %s MB/s", sep, $1, $7, $6; sep = ", " }' "$XS_TMP.c")"
}

pp "-e msg -c" -e msg
pp "-e rdm -c" -e rdm
pp "-e rdm -m tagged -c" -e rdm -m tagged
# ofi_rxm's shared receive context: one SRQ for its connections (verbs SRQ)
export FI_OFI_RXM_USE_SRX=1
pp "-e rdm -c, FI_OFI_RXM_USE_SRX=1" -e rdm
pp "-e rdm -m tagged -c, FI_OFI_RXM_USE_SRX=1" -e rdm -m tagged
unset FI_OFI_RXM_USE_SRX
exit $fail
