/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A connection two processes use at once after fork (xsock(7) FORK).
 *
 * The connection's state lives in the memory of the process that claimed
 * it first (the owner); the kernel lets any holder of a TCP socket read
 * and write it, and programs rely on that: rsync's receiver reads the
 * socket while its parent, the generator, writes it.  So at each fork
 * every connected IWARP socket gets a relay channel: a socketpair (sp0 for
 * the owner, sp1 for the others) and an eventfd (a client exists), both
 * inherited by both processes.  The process that claims the connection
 * keeps sp0 and, once another process uses its copy, a thread of the
 * owner's copies bytes between sp0 and the connection.  The other process
 * turns its fd number into sp1 (a kernel socket from then on: its calls
 * are the kernel's) and raises the eventfd.
 *
 * Received data goes to the client only if the call that turned its fd
 * into sp1 read (or waited for input), and only while the owner's
 * application has not read (or polled for input) since the fork: one
 * reader and one writer is the pattern that needs it.  Two readers get
 * what the owner does not read; a client that first wrote gets nothing.  A client's shutdown(SHUT_WR) reaches the peer; the
 * connection lives until the owner closes it and every client has closed
 * its copy.
 *
 * The parent of the fork starts a thread per channel at once; it waits
 * for a client and claims the connection only then (relay_wait_client):
 * a child that cannot run the stack (a sandbox, xsk_sandbox.c) is served
 * though the parent never uses the connection (sshd's monitor).  When the
 * owner is the parent it keeps sp1 too, and a pipe whose write end only
 * the child's side holds tells it when that side is gone: the input
 * relayed to the child and left unread goes back in front of the
 * connection's input (relay_take_back), before the parent's next fork
 * (settle), so that sshd's post-authentication child reads the packets the
 * pre-authentication one never did.
 *
 * Over a kernel stack (xsock(7) KERNEL STACK) only the process that made a
 * connection can drive it: the kernel refuses the rdma_cm and verbs
 * commands of another process on the same files (EACCES); over RoCE the
 * connection is the maker's engine thread and memory (xsk_maker_only).
 * So the maker
 * is always the owner and every other process a client.  When the owner's
 * application closes a connection a client still holds (the pre-fork
 * server's parent), the connection is orphaned to the relay thread: it
 * serves the client alone (every byte that arrives goes to it) and closes
 * the connection once the client has closed its copy. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libxsock/xsk_config.h"
#include "libxsock/xsk_priv.h"

struct xsk_relay {
	struct xsk_relay *next;
	int sp0, sp1; /* -1 once closed in this process */
	int ctl; /* eventfd: readable once a client took sp1 */
	/* a pipe whose write end only the fork's child side holds (a client
	 * keeps it until it exits or execs): POLLHUP on ar in the parent
	 * says no process of that side can read sp1 any more */
	int ar, aw;
	pid_t side; /* the process that forked (the channel's parent side) */
	unsigned gen; /* xsk_fork_gen after that fork */
	pid_t thr_pid; /* the process whose thread serves it (0: none, -1: a client's) */
	bool announced; /* this process raised ctl */
	/* the owner is the parent side: it keeps sp1, so that what a client
	 * left unread when it ended is taken back (relay_take_back).  Set
	 * under s->mu by each claim, read by the thread without it: relaxed
	 * atomics (relay_keeps) */
	bool keep;
	pthread_t thr;
	/* eventfd of this process only (made with the thread): raised with
	 * stop, so that a close does not wait out the thread's poll */
	int wake;
	_Atomic bool stop; /* xsk_free: end now */
	_Atomic bool orphan; /* the owner's application closed: the thread frees s */
	/* the thread checked that this process owns the connection (s->mu):
	 * until then it waits, for a client, touching nothing */
	bool serving;
	_Atomic bool done; /* the thread ended (after its take-back) */
	struct xsk *s;
};

static pthread_mutex_t relay_mu = PTHREAD_MUTEX_INITIALIZER;
static int relay_starting; /* threads created, not yet in their loop (relay_mu) */
__thread bool xsk_relay_self;

static bool relay_keeps(const struct xsk_relay *r)
{
	return __atomic_load_n(&r->keep, __ATOMIC_RELAXED);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		xsk_fd_close(*fd);
	*fd = -1;
}

/* A change of s->relay's list (s->mu held): an atomic store, because
 * xsk_has_relay reads the head without the lock (a hint). */
static void relay_link(struct xsk_relay **pp, struct xsk_relay *r)
{
	__atomic_store_n(pp, r, __ATOMIC_RELEASE);
}

static void chan_free(struct xsk_relay *r)
{
	close_fd(&r->sp0);
	close_fd(&r->sp1);
	close_fd(&r->ctl);
	close_fd(&r->ar);
	close_fd(&r->aw);
	close_fd(&r->wake);
	xsk_fork_free(r, sizeof(*r));
}

/* This process's thread for r ends now (any thread; s->mu held or not). */
static void relay_stop(struct xsk_relay *r)
{
	uint64_t one = 1;

	atomic_store(&r->stop, true);
	if (r->wake >= 0 && xsk_real.write(r->wake, &one, sizeof(one)) < 0) {
		/* (a full counter wakes it anyway) */
	}
}

/* The protocol's hooks into this file (struct xsk_relay_hooks, xsk_proto.h),
 * handed over before the first s->relay is set. */
static bool xsk_relay_orphan(struct xsk *s);
static void xsk_relay_free(struct xsk *s);
static void xsk_relay_owner(struct xsk *s);
static const struct xsk_relay_hooks relay_hooks = {
	.orphan = xsk_relay_orphan,
	.free = xsk_relay_free,
	.owner = xsk_relay_owner,
};

/* The data calls the relay threads make (xsk_relay_set_io). */
static xsk_relay_io_fn *relay_io;

void xsk_relay_set_io(xsk_relay_io_fn *io)
{
	relay_io = io;
}

static bool clients_gone(const struct xsk_relay *r);

/* A thread of ours whose clients all ended is taking back what they left
 * unread: wait for it (bounded), so that the child about to be forked
 * inherits those bytes (sshd's monitor forks the post-authentication
 * child as soon as the pre-authentication one has exited). */
static void settle(struct xsk *s)
{
	pid_t me = getpid();

	for (int i = 0; i < 1000; i++) {
		bool busy = false;
		xsk_mutex_lock(&s->mu);
		for (struct xsk_relay *r = s->relay; r && !busy; r = r->next)
			busy = r->thr_pid == me && relay_keeps(r) && !atomic_load(&r->done) &&
			       clients_gone(r);
		xsk_mutex_unlock(&s->mu);
		if (!busy)
			return;
		usleep(2000);
	}
}

/* fork prepare (s->mu not held, the fd table not locked): one more channel. */
void xsk_relay_fork_prepare(struct xsk *s)
{
	struct xsk_relay *r;
	int sp[2];

	if (s->relay)
		settle(s);
	if (s->state != XSK_CONNECTED || s->foreign || s->peer_gone)
		return;
	if (xsk_maker_only(s) && s->owner_pid != getpid())
		return; /* a client already: only the maker relays */
	r = xsk_fork_alloc(sizeof(*r)); /* (in fork prepare) */
	if (!r)
		return;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
		xsk_fork_free(r, sizeof(*r));
		return;
	}
	r->sp0 = xsk_fd_keep(sp[0]);
	r->sp1 = xsk_fd_keep(sp[1]);
	r->ctl = xsk_fd_keep(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	r->ar = r->aw = r->wake = -1;
	if (r->ctl < 0) {
		r->sp0 = r->sp1 = -1;
		xsk_fd_close(sp[0]);
		xsk_fd_close(sp[1]);
		xsk_fork_free(r, sizeof(*r));
		return;
	}
	if (!xsk_maker_only(s) && pipe2(sp, O_CLOEXEC | O_NONBLOCK) == 0) {
		r->ar = xsk_fd_keep(sp[0]);
		r->aw = xsk_fd_keep(sp[1]);
	}
	r->side = getpid();
	r->gen = atomic_load(&xsk_fork_gen) + 1;
	r->s = s;
	xsk_proto_set_relay(&relay_hooks);
	xsk_mutex_lock(&s->mu);
	r->next = s->relay;
	relay_link(&s->relay, r);
	xsk_mutex_unlock(&s->mu);
}

void xsk_relay_fork_prepare_all(void)
{
	xsk_mutex_lock(&relay_mu);
	while (relay_starting) { /* a sanitizer's allocator is not fork-safe */
		xsk_mutex_unlock(&relay_mu);
		sched_yield();
		xsk_mutex_lock(&relay_mu);
	}
}

void xsk_relay_fork_parent(void)
{
	xsk_mutex_unlock(&relay_mu);
}

void xsk_relay_fork_child(void)
{
	pthread_mutex_init(&relay_mu, NULL);
	relay_starting = 0;
}

static bool hup(int fd)
{
	struct pollfd p = { .fd = fd, .events = 0 };

	return xsk_real.poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

/* No other process can read or write the channel any more. */
static bool clients_gone(const struct xsk_relay *r)
{
	return relay_keeps(r) ? r->ar < 0 || hup(r->ar) : r->sp0 < 0 || hup(r->sp0);
}

static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return xsk_real.poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* A waiting thread (not serving yet) found a client: claim the
 * connection for this process, as its first use would.  false: another
 * process owns it, or this process gave it up (xsk_relay_client). */
static bool relay_claim(struct xsk_relay *r)
{
	struct xsk *s = r->s;
	bool ok;

	xsk_mutex_lock(&s->mu);
	ok = !atomic_load(&r->stop) && s->state == XSK_CONNECTED && xsk_fork_use(s);
	r->serving = ok;
	xsk_mutex_unlock(&s->mu);
	return ok;
}

/* Every client ended (r->keep): what they left unread in sp1, then what
 * the thread held for them (pending), goes back in front of the
 * connection's input, for whoever reads next, as a kernel socket's
 * queue would keep it. */
static void relay_take_back(struct xsk_relay *r, const void *pending, size_t n)
{
	struct xsk *s = r->s;
	char buf[4096], *all = NULL;
	size_t len = 0;
	ssize_t k;

	while ((k = xsk_real.recv(r->sp1, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		char *m = realloc(all, len + (size_t)k);
		if (!m)
			break;
		all = m;
		memcpy(all + len, buf, (size_t)k);
		len += (size_t)k;
	}
	if (n) {
		char *m = realloc(all, len + n);
		if (m) {
			all = m;
			memcpy(all + len, pending, n);
			len += n;
		}
	}
	xsk_mutex_lock(&s->mu);
	if (len && xsk_unread_add(s, all, len) == 0) {
		xsk_set_ready(s);
		if (xsk_debug())
			fprintf(stderr, "libxsock: pid %d: %zu bytes a relayed process left unread "
					"are the connection's input again\n",
				(int)getpid(), len);
	}
	xsk_mutex_unlock(&s->mu);
	free(all);
}

#define RELAY_BUF 65536

/* Until the thread serves (r->serving): a client's first sign (ctl, or
 * bytes in sp0) makes it claim the connection; the stack is not touched
 * before that.  1 serving, 0 not yet (it waited), -1 end (no client can
 * come, or another process owns the connection: a ctl it consumed is
 * raised again for that process's thread). */
static int relay_wait_client(struct xsk_relay *r, bool *client)
{
	struct pollfd p[4];
	int n = 0;

	if (*client || readable(r->sp0)) {
		if (relay_claim(r))
			return 1;
		if (*client) {
			uint64_t one = 1;
			if (xsk_real.write(r->ctl, &one, sizeof(one)) < 0) {
				/* (a full counter: its reader sees it anyway) */
			}
		}
		return -1;
	}
	if (atomic_load(&r->stop) || r->ar < 0 || hup(r->ar))
		return -1; /* the child side is gone, never used it */
	p[n++] = (struct pollfd){ .fd = r->ctl, .events = POLLIN };
	p[n++] = (struct pollfd){ .fd = r->sp0, .events = POLLIN };
	p[n++] = (struct pollfd){ .fd = r->ar, .events = 0 };
	if (r->wake >= 0)
		p[n++] = (struct pollfd){ .fd = r->wake, .events = POLLIN };
	xsk_real.poll(p, (nfds_t)n, 50);
	return 0;
}

/* The owner's thread for one channel: the client's bytes to the
 * connection, the connection's to the client (once a client exists and
 * while the application does not read).  Non-blocking on both sides, so
 * that neither direction waits for the other.  A thread started at fork
 * in the parent (xsk_relay_fork_side) first waits for a client and claims
 * the connection then: sshd's monitor never uses the connection while its
 * sandboxed child does (xsk_tab_sandbox). */
static void *relay_main(void *arg)
{
	struct xsk_relay *r = arg;
	struct xsk *s = r->s;
	char *up = malloc(RELAY_BUF), *down = malloc(RELAY_BUF);
	size_t up_n = 0, up_off = 0, down_n = 0, down_off = 0;
	bool client = false, up_eof = false, down_eof = false, serving;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL); /* signals are the application's */
	xsk_relay_self = true;
	xsk_mutex_lock(&relay_mu);
	relay_starting--;
	xsk_mutex_unlock(&relay_mu);
	xsk_mutex_lock(&s->mu);
	serving = r->serving;
	xsk_mutex_unlock(&s->mu);
	if (!up || !down)
		goto out;
	for (;;) {
		struct pollfd p[8];
		int fds[3], n = 0, nw;
		bool moved = false, up_idle = false;

		bool orphan = atomic_load(&r->orphan);
		if (!client && orphan)
			client = true; /* the only reader left */
		if (!client) {
			uint64_t v;
			client = xsk_real.read(r->ctl, &v, sizeof(v)) == sizeof(v);
		}
		if (!serving) {
			int w = relay_wait_client(r, &client);
			if (w < 0)
				goto out;
			if (!w)
				continue;
			serving = true;
		}
		/* before the read below: once gone, sp0 holds all they wrote */
		bool gone = relay_keeps(r) && clients_gone(r);
		/* client -> connection */
		if (!up_n && !up_eof) {
			ssize_t k = xsk_real.recv(r->sp0, up, RELAY_BUF, MSG_DONTWAIT);
			if (k > 0) {
				up_n = (size_t)k;
				up_off = 0;
			} else if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
				up_idle = true;
			} else {
				up_eof = true;
				/* EOF without HUP: a client's shutdown(SHUT_WR) (with
				 * r->keep, sp1 is ours too: always that) */
				if (relay_keeps(r) || !hup(r->sp0))
					relay_io(s, NULL, 0, -1);
			}
		}
		if (up_n) {
			ssize_t k = relay_io(s, up + up_off, up_n, 1);
			if (k > 0) {
				up_off += (size_t)k;
				up_n -= (size_t)k;
				moved = true;
			} else if (k < 0 && errno != EAGAIN) {
				up_n = 0;
				up_eof = true;
			}
		}
		if (gone && !up_n && (up_idle || up_eof)) {
			relay_take_back(r, down + down_off, down_n);
			break; /* every client ended */
		}
		/* connection -> client */
		bool want_down = client && !down_eof && !gone &&
				 (orphan || s->app_read_gen != atomic_load(&xsk_fork_gen));
		if (want_down && !down_n) {
			ssize_t k = relay_io(s, down, RELAY_BUF, 0);
			if (k > 0) {
				down_n = (size_t)k;
				down_off = 0;
			} else if (k == 0 || errno != EAGAIN) {
				down_eof = true;
				xsk_real.shutdown(r->sp0, SHUT_WR);
			}
		}
		if (down_n && !gone) {
			ssize_t k = xsk_real.send(r->sp0, down + down_off, down_n,
						  MSG_DONTWAIT | MSG_NOSIGNAL);
			if (k > 0) {
				down_off += (size_t)k;
				down_n -= (size_t)k;
				moved = true;
			} else if (k < 0 && errno != EAGAIN && errno != EINTR) {
				down_n = 0;
				down_eof = true;
			}
		}
		if (!relay_keeps(r) && up_eof && hup(r->sp0) && !up_n)
			break; /* every client closed its copy */
		if (atomic_load(&r->stop))
			break;
		if (moved || gone)
			continue;
		/* wait: the client's socket, the ctl eventfd, the connection */
		p[n++] = (struct pollfd){ .fd = r->sp0,
					  .events = (short)((!up_n && !up_eof ? POLLIN : 0) |
							    (down_n ? POLLOUT : 0)) };
		if (!client)
			p[n++] = (struct pollfd){ .fd = r->ctl, .events = POLLIN };
		if (relay_keeps(r))
			p[n++] = (struct pollfd){ .fd = r->ar, .events = 0 };
		if (r->wake >= 0)
			p[n++] = (struct pollfd){ .fd = r->wake, .events = POLLIN };
		xsk_mutex_lock(&s->mu);
		nw = xsk_wait_fds(s, fds, up_n != 0);
		xsk_mutex_unlock(&s->mu);
		if ((up_n || (want_down && !down_n)) && nw > 0)
			for (int i = 0; i < nw; i++)
				p[n++] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
		/* bounded: the ready/wake eventfds are level-triggered hints */
		xsk_real.poll(p, (nfds_t)n, 50);
	}
out:
	free(up);
	free(down);
	/* the clients see EOF; xsk_free joins and frees */
	xsk_mutex_lock(&s->mu);
	close_fd(&r->sp0);
	if (relay_keeps(r))
		close_fd(&r->sp1);
	atomic_store(&r->done, true);
	bool orphan = atomic_load(&r->orphan);
	if (orphan)
		r->thr_pid = 0;
	xsk_mutex_unlock(&s->mu);
	if (orphan) {
		/* nobody joins an orphan's thread: it closes the connection */
		pthread_detach(pthread_self());
		xsk_free(s);
	}
	return NULL;
}

/* A thread of this process for r (s->mu held); false if none could start. */
static bool relay_start(struct xsk_relay *r)
{
	xsk_mutex_lock(&relay_mu);
	relay_starting++;
	if (r->wake < 0)
		r->wake = xsk_fd_keep(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	if (xsk_thread_start(&r->thr, relay_main, r)) {
		relay_starting--;
		xsk_mutex_unlock(&relay_mu);
		if (xsk_debug())
			fprintf(stderr, "libxsock: no relay thread: the other processes' "
					"copies of the connection see EOF\n");
		return false;
	}
	r->thr_pid = getpid();
	xsk_mutex_unlock(&relay_mu);
	return true;
}

/* The claim went to this process (s->mu held): keep sp0 of each channel,
 * drop sp1, and serve the channels some other process still holds. */
static void xsk_relay_owner(struct xsk *s)
{
	pid_t me = getpid();

	for (struct xsk_relay **pp = &s->relay; *pp;) {
		struct xsk_relay *r = *pp;
		/* the parent side keeps sp1 (relay_take_back) while its
		 * sandboxed child side holds the channel */
		__atomic_store_n(&r->keep,
				 r->side == me && r->ar >= 0 && r->sp1 >= 0 && r->sp0 >= 0 &&
					 readable(r->ar),
				 __ATOMIC_RELAXED);
		if (!relay_keeps(r))
			close_fd(&r->sp1);
		if (r->thr_pid == me) {
			pp = &r->next;
			continue;
		}
		if (clients_gone(r)) {
			/* nobody else holds it (the pre-fork server's parent
			 * closed its copy): no thread */
			relay_link(pp, r->next);
			chan_free(r);
			continue;
		}
		if (xsk_debug())
			fprintf(stderr, "libxsock: pid %d owns a connection other processes hold: "
					"their copies are relayed\n", (int)me);
		r->serving = true;
		if (!relay_start(r)) {
			relay_link(pp, r->next);
			chan_free(r);
			continue;
		}
		pp = &r->next;
	}
}

/* After the fork (s->mu not held): the newest channel, made by this fork.
 * The parent side drops the pipe's write end and starts a thread that
 * waits for a client (relay_wait_client), so that a child that cannot run
 * the stack is served even if this process never uses the connection; the
 * child side drops the pipe's read end. */
void xsk_relay_fork_side(struct xsk *s, bool parent)
{
	unsigned g = atomic_load(&xsk_fork_gen);
	struct xsk_relay *r;

	xsk_mutex_lock(&s->mu);
	r = s->relay;
	if (r && r->gen == g) {
		close_fd(parent ? &r->aw : &r->ar);
		if (parent && r->ar >= 0 && !r->thr_pid && !xsk_maker_only(s))
			relay_start(r);
	}
	xsk_mutex_unlock(&s->mu);
}

/* Another process claimed the connection (s->mu held): drop our sp0s; the
 * newest channel's sp1 (first in the list) is what the fd becomes, -1 if
 * none (then the calls fail with EBUSY). */
int xsk_relay_client(struct xsk *s, bool rd, bool sandbox)
{
	struct xsk_relay *keep = NULL;

	for (struct xsk_relay **pp = &s->relay; *pp;) {
		struct xsk_relay *r = *pp;
		if (r->thr_pid == getpid()) {
			/* our thread serves an older client: it sees EBUSY and
			 * ends; one still waiting for a client ends now, and its
			 * channel may be ours as a client (the thread closes sp0) */
			relay_stop(r);
			if (!keep && !r->serving && r->sp1 >= 0)
				keep = r;
			pp = &r->next;
			continue;
		}
		if (!keep && r->sp1 >= 0) {
			keep = r;
			close_fd(&r->sp0);
			pp = &r->next;
			continue;
		}
		relay_link(pp, r->next);
		chan_free(r);
	}
	if (!keep) {
		if (xsk_debug())
			fprintf(stderr, "libxsock: pid %d: the connection is another process's "
					"(claimed first after fork, no relay channel): EBUSY\n",
				(int)getpid());
		return -1;
	}
	/* a sandboxed client (sshd's pre-authentication child) hands the
	 * connection back when it ends: an octet in the pipe, before the
	 * announcement, asks the parent to keep sp1 for that
	 * (relay_take_back).  Any other client may execve with its copy as
	 * the new program's stdin (git daemon, inetd), which closes the
	 * pipe's close-on-exec write end while sp1 is still in use. */
	if (sandbox && keep->aw >= 0 && xsk_real.write(keep->aw, "S", 1) < 0) {
		/* (a full pipe already says so) */
	}
	if (!keep->announced && rd && keep->thr_pid != -1) {
		uint64_t one = 1;
		if (xsk_real.write(keep->ctl, &one, sizeof(one)) < 0 && errno != EAGAIN)
			return -1;
		keep->announced = true;
		if (!keep->thr_pid)
			keep->thr_pid = -1; /* a client's */
	}
	/* the write end of the pipe stays open as long as this process
	 * lives: the fd number the application holds is a dup of sp1 */
	keep->aw = -1;
	return keep->sp1;
}

static bool xsk_relay_orphan(struct xsk *s)
{
	pid_t me = getpid();
	struct xsk_relay *keep = NULL;

	if (!xsk_maker_only(s) || !s->relay || s->owner_pid != me)
		return false;
	xsk_mutex_lock(&s->mu);
	if (s->state == XSK_CONNECTED && !s->foreign)
		for (struct xsk_relay *r = s->relay; r && !keep; r = r->next)
			if (r->sp0 >= 0 && (r->thr_pid == 0 || r->thr_pid == me) && !hup(r->sp0))
				keep = r;
	if (keep) {
		close_fd(&keep->sp1); /* ours: the client's copy alone keeps it open */
		if (keep->sp0 >= 0 && hup(keep->sp0)) {
			keep = NULL; /* (that was the last copy) */
		} else {
			atomic_store(&keep->orphan, true);
			if (keep->thr_pid != me)
				keep->serving = true;
			if (keep->thr_pid != me && !relay_start(keep)) {
				atomic_store(&keep->orphan, false);
				keep = NULL;
			}
		}
	}
	xsk_mutex_unlock(&s->mu);
	if (keep && xsk_debug())
		fprintf(stderr, "libxsock: pid %d closed a connection another process uses: "
				"relayed until that process closes it\n", (int)me);
	return keep != NULL;
}

/* r's thread still sends what its gone clients wrote.  s->mu not held:
 * takes it, as the thread closes the channel's fds under it. */
static bool relay_flushing(struct xsk *s, const struct xsk_relay *r)
{
	bool busy;

	xsk_mutex_lock(&s->mu);
	busy = !atomic_load(&r->done) && r->serving && clients_gone(r);
	xsk_mutex_unlock(&s->mu);
	return busy;
}

/* xsk_free, before anything goes (s->mu not held): this process's relay
 * threads end (a thread whose clients are all gone first sends what they
 * wrote, as a kernel socket would before the close's FIN), then every
 * channel is closed. */
static void xsk_relay_free(struct xsk *s)
{
	pid_t me = getpid();

	for (struct xsk_relay *r = s->relay; r; r = r->next) {
		if (r->thr_pid != me)
			continue;
		/* bounded: a thread with clients still there stops at once */
		for (int i = 0; i < 400 && relay_flushing(s, r); i++)
			usleep(5000);
		relay_stop(r);
		pthread_join(r->thr, NULL);
		/* the other channels' threads read it (xsk_relay_owner) */
		xsk_mutex_lock(&s->mu);
		r->thr_pid = 0;
		xsk_mutex_unlock(&s->mu);
	}
	while (s->relay) {
		struct xsk_relay *r = s->relay;
		relay_link(&s->relay, r->next);
		chan_free(r);
	}
}
