/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The RoCE engine thread: one io_uring with a multishot poll on each
 * connection's receive socket and one on an eventfd that brings new and
 * closing connections; between completions it runs the connections'
 * retransmit and RNR timers.  Started with the first connection; it
 * lives as long as the process (a fork child starts its own when it makes
 * a connection). */
#include "config.h"

#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "verbs/xs_priv_abi.h"
#include "verbs/xs_roce_priv.h"

#define XR_TAG_EVENT 1ull
#define XR_TAG_REMOVE 2ull /* poll_remove completions: nothing to do */
#define XR_TAG_FWD 1ull /* or'ed into a connection's address: its fwd_fd */
#define XR_IDLE_US 100000 /* no timer running: look again then */

static struct {
	pthread_mutex_t mu;
	pid_t pid; /* the process the thread runs in (fork) */
	int efd;
	struct io_uring ring;
	struct xs_roce_conn *conns; /* armed or to arm */
} xr_loop = { .mu = PTHREAD_MUTEX_INITIALIZER, .efd = -1 };

static struct io_uring_sqe *get_sqe(void)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&xr_loop.ring);

	if (!sqe) {
		io_uring_submit(&xr_loop.ring);
		sqe = io_uring_get_sqe(&xr_loop.ring);
	}
	return sqe;
}

static void arm(struct xs_roce_conn *x)
{
	struct io_uring_sqe *sqe = get_sqe();
	io_uring_prep_poll_multishot(sqe, __atomic_load_n(&x->rx_fd, __ATOMIC_ACQUIRE), POLLIN);
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)x);
	x->armed = true;
}

/* fwd_fd's poll holds a reference of its own, dropped by its last
 * completion */
static void arm_fwd(struct xs_roce_conn *x)
{
	struct io_uring_sqe *sqe = get_sqe();
	xr_hold(x);
	io_uring_prep_poll_multishot(sqe, x->fwd_fd, POLLIN);
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)x | XR_TAG_FWD);
	x->fwd_armed = true;
}

static void poll_remove(uint64_t tag)
{
	struct io_uring_sqe *sqe = get_sqe();
	io_uring_prep_poll_remove(sqe, tag);
	io_uring_sqe_set_data64(sqe, XR_TAG_REMOVE);
}

static void arm_event(void)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&xr_loop.ring);

	io_uring_prep_poll_multishot(sqe, xr_loop.efd, POLLIN);
	io_uring_sqe_set_data64(sqe, XR_TAG_EVENT);
}

/* its socket, its Unix name (fwd), or both (a kick) */
static void drain(struct xs_roce_conn *x, bool sock, bool fwd)
{
	pthread_mutex_lock(&x->rx_mu);
	if (!atomic_load(&x->fatal) && (atomic_load(&x->attached) || atomic_load(&x->lingering))) {
		/* the name first while nothing was taken: what the CM passed
		 * on there came before the socket was connected (xrcm_early),
		 * ahead of what the socket holds */
		if (fwd || (sock && x->epsn == x->path.rq_psn))
			xr_fwd_drain(x);
		if (sock)
			xr_rx_drain(x, SIZE_MAX);
	}
	pthread_mutex_unlock(&x->rx_mu);
}

/* The connections the loop works on after dropping xr_loop.mu (it is
 * a leaf: the QP lock is held when a connection is added, and a drain's
 * upcalls take it), each held.  Engine thread only. */
static struct xs_roce_conn **xr_work;
static size_t xr_work_n, xr_work_cap;

static void work_add(struct xs_roce_conn *x)
{
	if (xr_work_n == xr_work_cap) {
		size_t cap = xr_work_cap ? 2 * xr_work_cap : 64;
		struct xs_roce_conn **w = realloc(xr_work, cap * sizeof(*w));

		if (!w)
			return; /* its timers run at the next round */
		xr_work = w;
		xr_work_cap = cap;
	}
	xr_hold(x);
	xr_work[xr_work_n++] = x;
}

/* Under xr_loop.mu: arm the new connections, unlist the closing ones and
 * cancel their polls (the poll's last completion drops the engine's
 * reference; unarmed: dropped here), and hold the others in xr_work. */
static void take_commands(void)
{
	struct xs_roce_conn **pp = &xr_loop.conns, *x;

	while ((x = *pp)) {
		if (atomic_load(&x->closing)) {
			*pp = x->next;
			if (x->fwd_armed)
				poll_remove((uint64_t)(uintptr_t)x | XR_TAG_FWD);
			if (x->armed)
				poll_remove((uint64_t)(uintptr_t)x);
			else
				xr_put(x);
			continue;
		}
		/* (with xsock-roced: none, or the direct channel once it came) */
		if (!x->armed && __atomic_load_n(&x->rx_fd, __ATOMIC_ACQUIRE) >= 0)
			arm(x);
		if (!x->fwd_armed && x->fwd_fd >= 0)
			arm_fwd(x);
		work_add(x);
		pp = &x->next;
	}
}

static bool listed(struct xs_roce_conn *x)
{
	for (struct xs_roce_conn *y = xr_loop.conns; y; y = y->next)
		if (y == x)
			return true;
	return false;
}

static void *loop_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct io_uring_cqe *cqe;
		uint64_t now = xr_now_us(), next = now + XR_IDLE_US;
		struct __kernel_timespec ts;
		unsigned head, seen = 0;

		pthread_mutex_lock(&xr_loop.mu);
		take_commands();
		pthread_mutex_unlock(&xr_loop.mu);
		io_uring_submit(&xr_loop.ring);
		for (size_t i = 0; i < xr_work_n; i++) {
			struct xs_roce_conn *x = xr_work[i];
			uint64_t t;

			if (atomic_exchange(&x->kick, false))
				drain(x, true, true);
			t = xr_req_timer(x, now);
			if (t && t < next)
				next = t;
			xr_put(x);
		}
		xr_work_n = 0;
		now = xr_now_us();
		next = next > now + 50 ? next - now : 50;
		ts.tv_sec = (long long)(next / 1000000u);
		ts.tv_nsec = (long long)(next % 1000000u) * 1000;
		if (io_uring_wait_cqe_timeout(&xr_loop.ring, &cqe, &ts) < 0)
			continue;
		io_uring_for_each_cqe(&xr_loop.ring, head, cqe)
		{
			uint64_t tag = io_uring_cqe_get_data64(cqe);
			bool more = cqe->flags & IORING_CQE_F_MORE;

			seen++;
			if (tag == XR_TAG_REMOVE)
				continue;
			if (tag == XR_TAG_EVENT) {
				uint64_t v;

				if (read(xr_loop.efd, &v, sizeof(v)) < 0) {
					/* nothing: another wakeup took it */
				}
				if (!more)
					arm_event();
				continue;
			}
			bool fwd = tag & XR_TAG_FWD;
			struct xs_roce_conn *x = (struct xs_roce_conn *)(uintptr_t)(tag & ~XR_TAG_FWD);

			pthread_mutex_lock(&xr_loop.mu);
			bool on = listed(x);

			if (!more)
				*(fwd ? &x->fwd_armed : &x->armed) = false;
			pthread_mutex_unlock(&xr_loop.mu);
			if (on && cqe->res > 0)
				drain(x, !fwd, fwd); /* before attach: waits (kick) */
			if (!more && (fwd || !on))
				xr_put(x); /* fwd's, or the engine's reference */
		}
		io_uring_cq_advance(&xr_loop.ring, seen);
	}
	return NULL;
}

void xs_roce_loop_fork_prepare(void)
{
	pthread_mutex_lock(&xr_loop.mu);
}

void xs_roce_loop_fork_done(void)
{
	pthread_mutex_unlock(&xr_loop.mu);
}

/* At exit, the lingering connections' unACKed packets get their chance
 * (XSOCK_LINGER_MS at most, as for a TCP close): the engine thread runs
 * until the process is gone.  (xs_roce_exit_wait calls it.) */
void xs_roce_loop_exit_wait(void)
{
	uint64_t end = xr_now_us() + (uint64_t)xs_config()->linger_ms * 1000u;

	if (xr_loop.pid != getpid())
		return; /* a fork child: the parent's connections are not ours */
	while (atomic_load(&xr_lingering) && xr_now_us() < end)
		xs_sleep_ms(1);
}

static int loop_start(void)
{
	pthread_attr_t a;
	pthread_t t;
	sigset_t all, old;
	int rc;

	if (xr_loop.efd >= 0 && xr_loop.pid == getpid())
		return 0;
	/* a fork child: the parent's ring and thread are not ours */
	xr_loop.conns = NULL;
	atomic_store(&xr_lingering, 0);
	xr_loop.efd = xsock_fd_high(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	if (xr_loop.efd < 0)
		return -errno;
	xs_fd_keep(xr_loop.efd);
	rc = io_uring_queue_init(256, &xr_loop.ring, 0);
	if (rc < 0) {
		xs_fd_close(xr_loop.efd);
		xr_loop.efd = -1;
		return rc;
	}
	xs_fd_keep(xr_loop.ring.ring_fd);
	arm_event();
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	rc = -pthread_create(&t, &a, loop_main, NULL);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc < 0) {
		io_uring_queue_exit(&xr_loop.ring);
		xs_fd_close(xr_loop.efd);
		xr_loop.efd = -1;
		return rc;
	}
	xr_loop.pid = getpid();
	return 0;
}

static void wake(void)
{
	uint64_t one = 1;

	if (write(xr_loop.efd, &one, sizeof(one)) < 0) {
		/* the counter is full: the engine is awake anyway */
	}
}

int xr_loop_add(struct xs_roce_conn *x)
{
	int rc;

	pthread_mutex_lock(&xr_loop.mu);
	rc = loop_start();
	if (rc == 0) {
		xr_hold(x); /* the engine's, dropped by the poll's last completion */
		x->next = xr_loop.conns;
		xr_loop.conns = x;
		wake();
	}
	pthread_mutex_unlock(&xr_loop.mu);
	return rc;
}

void xr_loop_remove(struct xs_roce_conn *x)
{
	atomic_store(&x->closing, true);
	wake();
}

void xr_loop_kick(struct xs_roce_conn *x)
{
	atomic_store(&x->kick, true);
	wake();
}
