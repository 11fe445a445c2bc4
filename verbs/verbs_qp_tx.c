/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A QP's send side: post_send frames each WR on the caller's thread under
 * sq_lock (Sends and Writes are done on return, Reads and Atomics wait in
 * the send FIFO for their responses), and xsock_priv_post_send_caller. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs/verbs_qp_priv.h"
#include "util/xs_errno.h"

/* ---- post_send -------------------------------------------------------------- */


/* How many Reads and Atomics may be outstanding: ORD, within the send
 * queue (rd_lock held). */
static unsigned ord_limit(const struct xs_qp *q)
{
	return q->ord < q->cap.max_send_wr ? q->ord : q->cap.max_send_wr;
}

/* A Read or an Atomic may go when fewer than ORD of them are outstanding
 * (and after those before it: WR order).  Returns its send-FIFO slot with
 * rd_lock held, or NULL with rd_lock released and *rc: 0 when the QP left
 * RTS meanwhile (the WR completed as flushed), ENOMEM.  Posting thread,
 * sq_lock held. */
static struct xs_sqe *ord_reserve(struct xs_qp *q, uint64_t wr_id, enum ibv_wc_opcode op, int *rc)
{
	unsigned limit;

	pthread_mutex_lock(&q->rd_lock);
	limit = ord_limit(q);
	if (!limit)
		limit = 1;
	while (q->rd_count >= limit && qp_state(q) == IBV_QPS_RTS)
		pthread_cond_wait(&q->rd_cond, &q->rd_lock);
	if (qp_state(q) != IBV_QPS_RTS) {
		pthread_mutex_unlock(&q->rd_lock);
		sq_complete(q, wr_id, op, IBV_WC_WR_FLUSH_ERR, 0, true);
		*rc = 0;
		return NULL;
	}
	if (sq_reserve(q, 1)) {
		pthread_mutex_unlock(&q->rd_lock);
		*rc = ENOMEM;
		return NULL;
	}
	return sq_at(q, q->sq_count);
}

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
	struct xs_tp_read rr = {
		.sink_stag = s ? s->lkey : 0,
		.sink_to = s ? s->addr : 0,
		.len = s ? s->length : 0,
		.src_stag = wr->wr.rdma.rkey,
		.src_to = wr->wr.rdma.remote_addr,
	};
	struct xs_sqe *rd;
	int rc;

	if (wr->num_sge > 1)
		return EINVAL; /* max_sge_rd is 1 */
	if (s && s->length && !xs_mr_local(q->qp.pd, s->lkey, s->addr, s->length, true))
		return send_local_error(q, wr, IBV_WC_RDMA_READ, IBV_WC_LOC_PROT_ERR);
	rd = ord_reserve(q, wr->wr_id, IBV_WC_RDMA_READ, &rc);
	if (!rd)
		return rc;
	*rd = (struct xs_sqe){
		.wr_id = wr->wr_id,
		.sink_stag = rr.sink_stag,
		.sink_to = rr.sink_to,
		.len = rr.len,
		.op = IBV_WC_RDMA_READ,
		.read = true,
		.signaled = signaled,
	};
	q->sq_count++;
	q->rd_count++;
	pthread_mutex_unlock(&q->rd_lock);
	if (q->tp->read_req(c, &rr) < 0)
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
	struct xs_tp_atomic ar = {
		.cmp_swap = wop == IBV_WC_COMP_SWAP,
		.stag = wr->wr.atomic.rkey,
		.to = wr->wr.atomic.remote_addr,
		.compare_add = wr->wr.atomic.compare_add,
		.swap = wr->wr.atomic.swap,
	};
	struct ibv_sge s;
	struct xs_sqe *e;
	uint8_t *res;
	int rc;

	if (wr->num_sge != 1)
		return EINVAL;
	s = sge_get(wr->sg_list, 0);
	if (s.length != XS_TP_ATOMIC_SIZE || ar.to % XS_TP_ATOMIC_SIZE)
		return EINVAL;
	res = xs_mr_local(q->qp.pd, s.lkey, s.addr, s.length, true);
	if (!res)
		return send_local_error(q, wr, wop, IBV_WC_LOC_PROT_ERR);
	e = ord_reserve(q, wr->wr_id, wop, &rc);
	if (!e)
		return rc;
	ar.req_id = q->atomic_id++;
	*e = (struct xs_sqe){
		.wr_id = wr->wr_id,
		.len = XS_TP_ATOMIC_SIZE,
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
	if (q->tp->atomic_req(c, &ar) < 0)
		qp_enter_error(q, false, NULL); /* flushes this Atomic too */
	return 0;
}

/* A signaled RDMA Write to another xsock over iWARP, on a send CQ with a
 * completion channel, completes when the peer has placed it, as on RoCE
 * (its ACK) and on iWARP hardware or siw over loopback (which place before
 * the sender's TCP send returns): a zero-length Read follows it, and that
 * Read's response, which the peer sends once every segment before it is
 * placed, completes the Write.  A program that reads the target memory
 * once the Write completed (after an out-of-band barrier: rdma-core's
 * test_rdmacm_async_write, rdma_get_send_comp) finds the data there,
 * whichever process got the CPU first.  RFC 5040 leaves a Write's
 * completion local, and the fence costs a round trip and the peer's
 * answer: a CQ polled without a channel (perftest, a spinning consumer:
 * ib_write_lat's average went from 9 us to 1 ms on 2 cores, its threads
 * and the engines' sharing them) completes when the data is out, as do a
 * siw peer, libxsock's own Writes (whose completions only free its
 * buffers) and a Write posted while ORD is taken by Reads.  The fence
 * counts against ORD as any Read (the peer's IRD takes it).  Posting
 * thread, sq_lock held, before the Write goes out: true, its completion's
 * place is the fence's in the send FIFO (the Read Request goes after the
 * Write); false, no fence: it completes as any Write. */
static bool write_fence(struct xs_qp *q, uint64_t wr_id, enum ibv_wc_opcode wop, uint32_t len)
{
	unsigned limit;

	pthread_mutex_lock(&q->rd_lock);
	limit = ord_limit(q);
	if (!limit || q->rd_count >= limit || sq_reserve(q, 1)) {
		pthread_mutex_unlock(&q->rd_lock);
		return false;
	}
	*sq_at(q, q->sq_count) = (struct xs_sqe){
		.wr_id = wr_id, .len = len, .op = wop, .read = true, .fence = true, .signaled = true,
	};
	q->sq_count++;
	q->rd_count++;
	pthread_mutex_unlock(&q->rd_lock);
	return true;
}

/* Whether a signaled Write gets write_fence: iWARP (RoCE waits for its
 * ACK already) to a peer that agreed on RFC 7306, i.e. another xsock, and
 * a consumer that sleeps for its completions (a channel on the send CQ),
 * unless a Send follows it in the same post: the iWARP way to say the
 * data is there (rsockets' and libxsock's stream, iSER), whose arrival the
 * peer sees after the placement, needs no fence, and a fence there would
 * make the sender's buffer wait for a peer that may have stopped reading
 * until it gets receives (the stream's flow control). */
static bool write_fenced(const struct xs_qp *q, const struct ibv_send_wr *wr)
{
	const struct ibv_send_wr *n = wr->next;

	if (n && (n->opcode == IBV_WR_SEND || n->opcode == IBV_WR_SEND_WITH_INV ||
		  n->opcode == IBV_WR_SEND_WITH_IMM))
		return false;
	return (wr->opcode == IBV_WR_RDMA_WRITE || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) &&
	       !q->acked_tx && !xs_mr_caller_ok && q->qp.send_cq->channel &&
	       __atomic_load_n(&q->ext, __ATOMIC_ACQUIRE);
}

/* A chain of Sends and Writes posted corked (the transport's cork): their
 * FPDUs leave in one sendmsg, and their completions wait for it. */
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
	rc = q->tp->cork_flush(k->c);
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
	unsigned flags;
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
	bool fenced = signaled && write_fenced(q, wr) &&
		      write_fence(q, wr->wr_id, wop, (uint32_t)total);

	if (fenced) {
		/* its place is the fence's (behind a cork's WRs, whose own
		 * places were taken first) */
	} else if (q->acked_tx) {
		/* completes on the peer's ACK, in WR order: its place in the
		 * FIFO even unsignaled (qp_acked counts them) */
		pthread_mutex_lock(&q->rd_lock);
		if (sq_reserve(q, 1)) {
			pthread_mutex_unlock(&q->rd_lock);
			return ENOMEM;
		}
		*sq_at(q, q->sq_count) = (struct xs_sqe){
			.wr_id = wr->wr_id, .len = (uint32_t)total, .op = wop, .wait_ack = true,
			.signaled = signaled,
		};
		q->sq_count++;
		pthread_mutex_unlock(&q->rd_lock);
	} else if (signaled) {
		slot = k && k->c ? &k->wc[k->n].slot : &one;
		if (sq_take(q, slot))
			return ENOMEM;
	}

	flags = se ? XS_TP_SE : 0;
	switch (wr->opcode) {
	case IBV_WR_SEND:
		rc = q->tp->send(c, flags, 0, 0, iov, n);
		break;
	case IBV_WR_SEND_WITH_INV:
		rc = q->tp->send(c, flags | XS_TP_INV, wr->invalidate_rkey, 0, iov, n);
		break;
	case IBV_WR_SEND_WITH_IMM:
		rc = q->tp->send(c, flags | XS_TP_IMM, 0, wr->imm_data, iov, n);
		break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		rc = q->tp->write(c, flags | XS_TP_IMM, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr,
				  wr->imm_data, iov, n);
		break;
	default:
		rc = q->tp->write(c, flags, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, 0, iov, n);
		break;
	}
	if (rc < 0) { /* the connection is gone: this WR and the rest flush */
		if (rc != -EPIPE)
			xs_log("post_send: WR %llu not sent: %s; the QP fails",
			       (unsigned long long)wr->wr_id, xs_strerror(-rc));
		cork_settle(q, k);
		if (slot)
			sq_settle(q, slot, wr->wr_id, wop, IBV_WC_WR_FLUSH_ERR, 0);
		qp_enter_error(q, false, NULL);
		return 0;
	}
	if (q->acked_tx)
		return 0;
	if (fenced) {
		struct xs_tp_read fence = { .len = 0 };

		if (q->tp->read_req(c, &fence) < 0)
			qp_enter_error(q, false, NULL); /* flushes the Write's completion */
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
		if (k.c && q->tp->cork(k.c) < 0)
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
		q->tp->uncork(k.c);
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
