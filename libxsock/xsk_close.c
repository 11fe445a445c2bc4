/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Teardown: xsk_free closes a socket and frees its resources (after the
 * relay and extended-call state of the layers above); over a kernel stack
 * it first lingers for the stream's sends and the peer's end. */
#include "config.h"

#include <stdlib.h>
#include <time.h>

#include "libxsock/xsk_proto_int.h"
#include "verbs/xs_priv_abi.h"

/* ---- close over a kernel stack ------------------------------------------------ */

/* libiwarp's engine finishes a closed connection after close() returned
 * (it sends what was posted, then lingers until the peer's FIN).  Over a
 * kernel stack nothing outlives the QP and the cm_id, and siw fails the
 * work requests still queued when the QP leaves RTS: close() itself waits,
 * as rsockets' rclose does, for the stream's sends, then for the
 * DISCONNECT message, then (after rdma_disconnect) for the peer's end, so
 * that what arrives meanwhile is read rather than met by a reset.  The
 * whole wait is bounded by XSOCK_LINGER_MS (default 1000 ms). */
static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool sends_done(const struct xsk *s)
{
	return s->sbuf_used == 0;
}

static bool disc_done(const struct xsk *s)
{
	return !s->disc_pending;
}

static bool cm_done(const struct xsk *s)
{
	return s->cm_gone;
}

/* Over RoCE a close waits this long without progress at most (no send
 * completed, no DISCONNECT ACKed, no CM event): a live peer answers in
 * microseconds, and a dead one (killed, no DREQ) would hold each close
 * for the whole linger: nginx's shutdown after wrk's 64 connections were
 * killed took over 30 s. */
#define XSK_CLOSE_STALL_MS 100

/* Until done(s), the connection fails or the deadline (CLOCK_MONOTONIC
 * ms) passes, or (stall) nothing changed for XSK_CLOSE_STALL_MS; s->mu
 * held, no other reference. */
static void close_wait(struct xsk *s, const struct xsk_stack *st, bool (*done)(const struct xsk *),
		       int64_t deadline, bool stall)
{
	int64_t moved = now_ms();
	uint32_t used = s->sbuf_used;
	bool pend = s->disc_pending, gone = s->cm_gone;

	for (;;) {
		struct pollfd p[2] = { { .fd = s->ch ? s->ch->fd : -1, .events = POLLIN },
				       { .fd = s->cch ? s->cch->fd : -1, .events = POLLIN } };
		int64_t now, left;

		xsk_drain_cm(s, st);
		xsk_drain_cq_events(s, st, true);
		xsk_poll_cq_rx(s, XSOCK_RX_ALWAYS);
		now = now_ms();
		if (s->sbuf_used != used || s->disc_pending != pend || s->cm_gone != gone) {
			used = s->sbuf_used;
			pend = s->disc_pending;
			gone = s->cm_gone;
			moved = now;
		}
		left = deadline - now;
		if (stall && now - moved >= XSK_CLOSE_STALL_MS)
			left = 0;
		if (done(s) || s->qp_failed || left <= 0)
			return;
		/* armed while we sleep: the ACK of our DISCONNECT completes on
		 * the CQ, and a disarmed CQ left each RoCE close to the 20 ms
		 * tick (one close in ten took 20 ms in a connection churn) */
		xsk_cq_rearm(s, st);
		xsk_real.poll(p, 2, (int)(left > 20 ? 20 : left));
	}
}

/* A close whose data, then DISCONNECT message, the peer ACKed before the
 * CM's disconnect, within the linger: a kernel device's (the kernel's CM
 * does not wait for them), and RoCE's (msg_imm), where no TCP stream
 * orders the data before the DREQ: the peer saw the DREQ before the
 * DISCONNECT message and took the end for a reset (wrk's read errors,
 * ECONNRESET, at nginx's keepalive_requests close). */
static void ordered_close(struct xsk *s, const struct xsk_stack *st)
{
	int64_t deadline = now_ms() + xsk_linger_ms();
	bool live = s->state == XSK_CONNECTED && !s->cm_gone && !s->qp_failed;
	bool stall = s->msg_imm && !st->kernel;

	if (live)
		close_wait(s, st, sends_done, deadline, stall);
	if (s->state == XSK_CONNECTED && !s->peer_gone && !s->disc_sent && !s->qp_failed) {
		uint32_t m = RS_MSG(RS_OP_CTRL, RS_CTRL_DISCONNECT);
		struct ibv_sge sge = { .addr = (uintptr_t)&m, .length = sizeof(m) };
		struct ibv_send_wr wr = { .wr_id = WR_DISC, .opcode = IBV_WR_SEND, .sg_list = &sge,
					  .num_sge = 1,
					  .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED };
		struct ibv_send_wr *bad;

		if (s->swap)
			m = rs_swap32(m);
		if (s->msg_imm)
			xsk_wr_imm(&wr, RS_MSG(RS_OP_CTRL, RS_CTRL_DISCONNECT));
		s->disc_sent = true;
		s->disc_pending = ibv_post_send(s->id->qp, &wr, &bad) == 0;
		if (live)
			close_wait(s, st, disc_done, deadline, stall);
	}
	if (s->state == XSK_CONNECTED || s->state == XSK_CONNECTING)
		st->disconnect(s->id);
	if (live)
		close_wait(s, st, cm_done, deadline, stall);
}

/* ---- xsk_free ------------------------------------------------------------------ */

void xsk_free(struct xsk *s)
{
	const struct xsk_stack *st = xsk_stack();
	struct xsk *c;

	if (!s)
		return;
	if (s->relay && xsk_relay_up->orphan(s))
		return; /* its relay thread frees it */
	if (s->relay)
		xsk_relay_up->free(s); /* its threads use s */
	xsk_svc_del(s);
	if (s->ext)
		xsk_ext_up->free(s);
	xsk_mutex_lock(&s->mu);
	xsk_rx_unwatch(s);
	while ((c = xsk_accept_pop(s)))
		xsk_free(c);
	if (st && s->id && !xsk_fork_quiet(s) && s->linger_on && !s->linger_s &&
	    s->state == XSK_CONNECTED && !s->peer_gone && st->tcp && !s->msg_imm &&
	    st->tcp(s->id, XSOCK_TCP_ABORT, 0, 0, NULL, NULL) == 0) {
		/* SO_LINGER {1, 0}: an abortive close, the peer sees a reset (off
		 * iWARP, msg_imm, no TCP connection to reset: a disconnect) */
		s->disc_sent = true;
	}
	if (xsk_maker_only(s) && xsk_fork_quiet(s)) {
		/* the kernel's (or the RoCE engine's) objects are the other
		 * process's too: leave them (and the stack's small structures)
		 * to it, close our files */
		if (s->cch)
			xsk_real.close(s->cch->fd);
		if (s->ch)
			xsk_real.close(s->ch->fd);
		s->id = NULL;
		s->cch = NULL;
		s->ch = NULL;
		s->cq = NULL;
		s->rmr = s->smr = NULL;
		s->pd = NULL;
	}
	if (st && (st->kernel || s->msg_imm) && s->id && !xsk_fork_quiet(s)) {
		ordered_close(s, st);
	} else if (st && s->id && !xsk_fork_quiet(s)) {
		if (s->state == XSK_CONNECTED && !s->peer_gone && !s->disc_sent) {
			s->disc_sent = true;
			xsk_post_msg(s, RS_MSG(RS_OP_CTRL, RS_CTRL_DISCONNECT));
		}
		if (s->state == XSK_CONNECTED || s->state == XSK_CONNECTING)
			st->disconnect(s->id);
	}
	if (st && s->id && s->id->qp)
		st->destroy_qp(s->id);
	if (st && s->cch) {
		struct ibv_cq *cq;
		void *ctx;
		unsigned n = 0;
		while (st->get_cq_event(s->cch, &cq, &ctx) == 0)
			n++;
		if (n)
			st->ack_cq_events(s->cq, n);
	}
	if (st && s->cq)
		st->destroy_cq(s->cq);
	if (st && s->cch)
		st->destroy_comp_channel(s->cch);
	if (st && s->rmr)
		st->dereg_mr(s->rmr);
	if (st && s->smr)
		st->dereg_mr(s->smr);
	if (st && s->id)
		st->destroy_id(s->id);
	if (st && s->ch) {
		struct rdma_cm_event *ev;
		while (st->get_cm_event(s->ch, &ev) == 0) {
			if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
				st->reject(ev->id, NULL, 0);
				struct rdma_cm_id *cid = ev->id;
				st->ack_cm_event(ev);
				st->destroy_id(cid);
				continue;
			}
			st->ack_cm_event(ev);
		}
		st->destroy_event_channel(s->ch);
	}
	if (st && s->pd)
		st->dealloc_pd(s->pd);
	xsk_ring_free(s->mem, s->mem_len);
	xsk_ring_free(s->sbuf, s->sbuf_size);
	free(s->rmsg);
	free(s->unread.buf);
	if (s->plain_fd >= 0)
		xsk_real.close(s->plain_fd);
	if (s->probe_fd >= 0) /* closed while its probe ran */
		xsk_fd_close(s->probe_fd);
	if (s->ready_fd >= 0)
		xsk_fd_close(s->ready_fd);
	if (s->wake_fd >= 0)
		xsk_fd_close(s->wake_fd);
	if (s->epfd >= 0 && !s->epfd_app)
		xsk_real.close(s->epfd);
	xsk_mutex_unlock(&s->mu);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
