/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The fd table (xsk_intercept.h): one slot per fd number, the file it
 * names and, for an epoll set, its registrations of IWARP sockets.  Also
 * the walks over the table for fork (xsk_fork.c) and the exec hand-over
 * (xsk_exec.c).
 *
 * A slot names a socket through a struct xsk_file, as the kernel's fd
 * table names a socket through a struct file: the file holds the socket's
 * reference count (the fd numbers naming it plus the calls in progress on
 * it); the last reference frees the socket.  Taking a reference is
 * lock-free (xsk_fd_get): load the slot, increment the file's count unless
 * it is 0, then check that the slot still names that file.  The table lock
 * is taken only to attach and detach fd numbers, for the epoll
 * registrations, and at a socket's last reference.
 *
 * Why a thread never touches freed memory: a thread may load a slot just
 * before the socket's last reference goes.  Files are type-stable (as the
 * kernel's files are SLAB_TYPESAFE_BY_RCU): a file whose count reached 0
 * goes to a free list and may name another socket later, but its memory
 * is never returned to malloc.  So the stale thread's increment-if-not-zero
 * reads a valid counter: 0 (a dead file) fails and it looks again; a
 * non-zero count means the file is alive (perhaps for another socket now,
 * then the re-check of the slot fails and it drops that reference).  Only
 * a thread that holds a reference reads f->s, which is written while the
 * count is 0 and published by the release that sets it to 1.  struct xsk
 * itself is malloc'ed and freed by the protocol (xsk_new in xsk_res.c,
 * xsk_free in xsk_close.c): no one reaches it but through a reference, or
 * through an epoll registration under the table lock (the last reference
 * unlinks those under the same lock before the socket is freed). */
#include "config.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "libxsock/xsk_config.h"
#include "libxsock/xsk_intercept.h"
#include "libxsock/xsk_sock.h"

struct xsk_file {
	/* fd numbers naming the socket + calls in progress; 0: free */
	_Atomic unsigned refs;
	int nfds; /* fd numbers naming it (tab_mu) */
	struct xsk *s; /* the socket, while refs > 0 */
	struct xsk_file *next_free; /* tab_mu */
};

/* Files come in chunks that are never freed (type-stable memory). */
#define XSK_FILE_CHUNK 64
struct file_chunk {
	struct file_chunk *next;
	struct xsk_file f[XSK_FILE_CHUNK];
};

struct xsk_fdent *xsk_tab;
int xsk_tab_n;
/* above every fd number that ever named a socket (written under tab_mu) */
static _Atomic int tab_hi;
static pthread_mutex_t tab_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static struct file_chunk *chunks; /* tab_mu */
static struct xsk_file *free_files; /* tab_mu */

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
#if defined(__SANITIZE_ADDRESS__)
		/* LeakSanitizer does not scan mmap'd memory: the epoll sets
		 * the table points to would look leaked at exit */
		__lsan_register_root_region(p, n * sizeof(struct xsk_fdent));
#endif
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
	xsk_mutex_lock(&tab_mu);
}

void xsk_tab_unlock(void)
{
	xsk_mutex_unlock(&tab_mu);
}

void xsk_tab_set_epset(int fd, struct xsk_epset *ep)
{
	atomic_store(&xsk_tab[fd].ep, ep);
}

static inline int hi(void)
{
	int h = atomic_load_explicit(&tab_hi, memory_order_relaxed);
	return h < xsk_tab_n ? h : xsk_tab_n;
}

/* A file for s, its count 1 (tab_mu held); NULL without memory. */
static struct xsk_file *file_new_locked(struct xsk *s)
{
	struct xsk_file *f;

	if (!free_files) {
		struct file_chunk *c = calloc(1, sizeof(*c));
		if (!c)
			return NULL;
		c->next = chunks;
		chunks = c;
		for (int i = XSK_FILE_CHUNK - 1; i >= 0; i--) {
			c->f[i].next_free = free_files;
			free_files = &c->f[i];
		}
	}
	f = free_files;
	free_files = f->next_free;
	f->s = s;
	f->nfds = 0;
	/* publishes f->s to a thread whose increment finds 1 */
	atomic_store_explicit(&f->refs, 1, memory_order_release);
	return f;
}

/* A reference on f unless its count is 0 (f is free, or being freed). */
static bool file_tryget(struct xsk_file *f)
{
	unsigned r = atomic_load_explicit(&f->refs, memory_order_relaxed);

	do {
		if (!r)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&f->refs, &r, r + 1, memory_order_acquire,
							memory_order_relaxed));
	return true;
}

/* A reference on a file whose count cannot be 0: a slot names it, or
 * the caller holds one. */
static void file_hold(struct xsk_file *f)
{
	atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
}

/* The registrations (struct xsk_epreg) an epoll set or a socket takes
 * with it when it goes; the table lock guards them. */
void xsk_ep_unlink_locked(struct xsk *s)
{
	struct xsk_epreg *r = *xsk_regs(s);

	while (r) {
		struct xsk_epreg *next = r->next_of_sock;
		xsk_ep_set_unlink_locked(r);
		free(r);
		r = next;
	}
	*xsk_regs(s) = NULL;
}

void xsk_ep_set_unlink_locked(struct xsk_epreg *r)
{
	struct xsk_epset *ep = xsk_tab_epset(r->epfd);
	struct xsk_epreg **pp = ep ? &ep->regs : NULL;

	while (pp && *pp && *pp != r)
		pp = &(*pp)->next_in_set;
	if (pp && *pp)
		*pp = r->next_in_set;
}

void xsk_ep_set_free_locked(struct xsk_epset *ep)
{
	struct xsk_epreg *r = ep->regs;

	while (r) {
		struct xsk_epreg *next = r->next_in_set;
		struct xsk_epreg **pp = xsk_regs(r->s);
		xsk_ep_in_regs_add(r->s, -((r->events & EPOLLIN) != 0));
		while (*pp && *pp != r)
			pp = &(*pp)->next_of_sock;
		if (*pp)
			*pp = r->next_of_sock;
		free(r);
		r = next;
	}
	free(ep);
}

static void file_put(struct xsk_file *f)
{
	struct xsk *s;

	/* release: this thread's use of the socket comes before its end;
	 * acquire (for the last): every other thread's too */
	if (atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) != 1)
		return;
	s = f->s;
	xsk_sig_hold(); /* the teardown frees memory after its locks */
	xsk_mutex_lock(&tab_mu);
	xsk_ep_unlink_locked(s);
	f->s = NULL;
	f->next_free = free_files;
	free_files = f;
	xsk_mutex_unlock(&tab_mu);
	xsk_free(s);
	xsk_sig_release();
}

bool xsk_tab_hold_locked(struct xsk *s)
{
	return file_tryget(xsk_file_of(s));
}

struct xsk *xsk_fd_get(int fd)
{
	struct xsk_file *f;
	struct xsk *s;

	xsk_ensure_init();
	if ((unsigned)fd >= (unsigned)xsk_tab_n)
		return NULL;
	for (;;) {
		f = atomic_load_explicit(&xsk_tab[fd].f, memory_order_acquire);
		if (!f)
			return NULL;
		if (file_tryget(f)) {
			if (atomic_load_explicit(&xsk_tab[fd].f, memory_order_acquire) == f)
				break;
			file_put(f); /* reused for another socket meanwhile */
		}
		/* f died or moved: look again */
	}
	s = f->s;
	if (xsk_has_relay(s) && xsk_relay_take(fd, s, false, false))
		return NULL;
	return s;
}

void xsk_fd_put(struct xsk *s)
{
	file_put(xsk_file_of(s));
}

int xsk_tab_attach(int fd, struct xsk *s)
{
	xsk_mutex_lock(&tab_mu);
	struct xsk_file *f = xsk_file_of(s);

	if (!f) {
		f = file_new_locked(s); /* the first fd number's reference */
		if (!f) {
			xsk_mutex_unlock(&tab_mu);
			return -ENOMEM;
		}
		xsk_set_file(s, f);
	} else {
		file_hold(f);
	}
	f->nfds++;
	atomic_store_explicit(&xsk_tab[fd].f, f, memory_order_release);
	if (fd >= atomic_load_explicit(&tab_hi, memory_order_relaxed))
		atomic_store_explicit(&tab_hi, fd + 1, memory_order_relaxed);
	xsk_mutex_unlock(&tab_mu);
	return 0;
}

void xsk_tab_detach(int fd)
{
	struct xsk_file *f;
	struct xsk_epset *ep;

	if ((unsigned)fd >= (unsigned)xsk_tab_n)
		return;
	xsk_mutex_lock(&tab_mu);
	f = atomic_exchange(&xsk_tab[fd].f, NULL);
	ep = atomic_exchange(&xsk_tab[fd].ep, NULL);
	if (ep)
		xsk_ep_set_free_locked(ep); /* the epoll set is gone */
	if (f)
		f->nfds--;
	xsk_mutex_unlock(&tab_mu);
	if (f)
		file_put(f); /* the reference xsk_tab_attach took */
}

int xsk_tab_nfds(const struct xsk *s)
{
	int n;

	xsk_mutex_lock(&tab_mu);
	n = xsk_file_of(s) ? xsk_file_of(s)->nfds : 0;
	xsk_mutex_unlock(&tab_mu);
	return n;
}

/* The socket fd names, or NULL: tab_mu held (a file a slot names is
 * alive), or a child after fork (one thread). */
static struct xsk *slot_sock(int fd)
{
	struct xsk_file *f = atomic_load_explicit(&xsk_tab[fd].f, memory_order_acquire);

	return f ? f->s : NULL;
}

/* force: a sandbox starts (xsk_tab_sandbox): the connection is given up
 * without a claim, and its relay socket waits for input. */
static bool relay_take(int fd, struct xsk *s, bool claim, bool rd, bool force)
{
	struct sockaddr_storage local = { 0 }, peer = { 0 };
	struct xsk_ep_moved *mv;
	int sp = -1, fdfl, nmv;

	if (!force && atomic_load(&xsk_fork_gen) && xsk_fork_sandboxed())
		return false; /* no dup3 there: the copy stays unusable */
	xsk_lock(s);
	if (xsk_state(s) == XSK_CONNECTED &&
	    (force ? xsk_fork_give_up(s) || xsk_foreign(s) :
		     (xsk_foreign(s) || claim) && !xsk_fork_use(s)))
		sp = xsk_relay_client(s, rd || force, force);
	if (sp >= 0 && xsk_nonblock(s))
		xsk_real.fcntl(sp, F_SETFL, xsk_real.fcntl(sp, F_GETFL) | O_NONBLOCK);
	if (sp >= 0 && xsk_peer(s))
		peer = *xsk_peer(s);
	if (sp >= 0 && xsk_local(s))
		local = *xsk_local(s);
	else
		local.ss_family = peer.ss_family;
	xsk_unlock(s);
	if (sp < 0)
		return false;
	fdfl = xsk_real.fcntl(fd, F_GETFD);
	/* the epoll sets that watch fd go on watching it as the kernel
	 * socket it becomes: its old file's registrations go with that file,
	 * and an EPOLL_CTL_MOD would then fail with ENOENT (a postgres
	 * backend's first wait over RoCE: "epoll_ctl() failed") */
	nmv = xsk_ep_take_fd(s, fd, &mv);
	if (xsk_real.dup3(sp, fd, fdfl >= 0 && (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
		xsk_ep_give_fd(-1, mv, 0);
		return false;
	}
	xsk_ep_give_fd(fd, mv, nmv);
	if (peer.ss_family)
		xsk_raddr_note(fd, &local, &peer); /* its TCP identity */
	xsk_fd_put(s);
	xsk_tab_detach(fd);
	return true;
}

bool xsk_relay_take(int fd, struct xsk *s, bool claim, bool rd)
{
	return relay_take(fd, s, claim, rd, false);
}

void xsk_tab_sandbox(void)
{
	for (int fd = xsk_tab_next(0); fd >= 0; fd = xsk_tab_next(fd + 1)) {
		struct xsk *s = xsk_fd_get(fd);

		if (s && !(xsk_has_relay(s) && relay_take(fd, s, true, true, true)))
			xsk_fd_put(s);
	}
}

int xsk_tab_attach_fresh(int fd, int domain, bool nonblock, bool cloexec, bool by_rules)
{
	struct xsk *s;
	int rc;

	if ((unsigned)fd >= (unsigned)xsk_tab_n)
		return -EMFILE;
	s = xsk_new(domain);
	if (!s)
		return -ENOMEM;
	xsk_set_fd_flags(s, nonblock, cloexec);
	xsk_set_by_rules(s, by_rules);
	rc = xsk_tab_attach(fd, s);
	if (rc)
		xsk_free(s);
	return rc;
}

int xsk_tab_next_of(const struct xsk *s, int fd)
{
	/* files, not their sockets: a file seen here may be freed meanwhile */
	for (int h = hi(); fd >= 0 && fd < h; fd++) {
		struct xsk_file *f = atomic_load_explicit(&xsk_tab[fd].f, memory_order_acquire);
		if (f && (!s || f == xsk_file_of(s)))
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
	xsk_mutex_lock(&tab_mu);
	for (int fd = 0; fd < hi(); fd++)
		n += slot_sock(fd) != NULL;
	size_t vlen = (size_t)n * sizeof(*v);
	v = n ? xsk_fork_alloc(vlen) : NULL;
	n = 0;
	for (int fd = 0; v && fd < hi(); fd++) {
		struct xsk *s = slot_sock(fd);
		if (s && xsk_relay_gen(s) != g && xsk_state(s) == XSK_CONNECTED) {
			xsk_set_relay_gen(s, g); /* once per socket, whatever its fd numbers */
			file_hold(xsk_file_of(s));
			v[n++] = s;
		}
	}
	xsk_mutex_unlock(&tab_mu);
	for (int i = 0; i < n; i++) {
		xsk_relay_fork_prepare(v[i]);
		xsk_fd_put(v[i]);
	}
	xsk_fork_free(v, vlen);
	xsk_mutex_lock(&tab_mu);
}

void xsk_tab_fork_parent(void (*fn)(struct xsk *s))
{
	struct xsk **ls;
	int n = 0, cap = 0;

	for (int fd = 0; fd < hi(); fd++)
		cap += slot_sock(fd) != NULL;
	size_t lslen = (size_t)cap * sizeof(*ls);
	ls = cap ? xsk_fork_alloc(lslen) : NULL;
	for (int fd = 0; ls && fd < hi(); fd++) {
		struct xsk *s = slot_sock(fd);
		bool seen = false;
		if (!s || (xsk_state(s) != XSK_LISTENING && xsk_state(s) != XSK_CONNECTED))
			continue;
		for (int i = 0; i < n; i++)
			seen |= ls[i] == s; /* dup'ed */
		if (seen)
			continue;
		ls[n++] = s;
		file_hold(xsk_file_of(s));
	}
	xsk_mutex_unlock(&tab_mu);
	for (int i = 0; i < n; i++) {
		fn(ls[i]);
		xsk_fd_put(ls[i]);
	}
	xsk_fork_free(ls, lslen);
}

void xsk_tab_fork_child(void (*fn)(int fd, struct xsk *s))
{
	pthread_mutex_init(&tab_mu, NULL);
	for (int fd = 0; fd < hi(); fd++) {
		struct xsk *s = slot_sock(fd);
		if (s)
			fn(fd, s);
	}
}

/* Exec hand-over (xsk_exec.c): each fd number naming a socket, in
 * increasing order, under the table lock (fn must not call back here). */
void xsk_tab_each(void (*fn)(int fd, struct xsk *s, void *arg), void *arg)
{
	xsk_ensure_init();
	xsk_mutex_lock(&tab_mu);
	for (int fd = 0; fd < hi(); fd++) {
		struct xsk *s = slot_sock(fd);
		if (s)
			fn(fd, s, arg);
	}
	xsk_mutex_unlock(&tab_mu);
}

int xsk_tab_next(int fd)
{
	xsk_ensure_init();
	for (int h = hi(); fd >= 0 && fd < h; fd++)
		if (xsk_tab_used(fd))
			return fd;
	return -1;
}

int xsk_tab_adopt(int fd, struct xsk *s)
{
	xsk_ensure_init();
	if ((unsigned)fd >= (unsigned)xsk_tab_n)
		return -EMFILE;
	return xsk_tab_attach(fd, s);
}

