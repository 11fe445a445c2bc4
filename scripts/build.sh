#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Configure and build xsock out of tree: scripts/build.sh [BUILDDIR] [configure args...]
# (warnings are errors here: --enable-werror).
# Regenerates the autotools files when needed.  Idempotent.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bdir=${1:-$top/build}
[ $# -gt 0 ] && shift
if [ ! -x "$top/configure" ] || [ "$top/configure.ac" -nt "$top/configure" ]; then
    (cd "$top" && autoreconf -fi)
fi
mkdir -p "$bdir"
cd "$bdir"
if [ ! -f Makefile ]; then
    "$top/configure" -q --enable-werror "$@"
fi
make -s -j"$(nproc)"
