#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Every man page renders without groff warnings, and its footer names this
# version of xsock (PACKAGE_VERSION, from configure.ac).
set -u
top=${XS_TOP_SRCDIR:-.}
command -v groff >/dev/null 2>&1 || { echo "SKIP: no groff"; exit 77; }
fail=0
ver=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "${XS_TOP_BUILDDIR:-.}/config.h")
[ -n "$ver" ] || { echo "FAIL: no PACKAGE_VERSION in config.h"; exit 1; }
for p in "$top"/man/*.[0-9]; do
    grep -q "^\.TH .* \"xsock $ver\"" "$p" || { echo "FAIL $p: .TH does not say \"xsock $ver\""; fail=1; }
done
for p in "$top"/man/*.[0-9]; do
    [ -e "$p" ] || continue
    out=$(groff -man -Tutf8 -ww -z "$p" 2>&1)
    if [ -n "$out" ]; then
        echo "FAIL $p:"; echo "$out"; fail=1
    else
        echo "ok $p"
    fi
done
exit $fail
