#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The ABI sweep (issue 13): every function Debian's libibverbs.so.1 and
# librdmacm.so.1 export under a default version, called through the preload
# by tests/test-verbs-sweep (linked against Debian's libraries, run under
# xsock-run) with valid and invalid arguments.  The provider-only
# IBVERBS_PRIVATE_* node is rdma-core's driver interface, not an
# application's: left out.  An export the program has no case for fails the
# test, so a new rdma-core export is not forgotten.
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
prog=${XS_TOP_BUILDDIR:-.}/tests/test-verbs-sweep
command -v nm >/dev/null 2>&1 || { echo "SKIP: no nm"; exit 77; }
[ -x "$prog" ] || { echo "FAIL: $prog missing"; exit 99; }
out=$(mktemp /tmp/xsock-sweep.XXXXXX)
trap 'rm -f "$out" "$out".*' EXIT
fail=0
"$prog" --list | tr " " "\n" | grep . | sort -u >"$out.list"
for lib in libibverbs.so.1 librdmacm.so.1; do
    so=$(ls /usr/lib/*/"$lib" 2>/dev/null | head -1)
    [ -n "$so" ] || { echo "FAIL: Debian's $lib not found"; exit 99; }
    nm -D --defined-only --with-symbol-versions "$so" | awk '$2 == "T" {print $3}' |
        grep '@@' | grep -v '@@IBVERBS_PRIVATE_' | sed 's/@@.*//' >>"$out.exports"
done
sort -u "$out.exports" -o "$out.exports"
missing=$(comm -23 "$out.exports" "$out.list")
if [ -n "$missing" ]; then
    echo "FAIL: exports without a case in the sweep:"; echo "$missing"; fail=1
fi
echo "$(wc -l <"$out.exports") public exports, $(comm -12 "$out.exports" "$out.list" | wc -l) with a case"
timeout 120 "$XS_RUN" "$prog" >"$out.run" 2>&1
rc=$?
cat "$out.run"
if [ $rc -ne 0 ] || ! grep -q '^sweep: .* 0 failures$' "$out.run"; then
    echo "FAIL: the sweep (exit $rc)"; fail=1
fi
# every export printed its line
for name in $(cat "$out.exports"); do
    grep -q "^$name: " "$out.run" || { echo "FAIL: no line for $name"; fail=1; }
done
exit $fail
