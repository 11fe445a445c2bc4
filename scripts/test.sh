#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The full test suite: install dependencies, then
#   1. a normal build (gcc, -Werror) and `make check`
#   2. an ASan+UBSan build and `make check`
#   3. a ThreadSanitizer build and the threaded verbs tests
#   4. a short libFuzzer run of every harness
#   5. `make distcheck`
#   6. the siw interop matrix in a QEMU guest (`make check-interop`)
# Test logs of failures are printed, and after each stage that runs tests a
# line "== STAGE: N passed, N failed, N skipped, N expected failures, N
# unexpected passes ==" (scripts/test-counts.sh).  A skip fails its stage
# unless tests/skip-reasons documents its reason as the machine's (not
# root, no KVM, ...): as root with the dependencies installed nothing may
# skip.  Exit status 0 only if all pass.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"

# print_failed DIR: the log of every failed test under DIR
print_failed() {
    for f in $(find "$1" -name '*.trs' 2>/dev/null); do
        if grep -q '^:test-result: \(FAIL\|ERROR\)' "$f"; then
            echo "---- ${f%.trs}.log"; tail -150 "${f%.trs}.log"
        fi
    done
}

# counts DIR STAGE: the stage's counts line; 1 on a failure or a skip for
# a reason tests/skip-reasons does not document
counts() {
    "$top/scripts/test-counts.sh" "$1" "$2"
}

run_check() {
    stage=$1 bdir=$2; shift 2
    "$top/scripts/build.sh" "$bdir" "$@"
    rc=0
    make -C "$bdir" -s -j"$(nproc)" check || rc=1
    [ $rc = 0 ] || print_failed "$bdir/tests"
    counts "$bdir/tests" "$stage" || rc=1
    [ $rc = 0 ] || exit 1
}

echo "== build + make check =="
run_check "make check" "$top/build"

echo "== ASan+UBSan build + make check =="
san="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_check "ASan+UBSan make check" "$top/build-asan" CFLAGS="-O1 -g $san" LDFLAGS="$san"

echo "== TSan build (gcc) + the threaded verbs tests =="
# libxsock's tests are left out: libtsan's poll interceptor calls libxsock's
# poll and TSan then loses track of the locks taken inside it (false
# reports); but for the fork-from-a-signal-handler test, which runs itself
# again with libxsock ahead of libtsan (tests/test-xsock-fork-signal.c).
# die_after_fork=0: a forked child that uses the verbs starts its own engine
# thread (xsock(7) FORK), which TSan refuses by default.
tsan="-fsanitize=thread -fno-omit-frame-pointer"
"$top/scripts/build.sh" "$top/build-tsan" CFLAGS="-O1 -g $tsan" LDFLAGS="$tsan"
rc=0
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 die_after_fork=0" make -C "$top/build-tsan" -s -j"$(nproc)" check \
    TESTS="tests/test-cm-basic tests/test-cm-e2e tests/test-verbs-objects tests/test-stag-security \
tests/test-verbs-errors tests/test-verbs-faults tests/test-verbs-fork tests/test-malicious-peer tests/test-cm-close tests/test-cm-settle \
tests/test-verbs-srq tests/test-roce-rc tests/test-xsock-fork-signal" || rc=1
[ $rc = 0 ] || print_failed "$top/build-tsan/tests"
counts "$top/build-tsan/tests" "TSan make check" || rc=1
[ $rc = 0 ] || exit 1

echo "== short fuzz run (libFuzzer, each harness ${FUZZ_SECONDS:-30} s) =="
rc=0
FUZZ_SECONDS=${FUZZ_SECONDS:-30} FUZZ_JOBS="$(nproc)" FUZZ_BUILD="$top/build-fuzz" "$top/scripts/fuzz.sh" || rc=$?
# 77 (no clang, or it cannot link libFuzzer) is a failure too:
# scripts/install-deps.sh installs clang and libclang-rt-14-dev
if [ "$rc" = 77 ]; then
    echo "FAIL: scripts/fuzz.sh found no clang/libFuzzer (scripts/install-deps.sh installs clang and libclang-rt-14-dev)"
fi
[ "$rc" = 0 ] || exit 1

echo "== make distcheck =="
# distcheck keeps its build tree when a test fails: print that test's log.
# Its `make distclean` removes the .trs files before it ends: the test
# driver wrapper keeps a copy of every .log and .trs to count them.
keep=$top/build/distcheck-results
rm -rf "$keep"
rc=0
drv="$top/scripts/test-keep.sh $keep /bin/sh $top/build-aux/test-driver"
make -C "$top/build" -s distcheck LOG_DRIVER="$drv" TEST_LOG_DRIVER="$drv" || rc=1
[ $rc = 0 ] || print_failed "$keep"
counts "$keep" "distcheck" || rc=1
[ $rc = 0 ] || exit 1

echo "== siw interop matrix: xsock against Linux siw in a QEMU guest (make check-interop) =="
# Prepares the guest once (apt packages, siw.ko from linux-source, Debian's
# kernel image, an initramfs; cached in /var/cache/xsock-interop), then runs
# every cell of docs/interop.md.  It needs root (the guest cache, apt).
# The cells are no automake tests: their counts come from the tables.
if [ "$(id -u)" != 0 ]; then
    # not root: documented machine-level (tests/skip-reasons)
    echo "interop matrix SKIPPED: not root"
    echo "== interop: 0 passed, 0 failed, 1 skipped, 0 expected failures, 0 unexpected passes =="
else
    io=$top/build/interop ior=$top/build/interop-roce
    rm -rf "$ior"
    rc=0
    make -C "$top/build" -s check-interop INTEROP_ARGS="--out $io" ROCE_ARGS="--out $ior" || rc=1
    for c in $(awk -F' *[|] *' '$4 ~ /^FAIL/ {print $2}' "$io/matrix.md" 2>/dev/null); do
        echo "---- $c"; tail -40 "$io/$c.log"
    done
    # matrix.md: | cell | expected | result | note |, roce.md: | cell | result | note |
    { awk -F' *[|] *' 'NR > 2 { print ($4 ~ /fails as expected/) ? "XFAIL" : ($4 ~ /^PASS/) ? "PASS" : "FAIL" }' \
          "$io/matrix.md" 2>/dev/null
      awk -F' *[|] *' 'NR > 2 { print ($3 ~ /^PASS/) ? "PASS" : "FAIL" }' "$ior/roce.md" 2>/dev/null
    } | awk '{ n[$1]++ }
        END { printf "== interop: %d passed, %d failed, 0 skipped, %d expected failures, 0 unexpected passes ==\n",
                     n["PASS"], n["FAIL"], n["XFAIL"] }'
    [ $rc = 0 ] || exit 1
fi

echo "== all tests passed =="
