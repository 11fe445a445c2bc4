#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# libxsock without its stack's private calls, as over rdma-core's librdmacm
# (xsock(7) KERNEL STACK), on a machine with no RDMA device:
#   1. XSOCK_STACK_PRIV=0 makes libxsock use libiwarp through the standard
#      calls only (progress by poll(2) on the CM and completion channels,
#      ibv_req_notify_cq/ibv_poll_cq, a close that waits for the sends, the
#      DISCONNECT and the peer's end itself, MAP_SHARED rings): the stream
#      and event tests and a socat transfer must pass that way;
#   2. xsock-run --stack rdma-core preloads libxsock alone, names
#      librdmacm.so.1 and refuses libiwarp's MPA options;
#   3. with rdma-core installed, libxsock finds every call it needs in
#      librdmacm.so.1 and its libibverbs (a connect then fails with ENODEV
#      for want of a device, not for a missing symbol).
# The fork and kernel paths proper run against siw in the interop matrix
# (tests/interop/matrix.sh, the *-k-* cells): libiwarp's fork handling
# cannot stand in for shared kernel objects.
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
b=${XS_TOP_BUILDDIR:-.}
fail=0

# 1. the fallbacks, on libiwarp
out=$(XSOCK_DEBUG=1 XSOCK_STACK_PRIV=0 timeout 60 "$b/tests/test-xsock-events" 2>&1)
rc=$?
if [ $rc != 0 ]; then
    echo "FAIL: test-xsock-events without private calls: rc $rc"; echo "$out" | tail -20; fail=1
elif ! echo "$out" | grep -q 'standard verbs and rdma_cm calls only'; then
    echo "FAIL: XSOCK_STACK_PRIV=0 did not take the standard calls"; fail=1
else
    echo "ok: test-xsock-events, standard calls only"
fi
for t in test-xsock-stream; do
    if XSOCK_STACK_PRIV=0 timeout 300 "$b/tests/$t" > "$b/tests/nopriv-$t.log" 2>&1; then
        echo "ok: $t, standard calls only"
    else
        echo "FAIL: $t without private calls"; tail -20 "$b/tests/nopriv-$t.log"; fail=1
    fi
done
if command -v socat > /dev/null 2>&1; then
    if XSOCK_STACK_PRIV=0 timeout 120 sh "${XS_TOP_SRCDIR:-.}/tests/test-xsock-socat.sh" > "$b/tests/nopriv-socat.log" 2>&1; then
        echo "ok: socat transfer, standard calls only"
    else
        echo "FAIL: socat transfer without private calls"; tail -20 "$b/tests/nopriv-socat.log"; fail=1
    fi
else
    echo "FAIL: socat missing (scripts/install-deps.sh installs it)"; fail=1
fi

# 2. xsock-run --stack rdma-core
# (LD_PRELOAD holds the ASan runtime in a sanitizer build: xsock-run keeps it first)
got=$("$XS_RUN" --stack rdma-core --iwarp sh -c 'echo "$LD_PRELOAD|$XSOCK_IWARP_LIB"')
case $got in
*libiwarp*) echo "FAIL: --stack rdma-core preloads libiwarp: $got"; fail=1 ;;
*libxsock.so.0\|librdmacm.so.1) echo "ok: --stack rdma-core preloads libxsock alone" ;;
*) echo "FAIL: --stack rdma-core: $got"; fail=1 ;;
esac
for bad in "--crc" "--rev 1" "--p2p write" "--markers"; do
    # shellcheck disable=SC2086
    if "$XS_RUN" --stack rdma-core --iwarp $bad true 2> /dev/null; then
        echo "FAIL: --stack rdma-core accepted $bad"; fail=1
    fi
done
if "$XS_RUN" --stack rdma-core true 2> /dev/null; then
    echo "FAIL: --stack rdma-core without a socket option ran"; fail=1
fi

# 3. rdma-core's libraries answer every call libxsock resolves
if ldconfig -p 2>/dev/null | grep -q 'librdmacm.so.1 '; then
    port=$(xs_free_port)
    msg=$(XSOCK_DEBUG=1 timeout 30 "$XS_RUN" --stack rdma-core --iwarp \
        python3 -c "import socket
try: socket.create_connection(('127.0.0.1', $port), 5)
except OSError as e: print('connect:', e)" 2>&1)
    case $msg in
    *"has no "*|*"cannot load"*) echo "FAIL: libxsock over rdma-core: $msg"; fail=1 ;;
    *"standard verbs and rdma_cm calls only"*) echo "ok: every call found in librdmacm.so.1/libibverbs.so.1" ;;
    *) echo "FAIL: libxsock over rdma-core did not load the stack: $msg"; fail=1 ;;
    esac
else
    # librdmacm-dev (scripts/install-deps.sh) brings librdmacm1
    echo "FAIL: librdmacm.so.1 missing (scripts/install-deps.sh installs it)"; fail=1
fi
exit $fail
