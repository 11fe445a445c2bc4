/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* MPA handshakes on the engine thread: the initiator's connect, Request
 * and Reply (xs_hs_progress); the responder's Request, handed to the CM,
 * and its Reply or reject (xs_conn_accept, xs_conn_reject, on the CM
 * caller's thread); a mixed listener's classification of each client as
 * iWARP or plain TCP; and the deadline (XSOCK_MPA_TIMEOUT_MS) of every
 * handshake still waiting. */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/xs_clock.h"
#include "verbs/xs_engine_priv.h"
#include "verbs/xs_internal.h"
#include "util/xs_errno.h"

/* A mixed listener looks again at a client that sent only part of the MPA
 * Request key this often (its octets stay in the socket, so a poll for
 * input would fire at once). */
#define XS_CLS_TICK_MS 10

static bool cls_step(struct xs_conn *c);

/* ---- handshakes ------------------------------------------------------------ */

/* The octets so far can still begin the frame's key: a peer that is not
 * MPA (a plain server's short greeting or error line, "ERROR\r\n") is
 * told at its first octet, not when 20 octets have come or never do. */
static bool key_prefix_ok(const struct xs_conn *c, enum mpa_frame_type type)
{
	const char *key = type == MPA_REPLY ? MPA_KEY_REP : MPA_KEY_REQ;
	size_t n = c->hs_have < MPA_KEY_LEN ? c->hs_have : MPA_KEY_LEN;

	return memcmp(c->hs_buf, key, n) == 0;
}

static int hs_read(struct xs_conn *c, enum mpa_frame_type type, struct mpa_frame *f)
{
	struct xs_err err;

	for (;;) {
		if (c->hs_need > sizeof(c->hs_buf))
			return -EPROTO;
		while (c->hs_have < c->hs_need) {
			ssize_t n = recv(c->fd, c->hs_buf + c->hs_have, c->hs_need - c->hs_have,
					 MSG_DONTWAIT);
			if (n == 0)
				return -ECONNRESET;
			if (n < 0)
				return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
			c->hs_have += (size_t)n;
			if (!key_prefix_ok(c, type))
				return -EPROTO;
		}
		int rc = mpa_frame_decode(c->hs_buf, c->hs_have, type, f, &c->hs_need, &err);
		if (rc != -EAGAIN)
			return rc;
	}
}

static int send_small(int fd, const uint8_t *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd p = { .fd = fd, .events = POLLOUT };
				poll(&p, 1, 1000);
				continue;
			}
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

void xs_hs_stream_setup(struct xs_conn *c)
{
	int mss = 0;
	socklen_t sl = sizeof(mss);

	if (getsockopt(c->fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &sl) < 0 || mss <= 0)
		mss = 1460;
	/* FPDUs the size of a TCP segment (RFC 5044 section 4.4): an RNIC
	 * places each segment alone, and a capture dissects (tshark keeps no
	 * MPA state across segments).  64 KiB FPDUs to another xsock were
	 * tried: tshark then finds most CRCs bad; the gain was within noise. */
	size_t mulpdu = mpa_mulpdu((size_t)mss, c->agreed.markers_tx);
	xs_tx_stream_init(c, mulpdu);
	xs_rx_stream_init(c);
}

/* Initiator in peer-to-peer mode: the RTR is the first FPDU (RFC 6581 4),
 * sent before anyone else may transmit on the connection: a zero-length
 * Write or Read Request naming STag 1 and TO 0 as siw does, or a
 * zero-length Send. */
static int send_rtr(struct xs_conn *c)
{
	struct rdmap_read_req rr = { .sink_stag = 1, .src_stag = 1 };

	if (!c->agreed.p2p)
		return 0;
	switch (c->agreed.rtr) {
	case MPA_RTR_WRITE:
		return iw_tx_tagged(&c->tx, RDMAP_OP_WRITE, 1, 0, NULL, 0);
	case MPA_RTR_READ:
		c->rtr_rresp = true;
		return iw_tx_read_req(&c->tx, &rr);
	case MPA_RTR_SEND:
		return iw_tx_send(&c->tx, RDMAP_OP_SEND, 0, NULL, 0);
	default:
		return 0;
	}
}

void xs_hs_connect_done(struct xs_conn *c, int status, const struct mpa_frame *reply)
{
	xs_connect_fn cb = c->connect_cb;

	c->connect_cb = NULL;
	if (c->refused_counted) {
		c->refused_counted = false;
		atomic_fetch_sub(&xs_eng.refused_conns, 1);
	}
	if (status == 0) {
		c->state = CONN_ACCEPTED;
		xs_hs_stream_setup(c);
		status = send_rtr(c);
		if (status < 0)
			xs_log("P2P: RTR not sent: %s", xs_strerror(-status));
		else if (!xs_eng_peer_is_xsock(c))
			xs_tx_kick_start(c);
	}
	if (status != 0) {
		c->state = CONN_CLOSED;
		xs_eng_shut(c, SHUT_RDWR);
	}
	if (cb)
		cb(c->connect_ctx, status == 0 ? c : NULL, status, reply);
	if (status != 0) {
		/* nobody owns a failed connection: drop the owner's and the
		 * engine's references (a pending poll still holds one) */
		c->owner_gone = true;
		c->engine_ref_dropped = true;
		xs_eng_unref(c);
		xs_eng_unref(c);
	}
}

/* Responder: give up a connection nobody owns yet (bad or missing Request). */
static void responder_drop(struct xs_conn *c)
{
	c->state = CONN_CLOSED;
	c->owner_gone = true;
	c->engine_ref_dropped = true;
	xs_eng_shut(c, SHUT_RDWR);
	xs_eng_unref(c); /* the engine's; a pending poll's keeps it until conn_event ends */
}

void xs_hs_progress(struct xs_conn *c)
{
	struct mpa_frame f;
	struct xs_err err;
	int rc;

	switch (c->state) {
	case CONN_CONNECTING: {
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (c->refused_now) { /* connect() itself said so */
			c->refused_now = false;
			soerr = ECONNREFUSED;
		}
		if (soerr == ECONNREFUSED && xs_connect_redial_track(c))
			return;
		if (soerr) {
			xs_hs_connect_done(c, -soerr, NULL);
			return;
		}
		if (xs_connect_blocked(c)) {
			xs_connect_hold(c);
			return;
		}
		uint8_t buf[XS_HS_MAX];
		ssize_t n = mpa_frame_encode(&c->req, buf, sizeof(buf));
		rc = n < 0 ? (int)n : send_small(c->fd, buf, (size_t)n);
		if (rc < 0) {
			xs_hs_connect_done(c, rc, NULL);
			return;
		}
		c->state = CONN_WAIT_REPLY;
		c->hs_have = 0;
		c->hs_need = MPA_RR_HDR_LEN;
		break;
	}
	case CONN_WAIT_REPLY:
		rc = hs_read(c, MPA_REPLY, &f);
		if (rc == -EAGAIN)
			break;
		if ((rc == -ECONNRESET || rc == -EPIPE) && !c->hs_have) {
			/* closed before any Reply octet: a proxy or NAT (QEMU's
			 * user network) accepted for a server that does not
			 * listen (yet), which is a refused connect */
			c->state = CONN_CONNECTING;
			if (xs_connect_redial_track(c))
				return;
			rc = -ECONNREFUSED;
		}
		if (rc < 0) {
			xs_hs_connect_done(c, rc, NULL);
			return;
		}
		rc = mpa_initiator_complete(&c->prefs, &c->req, &f, &c->agreed, &err);
		if (rc == -ECONNREFUSED)
			xs_log("MPA Reply: the peer rejected the connection");
		else if (rc < 0)
			xs_log("MPA Reply refused: %d (layer %u etype %u code 0x%02x)", rc, err.layer,
			       err.etype, err.ecode);
		xs_hs_connect_done(c, rc, &f);
		return;
	case CONN_WAIT_REQUEST:
		if (c->cls_pending && !cls_step(c)) {
			if (c->cls_pending)
				xs_hs_cls_arm();
			return;
		}
		rc = hs_read(c, MPA_REQUEST, &c->req);
		if (rc == -EAGAIN)
			break;
		if (rc < 0) {
			xs_log("bad MPA Request (%d): closing", rc);
			responder_drop(c);
			return;
		}
		c->state = CONN_WAIT_ACCEPT;
		xs_eng_ref(c); /* the CM's reference */
		/* under the listener's lock: xs_listener_close waits for us */
		pthread_mutex_lock(&c->listener->mu);
		if (c->listener->closing) {
			pthread_mutex_unlock(&c->listener->mu);
			xs_eng_unref(c); /* the CM's */
			responder_drop(c);
			return;
		}
		c->listener->cb(c->listener->ctx, c, &c->req);
		pthread_mutex_unlock(&c->listener->mu);
		return;
	default:
		break;
	}
}

int xs_conn_accept(struct xs_conn *c, const struct mpa_prefs *prefs)
{
	struct mpa_frame rep;
	struct xs_err err;
	uint8_t buf[XS_HS_MAX];
	int rc;

	if (c->state != CONN_WAIT_ACCEPT)
		return -EINVAL;
	if (atomic_load(&c->fork_mode) != XS_FORK_MINE)
		return -EBUSY; /* the parent's request (xsock(7) FORK) */
	rc = mpa_respond(prefs, &c->req, &rep, &c->agreed, &err);
	ssize_t n = mpa_frame_encode(&rep, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	int wrc = send_small(c->fd, buf, (size_t)n);
	if (rc < 0 || wrc < 0) {
		c->state = CONN_CLOSED;
		xs_eng_shut(c, SHUT_RDWR);
		return rc < 0 ? rc : wrc;
	}
	c->state = CONN_ACCEPTED;
	xs_hs_stream_setup(c);
	c->rtr_wait = c->agreed.p2p && c->agreed.rtr != MPA_RTR_NONE;
	/* XSOCK_MPA_SETTLE_MS (xs_config.c): our first FPDU must not reach
	 * a siw initiator together with the Reply.  Its first octets prove it
	 * has read the Reply; until then, or the bound, senders wait
	 * (tx_acquire), rdma_accept does not.  With an RTR the initiator has
	 * read the Reply anyway; an xsock reads both. */
	if (!c->rtr_wait && !xs_eng_peer_is_xsock(c) && xs_config()->settle_ms) {
		pthread_mutex_lock(&c->tx_mu);
		c->settle_wait = true;
		c->settle_end_ms = xs_now_ms() + xs_config()->settle_ms;
		pthread_mutex_unlock(&c->tx_mu);
	}
	return 0;
}

int xs_conn_reject(struct xs_conn *c, const void *pdata, uint8_t len)
{
	struct mpa_prefs prefs;
	struct mpa_frame rep;
	uint8_t buf[XS_HS_MAX];

	if (c->state != CONN_WAIT_ACCEPT)
		return -EINVAL;
	if (atomic_load(&c->fork_mode) != XS_FORK_MINE)
		return -EBUSY; /* the parent's request (xsock(7) FORK) */
	mpa_prefs_default(&prefs);
	prefs.rev = xs_config()->mpa_rev;
	prefs.pdata = pdata;
	prefs.pdata_len = len;
	mpa_reject_build(&prefs, &c->req, &rep);
	ssize_t n = mpa_frame_encode(&rep, buf, sizeof(buf));
	int rc = n < 0 ? (int)n : send_small(c->fd, buf, (size_t)n);
	c->state = CONN_CLOSED;
	xs_eng_shut(c, SHUT_WR);
	return rc;
}

/* ---- the mixed listener: iWARP or plain TCP (engine thread) -----------------------
 * A connection accepted by a mixed listener is looked at with MSG_PEEK
 * before anything is read: the 16-octet MPA Request key makes it iWARP
 * (the Request is then read as on any listener); other octets, or the
 * peer's FIN, make it plain TCP at once; a strict prefix of the key, or
 * nothing at all, waits until XSOCK_CLASSIFY_MS after the accept and is
 * then plain too (a protocol where the server speaks first).  A plain
 * connection is handed over untouched: every octet the client sent is
 * still in the kernel socket for the application to read. */

enum cls_result { CLS_IWARP, CLS_WAIT, CLS_PLAIN, CLS_DROP };

static enum cls_result cls_peek(struct xs_conn *c, bool final)
{
	uint8_t b[MPA_KEY_LEN];
	ssize_t n = recv(c->fd, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);

	c->cls_partial = false;
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
		xs_log("mixed listener: client gone before it was classified (%s)",
		       xs_strerror(errno));
		return CLS_DROP;
	}
	if (n == 0)
		return CLS_PLAIN; /* FIN without a word: the application reads the EOF */
	if (n < 0)
		return final ? CLS_PLAIN : CLS_WAIT;
	if (memcmp(b, MPA_KEY_REQ, (size_t)n) != 0)
		return CLS_PLAIN;
	if (n == MPA_KEY_LEN)
		return CLS_IWARP;
	if (final)
		return CLS_PLAIN; /* a prefix of the key and no more: not MPA */
	c->cls_partial = true;
	return CLS_WAIT;
}

/* Give a plain connection to the listener's owner; the xs_conn ends here
 * (no shutdown: the socket lives on in the application). */
static void conn_plain(struct xs_conn *c)
{
	struct xs_listener *l = c->listener;
	int fd = c->fd;

	if (c->poll_armed)
		xs_eng_poll_cancel(c, TAG_CONN); /* io_uring must drop its hold on the file */
	c->fd = -1;
	xs_fd_drop(fd); /* the application's from now on */
	c->state = CONN_CLOSED;
	c->owner_gone = true;
	c->engine_ref_dropped = true;
	pthread_mutex_lock(&l->mu);
	if (l->closing || !l->plain)
		close(fd);
	else
		l->plain(l->ctx, fd);
	pthread_mutex_unlock(&l->mu);
	xs_eng_unref(c); /* the engine's; the caller's (poll or hs list) keeps c for now */
}

/* true if c is iWARP (read its Request now); otherwise c waits, or was
 * handed over or dropped. */
static bool cls_step(struct xs_conn *c)
{
	enum cls_result r = cls_peek(c, xs_now_ms() >= c->cls_deadline_ms);

	switch (r) {
	case CLS_IWARP: {
		int one = 1;
		c->cls_pending = false;
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		return true;
	}
	case CLS_WAIT:
		return false;
	case CLS_PLAIN:
		c->cls_pending = false;
		conn_plain(c);
		return false;
	case CLS_DROP:
		c->cls_pending = false;
		responder_drop(c);
		return false;
	}
	return false;
}

/* Arm the classification timer for the nearest deadline (or the next look
 * at a partial key) while any connection waits to be classified. */
void xs_hs_cls_arm(void)
{
	uint64_t now = xs_now_ms(), next = UINT64_MAX;

	if (xs_eng.ctimer_armed)
		return;
	for (struct xs_conn *c = xs_eng.hs_list; c; c = c->hs_next) {
		if (!c->cls_pending || c->state != CONN_WAIT_REQUEST || c->owner_gone)
			continue;
		uint64_t t = c->cls_deadline_ms;
		if (c->cls_partial && now + XS_CLS_TICK_MS < t)
			t = now + XS_CLS_TICK_MS;
		if (t < next)
			next = t;
	}
	if (next == UINT64_MAX)
		return;
	uint64_t ms = next > now ? next - now : 0;
	if (ms < 1)
		ms = 1;
	xs_eng_timeout_arm(&xs_eng.ctimer_armed, &xs_eng.ctimer_ts, ms * 1000000u, TAG_CTIMER);
}

/* The classification timer fired: look again at partial keys, and call
 * every connection past its deadline plain. */
void xs_hs_cls_scan(void)
{
	uint64_t now = xs_now_ms();

	xs_eng.ctimer_armed = false;
	/* the hs list holds a reference on each entry and only xs_hs_scan
	 * unlinks, so walking it while connections change state is safe */
	for (struct xs_conn *c = xs_eng.hs_list; c; c = c->hs_next) {
		if (!c->cls_pending || c->state != CONN_WAIT_REQUEST || c->owner_gone)
			continue;
		if (!c->cls_partial && now < c->cls_deadline_ms)
			continue; /* its poll reports the first octets */
		xs_hs_progress(c);
		if (c->state != CONN_CLOSED)
			xs_eng_arm(c);
	}
	xs_hs_cls_arm();
}

/* ---- handshake deadlines (engine thread) ------------------------------------------
 * A peer that never answers must not leave a connect or an accepted TCP
 * connection pending forever: each connection in CONNECTING, WAIT_REPLY or
 * WAIT_REQUEST is on a list scanned by a 250 ms io_uring timeout that runs
 * only while the list is not empty.  The list holds a reference; entries that
 * moved on are dropped at the next scan. */

static bool hs_pending(const struct xs_conn *c)
{
	return c->state == CONN_CONNECTING || c->state == CONN_WAIT_REPLY ||
	       c->state == CONN_WAIT_REQUEST;
}

static void timer_arm(void)
{
	xs_eng_timeout_arm(&xs_eng.timer_armed, &xs_eng.timer_ts, 250u * 1000 * 1000, TAG_TIMER);
}

void xs_hs_track(struct xs_conn *c)
{
	if (c->on_hs_list || !hs_pending(c))
		return;
	xs_eng_ref(c);
	c->on_hs_list = true;
	c->hs_deadline_ms = xs_now_ms() + xs_config()->mpa_timeout_ms;
	c->hs_next = xs_eng.hs_list;
	xs_eng.hs_list = c;
	timer_arm();
}

void xs_hs_scan(void)
{
	uint64_t now = xs_now_ms();
	struct xs_conn **pp = &xs_eng.hs_list;

	while (*pp) {
		struct xs_conn *c = *pp;

		if (hs_pending(c) && !c->owner_gone && now < c->hs_deadline_ms) {
			pp = &c->hs_next;
			continue;
		}
		*pp = c->hs_next;
		c->on_hs_list = false;
		if (hs_pending(c) && !c->owner_gone) {
			xs_log("MPA %s: no answer within %u ms", c->initiator ? "connect" : "Request",
			       xs_config()->mpa_timeout_ms);
			if (c->initiator) {
				/* refused until now (xs_connect_redial_track): say so */
				xs_hs_connect_done(c, c->redial_wait_ms ? -ECONNREFUSED : -ETIMEDOUT,
						   NULL);
			} else if (c->cls_pending) {
				c->cls_pending = false; /* XSOCK_CLASSIFY_MS beyond the MPA timeout */
				conn_plain(c);
			} else {
				responder_drop(c);
			}
		}
		xs_eng_unref(c); /* the list's */
	}
	if (xs_eng.hs_list)
		timer_arm();
}
