/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The engine's side of fork (driven by xs_fork.c), and claiming a
 * connection or listener shared by a fork.
 *
 * prepare: the engine thread parks at the end of its loop (holding no lock)
 * and the registry is locked; each connection gets the mode it has on both
 * sides of the fork.  An established connection this process may use
 * becomes DORMANT in parent and child: neither receives on it until one of
 * them claims it (xs_conn_claim: a compare-and-swap of the owner word in
 * memory both processes map), so no process consumes the other's octets.
 * Anything else (a handshake in progress, a connection another thread is
 * using at this moment, a closed one) stays with the parent: FOREIGN in the
 * child. */
#include "config.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "verbs/xs_engine_priv.h"
#include "verbs/xs_internal.h"

int xs_conn_claim(struct xs_conn *c)
{
	int m = atomic_load_explicit(&c->fork_mode, memory_order_acquire);
	int me, owner = 0;

	if (m == XS_FORK_MINE)
		return 0;
	if (m == XS_FORK_FOREIGN)
		return -EBUSY;
	me = (int)getpid();
	if (!atomic_compare_exchange_strong(c->share, &owner, me) && owner != me) {
		atomic_store(&c->fork_mode, XS_FORK_FOREIGN);
		return -EBUSY;
	}
	m = XS_FORK_DORMANT;
	if (atomic_compare_exchange_strong(&c->fork_mode, &m, XS_FORK_MINE))
		xs_eng_command(c, CMD_ARM | CMD_TX); /* receive from now on */
	return 0;
}

int xs_conn_fork_mode(struct xs_conn *c)
{
	int m = atomic_load_explicit(&c->fork_mode, memory_order_acquire);

	if (m == XS_FORK_DORMANT && c->share) {
		int owner = atomic_load(c->share);
		if (owner && owner != (int)getpid())
			return XS_FORK_FOREIGN;
	}
	return m;
}

/* The parent of a fork gives its listener up like the child (libxsock's
 * listeners, xsock_priv_release): a process that does not use it after the
 * fork (nginx's master) must not take connections nobody there accepts. */
void xs_listener_release(struct xs_listener *l)
{
	pthread_mutex_lock(&xs_eng.mu);
	if (!l->closing)
		l->fork_dormant = true; /* an armed poll completes into nothing */
	pthread_mutex_unlock(&xs_eng.mu);
}

void xs_listener_claim(struct xs_listener *l)
{
	bool wake = false;

	pthread_mutex_lock(&xs_eng.mu);
	if (l->fork_dormant && !l->closing) {
		l->fork_dormant = false;
		if (!l->cmd_queued) {
			l->cmd_next = xs_eng.lcmds;
			xs_eng.lcmds = l;
			l->cmd_queued = true;
		}
		wake = true;
	}
	pthread_mutex_unlock(&xs_eng.mu);
	if (wake) {
		xs_eng_get();
		xs_eng_wake();
	}
}

/* Park the engine thread (if this process has one) and lock the registry;
 * return the number of connections that need a new owner word. */
unsigned xs_engine_fork_prepare(void)
{
	unsigned need = 0;

	pthread_mutex_lock(&xs_eng.mu);
	if (xs_eng.started) {
		atomic_store(&xs_eng.pause_req, true);
		pthread_mutex_unlock(&xs_eng.mu);
		xs_eng_wake();
		pthread_mutex_lock(&xs_eng.mu);
		while (!xs_eng.paused)
			pthread_cond_wait(&xs_eng.pause_cv, &xs_eng.mu);
	}
	pthread_mutex_unlock(&xs_eng.mu);
	pthread_mutex_lock(&xs_eng.reg_mu);
	pthread_mutex_lock(&xs_eng.mu);
	for (struct xs_conn *c = xs_eng.conns; c; c = c->all_next) {
		int m = xs_conn_fork_mode(c);
		bool idle = false;

		if (m != XS_FORK_FOREIGN && c->state == CONN_ESTABLISHED && !c->owner_gone &&
		    pthread_mutex_trylock(&c->rx_mu) == 0) {
			pthread_mutex_lock(&c->tx_mu);
			idle = !c->dead && (!c->tx_busy || c->tx_engine);
			pthread_mutex_unlock(&c->tx_mu);
			pthread_mutex_unlock(&c->rx_mu);
		}
		c->fork_next = idle ? XS_FORK_DORMANT : XS_FORK_FOREIGN;
		if (m == XS_FORK_FOREIGN)
			atomic_store(&c->fork_mode, XS_FORK_FOREIGN);
		/* a word nobody claimed since the last fork still describes
		 * identical copies: keep it; else a fresh one */
		if (idle && !(c->share && atomic_load(c->share) == 0))
			need++;
	}
	return need;
}

/* Give the connections that need one a word of the new arena (owner 0). */
void xs_engine_fork_assign(struct xs_arena *a, _Atomic int *slots)
{
	unsigned i = 0;

	for (struct xs_conn *c = xs_eng.conns; c; c = c->all_next) {
		if (c->fork_next != XS_FORK_DORMANT || (c->share && atomic_load(c->share) == 0))
			continue;
		if (!a) {
			c->fork_next = XS_FORK_FOREIGN; /* no shared word: the parent keeps it */
			continue;
		}
		xs_arena_unref(c->arena);
		c->arena = a;
		xs_arena_ref(a);
		c->share = &slots[i++];
		atomic_store(c->share, 0);
	}
}

void xs_engine_fork_parent(void)
{
	for (struct xs_conn *c = xs_eng.conns; c; c = c->all_next)
		if (c->fork_next == XS_FORK_DORMANT)
			atomic_store(&c->fork_mode, XS_FORK_DORMANT);
	for (struct xs_listener *l = xs_eng.listeners; l; l = l->all_next)
		l->forked = true;
	atomic_store(&xs_eng.pause_req, false);
	pthread_cond_broadcast(&xs_eng.pause_cv);
	pthread_mutex_unlock(&xs_eng.mu);
	pthread_mutex_unlock(&xs_eng.reg_mu);
}

/* The child: no engine thread, and the ring belongs to the parent.  Drop
 * what the parent's ring and command queues held, give every connection
 * its mode, and let the first use start a new engine. */
void xs_engine_fork_child(void)
{
	struct xs_conn *c, *next;
	struct xs_listener *l, *lnext;

	/* fork_prepare left both locked by this (the forking) thread:
	 * unlock, not re-initialise (a locked mutex must not be
	 * initialised; ThreadSanitizer then reports a double lock) */
	pthread_mutex_unlock(&xs_eng.mu);
	pthread_mutex_unlock(&xs_eng.reg_mu);
	pthread_cond_init(&xs_eng.pause_cv, NULL);
	atomic_store(&xs_eng.pause_req, false);
	xs_eng.paused = false;
	if (xs_eng.started) {
		xs_fd_drop(xs_eng.ring.ring_fd);
		io_uring_queue_exit(&xs_eng.ring); /* our mapping and fd only */
		xs_fd_close(xs_eng.wake_fd);
	}
	xs_eng.started = false;
	atomic_store(&xs_eng.wake_posted, false);
	xs_eng.init_err = 0;
	xs_eng.once = (pthread_once_t)PTHREAD_ONCE_INIT;
	xs_eng.timer_armed = false;
	xs_eng.ctimer_armed = false;
	for (c = xs_eng.cmds; c; c = c->cmd_next) {
		c->cmd_flags = 0;
		c->refs--;
	}
	xs_eng.cmds = NULL;
	for (c = xs_eng.hs_list; c; c = c->hs_next) {
		c->on_hs_list = false;
		c->refs--;
	}
	xs_eng.hs_list = NULL;
	for (c = xs_eng.parked; c; c = c->park_next) {
		c->rx_parked = false;
		c->refs--;
	}
	xs_eng.parked = NULL;
	xs_eng.park_armed = false;
	/* the parent's delayed FINs and lingering closes stay the parent's */
	for (c = xs_eng.late; c; c = c->late_next) {
		c->on_late_list = false;
		c->fin_due_ms = 0;
		c->refs--;
		if (c->state == CONN_LINGER && !c->engine_ref_dropped) {
			c->engine_ref_dropped = true;
			c->refs--;
		}
	}
	xs_eng.late = NULL;
	xs_eng.late_armed = false;
	xs_eng.late_count = 0;
	pthread_cond_init(&xs_eng.late_cv, NULL);
	for (l = xs_eng.lcmds; l; l = l->cmd_next) {
		l->cmd_queued = false;
		if (l->close_cmd)
			l->refs--; /* run_commands would have dropped its own */
	}
	xs_eng.lcmds = NULL;
	for (c = xs_eng.conns; c; c = next) {
		next = c->all_next;
		pthread_mutex_init(&c->rx_mu, NULL);
		pthread_mutex_init(&c->tx_mu, NULL);
		pthread_cond_init(&c->tx_cv, NULL);
		atomic_store(&c->fork_mode, c->fork_next);
		if (c->fork_next == XS_FORK_FOREIGN) {
			c->dead = true; /* the parent's: no tx from here */
			c->tx_busy = false;
		}
		atomic_store(&c->attach_poll, false); /* the parent's poll */
		if (c->poll_armed) {
			c->poll_armed = false;
			atomic_store(&c->rx_watch, false);
			c->refs--;
		}
		if (c->refs <= 0)
			xs_eng_conn_free(c);
	}
	for (l = xs_eng.listeners; l; l = lnext) {
		lnext = l->all_next;
		pthread_mutex_init(&l->mu, NULL);
		l->forked = true;
		l->fork_dormant = true;
		if (l->poll_armed) {
			l->poll_armed = false;
			l->refs--;
		}
		if (l->refs <= 0) {
			l->refs = 1;
			xs_eng_listener_unref(l);
		}
	}
}
