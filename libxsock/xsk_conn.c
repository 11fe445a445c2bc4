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

/* A socket the rules made a candidate: true (and the fd is plain TCP
 * again) if the rules say TCP for this role and address. */
static bool rules_say_tcp(int fd, struct xsk *s, int role, const struct sockaddr *sa)
{
	struct sockaddr_storage any = { .ss_family = (sa_family_t)s->family };

	if (s->state != XSK_FRESH || !s->by_rules)
		return false;
	if (!sa)
		sa = s->have_local ? (const struct sockaddr *)&s->local : (const struct sockaddr *)&any;
	if (xsk_config_decide(role, sa))
		return false;
	xsk_tab_detach(fd);
	return true;
}

/* Replace the original TCP socket under every fd number naming s by the
 * inner epoll fd, and re-register s in the epoll sets that knew it. */
static int take_over(int fd, struct xsk *s)
{
	int rc = xsk_make_fds(s);
	int flags = s->cloexec ? O_CLOEXEC : 0;

	if (rc)
		return rc;
	if (xsk_real.dup3(s->epfd, fd, flags) < 0)
		return -errno;
	if (xsk_tab_nfds(s) > 1) {
		for (int i = xsk_tab_next_of(s, 0); i >= 0; i = xsk_tab_next_of(s, i + 1))
			if (i != fd)
				xsk_real.dup3(s->epfd, i, flags);
	}
	xsk_real.close(s->epfd);
	s->epfd = fd;
	s->epfd_app = true;
	if (s->nonblock) {
		int fl = xsk_real.fcntl(fd, F_GETFL);
		if (fl >= 0)
			xsk_real.fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	}
	xsk_ep_readd(s);
	return 0;
}

XSK_EXPORT int listen(int fd, int backlog)
{
	struct xsk *s = xsk_tab_has(fd) ? xsk_fd_get(fd) : NULL;
	int rc;

	if (s && rules_say_tcp(fd, s, XSK_ROLE_LISTEN, NULL)) {
		xsk_fd_put(s);
		s = NULL;
	}
	if (!s)
		return REAL(listen)(fd, backlog);
	pthread_mutex_lock(&s->mu);
	if (s->state == XSK_LISTENING) {
		s->backlog = backlog;
		rc = 0;
		goto out;
	}
	if (s->state != XSK_FRESH) {
		rc = -EINVAL;
		goto out;
	}
	if (!s->have_local) {
		/* like TCP: an unbound listener gets an ephemeral port */
		struct sockaddr_storage any = { .ss_family = (sa_family_t)s->family };
		socklen_t l = sizeof(s->local);
		if (xsk_real.bind(fd, (struct sockaddr *)&any, xsk_sa_len(&any)) < 0 ||
		    xsk_real.getsockname(fd, (struct sockaddr *)&s->local, &l) < 0) {
			rc = -errno;
			goto out;
		}
		s->have_local = true;
	}
	/* the original socket's IPV6_V6ONLY (set by the application or by
	 * net.ipv6.bindv6only) goes to the stack's listener */
	s->v6only = -1;
	if (s->family == AF_INET6) {
		socklen_t vl = sizeof(s->v6only);
		if (xsk_real.getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &s->v6only, &vl) < 0)
			s->v6only = -1;
	}
	rc = take_over(fd, s);
	if (!rc)
		rc = xsk_listen_start(s, (struct sockaddr *)&s->local, backlog);
	if (rc) {
		s->state = XSK_CLOSED;
		s->err = 0;
	}
out:
	pthread_mutex_unlock(&s->mu);
	if (!rc)
		xsk_svc_add(s);
	xsk_fd_put(s);
	return rc ? (int)xsk_fail(-rc) : 0;
}

XSK_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct xsk *s = xsk_tab_has(fd) ? xsk_fd_get(fd) : NULL;
	int rc = 0;

	if (s && addr &&
	    ((addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) ||
	     (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))) &&
	    rules_say_tcp(fd, s, XSK_ROLE_CONNECT, addr)) {
		xsk_fd_put(s);
		s = NULL;
	}
	if (!s)
		return REAL(connect)(fd, addr, len);
	pthread_mutex_lock(&s->mu);
	switch (s->state) {
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
		rc = s->err ? -s->err : -EBADFD;
		s->err = 0;
		goto out;
	}
	if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
	    len < sizeof(struct sockaddr_in)) {
		rc = -EAFNOSUPPORT;
		goto out;
	}
	rc = take_over(fd, s);
	if (!rc)
		rc = xsk_connect_start(s, addr, len);
	if (rc) {
		s->state = XSK_CLOSED;
		goto out;
	}
	xsk_progress(s);
	struct xsk_sigsnap snap;
	int64_t deadline = xsk_timeo_deadline(s->sndtimeo_us);
	xsk_sig_snap(&snap);
	while (s->state == XSK_CONNECTING) {
		if (s->nonblock) {
			rc = -EINPROGRESS;
			goto out;
		}
		pthread_mutex_unlock(&s->mu);
		int w = xsk_wait_step(s, deadline, true, false, &snap);
		pthread_mutex_lock(&s->mu);
		if (w) {
			/* the connection goes on, like TCP: EINTR, or after
			 * SO_SNDTIMEO EINPROGRESS */
			rc = w == -EAGAIN ? -EINPROGRESS : w;
			goto out;
		}
		xsk_progress(s);
	}
	if (s->state != XSK_CONNECTED) {
		rc = s->err ? -s->err : -ECONNREFUSED;
		s->err = 0;
	}
out:
	pthread_mutex_unlock(&s->mu);
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
	struct sockaddr_storage peer = { .ss_family = (sa_family_t)l->family };
	socklen_t pl = sizeof(peer);
	int fd = c->plain_fd, nopts, fl;

	c->plain_fd = -1;
	xsk_free(c);
	pthread_mutex_lock(&l->mu);
	nopts = l->nopts;
	memcpy(opts, l->opts, sizeof(opts));
	pthread_mutex_unlock(&l->mu);
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
	peer.ss_family = (sa_family_t)l->family;
	xsk_addr_copy(&peer, addr, len);
	return fd;
}

XSK_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	struct xsk *s = xsk_tab_has(fd) ? xsk_fd_get(fd) : NULL;
	struct xsk *c = NULL;
	int rc = 0;

	if (!s)
		return REAL(accept4)(fd, addr, len, flags);
	if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) {
		xsk_fd_put(s);
		return (int)xsk_fail(EINVAL);
	}
	xsk_fork_listener_use(s);
	struct xsk_sigsnap snap;
	int64_t deadline = -2; /* set on the first look */
	xsk_sig_snap(&snap);
	for (;;) {
		pthread_mutex_lock(&s->mu);
		if (deadline == -2)
			deadline = xsk_timeo_deadline(s->rcvtimeo_us);
		if (s->state != XSK_LISTENING) {
			pthread_mutex_unlock(&s->mu);
			rc = s->state == XSK_FRESH ? -2 : -EINVAL;
			break;
		}
		xsk_progress(s);
		c = xsk_accept_pop(s);
		if (c)
			xsk_opts_copy(c, s); /* the listener's, as TCP's accepted sockets */
		xsk_set_ready(s);
		bool nb = s->nonblock;
		pthread_mutex_unlock(&s->mu);
		if (c)
			break;
		if (nb) {
			rc = -EAGAIN;
			break;
		}
		rc = xsk_wait_step(s, deadline, false, false, &snap);
		if (rc)
			break; /* -EINTR, or -EAGAIN after SO_RCVTIMEO */
	}
	if (c && c->plain_fd >= 0) {
		int pfd = accept_plain(s, c, addr, len, flags);
		xsk_fd_put(s);
		return pfd;
	}
	xsk_fd_put(s);
	if (rc == -2)
		return REAL(accept4)(fd, addr, len, flags);
	if (rc)
		return (int)xsk_fail(-rc);
	int nfd = c->epfd;
	if (!(flags & SOCK_CLOEXEC))
		xsk_real.fcntl(nfd, F_SETFD, 0);
	c->cloexec = (flags & SOCK_CLOEXEC) != 0;
	c->nonblock = (flags & SOCK_NONBLOCK) != 0;
	if (c->nonblock)
		xsk_real.fcntl(nfd, F_SETFL, O_NONBLOCK);
	c->epfd_app = true;
	if ((unsigned)nfd >= (unsigned)xsk_tab_n) {
		xsk_free(c);
		return (int)xsk_fail(EMFILE);
	}
	if (xsk_tab_attach(nfd, c) < 0) {
		xsk_free(c);
		return (int)xsk_fail(ENOMEM);
	}
	pthread_mutex_lock(&c->mu);
	xsk_opts_apply(c);
	xsk_progress(c);
	if (addr && len)
		xsk_addr_copy(&c->peer, addr, len);
	pthread_mutex_unlock(&c->mu);
	return nfd;
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

