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
#include "libxsock/xsk_sock.h"
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

static int set_iwarp_mode(int fd, int on)
{
	struct xsk *s = xsk_fd_get(fd);
	int type, domain, flags, fdfl;
	socklen_t sl = sizeof(int);

	if (s) {
		enum xsk_state st = xsk_state(s);
		if (st == XSK_FRESH)
			xsk_set_by_rules(s, false); /* the application decided */
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
/* An SO_RCVBUF set before connecting sizes the receive ring, within the
 * range of XSOCK_IWARP_RBUF (its row of verbs/xs_settings.h). */
#define XSK_RBUF_MIN ((uint32_t)xs_setting_rows[XS_SET_IWARP_RBUF].lo)
#define XSK_RBUF_MAX ((uint32_t)xs_setting_rows[XS_SET_IWARP_RBUF].hi)

static bool is_timeo(int level, int name, bool *rcv)
{
	if (level != SOL_SOCKET)
		return false;
	*rcv = name == SO_RCVTIMEO_OLD || name == SO_RCVTIMEO_NEW;
	return *rcv || name == SO_SNDTIMEO_OLD || name == SO_SNDTIMEO_NEW;
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
		xsk_set_timeo(s, rcv, us);
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
		xsk_set_linger(s, lg.l_onoff != 0, lg.l_linger < 0 ? 0 : lg.l_linger);
		return 0;
	}
	case SO_RCVLOWAT:
		if (!val || len < sizeof(int))
			return -EINVAL;
		memcpy(&v, val, sizeof(v));
		if (v < 0 || (uint32_t)v > xsk_rbuf_size(s) / 2)
			v = (int)(xsk_rbuf_size(s) / 2); /* data beyond half the ring may never come */
		xsk_set_rcvlowat(s, v ? v : 1);
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
		int64_t us = xsk_timeo(s, rcv);
		struct timeval tv = { 0, 0 };
		if (us > 0)
			tv = (struct timeval){ (time_t)(us / 1000000), (suseconds_t)(us % 1000000) };
		l = *len < sizeof(tv) ? *len : (socklen_t)sizeof(tv);
		memcpy(val, &tv, l);
		*len = l;
		return 0;
	}
	if (level == SOL_SOCKET && name == SO_LINGER) {
		bool on;
		int secs;
		xsk_linger(s, &on, &secs);
		struct linger lg = { on, secs };
		l = *len < sizeof(lg) ? *len : (socklen_t)sizeof(lg);
		memcpy(val, &lg, l);
		*len = l;
		return 0;
	}
	if (level == SOL_SOCKET && name == SO_RCVLOWAT)
		return put_int_opt(val, len, xsk_rcvlowat(s)) < 0 ? -EINVAL : 0;
	if (level == SOL_SOCKET && name == SO_SNDLOWAT)
		return put_int_opt(val, len, 1) < 0 ? -EINVAL : 0;
	if (level == IPPROTO_TCP && name == TCP_MAXSEG) {
		/* the MSS of the TCP connection under the stream */
		int mss = 0;
		l = sizeof(mss);
		if (xsk_sock_tcp(s, XSOCK_TCP_GETOPT, level, name, &mss, &l) < 0 || mss <= 0) {
			if (!xsk_opt_find(s, level, name, &mss) || mss <= 0)
				mss = XSK_MSS_DEFAULT;
		}
		return put_int_opt(val, len, mss) < 0 ? -EINVAL : 0;
	}
	if (level == IPPROTO_TCP && name == TCP_INFO) {
		struct tcp_info ti;
		l = sizeof(ti);
		if (xsk_sock_tcp(s, XSOCK_TCP_GETOPT, level, name, &ti, &l) < 0) {
			/* no connection to report on: zeros, and the state */
			memset(&ti, 0, sizeof(ti));
			ti.tcpi_state = xsk_state(s) == XSK_LISTENING ? TCP_LISTEN :
					xsk_state(s) == XSK_CONNECTED ? TCP_ESTABLISHED : TCP_CLOSE;
			l = sizeof(ti);
		}
		if (*len < l)
			l = *len;
		memcpy(val, &ti, l);
		*len = l;
		return 0;
	}
	if (xsk_opt_tcp(level, name)) {
		int v = 0;
		l = sizeof(v);
		if (xsk_sock_tcp(s, XSOCK_TCP_GETOPT, level, name, &v, &l) < 0)
			return 1; /* recorded */
		return put_int_opt(val, len, v) < 0 ? -EINVAL : 0;
	}
	return 1;
}

/* ---- relayed copies (xsk_relay_addr.c): a TCP socket to the program ---- */

static bool relayed_ip_level(int level)
{
	return level == IPPROTO_TCP || level == IPPROTO_IP || level == IPPROTO_IPV6;
}

/* The kernel's answer unless fd is a relayed copy: then its domain and
 * protocol are the connection's, and its TCP and IP options read as
 * unset (no IP options: sshd reads them; TCP_INFO: established). */
static int relayed_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct sockaddr_storage peer;

	if ((level != SOL_SOCKET || (name != SO_DOMAIN && name != SO_PROTOCOL)) &&
	    !relayed_ip_level(level))
		return REAL(getsockopt)(fd, level, name, val, len);
	if (!xsk_raddr_find(fd, NULL, &peer))
		return REAL(getsockopt)(fd, level, name, val, len);
	if (!val || !len)
		return (int)xsk_fail(EFAULT);
	if (level == SOL_SOCKET)
		return put_int_opt(val, len, name == SO_DOMAIN ? peer.ss_family : IPPROTO_TCP);
	if (level == IPPROTO_IP && name == IP_OPTIONS) {
		*len = 0;
		return 0;
	}
	if (level == IPPROTO_TCP && name == TCP_INFO) {
		struct tcp_info ti = { .tcpi_state = TCP_ESTABLISHED };
		socklen_t l = *len < sizeof(ti) ? *len : (socklen_t)sizeof(ti);
		memcpy(val, &ti, l);
		*len = l;
		return 0;
	}
	return put_int_opt(val, len, 0);
}

static int setsockopt_held(int fd, int level, int name, const void *val, socklen_t len)
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
	if (!s && relayed_ip_level(level) && xsk_raddr_find(fd, NULL, NULL))
		return 0; /* the connection is the maker's: its options stay */
	if (!s)
		return REAL(setsockopt)(fd, level, name, val, len);
	if (val && len >= sizeof(int))
		memcpy(&v, val, sizeof(v));
	xsk_lock(s);
	bool fresh = xsk_state(s) == XSK_FRESH;
	int rc = 0;
	/* still the kernel's socket: it checks the value first */
	if (fresh && REAL(setsockopt)(fd, level, name, val, len) < 0)
		rc = -errno;
	if (!rc)
		rc = opt_set_own(s, level, name, val, len);
	if (rc == 1) {
		rc = 0;
		xsk_opt_record(s, level, name, v);
		if (level == SOL_SOCKET && name == SO_RCVBUF && fresh && v >= (int)XSK_RBUF_MIN)
			xsk_set_rbuf_size(s, (unsigned)v > XSK_RBUF_MAX ? XSK_RBUF_MAX : ((uint32_t)v & ~1u));
		if (!fresh && xsk_opt_tcp(level, name) && xsk_state(s) == XSK_CONNECTED) {
			int r = xsk_sock_tcp(s, XSOCK_TCP_SETOPT, level, name, (void *)(uintptr_t)val, &len);
			if (r < 0 && r != -ENOTCONN)
				rc = r; /* the TCP socket refused the value */
		}
	}
	xsk_unlock(s);
	xsk_fd_put(s);
	return rc ? (int)xsk_fail(-rc) : 0;
}

XSK_EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	return XSK_HELD(int, setsockopt_held(fd, level, name, val, len));
}

static int put_int_opt(void *val, socklen_t *len, int v)
{
	if (!val || !len || *len < sizeof(int))
		return (int)xsk_fail(EINVAL);
	memcpy(val, &v, sizeof(v));
	*len = sizeof(int);
	return 0;
}

static int getsockopt_held(int fd, int level, int name, void *val, socklen_t *len)
{
	struct xsk *s = xsk_tab_has(fd) ? xsk_fd_get(fd) : NULL;
	int v = 0;

	if (s && xsk_probing(s) && xsk_plain_step(fd, s)) {
		xsk_fd_put(s); /* its probe went plain: the kernel's socket */
		s = NULL;
	}
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
		return relayed_getsockopt(fd, level, name, val, len);
	xsk_lock(s);
	if (xsk_state(s) == XSK_FRESH) {
		xsk_unlock(s);
		xsk_fd_put(s);
		return REAL(getsockopt)(fd, level, name, val, len);
	}
	xsk_progress(s);
	if (level == IPPROTO_IP && name == IP_OPTIONS && len) {
		/* no IP options on the connection (sshd drops a client whose
		 * connection has some: it would read an int as options) */
		xsk_unlock(s);
		xsk_fd_put(s);
		*len = 0;
		return 0;
	}
	int own = opt_get_own(s, level, name, val, len);
	if (own <= 0) {
		xsk_unlock(s);
		xsk_fd_put(s);
		return own ? (int)xsk_fail(-own) : 0;
	}
	if (level == SOL_SOCKET) {
		switch (name) {
		case SO_ERROR:
			v = xsk_take_err(s);
			break;
		case SO_TYPE:
			v = SOCK_STREAM;
			break;
		case SO_DOMAIN:
			v = xsk_family(s);
			break;
		case SO_PROTOCOL:
			v = IPPROTO_TCP;
			break;
		case SO_ACCEPTCONN:
			v = xsk_state(s) == XSK_LISTENING;
			break;
		case SO_RCVBUF:
			v = (int)xsk_rbuf_size(s);
			break;
		case SO_SNDBUF:
			v = (int)xsk_sbuf_size(s);
			break;
		default:
			xsk_opt_find(s, level, name, &v);
			break;
		}
	} else {
		xsk_opt_find(s, level, name, &v);
	}
	xsk_unlock(s);
	xsk_fd_put(s);
	return put_int_opt(val, len, v);
}

XSK_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	return XSK_HELD(int, getsockopt_held(fd, level, name, val, len));
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

static int bind_held(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct xsk *s = xsk_tab_has(fd) ? xsk_fd_get(fd) : NULL;
	int rc;

	if (!s)
		return REAL(bind)(fd, addr, len);
	if (xsk_state(s) != XSK_FRESH) {
		xsk_fd_put(s);
		return (int)xsk_fail(EINVAL);
	}
	rc = REAL(bind)(fd, addr, len);
	if (rc == 0) {
		xsk_lock(s);
		xsk_learn_local(s, fd);
		xsk_unlock(s);
	}
	xsk_fd_put(s);
	return rc;
}

XSK_EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	return XSK_HELD(int, bind_held(fd, addr, len));
}

/* A relayed copy (xsk_relay_addr.c) answers with the connection's
 * addresses; any other descriptor is the kernel's. */
static int relayed_name(int fd, struct sockaddr *addr, socklen_t *len, bool peer)
{
	struct sockaddr_storage ss;

	if (!xsk_raddr_find(fd, peer ? NULL : &ss, peer ? &ss : NULL))
		return peer ? REAL(getpeername)(fd, addr, len) : REAL(getsockname)(fd, addr, len);
	if (!addr || !len)
		return (int)xsk_fail(EFAULT);
	xsk_addr_copy(&ss, addr, len);
	return 0;
}

XSK_EXPORT int getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct xsk *s = xsk_tab_has(fd) ? xsk_fd_get(fd) : NULL;

	if (!s || xsk_state(s) == XSK_FRESH) {
		if (s)
			xsk_fd_put(s);
		return relayed_name(fd, addr, len, false);
	}
	xsk_lock(s);
	if (!addr || !len) {
		xsk_unlock(s);
		xsk_fd_put(s);
		return (int)xsk_fail(EFAULT);
	}
	if (xsk_local(s)) {
		xsk_addr_copy(xsk_local(s), addr, len);
	} else {
		struct sockaddr_storage any = { .ss_family = (sa_family_t)xsk_family(s) };
		xsk_addr_copy(&any, addr, len);
	}
	xsk_unlock(s);
	xsk_fd_put(s);
	return 0;
}

XSK_EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct xsk *s = xsk_tab_has(fd) ? xsk_fd_get(fd) : NULL;
	int rc = 0;

	if (!s || xsk_state(s) == XSK_FRESH) {
		if (s)
			xsk_fd_put(s);
		return relayed_name(fd, addr, len, true);
	}
	xsk_lock(s);
	if (xsk_state(s) != XSK_CONNECTED)
		rc = (int)xsk_fail(ENOTCONN);
	else if (!addr || !len)
		rc = (int)xsk_fail(EFAULT);
	else
		xsk_addr_copy(xsk_peer(s), addr, len);
	xsk_unlock(s);
	xsk_fd_put(s);
	return rc;
}

