/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The QP and SRQ on a CM id: rdma_create_qp(_ex) (CQs and a PD of the CM's
 * making when the caller gives none, as librdmacm), rdma_destroy_qp,
 * rdma_init_qp_attr, rdma_create_srq(_ex), rdma_destroy_srq.
 *
 * SRQs (rdma_create_srq*): BASIC only; id->srq feeds the id's QP when its
 * attributes name none, and rdma_destroy_ep destroys it, as librdmacm.
 * Application threads; the id's lock guards its handles; cm_pd_lock (the
 * default PD) is a leaf. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include <rdma/rdma_verbs.h> /* rdma_create_srq* */

#include "verbs/cm_priv.h"

/* ---- QPs ------------------------------------------------------------------ */

/* One PD per device for ids whose QP is created without one, set on the
 * id as soon as it has a device (librdmacm's id->pd: pyverbs' CMID.pd is
 * it, and an external QP is made on it); never freed.  A process has at
 * most one context per device (xs_default_context). */
#define CM_MAX_PDS 4
static struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
} cm_pds[CM_MAX_PDS];
static pthread_mutex_t cm_pd_lock = PTHREAD_MUTEX_INITIALIZER;

struct ibv_pd *cm_default_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = NULL;
	unsigned i;

	if (!ctx)
		return NULL;
	pthread_mutex_lock(&cm_pd_lock);
	for (i = 0; i < CM_MAX_PDS && cm_pds[i].ctx; i++)
		if (cm_pds[i].ctx == ctx)
			break;
	if (i < CM_MAX_PDS) {
		if (!cm_pds[i].ctx && (cm_pds[i].pd = ibv_alloc_pd(ctx)) != NULL)
			cm_pds[i].ctx = ctx;
		pd = cm_pds[i].pd;
	} else {
		errno = ENOMEM;
	}
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
	int rc, to;

	if (!id || !attr || !id->verbs)
		return cm_err(EINVAL);
	if (id->qp)
		return cm_err(EEXIST);
	if (attr->qp_type != IBV_QPT_RC)
		return cm_err(EOPNOTSUPP);
	a = *attr;
	if (!(a.comp_mask & IBV_QP_INIT_ATTR_PD) || !a.pd) {
		a.pd = id->pd ? id->pd : cm_default_pd(id->verbs);
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
	pthread_mutex_lock(&c->lock);
	to = c->ack_timeout;
	pthread_mutex_unlock(&c->lock);
	if (to >= 0) { /* rdma_set_option before the QP */
		struct ibv_qp_attr ta = { .timeout = (uint8_t)to };

		ibv_modify_qp(qp, &ta, IBV_QP_TIMEOUT);
	}
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
		c->tp->rx_lock(conn);
		c->tp->set_closed_cb(conn, NULL, NULL);
		c->tp->rx_unlock(conn);
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
	struct cm_id *c = cm_of(id);
	enum ibv_qp_state want;

	if (!id || !qp_attr || !qp_attr_mask)
		return cm_err(EINVAL);
	/* qp_state is the input: the state the caller is moving to.  iWARP
	 * QPs need only the access rights (as iw_cm reports); the CM moves
	 * them to RTS itself. */
	want = qp_attr->qp_state;
	/* over the IB CM the path the REQ/REP agreed (an external QP's
	 * moves); rdma_create_qp asks INIT before there is one */
	if (c->roce) {
		int rc = cm_roce_init_qp_attr(c, qp_attr, qp_attr_mask);

		if (rc <= 0)
			return rc;
		qp_attr->qp_state = want;
	}
	memset(qp_attr, 0, sizeof(*qp_attr));
	qp_attr->qp_state = want;
	switch (want) {
	case IBV_QPS_INIT:
	case IBV_QPS_RTR:
		/* and Atomics, which our iWARP carries (RFC 7306) and the QP
		 * refuses without this right once its flags are set */
		qp_attr->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		*qp_attr_mask = IBV_QP_STATE | IBV_QP_ACCESS_FLAGS;
		return 0;
	case IBV_QPS_RTS:
		*qp_attr_mask = IBV_QP_STATE;
		pthread_mutex_lock(&c->lock);
		if (c->ack_timeout >= 0) { /* as the kernel's CM, once set */
			qp_attr->timeout = (uint8_t)c->ack_timeout;
			*qp_attr_mask |= IBV_QP_TIMEOUT;
		}
		pthread_mutex_unlock(&c->lock);
		return 0;
	default:
		return cm_err(EINVAL);
	}
}

/* ---- shared receive queues ------------------------------------------------ */

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
