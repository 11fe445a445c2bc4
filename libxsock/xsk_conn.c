/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* listen(), connect() and accept(): the selection rules' last word on a
 * candidate socket, then the fd number taken over by the socket's inner
 * epoll fd (take_over), and an accepted connection's new fd number; a
 * mixed listener's plain TCP clients come back as kernel sockets. */
#include "config.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include "libxsock/xsk_config.h"
#include "libxsock/xsk_intercept.h"
#include "libxsock/xsk_sock.h"

/* A socket the rules made a candidate: true (and the fd is plain TCP
 * again) if the rules say TCP for this role and address. */
static bool rules_say_tcp(int fd, struct xsk *s, int role, const struct sockaddr *sa)
{
	struct sockaddr_storage any = { .ss_family = (sa_family_t)xsk_family(s) };

	if (xsk_state(s) != XSK_FRESH || !xsk_by_rules(s))
		return false;
	if (!sa)
		sa = (const struct sockaddr *)(xsk_local(s) ? xsk_local(s) : &any);
	if (xsk_config_decide(role, sa))
		return false;
	xsk_tab_detach(fd);
	return true;
}

/* Put the inner epoll fd under every fd number naming s in place of the
 * original TCP socket (xsk_make_fds done), and re-register s in the epoll
 * sets that knew it. */
static int place_epfd(int fd, struct xsk *s)
{
	int flags = xsk_cloexec(s) ? O_CLOEXEC : 0;

	xsk_ep_unwatch(s);
	if (xsk_real.dup3(xsk_epfd(s), fd, flags) < 0)
		return -errno;
	if (xsk_tab_nfds(s) > 1) {
		for (int i = xsk_tab_next_of(s, 0); i >= 0; i = xsk_tab_next_of(s, i + 1))
			if (i != fd)
				xsk_real.dup3(xsk_epfd(s), i, flags);
	}
	xsk_set_app_epfd(s, fd); /* (the one made is closed) */
	if (xsk_nonblock(s)) {
		int fl = xsk_real.fcntl(fd, F_GETFL);
		if (fl >= 0)
			xsk_real.fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	}
	xsk_ep_readd(s);
	return 0;
}

static int take_over(int fd, struct xsk *s)
{
	int rc = xsk_make_fds(s);

	return rc ? rc : place_epfd(fd, s);
}

static int listen_held(int fd, int backlog)
{
	struct xsk *s = xsk_tab_has(fd) ? xsk_fd_get(fd) : NULL;
	int rc;

	if (s && rules_say_tcp(fd, s, XSK_ROLE_LISTEN, NULL)) {
		xsk_fd_put(s);
		s = NULL;
	}
	if (!s)
		return REAL(listen)(fd, backlog);
	xsk_lock(s);
	if (xsk_state(s) == XSK_LISTENING) {
		xsk_set_backlog(s, backlog);
		rc = 0;
		goto out;
	}
	if (xsk_state(s) != XSK_FRESH) {
		rc = -EINVAL;
		goto out;
	}
	if (!xsk_local(s)) {
		/* like TCP: an unbound listener gets an ephemeral port */
		struct sockaddr_storage any = { .ss_family = (sa_family_t)xsk_family(s) };
		rc = xsk_real.bind(fd, (struct sockaddr *)&any, xsk_sa_len(&any)) < 0 ?
			     -errno :
			     xsk_learn_local(s, fd);
		if (rc)
			goto out;
	}
	/* the original socket's IPV6_V6ONLY (set by the application or by
	 * net.ipv6.bindv6only) goes to the stack's listener */
	int v6only = -1;
	if (xsk_family(s) == AF_INET6) {
		socklen_t vl = sizeof(v6only);
		if (xsk_real.getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &vl) < 0)
			v6only = -1;
	}
	xsk_set_v6only(s, v6only);
	/* the stack listens on this very socket (bound, with the
	 * application's options): its port is never free in between */
	const struct xsk_stack *st = xsk_stack();
	int lfd = st && st->listen_socket ? xsk_real.fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
	if (lfd >= 0)
		st->listen_socket(lfd); /* (a duplicate libxsock's table does not name) */
	rc = take_over(fd, s);
	if (!rc)
		rc = xsk_listen_start(s, (const struct sockaddr *)xsk_local(s), backlog);
	if (rc) {
		xsk_set_closed(s, true);
	}
out:
	xsk_unlock(s);
	if (!rc)
		xsk_svc_add(s);
	xsk_fd_put(s);
	return rc ? (int)xsk_fail(-rc) : 0;
}

XSK_EXPORT int listen(int fd, int backlog)
{
	return XSK_HELD(int, listen_held(fd, backlog));
}

/* ---- connect: iWARP, or plain TCP to a peer that is not ------------------- */

/* A connect that can still go plain: the application's TCP socket stays
 * as it is (its options, its blocking mode, its epoll registrations) while
 * the stack tries MPA on a connection of its own; only one fd number names
 * it, and no fixed local port that the stack's attempt would need too. */
static bool can_fall_back(struct xsk *s)
{
	const struct sockaddr_storage *l = xsk_local(s);
	in_port_t port = 0;

	if (l && l->ss_family == AF_INET)
		port = ((const struct sockaddr_in *)l)->sin_port;
	else if (l && l->ss_family == AF_INET6)
		port = ((const struct sockaddr_in6 *)l)->sin6_port;
	return port == 0 && xsk_tab_nfds(s) == 1;
}

/* The attempt failed in a way that says the peer is not an iWARP one:
 * anything but an MPA reject (an iWARP peer that said no). */
static bool peer_not_iwarp(struct xsk *s)
{
	return xsk_state(s) == XSK_CLOSED && !xsk_mpa_rejected(s);
}

/* Give the socket back to libc and connect it there (s's lock held, and
 * released; the caller's reference dropped).  A connect that goes on
 * counts in the stack's statistics (xsock-stat(1)), the socket being one
 * the stack no longer sees. */
static int go_plain(int fd, struct xsk *s, const struct sockaddr *addr, socklen_t len,
		    enum xsock_plain_why why)
{
	xsk_plain_say(fd, why);
	xsk_unlock(s);
	/* the epoll sets that watch fd watch the kernel socket it is again,
	 * without libxsock's records of them */
	struct xsk_ep_moved *mv;
	int nmv = xsk_ep_take_fd(s, fd, &mv);
	xsk_tab_detach(fd); /* the attempt's resources go with s */
	xsk_ep_give_fd(fd, mv, nmv);
	xsk_fd_put(s);
	int rc = REAL(connect)(fd, addr, len);
	if (rc == 0 || errno == EINPROGRESS) {
		int err = errno;
		xsk_plain_count(why, addr, len);
		errno = err;
	}
	return rc;
}

/* Wait for the attempt to a destination not known yet, whatever the
 * socket's blocking mode, for XSOCK_PLAIN_PROBE_MS or the socket's
 * SO_SNDTIMEO if that is shorter (the plain connect then has its own); a
 * handler that runs meanwhile does not end it.  True: connected; else
 * *why not. */
static bool probe_wait(struct xsk *s, enum xsock_plain_why *why)
{
	int64_t deadline = xsk_now_ms() + (int64_t)xsk_setting_num(XS_SET_PLAIN_PROBE_MS);
	int64_t timeo = xsk_timeo_deadline(xsk_timeo(s, false));
	struct xsk_sigsnap snap;

	if (timeo >= 0 && timeo < deadline)
		deadline = timeo;

	xsk_sig_snap(&snap);
	xsk_progress(s);
	while (xsk_state(s) == XSK_CONNECTING) {
		xsk_unlock(s);
		int w = xsk_wait_step(s, deadline, true, false, &snap);
		xsk_lock(s);
		if (w == -EAGAIN) {
			*why = XSOCK_PLAIN_SILENT;
			return false;
		}
		xsk_progress(s);
	}
	if (xsk_state(s) == XSK_CONNECTED)
		return true;
	*why = xsk_plain_why(s);
	return false;
}

/* A non-blocking connect to a destination not known yet: the stack's try
 * starts, the application's TCP socket is kept aside for the fallback,
 * and fd holds the inner epoll fd as for any connect in progress (the
 * probe then goes on in the application's calls: xsk_plain.c).  0, or
 * -errno with nothing started (fd the TCP socket as it was). */
static int probe_start(int fd, struct xsk *s, const struct sockaddr *addr, socklen_t len)
{
	int kfd = xsk_real.fcntl(fd, F_DUPFD_CLOEXEC, 0);
	int rc;

	if (kfd < 0)
		return -errno;
	kfd = xsk_fd_keep(kfd); /* a closefrom() of the program's passes it */
	rc = xsk_make_fds(s);
	if (!rc)
		rc = xsk_connect_start(s, addr, len);
	if (rc) {
		xsk_fd_close(kfd);
		return rc;
	}
	xsk_set_probe(s, kfd, xsk_now_ms() + (int64_t)xsk_setting_num(XS_SET_PLAIN_PROBE_MS));
	rc = place_epfd(fd, s);
	if (rc) {
		xsk_set_probe(s, -1, 0);
		xsk_fd_close(kfd);
		xsk_set_closed(s, false);
		return rc;
	}
	xsk_progress(s);
	return 0;
}

XSK_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct xsk *s = xsk_tab_has(fd) ? xsk_fd_get(fd) : NULL;
	int rc = 0;
	bool inet = addr && ((addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) ||
			     (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)));

	if (s && inet && rules_say_tcp(fd, s, XSK_ROLE_CONNECT, addr)) {
		xsk_fd_put(s);
		s = NULL;
	}
	if (s && xsk_probing(s) && xsk_plain_step(fd, s)) {
		xsk_fd_put(s); /* its probe went plain: the kernel's connect says */
		s = NULL;
	}
	if (!s)
		return REAL(connect)(fd, addr, len);
	xsk_lock(s);
	switch (xsk_state(s)) {
	case XSK_FRESH:
		break;
	case XSK_CONNECTING:
		rc = -EALREADY;
		goto out;
	case XSK_CONNECTED:
		rc = -EISCONN;
		goto out;
	case XSK_LISTENING:
		rc = -EINVAL;
		goto out;
	case XSK_CLOSED:
		rc = -xsk_take_err(s);
		if (!rc)
			rc = -EBADFD;
		goto out;
	}
	if (!inet) {
		rc = -EAFNOSUPPORT;
		goto out;
	}
	/* XSOCK_PLAIN_PROBE_MS=0: no fallback, every connect is iWARP's */
	bool fallback = xsk_setting_num(XS_SET_PLAIN_PROBE_MS) > 0 && can_fall_back(s);
	int64_t ttl_ms = (int64_t)xsk_setting_num(XS_SET_PLAIN_TTL_S) * 1000;
	enum xsk_peer_kind kind = fallback ? xsk_peer_lookup(addr) : XSK_PEER_IWARP;
	if (kind == XSK_PEER_PLAIN)
		return go_plain(fd, s, addr, len, XSOCK_PLAIN_REMEMBERED);
	/* a non-blocking connect must not wait for the try (an event loop's
	 * call would take a round trip, or the probe time): it probes while
	 * the application's calls go on (xsk_plain.c) */
	if (kind == XSK_PEER_UNKNOWN && xsk_nonblock(s)) {
		rc = probe_start(fd, s, addr, len);
		if (!rc) {
			rc = -EINPROGRESS;
			goto out;
		}
		return go_plain(fd, s, addr, len, XSOCK_PLAIN_OTHER);
	}
	if (kind == XSK_PEER_UNKNOWN) {
		rc = xsk_make_fds(s);
		if (!rc)
			rc = xsk_connect_start(s, addr, len);
		enum xsock_plain_why why = XSOCK_PLAIN_OTHER;
		if (!rc && probe_wait(s, &why)) {
			xsk_peer_learn(addr, XSK_PEER_IWARP, ttl_ms);
			rc = place_epfd(fd, s);
			goto out;
		}
		if (rc || peer_not_iwarp(s) || xsk_state(s) == XSK_CONNECTING) {
			/* TCP itself refused: the plain connect says so too
			 * (and nothing is learnt from it) */
			int prc = go_plain(fd, s, addr, len, why);
			int perr = errno;
			if (prc == 0 || perr == EINPROGRESS)
				xsk_peer_learn(addr, XSK_PEER_PLAIN, ttl_ms);
			errno = perr;
			return prc;
		}
		rc = -xsk_take_err(s); /* rejected by an iWARP peer */
		if (!rc)
			rc = -ECONNREFUSED;
		place_epfd(fd, s);
		goto out;
	}
	rc = take_over(fd, s);
	if (!rc)
		rc = xsk_connect_start(s, addr, len);
	if (rc) {
		xsk_set_closed(s, false);
		goto out;
	}
	xsk_progress(s);
	struct xsk_sigsnap snap;
	int64_t deadline = xsk_timeo_deadline(xsk_timeo(s, false));
	xsk_sig_snap(&snap);
	while (xsk_state(s) == XSK_CONNECTING) {
		if (xsk_nonblock(s)) {
			rc = -EINPROGRESS;
			goto out;
		}
		xsk_unlock(s);
		int w = xsk_wait_step(s, deadline, true, false, &snap);
		xsk_lock(s);
		if (w) {
			/* the connection goes on, like TCP: EINTR, or after
			 * SO_SNDTIMEO EINPROGRESS */
			rc = w == -EAGAIN ? -EINPROGRESS : w;
			goto out;
		}
		xsk_progress(s);
	}
	if (xsk_state(s) != XSK_CONNECTED) {
		rc = -xsk_take_err(s);
		if (!rc)
			rc = -ECONNREFUSED;
		xsk_peer_learn(addr, XSK_PEER_UNKNOWN, 0); /* the next one tries again */
	}
out:
	xsk_unlock(s);
	xsk_fd_put(s);
	return rc ? (int)xsk_fail(-rc) : 0;
}

/* The options a kernel TCP socket passes to the connections it accepts,
 * when the application set them on a mixed listener. */
static bool opt_inherited(const struct xsk_opt *o)
{
	if (o->level == SOL_SOCKET)
		return o->name == SO_KEEPALIVE || o->name == SO_RCVBUF || o->name == SO_SNDBUF ||
		       o->name == SO_OOBINLINE || o->name == SO_PRIORITY;
	if (o->level == IPPROTO_TCP)
		return o->name == TCP_NODELAY || o->name == TCP_KEEPIDLE ||
		       o->name == TCP_KEEPINTVL || o->name == TCP_KEEPCNT ||
		       o->name == TCP_USER_TIMEOUT;
	return false;
}

/* A mixed listener's plain TCP client (xsock(7) MIXED LISTENER): its
 * kernel socket, not an IWARP socket, so every later call on it goes
 * straight to libc.  l is the listener (referenced), c the shell that
 * held the socket in the accept queue. */
static int accept_plain(struct xsk *l, struct xsk *c, struct sockaddr *addr, socklen_t *len,
			int flags)
{
	struct xsk_opt opts[XSK_MAX_OPTS];
	struct sockaddr_storage peer = { .ss_family = (sa_family_t)xsk_family(l) };
	socklen_t pl = sizeof(peer);
	int fd = xsk_take_plain_fd(c), nopts, fl;

	xsk_free(c);
	xsk_lock(l);
	nopts = xsk_opts_get(l, opts);
	xsk_unlock(l);
	/* the stack made it nonblocking and close-on-exec: accept4's flags
	 * decide, as for any accepted socket */
	fl = xsk_real.fcntl(fd, F_GETFL);
	if (fl >= 0)
		xsk_real.fcntl(fd, F_SETFL,
			       (flags & SOCK_NONBLOCK) ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK));
	xsk_real.fcntl(fd, F_SETFD, (flags & SOCK_CLOEXEC) ? FD_CLOEXEC : 0);
	for (int i = 0; i < nopts; i++)
		if (opt_inherited(&opts[i]))
			xsk_real.setsockopt(fd, opts[i].level, opts[i].name, &opts[i].val,
					    sizeof(opts[i].val));
	/* a client already gone has no peer name any more: the family only */
	if (xsk_real.getpeername(fd, (struct sockaddr *)&peer, &pl) < 0)
		memset(&peer, 0, sizeof(peer));
	peer.ss_family = (sa_family_t)xsk_family(l);
	xsk_addr_copy(&peer, addr, len);
	return fd;
}

/* accept4 on the IWARP socket s (its reference goes): the new fd, -1 with
 * errno, or XSK_ACCEPT_KERNEL when the kernel's accept4 decides (a fresh
 * socket); run with signals held but in its wait. */
#define XSK_ACCEPT_KERNEL (-2)
static int accept4_held(struct xsk *s, struct sockaddr *addr, socklen_t *len, int flags)
{
	struct xsk *c = NULL;
	int rc = 0;

	if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) {
		xsk_fd_put(s);
		return (int)xsk_fail(EINVAL);
	}
	xsk_fork_listener_use(s);
	struct xsk_sigsnap snap;
	int64_t deadline = -2; /* set on the first look */
	bool quiet = false; /* the service thread leaves s to us */
	xsk_sig_snap(&snap);
	for (;;) {
		xsk_lock(s);
		if (deadline == -2)
			deadline = xsk_timeo_deadline(xsk_timeo(s, true));
		if (xsk_state(s) != XSK_LISTENING) {
			xsk_unlock(s);
			rc = xsk_state(s) == XSK_FRESH ? -2 : -EINVAL;
			break;
		}
		xsk_progress(s);
		c = xsk_accept_pop(s);
		if (c)
			xsk_opts_copy(c, s); /* the listener's, as TCP's accepted sockets */
		xsk_set_ready(s);
		bool nb = xsk_nonblock(s);
		xsk_unlock(s);
		if (c)
			break;
		if (nb) {
			rc = -EAGAIN;
			break;
		}
		if (!quiet) {
			xsk_svc_accept_wait(s, true);
			quiet = true;
		}
		rc = xsk_wait_step(s, deadline, false, false, &snap);
		if (rc)
			break; /* -EINTR, or -EAGAIN after SO_RCVTIMEO */
	}
	if (quiet)
		xsk_svc_accept_wait(s, false);
	if (c && xsk_plain_fd(c) >= 0) {
		int pfd = accept_plain(s, c, addr, len, flags);
		xsk_fd_put(s);
		return pfd;
	}
	xsk_fd_put(s);
	if (rc == -2)
		return XSK_ACCEPT_KERNEL;
	if (rc)
		return (int)xsk_fail(-rc);
	int nfd = xsk_epfd(c);
	if (!(flags & SOCK_CLOEXEC))
		xsk_real.fcntl(nfd, F_SETFD, 0);
	xsk_set_fd_flags(c, (flags & SOCK_NONBLOCK) != 0, (flags & SOCK_CLOEXEC) != 0);
	if (xsk_nonblock(c))
		xsk_real.fcntl(nfd, F_SETFL, O_NONBLOCK);
	xsk_set_app_epfd(c, nfd);
	if ((unsigned)nfd >= (unsigned)xsk_tab_n) {
		xsk_free(c);
		return (int)xsk_fail(EMFILE);
	}
	if (xsk_tab_attach(nfd, c) < 0) {
		xsk_free(c);
		return (int)xsk_fail(ENOMEM);
	}
	xsk_lock(c);
	xsk_opts_apply(c);
	xsk_progress(c);
	if (addr && len)
		xsk_addr_copy(xsk_peer(c), addr, len);
	xsk_unlock(c);
	return nfd;
}

XSK_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	struct xsk *s = xsk_tab_has(fd) ? xsk_fd_get(fd) : NULL;
	int r = s ? XSK_HELD(int, accept4_held(s, addr, len, flags)) : XSK_ACCEPT_KERNEL;

	return r == XSK_ACCEPT_KERNEL ? REAL(accept4)(fd, addr, len, flags) : r;
}

/* Our own accept4 and close, bound inside the library: libiwarp's rsocket
 * calls dlopen libxsock RTLD_LOCAL (verbs/cm_rsocket.c), and a call through
 * the PLT would then find libc's first in the global scope. */
int xsk_accept4_own(int fd, struct sockaddr *addr, socklen_t *len, int flags)
	__attribute__((alias("accept4"), visibility("hidden")));

XSK_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	return xsk_accept4_own(fd, addr, len, 0);
}

