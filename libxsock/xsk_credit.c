/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Credits and the receive ring: what the peer may send us (a ring half
 * and credits granted as we consume), the messages that arrive (Data
 * Transfer, SGL updates, control), and the CQ they complete on: polling,
 * arming and its channel's events. */
#include "config.h"

#include <stdint.h>

#include "libxsock/xsk_proto_int.h"
#include "util/xs_be.h"
#include "verbs/xs_priv_abi.h"

/* ---- credits and the receive ring ----------------------------------------------- */

void xsk_conn_broken(struct xsk *s)
{
	s->peer_gone = true;
	s->peer_shut_wr = true;
}

/* The connection ended without the peer's DISCONNECT (or SHUTDOWN then
 * DISCONNECT) control message: a TCP reset, a Terminate, a flushed WR.  As a
 * TCP socket after a RST, the application gets ECONNRESET once (recv after
 * the buffered data, send, SO_ERROR) instead of an end of file that looks
 * like a complete stream.  Seen with siw: rsockets closes once its sends
 * are queued in TCP, and a credit update arriving then made siw's socket
 * close with unread data, a RST that dropped the tail of the stream
 * (docs/interop.md). */
void xsk_conn_reset(struct xsk *s)
{
	if (!s->peer_gone && !s->disc_sent && !s->err)
		s->err = ECONNRESET;
	xsk_conn_broken(s);
}

/* Double the window the peer may send into (up to XSK_RQ) before a grant:
 * the receives behind it are posted first.  A failed post leaves the QP in
 * error, so the connection is broken, never granted past its receives. */
static void grow_credits(struct xsk *s)
{
	unsigned add = s->rq_size < XSK_RQ - s->rq_size ? s->rq_size : XSK_RQ - s->rq_size;

	if (!add)
		return;
	if (xsk_post_recvs(s, s->nrecv, add)) {
		xsk_conn_broken(s);
		return;
	}
	s->nrecv += add;
	s->rq_size = (uint16_t)(s->rq_size + add);
}

void xsk_give_credits(struct xsk *s)
{
	uint32_t half = s->rbuf_size / 2;
	bool buf, seq;

	if (s->state != XSK_CONNECTED || s->peer_gone || s->disc_sent)
		return;
	buf = s->rbuf_bytes_avail >= half;
	seq = (int16_t)(uint16_t)(s->rseq_no - s->rseq_comp) >= 0;
	if (!buf && !seq)
		return;
	if (seq)
		grow_credits(s);
	if (s->peer_gone)
		return;
	s->rseq_comp = (uint16_t)(s->rseq_no + s->rq_size / 2);
	if (buf) {
		struct rs_sge_h sge = { .addr = xsk_mem_to(s, s->rbuf + s->rbuf_free_offset),
					.key = s->rmr->rkey, .length = half };
		if (s->swap) {
			sge.addr = __builtin_bswap64(sge.addr);
			sge.key = rs_swap32(sge.key);
			sge.length = rs_swap32(sge.length);
		}
		/* the Write of the SGE and the SGL message: one chain, which
		 * the stack sends with one sendmsg */
		uint32_t m = RS_MSG(RS_OP_SGL, (uint16_t)(s->rseq_no + s->rq_size));
		if (s->swap)
			m = rs_swap32(m);
		struct ibv_sge ib = { .addr = (uintptr_t)&sge, .length = sizeof(sge) };
		struct ibv_sge mb = { .addr = (uintptr_t)&m, .length = sizeof(m) };
		struct ibv_send_wr msg = { .opcode = IBV_WR_SEND, .sg_list = &mb, .num_sge = 1,
					   .send_flags = IBV_SEND_INLINE };
		struct ibv_send_wr wr = { .next = &msg, .opcode = IBV_WR_RDMA_WRITE, .sg_list = &ib,
					  .num_sge = 1, .send_flags = IBV_SEND_INLINE };
		struct ibv_send_wr *bad;
		wr.wr.rdma.remote_addr = s->remote_sgl.addr + (uint64_t)s->remote_sge * RS_SGE_LEN;
		wr.wr.rdma.rkey = s->remote_sgl.key;
		if (s->msg_imm)
			xsk_wr_write_imm(&wr, RS_MSG(RS_OP_SGL, (uint16_t)(s->rseq_no + s->rq_size)));
		if (ibv_post_send(s->id->qp, &wr, &bad)) {
			xsk_conn_broken(s);
			return;
		}
		s->rbuf_bytes_avail -= half;
		s->rbuf_free_offset += half;
		if (s->rbuf_free_offset >= s->rbuf_size)
			s->rbuf_free_offset = 0;
		if (++s->remote_sge >= s->remote_sgl.length)
			s->remote_sge = 0;
		return;
	}
	if (xsk_post_msg(s, RS_MSG(RS_OP_SGL, (uint16_t)(s->rseq_no + s->rq_size))))
		xsk_conn_broken(s);
}

/* Pick up target SGL entries the peer wrote (an SGL message follows the
 * Write, so entries we finished are complete when we get here). */
static void refresh_tsgl(struct xsk *s)
{
	for (unsigned i = 0; i < RS_SGL_SIZE; i++) {
		if (s->tsgl[i].length)
			continue;
		struct rs_sge_h e;
		e.addr = s->target_sgl[i].addr;
		e.key = s->target_sgl[i].key;
		e.length = s->target_sgl[i].length;
		if (e.length) {
			s->tsgl[i] = e;
			s->target_sgl[i].length = 0;
		}
	}
}

static void handle_msg(struct xsk *s, uint32_t msg)
{
	switch (RS_MSG_OP(msg)) {
	case RS_OP_DATA: {
		uint32_t len = RS_MSG_DATA(msg);
		if (!len) { /* nothing to read: consumed now */
			s->rseq_no++;
			break;
		}
		if (s->rmsg_count == s->rmsg_cap) { /* cannot happen within credits */
			xsk_conn_broken(s);
			break;
		}
		s->rmsg[(s->rmsg_head + s->rmsg_count) % s->rmsg_cap].len = len;
		s->rmsg_count++;
		s->rbytes += len;
		break;
	}
	case RS_OP_SGL:
		s->sgl_seen = true;
		s->sseq_comp = (uint16_t)RS_MSG_DATA(msg);
		refresh_tsgl(s);
		break;
	case RS_OP_CTRL:
		if (RS_MSG_DATA(msg) == RS_CTRL_DISCONNECT) {
			s->peer_ctrl = true;
			xsk_conn_broken(s);
		} else if (RS_MSG_DATA(msg) == RS_CTRL_SHUTDOWN) {
			s->peer_ctrl = true;
			s->peer_shut_wr = true;
		}
		break;
	default: /* iomap updates, direct writes: not used by this side */
		break;
	}
}

/* rx (XSOCK_RX_*): an empty CQ makes the stack receive on the connection
 * first */
void xsk_poll_cq_rx(struct xsk *s, int rx)
{
	const struct xsk_stack *st = xsk_stack();
	struct ibv_wc wc[32];
	int n;

	/* a short batch drained the CQ: polling an empty one would try the
	 * socket once more */
	for (n = 32; s->cq && n == 32 &&
		     (n = st && st->poll_cq ? st->poll_cq(s->cq, 32, wc, rx)
					    : ibv_poll_cq(s->cq, 32, wc)) > 0;) {
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS)
				s->qp_failed = true;
			if (wc[i].wr_id & WR_RECV) {
				unsigned idx = (unsigned)(wc[i].wr_id & 0xffffffffu);
				if (wc[i].status != IBV_WC_SUCCESS || idx >= s->nrecv) {
					xsk_conn_reset(s);
					continue;
				}
				s->rmsg_arrived++;
				/* either form, whatever msg_imm says: a peer's Write with
				 * immediate (rsockets off iWARP) or its 4-octet Send */
				if (wc[i].wc_flags & IBV_WC_WITH_IMM)
					handle_msg(s, xs_get_be32((const uint8_t *)&wc[i].imm_data));
				else
					handle_msg(s, s->rmsgbuf[idx]);
				if (!s->peer_gone && xsk_post_recv(s, idx))
					xsk_conn_broken(s);
			} else if (wc[i].wr_id & WR_DATA) {
				uint32_t len = (uint32_t)(wc[i].wr_id & 0xffffffffu);
				s->sbuf_used -= len;
				s->sbuf_tail += len;
				if (s->sbuf_tail >= s->sbuf_size)
					s->sbuf_tail = 0;
				if (wc[i].status != IBV_WC_SUCCESS)
					xsk_conn_reset(s);
			} else if (wc[i].wr_id == WR_DISC) {
				s->disc_pending = false;
			} else if (wc[i].wr_id & (XSK_WR_EXT | XSK_WR_USER)) {
				if (s->ext)
					xsk_ext_up->wc(s, &wc[i]);
				if (wc[i].status != IBV_WC_SUCCESS)
					xsk_conn_reset(s);
			} else if (wc[i].status != IBV_WC_SUCCESS) {
				xsk_conn_reset(s);
			}
		}
	}
}

/* CQ events: libxsock keeps its CQ armed only while no thread of its own
 * is inside a locked section (where it polls the CQ anyway), so that the
 * completions it makes itself (its Writes, the receives its waiting thread
 * takes off the socket) cost no channel event; the arm at the end signals
 * at once if completions are left (xsk_cq_rearm). */
void xsk_cq_disarm(struct xsk *s, const struct xsk_stack *st)
{
	if (st->cq_arm && s->cq && s->cq_armed) {
		st->cq_arm(s->cq, 0);
		s->cq_armed = false;
	}
}

void xsk_cq_rearm(struct xsk *s, const struct xsk_stack *st)
{
	if (st->cq_arm && s->cq && !s->cq_armed) {
		st->cq_arm(s->cq, 1);
		s->cq_armed = true;
	}
}

void xsk_poll_cq(struct xsk *s)
{
	xsk_poll_cq_rx(s, XSOCK_RX_MAYBE);
}

/* pending: the channel has events (xsk_progress looked) */
void xsk_drain_cq_events(struct xsk *s, const struct xsk_stack *st, bool pending)
{
	struct ibv_cq *cq;
	void *ctx;
	unsigned n = 0;

	if (!s->cch)
		return;
	if (pending && st->comp_take) {
		while (st->comp_take(s->cch))
			n++;
	} else {
		/* only with an event pending: the stack's ibv_get_cq_event
		 * spins (40 us) before it looks at the fd, even on a
		 * nonblocking channel */
		while (pending && st->get_cq_event(s->cch, &cq, &ctx) == 0)
			n++;
	}
	if (n) {
		st->ack_cq_events(s->cq, n);
		s->cq_armed = false;
	}
	if (st->cq_arm)
		xsk_cq_disarm(s, st);
	else if (!s->cq_armed && s->cq && ibv_req_notify_cq(s->cq, 0) == 0)
		s->cq_armed = true;
}
