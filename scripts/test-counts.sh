#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# scripts/test-counts.sh DIR STAGE: what the automake tests under DIR did,
# from their .trs files, as one line
#   == STAGE: N passed, N failed, N skipped, N expected failures, N unexpected passes ==
# (ERROR, a test that exited 99, counts as failed).  A skip is only
# accepted for a reason tests/skip-reasons documents as the machine's
# (XS_SKIP_REASONS: another list): every skipped test's .log must have a
# line "SKIP: <reason>" and the reason must match one of its EREs, so a
# test that did not run because a package or a setup step is missing fails
# the stage instead of passing unseen.  Exit 0 only if nothing failed, no
# test passed unexpectedly, every skip is documented and some test ran.
set -eu
[ $# = 2 ] || { echo "usage: $0 DIR STAGE" >&2; exit 2; }
dir=$1 stage=$2
top=$(cd "$(dirname "$0")/.." && pwd)
reasons=${XS_SKIP_REASONS:-$top/tests/skip-reasons}
[ -r "$reasons" ] || { echo "test-counts: no $reasons" >&2; exit 2; }
pats=$(mktemp)
trap 'rm -f "$pats"' EXIT
# the EREs without the comments and blank lines
grep -v '^[[:space:]]*\(#\|$\)' "$reasons" >"$pats" || true

pass=0 fail=0 skip=0 xfail=0 xpass=0 bad=0
trs=$(find "$dir" -name '*.trs' 2>/dev/null | sort)
for f in $trs; do
    # a .trs has one :test-result: line per result (several for TAP)
    for r in $(sed -n 's/^:test-result: *\([A-Z]*\).*/\1/p' "$f"); do
        case $r in
        PASS) pass=$((pass + 1)) ;;
        FAIL | ERROR) fail=$((fail + 1)) ;;
        XFAIL) xfail=$((xfail + 1)) ;;
        XPASS) xpass=$((xpass + 1)) ;;
        SKIP)
            skip=$((skip + 1))
            log=${f%.trs}.log t=${f%.trs}
            t=${t#"$dir"/}
            n=$(grep -c '^SKIP: ' "$log" 2>/dev/null || true)
            if [ "${n:-0}" != 1 ]; then
                echo "test-counts: $stage: $t skipped with ${n:-0} \"SKIP: <reason>\" lines in its log (want exactly 1)"
                bad=$((bad + 1))
                continue
            fi
            why=$(sed -n 's/^SKIP: //p' "$log")
            if [ -s "$pats" ] && printf '%s\n' "$why" | grep -Eq -f "$pats"; then
                echo "test-counts: $stage: $t skipped: $why"
            else
                echo "test-counts: $stage: $t skipped for an undocumented reason (not in tests/skip-reasons): $why"
                bad=$((bad + 1))
            fi
            ;;
        *) echo "test-counts: $stage: $f: unknown result $r"; bad=$((bad + 1)) ;;
        esac
    done
done
echo "== $stage: $pass passed, $fail failed, $skip skipped, $xfail expected failures, $xpass unexpected passes =="
if [ -z "$trs" ]; then
    echo "test-counts: $stage: no .trs file under $dir: no test ran"
    exit 1
fi
[ $fail = 0 ] && [ $xpass = 0 ] && [ $bad = 0 ]
