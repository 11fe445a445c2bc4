#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The main job: install dependencies, build, and show xsock doing real work:
#  1. the protocol core: an MPA/DDP/RDMAP session over a real loopback TCP
#     connection (Send, RDMA Write, RDMA Read, Terminate), every byte verified;
#  2. Debian's unmodified rping (rdmacm-utils) on both ends under xsock-run,
#     MPA CRC on, data verified (-V);
#  3. Debian's unmodified iperf3 with its TCP sockets carried over iWARP
#     (xsock-run --iwarp: libxsock, the rsockets protocol over the stack);
#  4. an extended sockets program (xsock-rdma-demo): a descriptor exchanged
#     over the socket, then a 16 MiB RDMA Write checked by SHA-256;
#  5. the benchmarks: raw TCP against xsock in the same run, with ratios
#     (verbs: scripts/bench.sh; sockets: scripts/bench-sockets.sh).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
"$top/scripts/build.sh" "$top/build"
echo "== xsock wire demo: CRC on, Markers both ways =="
"$top/build/tools/xsock-wiredemo" --crc --markers "$@"
echo "== xsock wire demo: CRC on, no Markers (what Linux siw speaks) =="
"$top/build/tools/xsock-wiredemo" --crc "$@"

echo "== Debian's unmodified rping over xsock (xsock-run --crc) =="
port=$(python3 "$top/scripts/free-port.py")
timeout 60 "$top/build/tools/xsock-run" --crc rping -s -a 127.0.0.1 -p "$port" -C 10 -S 100 &
spid=$!
sleep 1
timeout 60 "$top/build/tools/xsock-run" --crc rping -c -a 127.0.0.1 -p "$port" -v -V -C 10 -S 100
wait "$spid"

echo "== Debian's unmodified iperf3 over IWARP sockets (xsock-run --iwarp) =="
port=$(python3 "$top/scripts/free-port.py")
timeout 60 "$top/build/tools/xsock-run" --iwarp iperf3 -s -1 -p "$port" >/dev/null &
spid=$!
sleep 1
timeout 60 "$top/build/tools/xsock-run" --iwarp iperf3 -c 127.0.0.1 -p "$port" -t 3
wait "$spid"

echo "== an extended sockets program: RDMA Write over an IWARP socket =="
"$top/build/tools/xsock-rdma-demo" -s 16777216

echo "== framing benchmark =="
"$top/build/tools/xsock-bench-framing"
echo "== raw TCP vs xsock (scripts/bench.sh) =="
XS_BENCH_REPS=${XS_BENCH_REPS:-3} "$top/scripts/bench.sh" "$top/build"
echo "== raw TCP vs IWARP sockets (scripts/bench-sockets.sh) =="
XS_BENCH_REPS=${XS_BENCH_REPS:-3} "$top/scripts/bench-sockets.sh" "$top/build"
