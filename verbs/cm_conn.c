/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Connections of CM ids over the engine's TCP + MPA handshakes
 * (xs_internal.h): rdma_connect, rdma_listen, rdma_accept, rdma_reject,
 * rdma_disconnect, and the engine's upcalls (the connect verdict, a
 * connection request, a mixed listener's plain TCP client, the
 * connection's end), which run on the engine thread.  No CM lock is held
 * while calling into the engine (cm_priv.h).
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
 * External QPs (no rdma_create_qp: the application's own ibv_create_qp,
 * named by conn_param.qp_num, moved by the application with
 * rdma_init_qp_attr and ibv_modify_qp): rdma_accept binds the passive side
 * at once (it is in RTS by then) and queues ESTABLISHED; the active side
 * gets CONNECT_RESPONSE instead of ESTABLISHED once the MPA Reply is in,
 * and rdma_establish binds its QP, with no event, as librdmacm's flow over
 * the IB CM.  Until then the connection is not read (the peer's first
 * messages wait in the socket).  The kernel's iWARP CM has no
 * CONNECT_RESPONSE (siw reports ESTABLISHED to a QP the CM cannot know
 * is ready); rdma-core's test_rdmacm_async_traffic_external_qp needs it. */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/xs_sockaddr.h"
#include "verbs/cm_priv.h"
#include "verbs/xs_priv_abi.h"
#include "util/xs_errno.h"

/* ---- parameters, the connection's end ------------------------------------- */

static uint8_t u8cap(uint16_t v)
{
	return v > 255 ? 255 : (uint8_t)v;
}

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
int cm_qp_attach(struct cm_id *c, struct ibv_qp *qp, struct xs_conn *conn)
{
	struct xs_tp_params p;

	c->tp->params(conn, &p);
	return xs_qp_attach(qp, c->tp, conn, &p);
}

void cm_arm_closed(struct cm_id *c, struct xs_conn *conn)
{
	pthread_mutex_lock(&c->lock);
	if (c->destroyed) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	c->closed_ref = true;
	cm_get(c);
	pthread_mutex_unlock(&c->lock);
	c->tp->set_closed_cb(conn, cm_closed_cb, c);
}

/* Queue ESTABLISHED (and DISCONNECTED if the connection already ended).
 * c locked. */
static void cm_established_locked(struct cm_id *c, const struct mpa_agreed *ag,
				  const struct mpa_frame *reply)
{
	struct cm_event *e = cm_ev_new(c, RDMA_CM_EVENT_ESTABLISHED, 0);

	if (e) {
		e->ev.param.conn.responder_resources = u8cap(ag->ird);
		e->ev.param.conn.initiator_depth = u8cap(ag->ord);
		if (reply)
			cm_ev_pdata(e, reply->pdata, reply->pdata_len);
	}
	c->state = CM_CONNECTED;
	cm_queue(c, e);
	if (c->closed_early && !c->disc_queued) {
		c->disc_queued = true;
		c->state = CM_DISCONNECTED;
		cm_queue_simple(c, RDMA_CM_EVENT_DISCONNECTED, 0);
	}
}

struct ibv_qp *cm_conn_qp(struct cm_id *c)
{
	if (c->id.qp)
		return c->id.qp;
	return c->ext_qpn ? xs_qp_lookup(c->id.verbs, c->ext_qpn) : NULL;
}

/* The external QP param names for an id without a QP: c->ext_qpn, or
 * NULL (librdmacm's kernel fails a connect or accept with no QP to
 * EINVAL).  c->lock held. */
static struct ibv_qp *cm_ext_qp(struct cm_id *c, const struct rdma_conn_param *param)
{
	struct ibv_qp *qp = param && param->qp_num ? xs_qp_lookup(c->id.verbs, param->qp_num) : NULL;

	if (qp)
		c->ext_qpn = param->qp_num;
	return qp;
}

/* ---- rdma_connect --------------------------------------------------------- */

/* The connection's TCP addresses become the id's route, where the
 * transport has them (c->lock held, or c not shared yet). */
static void cm_route_from_conn(struct cm_id *c, struct xs_conn *conn)
{
	struct sockaddr_storage local, peer;

	if (c->tp->addrs(conn, &local, &peer) == 0) {
		c->id.route.addr.src_storage = local;
		c->id.route.addr.dst_storage = peer;
	}
}

/* The connect succeeded for an id with an external QP (engine thread):
 * CONNECT_RESPONSE; the CM keeps conn until rdma_establish binds it. */
static void cm_connect_response(struct cm_id *c, struct xs_conn *conn, const struct mpa_frame *reply)
{
	const struct mpa_agreed *ag = c->tp->agreed(conn);
	struct cm_event *e;
	bool dead;

	pthread_mutex_lock(&c->lock);
	dead = c->destroyed;
	if (!dead) {
		cm_route_from_conn(c, conn);
		c->conn = conn;
		c->conn_owned = true;
		c->state = CM_RESPONSE;
		e = cm_ev_new(c, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
		if (e) {
			e->ev.param.conn.responder_resources = u8cap(ag->ird);
			e->ev.param.conn.initiator_depth = u8cap(ag->ord);
			e->ev.param.conn.qp_num = c->ext_qpn;
			if (reply)
				cm_ev_pdata(e, reply->pdata, reply->pdata_len);
		}
		cm_queue(c, e);
	}
	pthread_mutex_unlock(&c->lock);
	if (dead) {
		c->tp->disconnect(conn);
		c->tp->put(conn);
	}
	cm_put(c);
}

/* The engine's verdict on rdma_connect (engine thread, exactly once). */
static void cm_connect_cb(void *ctx, struct xs_conn *conn, int status, const struct mpa_frame *reply)
{
	struct cm_id *c = ctx;
	struct ibv_qp *qp;
	bool dead;
	int rc;

	if (status)
		xs_log("cm: connect failed: %s", xs_strerror(-status)); /* REJECTED etc. */
	pthread_mutex_lock(&c->lock);
	qp = c->id.qp;
	dead = c->destroyed;
	if (!dead && status == 0 && !qp && c->ext_qpn) {
		pthread_mutex_unlock(&c->lock);
		cm_connect_response(c, conn, reply);
		return;
	}
	if (dead || (status == 0 && !qp)) {

		if (!dead) {
			c->state = CM_FAILED;
			cm_queue_simple(c, RDMA_CM_EVENT_CONNECT_ERROR, -EINVAL);
		}
		pthread_mutex_unlock(&c->lock);
		if (status == 0) {
			c->tp->disconnect(conn);
			c->tp->put(conn);
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
		e = cm_ev_new(c, t, st);
		if (e && reply)
			cm_ev_pdata(e, reply->pdata, reply->pdata_len);
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
	rc = cm_qp_attach(c, qp, conn);
	pthread_mutex_lock(&c->lock);
	dead = c->destroyed;
	if (!dead) {
		cm_route_from_conn(c, conn);
		c->conn = conn;
		c->conn_owned = rc != 0; /* bound: the QP holds it */
		if (rc) {
			c->state = CM_FAILED;
			cm_queue_simple(c, RDMA_CM_EVENT_CONNECT_ERROR, rc);
		} else {
			cm_established_locked(c, c->tp->agreed(conn), reply);
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (rc) {
		c->tp->disconnect(conn);
		if (dead)
			c->tp->put(conn); /* nobody else will */
	}
	cm_put(c);
}

XS_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
	struct cm_id *c = cm_of(id);
	struct sockaddr_storage dst, src;
	struct mpa_prefs prefs;
	struct ibv_qp *qp;
	bool have_src, ext;
	int rc;

	if (!id || !cm_param_ok(param))
		return cm_err(EINVAL);
	if (c->roce)
		return cm_roce_connect(c, param);
	pthread_mutex_lock(&c->lock);
	c->ext_qpn = 0;
	qp = id->qp ? id->qp : cm_ext_qp(c, param);
	ext = !id->qp;
	if ((c->state != CM_ROUTE && c->state != CM_ADDR) || !qp) {
		pthread_mutex_unlock(&c->lock);
		return cm_err(EINVAL);
	}
	cm_prefs(&prefs, true);
	xs_qp_read_limits(qp, &prefs.ird, &prefs.ord);
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
		   !(cm_sa_is_any((struct sockaddr *)&src) && xs_sa_port((struct sockaddr *)&src) == 0);
	c->state = CM_CONNECTING;
	c->closed_early = false;
	cm_port_release(c);
	pthread_mutex_unlock(&c->lock);

	xs_sleep_ms(xs_config()->connect_delay_ms); /* XSOCK_CONNECT_DELAY_MS, xs_config.c */
	cm_get(c); /* for the callback */
	rc = c->tp->connect((struct sockaddr *)&dst, cm_sa_len((struct sockaddr *)&dst),
			have_src ? (struct sockaddr *)&src : NULL,
			have_src ? cm_sa_len((struct sockaddr *)&src) : 0, &prefs,
			c->no_redial ? 0 : XS_REDIAL_MS, cm_connect_cb, c);
	if (rc < 0) {
		pthread_mutex_lock(&c->lock);
		c->state = CM_ROUTE;
		pthread_mutex_unlock(&c->lock);
		cm_put(c);
		return cm_err(-rc);
	}
	if (c->sync)
		return cm_sync_wait(c, ext ? RDMA_CM_EVENT_CONNECT_RESPONSE : RDMA_CM_EVENT_ESTABLISHED);
	return 0;
}

/* ---- rdma_listen and the listener's upcalls ------------------------------- */

/* A connection request arrived on a listener (engine thread). */
static void cm_accept_cb(void *ctx, struct xs_conn *conn, const struct mpa_frame *req)
{
	struct cm_id *l = ctx;
	struct cm_id *c = NULL;
	struct cm_event *e = NULL;

	pthread_mutex_lock(&l->lock);
	if (l->destroyed || l->state != CM_LISTEN)
		goto refuse;
	c = cm_alloc(l->sync ? NULL : l->chan, false, l->id.context, l->id.ps);
	if (!c)
		goto refuse;
	e = cm_ev_new(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	if (!e)
		goto refuse;
	c->id.verbs = l->id.verbs;
	c->id.port_num = 1;
	c->id.pd = cm_default_pd(c->id.verbs);
	c->tp = l->tp;
	c->conn = conn;
	c->conn_owned = true;
	c->state = CM_REQ;
	c->req_enhanced = req->rev == 2 && req->enhanced;
	/* legacy Request: no numbers; offer the defaults (1/1, like
	 * mpa_prefs_default) rather than siw's 0/0 that breaks Read */
	c->req_ird = c->req_enhanced ? req->ird : 1;
	c->req_ord = c->req_enhanced ? req->ord : 1;
	cm_route_from_conn(c, conn);
	e->ev.listen_id = &l->id;
	/* as the acceptor should use them: our IRD covers the peer's ORD */
	e->ev.param.conn.responder_resources = u8cap(c->req_ord);
	e->ev.param.conn.initiator_depth = u8cap(c->req_ird);
	cm_ev_pdata(e, req->pdata, req->pdata_len);
	cm_chan_push(l->chan, e);
	pthread_mutex_unlock(&l->lock);
	return;
refuse:
	pthread_mutex_unlock(&l->lock);
	free(e);
	if (c) {
		if (c->sync)
			cm_chan_free(c->chan);
		cm_put(c);
	}
	l->tp->reject(conn, NULL, 0);
	l->tp->put(conn);
}

/* A mixed listener's plain TCP connection (engine thread): queue it on
 * the listener's channel, in order with its connection requests. */
static void cm_plain_cb(void *ctx, int fd)
{
	struct cm_id *l = ctx;
	struct cm_event *e = NULL;

	pthread_mutex_lock(&l->lock);
	if (!l->destroyed && l->state == CM_LISTEN)
		e = cm_ev_new(l, (enum rdma_cm_event_type)XSOCK_CM_EVENT_PLAIN, fd);
	if (e) {
		e->ev.listen_id = &l->id;
		cm_chan_push(l->chan, e);
	}
	pthread_mutex_unlock(&l->lock);
	if (!e) {
		xs_log("mixed listener: plain connection dropped (listener closing or no memory)");
		close(fd);
	}
}

/* A mixed listener over RoCE: its RoCE clients come through the IB CM, so
 * a TCP client of its port is a plain one (or an iWARP one, refused with an
 * MPA Reject: the listener's QPs are RoCE's) (engine thread). */
static void cm_roce_refuse_mpa(void *ctx, struct xs_conn *conn, const struct mpa_frame *req)
{
	(void)ctx;
	(void)req;
	xs_log("mixed listener over RoCE: an iWARP client refused (MPA Reject)");
	xs_tp_iwarp.reject(conn, NULL, 0);
	xs_tp_iwarp.put(conn);
}

/* The TCP half of a mixed listener over RoCE (xsock(7) IWARP_MODE SOCKETS
 * OVER ROCE): the port's TCP listener, whose plain clients are queued as
 * over iWARP.  Without it (the TCP port taken) the RoCE listener still
 * works: said under XSOCK_DEBUG, not an error. */
static void cm_roce_plain_listen(struct cm_id *c, int backlog)
{
	struct sockaddr_storage addr;
	struct xs_listener *xl;

	pthread_mutex_lock(&c->lock);
	addr = c->id.route.addr.src_storage;
	pthread_mutex_unlock(&c->lock);
	xl = xs_tp_iwarp.listen((struct sockaddr *)&addr, cm_sa_len((struct sockaddr *)&addr),
				backlog > 0 ? backlog : 128, c->afonly, cm_roce_refuse_mpa,
				cm_plain_cb, c);
	if (!xl) {
		xs_log("mixed listener over RoCE: no TCP listener on port %u (%s): RoCE clients only",
		       ntohs(xs_sa_port((struct sockaddr *)&addr)), xs_strerror(errno));
		return;
	}
	pthread_mutex_lock(&c->lock);
	if (!c->destroyed && c->state == CM_LISTEN && !c->listener) {
		c->listener = xl; /* closed with the id (cm_destroy) */
		xl = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	if (xl)
		xs_tp_iwarp.listener_close(xl);
}

/* libxsock's IWARP_MODE connects (xs_priv_abi.h). */
XS_EXPORT int xsock_priv_cm_no_redial(struct rdma_cm_id *id)
{
	struct cm_id *c = cm_of(id);

	if (!id)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	c->no_redial = true;
	pthread_mutex_unlock(&c->lock);
	return 0;
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

		cm_sa_copy(&id->route.addr.src_storage, (struct sockaddr *)&any);
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
	if (c->roce) {
		bool mixed = c->mixed && xs_config()->classify_ms;

		pthread_mutex_unlock(&c->lock);
		rc = cm_roce_listen(c);
		if (!rc && mixed)
			cm_roce_plain_listen(c, backlog);
		return rc;
	}
	addr = id->route.addr.src_storage;
	c->state = CM_LISTEN; /* before xs_listen: requests may arrive at once */
	cm_port_release(c);
	pthread_mutex_unlock(&c->lock);

	xl = c->tp->listen((struct sockaddr *)&addr, cm_sa_len((struct sockaddr *)&addr),
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
	if (c->tp->listener_addr(xl, &bound) == 0)
		id->route.addr.src_storage = bound;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* ---- rdma_accept ---------------------------------------------------------- */

XS_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
	struct cm_id *c = cm_of(id);
	struct mpa_prefs prefs;
	struct xs_conn *conn;
	struct ibv_qp *qp;
	int rc;

	if (!id || !cm_param_ok(param))
		return cm_err(EINVAL);
	if (c->roce)
		return cm_roce_accept(c, param);
	pthread_mutex_lock(&c->lock);
	c->ext_qpn = 0;
	qp = id->qp ? id->qp : cm_ext_qp(c, param);
	if (c->state != CM_REQ || !c->conn || !qp) {
		pthread_mutex_unlock(&c->lock);
		return cm_err(EINVAL);
	}
	conn = c->conn;
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
	rc = c->tp->accept(conn, &prefs);
	if (rc == 0) {
		cm_arm_closed(c, conn);
		rc = cm_qp_attach(c, qp, conn);
		if (rc)
			c->tp->disconnect(conn);
	}
	pthread_mutex_lock(&c->lock);
	if (rc) {
		c->state = CM_FAILED;
	} else {
		c->conn_owned = false; /* the QP holds it now */
		cm_established_locked(c, c->tp->agreed(conn), NULL);
	}
	pthread_mutex_unlock(&c->lock);
	if (rc)
		return cm_err(-rc);
	if (c->sync)
		return cm_sync_wait(c, RDMA_CM_EVENT_ESTABLISHED);
	return 0;
}

/* ---- reject and disconnect ------------------------------------------------ */

XS_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	struct cm_id *c = cm_of(id);
	struct xs_conn *conn;
	int rc;

	if (!id)
		return cm_err(EINVAL);
	if (c->roce)
		return cm_roce_reject(c, private_data, private_data_len);
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
	rc = c->tp->reject(conn, private_data, private_data_len);
	c->tp->put(conn);
	return rc < 0 ? cm_err(-rc) : 0;
}

/* The active side of an external QP, after CONNECT_RESPONSE: bind the
 * QP the application moved to RTS; no event (librdmacm's sends the RTU,
 * and the passive side has ESTABLISHED already). */
XS_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	struct cm_id *c = cm_of(id);
	struct xs_conn *conn;
	struct ibv_qp *qp;
	int rc;

	if (!id)
		return cm_err(EINVAL);
	if (id->qp)
		return 0; /* the MPA exchange established it (librdmacm: EINVAL) */
	if (c->roce)
		return cm_roce_establish(c);
	pthread_mutex_lock(&c->lock);
	qp = cm_conn_qp(c);
	if (c->state != CM_RESPONSE || !c->conn || !qp) {
		pthread_mutex_unlock(&c->lock);
		return cm_err(EINVAL);
	}
	conn = c->conn;
	c->state = CM_CONNECTING; /* a close meanwhile: closed_early */
	c->closed_early = false;
	pthread_mutex_unlock(&c->lock);

	cm_arm_closed(c, conn);
	rc = cm_qp_attach(c, qp, conn);
	pthread_mutex_lock(&c->lock);
	if (rc) {
		c->state = CM_FAILED; /* conn stays ours: rdma_destroy_id puts it */
	} else {
		c->conn_owned = false; /* the QP holds it now */
		c->state = CM_CONNECTED;
		if (c->closed_early && !c->disc_queued) {
			c->disc_queued = true;
			c->state = CM_DISCONNECTED;
			cm_queue_simple(c, RDMA_CM_EVENT_DISCONNECTED, 0);
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (rc) {
		c->tp->disconnect(conn);
		return cm_err(-rc);
	}
	return 0;
}

XS_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct cm_id *c = cm_of(id);
	struct xs_conn *conn;
	struct ibv_qp *qp;

	if (!id)
		return cm_err(EINVAL);
	if (c->roce)
		return cm_roce_disconnect(c);
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
	qp = cm_conn_qp(c);
	if (!id->qp && (!qp || xs_qp_conn(qp) != conn))
		conn = NULL; /* the external QP is gone, and its connection with it */
	c->state = CM_DISCONNECTED;
	if (!c->disc_queued) {
		c->disc_queued = true;
		cm_queue_simple(c, RDMA_CM_EVENT_DISCONNECTED, 0);
	}
	pthread_mutex_unlock(&c->lock);
	if (conn)
		c->tp->disconnect(conn);
	if (qp)
		xs_qp_flush(qp);
	return 0;
}

/* ---- refused: ECE and multicast ------------------------------------------- */

/* Enhanced Connection Establishment rides IB CM REQ/REP: an MPA exchange
 * has no room for it.  librdmacm's own only keep the values in its id (the
 * iWARP CM drops them), so on siw they work with its checks: the local ECE
 * is taken and goes nowhere, the remote one is all zero.  Carried because
 * librdmacm's reach into its private id (container_of an xsock id: out of
 * bounds). */
XS_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || id->qp || !ece || !ece->vendor_id || ece->comp_mask)
		return cm_err(EINVAL);
	return 0;
}

XS_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || id->qp || !ece)
		return cm_err(EINVAL);
	memset(ece, 0, sizeof(*ece));
	return 0;
}

/* The ECE reject reason has nowhere to go: a plain MPA reject. */
XS_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
			      uint8_t private_data_len)
{
	return rdma_reject(id, private_data, private_data_len);
}

/* Multicast needs UD QPs, which an iWARP device does not have (RDMA_PS_UDP
 * ids already fail with EOPNOTSUPP): refused as over siw, where the kernel
 * answers a join ENOSYS (no IB multicast, no RoCE) and librdmacm a leave of
 * an address never joined EADDRNOTAVAIL.  Carried because librdmacm's own
 * versions reach into its private id, as the ECE calls above. */
XS_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	return cm_err(id && addr ? ENOSYS : EINVAL);
}

XS_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *mc_join_attr,
				     void *context)
{
	return cm_err(id && mc_join_attr ? ENOSYS : EINVAL);
}

XS_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	return cm_err(id && addr ? EADDRNOTAVAIL : EINVAL);
}
