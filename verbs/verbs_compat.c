/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The rdma-core entry points that a software iWARP device answers without
 * objects of its own: fork status, ECE, object import, dma-buf MRs, MR
 * re-registration, the in-order query and the P_Key index.  Carried here
 * because rdma-core's own versions reach into its private per-context ops
 * table (priv->ops), which an xsock context does not have: a preloaded
 * program calling them would crash inside libibverbs.  Each answers as
 * Linux siw does (libiwarp(7) lists them). */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <stddef.h>

#include "verbs/verbs_priv.h"

/* No pinned pages, no MADV_DONTFORK: fork needs no preparation. */
XS_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

/* Enhanced Connection Establishment is an RoCE (CM REQ/REP) feature. */
XS_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return qp && ece ? EOPNOTSUPP : EINVAL;
}

XS_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return qp && ece ? EOPNOTSUPP : EINVAL;
}

/* Import shares objects through a uverbs command fd: there is none. */
XS_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	errno = cmd_fd < 0 ? EBADF : EOPNOTSUPP;
	return NULL;
}

XS_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	errno = context ? EOPNOTSUPP : EINVAL;
	return NULL;
}

XS_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	errno = pd ? EOPNOTSUPP : EINVAL;
	return NULL;
}

XS_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	errno = context ? EOPNOTSUPP : EINVAL;
	return NULL;
}

/* Nothing can have been imported: an object of ours passed here stays
 * valid (it is released by its own dealloc/dereg call, not leaked twice). */
XS_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
}

XS_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
}

XS_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
}

/* dma-buf memory is device memory: a software RNIC has none (siw: the
 * kernel says EOPNOTSUPP). */
XS_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					   uint64_t iova, int fd, int access)
{
	errno = pd && length ? EOPNOTSUPP : EINVAL;
	return NULL;
}

/* rdma-core's argument checks, then siw's answer (it has no
 * rereg_user_mr): EOPNOTSUPP, the caller deregisters and registers anew. */
XS_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
			   size_t length, int access)
{
	if (!mr || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) || !flags ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!length || !addr)) ||
	    ((flags & IBV_REREG_MR_CHANGE_PD) && !pd) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	errno = EOPNOTSUPP;
	return IBV_REREG_MR_ERR_INPUT;
}

/* 0: placement order is not promised to the application (what rdma-core
 * answers for a device without the query, siw among them). */
XS_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	return 0;
}

/* The one P_Key, the default full-membership 0xffff, at index 0. */
XS_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	if (!context || port_num != XS_PORT_NUM || pkey != htobe16(0xffff)) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}
