/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Private to the QP files (verbs_qp.c: create/destroy, state machine,
 * QP <-> CM; verbs_qp_sq.c: the send FIFO; verbs_qp_flush.c: flushing,
 * ERROR, Terminates; verbs_qp_rx.c: upcalls and post_recv; verbs_qp_tx.c:
 * post_send): struct xs_qp and the calls between them.
 *
 * RC queue pairs over an iWARP stream.
 *
 * Send side: post_send frames each WR on the caller's thread (the calls
 * of the connection's transport, q->tp in xs_transport.h, return once the
 * octets are in the socket), so Sends and Writes are done at once; RDMA Reads complete when the last Read Response segment is
 * placed, in order, with at most ORD outstanding (a Read beyond ORD waits
 * in post_send until one completes).  Completions keep WR order, as verbs
 * promises for a send queue (libfabric's verbs provider relies on it): a
 * WR done while a Read before it is outstanding waits in the send FIFO
 * behind that Read and completes with it.
 *
 * Receive side: posted receives are the buffers of the DDP queue for QN 0,
 * which exists from QP creation so receives can be posted before the
 * connection.  A single-SGE receive is placed directly; a multi-SGE one
 * goes through a bounce buffer scattered on completion.  The QP owns the
 * IRD buffers (28 octets each, QN 1) and the Terminate buffers (QN 2).
 * A QP on an SRQ posts nothing itself: its QN 0 queue takes the SRQ's
 * oldest WR when a Send starts to arrive (qp_srq_refill, verbs_qp_rx.c).
 *
 * Locks, in the order they nest:
 *   sq_lock   serializes post_send, held across transmit (never taken by
 *             the engine thread, which must not block on a full socket)
 *   conn rx   the transport's lock around placement (tp->rx_lock)
 *   rx_lock   the QP's receive queue and receive records
 *   SRQ lock  the shared receive queue (verbs_srq.c)
 *   rd_lock   the send FIFO (never held across transmit)
 *   lock      state and attributes
 *   CQ, channel and async event locks are leaves.
 * Upcalls run with the conn rx lock held by the engine (or with nothing
 * held: failed), so they take rx_lock/rd_lock only. */
#ifndef VERBS_QP_PRIV_H
#define VERBS_QP_PRIV_H

#include <string.h>

#include "verbs/verbs_priv.h"
#include "verbs/xs_transport.h"

#define XS_TERM_BUF 128
#define XS_TERM_BUFS 2

/* the QN 0 queue of a QP on an SRQ: it holds the WRs taken for Sends
 * being received (one at a time over TCP; a few to spare) */
#define XS_SRQ_QP_DEPTH 16

/* the send FIFO: an outstanding RDMA Read, or a WR done behind one (its
 * completion waits).  When not empty, its head is a Read. */
/* Where a signaled Send/Write's completion waits while its data goes out
 * (taken before, so the completion of a reply it provokes cannot come
 * first): a reserved CQ entry, or an entry in the send FIFO behind a Read.
 * Lives on the poster's stack for the post. */
struct xs_sq_slot {
	enum { XS_SLOT_PUSH, XS_SLOT_CQ, XS_SLOT_FIFO, XS_SLOT_GONE } where;
	uint64_t seq; /* XS_SLOT_CQ: the CQ entry */
};

struct xs_sqe {
	struct xs_sq_slot *slot; /* in flight: its poster's (not done yet) */
	uint64_t wr_id;
	uint32_t sink_stag;
	uint64_t sink_to;
	uint32_t len;
	enum ibv_wc_opcode op;
	enum ibv_wc_status st; /* a done WR's */
	bool read; /* waits for its response: an RDMA Read or an Atomic */
	bool wait_ack; /* a Send/Write waiting for the peer's ACK (acked transports) */
	bool atomic; /* RFC 7306: its Atomic Response carries req_id */
	/* a signaled Write's placement fence (verbs_qp_tx.c): a zero-length
	 * Read whose response completes the Write (op, len: the Write's) */
	bool fence;
	bool signaled;
	uint32_t req_id;
	uint8_t *result; /* Atomic: the local 8 octets the old value goes to */
};

struct xs_qp {
	union { /* rdma-core: an extended QP's qp_base is the QP itself */
		struct ibv_qp qp;
		struct ibv_qp_ex qpx;
	};
	struct xs_wrb *wrb; /* ibv_wr_* builder (created with send ops) */
	/* xsock_roce0 with xsock-roced: the connection that holds qp_num
	 * (xs_roce_relay.c), for the RoCE connection RTR makes; else -1 */
	int relay_fd;
	struct ibv_qp_cap cap;
	bool sq_sig_all;
	pthread_mutex_t lock;
	struct ibv_qp_attr attr; /* reported by query_qp */
	uint16_t ird_pref, ord_pref; /* max_dest_rd_atomic / max_rd_atomic */
	/* IBV_QP_ACCESS_FLAGS as last set, for the responder (atomic
	 * loads; engine thread): -1 until a modify sets them, when every
	 * right is the MRs' alone (a CM-made QP, as before the flags) */
	int rx_access;
	/* the connection's transport: set by bind before conn (the release
	 * store of conn publishes it), never changed after */
	const struct xs_transport_ops *tp;
	struct xs_conn *conn; /* set by bind (atomic) */
	bool conn_dead; /* failed upcall seen: the engine places nothing more */
	bool fatal_sent; /* IBV_EVENT_QP_FATAL went out (atomic) */

	pthread_mutex_t rx_lock;
	struct ddp_queue rq; /* QN 0 (on an SRQ: fed by qp_srq_refill) */
	struct xs_rwr *rwr, *rfree;
	struct xs_sg *sgs;
	struct ddp_queue rrq, tq; /* QN 1 (Read Requests), QN 2 (Terminate) */
	bool rx_extra; /* rrq and tq exist */
	uint8_t *ird_bufs;
	uint32_t ird_buf_len; /* xs_ird_buf_len */
	bool ext; /* the connection agreed on RFC 7306 (set by bind) */
	bool acked_tx; /* Sends/Writes complete on the transport's acked upcall (bind) */
	/* the status of the first WR still waiting when the transport failed
	 * (acked transports; rd_lock) */
	bool fail_st_valid;
	enum ibv_wc_status fail_st;
	struct ddp_queue arq; /* QN 3 (Atomic Responses), when ext */
	uint8_t *arq_bufs;
	/* Send with Immediate: the imm of an attached Immediate Data, for
	 * the Send behind it (engine or polling thread, conn rx lock) */
	bool imm_pending;
	uint32_t imm_pending_val;
	uint32_t atomic_id; /* next Atomic Request Identifier (sq_lock) */
	uint8_t term_bufs[XS_TERM_BUFS][XS_TERM_BUF];
	struct rdmap_term term; /* the peer's Terminate (engine thread only) */
	bool term_valid;

	pthread_mutex_t sq_lock;
	pthread_mutex_t rd_lock;
	pthread_cond_t rd_cond;
	struct xs_sqe *sq; /* ring of sq_cap, grown up to sq_max */
	unsigned sq_head, sq_count, sq_cap, sq_max;
	unsigned rd_count, ord; /* Reads in the FIFO */
	struct xs_qp *tbl_next; /* the QPN table's bucket (verbs_qp_table.c) */
};

/* The QPN table (verbs_qp_table.c): ibv_create_qp adds, ibv_destroy_qp
 * removes. */
void qp_table_add(struct xs_qp *q);
void qp_table_del(struct xs_qp *q);

static inline struct xs_qp *to_xs_qp(struct ibv_qp *qp)
{
	return (struct xs_qp *)qp;
}

static inline enum ibv_qp_state qp_state(struct xs_qp *q)
{
	return __atomic_load_n(&q->qp.state, __ATOMIC_ACQUIRE);
}

static inline void qp_set_state(struct xs_qp *q, enum ibv_qp_state s)
{
	__atomic_store_n(&q->qp.state, s, __ATOMIC_RELEASE);
	q->attr.qp_state = s;
	q->attr.cur_qp_state = s;
}

static inline struct xs_conn *qp_conn(struct xs_qp *q)
{
	return __atomic_load_n(&q->conn, __ATOMIC_ACQUIRE);
}

/* An application's SGE, copied: some pass packed arrays (libiscsi's iSER
 * initiator), whose fields may not be read in place. */
static inline struct ibv_sge sge_get(const struct ibv_sge *list, int i)
{
	struct ibv_sge s;

	memcpy(&s, (const char *)list + (size_t)i * sizeof(s), sizeof(s));
	return s;
}

static inline struct ibv_wc make_wc(const struct xs_qp *q, uint64_t wr_id,
				    enum ibv_wc_opcode op, enum ibv_wc_status st, uint32_t len)
{
	xs_stat_wc(__atomic_load_n(&q->conn, __ATOMIC_ACQUIRE), st);
	return (struct ibv_wc){
		.wr_id = wr_id,
		.status = st,
		.opcode = op,
		.byte_len = len,
		.qp_num = q->qp.qp_num,
	};
}

static inline void push_wc(struct ibv_cq *cq, struct xs_qp *q, uint64_t wr_id,
			   enum ibv_wc_opcode op, enum ibv_wc_status st, uint32_t len)
{
	struct ibv_wc wc = make_wc(q, wr_id, op, st, len);

	xs_cq_push(cq, &wc, false);
}

static inline struct xs_sqe *sq_at(struct xs_qp *q, unsigned i)
{
	return &q->sq[(q->sq_head + i) % q->sq_cap];
}

/* ---- the send FIFO (verbs_qp_sq.c) ------------------------------------------
 * Completions of the send queue in WR order.  rd_lock held by the caller
 * where it says so; the others take it themselves. */

/* Drop the head (rd_lock held). */
void sq_pop(struct xs_qp *q);
/* Room for n_more entries (rd_lock held): 0, or ENOMEM (the FIFO holds
 * max_send_wr + ORD WRs: a send queue the consumer overran). */
int sq_reserve(struct xs_qp *q, unsigned n_more);
/* The slot's completion takes the CQ's next entry (rd_lock held). */
void slot_to_cq(struct xs_qp *q, struct xs_sq_slot *slot);
/* Complete the done WRs at the head, the Read before them being done
 * (rd_lock held). */
void sq_drain(struct xs_qp *q);
/* A Send, Write or failed WR is done: complete it now or behind the Reads
 * before it (takes rd_lock). */
void sq_complete(struct xs_qp *q, uint64_t wr_id, enum ibv_wc_opcode op,
		 enum ibv_wc_status st, uint32_t len, bool signaled);
/* Before a signaled Send/Write goes out: its completion's place.  0 or
 * ENOMEM.  sq_lock held (takes rd_lock). */
int sq_take(struct xs_qp *q, struct xs_sq_slot *slot);
/* The WR of sq_take is done (sent, or failed with st); takes rd_lock. */
void sq_settle(struct xs_qp *q, struct xs_sq_slot *slot, uint64_t wr_id,
	       enum ibv_wc_opcode op, enum ibv_wc_status st, uint32_t len);

/* ---- flushing, ERROR, Terminates (verbs_qp_flush.c) ------------------------- */

/* Receives: rx_lock held.  complete = false discards (to RESET). */
void flush_recvs(struct xs_qp *q, bool complete);
/* Empty the send FIFO (takes rd_lock); t: the peer's Terminate, if any,
 * which gives the first Read its status.  complete = false discards. */
enum ibv_wc_status qp_fail_status(const struct xs_err *e);
void flush_sq(struct xs_qp *q, bool complete, const struct rdmap_term *t);
/* To ERROR, flushing every WR.  engine: from an upcall (the conn rx lock
 * may be held; only rx_lock is taken), else any application thread
 * holding no QP lock.  t as for flush_sq. */
void qp_enter_error(struct xs_qp *q, bool engine, const struct rdmap_term *t);
/* Fill t: a Terminate with cause naming an untagged message received. */
void term_untagged(struct rdmap_term *t, const struct xs_err *cause, enum rdmap_opcode op,
		   uint32_t qn, const struct ddp_delivery *d);
/* IBV_EVENT_QP_FATAL, once per QP (any thread, no lock). */
void qp_fatal(struct xs_qp *q);
/* An error found in a delivered message (upcall): Terminate t, FIN, ERROR,
 * QP_FATAL. */
void qp_terminate(struct xs_qp *q, const struct rdmap_term *t);

/* ---- receive side (verbs_qp_rx.c) ------------------------------------------- */

/* Lock the receive queue from an application thread (the conn rx lock
 * first once connected); returns the connection locked, or NULL. */
struct xs_conn *qp_rx_lock(struct xs_qp *q);
void qp_rx_unlock(struct xs_qp *q, struct xs_conn *c);
/* A receive record is done with (rx_lock held). */
void rwr_put(struct xs_qp *q, struct xs_rwr *r);
/* The QN 0 queue's refill on an SRQ (ddp_refill_fn; conn rx lock held). */
int qp_srq_refill(void *ctx, struct ddp_queue *rq);
/* The upcalls the QP attaches with. */
extern const struct xs_conn_ops xs_qp_conn_ops;

#endif
