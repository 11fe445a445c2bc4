#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# scripts/test-keep.sh DIR DRIVER [ARGS...]: an automake LOG_DRIVER that
# runs DRIVER ARGS (the real test-driver and automake's arguments), then
# copies the test's .log and .trs to DIR (the same relative path).  For
# `make distcheck`, whose distclean removes them before it ends
# (scripts/test.sh counts them with scripts/test-counts.sh).
set -u
keep=$1; shift
log= trs= prev=
for a in "$@"; do
    case $prev in
    --log-file) log=$a ;;
    --trs-file) trs=$a ;;
    esac
    prev=$a
done
rc=0
"$@" || rc=$?
for f in "$log" "$trs"; do
    [ -n "$f" ] && [ -f "$f" ] || continue
    mkdir -p "$keep/$(dirname "$f")" && cp "$f" "$keep/$f"
done
exit $rc
