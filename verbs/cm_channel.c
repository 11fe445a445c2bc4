/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* CM event channels (rdma_create_event_channel): a FIFO of events plus an
 * eventfd that is readable exactly while the FIFO is non-empty.  Here too:
 * the events themselves (made by the other cm_*.c files, mostly in engine
 * upcalls), their delivery (rdma_get_cm_event, rdma_ack_cm_event,
 * rdma_migrate_id, the wait of an id in sync mode), the child's channels
 * after fork (xs_cm_fork_child) and libxsock's xsock_priv_cm_pending.
 * A channel's lock is a leaf, taken inside an id's; chan_live_lock and
 * chan_graveyard_lock are leaves too (cm_priv.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/xs_clock.h"
#include "verbs/cm_priv.h"
#include "verbs/xs_priv_abi.h"
#include "util/xs_errno.h"

/* ---- events --------------------------------------------------------------- */

/* A mixed listener's plain connection (XSOCK_CM_EVENT_PLAIN, xs_priv_abi.h)
 * owns its socket in status until someone takes it (status -1). */
static bool ev_is_plain(const struct cm_event *e)
{
	return (int)e->ev.event == XSOCK_CM_EVENT_PLAIN;
}

void cm_ev_free(struct cm_event *e)
{
	if (e && ev_is_plain(e) && e->ev.status >= 0)
		close(e->ev.status);
	free(e);
}

struct cm_event *cm_ev_new(struct cm_id *c, enum rdma_cm_event_type type, int status)
{
	struct cm_event *e = calloc(1, sizeof(*e));

	if (!e) {
		xs_log("cm: no memory for an event (%d)\n", type);
		return NULL;
	}
	e->ev.id = &c->id;
	e->ev.event = type;
	e->ev.status = status;
	return e;
}

void cm_ev_pdata(struct cm_event *e, const uint8_t *p, size_t len)
{
	if (len > CM_PDATA_MAX)
		len = CM_PDATA_MAX;
	if (p && len) {
		memcpy(e->pdata, p, len);
		e->ev.param.conn.private_data = e->pdata;
		e->ev.param.conn.private_data_len = (uint8_t)len;
	}
}

/* ---- channels ------------------------------------------------------------- */

/* Live channels (xs_cm_fork_child gives the child its own eventfds). */
static struct cm_chan *chan_live;
static pthread_mutex_t chan_live_lock = PTHREAD_MUTEX_INITIALIZER;

/* Destroyed channels are kept for the life of the process: rping's CM
 * thread may come back to rdma_get_cm_event after main destroyed the
 * channel, even while main is exiting, and must then find memory that is
 * still a (dead) channel.  Not freed by a destructor: one ran while that
 * thread was inside cm_chan_pop (ASan, use after free at exit); the list
 * keeps them reachable, so leak checkers do not count them. */
static struct cm_chan *chan_graveyard;
static pthread_mutex_t chan_graveyard_lock = PTHREAD_MUTEX_INITIALIZER;

struct cm_chan *cm_chan_new(void)
{
	struct cm_chan *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	/* Blocking eventfd: O_NONBLOCK stays the application's choice, and
	 * we only read it when it is known to be non-zero. */
	c->ch.fd = xs_fd_keep(xsock_fd_high(eventfd(0, EFD_CLOEXEC)));
	if (c->ch.fd < 0) {
		free(c);
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_lock(&chan_live_lock);
	c->live_next = chan_live;
	if (chan_live)
		chan_live->live_prev = c;
	chan_live = c;
	pthread_mutex_unlock(&chan_live_lock);
	return c;
}

/* Keep the eventfd readable exactly while events are queued (chan locked). */
static void chan_fd_set(struct cm_chan *c)
{
	uint64_t one = 1;

	if (write(c->ch.fd, &one, sizeof(one)) < 0)
		xs_log("cm: eventfd write: %d\n", errno);
}

static void chan_fd_clear(struct cm_chan *c)
{
	uint64_t v;

	if (read(c->ch.fd, &v, sizeof(v)) < 0)
		xs_log("cm: eventfd read: %d\n", errno);
}

static void chan_push_locked(struct cm_chan *c, struct cm_event *e)
{
	e->next = NULL;
	if (c->tail)
		c->tail->next = e;
	else {
		c->head = e;
		chan_fd_set(c);
	}
	c->tail = e;
}

void cm_chan_push(struct cm_chan *c, struct cm_event *e)
{
	pthread_mutex_lock(&c->lock);
	chan_push_locked(c, e);
	pthread_mutex_unlock(&c->lock);
}

/* Next event; waits unless the application set O_NONBLOCK.  The wait is a
 * poll on the fd, outside the lock, like librdmacm's blocking read: rping
 * destroys the channel while its CM thread still waits in
 * rdma_get_cm_event, and exits (a condition variable would hang there). */
struct cm_event *cm_chan_pop(struct cm_chan *c, bool honour_nonblock)
{
	struct cm_event *e;

	pthread_mutex_lock(&c->lock);
	while (!c->head) {
		struct pollfd p = { .fd = c->ch.fd, .events = POLLIN };

		if (c->destroyed) {
			/* like a read() already blocked on librdmacm's fd when the
			 * channel is destroyed: no event ever comes */
			pthread_mutex_unlock(&c->lock);
			for (;;)
				pause();
		}
		if (honour_nonblock && (fcntl(c->ch.fd, F_GETFL) & O_NONBLOCK)) {
			pthread_mutex_unlock(&c->lock);
			errno = EAGAIN;
			return NULL;
		}
		pthread_mutex_unlock(&c->lock);
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return NULL;
		pthread_mutex_lock(&c->lock);
	}
	e = c->head;
	c->head = e->next;
	if (!c->head) {
		c->tail = NULL;
		chan_fd_clear(c);
	}
	pthread_mutex_unlock(&c->lock);
	e->next = NULL;
	return e;
}

/* Unlink the events that mention id (as id or as listen_id) into *out,
 * in order.  Channel locked. */
static void chan_take_locked(struct cm_chan *c, const struct rdma_cm_id *id, struct cm_event **out)
{
	struct cm_event **pp = &c->head, *e, *last = NULL;
	struct cm_event **op = out;

	while (*op)
		op = &(*op)->next;
	while ((e = *pp)) {
		if (e->ev.id == id || e->ev.listen_id == id) {
			*pp = e->next;
			e->next = NULL;
			*op = e;
			op = &e->next;
		} else {
			last = e;
			pp = &e->next;
		}
	}
	c->tail = last;
}

void cm_chan_take(struct cm_chan *c, const struct rdma_cm_id *id, struct cm_event **out)
{
	bool was = false;

	pthread_mutex_lock(&c->lock);
	was = c->head != NULL;
	chan_take_locked(c, id, out);
	if (was && !c->head)
		chan_fd_clear(c);
	pthread_mutex_unlock(&c->lock);
}

void cm_chan_free(struct cm_chan *c)
{
	struct cm_event *e;

	if (!c)
		return;
	pthread_mutex_lock(&chan_live_lock);
	if (c->live_prev)
		c->live_prev->live_next = c->live_next;
	else
		chan_live = c->live_next;
	if (c->live_next)
		c->live_next->live_prev = c->live_prev;
	pthread_mutex_unlock(&chan_live_lock);
	pthread_mutex_lock(&c->lock);
	while ((e = c->head)) {
		c->head = e->next;
		cm_ev_free(e);
	}
	c->tail = NULL;
	c->destroyed = true;
	xs_fd_close(c->ch.fd);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_lock(&chan_graveyard_lock);
	c->grave_next = chan_graveyard;
	chan_graveyard = c;
	pthread_mutex_unlock(&chan_graveyard_lock);
}

XS_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct cm_chan *c = cm_chan_new();

	return c ? &c->ch : NULL;
}

XS_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	if (channel)
		cm_chan_free(cm_chan_of(channel));
}

/* ---- queueing for an id --------------------------------------------------- */

/* Queue an event for c (c locked, not destroyed). */
void cm_queue(struct cm_id *c, struct cm_event *e)
{
	if (e)
		cm_chan_push(c->chan, e);
}

void cm_queue_simple(struct cm_id *c, enum rdma_cm_event_type type, int status)
{
	cm_queue(c, cm_ev_new(c, type, status));
}

/* Sync mode: wait for the next event of c's private channel, keep it in
 * id->event (as librdmacm does, so the caller can read its data) and turn
 * it into 0 / -1 with errno. */
int cm_sync_wait(struct cm_id *c, enum rdma_cm_event_type want)
{
	struct cm_event *e = cm_chan_pop(c->chan, false);

	if (c->id.event)
		cm_ev_free((struct cm_event *)c->id.event);
	c->id.event = &e->ev;
	if (e->ev.event == want && e->ev.status == 0)
		return 0;
	if (e->ev.event == RDMA_CM_EVENT_REJECTED)
		errno = ECONNREFUSED;
	else if (e->ev.status < 0)
		errno = -e->ev.status;
	else if (e->ev.status > 0)
		errno = e->ev.status;
	else
		errno = EINVAL;
	return -1;
}

/* ---- delivery ------------------------------------------------------------- */

/* A DISCONNECTED for a QP whose completions are not all polled waits, on
 * a nonblocking channel, up to XS_DISC_HOLD_MS: on an RNIC the last
 * receive's completion is seen before the CM's event, and programs that
 * take the event first close their endpoint, whose destroy_qp then drops
 * that completion (libfabric's ofi_rxm lost fi_pingpong's final message,
 * about 1 run in 10 under load).  Channel locked. */
#define XS_DISC_HOLD_MS 200

static bool disc_held(struct cm_chan *c, struct cm_event *e)
{
	struct ibv_qp *qp = e->ev.id ? e->ev.id->qp : NULL;
	uint64_t now;

	if (e->ev.event != RDMA_CM_EVENT_DISCONNECTED || !qp ||
	    !(fcntl(c->ch.fd, F_GETFL) & O_NONBLOCK))
		return false;
	if (!xs_cq_has_qp(qp->recv_cq, qp->qp_num) &&
	    (qp->send_cq == qp->recv_cq || !xs_cq_has_qp(qp->send_cq, qp->qp_num)))
		return false;
	now = xs_now_ms();
	if (!e->held_ms)
		e->held_ms = now;
	return now - e->held_ms < XS_DISC_HOLD_MS;
}

XS_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct cm_chan *ch = channel ? cm_chan_of(channel) : NULL;
	struct cm_event *e;

	if (!channel || !event)
		return cm_err(EINVAL);
	pthread_mutex_lock(&ch->lock);
	e = ch->head;
	if (e && disc_held(ch, e)) {
		pthread_mutex_unlock(&ch->lock);
		errno = EAGAIN;
		return -1;
	}
	pthread_mutex_unlock(&ch->lock);
	e = cm_chan_pop(ch, true);
	if (!e)
		return -1;
	*event = &e->ev;
	return 0;
}

XS_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event)
		return cm_err(EINVAL);
	cm_ev_free((struct cm_event *)event); /* struct cm_event starts with it */
	return 0;
}

XS_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
		[RDMA_CM_EVENT_ADDR_RESOLVED] = "RDMA_CM_EVENT_ADDR_RESOLVED",
		[RDMA_CM_EVENT_ADDR_ERROR] = "RDMA_CM_EVENT_ADDR_ERROR",
		[RDMA_CM_EVENT_ROUTE_RESOLVED] = "RDMA_CM_EVENT_ROUTE_RESOLVED",
		[RDMA_CM_EVENT_ROUTE_ERROR] = "RDMA_CM_EVENT_ROUTE_ERROR",
		[RDMA_CM_EVENT_CONNECT_REQUEST] = "RDMA_CM_EVENT_CONNECT_REQUEST",
		[RDMA_CM_EVENT_CONNECT_RESPONSE] = "RDMA_CM_EVENT_CONNECT_RESPONSE",
		[RDMA_CM_EVENT_CONNECT_ERROR] = "RDMA_CM_EVENT_CONNECT_ERROR",
		[RDMA_CM_EVENT_UNREACHABLE] = "RDMA_CM_EVENT_UNREACHABLE",
		[RDMA_CM_EVENT_REJECTED] = "RDMA_CM_EVENT_REJECTED",
		[RDMA_CM_EVENT_ESTABLISHED] = "RDMA_CM_EVENT_ESTABLISHED",
		[RDMA_CM_EVENT_DISCONNECTED] = "RDMA_CM_EVENT_DISCONNECTED",
		[RDMA_CM_EVENT_DEVICE_REMOVAL] = "RDMA_CM_EVENT_DEVICE_REMOVAL",
		[RDMA_CM_EVENT_MULTICAST_JOIN] = "RDMA_CM_EVENT_MULTICAST_JOIN",
		[RDMA_CM_EVENT_MULTICAST_ERROR] = "RDMA_CM_EVENT_MULTICAST_ERROR",
		[RDMA_CM_EVENT_ADDR_CHANGE] = "RDMA_CM_EVENT_ADDR_CHANGE",
		[RDMA_CM_EVENT_TIMEWAIT_EXIT] = "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};

	if ((unsigned int)event < sizeof(names) / sizeof(names[0]) && names[event])
		return names[event];
	return "UNKNOWN EVENT";
}

XS_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct cm_id *c = cm_of(id);
	struct cm_chan *old, *nw;
	struct cm_event *list = NULL, *e;
	bool was_sync;

	if (!id)
		return cm_err(EINVAL);
	nw = channel ? cm_chan_of(channel) : cm_chan_new();
	if (!nw)
		return cm_err(ENOMEM);
	/* The id lock keeps upcalls from queueing on the old channel meanwhile. */
	pthread_mutex_lock(&c->lock);
	old = c->chan;
	was_sync = c->sync;
	if (old == nw) {
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	cm_chan_take(old, id, &list);
	pthread_mutex_lock(&nw->lock);
	while ((e = list)) {
		list = e->next;
		chan_push_locked(nw, e);
	}
	pthread_mutex_unlock(&nw->lock);
	c->chan = nw;
	c->sync = channel == NULL;
	id->channel = &nw->ch;
	pthread_mutex_unlock(&c->lock);
	if (was_sync) {
		free(id->event);
		id->event = NULL;
		cm_chan_free(old);
	}
	return 0;
}

/* ---- fork and libxsock (xs_internal.h) ------------------------------------ */

void xs_cm_fork_child(void)
{
	pthread_mutex_init(&chan_live_lock, NULL);
	pthread_mutex_init(&chan_graveyard_lock, NULL);
	for (struct cm_chan *c = chan_live; c; c = c->live_next) {
		pthread_mutex_init(&c->lock, NULL);
		/* a mixed listener's plain clients queued before the fork
		 * belong to the parent: drop the child's copies */
		struct cm_event **pp = &c->head;
		c->tail = NULL;
		while (*pp) {
			struct cm_event *e = *pp;
			if (ev_is_plain(e) && e->ev.status >= 0) {
				*pp = e->next;
				cm_ev_free(e);
				continue;
			}
			c->tail = e;
			pp = &e->next;
		}
		if (xs_fork_new_eventfd(c->ch.fd, 0, c->head ? 1 : 0) < 0)
			xs_log("fork: CM channel fd %d: %s", c->ch.fd, xs_strerror(errno));
	}
}

/* Private to libxsock: an event is queued on the channel (no system call). */
XS_EXPORT int xsock_priv_cm_pending(struct rdma_event_channel *channel)
{
	struct cm_chan *c = cm_chan_of(channel);
	bool any;

	pthread_mutex_lock(&c->lock);
	any = c->head != NULL;
	pthread_mutex_unlock(&c->lock);
	return any;
}
