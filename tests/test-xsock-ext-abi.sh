#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# libxsock's exports: the interposed libc names unversioned (so they take
# the place of read@GLIBC_2.2.5 etc.), the extended calls under XSOCK_1.0,
# nothing else; and xsock-rdma-demo, the extended example program, runs
# (RDMA Write of 1 MiB and 16 MiB, checked by SHA-256 at the server).
b=${XS_TOP_BUILDDIR:-.}
so="$b/libxsock/.libs/libxsock.so"
# nm is binutils' (build-essential, scripts/install-deps.sh)
command -v nm >/dev/null 2>&1 || { echo "FAIL: nm missing (scripts/install-deps.sh installs it)"; exit 1; }
[ -f "$so" ] || { echo "no $so"; exit 99; }
syms=$(nm -D --defined-only --with-symbol-versions "$so" | awk '$2 == "T" || $2 == "W" {print $3}') || exit 99
fail=0
for s in xsock_reg xsock_dereg xsock_mr_desc xsock_rdesc_encode xsock_rdesc_decode \
	xsock_rdma_write xsock_rdma_read xsock_send_async xsock_recv_async \
	xsock_poll_comp xsock_wait_comp xsock_comp_fd xsock_qp xsock_pd; do
	printf '%s\n' "$syms" | grep -qx "$s@@XSOCK_1.0" || { echo "missing: $s@@XSOCK_1.0"; fail=1; }
done
for s in socket connect accept4 read write recv send poll epoll_wait close dup2 fdopen \
	__read_chk; do
	printf '%s\n' "$syms" | grep -qx "$s" || { echo "not exported unversioned: $s"; fail=1; }
done
other=$(printf '%s\n' "$syms" | grep -v '@@XSOCK_1.0$' | grep -c '@')
[ "$other" = 0 ] || { echo "unexpected versioned exports:"; printf '%s\n' "$syms" | grep '@' | grep -v '@@XSOCK_1.0$'; fail=1; }
printf '%s\n' "$syms" | grep -q '^xsk_' && { echo "internal symbols exported"; fail=1; }

demo="$b/tools/xsock-rdma-demo"
[ -x "$demo" ] || { echo "no $demo"; exit 99; }
for size in 1048576 16777216; do
	out=$(timeout 60 "$demo" -s "$size" 2>&1)
	rc=$?
	printf '%s\n' "$out"
	if [ $rc != 0 ] || ! printf '%s\n' "$out" | grep -q "server: $size bytes placed by RDMA Write, sha256 [0-9a-f]*: match"; then
		echo "xsock-rdma-demo -s $size failed (exit $rc)"
		fail=1
	fi
done
exit $fail
