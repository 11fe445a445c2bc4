/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The transport interface of libiwarp: the verbs objects (QP, CQ, SRQ) and
 * the CM reach the wire only through a struct xs_transport_ops, so that a
 * second transport (RoCEv2, issues 17/18) can sit beside iWARP over TCP
 * (xs_tp_iwarp.c over the engine: xs_engine.c and the files
 * xs_engine_priv.h lists) without touching them.
 *
 * A connection is a struct xs_conn *, opaque above the transport: each
 * transport's adapter casts its own connection object to and from it.  The
 * QP learns its connection's transport once, when it is bound
 * (xs_qp_attach), and keeps it beside the connection (q->tp); a CQ keeps
 * it beside each connection it polls.  Nothing here allocates; the data
 * path makes one indirect call per WR (a corked chain also cork, flush and
 * uncork once per post).
 *
 * Threads and locks are those of xs_internal.h for the matching xs_conn_*
 * call: data-path calls on the posting thread (sq_lock held), responses
 * from an upcall (engine or polling thread, conn rx lock held), CM calls
 * from application threads with no CM lock held.  Returns: 0 or -errno
 * (xs_internal.h says which).
 *
 * The up-calls, transport -> QP, are struct xs_conn_ops (xs_internal.h).
 * They carry RDMAP/DDP types (enum rdmap_opcode, struct ddp_delivery,
 * struct ddp_hdr, the Terminate triple in struct xs_err), and the QP
 * decodes Read/Atomic Requests and the peer's Terminate itself
 * (verbs_qp_rx.c, verbs_qp_flush.c).  The RoCE transport (xs_tp_roce.c)
 * speaks them: it places into the QP's DDP queues and hands Read/Atomic
 * Requests up as RDMAP bodies (docs/architecture.md says how); terminate's
 * struct rdmap_term becomes a NAK code there.  A RoCE QP's path attributes
 * (dest QPN, GID, PSNs, MTU, timeouts) reach its transport from
 * ibv_modify_qp (verbs_qp.c, xs_roce.h), not through this table.
 * Still iWARP's alone: the CM side (struct mpa_prefs / mpa_frame /
 * mpa_agreed, TCP and mixed listeners); the RoCE CM (IB CM MADs) is
 * issue 18's. */
#ifndef XS_TRANSPORT_H
#define XS_TRANSPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "verbs/xs_internal.h"

/* ---- verbs-level types (no wire format) ----------------------------------- */

/* How a Send or Write goes out (send, write). */
enum xs_tp_flag {
	XS_TP_SE = 1 << 0, /* solicited event (IBV_SEND_SOLICITED) */
	XS_TP_INV = 1 << 1, /* Send with Invalidate of inv_stag */
	XS_TP_IMM = 1 << 2, /* with immediate data imm (network order, as verbs) */
};

/* An RDMA Read: len octets from the peer's (src_stag, src_to) into our
 * (sink_stag, sink_to).  A transport whose responses do not name the sink
 * (RoCE: by PSN) keeps the sink on its side. */
struct xs_tp_read {
	uint32_t sink_stag;
	uint64_t sink_to;
	uint32_t len;
	uint32_t src_stag;
	uint64_t src_to;
};

/* An 8-octet atomic on the peer's (stag, to), 8-aligned.  req_id comes back
 * with the response (atomic_resp up from the peer's side; iWARP carries it
 * on the wire, RoCE would map it from the PSN). */
#define XS_TP_ATOMIC_SIZE 8
struct xs_tp_atomic {
	bool cmp_swap; /* else fetch and add */
	uint32_t stag;
	uint64_t to;
	uint64_t compare_add; /* compare (cmp_swap) or the addend */
	uint64_t swap;
	uint32_t req_id;
};

/* What the connection agreed, as the QP needs it. */
struct xs_tp_params {
	uint16_t ird, ord; /* inbound / outbound Reads and Atomics in flight */
	bool ext; /* immediate data and atomics may be used */
	/* one inbound Read/Atomic Request buffer (rrq below) */
	uint32_t req_buf_len;
	/* Sends and Writes complete when the peer acknowledges them (the
	 * acked upcall, in WR order; RoCE), not when send/write return */
	bool acked;
};

/* The QP's receive-side queues, placed into by the transport.  recv: the
 * posted receives (Sends); read_req: the IRD buffers of inbound Read and
 * Atomic Requests; term: the peer's Terminate; atomic_resp: the responses
 * to our Atomics (ext only, else NULL).  A transport uses those it needs. */
struct xs_tp_queues {
	struct ddp_queue *recv, *read_req, *term, *atomic_resp;
};

/* ---- the ops table ---------------------------------------------------------- */

struct xs_transport_ops {
	const char *name; /* "iwarp" */

	/* -- data path: QP, CQ, SRQ -- */
	/* Bind an established connection to qp (up: its upcalls); the
	 * transport starts receiving into q. */
	int (*attach)(struct xs_conn *c, const struct xs_conn_ops *up, void *qp,
		      const struct xs_tp_queues *q);
	/* The parameters agreed for c (read once, at attach). */
	void (*params)(const struct xs_conn *c, struct xs_tp_params *p);
	/* One message each, on the caller's thread; on return every octet is
	 * the transport's (the WR may complete).  flags: enum xs_tp_flag. */
	int (*send)(struct xs_conn *c, unsigned flags, uint32_t inv_stag, uint32_t imm,
		    const struct iovec *iov, int cnt);
	int (*write)(struct xs_conn *c, unsigned flags, uint32_t stag, uint64_t to, uint32_t imm,
		     const struct iovec *iov, int cnt);
	int (*read_req)(struct xs_conn *c, const struct xs_tp_read *r);
	int (*atomic_req)(struct xs_conn *c, const struct xs_tp_atomic *a);
	/* a chain of Sends and Writes gathered into one write (xs_conn_cork) */
	int (*cork)(struct xs_conn *c);
	int (*cork_flush)(struct xs_conn *c);
	int (*uncork)(struct xs_conn *c);
	/* an error the QP found in what it received (from an upcall) */
	int (*terminate)(struct xs_conn *c, const struct rdmap_term *t);
	/* responder: queue the response to a delivered Read or Atomic Request */
	int (*read_resp)(struct xs_conn *c, uint32_t sink_stag, uint64_t sink_to,
			 const uint8_t *src, uint32_t len);
	int (*atomic_resp)(struct xs_conn *c, uint32_t req_id, uint64_t value);
	/* the lock the transport places under (post_recv appends under it) */
	void (*rx_lock)(struct xs_conn *c);
	void (*rx_unlock)(struct xs_conn *c);
	/* a receive was posted (never: none will be, the QP is in ERROR) */
	void (*rx_kick)(struct xs_conn *c, bool never);
	/* receive on the caller's thread (an empty CQ poll); -EBUSY if busy */
	ssize_t (*poll)(struct xs_conn *c, size_t budget, bool maybe);
	void (*hold)(struct xs_conn *c);
	void (*release)(struct xs_conn *c);
	void (*disconnect)(struct xs_conn *c);
	void (*put)(struct xs_conn *c);

	/* -- CM side (cm_conn.c, cm_id.c, cm_qp.c, cm_proc.c) -- */
	struct xs_listener *(*listen)(const struct sockaddr *addr, socklen_t len, int backlog,
				      int v6only, xs_accept_fn cb, xs_plain_fn plain, void *ctx);
	int (*listener_addr)(const struct xs_listener *l, struct sockaddr_storage *addr);
	void (*listener_close)(struct xs_listener *l);
	/* redial_ms: how long a refused connect is dialled again (0: never) */
	int (*connect)(const struct sockaddr *dst, socklen_t dlen, const struct sockaddr *src,
		       socklen_t slen, const struct mpa_prefs *prefs, unsigned redial_ms,
		       xs_connect_fn cb, void *ctx);
	int (*accept)(struct xs_conn *c, const struct mpa_prefs *prefs);
	int (*reject)(struct xs_conn *c, const void *pdata, uint8_t len);
	const struct mpa_agreed *(*agreed)(const struct xs_conn *c);
	int (*addrs)(const struct xs_conn *c, struct sockaddr_storage *local,
		     struct sockaddr_storage *peer);
	void (*set_closed_cb)(struct xs_conn *c, xs_conn_closed_fn cb, void *ctx);
};

/* iWARP over TCP: MPA/DDP/RDMAP on the io_uring engine (xs_tp_iwarp.c). */
extern const struct xs_transport_ops xs_tp_iwarp;
/* The QP parameters of an MPA agreement (any thread, no lock). */
void xs_tp_iwarp_params(const struct mpa_agreed *a, struct xs_tp_params *p);

/* ---- QP <-> CM, transport-neutral (verbs_qp.c) ------------------------------ */

/* The connection c of transport tp is established with parameters p: bind
 * the QP to it (tp->attach with its queues) and move it to RTS.  CM
 * thread or engine thread (a connect callback).  0 or -errno.
 * xs_qp_bind_conn (xs_internal.h) is this for iWARP. */
int xs_qp_attach(struct ibv_qp *qp, const struct xs_transport_ops *tp, struct xs_conn *c,
		 const struct xs_tp_params *p);

#endif
