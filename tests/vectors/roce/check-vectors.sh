#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# check-vectors.sh: every rxe vector line parses and its ICRC matches the
# rule in README.md, recomputed by Python's zlib (independent of roce/).
# Exit 77 (skip) without python3.
here=$(dirname "$0")
command -v python3 > /dev/null || { echo "check-vectors: SKIP: no python3"; exit 77; }
exec python3 "$here/pcap2vec.py" check "$here"/*.hex
