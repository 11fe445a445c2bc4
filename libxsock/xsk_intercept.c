/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The interposed POSIX calls.  Every call that takes an fd looks the fd up
 * in one array (the fd table); an fd that is not an IWARP socket goes
 * straight to libc, so an ordinary socket, file, pipe, Unix or UDP socket
 * pays one load and a compare.
 *
 * An IWARP socket keeps its original TCP socket until connect() or
 * listen(); then the fd number is taken over (dup3) by the socket's inner
 * epoll fd, whose readability the application's own poll/epoll can see.
 * Calls return -1 and set errno like the kernel's (one helper: fail()). */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "libxsock/xsk_config.h"
#include "libxsock/xsk_priv.h"
#include "libxsock/xsock.h"
#include "util/xs_clock.h"
#include "verbs/xs_priv_abi.h"

struct epset {
	struct xsk_epreg *regs;
};

struct fdent {
	_Atomic(struct xsk *) s;
	_Atomic(struct epset *) ep;
};

static struct fdent *tab;
static int tab_n;
static int tab_hi; /* above every fd number that ever named a socket (tab_mu) */
static pthread_mutex_t tab_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void exit_close(void);

static void init_once_fn(void)
{
	struct rlimit rl;
	size_t n = 65536;
	xsk_real_init();
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max > n)
		n = rl.rlim_max;
	if (n > (1u << 20))
		n = 1u << 20;
	/* untouched pages cost nothing */
	void *p = mmap(NULL, n * sizeof(struct fdent), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p != MAP_FAILED) {
		tab = p;
		tab_n = (int)n;
	}
	xsk_config_load();
	atexit(exit_close);
}

__attribute__((constructor)) static void xsk_ctor(void)
{
	pthread_once(&init_once, init_once_fn);
}

static inline void ensure_init(void)
{
	if (__builtin_expect(!tab_n, 0))
		pthread_once(&init_once, init_once_fn);
}

#define REAL(fn) (ensure_init(), xsk_real.fn)

/* The one lookup a non-IWARP fd pays. */
static inline struct xsk *lookup(int fd)
{
	if ((unsigned)fd >= (unsigned)tab_n)
		return NULL;
	return atomic_load_explicit(&tab[fd].s, memory_order_acquire);
}

static long fail(int e)
{
	errno = e;
	return -1;
}

static bool relay_take(int fd, struct xsk *s, bool claim, bool rd);

static struct xsk *sk_get(int fd)
{
	struct xsk *s;

	if (!lookup(fd))
		return NULL;
	pthread_mutex_lock(&tab_mu);
	s = atomic_load(&tab[fd].s);
	if (s)
		s->refs++;
	pthread_mutex_unlock(&tab_mu);
	if (s && s->relay && relay_take(fd, s, false, false))
		return NULL;
	return s;
}

static void unlink_regs_locked(struct xsk *s);
static void detach_fd(int fd);

static void sk_put(struct xsk *s)
{
	bool last;

	pthread_mutex_lock(&tab_mu);
	last = --s->refs == 0;
	if (last)
		unlink_regs_locked(s);
	pthread_mutex_unlock(&tab_mu);
	if (last)
		xsk_free(s);
}

static void attach_fd(int fd, struct xsk *s)
{
	pthread_mutex_lock(&tab_mu);
	s->refs++;
	s->nfds++;
	atomic_store(&tab[fd].s, s);
	if (fd >= tab_hi)
		tab_hi = fd + 1;
	pthread_mutex_unlock(&tab_mu);
}

/* fd no longer names its socket (closed or replaced). */
static void detach_fd(int fd)
{
	struct xsk *s;
	struct epset *ep;

	if ((unsigned)fd >= (unsigned)tab_n)
		return;
	pthread_mutex_lock(&tab_mu);
	s = atomic_exchange(&tab[fd].s, NULL);
	ep = atomic_exchange(&tab[fd].ep, NULL);
	if (ep) {
		/* the epoll set is gone: forget its registrations */
		struct xsk_epreg *r = ep->regs;
		while (r) {
			struct xsk_epreg *next = r->next_in_set;
			struct xsk_epreg **pp = &r->s->regs;
			r->s->ep_in_regs -= (r->events & EPOLLIN) != 0;
			while (*pp && *pp != r)
				pp = &(*pp)->next_of_sock;
			if (*pp)
				*pp = r->next_of_sock;
			free(r);
			r = next;
		}
		free(ep);
	}
	if (s)
		s->nfds--;
	pthread_mutex_unlock(&tab_mu);
	if (s)
		sk_put(s); /* the reference attach_fd took */
}

/* A connection another process claimed after fork (xsock(7) FORK): fd
 * becomes the relay channel's kernel socket (xsk_relay.c), its calls the
 * kernel's.  claim: this use may claim the connection (a data call, poll);
 * else only a socket already known foreign is converted.  rd: the call
 * reads (the owner then sends it what arrives).  true if fd was converted
 * (s's reference dropped). */
static bool relay_take(int fd, struct xsk *s, bool claim, bool rd)
{
	int sp = -1, fdfl;

	if (atomic_load(&xsk_fork_gen) && xsk_fork_sandboxed())
		return false; /* no dup3 there: the copy stays unusable */
	pthread_mutex_lock(&s->mu);
	if (s->state == XSK_CONNECTED && (s->foreign || claim) && !xsk_fork_use(s))
		sp = xsk_relay_client(s, rd);
	if (sp >= 0 && s->nonblock)
		xsk_real.fcntl(sp, F_SETFL, xsk_real.fcntl(sp, F_GETFL) | O_NONBLOCK);
	pthread_mutex_unlock(&s->mu);
	if (sp < 0)
		return false;
	fdfl = xsk_real.fcntl(fd, F_GETFD);
	if (xsk_real.dup3(sp, fd, fdfl >= 0 && (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0)
		return false;
	sk_put(s);
	detach_fd(fd);
	return true;
}

struct xsk *xsk_fd_get(int fd)
{
	ensure_init();
	return sk_get(fd);
}

void xsk_fd_put(struct xsk *s)
{
	sk_put(s);
}

static bool eligible(int domain, int type, int protocol)
{
	return (domain == AF_INET || domain == AF_INET6) &&
	       (type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) == SOCK_STREAM &&
	       (protocol == 0 || protocol == IPPROTO_TCP);
}

static int attach_fresh(int fd, int domain, bool nonblock, bool cloexec)
{
	struct xsk *s;

	if ((unsigned)fd >= (unsigned)tab_n)
		return -EMFILE;
	s = xsk_new(domain);
	if (!s)
		return -ENOMEM;
	s->nonblock = nonblock;
	s->cloexec = cloexec;
	attach_fd(fd, s);
	return 0;
}

/* ---- waiting ------------------------------------------------------------------ */

static int64_t now_ms(void)
{
	return (int64_t)xs_now_ms();
}

/* Block until the socket may have made progress (or timeout).  A writer
 * registers itself so that a thread which makes the socket writable wakes
 * it.  0, -EINTR or -XSK_ERESTART (xsk_sig_poll; snap: the call's start). */
static int sk_wait(struct xsk *s, int timeout_ms, bool writer, struct xsk_sigsnap *snap)
{
	struct pollfd p[4];
	int fds[4], n, rc = 0, rxfd;

	pthread_mutex_lock(&s->mu);
	n = xsk_wait_fds(s, fds, writer);
	rxfd = n ? xsk_rx_wait_begin(s) : -1; /* receive the data on this thread */
	if (rxfd >= 0)
		fds[n++] = rxfd;
	if (writer) {
		s->writers_waiting++;
		/* another thread may have made progress since the caller's
		 * attempt, before it could see a waiting writer to wake */
		if (xsk_revents(s) & (POLLOUT | POLLERR | POLLHUP))
			timeout_ms = 0;
	}
	pthread_mutex_unlock(&s->mu);
	for (int i = 0; i < n; i++)
		p[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
	if (!n)
		return -ENOTCONN;
	rc = xsk_sig_poll(p, (nfds_t)n, timeout_ms, snap);
	if (rxfd >= 0) {
		pthread_mutex_lock(&s->mu);
		xsk_rx_wait_end(s);
		pthread_mutex_unlock(&s->mu);
	}
	if (writer) {
		uint64_t v;
		pthread_mutex_lock(&s->mu);
		s->writers_waiting--;
		if (s->wake_fd >= 0 && xsk_real.read(s->wake_fd, &v, sizeof(v)) < 0)
			v = 0;
		pthread_mutex_unlock(&s->mu);
	}
	return rc;
}

static int remaining(int64_t deadline);

/* The deadline of a blocking call under a socket timeout (SO_RCVTIMEO,
 * SO_SNDTIMEO in us: 0 none, < 0 no wait): -1 for none. */
static int64_t timeo_deadline(int64_t us)
{
	if (!us)
		return -1;
	return now_ms() + (us < 0 ? 0 : (us + 999) / 1000);
}

/* One wait of a blocking call that cannot go on yet, by the kernel's rules
 * (socket(7), signal(7)): 0 to look again; -EAGAIN when the deadline
 * passed; -EINTR when a handler without SA_RESTART ran, or one with it
 * while the socket has a timeout or the call already moved data (which it
 * then returns); a handler with SA_RESTART alone restarts the call. */
static int wait_step(struct xsk *s, int64_t deadline, bool writer, bool moved,
		     struct xsk_sigsnap *snap)
{
	int left = remaining(deadline);

	if (left == 0)
		return -EAGAIN;
	int w = sk_wait(s, left, writer, snap);
	if (w == -XSK_ERESTART) {
		if (deadline >= 0 || moved)
			return -EINTR;
		xsk_sig_snap(snap); /* restarted */
		return 0;
	}
	return w == -EINTR ? -EINTR : 0;
}

/* ---- socket / options ------------------------------------------------------------ */

XSK_EXPORT int socket(int domain, int type, int protocol)
{
	int fd = REAL(socket)(domain, type, protocol);

	if (fd < 0 || !xsk_config_may_iwarp() || !eligible(domain, type, protocol))
		return fd;
	/* libiwarp's own TCP connections stay TCP */
	if (xsk_from_stack(__builtin_return_address(0)))
		return fd;
	if (attach_fresh(fd, domain, type & SOCK_NONBLOCK, type & SOCK_CLOEXEC) < 0) {
		xsk_real.close(fd);
		return (int)fail(ENOMEM);
	}
	lookup(fd)->by_rules = true; /* decided at connect()/listen() */
	return fd;
}

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
	detach_fd(fd);
	return true;
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
	struct xsk *s = sk_get(fd);
	int type, domain, flags, fdfl;
	socklen_t sl = sizeof(int);

	if (s) {
		enum xsk_state st = s->state;
		if (st == XSK_FRESH)
			s->by_rules = false; /* the application decided */
		sk_put(s);
		if (st == XSK_FRESH) {
			if (!on)
				detach_fd(fd);
			return 0;
		}
		return on ? 0 : (int)fail(EISCONN);
	}
	if (REAL(getsockopt)(fd, SOL_SOCKET, SO_TYPE, &type, &sl) < 0)
		return -1;
	sl = sizeof(int);
	if (xsk_real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &sl) < 0)
		return -1;
	if (type != SOCK_STREAM || (domain != AF_INET && domain != AF_INET6))
		return (int)fail(EOPNOTSUPP);
	if (!on)
		return 0;
	{
		struct sockaddr_storage ss;
		socklen_t al = sizeof(ss);
		int acc = 0;
		sl = sizeof(acc);
		if (xsk_real.getpeername(fd, (struct sockaddr *)&ss, &al) == 0 ||
		    (xsk_real.getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &sl) == 0 && acc))
			return (int)fail(EISCONN);
	}
	flags = xsk_real.fcntl(fd, F_GETFL);
	fdfl = xsk_real.fcntl(fd, F_GETFD);
	int rc = attach_fresh(fd, domain, flags >= 0 && (flags & O_NONBLOCK),
			      fdfl >= 0 && (fdfl & FD_CLOEXEC));
	return rc < 0 ? (int)fail(-rc) : 0;
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
			return (int)fail(ENOPROTOOPT);
		if (!val || len < sizeof(int))
			return (int)fail(EINVAL);
		memcpy(&v, val, sizeof(v));
		return set_iwarp_mode(fd, v != 0);
	}
	s = lookup(fd) ? sk_get(fd) : NULL;
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
	sk_put(s);
	return rc ? (int)fail(-rc) : 0;
}

static int put_int_opt(void *val, socklen_t *len, int v)
{
	if (!val || !len || *len < sizeof(int))
		return (int)fail(EINVAL);
	memcpy(val, &v, sizeof(v));
	*len = sizeof(int);
	return 0;
}

XSK_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct xsk *s = lookup(fd) ? sk_get(fd) : NULL;
	int v = 0;

	if (level == SOL_IWARP) {
		if (name != IWARP_MODE) {
			if (s)
				sk_put(s);
			return (int)fail(ENOPROTOOPT);
		}
		if (s) {
			sk_put(s);
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
		sk_put(s);
		return REAL(getsockopt)(fd, level, name, val, len);
	}
	xsk_progress(s);
	if (level == IPPROTO_IP && name == IP_OPTIONS && len) {
		/* no IP options on the connection (sshd drops a client whose
		 * connection has some: it would read an int as options) */
		pthread_mutex_unlock(&s->mu);
		sk_put(s);
		*len = 0;
		return 0;
	}
	int own = opt_get_own(s, level, name, val, len);
	if (own <= 0) {
		pthread_mutex_unlock(&s->mu);
		sk_put(s);
		return own ? (int)fail(-own) : 0;
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
	sk_put(s);
	return put_int_opt(val, len, v);
}

/* ---- addresses ------------------------------------------------------------------ */

static socklen_t sa_len(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static void copy_addr(const struct sockaddr_storage *ss, struct sockaddr *addr, socklen_t *len)
{
	socklen_t l = sa_len(ss);

	if (!addr || !len)
		return;
	memcpy(addr, ss, *len < l ? *len : l);
	*len = l;
}

XSK_EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct xsk *s = lookup(fd) ? sk_get(fd) : NULL;
	int rc;

	if (!s)
		return REAL(bind)(fd, addr, len);
	if (s->state != XSK_FRESH) {
		sk_put(s);
		return (int)fail(EINVAL);
	}
	rc = REAL(bind)(fd, addr, len);
	if (rc == 0) {
		socklen_t l = sizeof(s->local);
		pthread_mutex_lock(&s->mu);
		if (xsk_real.getsockname(fd, (struct sockaddr *)&s->local, &l) == 0)
			s->have_local = true;
		pthread_mutex_unlock(&s->mu);
	}
	sk_put(s);
	return rc;
}

XSK_EXPORT int getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct xsk *s = lookup(fd) ? sk_get(fd) : NULL;

	if (!s || s->state == XSK_FRESH) {
		if (s)
			sk_put(s);
		return REAL(getsockname)(fd, addr, len);
	}
	pthread_mutex_lock(&s->mu);
	if (!addr || !len) {
		pthread_mutex_unlock(&s->mu);
		sk_put(s);
		return (int)fail(EFAULT);
	}
	if (s->have_local) {
		copy_addr(&s->local, addr, len);
	} else {
		struct sockaddr_storage any = { .ss_family = (sa_family_t)s->family };
		copy_addr(&any, addr, len);
	}
	pthread_mutex_unlock(&s->mu);
	sk_put(s);
	return 0;
}

XSK_EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct xsk *s = lookup(fd) ? sk_get(fd) : NULL;
	int rc = 0;

	if (!s || s->state == XSK_FRESH) {
		if (s)
			sk_put(s);
		return REAL(getpeername)(fd, addr, len);
	}
	pthread_mutex_lock(&s->mu);
	if (s->state != XSK_CONNECTED)
		rc = (int)fail(ENOTCONN);
	else if (!addr || !len)
		rc = (int)fail(EFAULT);
	else
		copy_addr(&s->peer, addr, len);
	pthread_mutex_unlock(&s->mu);
	sk_put(s);
	return rc;
}

/* ---- taking the fd number over ----------------------------------------------------- */

/* What the kernel's epoll set watches for an IWARP socket registered for
 * app: its inner epoll fd, readable on progress, buffered input or
 * arriving octets (xsk_progress_watch); epoll_wait computes the events
 * (and disables a fired EPOLLONESHOT registration itself: the kernel's
 * report may find nothing to report). */
static uint32_t ep_kernel_events(uint32_t app)
{
	return EPOLLIN | (app & EPOLLET);
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
	if (s->nfds > 1) {
		for (int i = 0; i < tab_n; i++)
			if (i != fd && atomic_load(&tab[i].s) == s)
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
	pthread_mutex_lock(&tab_mu);
	for (struct xsk_epreg *r = s->regs; r; r = r->next_of_sock) {
		struct epoll_event ev = { .events = ep_kernel_events(r->events), .data = r->data };
		xsk_real.epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->fd, &ev);
		r->look = true;
	}
	pthread_mutex_unlock(&tab_mu);
	return 0;
}

XSK_EXPORT int listen(int fd, int backlog)
{
	struct xsk *s = lookup(fd) ? sk_get(fd) : NULL;
	int rc;

	if (s && rules_say_tcp(fd, s, XSK_ROLE_LISTEN, NULL)) {
		sk_put(s);
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
		if (xsk_real.bind(fd, (struct sockaddr *)&any, sa_len(&any)) < 0 ||
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
	sk_put(s);
	return rc ? (int)fail(-rc) : 0;
}

XSK_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct xsk *s = lookup(fd) ? sk_get(fd) : NULL;
	int rc = 0;

	if (s && addr &&
	    ((addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) ||
	     (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))) &&
	    rules_say_tcp(fd, s, XSK_ROLE_CONNECT, addr)) {
		sk_put(s);
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
	int64_t deadline = timeo_deadline(s->sndtimeo_us);
	xsk_sig_snap(&snap);
	while (s->state == XSK_CONNECTING) {
		if (s->nonblock) {
			rc = -EINPROGRESS;
			goto out;
		}
		pthread_mutex_unlock(&s->mu);
		int w = wait_step(s, deadline, true, false, &snap);
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
	sk_put(s);
	return rc ? (int)fail(-rc) : 0;
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
	copy_addr(&peer, addr, len);
	return fd;
}

XSK_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	struct xsk *s = lookup(fd) ? sk_get(fd) : NULL;
	struct xsk *c = NULL;
	int rc = 0;

	if (!s)
		return REAL(accept4)(fd, addr, len, flags);
	if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) {
		sk_put(s);
		return (int)fail(EINVAL);
	}
	xsk_fork_listener_use(s);
	struct xsk_sigsnap snap;
	int64_t deadline = -2; /* set on the first look */
	xsk_sig_snap(&snap);
	for (;;) {
		pthread_mutex_lock(&s->mu);
		if (deadline == -2)
			deadline = timeo_deadline(s->rcvtimeo_us);
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
		rc = wait_step(s, deadline, false, false, &snap);
		if (rc)
			break; /* -EINTR, or -EAGAIN after SO_RCVTIMEO */
	}
	if (c && c->plain_fd >= 0) {
		int pfd = accept_plain(s, c, addr, len, flags);
		sk_put(s);
		return pfd;
	}
	sk_put(s);
	if (rc == -2)
		return REAL(accept4)(fd, addr, len, flags);
	if (rc)
		return (int)fail(-rc);
	int nfd = c->epfd;
	if (!(flags & SOCK_CLOEXEC))
		xsk_real.fcntl(nfd, F_SETFD, 0);
	c->cloexec = (flags & SOCK_CLOEXEC) != 0;
	c->nonblock = (flags & SOCK_NONBLOCK) != 0;
	if (c->nonblock)
		xsk_real.fcntl(nfd, F_SETFL, O_NONBLOCK);
	c->epfd_app = true;
	if ((unsigned)nfd >= (unsigned)tab_n) {
		xsk_free(c);
		return (int)fail(EMFILE);
	}
	attach_fd(nfd, c);
	pthread_mutex_lock(&c->mu);
	xsk_opts_apply(c);
	xsk_progress(c);
	if (addr && len)
		copy_addr(&c->peer, addr, len);
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

/* ---- data ------------------------------------------------------------------------ */

#define XSK_IOV_STACK 16

static size_t iov_total(const struct iovec *iov, int cnt)
{
	size_t t = 0;

	for (int i = 0; i < cnt; i++)
		t += iov[i].iov_len;
	return t;
}

/* iov minus its first skip bytes, into out (cap entries). */
static int iov_skip(const struct iovec *iov, int cnt, size_t skip, struct iovec *out)
{
	int n = 0;

	for (int i = 0; i < cnt; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		out[n].iov_base = (uint8_t *)iov[i].iov_base + skip;
		out[n].iov_len = iov[i].iov_len - skip;
		skip = 0;
		n++;
	}
	return n;
}

/* A blocking receive returns once it has min(SO_RCVLOWAT, len) bytes (all
 * of them with MSG_WAITALL), at end of stream or error, or (with what it
 * has, or EAGAIN/EINTR) after SO_RCVTIMEO or a signal. */
static ssize_t sk_recv(struct xsk *s, const struct iovec *iov, int cnt, int flags)
{
	bool peek = (flags & MSG_PEEK) != 0;
	size_t want = iov_total(iov, cnt), got = 0, target;
	struct iovec stackv[XSK_IOV_STACK], *v = stackv;
	struct xsk_sigsnap snap;
	int64_t deadline;
	ssize_t r;

	if (cnt < 0 || cnt > 1024)
		return fail(EINVAL);
	if (flags & MSG_OOB)
		return fail(EOPNOTSUPP); /* no urgent data on an IWARP socket */
	xsk_sig_snap(&snap);
	pthread_mutex_lock(&s->mu);
	if (!xsk_relay_self)
		s->app_read_gen = atomic_load(&xsk_fork_gen); /* (xsk_relay.c) */
	deadline = timeo_deadline(s->rcvtimeo_us);
	target = (flags & MSG_WAITALL) && !peek ? want :
		 (size_t)s->rcvlowat < want ? (size_t)s->rcvlowat : want;
	pthread_mutex_unlock(&s->mu);
	if (cnt > XSK_IOV_STACK) {
		v = malloc((size_t)cnt * sizeof(*v));
		if (!v)
			return fail(ENOMEM);
	}
	for (;;) {
		int n = iov_skip(iov, cnt, got, v);
		pthread_mutex_lock(&s->mu);
		xsk_progress_io(s, flags, true);
		bool nb = s->nonblock || (flags & MSG_DONTWAIT);
		if (peek && !nb && s->state == XSK_CONNECTED && s->rbytes < target && !s->err &&
		    !s->peer_shut_wr && !s->shut_rd)
			r = -EAGAIN; /* MSG_PEEK under SO_RCVLOWAT: wait for the mark */
		else
			r = want ? xsk_recv_locked(s, v, n, flags) : 0;
		if (!want && s->state != XSK_CONNECTED)
			r = -ENOTCONN;
		xsk_set_ready_after_io(s, r == -EAGAIN);
		pthread_mutex_unlock(&s->mu);
		if (r > 0) {
			got += (size_t)r;
			if (peek || got >= target)
				break;
			continue;
		}
		if (r == 0)
			break;
		if (r != -EAGAIN || nb) {
			if (!got) {
				errno = (int)-r;
				got = (size_t)-1;
			}
			break;
		}
		int w = wait_step(s, deadline, false, got > 0, &snap);
		if (w) {
			if (!got) {
				errno = -w; /* EAGAIN after SO_RCVTIMEO, EINTR */
				got = (size_t)-1;
			}
			break;
		}
	}
	if (v != stackv)
		free(v);
	return (ssize_t)got;
}

/* A blocking send returns when all is sent, or (with the count sent, or
 * EAGAIN/EINTR) after SO_SNDTIMEO or a signal. */
static ssize_t sk_send(struct xsk *s, const struct iovec *iov, int cnt, int flags)
{
	size_t total = iov_total(iov, cnt), done = 0;
	struct xsk_sigsnap snap;
	int64_t deadline;
	ssize_t r;

	if (cnt < 0 || cnt > 1024)
		return fail(EINVAL);
	if (flags & MSG_OOB)
		return fail(EOPNOTSUPP);
	xsk_sig_snap(&snap);
	pthread_mutex_lock(&s->mu);
	deadline = timeo_deadline(s->sndtimeo_us);
	pthread_mutex_unlock(&s->mu);
	for (;;) {
		pthread_mutex_lock(&s->mu);
		bool skipped = xsk_progress_io(s, flags, false);
		r = xsk_send_locked(s, iov, cnt, flags, &done);
		bool nb = s->nonblock || (flags & MSG_DONTWAIT);
		bool connecting = s->state == XSK_CONNECTING;
		if (skipped && (r == -EAGAIN || (r >= 0 && done < total))) {
			s->rx_hint = true; /* the credits may wait in the TCP socket */
			pthread_mutex_unlock(&s->mu);
			continue;
		}
		xsk_set_ready_after_io(s, false);
		pthread_mutex_unlock(&s->mu);
		if (r < 0) {
			if (done)
				return (ssize_t)done;
			if (r == -EPIPE && !(flags & MSG_NOSIGNAL))
				raise(SIGPIPE);
			return fail((int)-r);
		}
		if (done >= total)
			return (ssize_t)done;
		if (nb) {
			if (done)
				return (ssize_t)done;
			return fail(connecting ? EAGAIN : EAGAIN);
		}
		int w = wait_step(s, deadline, true, done > 0, &snap);
		if (w)
			return done ? (ssize_t)done : fail(-w);
	}
}

/* write()'s send for sendfile (xsk_sendfile.c). */
ssize_t xsk_sock_send(struct xsk *s, const struct iovec *iov, int cnt, int flags)
{
	return sk_send(s, iov, cnt, flags);
}

#define RECV_WRAP(s_, iov_, cnt_, flags_)              \
	do {                                           \
		ssize_t r_ = sk_recv(s_, iov_, cnt_, flags_); \
		sk_put(s_);                            \
		return r_;                             \
	} while (0)

#define SEND_WRAP(s_, iov_, cnt_, flags_)              \
	do {                                           \
		ssize_t r_ = sk_send(s_, iov_, cnt_, flags_); \
		sk_put(s_);                            \
		return r_;                             \
	} while (0)

ssize_t xsk_relay_io(struct xsk *s, void *buf, size_t n, int dir)
{
	struct iovec v = { buf, n };

	if (dir < 0) {
		int r;
		pthread_mutex_lock(&s->mu);
		r = xsk_shutdown_locked(s, SHUT_WR);
		xsk_set_ready(s);
		pthread_mutex_unlock(&s->mu);
		return r < 0 ? fail(-r) : 0;
	}
	return dir ? sk_send(s, &v, 1, MSG_DONTWAIT | MSG_NOSIGNAL) :
		     sk_recv(s, &v, 1, MSG_DONTWAIT);
}

/* A FRESH socket is still the kernel's: pass through.  rd: a receive or a
 * wait for input (data_sock tells it by the caller's name). */
#define data_sock(fd) data_sock_rd(fd, strstr(__func__, "read") || strstr(__func__, "recv"))
static struct xsk *data_sock_rd(int fd, bool rd)
{
	struct xsk *s = lookup(fd) ? sk_get(fd) : NULL;

	if (s && s->relay && relay_take(fd, s, true, rd))
		return NULL;
	if (s && s->state == XSK_FRESH) {
		sk_put(s);
		return NULL;
	}
	return s;
}

XSK_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	struct xsk *s = data_sock(fd);

	if (!s)
		return REAL(read)(fd, buf, n);
	struct iovec v = { buf, n };
	RECV_WRAP(s, &v, 1, 0);
}

XSK_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	struct xsk *s = data_sock(fd);

	if (!s)
		return REAL(write)(fd, buf, n);
	struct iovec v = { (void *)(uintptr_t)buf, n };
	SEND_WRAP(s, &v, 1, 0);
}

XSK_EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	struct xsk *s = data_sock(fd);

	if (!s)
		return REAL(readv)(fd, iov, cnt);
	RECV_WRAP(s, iov, cnt, 0);
}

XSK_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	struct xsk *s = data_sock(fd);

	if (!s)
		return REAL(writev)(fd, iov, cnt);
	SEND_WRAP(s, iov, cnt, 0);
}

XSK_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	struct xsk *s = data_sock(fd);

	if (!s)
		return REAL(recv)(fd, buf, n, flags);
	struct iovec v = { buf, n };
	RECV_WRAP(s, &v, 1, flags);
}

XSK_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	struct xsk *s = data_sock(fd);

	if (!s)
		return REAL(send)(fd, buf, n, flags);
	struct iovec v = { (void *)(uintptr_t)buf, n };
	SEND_WRAP(s, &v, 1, flags);
}

XSK_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *addr,
			    socklen_t *alen)
{
	struct xsk *s = data_sock(fd);

	if (!s)
		return REAL(recvfrom)(fd, buf, n, flags, addr, alen);
	struct iovec v = { buf, n };
	ssize_t r = sk_recv(s, &v, 1, flags);
	if (r >= 0 && addr && alen) {
		pthread_mutex_lock(&s->mu);
		copy_addr(&s->peer, addr, alen);
		pthread_mutex_unlock(&s->mu);
	}
	sk_put(s);
	return r;
}

XSK_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags,
			  const struct sockaddr *addr, socklen_t alen)
{
	struct xsk *s = data_sock(fd);

	if (!s)
		return REAL(sendto)(fd, buf, n, flags, addr, alen);
	/* a connected stream socket ignores the address, as TCP does */
	struct iovec v = { (void *)(uintptr_t)buf, n };
	SEND_WRAP(s, &v, 1, flags);
}

XSK_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct xsk *s = data_sock(fd);

	if (!s)
		return REAL(recvmsg)(fd, msg, flags);
	ssize_t r = sk_recv(s, msg->msg_iov, (int)msg->msg_iovlen, flags);
	if (r >= 0) {
		if (msg->msg_name && msg->msg_namelen) {
			pthread_mutex_lock(&s->mu);
			copy_addr(&s->peer, msg->msg_name, &msg->msg_namelen);
			pthread_mutex_unlock(&s->mu);
		}
		msg->msg_controllen = 0;
		msg->msg_flags = 0;
	}
	sk_put(s);
	return r;
}

XSK_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct xsk *s = data_sock(fd);

	if (!s)
		return REAL(sendmsg)(fd, msg, flags);
	SEND_WRAP(s, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

XSK_EXPORT int shutdown(int fd, int how)
{
	struct xsk *s = data_sock(fd);
	int rc;

	if (!s)
		return REAL(shutdown)(fd, how);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
		sk_put(s);
		return (int)fail(EINVAL);
	}
	pthread_mutex_lock(&s->mu);
	xsk_progress(s);
	rc = xsk_shutdown_locked(s, how);
	pthread_mutex_unlock(&s->mu);
	sk_put(s);
	return rc ? (int)fail(-rc) : 0;
}

/* ---- fork (xsk_fork.c) ---- */

void xsk_tab_fork_prepare(void)
{
	struct xsk **v = NULL;
	int n = 0;
	unsigned g = atomic_load(&xsk_fork_gen) + 1;

	/* a relay channel per connection (xsk_relay.c), made before the
	 * table lock is taken for the fork (s->mu comes after tab_mu) */
	pthread_mutex_lock(&tab_mu);
	for (int fd = 0; fd < tab_hi && fd < tab_n; fd++)
		n += atomic_load(&tab[fd].s) != NULL;
	v = n ? calloc((size_t)n, sizeof(*v)) : NULL;
	n = 0;
	for (int fd = 0; v && fd < tab_hi && fd < tab_n; fd++) {
		struct xsk *s = atomic_load(&tab[fd].s);
		if (s && s->relay_gen != g && s->state == XSK_CONNECTED) {
			s->relay_gen = g; /* once per socket, whatever its fd numbers */
			s->refs++;
			v[n++] = s;
		}
	}
	pthread_mutex_unlock(&tab_mu);
	for (int i = 0; i < n; i++) {
		xsk_relay_fork_prepare(v[i]);
		sk_put(v[i]);
	}
	free(v);
	pthread_mutex_lock(&tab_mu);
}

void xsk_tab_fork_parent(void (*fn)(struct xsk *s))
{
	struct xsk **ls = NULL;
	int n = 0, cap = 0;

	for (int fd = 0; fd < tab_hi && fd < tab_n; fd++) {
		struct xsk *s = atomic_load(&tab[fd].s), **m;
		bool seen = false;
		if (!s || s->state != XSK_LISTENING)
			continue;
		for (int i = 0; i < n; i++)
			seen |= ls[i] == s; /* dup'ed */
		if (seen)
			continue;
		if (n == cap) {
			m = realloc(ls, (size_t)(cap ? 2 * cap : 8) * sizeof(*ls));
			if (!m)
				break;
			ls = m;
			cap = cap ? 2 * cap : 8;
		}
		ls[n++] = s;
		s->refs++;
	}
	pthread_mutex_unlock(&tab_mu);
	for (int i = 0; i < n; i++) {
		fn(ls[i]);
		sk_put(ls[i]);
	}
	free(ls);
}

void xsk_tab_fork_child(void (*fn)(int fd, struct xsk *s))
{
	pthread_mutex_init(&tab_mu, NULL);
	for (int fd = 0; fd < tab_hi && fd < tab_n; fd++) {
		struct xsk *s = atomic_load(&tab[fd].s);
		if (s)
			fn(fd, s);
	}
}

/* Exec hand-over (xsk_exec.c): each fd number naming a socket, in
 * increasing order, under the table lock (fn must not call back here). */
void xsk_tab_each(void (*fn)(int fd, struct xsk *s, void *arg), void *arg)
{
	ensure_init();
	pthread_mutex_lock(&tab_mu);
	for (int fd = 0; fd < tab_hi && fd < tab_n; fd++) {
		struct xsk *s = atomic_load(&tab[fd].s);
		if (s)
			fn(fd, s, arg);
	}
	pthread_mutex_unlock(&tab_mu);
}

int xsk_tab_next(int fd)
{
	ensure_init();
	for (; fd >= 0 && fd < tab_hi && fd < tab_n; fd++)
		if (atomic_load(&tab[fd].s) || atomic_load(&tab[fd].ep))
			return fd;
	return -1;
}

int xsk_tab_adopt(int fd, struct xsk *s)
{
	ensure_init();
	if ((unsigned)fd >= (unsigned)tab_n)
		return -EMFILE;
	attach_fd(fd, s);
	return 0;
}

/* ---- fd management ---------------------------------------------------------------- */

XSK_EXPORT int close(int fd)
{
	if (lookup(fd) || ((unsigned)fd < (unsigned)tab_n && atomic_load(&tab[fd].ep)))
		detach_fd(fd);
	return REAL(close)(fd);
}

/* exit(3): registered before main, so it runs after the program's own
 * handlers.  The kernel would close an IWARP socket's TCP connection at
 * exit with the peer's last control messages unread, which is a reset
 * that can cost the peer the data it has not read yet: close the sockets
 * as close(2) does (the rsockets DISCONNECT, then the engine drains until
 * the peer's FIN: libiwarp's exit wait), after stdio has flushed into
 * them. */
int xsk_close_own(int fd) __attribute__((alias("close"), visibility("hidden")));

static void exit_close(void)
{
	fflush(NULL);
	for (int fd = 0; fd < tab_hi && fd < tab_n; fd++)
		if (atomic_load(&tab[fd].s))
			xsk_close_own(fd);
}

/* _exit skips atexit and destructors, but a process that owns IWARP
 * connections must still close them as exit() does: rsync's receiver,
 * which its parent ends with SIGUSR2 and whose handler calls _exit, owned
 * the daemon's connection about 1 upload in 50 (it read first after the
 * fork); the kernel then closed the socket with the peer's credit updates
 * unread and reset it, and the client lost rsync's last message
 * ("Connection reset by peer").  Not in a vfork child, whose memory is its
 * parent's.  As with exit() from a signal handler, a handler that
 * interrupted this thread inside libxsock may wait on its locks. */
static void exit_quick(void)
{
	const struct xsk_stack *st;
	bool any = false;

	if (!tab_n || xsk_vfork_child())
		return;
	for (int fd = 0; fd < tab_hi && fd < tab_n; fd++) {
		struct xsk *s = atomic_load(&tab[fd].s) ? sk_get(fd) : NULL;
		/* only connections this process owns: a copy it never used
		 * (sshd's sandboxed child, whose seccomp filter kills a
		 * process that makes an eventfd) is left as it is */
		bool own = s && s->state == XSK_CONNECTED && !xsk_fork_quiet(s);

		if (s)
			sk_put(s);
		if (own && !any && xsk_fork_sandboxed())
			return;
		if (own) {
			any = true;
			xsk_close_own(fd);
		}
	}
	if (!any)
		return; /* (no stdio flush: _exit's callers rely on that) */
	st = xsk_stack();
	if (st && st->exit_wait)
		st->exit_wait();
}

XSK_EXPORT void _exit(int status)
{
	static void (*real_exit)(int);

	exit_quick();
	if (!real_exit)
		*(void **)&real_exit = dlsym(RTLD_NEXT, "_exit");
	if (real_exit)
		real_exit(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

XSK_EXPORT void _Exit(int status)
{
	_exit(status);
}

static void dup_note(int oldfd, int newfd)
{
	struct xsk *s;

	if (newfd < 0 || oldfd == newfd)
		return;
	if ((unsigned)newfd < (unsigned)tab_n &&
	    (atomic_load(&tab[newfd].s) || atomic_load(&tab[newfd].ep)))
		detach_fd(newfd); /* closed by dup2/dup3 */
	s = lookup(oldfd) ? sk_get(oldfd) : NULL;
	if (!s)
		return;
	if ((unsigned)newfd < (unsigned)tab_n)
		attach_fd(newfd, s);
	sk_put(s);
}

XSK_EXPORT int dup(int fd)
{
	int nfd = REAL(dup)(fd);

	if (nfd >= 0 && lookup(fd))
		dup_note(fd, nfd);
	return nfd;
}

XSK_EXPORT int dup2(int fd, int nfd)
{
	int rc = REAL(dup2)(fd, nfd);

	if (rc >= 0)
		dup_note(fd, rc);
	return rc;
}

XSK_EXPORT int dup3(int fd, int nfd, int flags)
{
	int rc = REAL(dup3)(fd, nfd, flags);

	if (rc >= 0)
		dup_note(fd, rc);
	return rc;
}

XSK_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;
	struct xsk *s;
	int rc;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!lookup(fd))
		return REAL(fcntl)(fd, cmd, arg);
	rc = REAL(fcntl)(fd, cmd, arg);
	if (rc < 0)
		return rc;
	switch (cmd) {
	case F_SETFL:
		s = sk_get(fd);
		if (s) {
			s->nonblock = ((long)(uintptr_t)arg & O_NONBLOCK) != 0;
			sk_put(s);
		}
		break;
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		dup_note(fd, rc);
		break;
	default:
		break;
	}
	return rc;
}

/* A program built with _FILE_OFFSET_BITS=64 (redis, nginx) calls fcntl64;
 * on x86_64 it is the same call. */
XSK_EXPORT int fcntl64(int fd, int cmd, ...) __attribute__((alias("fcntl")));

/* fstat(2) on an IWARP socket: the fd number holds the inner epoll fd, but
 * the application asked about a socket (inetd-style programs, nginx and
 * sshd look at S_ISSOCK). */
static int stat_fix(int fd, int rc, struct stat *st)
{
	if (rc == 0 && st && lookup(fd))
		st->st_mode = (st->st_mode & ~(mode_t)S_IFMT) | S_IFSOCK;
	return rc;
}

XSK_EXPORT int fstat(int fd, struct stat *st)
{
	static int (*real_fstat)(int, struct stat *);

	if (!real_fstat)
		*(void **)&real_fstat = dlsym(RTLD_NEXT, "fstat");
	return stat_fix(fd, real_fstat(fd, st), st);
}

/* struct stat64 is struct stat on x86_64 */
_Static_assert(sizeof(struct stat64) == sizeof(struct stat), "stat64 is stat");
XSK_EXPORT int fstat64(int fd, struct stat64 *st)
{
	static int (*real_fstat64)(int, struct stat64 *);

	if (!real_fstat64)
		*(void **)&real_fstat64 = dlsym(RTLD_NEXT, "fstat64");
	return stat_fix(fd, real_fstat64(fd, st), (struct stat *)st);
}

/* FIONBIO on any IWARP socket, also one not yet connected or listening
 * (anet sets it before listen): the kernel's flag on the fd, and ours,
 * which connect, accept and the data calls obey. */
static int set_fionbio(int fd, void *arg)
{
	struct xsk *s = sk_get(fd);
	int rc = REAL(ioctl)(fd, FIONBIO, arg);

	if (s && rc == 0) {
		int v = 0;
		memcpy(&v, arg, sizeof(v));
		pthread_mutex_lock(&s->mu);
		s->nonblock = v != 0;
		pthread_mutex_unlock(&s->mu);
	}
	if (s)
		sk_put(s);
	return rc;
}

XSK_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;
	struct xsk *s;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (req == FIONBIO && lookup(fd))
		return set_fionbio(fd, arg);
	s = data_sock(fd);
	if (!s)
		return REAL(ioctl)(fd, req, arg);
	int rc = 0;
	pthread_mutex_lock(&s->mu);
	if (req == FIONREAD) {
		xsk_progress(s);
		int v = s->state == XSK_CONNECTED && !s->shut_rd ? (int)s->rbytes : 0;
		if (arg)
			memcpy(arg, &v, sizeof(v));
		else
			rc = (int)fail(EFAULT);
	} else {
		rc = (int)fail(ENOTTY);
	}
	pthread_mutex_unlock(&s->mu);
	sk_put(s);
	return rc;
}

/* ---- poll / select ------------------------------------------------------------------ */

/* The poll(2) bits of s after progress.  From epoll_wait (ep), the
 * socket is watched (xsk_progress_watch); reported: the kernel saw its
 * inner epoll fd readable, so its TCP socket is likely readable too, and
 * without that report a watched socket has nothing to receive.  From
 * poll (!ep), reported: the wait on the connection's TCP socket ended
 * with it readable (xsk_rx_wait_begin). */
static short sk_poll_one(struct xsk *s, short events, bool ep, bool reported)
{
	short r;

	pthread_mutex_lock(&s->mu);
	if (events & POLLIN)
		s->app_read_gen = atomic_load(&xsk_fork_gen); /* (xsk_relay.c) */
	if (ep) {
		xsk_progress_watch(s, reported ? XSOCK_RX_ALWAYS :
				      s->rxw_fd >= 0 ? XSOCK_RX_NONE : XSOCK_RX_MAYBE);
	} else if (reported) {
		xsk_progress_rx(s, XSOCK_RX_ALWAYS);
		s->rx_hint = false; /* received just now */
	} else {
		xsk_progress(s);
	}
	r = xsk_revents(s);
	pthread_mutex_unlock(&s->mu);
	return (short)(r & (events | POLLERR | POLLHUP | POLLNVAL));
}

static int remaining(int64_t deadline)
{
	if (deadline < 0)
		return -1;
	int64_t left = deadline - now_ms();
	return left > 0 ? (int)left : 0;
}

/* poll(2) over a set that contains IWARP sockets: their readiness is
 * computed here, the rest (and the IWARP sockets' event channels) go to
 * the kernel. */
static int poll_emul(struct pollfd *fds, nfds_t n, int timeout, const sigset_t *mask)
{
	struct xsk **socks = calloc(n ? n : 1, sizeof(*socks));
	struct pollfd *w = calloc(n * 5 + 1, sizeof(*w));
	bool *writer = calloc(n ? n : 1, sizeof(*writer));
	/* a reader waiting on the connection's TCP socket itself: its slot in
	 * w (0: none), then whether that socket woke us */
	nfds_t *rxw = calloc(n ? n : 1, sizeof(*rxw));
	bool *rx_woke = calloc(n ? n : 1, sizeof(*rx_woke));
	int64_t deadline = timeout < 0 ? -1 : now_ms() + timeout;
	int ret = 0;

	if (!socks || !w || !writer || !rxw || !rx_woke) {
		free(socks);
		free(w);
		free(writer);
		free(rxw);
		free(rx_woke);
		return (int)fail(ENOMEM);
	}
	for (nfds_t i = 0; i < n; i++)
		socks[i] = data_sock(fds[i].fd);
	for (;;) {
		int ready = 0;
		nfds_t nw = 0;

		for (nfds_t i = 0; i < n; i++) {
			if (!socks[i])
				continue;
			fds[i].revents = sk_poll_one(socks[i], fds[i].events, false, rx_woke[i]);
			rx_woke[i] = false;
			if (fds[i].revents)
				ready++;
		}
		for (nfds_t i = 0; i < n; i++)
			if (!socks[i])
				w[nw++] = fds[i];
		for (nfds_t i = 0; i < n; i++) {
			if (socks[i] && !ready) {
				/* channels, the ready fd for readers, the wake fd
				 * (registered as a waiting writer) for writers */
				int cf[4]; /* xsk_wait_fds' 3, plus the wake fd of a reader-writer */
				struct xsk *sk = socks[i];
				pthread_mutex_lock(&sk->mu);
				int k = xsk_wait_fds(sk, cf, false);
				if (!(fds[i].events & POLLIN))
					k--; /* the ready fd is the last one */
				/* a reader waits on the TCP socket as well and
				 * receives on this thread (as a blocked read does) */
				int tcp = fds[i].events & POLLIN ? xsk_rx_wait_begin(sk) : -1;
				if (tcp >= 0) {
					rxw[i] = nw + 1;
					w[nw++] = (struct pollfd){ .fd = tcp, .events = POLLIN };
				}
				if ((fds[i].events & POLLOUT) && sk->wake_fd >= 0) {
					cf[k++] = sk->wake_fd;
					sk->writers_waiting++;
					writer[i] = true;
					/* writable since sk_poll_one: nobody woke us */
					if (xsk_revents(sk) & (POLLOUT | POLLERR | POLLHUP)) {
						uint64_t one = 1;
						if (xsk_real.write(sk->wake_fd, &one, sizeof(one)) < 0)
							one = 0;
					}
				}
				pthread_mutex_unlock(&sk->mu);
				for (int j = 0; j < k; j++)
					w[nw++] = (struct pollfd){ .fd = cf[j], .events = POLLIN };
			}
		}
		int t = ready ? 0 : remaining(deadline);
		struct timespec ts = { t / 1000, (long)(t % 1000) * 1000000 };
		/* ready with only IWARP sockets: nothing left to ask the kernel */
		int k = ready && !nw ? 0 : xsk_real.ppoll(w, nw, t < 0 ? NULL : &ts, mask);
		int e = errno;
		for (nfds_t i = 0; i < n; i++) {
			if (writer[i]) {
				uint64_t v;
				pthread_mutex_lock(&socks[i]->mu);
				socks[i]->writers_waiting--;
				if (xsk_real.read(socks[i]->wake_fd, &v, sizeof(v)) < 0)
					v = 0;
				pthread_mutex_unlock(&socks[i]->mu);
				writer[i] = false;
			}
			if (rxw[i]) {
				rx_woke[i] = k > 0 && (w[rxw[i] - 1].revents & POLLIN);
				pthread_mutex_lock(&socks[i]->mu);
				xsk_rx_wait_end(socks[i]);
				pthread_mutex_unlock(&socks[i]->mu);
				rxw[i] = 0;
			}
		}
		errno = e;
		if (k < 0) {
			ret = ready ? ready : -1;
			break;
		}
		nfds_t j = 0;
		int other = 0;
		for (nfds_t i = 0; i < n; i++) {
			if (!socks[i]) {
				fds[i].revents = w[j++].revents;
				if (fds[i].revents)
					other++;
			}
		}
		if (ready + other > 0 || t == 0) {
			ret = ready + other;
			break;
		}
		/* an IWARP socket's channel fired: recompute */
	}
	for (nfds_t i = 0; i < n; i++)
		if (socks[i])
			sk_put(socks[i]);
	free(socks);
	free(w);
	free(writer);
	free(rxw);
	free(rx_woke);
	return ret;
}

static bool any_iwarp_pollfd(const struct pollfd *fds, nfds_t n)
{
	for (nfds_t i = 0; i < n; i++) {
		struct xsk *s = lookup(fds[i].fd);
		if (s && s->relay) {
			if (!(s = data_sock_rd(fds[i].fd, fds[i].events & POLLIN)))
				continue; /* now the relay's kernel socket */
			xsk_fd_put(s);
		}
		if (s && s->state != XSK_FRESH)
			return true;
	}
	return false;
}

/* glibc declares poll's fds write-only (access attribute), which makes gcc
 * believe our read of the caller's array reads uninitialised memory. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
XSK_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (!any_iwarp_pollfd(fds, n))
		return REAL(poll)(fds, n, timeout);
	return poll_emul(fds, n, timeout, NULL);
}

static int ts_ms(const struct timespec *ts)
{
	if (!ts)
		return -1;
	int64_t ms = (int64_t)ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000;
	return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

XSK_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	if (!any_iwarp_pollfd(fds, n))
		return REAL(ppoll)(fds, n, ts, mask);
	return poll_emul(fds, n, ts_ms(ts), mask);
}
#pragma GCC diagnostic pop

XSK_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
XSK_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		abort();
	return poll(fds, n, timeout);
}

static bool any_iwarp_fdset(int nfds, fd_set *r, fd_set *w, fd_set *e)
{
	for (int fd = 0; fd < nfds && fd < FD_SETSIZE; fd++) {
		struct xsk *s = lookup(fd);
		if (!s || !((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (e && FD_ISSET(fd, e))))
			continue;
		if (s->relay) {
			if (!(s = data_sock_rd(fd, r && FD_ISSET(fd, r))))
				continue; /* now the relay's kernel socket */
			xsk_fd_put(s);
		}
		if (s->state != XSK_FRESH)
			return true;
	}
	return false;
}

static int select_emul(int nfds, fd_set *r, fd_set *w, fd_set *e, int timeout,
		       const sigset_t *mask)
{
	struct pollfd *p = calloc((size_t)(nfds > 0 ? nfds : 1), sizeof(*p));
	nfds_t n = 0;
	int rc, count = 0;

	if (!p)
		return (int)fail(ENOMEM);
	for (int fd = 0; fd < nfds && fd < FD_SETSIZE; fd++) {
		short ev = 0;
		if (r && FD_ISSET(fd, r))
			ev |= POLLIN;
		if (w && FD_ISSET(fd, w))
			ev |= POLLOUT;
		if (e && FD_ISSET(fd, e))
			ev |= POLLPRI;
		if (ev)
			p[n++] = (struct pollfd){ .fd = fd, .events = ev };
	}
	rc = poll_emul(p, n, timeout, mask);
	if (rc < 0) {
		free(p);
		return rc;
	}
	if (r)
		FD_ZERO(r);
	if (w)
		FD_ZERO(w);
	if (e)
		FD_ZERO(e);
	for (nfds_t i = 0; i < n; i++) {
		short re = p[i].revents;
		if (re & POLLNVAL) {
			free(p);
			return (int)fail(EBADF);
		}
		if (r && (p[i].events & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) {
			FD_SET(p[i].fd, r);
			count++;
		}
		if (w && (p[i].events & POLLOUT) && (re & (POLLOUT | POLLERR))) {
			FD_SET(p[i].fd, w);
			count++;
		}
		if (e && (p[i].events & POLLPRI) && (re & POLLPRI)) {
			FD_SET(p[i].fd, e);
			count++;
		}
	}
	free(p);
	return count;
}

XSK_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
	if (!any_iwarp_fdset(nfds, r, w, e))
		return REAL(select)(nfds, r, w, e, tv);
	int t = -1;
	if (tv) {
		int64_t ms = (int64_t)tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000;
		t = ms > 0x7fffffff ? 0x7fffffff : (int)ms;
	}
	return select_emul(nfds, r, w, e, t, NULL);
}

XSK_EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts,
		       const sigset_t *mask)
{
	if (!any_iwarp_fdset(nfds, r, w, e))
		return REAL(pselect)(nfds, r, w, e, ts, mask);
	return select_emul(nfds, r, w, e, ts_ms(ts), mask);
}

/* ---- epoll ---------------------------------------------------------------------------- */

static void unlink_regs_locked(struct xsk *s)
{
	struct xsk_epreg *r = s->regs;

	while (r) {
		struct xsk_epreg *next = r->next_of_sock;
		struct epset *ep = (unsigned)r->epfd < (unsigned)tab_n ? atomic_load(&tab[r->epfd].ep) : NULL;
		if (ep) {
			struct xsk_epreg **pp = &ep->regs;
			while (*pp && *pp != r)
				pp = &(*pp)->next_in_set;
			if (*pp)
				*pp = r->next_in_set;
		}
		free(r);
		r = next;
	}
	s->regs = NULL;
}

static struct xsk_epreg *reg_find_locked(struct epset *ep, int fd)
{
	for (struct xsk_epreg *r = ep ? ep->regs : NULL; r; r = r->next_in_set)
		if (r->fd == fd)
			return r;
	return NULL;
}

XSK_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct xsk *s = lookup(fd) ? sk_get(fd) : NULL;
	struct epoll_event kev;
	struct xsk_epreg *r;
	struct epset *ep;
	int rc;

	if (!s)
		return REAL(epoll_ctl)(epfd, op, fd, ev);
	if ((unsigned)epfd >= (unsigned)tab_n || ((op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD) && !ev)) {
		sk_put(s);
		return (int)fail(EINVAL);
	}
	bool fresh = s->state == XSK_FRESH;
	if (ev) {
		kev = *ev;
		if (!fresh)
			kev.events = ep_kernel_events(ev->events);
	}
	rc = REAL(epoll_ctl)(epfd, op, fd, ev ? &kev : NULL);
	if (rc < 0) {
		sk_put(s);
		return rc;
	}
	pthread_mutex_lock(&tab_mu);
	ep = atomic_load(&tab[epfd].ep);
	r = reg_find_locked(ep, fd);
	switch (op) {
	case EPOLL_CTL_ADD:
		if (!ep) {
			ep = calloc(1, sizeof(*ep));
			if (!ep)
				break;
			atomic_store(&tab[epfd].ep, ep);
		}
		r = calloc(1, sizeof(*r));
		if (!r)
			break;
		r->epfd = epfd;
		r->fd = fd;
		r->s = s;
		r->events = ev->events;
		r->data = ev->data;
		r->look = true;
		s->ep_in_regs += (ev->events & EPOLLIN) != 0;
		r->next_in_set = ep->regs;
		ep->regs = r;
		r->next_of_sock = s->regs;
		s->regs = r;
		break;
	case EPOLL_CTL_MOD:
		if (r) {
			s->ep_in_regs += ((ev->events & EPOLLIN) != 0) - ((r->events & EPOLLIN) != 0);
			r->events = ev->events;
			r->data = ev->data;
			r->look = true;
			r->disabled = false;
			r->et_events = 0; /* re-armed: what is ready now is an edge */
		}
		break;
	case EPOLL_CTL_DEL:
		if (r) {
			struct xsk_epreg **pp = &ep->regs;
			s->ep_in_regs -= (r->events & EPOLLIN) != 0;
			while (*pp != r)
				pp = &(*pp)->next_in_set;
			*pp = r->next_in_set;
			pp = &s->regs;
			while (*pp && *pp != r)
				pp = &(*pp)->next_of_sock;
			if (*pp)
				*pp = r->next_of_sock;
			free(r);
		}
		break;
	default:
		break;
	}
	bool unwatch = s->ep_in_regs <= 0 && s->rxw_fd >= 0;
	pthread_mutex_unlock(&tab_mu);
	if (unwatch) { /* no set waits for its input any more */
		pthread_mutex_lock(&s->mu);
		if (s->ep_in_regs <= 0)
			xsk_rx_unwatch(s);
		pthread_mutex_unlock(&s->mu);
	}
	sk_put(s);
	return rc;
}

struct ep_snap {
	struct xsk *s;
	int fd;
	uint32_t events; /* 0: EPOLLONESHOT fired (its reports are dropped) */
	epoll_data_t data;
	bool look; /* look once without a kernel report (r->look) */
	bool done; /* reported by this call */
};

static uint32_t to_epoll(short rev)
{
	uint32_t e = 0;

	if (rev & POLLIN)
		e |= EPOLLIN | EPOLLRDNORM;
	if (rev & POLLOUT)
		e |= EPOLLOUT | EPOLLWRNORM;
	if (rev & POLLERR)
		e |= EPOLLERR;
	if (rev & POLLHUP)
		e |= EPOLLHUP;
	if (rev & POLLRDHUP)
		e |= EPOLLRDHUP;
	return e;
}

/* The events of one snapshot entry now, after progress; 0 if none is
 * to be reported (EPOLLET: no new edge).  reported: the kernel saw its
 * inner epoll fd readable, so its TCP socket is likely readable too. */
static uint32_t ep_look(int epfd, struct ep_snap *e, bool reported)
{
	struct xsk *s = e->s;
	uint32_t want = e->events | EPOLLERR | EPOLLHUP;
	short ask = (short)(e->events & EPOLLIN ? 0x7fff : 0x7fff & ~POLLIN);
	uint32_t got = to_epoll(sk_poll_one(s, ask, true, reported)) & want;
	if (got && (e->events & (EPOLLET | EPOLLONESHOT))) {
		pthread_mutex_lock(&tab_mu);
		struct xsk_epreg *r = reg_find_locked(atomic_load(&tab[epfd].ep), e->fd);
		if (r && r->s == s && (e->events & EPOLLET) && !xsk_epoll_edge(r, s, got))
			got = 0;
		if (r && r->s == s && got && (e->events & EPOLLONESHOT)) {
			/* its inner fd must not wake the kernel's wait until
			 * the application re-arms it (EPOLL_CTL_MOD) */
			struct epoll_event off = { .events = 0, .data = r->data };
			xsk_real.epoll_ctl(epfd, EPOLL_CTL_MOD, e->fd, &off);
			r->disabled = true;
		}
		pthread_mutex_unlock(&tab_mu);
	}
	if (got && (e->events & EPOLLONESHOT))
		e->events = 0;
	return got;
}

/* Registrations looked at by every wait: writability has no fd the
 * kernel could report, and an EPOLLET registration's edge may be a new
 * message into a socket that was readable already (xsk_epoll_edge). */
static bool ep_look_always(uint32_t events)
{
	return (events & (EPOLLOUT | EPOLLET)) != 0;
}

/* epoll_wait over a set with IWARP sockets.  The kernel's set holds each
 * one's inner epoll fd, which is readable when the socket has news
 * (channel events, buffered input, or octets on a watched connection's
 * TCP socket): only those are looked at, plus the ones whose readiness
 * the kernel cannot see (ep_look_always) and new registrations, so a
 * level-triggered wait for input costs what is ready, not the set's size. */
static int ep_wait_emul(int epfd, struct epoll_event *evs, int max, int timeout,
			const sigset_t *mask)
{
	int64_t deadline = timeout < 0 ? -1 : now_ms() + timeout;
	struct ep_snap *snap = NULL;
	int nsnap = 0, ret;

	if (max <= 0)
		return (int)fail(EINVAL);
	pthread_mutex_lock(&tab_mu);
	struct epset *ep = atomic_load(&tab[epfd].ep);
	for (struct xsk_epreg *r = ep ? ep->regs : NULL; r; r = r->next_in_set)
		nsnap++;
	snap = calloc((size_t)(nsnap ? nsnap : 1), sizeof(*snap));
	nsnap = 0;
	for (struct xsk_epreg *r = ep ? ep->regs : NULL; snap && r; r = r->next_in_set) {
		r->s->refs++;
		snap[nsnap++] = (struct ep_snap){
			.s = r->s, .fd = r->fd, .events = r->disabled ? 0 : r->events, .data = r->data,
			.look = r->look
		};
		r->look = false;
	}
	pthread_mutex_unlock(&tab_mu);
	if (!snap)
		return (int)fail(ENOMEM);
	for (;;) {
		int n = 0;

		for (int i = 0; i < nsnap && n < max; i++) {
			struct ep_snap *e = &snap[i];
			if (!e->events || e->done || e->s->state == XSK_FRESH ||
			    !(e->look || ep_look_always(e->events)))
				continue;
			uint32_t got = ep_look(epfd, e, false);
			if (!got)
				continue;
			e->done = true;
			evs[n].events = got;
			evs[n].data = e->data;
			n++;
		}
		for (int i = 0; i < nsnap; i++)
			snap[i].look = false;
		int t = n ? 0 : remaining(deadline);
		int k = n < max ? xsk_real.epoll_pwait(epfd, evs + n, max - n, t, mask) : 0;
		if (k < 0) {
			ret = n ? n : -1;
			break;
		}
		/* a report for an IWARP socket means "look at it" */
		int j = n;
		for (int i = n; i < n + k; i++) {
			bool ours = false;
			uint32_t got = 0;
			for (int q = 0; q < nsnap; q++) {
				struct ep_snap *e = &snap[q];
				if (e->s->state == XSK_FRESH || e->data.u64 != evs[i].data.u64)
					continue;
				ours = true;
				if (e->events && !e->done && !got && (got = ep_look(epfd, e, true)))
					e->done = true;
			}
			if (!ours)
				evs[j++] = evs[i];
			else if (got)
				evs[j++] = (struct epoll_event){ .events = got, .data = evs[i].data };
		}
		n = j;
		if (n > 0 || t == 0) {
			ret = n;
			break;
		}
	}
	int e = errno;
	pthread_mutex_lock(&tab_mu);
	for (int i = 0; i < nsnap; i++) {
		struct xsk *s = snap[i].s;
		if (--s->refs == 0) {
			unlink_regs_locked(s);
			pthread_mutex_unlock(&tab_mu);
			xsk_free(s);
			pthread_mutex_lock(&tab_mu);
		}
	}
	pthread_mutex_unlock(&tab_mu);
	free(snap);
	errno = e;
	return ret;
}

static bool ep_has_iwarp(int epfd)
{
	return (unsigned)epfd < (unsigned)tab_n && atomic_load_explicit(&tab[epfd].ep, memory_order_acquire);
}

XSK_EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
	if (!ep_has_iwarp(epfd))
		return REAL(epoll_wait)(epfd, evs, max, timeout);
	return ep_wait_emul(epfd, evs, max, timeout, NULL);
}

XSK_EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max, int timeout,
			   const sigset_t *mask)
{
	if (!ep_has_iwarp(epfd))
		return REAL(epoll_pwait)(epfd, evs, max, timeout, mask);
	return ep_wait_emul(epfd, evs, max, timeout, mask);
}

/* ---- _FORTIFY_SOURCE variants -------------------------------------------------------- */

XSK_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
XSK_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		abort();
	return read(fd, buf, n);
}

XSK_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
XSK_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (n > buflen)
		abort();
	return recv(fd, buf, n, flags);
}

XSK_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
				  struct sockaddr *addr, socklen_t *alen);
XSK_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
				  struct sockaddr *addr, socklen_t *alen)
{
	if (n > buflen)
		abort();
	return recvfrom(fd, buf, n, flags, addr, alen);
}

/* ---- stdio ------------------------------------------------------------------------------ */

/* glibc's stdio writes through its internal write, which no interposer
 * sees: a FILE on an IWARP socket is a cookie stream over our calls. */
static ssize_t ck_read(void *c, char *buf, size_t n)
{
	return read((int)(intptr_t)c, buf, n);
}

static ssize_t ck_write(void *c, const char *buf, size_t n)
{
	ssize_t w = write((int)(intptr_t)c, buf, n);
	return w < 0 ? 0 : w; /* fopencookie: 0 = error */
}

static int ck_close(void *c)
{
	return close((int)(intptr_t)c);
}

XSK_EXPORT FILE *fdopen(int fd, const char *mode)
{
	static FILE *(*real_fdopen)(int, const char *);
	struct xsk *s = data_sock(fd);

	if (!s) {
		if (!real_fdopen)
			*(void **)&real_fdopen = dlsym(RTLD_NEXT, "fdopen");
		return real_fdopen(fd, mode);
	}
	sk_put(s);
	cookie_io_functions_t io = { .read = ck_read, .write = ck_write, .close = ck_close };
	return fopencookie((void *)(intptr_t)fd, mode, io);
}
