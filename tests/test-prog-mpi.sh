#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Open MPI (Debian's 4.1) over IWARP sockets: mpirun under
# `xsock-run --iwarp`, the ob1 PML over the TCP BTL, so every rank's
# connections (and mpirun's own) are IWARP sockets.  XS_MPI_RUNS runs
# (default 5; `make check-soak-mpi` runs 50), alternately 2 and 4 ranks,
# of tests/mpi-pingpong.c (a checked ping-pong of 8 octets to 256 KiB and 100
# Allreduce sums): every run must print its "ok", and the stack's log must
# show the ranks' connections over iWARP with the ping-pong's octets.
# A plain TCP run first is the control.  A missing Open MPI is a failure.
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
for t in mpicc mpirun; do
    command -v $t >/dev/null 2>&1 || { echo "FAIL: no $t (scripts/install-deps.sh: openmpi-bin, libopenmpi-dev)"; exit 1; }
done
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
xs_scratch
: >"$tmp/stack.log"
env -u LD_PRELOAD mpicc -O2 -o "$tmp/pp" "${XS_TOP_SRCDIR:-.}/tests/mpi-pingpong.c" ||
    { echo "FAIL: mpicc"; exit 1; }
# mpirun as root may run; 4 ranks on 2 cores
cat >"$tmp/mpi.sh" <<MPI
exec timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe -np "\$1" --mca pml ob1 \\
    --mca btl tcp,self "$tmp/pp"
MPI
out=$(env -u LD_PRELOAD sh "$tmp/mpi.sh" 2 2>&1)
case $out in
*"ok 2 ranks"*) echo "plain TCP control: ok" ;;
*) echo "FAIL: the plain TCP control run: $out"; exit 1 ;;
esac
runs=${XS_MPI_RUNS:-5} bad=0
for i in $(seq 1 "$runs"); do
    np=$((i % 2 ? 2 : 4))
    n0=$(wc -l <"$tmp/stack.log")
    iwarp_run sh "$tmp/mpi.sh" $np >"$tmp/run.$i" 2>&1
    rc=$?
    # the ranks' connections: iWARP, and the ping-pong's 2 x 50 x 270 KiB
    stat=$(tail -n +"$((n0 + 1))" "$tmp/stack.log" | grep '"argv0": "pp"' | grep '"transport": "iwarp"' |
        sed 's/.*"tx_octets": \([0-9]*\).*/\1/' | awk '{ n++; s += $1 } END { printf "%d %d", n, s }')
    set -- $stat
    if [ $rc = 0 ] && grep -q "ok $np ranks" "$tmp/run.$i" && [ "${1:-0}" -ge 2 ] &&
        [ "${2:-0}" -ge 26000000 ]; then
        echo "ok   run $i, $np ranks: $1 iWARP connections of the ranks, $2 octets sent"
    else
        echo "FAIL run $i, $np ranks: rc $rc, ${1:-0} iWARP connections, ${2:-0} octets"
        tail -n 15 "$tmp/run.$i"; bad=$((bad + 1))
    fi
done
echo "$((runs - bad)) of $runs runs ok"
[ $bad = 0 ]
