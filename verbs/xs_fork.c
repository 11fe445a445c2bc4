/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* fork(2) support for libiwarp (xsock(7), section FORK).
 *
 * Threads and io_uring rings do not survive fork, and the files a process
 * holds are shared with the child.  Around fork (pthread_atfork):
 *   prepare  the engine thread parks holding no lock; every established
 *            connection this process may use gets an owner word in a
 *            MAP_SHARED arena both processes will map, set to 0
 *            (unclaimed), and becomes DORMANT on both sides: no process
 *            receives on it until one claims it (the first process to
 *            transmit or poll its CQ swaps its pid into the word; the
 *            other process then finds it FOREIGN and gets EBUSY/EPIPE).
 *   parent   resumes the engine.
 *   child    forgets the parent's ring and engine thread (a new one starts
 *            on first use) and gets private eventfds under the same fd
 *            numbers for its CM and completion channels.
 * The RoCE CM's lock (no callback running) and the RoCE loop's are held
 * across the fork too, and a child's copies of
 * its listeners are dormant until claimed (xs_roce_cm.c); a RoCE
 * connection is its maker's alone (libxsock relays other processes' use).
 * A DORMANT or FOREIGN copy never shuts the TCP connection down: closing
 * it only drops this process's state and its reference to the socket,
 * like close(2) of a TCP socket another process also holds.
 *
 * The private entry points for libxsock (version node XSOCK_PRIVATE_0)
 * are at the end. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

#include "verbs/xs_internal.h"
#include "verbs/xs_roce.h"
#include "verbs/xs_roce_cm.h"

struct xs_arena {
	void *base;
	size_t len;
	int refs; /* under the engine's registry lock */
};

void xs_arena_ref(struct xs_arena *a)
{
	a->refs++;
}

void xs_arena_unref(struct xs_arena *a)
{
	if (!a || --a->refs > 0)
		return;
	munmap(a->base, a->len);
	munmap(a, sizeof(*a));
}

static struct xs_arena *arena_new(unsigned words)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t len = (size_t)words * sizeof(_Atomic int);
	struct xs_arena *a;

	if (page <= 0)
		page = 4096;
	len = (len + (size_t)page - 1) / (size_t)page * (size_t)page;
	/* mmap, not malloc, for the arena's own record too (private: its
	 * count is each process's): fork prepare may run in a signal handler
	 * (postgres' postmaster), where malloc must not be called */
	a = mmap(NULL, sizeof(*a), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED)
		return NULL;
	a->base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (a->base == MAP_FAILED) {
		munmap(a, sizeof(*a));
		return NULL;
	}
	a->len = len;
	return a;
}

static void fork_prepare(void)
{
	unsigned need;
	struct xs_arena *a;

	xs_rcm_fork_prepare(); /* the RoCE CM's lock, no callback running */
	xs_roce_loop_fork_prepare(); /* a leaf */
	need = xs_engine_fork_prepare(); /* registry locked from here */
	a = need ? arena_new(need) : NULL;
	/* no arena: those connections stay with the parent (FOREIGN in the child) */
	xs_engine_fork_assign(a, a ? (_Atomic int *)a->base : NULL);
}

static void fork_parent(void)
{
	xs_engine_fork_parent();
	xs_roce_loop_fork_done();
	xs_rcm_fork_parent();
}

static void fork_child(void)
{
	xs_stat_fork_child(); /* its lock before the engine's frees take it */
	xs_engine_fork_child();
	xs_roce_loop_fork_done();
	xs_rcm_fork_child();
	xs_cm_fork_child();
	xs_cq_fork_child();
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_register(void)
{
	if (pthread_atfork(fork_prepare, fork_parent, fork_child))
		xs_log("fork: pthread_atfork failed; fork is unsafe");
}

/* Register the handlers (once).  libxsock calls this before it registers
 * its own, whatever order the libraries were initialised in: its prepare
 * handler must run first (prepare handlers run in reverse order), since
 * its service thread may need the engine to finish a round. */
XS_EXPORT void xsock_priv_fork_init(void)
{
	pthread_once(&fork_once, fork_register);
}

__attribute__((constructor)) static void xs_fork_init(void)
{
	xsock_priv_fork_init();
}

/* ---- private entry points for libxsock ------------------------------------------ */

/* Use the id's connection (or listener) in this process from now on:
 * 0, or -EBUSY if another process claimed the connection first. */
XS_EXPORT int xsock_priv_claim(struct rdma_cm_id *id)
{
	struct xs_rcm_listener *rl;
	struct xs_listener *l;
	struct xs_conn *c;

	if (!id)
		return -EINVAL;
	rl = xs_cm_rlistener(id);
	if (rl)
		return xs_rcm_listener_claim(rl);
	l = xs_cm_listener(id);
	if (l) {
		xs_listener_claim(l);
		return 0;
	}
	c = xs_cm_conn(id);
	return c ? xs_conn_claim(c) : 0;
}

/* A listener accepts nothing in this process until it claims it again
 * (libxsock, after a fork in the parent): 0, or -EINVAL if id is not a
 * listener. */
XS_EXPORT int xsock_priv_release(struct rdma_cm_id *id)
{
	struct xs_rcm_listener *rl = id ? xs_cm_rlistener(id) : NULL;
	struct xs_listener *l = id ? xs_cm_listener(id) : NULL;

	if (rl) {
		xs_rcm_listener_release(rl);
		return 0;
	}
	if (!l)
		return -EINVAL;
	xs_listener_release(l);
	return 0;
}

/* The id's connection's enum xs_fork_mode, without claiming it (0 when it
 * has none). */
XS_EXPORT int xsock_priv_fork_mode(struct rdma_cm_id *id)
{
	struct xs_conn *c = id ? xs_cm_conn(id) : NULL;

	return c ? xs_conn_fork_mode(c) : XS_FORK_MINE;
}

/* Socket options on the id's TCP connection (xs_conn_tcp): 0 or -errno;
 * -ENOTCONN without one. */
XS_EXPORT int xsock_priv_tcp(struct rdma_cm_id *id, int op, int level, int name, void *val,
			     socklen_t *len)
{
	struct xs_conn *c = id ? xs_cm_conn(id) : NULL;

	return c ? xs_conn_tcp(c, op, level, name, val, len) : -ENOTCONN;
}
