#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# libiwarp exports the verbs entry points under rdma-core's version nodes
# (a preload is only used if the versions match: see /work/shared/notes).
# The rsocket calls (verbs/cm_rsocket.c) and the multicast refusals too.
so="${XS_TOP_BUILDDIR:-.}/verbs/.libs/libiwarp.so"
# nm is binutils' (build-essential, scripts/install-deps.sh)
command -v nm >/dev/null 2>&1 || { echo "FAIL: nm missing (scripts/install-deps.sh installs it)"; exit 1; }
[ -f "$so" ] || { echo "no $so"; exit 99; }
syms=$(nm -D --defined-only --with-symbol-versions "$so") || exit 99
fail=0
for s in ibv_get_device_list@@IBVERBS_1.1 ibv_open_device@@IBVERBS_1.1 \
	ibv_query_port@@IBVERBS_1.1 ibv_reg_mr@@IBVERBS_1.1 ibv_dereg_mr@@IBVERBS_1.1 \
	ibv_create_qp@@IBVERBS_1.1 ibv_modify_qp@@IBVERBS_1.1 ibv_get_cq_event@@IBVERBS_1.1 \
	ibv_create_comp_channel@@IBVERBS_1.0 ibv_rate_to_mult@@IBVERBS_1.0 \
	ibv_read_sysfs_file@@IBVERBS_1.0 ibv_get_device_index@@IBVERBS_1.9 \
	ibv_qp_to_qp_ex@@IBVERBS_1.6 ibv_reg_mr_iova@@IBVERBS_1.7 \
	ibv_reg_mr_iova2@@IBVERBS_1.8 ibv_query_gid_type@@IBVERBS_PRIVATE_34 \
	_ibv_query_gid_ex@@IBVERBS_1.11 ibv_is_fork_initialized@@IBVERBS_1.13 \
	rsocket@@RDMACM_1.0 raccept@@RDMACM_1.0 rpoll@@RDMACM_1.0 riomap@@RDMACM_1.0 \
	rdma_join_multicast@@RDMACM_1.0 rdma_join_multicast_ex@@RDMACM_1.1; do
	if ! printf '%s\n' "$syms" | grep -q " T $s\$"; then
		echo "missing export: $s"
		fail=1
	fi
done
# every rdma-core entry point we export carries the version Debian's
# libibverbs/librdmacm give it (a wrong node is silently not used)
for deb in /usr/lib/*/libibverbs.so.1 /usr/lib/*/librdmacm.so.1; do
	[ -f "$deb" ] || continue
	debsyms=$(nm -D --defined-only --with-symbol-versions "$deb" | awk '{print $3}')
	for s in $(printf '%s\n' "$syms" | awk '$2 == "T" {print $3}' | grep -E '@@(IBVERBS|RDMACM)_'); do
		case "$s" in
		*@@IBVERBS_*) [ "${deb#*libibverbs}" = "$deb" ] && continue ;;
		*@@RDMACM_*) [ "${deb#*librdmacm}" = "$deb" ] && continue ;;
		esac
		if ! printf '%s\n' "$debsyms" | grep -qxF "$s"; then
			echo "export $s: $(basename "$deb") has $(printf '%s\n' "$debsyms" | grep "^${s%%@*}@" | tr '\n' ' ')"
			fail=1
		fi
	done
done
# internals stay hidden
for s in xs_mr_resolve xs_cq_push xs_qp_bind_conn xs_poll_cq; do
	if printf '%s\n' "$syms" | grep -q " $s@"; then
		echo "internal symbol exported: $s"
		fail=1
	fi
done
# an errno's text comes from strerrordesc_np (util/xs_errno.h): strerror and
# everything built on it go through gettext, which takes glibc's locale
# lock; a stack thread holding it across the application's fork left the
# child's next setlocale waiting forever (a postgres backend, pgbench/RoCE)
for lib in "$so" "${XS_TOP_BUILDDIR:-.}/libxsock/.libs/libxsock.so"; do
	[ -f "$lib" ] || { echo "no $lib"; fail=1; continue; }
	bad=$(nm -D --undefined-only "$lib" | awk '{print $2}' | sed 's/@.*//' |
		grep -xE 'strerror|strerror_r|gai_strerror|__xpg_strerror_r|strerror_l|perror|error|error_at_line|v?(err|errx|warn|warnx)|psignal|strsignal')
	if [ -n "$bad" ]; then
		echo "$(basename "$lib") imports $(echo $bad) (gettext's locale lock: use xs_strerror)"
		fail=1
	fi
done
exit $fail
