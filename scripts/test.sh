#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The full test suite: install dependencies, then
#   1. a normal build (gcc, -Werror) and `make check`
#   2. an ASan+UBSan build and `make check`
#   3. a ThreadSanitizer build and the threaded verbs tests
#   4. a short libFuzzer run of every harness
#   5. `make distcheck`
#   6. the siw interop matrix in a QEMU guest (`make check-interop`)
# Test logs of failures are printed.  Exit status 0 only if all pass.
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

run_check() {
    bdir=$1; shift
    "$top/scripts/build.sh" "$bdir" "$@"
    if ! make -C "$bdir" -s -j"$(nproc)" check; then
        print_failed "$bdir/tests"
        exit 1
    fi
}

echo "== build + make check =="
run_check "$top/build"

echo "== ASan+UBSan build + make check =="
san="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_check "$top/build-asan" CFLAGS="-O1 -g $san" LDFLAGS="$san"

echo "== TSan build (gcc) + the threaded verbs tests =="
# libxsock's tests are left out: libtsan's poll interceptor calls libxsock's
# poll and TSan then loses track of the locks taken inside it (false reports).
# die_after_fork=0: a forked child that uses the verbs starts its own engine
# thread (xsock(7) FORK), which TSan refuses by default.
tsan="-fsanitize=thread -fno-omit-frame-pointer"
"$top/scripts/build.sh" "$top/build-tsan" CFLAGS="-O1 -g $tsan" LDFLAGS="$tsan"
if ! TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 die_after_fork=0" make -C "$top/build-tsan" -s -j"$(nproc)" check \
    TESTS="tests/test-cm-basic tests/test-cm-e2e tests/test-verbs-objects tests/test-stag-security \
tests/test-verbs-errors tests/test-verbs-faults tests/test-verbs-fork tests/test-malicious-peer tests/test-cm-close tests/test-cm-settle \
tests/test-verbs-srq tests/test-roce-rc"; then
    print_failed "$top/build-tsan/tests"
    exit 1
fi

echo "== short fuzz run (libFuzzer, each harness ${FUZZ_SECONDS:-30} s) =="
rc=0
FUZZ_SECONDS=${FUZZ_SECONDS:-30} FUZZ_JOBS="$(nproc)" FUZZ_BUILD="$top/build-fuzz" "$top/scripts/fuzz.sh" || rc=$?
[ "$rc" = 0 ] || [ "$rc" = 77 ] || exit 1   # 77: no clang/libFuzzer

echo "== make distcheck =="
# distcheck keeps its build tree when a test fails: print that test's log
if ! make -C "$top/build" -s distcheck; then
    print_failed "$top/build"/xsock-*/_build
    exit 1
fi

echo "== siw interop matrix: xsock against Linux siw in a QEMU guest (make check-interop) =="
# Prepares the guest once (apt packages, siw.ko from linux-source, Debian's
# kernel image, an initramfs; cached in /var/cache/xsock-interop), then runs
# every cell of docs/interop.md.  It needs root (the guest cache, apt).
if [ "$(id -u)" != 0 ]; then
    echo "interop matrix SKIPPED: not root"
elif ! make -C "$top/build" -s check-interop INTEROP_ARGS="--out $top/build/interop"; then
    for c in $(awk -F' *[|] *' '$4 ~ /^FAIL/ {print $2}' "$top/build/interop/matrix.md" 2>/dev/null); do
        echo "---- $c"; tail -40 "$top/build/interop/$c.log"
    done
    exit 1
fi

echo "== all tests passed =="
