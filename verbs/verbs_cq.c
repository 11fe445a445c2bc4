/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Completion queues and completion channels.  A CQ is a mutex-protected
 * ring of struct ibv_wc that both the application (post_send completions)
 * and the engine thread (receives, Read completions, flushes) append to.
 * A channel is an eventfd (semaphore mode: one read per event) plus a FIFO
 * of the CQs that fired, so ibv_get_cq_event can say which one.
 *
 * Overflow: the completion is dropped, the CQ marked and IBV_EVENT_CQ_ERR
 * queued on the context's async fd (hardware would stop the CQ; apps that
 * size their CQs as the spec asks never see it).
 * ibv_destroy_cq does not wait for unacknowledged events (rdma-core would
 * block); it refuses with EBUSY while a QP still uses the CQ.
 *
 * Fast path (measured with xsock-bench, see xsock-bench(1)): polling an
 * empty CQ receives on the connections of its QPs on the caller's thread
 * (the transport's poll: xs_conn_poll), and ibv_get_cq_event does the
 * same for a short while before it sleeps, so a completion that arrives soon costs no wake-up of
 * the engine thread followed by one of the application thread. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "util/xs_clock.h"
#include "verbs/verbs_priv.h"
#include "verbs/xs_priv_abi.h"
#include "util/xs_errno.h"

/* a reserved entry (xs_cq_reserve) not yet filled; an entry of a destroyed
 * QP (xs_cq_clean_qp), skipped by polls */
#define XS_WC_PENDING ((enum ibv_wc_status)0x7fffffff)
#define XS_WC_DROPPED ((enum ibv_wc_status)0x7ffffffe)

#define XS_CHANNEL_SPIN_CQS 8
struct xs_channel {
	struct ibv_comp_channel ch;
	pthread_mutex_t lock;
	struct xs_cq **fifo; /* CQs with an event not yet read; NULL = CQ destroyed */
	unsigned head, count, cap;
	struct xs_cq *cqs[XS_CHANNEL_SPIN_CQS]; /* CQs ibv_get_cq_event spins on */
	unsigned ncqs;
	struct xs_channel *live_next, *live_prev; /* for fork */
};

static struct xs_channel *channels_live;
static pthread_mutex_t channels_lock = PTHREAD_MUTEX_INITIALIZER;

int xs_fork_new_eventfd(int fd, unsigned flags, uint64_t value)
{
	int fl = fcntl(fd, F_GETFL);
	int fdfl = fcntl(fd, F_GETFD);
	int efl = EFD_CLOEXEC | (int)flags;
	int n, rc = 0;

	if (fl < 0 || fdfl < 0)
		return -errno;
	if (fl & O_NONBLOCK)
		efl |= EFD_NONBLOCK;
	n = eventfd(value > 0xffffffffu ? 0xffffffffu : (unsigned)value, efl);
	if (n < 0)
		return -errno;
	if (dup3(n, fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0)
		rc = -errno;
	close(n);
	return rc;
}

/* The child's own eventfd per channel, holding one count per queued event. */
void xs_cq_fork_child(void)
{
	pthread_mutex_init(&channels_lock, NULL);
	for (struct xs_channel *c = channels_live; c; c = c->live_next) {
		pthread_mutex_init(&c->lock, NULL);
		if (xs_fork_new_eventfd(c->ch.fd, EFD_SEMAPHORE, c->count) < 0)
			xs_log("fork: completion channel fd %d: %s", c->ch.fd, xs_strerror(errno));
	}
}

static struct xs_channel *to_xs_channel(struct ibv_comp_channel *ch)
{
	return (struct xs_channel *)ch;
}

XS_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct xs_channel *c = calloc(1, sizeof(*c));

	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->ch.context = context;
	c->ch.fd = xs_fd_keep(xsock_fd_high(eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE)));
	if (c->ch.fd < 0) {
		int e = errno;

		free(c);
		errno = e;
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_lock(&channels_lock);
	c->live_next = channels_live;
	if (channels_live)
		channels_live->live_prev = c;
	channels_live = c;
	pthread_mutex_unlock(&channels_lock);
	return &c->ch;
}

XS_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct xs_channel *c = to_xs_channel(channel);

	pthread_mutex_lock(&c->lock);
	if (c->ch.refcnt) {
		pthread_mutex_unlock(&c->lock);
		return EBUSY;
	}
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_lock(&channels_lock);
	if (c->live_prev)
		c->live_prev->live_next = c->live_next;
	else
		channels_live = c->live_next;
	if (c->live_next)
		c->live_next->live_prev = c->live_prev;
	pthread_mutex_unlock(&channels_lock);
	xs_fd_close(c->ch.fd);
	pthread_mutex_destroy(&c->lock);
	free(c->fifo);
	free(c);
	return 0;
}

static void channel_signal(struct xs_channel *c, struct xs_cq *cq)
{
	uint64_t one = 1;
	bool ok = true;

	pthread_mutex_lock(&c->lock);
	if (c->count == c->cap) {
		unsigned ncap = c->cap ? c->cap * 2 : 16;
		struct xs_cq **n = malloc(ncap * sizeof(*n));

		if (n) {
			for (unsigned i = 0; i < c->count; i++)
				n[i] = c->fifo[(c->head + i) % c->cap];
			free(c->fifo);
			c->fifo = n;
			c->head = 0;
			c->cap = ncap;
		} else {
			ok = false;
		}
	}
	if (ok) {
		c->fifo[(c->head + c->count) % c->cap] = cq;
		c->count++;
	}
	pthread_mutex_unlock(&c->lock);
	if (ok && write(c->ch.fd, &one, sizeof(one)) != sizeof(one))
		xs_log("completion event lost\n");
}

/* Receive on the connections of x's QPs on this thread (x->lock not held;
 * maybe: as for the transport's poll).  Returns the octets consumed. */
static size_t cq_poll_conns(struct xs_cq *x, bool maybe)
{
	struct xs_cq_conn c[XS_CQ_POLL_CONNS];
	unsigned n;
	size_t got = 0;

	pthread_mutex_lock(&x->lock);
	n = x->nconns;
	for (unsigned i = 0; i < n; i++) {
		c[i] = x->conns[i];
		c[i].tp->hold(c[i].c);
	}
	pthread_mutex_unlock(&x->lock);
	bool busy = false;
	for (unsigned i = 0; i < n; i++) {
		ssize_t r = c[i].tp->poll(c[i].c, 1u << 20, maybe);
		if (r > 0)
			got += (size_t)r;
		busy |= r == -EBUSY;
		c[i].tp->release(c[i].c);
	}
	/* the engine is receiving: let it run (it may share our CPU) */
	if (busy && !got)
		sched_yield();
	return got;
}

/* Before sleeping: receive on the channel's CQs for a short while; stop as
 * soon as an event is pending.  How long: a round trip on loopback is 10-30
 * us; a wake-up chain (engine thread, then the application) costs about as
 * much again.  The spin burns CPU, so XSOCK_EVENT_SPIN_US (default 40, 0 =
 * never) sets it per process. */
static uint64_t event_spin_ns(void)
{
	static uint64_t ns = UINT64_MAX;
	uint64_t v = __atomic_load_n(&ns, __ATOMIC_RELAXED);

	if (v == UINT64_MAX) {
		v = (uint64_t)xs_config()->event_spin_us * 1000;
		__atomic_store_n(&ns, v, __ATOMIC_RELAXED);
	}
	return v;
}

/* spin_ns 0: one pass only (a nonblocking channel must not wait at all). */
static void channel_spin(struct xs_channel *c, uint64_t spin_ns)
{
	struct xs_cq *cqs[XS_CHANNEL_SPIN_CQS];
	uint64_t end = 0;
	unsigned n;

	for (;;) {
		pthread_mutex_lock(&c->lock);
		if (c->count) {
			pthread_mutex_unlock(&c->lock);
			return;
		}
		n = c->ncqs;
		for (unsigned i = 0; i < n; i++) {
			cqs[i] = c->cqs[i];
			__atomic_add_fetch(&cqs[i]->spinners, 1, __ATOMIC_ACQUIRE);
		}
		pthread_mutex_unlock(&c->lock);
		for (unsigned i = 0; i < n; i++) {
			cq_poll_conns(cqs[i], false);
			__atomic_sub_fetch(&cqs[i]->spinners, 1, __ATOMIC_RELEASE);
		}
		if (!n || !spin_ns)
			return;
		uint64_t now = xs_now_ns();
		if (end && now >= end)
			return;
		if (!end)
			end = now + spin_ns;
	}
}

XS_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
			       void **cq_context)
{
	struct xs_channel *c = to_xs_channel(channel);
	struct xs_cq *x = NULL;
	uint64_t v;

	/* A nonblocking channel (the application set O_NONBLOCK on its fd to
	 * poll it) gets one receive pass and then EAGAIN, never a spin. */
	int fl = fcntl(c->ch.fd, F_GETFL);
	channel_spin(c, fl >= 0 && (fl & O_NONBLOCK) ? 0 : event_spin_ns());
	while (!x) {
		/* blocks, or EAGAIN if the app set O_NONBLOCK on channel->fd */
		if (read(c->ch.fd, &v, sizeof(v)) != sizeof(v))
			return -1;
		pthread_mutex_lock(&c->lock);
		if (c->count) {
			x = c->fifo[c->head];
			c->head = (c->head + 1) % c->cap;
			c->count--;
		}
		pthread_mutex_unlock(&c->lock);
	}
	*cq = &x->cq;
	*cq_context = x->cq.cq_context;
	return 0;
}

/* ---- private to libxsock: its own CQ without the channel's round trips ---- */

/* Events queued on the channel (no system call). */
XS_EXPORT int xsock_priv_comp_pending(struct ibv_comp_channel *channel)
{
	struct xs_channel *c = to_xs_channel(channel);
	unsigned n;

	pthread_mutex_lock(&c->lock);
	n = c->count;
	pthread_mutex_unlock(&c->lock);
	return (int)n;
}

/* Take one queued event as ibv_get_cq_event would, without its receive
 * pass or spin: 1 (its count read from the eventfd), 0 if none. */
XS_EXPORT int xsock_priv_comp_take(struct ibv_comp_channel *channel)
{
	struct xs_channel *c = to_xs_channel(channel);
	uint64_t v;
	bool took = false;

	pthread_mutex_lock(&c->lock);
	if (c->count) {
		c->head = (c->head + 1) % c->cap;
		c->count--;
		took = true;
	}
	pthread_mutex_unlock(&c->lock);
	/* the write that goes with it may still be on its way: a nonblocking
	 * channel then keeps that count, which only makes a waiter look once
	 * more (semaphore mode: one read, one count) */
	if (took && read(c->ch.fd, &v, sizeof(v)) != sizeof(v))
		v = 0;
	return took;
}

/* on = 0: disarm (completions queue without an event); on = 1: arm, and
 * if completions are already queued, signal the event at once (the
 * thread that disarmed may have left some: nobody must sleep on them).
 * Returns 1 if it signalled. */
XS_EXPORT int xsock_priv_cq_arm(struct ibv_cq *cq, int on)
{
	struct xs_cq *x = (struct xs_cq *)cq;
	bool fire = false;

	pthread_mutex_lock(&x->lock);
	if (!on || x->count)
		x->armed = 0;
	else
		x->armed = XS_CQ_ARM_NEXT;
	fire = on && x->count;
	pthread_mutex_unlock(&x->lock);
	if (fire && cq->channel)
		channel_signal(to_xs_channel(cq->channel), x);
	return fire;
}

XS_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_broadcast(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

/* ---- CQ ------------------------------------------------------------------- */

XS_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
				       struct ibv_comp_channel *channel, int comp_vector)
{
	struct xs_cq *x;
	unsigned cap = 1;

	if (cqe < 1 || cqe > XS_MAX_CQE || comp_vector < 0 ||
	    comp_vector >= context->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	while (cap < (unsigned)cqe)
		cap <<= 1;
	x = calloc(1, sizeof(*x));
	/* not cleared: an entry is read only below the count (a connection's
	 * CQ of 4096 entries is 192 KiB) */
	if (!x || !(x->ring = malloc(cap * sizeof(*x->ring)))) {
		free(x);
		errno = ENOMEM;
		return NULL;
	}
	x->cap = cap;
	x->cq.context = context;
	x->cq.channel = channel;
	x->cq.cq_context = cq_context;
	x->cq.cqe = (int)cap;
	pthread_mutex_init(&x->cq.mutex, NULL);
	pthread_cond_init(&x->cq.cond, NULL);
	pthread_mutex_init(&x->lock, NULL);
	if (channel) {
		struct xs_channel *c = to_xs_channel(channel);

		pthread_mutex_lock(&c->lock);
		c->ch.refcnt++;
		if (c->ncqs < XS_CHANNEL_SPIN_CQS)
			c->cqs[c->ncqs++] = x;
		pthread_mutex_unlock(&c->lock);
	}
	return &x->cq;
}

XS_EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
	struct xs_cq *x = (struct xs_cq *)cq;

	if (__atomic_load_n(&x->qp_refs, __ATOMIC_ACQUIRE) > 0)
		return EBUSY;
	if (cq->channel) {
		struct xs_channel *c = to_xs_channel(cq->channel);

		/* events of this CQ not read yet must not name freed memory */
		pthread_mutex_lock(&c->lock);
		for (unsigned i = 0; i < c->count; i++)
			if (c->fifo[(c->head + i) % c->cap] == x)
				c->fifo[(c->head + i) % c->cap] = NULL;
		c->ch.refcnt--;
		for (unsigned i = 0; i < c->ncqs; i++)
			if (c->cqs[i] == x)
				c->cqs[i] = c->cqs[--c->ncqs];
		pthread_mutex_unlock(&c->lock);
		/* a spinning ibv_get_cq_event may still be polling it */
		while (__atomic_load_n(&x->spinners, __ATOMIC_ACQUIRE))
			sched_yield();
	}
	xs_async_forget(cq->context, cq); /* an unread CQ_ERR must not name freed memory */
	pthread_mutex_destroy(&x->lock);
	pthread_mutex_destroy(&cq->mutex);
	pthread_cond_destroy(&cq->cond);
	free(x->ring);
	free(x);
	return 0;
}

/* A new ring of at least cqe entries (a power of two, as created), the
 * pending completions moved over in order.  EINVAL if they would not fit
 * or cqe is out of range (as a provider's resize), ENOMEM. */
XS_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	struct xs_cq *x = (struct xs_cq *)cq;
	struct ibv_wc *ring;
	unsigned cap = 1;

	if (!cq || cqe < 1 || cqe > XS_MAX_CQE)
		return EINVAL;
	while (cap < (unsigned)cqe)
		cap <<= 1;
	ring = malloc(cap * sizeof(*ring));
	if (!ring)
		return ENOMEM;
	pthread_mutex_lock(&x->lock);
	if (x->count > cap) {
		pthread_mutex_unlock(&x->lock);
		free(ring);
		return EINVAL;
	}
	for (unsigned i = 0; i < x->count; i++)
		ring[i] = x->ring[(x->head + i) & (x->cap - 1)];
	free(x->ring);
	x->ring = ring;
	x->head = 0;
	x->cap = cap;
	cq->cqe = (int)cap;
	pthread_mutex_unlock(&x->lock);
	return 0;
}

/* rx: XSOCK_RX_* (xs_priv_abi.h) */
static int poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc, int rx)
{
	struct xs_cq *x = (struct xs_cq *)cq;
	int i = 0;

	if (n < 0)
		return -1;
	for (int pass = 0; pass < 2; pass++) {
		pthread_mutex_lock(&x->lock);
		while (i < n && x->count && x->ring[x->head].status != XS_WC_PENDING) {
			if (x->ring[x->head].status != XS_WC_DROPPED)
				wc[i++] = x->ring[x->head];
			x->head = (x->head + 1) & (x->cap - 1);
			x->count--;
			x->popped++;
		}
		bool conns = x->nconns > 0;
		pthread_mutex_unlock(&x->lock);
		/* empty: receive what is waiting on this thread, then look again */
		if (i || !n || !conns || rx == XSOCK_RX_NONE || !cq_poll_conns(x, rx == XSOCK_RX_MAYBE))
			break;
	}
	return i;
}

int xs_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	return poll_cq(cq, n, wc, XSOCK_RX_ALWAYS);
}

/* Private to libxsock (xs_priv_abi.h) */
XS_EXPORT int xsock_priv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc, int rx)
{
	return poll_cq(cq, n, wc, rx);
}

void xs_cq_add_conn(struct ibv_cq *cq, const struct xs_transport_ops *tp, struct xs_conn *conn)
{
	struct xs_cq *x = (struct xs_cq *)cq;

	pthread_mutex_lock(&x->lock);
	for (unsigned i = 0; i < x->nconns; i++)
		if (x->conns[i].c == conn)
			goto out;
	if (x->nconns < XS_CQ_POLL_CONNS) {
		tp->hold(conn);
		x->conns[x->nconns++] = (struct xs_cq_conn){ .tp = tp, .c = conn };
	}
out:
	pthread_mutex_unlock(&x->lock);
}

void xs_cq_del_conn(struct ibv_cq *cq, struct xs_conn *conn)
{
	struct xs_cq *x = (struct xs_cq *)cq;
	const struct xs_transport_ops *tp = NULL;

	pthread_mutex_lock(&x->lock);
	for (unsigned i = 0; i < x->nconns; i++)
		if (x->conns[i].c == conn) {
			tp = x->conns[i].tp;
			x->conns[i] = x->conns[--x->nconns];
			break;
		}
	pthread_mutex_unlock(&x->lock);
	if (tp)
		tp->release(conn);
}

int xs_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	struct xs_cq *x = (struct xs_cq *)cq;

	pthread_mutex_lock(&x->lock);
	/* a pending "any" arm is not narrowed by a later solicited-only one */
	if (!solicited_only)
		x->armed = XS_CQ_ARM_NEXT;
	else if (!x->armed)
		x->armed = XS_CQ_ARM_SOLICITED;
	pthread_mutex_unlock(&x->lock);
	return 0;
}

void xs_cq_clean_qp(struct ibv_cq *cq, uint32_t qp_num)
{
	struct xs_cq *x = (struct xs_cq *)cq;

	/* marked, not compacted: another QP's reservation is found again by
	 * its position (xs_cq_fill) */
	unsigned dropped = 0, ok = 0;

	pthread_mutex_lock(&x->lock);
	for (unsigned i = 0; i < x->count; i++) {
		struct ibv_wc *wc = &x->ring[(x->head + i) & (x->cap - 1)];

		if (wc->status != XS_WC_PENDING && wc->status != XS_WC_DROPPED &&
		    wc->qp_num == qp_num) {
			ok += wc->status == IBV_WC_SUCCESS;
			wc->status = XS_WC_DROPPED;
			dropped++;
		}
	}
	pthread_mutex_unlock(&x->lock);
	if (ok) /* flushed receives are what every disconnect leaves */
		xs_log("QP %u destroyed: %u of its completions not polled are dropped (%u successful)",
		       qp_num, dropped, ok);
}

bool xs_cq_has_qp(struct ibv_cq *cq, uint32_t qp_num)
{
	struct xs_cq *x = (struct xs_cq *)cq;
	bool has = false;

	pthread_mutex_lock(&x->lock);
	for (unsigned i = 0; i < x->count && !has; i++) {
		const struct ibv_wc *wc = &x->ring[(x->head + i) & (x->cap - 1)];

		has = wc->status != XS_WC_DROPPED && wc->qp_num == qp_num;
	}
	pthread_mutex_unlock(&x->lock);
	return has;
}

/* Lock held: does this completion fire the CQ's event (and disarm it)? */
static bool cq_fires(struct xs_cq *x, const struct ibv_wc *wc, bool solicited)
{
	/* solicited-only also fires on errors (verbs spec) */
	if (x->armed == XS_CQ_ARM_NEXT ||
	    (x->armed == XS_CQ_ARM_SOLICITED && (solicited || wc->status != IBV_WC_SUCCESS))) {
		x->armed = 0;
		return true;
	}
	return false;
}

int xs_cq_push(struct ibv_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	return xs_cq_push_n(cq, wc, 1, solicited);
}

int xs_cq_push_n(struct ibv_cq *cq, const struct ibv_wc *wc, unsigned n, bool solicited)
{
	struct xs_cq *x = (struct xs_cq *)cq;
	bool fire = false, overflow = false, dropped = false;

	pthread_mutex_lock(&x->lock);
	for (unsigned i = 0; i < n; i++) {
		if (x->count == x->cap) {
			dropped = true;
			overflow |= !x->overflow;
			x->overflow = true;
			continue;
		}
		x->ring[(x->head + x->count) & (x->cap - 1)] = wc[i];
		x->count++;
		x->pushed++;
		fire |= cq_fires(x, &wc[i], solicited);
	}
	pthread_mutex_unlock(&x->lock);
	if (overflow) {
		struct ibv_async_event ev = { .element.cq = cq, .event_type = IBV_EVENT_CQ_ERR };

		xs_log("CQ %p overflow: completion dropped\n", (void *)cq);
		xs_async_event(cq->context, &ev);
	}
	if (fire && cq->channel)
		channel_signal(to_xs_channel(cq->channel), x);
	return dropped ? -ENOSPC : 0;
}

int xs_cq_reserve(struct ibv_cq *cq, unsigned n, uint64_t *seq)
{
	struct xs_cq *x = (struct xs_cq *)cq;

	pthread_mutex_lock(&x->lock);
	if (n > x->cap - x->count) {
		pthread_mutex_unlock(&x->lock);
		return -ENOSPC;
	}
	*seq = x->pushed;
	for (unsigned i = 0; i < n; i++)
		x->ring[(x->head + x->count + i) & (x->cap - 1)].status = XS_WC_PENDING;
	x->count += n;
	x->pushed += n;
	pthread_mutex_unlock(&x->lock);
	return 0;
}

void xs_cq_fill(struct ibv_cq *cq, uint64_t seq, const struct ibv_wc *wc)
{
	struct xs_cq *x = (struct xs_cq *)cq;
	bool fire;

	pthread_mutex_lock(&x->lock);
	x->ring[(x->head + (unsigned)(seq - x->popped)) & (x->cap - 1)] = *wc;
	fire = cq_fires(x, wc, false);
	pthread_mutex_unlock(&x->lock);
	if (fire && cq->channel)
		channel_signal(to_xs_channel(cq->channel), x);
}
