/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* libxsock's view of an IWARP socket, as rsockets' rsocket.h is its
 * interposer's: the interposer (xsk_intercept.h's files, xsk_epoll_et.c,
 * xsk_sendfile.c) reads and changes a struct xsk only through these
 * accessors and operations, so that the struct's layout is a contract
 * between the protocol files (xsk_proto.h's, xsk_claim.c, xsk_ext.c,
 * xsk_fork.c, xsk_relay.c, xsk_exec.c) and this header (with xsk_sock.c).
 *
 * Thread and locks: any thread; s->mu held (xsk_lock) unless noted.
 * "No lock" reads are hints the callers re-check under the lock or may
 * act on late, as before (a socket leaves FRESH only in listen/connect on
 * the application's own fd number). */
#ifndef XSK_SOCK_H
#define XSK_SOCK_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libxsock/xsk_priv.h"

/* ---- lock, state, flags -------------------------------------------------- */

static inline void xsk_lock(struct xsk *s)
{
	xsk_mutex_lock(&s->mu);
}

static inline void xsk_unlock(struct xsk *s)
{
	xsk_mutex_unlock(&s->mu);
}

/* (also no lock: a hint) */
static inline enum xsk_state xsk_state(const struct xsk *s)
{
	return s->state;
}

/* connect or listen failed: the socket is over (no pending error if
 * clear_err) */
static inline void xsk_set_closed(struct xsk *s, bool clear_err)
{
	s->state = XSK_CLOSED;
	if (clear_err)
		s->err = 0;
}

/* ... with err pending (SO_ERROR, positive errno) */
static inline void xsk_set_failed(struct xsk *s, int err)
{
	s->state = XSK_CLOSED;
	s->err = err;
}

/* The pending error (SO_ERROR, positive errno or 0), cleared. */
static inline int xsk_take_err(struct xsk *s)
{
	int e = s->err;

	s->err = 0;
	return e;
}

/* The connect failed because the peer refused in MPA (an iWARP peer):
 * s->mu held. */
static inline bool xsk_mpa_rejected(const struct xsk *s)
{
	return s->mpa_rejected;
}

/* ... else how it failed, as a reason to go plain (enum
 * xsock_plain_why): s->mu held. */
static inline enum xsock_plain_why xsk_plain_why(const struct xsk *s)
{
	return (enum xsock_plain_why)s->plain_why;
}

static inline int xsk_family(const struct xsk *s)
{
	return s->family;
}

/* O_NONBLOCK as the socket obeys it (also no lock: a hint, or a flag the
 * application sets under no lock of ours: fcntl) */
static inline bool xsk_nonblock(const struct xsk *s)
{
	return s->nonblock;
}

static inline void xsk_set_nonblock(struct xsk *s, bool on)
{
	s->nonblock = on;
}

static inline bool xsk_cloexec(const struct xsk *s)
{
	return s->cloexec;
}

/* An accepted socket's new fd number's flags (accept4; s->mu not held:
 * no other thread knows the socket yet). */
static inline void xsk_set_fd_flags(struct xsk *s, bool nonblock, bool cloexec)
{
	s->nonblock = nonblock;
	s->cloexec = cloexec;
}

/* a candidate of the selection rules (xsk_config.c) */
static inline bool xsk_by_rules(const struct xsk *s)
{
	return s->by_rules;
}

static inline void xsk_set_by_rules(struct xsk *s, bool on)
{
	s->by_rules = on;
}

static inline void xsk_set_backlog(struct xsk *s, int backlog)
{
	s->backlog = backlog;
}

/* an AF_INET6 listener's IPV6_V6ONLY when taken over (-1: none) */
static inline void xsk_set_v6only(struct xsk *s, int v6only)
{
	s->v6only = v6only;
}

/* ---- fd numbers ------------------------------------------------------------ */

/* The inner epoll fd: the number the application holds once the socket
 * is taken over (an accepted socket's before it has one). */
static inline int xsk_epfd(const struct xsk *s)
{
	return s->epfd;
}

/* The application holds the inner epoll fd as fd (its close closes it);
 * the one made before, if another, is closed. */
static inline void xsk_set_app_epfd(struct xsk *s, int fd)
{
	if (s->epfd != fd)
		xsk_real.close(s->epfd);
	s->epfd = fd;
	s->epfd_app = true;
}

/* a mixed listener's plain client in the accept queue: its kernel
 * socket, or -1 (an IWARP socket) */
static inline int xsk_plain_fd(const struct xsk *s)
{
	return s->plain_fd;
}

/* ... which the caller takes (the shell keeps -1) */
static inline int xsk_take_plain_fd(struct xsk *s)
{
	int fd = s->plain_fd;

	s->plain_fd = -1;
	return fd;
}

/* A non-blocking connect's probe (xsk_plain.c): the application's TCP
 * socket kept aside, or -1; when the try is given up.  xsk_probing: not
 * decided yet (also no lock: a hint). */
static inline int xsk_probe_fd(const struct xsk *s)
{
	return s->probe_fd;
}

static inline int64_t xsk_probe_deadline(const struct xsk *s)
{
	return s->probe_deadline;
}

static inline void xsk_set_probe(struct xsk *s, int fd, int64_t deadline)
{
	s->probe_fd = fd;
	s->probe_deadline = deadline;
}

/* ... it went plain: the fd numbers are (or are becoming) the kernel
 * socket's, s is named by none */
static inline bool xsk_probe_switching(const struct xsk *s)
{
	return s->probe_switching;
}

static inline void xsk_set_probe_switching(struct xsk *s, bool on)
{
	s->probe_switching = on;
}

static inline bool xsk_probing(const struct xsk *s)
{
	return s->probe_fd >= 0 || s->probe_switching;
}

/* the fd table's file for s (xsk_fdtab.c: set once, under its lock) */
static inline struct xsk_file *xsk_file_of(const struct xsk *s)
{
	return s->file;
}

static inline void xsk_set_file(struct xsk *s, struct xsk_file *f)
{
	s->file = f;
}

/* ---- addresses ------------------------------------------------------------- */

/* The local address, or NULL while unbound. */
static inline const struct sockaddr_storage *xsk_local(const struct xsk *s)
{
	return s->have_local ? &s->local : NULL;
}

/* The local address from the kernel's socket fd (getsockname): 0, or
 * -errno (the address stays as it was). */
static inline int xsk_learn_local(struct xsk *s, int fd)
{
	socklen_t l = sizeof(s->local);

	if (xsk_real.getsockname(fd, (struct sockaddr *)&s->local, &l) < 0)
		return -errno;
	s->have_local = true;
	return 0;
}

static inline const struct sockaddr_storage *xsk_peer(const struct xsk *s)
{
	return &s->peer;
}

/* ---- options ------------------------------------------------------------------- */

/* SO_RCVTIMEO (rcv) or SO_SNDTIMEO in us: 0 none, < 0 no wait */
static inline int64_t xsk_timeo(const struct xsk *s, bool rcv)
{
	return rcv ? s->rcvtimeo_us : s->sndtimeo_us;
}

static inline void xsk_set_timeo(struct xsk *s, bool rcv, int64_t us)
{
	*(rcv ? &s->rcvtimeo_us : &s->sndtimeo_us) = us;
}

static inline int xsk_rcvlowat(const struct xsk *s)
{
	return s->rcvlowat;
}

static inline void xsk_set_rcvlowat(struct xsk *s, int v)
{
	s->rcvlowat = v;
}

static inline void xsk_linger(const struct xsk *s, bool *on, int *secs)
{
	*on = s->linger_on;
	*secs = s->linger_s;
}

static inline void xsk_set_linger(struct xsk *s, bool on, int secs)
{
	s->linger_on = on;
	s->linger_s = secs;
}

/* the receive ring's and the send ring's sizes */
static inline uint32_t xsk_rbuf_size(const struct xsk *s)
{
	return s->rbuf_size;
}

/* (before the connection exists: SO_RCVBUF) */
static inline void xsk_set_rbuf_size(struct xsk *s, uint32_t n)
{
	s->rbuf_size = n;
}

static inline uint32_t xsk_sbuf_size(const struct xsk *s)
{
	return s->sbuf_size;
}

/* room in the send ring now */
static inline uint32_t xsk_sbuf_room(const struct xsk *s)
{
	return s->sbuf_size - s->sbuf_used;
}

/* The options recorded for the connection's TCP socket and for
 * getsockopt (xsk_sock.c): set or replace one; find one (false if never
 * set); copy them all out (at most XSK_MAX_OPTS; their count). */
void xsk_opt_record(struct xsk *s, int level, int name, int val);
bool xsk_opt_find(const struct xsk *s, int level, int name, int *val);
int xsk_opts_get(const struct xsk *s, struct xsk_opt out[XSK_MAX_OPTS]);
/* level/name is an option the connection's TCP socket gets (an int):
 * recorded, set on it once the connection exists, read from it while it
 * does (xsk_sock.c).  Any thread, no lock. */
bool xsk_opt_tcp(int level, int name);
/* An option on the connection's TCP socket (op: XSOCK_TCP_GETOPT,
 * XSOCK_TCP_SETOPT): 0, -ENOTCONN while there is none (or no stack
 * support), or the TCP socket's -errno. */
int xsk_sock_tcp(struct xsk *s, int op, int level, int name, void *val, socklen_t *len);

/* ---- data and waiting --------------------------------------------------------- */

/* bytes a read would return now (FIONREAD) */
static inline int xsk_fionread(const struct xsk *s)
{
	return s->state == XSK_CONNECTED && !s->shut_rd ? (int)(s->rbytes + s->unread.n) : 0;
}

/* A blocking MSG_PEEK under SO_RCVLOWAT: true while fewer than target
 * bytes are buffered and more may come (it waits for the mark). */
static inline bool xsk_peek_waits(const struct xsk *s, size_t target)
{
	return s->state == XSK_CONNECTED && s->rbytes + s->unread.n < target && !s->err &&
	       !s->peer_shut_wr && !s->shut_rd;
}

/* The application (not a relay thread) reads or polls for input:
 * received data stays its own (xsk_relay.c). */
static inline void xsk_note_app_read(struct xsk *s)
{
	s->app_read_gen = atomic_load(&xsk_fork_gen);
}

/* the next progress receives on this thread (xsk_progress_io) */
static inline void xsk_set_rx_hint(struct xsk *s, bool on)
{
	s->rx_hint = on;
}

/* the connection's TCP socket is in the inner epoll fd (xsk_progress_watch) */
static inline bool xsk_rx_watched(const struct xsk *s)
{
	return s->rxw_fd >= 0;
}

/* the wake eventfd of blocked writers, or -1 */
static inline int xsk_wake_fd(const struct xsk *s)
{
	return s->wake_fd;
}

/* A writer about to block: a thread that makes the socket writable wakes
 * it (its wake eventfd).  xsk_writer_end: the wait is over, the wake-up
 * consumed. */
static inline void xsk_writer_begin(struct xsk *s)
{
	s->writers_waiting++;
}

static inline void xsk_writer_end(struct xsk *s)
{
	uint64_t v;

	s->writers_waiting--;
	if (s->wake_fd >= 0 && xsk_real.read(s->wake_fd, &v, sizeof(v)) < 0)
		v = 0;
}

/* Wake the blocked writers (the socket became writable while no one
 * could see a waiter). */
static inline void xsk_writer_kick(struct xsk *s)
{
	uint64_t one = 1;

	if (xsk_real.write(s->wake_fd, &one, sizeof(one)) < 0)
		one = 0;
}

/* ---- fork ---------------------------------------------------------------------- */

/* a relay channel exists (xsk_relay.c; no lock: a hint, re-checked by
 * xsk_relay_client under s->mu) */
static inline bool xsk_has_relay(const struct xsk *s)
{
	return __atomic_load_n(&s->relay, __ATOMIC_ACQUIRE) != NULL;
}

/* another process uses the connection (xsk_fork.c) */
static inline bool xsk_foreign(const struct xsk *s)
{
	return s->foreign;
}

/* The fork that made s's newest relay channel (the table lock held). */
static inline unsigned xsk_relay_gen(const struct xsk *s)
{
	return s->relay_gen;
}

static inline void xsk_set_relay_gen(struct xsk *s, unsigned g)
{
	s->relay_gen = g;
}

/* ---- epoll ----------------------------------------------------------------------- */

/* The epoll registrations naming s (the table lock held: xsk_epoll.c). */
static inline struct xsk_epreg **xsk_regs(struct xsk *s)
{
	return &s->regs;
}

/* registrations asking for EPOLLIN (changed under the table lock, read
 * by xsk_progress_watch under s->mu) */
static inline int xsk_ep_in_regs(const struct xsk *s)
{
	return s->ep_in_regs;
}

static inline void xsk_ep_in_regs_add(struct xsk *s, int d)
{
	s->ep_in_regs += d;
}

/* What EPOLLET's edges are measured by (xsk_epoll_et.c): data messages
 * received, the send ring's tail (send completions), connections
 * queued on a listener. */
static inline void xsk_edge_marks(const struct xsk *s, uint16_t *rseq, uint32_t *tail,
				  unsigned *acc)
{
	*rseq = s->rmsg_arrived;
	*tail = s->sbuf_tail;
	*acc = s->acceptq_seq;
}

#endif
