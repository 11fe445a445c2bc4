/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* fork(2) and IWARP sockets (xsock(7), section FORK).
 *
 * libiwarp parks its engine around fork and makes every established
 * connection dormant on both sides until one process claims it (the first
 * to use it); see verbs/xs_fork.c.  Here, around the same fork:
 *   prepare  no other thread is inside the stack (xsk_fork_gate.c);
 *            the service thread and the fd table are locked (registered
 *            after libiwarp's handlers, so this runs before its prepare);
 *            the thread's signals are held off until the end of the
 *            parent's or child's handlers (xsk_sig_hold: a handler that
 *            forks again waits for them).  A fork from a signal handler
 *            never finds a lock of its own thread's held: the handler
 *            did not run while the thread held one (xsk_signal.c), so
 *            every handler here may lock;
 *   parent   xsk_fork_gen moves on: each socket claims its connection on
 *            its next use (xsk_progress; the claim is xsk_claim.c's); a
 *            listener, released, accepts again at that use too
 *            (parent_sock);
 *   child    the same, and every IWARP socket gets files of its own: the
 *            application's fd number (an epoll instance the parent shares)
 *            is replaced by a new epoll fd holding the socket's channels
 *            (libiwarp gave the child private eventfds under the same
 *            numbers) and new ready/wake eventfds.  The service thread is
 *            gone: a listener rejoins a new one at the child's accept().
 * A socket whose connection another process claimed first is "foreign":
 * every call fails with EBUSY, poll reports POLLERR|POLLHUP, and close()
 * only drops this process's state. */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libxsock/xsk_priv.h"

void xsk_fork_listener_use(struct xsk *s)
{
	unsigned g = atomic_load_explicit(&xsk_fork_gen, memory_order_relaxed);

	if (atomic_exchange(&s->svc_gen, g) != g && s->state == XSK_LISTENING)
		xsk_svc_add(s); /* nothing if it still has one */
}

/* ---- the child's own files ---------------------------------------------------- */

/* A new eventfd holding value under the number fd (same O_NONBLOCK). */
static void new_eventfd_at(int fd, uint64_t value)
{
	int fl, n;

	if (fd < 0)
		return;
	fl = xsk_real.fcntl(fd, F_GETFL);
	n = eventfd((unsigned)value, EFD_CLOEXEC | (fl >= 0 && (fl & O_NONBLOCK) ? EFD_NONBLOCK : 0));
	if (n < 0)
		return;
	xsk_real.dup3(n, fd, O_CLOEXEC);
	xsk_real.close(n);
}

static void ep_add_fd(int ep, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	if (fd >= 0)
		xsk_real.epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

/* Put a new epoll instance with s's wait fds under the number at, with the
 * O_NONBLOCK and FD_CLOEXEC the old file had there. */
static void new_epoll_at(struct xsk *s, int at)
{
	int fl = xsk_real.fcntl(at, F_GETFL);
	int fdfl = xsk_real.fcntl(at, F_GETFD);
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0)
		return;
	ep_add_fd(ep, s->ready_fd);
	if (s->ch)
		ep_add_fd(ep, s->ch->fd);
	if (s->cch)
		ep_add_fd(ep, s->cch->fd);
	if (fl >= 0 && (fl & O_NONBLOCK))
		xsk_real.fcntl(ep, F_SETFL, O_NONBLOCK);
	xsk_real.dup3(ep, at, fdfl >= 0 && (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0);
	xsk_real.close(ep);
}

/* Locks and private fds of s (not its application fd numbers). */
static void refresh_private(struct xsk *s)
{
	pthread_mutex_init(&s->mu, NULL);
	s->claim_gen = 0; /* claim on next use */
	if (s->state == XSK_FRESH)
		return;
	if (s->state == XSK_CONNECTING)
		s->foreign = true; /* the handshake stays with the parent */
	new_eventfd_at(s->ready_fd, s->ready_set ? 1 : 0);
	new_eventfd_at(s->wake_fd, 0);
	s->writers_waiting = 0;
	s->rxw_fd = -1; /* the new epoll has no TCP socket (the parent's watch stays its own) */
	if (!s->epfd_app && s->epfd >= 0)
		new_epoll_at(s, s->epfd);
	/* plain TCP clients a mixed listener queued before the fork belong
	 * to the parent (xsock(7) MIXED LISTENER): drop the child's copies */
	struct xsk **pp = &s->acceptq;
	s->acceptq_tail = NULL;
	while (*pp) {
		struct xsk *c = *pp;
		if (c->plain_fd >= 0) {
			*pp = c->lst_next;
			s->acceptq_len--;
			xsk_real.close(c->plain_fd);
			pthread_mutex_destroy(&c->mu);
			free(c);
			continue;
		}
		s->acceptq_tail = c;
		pp = &c->lst_next;
	}
	for (struct xsk *c = s->acceptq; c; c = c->lst_next)
		refresh_private(c);
}

static void child_fd(int fd, struct xsk *s)
{
	unsigned g = atomic_load(&xsk_fork_gen);

	if (s->refresh_gen != g) {
		s->refresh_gen = g;
		s->refresh_fd = fd;
		refresh_private(s);
		if (s->state == XSK_CONNECTED && s->relay)
			xsk_relay_fork_side(s, false);
		if (s->state != XSK_FRESH && s->epfd_app)
			new_epoll_at(s, fd);
		return;
	}
	if (s->state != XSK_FRESH && s->epfd_app && s->refresh_fd != fd) {
		int fdfl = xsk_real.fcntl(fd, F_GETFD);
		xsk_real.dup3(s->refresh_fd, fd, fdfl >= 0 && (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0);
	}
}

/* ---- memory of the handlers ---------------------------------------------------- */

void *xsk_fork_alloc(size_t len)
{
	void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

void xsk_fork_free(void *p, size_t len)
{
	if (p)
		munmap(p, len ? len : 1);
}

/* ---- handlers ----------------------------------------------------------------- */

static void fork_prepare(void)
{
	xsk_gate_fork_wait(); /* no other thread inside the stack, first */
	xsk_sig_fork_prepare(); /* no handler of ours runs until the end */
	xsk_svc_fork_prepare();
	xsk_tab_fork_prepare(); /* makes the relay channels, with s->mu */
	xsk_relay_fork_prepare_all(); /* s->mu comes before relay_mu */
	xsk_raddr_fork_prepare();
}

/* Its ready fd raised (s->mu held), unless it is already: the next look
 * of a thread waiting on the socket clears it. */
static void ready_raise(struct xsk *s)
{
	uint64_t one = 1;

	if (s->ready_fd >= 0 && !s->ready_set &&
	    xsk_real.write(s->ready_fd, &one, sizeof(one)) == sizeof(one))
		s->ready_set = true;
}

/* The parent's side of each socket, under its lock:
 * - a listener accepts nothing until the parent uses it again (a
 *   pre-fork server's master never does: connections its engine took
 *   would wait there forever).  A thread of ours already waiting on it is
 *   woken to claim it back (its next look, xsk_fork_use).  That look must
 *   claim even if the thread's last one came after fork_parent moved
 *   xsk_fork_gen on and before this release (Open MPI's PMIx listener
 *   thread, in select() while mpirun forks its ranks, then never
 *   accepted again: 1 run in 8 of 4 ranks hung), so the release forgets
 *   the claim;
 * - a thread whose look came between libiwarp's handler and the new
 *   xsk_fork_gen waits on no TCP socket (xsk_io.c, rx_refused): it is
 *   woken, so that its next look claims the connection. */
static void parent_sock(struct xsk *s)
{
	const struct xsk_stack *st = xsk_stack();

	xsk_mutex_lock(&s->mu);
	if (s->state == XSK_LISTENING && !s->foreign && s->id && st && st->release &&
	    st->release(s->id) == 0) {
		s->claim_gen = atomic_load(&xsk_fork_gen) - 1; /* not this generation's */
		ready_raise(s);
	}
	if (s->fork_kick) {
		s->fork_kick = false;
		ready_raise(s);
	}
	xsk_mutex_unlock(&s->mu);
	if (s->state == XSK_CONNECTED && s->relay)
		xsk_relay_fork_side(s, true);
}

static void fork_parent(void)
{
	atomic_fetch_add(&xsk_fork_gen, 1);
	xsk_raddr_fork_done();
	xsk_relay_fork_parent();
	xsk_tab_fork_parent(parent_sock);
	xsk_svc_fork_parent();
	xsk_gate_fork_parent();
	xsk_sig_fork_parent(); /* the signals that came meanwhile run now */
}

static void fork_child(void)
{
	xsk_fork_pid = getpid();
	xsk_gate_fork_child();
	atomic_fetch_add(&xsk_fork_gen, 1);
	xsk_raddr_fork_done();
	xsk_svc_fork_child();
	xsk_relay_fork_child();
	xsk_tab_fork_child(child_fd);
	xsk_sig_fork_child();
	xsk_ring_pool_fork_child();
}

/* Once the stack is loaded, after its own handlers (so that ours prepare
 * first); the relay threads get xsk_data.c's calls before any can exist. */
static void fork_register(void)
{
	xsk_relay_set_io(xsk_relay_io);
	xsk_fork_pid = getpid();
	if (pthread_atfork(fork_prepare, fork_parent, fork_child))
		fprintf(stderr, "libxsock: pthread_atfork failed; fork is unsafe\n");
}

__attribute__((constructor)) static void xsk_fork_ctor(void)
{
	xsk_stack_on_load(fork_register);
}
