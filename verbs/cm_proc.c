/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The CM for the process-level code (xs_internal.h): an id for a
 * connection adopted across execve (xs_cm_adopt, xs_cm_adopt_start; called
 * by xs_handover.c), and an id's connection or listener (xs_cm_conn,
 * xs_cm_listener; for xs_handover.c and xs_fork.c), and libxsock's
 * xsock_priv_rx_wait, so that the engine takes a connection, never an id.
 * Application threads; each takes the id's lock. */
#include "config.h"

#include <errno.h>

#include "verbs/cm_priv.h"

/* ---- exec hand-over (xs_handover.c) --------------------------------------- */

struct rdma_cm_id *xs_cm_adopt(struct rdma_event_channel *ch, void *context, struct xs_conn *conn)
{
	struct sockaddr_storage local, peer;
	struct cm_id *c = cm_alloc(ch ? cm_chan_of(ch) : NULL, false, context, RDMA_PS_TCP);

	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->id.verbs = xs_default_context();
	c->id.port_num = 1;
	c->id.pd = cm_default_pd(c->id.verbs);
	c->conn = conn;
	c->conn_owned = true;
	c->state = CM_REQ; /* until the QP attaches (xs_cm_adopt_start) */
	if (c->tp->addrs(conn, &local, &peer) == 0) {
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
	rc = cm_qp_attach(c, id->qp, conn);
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

/* ---- the id's connection and listener ------------------------------------- */

struct xs_conn *xs_cm_conn(struct rdma_cm_id *id)
{
	struct cm_id *c = cm_of(id);
	struct xs_conn *conn;

	/* a RoCE id's connection is the RoCE engine's, not an xs_conn of
	 * xs_internal.h: the TCP, fork and hand-over calls have none */
	if (c->roce)
		return NULL;
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

struct xs_rcm_listener *xs_cm_rlistener(struct rdma_cm_id *id)
{
	struct cm_id *c = cm_of(id);
	struct xs_rcm_listener *l;

	pthread_mutex_lock(&c->lock);
	l = c->roce ? c->rlistener : NULL;
	pthread_mutex_unlock(&c->lock);
	return l;
}

/* Private to libxsock (xs_priv_abi.h): the id's connection's receive wait,
 * kept here so that the engine takes a connection, never a CM id. */
XS_EXPORT int xsock_priv_rx_wait(struct rdma_cm_id *id, int on)
{
	struct xs_conn *c = id ? xs_cm_conn(id) : NULL;

	return c ? xs_conn_rx_wait(c, on) : -1;
}
