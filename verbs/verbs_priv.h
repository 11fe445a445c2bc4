/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Private to the verbs objects (verbs_device.c, verbs_mr.c, verbs_cq.c,
 * verbs_srq.c, verbs_qpx.c, verbs_compat.c and the QP files, verbs_qp*.c,
 * through verbs_qp_priv.h): the structures behind the rdma-core handles we
 * give out and the calls between those files.  The engine and the CM use
 * xs_internal.h only. */
#ifndef VERBS_PRIV_H
#define VERBS_PRIV_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "verbs/xs_internal.h"
#include "verbs/xs_transport.h"

/* ---- device / context (verbs_device.c) ---------------------------------- */

#define XS_DEVICE_NAME "xsock0"
#define XS_FW_VER "xsock " PACKAGE_VERSION /* config.h */
#define XS_PORT_NUM 1
/* Identity (libiwarp(7)): siw's vendor ID, the software iWARP devices'
 * (tools key their siw handling on it), and "xs" as the part. */
#define XS_VENDOR_ID 0x626d74
#define XS_VENDOR_PART_ID 0x7873

/* The RoCE personality (verbs_roce_dev.c, xs_roce_dev.h): a second device
 * on the same objects, an InfiniBand CA with an Ethernet port (as rxe);
 * vendor "xsk", part "xr": neither rxe's nor siw's, so no tool applies
 * another device's quirks to it. */
#define XS_ROCE_DEVICE_NAME "xsock_roce0"
#define XS_ROCE_VENDOR_ID 0x78736b
#define XS_ROCE_VENDOR_PART_ID 0x7872
#define XS_ROCE_GID_MAX 1024 /* slots of the GID table (rxe's RXE_PORT_GID_TBL_LEN) */
#define XS_ROCE_MAX_MSG (1u << 31) /* the IBA's largest message */

extern struct ibv_device xs_roce_device;
/* Read the host's addresses again if the snapshot is a second old. */
void xs_roce_refresh(void);
/* Port 1's attributes (state, MTUs from the interfaces, gid_tbl_len). */
void xs_roce_fill_port_attr(struct ibv_port_attr *a);
/* GID slot idx of port 1: 0, EINVAL (idx >= XS_ROCE_GID_MAX), ENODATA
 * (an empty slot: past the addresses the host has now). */
int xs_roce_gid_entry(uint32_t idx, struct ibv_gid_entry *e);
/* ibv_query_gid_table(3) of the device: the entries, or -EINVAL when more
 * than max_entries (entry_size: the caller's, at least ours). */
ssize_t xs_roce_gid_table(struct ibv_gid_entry *entries, size_t max_entries, size_t entry_size);

struct xs_context {
	struct verbs_context vctx; /* rdma-core layout; context is its last member */
	pthread_mutex_t ev_lock; /* async event FIFO */
	struct ibv_async_event *evq;
	unsigned ev_head, ev_count, ev_cap;
};

static inline struct xs_context *to_xs_context(struct ibv_context *c)
{
	return (struct xs_context *)((uint8_t *)c - __builtin_offsetof(struct xs_context, vctx.context));
}

/* Queue an async event and make async_fd readable (any thread). */
void xs_async_event(struct ibv_context *ctx, const struct ibv_async_event *ev);
/* Drop the queued events that name a QP, CQ or SRQ being destroyed (they would
 * hand the application a freed object). */
void xs_async_forget(struct ibv_context *ctx, const void *obj);

/* rdma-core's private ibv_query_gid_type (IBVERBS_PRIVATE_34): the sysfs
 * type, 0 = "IB/RoCE v1". */
enum xs_gid_type_sysfs {
	XS_GID_TYPE_SYSFS_IB_ROCE_V1 = 0,
	XS_GID_TYPE_SYSFS_ROCE_V2 = 1,
};
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
		       enum xs_gid_type_sysfs *type);

/* exported by libibverbs, declared only in rdma-core's private driver.h */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);

/* ops installed in the context */
int xs_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int xs_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int xs_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int xs_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
struct ibv_qp *xs_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr);

/* ---- PD / MR (verbs_mr.c) ----------------------------------------------- */

struct xs_pd {
	struct ibv_pd pd;
	unsigned mrs; /* MRs registered on it (under the MR table lock) */
};

struct xs_mr {
	struct ibv_mr mr;
	uint64_t iova; /* base TO: remote (and SGE) addresses are iova-based */
	unsigned access; /* IBV_ACCESS_* */
	bool valid; /* cleared by Send with Invalidate */
};

/* Local access through an SGE: lkey names a valid MR of pd that covers
 * [addr, addr + len) (iova space) and grants LOCAL_WRITE if need_write.
 * Returns the buffer address, or NULL. */
uint8_t *xs_mr_local(struct ibv_pd *pd, uint32_t lkey, uint64_t addr, uint64_t len,
		     bool need_write);
/* Set by xsock_priv_post_send_caller on its thread for its duration:
 * xs_mr_local then takes XSOCK_LKEY_CALLER for reading the caller's own
 * memory (never for writing into it). */
extern __thread bool xs_mr_caller_ok;

/* ---- CQ (verbs_cq.c) ---------------------------------------------------- */

#define XS_CQ_POLL_CONNS 8 /* more QPs on one CQ are served by the engine alone */

struct xs_cq {
	struct ibv_cq cq;
	pthread_mutex_t lock; /* the ring and the arming */
	struct ibv_wc *ring;
	unsigned cap, head, count;
	int armed; /* 0, XS_CQ_ARM_NEXT, XS_CQ_ARM_SOLICITED */
	bool overflow;
	/* entries ever appended / polled: a reservation (xs_cq_reserve) is
	 * found again by its sequence number across polls and resizes */
	uint64_t pushed, popped;
	int qp_refs; /* QPs using it (atomic) */
	/* connections of the QPs that complete here, with their transports
	 * (a hold each, under lock): polling an empty CQ receives on them on
	 * the caller's thread */
	struct xs_cq_conn {
		const struct xs_transport_ops *tp;
		struct xs_conn *c;
	} conns[XS_CQ_POLL_CONNS];
	unsigned nconns;
	int spinners; /* ibv_get_cq_event spins using it (atomic) */
};

#define XS_CQ_ARM_NEXT 1
#define XS_CQ_ARM_SOLICITED 2

/* Append a completion (any thread).  solicited: a receive of a Send with SE,
 * for req_notify_cq(cq, 1).  Returns 0, or -ENOSPC on overflow (dropped). */
int xs_cq_push(struct ibv_cq *cq, const struct ibv_wc *wc, bool solicited);
/* n completions under one lock (a QP's flush): as n calls of xs_cq_push,
 * -ENOSPC if any was dropped. */
int xs_cq_push_n(struct ibv_cq *cq, const struct ibv_wc *wc, unsigned n, bool solicited);

/* ibv_destroy_qp (no upcall of the QP runs any more): drop its completions
 * not polled yet, as rdma-core's hardware providers do (mlx5, irdma clean
 * the CQ): libfabric's verbs provider reports every WR it still tracks as
 * flushed after destroying the QP, and reposts on a closed endpoint for a
 * receive completion found then. */
void xs_cq_clean_qp(struct ibv_cq *cq, uint32_t qp_num);

/* A send's completion must not follow the completion of a reply that its
 * data caused (tgtd turns a connection to full feature when the last Login
 * Response's Send completes; the initiator's first command may arrive
 * first): post_send reserves the entries before the data goes out and
 * fills them after.  Polling stops at an entry not yet filled.  Returns 0
 * with *seq, or -ENOSPC (then push as usual). */
int xs_cq_reserve(struct ibv_cq *cq, unsigned n, uint64_t *seq);
void xs_cq_fill(struct ibv_cq *cq, uint64_t seq, const struct ibv_wc *wc);

/* A QP bound to conn (of transport tp) completes on cq: add/remove conn
 * to the connections an empty poll receives on (the first
 * XS_CQ_POLL_CONNS; a hold each). */
void xs_cq_add_conn(struct ibv_cq *cq, const struct xs_transport_ops *tp, struct xs_conn *conn);
void xs_cq_del_conn(struct ibv_cq *cq, struct xs_conn *conn);

/* ---- receive WRs (verbs_qp_rx.c, verbs_srq.c) ----------------------------- */

struct xs_sg {
	uint8_t *ptr;
	uint32_t len;
};

/* A posted receive: a QP's (the ddp_queue cookie) or an SRQ's, handed to a
 * QP's ddp_queue when a Send arrives for it. */
struct xs_rwr {
	uint64_t wr_id;
	uint8_t *bounce; /* multi-SGE: scattered into sg on completion */
	uint32_t nsg;
	struct xs_sg *sg;
	uint8_t *buf; /* SRQ: where the message goes (sg[0] or bounce) */
	uint32_t len; /* SRQ: its room */
	struct xs_rwr *next; /* free list, SRQ FIFO */
};

/* Check one receive WR against pd (SGE count up to max_sge, lkeys with
 * local write) and fill r (bounce allocated for several SGEs; buf, len).
 * 0, EINVAL, ENOMEM.  Any thread, no lock needed. */
int xs_rwr_fill(struct xs_rwr *r, struct ibv_pd *pd, const struct ibv_recv_wr *wr,
		unsigned max_sge);

/* ---- shared receive queues (verbs_srq.c) ----------------------------------- */

/* Locks: the SRQ lock nests inside a QP's rx_lock (conn rx -> rx_lock ->
 * SRQ lock) and outside the async event lock; the engine's connection
 * commands (rx_kick, xs_qp_rx_kick) may be taken under it. */

/* QP creation/destruction (application thread): a QP receives from srq.
 * attach: 0 or ENOMEM.  detach before the QP's
 * connection is put (post_srq_recv kicks the connections of attached QPs);
 * WRs the QP holds go back with xs_srq_put afterwards. */
int xs_srq_attach(struct ibv_srq *srq, struct ibv_qp *qp);
void xs_srq_detach(struct ibv_srq *srq, struct ibv_qp *qp);
/* The oldest posted WR, taken out for a QP's arriving Send, or NULL (empty).
 * May queue IBV_EVENT_SRQ_LIMIT_REACHED.  Engine or polling thread, under
 * the conn rx lock and the QP's rx_lock. */
struct xs_rwr *xs_srq_take(struct ibv_srq *srq);
/* A taken WR is done with (completed or flushed): back to the free pool.
 * Any thread; the QP's rx_lock may be held. */
void xs_srq_put(struct ibv_srq *srq, struct xs_rwr *r);
/* A receive was posted for qp (verbs_qp_rx.c): a Send of its connection
 * waiting for one (RNR) goes on.  Any thread, any lock. */
void xs_qp_rx_kick(struct ibv_qp *qp);
/* context ops */
int xs_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
struct ibv_srq *xs_create_srq_ex(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *attr);
int xs_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);

/* ---- extended post API (verbs_qpx.c) ------------------------------------- */

/* The ibv_wr_* ops a QP can be created with: what ibv_post_send takes. */
/* the RFC 7306 ones are accepted at creation: whether the connection
 * agrees on them is known only at post time (EOPNOTSUPP then) */
#define XS_QPX_SEND_OPS                                                                  \
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_RDMA_WRITE | \
	 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_SEND_WITH_IMM |                          \
	 IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |          \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

struct xs_wrb;
/* Give qx (the QP's own ibv_qp_ex) its ibv_wr_* ops and a builder sized
 * for cap (creating thread, before the QP is published).  0, EOPNOTSUPP
 * for send_ops beyond XS_QPX_SEND_OPS, ENOMEM. */
int xs_qpx_init(struct ibv_qp_ex *qx, uint64_t send_ops, const struct ibv_qp_cap *cap,
		struct xs_wrb **out);
void xs_qpx_destroy(struct xs_wrb *b);
/* The builder of a QP created with send ops (verbs_qp.c), else NULL. */
struct xs_wrb *xs_qp_wrb(struct ibv_qp *qp);

#endif
