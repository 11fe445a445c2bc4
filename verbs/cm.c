/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The connection manager: librdmacm's rdma_* calls (rdma-core 44 ABI) over
 * the engine's TCP + MPA handshakes (xs_internal.h).
 *
 * Objects: a channel (struct cm_chan) is a FIFO of events plus an eventfd
 * that is readable exactly while the FIFO is non-empty; an id (struct cm_id)
 * wraps the application's struct rdma_cm_id.  Engine upcalls (accept,
 * connect, closed) run on the engine thread; they take the id's lock, check
 * that the id still lives, and queue events under the channel's lock (order:
 * id lock, then channel lock).  No lock is held while calling into the
 * engine: its calls may wait for the engine thread, which may be waiting for
 * our lock in an upcall.
 *
 * Event statuses (iWARP conventions of the kernel's iw_cm/siw, negative errno):
 *   MPA Reply with R=1 (peer called rdma_reject or refused the negotiation)
 *       REJECTED, status -ECONNRESET, private data = the Reply's (siw reports
 *       a reject as -ECONNRESET; iw_cm maps it to REJECTED)
 *   TCP connection refused (no listener, after the engine dialled again
 *   for XS_REDIAL_MS)
 *       REJECTED, status -ECONNREFUSED (siw fails rdma_connect itself with
 *       ECONNREFUSED; our connect is asynchronous, and iw_cm maps
 *       -ECONNREFUSED to REJECTED)
 *   TCP RST during the handshake: REJECTED, -ECONNRESET
 *   -ETIMEDOUT, -EHOSTUNREACH, -ENETUNREACH: UNREACHABLE with that status
 *   anything else (e.g. -EPROTO, a bad Reply): CONNECT_ERROR with the status
 *   DISCONNECTED: exactly once per connected id (local rdma_disconnect or
 *       the connection's end, whichever comes first); status 0, or
 *       -ECONNRESET when a TCP RST ended the connection (libxsock reports
 *       it as TCP does).
 * IRD/ORD in events: CONNECT_REQUEST carries the initiator's numbers as the
 * acceptor should use them (responder_resources = peer ORD, initiator_depth =
 * peer IRD; legacy peers without the RFC 6581 header: 1/1); ESTABLISHED
 * carries the agreement (responder_resources = our IRD, initiator_depth = our
 * ORD).  conn_param values of RDMA_MAX_RESP_RES/RDMA_MAX_INIT_DEPTH (0xff)
 * mean the device maximum; any value above XS_MAX_IRD/ORD is capped at it
 * (librdmacm would fail with EINVAL for 129..254; capping is friendlier).
 *
 * SRQs (rdma_create_srq*): BASIC only; id->srq feeds the id's QP when its
 * attributes name none, and rdma_destroy_ep destroys it, as librdmacm.
 *
 * Not supported: RDMA_PS_UDP/IB/IPOIB (EOPNOTSUPP), multicast, XRC, ECE. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h> /* rdma_create_srq* */

#include "util/xs_clock.h"
#include "util/xs_sockaddr.h"
#include "verbs/xs_internal.h"
#include "verbs/xs_priv_abi.h"

#define CM_PDATA_MAX 255 /* rdma_conn_param.private_data_len is a uint8_t */

/* ---- channels ---------------------------------------------------------------- */

struct cm_event {
	struct rdma_cm_event ev; /* first: the application holds &ev */
	struct cm_event *next;
	uint64_t held_ms; /* a DISCONNECTED held back since (see disc_held) */
	uint8_t pdata[CM_PDATA_MAX];
};

/* A mixed listener's plain connection (XSOCK_CM_EVENT_PLAIN, xs_priv_abi.h)
 * owns its socket in status until someone takes it (status -1). */
static bool ev_is_plain(const struct cm_event *e)
{
	return (int)e->ev.event == XSOCK_CM_EVENT_PLAIN;
}

static void ev_free(struct cm_event *e)
{
	if (e && ev_is_plain(e) && e->ev.status >= 0)
		close(e->ev.status);
	free(e);
}

struct cm_chan {
	struct rdma_event_channel ch; /* first: the application holds &ch */
	pthread_mutex_t lock;
	struct cm_event *head, *tail;
	bool destroyed;
	struct cm_chan *grave_next;
	struct cm_chan *live_next, *live_prev; /* chan_live: for fork */
};

/* Live channels (xs_cm_fork_child gives the child its own eventfds). */
static struct cm_chan *chan_live;
static pthread_mutex_t chan_live_lock = PTHREAD_MUTEX_INITIALIZER;

/* Destroyed channels are kept for the life of the process: rping's CM
 * thread may come back to rdma_get_cm_event after main destroyed the
 * channel, even while main is exiting, and must then find memory that is
 * still a (dead) channel.  Not freed by a destructor: one ran while that
 * thread was inside chan_pop (ASan, use after free at exit); the list
 * keeps them reachable, so leak checkers do not count them. */
static struct cm_chan *chan_graveyard;
static pthread_mutex_t chan_graveyard_lock = PTHREAD_MUTEX_INITIALIZER;

static struct cm_chan *chan_of(struct rdma_event_channel *ch)
{
	return (struct cm_chan *)ch;
}

static struct cm_chan *chan_new(void)
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

static void chan_push(struct cm_chan *c, struct cm_event *e)
{
	pthread_mutex_lock(&c->lock);
	chan_push_locked(c, e);
	pthread_mutex_unlock(&c->lock);
}

/* Next event; waits unless the application set O_NONBLOCK.  The wait is a
 * poll on the fd, outside the lock, like librdmacm's blocking read: rping
 * destroys the channel while its CM thread still waits in
 * rdma_get_cm_event, and exits (a condition variable would hang there). */
static struct cm_event *chan_pop(struct cm_chan *c, bool honour_nonblock)
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

static void chan_take(struct cm_chan *c, const struct rdma_cm_id *id, struct cm_event **out)
{
	bool was = false;

	pthread_mutex_lock(&c->lock);
	was = c->head != NULL;
	chan_take_locked(c, id, out);
	if (was && !c->head)
		chan_fd_clear(c);
	pthread_mutex_unlock(&c->lock);
}

static void chan_free(struct cm_chan *c)
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
		ev_free(e);
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
	struct cm_chan *c = chan_new();

	return c ? &c->ch : NULL;
}

XS_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	if (channel)
		chan_free(chan_of(channel));
}

/* ---- ids --------------------------------------------------------------------- */

enum cm_state {
	CM_IDLE,
	CM_BOUND,
	CM_ADDR, /* address resolved */
	CM_ROUTE, /* route resolved */
	CM_LISTEN,
	CM_CONNECTING, /* rdma_connect issued, waiting for the engine */
	CM_REQ, /* passive child: request received, not yet accepted/rejected */
	CM_ACCEPTING, /* rdma_accept in progress */
	CM_CONNECTED,
	CM_DISCONNECTED,
	CM_FAILED,
};

struct cm_id {
	struct rdma_cm_id id; /* first: the application holds &id */
	pthread_mutex_t lock;
	int refs; /* atomic: the application's, an outstanding connect, the closed cb */
	struct cm_chan *chan;
	bool sync; /* chan is private (created with a NULL channel) */
	enum cm_state state;
	bool destroyed;
	bool disc_queued; /* the one DISCONNECTED went out */
	bool closed_early; /* the connection ended before ESTABLISHED was queued */
	bool closed_ref; /* a reference is held for the closed callback */
	struct xs_listener *listener;
	/* The connection.  The CM owns it (conn_owned) until xs_qp_bind_conn
	 * succeeds; from then on the QP holds the reference (ibv_destroy_qp
	 * disconnects and puts it) and conn is only borrowed for
	 * rdma_disconnect while the QP exists. */
	struct xs_conn *conn;
	bool conn_owned;
	/* passive child: the initiator's numbers from the MPA Request */
	uint16_t req_ird, req_ord;
	bool req_enhanced;
	/* rdma_connect's private data, alive until the connect callback */
	uint8_t pdata[XS_MAX_PD_PRIV];
	/* CQs rdma_create_qp made because the caller gave none */
	struct ibv_comp_channel *own_sch, *own_rch;
	struct ibv_cq *own_scq, *own_rcq;
	/* rdma_create_ep on a passive id: rdma_get_request gives children a QP */
	bool ep_qp;
	struct ibv_pd *ep_pd;
	struct ibv_qp_init_attr ep_attr;
	/* libxsock's mixed listener (xsock_priv_listen_mixed): plain TCP
	 * clients come as XSOCK_CM_EVENT_PLAIN events */
	bool mixed;
	int afonly; /* RDMA_OPTION_ID_AFONLY: -1 unset */
	/* rdma_bind_addr to port 0 takes a port at once, as the kernel's CM
	 * does (qperf sends it to its client before rdma_listen): a bound
	 * TCP socket holds it until listen or connect binds it again (-1) */
	int port_fd;
};

static struct cm_id *cm_of(struct rdma_cm_id *id)
{
	return (struct cm_id *)id;
}

static void cm_get(struct cm_id *c)
{
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_ACQ_REL);
}

static void cm_put(struct cm_id *c)
{
	if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		pthread_mutex_destroy(&c->lock);
		free(c);
	}
}

static struct cm_id *cm_alloc(struct cm_chan *chan, bool sync, void *context,
			      enum rdma_port_space ps)
{
	struct cm_id *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (!chan) {
		chan = chan_new();
		if (!chan) {
			free(c);
			return NULL;
		}
		sync = true;
	}
	c->afonly = -1;
	c->port_fd = -1;
	pthread_mutex_init(&c->lock, NULL);
	c->refs = 1;
	c->chan = chan;
	c->sync = sync;
	c->state = CM_IDLE;
	c->id.channel = &chan->ch;
	c->id.context = context;
	c->id.ps = ps;
	c->id.qp_type = IBV_QPT_RC;
	return c;
}

static struct cm_event *ev_new(struct cm_id *c, enum rdma_cm_event_type type, int status)
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

static void ev_pdata(struct cm_event *e, const uint8_t *p, size_t len)
{
	if (len > CM_PDATA_MAX)
		len = CM_PDATA_MAX;
	if (p && len) {
		memcpy(e->pdata, p, len);
		e->ev.param.conn.private_data = e->pdata;
		e->ev.param.conn.private_data_len = (uint8_t)len;
	}
}

static uint8_t u8cap(uint16_t v)
{
	return v > 255 ? 255 : (uint8_t)v;
}

/* Queue an event for c (c locked, not destroyed). */
static void cm_queue(struct cm_id *c, struct cm_event *e)
{
	if (e)
		chan_push(c->chan, e);
}

static void cm_queue_simple(struct cm_id *c, enum rdma_cm_event_type type, int status)
{
	cm_queue(c, ev_new(c, type, status));
}

/* Sync mode: wait for the next event of c's private channel, keep it in
 * id->event (as librdmacm does, so the caller can read its data) and turn
 * it into 0 / -1 with errno. */
static int cm_sync_wait(struct cm_id *c, enum rdma_cm_event_type want)
{
	struct cm_event *e = chan_pop(c->chan, false);

	if (c->id.event)
		ev_free((struct cm_event *)c->id.event);
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

static socklen_t sa_len(const struct sockaddr *sa)
{
	if (!sa)
		return 0;
	switch (sa->sa_family) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	default:
		return 0;
	}
}

static int sa_copy(struct sockaddr_storage *dst, const struct sockaddr *src)
{
	socklen_t len = sa_len(src);

	if (!len)
		return -EAFNOSUPPORT;
	memset(dst, 0, sizeof(*dst));
	memcpy(dst, src, len);
	return 0;
}

static int cm_err(int e)
{
	errno = e;
	return -1;
}

XS_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
			     void *context, enum rdma_port_space ps)
{
	struct cm_id *c;

	if (!id)
		return cm_err(EINVAL);
	/* iWARP is connected only: no UD port spaces */
	if (ps != RDMA_PS_TCP)
		return cm_err(EOPNOTSUPP);
	c = cm_alloc(channel ? chan_of(channel) : NULL, false, context, ps);
	if (!c)
		return cm_err(ENOMEM);
	*id = &c->id;
	return 0;
}

static void cm_destroy(struct cm_id *c);
static void cm_port_release(struct cm_id *c);

/* Dispose of events taken off a channel for a dying id: pending connect
 * requests own their (never seen) child ids. */
static void cm_drop_events(struct cm_id *c, struct cm_event *list)
{
	struct cm_event *e;

	while ((e = list)) {
		list = e->next;
		if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->ev.listen_id == &c->id &&
		    e->ev.id != &c->id)
			cm_destroy(cm_of(e->ev.id));
		ev_free(e);
	}
}

static void cm_destroy(struct cm_id *c)
{
	struct xs_listener *l;
	struct xs_conn *conn;
	struct cm_event *list = NULL;
	enum cm_state st;
	bool drop_closed_ref;

	pthread_mutex_lock(&c->lock);
	c->destroyed = true;
	cm_port_release(c);
	l = c->listener;
	c->listener = NULL;
	conn = c->conn_owned ? c->conn : NULL;
	c->conn = NULL;
	c->conn_owned = false;
	st = c->state;
	pthread_mutex_unlock(&c->lock);

	if (l)
		xs_listener_close(l); /* no accept upcall after this */
	if (conn) {
		if (st == CM_REQ)
			xs_conn_reject(conn, NULL, 0); /* never answered: refuse it */
		else if (st == CM_CONNECTED)
			xs_conn_disconnect(conn);
		xs_conn_put(conn); /* no upcall after this */
	}
	/* Only a connection we still own is gone for sure; one the QP holds
	 * may still report its end, and the callback's reference keeps c
	 * alive for that (cm_closed_cb ignores destroyed ids). */
	pthread_mutex_lock(&c->lock);
	drop_closed_ref = conn && c->closed_ref;
	if (drop_closed_ref)
		c->closed_ref = false;
	pthread_mutex_unlock(&c->lock);
	if (drop_closed_ref)
		cm_put(c);

	/* Nothing queues for c any more (destroyed is set): flush its events. */
	chan_take(c->chan, &c->id, &list);
	cm_drop_events(c, list);
	if (c->sync) {
		ev_free((struct cm_event *)c->id.event);
		c->id.event = NULL;
		chan_free(c->chan);
	}
	cm_put(c);
}

XS_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	if (!id)
		return cm_err(EINVAL);
	cm_destroy(cm_of(id));
	return 0;
}

/* ---- addresses ----------------------------------------------------------------- */

static int cm_set_verbs(struct cm_id *c)
{
	if (!c->id.verbs)
		c->id.verbs = xs_default_context();
	if (!c->id.verbs)
		return -ENODEV;
	c->id.port_num = 1;
	return 0;
}

/* Port 0: bind a TCP socket the way the listener or connection will
 * (SO_REUSEADDR, AFONLY) and keep it, so the port the kernel chose is the
 * id's from now on.  c->lock held; 0 or -errno. */
static int cm_port_reserve(struct cm_id *c, struct sockaddr_storage *ss)
{
	struct sockaddr *sa = (struct sockaddr *)ss;
	socklen_t len = sizeof(*ss);
	int one = 1, fd, rc = 0;

	if ((sa->sa_family != AF_INET && sa->sa_family != AF_INET6) || xs_sa_port(sa))
		return 0;
	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (sa->sa_family == AF_INET6 && c->afonly >= 0)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &c->afonly, sizeof(c->afonly));
	if (bind(fd, sa, sa_len(sa)) < 0 || getsockname(fd, sa, &len) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	c->port_fd = xs_fd_keep(fd);
	return 0;
}

/* Listen or connect is about to bind the port itself.  c->lock held. */
static void cm_port_release(struct cm_id *c)
{
	if (c->port_fd >= 0)
		xs_fd_close(c->port_fd);
	c->port_fd = -1;
}

XS_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cm_id *c = cm_of(id);
	int rc;

	if (!id || !addr)
		return cm_err(EINVAL);
	pthread_mutex_lock(&c->lock);
	if (c->state != CM_IDLE) {
		pthread_mutex_unlock(&c->lock);
		return cm_err(EINVAL);
	}
	rc = sa_copy(&id->route.addr.src_storage, addr);
	if (!rc)
		rc = cm_set_verbs(c);
	if (!rc)
		rc = cm_port_reserve(c, &id->route.addr.src_storage);
	if (!rc)
		c->state = CM_BOUND;
	pthread_mutex_unlock(&c->lock);
	return rc ? cm_err(-rc) : 0;
}

static bool sa_is_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return true;
}

/* The source address the kernel would use towards dst (a UDP connect sends
 * nothing).  -errno when there is no route. */
static int cm_route_src(const struct sockaddr *dst, struct sockaddr_storage *src)
{
	socklen_t len = sizeof(*src);
	int fd, rc = 0;

	fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, dst, sa_len(dst)) < 0 || getsockname(fd, (struct sockaddr *)src, &len) < 0)
		rc = -errno;
	close(fd);
	if (!rc) {
		/* the TCP connection picks its own port */
		if (src->ss_family == AF_INET)
			((struct sockaddr_in *)src)->sin_port = 0;
		else
			((struct sockaddr_in6 *)src)->sin6_port = 0;
	}
	return rc;
}

XS_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
				struct sockaddr *dst_addr, int timeout_ms)
{
	struct cm_id *c = cm_of(id);
	struct sockaddr_storage src;
	int rc, status = 0;

	(void)timeout_ms;
	if (!id || !dst_addr || !sa_len(dst_addr))
		return cm_err(EINVAL);
	pthread_mutex_lock(&c->lock);
	if (c->state != CM_IDLE && c->state != CM_BOUND) {
		pthread_mutex_unlock(&c->lock);
		return cm_err(EINVAL);
	}
	if (src_addr) {
		rc = sa_copy(&id->route.addr.src_storage, src_addr);
		if (rc) {
			pthread_mutex_unlock(&c->lock);
			return cm_err(-rc);
		}
	}
	sa_copy(&id->route.addr.dst_storage, dst_addr);
	if (id->route.addr.src_addr.sa_family == AF_UNSPEC ||
	    (id->route.addr.src_addr.sa_family == dst_addr->sa_family && sa_is_any(&id->route.addr.src_addr))) {
		in_port_t port = id->route.addr.src_addr.sa_family == AF_INET ? id->route.addr.src_sin.sin_port :
				 id->route.addr.src_addr.sa_family == AF_INET6 ? id->route.addr.src_sin6.sin6_port : 0;

		rc = cm_route_src(dst_addr, &src);
		if (!rc) {
			id->route.addr.src_storage = src;
			if (src.ss_family == AF_INET)
				id->route.addr.src_sin.sin_port = port;
			else
				id->route.addr.src_sin6.sin6_port = port;
		} else if (rc == -ENETUNREACH || rc == -EHOSTUNREACH) {
			status = rc;
		} else {
			/* leave the source open; connect will tell */
			memset(&id->route.addr.src_storage, 0, sizeof(id->route.addr.src_storage));
			id->route.addr.src_addr.sa_family = dst_addr->sa_family;
		}
	}
	rc = cm_set_verbs(c);
	if (rc) {
		pthread_mutex_unlock(&c->lock);
		return cm_err(-rc);
	}
	if (status == 0)
		c->state = CM_ADDR;
	cm_queue_simple(c, status ? RDMA_CM_EVENT_ADDR_ERROR : RDMA_CM_EVENT_ADDR_RESOLVED, status);
	pthread_mutex_unlock(&c->lock);
	if (c->sync)
		return cm_sync_wait(c, RDMA_CM_EVENT_ADDR_RESOLVED);
	return 0;
}

XS_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct cm_id *c = cm_of(id);

	(void)timeout_ms;
	if (!id)
		return cm_err(EINVAL);
	pthread_mutex_lock(&c->lock);
	if (c->state != CM_ADDR) {
		pthread_mutex_unlock(&c->lock);
		return cm_err(EINVAL);
	}
	c->state = CM_ROUTE;
	cm_queue_simple(c, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
	pthread_mutex_unlock(&c->lock);
	if (c->sync)
		return cm_sync_wait(c, RDMA_CM_EVENT_ROUTE_RESOLVED);
	return 0;
}

XS_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return xs_sa_port(&id->route.addr.src_addr);
}

XS_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return xs_sa_port(&id->route.addr.dst_addr);
}

/* ---- QPs ------------------------------------------------------------------------ */

/* One PD per process for ids whose QP is created without one (librdmacm
 * keeps one per device too); never freed. */
static pthread_mutex_t cm_pd_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibv_pd *cm_pd;

static struct ibv_pd *cm_default_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd;

	pthread_mutex_lock(&cm_pd_lock);
	if (!cm_pd)
		cm_pd = ibv_alloc_pd(ctx);
	pd = cm_pd;
	pthread_mutex_unlock(&cm_pd_lock);
	return pd;
}

static void cm_free_own_cqs(struct cm_id *c)
{
	if (c->own_scq)
		ibv_destroy_cq(c->own_scq);
	if (c->own_rcq)
		ibv_destroy_cq(c->own_rcq);
	if (c->own_sch)
		ibv_destroy_comp_channel(c->own_sch);
	if (c->own_rch)
		ibv_destroy_comp_channel(c->own_rch);
	c->own_scq = c->own_rcq = NULL;
	c->own_sch = c->own_rch = NULL;
}

/* One CQ with its own completion channel for a QP created without it. */
static bool cm_make_cq(struct cm_id *c, struct ibv_comp_channel **ch, struct ibv_cq **cq,
		       uint32_t wr)
{
	*ch = ibv_create_comp_channel(c->id.verbs);
	if (!*ch)
		return false;
	*cq = ibv_create_cq(c->id.verbs, wr ? (int)wr : 1, &c->id, *ch, 0);
	return *cq != NULL;
}

/* rdma_create_qp with no CQs: make a CQ (with its own completion channel)
 * for each missing one, as librdmacm does. */
static int cm_make_cqs(struct cm_id *c, struct ibv_cq **scq, struct ibv_cq **rcq,
		       uint32_t swr, uint32_t rwr)
{
	if ((!*rcq && !cm_make_cq(c, &c->own_rch, &c->own_rcq, rwr)) ||
	    (!*scq && !cm_make_cq(c, &c->own_sch, &c->own_scq, swr))) {
		int e = errno ? errno : ENOMEM;

		cm_free_own_cqs(c);
		return -e;
	}
	if (!*rcq)
		*rcq = c->own_rcq;
	if (!*scq)
		*scq = c->own_scq;
	return 0;
}

static void cm_set_qp(struct cm_id *c, struct ibv_qp *qp, struct ibv_pd *pd)
{
	pthread_mutex_lock(&c->lock);
	c->id.qp = qp;
	c->id.pd = pd;
	c->id.send_cq = qp->send_cq;
	c->id.recv_cq = qp->recv_cq;
	c->id.qp_type = qp->qp_type;
	c->id.send_cq_channel = c->own_sch ? c->own_sch : (qp->send_cq ? qp->send_cq->channel : NULL);
	c->id.recv_cq_channel = c->own_rch ? c->own_rch : (qp->recv_cq ? qp->recv_cq->channel : NULL);
	pthread_mutex_unlock(&c->lock);
}

XS_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct cm_id *c = cm_of(id);
	struct ibv_qp_init_attr_ex a;
	struct ibv_qp *qp;
	int rc;

	if (!id || !attr || !id->verbs)
		return cm_err(EINVAL);
	if (id->qp)
		return cm_err(EEXIST);
	if (attr->qp_type != IBV_QPT_RC)
		return cm_err(EOPNOTSUPP);
	a = *attr;
	if (!(a.comp_mask & IBV_QP_INIT_ATTR_PD) || !a.pd) {
		a.pd = cm_default_pd(id->verbs);
		if (!a.pd)
			return -1;
		a.comp_mask |= IBV_QP_INIT_ATTR_PD;
	}
	if (id->srq && !a.srq)
		a.srq = id->srq;
	uint32_t rwr = a.cap.max_recv_wr;
	struct ibv_srq_attr sa;

	/* receives come from the SRQ: a CQ of our making must hold its WRs */
	if (a.srq && !a.recv_cq && ibv_query_srq(a.srq, &sa) == 0)
		rwr = sa.max_wr;
	rc = cm_make_cqs(c, &a.send_cq, &a.recv_cq, a.cap.max_send_wr, rwr);
	if (rc)
		return cm_err(-rc);
	qp = ibv_create_qp_ex(id->verbs, &a);
	if (!qp && errno == EOPNOTSUPP) {
		/* no create_qp_ex op: the plain call takes the common prefix */
		qp = ibv_create_qp(a.pd, (struct ibv_qp_init_attr *)&a);
	}
	if (!qp) {
		int e = errno ? errno : ENOMEM;

		cm_free_own_cqs(c);
		return cm_err(e);
	}
	/* librdmacm leaves a connected QP in INIT so receives can be posted
	 * before the connection exists (rping does) */
	{
		struct ibv_qp_attr qa = { .qp_state = IBV_QPS_INIT };
		int mask;

		if (rdma_init_qp_attr(id, &qa, &mask) || ibv_modify_qp(qp, &qa, mask)) {
			int e = errno ? errno : EINVAL;

			ibv_destroy_qp(qp);
			cm_free_own_cqs(c);
			return cm_err(e);
		}
	}
	/* report what we used, as librdmacm does */
	attr->cap = a.cap;
	cm_set_qp(c, qp, a.pd);
	return 0;
}

XS_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex a;
	int rc;

	if (!id || !qp_init_attr)
		return cm_err(EINVAL);
	memset(&a, 0, sizeof(a));
	memcpy(&a, qp_init_attr, sizeof(*qp_init_attr));
	a.pd = pd;
	a.comp_mask = pd ? IBV_QP_INIT_ATTR_PD : 0;
	rc = rdma_create_qp_ex(id, &a);
	if (!rc)
		qp_init_attr->cap = a.cap;
	return rc;
}

XS_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	struct cm_id *c = cm_of(id);
	struct ibv_qp *qp;

	if (!id)
		return;
	struct xs_conn *conn = NULL;
	bool drop = false;

	pthread_mutex_lock(&c->lock);
	qp = id->qp;
	id->qp = NULL;
	if (!c->conn_owned) {
		conn = c->conn; /* the QP's: ibv_destroy_qp puts it */
		c->conn = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	if (conn) {
		/* no closed upcall for this id any more (the engine reports
		 * under the rx lock); the callback's reference goes now */
		xs_conn_rx_lock(conn);
		xs_conn_set_closed_cb(conn, NULL, NULL);
		xs_conn_rx_unlock(conn);
		pthread_mutex_lock(&c->lock);
		drop = c->closed_ref;
		c->closed_ref = false;
		pthread_mutex_unlock(&c->lock);
	}
	if (qp)
		ibv_destroy_qp(qp);
	if (drop)
		cm_put(c);
	cm_free_own_cqs(c);
	id->send_cq = id->recv_cq = NULL;
	id->send_cq_channel = id->recv_cq_channel = NULL;
}

XS_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
				int *qp_attr_mask)
{
	enum ibv_qp_state want;

	if (!id || !qp_attr || !qp_attr_mask)
		return cm_err(EINVAL);
	/* qp_state is the input: the state the caller is moving to.  iWARP
	 * QPs need only the access rights (as iw_cm reports); the CM moves
	 * them to RTS itself. */
	want = qp_attr->qp_state;
	memset(qp_attr, 0, sizeof(*qp_attr));
	qp_attr->qp_state = want;
	switch (want) {
	case IBV_QPS_INIT:
	case IBV_QPS_RTR:
		qp_attr->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					   IBV_ACCESS_REMOTE_READ;
		*qp_attr_mask = IBV_QP_STATE | IBV_QP_ACCESS_FLAGS;
		return 0;
	case IBV_QPS_RTS:
		*qp_attr_mask = IBV_QP_STATE;
		return 0;
	default:
		return cm_err(EINVAL);
	}
}

/* ---- connections ---------------------------------------------------------------- */

/* Private data must fit what siw accepts and be there when announced. */
static bool cm_param_ok(const struct rdma_conn_param *param)
{
	return !param || (param->private_data_len <= XS_MAX_PD_PRIV &&
			  (!param->private_data_len || param->private_data));
}

static void cm_prefs(struct mpa_prefs *p, bool initiator)
{
	const struct xs_config *cfg = xs_config();

	mpa_prefs_default(p);
	p->rev = cfg->mpa_rev;
	p->rdmap_ext = cfg->rdmap_ext;
	p->crc = cfg->crc;
	p->markers_rx = cfg->markers;
	if (initiator && cfg->p2p_rtr) {
		p->p2p = true;
		p->rtr_mask = cfg->p2p_rtr;
	} else if (!initiator) {
		/* as responder we take a zero-length Write or Read RTR (what
		 * siw sends); a Send RTR would need a posted receive */
		p->rtr_mask = MPA_RTR_WRITE | MPA_RTR_READ;
	}
}

/* conn_param's responder_resources / initiator_depth: 0xff is "the device
 * maximum"; larger than we support is capped. */
static uint16_t cm_depth(uint8_t v, uint16_t max)
{
	if (v == 0xff || v > max)
		return max;
	return v;
}

/* Called once the connection ended (engine thread). */
static void cm_closed_cb(void *ctx, int status)
{
	struct cm_id *c = ctx;
	bool drop;

	pthread_mutex_lock(&c->lock);
	drop = c->closed_ref;
	c->closed_ref = false;
	if (!c->destroyed) {
		if (c->state == CM_CONNECTED) {
			if (!c->disc_queued) {
				c->disc_queued = true;
				cm_queue_simple(c, RDMA_CM_EVENT_DISCONNECTED,
						status == -ECONNRESET ? status : 0);
			}
			c->state = CM_DISCONNECTED;
		} else if (c->state == CM_ACCEPTING || c->state == CM_CONNECTING) {
			/* ESTABLISHED is not out yet: the establishing path
			 * queues DISCONNECTED after it */
			c->closed_early = true;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (drop)
		cm_put(c);
}

/* The closed callback holds a reference; whoever clears closed_ref (the
 * callback or destroy after xs_conn_put) drops it. */
static void cm_arm_closed(struct cm_id *c, struct xs_conn *conn)
{
	pthread_mutex_lock(&c->lock);
	if (c->destroyed) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	c->closed_ref = true;
	cm_get(c);
	pthread_mutex_unlock(&c->lock);
	xs_conn_set_closed_cb(conn, cm_closed_cb, c);
}

/* Queue ESTABLISHED (and DISCONNECTED if the connection already ended).
 * c locked. */
static void cm_established_locked(struct cm_id *c, const struct mpa_agreed *ag,
				  const struct mpa_frame *reply)
{
	struct cm_event *e = ev_new(c, RDMA_CM_EVENT_ESTABLISHED, 0);

	if (e) {
		e->ev.param.conn.responder_resources = u8cap(ag->ird);
		e->ev.param.conn.initiator_depth = u8cap(ag->ord);
		if (reply)
			ev_pdata(e, reply->pdata, reply->pdata_len);
	}
	c->state = CM_CONNECTED;
	cm_queue(c, e);
	if (c->closed_early && !c->disc_queued) {
		c->disc_queued = true;
		c->state = CM_DISCONNECTED;
		cm_queue_simple(c, RDMA_CM_EVENT_DISCONNECTED, 0);
	}
}

/* The engine's verdict on rdma_connect (engine thread, exactly once). */
static void cm_connect_cb(void *ctx, struct xs_conn *conn, int status, const struct mpa_frame *reply)
{
	struct cm_id *c = ctx;
	struct sockaddr_storage local, peer;
	struct ibv_qp *qp;
	bool dead, have_addrs;
	int rc;

	if (status)
		xs_log("cm: connect failed: %s", strerror(-status)); /* REJECTED etc. */
	pthread_mutex_lock(&c->lock);
	qp = c->id.qp;
	dead = c->destroyed;
	if (dead || (status == 0 && !qp)) {

		if (!dead) {
			c->state = CM_FAILED;
			cm_queue_simple(c, RDMA_CM_EVENT_CONNECT_ERROR, -EINVAL);
		}
		pthread_mutex_unlock(&c->lock);
		if (status == 0) {
			xs_conn_disconnect(conn);
			xs_conn_put(conn);
		}
		cm_put(c);
		return;
	}
	if (status) {
		/* errors: the engine owns and closes conn */
		enum rdma_cm_event_type t;
		struct cm_event *e;
		int st = status;

		if (status == -ECONNREFUSED && reply) {
			t = RDMA_CM_EVENT_REJECTED; /* MPA reject, as siw */
			st = -ECONNRESET;
		} else if (status == -ECONNREFUSED || status == -ECONNRESET) {
			t = RDMA_CM_EVENT_REJECTED;
		} else if (status == -ETIMEDOUT || status == -EHOSTUNREACH || status == -ENETUNREACH) {
			t = RDMA_CM_EVENT_UNREACHABLE;
		} else {
			t = RDMA_CM_EVENT_CONNECT_ERROR;
		}
		e = ev_new(c, t, st);
		if (e && reply)
			ev_pdata(e, reply->pdata, reply->pdata_len);
		c->state = CM_FAILED;
		cm_queue(c, e);
		pthread_mutex_unlock(&c->lock);
		cm_put(c);
		return;
	}
	pthread_mutex_unlock(&c->lock);

	/* Attach inside the callback: the engine receives after it returns.
	 * conn is published only afterwards, so a concurrent destroy never
	 * puts a connection the QP took over. */
	cm_arm_closed(c, conn);
	rc = xs_qp_bind_conn(qp, conn, xs_conn_agreed(conn));
	have_addrs = xs_conn_addrs(conn, &local, &peer) == 0;
	pthread_mutex_lock(&c->lock);
	dead = c->destroyed;
	if (!dead) {
		if (have_addrs) {
			c->id.route.addr.src_storage = local;
			c->id.route.addr.dst_storage = peer;
		}
		c->conn = conn;
		c->conn_owned = rc != 0; /* bound: the QP holds it */
		if (rc) {
			c->state = CM_FAILED;
			cm_queue_simple(c, RDMA_CM_EVENT_CONNECT_ERROR, rc);
		} else {
			cm_established_locked(c, xs_conn_agreed(conn), reply);
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (rc) {
		xs_conn_disconnect(conn);
		if (dead)
			xs_conn_put(conn); /* nobody else will */
	}
	cm_put(c);
}

XS_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
	struct cm_id *c = cm_of(id);
	struct sockaddr_storage dst, src;
	struct mpa_prefs prefs;
	bool have_src;
	int rc;

	if (!id)
		return cm_err(EINVAL);
	if (!cm_param_ok(param))
		return cm_err(EINVAL);
	pthread_mutex_lock(&c->lock);
	if ((c->state != CM_ROUTE && c->state != CM_ADDR) || !id->qp) {
		pthread_mutex_unlock(&c->lock);
		return cm_err(EINVAL);
	}
	cm_prefs(&prefs, true);
	xs_qp_read_limits(id->qp, &prefs.ird, &prefs.ord);
	if (param) {
		prefs.ird = cm_depth(param->responder_resources, XS_MAX_IRD);
		prefs.ord = cm_depth(param->initiator_depth, XS_MAX_ORD);
		if (param->private_data_len) {
			memcpy(c->pdata, param->private_data, param->private_data_len);
			prefs.pdata = c->pdata;
			prefs.pdata_len = param->private_data_len;
		}
	}
	dst = id->route.addr.dst_storage;
	src = id->route.addr.src_storage;
	/* a wildcard source with port 0 means "let TCP choose" */
	have_src = src.ss_family != AF_UNSPEC &&
		   !(sa_is_any((struct sockaddr *)&src) && xs_sa_port((struct sockaddr *)&src) == 0);
	c->state = CM_CONNECTING;
	c->closed_early = false;
	cm_port_release(c);
	pthread_mutex_unlock(&c->lock);

	xs_sleep_ms(xs_config()->connect_delay_ms); /* XSOCK_CONNECT_DELAY_MS, xs_config.c */
	cm_get(c); /* for the callback */
	rc = xs_connect((struct sockaddr *)&dst, sa_len((struct sockaddr *)&dst),
			have_src ? (struct sockaddr *)&src : NULL,
			have_src ? sa_len((struct sockaddr *)&src) : 0, &prefs, cm_connect_cb, c);
	if (rc < 0) {
		pthread_mutex_lock(&c->lock);
		c->state = CM_ROUTE;
		pthread_mutex_unlock(&c->lock);
		cm_put(c);
		return cm_err(-rc);
	}
	if (c->sync)
		return cm_sync_wait(c, RDMA_CM_EVENT_ESTABLISHED);
	return 0;
}

/* A connection request arrived on a listener (engine thread). */
static void cm_accept_cb(void *ctx, struct xs_conn *conn, const struct mpa_frame *req)
{
	struct cm_id *l = ctx;
	struct cm_id *c = NULL;
	struct cm_event *e = NULL;
	struct sockaddr_storage local, peer;

	pthread_mutex_lock(&l->lock);
	if (l->destroyed || l->state != CM_LISTEN)
		goto refuse;
	c = cm_alloc(l->sync ? NULL : l->chan, false, l->id.context, l->id.ps);
	if (!c)
		goto refuse;
	e = ev_new(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	if (!e)
		goto refuse;
	c->id.verbs = l->id.verbs;
	c->id.port_num = 1;
	c->conn = conn;
	c->conn_owned = true;
	c->state = CM_REQ;
	c->req_enhanced = req->rev == 2 && req->enhanced;
	/* legacy Request: no numbers; offer the defaults (1/1, like
	 * mpa_prefs_default) rather than siw's 0/0 that breaks Read */
	c->req_ird = c->req_enhanced ? req->ird : 1;
	c->req_ord = c->req_enhanced ? req->ord : 1;
	if (xs_conn_addrs(conn, &local, &peer) == 0) {
		c->id.route.addr.src_storage = local;
		c->id.route.addr.dst_storage = peer;
	}
	e->ev.listen_id = &l->id;
	/* as the acceptor should use them: our IRD covers the peer's ORD */
	e->ev.param.conn.responder_resources = u8cap(c->req_ord);
	e->ev.param.conn.initiator_depth = u8cap(c->req_ird);
	ev_pdata(e, req->pdata, req->pdata_len);
	chan_push(l->chan, e);
	pthread_mutex_unlock(&l->lock);
	return;
refuse:
	pthread_mutex_unlock(&l->lock);
	free(e);
	if (c) {
		if (c->sync)
			chan_free(c->chan);
		cm_put(c);
	}
	xs_conn_reject(conn, NULL, 0);
	xs_conn_put(conn);
}

/* A mixed listener's plain TCP connection (engine thread): queue it on
 * the listener's channel, in order with its connection requests. */
static void cm_plain_cb(void *ctx, int fd)
{
	struct cm_id *l = ctx;
	struct cm_event *e = NULL;

	pthread_mutex_lock(&l->lock);
	if (!l->destroyed && l->state == CM_LISTEN)
		e = ev_new(l, (enum rdma_cm_event_type)XSOCK_CM_EVENT_PLAIN, fd);
	if (e) {
		e->ev.listen_id = &l->id;
		chan_push(l->chan, e);
	}
	pthread_mutex_unlock(&l->lock);
	if (!e) {
		xs_log("mixed listener: plain connection dropped (listener closing or no memory)");
		close(fd);
	}
}

/* libxsock's IWARP_MODE listeners (xs_priv_abi.h). */
XS_EXPORT int xsock_priv_listen_mixed(struct rdma_cm_id *id)
{
	struct cm_id *c = cm_of(id);
	int rc = 0;

	if (!id)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	if (c->state == CM_LISTEN || c->sync)
		rc = -EINVAL; /* too late, or rdma_get_request's synchronous mode */
	else
		c->mixed = true;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

XS_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct cm_id *c = cm_of(id);
	struct sockaddr_storage addr, bound;
	struct xs_listener *xl;
	int rc;

	if (!id)
		return cm_err(EINVAL);
	pthread_mutex_lock(&c->lock);
	if (c->state == CM_IDLE) {
		/* librdmacm binds an unbound listener to the wildcard */
		struct sockaddr_in any = { .sin_family = AF_INET };

		sa_copy(&id->route.addr.src_storage, (struct sockaddr *)&any);
		rc = cm_set_verbs(c);
		if (rc) {
			pthread_mutex_unlock(&c->lock);
			return cm_err(-rc);
		}
		c->state = CM_BOUND;
	}
	if (c->state != CM_BOUND) {
		pthread_mutex_unlock(&c->lock);
		return cm_err(EINVAL);
	}
	addr = id->route.addr.src_storage;
	c->state = CM_LISTEN; /* before xs_listen: requests may arrive at once */
	cm_port_release(c);
	pthread_mutex_unlock(&c->lock);

	xl = xs_listen((struct sockaddr *)&addr, sa_len((struct sockaddr *)&addr),
		       backlog > 0 ? backlog : 128, c->afonly, cm_accept_cb,
		       c->mixed && xs_config()->classify_ms ? cm_plain_cb : NULL, c);
	if (!xl) {
		int e = errno ? errno : EADDRINUSE;

		pthread_mutex_lock(&c->lock);
		c->state = CM_BOUND;
		pthread_mutex_unlock(&c->lock);
		return cm_err(e);
	}
	pthread_mutex_lock(&c->lock);
	c->listener = xl;
	if (xs_listener_addr(xl, &bound) == 0)
		id->route.addr.src_storage = bound;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

XS_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
	struct cm_id *c = cm_of(id);
	struct mpa_prefs prefs;
	struct xs_conn *conn;
	struct ibv_qp *qp;
	int rc;

	if (!id)
		return cm_err(EINVAL);
	if (!cm_param_ok(param))
		return cm_err(EINVAL);
	pthread_mutex_lock(&c->lock);
	if (c->state != CM_REQ || !c->conn || !id->qp) {
		pthread_mutex_unlock(&c->lock);
		return cm_err(EINVAL);
	}
	conn = c->conn;
	qp = id->qp;
	cm_prefs(&prefs, false);
	if (param) {
		prefs.ird = cm_depth(param->responder_resources, XS_MAX_IRD);
		prefs.ord = cm_depth(param->initiator_depth, XS_MAX_ORD);
		prefs.pdata = param->private_data;
		prefs.pdata_len = param->private_data_len;
	} else if (c->req_enhanced) {
		/* rdma_accept(id, NULL) (rping): take the request's numbers */
		prefs.ird = c->req_ord > XS_MAX_IRD ? XS_MAX_IRD : c->req_ord;
		prefs.ord = c->req_ird > XS_MAX_ORD ? XS_MAX_ORD : c->req_ird;
	} else {
		xs_qp_read_limits(qp, &prefs.ird, &prefs.ord);
	}
	c->state = CM_ACCEPTING;
	c->closed_early = false;
	pthread_mutex_unlock(&c->lock);

	/* Reply first (the agreement is only known then); the engine starts
	 * receiving when the QP attaches, so nothing is missed. */
	rc = xs_conn_accept(conn, &prefs);
	if (rc == 0) {
		cm_arm_closed(c, conn);
		rc = xs_qp_bind_conn(qp, conn, xs_conn_agreed(conn));
		if (rc)
			xs_conn_disconnect(conn);
	}
	pthread_mutex_lock(&c->lock);
	if (rc) {
		c->state = CM_FAILED;
	} else {
		c->conn_owned = false; /* the QP holds it now */
		cm_established_locked(c, xs_conn_agreed(conn), NULL);
	}
	pthread_mutex_unlock(&c->lock);
	if (rc)
		return cm_err(-rc);
	if (c->sync)
		return cm_sync_wait(c, RDMA_CM_EVENT_ESTABLISHED);
	return 0;
}

/* ---- exec hand-over (xs_handover.c) ------------------------------------------- */

struct rdma_cm_id *xs_cm_adopt(struct rdma_event_channel *ch, void *context, struct xs_conn *conn)
{
	struct sockaddr_storage local, peer;
	struct cm_id *c = cm_alloc(ch ? chan_of(ch) : NULL, false, context, RDMA_PS_TCP);

	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->id.verbs = xs_default_context();
	c->id.port_num = 1;
	c->conn = conn;
	c->conn_owned = true;
	c->state = CM_REQ; /* until the QP attaches (xs_cm_adopt_start) */
	if (xs_conn_addrs(conn, &local, &peer) == 0) {
		c->id.route.addr.src_storage = local;
		c->id.route.addr.dst_storage = peer;
	}
	return &c->id;
}

int xs_cm_adopt_start(struct rdma_cm_id *id)
{
	struct cm_id *c = cm_of(id);
	struct xs_conn *conn;
	int rc;

	pthread_mutex_lock(&c->lock);
	if (c->state != CM_REQ || !c->conn || !id->qp) {
		pthread_mutex_unlock(&c->lock);
		return -EINVAL;
	}
	conn = c->conn;
	c->state = CM_ACCEPTING;
	pthread_mutex_unlock(&c->lock);
	cm_arm_closed(c, conn);
	rc = xs_qp_bind_conn(id->qp, conn, xs_conn_agreed(conn));
	pthread_mutex_lock(&c->lock);
	if (rc) {
		c->state = CM_FAILED;
	} else {
		c->conn_owned = false; /* the QP holds it now */
		c->state = CM_CONNECTED; /* no ESTABLISHED: the old process had it */
		if (c->closed_early && !c->disc_queued) {
			c->disc_queued = true;
			c->state = CM_DISCONNECTED;
			cm_queue_simple(c, RDMA_CM_EVENT_DISCONNECTED, 0);
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

XS_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	struct cm_id *c = cm_of(id);
	struct xs_conn *conn;
	int rc;

	if (!id)
		return cm_err(EINVAL);
	if (private_data_len > XS_MAX_PD_PRIV || (private_data_len && !private_data))
		return cm_err(EINVAL);
	pthread_mutex_lock(&c->lock);
	if (c->state != CM_REQ || !c->conn) {
		pthread_mutex_unlock(&c->lock);
		return cm_err(EINVAL);
	}
	conn = c->conn;
	c->conn = NULL;
	c->state = CM_FAILED;
	pthread_mutex_unlock(&c->lock);
	/* the Reply goes out, then our reference goes: the id is done */
	rc = xs_conn_reject(conn, private_data, private_data_len);
	xs_conn_put(conn);
	return rc < 0 ? cm_err(-rc) : 0;
}

XS_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	/* iWARP connections are established by the MPA exchange itself */
	(void)id;
	return 0;
}

XS_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct cm_id *c = cm_of(id);
	struct xs_conn *conn;
	struct ibv_qp *qp;

	if (!id)
		return cm_err(EINVAL);
	pthread_mutex_lock(&c->lock);
	if (c->state == CM_DISCONNECTED) {
		/* the peer was first; a second disconnect is harmless */
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	if (c->state != CM_CONNECTED) {
		pthread_mutex_unlock(&c->lock);
		return cm_err(EINVAL);
	}
	conn = c->conn;
	qp = id->qp;
	c->state = CM_DISCONNECTED;
	if (!c->disc_queued) {
		c->disc_queued = true;
		cm_queue_simple(c, RDMA_CM_EVENT_DISCONNECTED, 0);
	}
	pthread_mutex_unlock(&c->lock);
	if (conn)
		xs_conn_disconnect(conn);
	if (qp)
		xs_qp_flush(qp);
	return 0;
}

/* ---- events ------------------------------------------------------------------- */

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
	struct cm_chan *ch = channel ? chan_of(channel) : NULL;
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
	e = chan_pop(ch, true);
	if (!e)
		return -1;
	*event = &e->ev;
	return 0;
}

XS_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event)
		return cm_err(EINVAL);
	ev_free((struct cm_event *)event); /* struct cm_event starts with it */
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
	nw = channel ? chan_of(channel) : chan_new();
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
	chan_take(old, id, &list);
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
		chan_free(old);
	}
	return 0;
}

XS_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	/* the QP is connected before any completion can arrive */
	(void)id;
	(void)event;
	return 0;
}

XS_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
			      size_t optlen)
{
	if (!id)
		return cm_err(EINVAL);
	if (level == RDMA_OPTION_ID && optname == RDMA_OPTION_ID_AFONLY) {
		struct cm_id *c = (struct cm_id *)id;

		if (!optval || optlen != sizeof(int))
			return cm_err(EINVAL);
		pthread_mutex_lock(&c->lock);
		c->afonly = *(const int *)optval != 0;
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	/* accepted and ignored: TCP picks its own TOS/reuse */
	if (level == RDMA_OPTION_ID &&
	    (optname == RDMA_OPTION_ID_TOS || optname == RDMA_OPTION_ID_REUSEADDR ||
	     optname == RDMA_OPTION_ID_ACK_TIMEOUT))
		return 0;
	return cm_err(ENOSYS);
}

XS_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list = calloc(2, sizeof(*list));

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	list[0] = xs_default_context();
	if (num_devices)
		*num_devices = list[0] ? 1 : 0;
	return list;
}

XS_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

/* ---- rdma_getaddrinfo --------------------------------------------------------- */

XS_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	struct rdma_addrinfo *n;

	for (; res; res = n) {
		n = res->ai_next;
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
	}
}

static struct sockaddr *sa_dup(const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr *d = malloc(len);

	if (d)
		memcpy(d, sa, len);
	return d;
}

/* Copy of a hint's address, as librdmacm's ucma_copy_addr. */
static int rai_copy_addr(struct sockaddr **dst, socklen_t *dst_len, const struct sockaddr *src,
			 socklen_t len)
{
	*dst = sa_dup(src, len);
	if (!*dst)
		return cm_err(ENOMEM);
	*dst_len = len;
	return 0;
}

/* Like librdmacm: with node or service, one rdma_addrinfo from the first
 * address getaddrinfo gives; with neither, the hints' addresses as they are
 * (libfabric's verbs provider passes its src/dest addresses that way).  A
 * source address in the hints is kept when the lookup gave none.  Returns 0,
 * or getaddrinfo's EAI_* code (gai_strerror-able), or -1 with errno for our
 * own failures. */
XS_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
			       const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct addrinfo h, *ai = NULL;
	struct rdma_addrinfo *r;
	int rc = 0;

	if (!res || (!node && !service && !hints))
		return cm_err(EINVAL);
	if (hints && hints->ai_port_space && hints->ai_port_space != RDMA_PS_TCP)
		return cm_err(EOPNOTSUPP);
	if (hints && hints->ai_qp_type && hints->ai_qp_type != IBV_QPT_RC)
		return cm_err(EOPNOTSUPP);
	memset(&h, 0, sizeof(h));
	h.ai_socktype = SOCK_STREAM;
	h.ai_protocol = IPPROTO_TCP;
	if (hints) {
		h.ai_family = hints->ai_family;
		if (hints->ai_flags & RAI_PASSIVE)
			h.ai_flags |= AI_PASSIVE;
		if (hints->ai_flags & RAI_NUMERICHOST)
			h.ai_flags |= AI_NUMERICHOST;
	}
	if (h.ai_family != AF_UNSPEC && h.ai_family != AF_INET && h.ai_family != AF_INET6)
		return cm_err(EAFNOSUPPORT);
	r = calloc(1, sizeof(*r));
	if (!r)
		return cm_err(ENOMEM);
	r->ai_qp_type = IBV_QPT_RC;
	r->ai_port_space = RDMA_PS_TCP;
	if (node || service) {
		rc = getaddrinfo(node, service, &h, &ai);
		if (rc) {
			free(r);
			return rc;
		}
		r->ai_family = ai->ai_family;
		if (h.ai_flags & AI_PASSIVE) {
			r->ai_flags = RAI_PASSIVE;
			rc = rai_copy_addr(&r->ai_src_addr, &r->ai_src_len, ai->ai_addr, ai->ai_addrlen);
			if (!rc && ai->ai_canonname &&
			    !(r->ai_src_canonname = strdup(ai->ai_canonname)))
				rc = cm_err(ENOMEM);
		} else {
			rc = rai_copy_addr(&r->ai_dst_addr, &r->ai_dst_len, ai->ai_addr, ai->ai_addrlen);
			if (!rc && ai->ai_canonname &&
			    !(r->ai_dst_canonname = strdup(ai->ai_canonname)))
				rc = cm_err(ENOMEM);
		}
		freeaddrinfo(ai);
	} else {
		r->ai_flags = hints->ai_flags;
		r->ai_family = hints->ai_family;
		if (hints->ai_dst_addr && hints->ai_dst_len)
			rc = rai_copy_addr(&r->ai_dst_addr, &r->ai_dst_len, hints->ai_dst_addr,
					   hints->ai_dst_len);
	}
	if (!rc && !r->ai_src_len && hints && hints->ai_src_addr && hints->ai_src_len)
		rc = rai_copy_addr(&r->ai_src_addr, &r->ai_src_len, hints->ai_src_addr,
				   hints->ai_src_len);
	if (rc) {
		rdma_freeaddrinfo(r);
		return rc;
	}
	*res = r;
	return 0;
}

/* ---- synchronous endpoint helpers ----------------------------------------------- */

/* As librdmacm, the QP type is the address's, whatever the caller's
 * attributes said (rdma_client leaves it 0); an address not from
 * rdma_getaddrinfo may have none: RC, the only type here. */
static enum ibv_qp_type ep_qp_type(const struct rdma_addrinfo *res)
{
	return res->ai_qp_type ? (enum ibv_qp_type)res->ai_qp_type : IBV_QPT_RC;
}

XS_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cid;
	struct cm_id *c;
	int rc;

	if (!id || !res)
		return cm_err(EINVAL);
	rc = rdma_create_id(NULL, &cid, NULL, res->ai_port_space ? (enum rdma_port_space)res->ai_port_space :
								   RDMA_PS_TCP);
	if (rc)
		return rc;
	c = cm_of(cid);
	if (res->ai_flags & RAI_PASSIVE) {
		rc = rdma_bind_addr(cid, res->ai_src_addr);
		if (rc)
			goto fail;
		if (qp_init_attr) {
			/* kept for the ids rdma_get_request hands out */
			c->ep_qp = true;
			c->ep_pd = pd;
			c->ep_attr = *qp_init_attr;
			c->ep_attr.qp_type = ep_qp_type(res);
		}
	} else {
		rc = rdma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr, 2000);
		if (!rc)
			rc = rdma_resolve_route(cid, 2000);
		if (rc)
			goto fail;
		if (qp_init_attr) {
			qp_init_attr->qp_type = ep_qp_type(res);
			rc = rdma_create_qp(cid, pd, qp_init_attr);
			if (rc)
				goto fail;
		}
	}
	*id = cid;
	return 0;
fail:
	{
		int e = errno;

		rdma_destroy_id(cid);
		errno = e;
		return -1;
	}
}

XS_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id);
}

/* ---- shared receive queues -------------------------------------------------------- */

/* librdmacm's: a BASIC SRQ on the id's device, with the id's PD (or the
 * CM's own) when attr names none; id->srq.  0 or -1 with errno. */
XS_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	struct cm_id *c = cm_of(id);
	struct ibv_srq *srq;

	if (!id || !attr || !id->verbs || !(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		return cm_err(EINVAL);
	if (attr->srq_type != IBV_SRQT_BASIC)
		return cm_err(EOPNOTSUPP); /* XRC, tag matching */
	if (id->srq)
		return cm_err(EEXIST); /* librdmacm would lose the first one */
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : cm_default_pd(id->verbs);
		if (!attr->pd)
			return -1;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	srq = ibv_create_srq_ex(id->verbs, attr);
	if (!srq)
		return cm_err(errno ? errno : ENOMEM);
	pthread_mutex_lock(&c->lock);
	if (!id->pd)
		id->pd = attr->pd;
	id->srq = srq;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

XS_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
			      struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ax;
	int rc;

	if (!id || !attr)
		return cm_err(EINVAL);
	memset(&ax, 0, sizeof(ax));
	memcpy(&ax, attr, sizeof(*attr));
	ax.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	ax.srq_type = IBV_SRQT_BASIC;
	ax.pd = pd;
	rc = rdma_create_srq_ex(id, &ax);
	memcpy(attr, &ax, sizeof(*attr)); /* what was granted */
	return rc;
}

/* While a QP uses it the SRQ stays (ibv_destroy_srq is EBUSY): id->srq is
 * kept rather than lost, unlike librdmacm. */
XS_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (!id || !id->srq)
		return;
	if (ibv_destroy_srq(id->srq) == 0)
		id->srq = NULL;
}

/* Sync listeners only (as in librdmacm): the next connect request as a new
 * id, with a QP if rdma_create_ep was given QP attributes. */
XS_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct cm_id *l = cm_of(listen);
	struct cm_event *e;
	struct rdma_cm_id *child;

	if (!listen || !id)
		return cm_err(EINVAL);
	if (!l->sync)
		return cm_err(EINVAL);
	for (;;) {
		e = chan_pop(l->chan, false);
		if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		ev_free(e);
	}
	child = e->ev.id;
	if (l->ep_qp) {
		struct ibv_qp_init_attr a = l->ep_attr;

		if (rdma_create_qp(child, l->ep_pd, &a)) {
			int err = errno;

			free(e);
			rdma_reject(child, NULL, 0);
			rdma_destroy_id(child);
			errno = err;
			return -1;
		}
	}
	/* the child's event: its private data stays readable there */
	child->event = &e->ev;
	*id = child;
	return 0;
}

/* ---- fork and libxsock (xs_internal.h) ------------------------------------------ */

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
				ev_free(e);
				continue;
			}
			c->tail = e;
			pp = &e->next;
		}
		if (xs_fork_new_eventfd(c->ch.fd, 0, c->head ? 1 : 0) < 0)
			xs_log("fork: CM channel fd %d: %s", c->ch.fd, strerror(errno));
	}
}

/* Private to libxsock: an event is queued on the channel (no system call). */
XS_EXPORT int xsock_priv_cm_pending(struct rdma_event_channel *channel)
{
	struct cm_chan *c = chan_of(channel);
	bool any;

	pthread_mutex_lock(&c->lock);
	any = c->head != NULL;
	pthread_mutex_unlock(&c->lock);
	return any;
}

struct xs_conn *xs_cm_conn(struct rdma_cm_id *id)
{
	struct cm_id *c = cm_of(id);
	struct xs_conn *conn;

	if (id->qp)
		return xs_qp_conn(id->qp);
	pthread_mutex_lock(&c->lock);
	conn = c->conn;
	pthread_mutex_unlock(&c->lock);
	return conn;
}

struct xs_listener *xs_cm_listener(struct rdma_cm_id *id)
{
	struct cm_id *c = cm_of(id);
	struct xs_listener *l;

	pthread_mutex_lock(&c->lock);
	l = c->listener;
	pthread_mutex_unlock(&c->lock);
	return l;
}

/* Enhanced Connection Establishment rides IB CM REQ/REP: an MPA exchange
 * has no room for it.  Carried because librdmacm's own versions reach into
 * its private id (container_of an xsock id: out of bounds). */
XS_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	return cm_err(id && ece ? EOPNOTSUPP : EINVAL);
}

XS_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	return cm_err(id && ece ? EOPNOTSUPP : EINVAL);
}

/* The ECE reject reason has nowhere to go: a plain MPA reject. */
XS_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
			      uint8_t private_data_len)
{
	return rdma_reject(id, private_data, private_data_len);
}

/* Multicast needs UD QPs, which an iWARP device does not have (RDMA_PS_UDP
 * ids already fail with EOPNOTSUPP): refused as ibv_attach_mcast is.
 * Carried because librdmacm's own versions reach into its private id, as
 * the ECE calls above. */
XS_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	return cm_err(id && addr ? EOPNOTSUPP : EINVAL);
}

XS_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *mc_join_attr,
				     void *context)
{
	return cm_err(id && mc_join_attr ? EOPNOTSUPP : EINVAL);
}

XS_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	return cm_err(id && addr ? EOPNOTSUPP : EINVAL);
}
