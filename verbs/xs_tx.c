/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Transmit.  Application threads frame and write their own FPDUs under
 * exclusive ownership of the connection's transmit side (tx_acquire,
 * tx_release: tx_mu is held only to take and give it back), waiting for
 * socket room on their own thread (wait_writable); a WR chain posted
 * together leaves in one sendmsg (cork).  The engine thread sends only
 * what may not wait for a poster: queued Read and Atomic Responses, the
 * siw kicks and a disconnect's FIN (xs_tx_engine), never blocking. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "util/xs_clock.h"
#include "util/xs_iov.h"
#include "verbs/xs_engine_priv.h"
#include "verbs/xs_internal.h"
#include "util/xs_errno.h"

#define XS_FRAME_SCRATCH \
	(sizeof(((struct mpa_txframe *)0)->hdr) + sizeof(((struct mpa_txframe *)0)->trailer) + \
	 sizeof(((struct mpa_txframe *)0)->markers))

/* the connection whose WR chain this thread is posting corked */
static __thread struct xs_conn *tls_cork;

/* Wait for room in the socket.  A peer whose window stays shut for
 * XSOCK_TX_TIMEOUT_MS is broken: shutting the socket down makes the
 * engine's poll see the end and fail the stream (QP error, flush,
 * DISCONNECTED) as for any closed connection. */
static int wait_writable(struct xs_conn *c)
{
	struct pollfd p = { .fd = c->fd, .events = POLLOUT };
	unsigned limit = xs_config()->tx_timeout_ms;
	uint64_t deadline = limit ? xs_now_ms() + limit : 0;

	for (;;) {
		if (c->dead)
			return -EPIPE;
		p.events = POLLOUT | (xs_rx_over_wanted(c) ? POLLIN : 0);
		int n = poll(&p, 1, 200);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0) {
			if (p.revents & (POLLERR | POLLHUP))
				return -EPIPE;
			if (!(p.revents & POLLOUT)) {
				xs_rx_over_read(c);
				continue;
			}
			return 0;
		}
		if (deadline && xs_now_ms() >= deadline) {
			xs_log("peer took nothing for %u ms: closing", limit);
			shutdown(c->fd, SHUT_RDWR);
			return -ETIMEDOUT;
		}
	}
}

enum { ZC_UNKNOWN, ZC_ON, ZC_OFF };

/* A peer on this host: the kernel copies what it delivers to a local
 * socket, so zero-copy send only adds its notifications. */
static bool peer_is_local(const struct xs_conn *c)
{
	struct sockaddr_storage l, p;

	if (xs_conn_addrs(c, &l, &p) < 0)
		return true;
	if (p.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)&p, *b = (const void *)&l;

		return (ntohl(a->sin_addr.s_addr) >> 24) == 127 ||
		       a->sin_addr.s_addr == b->sin_addr.s_addr;
	}
	if (p.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)&p, *b = (const void *)&l;

		return IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) ||
		       (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && a->sin6_addr.s6_addr[12] == 127) ||
		       memcmp(&a->sin6_addr, &b->sin6_addr, sizeof(a->sin6_addr)) == 0;
	}
	return true;
}

/* Whether a write of len octets leaves with SENDMSG_ZC (tx owner). */
static bool zc_wanted(struct xs_conn *c, size_t len)
{
	unsigned min = xs_config()->zc_min;

	if (!min || len < min || c->zc == ZC_OFF)
		return false;
	if (c->zc == ZC_UNKNOWN) {
		c->zc = peer_is_local(c) && !xs_config()->zc_always ? ZC_OFF : ZC_ON;
		if (c->zc == ZC_OFF)
			return false;
	}
	return true;
}

/* The pages of this write's zero-copy sends are the kernel's until their
 * notifications: the write is not done (its WR does not complete) before. */
static int zc_finish(struct xs_conn *c, int rc)
{
	bool copied = false;
	int src = xs_zc_settle(xs_config()->tx_timeout_ms, &copied);

	xs_stat_zc(c->stat, copied);
	if (copied && !xs_config()->zc_always) {
		c->zc = ZC_OFF;
		xs_log("zero-copy send: the kernel copied anyway (a peer on this host): copies from now on");
	}
	if (src < 0 && rc == 0) {
		xs_log("zero-copy send: the kernel kept the pages: %s; closing", xs_strerror(-src));
		shutdown(c->fd, SHUT_RDWR);
		rc = src;
	}
	return rc;
}

/* All of iov on the socket, waiting for room when TCP pushes back. */
static int conn_write_raw(struct xs_conn *c, const struct iovec *iov, int cnt, size_t len)
{
	struct iovec v[XS_CORK_IOV > MPA_TX_MAX_IOV ? XS_CORK_IOV : MPA_TX_MAX_IOV];
	struct iovec *p = v;
	size_t left = len;
	bool zc = zc_wanted(c, len), zc_sent = false;
	int rc = 0;

	memcpy(v, iov, (size_t)cnt * sizeof(*v));
	while (left > 0) {
		struct msghdr mh = { .msg_iov = p, .msg_iovlen = (size_t)cnt };
		ssize_t n;

		if (zc) {
			n = xs_zc_send(c->fd, p, cnt);
			if (n == -EOPNOTSUPP) {
				zc = false;
				c->zc = ZC_OFF;
				continue;
			}
			if (n < 0) {
				errno = (int)-n;
				n = -1;
			} else {
				zc_sent = true;
			}
		} else {
			n = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				rc = wait_writable(c);
				if (rc < 0)
					break;
				continue;
			}
			rc = -errno;
			break;
		}
		atomic_fetch_add_explicit(&c->tx_writes, 1, memory_order_relaxed);
		left -= (size_t)n;
		xs_iov_advance(&p, &cnt, (size_t)n);
	}
	return zc_sent ? zc_finish(c, rc) : rc;
}

static int cork_flush(struct xs_conn *c)
{
	int rc = 0;

	if (c->cork_cnt)
		rc = conn_write_raw(c, c->cork_iov, c->cork_cnt, c->cork_len);
	c->cork_cnt = 0;
	c->cork_len = 0;
	c->cork_used = 0;
	return rc;
}

/* p lies in the FPDU scratch, which the next FPDU's framing rewrites. */
static bool in_frame(const struct xs_conn *c, const void *p)
{
	const uint8_t *b = p, *f = (const uint8_t *)&c->tx.frame;

	return b >= f && b < f + sizeof(c->tx.frame);
}

/* Copied rather than referenced: the FPDU scratch and small pieces (a
 * WR's inline data lives on post_send's stack). */
static bool cork_copies(const struct xs_conn *c, const struct iovec *v)
{
	return v->iov_len <= XS_MAX_INLINE || in_frame(c, v->iov_base);
}

/* A cork on this thread: FPDUs gather until cork_end's one sendmsg
 * (tx owned). */
static void cork_begin(struct xs_conn *c)
{
	c->cork_cnt = 0;
	c->cork_len = 0;
	c->cork_used = 0;
	tls_cork = c;
}

static int cork_end(struct xs_conn *c)
{
	int rc = cork_flush(c);

	tls_cork = NULL;
	return rc;
}

/* The iw_tx writer used on application threads: all of the FPDU, waiting
 * for room when TCP pushes back; inside a corked chain the FPDU joins the
 * others for one sendmsg at the flush. */
static int conn_write_blocking(void *ctx, const struct iovec *iov, int cnt, size_t len)
{
	struct xs_conn *c = ctx;
	size_t copy = 0;
	int rc;

	xs_stat_tx(c->stat, &c->tx.frame);
	if (tls_cork != c)
		return conn_write_raw(c, iov, cnt, len);
	for (int i = 0; i < cnt; i++)
		if (cork_copies(c, &iov[i]))
			copy += iov[i].iov_len;
	if (c->cork_cnt + cnt > XS_CORK_IOV || c->cork_used + copy > XS_CORK_BUF) {
		rc = cork_flush(c);
		if (rc < 0)
			return rc;
		if (cnt > XS_CORK_IOV || copy > XS_CORK_BUF)
			return conn_write_raw(c, iov, cnt, len);
	}
	for (int i = 0; i < cnt; i++) {
		struct iovec *last = c->cork_cnt ? &c->cork_iov[c->cork_cnt - 1] : NULL;

		if (!iov[i].iov_len)
			continue;
		if (cork_copies(c, &iov[i])) {
			uint8_t *dst = c->cork_buf + c->cork_used;
			memcpy(dst, iov[i].iov_base, iov[i].iov_len);
			c->cork_used += iov[i].iov_len;
			if (last && (uint8_t *)last->iov_base + last->iov_len == dst) {
				last->iov_len += iov[i].iov_len; /* contiguous copies merge */
				continue;
			}
			c->cork_iov[c->cork_cnt++] = (struct iovec){ dst, iov[i].iov_len };
		} else {
			c->cork_iov[c->cork_cnt++] = iov[i];
		}
	}
	c->cork_len += len;
	return 0;
}

void xs_tx_stream_init(struct xs_conn *c, size_t mulpdu)
{
	iw_tx_init(&c->tx, c->agreed.markers_tx, c->agreed.crc, mulpdu, conn_write_blocking, c);
}

static int tx_acquire(struct xs_conn *c)
{
	if (xs_conn_claim(c) < 0)
		return -EBUSY;
	pthread_mutex_lock(&c->tx_mu);
	while ((c->tx_busy || c->rtr_wait || c->rtr_answering || c->settle_wait) && !c->dead) {
		if (c->tx_busy || c->rtr_wait || c->rtr_answering) {
			pthread_cond_wait(&c->tx_cv, &c->tx_mu);
			continue;
		}
		/* settle_wait alone: until the peer's first octets (the
		 * receive path wakes us) or the bound */
		uint64_t now = xs_now_ms();
		if (atomic_load_explicit(&c->rx_any, memory_order_relaxed) ||
		    now >= c->settle_end_ms) {
			c->settle_wait = false;
			xs_log("accept: peer is not an xsock: first send %llu ms after the Reply, %s",
			       (unsigned long long)(now + xs_config()->settle_ms - c->settle_end_ms),
			       atomic_load(&c->rx_any) ? "the peer has spoken" :
							 "the peer silent, the wait's bound reached");
			continue;
		}
		struct timespec ts = xs_abstime_ns((c->settle_end_ms - now) * 1000000u);

		pthread_cond_timedwait(&c->tx_cv, &c->tx_mu, &ts);
	}
	if (c->dead || c->state != CONN_ESTABLISHED) {
		pthread_mutex_unlock(&c->tx_mu);
		return -EPIPE;
	}
	c->tx_busy = true;
	pthread_mutex_unlock(&c->tx_mu);
	return 0;
}

/* The oldest queued response is out (tx_mu held). */
static void rr_pop(struct xs_conn *c)
{
	c->rr_head = (c->rr_head + 1) % XS_RR_MAX;
	c->rr_count--;
}

/* An application thread that owns tx sends the queued Read Responses of
 * one FPDU each (a Write fence's zero-length one, verbs_qp_tx.c) before it
 * lets go, rather than waking the engine thread: that wake-up waits for a
 * CPU while both ends' threads spin (ib_write_lat on 2 cores: 4 ms instead
 * of 5 us).  Not on the engine thread, nor in a receive's upcall (the
 * engine answers those); the engine's own segmented response (rr_active)
 * and Atomic Responses stay the engine's.  tx owned, tx_mu not held; a
 * write error leaves the rest to the engine, which fails the stream. */
static void rr_pump_caller(struct xs_conn *c)
{
	if (xs_eng_on_thread || xs_rx_tls_conn == c)
		return;
	pthread_mutex_lock(&c->tx_mu);
	while (c->rr_count && !c->rr_active && !c->dead) {
		struct xs_rresp r = c->rr[c->rr_head];
		struct iovec v = { (void *)(uintptr_t)r.src, r.len };

		if (r.atomic || r.len > c->tx.mulpdu)
			break;
		pthread_mutex_unlock(&c->tx_mu);
		if (iw_tx_tagged(&c->tx, RDMAP_OP_READ_RESP, r.sink_stag, r.sink_to, &v,
				 r.len ? 1 : 0) < 0)
			return;
		pthread_mutex_lock(&c->tx_mu);
		rr_pop(c);
		if (!c->rr_count)
			c->rtr_answering = false; /* as the engine's pump: out */
	}
	pthread_mutex_unlock(&c->tx_mu);
}

static void tx_release(struct xs_conn *c)
{
	bool kick;

	rr_pump_caller(c);
	pthread_mutex_lock(&c->tx_mu);
	c->tx_busy = false;
	kick = c->rr_count > 0 || (c->disconnect_asked && !c->fin_sent); /* the FIN waits for tx */
	pthread_cond_broadcast(&c->tx_cv);
	pthread_mutex_unlock(&c->tx_mu);
	if (kick)
		xs_eng_command(c, CMD_TX);
}

void xs_tx_caller_pump(struct xs_conn *c)
{
	pthread_mutex_lock(&c->tx_mu);
	if (!c->rr_count) {
		pthread_mutex_unlock(&c->tx_mu);
		return;
	}
	if (c->tx_busy || c->rtr_wait || c->settle_wait || c->dead ||
	    c->state != CONN_ESTABLISHED) {
		pthread_mutex_unlock(&c->tx_mu);
		xs_eng_command(c, CMD_TX); /* whoever has tx may be past its look */
		return;
	}
	c->tx_busy = true;
	pthread_mutex_unlock(&c->tx_mu);
	tx_release(c); /* rr_pump_caller, then the engine for what is left */
}

/* A message of several FPDUs leaves in one sendmsg (a system call per
 * FPDU cost a 1 MiB Write a third of its time): corked inside tx. */
static bool msg_batch_begin(struct xs_conn *c, const struct iovec *iov, int cnt)
{
	size_t total = 0;

	for (int i = 0; i < cnt; i++)
		total += iov[i].iov_len;
	if (total <= c->tx.mulpdu)
		return false;
	cork_begin(c);
	return true;
}

static int msg_batch_end(struct xs_conn *c, int rc)
{
	int frc = cork_end(c);

	return rc < 0 ? rc : frc;
}

int xs_conn_send(struct xs_conn *c, enum rdmap_opcode op, uint32_t inv_stag,
		 const struct iovec *iov, int cnt)
{
	int rc;

	if (tls_cork == c)
		return iw_tx_send(&c->tx, op, inv_stag, iov, cnt);
	rc = tx_acquire(c);
	if (rc < 0)
		return rc;
	bool batch = msg_batch_begin(c, iov, cnt);
	rc = iw_tx_send(&c->tx, op, inv_stag, iov, cnt);
	if (batch)
		rc = msg_batch_end(c, rc);
	tx_release(c);
	return rc;
}

int xs_conn_tagged(struct xs_conn *c, enum rdmap_opcode op, uint32_t stag, uint64_t to,
		   const struct iovec *iov, int cnt)
{
	int rc;

	if (tls_cork == c)
		return iw_tx_tagged(&c->tx, op, stag, to, iov, cnt);
	rc = tx_acquire(c);
	if (rc < 0)
		return rc;
	bool batch = msg_batch_begin(c, iov, cnt);
	rc = iw_tx_tagged(&c->tx, op, stag, to, iov, cnt);
	if (batch)
		rc = msg_batch_end(c, rc);
	tx_release(c);
	return rc;
}

int xs_conn_cork(struct xs_conn *c)
{
	int rc = tx_acquire(c);

	if (rc < 0)
		return rc;
	cork_begin(c);
	return 0;
}

int xs_conn_cork_flush(struct xs_conn *c)
{
	return tls_cork == c ? cork_flush(c) : 0;
}

int xs_conn_uncork(struct xs_conn *c)
{
	int rc;

	if (tls_cork != c)
		return 0;
	rc = cork_end(c);
	tx_release(c);
	return rc;
}

int xs_conn_read_req(struct xs_conn *c, const struct rdmap_read_req *rr)
{
	int rc;

	if (tls_cork == c) /* a Write fence in a corked chain (verbs_qp_tx.c) */
		return iw_tx_read_req(&c->tx, rr);
	rc = tx_acquire(c);
	if (rc < 0)
		return rc;
	rc = iw_tx_read_req(&c->tx, rr);
	tx_release(c);
	return rc;
}

int xs_conn_terminate(struct xs_conn *c, const struct rdmap_term *t)
{
	int rc;

	/* From a QP upcall (engine thread, rx_mu held) never wait for the tx
	 * side: an application thread may own it while it waits for socket
	 * room that only this thread's receiving can make (both ends in one
	 * process).  Send it if the tx side is free, then fail the stream, as
	 * for a protocol error the engine finds itself. */
	if (xs_eng_on_thread) {
		xs_rx_terminate_fail(c, t);
		return 0;
	}
	if (xs_rx_tls_conn == c) {
		/* an upcall of an application thread's receive: the engine
		 * ends the stream; nothing more of this input is placed */
		if (!c->rx_defer) {
			c->rx_defer_term = *t;
			c->rx_defer = XS_RX_DEFER_QPTERM;
			xs_eng_command(c, CMD_RXDEFER);
		}
		return 0;
	}
	rc = tx_acquire(c);
	if (rc < 0)
		return rc;
	rc = iw_tx_terminate(&c->tx, t);
	xs_stat_term(c->stat, true, &t->cause);
	tx_release(c);
	return rc;
}

int xs_conn_atomic_req(struct xs_conn *c, const struct rdmap_atomic_req *r)
{
	int rc = tx_acquire(c);

	if (rc < 0)
		return rc;
	rc = iw_tx_atomic_req(&c->tx, r);
	tx_release(c);
	return rc;
}

static int rr_queue(struct xs_conn *c, const struct xs_rresp *in)
{
	pthread_mutex_lock(&c->tx_mu);
	if (c->rr_count >= XS_RR_MAX || c->rr_count >= (unsigned)c->agreed.ird + 1) {
		pthread_mutex_unlock(&c->tx_mu);
		return -ENOSPC;
	}
	c->rr[(c->rr_head + c->rr_count) % XS_RR_MAX] = *in;
	c->rr_count++;
	pthread_mutex_unlock(&c->tx_mu);
	/* on the engine thread the pump runs after this round of input, on
	 * an application thread's receive (its rx_mu held) after it */
	if (xs_rx_tls_conn == c)
		c->rx_rr_queued = true;
	else if (!xs_eng_on_thread)
		xs_eng_command(c, CMD_TX);
	return 0;
}

int xs_conn_read_resp(struct xs_conn *c, uint32_t sink_stag, uint64_t sink_to,
		      const uint8_t *src, uint32_t len)
{
	struct xs_rresp r = { .sink_stag = sink_stag, .sink_to = sink_to, .src = src, .len = len };

	return rr_queue(c, &r);
}

int xs_conn_atomic_resp(struct xs_conn *c, uint32_t req_id, uint64_t value)
{
	struct xs_rresp r = { .atomic = true, .req_id = req_id, .value = value };

	return rr_queue(c, &r);
}

/* Engine: room in tx_rem for one more FPDU of any shape. */
static bool rem_room(const struct xs_conn *c)
{
	return c->tx_remcnt + MPA_TX_MAX_IOV <= XS_REM_IOV &&
	       c->tx_rem_used + XS_FRAME_SCRATCH <= XS_REM_BUF;
}

/* Engine: the FPDU just framed in c->tx.frame joins tx_rem; its pieces in
 * the frame scratch (rewritten for the next FPDU) are copied. */
static void rem_append(struct xs_conn *c)
{
	const struct mpa_txframe *f = &c->tx.frame;

	xs_stat_tx(c->stat, f);
	for (int i = 0; i < f->iovcnt; i++) {
		struct iovec v = f->iov[i];
		const uint8_t *b = v.iov_base;

		/* the frame scratch, and an Atomic Response's body (c->ar_body
		 * holds the next one) */
		if (in_frame(c, b) || (b >= c->ar_body && b < c->ar_body + sizeof(c->ar_body))) {
			uint8_t *dst = c->tx_rem_buf + c->tx_rem_used;
			memcpy(dst, b, v.iov_len);
			c->tx_rem_used += v.iov_len;
			v.iov_base = dst;
		}
		c->tx_rem[c->tx_remcnt++] = v;
	}
}

/* Engine: write the rest of tx_rem without blocking.  1 when it is all
 * out, 0 if the socket is full (ownership kept), -errno. */
static int engine_flush_rem(struct xs_conn *c)
{
	while (c->tx_remcnt > 0) {
		struct msghdr mh = { .msg_iov = c->tx_rem, .msg_iovlen = (size_t)c->tx_remcnt };
		ssize_t n = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		struct iovec *p = c->tx_rem;
		int cnt = c->tx_remcnt;
		atomic_fetch_add_explicit(&c->tx_writes, 1, memory_order_relaxed);
		xs_iov_advance(&p, &cnt, (size_t)n);
		memmove(c->tx_rem, p, (size_t)cnt * sizeof(*p));
		c->tx_remcnt = cnt;
	}
	c->tx_rem_used = 0;
	return 1;
}

/* Engine: frame the queued Atomic Response into tx_rem (its body in
 * c->ar_body, which lives until the next one). */
static int engine_atomic_resp_fpdu(struct xs_conn *c, const struct xs_rresp *r)
{
	struct rdmap_atomic_resp ar = { .req_id = r->req_id, .value = r->value };
	uint8_t *hdr = c->tx.frame.hdr + MPA_HDR_LEN;
	struct ddp_hdr h;
	int rc;

	rdmap_atomic_resp_encode(&ar, c->ar_body);
	iw_tx_atomic_resp_hdr(&c->tx, &h);
	struct iovec ulp[2] = {
		{ hdr, ddp_hdr_encode(&h, hdr) },
		{ c->ar_body, sizeof(c->ar_body) },
	};
	rc = mpa_tx_frame(&c->tx.mpa, ulp, 2, &c->tx.frame);
	if (rc < 0)
		return rc;
	rem_append(c);
	pthread_mutex_lock(&c->tx_mu);
	rr_pop(c);
	pthread_mutex_unlock(&c->tx_mu);
	return 0;
}

/* Engine: frame a kick (XS_KICK_FIRST_MS) into tx_rem: a zero-length RDMA
 * Write naming STag 1, TO 0, as siw's own Write RTR does. */
static int engine_kick_fpdu(struct xs_conn *c)
{
	struct ddp_hdr h = { .tagged = true, .last = true, .dv = DDP_VERSION,
			     .rsvdulp = rdmap_ctrl_encode(RDMAP_OP_WRITE), .stag = 1 };
	uint8_t *hdr = c->tx.frame.hdr + MPA_HDR_LEN;
	struct iovec ulp = { hdr, ddp_hdr_encode(&h, hdr) };
	int rc;

	c->kick_pending = false;
	rc = mpa_tx_frame(&c->tx.mpa, &ulp, 1, &c->tx.frame);
	if (rc < 0)
		return rc;
	rem_append(c);
	return 0;
}

/* Engine: frame the next Read Response segment into tx_rem. */
static int engine_next_rr_fpdu(struct xs_conn *c)
{
	struct xs_rresp *r = &c->rr[c->rr_head];
	struct ddp_hdr h;
	size_t off, len;
	int rc;

	if (r->atomic)
		return engine_atomic_resp_fpdu(c, r);
	if (!c->rr_active) {
		struct ddp_hdr tmpl = { .tagged = true, .dv = DDP_VERSION,
					.rsvdulp = rdmap_ctrl_encode(RDMAP_OP_READ_RESP),
					.stag = r->sink_stag, .to = r->sink_to };
		rc = ddp_seg_init(&c->rr_seg, &tmpl, r->len, c->tx.mulpdu);
		if (rc < 0)
			return rc;
		c->rr_active = true;
	}
	if (!ddp_seg_next(&c->rr_seg, &h, &off, &len))
		return -EINVAL;
	uint8_t *hdr = c->tx.frame.hdr + MPA_HDR_LEN;
	struct iovec ulp[2] = {
		{ hdr, ddp_hdr_encode(&h, hdr) },
		{ (void *)(uintptr_t)(r->src + off), len },
	};
	rc = mpa_tx_frame(&c->tx.mpa, ulp, len ? 2 : 1, &c->tx.frame);
	if (rc < 0)
		return rc;
	rem_append(c);
	if (h.last) {
		c->rr_active = false;
		pthread_mutex_lock(&c->tx_mu);
		rr_pop(c);
		pthread_mutex_unlock(&c->tx_mu);
	}
	return 0;
}

/* Engine: serve queued Read Responses and a pending disconnect, never
 * blocking.  Takes tx ownership only when no application thread has it. */
void xs_tx_engine(struct xs_conn *c)
{
	int rc;

	pthread_mutex_lock(&c->tx_mu);
	if (c->dead || c->state != CONN_ESTABLISHED || (c->tx_busy && !c->tx_engine)) {
		pthread_mutex_unlock(&c->tx_mu);
		return; /* the owner kicks us when it releases */
	}
	if (!c->tx_busy && !c->rr_count && !c->disconnect_asked && !c->kick_pending) {
		if (c->rtr_answering) {
			c->rtr_answering = false;
			pthread_cond_broadcast(&c->tx_cv);
		}
		pthread_mutex_unlock(&c->tx_mu);
		return;
	}
	c->tx_busy = true;
	c->tx_engine = true;
	pthread_mutex_unlock(&c->tx_mu);

	for (;;) {
		rc = engine_flush_rem(c);
		if (rc == 0) {
			c->want_out = true;
			return; /* keep ownership until POLLOUT */
		}
		if (rc < 0)
			break;
		/* frame what fits, then one sendmsg for all of it */
		int framed = 0;
		while (rem_room(c)) {
			if (c->rr_count || c->rr_active)
				rc = engine_next_rr_fpdu(c);
			else if (c->kick_pending)
				rc = engine_kick_fpdu(c);
			else
				break;
			if (rc < 0)
				break;
			framed++;
		}
		if (rc < 0 || !framed)
			break;
	}
	c->want_out = false;
	pthread_mutex_lock(&c->tx_mu);
	c->tx_busy = false;
	c->tx_engine = false;
	if (!c->rr_count)
		c->rtr_answering = false; /* the Read RTR's answer is out */
	bool fin = c->disconnect_asked && !c->fin_sent;
	if (fin)
		c->fin_sent = true;
	pthread_cond_broadcast(&c->tx_cv);
	pthread_mutex_unlock(&c->tx_mu);
	if (rc < 0) {
		struct xs_err e;
		xs_err_set(&e, XS_LAYER_LLP, MPA_ETYPE, MPA_ECODE_TCP_CLOSED);
		xs_rx_fail(c, false, &e, rc);
		return;
	}
	if (fin)
		xs_close_fin(c);
}

/* ---- siw kicks (engine thread) ------------------------------------------------
 * Linux siw as responder sends its MPA Reply and only then moves the
 * socket to its QP: FPDU octets arriving in between stay unread until more
 * arrive (siw_accept, siw_cm_llp_data_ready; docs/interop.md), and the
 * initiator's first Send waits there for ever while the application
 * waits for its answer.  An initiator whose peer is not an xsock
 * therefore sends a zero-length RDMA Write (which siw, like xsock, places
 * nowhere and checks nothing of: siw_proc_write) this long after the
 * Reply and again at doubling intervals until XS_KICK_LAST_MS, while the
 * peer has sent nothing: one of them arrives after the socket moved and
 * makes siw read what waits.  Once the peer speaks its socket has moved:
 * whatever we send next makes it read; a last kick goes out only if we had
 * sent before its first octets and have sent nothing since, a tick later
 * (rsockets: both ends send at once, ours may be waiting there).  Other
 * kicks could only meet the peer's close (unread octets there make Linux
 * reset the connection and drop the peer's unsent tail).  Nothing waits
 * for them and an xsock peer gets none. */
#define XS_KICK_FIRST_MS 5
#define XS_KICK_LAST_MS 640

/* Engine: c (an initiator, its Reply just read) kicks its peer from now
 * on (XS_KICK_FIRST_MS); the list holds a reference. */
void xs_tx_kick_start(struct xs_conn *c)
{
	if (c->on_kick_list)
		return;
	xs_eng_ref(c);
	c->on_kick_list = true;
	c->kick_wait_ms = XS_KICK_FIRST_MS;
	c->kick_due_ms = xs_now_ms() + XS_KICK_FIRST_MS;
	c->kick_next = xs_eng.kick;
	xs_eng.kick = c;
	xs_close_late_arm();
}

static void kick_send(struct xs_conn *c, const char *why)
{
	c->kick_pending = true;
	xs_tx_engine(c); /* an owner sending now kicks by itself */
	c->kick_pending = false; /* never later: it could meet a close */
	xs_log("kick: zero-length Write %s", why);
}

void xs_tx_kick_scan(uint64_t now)
{
	struct xs_conn **pp = &xs_eng.kick;

	while (*pp) {
		struct xs_conn *c = *pp;
		enum conn_state st = c->state;
		bool more = false;

		if ((st != CONN_ACCEPTED && st != CONN_ESTABLISHED) || c->dead) {
			more = false; /* gone */
		} else if (st == CONN_ACCEPTED) {
			more = true; /* its QP is not attached yet */
		} else if (atomic_load(&c->rx_any)) {
			unsigned at_rx = atomic_load(&c->tx_at_rx);

			if (!c->kick_spoke) {
				c->kick_spoke = true;
				more = true; /* the application's turn: look next tick */
			} else if (at_rx > 0 && atomic_load(&c->tx_writes) == at_rx) {
				kick_send(c, "after the peer's first octets, nothing sent since");
			}
		} else if (now < c->kick_due_ms) {
			more = true;
		} else {
			kick_send(c, "while the peer is silent");
			if (c->kick_wait_ms < XS_KICK_LAST_MS) {
				c->kick_wait_ms *= 2;
				c->kick_due_ms = now + c->kick_wait_ms;
				more = true;
			}
		}
		if (more) {
			pp = &c->kick_next;
			continue;
		}
		*pp = c->kick_next;
		c->on_kick_list = false;
		xs_eng_unref(c); /* the list's */
	}
}
