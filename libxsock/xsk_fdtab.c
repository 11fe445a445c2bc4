/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The fd table (xsk_intercept.h): one slot per fd number, the socket it
 * names and, for an epoll set, its registrations of IWARP sockets.  A
 * socket's reference count covers the fd numbers naming it and the calls
 * in progress on it; the last reference frees it.  Also the walks over the
 * table for fork (xsk_fork.c) and the exec hand-over (xsk_exec.c). */
#include "config.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "libxsock/xsk_config.h"
#include "libxsock/xsk_intercept.h"

struct xsk_fdent *xsk_tab;
int xsk_tab_n;
static int tab_hi; /* above every fd number that ever named a socket (tab_mu) */
static pthread_mutex_t tab_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

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
	void *p = mmap(NULL, n * sizeof(struct xsk_fdent), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p != MAP_FAILED) {
		xsk_tab = p;
		xsk_tab_n = (int)n;
	}
	xsk_config_load();
	atexit(xsk_exit_close);
}

__attribute__((constructor)) static void xsk_ctor(void)
{
	pthread_once(&init_once, init_once_fn);
}

void xsk_tab_init(void)
{
	pthread_once(&init_once, init_once_fn);
}

void xsk_tab_lock(void)
{
	pthread_mutex_lock(&tab_mu);
}

void xsk_tab_unlock(void)
{
	pthread_mutex_unlock(&tab_mu);
}

void xsk_tab_set_epset(int fd, struct xsk_epset *ep)
{
	atomic_store(&xsk_tab[fd].ep, ep);
}

void xsk_tab_hold_locked(struct xsk *s)
{
	s->refs++;
}

struct xsk *xsk_fd_get(int fd)
{
	struct xsk *s;

	xsk_ensure_init();
	if (!xsk_lookup(fd))
		return NULL;
	pthread_mutex_lock(&tab_mu);
	s = atomic_load(&xsk_tab[fd].s);
	if (s)
		s->refs++;
	pthread_mutex_unlock(&tab_mu);
	if (s && s->relay && xsk_relay_take(fd, s, false, false))
		return NULL;
	return s;
}

void xsk_fd_put(struct xsk *s)
{
	bool last;

	pthread_mutex_lock(&tab_mu);
	last = --s->refs == 0;
	if (last)
		xsk_ep_unlink_locked(s);
	pthread_mutex_unlock(&tab_mu);
	if (last)
		xsk_free(s);
}

void xsk_tab_attach(int fd, struct xsk *s)
{
	pthread_mutex_lock(&tab_mu);
	s->refs++;
	s->nfds++;
	atomic_store(&xsk_tab[fd].s, s);
	if (fd >= tab_hi)
		tab_hi = fd + 1;
	pthread_mutex_unlock(&tab_mu);
}

void xsk_tab_detach(int fd)
{
	struct xsk *s;
	struct xsk_epset *ep;

	if ((unsigned)fd >= (unsigned)xsk_tab_n)
		return;
	pthread_mutex_lock(&tab_mu);
	s = atomic_exchange(&xsk_tab[fd].s, NULL);
	ep = atomic_exchange(&xsk_tab[fd].ep, NULL);
	if (ep)
		xsk_ep_set_free_locked(ep); /* the epoll set is gone */
	if (s)
		s->nfds--;
	pthread_mutex_unlock(&tab_mu);
	if (s)
		xsk_fd_put(s); /* the reference xsk_tab_attach took */
}

bool xsk_relay_take(int fd, struct xsk *s, bool claim, bool rd)
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
	xsk_fd_put(s);
	xsk_tab_detach(fd);
	return true;
}

int xsk_tab_attach_fresh(int fd, int domain, bool nonblock, bool cloexec)
{
	struct xsk *s;

	if ((unsigned)fd >= (unsigned)xsk_tab_n)
		return -EMFILE;
	s = xsk_new(domain);
	if (!s)
		return -ENOMEM;
	s->nonblock = nonblock;
	s->cloexec = cloexec;
	xsk_tab_attach(fd, s);
	return 0;
}

int xsk_tab_next_of(const struct xsk *s, int fd)
{
	for (; fd >= 0 && fd < tab_hi && fd < xsk_tab_n; fd++) {
		struct xsk *t = atomic_load(&xsk_tab[fd].s);
		if (t && (!s || t == s))
			return fd;
	}
	return -1;
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
	for (int fd = 0; fd < tab_hi && fd < xsk_tab_n; fd++)
		n += atomic_load(&xsk_tab[fd].s) != NULL;
	v = n ? calloc((size_t)n, sizeof(*v)) : NULL;
	n = 0;
	for (int fd = 0; v && fd < tab_hi && fd < xsk_tab_n; fd++) {
		struct xsk *s = atomic_load(&xsk_tab[fd].s);
		if (s && s->relay_gen != g && s->state == XSK_CONNECTED) {
			s->relay_gen = g; /* once per socket, whatever its fd numbers */
			s->refs++;
			v[n++] = s;
		}
	}
	pthread_mutex_unlock(&tab_mu);
	for (int i = 0; i < n; i++) {
		xsk_relay_fork_prepare(v[i]);
		xsk_fd_put(v[i]);
	}
	free(v);
	pthread_mutex_lock(&tab_mu);
}

void xsk_tab_fork_parent(void (*fn)(struct xsk *s))
{
	struct xsk **ls = NULL;
	int n = 0, cap = 0;

	for (int fd = 0; fd < tab_hi && fd < xsk_tab_n; fd++) {
		struct xsk *s = atomic_load(&xsk_tab[fd].s), **m;
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
		xsk_fd_put(ls[i]);
	}
	free(ls);
}

void xsk_tab_fork_child(void (*fn)(int fd, struct xsk *s))
{
	pthread_mutex_init(&tab_mu, NULL);
	for (int fd = 0; fd < tab_hi && fd < xsk_tab_n; fd++) {
		struct xsk *s = atomic_load(&xsk_tab[fd].s);
		if (s)
			fn(fd, s);
	}
}

/* Exec hand-over (xsk_exec.c): each fd number naming a socket, in
 * increasing order, under the table lock (fn must not call back here). */
void xsk_tab_each(void (*fn)(int fd, struct xsk *s, void *arg), void *arg)
{
	xsk_ensure_init();
	pthread_mutex_lock(&tab_mu);
	for (int fd = 0; fd < tab_hi && fd < xsk_tab_n; fd++) {
		struct xsk *s = atomic_load(&xsk_tab[fd].s);
		if (s)
			fn(fd, s, arg);
	}
	pthread_mutex_unlock(&tab_mu);
}

int xsk_tab_next(int fd)
{
	xsk_ensure_init();
	for (; fd >= 0 && fd < tab_hi && fd < xsk_tab_n; fd++)
		if (atomic_load(&xsk_tab[fd].s) || atomic_load(&xsk_tab[fd].ep))
			return fd;
	return -1;
}

int xsk_tab_adopt(int fd, struct xsk *s)
{
	xsk_ensure_init();
	if ((unsigned)fd >= (unsigned)xsk_tab_n)
		return -EMFILE;
	xsk_tab_attach(fd, s);
	return 0;
}

