#!/bin/sh
# The main job: install dependencies, build, and run the protocol-core demo:
# an MPA/DDP/RDMAP session over a real loopback TCP connection (Send, RDMA
# Write, RDMA Read), with CRC and Markers, every byte verified on arrival.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
"$top/scripts/build.sh" "$top/build"
echo "== xsock wire demo: CRC on, Markers both ways =="
"$top/build/tools/xsock-wiredemo" --crc --markers "$@"
echo "== xsock wire demo: CRC on, no Markers (what Linux siw speaks) =="
"$top/build/tools/xsock-wiredemo" --crc "$@"
echo "== framing benchmark =="
"$top/build/tools/xsock-bench-framing"
