#!/bin/sh
# Every man page renders without groff warnings.
set -u
top=${XS_TOP_SRCDIR:-.}
command -v groff >/dev/null 2>&1 || { echo "SKIP: no groff"; exit 77; }
fail=0
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
