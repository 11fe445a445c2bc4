#!/bin/sh
# Configure and build xsock out of tree: scripts/build.sh [BUILDDIR] [configure args...]
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
    "$top/configure" -q "$@"
fi
make -s -j"$(nproc)"
