/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* socket(), IWARP_MODE, the socket options and the addresses of an IWARP
 * socket (xsock(7) OPTIONS).  Options the connection's TCP socket takes
 * are recorded and passed on once it exists; timeouts, SO_RCVLOWAT and
 * SO_LINGER libxsock honours itself. */
#include "config.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/time.h>

#include "libxsock/xsk_config.h"
#include "libxsock/xsk_intercept.h"
#include "libxsock/xsock.h"

static bool eligible(int domain, int type, int protocol)
{
	return (domain == AF_INET || domain == AF_INET6) &&
	       (type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) == SOCK_STREAM &&
	       (protocol == 0 || protocol == IPPROTO_TCP);
}

XSK_EXPORT int socket(int domain, int type, int protocol)
{
	int fd = REAL(socket)(domain, type, protocol);

	if (fd < 0 || !xsk_config_may_iwarp() || !eligible(domain, type, protocol))
		return fd;
	/* libiwarp's own TCP connections stay TCP */
	if (xsk_from_stack(__builtin_return_address(0)))
		return fd;
	/* by_rules: decided at connect()/listen() */
	if (xsk_tab_attach_fresh(fd, domain, type & SOCK_NONBLOCK, type & SOCK_CLOEXEC, true) < 0) {
		xsk_real.close(fd);
		return (int)xsk_fail(ENOMEM);
	}
	return fd;
}

static void opt_record(struct xsk *s, int level, int name, int val)
{
	for (int i = 0; i < s->nopts; i++) {
		if (s->opts[i].level == level && s->opts[i].name == name) {
			s->opts[i].val = val;
			return;
		}
	}
	if (s->nopts < XSK_MAX_OPTS)
		s->opts[s->nopts++] = (struct xsk_opt){ level, name, val };
}

static bool opt_find(struct xsk *s, int level, int name, int *val)
{
	for (int i = 0; i < s->nopts; i++) {
		if (s->opts[i].level == level && s->opts[i].name == name) {
			*val = s->opts[i].val;
			return true;
		}
	}
	return false;
}

static int set_iwarp_mode(int fd, int on)
{
	struct xsk *s = xsk_fd_get(fd);
	int type, domain, flags, fdfl;
	socklen_t sl = sizeof(int);

	if (s) {
		enum xsk_state st = s->state;
		if (st == XSK_FRESH)
			s->by_rules = false; /* the application decided */
		xsk_fd_put(s);
		if (st == XSK_FRESH) {
			if (!on)
				xsk_tab_detach(fd);
			return 0;
		}
		return on ? 0 : (int)xsk_fail(EISCONN);
	}
	if (REAL(getsockopt)(fd, SOL_SOCKET, SO_TYPE, &type, &sl) < 0)
		return -1;
	sl = sizeof(int);
	if (xsk_real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &sl) < 0)
		return -1;
	if (type != SOCK_STREAM || (domain != AF_INET && domain != AF_INET6))
		return (int)xsk_fail(EOPNOTSUPP);
	if (!on)
		return 0;
	{
		struct sockaddr_storage ss;
		socklen_t al = sizeof(ss);
		int acc = 0;
		sl = sizeof(acc);
		if (xsk_real.getpeername(fd, (struct sockaddr *)&ss, &al) == 0 ||
		    (xsk_real.getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &sl) == 0 && acc))
			return (int)xsk_fail(EISCONN);
	}
	flags = xsk_real.fcntl(fd, F_GETFL);
	fdfl = xsk_real.fcntl(fd, F_GETFD);
	int rc = xsk_tab_attach_fresh(fd, domain, flags >= 0 && (flags & O_NONBLOCK),
			      fdfl >= 0 && (fdfl & FD_CLOEXEC), false);
	return rc < 0 ? (int)xsk_fail(-rc) : 0;
}

/* ---- options libxsock honours ---- */

#ifndef SO_RCVTIMEO_OLD
#define SO_RCVTIMEO_OLD SO_RCVTIMEO
#define SO_SNDTIMEO_OLD SO_SNDTIMEO
#endif
#ifndef SO_RCVTIMEO_NEW
#define SO_RCVTIMEO_NEW SO_RCVTIMEO_OLD
#define SO_SNDTIMEO_NEW SO_SNDTIMEO_OLD
#endif
#define XSK_MSS_DEFAULT 536 /* TCP's, before a connection exists */

static bool is_timeo(int level, int name, bool *rcv)
{
	if (level != SOL_SOCKET)
		return false;
	*rcv = name == SO_RCVTIMEO_OLD || name == SO_RCVTIMEO_NEW;
	return *rcv || name == SO_SNDTIMEO_OLD || name == SO_SNDTIMEO_NEW;
}

/* Options the connection's TCP socket gets (int values): set on it once
 * the connection exists, read from it while it does. */
static bool tcp_passes(int level, int name)
{
	switch (level) {
	case SOL_SOCKET:
		return name == SO_KEEPALIVE || name == SO_PRIORITY;
	case IPPROTO_TCP:
		return name == TCP_KEEPIDLE || name == TCP_KEEPINTVL || name == TCP_KEEPCNT ||
		       name == TCP_USER_TIMEOUT;
	case IPPROTO_IP:
		return name == IP_TOS || name == IP_TTL;
	case IPPROTO_IPV6:
		return name == IPV6_TCLASS || name == IPV6_UNICAST_HOPS;
	default:
		return false;
	}
}

static int sk_tcp(struct xsk *s, int op, int level, int name, void *val, socklen_t *len)
{
	const struct xsk_stack *st = xsk_stack();

	if (!st || !st->tcp || !s->id || s->state != XSK_CONNECTED)
		return -ENOTCONN;
	return st->tcp(s->id, op, level, name, val, len);
}

void xsk_opts_apply(struct xsk *s)
{
	for (int i = 0; i < s->nopts; i++) {
		if (!tcp_passes(s->opts[i].level, s->opts[i].name))
			continue;
		socklen_t l = sizeof(int);
		sk_tcp(s, XSOCK_TCP_SETOPT, s->opts[i].level, s->opts[i].name, &s->opts[i].val, &l);
	}
}

void xsk_opts_copy(struct xsk *c, const struct xsk *l)
{
	memcpy(c->opts, l->opts, sizeof(c->opts));
	c->nopts = l->nopts;
	c->rcvtimeo_us = l->rcvtimeo_us;
	c->sndtimeo_us = l->sndtimeo_us;
	c->rcvlowat = l->rcvlowat;
	c->linger_on = l->linger_on;
	c->linger_s = l->linger_s;
}

/* The options libxsock keeps itself (s->mu held): 0 or -errno, 1 if name
 * is not one of them. */
static int opt_set_own(struct xsk *s, int level, int name, const void *val, socklen_t len)
{
	bool rcv;
	int v;

	if (is_timeo(level, name, &rcv)) {
		struct timeval tv;
		if (!val || len < sizeof(tv))
			return -EINVAL;
		memcpy(&tv, val, sizeof(tv));
		if (tv.tv_usec < 0 || tv.tv_usec >= 1000000)
			return -EDOM;
		/* negative: do not wait at all (Linux) */
		int64_t us = tv.tv_sec < 0 ? -1 : (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
		if (tv.tv_sec > (int64_t)1 << 40)
			us = 0;
		*(rcv ? &s->rcvtimeo_us : &s->sndtimeo_us) = us;
		return 0;
	}
	if (level != SOL_SOCKET)
		return 1;
	switch (name) {
	case SO_LINGER: {
		struct linger lg;
		if (!val || len < sizeof(lg))
			return -EINVAL;
		memcpy(&lg, val, sizeof(lg));
		s->linger_on = lg.l_onoff != 0;
		s->linger_s = lg.l_linger < 0 ? 0 : lg.l_linger;
		return 0;
	}
	case SO_RCVLOWAT:
		if (!val || len < sizeof(int))
			return -EINVAL;
		memcpy(&v, val, sizeof(v));
		if (v < 0 || (uint32_t)v > s->rbuf_size / 2)
			v = (int)(s->rbuf_size / 2); /* data beyond half the ring may never come */
		s->rcvlowat = v ? v : 1;
		return 0;
	case SO_SNDLOWAT:
		return -ENOPROTOOPT; /* as Linux */
	default:
		return 1;
	}
}

static int put_int_opt(void *val, socklen_t *len, int v);

/* getsockopt of the options above and of those answered from the
 * connection: 0 or -errno, 1 if not one of them. */
static int opt_get_own(struct xsk *s, int level, int name, void *val, socklen_t *len)
{
	bool rcv;
	socklen_t l;

	if (!val || !len)
		return -EFAULT;
	if (is_timeo(level, name, &rcv)) {
		int64_t us = rcv ? s->rcvtimeo_us : s->sndtimeo_us;
		struct timeval tv = { 0, 0 };
		if (us > 0)
			tv = (struct timeval){ (time_t)(us / 1000000), (suseconds_t)(us % 1000000) };
		l = *len < sizeof(tv) ? *len : (socklen_t)sizeof(tv);
		memcpy(val, &tv, l);
		*len = l;
		return 0;
	}
	if (level == SOL_SOCKET && name == SO_LINGER) {
		struct linger lg = { s->linger_on, s->linger_s };
		l = *len < sizeof(lg) ? *len : (socklen_t)sizeof(lg);
		memcpy(val, &lg, l);
		*len = l;
		return 0;
	}
	if (level == SOL_SOCKET && name == SO_RCVLOWAT)
		return put_int_opt(val, len, s->rcvlowat) < 0 ? -EINVAL : 0;
	if (level == SOL_SOCKET && name == SO_SNDLOWAT)
		return put_int_opt(val, len, 1) < 0 ? -EINVAL : 0;
	if (level == IPPROTO_TCP && name == TCP_MAXSEG) {
		/* the MSS of the TCP connection under the stream */
		int mss = 0;
		l = sizeof(mss);
		if (sk_tcp(s, XSOCK_TCP_GETOPT, level, name, &mss, &l) < 0 || mss <= 0) {
			if (!opt_find(s, level, name, &mss) || mss <= 0)
				mss = XSK_MSS_DEFAULT;
		}
		return put_int_opt(val, len, mss) < 0 ? -EINVAL : 0;
	}
	if (level == IPPROTO_TCP && name == TCP_INFO) {
		struct tcp_info ti;
		l = sizeof(ti);
		if (sk_tcp(s, XSOCK_TCP_GETOPT, level, name, &ti, &l) < 0) {
			/* no connection to report on: zeros, and the state */
			memset(&ti, 0, sizeof(ti));
			ti.tcpi_state = s->state == XSK_LISTENING ? TCP_LISTEN :
					s->state == XSK_CONNECTED ? TCP_ESTABLISHED : TCP_CLOSE;
			l = sizeof(ti);
		}
		if (*len < l)
			l = *len;
		memcpy(val, &ti, l);
		*len = l;
		return 0;
	}
	if (tcp_passes(level, name)) {
		int v = 0;
		l = sizeof(v);
		if (sk_tcp(s, XSOCK_TCP_GETOPT, level, name, &v, &l) < 0)
			return 1; /* recorded */
		return put_int_opt(val, len, v) < 0 ? -EINVAL : 0;
	}
	return 1;
}

XSK_EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	struct xsk *s;
	int v = 0;

	if (level == SOL_IWARP) {
		if (name != IWARP_MODE)
			return (int)xsk_fail(ENOPROTOOPT);
		if (!val || len < sizeof(int))
			return (int)xsk_fail(EINVAL);
		memcpy(&v, val, sizeof(v));
		return set_iwarp_mode(fd, v != 0);
	}
	s = xsk_tab_has(fd) ? xsk_fd_get(fd) : NULL;
	if (!s)
		return REAL(setsockopt)(fd, level, name, val, len);
	if (val && len >= sizeof(int))
		memcpy(&v, val, sizeof(v));
	pthread_mutex_lock(&s->mu);
	bool fresh = s->state == XSK_FRESH;
	int rc = 0;
	/* still the kernel's socket: it checks the value first */
	if (fresh && REAL(setsockopt)(fd, level, name, val, len) < 0)
		rc = -errno;
	if (!rc)
		rc = opt_set_own(s, level, name, val, len);
	if (rc == 1) {
		rc = 0;
		opt_record(s, level, name, v);
		if (level == SOL_SOCKET && name == SO_RCVBUF && fresh && v >= (int)XSK_RBUF_MIN)
			s->rbuf_size = (unsigned)v > XSK_RBUF_MAX ? XSK_RBUF_MAX : ((uint32_t)v & ~1u);
		if (!fresh && tcp_passes(level, name) && s->state == XSK_CONNECTED) {
			int r = sk_tcp(s, XSOCK_TCP_SETOPT, level, name, (void *)(uintptr_t)val, &len);
			if (r < 0 && r != -ENOTCONN)
				rc = r; /* the TCP socket refused the value */
		}
	}
	pthread_mutex_unlock(&s->mu);
	xsk_fd_put(s);
	return rc ? (int)xsk_fail(-rc) : 0;
}

static int put_int_opt(void *val, socklen_t *len, int v)
{
	if (!val || !len || *len < sizeof(int))
		return (int)xsk_fail(EINVAL);
	memcpy(val, &v, sizeof(v));
	*len = sizeof(int);
	return 0;
}

XSK_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct xsk *s = xsk_tab_has(fd) ? xsk_fd_get(fd) : NULL;
	int v = 0;

	if (level == SOL_IWARP) {
		if (name != IWARP_MODE) {
			if (s)
				xsk_fd_put(s);
			return (int)xsk_fail(ENOPROTOOPT);
		}
		if (s) {
			xsk_fd_put(s);
			return put_int_opt(val, len, 1);
		}
		int type;
		socklen_t sl = sizeof(type);
		if (REAL(getsockopt)(fd, SOL_SOCKET, SO_TYPE, &type, &sl) < 0)
			return -1;
		return put_int_opt(val, len, 0);
	}
	if (!s)
		return REAL(getsockopt)(fd, level, name, val, len);
	pthread_mutex_lock(&s->mu);
	if (s->state == XSK_FRESH) {
		pthread_mutex_unlock(&s->mu);
		xsk_fd_put(s);
		return REAL(getsockopt)(fd, level, name, val, len);
	}
	xsk_progress(s);
	if (level == IPPROTO_IP && name == IP_OPTIONS && len) {
		/* no IP options on the connection (sshd drops a client whose
		 * connection has some: it would read an int as options) */
		pthread_mutex_unlock(&s->mu);
		xsk_fd_put(s);
		*len = 0;
		return 0;
	}
	int own = opt_get_own(s, level, name, val, len);
	if (own <= 0) {
		pthread_mutex_unlock(&s->mu);
		xsk_fd_put(s);
		return own ? (int)xsk_fail(-own) : 0;
	}
	if (level == SOL_SOCKET) {
		switch (name) {
		case SO_ERROR:
			v = s->err;
			s->err = 0;
			break;
		case SO_TYPE:
			v = SOCK_STREAM;
			break;
		case SO_DOMAIN:
			v = s->family;
			break;
		case SO_PROTOCOL:
			v = IPPROTO_TCP;
			break;
		case SO_ACCEPTCONN:
			v = s->state == XSK_LISTENING;
			break;
		case SO_RCVBUF:
			v = (int)s->rbuf_size;
			break;
		case SO_SNDBUF:
			v = (int)s->sbuf_size;
			break;
		default:
			opt_find(s, level, name, &v);
			break;
		}
	} else {
		opt_find(s, level, name, &v);
	}
	pthread_mutex_unlock(&s->mu);
	xsk_fd_put(s);
	return put_int_opt(val, len, v);
}

/* ---- addresses ------------------------------------------------------------------ */

socklen_t xsk_sa_len(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

void xsk_addr_copy(const struct sockaddr_storage *ss, struct sockaddr *addr, socklen_t *len)
{
	socklen_t l = xsk_sa_len(ss);

	if (!addr || !len)
		return;
	memcpy(addr, ss, *len < l ? *len : l);
	*len = l;
}

XSK_EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct xsk *s = xsk_tab_has(fd) ? xsk_fd_get(fd) : NULL;
	int rc;

	if (!s)
		return REAL(bind)(fd, addr, len);
	if (s->state != XSK_FRESH) {
		xsk_fd_put(s);
		return (int)xsk_fail(EINVAL);
	}
	rc = REAL(bind)(fd, addr, len);
	if (rc == 0) {
		socklen_t l = sizeof(s->local);
		pthread_mutex_lock(&s->mu);
		if (xsk_real.getsockname(fd, (struct sockaddr *)&s->local, &l) == 0)
			s->have_local = true;
		pthread_mutex_unlock(&s->mu);
	}
	xsk_fd_put(s);
	return rc;
}

XSK_EXPORT int getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct xsk *s = xsk_tab_has(fd) ? xsk_fd_get(fd) : NULL;

	if (!s || s->state == XSK_FRESH) {
		if (s)
			xsk_fd_put(s);
		return REAL(getsockname)(fd, addr, len);
	}
	pthread_mutex_lock(&s->mu);
	if (!addr || !len) {
		pthread_mutex_unlock(&s->mu);
		xsk_fd_put(s);
		return (int)xsk_fail(EFAULT);
	}
	if (s->have_local) {
		xsk_addr_copy(&s->local, addr, len);
	} else {
		struct sockaddr_storage any = { .ss_family = (sa_family_t)s->family };
		xsk_addr_copy(&any, addr, len);
	}
	pthread_mutex_unlock(&s->mu);
	xsk_fd_put(s);
	return 0;
}

XSK_EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct xsk *s = xsk_tab_has(fd) ? xsk_fd_get(fd) : NULL;
	int rc = 0;

	if (!s || s->state == XSK_FRESH) {
		if (s)
			xsk_fd_put(s);
		return REAL(getpeername)(fd, addr, len);
	}
	pthread_mutex_lock(&s->mu);
	if (s->state != XSK_CONNECTED)
		rc = (int)xsk_fail(ENOTCONN);
	else if (!addr || !len)
		rc = (int)xsk_fail(EFAULT);
	else
		xsk_addr_copy(&s->peer, addr, len);
	pthread_mutex_unlock(&s->mu);
	xsk_fd_put(s);
	return rc;
}

