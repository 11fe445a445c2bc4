/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* RC queue pairs: create/destroy, the state machine, query, and the QP's
 * side of the CM (binding to a connection).  The send and receive paths
 * are verbs_qp_tx.c and verbs_qp_rx.c; struct xs_qp and the lock order
 * are in verbs_qp_priv.h. */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "roced/roced_wire.h"
#include "verbs/verbs_qp_priv.h"
#include "verbs/xs_roce.h"
#include "verbs/xs_roce_dev.h"
#include "util/xs_errno.h"

static uint32_t xs_qpn_next;
static pid_t xs_qpn_pid;
static pthread_mutex_t xs_qpn_mu = PTHREAD_MUTEX_INITIALIZER;

/* QPNs start at a point hashed from the PID (again in a fork child):
 * RoCE peers on one host address QPs by number (and rxe derives UDP ports
 * from it), so two processes should not hand out the same ones.  0 and 1
 * are never used (QP 1 is the GSI, where IB CM MADs go). */
static uint32_t qpn_alloc(void)
{
	pid_t pid = getpid();
	uint32_t n;

	pthread_mutex_lock(&xs_qpn_mu);
	if (xs_qpn_pid != pid) {
		xs_qpn_pid = pid;
		xs_qpn_next = (((uint32_t)pid * 2654435761u) >> 8) & 0xfff000;
	}
	pthread_mutex_unlock(&xs_qpn_mu);
	do
		n = __atomic_fetch_add(&xs_qpn_next, 1, __ATOMIC_RELAXED) & 0xffffff;
	while (n < 2);
	return n;
}
static int xs_nqp;

struct xs_conn *xs_qp_conn(struct ibv_qp *qp)
{
	return qp_conn((struct xs_qp *)qp);
}

/* ---- create / destroy ----------------------------------------------------- */

XS_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	struct xs_qp *q = NULL;
	unsigned depth, nsge;
	int err = ENOMEM;

	if (!pd || !a) {
		errno = EINVAL;
		return NULL;
	}
	if (a->qp_type != IBV_QPT_RC) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (a->srq) /* the receive capabilities are the SRQ's, as the kernel's */
		a->cap.max_recv_wr = a->cap.max_recv_sge = 0;
	if (!a->send_cq || !a->recv_cq || a->cap.max_send_wr > XS_MAX_QP_WR ||
	    a->cap.max_recv_wr > XS_MAX_QP_WR || a->cap.max_send_sge > XS_MAX_SGE ||
	    a->cap.max_recv_sge > XS_MAX_SGE || a->cap.max_inline_data > XS_MAX_INLINE) {
		errno = EINVAL;
		return NULL;
	}
	if (__atomic_add_fetch(&xs_nqp, 1, __ATOMIC_RELAXED) > XS_MAX_QP) {
		__atomic_sub_fetch(&xs_nqp, 1, __ATOMIC_RELAXED);
		errno = ENOMEM;
		return NULL;
	}
	depth = a->cap.max_recv_wr ? a->cap.max_recv_wr : 1;
	nsge = a->cap.max_recv_sge ? a->cap.max_recv_sge : 1;
	q = calloc(1, sizeof(*q));
	if (!q)
		goto fail;
	q->relay_fd = -1;
	if (a->srq) { /* no receive records: the SRQ's WRs come in */
		depth = 0;
		if (ddp_queue_init(&q->rq, RDMAP_QN_SEND, XS_SRQ_QP_DEPTH, 1) < 0)
			goto fail;
		q->rq.refill = qp_srq_refill;
		q->rq.refill_ctx = q;
	} else {
		q->rwr = calloc(depth, sizeof(*q->rwr));
		q->sgs = calloc((size_t)depth * nsge, sizeof(*q->sgs));
		if (!q->rwr || !q->sgs || ddp_queue_init(&q->rq, RDMAP_QN_SEND, depth, 1) < 0)
			goto fail;
	}
	for (unsigned i = depth; i-- > 0;) {
		q->rwr[i].sg = &q->sgs[(size_t)i * nsge];
		q->rwr[i].next = q->rfree;
		q->rfree = &q->rwr[i];
	}
	a->cap.max_inline_data = XS_MAX_INLINE;
	q->cap = a->cap;
	q->sq_max = a->cap.max_send_wr + XS_MAX_ORD;
	q->sq_sig_all = a->sq_sig_all != 0;
	q->rx_access = -1;
	q->ird_pref = XS_MAX_IRD;
	q->ord_pref = XS_MAX_ORD;
	q->qp.context = pd->context;
	q->qp.qp_context = a->qp_context;
	q->qp.pd = pd;
	q->qp.send_cq = a->send_cq;
	q->qp.recv_cq = a->recv_cq;
	q->qp.srq = a->srq;
	q->qp.qp_type = IBV_QPT_RC;
	if (xs_ctx_is_roce(pd->context) && xs_roce_relay_on()) {
		/* the daemon's QPN, unique on the host: it routes by it */
		struct roced_msg claim = { .kind = ROCED_CLAIM };
		uint32_t qpn = 0;

		q->relay_fd = xs_roce_relay_open(&claim, &qpn);
		if (q->relay_fd < 0) {
			xs_log("QP: no QPN from xsock-roced: %s", xs_strerror(-q->relay_fd));
			err = -q->relay_fd == ENOENT ? EAGAIN : -q->relay_fd;
			ddp_queue_destroy(&q->rq);
			goto fail;
		}
		q->qp.qp_num = qpn;
	} else {
		q->qp.qp_num = qpn_alloc();
	}
	pthread_mutex_init(&q->qp.mutex, NULL);
	pthread_cond_init(&q->qp.cond, NULL);
	pthread_mutex_init(&q->lock, NULL);
	pthread_mutex_init(&q->rx_lock, NULL);
	pthread_mutex_init(&q->sq_lock, NULL);
	pthread_mutex_init(&q->rd_lock, NULL);
	pthread_cond_init(&q->rd_cond, NULL);
	q->attr.cap = q->cap;
	q->attr.port_num = XS_PORT_NUM;
	q->attr.path_mtu = IBV_MTU_1024;
	q->attr.max_rd_atomic = (uint8_t)q->ord_pref;
	q->attr.max_dest_rd_atomic = (uint8_t)q->ird_pref;
	qp_set_state(q, IBV_QPS_RESET);
	if (a->srq && xs_srq_attach(a->srq, &q->qp)) {
		ddp_queue_destroy(&q->rq);
		goto fail;
	}
	__atomic_add_fetch(&((struct xs_cq *)a->send_cq)->qp_refs, 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&((struct xs_cq *)a->recv_cq)->qp_refs, 1, __ATOMIC_RELEASE);
	qp_table_add(q);
	return &q->qp;
fail:
	if (q) {
		if (q->relay_fd >= 0)
			xs_fd_close(q->relay_fd);
		free(q->rwr);
		free(q->sgs);
		free(q);
	}
	__atomic_sub_fetch(&xs_nqp, 1, __ATOMIC_RELAXED);
	errno = err;
	return NULL;
}

/* The ex entry point (ibv_create_qp_ex, rdma_create_qp_ex): a PD, send ops
 * for the ibv_wr_* API (verbs_qpx.c), no creation flags. */
struct ibv_qp *xs_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *ax)
{
	struct ibv_qp_init_attr a;
	struct ibv_qp *qp;
	int rc;

	/* creation flags: none supported, so 0 is fine (rdma-core's tests
	 * set the mask with flags 0 at random; the kernel's check is the
	 * same: only a flag set is refused) */
	if ((ax->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
					 IBV_QP_INIT_ATTR_CREATE_FLAGS)) ||
	    ((ax->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && ax->create_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((ax->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    (ax->send_ops_flags & ~(uint64_t)XS_QPX_SEND_OPS)) {
		errno = EOPNOTSUPP; /* immediate data, atomics, MW, TSO */
		return NULL;
	}
	if (!(ax->comp_mask & IBV_QP_INIT_ATTR_PD)) {
		errno = EINVAL;
		return NULL;
	}
	memset(&a, 0, sizeof(a));
	a.qp_context = ax->qp_context;
	a.send_cq = ax->send_cq;
	a.recv_cq = ax->recv_cq;
	a.srq = ax->srq;
	a.cap = ax->cap;
	a.qp_type = ax->qp_type;
	a.sq_sig_all = ax->sq_sig_all;
	qp = ibv_create_qp(ax->pd, &a);
	if (!qp)
		return NULL;
	ax->cap = a.cap;
	if (ax->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		struct xs_qp *q = to_xs_qp(qp);

		rc = xs_qpx_init(&q->qpx, ax->send_ops_flags, &q->cap, &q->wrb);
		if (rc) {
			ibv_destroy_qp(qp);
			errno = rc;
			return NULL;
		}
	}
	return qp;
}

XS_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *ibqp)
{
	struct xs_qp *q = to_xs_qp(ibqp);

	if (!ibqp || !q->wrb) {
		errno = EOPNOTSUPP; /* created without send ops: ibv_post_send */
		return NULL;
	}
	return &q->qpx;
}

struct xs_wrb *xs_qp_wrb(struct ibv_qp *ibqp)
{
	return to_xs_qp(ibqp)->wrb;
}

XS_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct xs_qp *q = to_xs_qp(ibqp);
	struct xs_conn *c = qp_conn(q);

	/* post_srq_recv kicks the connections of the SRQ's QPs: not this one's
	 * once it is put (the refill may still run until then: it is the SRQ
	 * that the caller may not destroy before this returns) */
	qp_table_del(q); /* the CM finds it by number no more */
	if (ibqp->srq)
		xs_srq_detach(ibqp->srq, ibqp);
	if (c) {
		xs_cq_del_conn(ibqp->send_cq, c);
		xs_cq_del_conn(ibqp->recv_cq, c);
		/* the QP owns the reference bind took over; after put no upcall runs */
		q->tp->disconnect(c);
		q->tp->put(c);
	}
	__atomic_store_n(&q->conn_dead, true, __ATOMIC_RELEASE);
	__atomic_store_n(&q->conn, NULL, __ATOMIC_RELEASE);
	flush_sq(q, false, NULL);
	pthread_mutex_lock(&q->rx_lock);
	flush_recvs(q, false);
	pthread_mutex_unlock(&q->rx_lock);
	ddp_queue_destroy(&q->rq);
	if (q->rx_extra) {
		ddp_queue_destroy(&q->rrq);
		ddp_queue_destroy(&q->tq);
		ddp_queue_destroy(&q->arq);
	}
	xs_cq_clean_qp(ibqp->send_cq, ibqp->qp_num);
	if (ibqp->recv_cq != ibqp->send_cq)
		xs_cq_clean_qp(ibqp->recv_cq, ibqp->qp_num);
	__atomic_sub_fetch(&((struct xs_cq *)ibqp->send_cq)->qp_refs, 1, __ATOMIC_RELEASE);
	__atomic_sub_fetch(&((struct xs_cq *)ibqp->recv_cq)->qp_refs, 1, __ATOMIC_RELEASE);
	xs_async_forget(ibqp->context, ibqp); /* no upcall can queue one any more */
	if (q->relay_fd >= 0)
		xs_fd_close(q->relay_fd); /* (a lingering connection holds its own) */
	pthread_mutex_destroy(&q->qp.mutex);
	pthread_cond_destroy(&q->qp.cond);
	pthread_mutex_destroy(&q->lock);
	pthread_mutex_destroy(&q->rx_lock);
	pthread_mutex_destroy(&q->sq_lock);
	pthread_mutex_destroy(&q->rd_lock);
	pthread_cond_destroy(&q->rd_cond);
	free(q->ird_bufs);
	free(q->arq_bufs);
	free(q->sq);
	free(q->rwr);
	free(q->sgs);
	xs_qpx_destroy(q->wrb);
	free(q);
	__atomic_sub_fetch(&xs_nqp, 1, __ATOMIC_RELAXED);
	return 0;
}

/* ---- state machine -------------------------------------------------------- */

static bool qp_transition_ok(enum ibv_qp_state cur, enum ibv_qp_state next)
{
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR)
		return true;
	switch (cur) {
	case IBV_QPS_RESET:
		return next == IBV_QPS_INIT;
	case IBV_QPS_INIT:
		return next == IBV_QPS_INIT || next == IBV_QPS_RTR;
	case IBV_QPS_RTR:
		return next == IBV_QPS_RTS;
	case IBV_QPS_RTS:
		return next == IBV_QPS_RTS || next == IBV_QPS_SQD;
	case IBV_QPS_SQD:
		return next == IBV_QPS_SQD || next == IBV_QPS_RTS;
	case IBV_QPS_SQE:
		return next == IBV_QPS_RTS;
	default:
		return false;
	}
}

/* To RESET: WRs are dropped without completions (verbs spec). */
static void qp_reset(struct xs_qp *q)
{
	struct xs_conn *c;

	flush_sq(q, false, NULL);
	c = qp_rx_lock(q);
	flush_recvs(q, false);
	if (!c)
		q->rq.msn_head = 1; /* a fresh connection starts at MSN 1 */
	qp_rx_unlock(q, c);
}

/* The IRD and ORD the QP asks for, within the device's (q->lock held). */
static void qp_limits(const struct xs_qp *q, uint16_t *ird, uint16_t *ord)
{
	*ird = q->ird_pref < XS_MAX_IRD ? q->ird_pref : XS_MAX_IRD;
	*ord = q->ord_pref < XS_MAX_ORD ? q->ord_pref : XS_MAX_ORD;
}

/* ---- RoCE: connected by modify_qp (no CM) ---------------------------------- */

static int qp_attach(struct ibv_qp *ibqp, const struct xs_transport_ops *tp, struct xs_conn *c,
		     const struct xs_tp_params *p, enum ibv_qp_state to);

/* INIT -> RTR of a RoCE QP: its connection, from the attributes the
 * verbs spec requires there (q->lock held).  0 or an errno. */
static int roce_rtr(struct xs_qp *q, const struct ibv_qp_attr *attr, int mask,
		    struct xs_conn **out)
{
	const int need = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	struct xs_roce_path p;
	int rc;

	if ((mask & need) != need || !attr->ah_attr.is_global || attr->path_mtu < IBV_MTU_256 ||
	    attr->path_mtu > IBV_MTU_4096) {
		/* as rxe: a RoCE path is an IP path, named by a GRH */
		xs_log("QP %u: RTR on xsock_roce0 needs an AV with a GRH (is_global), the path MTU, "
		       "dest QPN, RQ PSN, max_dest_rd_atomic and min_rnr_timer",
		       q->qp.qp_num);
		return EINVAL;
	}
	memset(&p, 0, sizeof(p));
	if (xs_roce_gid_addr(attr->ah_attr.grh.sgid_index, &p.local) < 0) {
		xs_log("QP %u: no GID %u on xsock_roce0", q->qp.qp_num,
		       attr->ah_attr.grh.sgid_index);
		return EINVAL;
	}
	xs_roce_gid_to_addr(&attr->ah_attr.grh.dgid, &p.peer);
	if (p.peer.ss_family == AF_INET6 && p.local.ss_family == AF_INET6) {
		struct sockaddr_in6 *pe = (struct sockaddr_in6 *)&p.peer;

		/* a link-local peer is on our GID's link */
		if (IN6_IS_ADDR_LINKLOCAL(&pe->sin6_addr) && !pe->sin6_scope_id)
			pe->sin6_scope_id = ((struct sockaddr_in6 *)&p.local)->sin6_scope_id;
	}
	p.qpn = q->qp.qp_num;
	p.dest_qpn = attr->dest_qp_num;
	p.relay = q->relay_fd >= 0;
	p.relay_fd = q->relay_fd;
	p.rq_psn = attr->rq_psn;
	p.mtu = 128u << attr->path_mtu;
	p.flow_label = attr->ah_attr.grh.flow_label;
	p.min_rnr_timer = attr->min_rnr_timer;
	rc = xs_roce_conn_create(&p, out);
	if (rc < 0)
		xs_log("QP %u: RoCE connection to QP %u not made: %s", p.qpn, p.dest_qpn,
		       xs_strerror(-rc));
	return -rc;
}

/* After INIT -> RTR (without q->lock): bind the connection; the QP
 * receives from now on and stays in RTR.  ORD and IRD as the QP has them
 * now; RTS may lower the ORD. */
static int roce_bind(struct xs_qp *q, struct xs_conn *c)
{
	struct xs_tp_params p;
	uint16_t ird, ord;
	int rc;

	xs_qp_read_limits(&q->qp, &ird, &ord);
	xs_roce_params(ird, ord, &p);
	rc = qp_attach(&q->qp, &xs_tp_roce, c, &p, IBV_QPS_RTR);
	if (rc < 0) {
		xs_tp_roce.put(c);
		pthread_mutex_lock(&q->lock);
		if (q->qp.state == IBV_QPS_RTR)
			qp_set_state(q, IBV_QPS_INIT);
		pthread_mutex_unlock(&q->lock);
	}
	return -rc;
}

/* RTR -> RTS (q->lock held): start the requester. */
static void roce_rts(struct xs_qp *q, const struct ibv_qp_attr *attr, int mask)
{
	struct xs_roce_req_attr a = {
		.sq_psn = (mask & IBV_QP_SQ_PSN) ? attr->sq_psn : 0,
		.timeout = q->attr.timeout,
		.retry_cnt = q->attr.retry_cnt,
		.rnr_retry = q->attr.rnr_retry,
	};

	qp_limits(q, &a.ird, &a.ord);
	pthread_mutex_lock(&q->rd_lock);
	if (a.ord && a.ord < q->ord)
		q->ord = a.ord; /* the Reads and Atomics the peer's IRD takes */
	pthread_mutex_unlock(&q->rd_lock);
	xs_roce_conn_rts(qp_conn(q), &a);
}

XS_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct xs_qp *q = to_xs_qp(ibqp);
	enum ibv_qp_state cur, next;
	struct xs_conn *roce_new = NULL;

	pthread_mutex_lock(&q->lock);
	cur = q->qp.state;
	next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if (((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur) ||
	    ((mask & IBV_QP_STATE) && !qp_transition_ok(cur, next)) ||
	    ((mask & IBV_QP_PORT) && attr->port_num != XS_PORT_NUM) ||
	    ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && attr->max_rd_atomic > XS_MAX_ORD) ||
	    ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && attr->max_dest_rd_atomic > XS_MAX_IRD) ||
	    ((mask & IBV_QP_CAP))) {
		pthread_mutex_unlock(&q->lock);
		return EINVAL;
	}
	/* path, PSN, timeout and retry attributes mean nothing over TCP:
	 * kept for query_qp only */
	if (mask & IBV_QP_ACCESS_FLAGS) {
		q->attr.qp_access_flags = attr->qp_access_flags;
		__atomic_store_n(&q->rx_access, (int)attr->qp_access_flags, __ATOMIC_RELAXED);
	}
	if (mask & IBV_QP_PKEY_INDEX)
		q->attr.pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PATH_MTU)
		q->attr.path_mtu = attr->path_mtu;
	if (mask & IBV_QP_SQ_PSN)
		q->attr.sq_psn = attr->sq_psn;
	if (mask & IBV_QP_RQ_PSN)
		q->attr.rq_psn = attr->rq_psn;
	if (mask & IBV_QP_TIMEOUT)
		q->attr.timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		q->attr.retry_cnt = attr->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		q->attr.rnr_retry = attr->rnr_retry;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		q->attr.min_rnr_timer = attr->min_rnr_timer;
	if (mask & IBV_QP_DEST_QPN)
		q->attr.dest_qp_num = attr->dest_qp_num;
	if (mask & IBV_QP_AV)
		q->attr.ah_attr = attr->ah_attr;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC) {
		q->ord_pref = attr->max_rd_atomic;
		q->attr.max_rd_atomic = attr->max_rd_atomic;
	}
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) {
		q->ird_pref = attr->max_dest_rd_atomic;
		q->attr.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	}
	if (xs_ctx_is_roce(ibqp->context)) {
		if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
			int rc = roce_rtr(q, attr, mask, &roce_new);

			if (rc) {
				pthread_mutex_unlock(&q->lock);
				return rc;
			}
		} else if (cur == IBV_QPS_RTR && next == IBV_QPS_RTS && qp_conn(q)) {
			roce_rts(q, attr, mask);
		}
	}
	if (next != IBV_QPS_ERR && next != IBV_QPS_RESET)
		qp_set_state(q, next);
	pthread_mutex_unlock(&q->lock);
	if (roce_new)
		return roce_bind(q, roce_new);
	if (next == IBV_QPS_ERR && cur != IBV_QPS_ERR) {
		qp_enter_error(q, false, NULL);
	} else if (next == IBV_QPS_RESET && cur != IBV_QPS_RESET) {
		qp_reset(q);
		pthread_mutex_lock(&q->lock);
		qp_set_state(q, IBV_QPS_RESET);
		pthread_mutex_unlock(&q->lock);
	}
	return 0;
}

XS_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
			   struct ibv_qp_init_attr *init_attr)
{
	struct xs_qp *q = to_xs_qp(ibqp);

	if (!attr || !init_attr)
		return EINVAL;
	pthread_mutex_lock(&q->lock);
	/* an iWARP QP has no RESET of its own: siw's IDLE is INIT, and
	 * libibverbs sets qp->state from what it reports (rdma-core's
	 * test_query_rc_qp expects INIT of an RNIC's new QP, test_create_qp
	 * RESET in qp->state before any query) */
	if (q->qp.state == IBV_QPS_RESET && (mask & IBV_QP_STATE) && !xs_ctx_is_roce(ibqp->context))
		qp_set_state(q, IBV_QPS_INIT);
	*attr = q->attr;
	attr->qp_state = attr->cur_qp_state = q->qp.state;
	pthread_mutex_unlock(&q->lock);
	memset(init_attr, 0, sizeof(*init_attr));
	init_attr->qp_context = q->qp.qp_context;
	init_attr->send_cq = q->qp.send_cq;
	init_attr->recv_cq = q->qp.recv_cq;
	init_attr->srq = q->qp.srq;
	init_attr->cap = q->cap; /* on an SRQ: no receive WRs of its own */
	init_attr->qp_type = IBV_QPT_RC;
	init_attr->sq_sig_all = q->sq_sig_all;
	return 0;
}

/* ---- QP <-> CM --------------------------------------------------------------- */

void xs_qp_read_limits(struct ibv_qp *ibqp, uint16_t *ird, uint16_t *ord)
{
	struct xs_qp *q = to_xs_qp(ibqp);

	pthread_mutex_lock(&q->lock);
	qp_limits(q, ird, ord);
	pthread_mutex_unlock(&q->lock);
}

int xs_qp_bind_conn(struct ibv_qp *ibqp, struct xs_conn *c, const struct mpa_agreed *agreed)
{
	struct xs_tp_params p;

	xs_tp_iwarp_params(agreed, &p);
	return xs_qp_attach(ibqp, &xs_tp_iwarp, c, &p);
}

/* Bind and move to `to` (RTS; a RoCE QP: RTR, its responder works
 * before its requester). */
static int qp_attach(struct ibv_qp *ibqp, const struct xs_transport_ops *tp, struct xs_conn *c,
		     const struct xs_tp_params *p, enum ibv_qp_state to)
{
	struct xs_qp *q = to_xs_qp(ibqp);
	enum ibv_qp_state st = qp_state(q);
	/* no negotiation (MPA rev 1) may say 0: allow one Read each way */
	unsigned ird = p->ird ? p->ird : 1, ord = p->ord ? p->ord : 1;
	struct xs_tp_queues queues;
	int rc;

	if (ird > XS_MAX_IRD)
		ird = XS_MAX_IRD;
	if (ord > XS_MAX_ORD)
		ord = XS_MAX_ORD;
	/* RTS too: an external QP the application moved there itself with
	 * rdma_init_qp_attr before rdma_accept or rdma_establish */
	if (st != IBV_QPS_RESET && st != IBV_QPS_INIT && st != IBV_QPS_RTR && st != IBV_QPS_RTS)
		return -EINVAL;
	if (qp_conn(q) || q->rx_extra)
		return -EBUSY;
	q->ext = p->ext;
	q->acked_tx = p->acked;
	q->fail_st_valid = false;
	q->ird_buf_len = p->req_buf_len;
	q->ird_bufs = malloc((size_t)ird * q->ird_buf_len);
	if (!q->ird_bufs)
		return -ENOMEM;
	if (ddp_queue_init(&q->rrq, RDMAP_QN_READ_REQ, XS_MAX_IRD, 1) < 0)
		goto nomem;
	if (ddp_queue_init(&q->tq, RDMAP_QN_TERMINATE, XS_TERM_BUFS, 1) < 0) {
		ddp_queue_destroy(&q->rrq);
		goto nomem;
	}
	if (q->ext) {
		/* one Atomic Response buffer per Atomic outstanding (ORD) */
		q->arq_bufs = malloc((size_t)ord * RDMAP_ATOMIC_RESP_LEN);
		if (!q->arq_bufs || ddp_queue_init(&q->arq, RDMAP_QN_ATOMIC_RESP, XS_MAX_ORD, 1) < 0) {
			ddp_queue_destroy(&q->rrq);
			ddp_queue_destroy(&q->tq);
			free(q->arq_bufs);
			q->arq_bufs = NULL;
			goto nomem;
		}
		for (unsigned i = 0; i < ord; i++)
			ddp_queue_post(&q->arq, q->arq_bufs + (size_t)i * RDMAP_ATOMIC_RESP_LEN,
				       RDMAP_ATOMIC_RESP_LEN, NULL);
	}
	q->rx_extra = true;
	for (unsigned i = 0; i < ird; i++)
		ddp_queue_post(&q->rrq, q->ird_bufs + (size_t)i * q->ird_buf_len, q->ird_buf_len,
			       NULL);
	for (unsigned i = 0; i < XS_TERM_BUFS; i++)
		ddp_queue_post(&q->tq, q->term_bufs[i], XS_TERM_BUF, NULL);
	pthread_mutex_lock(&q->rd_lock);
	q->ord = ord;
	pthread_mutex_unlock(&q->rd_lock);
	/* posters that see conn from now on take the conn rx lock (and
	 * reach the transport through tp, published with conn) */
	q->tp = tp;
	pthread_mutex_lock(&q->rx_lock);
	__atomic_store_n(&q->conn, c, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&q->rx_lock);
	queues = (struct xs_tp_queues){
		.recv = &q->rq,
		.read_req = &q->rrq,
		.term = &q->tq,
		.atomic_resp = q->ext ? &q->arq : NULL,
	};
	rc = tp->attach(c, &xs_qp_conn_ops, q, &queues);
	if (rc < 0) {
		pthread_mutex_lock(&q->rx_lock);
		__atomic_store_n(&q->conn, NULL, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&q->rx_lock);
		ddp_queue_destroy(&q->rrq);
		ddp_queue_destroy(&q->tq);
		ddp_queue_destroy(&q->arq);
		free(q->arq_bufs);
		q->arq_bufs = NULL;
		q->ext = false;
		q->rx_extra = false;
		free(q->ird_bufs);
		q->ird_bufs = NULL;
		return rc;
	}
	/* polling the CQs receives on the connection (the fast path) */
	xs_cq_add_conn(q->qp.recv_cq, tp, c);
	xs_cq_add_conn(q->qp.send_cq, tp, c);
	pthread_mutex_lock(&q->lock);
	q->attr.max_rd_atomic = (uint8_t)ord;
	q->attr.max_dest_rd_atomic = (uint8_t)ird;
	/* Attached: the QP owns the connection from here on, even if the
	 * stream already failed (the close then arrives as DISCONNECTED). */
	if (q->qp.state != IBV_QPS_ERR)
		qp_set_state(q, to);
	pthread_mutex_unlock(&q->lock);
	return 0;
nomem:
	free(q->ird_bufs);
	q->ird_bufs = NULL;
	return -ENOMEM;
}

int xs_qp_attach(struct ibv_qp *ibqp, const struct xs_transport_ops *tp, struct xs_conn *c,
		 const struct xs_tp_params *p)
{
	return qp_attach(ibqp, tp, c, p, IBV_QPS_RTS);
}

void xs_qp_flush(struct ibv_qp *ibqp)
{
	qp_enter_error(to_xs_qp(ibqp), false, NULL);
}
