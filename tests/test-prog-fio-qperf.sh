#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Debian's unmodified fio (rdma ioengine: write, read and send verbs; send
# data-checked by the server with fio's crc32c verify) and qperf -cm1 (the
# rc_* tests iWARP can run), both ends under xsock-run on loopback.
# Prints the figures: fio MiB/s per verb, qperf bandwidth and latency.
set -u
XS_TMP=$(mktemp /tmp/xsock-fioqperf.XXXXXX)
trap 'rm -f "$XS_TMP" "$XS_TMP".*' EXIT
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
fail=0

if command -v fio >/dev/null 2>&1; then
    for verb in write read send; do
        port=$(xs_free_port)
        # the server (a read job, no hostname) listens; the client names it.
        # Send carries the data: fio's headers written by the client are
        # checked by the server (write/read place into the server's buffers,
        # which fio does not look at)
        vs=""; vc=""
        [ $verb = send ] && vs="--verify=crc32c --verify_state_save=0" &&
            vc="--verify=crc32c --do_verify=0 --verify_state_save=0"
        timeout -k 5 60 "$XS_RUN" fio --name=srv --ioengine=rdma --port="$port" --rw=read \
            --bs=64k --size=64m --iodepth=8 $vs >"$XS_TMP.s" 2>&1 &
        spid=$!
        if ! xs_wait_listen "$port"; then
            echo "FAIL fio $verb: server did not listen"; cat "$XS_TMP.s"; xs_reap $spid; fail=1
            continue
        fi
        timeout -k 5 60 "$XS_RUN" fio --name=cli --ioengine=rdma --hostname=127.0.0.1 --port="$port" \
            --verb=$verb --rw=write --bs=64k --size=64m --iodepth=8 $vc >"$XS_TMP.c" 2>&1
        crc=$?
        wait $spid; src=$?
        bw=$(sed -n 's/^ *WRITE: bw=\([0-9.]*[KMG]iB\/s\).*/\1/p' "$XS_TMP.c")
        if [ $crc -ne 0 ] || [ $src -ne 0 ] || [ -z "$bw" ] ||
           ! grep -q 'err= 0' "$XS_TMP.c" || ! grep -q 'err= 0' "$XS_TMP.s" ||
           grep -Eq 'verify:|cq completion status' "$XS_TMP.c" "$XS_TMP.s"; then
            echo "FAIL fio $verb: client rc $crc, server rc $src"
            tail -15 "$XS_TMP.c"; tail -15 "$XS_TMP.s"; fail=1
        else
            echo "ok fio rdma verb=$verb: $bw${vs:+ (crc32c verified by the server)}"
        fi
    done
else
    echo "FAIL: fio missing (scripts/install-deps.sh installs it)"; fail=1
fi

if command -v qperf >/dev/null 2>&1; then
    port=$(xs_free_port)
    timeout -k 5 120 "$XS_RUN" qperf -lp "$port" >"$XS_TMP.qs" 2>&1 &
    spid=$!
    if ! xs_wait_listen "$port"; then
        echo "FAIL qperf: server did not listen"; cat "$XS_TMP.qs"; fail=1
    else
        # rc_rdma_write_bw/rc_rdma_write_lat post RDMA Write with Immediate
        # and rc_*_mr atomics: RFC 7306, agreed between two xsock ends
        # Debian's qperf 0.4.11 tells the client its RDMA port before its
        # rdma_listen (fixed upstream: "Fix rdmacm race", 118a571); the
        # stack dials a refused connect again for 500 ms, so no retry here
        qrun() {
            timeout -k 5 30 "$XS_RUN" qperf -lp "$port" -cm1 -t 1 127.0.0.1 "$1" >"$XS_TMP.q" 2>&1
        }
        for t in rc_bw rc_bi_bw rc_lat rc_rdma_read_bw rc_rdma_read_lat rc_rdma_write_poll_lat \
                 rc_rdma_write_bw rc_rdma_write_lat rc_compare_swap_mr rc_fetch_add_mr; do
            qrun $t
            rc=$?
            fig=$(sed -n 's/^ *\(bw\|latency\|msg_rate\) *= *\([0-9.]* [A-Za-z/]*\).*/\1 \2/p' "$XS_TMP.q")
            if [ $rc -ne 0 ] || [ -z "$fig" ]; then
                echo "FAIL qperf $t: rc $rc"; cat "$XS_TMP.q"; fail=1
            else
                echo "ok qperf -cm1 $t: $fig"
            fi
        done
    fi
    xs_reap $spid
else
    echo "FAIL: qperf missing (scripts/install-deps.sh installs it)"; fail=1
fi

exit $fail
