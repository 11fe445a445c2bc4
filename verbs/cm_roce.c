/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* librdmacm's connection calls on xsock_roce0 (XSOCK_TRANSPORT=roce): the
 * IB CM over RoCE v2 (xs_roce_cm.h), as the kernel's rdma_cm drives it for
 * rdma_rxe (drivers/infiniband/core/cma.c, cm.c):
 *   rdma_connect: REQ (rdma_cm's 36-octet header, then the caller's 56
 *     octets at most); on the REP the QP goes to RTR and RTS with the
 *     peer's QPN and PSN, the RTU goes out and ESTABLISHED is queued
 *   rdma_listen: REQs of service 0x0000000001060000 | port (RDMA_PS_TCP)
 *     become CONNECT_REQUEST on a new id; rdma_accept moves its QP to RTR
 *     and RTS and sends the REP; ESTABLISHED when the RTU comes
 *   rdma_reject: REJ "consumer defined" (28), as librdmacm over IB
 *   rdma_disconnect: DREQ; a peer's DREQ: DREP, DISCONNECTED
 * Event statuses, as the kernel's rdma_cm gives them over IB:
 *   REJECTED: the REJ's reason (positive: 28 consumer defined, 8 invalid
 *     service ID when nobody listens, 10 stale connection), its private data
 *   UNREACHABLE -ETIMEDOUT: the REQ (or the REP) went unanswered
 *   DISCONNECTED 0 (once), TIMEWAIT_EXIT 0 after the time-wait.
 * External QPs (the application's, named by conn_param.qp_num, moved by it
 * with rdma_init_qp_attr, which gives the agreed path): the passive side's
 * is in RTS before rdma_accept sends the REP; the active side gets
 * CONNECT_RESPONSE on the REP and rdma_establish sends the RTU, as
 * librdmacm over the kernel's CM.
 * IRD/ORD in events: as on iWARP (cm_conn.c).  Locks: c->lock is never held
 * while calling the MAD engine or ibv_modify_qp; engine callbacks take it. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "roce/roce_wire.h"
#include "util/xs_sockaddr.h"
#include "verbs/cm_priv.h"
#include "verbs/xs_roce_cm.h"
#include "verbs/xs_roce_dev.h"
#include "verbs/xs_rand.h"
#include "util/xs_errno.h"

#define CM_ROCE_CONN_PDATA (ROCE_CM_REQ_PDATA - ROCE_CMA_HDR_LEN) /* 56 */
#define CM_ROCE_ACK_TIMEOUT 14 /* our QPs' local ACK timeout: 67 ms */
#define CM_ROCE_MIN_RNR_TIMER 12 /* 0.64 ms (rdma_cm's 0 would be 655 ms) */

/* What both ends agreed, kept on the id until its QP is up. */
struct cm_roce_path {
	struct sockaddr_storage local, peer; /* IP addresses */
	uint32_t remote_qpn;
	/* The starting PSN of a REQ or REP is the PSN its sender expects to
	 * receive first: the peer sends from it (cm.c:1574,2111,2319,2564) */
	uint32_t remote_psn, local_psn;
	uint8_t mtu; /* IB enum */
	uint32_t flow_label;
	uint8_t retry_count, rnr_retry; /* our QP's: from the peer's message */
	uint8_t ird, ord;
	uint8_t timeout; /* our QP's local ACK timeout */
};

/* The id's RDMA_OPTION_ID_ACK_TIMEOUT, else ours (c->lock held). */
static uint8_t ack_timeout(const struct cm_id *c)
{
	return c->ack_timeout >= 0 ? (uint8_t)c->ack_timeout : CM_ROCE_ACK_TIMEOUT;
}

static uint8_t u8cap(unsigned v)
{
	return v > 255 ? 255 : (uint8_t)v;
}

static uint8_t depth(uint8_t v, unsigned max)
{
	return v == 0xff || v > max ? (uint8_t)max : v;
}

static bool same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		       &((const struct sockaddr_in6 *)b)->sin6_addr, 16);
}

/* The GID index of a local address; -1 if it is not one of ours. */
static int gid_index(const struct sockaddr_storage *ss)
{
	struct sockaddr_storage g;
	unsigned i;

	for (i = 0; i < 256; i++) {
		if (xs_roce_gid_addr(i, &g) < 0)
			return -1;
		if (same_ip(&g, ss))
			return (int)i;
	}
	return -1;
}

static void gid_of(const struct sockaddr_storage *ss, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (ss->ss_family == AF_INET) {
		gid->raw[10] = gid->raw[11] = 0xff;
		memcpy(gid->raw + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	} else {
		memcpy(gid->raw, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	}
}

/* The IB MTU of the path to peer: rxe's rule on the route's MTU. */
static uint8_t path_mtu(const struct sockaddr_storage *peer)
{
	int fd = socket(peer->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int mtu = 1500;
	socklen_t len = sizeof(mtu);
	struct sockaddr_storage to = *peer;

	if (fd >= 0) {
		xs_sa_set_port((struct sockaddr *)&to, htons(ROCE_UDP_PORT));
		if (connect(fd, (struct sockaddr *)&to, cm_sa_len((struct sockaddr *)&to)) == 0)
			getsockopt(fd, peer->ss_family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6,
				   peer->ss_family == AF_INET ? IP_MTU : IPV6_MTU, &mtu, &len);
		close(fd);
	}
	return (uint8_t)xs_roce_mtu_from_netdev((unsigned)mtu);
}

static uint32_t rand24(void)
{
	uint32_t v = 0;

	(void)xs_rand_bytes(&v, sizeof(v));
	return v & 0xffffff;
}

/* The attributes of the move to `to` (INIT, RTR, RTS) on the agreed path,
 * into a and *mask (no CM lock held).  0 or errno. */
static int path_attr(const struct cm_roce_path *p, enum ibv_qp_state to, struct ibv_qp_attr *a,
		     int *mask)
{
	int idx;

	memset(a, 0, sizeof(*a));
	a->qp_state = to;
	switch (to) {
	case IBV_QPS_INIT:
		a->port_num = 1;
		a->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		return 0;
	case IBV_QPS_RTR:
		idx = gid_index(&p->local);
		if (idx < 0)
			return EADDRNOTAVAIL;
		a->path_mtu = (enum ibv_mtu)p->mtu;
		a->dest_qp_num = p->remote_qpn;
		a->rq_psn = p->local_psn;
		a->max_dest_rd_atomic = p->ird;
		a->min_rnr_timer = CM_ROCE_MIN_RNR_TIMER;
		a->ah_attr.is_global = 1;
		a->ah_attr.port_num = 1;
		a->ah_attr.grh.sgid_index = (uint8_t)idx;
		a->ah_attr.grh.hop_limit = 64;
		a->ah_attr.grh.flow_label = p->flow_label;
		gid_of(&p->peer, &a->ah_attr.grh.dgid);
		*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		return 0;
	case IBV_QPS_RTS:
		a->sq_psn = p->remote_psn;
		a->timeout = p->timeout;
		a->retry_cnt = p->retry_count;
		a->rnr_retry = p->rnr_retry;
		a->max_rd_atomic = p->ord;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		return 0;
	default:
		return EINVAL;
	}
}

/* INIT -> RTR -> RTS on the agreed path (no CM lock held).  0 or errno. */
static int qp_up(struct ibv_qp *qp, const struct cm_roce_path *p)
{
	static const enum ibv_qp_state steps[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS };
	struct ibv_qp_attr a;
	int mask, rc;

	if (gid_index(&p->local) < 0)
		return EADDRNOTAVAIL;
	for (unsigned i = qp->state == IBV_QPS_RESET ? 0 : 1; i < 3; i++) {
		rc = path_attr(p, steps[i], &a, &mask);
		if (!rc)
			rc = ibv_modify_qp(qp, &a, mask);
		if (rc)
			return rc;
	}
	return 0;
}

int cm_roce_init_qp_attr(struct cm_id *c, struct ibv_qp_attr *a, int *mask)
{
	struct cm_roce_path p;
	enum ibv_qp_state to = a->qp_state;
	int rc;

	pthread_mutex_lock(&c->lock);
	if (!c->rpath) { /* no REQ or REP yet: no path to give */
		pthread_mutex_unlock(&c->lock);
		return to == IBV_QPS_INIT ? 1 : cm_err(EINVAL);
	}
	p = *c->rpath;
	p.timeout = ack_timeout(c);
	pthread_mutex_unlock(&c->lock);
	rc = path_attr(&p, to, a, mask);
	return rc ? cm_err(rc) : 0;
}

/* ---- events from the MAD engine (engine thread) ----------------------------- */

static void queue_established(struct cm_id *c, uint8_t rr, uint8_t id, const uint8_t *pdata,
			      size_t len)
{
	struct cm_event *e = cm_ev_new(c, RDMA_CM_EVENT_ESTABLISHED, 0);

	if (e) {
		e->ev.param.conn.responder_resources = rr;
		e->ev.param.conn.initiator_depth = id;
		if (len)
			cm_ev_pdata(e, pdata, len);
	}
	c->state = CM_CONNECTED;
	cm_queue(c, e);
}

/* The connection ended under c (c->lock held): DISCONNECTED once. */
static void ended_locked(struct cm_id *c)
{
	if (c->state == CM_CONNECTED && !c->disc_queued) {
		c->disc_queued = true;
		cm_queue_simple(c, RDMA_CM_EVENT_DISCONNECTED, 0);
	}
	if (c->state == CM_CONNECTED)
		c->state = CM_DISCONNECTED;
}

static void on_rep(struct cm_id *c, const struct xs_rcm_event *ev)
{
	const struct roce_cm_rep *rep = ev->rep;
	struct ibv_qp *qp;
	int rc = EINVAL;

	pthread_mutex_lock(&c->lock);
	qp = c->id.qp;
	if (c->destroyed || c->state != CM_CONNECTING || (!qp && !c->ext_qpn) || !c->rpath) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	c->rpath->remote_qpn = rep->local_qpn;
	c->rpath->remote_psn = rep->starting_psn;
	c->rpath->rnr_retry = rep->rnr_retry_count;
	/* as cm.c: the peer's responder resources bound our ORD */
	if (rep->responder_resources < c->rpath->ord)
		c->rpath->ord = rep->responder_resources;
	c->rpath->timeout = ack_timeout(c);
	if (!qp) {
		/* an external QP: the application moves it, rdma_establish
		 * sends the RTU */
		struct cm_event *e = cm_ev_new(c, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);

		if (e) {
			e->ev.param.conn.responder_resources = rep->initiator_depth;
			e->ev.param.conn.initiator_depth = rep->responder_resources;
			e->ev.param.conn.qp_num = c->ext_qpn;
			cm_ev_pdata(e, rep->pdata, sizeof(rep->pdata));
		}
		c->state = CM_RESPONSE;
		cm_queue(c, e);
		pthread_mutex_unlock(&c->lock);
		return;
	}
	pthread_mutex_unlock(&c->lock);
	rc = qp_up(qp, c->rpath);
	pthread_mutex_lock(&c->lock);
	if (rc) {
		xs_log("cm: RoCE QP %u not brought up on the REP: %s", qp->qp_num, xs_strerror(rc));
		xs_rcm_reject(c->rcm, ROCE_CM_REJ_NO_QP, NULL, 0);
		c->state = CM_FAILED;
		cm_queue_simple(c, RDMA_CM_EVENT_CONNECT_ERROR, -rc);
	} else if (!c->destroyed) {
		xs_rcm_rtu(c->rcm);
		queue_established(c, rep->initiator_depth, rep->responder_resources, rep->pdata,
				  sizeof(rep->pdata));
	}
	pthread_mutex_unlock(&c->lock);
}

static void on_event(void *ctx, const struct xs_rcm_event *ev)
{
	struct cm_id *c = ctx;
	struct cm_event *e;

	/* The REP (or a REJ) may come before rdma_connect has stored what
	 * xs_rcm_connect returned (the engine thread runs as soon as the REQ
	 * is out): the event names it.  Between two xsock processes on one
	 * host, redis-benchmark's 50 connections met it (UBSan: xs_rcm_rtu on
	 * NULL). */
	pthread_mutex_lock(&c->lock);
	if (!c->rcm && !c->destroyed)
		c->rcm = ev->rcm;
	pthread_mutex_unlock(&c->lock);
	if (ev->type == XS_RCM_EV_REP) {
		on_rep(c, ev);
		return;
	}
	/* A DREQ leaves the QP as it is, as the kernel's CM does: what the
	 * peer ACKs may still come (its data socket is not ordered with the
	 * CM's), and rdma_disconnect moves the QP to ERROR. */
	pthread_mutex_lock(&c->lock);
	if (c->destroyed) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	switch (ev->type) {
	case XS_RCM_EV_RTU:
		if (c->state == CM_ACCEPTING)
			queue_established(c, c->rpath ? c->rpath->ird : 0,
					  c->rpath ? c->rpath->ord : 0, NULL, 0);
		break;
	case XS_RCM_EV_REJ:
		if (c->state == CM_CONNECTED) {
			ended_locked(c);
			break;
		}
		e = cm_ev_new(c, RDMA_CM_EVENT_REJECTED, ev->reason);
		if (e)
			cm_ev_pdata(e, ev->pdata, ev->pdata_len);
		c->state = CM_FAILED;
		cm_queue(c, e);
		break;
	case XS_RCM_EV_TIMEOUT:
		c->state = CM_FAILED;
		cm_queue_simple(c, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
		break;
	case XS_RCM_EV_DREQ:
		if (c->state == CM_ACCEPTING) /* the DREQ came before the RTU */
			c->state = CM_FAILED;
		ended_locked(c);
		break;
	case XS_RCM_EV_TIMEWAIT_EXIT:
		cm_queue_simple(c, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&c->lock);
}

/* A REQ on a listener: a new id and CONNECT_REQUEST (engine thread). */
static void on_listen_event(void *ctx, const struct xs_rcm_event *ev)
{
	struct cm_id *l = ctx;
	const struct roce_cm_req *q = ev->req;
	struct roce_cma_hdr h;
	struct cm_id *c = NULL;
	struct cm_event *e = NULL;
	struct cm_roce_path *p = NULL;
	struct sockaddr_storage src, dst;
	uint16_t reason = ROCE_CM_REJ_NO_RESOURCES;
	uint8_t mtu;

	if (ev->type != XS_RCM_EV_REQ)
		return;
	if (roce_cma_hdr_decode(q->pdata, &h) < 0 ||
	    (h.ip_version == 4) != (ev->local->ss_family == AF_INET)) {
		xs_log("cm: RoCE REQ without rdma_cm's header (IP version %u): REJ", h.ip_version);
		xs_rcm_reject(ev->rcm, ROCE_CM_REJ_CONSUMER_DEFINED, NULL, 0);
		xs_rcm_put(ev->rcm);
		return;
	}
	pthread_mutex_lock(&l->lock);
	if (l->destroyed || l->state != CM_LISTEN) {
		reason = ROCE_CM_REJ_INVALID_SERVICE_ID;
		goto refuse;
	}
	c = cm_alloc(l->sync ? NULL : l->chan, false, l->id.context, l->id.ps);
	p = calloc(1, sizeof(*p));
	if (!c || !p)
		goto refuse;
	e = cm_ev_new(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	if (!e)
		goto refuse;
	c->id.verbs = l->id.verbs;
	c->id.port_num = 1;
	c->id.pd = cm_default_pd(c->id.verbs);
	c->tp = l->tp;
	c->roce = true;
	c->rcm = ev->rcm;
	c->rpath = p;
	c->state = CM_REQ;
	p->local = *ev->local;
	p->peer = *ev->peer;
	p->remote_qpn = q->local_qpn;
	p->remote_psn = q->starting_psn;
	p->mtu = q->path_mtu;
	p->flow_label = q->primary.flow_label;
	p->retry_count = q->retry_count;
	p->rnr_retry = q->rnr_retry_count;
	c->req_ird = q->responder_resources;
	c->req_ord = q->initiator_depth;
	/* what rdma_init_qp_attr gives an external QP before rdma_accept:
	 * our PSN, the request's numbers, the path's MTU (accept may change
	 * all but the PSN for a QP of its own moving) */
	p->local_psn = rand24();
	p->ird = u8cap(c->req_ord > XS_MAX_IRD ? XS_MAX_IRD : c->req_ord);
	p->ord = u8cap(c->req_ird > XS_MAX_ORD ? XS_MAX_ORD : c->req_ird);
	mtu = path_mtu(&p->peer);
	if (mtu < p->mtu)
		p->mtu = mtu;
	src = *ev->local;
	xs_sa_set_port((struct sockaddr *)&src,
		       xs_sa_port((struct sockaddr *)&l->id.route.addr.src_storage));
	dst = *ev->peer;
	xs_sa_set_port((struct sockaddr *)&dst, htons(h.src_port));
	c->id.route.addr.src_storage = src;
	c->id.route.addr.dst_storage = dst;
	e->ev.listen_id = &l->id;
	/* as the acceptor should use them (cm.c: cm_format_req_event) */
	e->ev.param.conn.responder_resources = q->initiator_depth;
	e->ev.param.conn.initiator_depth = q->responder_resources;
	e->ev.param.conn.retry_count = q->retry_count;
	e->ev.param.conn.rnr_retry_count = q->rnr_retry_count;
	cm_ev_pdata(e, q->pdata + ROCE_CMA_HDR_LEN, CM_ROCE_CONN_PDATA);
	cm_chan_push(l->chan, e);
	pthread_mutex_unlock(&l->lock);
	xs_rcm_set_cb(ev->rcm, on_event, c);
	return;
refuse:
	pthread_mutex_unlock(&l->lock);
	free(e);
	free(p);
	if (c) {
		c->rcm = NULL;
		c->rpath = NULL;
		if (c->sync)
			cm_chan_free(c->chan);
		cm_put(c);
	}
	xs_rcm_reject(ev->rcm, reason, NULL, 0);
	xs_rcm_put(ev->rcm);
}

/* ---- the calls (application thread) --------------------------------------- */

int cm_roce_connect(struct cm_id *c, const struct rdma_conn_param *param)
{
	struct rdma_cm_id *id = &c->id;
	struct xs_rcm_req_args *a;
	struct cm_roce_path *p;
	struct ibv_qp *qp;
	struct roce_cma_hdr h;
	struct xs_rcm *r;
	uint16_t sport, dport;
	uint16_t ird, ord;
	int rc;

	if (param && param->private_data_len > CM_ROCE_CONN_PDATA)
		return cm_err(EINVAL);
	a = calloc(1, sizeof(*a));
	p = calloc(1, sizeof(*p));
	if (!a || !p) {
		free(a);
		free(p);
		return cm_err(ENOMEM);
	}
	pthread_mutex_lock(&c->lock);
	c->ext_qpn = 0;
	qp = id->qp;
	if (!qp && param && param->qp_num && (qp = xs_qp_lookup(id->verbs, param->qp_num)))
		c->ext_qpn = param->qp_num; /* an external QP */
	if ((c->state != CM_ROUTE && c->state != CM_ADDR) || !qp || c->rcm) {
		pthread_mutex_unlock(&c->lock);
		free(a);
		free(p);
		return cm_err(EINVAL);
	}
	p->local = id->route.addr.src_storage;
	p->peer = id->route.addr.dst_storage;
	if (cm_sa_is_any((struct sockaddr *)&p->local) || gid_index(&p->local) < 0) {
		pthread_mutex_unlock(&c->lock);
		xs_log("cm: RoCE connect: the source address is not a GID of xsock_roce0");
		free(a);
		free(p);
		return cm_err(EADDRNOTAVAIL);
	}
	sport = ntohs(xs_sa_port((struct sockaddr *)&p->local));
	if (!sport) {
		sport = (uint16_t)(32768 + rand24() % 28000);
		xs_sa_set_port((struct sockaddr *)&id->route.addr.src_storage, htons(sport));
	}
	dport = ntohs(xs_sa_port((struct sockaddr *)&p->peer));
	xs_qp_read_limits(qp, &ird, &ord);
	if (param) {
		ird = depth(param->responder_resources, XS_MAX_IRD);
		ord = depth(param->initiator_depth, XS_MAX_ORD);
	}
	p->ird = u8cap(ird);
	p->ord = u8cap(ord);
	p->local_psn = rand24();
	p->mtu = path_mtu(&p->peer);
	p->flow_label = roce_cm_flow_label(sport, dport);
	p->retry_count = param ? (param->retry_count > 7 ? 7 : param->retry_count) : 7;
	a->local = p->local;
	a->peer = p->peer;
	a->service_id = roce_cm_service_id(dport);
	a->qpn = qp->qp_num;
	a->psn = p->local_psn;
	a->responder_resources = p->ird;
	a->initiator_depth = p->ord;
	a->retry_count = p->retry_count;
	a->rnr_retry_count = param ? (param->rnr_retry_count > 7 ? 7 : param->rnr_retry_count) : 7;
	a->mtu = p->mtu;
	a->flow_label = p->flow_label;
	a->ack_timeout = CM_ROCE_ACK_TIMEOUT;
	a->no_redial = c->no_redial;
	memset(&h, 0, sizeof(h));
	h.version = ROCE_CMA_VERSION;
	h.ip_version = p->local.ss_family == AF_INET ? 4 : 6;
	h.src_port = sport;
	if (p->local.ss_family == AF_INET) {
		memcpy(h.src_addr + 12, &((struct sockaddr_in *)&p->local)->sin_addr, 4);
		memcpy(h.dst_addr + 12, &((struct sockaddr_in *)&p->peer)->sin_addr, 4);
	} else {
		memcpy(h.src_addr, &((struct sockaddr_in6 *)&p->local)->sin6_addr, 16);
		memcpy(h.dst_addr, &((struct sockaddr_in6 *)&p->peer)->sin6_addr, 16);
	}
	roce_cma_hdr_encode(&h, a->pdata);
	if (param && param->private_data_len)
		memcpy(a->pdata + ROCE_CMA_HDR_LEN, param->private_data, param->private_data_len);
	free(c->rpath);
	c->rpath = p;
	c->state = CM_CONNECTING;
	c->closed_early = false;
	cm_port_release(c);
	pthread_mutex_unlock(&c->lock);

	rc = xs_rcm_connect(a, on_event, c, &r);
	free(a);
	pthread_mutex_lock(&c->lock);
	if (rc) {
		c->state = CM_ROUTE;
		pthread_mutex_unlock(&c->lock);
		return cm_err(-rc);
	}
	c->rcm = r;
	pthread_mutex_unlock(&c->lock);
	if (c->sync)
		return cm_sync_wait(c, c->ext_qpn ? RDMA_CM_EVENT_CONNECT_RESPONSE
						  : RDMA_CM_EVENT_ESTABLISHED);
	return 0;
}

int cm_roce_establish(struct cm_id *c)
{
	struct xs_rcm *r;

	pthread_mutex_lock(&c->lock);
	r = c->rcm;
	if (c->state != CM_RESPONSE || !r) {
		pthread_mutex_unlock(&c->lock);
		return cm_err(EINVAL);
	}
	/* ESTABLISHED comes to no one here: librdmacm's active side has
	 * its CONNECT_RESPONSE; the passive side's comes with the RTU */
	c->state = CM_CONNECTED;
	pthread_mutex_unlock(&c->lock);
	xs_rcm_rtu(r);
	return 0;
}

static bool bindv6only;
static pthread_once_t bindv6only_once = PTHREAD_ONCE_INIT;

static void bindv6only_read(void)
{
	FILE *f = fopen("/proc/sys/net/ipv6/bindv6only", "re");
	int v = 0;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = 0;
		fclose(f);
	}
	bindv6only = v != 0;
}

/* An AF_INET6 id takes IPv4 too unless AFONLY is set, and an id that never
 * set it has the kernel's default, net.ipv6.bindv6only (cma.c:
 * rdma_bind_addr). */
static bool cm_roce_afonly(const struct cm_id *c)
{
	if (c->afonly >= 0)
		return c->afonly;
	pthread_once(&bindv6only_once, bindv6only_read);
	return bindv6only;
}

int cm_roce_listen(struct cm_id *c)
{
	struct sockaddr_storage addr;
	struct xs_rcm_listener *l;
	uint16_t port;
	int rc;

	pthread_mutex_lock(&c->lock);
	if (c->state != CM_BOUND) {
		pthread_mutex_unlock(&c->lock);
		return cm_err(EINVAL);
	}
	addr = c->id.route.addr.src_storage;
	port = ntohs(xs_sa_port((struct sockaddr *)&addr));
	if (!port) { /* as the kernel's rdma_cm: a port of its own space */
		port = (uint16_t)(32768 + rand24() % 28000);
		xs_sa_set_port((struct sockaddr *)&c->id.route.addr.src_storage, htons(port));
	}
	c->state = CM_LISTEN; /* before the engine: REQs may come at once */
	cm_port_release(c);
	pthread_mutex_unlock(&c->lock);
	rc = xs_rcm_listen((struct sockaddr *)&addr, cm_roce_afonly(c), roce_cm_service_id(port),
			   on_listen_event, c, &l);
	pthread_mutex_lock(&c->lock);
	if (rc) {
		c->state = CM_BOUND;
		pthread_mutex_unlock(&c->lock);
		if (rc == -EADDRINUSE)
			xs_log("cm: RoCE listen: port %u has a listener already", port);
		return cm_err(-rc);
	}
	c->rlistener = l;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int cm_roce_accept(struct cm_id *c, const struct rdma_conn_param *param)
{
	struct xs_rcm_rep_args a;
	struct cm_roce_path *p;
	struct ibv_qp *qp;
	uint16_t ird, ord;
	uint8_t mtu;
	int rc;

	if (param && param->private_data_len > ROCE_CM_REP_PDATA)
		return cm_err(EINVAL);
	pthread_mutex_lock(&c->lock);
	p = c->rpath;
	qp = c->id.qp;
	c->ext_qpn = 0;
	if (!qp && param && param->qp_num && (qp = xs_qp_lookup(c->id.verbs, param->qp_num)))
		c->ext_qpn = param->qp_num; /* the application moved it already */
	if (c->state != CM_REQ || !c->rcm || !qp || !p) {
		pthread_mutex_unlock(&c->lock);
		return cm_err(EINVAL);
	}
	if (param) {
		ird = depth(param->responder_resources, XS_MAX_IRD);
		ord = depth(param->initiator_depth, XS_MAX_ORD);
	} else { /* rdma_accept(id, NULL): the request's numbers */
		ird = c->req_ord > XS_MAX_IRD ? XS_MAX_IRD : c->req_ord;
		ord = c->req_ird > XS_MAX_ORD ? XS_MAX_ORD : c->req_ird;
	}
	/* our ORD no more than the requester's IRD */
	if (ord > c->req_ird)
		ord = c->req_ird;
	if (c->ext_qpn) {
		uint16_t qird, qord;

		/* the REP promises no more than the QP was given */
		xs_qp_read_limits(qp, &qird, &qord);
		if (ird > qird)
			ird = qird;
		if (ord > qord)
			ord = qord;
	}
	p->ird = u8cap(ird);
	p->ord = u8cap(ord);
	mtu = path_mtu(&p->peer);
	if (mtu < p->mtu)
		p->mtu = mtu;
	p->timeout = ack_timeout(c);
	c->state = CM_ACCEPTING;
	pthread_mutex_unlock(&c->lock);

	rc = c->ext_qpn ? 0 : qp_up(qp, p);
	if (rc) {
		xs_log("cm: RoCE accept: QP %u not brought up: %s", qp->qp_num, xs_strerror(rc));
		xs_rcm_reject(c->rcm, ROCE_CM_REJ_NO_QP, NULL, 0);
		pthread_mutex_lock(&c->lock);
		c->state = CM_FAILED;
		pthread_mutex_unlock(&c->lock);
		return cm_err(rc);
	}
	memset(&a, 0, sizeof(a));
	a.qpn = qp->qp_num;
	a.psn = p->local_psn;
	a.responder_resources = p->ird;
	a.initiator_depth = p->ord;
	a.rnr_retry_count = param ? (param->rnr_retry_count > 7 ? 7 : param->rnr_retry_count) : 7;
	if (param && param->private_data_len) {
		a.pdata = param->private_data;
		a.pdata_len = param->private_data_len;
	}
	rc = xs_rcm_accept(c->rcm, &a);
	if (rc) {
		pthread_mutex_lock(&c->lock);
		c->state = CM_FAILED;
		pthread_mutex_unlock(&c->lock);
		return cm_err(-rc);
	}
	if (c->sync)
		return cm_sync_wait(c, RDMA_CM_EVENT_ESTABLISHED);
	return 0;
}

int cm_roce_reject(struct cm_id *c, const void *pdata, uint8_t len)
{
	int rc;

	if (len > ROCE_CM_REJ_PDATA || (len && !pdata))
		return cm_err(EINVAL);
	pthread_mutex_lock(&c->lock);
	if (c->state != CM_REQ || !c->rcm) {
		pthread_mutex_unlock(&c->lock);
		return cm_err(EINVAL);
	}
	c->state = CM_FAILED;
	pthread_mutex_unlock(&c->lock);
	rc = xs_rcm_reject(c->rcm, ROCE_CM_REJ_CONSUMER_DEFINED, pdata, len);
	return rc ? cm_err(-rc) : 0;
}

int cm_roce_disconnect(struct cm_id *c)
{
	struct ibv_qp *qp;

	pthread_mutex_lock(&c->lock);
	qp = cm_conn_qp(c);
	if (c->state == CM_DISCONNECTED) {
		/* the peer's DREQ came first (answered): the QP still goes to
		 * ERROR, as librdmacm's rdma_disconnect always moves it */
		pthread_mutex_unlock(&c->lock);
		if (qp)
			xs_qp_flush(qp);
		return 0;
	}
	if (c->state != CM_CONNECTED && c->state != CM_ACCEPTING) {
		pthread_mutex_unlock(&c->lock);
		return cm_err(EINVAL);
	}
	c->state = CM_CONNECTED; /* for ended_locked */
	ended_locked(c);
	pthread_mutex_unlock(&c->lock);
	if (c->rcm)
		xs_rcm_disconnect(c->rcm);
	if (qp)
		xs_qp_flush(qp);
	return 0;
}

void cm_roce_destroy(struct cm_id *c)
{
	struct xs_rcm_listener *l;
	struct xs_rcm *r;

	pthread_mutex_lock(&c->lock);
	l = c->rlistener;
	r = c->rcm;
	c->rlistener = NULL;
	c->rcm = NULL;
	pthread_mutex_unlock(&c->lock);
	if (l)
		xs_rcm_unlisten(l); /* no REQ upcall after this */
	if (r)
		xs_rcm_put(r); /* no event upcall after this */
	free(c->rpath);
	c->rpath = NULL;
}
