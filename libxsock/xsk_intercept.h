/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Private to the interposer: what its files share.
 *
 *   xsk_fdtab.c    the fd table: lookup, references, attach/detach, walks
 *   xsk_wait.c     a blocking call's wait (timeouts, signals)
 *   xsk_sockopt.c  socket(), IWARP_MODE, setsockopt/getsockopt, addresses
 *   xsk_conn.c     listen/connect/accept: taking the fd number over
 *   xsk_data.c     read/write/send/recv families, shutdown, _chk variants
 *   xsk_fdops.c    close, _exit, dup, fcntl, fstat, ioctl
 *   xsk_poll.c     poll/ppoll/select/pselect
 *   xsk_epoll.c    epoll_ctl/epoll_wait and the registrations
 *   xsk_stdio.c    fdopen, the standard streams on IWARP sockets
 *   xsk_peer.c     what each destination turned out to be (connect's fallback)
 *   xsk_plain.c    going plain TCP: a non-blocking connect's probe
 *
 * Every call that takes an fd looks it up in one array (the fd table); an
 * fd that is not an IWARP socket goes straight to libc, so an ordinary
 * socket, file, pipe, Unix or UDP socket pays one load and a compare.
 * An IWARP socket keeps its original TCP socket until connect() or
 * listen(); then the fd number is taken over (dup3) by the socket's inner
 * epoll fd, whose readability the application's own poll/epoll can see.
 *
 * The interposed calls return -1 and set errno like the kernel's (one
 * helper: xsk_fail); the internal calls here return 0 / -errno unless
 * noted.  Locks: the table lock (xsk_tab_lock) guards the table's slots,
 * a socket's fd count and the epoll registrations; it is taken before
 * s->mu. */
#ifndef XSK_INTERCEPT_H
#define XSK_INTERCEPT_H

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "libxsock/xsk_priv.h"
#include "util/xs_clock.h"

/* ---- the fd table (xsk_fdtab.c) ------------------------------------------ */

/* The registrations of IWARP sockets in one application epoll set. */
struct xsk_epset {
	struct xsk_epreg *regs;
};

/* One fd number: the file naming the socket it names (struct xsk_file,
 * private to xsk_fdtab.c: the socket's reference count), and the
 * registrations it holds if it is an epoll set.  Written under the table
 * lock, read without. */
struct xsk_file;
struct xsk_fdent {
	_Atomic(struct xsk_file *) f;
	_Atomic(struct xsk_epset *) ep;
};

extern struct xsk_fdent *xsk_tab; /* xsk_tab_n entries, mmap'ed once */
extern int xsk_tab_n;

/* Make the table, resolve libc, load the rules (once; any thread). */
void xsk_tab_init(void);

static inline void xsk_ensure_init(void)
{
	if (__builtin_expect(!xsk_tab_n, 0))
		xsk_tab_init();
}

/* libc's fn, resolving libc first if no call has yet. */
#define REAL(fn) (xsk_ensure_init(), xsk_real.fn)

/* The one lookup a non-IWARP fd pays: true if fd names an IWARP socket.
 * No lock, no reference: a test, or a hint for xsk_fd_get (which takes a
 * reference, lock-free: xsk_fdtab.c). */
static inline bool xsk_tab_has(int fd)
{
	if ((unsigned)fd >= (unsigned)xsk_tab_n)
		return false;
	return atomic_load_explicit(&xsk_tab[fd].f, memory_order_acquire) != NULL;
}

/* The epoll set's registrations if fd is an epoll set holding an IWARP
 * socket (no lock: a test; under the table lock: the list). */
static inline struct xsk_epset *xsk_tab_epset(int fd)
{
	if ((unsigned)fd >= (unsigned)xsk_tab_n)
		return NULL;
	return atomic_load_explicit(&xsk_tab[fd].ep, memory_order_acquire);
}

/* fd names a socket or is an epoll set with one (close() has work). */
static inline bool xsk_tab_used(int fd)
{
	return xsk_tab_has(fd) || xsk_tab_epset(fd);
}

/* -1 with errno e, the interposed calls' failure. */
static inline long xsk_fail(int e)
{
	errno = e;
	return -1;
}

void xsk_tab_lock(void);
void xsk_tab_unlock(void);
/* fd is an epoll set with registrations ep (table lock held). */
void xsk_tab_set_epset(int fd, struct xsk_epset *ep);
/* A reference on s, found through an epoll registration (table lock
 * held): false if s's last reference is going (the registration goes
 * with it). */
bool xsk_tab_hold_locked(struct xsk *s);
/* fd names s from now on (a reference for the fd number).  Any thread,
 * takes the table lock; fd < xsk_tab_n.  0, or -ENOMEM (s's first fd
 * number only). */
int xsk_tab_attach(int fd, struct xsk *s);
/* fd no longer names its socket (closed or replaced), nor is it an epoll
 * set: its registrations go.  Takes the table lock; may free the socket. */
void xsk_tab_detach(int fd);
/* A new socket in state FRESH under fd (by_rules: a candidate of the
 * selection rules): 0, -EMFILE or -ENOMEM. */
int xsk_tab_attach_fresh(int fd, int domain, bool nonblock, bool cloexec, bool by_rules);
/* The fd numbers naming s (takes the table lock). */
int xsk_tab_nfds(const struct xsk *s);
/* The lowest fd number >= fd naming s (any socket if s is NULL), or -1.
 * No lock; s, if not NULL, referenced by the caller. */
int xsk_tab_next_of(const struct xsk *s, int fd);
/* A connection another process claimed after fork (xsock(7) FORK): fd
 * becomes the relay channel's kernel socket (xsk_relay.c), its calls the
 * kernel's.  claim: this use may claim the connection (a data call,
 * poll); else only a socket already known foreign is converted.  rd: the
 * call reads (the owner then sends it what arrives).  true if fd was
 * converted (s's reference dropped).  s->mu and the table lock not held. */
bool xsk_relay_take(int fd, struct xsk *s, bool claim, bool rd);

/* ---- relayed sockets' TCP addresses (xsk_relay_addr.c) ------------------- */

#define XSK_RADDR_ENV "XSOCK_RELAY_ADDR"

/* fd became the relay's socket for a connection with these addresses. */
void xsk_raddr_note(int fd, const struct sockaddr_storage *local,
		    const struct sockaddr_storage *peer);
/* true if fd is a relayed socket (its addresses copied out, either may be
 * NULL); one fstat when this process has relayed sockets, else nothing. */
bool xsk_raddr_find(int fd, struct sockaddr_storage *local, struct sockaddr_storage *peer);
/* "XSOCK_RELAY_ADDR=..." for an execve (the relayed sockets it keeps
 * open), malloc'd, or NULL. */
char *xsk_raddr_exec_env(void);

/* ---- waiting (xsk_wait.c) ------------------------------------------------ */

static inline int64_t xsk_now_ms(void)
{
	return (int64_t)xs_now_ms();
}

/* Milliseconds left until deadline (xsk_now_ms; < 0: none): -1 for no
 * deadline, else >= 0. */
int xsk_remaining(int64_t deadline);
/* The deadline of a blocking call under a socket timeout (SO_RCVTIMEO,
 * SO_SNDTIMEO in us: 0 none, < 0 no wait): -1 for none. */
int64_t xsk_timeo_deadline(int64_t us);
/* One wait of a blocking call that cannot go on yet, by the kernel's rules
 * (socket(7), signal(7)): 0 to look again; -EAGAIN when the deadline
 * passed; -EINTR when a handler without SA_RESTART ran, or one with it
 * while the socket has a timeout or the call already moved data (which it
 * then returns); a handler with SA_RESTART alone restarts the call.
 * s->mu not held (taken inside). */
int xsk_wait_step(struct xsk *s, int64_t deadline, bool writer, bool moved,
		  struct xsk_sigsnap *snap);

/* ---- destinations (xsk_peer.c) ------------------------------------------- */

enum xsk_peer_kind {
	XSK_PEER_UNKNOWN, /* try iWARP, fall back to plain TCP */
	XSK_PEER_IWARP, /* answered MPA: iWARP, no fallback wait */
	XSK_PEER_PLAIN, /* did not: a plain TCP connection at once */
};

/* What sa (IPv4 or IPv6, with its port) was found to be within its time;
 * unknown if never, too long ago, or the table is busy.  Any thread; never
 * waits for a lock (safe in a forked child). */
enum xsk_peer_kind xsk_peer_lookup(const struct sockaddr *sa);
/* Remember kind for sa for ttl_ms (XSK_PEER_UNKNOWN forgets it); skipped
 * if the table is busy.  Any thread. */
void xsk_peer_learn(const struct sockaddr *sa, enum xsk_peer_kind kind, int64_t ttl_ms);

/* ---- going plain TCP (xsk_plain.c) --------------------------------------- */

/* XSOCK_DEBUG's one line for a connect on fd that goes plain, and its
 * count in the stack's statistics (xsock-stat(1)).  Any thread. */
void xsk_plain_say(int fd, enum xsock_plain_why why);
void xsk_plain_count(enum xsock_plain_why why, const struct sockaddr *addr, socklen_t len);
/* A non-blocking connect's probe on s (xsk_probing): one look, s->mu and
 * the table lock not held, the caller's reference on s kept.  An xsock
 * answered: s is its connection from now on; none did: fd (and every
 * other fd number naming s) is the application's kernel socket again,
 * connecting, and s is named by none (true: the caller goes to libc).
 * false too while the try goes on. */
bool xsk_plain_step(int fd, struct xsk *s);
/* ... after waiting for the try's end (a blocking call on s). */
bool xsk_plain_settle(int fd, struct xsk *s);
/* The try is over, not yet decided: a wait must not sleep (no lock: a
 * hint).  The deadline to wait to at the most: xsk_probe_deadline. */
bool xsk_plain_due(const struct xsk *s);

/* ---- addresses (xsk_sockopt.c) ------------------------------------------- */

socklen_t xsk_sa_len(const struct sockaddr_storage *ss);
/* ss into the caller's addr/len, truncated as the kernel does. */
void xsk_addr_copy(const struct sockaddr_storage *ss, struct sockaddr *addr, socklen_t *len);

/* ---- data (xsk_data.c) --------------------------------------------------- */

/* The socket fd names for a data call, with a reference, or NULL: not an
 * IWARP socket, or one that is still the kernel's (FRESH), or one that
 * became a relay channel's socket.  rd: a receive or a wait for input
 * (xsk_data_sock_fn tells it by the caller's name). */
struct xsk *xsk_data_sock(int fd, bool rd);
#define xsk_data_sock_fn(fd) \
	xsk_data_sock(fd, strstr(__func__, "read") || strstr(__func__, "recv"))
/* ... for a call that never blocks (poll, ioctl): a blocking socket's
 * probe is not waited for. */
struct xsk *xsk_poll_sock(int fd, bool rd);

/* ---- poll and epoll (xsk_poll.c, xsk_epoll.c) ---------------------------- */

/* The poll(2) bits of s (among events) after progress.  From epoll_wait
 * (ep), the socket is watched (xsk_progress_watch); reported: the kernel
 * saw its inner epoll fd readable.  From poll (!ep), reported: the wait
 * on the connection's TCP socket ended with it readable.  s->mu not held. */
short xsk_poll_one(struct xsk *s, short events, bool ep, bool reported);

/* What the kernel's epoll set watches for an IWARP socket registered for
 * app: its inner epoll fd, readable on progress, buffered input or
 * arriving octets (xsk_progress_watch); epoll_wait computes the events
 * (and disables a fired EPOLLONESHOT registration itself: the kernel's
 * report may find nothing to report). */
static inline uint32_t xsk_ep_kernel_events(uint32_t app)
{
	return EPOLLIN | (app & EPOLLET);
}

/* s's registrations leave their sets and go (xsk_fdtab.c; table lock
 * held; s's last reference). */
void xsk_ep_unlink_locked(struct xsk *s);
/* Table lock held: takes r off its epoll set's list (the set may be gone). */
void xsk_ep_set_unlink_locked(struct xsk_epreg *r);
/* An epoll set closed: its registrations leave their sockets and go
 * (xsk_fdtab.c; table lock held). */
void xsk_ep_set_free_locked(struct xsk_epset *ep);
/* s's fd numbers are about to hold its inner epoll fd while their
 * original socket stays open (a probe keeps it, listen's stack listens
 * on it): the kernel's sets forget them, which a close would have done
 * (takes the table lock). */
void xsk_ep_unwatch(struct xsk *s);
/* s's fd number now holds its inner epoll fd: register it again in every
 * set that knew the original socket (takes the table lock). */
void xsk_ep_readd(struct xsk *s);
/* fd's file becomes a kernel socket (xsk_relay_take): ep_take_fd takes
 * fd's registrations of s out of libxsock's sets and the kernel's (the old
 * file still at fd; takes the table lock) and returns how many, in *out
 * (malloc'd; NULL for none); ep_give_fd registers the new file at fd in
 * those sets with the application's events and frees v. */
struct xsk_ep_moved {
	int epfd;
	struct epoll_event ev;
};
int xsk_ep_take_fd(struct xsk *s, int fd, struct xsk_ep_moved **out);
void xsk_ep_give_fd(int fd, struct xsk_ep_moved *v, int n);

/* ---- fd management (xsk_fdops.c) ----------------------------------------- */

/* atexit: close every IWARP socket as close(2) does. */
void xsk_exit_close(void);

/* ---- stdio (xsk_stdio.c) ------------------------------------------------- */

/* fd (0-2) names an IWARP socket: libc's stdin, stdout or stderr, which
 * work with libc's internal calls, becomes a stream over ours (once). */
void xsk_stdio_std(int fd);

#endif
