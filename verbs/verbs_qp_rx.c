/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A QP's receive side: the upcalls of the engine (placement checks,
 * delivered messages, Read and Atomic responder, the stream's failure) and
 * post_recv.  Upcalls run on the engine thread, or on an application
 * thread polling a CQ, under the conn rx lock (failed: with none held). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "iwarp/rdmap_ext.h"
#include "verbs/verbs_qp_priv.h"

/* Lock the receive queue from an application thread: once connected the
 * engine places into it under the conn rx lock, which comes first. */
struct xs_conn *qp_rx_lock(struct xs_qp *q)
{
	for (;;) {
		struct xs_conn *c = qp_conn(q);

		if (c && __atomic_load_n(&q->conn_dead, __ATOMIC_ACQUIRE))
			c = NULL;
		if (c)
			q->tp->rx_lock(c);
		pthread_mutex_lock(&q->rx_lock);
		if (c || !q->conn || q->conn_dead)
			return c;
		/* bound while we waited: retake in order */
		pthread_mutex_unlock(&q->rx_lock);
	}
}

void qp_rx_unlock(struct xs_qp *q, struct xs_conn *c)
{
	pthread_mutex_unlock(&q->rx_lock);
	if (c)
		q->tp->rx_unlock(c);
}

void rwr_put(struct xs_qp *q, struct xs_rwr *r)
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

		if (rd->fence) { /* a Write's fence: a zero-length Read */
			ok = stag == 0 && to == 0 && len == 0;
			empty = ok;
		} else {
			ok = rd->sink_stag == stag && to >= rd->sink_to && len <= rd->len &&
			     to - rd->sink_to <= rd->len - len;
			empty = ok && rd->len == 0;
		}
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

		if (rd->signaled) /* a fence's op and len: its Write's */
			push_wc(q->qp.send_cq, q, rd->wr_id, rd->op, IBV_WC_SUCCESS, rd->len);
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

/* Responder of an RFC 7306 Atomic Request (QN 1, engine thread): the
 * QP's IBV_ACCESS_REMOTE_ATOMIC once its flags are set; check
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

	int acc = __atomic_load_n(&q->rx_access, __ATOMIC_RELAXED);

	rc = rdmap_atomic_req_decode(d->addr, d->msg_len, &ar, &err);
	if (rc == 0)
		rc = rdmap_atomic_req_check(&ar, &err);
	if (rc == 0 && acc >= 0 && !(acc & IBV_ACCESS_REMOTE_ATOMIC)) {
		/* the QP's own rights (verbs: a remote access error; RoCE NAKs
		 * it so, the requester completes IBV_WC_REM_ACCESS_ERR) */
		xs_err_set(&err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_PROT, RDMAP_ECODE_ACCESS);
		rc = -1;
	}
	if (rc == 0)
		rc = xs_mr_resolve(q->qp.pd, ar.stag, ar.to, RDMAP_ATOMIC_SIZE,
				   XS_ACCESS_REMOTE_ATOMIC, &dst, &err);
	if (rc == 0) {
		uint64_t old = atomic_carry_out(&ar, dst);

		rc = q->tp->atomic_resp(c, ar.req_id, old);
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

	/* RTR answers too: a RoCE QP's responder works before its requester */
	if (qp_state(q) != IBV_QPS_RTS && qp_state(q) != IBV_QPS_SQD && qp_state(q) != IBV_QPS_RTR)
		return; /* in error: the stream is going away */
	if ((d->rsvdulp & RDMAP_OPCODE_MASK) == RDMAP_OP_ATOMIC_REQ) {
		deliver_atomic_req(q, d);
		return;
	}
	rc = rdmap_read_req_decode(d->addr, d->msg_len, &rr, &err);
	/* a zero-length Read reads nothing: its STag is not checked (IBA
	 * 9.4.5 for the R_Key; an xsock peer's Write fence, verbs_qp_tx.c) */
	if (rc == 0 && rr.size)
		rc = xs_mr_resolve(q->qp.pd, rr.src_stag, rr.src_to, rr.size, XS_ACCESS_REMOTE_READ,
				   &src, &err);
	if (rc == 0) {
		rc = q->tp->read_resp(c, rr.sink_stag, rr.sink_to, src, rr.size);
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
	if (!local && err && q->acked_tx) { /* RoCE: the WR the NAK or retries name */
		pthread_mutex_lock(&q->rd_lock);
		q->fail_st = qp_fail_status(err);
		q->fail_st_valid = true;
		pthread_mutex_unlock(&q->rd_lock);
	}
	qp_enter_error(q, true, !local && q->term_valid ? &q->term : NULL);
	if (!closed)
		qp_fatal(q);
}

/* The QN 0 queue of a QP on an SRQ wants a buffer for the Send arriving
 * (engine or polling thread, conn rx lock held): the SRQ's oldest WR,
 * unless the QP is past taking any (ERR, RESET). */
int qp_srq_refill(void *ctx, struct ddp_queue *rq)
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

/* The n oldest Sends/Writes were acknowledged (acked transports; engine
 * or polling thread, conn rx lock held): complete them, and the done WRs
 * behind them. */
static void qp_acked(void *ctx, unsigned n)
{
	struct xs_qp *q = ctx;

	pthread_mutex_lock(&q->rd_lock);
	while (n && q->sq_count && q->sq[q->sq_head].wait_ack) {
		struct xs_sqe *e = &q->sq[q->sq_head];

		if (e->signaled)
			push_wc(q->qp.send_cq, q, e->wr_id, e->op, IBV_WC_SUCCESS, e->len);
		sq_pop(q);
		sq_drain(q);
		n--;
	}
	pthread_cond_broadcast(&q->rd_cond);
	pthread_mutex_unlock(&q->rd_lock);
}

const struct xs_conn_ops xs_qp_conn_ops = {
	.acked = qp_acked,
	.resolve = qp_resolve,
	.deliver = qp_deliver,
	.tagged_last = qp_tagged_last,
	.failed = qp_failed,
};

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
		q->tp->rx_kick(c, false); /* a Send may be waiting for it (RNR) */
	return rc;
}

void xs_qp_rx_kick(struct ibv_qp *ibqp)
{
	struct xs_qp *q = to_xs_qp(ibqp);
	struct xs_conn *c = qp_conn(q);

	if (c)
		q->tp->rx_kick(c, false);
}
