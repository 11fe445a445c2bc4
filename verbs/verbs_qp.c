/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* RC queue pairs over an iWARP stream.
 *
 * Send side: post_send frames each WR on the caller's thread (xs_conn_*
 * return once the octets are in the socket), so Sends and Writes are done
 * at once; RDMA Reads complete when the last Read Response segment is
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
 * oldest WR when a Send starts to arrive (qp_srq_refill, verbs_srq.c).
 *
 * Locks, in the order they nest:
 *   sq_lock   serializes post_send, held across transmit (never taken by
 *             the engine thread, which must not block on a full socket)
 *   conn rx   the engine's lock around placement (xs_conn_rx_lock)
 *   rx_lock   the QP's receive queue and receive records
 *   SRQ lock  the shared receive queue (verbs_srq.c)
 *   rd_lock   the send FIFO (never held across transmit)
 *   lock      state and attributes
 *   CQ, channel and async event locks are leaves.
 * Upcalls run with the conn rx lock held by the engine (or with nothing
 * held: failed), so they take rx_lock/rd_lock only. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "iwarp/rdmap_ext.h"
#include "verbs/verbs_priv.h"

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
	bool atomic; /* RFC 7306: its Atomic Response carries req_id */
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
	struct ibv_qp_cap cap;
	bool sq_sig_all;
	pthread_mutex_t lock;
	struct ibv_qp_attr attr; /* reported by query_qp */
	uint16_t ird_pref, ord_pref; /* max_dest_rd_atomic / max_rd_atomic */
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
};

static uint32_t xs_qpn_next = 1;
static int xs_nqp;

static struct xs_qp *to_xs_qp(struct ibv_qp *qp)
{
	return (struct xs_qp *)qp;
}

static enum ibv_qp_state qp_state(struct xs_qp *q)
{
	return __atomic_load_n(&q->qp.state, __ATOMIC_ACQUIRE);
}

static void qp_set_state(struct xs_qp *q, enum ibv_qp_state s)
{
	__atomic_store_n(&q->qp.state, s, __ATOMIC_RELEASE);
	q->attr.qp_state = s;
	q->attr.cur_qp_state = s;
}

static struct xs_conn *qp_conn(struct xs_qp *q)
{
	return __atomic_load_n(&q->conn, __ATOMIC_ACQUIRE);
}

struct xs_conn *xs_qp_conn(struct ibv_qp *qp)
{
	return qp_conn((struct xs_qp *)qp);
}

/* Lock the receive queue from an application thread: once connected the
 * engine places into it under the conn rx lock, which comes first. */
static struct xs_conn *qp_rx_lock(struct xs_qp *q)
{
	for (;;) {
		struct xs_conn *c = qp_conn(q);

		if (c && __atomic_load_n(&q->conn_dead, __ATOMIC_ACQUIRE))
			c = NULL;
		if (c)
			xs_conn_rx_lock(c);
		pthread_mutex_lock(&q->rx_lock);
		if (c || !q->conn || q->conn_dead)
			return c;
		/* bound while we waited: retake in order */
		pthread_mutex_unlock(&q->rx_lock);
	}
}

static void qp_rx_unlock(struct xs_qp *q, struct xs_conn *c)
{
	pthread_mutex_unlock(&q->rx_lock);
	if (c)
		xs_conn_rx_unlock(c);
}

static void rwr_put(struct xs_qp *q, struct xs_rwr *r)
{
	if (q->qp.srq) { /* the SRQ's: back to its pool */
		xs_srq_put(q->qp.srq, r);
		return;
	}
	free(r->bounce);
	r->bounce = NULL;
	r->next = q->rfree;
	q->rfree = r;
}

/* An application's SGE, copied: some pass packed arrays (libiscsi's iSER
 * initiator), whose fields may not be read in place. */
static struct ibv_sge sge_get(const struct ibv_sge *list, int i)
{
	struct ibv_sge s;

	memcpy(&s, (const char *)list + (size_t)i * sizeof(s), sizeof(s));
	return s;
}

static struct ibv_wc make_wc(const struct xs_qp *q, uint64_t wr_id, enum ibv_wc_opcode op,
			     enum ibv_wc_status st, uint32_t len)
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

static void push_wc(struct ibv_cq *cq, struct xs_qp *q, uint64_t wr_id, enum ibv_wc_opcode op,
		    enum ibv_wc_status st, uint32_t len)
{
	struct ibv_wc wc = make_wc(q, wr_id, op, st, len);

	xs_cq_push(cq, &wc, false);
}

/* ---- flushing ------------------------------------------------------------- */

/* Receives: rx_lock held.  complete = false discards (to RESET). */
static void flush_recvs(struct xs_qp *q, bool complete)
{
	struct ddp_delivery d;

	while (ddp_queue_flush(&q->rq, &d) == 1) {
		struct xs_rwr *r = d.cookie;

		if (complete)
			push_wc(q->qp.recv_cq, q, r->wr_id, IBV_WC_RECV, IBV_WC_WR_FLUSH_ERR, 0);
		rwr_put(q, r);
	}
}

/* Does a Terminate from the peer name this Read?  Its Read Request header
 * (R) must carry our sink, or, without R, its DDP header (D) must be an
 * untagged one on the Read Request queue; a Terminate with neither header
 * is taken to be about the oldest Read.  A Terminate naming another message
 * (e.g. a Write to an MR without remote write, RDMAP/1/0x02) only flushes
 * the Read.  Then RDMAP Remote Protection -> REM_ACCESS_ERR, RDMAP Remote
 * Operation -> REM_OP_ERR, DDP untagged (e.g. beyond IRD) -> REM_INV_REQ_ERR. */
static enum ibv_wc_status term_status(const struct rdmap_term *t, const struct xs_sqe *rd)
{
	struct rdmap_read_req rr;
	struct ddp_hdr h;
	struct xs_err e;

	if (t->r && (rdmap_read_req_decode(t->rdmap_hdr, t->rdmap_hdr_len, &rr, &e) != 0 ||
		     rr.sink_stag != rd->sink_stag))
		return IBV_WC_WR_FLUSH_ERR;
	if (!t->r && t->d &&
	    (ddp_hdr_decode(t->ddp_hdr, t->ddp_hdr_len, &h, &e) != 0 || h.tagged ||
	     h.qn != RDMAP_QN_READ_REQ))
		return IBV_WC_WR_FLUSH_ERR;
	if (t->cause.layer == XS_LAYER_RDMAP && t->cause.etype == RDMAP_ETYPE_REMOTE_PROT)
		return IBV_WC_REM_ACCESS_ERR;
	if (t->r && t->cause.layer == XS_LAYER_RDMAP && t->cause.etype == RDMAP_ETYPE_REMOTE_OP)
		return IBV_WC_REM_OP_ERR;
	if (t->r && t->cause.layer == XS_LAYER_DDP && t->cause.etype == DDP_ETYPE_UNTAGGED)
		return IBV_WC_REM_INV_REQ_ERR;
	return IBV_WC_WR_FLUSH_ERR;
}

static struct xs_sqe *sq_at(struct xs_qp *q, unsigned i)
{
	return &q->sq[(q->sq_head + i) % q->sq_cap];
}

static void sq_pop(struct xs_qp *q)
{
	if (q->sq[q->sq_head].read)
		q->rd_count--;
	q->sq_head = (q->sq_head + 1) % q->sq_cap;
	q->sq_count--;
}

/* Room for n more entries (rd_lock held).  0, or ENOMEM: the FIFO holds
 * max_send_wr + ORD WRs, a send queue the consumer overran. */
static int sq_reserve(struct xs_qp *q, unsigned n_more)
{
	unsigned need = q->sq_count + n_more, ncap;
	struct xs_sqe *n;

	if (need <= q->sq_cap)
		return 0;
	if (need > q->sq_max)
		return ENOMEM;
	for (ncap = q->sq_cap ? q->sq_cap : 16; ncap < need; ncap *= 2)
		;
	if (ncap > q->sq_max)
		ncap = q->sq_max;
	n = malloc(ncap * sizeof(*n));
	if (!n)
		return ENOMEM;
	for (unsigned i = 0; i < q->sq_count; i++)
		n[i] = *sq_at(q, i);
	free(q->sq);
	q->sq = n;
	q->sq_cap = ncap;
	q->sq_head = 0;
	return 0;
}

/* rd_lock held: the slot's completion takes the CQ's next entry (pushed
 * when filled if the CQ is full: it overflows then anyway) */
static void slot_to_cq(struct xs_qp *q, struct xs_sq_slot *slot)
{
	slot->where = xs_cq_reserve(q->qp.send_cq, 1, &slot->seq) == 0 ? XS_SLOT_CQ
									   : XS_SLOT_PUSH;
}

/* Complete the done WRs at the head (rd_lock held): the Read before them
 * completed. */
static void sq_drain(struct xs_qp *q)
{
	while (q->sq_count && !q->sq[q->sq_head].read) {
		struct xs_sqe *e = &q->sq[q->sq_head];

		if (e->slot) /* still going out: its CQ entry is its place now */
			slot_to_cq(q, e->slot);
		else
			push_wc(q->qp.send_cq, q, e->wr_id, e->op, e->st, e->len);
		sq_pop(q);
	}
}

/* A Send, Write or failed WR is done: complete it now, or behind the Reads
 * posted before it.  A successful unsignaled WR completes nothing. */
static void sq_complete(struct xs_qp *q, uint64_t wr_id, enum ibv_wc_opcode op,
			enum ibv_wc_status st, uint32_t len, bool signaled)
{
	if (!signaled && st == IBV_WC_SUCCESS)
		return;
	pthread_mutex_lock(&q->rd_lock);
	if (q->sq_count && sq_reserve(q, 1) == 0) {
		*sq_at(q, q->sq_count) = (struct xs_sqe){
			.wr_id = wr_id, .len = len, .op = op, .st = st, .signaled = true,
		};
		q->sq_count++;
	} else {
		/* nothing before it (or no room, which sq_room ruled out) */
		push_wc(q->qp.send_cq, q, wr_id, op, st, len);
	}
	pthread_mutex_unlock(&q->rd_lock);
}

/* Before a signaled Send/Write's data goes out: its completion's place,
 * the CQ's next entry, or the send FIFO's tail behind a Read.  0, or
 * ENOMEM (the send queue is full).  sq_lock held. */
static int sq_take(struct xs_qp *q, struct xs_sq_slot *slot)
{
	int rc = 0;

	pthread_mutex_lock(&q->rd_lock);
	if (!q->sq_count) {
		slot_to_cq(q, slot);
	} else if ((rc = sq_reserve(q, 1)) == 0) {
		*sq_at(q, q->sq_count) = (struct xs_sqe){ .slot = slot, .signaled = true };
		q->sq_count++;
		slot->where = XS_SLOT_FIFO;
	}
	pthread_mutex_unlock(&q->rd_lock);
	return rc;
}

/* The WR of sq_take is done (sent, or failed with st). */
static void sq_settle(struct xs_qp *q, struct xs_sq_slot *slot, uint64_t wr_id,
		      enum ibv_wc_opcode op, enum ibv_wc_status st, uint32_t len)
{
	struct ibv_wc wc = make_wc(q, wr_id, op, st, len);

	pthread_mutex_lock(&q->rd_lock);
	switch (slot->where) {
	case XS_SLOT_CQ:
		xs_cq_fill(q->qp.send_cq, slot->seq, &wc);
		break;
	case XS_SLOT_FIFO:
		for (unsigned i = 0; i < q->sq_count; i++) {
			struct xs_sqe *e = sq_at(q, i);

			if (e->slot == slot) {
				e->slot = NULL;
				e->wr_id = wr_id;
				e->op = op;
				e->st = st;
				e->len = len;
				break;
			}
		}
		sq_drain(q);
		break;
	case XS_SLOT_PUSH:
		push_wc(q->qp.send_cq, q, wr_id, op, st, len);
		break;
	case XS_SLOT_GONE: /* discarded by a move to RESET */
		break;
	}
	slot->where = XS_SLOT_GONE;
	pthread_mutex_unlock(&q->rd_lock);
}

/* Empty the send FIFO: Reads flush (the first with the status the peer's
 * Terminate t gives it), done WRs behind them too unless they failed on
 * their own.  complete = false discards (to RESET). */
static void flush_sq(struct xs_qp *q, bool complete, const struct rdmap_term *t)
{
	pthread_mutex_lock(&q->rd_lock);
	for (bool first = true; q->sq_count; sq_pop(q)) {
		struct xs_sqe *e = &q->sq[q->sq_head];
		enum ibv_wc_status st = IBV_WC_WR_FLUSH_ERR;

		if (e->read && first && t)
			st = term_status(t, e);
		else if (!e->read && e->st != IBV_WC_SUCCESS)
			st = e->st;
		if (e->read)
			first = false;
		if (e->slot) /* still going out: its poster completes it */
			complete ? slot_to_cq(q, e->slot) : (void)(e->slot->where = XS_SLOT_GONE);
		else if (complete)
			push_wc(q->qp.send_cq, q, e->wr_id, e->op, st, 0);
	}
	pthread_cond_broadcast(&q->rd_cond);
	pthread_mutex_unlock(&q->rd_lock);
}

/* To ERROR, flushing every WR.  engine: called from an upcall (the engine
 * may hold the conn rx lock).  t: the peer's Terminate, if one caused it. */
static void qp_enter_error(struct xs_qp *q, bool engine, const struct rdmap_term *t)
{
	struct xs_conn *c = NULL;
	enum ibv_qp_state old;

	pthread_mutex_lock(&q->lock);
	old = q->qp.state;
	qp_set_state(q, IBV_QPS_ERR);
	pthread_mutex_unlock(&q->lock);
	/* already flushed: ERR queues nothing (posts check the state under
	 * the same locks as the flush) */
	if (old == IBV_QPS_ERR)
		return;
	flush_sq(q, true, t);
	if (engine)
		pthread_mutex_lock(&q->rx_lock);
	else
		c = qp_rx_lock(q);
	flush_recvs(q, true);
	qp_rx_unlock(q, c);
	/* a Send waiting for a receive (RNR) waits no more: none will come */
	c = qp_conn(q);
	if (c)
		xs_conn_rx_kick(c, true);
	if (q->qp.srq) {
		/* the kernel's signal that the QP takes no more SRQ WRs (its
		 * refill refuses in ERR): the consumer may destroy it */
		struct ibv_async_event ev = {
			.element.qp = &q->qp,
			.event_type = IBV_EVENT_QP_LAST_WQE_REACHED,
		};

		xs_async_event(q->qp.context, &ev);
	}
}

/* ---- Terminate helpers ------------------------------------------------------ */

/* A Terminate naming an untagged message we received (its header rebuilt
 * with MO 0: the engine does not keep the segment's own). */
static void term_untagged(struct rdmap_term *t, const struct xs_err *cause, enum rdmap_opcode op,
			  uint32_t qn, const struct ddp_delivery *d)
{
	struct ddp_hdr h = {
		.tagged = false,
		.last = true,
		.dv = DDP_VERSION,
		.rsvdulp = rdmap_ctrl_encode(op),
		.rsvdulp2 = d->rsvdulp2,
		.qn = qn,
		.msn = d->msn,
		.mo = 0,
	};

	memset(t, 0, sizeof(*t));
	t->cause = *cause;
	t->d = true;
	t->ddp_hdr_len = (uint8_t)ddp_hdr_encode(&h, t->ddp_hdr);
}

/* The QP's asynchronous error, once per QP. */
static void qp_fatal(struct xs_qp *q)
{
	struct ibv_async_event ev = { .element.qp = &q->qp, .event_type = IBV_EVENT_QP_FATAL };

	if (!__atomic_exchange_n(&q->fatal_sent, true, __ATOMIC_ACQ_REL))
		xs_async_event(q->qp.context, &ev);
}

/* An error we found in a message the engine delivered (engine thread):
 * the Terminate, then FIN (a Terminate ends the stream: the peer must not
 * have to wait for us to go away), the QP to ERR and its asynchronous
 * error, as when the engine itself finds a protocol error. */
static void qp_terminate(struct xs_qp *q, const struct rdmap_term *t)
{
	struct xs_conn *c = qp_conn(q);

	if (c && xs_conn_terminate(c, t) < 0)
		xs_log("QP %u: Terminate not sent\n", q->qp.qp_num);
	if (c)
		xs_conn_disconnect(c);
	qp_enter_error(q, true, NULL);
	qp_fatal(q);
}

/* ---- upcalls (engine thread) ---------------------------------------------- */

static int qp_resolve(void *ctx, enum rdmap_opcode op, uint32_t stag, uint64_t to, uint32_t len,
		      uint8_t **dst, struct xs_err *err)
{
	struct xs_qp *q = ctx;
	bool ok = false, empty = false, outstanding;

	if (op == RDMAP_OP_WRITE)
		return xs_mr_resolve(q->qp.pd, stag, to, len, XS_ACCESS_REMOTE_WRITE, dst, err);
	if (op != RDMAP_OP_READ_RESP) {
		xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNEXPECTED_OP);
		return -EPROTO;
	}
	/* a Read Response must land in the sink of the oldest Read */
	pthread_mutex_lock(&q->rd_lock);
	/* an Atomic at the head waits for its Atomic Response, not this */
	outstanding = q->rd_count > 0 && !q->sq[q->sq_head].atomic;
	if (outstanding) {
		const struct xs_sqe *rd = &q->sq[q->sq_head];

		ok = rd->sink_stag == stag && to >= rd->sink_to && len <= rd->len &&
		     to - rd->sink_to <= rd->len - len;
		empty = ok && rd->len == 0;
	}
	pthread_mutex_unlock(&q->rd_lock);
	if (!outstanding) {
		/* no Read outstanding: the Read Response itself is unexpected */
		xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNEXPECTED_OP);
		return -EPROTO;
	}
	if (!ok) {
		xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_INVALID_STAG);
		return -EPROTO;
	}
	if (empty) { /* zero-length Read: no sink MR to look at */
		static uint8_t none;

		*dst = &none;
		return 0;
	}
	return xs_mr_resolve(q->qp.pd, stag, to, len, XS_ACCESS_READ_SINK, dst, err);
}

static void qp_tagged_last(void *ctx, enum rdmap_opcode op, const struct ddp_hdr *h)
{
	struct xs_qp *q = ctx;

	if (op != RDMAP_OP_READ_RESP)
		return;
	pthread_mutex_lock(&q->rd_lock);
	if (q->rd_count && !q->sq[q->sq_head].atomic) {
		struct xs_sqe *rd = &q->sq[q->sq_head];

		if (rd->signaled)
			push_wc(q->qp.send_cq, q, rd->wr_id, IBV_WC_RDMA_READ, IBV_WC_SUCCESS, rd->len);
		sq_pop(q);
		sq_drain(q);
		pthread_cond_broadcast(&q->rd_cond);
	}
	pthread_mutex_unlock(&q->rd_lock);
}

/* RFC 7306 Immediate Data (d->addr: its 8 octets): attached to the Send
 * behind it (no receive consumed, d->cookie NULL), or completing one
 * receive as the verbs RDMA Write with Immediate does, nothing placed. */
static void deliver_imm(struct xs_qp *q, enum rdmap_opcode op, const struct ddp_delivery *d)
{
	struct xs_rwr *r = d->cookie;
	uint32_t imm; /* verbs keeps it in network order, as the wire has it */

	memcpy(&imm, d->addr, sizeof(imm));
	if (!r) {
		q->imm_pending = true;
		q->imm_pending_val = imm;
		return;
	}

	struct ibv_wc wc = {
		.wr_id = r->wr_id,
		.status = IBV_WC_SUCCESS,
		.opcode = IBV_WC_RECV_RDMA_WITH_IMM,
		.wc_flags = IBV_WC_WITH_IMM,
		.imm_data = imm,
		.qp_num = q->qp.qp_num,
	};

	xs_cq_push(q->qp.recv_cq, &wc, op == RDMAP_OP_IMM_DATA_SE);
	pthread_mutex_lock(&q->rx_lock);
	rwr_put(q, r);
	pthread_mutex_unlock(&q->rx_lock);
}

static void deliver_send(struct xs_qp *q, enum rdmap_opcode op, const struct ddp_delivery *d)
{
	struct xs_rwr *r = d->cookie;
	struct ibv_wc wc = {
		.wr_id = r->wr_id,
		.status = IBV_WC_SUCCESS,
		.opcode = IBV_WC_RECV,
		.byte_len = d->msg_len,
		.qp_num = q->qp.qp_num,
	};
	bool se = op == RDMAP_OP_SEND_SE || op == RDMAP_OP_SEND_SE_INV;
	bool inv_failed = false;
	struct xs_err err;

	if (q->imm_pending) { /* Send with Immediate */
		q->imm_pending = false;
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = q->imm_pending_val;
	}
	if (r->bounce) {
		uint32_t left = d->msg_len, off = 0;

		for (uint32_t i = 0; i < r->nsg && left; i++) {
			uint32_t n = r->sg[i].len < left ? r->sg[i].len : left;

			memcpy(r->sg[i].ptr, r->bounce + off, n);
			off += n;
			left -= n;
		}
	}
	if (op == RDMAP_OP_SEND_INV || op == RDMAP_OP_SEND_SE_INV) {
		if (xs_mr_invalidate(q->qp.pd, d->rsvdulp2, &err) == 0) {
			wc.wc_flags |= IBV_WC_WITH_INV;
			wc.invalidated_rkey = d->rsvdulp2;
		} else {
			wc.status = IBV_WC_REM_INV_REQ_ERR;
			inv_failed = true;
		}
	}
	xs_cq_push(q->qp.recv_cq, &wc, se);
	pthread_mutex_lock(&q->rx_lock);
	rwr_put(q, r);
	pthread_mutex_unlock(&q->rx_lock);
	if (inv_failed) {
		struct rdmap_term t;

		term_untagged(&t, &err, op, RDMAP_QN_SEND, d);
		qp_terminate(q, &t);
	}
}

/* Atomics on words of this process's MRs are atomic with respect to each
 * other (a CAS on an aligned word, or this lock for an MR whose host
 * address is not 8-aligned) and to the CPU's own atomics on aligned words. */
static pthread_mutex_t atomic_unaligned_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t atomic_carry_out(const struct rdmap_atomic_req *ar, uint8_t *p)
{
	uint64_t w, old;

	if (((uintptr_t)p % RDMAP_ATOMIC_SIZE) == 0)
		return rdmap_atomic_apply(ar, (uint64_t *)(void *)p);
	pthread_mutex_lock(&atomic_unaligned_lock);
	memcpy(&w, p, sizeof(w));
	old = w;
	rdmap_atomic_apply(ar, &w);
	memcpy(p, &w, sizeof(w));
	pthread_mutex_unlock(&atomic_unaligned_lock);
	return old;
}

/* Responder of an RFC 7306 Atomic Request (QN 1, engine thread): check
 * the target as a Read source is checked (RDMAP Remote Protection codes,
 * REMOTE_ATOMIC instead of REMOTE_READ; an unaligned TO is RDMAP/2/0xff),
 * carry it out, queue the Atomic Response behind earlier Read Responses. */
static void deliver_atomic_req(struct xs_qp *q, const struct ddp_delivery *d)
{
	struct xs_conn *c = qp_conn(q);
	struct rdmap_atomic_req ar;
	struct xs_err err;
	uint8_t *dst = NULL;
	int rc;

	rc = rdmap_atomic_req_decode(d->addr, d->msg_len, &ar, &err);
	if (rc == 0)
		rc = rdmap_atomic_req_check(&ar, &err);
	if (rc == 0)
		rc = xs_mr_resolve(q->qp.pd, ar.stag, ar.to, RDMAP_ATOMIC_SIZE,
				   XS_ACCESS_REMOTE_ATOMIC, &dst, &err);
	if (rc == 0) {
		uint64_t old = atomic_carry_out(&ar, dst);

		rc = xs_conn_atomic_resp(c, ar.req_id, old);
		if (rc < 0) /* beyond IRD: no buffer for it, as for a Read */
			xs_err_set(&err, XS_LAYER_DDP, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_NO_BUFFER);
	}
	if (rc == 0) {
		if (ddp_queue_post(&q->rrq, d->addr, q->ird_buf_len, NULL) < 0)
			xs_log("QP %u: IRD buffer lost\n", q->qp.qp_num);
		return;
	}
	/* the Terminate names the request by its DDP header (its RDMAP
	 * header does not fit the 28 octets a Terminate carries) */
	struct rdmap_term t;

	term_untagged(&t, &err, RDMAP_OP_ATOMIC_REQ, RDMAP_QN_READ_REQ, d);
	qp_terminate(q, &t);
}

/* Requester: an Atomic Response (QN 3) completes the oldest Atomic, which
 * must be at the head of the send FIFO (responses come in request order,
 * Read Responses included) and carry its Request Identifier. */
static void deliver_atomic_resp(struct xs_qp *q, const struct ddp_delivery *d)
{
	struct rdmap_atomic_resp resp;
	struct xs_err err;
	bool ok = false;

	if (rdmap_atomic_resp_decode(d->addr, d->msg_len, &resp, &err) == 0) {
		pthread_mutex_lock(&q->rd_lock);
		if (q->rd_count && q->sq[q->sq_head].atomic &&
		    q->sq[q->sq_head].req_id == resp.req_id) {
			struct xs_sqe *e = &q->sq[q->sq_head];

			/* host order in the local buffer, as other providers */
			memcpy(e->result, &resp.value, sizeof(resp.value));
			if (e->signaled)
				push_wc(q->qp.send_cq, q, e->wr_id, e->op, IBV_WC_SUCCESS,
					RDMAP_ATOMIC_SIZE);
			sq_pop(q);
			sq_drain(q);
			pthread_cond_broadcast(&q->rd_cond);
			ok = true;
		}
		pthread_mutex_unlock(&q->rd_lock);
		if (!ok)
			xs_err_set(&err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP,
				   RDMAP_ECODE_UNEXPECTED_OP);
	}
	if (ok) {
		if (ddp_queue_post(&q->arq, d->addr, RDMAP_ATOMIC_RESP_LEN, NULL) < 0)
			xs_log("QP %u: Atomic Response buffer lost\n", q->qp.qp_num);
		return;
	}
	struct rdmap_term t;

	term_untagged(&t, &err, RDMAP_OP_ATOMIC_RESP, RDMAP_QN_ATOMIC_RESP, d);
	qp_terminate(q, &t);
}

static void deliver_read_req(struct xs_qp *q, const struct ddp_delivery *d)
{
	struct xs_conn *c = qp_conn(q);
	struct rdmap_read_req rr;
	struct xs_err err;
	uint8_t *src = NULL;
	int rc;

	if (qp_state(q) != IBV_QPS_RTS && qp_state(q) != IBV_QPS_SQD)
		return; /* in error: the stream is going away */
	if ((d->rsvdulp & RDMAP_OPCODE_MASK) == RDMAP_OP_ATOMIC_REQ) {
		deliver_atomic_req(q, d);
		return;
	}
	rc = rdmap_read_req_decode(d->addr, d->msg_len, &rr, &err);
	if (rc == 0)
		rc = xs_mr_resolve(q->qp.pd, rr.src_stag, rr.src_to, rr.size, XS_ACCESS_REMOTE_READ,
				   &src, &err);
	if (rc == 0) {
		rc = xs_conn_read_resp(c, rr.sink_stag, rr.sink_to, src, rr.size);
		if (rc < 0) /* beyond IRD: no Read Request buffer for it (as siw) */
			xs_err_set(&err, XS_LAYER_DDP, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_NO_BUFFER);
	}
	if (rc == 0) {
		/* the 28 octets were decoded: the buffer serves the next one */
		if (ddp_queue_post(&q->rrq, d->addr, q->ird_buf_len, NULL) < 0)
			xs_log("QP %u: IRD buffer lost\n", q->qp.qp_num);
		return;
	}
	struct rdmap_term t;

	term_untagged(&t, &err, RDMAP_OP_READ_REQ, RDMAP_QN_READ_REQ, d);
	if (d->msg_len == RDMAP_READ_REQ_LEN) {
		t.r = true;
		t.rdmap_hdr_len = RDMAP_READ_REQ_LEN;
		memcpy(t.rdmap_hdr, d->addr, RDMAP_READ_REQ_LEN);
	}
	qp_terminate(q, &t);
}

static void qp_deliver(void *ctx, enum rdmap_opcode op, uint32_t qn, const struct ddp_delivery *d)
{
	struct xs_qp *q = ctx;
	struct xs_err err;

	switch (qn) {
	case RDMAP_QN_SEND:
		if (op == RDMAP_OP_IMM_DATA || op == RDMAP_OP_IMM_DATA_SE)
			deliver_imm(q, op, d);
		else
			deliver_send(q, op, d);
		break;
	case RDMAP_QN_READ_REQ:
		deliver_read_req(q, d);
		break;
	case RDMAP_QN_ATOMIC_RESP:
		deliver_atomic_resp(q, d);
		break;
	case RDMAP_QN_TERMINATE:
		/* the failed upcall follows; keep the cause for the completions */
		if (rdmap_term_decode(d->addr, d->msg_len, &q->term, &err) == 0 ||
		    rdmap_term_decode_siw(d->addr, d->msg_len, &q->term, &err) == 0)
			q->term_valid = true;
		break;
	default:
		break;
	}
}

static void qp_failed(void *ctx, bool local, const struct xs_err *err)
{
	struct xs_qp *q = ctx;
	bool closed = err && err->layer == XS_LAYER_LLP && err->etype == 0 && err->ecode == 0x01;

	__atomic_store_n(&q->conn_dead, true, __ATOMIC_RELEASE);
	qp_enter_error(q, true, !local && q->term_valid ? &q->term : NULL);
	if (!closed)
		qp_fatal(q);
}

/* The QN 0 queue of a QP on an SRQ wants a buffer for the Send arriving
 * (engine or polling thread, conn rx lock held): the SRQ's oldest WR,
 * unless the QP is past taking any (ERR, RESET). */
static int qp_srq_refill(void *ctx, struct ddp_queue *rq)
{
	struct xs_qp *q = ctx;
	enum ibv_qp_state st;
	struct xs_rwr *r = NULL;
	int rc = -1;

	pthread_mutex_lock(&q->rx_lock);
	st = qp_state(q);
	if (st != IBV_QPS_ERR && st != IBV_QPS_RESET)
		r = xs_srq_take(q->qp.srq);
	if (r && ddp_queue_post(rq, r->buf, r->len, r) == 0)
		rc = 0;
	else if (r) /* the caller checked for room: not reached */
		xs_srq_put(q->qp.srq, r);
	pthread_mutex_unlock(&q->rx_lock);
	return rc;
}

static const struct xs_conn_ops xs_qp_conn_ops = {
	.resolve = qp_resolve,
	.deliver = qp_deliver,
	.tagged_last = qp_tagged_last,
	.failed = qp_failed,
};

/* ---- create / destroy ----------------------------------------------------- */

XS_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	struct xs_qp *q;
	unsigned depth, nsge;

	if (!pd || !a) {
		errno = EINVAL;
		return NULL;
	}
	if (a->qp_type != IBV_QPT_RC) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (a->srq) /* the receive capabilities are the SRQ's, as the kernel's */
		a->cap.max_recv_wr = a->cap.max_recv_sge = 0;
	if (!a->send_cq || !a->recv_cq || a->cap.max_send_wr > XS_MAX_QP_WR ||
	    a->cap.max_recv_wr > XS_MAX_QP_WR || a->cap.max_send_sge > XS_MAX_SGE ||
	    a->cap.max_recv_sge > XS_MAX_SGE || a->cap.max_inline_data > XS_MAX_INLINE) {
		errno = EINVAL;
		return NULL;
	}
	if (__atomic_add_fetch(&xs_nqp, 1, __ATOMIC_RELAXED) > XS_MAX_QP) {
		__atomic_sub_fetch(&xs_nqp, 1, __ATOMIC_RELAXED);
		errno = ENOMEM;
		return NULL;
	}
	depth = a->cap.max_recv_wr ? a->cap.max_recv_wr : 1;
	nsge = a->cap.max_recv_sge ? a->cap.max_recv_sge : 1;
	q = calloc(1, sizeof(*q));
	if (!q)
		goto nomem;
	if (a->srq) { /* no receive records: the SRQ's WRs come in */
		depth = 0;
		if (ddp_queue_init(&q->rq, RDMAP_QN_SEND, XS_SRQ_QP_DEPTH, 1) < 0)
			goto nomem;
		q->rq.refill = qp_srq_refill;
		q->rq.refill_ctx = q;
	} else {
		q->rwr = calloc(depth, sizeof(*q->rwr));
		q->sgs = calloc((size_t)depth * nsge, sizeof(*q->sgs));
		if (!q->rwr || !q->sgs || ddp_queue_init(&q->rq, RDMAP_QN_SEND, depth, 1) < 0)
			goto nomem;
	}
	for (unsigned i = depth; i-- > 0;) {
		q->rwr[i].sg = &q->sgs[(size_t)i * nsge];
		q->rwr[i].next = q->rfree;
		q->rfree = &q->rwr[i];
	}
	a->cap.max_inline_data = XS_MAX_INLINE;
	q->cap = a->cap;
	q->sq_max = a->cap.max_send_wr + XS_MAX_ORD;
	q->sq_sig_all = a->sq_sig_all != 0;
	q->ird_pref = XS_MAX_IRD;
	q->ord_pref = XS_MAX_ORD;
	q->qp.context = pd->context;
	q->qp.qp_context = a->qp_context;
	q->qp.pd = pd;
	q->qp.send_cq = a->send_cq;
	q->qp.recv_cq = a->recv_cq;
	q->qp.srq = a->srq;
	q->qp.qp_type = IBV_QPT_RC;
	do
		q->qp.qp_num = __atomic_fetch_add(&xs_qpn_next, 1, __ATOMIC_RELAXED) & 0xffffff;
	while (q->qp.qp_num == 0);
	pthread_mutex_init(&q->qp.mutex, NULL);
	pthread_cond_init(&q->qp.cond, NULL);
	pthread_mutex_init(&q->lock, NULL);
	pthread_mutex_init(&q->rx_lock, NULL);
	pthread_mutex_init(&q->sq_lock, NULL);
	pthread_mutex_init(&q->rd_lock, NULL);
	pthread_cond_init(&q->rd_cond, NULL);
	q->attr.cap = q->cap;
	q->attr.port_num = XS_PORT_NUM;
	q->attr.path_mtu = IBV_MTU_1024;
	q->attr.max_rd_atomic = (uint8_t)q->ord_pref;
	q->attr.max_dest_rd_atomic = (uint8_t)q->ird_pref;
	qp_set_state(q, IBV_QPS_RESET);
	if (a->srq && xs_srq_attach(a->srq, &q->qp)) {
		ddp_queue_destroy(&q->rq);
		goto nomem;
	}
	__atomic_add_fetch(&((struct xs_cq *)a->send_cq)->qp_refs, 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&((struct xs_cq *)a->recv_cq)->qp_refs, 1, __ATOMIC_RELEASE);
	return &q->qp;
nomem:
	if (q) {
		free(q->rwr);
		free(q->sgs);
		free(q);
	}
	__atomic_sub_fetch(&xs_nqp, 1, __ATOMIC_RELAXED);
	errno = ENOMEM;
	return NULL;
}

/* The ex entry point (ibv_create_qp_ex, rdma_create_qp_ex): a PD, and send
 * ops for the ibv_wr_* API (verbs_qpx.c). */
struct ibv_qp *xs_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *ax)
{
	struct ibv_qp_init_attr a;
	struct ibv_qp *qp;
	int rc;

	if (ax->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((ax->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    (ax->send_ops_flags & ~(uint64_t)XS_QPX_SEND_OPS)) {
		errno = EOPNOTSUPP; /* immediate data, atomics, MW, TSO */
		return NULL;
	}
	if (!(ax->comp_mask & IBV_QP_INIT_ATTR_PD)) {
		errno = EINVAL;
		return NULL;
	}
	memset(&a, 0, sizeof(a));
	a.qp_context = ax->qp_context;
	a.send_cq = ax->send_cq;
	a.recv_cq = ax->recv_cq;
	a.srq = ax->srq;
	a.cap = ax->cap;
	a.qp_type = ax->qp_type;
	a.sq_sig_all = ax->sq_sig_all;
	qp = ibv_create_qp(ax->pd, &a);
	if (!qp)
		return NULL;
	ax->cap = a.cap;
	if (ax->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		struct xs_qp *q = to_xs_qp(qp);

		rc = xs_qpx_init(&q->qpx, ax->send_ops_flags, &q->cap, &q->wrb);
		if (rc) {
			ibv_destroy_qp(qp);
			errno = rc;
			return NULL;
		}
	}
	return qp;
}

XS_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *ibqp)
{
	struct xs_qp *q = to_xs_qp(ibqp);

	if (!ibqp || !q->wrb) {
		errno = EOPNOTSUPP; /* created without send ops: ibv_post_send */
		return NULL;
	}
	return &q->qpx;
}

struct xs_wrb *xs_qp_wrb(struct ibv_qp *ibqp)
{
	return to_xs_qp(ibqp)->wrb;
}

XS_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct xs_qp *q = to_xs_qp(ibqp);
	struct xs_conn *c = qp_conn(q);

	/* post_srq_recv kicks the connections of the SRQ's QPs: not this one's
	 * once it is put (the refill may still run until then: it is the SRQ
	 * that the caller may not destroy before this returns) */
	if (ibqp->srq)
		xs_srq_detach(ibqp->srq, ibqp);
	if (c) {
		xs_cq_del_conn(ibqp->send_cq, c);
		xs_cq_del_conn(ibqp->recv_cq, c);
		/* the QP owns the reference bind took over; after put no upcall runs */
		xs_conn_disconnect(c);
		xs_conn_put(c);
	}
	__atomic_store_n(&q->conn_dead, true, __ATOMIC_RELEASE);
	__atomic_store_n(&q->conn, NULL, __ATOMIC_RELEASE);
	flush_sq(q, false, NULL);
	pthread_mutex_lock(&q->rx_lock);
	flush_recvs(q, false);
	pthread_mutex_unlock(&q->rx_lock);
	ddp_queue_destroy(&q->rq);
	if (q->rx_extra) {
		ddp_queue_destroy(&q->rrq);
		ddp_queue_destroy(&q->tq);
		ddp_queue_destroy(&q->arq);
	}
	xs_cq_clean_qp(ibqp->send_cq, ibqp->qp_num);
	if (ibqp->recv_cq != ibqp->send_cq)
		xs_cq_clean_qp(ibqp->recv_cq, ibqp->qp_num);
	__atomic_sub_fetch(&((struct xs_cq *)ibqp->send_cq)->qp_refs, 1, __ATOMIC_RELEASE);
	__atomic_sub_fetch(&((struct xs_cq *)ibqp->recv_cq)->qp_refs, 1, __ATOMIC_RELEASE);
	xs_async_forget(ibqp->context, ibqp); /* no upcall can queue one any more */
	pthread_mutex_destroy(&q->qp.mutex);
	pthread_cond_destroy(&q->qp.cond);
	pthread_mutex_destroy(&q->lock);
	pthread_mutex_destroy(&q->rx_lock);
	pthread_mutex_destroy(&q->sq_lock);
	pthread_mutex_destroy(&q->rd_lock);
	pthread_cond_destroy(&q->rd_cond);
	free(q->ird_bufs);
	free(q->arq_bufs);
	free(q->sq);
	free(q->rwr);
	free(q->sgs);
	xs_qpx_destroy(q->wrb);
	free(q);
	__atomic_sub_fetch(&xs_nqp, 1, __ATOMIC_RELAXED);
	return 0;
}

/* ---- state machine -------------------------------------------------------- */

static bool qp_transition_ok(enum ibv_qp_state cur, enum ibv_qp_state next)
{
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR)
		return true;
	switch (cur) {
	case IBV_QPS_RESET:
		return next == IBV_QPS_INIT;
	case IBV_QPS_INIT:
		return next == IBV_QPS_INIT || next == IBV_QPS_RTR;
	case IBV_QPS_RTR:
		return next == IBV_QPS_RTS;
	case IBV_QPS_RTS:
		return next == IBV_QPS_RTS || next == IBV_QPS_SQD;
	case IBV_QPS_SQD:
		return next == IBV_QPS_SQD || next == IBV_QPS_RTS;
	case IBV_QPS_SQE:
		return next == IBV_QPS_RTS;
	default:
		return false;
	}
}

/* To RESET: WRs are dropped without completions (verbs spec). */
static void qp_reset(struct xs_qp *q)
{
	struct xs_conn *c;

	flush_sq(q, false, NULL);
	c = qp_rx_lock(q);
	flush_recvs(q, false);
	if (!c)
		q->rq.msn_head = 1; /* a fresh connection starts at MSN 1 */
	qp_rx_unlock(q, c);
}

XS_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct xs_qp *q = to_xs_qp(ibqp);
	enum ibv_qp_state cur, next;

	pthread_mutex_lock(&q->lock);
	cur = q->qp.state;
	next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if (((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur) ||
	    ((mask & IBV_QP_STATE) && !qp_transition_ok(cur, next)) ||
	    ((mask & IBV_QP_PORT) && attr->port_num != XS_PORT_NUM) ||
	    ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && attr->max_rd_atomic > XS_MAX_ORD) ||
	    ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && attr->max_dest_rd_atomic > XS_MAX_IRD) ||
	    ((mask & IBV_QP_CAP))) {
		pthread_mutex_unlock(&q->lock);
		return EINVAL;
	}
	/* path, PSN, timeout and retry attributes mean nothing over TCP:
	 * kept for query_qp only */
	if (mask & IBV_QP_ACCESS_FLAGS)
		q->attr.qp_access_flags = attr->qp_access_flags;
	if (mask & IBV_QP_PKEY_INDEX)
		q->attr.pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PATH_MTU)
		q->attr.path_mtu = attr->path_mtu;
	if (mask & IBV_QP_SQ_PSN)
		q->attr.sq_psn = attr->sq_psn;
	if (mask & IBV_QP_RQ_PSN)
		q->attr.rq_psn = attr->rq_psn;
	if (mask & IBV_QP_TIMEOUT)
		q->attr.timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		q->attr.retry_cnt = attr->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		q->attr.rnr_retry = attr->rnr_retry;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		q->attr.min_rnr_timer = attr->min_rnr_timer;
	if (mask & IBV_QP_DEST_QPN)
		q->attr.dest_qp_num = attr->dest_qp_num;
	if (mask & IBV_QP_AV)
		q->attr.ah_attr = attr->ah_attr;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC) {
		q->ord_pref = attr->max_rd_atomic;
		q->attr.max_rd_atomic = attr->max_rd_atomic;
	}
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) {
		q->ird_pref = attr->max_dest_rd_atomic;
		q->attr.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	}
	if (next != IBV_QPS_ERR && next != IBV_QPS_RESET)
		qp_set_state(q, next);
	pthread_mutex_unlock(&q->lock);
	if (next == IBV_QPS_ERR && cur != IBV_QPS_ERR) {
		qp_enter_error(q, false, NULL);
	} else if (next == IBV_QPS_RESET && cur != IBV_QPS_RESET) {
		qp_reset(q);
		pthread_mutex_lock(&q->lock);
		qp_set_state(q, IBV_QPS_RESET);
		pthread_mutex_unlock(&q->lock);
	}
	return 0;
}

XS_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
			   struct ibv_qp_init_attr *init_attr)
{
	struct xs_qp *q = to_xs_qp(ibqp);

	if (!attr || !init_attr)
		return EINVAL;
	pthread_mutex_lock(&q->lock);
	*attr = q->attr;
	attr->qp_state = attr->cur_qp_state = q->qp.state;
	pthread_mutex_unlock(&q->lock);
	memset(init_attr, 0, sizeof(*init_attr));
	init_attr->qp_context = q->qp.qp_context;
	init_attr->send_cq = q->qp.send_cq;
	init_attr->recv_cq = q->qp.recv_cq;
	init_attr->srq = q->qp.srq;
	init_attr->cap = q->cap; /* on an SRQ: no receive WRs of its own */
	init_attr->qp_type = IBV_QPT_RC;
	init_attr->sq_sig_all = q->sq_sig_all;
	return 0;
}

/* ---- QP <-> CM --------------------------------------------------------------- */

void xs_qp_read_limits(struct ibv_qp *ibqp, uint16_t *ird, uint16_t *ord)
{
	struct xs_qp *q = to_xs_qp(ibqp);

	pthread_mutex_lock(&q->lock);
	*ird = q->ird_pref < XS_MAX_IRD ? q->ird_pref : XS_MAX_IRD;
	*ord = q->ord_pref < XS_MAX_ORD ? q->ord_pref : XS_MAX_ORD;
	pthread_mutex_unlock(&q->lock);
}

int xs_qp_bind_conn(struct ibv_qp *ibqp, struct xs_conn *c, const struct mpa_agreed *agreed)
{
	struct xs_qp *q = to_xs_qp(ibqp);
	enum ibv_qp_state st = qp_state(q);
	/* no negotiation (MPA rev 1) may say 0: allow one Read each way */
	unsigned ird = agreed->ird ? agreed->ird : 1, ord = agreed->ord ? agreed->ord : 1;
	int rc;

	if (ird > XS_MAX_IRD)
		ird = XS_MAX_IRD;
	if (ord > XS_MAX_ORD)
		ord = XS_MAX_ORD;
	if (st != IBV_QPS_RESET && st != IBV_QPS_INIT && st != IBV_QPS_RTR)
		return -EINVAL;
	if (qp_conn(q) || q->rx_extra)
		return -EBUSY;
	q->ext = agreed->rdmap_ext;
	q->ird_buf_len = xs_ird_buf_len(agreed);
	q->ird_bufs = malloc((size_t)ird * q->ird_buf_len);
	if (!q->ird_bufs)
		return -ENOMEM;
	if (ddp_queue_init(&q->rrq, RDMAP_QN_READ_REQ, XS_MAX_IRD, 1) < 0)
		goto nomem;
	if (ddp_queue_init(&q->tq, RDMAP_QN_TERMINATE, XS_TERM_BUFS, 1) < 0) {
		ddp_queue_destroy(&q->rrq);
		goto nomem;
	}
	if (q->ext) {
		/* one Atomic Response buffer per Atomic outstanding (ORD) */
		q->arq_bufs = malloc((size_t)ord * RDMAP_ATOMIC_RESP_LEN);
		if (!q->arq_bufs || ddp_queue_init(&q->arq, RDMAP_QN_ATOMIC_RESP, XS_MAX_ORD, 1) < 0) {
			ddp_queue_destroy(&q->rrq);
			ddp_queue_destroy(&q->tq);
			free(q->arq_bufs);
			q->arq_bufs = NULL;
			goto nomem;
		}
		for (unsigned i = 0; i < ord; i++)
			ddp_queue_post(&q->arq, q->arq_bufs + (size_t)i * RDMAP_ATOMIC_RESP_LEN,
				       RDMAP_ATOMIC_RESP_LEN, NULL);
	}
	q->rx_extra = true;
	for (unsigned i = 0; i < ird; i++)
		ddp_queue_post(&q->rrq, q->ird_bufs + (size_t)i * q->ird_buf_len, q->ird_buf_len,
			       NULL);
	for (unsigned i = 0; i < XS_TERM_BUFS; i++)
		ddp_queue_post(&q->tq, q->term_bufs[i], XS_TERM_BUF, NULL);
	pthread_mutex_lock(&q->rd_lock);
	q->ord = ord;
	pthread_mutex_unlock(&q->rd_lock);
	/* posters that see conn from now on take the conn rx lock */
	pthread_mutex_lock(&q->rx_lock);
	__atomic_store_n(&q->conn, c, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&q->rx_lock);
	rc = xs_conn_attach(c, &xs_qp_conn_ops, q, &q->rq, &q->rrq, &q->tq, q->ext ? &q->arq : NULL);
	if (rc < 0) {
		pthread_mutex_lock(&q->rx_lock);
		__atomic_store_n(&q->conn, NULL, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&q->rx_lock);
		ddp_queue_destroy(&q->rrq);
		ddp_queue_destroy(&q->tq);
		ddp_queue_destroy(&q->arq);
		free(q->arq_bufs);
		q->arq_bufs = NULL;
		q->ext = false;
		q->rx_extra = false;
		free(q->ird_bufs);
		q->ird_bufs = NULL;
		return rc;
	}
	/* polling the CQs receives on the connection (the fast path) */
	xs_cq_add_conn(q->qp.recv_cq, c);
	xs_cq_add_conn(q->qp.send_cq, c);
	pthread_mutex_lock(&q->lock);
	q->attr.max_rd_atomic = (uint8_t)ord;
	q->attr.max_dest_rd_atomic = (uint8_t)ird;
	/* Attached: the QP owns the connection from here on, even if the
	 * stream already failed (the close then arrives as DISCONNECTED). */
	if (q->qp.state != IBV_QPS_ERR)
		qp_set_state(q, IBV_QPS_RTS);
	pthread_mutex_unlock(&q->lock);
	return 0;
nomem:
	free(q->ird_bufs);
	q->ird_bufs = NULL;
	return -ENOMEM;
}

void xs_qp_flush(struct ibv_qp *ibqp)
{
	qp_enter_error(to_xs_qp(ibqp), false, NULL);
}

/* ---- post_recv ------------------------------------------------------------- */

int xs_rwr_fill(struct xs_rwr *r, struct ibv_pd *pd, const struct ibv_recv_wr *wr,
		unsigned max_sge)
{
	struct xs_sg sg[XS_MAX_SGE];
	uint64_t total = 0;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > max_sge || max_sge > XS_MAX_SGE ||
	    (wr->num_sge && !wr->sg_list))
		return EINVAL;
	/* bad lkeys fail the post (we check at post time, not at placement) */
	for (int i = 0; i < wr->num_sge; i++) {
		const struct ibv_sge sv = sge_get(wr->sg_list, i), *s = &sv;

		sg[i].len = s->length;
		sg[i].ptr = s->length ? xs_mr_local(pd, s->lkey, s->addr, s->length, true) : NULL;
		if (s->length && !sg[i].ptr)
			return EINVAL;
		total += s->length;
	}
	if (total > UINT32_MAX)
		return EINVAL;
	r->wr_id = wr->wr_id;
	r->bounce = NULL;
	r->nsg = 0;
	r->len = (uint32_t)total;
	if (wr->num_sge <= 1) {
		r->buf = wr->num_sge ? sg[0].ptr : NULL;
	} else {
		r->buf = r->bounce = malloc(total ? total : 1);
		if (!r->buf)
			return ENOMEM;
		r->nsg = (uint32_t)wr->num_sge;
		memcpy(r->sg, sg, r->nsg * sizeof(*sg));
	}
	return 0;
}

static int post_one_recv(struct xs_qp *q, const struct ibv_recv_wr *wr)
{
	enum ibv_qp_state st = qp_state(q);
	struct xs_rwr *r;
	int rc;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->cap.max_recv_sge)
		return EINVAL;
	if (st == IBV_QPS_RESET)
		return EINVAL;
	if (st == IBV_QPS_ERR) {
		push_wc(q->qp.recv_cq, q, wr->wr_id, IBV_WC_RECV, IBV_WC_WR_FLUSH_ERR, 0);
		return 0;
	}
	r = q->rfree;
	if (!r)
		return ENOMEM;
	rc = xs_rwr_fill(r, q->qp.pd, wr, q->cap.max_recv_sge);
	if (rc)
		return rc;
	if (ddp_queue_post(&q->rq, r->buf, r->len, r) < 0) {
		free(r->bounce);
		r->bounce = NULL;
		return ENOMEM;
	}
	q->rfree = r->next;
	return 0;
}

int xs_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct xs_qp *q = to_xs_qp(ibqp);
	struct xs_conn *c;
	bool posted = false;
	int rc = 0;

	if (q->qp.srq) { /* its receives are the SRQ's (rdma-core's providers) */
		*bad = wr;
		return EINVAL;
	}
	c = qp_rx_lock(q);
	for (; wr; wr = wr->next) {
		rc = post_one_recv(q, wr);
		if (rc) {
			*bad = wr;
			break;
		}
		posted = true;
	}
	qp_rx_unlock(q, c);
	if (c && posted)
		xs_conn_rx_kick(c, false); /* a Send may be waiting for it (RNR) */
	return rc;
}

/* ---- post_send -------------------------------------------------------------- */

/* A local error completes the WR with st and fails the QP (verbs spec). */
static int send_local_error(struct xs_qp *q, const struct ibv_send_wr *wr, enum ibv_wc_opcode op,
			    enum ibv_wc_status st)
{
	sq_complete(q, wr->wr_id, op, st, 0, true);
	qp_enter_error(q, false, NULL);
	return 0;
}

static int post_read(struct xs_qp *q, struct xs_conn *c, const struct ibv_send_wr *wr,
		     bool signaled)
{
	const struct ibv_sge sv = wr->num_sge ? sge_get(wr->sg_list, 0) : (struct ibv_sge){ 0 };
	const struct ibv_sge *s = wr->num_sge ? &sv : NULL;
	struct rdmap_read_req rr = {
		.sink_stag = s ? s->lkey : 0,
		.sink_to = s ? s->addr : 0,
		.size = s ? s->length : 0,
		.src_stag = wr->wr.rdma.rkey,
		.src_to = wr->wr.rdma.remote_addr,
	};
	struct xs_sqe *rd;
	unsigned limit;

	if (wr->num_sge > 1)
		return EINVAL; /* max_sge_rd is 1 */
	if (s && s->length && !xs_mr_local(q->qp.pd, s->lkey, s->addr, s->length, true))
		return send_local_error(q, wr, IBV_WC_RDMA_READ, IBV_WC_LOC_PROT_ERR);
	pthread_mutex_lock(&q->rd_lock);
	limit = q->ord < q->cap.max_send_wr ? q->ord : q->cap.max_send_wr;
	if (!limit)
		limit = 1;
	/* beyond ORD: wait for a Read to complete (keeps WR order) */
	while (q->rd_count >= limit && qp_state(q) == IBV_QPS_RTS)
		pthread_cond_wait(&q->rd_cond, &q->rd_lock);
	if (qp_state(q) != IBV_QPS_RTS) {
		pthread_mutex_unlock(&q->rd_lock);
		sq_complete(q, wr->wr_id, IBV_WC_RDMA_READ, IBV_WC_WR_FLUSH_ERR, 0, true);
		return 0;
	}
	if (sq_reserve(q, 1)) {
		pthread_mutex_unlock(&q->rd_lock);
		return ENOMEM;
	}
	rd = sq_at(q, q->sq_count);
	*rd = (struct xs_sqe){
		.wr_id = wr->wr_id,
		.sink_stag = rr.sink_stag,
		.sink_to = rr.sink_to,
		.len = rr.size,
		.op = IBV_WC_RDMA_READ,
		.read = true,
		.signaled = signaled,
	};
	q->sq_count++;
	q->rd_count++;
	pthread_mutex_unlock(&q->rd_lock);
	if (xs_conn_read_req(c, &rr) < 0)
		qp_enter_error(q, false, NULL); /* flushes this Read too */
	return 0;
}

/* RFC 7306 Atomic (the connection agreed on it): 8 octets at an 8-aligned
 * remote address (EINVAL otherwise, at post time), the old value into
 * the one local SGE of 8 octets.  It waits in the send FIFO like a Read
 * and counts against ORD with them; its Atomic Response completes it. */
static int post_atomic(struct xs_qp *q, struct xs_conn *c, const struct ibv_send_wr *wr,
		       enum ibv_wc_opcode wop, bool signaled)
{
	struct rdmap_atomic_req ar = {
		.stag = wr->wr.atomic.rkey,
		.to = wr->wr.atomic.remote_addr,
	};
	struct ibv_sge s;
	struct xs_sqe *e;
	unsigned limit;
	uint8_t *res;

	if (wr->num_sge != 1)
		return EINVAL;
	s = sge_get(wr->sg_list, 0);
	if (s.length != RDMAP_ATOMIC_SIZE || ar.to % RDMAP_ATOMIC_SIZE)
		return EINVAL;
	if (wop == IBV_WC_COMP_SWAP) {
		/* masks all ones: the whole word compares and takes swap */
		ar.op = RDMAP_ATOMIC_CMP_SWAP;
		ar.compare = wr->wr.atomic.compare_add;
		ar.compare_mask = UINT64_MAX;
		ar.add_swap = wr->wr.atomic.swap;
		ar.add_swap_mask = UINT64_MAX;
	} else {
		ar.op = RDMAP_ATOMIC_FETCH_ADD; /* Add Mask 0: a plain 64-bit add */
		ar.add_swap = wr->wr.atomic.compare_add;
	}
	res = xs_mr_local(q->qp.pd, s.lkey, s.addr, s.length, true);
	if (!res)
		return send_local_error(q, wr, wop, IBV_WC_LOC_PROT_ERR);
	pthread_mutex_lock(&q->rd_lock);
	limit = q->ord < q->cap.max_send_wr ? q->ord : q->cap.max_send_wr;
	if (!limit)
		limit = 1;
	while (q->rd_count >= limit && qp_state(q) == IBV_QPS_RTS)
		pthread_cond_wait(&q->rd_cond, &q->rd_lock);
	if (qp_state(q) != IBV_QPS_RTS) {
		pthread_mutex_unlock(&q->rd_lock);
		sq_complete(q, wr->wr_id, wop, IBV_WC_WR_FLUSH_ERR, 0, true);
		return 0;
	}
	if (sq_reserve(q, 1)) {
		pthread_mutex_unlock(&q->rd_lock);
		return ENOMEM;
	}
	ar.req_id = q->atomic_id++;
	e = sq_at(q, q->sq_count);
	*e = (struct xs_sqe){
		.wr_id = wr->wr_id,
		.len = RDMAP_ATOMIC_SIZE,
		.op = wop,
		.read = true,
		.atomic = true,
		.signaled = signaled,
		.req_id = ar.req_id,
		.result = res,
	};
	q->sq_count++;
	q->rd_count++;
	pthread_mutex_unlock(&q->rd_lock);
	if (xs_conn_atomic_req(c, &ar) < 0)
		qp_enter_error(q, false, NULL); /* flushes this Atomic too */
	return 0;
}

/* The Immediate Data message of a WR with imm (8 octets: xsock's layout
 * in iwarp/rdmap_ext_wire.h). */
static int send_imm(struct xs_conn *c, const struct ibv_send_wr *wr, bool attached, bool se)
{
	uint8_t body[RDMAP_IMM_LEN] = { 0 };
	struct iovec iov = { body, sizeof(body) };

	memcpy(body, &wr->imm_data, sizeof(wr->imm_data)); /* already network order */
	if (attached)
		body[RDMAP_IMM_XS_FLAGS] = RDMAP_IMM_XS_ATTACHED;
	return xs_conn_send(c, se ? RDMAP_OP_IMM_DATA_SE : RDMAP_OP_IMM_DATA, 0, &iov, 1);
}

/* A chain of Sends and Writes posted corked (xs_conn_cork): their FPDUs
 * leave in one sendmsg, and their completions wait for it. */
#define XS_CORK_WRS 16

struct xs_cork {
	struct xs_conn *c;
	unsigned n;
	struct {
		uint64_t wr_id;
		enum ibv_wc_opcode op;
		uint32_t len;
		struct xs_sq_slot slot;
	} wc[XS_CORK_WRS];
};

static bool chain_corkable(const struct ibv_send_wr *wr)
{
	unsigned n = 0;

	if (!wr || !wr->next)
		return false;
	for (; wr; wr = wr->next)
		if (++n > XS_CORK_WRS ||
		    (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_INV &&
		     wr->opcode != IBV_WR_RDMA_WRITE))
			return false;
	return true;
}

/* Write what the chain gathered and complete its WRs (before any other
 * completion of this post, so the CQ keeps WR order). */
static void cork_settle(struct xs_qp *q, struct xs_cork *k)
{
	int rc;

	if (!k || !k->c)
		return;
	rc = xs_conn_cork_flush(k->c);
	for (unsigned i = 0; i < k->n; i++)
		sq_settle(q, &k->wc[i].slot, k->wc[i].wr_id, k->wc[i].op,
			  rc < 0 ? IBV_WC_WR_FLUSH_ERR : IBV_WC_SUCCESS, rc < 0 ? 0 : k->wc[i].len);
	k->n = 0;
	if (rc < 0)
		qp_enter_error(q, false, NULL);
}

static int post_one_send(struct xs_qp *q, const struct ibv_send_wr *wr, struct xs_cork *k)
{
	enum ibv_qp_state st = qp_state(q);
	bool signaled = q->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
	bool se = (wr->send_flags & IBV_SEND_SOLICITED) != 0;
	struct iovec iov[XS_MAX_SGE];
	uint8_t inl[XS_MAX_INLINE];
	enum ibv_wc_opcode wop;
	uint64_t total = 0;
	struct xs_conn *c;
	int n = 0, rc;

	switch (wr->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_INV:
		wop = IBV_WC_SEND;
		break;
	case IBV_WR_RDMA_WRITE:
		wop = IBV_WC_RDMA_WRITE;
		break;
	case IBV_WR_RDMA_READ:
		wop = IBV_WC_RDMA_READ;
		break;
	case IBV_WR_SEND_WITH_IMM:
		wop = IBV_WC_SEND;
		break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		wop = IBV_WC_RDMA_WRITE;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		wop = IBV_WC_COMP_SWAP;
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		wop = IBV_WC_FETCH_ADD;
		break;
	default: /* MW, TSO */
		return EINVAL;
	}
	/* RFC 7306 operations on a connection that did not agree on them
	 * (a siw peer, XSOCK_RDMAP_EXT=0, or not connected yet): EOPNOTSUPP,
	 * as for a valid WR the device cannot carry here */
	if ((wr->opcode == IBV_WR_SEND_WITH_IMM || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
	     wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) &&
	    !__atomic_load_n(&q->ext, __ATOMIC_ACQUIRE))
		return EOPNOTSUPP;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->cap.max_send_sge)
		return EINVAL;
	if (st == IBV_QPS_ERR) {
		cork_settle(q, k);
		sq_complete(q, wr->wr_id, wop, IBV_WC_WR_FLUSH_ERR, 0, true);
		return 0;
	}
	if (st != IBV_QPS_RTS)
		return EINVAL;
	c = qp_conn(q);
	if (!c)
		return ENOTCONN;
	if (wr->opcode == IBV_WR_RDMA_READ)
		return post_read(q, c, wr, signaled);
	if (wop == IBV_WC_COMP_SWAP || wop == IBV_WC_FETCH_ADD)
		return post_atomic(q, c, wr, wop, signaled);
	if (wr->send_flags & IBV_SEND_INLINE) {
		for (int i = 0; i < wr->num_sge; i++) {
			const struct ibv_sge sv = sge_get(wr->sg_list, i), *s = &sv;

			if (s->length > XS_MAX_INLINE - total)
				return EINVAL;
			memcpy(inl + total, (const void *)(uintptr_t)s->addr, s->length);
			total += s->length;
		}
		iov[0].iov_base = inl;
		iov[0].iov_len = total;
		n = 1;
	} else {
		for (int i = 0; i < wr->num_sge; i++) {
			const struct ibv_sge sv = sge_get(wr->sg_list, i), *s = &sv;
			uint8_t *p = NULL;

			if (s->length) {
				p = xs_mr_local(q->qp.pd, s->lkey, s->addr, s->length, false);
				if (!p) {
					cork_settle(q, k);
					return send_local_error(q, wr, wop, IBV_WC_LOC_PROT_ERR);
				}
			}
			iov[n].iov_base = p;
			iov[n++].iov_len = s->length;
			total += s->length;
		}
		if (total > UINT32_MAX) {
			cork_settle(q, k);
			return send_local_error(q, wr, wop, IBV_WC_LOC_LEN_ERR);
		}
	}
	/* a Write whose remote range runs past 2^64 cannot be segmented (DDP
	 * TOs would wrap): refused like other malformed WRs */
	if ((wr->opcode == IBV_WR_RDMA_WRITE || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) && total &&
	    wr->wr.rdma.remote_addr > UINT64_MAX - (total - 1))
		return EINVAL;
	/* the peer may answer as soon as the data is out: its completion's
	 * place is taken first (a reply's receive comes after), in the CQ or
	 * behind a Read */
	struct xs_sq_slot one, *slot = NULL;

	if (signaled) {
		slot = k && k->c ? &k->wc[k->n].slot : &one;
		if (sq_take(q, slot))
			return ENOMEM;
	}

	switch (wr->opcode) {
	case IBV_WR_SEND:
		rc = xs_conn_send(c, se ? RDMAP_OP_SEND_SE : RDMAP_OP_SEND, 0, iov, n);
		break;
	case IBV_WR_SEND_WITH_INV:
		rc = xs_conn_send(c, se ? RDMAP_OP_SEND_SE_INV : RDMAP_OP_SEND_INV,
				  wr->invalidate_rkey, iov, n);
		break;
	case IBV_WR_SEND_WITH_IMM:
		/* the Immediate Data right before its Send (sq_lock held: no
		 * other message of ours on QN 0 comes between) */
		rc = send_imm(c, wr, true, false);
		if (rc == 0)
			rc = xs_conn_send(c, se ? RDMAP_OP_SEND_SE : RDMAP_OP_SEND, 0, iov, n);
		break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		/* the Write, then the Immediate Data that completes a receive
		 * (it arrives after every octet of the Write: TCP order) */
		rc = xs_conn_tagged(c, RDMAP_OP_WRITE, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr,
				    iov, n);
		if (rc == 0)
			rc = send_imm(c, wr, false, se);
		break;
	default:
		rc = xs_conn_tagged(c, RDMAP_OP_WRITE, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr,
				    iov, n);
		break;
	}
	if (rc < 0) { /* the connection is gone: this WR and the rest flush */
		if (rc != -EPIPE)
			xs_log("post_send: WR %llu not sent: %s; the QP fails",
			       (unsigned long long)wr->wr_id, strerror(-rc));
		cork_settle(q, k);
		if (slot)
			sq_settle(q, slot, wr->wr_id, wop, IBV_WC_WR_FLUSH_ERR, 0);
		qp_enter_error(q, false, NULL);
		return 0;
	}
	if (signaled && k && k->c) {
		k->wc[k->n].wr_id = wr->wr_id;
		k->wc[k->n].op = wop;
		k->wc[k->n].len = (uint32_t)total;
		k->n++;
	} else if (slot) {
		sq_settle(q, slot, wr->wr_id, wop, IBV_WC_SUCCESS, (uint32_t)total);
	}
	return 0;
}

int xs_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct xs_qp *q = to_xs_qp(ibqp);
	int rc = 0;

	struct xs_cork k = { .c = NULL };

	pthread_mutex_lock(&q->sq_lock);
	if (chain_corkable(wr) && qp_state(q) == IBV_QPS_RTS) {
		k.c = qp_conn(q);
		if (k.c && xs_conn_cork(k.c) < 0)
			k.c = NULL; /* the WRs find the connection gone one by one */
	}
	for (; wr; wr = wr->next) {
		rc = post_one_send(q, wr, &k);
		if (rc) {
			*bad = wr;
			break;
		}
	}
	if (k.c) {
		cork_settle(q, &k);
		xs_conn_uncork(k.c);
	}
	pthread_mutex_unlock(&q->sq_lock);
	return rc;
}

/* Private to libxsock (xs_priv_abi.h): Sends and Writes only, which are
 * on the socket when xs_post_send returns; a Read or an Atomic would
 * write into the caller's memory later. */
XS_EXPORT int xsock_priv_post_send_caller(struct ibv_qp *qp, struct ibv_send_wr *wr,
					  struct ibv_send_wr **bad)
{
	int rc;

	for (struct ibv_send_wr *w = wr; w; w = w->next) {
		switch (w->opcode) {
		case IBV_WR_SEND:
		case IBV_WR_SEND_WITH_INV:
		case IBV_WR_SEND_WITH_IMM:
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_RDMA_WRITE_WITH_IMM:
			break;
		default:
			*bad = w;
			return EINVAL;
		}
	}
	xs_mr_caller_ok = true;
	rc = xs_post_send(qp, wr, bad);
	xs_mr_caller_ok = false;
	return rc;
}
