#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# scripts/bench.sh with tiny counts: every mode of xsock-bench runs to the
# end and its data checks pass (raw TCP, xsock, xsock with MPA CRC, the
# hand-off benchmark).  The figures are not looked at: speed is judged by
# scripts/bench.sh against raw TCP in the same run, never here.
set -eu
out=$(XS_BENCH_QUICK=1 sh "${XS_TOP_SRCDIR:-.}/scripts/bench.sh" "${XS_TOP_BUILDDIR:-.}" 2>&1) || {
    echo "$out"
    echo "FAIL: bench.sh failed"
    exit 1
}
echo "$out"
for want in "RDMA Write bw 64 KiB" "RDMA Write bw 1 MiB" "Send/Recv 64 B, spin/poll" \
    "Send/Recv 64 B, blocking" "handoff-io_uring"; do
    echo "$out" | grep -q "$want" || { echo "FAIL: no '$want' line"; exit 1; }
done
echo "$out" | grep -q nan && { echo "FAIL: a case gave no figure"; exit 1; }
exit 0
