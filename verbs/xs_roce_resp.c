/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The responder of a RoCE RC connection (rx_mu held throughout): the PSN
 * check (one NAK-sequence per gap, then silence until the gap fills, as
 * rxe; but the MIDDLE/LAST packets of a Write whose FIRST was taken are
 * placed where they belong even ahead of a gap, and the expected PSN jumps
 * over them when it fills), duplicates (Sends and Writes re-ACKed, a Read carried out again,
 * an Atomic answered from its kept result), the opcode sequence and
 * lengths (NAK invalid request), placement of Sends into the QP's
 * receive queue and of Writes through its MRs (NAK remote access), RNR
 * NAKs when no receive is posted, and the execution of Reads and Atomics
 * by the QP, which answers through xr_resp_read / xr_resp_atomic.  The
 * QP's queues are DDP's (ddp_rx_place), so the QP completes RoCE
 * messages with the same code as iWARP ones. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "iwarp/rdmap_ext.h"
#include "verbs/xs_internal.h"
#include "verbs/xs_roce_priv.h"

static void duplicate(struct xs_roce_conn *x, const struct roce_pkt *p, uint32_t flags);

static void send_aeth(struct xs_roce_conn *x, uint8_t syndrome, uint32_t psn)
{
	struct roce_pkt p;

	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_RC_ACK;
	p.bth.psn = psn;
	p.aeth = (struct roce_aeth){ syndrome, x->msn & ROCE_MSN_MASK };
	xr_xmit_pkt(x, &p);
}

void xr_resp_flush_ack(struct xs_roce_conn *x)
{
	if (!x->ack_due)
		return;
	x->ack_due = false;
	send_aeth(x, ROCE_AETH_ACK | ROCE_AETH_CREDIT_INVALID, x->ack_psn);
	x->last_ack_us = xr_now_us();
}

/* The QP is gone (lingering): a retransmission of a Send or Write it took
 * is ACKed again; anything else is dropped. */
void xr_resp_time_wait(struct xs_roce_conn *x, const struct roce_pkt *p)
{
	uint32_t flags = roce_ops[p->bth.opcode].flags;

	if (roce_psn_diff(p->bth.psn, x->epsn) < 0 && (flags & (ROCE_F_SEND | ROCE_F_WRITE))) {
		xs_log("roce: QP %u (gone): PSN %u again: ACKed again", x->path.qpn, p->bth.psn);
		duplicate(x, p, flags);
	}
}

/* A request we cannot carry out: NAK it and take the QP to error. */
static void fatal(struct xs_roce_conn *x, const struct roce_pkt *p, uint8_t nak,
		  const struct xs_err *cause, const char *why)
{
	struct xs_err e;

	xs_log("roce: QP %u: PSN %u opcode 0x%02x: %s: NAK 0x%02x", x->path.qpn, p->bth.psn,
	       p->bth.opcode, why, ROCE_AETH_NAK | nak);
	xr_resp_flush_ack(x);
	send_aeth(x, ROCE_AETH_NAK | nak, p->bth.psn);
	if (cause)
		e = *cause;
	else
		xs_err_set(&e, XS_LAYER_DDP, 2, 0x05);
	xr_fail(x, true, &e);
}

static uint32_t npkts(const struct xs_roce_conn *x, uint32_t len)
{
	return len ? (len + x->path.mtu - 1) / x->path.mtu : 1;
}

static bool no_buffer(const struct xs_err *e)
{
	return e->layer == XS_LAYER_DDP && e->etype == DDP_ETYPE_UNTAGGED &&
	       e->ecode == DDP_ECODE_U_NO_BUFFER;
}

static void rnr(struct xs_roce_conn *x, const struct roce_pkt *p)
{
	xs_log("roce: QP %u: PSN %u: no receive posted: RNR NAK", x->path.qpn, p->bth.psn);
	xr_resp_flush_ack(x);
	send_aeth(x, ROCE_AETH_RNR_NAK | (x->path.min_rnr_timer & ROCE_AETH_VALUE_MASK),
		  p->bth.psn);
}

/* Put a Read or Atomic Request body on the QP's QN 1 and hand it up. */
static int to_qp_rr(struct xs_roce_conn *x, enum rdmap_opcode op, const uint8_t *body,
		    uint32_t len, uint32_t psn)
{
	struct ddp_hdr h = { .qn = RDMAP_QN_READ_REQ, .msn = x->msn_rr, .last = true,
			     .rsvdulp = rdmap_ctrl_encode(op) };
	struct ddp_delivery d;
	struct xs_err err;

	if (ddp_rx_place(&x->ddp, &h, body, len, &err) < 0 || ddp_queue_deliver(x->q_rr, &d) != 1)
		return -ENOBUFS;
	x->msn_rr++;
	x->cur_req_psn = psn;
	x->up->deliver(x->qp, op, RDMAP_QN_READ_REQ, &d);
	return 0;
}

static void do_read(struct xs_roce_conn *x, const struct roce_pkt *p)
{
	struct rdmap_read_req rr = {
		.sink_stag = 0,
		.sink_to = p->bth.psn, /* comes back in read_resp: where to answer */
		.size = p->reth.dma_len,
		.src_stag = p->reth.rkey,
		.src_to = p->reth.va,
	};
	uint8_t body[RDMAP_READ_REQ_LEN];

	rdmap_read_req_encode(&rr, body);
	if (to_qp_rr(x, RDMAP_OP_READ_REQ, body, sizeof(body), p->bth.psn) < 0)
		fatal(x, p, ROCE_NAK_INVALID_REQ, NULL, "more Reads than the IRD");
}

static struct xr_atomic_done *atomic_done(struct xs_roce_conn *x, uint32_t psn)
{
	struct xr_atomic_done *a = &x->adone[psn % XR_ATOMIC_REPLAY];

	return a->valid && a->psn == psn ? a : NULL;
}

static void do_atomic(struct xs_roce_conn *x, const struct roce_pkt *p)
{
	struct rdmap_atomic_req ar = { .req_id = p->bth.psn, .stag = p->atm.rkey,
				       .to = p->atm.va };
	uint8_t body[RDMAP_ATOMIC_REQ_LEN];

	if (p->atm.va & 7) { /* rxe: RESPST_ERR_MISALIGNED_ATOMIC */
		fatal(x, p, ROCE_NAK_INVALID_REQ, NULL, "misaligned atomic");
		return;
	}
	if (p->bth.opcode == ROCE_RC_CMP_SWAP) {
		ar.op = RDMAP_ATOMIC_CMP_SWAP;
		ar.compare = p->atm.cmp;
		ar.compare_mask = UINT64_MAX;
		ar.add_swap = p->atm.swap_add;
		ar.add_swap_mask = UINT64_MAX;
	} else {
		ar.op = RDMAP_ATOMIC_FETCH_ADD;
		ar.add_swap = p->atm.swap_add;
	}
	rdmap_atomic_req_encode(&ar, body);
	if (to_qp_rr(x, RDMAP_OP_ATOMIC_REQ, body, sizeof(body), p->bth.psn) < 0)
		fatal(x, p, ROCE_NAK_INVALID_REQ, NULL, "more Atomics than the IRD");
}

static void duplicate(struct xs_roce_conn *x, const struct roce_pkt *p, uint32_t flags)
{
	if (flags & ROCE_F_READ) {
		do_read(x, p); /* carried out again, answered at its PSN */
		return;
	}
	if (flags & ROCE_F_ATOMIC) {
		struct xr_atomic_done *a = atomic_done(x, p->bth.psn);

		if (a)
			xr_resp_atomic(x, p->bth.psn, a->orig);
		return;
	}
	/* a Send or Write already taken: ACK what we have */
	x->ack_due = true;
	x->ack_psn = roce_psn_add(x->epsn, ROCE_PSN_MASK);
}

static enum rdmap_opcode send_op(const struct roce_pkt *p)
{
	bool inv = p->bth.opcode == ROCE_RC_SEND_LAST_INV || p->bth.opcode == ROCE_RC_SEND_ONLY_INV;

	if (inv)
		return p->bth.se ? RDMAP_OP_SEND_SE_INV : RDMAP_OP_SEND_INV;
	return p->bth.se ? RDMAP_OP_SEND_SE : RDMAP_OP_SEND;
}

/* 0: taken; 1: RNR NAK sent (the PSN stays expected); -1: failed */
static int do_send(struct xs_roce_conn *x, const struct roce_pkt *p, uint32_t flags)
{
	bool last = flags & ROCE_F_LAST;
	enum rdmap_opcode op = send_op(p);
	struct ddp_hdr h = { .qn = RDMAP_QN_SEND, .msn = x->msn_recv, .mo = x->cur_mo,
			     .last = last, .rsvdulp = rdmap_ctrl_encode(op), .rsvdulp2 = p->ieth };
	struct ddp_delivery d;
	struct xs_err err;

	if (ddp_rx_place(&x->ddp, &h, p->payload, p->paylen, &err) < 0) {
		if ((flags & ROCE_F_FIRST) && no_buffer(&err)) {
			rnr(x, p);
			return 1;
		}
		fatal(x, p, ROCE_NAK_INVALID_REQ, &err, "Send does not fit the receive");
		return -1;
	}
	x->cur_mo += p->paylen;
	x->cur_kind = last ? -1 : XR_SEND;
	if (!last)
		return 0;
	x->cur_mo = 0;
	if (flags & ROCE_F_IMMDT) { /* attached to the Send behind it */
		struct ddp_delivery di = { .addr = (uint8_t *)(uintptr_t)&p->imm };

		x->up->deliver(x->qp, p->bth.se ? RDMAP_OP_IMM_DATA_SE : RDMAP_OP_IMM_DATA,
			       RDMAP_QN_SEND, &di);
	}
	if (ddp_queue_deliver(x->q_recv, &d) == 1) {
		x->msn_recv++;
		x->cur_req_psn = p->bth.psn;
		x->up->deliver(x->qp, op, RDMAP_QN_SEND, &d);
	}
	return 0;
}

static int do_write(struct xs_roce_conn *x, const struct roce_pkt *p, uint32_t flags)
{
	bool last = flags & ROCE_F_LAST;
	struct ddp_delivery d = { 0 };
	struct xs_err err;
	uint8_t *dst = NULL;

	if (flags & ROCE_F_FIRST) {
		x->cur_va = p->reth.va;
		x->cur_rkey = p->reth.rkey;
		x->cur_left = p->reth.dma_len;
		x->ooo_psn = p->bth.psn;
		x->ooo_va = p->reth.va;
		x->ooo_rkey = p->reth.rkey;
		x->ooo_len = p->reth.dma_len;
		memset(x->ooo_ahead, 0, sizeof(x->ooo_ahead));
	}
	if (p->paylen > x->cur_left || (last && p->paylen != x->cur_left)) {
		fatal(x, p, ROCE_NAK_INVALID_REQ, NULL, "Write length differs from its DMA length");
		return -1;
	}
	/* with immediate data: a receive first (RNR leaves nothing placed) */
	if (last && (flags & ROCE_F_IMMDT) &&
	    ddp_queue_pass(x->q_recv, x->msn_recv, true, &d, &err) < 0) {
		if (no_buffer(&err)) {
			rnr(x, p);
			return 1;
		}
		fatal(x, p, ROCE_NAK_INVALID_REQ, &err, "Write with immediate");
		return -1;
	}
	if (p->paylen) {
		if (x->up->resolve(x->qp, RDMAP_OP_WRITE, x->cur_rkey, x->cur_va, p->paylen, &dst,
				   &err) < 0) {
			fatal(x, p, ROCE_NAK_REMOTE_ACCESS, &err, "Write outside the R_Key's MR");
			return -1;
		}
		memcpy(dst, p->payload, p->paylen);
	}
	x->cur_va += p->paylen;
	x->cur_left -= p->paylen;
	x->cur_kind = last ? -1 : XR_WRITE;
	if (last && (flags & ROCE_F_IMMDT)) {
		d.addr = (uint8_t *)(uintptr_t)&p->imm;
		x->msn_recv++;
		x->cur_req_psn = p->bth.psn;
		x->up->deliver(x->qp, p->bth.se ? RDMAP_OP_IMM_DATA_SE : RDMAP_OP_IMM_DATA,
			       RDMAP_QN_SEND, &d);
	}
	return 0;
}

static bool ahead_test(const struct xs_roce_conn *x, uint32_t psn)
{
	unsigned b = psn % XR_WINDOW;

	return x->ooo_ahead[b / 64] >> (b % 64) & 1u;
}

static void ahead_set(struct xs_roce_conn *x, uint32_t psn, bool on)
{
	unsigned b = psn % XR_WINDOW;
	uint64_t m = (uint64_t)1 << (b % 64);

	x->ooo_ahead[b / 64] = on ? x->ooo_ahead[b / 64] | m : x->ooo_ahead[b / 64] & ~m;
}

/* A packet d PSNs ahead of epsn: a MIDDLE or LAST (without immediate
 * data: its receive and completion wait for the order) of the Write in
 * progress goes where in-order placement would put it, under the same
 * checks; anything else, or what fails a check, is left to the requester's
 * resend, which the in-order path then judges.  Placing a PSN again (a
 * resend while the gap is still open) is harmless and counted once. */
static void place_ahead(struct xs_roce_conn *x, const struct roce_pkt *p, uint32_t flags,
			int32_t d)
{
	uint32_t mtu = x->path.mtu, n, k;
	struct xs_err err;
	uint8_t *dst = NULL;
	int32_t kd;

	if (x->cur_kind != XR_WRITE || d >= XR_WINDOW || !(flags & ROCE_F_WRITE) ||
	    (flags & (ROCE_F_FIRST | ROCE_F_IMMDT)) || !xs_config()->roce_ooo)
		return;
	kd = roce_psn_diff(p->bth.psn, x->ooo_psn);
	n = npkts(x, x->ooo_len);
	if (kd < 1 || (uint32_t)kd >= n)
		return;
	k = (uint32_t)kd;
	if (flags & ROCE_F_LAST) {
		if (k != n - 1 || p->paylen != x->ooo_len - k * mtu)
			return;
	} else if (k == n - 1 || p->paylen != mtu) {
		return;
	}
	if (x->up->resolve(x->qp, RDMAP_OP_WRITE, x->ooo_rkey, x->ooo_va + (uint64_t)k * mtu,
			   p->paylen, &dst, &err) < 0)
		return;
	memcpy(dst, p->payload, p->paylen);
	if (!ahead_test(x, p->bth.psn)) {
		ahead_set(x, p->bth.psn, true);
		x->ooo_placed++;
	}
}

/* The gap filled: epsn jumps over the PSNs placed ahead (a LAST among them
 * ends the Write: the MSN counts it now, in order) and the ACK covers
 * them. */
static void jump_ahead(struct xs_roce_conn *x)
{
	uint32_t mtu = x->path.mtu, k = 0;
	bool jumped = false;

	while (x->cur_kind == XR_WRITE && ahead_test(x, x->epsn)) {
		ahead_set(x, x->epsn, false);
		k = (uint32_t)roce_psn_diff(x->epsn, x->ooo_psn) + 1;
		if (k >= npkts(x, x->ooo_len)) {
			x->cur_kind = -1;
			x->msn++;
		}
		x->epsn = roce_psn_add(x->epsn, 1);
		jumped = true;
	}
	if (!jumped)
		return;
	x->cur_va = x->ooo_va + (uint64_t)k * mtu;
	x->cur_left = x->cur_kind < 0 ? 0 : x->ooo_len - k * mtu;
	x->ack_due = true;
	x->ack_psn = roce_psn_add(x->epsn, ROCE_PSN_MASK);
}

/* A message in progress continues (MIDDLE/LAST of its kind), else one
 * starts (FIRST/ONLY, a Read, an Atomic). */
static bool in_sequence(const struct xs_roce_conn *x, uint32_t flags)
{
	bool first = flags & ROCE_F_FIRST;

	if (flags & (ROCE_F_READ | ROCE_F_ATOMIC))
		return x->cur_kind < 0;
	if (x->cur_kind < 0)
		return first;
	return !first && x->cur_kind == ((flags & ROCE_F_WRITE) ? XR_WRITE : XR_SEND);
}

void xr_resp_request(struct xs_roce_conn *x, const struct roce_pkt *p)
{
	uint32_t flags = roce_ops[p->bth.opcode].flags, mtu = x->path.mtu;
	int32_t d = roce_psn_diff(p->bth.psn, x->epsn);
	bool first = flags & ROCE_F_FIRST, last = flags & ROCE_F_LAST;
	int rc = 0;

	if (d > 0) { /* a gap: say so once, then drop until it fills */
		if (!x->nak_seq_sent) {
			xs_log("roce: QP %u: PSN %u while %u expected: NAK sequence", x->path.qpn,
			       p->bth.psn, x->epsn);
			x->nak_seq_sent = true;
			xr_resp_flush_ack(x);
			send_aeth(x, ROCE_AETH_NAK | ROCE_NAK_PSN_SEQ, x->epsn);
		}
		place_ahead(x, p, flags, d); /* ... but a Write's packets go in now */
		return;
	}
	if (d < 0) {
		duplicate(x, p, flags);
		return;
	}
	if (!in_sequence(x, flags)) {
		fatal(x, p, ROCE_NAK_INVALID_REQ, NULL, "out of sequence");
		return;
	}
	if ((!last && p->paylen != mtu) || p->paylen > mtu || (last && !first && !p->paylen &&
							       (flags & ROCE_F_PAYLOAD))) {
		fatal(x, p, ROCE_NAK_INVALID_REQ, NULL, "payload length");
		return;
	}
	if (flags & ROCE_F_SEND) {
		rc = do_send(x, p, flags);
	} else if (flags & ROCE_F_WRITE) {
		rc = do_write(x, p, flags);
	} else if (flags & ROCE_F_READ) {
		x->msn++;
		x->epsn = roce_psn_add(x->epsn, npkts(x, p->reth.dma_len));
		x->nak_seq_sent = false;
		do_read(x, p);
		return;
	} else if (flags & ROCE_F_ATOMIC) {
		x->msn++;
		x->epsn = roce_psn_add(x->epsn, 1);
		x->nak_seq_sent = false;
		do_atomic(x, p);
		return;
	}
	if (rc)
		return;
	if (last)
		x->msn++;
	x->epsn = roce_psn_add(x->epsn, 1);
	x->nak_seq_sent = false;
	if (p->bth.ackreq) {
		x->ack_due = true;
		x->ack_psn = p->bth.psn;
	}
	jump_ahead(x);
}

/* The responses to a Read, XR_GSO_MAX_SEGS packets per send (the MIDDLE
 * ones of a run leave as one UDP GSO message). */
int xr_resp_read(struct xs_roce_conn *x, uint32_t psn, const uint8_t *src, uint32_t len)
{
	uint32_t n = npkts(x, len), mtu = x->path.mtu;
	size_t room = ROCE_MAX_HDR_LEN + mtu + 3 + ROCE_ICRC_LEN;
	struct xr_slot *v[XR_GSO_MAX_SEGS];
	unsigned nb = 0;

	if (!x->rsp_mem) {
		x->rsp_mem = malloc(room * XR_GSO_MAX_SEGS);
		if (!x->rsp_mem)
			return -ENOMEM;
	}
	xr_resp_flush_ack(x);
	for (uint32_t i = 0; i < n; i++) {
		bool first = i == 0, last = i == n - 1;
		uint32_t l = last ? len - i * mtu : mtu;
		struct xr_slot *s = &x->rsp[nb];
		struct roce_pkt p;

		memset(&p, 0, sizeof(p));
		p.bth.opcode = roce_msg_opcode(ROCE_MSG_READ_RESP, first, last);
		p.bth.psn = roce_psn_add(psn, i);
		p.bth.pkey = ROCE_PKEY_DEFAULT;
		p.bth.dqpn = x->path.dest_qpn;
		p.aeth = (struct roce_aeth){ ROCE_AETH_ACK | ROCE_AETH_CREDIT_INVALID,
					     x->msn & ROCE_MSN_MASK };
		s->pkt = x->rsp_mem + room * nb;
		s->len = (uint16_t)roce_pkt_build(&p, l ? src + (size_t)i * mtu : NULL, l,
						     &x->ip_tx, s->pkt);
		s->icrc0 = roce_icrc_get(s->pkt + s->len - ROCE_ICRC_LEN);
		v[nb++] = s;
		if (nb == XR_GSO_MAX_SEGS || last) {
			xr_xmit_slots(x, v, nb, &x->icrc_rsp);
			nb = 0;
		}
	}
	return 0;
}

int xr_resp_atomic(struct xs_roce_conn *x, uint32_t psn, uint64_t orig)
{
	struct roce_pkt p;
	x->adone[psn % XR_ATOMIC_REPLAY] = (struct xr_atomic_done){ psn, true, orig };
	xr_resp_flush_ack(x);
	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_RC_ATOMIC_ACK;
	p.bth.psn = psn;
	p.aeth = (struct roce_aeth){ ROCE_AETH_ACK | ROCE_AETH_CREDIT_INVALID, x->msn & ROCE_MSN_MASK };
	p.atm_orig = orig;
	return xr_xmit_pkt(x, &p);
}

/* The QP found an error in what we handed up (a Read or Atomic it cannot
 * carry out, an invalidate that failed): NAK the request being executed. */
int xr_resp_nak(struct xs_roce_conn *x, const struct rdmap_term *t)
{
	const struct xs_err *e = &t->cause;
	uint8_t nak = ROCE_NAK_REMOTE_OP;

	if ((e->layer == XS_LAYER_DDP && e->etype == DDP_ETYPE_TAGGED) ||
	    (e->layer == XS_LAYER_RDMAP && e->etype == RDMAP_ETYPE_REMOTE_PROT))
		nak = ROCE_NAK_REMOTE_ACCESS;
	else if (e->layer == XS_LAYER_DDP)
		nak = ROCE_NAK_INVALID_REQ;
	xs_log("roce: QP %u: PSN %u: NAK 0x%02x (cause %u/%u/0x%02x)", x->path.qpn,
	       x->cur_req_psn, ROCE_AETH_NAK | nak, e->layer, e->etype, e->ecode);
	xr_resp_flush_ack(x);
	send_aeth(x, ROCE_AETH_NAK | nak, x->cur_req_psn);
	atomic_store(&x->fatal, true);
	atomic_store(&x->dead, true);
	x->failed_up = true; /* the QP goes to error itself */
	return 0;
}
