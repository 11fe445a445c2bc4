/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The requester and the completer of a RoCE RC connection.  Each message
 * is cut at the path MTU into packets that are built once, whole (headers,
 * payload, pad, ICRC), into a slot of the retransmit ring and sent; a slot
 * is freed when the peer's ACK (or a later Read Response or Atomic ACK)
 * covers it.  The WR completes when its packets are in the ring: it no
 * longer needs the application's buffer.  Loss: a NAK-sequence or the
 * retransmit timer resends every slot from the first unacknowledged PSN
 * (go-back-N, as rxe); an RNR NAK resends after the timer it names.  A
 * Read is resent from its first missing response packet. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "iwarp/rdmap_ext.h"
#include "verbs/xs_roce_priv.h"

/* IBTA Table 45: RNR NAK timer codes in microseconds (0: 655.36 ms) */
static const uint32_t rnr_us[32] = {
	655360, 10,    20,    30,    40,    60,    80,    120,   160,	  240,	  320,
	480,	640,   960,   1280,  1920,  2560,  3840,  5120,  7680,	  10240,  15360,
	20480,	30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};


static inline struct xr_slot *slot_at(struct xs_roce_conn *x, unsigned i)
{
	return &x->ring[(x->ring_head + i) & (XR_RING - 1)];
}

static size_t slot_size(const struct xs_roce_conn *x)
{
	return ROCE_MAX_HDR_LEN + x->path.mtu + 3 + ROCE_ICRC_LEN;
}

int xr_req_init(struct xs_roce_conn *x)
{
	size_t sz = slot_size(x);

	x->ring_mem = malloc(sz * XR_RING);
	if (!x->ring_mem)
		return -ENOMEM;
	for (unsigned i = 0; i < XR_RING; i++)
		x->ring[i].pkt = x->ring_mem + i * sz;
	return 0;
}

void xr_req_destroy(struct xs_roce_conn *x)
{
	free(x->ring_mem);
	x->ring_mem = NULL;
}

static uint32_t npkts(const struct xs_roce_conn *x, uint64_t len)
{
	return len ? (uint32_t)((len + x->path.mtu - 1) / x->path.mtu) : 1;
}

/* Room for n more PSNs (tx_mu held; it may be dropped and taken again).
 * 0 or -EPIPE.  From inside a receive only the ring bounds it. */
static int wait_room(struct xs_roce_conn *x, uint32_t n)
{
	for (;;) {
		uint32_t inflight = (uint32_t)roce_psn_diff(x->psn_next, x->psn_una);

		if (atomic_load(&x->dead) || !x->rts)
			return -EPIPE;
		if (x->ring_count < XR_RING &&
		    (xr_in_rx || !x->ring_count || inflight + n <= XR_WINDOW))
			return 0;
		if (xr_in_rx)
			return -ENOBUFS;
		xr_xmit_flush(x);
		pthread_mutex_unlock(&x->tx_mu);
		if (pthread_mutex_trylock(&x->rx_mu) == 0) {
			if (atomic_load(&x->attached)) {
				xr_in_rx = true;
				xr_rx_drain(x, XR_BATCH);
				xr_in_rx = false;
			}
			pthread_mutex_unlock(&x->rx_mu);
		}
		pthread_mutex_lock(&x->tx_mu);
		inflight = (uint32_t)roce_psn_diff(x->psn_next, x->psn_una);
		if (x->ring_count == XR_RING || (x->ring_count && inflight + n > XR_WINDOW)) {
			struct timespec ts = xs_abstime_ns(200 * 1000);

			pthread_cond_timedwait(&x->tx_cv, &x->tx_mu, &ts);
		}
	}
}

static void copy_iov(uint8_t *dst, const struct iovec *iov, int cnt, size_t off, size_t len)
{
	for (int i = 0; i < cnt && len; i++) {
		size_t l = iov[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		size_t n = l - off < len ? l - off : len;

		memcpy(dst, (const uint8_t *)iov[i].iov_base + off, n);
		dst += n;
		len -= n;
		off = 0;
	}
}

/* Build p into the next slot with payload iov[off, off+len), send it
 * (tx_mu held, room checked). */
static struct xr_slot *emit(struct xs_roce_conn *x, struct roce_pkt *p, const struct iovec *iov,
			    int cnt, size_t off, uint32_t len, enum xr_kind kind, uint32_t npsn)
{
	struct xr_slot *s = slot_at(x, x->ring_count);
	const struct roce_op_info *oi = &roce_ops[p->bth.opcode];

	p->bth.psn = x->psn_next;
	p->bth.pkey = ROCE_PKEY_DEFAULT;
	p->bth.dqpn = x->path.dest_qpn;
	if ((oi->flags & ROCE_F_LAST) || ++x->since_ackreq >= XR_ACKREQ_EVERY)
		p->bth.ackreq = true;
	if (p->bth.ackreq)
		x->since_ackreq = 0;
	copy_iov(s->pkt + oi->hdr_len, iov, cnt, off, len);
	s->len = (uint16_t)roce_pkt_finish(p, len, &x->ip_tx, s->pkt);
	s->icrc0 = roce_icrc_get(s->pkt + s->len - ROCE_ICRC_LEN);
	s->psn = x->psn_next;
	s->npsn = npsn;
	s->kind = (uint8_t)kind;
	s->last = (oi->flags & ROCE_F_LAST) != 0;
	s->rd_got = 0;
	x->ring_count++;
	x->psn_next = roce_psn_add(x->psn_next, npsn);
	if (!x->rto_at && !x->rnr_at)
		x->rto_at = xr_now_us() + x->rto_us;
	xr_xmit_queue(x, s);
	return s;
}

static uint64_t iov_len(const struct iovec *iov, int cnt)
{
	uint64_t n = 0;

	for (int i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	return n;
}

/* A Send or a Write, cut at the path MTU. */
static int req_message(struct xs_roce_conn *x, bool write, unsigned flags, uint32_t inv,
		       uint32_t imm, uint32_t rkey, uint64_t va, const struct iovec *iov, int cnt)
{
	uint64_t total = iov_len(iov, cnt);
	uint32_t n, mtu = x->path.mtu;
	enum roce_msg_kind kind = write ? ((flags & XS_TP_IMM) ? ROCE_MSG_WRITE_IMM : ROCE_MSG_WRITE)
				  : (flags & XS_TP_IMM) ? ROCE_MSG_SEND_IMM
				  : (flags & XS_TP_INV) ? ROCE_MSG_SEND_INV
							: ROCE_MSG_SEND;
	int rc = 0;

	if (total > UINT32_MAX)
		return -EMSGSIZE;
	n = npkts(x, total);
	pthread_mutex_lock(&x->tx_mu);
	for (uint32_t i = 0; i < n; i++) {
		struct roce_pkt p;
		bool first = i == 0, last = i == n - 1;
		uint32_t len = last ? (uint32_t)(total - (uint64_t)i * mtu) : mtu;

		rc = wait_room(x, 1);
		if (rc < 0)
			break;
		memset(&p, 0, sizeof(p));
		if (write && first)
			p.reth = (struct roce_reth){ va, rkey, (uint32_t)total };
		p.ieth = inv;
		p.bth.opcode = roce_msg_opcode(kind, first, last);
		p.bth.se = last && (flags & XS_TP_SE);
		p.imm = imm;
		emit(x, &p, iov, cnt, (size_t)i * mtu, len, write ? XR_WRITE : XR_SEND, 1);
	}
	xr_xmit_flush(x);
	pthread_mutex_unlock(&x->tx_mu);
	return rc;
}

int xr_req_send(struct xs_roce_conn *x, unsigned flags, uint32_t inv, uint32_t imm,
		const struct iovec *iov, int cnt)
{
	return req_message(x, false, flags, inv, imm, 0, 0, iov, cnt);
}

int xr_req_write(struct xs_roce_conn *x, unsigned flags, uint32_t rkey, uint64_t va,
		 uint32_t imm, const struct iovec *iov, int cnt)
{
	return req_message(x, true, flags, 0, imm, rkey, va, iov, cnt);
}

int xr_req_read(struct xs_roce_conn *x, const struct xs_tp_read *r)
{
	struct roce_pkt p = { .bth.opcode = ROCE_RC_READ_REQ };
	uint32_t n = npkts(x, r->len);
	int rc;

	p.reth = (struct roce_reth){ r->src_to, r->src_stag, r->len };
	pthread_mutex_lock(&x->tx_mu);
	rc = wait_room(x, n);
	if (rc == 0) {
		emit(x, &p, NULL, 0, 0, 0, XR_READ, n)->rd = *r;
		xr_xmit_flush(x);
	}
	pthread_mutex_unlock(&x->tx_mu);
	return rc;
}

int xr_req_atomic(struct xs_roce_conn *x, const struct xs_tp_atomic *a)
{
	struct roce_pkt p;
	int rc;

	memset(&p, 0, sizeof(p));
	p.bth.opcode = a->cmp_swap ? ROCE_RC_CMP_SWAP : ROCE_RC_FETCH_ADD;
	/* CmpSwap: SwapData and CompareData; FetchAdd: AddData in the first */
	p.atm = (struct roce_atmeth){ a->to, a->stag, a->cmp_swap ? a->swap : a->compare_add,
				      a->cmp_swap ? a->compare_add : 0 };
	pthread_mutex_lock(&x->tx_mu);
	rc = wait_room(x, 1);
	if (rc == 0) {
		emit(x, &p, NULL, 0, 0, 0, XR_ATOMIC, 1)->req_id = a->req_id;
		xr_xmit_flush(x);
	}
	pthread_mutex_unlock(&x->tx_mu);
	return rc;
}

/* ---- retransmission (tx_mu held) ------------------------------------------- */

/* Resend every slot from the oldest: a Read from its first missing
 * response, with the request shortened to match. */
static void go_back(struct xs_roce_conn *x)
{
	xr_xmit_flush(x); /* what is queued goes first, in PSN order */
	for (unsigned i = 0; i < x->ring_count; i++) {
		struct xr_slot *s = slot_at(x, i);

		if (s->kind == XR_READ && s->rd_got) {
			struct roce_pkt p = { .bth.opcode = ROCE_RC_READ_REQ, .bth.ackreq = true };
			uint64_t done = (uint64_t)s->rd_got * x->path.mtu;

			p.bth.psn = roce_psn_add(s->psn, s->rd_got);
			p.reth = (struct roce_reth){ s->rd.src_to + done, s->rd.src_stag,
						     (uint32_t)(s->rd.len - done) };
			xr_xmit_flush(x);
			xr_xmit_pkt(x, &p);
			continue;
		}
		xr_xmit_queue(x, s);
	}
	xr_xmit_flush(x);
	x->rto_at = x->ring_count ? xr_now_us() + x->rto_us : 0;
}

/* The oldest slot is done with. */
static void slot_free(struct xs_roce_conn *x)
{
	struct xr_slot *s = slot_at(x, 0);

	x->psn_una = roce_psn_add(s->psn, s->npsn);
	x->ring_head = (x->ring_head + 1) & (XR_RING - 1);
	x->ring_count--;
}

/* The peer took something: retries start again, the timer restarts,
 * waiting posters look for room. */
static void progressed(struct xs_roce_conn *x)
{
	x->retry_left = x->retry_cnt;
	x->rto_at = x->ring_count ? xr_now_us() + x->rto_us : 0;
	pthread_cond_broadcast(&x->tx_cv);
}

/* Free the slots up to and including PSN psn; a Read or Atomic still
 * waiting for its response stops it (returns true: the peer has gone
 * past a request whose response was lost). */
static bool ack_to(struct xs_roce_conn *x, uint32_t psn)
{
	bool progress = false, implied_nak = false;

	while (x->ring_count) {
		struct xr_slot *s = slot_at(x, 0);
		uint32_t end = roce_psn_add(s->psn, s->npsn - 1);

		if (roce_psn_diff(s->psn, psn) > 0)
			break;
		if (s->kind == XR_READ || s->kind == XR_ATOMIC) {
			implied_nak = roce_psn_diff(end, psn) <= 0;
			break;
		}
		if (s->last)
			x->acked_msgs++; /* a Send's or Write's last packet */
		slot_free(x);
		progress = true;
	}
	if (progress)
		progressed(x);
	return implied_nak;
}

/* Tell the QP which Sends/Writes the peer acknowledged (rx_mu held, tx_mu
 * not): before a Read or Atomic behind them completes. */
static void report_acked(struct xs_roce_conn *x)
{
	unsigned n;

	pthread_mutex_lock(&x->tx_mu);
	n = x->acked_msgs;
	x->acked_msgs = 0;
	pthread_mutex_unlock(&x->tx_mu);
	if (n && atomic_load(&x->attached) && !x->failed_up)
		x->up->acked(x->qp, n);
}

/* A Read or Atomic at the head got its (last) response. */
static void pop_head(struct xs_roce_conn *x)
{
	slot_free(x);
	x->rd_nak_sent = false;
	progressed(x);
}

/* ---- the completer (rx_mu held) --------------------------------------------- */

static void fail_code(struct xs_roce_conn *x, uint8_t layer, uint8_t etype, uint8_t ecode,
		      const char *why)
{
	struct xs_err e;

	xs_log("roce: QP %u: %s", x->path.qpn, why);
	xs_err_set(&e, layer, etype, ecode);
	xr_fail(x, false, &e);
}

static void on_nak(struct xs_roce_conn *x, const struct roce_pkt *p)
{
	uint8_t syn = p->aeth.syndrome, code = syn & ROCE_AETH_VALUE_MASK;

	if ((syn & ROCE_AETH_TYPE_MASK) == ROCE_AETH_RNR_NAK) {
		pthread_mutex_lock(&x->tx_mu);
		ack_to(x, roce_psn_add(p->bth.psn, ROCE_PSN_MASK)); /* psn - 1 */
		bool out = x->rnr_retry != 7 && x->rnr_left-- == 0;

		if (!out) {
			x->rnr_at = xr_now_us() + rnr_us[code];
			x->rto_at = 0;
		}
		pthread_mutex_unlock(&x->tx_mu);
		if (out)
			fail_code(x, XS_LAYER_LLP, 0, 0x03, "RNR retries exceeded");
		return;
	}
	if (code == ROCE_NAK_PSN_SEQ) {
		pthread_mutex_lock(&x->tx_mu);
		ack_to(x, roce_psn_add(p->bth.psn, ROCE_PSN_MASK));
		bool out = x->retry_cnt != 7 && x->retry_left-- == 0;

		if (!out)
			go_back(x);
		pthread_mutex_unlock(&x->tx_mu);
		if (out)
			fail_code(x, XS_LAYER_LLP, 0, 0x02, "retries exceeded (NAK sequence)");
		return;
	}
	/* fatal: the peer's responder is in error; what came before the
	 * request it names is done */
	pthread_mutex_lock(&x->tx_mu);
	ack_to(x, roce_psn_add(p->bth.psn, ROCE_PSN_MASK));
	pthread_mutex_unlock(&x->tx_mu);
	report_acked(x);
	xs_log("roce: QP %u: peer NAK 0x%02x at PSN %u", x->path.qpn, syn, p->bth.psn);
	if (code == ROCE_NAK_REMOTE_ACCESS)
		fail_code(x, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_PROT, RDMAP_ECODE_ACCESS,
			  "remote access error");
	else if (code == ROCE_NAK_REMOTE_OP)
		fail_code(x, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNSPECIFIED,
			  "remote operational error");
	else
		fail_code(x, XS_LAYER_DDP, 2, 0x05, "invalid request");
}

/* The head must be the Read p answers; place its payload. */
static void on_read_resp(struct xs_roce_conn *x, const struct roce_pkt *p)
{
	const struct roce_op_info *oi = &roce_ops[p->bth.opcode];
	struct xs_tp_read rd;
	struct xr_slot *s;
	uint32_t expect, got;
	struct xs_err err;
	uint8_t *dst = NULL;
	uint64_t off;

	pthread_mutex_lock(&x->tx_mu);
	/* everything before the Read is done */
	ack_to(x, roce_psn_add(p->bth.psn, ROCE_PSN_MASK));
	s = x->ring_count ? slot_at(x, 0) : NULL;
	if (!s || s->kind != XR_READ) {
		pthread_mutex_unlock(&x->tx_mu);
		return; /* a late duplicate */
	}
	expect = roce_psn_add(s->psn, s->rd_got);
	if (p->bth.psn != expect) {
		/* ahead: a response packet was lost; ask again from it, once */
		if (roce_psn_diff(p->bth.psn, expect) > 0 && !x->rd_nak_sent) {
			x->rd_nak_sent = true;
			go_back(x);
		}
		pthread_mutex_unlock(&x->tx_mu);
		return;
	}
	rd = s->rd;
	got = s->rd_got;
	if (!atomic_load(&x->attached)) { /* lingering: nobody to place for */
		if (oi->flags & ROCE_F_LAST)
			pop_head(x);
		else
			s->rd_got++;
		pthread_mutex_unlock(&x->tx_mu);
		return;
	}
	pthread_mutex_unlock(&x->tx_mu);
	report_acked(x); /* the Sends/Writes before the Read complete first */

	off = (uint64_t)got * x->path.mtu;
	if ((!(oi->flags & ROCE_F_LAST) && p->paylen != x->path.mtu) ||
	    off + p->paylen > rd.len || ((oi->flags & ROCE_F_LAST) && off + p->paylen != rd.len)) {
		fail_code(x, XS_LAYER_DDP, 1, 0x01, "Read Response of the wrong length");
		return;
	}
	if (x->up->resolve(x->qp, RDMAP_OP_READ_RESP, rd.sink_stag, rd.sink_to + off, p->paylen,
			   &dst, &err) < 0) {
		xs_log("roce: QP %u: Read Response not placed", x->path.qpn);
		xr_fail(x, true, &err);
		return;
	}
	if (p->paylen)
		memcpy(dst, p->payload, p->paylen);
	pthread_mutex_lock(&x->tx_mu);
	s->rd_got++;
	x->rd_nak_sent = false;
	x->rto_at = xr_now_us() + x->rto_us;
	if (oi->flags & ROCE_F_LAST)
		pop_head(x);
	pthread_mutex_unlock(&x->tx_mu);
	if (oi->flags & ROCE_F_LAST) {
		struct ddp_hdr h = { .tagged = true, .last = true, .stag = rd.sink_stag,
				     .to = rd.sink_to + off };

		x->up->tagged_last(x->qp, RDMAP_OP_READ_RESP, &h);
	}
}

static void on_atomic_ack(struct xs_roce_conn *x, const struct roce_pkt *p)
{
	struct rdmap_atomic_resp r;
	uint8_t body[RDMAP_ATOMIC_RESP_LEN];
	struct ddp_delivery d;
	struct xs_err err;
	struct xr_slot *s;

	pthread_mutex_lock(&x->tx_mu);
	ack_to(x, roce_psn_add(p->bth.psn, ROCE_PSN_MASK));
	s = x->ring_count ? slot_at(x, 0) : NULL;
	if (!s || s->kind != XR_ATOMIC || s->psn != p->bth.psn) {
		pthread_mutex_unlock(&x->tx_mu);
		return; /* a duplicate */
	}
	r.req_id = s->req_id;
	r.value = p->atm_orig;
	pop_head(x);
	pthread_mutex_unlock(&x->tx_mu);
	report_acked(x);
	if (!x->q_aresp || !atomic_load(&x->attached))
		return;
	rdmap_atomic_resp_encode(&r, body);
	struct ddp_hdr h = { .qn = RDMAP_QN_ATOMIC_RESP, .msn = x->msn_aresp, .last = true,
			     .rsvdulp = rdmap_ctrl_encode(RDMAP_OP_ATOMIC_RESP) };

	if (ddp_rx_place(&x->ddp, &h, body, sizeof(body), &err) < 0 ||
	    ddp_queue_deliver(x->q_aresp, &d) != 1) {
		xr_fail(x, true, &err);
		return;
	}
	x->msn_aresp++;
	x->up->deliver(x->qp, RDMAP_OP_ATOMIC_RESP, RDMAP_QN_ATOMIC_RESP, &d);
}

void xr_req_response(struct xs_roce_conn *x, const struct roce_pkt *p)
{
	const struct roce_op_info *oi = &roce_ops[p->bth.opcode];

	if ((oi->flags & ROCE_F_AETH) &&
	    (p->aeth.syndrome & ROCE_AETH_TYPE_MASK) != ROCE_AETH_ACK) {
		on_nak(x, p);
	} else if (oi->flags & ROCE_F_READ) {
		on_read_resp(x, p);
	} else if (p->bth.opcode == ROCE_RC_ATOMIC_ACK) {
		on_atomic_ack(x, p);
	} else { /* ACK */
		bool nak;

		pthread_mutex_lock(&x->tx_mu);
		nak = ack_to(x, p->bth.psn);
		if (nak && !x->rd_nak_sent) {
			x->rd_nak_sent = true;
			go_back(x);
		}
		pthread_mutex_unlock(&x->tx_mu);
	}
	report_acked(x);
}

uint64_t xr_req_timer(struct xs_roce_conn *x, uint64_t now)
{
	uint64_t next = 0;
	bool out = false;

	if (pthread_mutex_trylock(&x->rx_mu))
		return now + 1000; /* a poller receives: look again soon */
	pthread_mutex_lock(&x->tx_mu);
	if (x->rts && !atomic_load(&x->fatal)) {
		if (x->rnr_at && now >= x->rnr_at) {
			x->rnr_at = 0;
			go_back(x);
		} else if (x->rto_at && now >= x->rto_at) {
			if (x->retry_cnt != 7 && x->retry_left-- == 0) {
				out = true;
			} else {
				xs_log("roce: QP %u: timeout, resending from PSN %u", x->path.qpn,
				       x->psn_una);
				x->rd_nak_sent = false;
				go_back(x);
			}
		}
		next = x->rnr_at ? x->rnr_at : x->rto_at;
	}
	if (atomic_load(&x->lingering) && !x->ring_count && x->time_wait && now < x->linger_end &&
	    !atomic_load(&x->fatal))
		next = x->linger_end; /* TIME_WAIT: stays till then */
	else if (atomic_load(&x->lingering) &&
		 (!x->ring_count || now >= x->linger_end || out || atomic_load(&x->fatal))) {
		if (x->ring_count)
			xs_log("roce: QP %u: closed with %u packets unacknowledged", x->path.qpn,
			       x->ring_count);
		atomic_store(&x->lingering, false);
		atomic_fetch_sub(&xr_lingering, 1);
		xr_loop_remove(x);
		next = 0;
	}
	pthread_mutex_unlock(&x->tx_mu);
	if (out)
		fail_code(x, XS_LAYER_LLP, 0, 0x02, "retries exceeded (timeout)");
	pthread_mutex_unlock(&x->rx_mu);
	return next;
}
