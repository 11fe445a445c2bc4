#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# rdma-core's own test suite (v44's tests/, shipped by Debian's
# python3-pyverbs in /usr/share/doc/rdma-core/tests) under xsock-run: the
# cases issue 30 fixed, each of which must run and pass (a skip fails).
# xsock0 has no sysfs netdev: tests/rdmacore_suite.py gives the rdma_cm
# tests 127.0.0.1; --gid 0 because rdma-core's GID scan drops a GID whose
# last 8 octets are zero (siw's and ours: the MAC first).
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
py=/usr/bin/python3 # the interpreter python3-pyverbs is built for
src=/usr/share/doc/rdma-core/tests
"$py" -c 'import pyverbs.cmid' 2>/dev/null || { echo "FAIL: python3-pyverbs not installed"; exit 99; }
[ -f "$src/run_tests.py" ] || { echo "FAIL: $src (python3-pyverbs) missing"; exit 99; }
command -v gzip >/dev/null 2>&1 || { echo "FAIL: gzip missing"; exit 99; }
tmp=$(mktemp -d /tmp/xsock-rdmacore.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cp -r "$src" "$tmp/tests" && gzip -df "$tmp"/tests/*.gz ||
    { echo "FAIL: cannot unpack $src"; exit 99; }
fail=0
run() { # DEV CASE...
    dev=$1
    shift
    XS_SUITE_DIR=$tmp XS_SUITE_NOSKIP=1 timeout 300 "$XS_RUN" "$py" \
        "${XS_TOP_SRCDIR:-.}/tests/rdmacore_suite.py" --dev "$dev" --gid 0 -v "$@" \
        >"$tmp/out" 2>&1
    rc=$?
    grep -E ' \.\.\. |^(FAIL|ERROR)|Error|^Ran ' "$tmp/out"
    if [ $rc != 0 ]; then
        echo "FAIL: rdma-core's suite on $dev exited $rc"
        tail -40 "$tmp/out"
        fail=1
    fi
}
run xsock0 \
    tests.test_qp.QPTest.test_query_rc_qp \
    tests.test_qp.QPTest.test_create_rc_qp_no_attr \
    tests.test_atomic.AtomicTest.test_atomic_invalid_qp_access \
    tests.test_rdmacm.CMTestCase.test_rdmacm_sync_traffic \
    tests.test_rdmacm.CMTestCase.test_rdmacm_async_traffic \
    tests.test_rdmacm.CMTestCase.test_rdmacm_async_reject_traffic \
    tests.test_rdmacm.CMTestCase.test_rdmacm_async_read \
    tests.test_rdmacm.CMTestCase.test_rdmacm_async_write
run xsock_roce0 \
    tests.test_qp.QPTest.test_query_rc_qp \
    tests.test_atomic.AtomicTest.test_atomic_cmp_and_swap \
    tests.test_atomic.AtomicTest.test_atomic_fetch_and_add \
    tests.test_atomic.AtomicTest.test_atomic_invalid_qp_access \
    tests.test_atomic.AtomicTest.test_atomic_invalid_mr_access \
    tests.test_atomic.AtomicTest.test_atomic_invalid_rkey
exit $fail
