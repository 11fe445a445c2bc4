/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The initiator's TCP connect (xs_connect, on the caller's thread; the
 * engine thread then runs the MPA exchange, xs_handshake.c), and on the
 * engine thread the redial of a connect refused because nobody listens
 * yet, with the MPA Requests of connects to one address kept in the order
 * of their xs_connect calls. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/xs_clock.h"
#include "util/xs_sockaddr.h"
#include "verbs/xs_engine_priv.h"
#include "verbs/xs_internal.h"
#include "verbs/xs_priv_abi.h"
#include "util/xs_errno.h"

/* A connect refused (no listener yet) is dialled again for redial_ms
 * (XS_REDIAL_MS for rdma_connect), from 5 ms apart doubling. */
#define XS_REDIAL_FIRST_MS 5

int xs_connect(const struct sockaddr *dst, socklen_t dlen, const struct sockaddr *src,
	       socklen_t slen, const struct mpa_prefs *prefs, unsigned redial_ms, xs_connect_fn cb,
	       void *ctx)
{
	int rc = xs_eng_get();

	if (rc < 0)
		return rc;
	if (prefs->pdata_len > MPA_PD_MAX - MPA_IRDORD_LEN)
		return -EINVAL;
	int fd = xsock_fd_high(socket(dst->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	if (fd < 0)
		return -errno;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* a source of port 0 names the address only: the port is chosen by
	 * connect(), which may share one with a TIME_WAIT connection of
	 * another peer; a bind(port 0) searches the ephemeral range for a port
	 * nobody holds, slower with every TIME_WAIT and refused once they fill
	 * it (ab without keep-alive slowed to 1/10 after 10,000 requests) */
	if (src && slen && xs_sa_port(src) == 0)
		setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	if (src && slen && bind(fd, src, slen) < 0 && errno != EADDRNOTAVAIL) {
		/* a wildcard source that cannot be bound is not an error */
		xs_log("bind source: %s", xs_strerror(errno));
	}
	struct xs_conn *c = xs_eng_conn_new(fd);
	if (!c) {
		xs_fd_close(fd);
		return -ENOMEM;
	}
	c->initiator = true;
	static _Atomic uint64_t dial_seq;
	c->dial_seq = atomic_fetch_add(&dial_seq, 1) + 1;
	if (dlen <= sizeof(c->dst)) {
		memcpy(&c->dst, dst, dlen);
		c->dst_len = dlen;
	}
	if (src && slen && slen <= sizeof(c->src)) {
		memcpy(&c->src, src, slen);
		c->src_len = slen;
	}
	c->redial_end_ms = xs_now_ms() + redial_ms;
	c->prefs = *prefs;
	if (prefs->pdata_len) {
		memcpy(c->prefs_pdata, prefs->pdata, prefs->pdata_len);
		c->prefs.pdata = c->prefs_pdata;
	}
	mpa_request_build(&c->prefs, &c->req);
	c->connect_cb = cb;
	c->connect_ctx = ctx;
	c->refs++; /* the owner's (not yet shared with the engine thread) */
	c->state = CONN_CONNECTING;
	if (connect(fd, dst, dlen) < 0 && errno != EINPROGRESS) {
		if (errno == ECONNREFUSED) {
			/* the engine dials again (xs_connect_redial_track) */
			c->refused_now = true;
			xs_connect_refused(c);
		} else {
			rc = -errno;
			xs_eng_conn_free(c);
			return rc;
		}
	}
	xs_eng_command(c, CMD_ARM);
	return 0;
}

/* ---- redial (engine thread) ---------------------------------------------------- */

/* Engine: c waits on the redial list until due_ms (the list's reference). */
static void redial_list_add(struct xs_conn *c, uint64_t due_ms)
{
	c->redial_due_ms = due_ms;
	xs_eng_ref(c);
	c->on_redial_list = true;
	c->redial_next = xs_eng.redial;
	xs_eng.redial = c;
	xs_close_late_arm();
}

/* c's connect was refused and is to be dialled again: counted until
 * xs_hs_connect_done (any thread that owns c). */
void xs_connect_refused(struct xs_conn *c)
{
	if (!c->refused_counted) {
		c->refused_counted = true;
		atomic_fetch_add(&xs_eng.refused_conns, 1);
	}
}

/* Engine: must c's MPA Request wait?  While an earlier connect to the same
 * address was refused and is to be dialled again: the listener reports
 * CONNECT_REQUESTs in the order Requests come, and perftest -R -q N pairs
 * its QPs by that order (the k-th rdma_connect with the k-th request). */
bool xs_connect_blocked(const struct xs_conn *c)
{
	bool blocked = false;

	if (!c->dst_len || !atomic_load(&xs_eng.refused_conns))
		return false;
	pthread_mutex_lock(&xs_eng.reg_mu);
	for (const struct xs_conn *r = xs_eng.conns; r && !blocked; r = r->all_next)
		blocked = r != c && r->initiator && r->state == CONN_CONNECTING &&
			  (r->redial_wait_ms || r->refused_now) && r->dial_seq < c->dial_seq &&
			  r->dst_len == c->dst_len && memcmp(&r->dst, &c->dst, c->dst_len) == 0;
	pthread_mutex_unlock(&xs_eng.reg_mu);
	return blocked;
}

/* Engine: a connected c whose Request waits (xs_connect_blocked) looks again in
 * XS_REDIAL_FIRST_MS, from the redial list (xs_connect_redial_scan arms it). */
void xs_connect_hold(struct xs_conn *c)
{
	c->req_held = true;
	redial_list_add(c, xs_now_ms() + XS_REDIAL_FIRST_MS);
}

/* Engine: a refused connect waits its turn on the redial list, while time
 * is left (false: refuse it now). */
bool xs_connect_redial_track(struct xs_conn *c)
{
	uint64_t now = xs_now_ms();

	if (c->on_redial_list || !c->dst_len)
		return false;
	c->redial_wait_ms = c->redial_wait_ms ? 2 * c->redial_wait_ms : XS_REDIAL_FIRST_MS;
	if (now + c->redial_wait_ms > c->redial_end_ms)
		return false;
	if (c->redial_wait_ms == XS_REDIAL_FIRST_MS)
		xs_log("connect refused: dialling again for up to %u ms",
		       (unsigned)(c->redial_end_ms - now));
	xs_connect_refused(c);
	redial_list_add(c, now + c->redial_wait_ms);
	return true;
}

/* Engine: the same connect again on a fresh socket in the same descriptor
 * (its number stays what the owner and the fork code know). */
static void redial(struct xs_conn *c)
{
	int fd = socket(c->dst.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1, rc = 0;

	if (fd < 0 || dup3(fd, c->fd, O_CLOEXEC) < 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (rc == 0) {
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (c->src_len)
			(void)bind(c->fd, (struct sockaddr *)&c->src, c->src_len);
		if (connect(c->fd, (struct sockaddr *)&c->dst, c->dst_len) < 0 &&
		    errno != EINPROGRESS)
			rc = -errno;
	}
	if (rc == -ECONNREFUSED && xs_connect_redial_track(c))
		return;
	if (rc < 0) {
		xs_hs_connect_done(c, rc, NULL);
		return;
	}
	xs_eng_arm(c);
}

void xs_connect_redial_scan(uint64_t now)
{
	struct xs_conn **pp = &xs_eng.redial;
	struct xs_conn *due = NULL;

	while (*pp) { /* unlinked first: a redial may list it again */
		struct xs_conn *c = *pp;

		if (now < c->redial_due_ms && c->state == CONN_CONNECTING) {
			pp = &c->redial_next;
			continue;
		}
		*pp = c->redial_next;
		c->on_redial_list = false;
		/* in the order of the connects (xs_connect_blocked) */
		struct xs_conn **dp = &due;
		while (*dp && (*dp)->dial_seq < c->dial_seq)
			dp = &(*dp)->redial_next;
		c->redial_next = *dp;
		*dp = c;
	}
	while (due) {
		struct xs_conn *c = due;

		due = c->redial_next;
		if (c->state == CONN_CONNECTING && c->req_held) {
			c->req_held = false;
			xs_eng_arm(c); /* connected: POLLOUT at once, xs_hs_progress */
		} else if (c->state == CONN_CONNECTING) { /* not closed by its owner meanwhile */
			redial(c);
		}
		xs_eng_unref(c); /* the list's */
	}
}
