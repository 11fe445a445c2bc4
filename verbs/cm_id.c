/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* CM ids (rdma_create_id, rdma_destroy_id) and their addresses:
 * rdma_bind_addr (a port 0 is taken at once), rdma_resolve_addr and
 * rdma_resolve_route (the kernel's source address towards the peer; the
 * events are queued at once), the ports; rdma_set_option, rdma_notify and
 * the device list.  Application threads; each call takes the id's lock. */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/xs_sockaddr.h"
#include "verbs/cm_priv.h"
#include "verbs/xs_roce_dev.h"

/* ---- ids ------------------------------------------------------------------ */

void cm_get(struct cm_id *c)
{
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_ACQ_REL);
}

void cm_put(struct cm_id *c)
{
	if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		pthread_mutex_destroy(&c->lock);
		free(c);
	}
}

struct cm_id *cm_alloc(struct cm_chan *chan, bool sync, void *context, enum rdma_port_space ps)
{
	struct cm_id *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (!chan) {
		chan = cm_chan_new();
		if (!chan) {
			free(c);
			return NULL;
		}
		sync = true;
	}
	c->afonly = -1;
	c->ack_timeout = -1;
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
	c->tp = &xs_tp_iwarp; /* the one transport until a device chooses */
	return c;
}

XS_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
			     void *context, enum rdma_port_space ps)
{
	struct cm_id *c;

	if (!id)
		return cm_err(EINVAL);
	/* connected (RC) only, on both transports: no UD port spaces (udaddy
	 * and mckey say nothing of a failed rdma_create_id: we do) */
	if (ps != RDMA_PS_TCP) {
		xs_log("rdma_create_id: port space %#x (%s) not supported: RC only (RDMA_PS_TCP)",
		       (unsigned)ps, ps == RDMA_PS_UDP ? "UD" : ps == RDMA_PS_IPOIB ? "IPoIB" : "other");
		return cm_err(EOPNOTSUPP);
	}
	c = cm_alloc(channel ? cm_chan_of(channel) : NULL, false, context, ps);
	if (!c)
		return cm_err(ENOMEM);
	*id = &c->id;
	return 0;
}

static void cm_destroy(struct cm_id *c);

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
		cm_ev_free(e);
	}
}

/* An id whose external QP holds its connection (rdma_connect or
 * rdma_accept with conn_param.qp_num) is destroyed: no closed upcall for
 * it may come after this, whether the QP is still there (its connection's
 * callback is taken off under the rx lock, as rdma_destroy_qp does) or
 * was destroyed first (its put took the callback off, and it never ran),
 * so the callback's reference goes with the id. */
static void cm_detach_ext(struct cm_id *c, struct xs_conn *held, uint32_t qpn)
{
	struct ibv_qp *qp = xs_qp_lookup(c->id.verbs, qpn);

	if (qp && xs_qp_conn(qp) == held) {
		c->tp->rx_lock(held);
		c->tp->set_closed_cb(held, NULL, NULL);
		c->tp->rx_unlock(held);
	}
}

static void cm_destroy(struct cm_id *c)
{
	struct xs_listener *l;
	struct xs_conn *conn, *held;
	struct cm_event *list = NULL;
	enum cm_state st;
	bool drop_closed_ref;
	uint32_t ext_qpn;

	pthread_mutex_lock(&c->lock);
	c->destroyed = true;
	cm_port_release(c);
	l = c->listener;
	c->listener = NULL;
	conn = c->conn_owned ? c->conn : NULL;
	held = c->conn_owned ? NULL : c->conn; /* a QP's */
	ext_qpn = c->id.qp ? 0 : c->ext_qpn;
	c->conn = NULL;
	c->conn_owned = false;
	st = c->state;
	pthread_mutex_unlock(&c->lock);

	if (l)
		c->tp->listener_close(l); /* no accept upcall after this */
	if (c->roce)
		cm_roce_destroy(c); /* no IB CM upcall after this */
	if (conn) {
		if (st == CM_REQ)
			c->tp->reject(conn, NULL, 0); /* never answered: refuse it */
		else if (st == CM_CONNECTED || st == CM_RESPONSE)
			c->tp->disconnect(conn);
		c->tp->put(conn); /* no upcall after this */
	}
	/* Only a connection we still own is gone for sure; one the QP holds
	 * may still report its end, and the callback's reference keeps c
	 * alive for that (cm_closed_cb ignores destroyed ids). */
	if (held && ext_qpn)
		cm_detach_ext(c, held, ext_qpn);
	pthread_mutex_lock(&c->lock);
	drop_closed_ref = (conn || (held && ext_qpn)) && c->closed_ref;
	if (drop_closed_ref)
		c->closed_ref = false;
	pthread_mutex_unlock(&c->lock);
	if (drop_closed_ref)
		cm_put(c);

	/* Nothing queues for c any more (destroyed is set): flush its events. */
	cm_chan_take(c->chan, &c->id, &list);
	cm_drop_events(c, list);
	if (c->sync) {
		cm_ev_free((struct cm_event *)c->id.event);
		c->id.event = NULL;
		cm_chan_free(c->chan);
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

/* ---- addresses ------------------------------------------------------------ */

socklen_t cm_sa_len(const struct sockaddr *sa)
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

int cm_sa_copy(struct sockaddr_storage *dst, const struct sockaddr *src)
{
	socklen_t len = cm_sa_len(src);

	if (!len)
		return -EAFNOSUPPORT;
	memset(dst, 0, sizeof(*dst));
	memcpy(dst, src, len);
	return 0;
}

/* The id's device is the CM's default one (XSOCK_TRANSPORT); on
 * xsock_roce0 the id's connection calls are cm_roce.c's (the IB CM). */
int cm_set_verbs(struct cm_id *c)
{
	if (!c->id.verbs)
		c->id.verbs = xs_default_context();
	if (!c->id.verbs)
		return -ENODEV;
	c->roce = xs_ctx_is_roce(c->id.verbs);
	c->id.port_num = 1;
	if (!c->id.pd)
		c->id.pd = cm_default_pd(c->id.verbs); /* NULL: rdma_create_qp tries again */
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
	if (bind(fd, sa, cm_sa_len(sa)) < 0 || getsockname(fd, sa, &len) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	c->port_fd = xs_fd_keep(fd);
	return 0;
}

/* Listen or connect is about to bind the port itself.  c->lock held. */
void cm_port_release(struct cm_id *c)
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
	rc = cm_sa_copy(&id->route.addr.src_storage, addr);
	if (!rc)
		rc = cm_set_verbs(c);
	if (!rc)
		rc = cm_port_reserve(c, &id->route.addr.src_storage);
	if (!rc)
		c->state = CM_BOUND;
	pthread_mutex_unlock(&c->lock);
	return rc ? cm_err(-rc) : 0;
}

bool cm_sa_is_any(const struct sockaddr *sa)
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

	/* 127.0.0.1 and ::1 answer themselves (their local routes' source):
	 * no socket for each loopback connect */
	if ((dst->sa_family == AF_INET &&
	     ((const struct sockaddr_in *)dst)->sin_addr.s_addr == htonl(INADDR_LOOPBACK)) ||
	    (dst->sa_family == AF_INET6 &&
	     IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)dst)->sin6_addr))) {
		memset(src, 0, sizeof(*src));
		memcpy(src, dst, cm_sa_len(dst));
		if (src->ss_family == AF_INET6)
			((struct sockaddr_in6 *)src)->sin6_flowinfo = 0;
	} else {
		fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (connect(fd, dst, cm_sa_len(dst)) < 0 ||
		    getsockname(fd, (struct sockaddr *)src, &len) < 0)
			rc = -errno;
		close(fd);
	}
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
	if (!id || !dst_addr || !cm_sa_len(dst_addr))
		return cm_err(EINVAL);
	pthread_mutex_lock(&c->lock);
	if (c->state != CM_IDLE && c->state != CM_BOUND) {
		pthread_mutex_unlock(&c->lock);
		return cm_err(EINVAL);
	}
	if (src_addr) {
		rc = cm_sa_copy(&id->route.addr.src_storage, src_addr);
		if (rc) {
			pthread_mutex_unlock(&c->lock);
			return cm_err(-rc);
		}
	}
	cm_sa_copy(&id->route.addr.dst_storage, dst_addr);
	if (id->route.addr.src_addr.sa_family == AF_UNSPEC ||
	    (id->route.addr.src_addr.sa_family == dst_addr->sa_family && cm_sa_is_any(&id->route.addr.src_addr))) {
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

/* ---- options and devices -------------------------------------------------- */

XS_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	/* the QP is connected before any completion can arrive */
	(void)id;
	(void)event;
	return 0;
}

/* RDMA_OPTION_ID_ACK_TIMEOUT (a u8, RC ids only, as the kernel's CM): kept
 * for the id's QP, now if it has one (rdma_create_qp applies it later
 * otherwise; rdma_init_qp_attr reports it for an external QP's RTS). */
static int cm_set_ack_timeout(struct cm_id *c, const void *optval, size_t optlen)
{
	struct ibv_qp_attr a;
	struct ibv_qp *qp;

	if (!optval || optlen != sizeof(uint8_t) || c->id.qp_type != IBV_QPT_RC)
		return cm_err(EINVAL);
	memset(&a, 0, sizeof(a));
	a.timeout = *(const uint8_t *)optval;
	pthread_mutex_lock(&c->lock);
	c->ack_timeout = a.timeout;
	qp = c->id.qp;
	pthread_mutex_unlock(&c->lock);
	if (qp && ibv_modify_qp(qp, &a, IBV_QP_TIMEOUT))
		return cm_err(EINVAL);
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
	if (level == RDMA_OPTION_ID && optname == RDMA_OPTION_ID_ACK_TIMEOUT)
		return cm_set_ack_timeout(cm_of(id), optval, optlen);
	/* accepted and ignored: TCP picks its own TOS/reuse */
	if (level == RDMA_OPTION_ID &&
	    (optname == RDMA_OPTION_ID_TOS || optname == RDMA_OPTION_ID_REUSEADDR))
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
