#!/bin/sh
# The full test suite: install dependencies, then
#   1. a normal build (gcc, -Werror) and `make check`
#   2. an ASan+UBSan build and `make check`
#   3. `make distcheck`
# Test logs of failures are printed.  Exit status 0 only if all pass.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"

run_check() {
    bdir=$1; shift
    "$top/scripts/build.sh" "$bdir" "$@"
    if ! make -C "$bdir" -s -j"$(nproc)" check; then
        for f in $(find "$bdir/tests" -name '*.log' 2>/dev/null); do
            if grep -q '^FAIL\|^ERROR' "${f%.log}.trs" 2>/dev/null; then
                echo "---- $f"; tail -50 "$f"
            fi
        done
        exit 1
    fi
}

echo "== build + make check =="
run_check "$top/build"

echo "== ASan+UBSan build + make check =="
san="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_check "$top/build-asan" CFLAGS="-O1 -g $san" LDFLAGS="$san"

echo "== short fuzz run (libFuzzer, each harness ${FUZZ_SECONDS:-30} s) =="
rc=0
FUZZ_SECONDS=${FUZZ_SECONDS:-30} FUZZ_JOBS="$(nproc)" FUZZ_BUILD="$top/build-fuzz" "$top/scripts/fuzz.sh" || rc=$?
[ "$rc" = 0 ] || [ "$rc" = 77 ] || exit 1   # 77: no clang/libFuzzer

echo "== make distcheck =="
make -C "$top/build" -s distcheck

echo "== all tests passed =="
