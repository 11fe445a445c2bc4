/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* connect()'s fallback to plain TCP (xsock(7) PLAIN SERVERS): what both
 * kinds of connect share (the XSOCK_DEBUG line, the count for
 * xsock-stat), and the probe of a non-blocking connect to a destination
 * not known yet.  That connect returns EINPROGRESS at once (xsk_conn.c
 * starts the probe): the stack tries MPA on a connection of its own while
 * the application's TCP socket waits aside, untouched, and the fd number
 * holds the inner epoll fd as for any connect in progress.  No thread
 * of ours drives it: the application's own calls on the socket do (poll,
 * select, epoll_wait, the data calls, getsockopt, connect), each looking
 * once (xsk_plain_step), the waits no longer than the probe's deadline.
 * The first call that finds the try over decides: an xsock answered, and
 * the connection is the stack's as a connect without a fallback; or not,
 * and each fd number naming the socket becomes the kept kernel socket
 * again, with the options the program set meanwhile and its epoll
 * registrations, connecting in the kernel without blocking, so the
 * program's wait then sees the kernel's connect end. */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>

#include "libxsock/xsk_config.h"
#include "libxsock/xsk_intercept.h"
#include "libxsock/xsk_sock.h"

/* XSOCK_DEBUG's words for each enum xsock_plain_why. */
static const char *const plain_why_str[] = {
	[XSOCK_PLAIN_OCTETS] = "the peer answered octets that are no MPA Reply",
	[XSOCK_PLAIN_CLOSED] = "the peer refused, reset or closed the TCP connection "
			       "before any MPA Reply",
	[XSOCK_PLAIN_SILENT] = "no MPA Reply in XSOCK_PLAIN_PROBE_MS (or SO_SNDTIMEO)",
	[XSOCK_PLAIN_REMEMBERED] = "a plain TCP server lately",
	[XSOCK_PLAIN_OTHER] = "the stack cannot connect",
};

void xsk_plain_say(int fd, enum xsock_plain_why why)
{
	if (xsk_debug())
		fprintf(stderr, "libxsock: fd %d: %s: a plain TCP connection instead\n", fd,
			plain_why_str[why]);
}

void xsk_plain_count(enum xsock_plain_why why, const struct sockaddr *addr, socklen_t len)
{
	const struct xsk_stack *st = xsk_stack();

	if (st && st->plain)
		st->plain(why, addr, len);
}

bool xsk_plain_due(const struct xsk *s)
{
	return xsk_probe_fd(s) >= 0 &&
	       (xsk_state(s) != XSK_CONNECTING || xsk_now_ms() >= xsk_probe_deadline(s));
}

/* What the program set on the IWARP socket while it probed (recorded
 * options and the ones libxsock honours itself), for the kernel socket. */
struct plain_opts {
	struct xsk_opt opt[XSK_MAX_OPTS];
	int n;
	int64_t rcvtimeo, sndtimeo;
	bool linger_on;
	int linger_s, rcvlowat;
	bool nonblock;
};

static void opts_take(struct xsk *s, struct plain_opts *o)
{
	o->n = xsk_opts_get(s, o->opt);
	o->rcvtimeo = xsk_timeo(s, true);
	o->sndtimeo = xsk_timeo(s, false);
	xsk_linger(s, &o->linger_on, &o->linger_s);
	o->rcvlowat = xsk_rcvlowat(s);
	o->nonblock = xsk_nonblock(s);
}

static void set_timeo(int fd, int name, int64_t us)
{
	/* (< 0: "no wait", libxsock's own: the kernel has no such value) */
	struct timeval tv = { (time_t)(us / 1000000), (suseconds_t)(us % 1000000) };

	if (us > 0)
		xsk_real.setsockopt(fd, SOL_SOCKET, name, &tv, sizeof(tv));
}

/* The ones set before the connect are on the socket already (setsockopt
 * of a FRESH socket goes to it too): setting them again is harmless. */
static void opts_give(int fd, const struct plain_opts *o)
{
	for (int i = 0; i < o->n; i++)
		xsk_real.setsockopt(fd, o->opt[i].level, o->opt[i].name, &o->opt[i].val,
				    sizeof(o->opt[i].val));
	set_timeo(fd, SO_RCVTIMEO, o->rcvtimeo);
	set_timeo(fd, SO_SNDTIMEO, o->sndtimeo);
	if (o->linger_on) {
		struct linger lg = { 1, o->linger_s };
		xsk_real.setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	if (o->rcvlowat > 1)
		xsk_real.setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &o->rcvlowat, sizeof(int));
}

/* Each fd number naming s becomes kfd's file (connecting), its epoll
 * registrations with it, and s is no longer named (xsk_relay_take does
 * the same for a relay channel).  The caller's reference on s stays. */
static void fds_give(struct xsk *s, int kfd)
{
	for (int i = xsk_tab_next_of(s, 0); i >= 0; i = xsk_tab_next_of(s, i + 1)) {
		struct xsk_ep_moved *mv;
		int fdfl = xsk_real.fcntl(i, F_GETFD);
		/* out of the sets while i is still the inner epoll fd, in
		 * again as the kernel socket: an EPOLLET registration sees
		 * the connect's end as its edge */
		int nmv = xsk_ep_take_fd(s, i, &mv);
		if (xsk_real.dup3(kfd, i, fdfl >= 0 && (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
			xsk_ep_give_fd(-1, mv, 0);
			continue; /* (EMFILE cannot happen: i is open) */
		}
		xsk_ep_give_fd(i, mv, nmv);
		xsk_tab_detach(i);
	}
}

/* The probe found no xsock: kfd connects in the kernel, then takes the
 * fd numbers over.  false if that connect failed at once (no
 * EINPROGRESS: the socket stays ours, failed with its error). */
static bool go_plain_async(int fd, struct xsk *s, int kfd, const struct sockaddr_storage *peer,
			   enum xsock_plain_why why, const struct plain_opts *o)
{
	int64_t ttl_ms = (int64_t)xsk_setting_num(XS_SET_PLAIN_TTL_S) * 1000;
	socklen_t len = xsk_sa_len(peer);
	int fl = xsk_real.fcntl(kfd, F_GETFL);

	opts_give(kfd, o);
	if (fl < 0)
		fl = O_RDWR;
	xsk_real.fcntl(kfd, F_SETFL, fl | O_NONBLOCK);
	/* connecting before the epoll sets see it: an unconnected TCP
	 * socket polls as EPOLLOUT | EPOLLHUP */
	int rc = xsk_real.connect(kfd, (const struct sockaddr *)peer, len);
	int err = rc < 0 ? errno : 0;
	xsk_plain_say(fd, why);
	if (rc < 0 && err != EINPROGRESS) {
		xsk_lock(s);
		xsk_set_failed(s, err);
		xsk_set_probe_switching(s, false);
		xsk_progress(s);
		xsk_unlock(s);
		xsk_fd_close(kfd);
		return false;
	}
	/* refused already (loopback answers at once), as the blocking
	 * connect's ECONNREFUSED: not a plain server, nothing learnt */
	struct pollfd p = { .fd = kfd, .events = POLLOUT };
	bool failed = xsk_real.poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP));
	fds_give(s, kfd);
	xsk_real.fcntl(fd, F_SETFL, o->nonblock ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK));
	xsk_fd_close(kfd);
	if (!failed) {
		xsk_plain_count(why, (const struct sockaddr *)peer, len);
		xsk_peer_learn((const struct sockaddr *)peer, XSK_PEER_PLAIN, ttl_ms);
	}
	return true;
}

bool xsk_plain_step(int fd, struct xsk *s)
{
	struct sockaddr_storage peer;
	struct plain_opts o;

	xsk_lock(s);
	int kfd = xsk_probe_fd(s);
	if (kfd < 0) {
		/* decided; plain by another thread's call (this one's wait,
		 * if any, ended on its timeout: its socket is gone) */
		bool plain = xsk_probe_switching(s);
		xsk_unlock(s);
		return plain;
	}
	xsk_progress(s);
	enum xsk_state st = xsk_state(s);
	if (st == XSK_CONNECTING && xsk_now_ms() < xsk_probe_deadline(s)) {
		xsk_unlock(s);
		return false;
	}
	peer = *xsk_peer(s);
	xsk_set_probe(s, -1, 0);
	if (st == XSK_CONNECTED || (st == XSK_CLOSED && xsk_mpa_rejected(s))) {
		/* an xsock: its connection, or its refusal (ECONNREFUSED) */
		xsk_progress(s); /* the events held back while it probed */
		xsk_unlock(s);
		xsk_fd_close(kfd);
		if (st == XSK_CONNECTED)
			xsk_peer_learn((const struct sockaddr *)&peer, XSK_PEER_IWARP,
				       (int64_t)xsk_setting_num(XS_SET_PLAIN_TTL_S) * 1000);
		return false;
	}
	/* octets that are no MPA Reply, a close, silence, or TCP's own
	 * refusal (which the kernel's connect then reports) */
	enum xsock_plain_why why = st == XSK_CONNECTING ? XSOCK_PLAIN_SILENT : xsk_plain_why(s);
	xsk_set_probe_switching(s, true); /* no events, no other decision */
	opts_take(s, &o);
	xsk_unlock(s);
	return go_plain_async(fd, s, kfd, &peer, why, &o);
}

bool xsk_plain_settle(int fd, struct xsk *s)
{
	struct xsk_sigsnap snap;

	xsk_sig_snap(&snap);
	xsk_lock(s);
	xsk_progress(s);
	/* a handler that runs meanwhile does not end it (as connect's
	 * blocking probe): the call itself then waits as it would */
	while (xsk_probe_fd(s) >= 0 && xsk_state(s) == XSK_CONNECTING) {
		int64_t deadline = xsk_probe_deadline(s);
		xsk_unlock(s);
		int w = xsk_wait_step(s, deadline, true, false, &snap);
		xsk_lock(s);
		if (w == -EAGAIN)
			break;
		xsk_progress(s);
	}
	xsk_unlock(s);
	return xsk_plain_step(fd, s);
}
