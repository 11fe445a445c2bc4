/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Receive.  The engine thread reads each established connection when its
 * poll fires and feeds the octets to the iWARP stream (iw_rx), which
 * places them through the QP's upcalls; an application thread polling an
 * empty CQ may do the same (xs_conn_poll), trylocking rx_mu, and leaves
 * any end of the stream it finds to the engine.  Also here: the end of a
 * stream (xs_rx_fail), RNR stalls, and parked connections (a libxsock
 * thread waits on the socket to receive itself). */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "util/xs_clock.h"
#include "verbs/xs_engine_priv.h"
#include "verbs/xs_internal.h"
#include "verbs/xs_priv_abi.h"
#include "util/xs_errno.h"

/* Receive sizes around direct placement: the octets taken with a payload
 * for the CRC and the next FPDU's headers, and the payload window beyond
 * which FPDUs count as large. */
#define XS_RTAIL 256
#define XS_RLARGE 4096

/* How long the engine leaves a connection alone after its poll fired while
 * an application thread was waiting to receive on it (xsock_priv_rx_wait):
 * that thread receives, and the engine looks again after this pause. */
#define XS_PARK_NS (1000 * 1000)
/* ... and the next look when every parked connection's waiter received
 * during the last pause (park_keep): an epoll set's sockets stay watched
 * for long, and a 1 ms timer would wake the engine a thousand times a
 * second for nothing. */
#define XS_PARK_KEEP_NS (10 * 1000 * 1000)


__thread struct xs_conn *xs_rx_tls_conn;

static void rnr_track(struct xs_conn *c);

/* ---- receive ---------------------------------------------------------------- */

/* RFC 6581: the responder may send once the initiator's RTR is in. */
static void rtr_done(struct xs_conn *c)
{
	pthread_mutex_lock(&c->tx_mu);
	c->rtr_wait = false;
	pthread_cond_broadcast(&c->tx_cv);
	pthread_mutex_unlock(&c->tx_mu);
}

static int conn_resolve(void *ctx, uint32_t stag, uint64_t to, uint32_t len, uint8_t **dst,
			struct xs_err *err)
{
	struct xs_conn *c = ctx;

	if (c->dead || c->rx_defer) {
		/* the stream ended in the middle of this input */
		xs_err_set(err, XS_LAYER_LLP, MPA_ETYPE, MPA_ECODE_TCP_CLOSED);
		return -EPIPE;
	}
	if (len == 0 && (c->rx.op == RDMAP_OP_WRITE ||
			 (c->rtr_rresp && c->rx.op == RDMAP_OP_READ_RESP))) {
		/* a zero-length Write (an RTR, a peer's kick) places nothing
		 * and, as in siw, names no buffer that is checked (siw sends
		 * STag 1); or the answer to our Read RTR: not the ULP's */
		c->rtr_eat_last = true;
		*dst = NULL;
		return 0;
	}
	if (c->rtr_wait) {
		/* a peer that skipped the RTR: be liberal, let data flow */
		xs_log("P2P: first FPDU is not an RTR; accepting it");
		rtr_done(c);
	}
	if (!c->ops)
		return -ENOENT;
	return c->ops->resolve(c->qp, c->rx.op, stag, to, len, dst, err);
}

/* Untagged input while the responder waits for the RTR: a zero-length Read
 * Request is the Read RTR (answered with a zero-length Read Response, its
 * IRD buffer handed back).  true if it was consumed here.  The answer goes
 * out before any ULP FPDU: on the engine thread at once; from an
 * application thread's receive (ibv_poll_cq) the engine sends it and the
 * ULP waits for that (rtr_answering): xs_tx_engine is the engine's alone, two
 * threads in it would both own the tx side (a doubled answer, the
 * initiator Terminates). */
static bool rtr_untagged(struct xs_conn *c, uint32_t qn, const struct ddp_delivery *d)
{
	struct rdmap_read_req rr;
	struct xs_err err;

	if (qn == RDMAP_QN_TERMINATE)
		return false;
	if (qn == RDMAP_QN_READ_REQ && rdmap_read_req_decode(d->addr, d->msg_len, &rr, &err) == 0 &&
	    rr.size == 0) {
		if (ddp_queue_post(c->q_readreq, d->addr, xs_ird_buf_len(&c->agreed), NULL) < 0)
			xs_log("P2P: IRD buffer lost");
		if (!xs_eng_on_thread) {
			pthread_mutex_lock(&c->tx_mu);
			c->rtr_answering = true;
			pthread_mutex_unlock(&c->tx_mu);
		}
		if (xs_conn_read_resp(c, rr.sink_stag, rr.sink_to, NULL, 0) < 0) {
			xs_log("P2P: Read RTR not answered");
			pthread_mutex_lock(&c->tx_mu);
			c->rtr_answering = false;
			pthread_mutex_unlock(&c->tx_mu);
		} else if (xs_eng_on_thread) {
			xs_tx_engine(c);
		}
		rtr_done(c);
		return true;
	}
	xs_log("P2P: first message is not an RTR; accepting it");
	rtr_done(c);
	return false;
}

static void conn_deliver(void *ctx, enum rdmap_opcode op, uint32_t qn, const struct ddp_delivery *d)
{
	struct xs_conn *c = ctx;

	if (c->dead || c->rx_defer)
		return; /* the stream ended earlier in this input */
	xs_stat_rx_msg(c->stat, op);
	if (qn == RDMAP_QN_TERMINATE) {
		struct rdmap_term t;
		struct xs_err e;

		c->term_seen = true;
		if (rdmap_term_decode(d->addr, d->msg_len, &t, &e) == 0 ||
		    rdmap_term_decode_siw(d->addr, d->msg_len, &t, &e) == 0)
			c->term_cause = t.cause;
		else
			xs_err_set(&c->term_cause, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP,
				   RDMAP_ECODE_UNSPECIFIED);
		xs_stat_term(c->stat, false, &c->term_cause);
	}
	if (c->rtr_wait && rtr_untagged(c, qn, d))
		return;
	if (c->ops)
		c->ops->deliver(c->qp, op, qn, d);
}

static void conn_tagged_last(void *ctx, enum rdmap_opcode op, const struct ddp_hdr *h)
{
	struct xs_conn *c = ctx;

	xs_stat_rx_msg(c->stat, op);
	if (c->rtr_eat_last) {
		c->rtr_eat_last = false;
		if (op == RDMAP_OP_READ_RESP)
			c->rtr_rresp = false;
		else
			rtr_done(c);
		return;
	}
	if (c->ops && c->ops->tagged_last)
		c->ops->tagged_last(c->qp, op, h);
}

static const struct iw_rx_ops conn_rx_ops = {
	.deliver = conn_deliver,
	.tagged_last = conn_tagged_last,
};

void xs_rx_stream_init(struct xs_conn *c)
{
	iw_rx_init(&c->rx, c->agreed.markers_rx, c->agreed.crc, 0, conn_resolve, c, &conn_rx_ops, c);
	c->rx.rnr = xs_config()->rnr_ms > 0;
	c->rx.ext = c->agreed.rdmap_ext;
}

static void conn_report_closed(struct xs_conn *c, int status)
{
	xs_conn_closed_fn cb = NULL;
	void *ctx = NULL;

	if (!c->closed_reported && !c->owner_gone) {
		c->closed_reported = true;
		cb = c->closed_cb;
		ctx = c->closed_ctx;
	}
	if (cb)
		cb(ctx, status);
}

/* The stream is over: tell the QP (once) and the CM; engine thread, rx_mu held. */
void xs_rx_fail(struct xs_conn *c, bool local, const struct xs_err *err, int status)
{
	pthread_mutex_lock(&c->tx_mu);
	bool was_dead = c->dead;
	c->dead = true;
	pthread_cond_broadcast(&c->tx_cv);
	pthread_mutex_unlock(&c->tx_mu);
	if (was_dead)
		return;
	if (c->ops && !c->owner_gone)
		c->ops->failed(c->qp, local, err);
	xs_eng_shut(c, SHUT_RDWR);
	c->state = CONN_CLOSED;
	xs_stat_state(c->stat, XS_STAT_CLOSED, status);
	xs_stat_conn_ended(c->stat);
	conn_report_closed(c, status);
}

/* Engine thread: the Terminate t (if the tx side is free), then fail. */
void xs_rx_terminate_fail(struct xs_conn *c, const struct rdmap_term *t)
{
	pthread_mutex_lock(&c->tx_mu);
	bool free_tx = !c->tx_busy && !c->dead;
	if (free_tx)
		c->tx_busy = true;
	pthread_mutex_unlock(&c->tx_mu);
	if (free_tx) {
		uint8_t body[RDMAP_TERM_MAX_LEN];
		ssize_t n = rdmap_term_encode(t, body, sizeof(body));
		if (n > 0) {
			/* a Terminate is small: one nonblocking attempt */
			struct ddp_hdr h = { .dv = DDP_VERSION, .last = true, .qn = RDMAP_QN_TERMINATE,
					     .rsvdulp = rdmap_ctrl_encode(RDMAP_OP_TERMINATE),
					     .msn = c->tx.msn[RDMAP_QN_TERMINATE]++ };
			uint8_t *hdr = c->tx.frame.hdr + MPA_HDR_LEN;
			struct iovec ulp[2] = { { hdr, ddp_hdr_encode(&h, hdr) }, { body, (size_t)n } };
			if (mpa_tx_frame(&c->tx.mpa, ulp, 2, &c->tx.frame) == 0) {
				xs_stat_tx(c->stat, &c->tx.frame);
				struct msghdr mh = { .msg_iov = c->tx.frame.iov,
						     .msg_iovlen = (size_t)c->tx.frame.iovcnt };
				if (sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
					xs_log("Terminate not sent: %s", xs_strerror(errno));
			}
		}
		xs_stat_term(c->stat, true, &t->cause);
		pthread_mutex_lock(&c->tx_mu);
		c->tx_busy = false;
		pthread_mutex_unlock(&c->tx_mu);
	}
	xs_rx_fail(c, true, &t->cause, -EPROTO);
}

/* A protocol error we found: Terminate (if the tx side is free), then fail. */
static void conn_protocol_error(struct xs_conn *c, const struct xs_err *err)
{
	struct rdmap_term t = { .cause = *err };

	xs_stat_rx_error(c->stat, err);
	if (c->rx.hdr_len && c->rx.hdr_got == c->rx.hdr_len) {
		t.d = true;
		memcpy(t.ddp_hdr, c->rx.hdr, c->rx.hdr_len);
		t.ddp_hdr_len = c->rx.hdr_len;
	}
	xs_rx_terminate_fail(c, &t);
}

/* Receive what the socket holds (rx_mu held) until it would block or the
 * budget is used.  On the engine thread a failure ends the stream here;
 * on an application thread (engine = false, the poll_cq fast path) a
 * protocol error or a peer's Terminate is parked in rx_defer for the
 * engine, which owns every upcall that ends a stream, and a FIN or socket
 * error is left for the engine's own poll to find.  Returns the octets
 * consumed. */
size_t xs_rx_receive(struct xs_conn *c, size_t budget, bool engine)
{
	struct xs_err err;
	size_t got = 0;
	bool emptied = false;

	while (budget > 0 && c->state == CONN_ESTABLISHED && !c->dead && !c->rx_defer) {
		uint8_t *dst;
		size_t win, asked, fed = 0, used = 0;
		ssize_t n;
		int rc = 0;

		if (atomic_load(&c->rx_stalled)) {
			/* a receive may be there now: go on where the Send stopped */
			if (atomic_load(&c->rnr_off))
				c->rx.rnr = false;
			bool over = c->rx_over_len > 0;

			if (over)
				rc = iw_rx_input_part(&c->rx, c->rx_over + c->rx_over_off,
						      c->rx_over_len - c->rx_over_off, &used, &err);
			else
				rc = iw_rx_input_part(&c->rx, c->rbuf + c->rx_pend_off,
						      c->rx_pend_len, &used, &err);
			if (rc == -EAGAIN) {
				if (over) {
					c->rx_over_off += used;
				} else {
					c->rx_pend_off += used;
					c->rx_pend_len -= used;
				}
				if (used && engine) /* another Send: its own wait */
					rnr_track(c);
				else if (used)
					xs_eng_command(c, CMD_RXKICK);
				break;
			}
			if (rc < 0)
				goto fail;
			c->rx_pend_len = 0;
			if (over) { /* served: give the memory back */
				free(c->rx_over);
				c->rx_over = NULL;
				c->rx_over_cap = c->rx_over_off = c->rx_over_len = 0;
			}
			atomic_store(&c->rx_stalled, false);
			if (!engine)
				xs_eng_command(c, CMD_ARM); /* the engine's poll is off */
		}
		win = iw_rx_direct(&c->rx, &dst);
		if (win > 0) {
			/* payload whose destination is known: straight there, and
			 * in the same call the CRC and the next FPDU's headers */
			struct iovec v[2] = { { dst, win }, { c->rbuf, XS_RTAIL } };
			struct msghdr mh = { .msg_iov = v, .msg_iovlen = 2 };
			asked = win + XS_RTAIL;
			n = recvmsg(c->fd, &mh, MSG_DONTWAIT);
			if (n > 0)
				rc = iw_rx_direct_done(&c->rx, (size_t)n < win ? (size_t)n : win, &err);
			if (n > 0 && (size_t)n > win && rc == 0) {
				fed = (size_t)n - win;
				rc = iw_rx_input_part(&c->rx, c->rbuf, fed, &used, &err);
			}
		} else {
			/* inside a stream of large FPDUs a big read would stage
			 * payload here only to copy it again: read the headers */
			asked = c->rx_large ? XS_RTAIL : XS_RBUF;
			n = recv(c->fd, c->rbuf, asked, MSG_DONTWAIT);
			if (n > 0) {
				fed = (size_t)n;
				rc = iw_rx_input_part(&c->rx, c->rbuf, fed, &used, &err);
			}
		}
		xs_stat_rx(c->stat, n, c->rx.fpdus);
		if (n > 0 && !atomic_load_explicit(&c->rx_any, memory_order_relaxed)) {
			atomic_store(&c->tx_at_rx, atomic_load(&c->tx_writes));
			atomic_store(&c->rx_any, true);
			pthread_mutex_lock(&c->tx_mu);
			if (c->settle_wait) /* a sender waits for these octets */
				pthread_cond_broadcast(&c->tx_cv);
			pthread_mutex_unlock(&c->tx_mu);
		}
		if (rc == -EAGAIN) {
			/* RNR: keep the rest, stop reading until a receive comes */
			c->rx_pend_off = used;
			c->rx_pend_len = fed - used;
			atomic_store(&c->rx_stalled, true);
			if (engine)
				rnr_track(c);
			else
				xs_eng_command(c, CMD_RXKICK); /* the engine keeps the time */
			got += (size_t)n;
			break;
		}
		if (n > 0 && rc == 0) {
			/* at an FPDU boundary right after a large payload the
			 * next FPDU is likely large too: read its header alone */
			size_t w = iw_rx_direct(&c->rx, &dst);
			c->rx_large = w >= XS_RLARGE || (w == 0 && win >= XS_RLARGE);
		}
		if (rc < 0) {
fail:
			if (engine) {
				conn_protocol_error(c, &err);
			} else if (!c->rx_defer) {
				c->rx_defer_err = err;
				c->rx_defer = XS_RX_DEFER_PROTO;
				xs_eng_command(c, CMD_RXDEFER);
			}
			break;
		}
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			if (!engine) {
				/* the engine's poll sees the end too, but the
				 * RST's error is read only once */
				if (n < 0 && errno == ECONNRESET)
					c->rx_reset = ECONNRESET;
				/* the engine's poll sees it too: wake it now if it
				 * parked the connection (else its pause ends within
				 * XS_PARK_NS), and stop waiters polling it */
				if (!atomic_exchange(&c->rx_app_eof, true) &&
				    atomic_load(&c->rx_parked))
					xs_eng_command(c, CMD_ARM);
				break;
			}
			/* FIN or RST: after a Terminate it is the remote error */
			struct xs_err e;
			if (c->term_seen)
				e = c->term_cause;
			else
				xs_err_set(&e, XS_LAYER_LLP, MPA_ETYPE, MPA_ECODE_TCP_CLOSED);
			int status = n == 0 && (c->fin_sent || !c->term_seen) ? 0 : -ECONNRESET;
			if (n < 0)
				status = -errno;
			else if (c->rx_reset)
				status = -c->rx_reset;
			xs_rx_fail(c, false, &e, status);
			break;
		}
		if (n < 0) {
			emptied = errno == EAGAIN || errno == EWOULDBLOCK;
			break;
		}
		got += (size_t)n;
		budget = (size_t)n < budget ? budget - (size_t)n : 0;
		/* a short read emptied the socket: another recv would only say
		 * EAGAIN (what arrives later makes the socket readable again,
		 * for the engine's re-armed poll as for a waiting thread) */
		if (!c->term_seen && (size_t)n < asked) {
			emptied = true;
			break;
		}
		if (c->term_seen) {
			if (engine) {
				xs_rx_fail(c, false, &c->term_cause, -ECONNRESET);
			} else {
				c->rx_defer = XS_RX_DEFER_TERM;
				xs_eng_command(c, CMD_RXDEFER);
			}
			break;
		}
	}
	atomic_store(&c->rx_empty, emptied);
	return got;
}

/* Engine: end the stream for what an application thread's receive found. */
void xs_rx_deferred(struct xs_conn *c)
{
	pthread_mutex_lock(&c->rx_mu);
	if (c->rx_defer == XS_RX_DEFER_PROTO && !c->dead)
		conn_protocol_error(c, &c->rx_defer_err);
	else if (c->rx_defer == XS_RX_DEFER_TERM && !c->dead)
		xs_rx_fail(c, false, &c->term_cause, -ECONNRESET);
	else if (c->rx_defer == XS_RX_DEFER_QPTERM && !c->dead)
		xs_rx_terminate_fail(c, &c->rx_defer_term);
	pthread_mutex_unlock(&c->rx_mu);
}

/* ---- the receive fast path (application threads) ----------------------------- */

/* The thread that exported c holds rx_mu until its execve: the receives
 * libxsock reposts while it records the stream state need no more. */
static bool rx_held_by_export(const struct xs_conn *c)
{
	return c->exported && pthread_equal(c->export_thread, pthread_self());
}

void xs_conn_rx_lock(struct xs_conn *c)
{
	if (!rx_held_by_export(c))
		pthread_mutex_lock(&c->rx_mu);
}

void xs_conn_rx_unlock(struct xs_conn *c)
{
	if (!rx_held_by_export(c))
		xs_rx_unlock(c);
}

void xs_conn_rx_kick(struct xs_conn *c, bool never)
{
	if (never)
		atomic_store(&c->rnr_off, true);
	if (atomic_load(&c->rx_stalled))
		xs_eng_command(c, CMD_RXKICK);
}

ssize_t xs_conn_poll(struct xs_conn *c, size_t budget, bool maybe)
{
	ssize_t got = 0;

	if (maybe && atomic_load(&c->rx_watch) && atomic_load(&c->rx_empty))
		return 0; /* the engine's poll sees what comes to the emptied socket */
	if (xs_conn_claim(c) < 0)
		return -EPIPE; /* another process uses this connection */
	if (xs_eng_on_thread || pthread_mutex_trylock(&c->rx_mu))
		return -EBUSY; /* the engine is receiving: it completes what comes */
	if (!c->owner_gone && c->ops) {
		atomic_fetch_add_explicit(&c->app_rx_gen, 1, memory_order_relaxed);
		xs_rx_tls_conn = c;
		got = (ssize_t)xs_rx_receive(c, budget, false);
		xs_rx_tls_conn = NULL;
	}
	bool pump = c->rx_rr_queued;

	c->rx_rr_queued = false;
	xs_rx_unlock(c);
	if (pump)
		xs_tx_caller_pump(c);
	return got;
}

/* Whether an application thread may wait on the connection's TCP socket
 * to receive on it: established, alive, this process's, its end not seen. */
static bool rx_waitable(struct xs_conn *c)
{
	return c->state == CONN_ESTABLISHED && !c->dead && !c->owner_gone &&
	       !atomic_load(&c->rx_app_eof) &&
	       atomic_load_explicit(&c->fork_mode, memory_order_acquire) == XS_FORK_MINE;
}

/* xsock_priv_rx_wait for c (cm_proc.c maps the id): an application
 * thread is about to block until the connection is readable, to receive on it itself (through its CQ's
 * xs_conn_poll).  on = 1: returns the TCP socket to poll for POLLIN and
 * counts the waiter, or -1 (nothing counted) when there is nothing to
 * receive there (not established, not this process's, or the end was
 * seen: the engine reports it); on = 0: the waiter is done; on = 2 (a
 * waiter that stays between waits, an epoll set's socket): 1 when it
 * should stop waiting on the TCP socket, whose input the application
 * thread cannot take (the conditions of on = 1, or a stalled stream). */
int xs_conn_rx_wait(struct xs_conn *c, int on)
{
	if (on == 2)
		return !rx_waitable(c) || atomic_load(&c->rx_stalled);
	if (!on) {
		/* the waiter may have seen the socket readable: its next
		 * receive looks (xs_conn_poll) */
		atomic_store(&c->rx_empty, false);
		atomic_fetch_sub_explicit(&c->app_waiters, 1, memory_order_release);
		return 0;
	}
	if (!rx_waitable(c))
		return -1;
	atomic_fetch_add_explicit(&c->app_waiters, 1, memory_order_acq_rel);
	return c->fd;
}

/* ---- a stalled stream read ahead by a poster waiting for room ----------------- */

/* Application thread, tx owned: what arrived on a stalled stream, into
 * rx_over (a FIN or an error is left for the engine to find).  The stalled
 * rest of rbuf moves in first, when rx_over is empty; what the receive
 * path consumed already is dropped from the front. */
void xs_rx_over_read(struct xs_conn *c)
{
	pthread_mutex_lock(&c->rx_mu);
	if (!atomic_load(&c->rx_stalled) || c->state != CONN_ESTABLISHED || c->dead)
		goto out;
	if (c->rx_over_off) {
		c->rx_over_len -= c->rx_over_off;
		memmove(c->rx_over, c->rx_over + c->rx_over_off, c->rx_over_len);
		c->rx_over_off = 0;
	}
	size_t pend = c->rx_over_len ? 0 : c->rx_pend_len;
	size_t need = c->rx_over_len + pend + XS_RBUF;

	if (need > c->rx_over_cap && need <= XS_RX_OVER_MAX + XS_RBUF) {
		size_t cap = c->rx_over_cap ? c->rx_over_cap : 1u << 20;
		uint8_t *b;

		while (cap < need)
			cap *= 2;
		if (cap > XS_RX_OVER_MAX + XS_RBUF)
			cap = XS_RX_OVER_MAX + XS_RBUF;
		b = realloc(c->rx_over, cap);
		if (b) {
			c->rx_over = b;
			c->rx_over_cap = cap;
		}
	}
	if (c->rx_over_cap < need)
		goto out;
	if (pend) {
		memcpy(c->rx_over, c->rbuf + c->rx_pend_off, pend);
		c->rx_over_len = pend;
		c->rx_pend_len = 0;
	}
	ssize_t n = recv(c->fd, c->rx_over + c->rx_over_len, c->rx_over_cap - c->rx_over_len,
			 MSG_DONTWAIT);
	if (n > 0)
		c->rx_over_len += (size_t)n;
out:
	xs_rx_unlock(c);
}

/* ---- RNR: a Send waits for its receive (engine thread) ------------------------ */

/* Engine: go on with a stalled stream (a receive was posted, or time is
 * up: expire), and read the socket again. */
void xs_rx_kick(struct xs_conn *c, bool expire)
{
	pthread_mutex_lock(&c->rx_mu);
	if (atomic_load(&c->rx_stalled) && c->state == CONN_ESTABLISHED && !c->dead &&
	    !c->owner_gone) {
		if (expire)
			c->rx.rnr = false;
		xs_rx_receive(c, 4u << 20, true);
		if (!atomic_load(&c->rnr_off))
			c->rx.rnr = xs_config()->rnr_ms > 0;
		if (atomic_load(&c->rx_stalled) && !c->on_rnr_list)
			rnr_track(c); /* stalled on an application thread */
	}
	pthread_mutex_unlock(&c->rx_mu);
	if (c->state != CONN_CLOSED)
		xs_eng_arm(c);
}

/* A Send waits for its receive (engine thread): until XSOCK_RNR_MS from
 * now, on the list the late timer looks at. */
static void rnr_track(struct xs_conn *c)
{
	c->rnr_due_ms = xs_now_ms() + xs_config()->rnr_ms;
	if (c->on_rnr_list)
		return;
	xs_eng_ref(c);
	c->on_rnr_list = true;
	c->rnr_next = xs_eng.rnr;
	xs_eng.rnr = c;
	xs_close_late_arm();
}

/* Still no receive when the time is up: the Send fails the stream as it
 * would have at once without the wait (DDP/2/0x02, Terminate). */
void xs_rx_rnr_scan(uint64_t now)
{
	struct xs_conn **pp = &xs_eng.rnr;

	while (*pp) {
		struct xs_conn *c = *pp;
		bool stalled = atomic_load(&c->rx_stalled) && c->state == CONN_ESTABLISHED &&
			       !c->dead;

		if (stalled && now < c->rnr_due_ms) {
			pp = &c->rnr_next;
			continue;
		}
		*pp = c->rnr_next;
		c->on_rnr_list = false;
		if (stalled)
			xs_rx_kick(c, true);
		xs_eng_unref(c); /* the list's */
	}
}

/* ---- parked connections (engine thread) -------------------------------------------
 * Data came while an application thread waits on the socket to receive it
 * itself: the engine stays out (no lock race, no CQ event, no second
 * wake-up) and re-arms its poll XS_PARK_NS later, so a socket nobody reads
 * any more is received on again within that pause (park_keep: unless the
 * waiter received meanwhile). */

static void park_timer_arm(void)
{
	xs_eng_timeout_arm(&xs_eng.park_armed, &xs_eng.park_ts, XS_PARK_NS, TAG_PARK);
}

void xs_rx_park(struct xs_conn *c)
{
	if (c->rx_parked) { /* re-armed meanwhile by a command: once on the list */
		xs_eng_unref(c);
		return;
	}
	c->rx_parked = true;
	c->park_gen = atomic_load_explicit(&c->app_rx_gen, memory_order_relaxed);
	c->park_next = xs_eng.parked;
	xs_eng.parked = c;
	park_timer_arm();
}

/* A parked connection stays parked, its poll not re-armed, while its
 * waiter still receives on it: an application thread received since the
 * last look (an epoll set's socket is watched between its waits too). */
static bool park_keep(struct xs_conn *c)
{
	unsigned gen = atomic_load_explicit(&c->app_rx_gen, memory_order_relaxed);

	if (c->poll_armed || c->state != CONN_ESTABLISHED || c->owner_gone || c->want_out ||
	    c->rr_count || gen == c->park_gen || atomic_load(&c->rx_app_eof) ||
	    atomic_load_explicit(&c->app_waiters, memory_order_acquire) <= 0 ||
	    atomic_load_explicit(&c->fork_mode, memory_order_acquire) != XS_FORK_MINE)
		return false;
	c->park_gen = gen;
	return true;
}

void xs_rx_park_expired(void)
{
	struct xs_conn *c = xs_eng.parked, *kept = NULL;

	xs_eng.park_armed = false;
	xs_eng.parked = NULL;
	while (c) {
		struct xs_conn *next = c->park_next;

		if (park_keep(c)) {
			c->park_next = kept;
			kept = c;
			c = next;
			continue;
		}
		c->rx_parked = false;
		c->park_next = NULL;
		if (c->state != CONN_CLOSED && !c->owner_gone)
			xs_eng_arm(c);
		xs_eng_unref(c); /* the parked poll's */
		c = next;
	}
	xs_eng.parked = kept;
	if (kept)
		xs_eng_timeout_arm(&xs_eng.park_armed, &xs_eng.park_ts, XS_PARK_KEEP_NS, TAG_PARK);
}
