/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A QP's errors: flushing its WRs, the move to ERROR, and the Terminates
 * it sends for errors found in what it received. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs/verbs_qp_priv.h"

/* ---- flushing ------------------------------------------------------------- */

/* Receives: rx_lock held.  complete = false discards (to RESET). */
void flush_recvs(struct xs_qp *q, bool complete)
{
	struct ibv_wc wc[64];
	struct ddp_delivery d;
	unsigned n = 0;

	/* in batches under one CQ lock: a connection's close flushed its 416
	 * receives one push each, 8% of a churning server's CPU */
	while (ddp_queue_flush(&q->rq, &d) == 1) {
		struct xs_rwr *r = d.cookie;

		if (complete)
			wc[n++] = make_wc(q, r->wr_id, IBV_WC_RECV, IBV_WC_WR_FLUSH_ERR, 0);
		rwr_put(q, r);
		if (n == 64) {
			xs_cq_push_n(q->qp.recv_cq, wc, n, false);
			n = 0;
		}
	}
	if (n)
		xs_cq_push_n(q->qp.recv_cq, wc, n, false);
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

/* Empty the send FIFO: Reads flush (the first with the status the peer's
 * Terminate t gives it; on an acked transport the first WR still waiting,
 * Read or not, with q->fail_st when the transport named one), done WRs
 * behind them too unless they failed on their own.  complete = false
 * discards (to RESET). */
void flush_sq(struct xs_qp *q, bool complete, const struct rdmap_term *t)
{
	pthread_mutex_lock(&q->rd_lock);
	for (bool first = true; q->sq_count; sq_pop(q)) {
		struct xs_sqe *e = &q->sq[q->sq_head];
		enum ibv_wc_status st = IBV_WC_WR_FLUSH_ERR;
		bool waits = e->read || e->wait_ack;

		if (e->read && first && t)
			st = term_status(t, e);
		else if (!waits && e->st != IBV_WC_SUCCESS)
			st = e->st;
		if (waits && first && q->fail_st_valid)
			st = q->fail_st;
		if (waits)
			first = false;
		if (e->slot) /* still going out: its poster completes it */
			complete ? slot_to_cq(q, e->slot) : (void)(e->slot->where = XS_SLOT_GONE);
		else if (complete)
			push_wc(q->qp.send_cq, q, e->wr_id, e->op, st, 0);
	}
	pthread_cond_broadcast(&q->rd_cond);
	pthread_mutex_unlock(&q->rd_lock);
}

/* The status an acked transport's failure gives the WR it failed on
 * (qp_failed): the peer's NAK (remote access, remote operation, invalid
 * request), or our retries (LLP/0/0x02 retries, 0x03 RNR retries). */
enum ibv_wc_status qp_fail_status(const struct xs_err *e)
{
	if (e->layer == XS_LAYER_RDMAP && e->etype == RDMAP_ETYPE_REMOTE_PROT)
		return IBV_WC_REM_ACCESS_ERR;
	if (e->layer == XS_LAYER_RDMAP && e->etype == RDMAP_ETYPE_REMOTE_OP)
		return IBV_WC_REM_OP_ERR;
	if (e->layer == XS_LAYER_DDP)
		return IBV_WC_REM_INV_REQ_ERR;
	if (e->layer == XS_LAYER_LLP && e->ecode == 0x02)
		return IBV_WC_RETRY_EXC_ERR;
	if (e->layer == XS_LAYER_LLP && e->ecode == 0x03)
		return IBV_WC_RNR_RETRY_EXC_ERR;
	return IBV_WC_WR_FLUSH_ERR;
}

/* To ERROR, flushing every WR.  engine: called from an upcall (the engine
 * may hold the conn rx lock).  t: the peer's Terminate, if one caused it. */
void qp_enter_error(struct xs_qp *q, bool engine, const struct rdmap_term *t)
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
		q->tp->rx_kick(c, true);
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
void term_untagged(struct rdmap_term *t, const struct xs_err *cause, enum rdmap_opcode op,
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
void qp_fatal(struct xs_qp *q)
{
	struct ibv_async_event ev = { .element.qp = &q->qp, .event_type = IBV_EVENT_QP_FATAL };

	if (!__atomic_exchange_n(&q->fatal_sent, true, __ATOMIC_ACQ_REL))
		xs_async_event(q->qp.context, &ev);
}

/* An error we found in a message the engine delivered (engine thread):
 * the Terminate, then FIN (a Terminate ends the stream: the peer must not
 * have to wait for us to go away), the QP to ERR and its asynchronous
 * error, as when the engine itself finds a protocol error. */
void qp_terminate(struct xs_qp *q, const struct rdmap_term *t)
{
	struct xs_conn *c = qp_conn(q);

	if (c && q->tp->terminate(c, t) < 0)
		xs_log("QP %u: Terminate not sent\n", q->qp.qp_num);
	if (c)
		q->tp->disconnect(c);
	qp_enter_error(q, true, NULL);
	qp_fatal(q);
}
