/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The engine: one io_uring thread per process that owns the receive side of
 * every TCP connection, accepts and connects, runs the MPA handshakes and
 * serves RDMA Read Responses; plus the transmit path that application
 * threads run directly (the fast path: no hand-off to another thread).
 *
 * io_uring is used for readiness (one-shot POLL_ADD re-armed per event) and
 * a wake-up eventfd; the socket I/O itself is nonblocking recv/writev on the
 * engine thread, which lets a receive go straight into the buffer the DDP
 * header names (iw_rx_direct) instead of through a staging copy.
 *
 * This file: the engine's state, its start, the command queue, the
 * connections' and listeners' references and polls, a few accessors, and
 * the thread's loop (engine_main), which hands each event to the file of
 * its job (xs_engine_priv.h lists them). */
#include "config.h"

#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "verbs/xs_engine_priv.h"
#include "verbs/xs_internal.h"
#include "verbs/xs_priv_abi.h"
#include "util/xs_errno.h"

struct xs_engine xs_eng = { .once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER,
			    .reg_mu = PTHREAD_MUTEX_INITIALIZER,
			    .pause_cv = PTHREAD_COND_INITIALIZER,
			    .late_cv = PTHREAD_COND_INITIALIZER };

__thread bool xs_eng_on_thread;

static void *engine_main(void *arg);
static void arm_poll(void *obj, int tag, int fd, unsigned events);

static void engine_init(void)
{
	int rc;

	xs_eng.wake_fd = xs_fd_keep(eventfd(0, EFD_CLOEXEC));
	if (xs_eng.wake_fd < 0) {
		xs_eng.init_err = -errno;
		return;
	}
	rc = io_uring_queue_init(256, &xs_eng.ring, 0);
	if (rc < 0) {
		xs_eng.init_err = rc;
		xs_fd_close(xs_eng.wake_fd);
		return;
	}
	xs_fd_keep(xs_eng.ring.ring_fd);
	/*
	 * An RNIC has no thread in the process: a process-directed signal the
	 * application blocks to read it from a signalfd (tgtd's SIGUSR2) must
	 * not land on the engine, where its default action kills the process.
	 * Created with every signal blocked (inherited, so no window).
	 */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&xs_eng.thread, NULL, engine_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		xs_eng.init_err = -rc;
		xs_fd_drop(xs_eng.ring.ring_fd);
		io_uring_queue_exit(&xs_eng.ring);
		xs_fd_close(xs_eng.wake_fd);
		return;
	}
	pthread_detach(xs_eng.thread);
	xs_eng.started = true;
}

int xs_eng_get(void)
{
	pthread_once(&xs_eng.once, engine_init);
	return xs_eng.init_err;
}

/* One write per pass of the engine: a connection's setup and close queued
 * three commands each, and each wrote the eventfd.  Whatever was queued
 * before the exchange is seen by the pass the pending wake-up starts (the
 * engine clears wake_posted before it runs the queues). */
void xs_eng_wake(void)
{
	uint64_t one = 1;

	if (atomic_exchange(&xs_eng.wake_posted, true))
		return;
	if (write(xs_eng.wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN) {
		atomic_store(&xs_eng.wake_posted, false);
		xs_log("engine wake: %s", xs_strerror(errno));
	}
}

/* Ask the engine thread to do something with a connection. */
void xs_eng_command(struct xs_conn *c, unsigned flags)
{
	xs_eng_get(); /* a forked child starts its engine on first use */
	pthread_mutex_lock(&xs_eng.mu);
	if (!c->cmd_flags) {
		c->cmd_next = xs_eng.cmds;
		xs_eng.cmds = c;
		c->refs++;
	}
	c->cmd_flags |= flags;
	pthread_mutex_unlock(&xs_eng.mu);
	xs_eng_wake();
}

void xs_eng_conn_free(struct xs_conn *c)
{
	pthread_mutex_lock(&xs_eng.reg_mu);
	if (c->all_prev)
		c->all_prev->all_next = c->all_next;
	else
		xs_eng.conns = c->all_next;
	if (c->all_next)
		c->all_next->all_prev = c->all_prev;
	xs_arena_unref(c->arena);
	pthread_mutex_unlock(&xs_eng.reg_mu);
	xs_stat_conn_close(c->stat);
	if (c->listener)
		xs_eng_listener_unref(c->listener);
	if (c->fd >= 0)
		xs_fd_close(c->fd);
	pthread_mutex_destroy(&c->rx_mu);
	pthread_mutex_destroy(&c->tx_mu);
	pthread_cond_destroy(&c->tx_cv);
	free(c->rbuf);
	free(c->rx_over);
	free(c);
}

void xs_eng_ref(struct xs_conn *c)
{
	/* the caller holds a reference already: relaxed is enough */
	atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
}

void xs_eng_unref(struct xs_conn *c)
{
	/* acq_rel: the freeing thread sees every write made under the others */
	if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
		xs_eng_conn_free(c);
}

struct xs_conn *xs_eng_conn_new(int fd)
{
	/* the scratch at the end is 34 KiB a connection that calloc cleared */
	struct xs_conn *c = malloc(sizeof(*c));

	if (!c)
		return NULL;
	memset(c, 0, offsetof(struct xs_conn, tx_rem));
	c->rbuf = malloc(XS_RBUF);
	if (!c->rbuf) {
		free(c);
		return NULL;
	}
	c->fd = xs_fd_keep(fd);
	c->refs = 1; /* the engine's reference; the owner takes one more */
	pthread_mutex_init(&c->rx_mu, NULL);
	pthread_mutex_init(&c->tx_mu, NULL);
	pthread_cond_init(&c->tx_cv, NULL);
	pthread_mutex_lock(&xs_eng.reg_mu);
	c->all_next = xs_eng.conns;
	if (xs_eng.conns)
		xs_eng.conns->all_prev = c;
	xs_eng.conns = c;
	pthread_mutex_unlock(&xs_eng.reg_mu);
	return c;
}

/* shutdown(2) only on a connection this process owns: a dormant or foreign
 * copy of a forked connection belongs to another process. */
void xs_eng_shut(struct xs_conn *c, int how)
{
	if (atomic_load_explicit(&c->fork_mode, memory_order_acquire) == XS_FORK_MINE)
		shutdown(c->fd, how);
}

static void listener_list_del(struct xs_listener *l)
{
	pthread_mutex_lock(&xs_eng.reg_mu);
	if (l->all_prev)
		l->all_prev->all_next = l->all_next;
	else
		xs_eng.listeners = l->all_next;
	if (l->all_next)
		l->all_next->all_prev = l->all_prev;
	pthread_mutex_unlock(&xs_eng.reg_mu);
}

void xs_eng_listener_unref(struct xs_listener *l)
{
	bool last;

	pthread_mutex_lock(&xs_eng.mu);
	last = --l->refs == 0;
	pthread_mutex_unlock(&xs_eng.mu);
	if (last) {
		listener_list_del(l);
		xs_fd_close(l->fd);
		pthread_mutex_destroy(&l->mu);
		free(l);
	}
}

/* A pending poll holds a reference: the listener outlives its last CQE. */
void xs_eng_listener_arm(struct xs_listener *l)
{
	pthread_mutex_lock(&xs_eng.mu);
	l->refs++;
	pthread_mutex_unlock(&xs_eng.mu);
	l->poll_armed = true;
	arm_poll(l, TAG_LISTENER, l->fd, POLLIN);
}

/* An SQE, submitting what is queued first if the ring is full. */
static struct io_uring_sqe *eng_sqe(void)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&xs_eng.ring);

	if (!sqe) {
		io_uring_submit(&xs_eng.ring);
		sqe = io_uring_get_sqe(&xs_eng.ring);
	}
	return sqe;
}

/* The read of the wake-up eventfd, re-armed after each wake-up. */
static void arm_wake(void)
{
	struct io_uring_sqe *sqe = eng_sqe();

	io_uring_prep_read(sqe, xs_eng.wake_fd, &xs_eng.wake_buf, sizeof(xs_eng.wake_buf), 0);
	io_uring_sqe_set_data(sqe, (void *)(uintptr_t)TAG_WAKE);
}

static void arm_poll(void *obj, int tag, int fd, unsigned events)
{
	struct io_uring_sqe *sqe = eng_sqe();

	io_uring_prep_poll_add(sqe, fd, events);
	io_uring_sqe_set_data(sqe, (void *)((uintptr_t)obj | (uintptr_t)tag));
}

/* Engine: cancel the pending poll of obj (its CQE then arrives with
 * -ECANCELED and drops the poll's reference as usual). */
void xs_eng_poll_cancel(void *obj, int tag)
{
	struct io_uring_sqe *sqe = eng_sqe();

	io_uring_prep_poll_remove(sqe, (uint64_t)((uintptr_t)obj | (uintptr_t)tag));
	io_uring_sqe_set_data(sqe, NULL); /* tag 0: nothing to do */
}

void xs_eng_arm(struct xs_conn *c)
{
	unsigned ev = POLLIN | POLLRDHUP;

	if (c->poll_armed || c->state == CONN_CLOSED || c->on_redial_list ||
	    atomic_load_explicit(&c->fork_mode, memory_order_acquire) != XS_FORK_MINE)
		return;
	if (c->state == CONN_CONNECTING)
		ev = POLLOUT;
	else if ((c->state == CONN_WAIT_ACCEPT || c->state == CONN_ACCEPTED) &&
		 !c->attach_poll_used) {
		c->attach_poll_used = true; /* POLLIN: xs_conn_attach's arm */
		atomic_store(&c->attach_poll, true);
	} else if (c->state == CONN_WAIT_ACCEPT || c->state == CONN_ACCEPTED)
		ev = 0; /* fired: the attach arms (input waits for the QP) */
	else if (c->state == CONN_WAIT_REQUEST && c->cls_partial)
		ev = 0; /* the classification timer looks again (xs_hs_cls_scan) */
	else if (c->state == CONN_ESTABLISHED && atomic_load(&c->rx_stalled))
		ev = 0; /* unread input would fire it at once: post_recv kicks */
	if (c->want_out)
		ev |= POLLOUT;
	if (!ev)
		return;
	xs_hs_track(c);
	c->poll_armed = true;
	atomic_store(&c->rx_watch, c->state == CONN_ESTABLISHED && (ev & POLLIN));
	xs_eng_ref(c); /* the pending poll holds the connection */
	arm_poll(c, TAG_CONN, c->fd, ev);
}

/* One io_uring timeout per kind (the handshake scan, classification,
 * parked connections, the late list): armed at most once at a time,
 * *armed cleared by its handler. */
void xs_eng_timeout_arm(bool *armed, struct __kernel_timespec *ts, uint64_t ns, int tag)
{
	struct io_uring_sqe *sqe;

	if (*armed)
		return;
	sqe = eng_sqe();
	ts->tv_sec = (long long)(ns / 1000000000u);
	ts->tv_nsec = (long long)(ns % 1000000000u);
	io_uring_prep_timeout(sqe, ts, 0, 0);
	io_uring_sqe_set_data(sqe, (void *)(uintptr_t)tag);
	*armed = true;
}

/* ---- the connection: attach, references, accessors (xs_internal.h) -------- */

int xs_conn_attach(struct xs_conn *c, const struct xs_conn_ops *ops, void *qp,
		   struct ddp_queue *q_send, struct ddp_queue *q_readreq,
		   struct ddp_queue *q_term, struct ddp_queue *q_aresp)
{
	if (c->state != CONN_ACCEPTED)
		return -EINVAL;
	if (!xs_eng_on_thread)
		pthread_mutex_lock(&c->rx_mu);
	c->ops = ops;
	c->qp = qp;
	if (c->adopted) {
		/* posted buffers are numbered from msn_head on */
		q_send->msn_head = c->adopt_rx_msn[0];
		q_readreq->msn_head = c->adopt_rx_msn[1];
		q_term->msn_head = c->adopt_rx_msn[2];
	}
	ddp_rx_add_queue(&c->rx.ddp, q_send);
	ddp_rx_add_queue(&c->rx.ddp, q_readreq);
	c->q_readreq = q_readreq;
	ddp_rx_add_queue(&c->rx.ddp, q_term);
	if (q_aresp)
		ddp_rx_add_queue(&c->rx.ddp, q_aresp);
	c->stat = xs_stat_conn_open(c, c->fd, &c->agreed, c->initiator);
	if (c->adopted)
		xs_stat_conn_carry_in(c->stat, &c->adopt_carry);
	c->state = CONN_ESTABLISHED;
	if (!xs_eng_on_thread)
		pthread_mutex_unlock(&c->rx_mu);
	/* the accept's poll, when still pending, fires for the first input
	 * and conn_event then finds c established: the state's store and
	 * attach_poll's load here, attach_poll's store and the state's load
	 * there, are all seq_cst, so one side sees the other's */
	if (xs_eng_on_thread)
		xs_eng_arm(c); /* a connect's upcall: no command to ourselves */
	else if (!atomic_load(&c->attach_poll))
		xs_eng_command(c, CMD_ARM);
	return 0;
}

void xs_conn_hold(struct xs_conn *c)
{
	xs_eng_ref(c);
}

void xs_conn_release(struct xs_conn *c)
{
	xs_eng_unref(c);
}

const struct mpa_agreed *xs_conn_agreed(const struct xs_conn *c)
{
	return &c->agreed;
}

int xs_conn_addrs(const struct xs_conn *c, struct sockaddr_storage *local,
		  struct sockaddr_storage *peer)
{
	socklen_t l = sizeof(*local), p = sizeof(*peer);

	if (local && getsockname(c->fd, (struct sockaddr *)local, &l) < 0)
		return -errno;
	if (peer && getpeername(c->fd, (struct sockaddr *)peer, &p) < 0)
		return -errno;
	return 0;
}

int xs_conn_tcp(struct xs_conn *c, int op, int level, int name, void *val, socklen_t *len)
{
	struct sockaddr sa = { .sa_family = AF_UNSPEC };

	if (c->fd < 0)
		return -ENOTCONN;
	switch (op) {
	case XSOCK_TCP_GETOPT:
		return getsockopt(c->fd, level, name, val, len) < 0 ? -errno : 0;
	case XSOCK_TCP_SETOPT:
		return setsockopt(c->fd, level, name, val, *len) < 0 ? -errno : 0;
	case XSOCK_TCP_ABORT:
		/* connect(AF_UNSPEC) disconnects a TCP socket with an RST */
		return connect(c->fd, &sa, sizeof(sa)) < 0 ? -errno : 0;
	default:
		return -EINVAL;
	}
}

void xs_conn_set_closed_cb(struct xs_conn *c, xs_conn_closed_fn cb, void *ctx)
{
	c->closed_cb = cb;
	c->closed_ctx = ctx;
}

/* ---- engine thread ----------------------------------------------------------- */

static void conn_event(struct xs_conn *c, int res)
{
	c->poll_armed = false;
	atomic_store(&c->rx_watch, false);
	/* before c->state is read (both seq_cst): an attach after this
	 * commands an arm */
	atomic_store(&c->attach_poll, false);
	if (c->state == CONN_LINGER) {
		xs_close_linger_input(c);
		xs_eng_unref(c); /* the poll's reference */
		return;
	}
	if (c->state == CONN_CLOSED || c->owner_gone ||
	    atomic_load_explicit(&c->fork_mode, memory_order_acquire) != XS_FORK_MINE) {
		xs_eng_unref(c); /* the poll's reference */
		return;
	}
	if (c->state == CONN_ESTABLISHED && res == POLLIN && !c->want_out && !c->rr_count &&
	    atomic_load_explicit(&c->app_waiters, memory_order_acquire) > 0) {
		xs_rx_park(c); /* keeps the poll's reference */
		return;
	}
	bool rearm = true;

	if (c->state == CONN_ESTABLISHED) {
		if (res & POLLOUT)
			xs_tx_engine(c);
		if (res & (POLLIN | POLLRDHUP | POLLERR | POLLHUP))
			rearm = xs_rx_engine_receive(c); /* else the rx_mu holder re-arms */
		if (c->rr_count && !c->want_out)
			xs_tx_engine(c);
	} else {
		xs_hs_progress(c);
	}
	if (c->state != CONN_CLOSED && rearm)
		xs_eng_arm(c);
	xs_eng_unref(c);
}

static void run_commands(void)
{
	struct xs_conn *list;
	struct xs_listener *ll;

	pthread_mutex_lock(&xs_eng.mu);
	list = xs_eng.cmds;
	xs_eng.cmds = NULL;
	ll = xs_eng.lcmds;
	xs_eng.lcmds = NULL;
	for (struct xs_listener *l = ll; l; l = l->cmd_next) {
		l->run_next = l->cmd_next;
		l->run_close = l->close_cmd;
		l->cmd_queued = false;
	}
	pthread_mutex_unlock(&xs_eng.mu);

	while (ll) {
		struct xs_listener *next = ll->run_next;
		if (ll->run_close) {
			if ((ll->forked || ll->spared) && ll->poll_armed)
				xs_eng_poll_cancel(ll, TAG_LISTENER); /* no shutdown() woke it */
			if (ll->spared)
				xs_close_late_arm(); /* xs_close_late_scan expires it */
			xs_eng_listener_unref(ll); /* its own reference */
		} else if (!ll->fork_dormant && !ll->poll_armed) {
			xs_eng_listener_arm(ll);
		}
		ll = next;
	}
	/* xs_eng_command pushes onto the front: run the commands in the order
	 * they were given.  Connections armed in reverse sent their MPA
	 * Requests in reverse, so a listener's CONNECT_REQUESTs came in another
	 * order than the peer's rdma_connect calls (perftest -R -q N pairs its
	 * QPs by that order). */
	struct xs_conn *fifo = NULL;
	while (list) {
		struct xs_conn *c = list;
		list = c->cmd_next;
		c->cmd_next = fifo;
		fifo = c;
	}
	list = fifo;
	while (list) {
		struct xs_conn *c = list;
		list = c->cmd_next;
		pthread_mutex_lock(&xs_eng.mu);
		unsigned flags = c->cmd_flags;
		c->cmd_flags = 0;
		pthread_mutex_unlock(&xs_eng.mu);
		if ((flags & CMD_CLOSE) && xs_close_linger_start(c, flags)) {
			/* the engine's reference stays until the linger ends */
		} else if (flags & CMD_CLOSE) {
			if (c->state != CONN_CLOSED) {
				c->state = CONN_CLOSED;
				xs_eng_shut(c, SHUT_RDWR);
			}
			if (c->poll_armed &&
			    atomic_load_explicit(&c->fork_mode, memory_order_acquire) != XS_FORK_MINE)
				xs_eng_poll_cancel(c, TAG_CONN); /* no shutdown() woke it */
			if (!c->engine_ref_dropped) {
				c->engine_ref_dropped = true;
				xs_eng_unref(c);
			}
		} else {
			if (flags & CMD_FIN)
				xs_close_fin(c);
			if (flags & CMD_RXDEFER)
				xs_rx_deferred(c);
			if (flags & CMD_RXKICK)
				xs_rx_kick(c, false);
			if (flags & CMD_TX)
				xs_tx_engine(c);
			if (flags & (CMD_ARM | CMD_TX))
				xs_eng_arm(c);
		}
		xs_eng_unref(c); /* the command's reference */
	}
	pthread_mutex_lock(&xs_eng.mu);
	xs_eng.passes++;
	pthread_cond_broadcast(&xs_eng.late_cv);
	pthread_mutex_unlock(&xs_eng.mu);
}

static void *engine_main(void *arg)
{
	struct io_uring_cqe *cqe;

	xs_eng_on_thread = true;
	arm_wake();
	for (;;) {
		io_uring_submit_and_wait(&xs_eng.ring, 1);
		unsigned head, n = 0;
		io_uring_for_each_cqe(&xs_eng.ring, head, cqe) {
			uintptr_t ud = (uintptr_t)io_uring_cqe_get_data(cqe);
			int res = cqe->res;
			int tag = (int)(ud & 7);
			void *obj = (void *)(ud & ~(uintptr_t)7);

			n++;
			if (tag == TAG_WAKE) {
				atomic_store(&xs_eng.wake_posted, false);
				arm_wake();
			} else if (tag == TAG_LISTENER) {
				struct xs_listener *l = obj;
				l->poll_armed = false;
				if (!l->closing && !l->fork_dormant)
					xs_listen_accept(l);
				xs_eng_listener_unref(l); /* the poll's reference */
			} else if (tag == TAG_CONN) {
				conn_event(obj, res < 0 ? POLLERR : res);
			} else if (tag == TAG_TIMER) {
				xs_eng.timer_armed = false;
				xs_hs_scan();
			} else if (tag == TAG_CTIMER) {
				xs_hs_cls_scan();
			} else if (tag == TAG_PARK) {
				xs_rx_park_expired();
			} else if (tag == TAG_LATE) {
				xs_close_late_scan();
			}
		}
		io_uring_cq_advance(&xs_eng.ring, n);
		run_commands();
		if (atomic_load_explicit(&xs_eng.pause_req, memory_order_acquire)) {
			/* fork() in progress (xs_engine_pause): hold nothing */
			pthread_mutex_lock(&xs_eng.mu);
			xs_eng.paused = true;
			pthread_cond_broadcast(&xs_eng.pause_cv);
			while (atomic_load(&xs_eng.pause_req))
				pthread_cond_wait(&xs_eng.pause_cv, &xs_eng.mu);
			xs_eng.paused = false;
			pthread_mutex_unlock(&xs_eng.mu);
		}
	}
	return arg;
}
