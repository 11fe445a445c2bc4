/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The process's QPs by number: rdma_connect and rdma_accept with no QP on
 * the id name the application's own (an external QP, made with
 * ibv_create_qp) by conn_param.qp_num, as the kernel's iw_cm finds it with
 * iw_get_qp.  A QP is in the table from ibv_create_qp until
 * ibv_destroy_qp.  Any thread; xs_qp_tbl_lock is a leaf. */
#include "config.h"

#include "verbs/verbs_qp_priv.h"

#define QP_TBL_BUCKETS 1024 /* power of two; QPNs are sequential */

static struct xs_qp *xs_qp_tbl[QP_TBL_BUCKETS];
static pthread_mutex_t xs_qp_tbl_lock = PTHREAD_MUTEX_INITIALIZER;

static struct xs_qp **qp_tbl_bucket(uint32_t qpn)
{
	return &xs_qp_tbl[qpn & (QP_TBL_BUCKETS - 1)];
}

void qp_table_add(struct xs_qp *q)
{
	struct xs_qp **b = qp_tbl_bucket(q->qp.qp_num);

	pthread_mutex_lock(&xs_qp_tbl_lock);
	q->tbl_next = *b;
	*b = q;
	pthread_mutex_unlock(&xs_qp_tbl_lock);
}

void qp_table_del(struct xs_qp *q)
{
	struct xs_qp **p;

	pthread_mutex_lock(&xs_qp_tbl_lock);
	for (p = qp_tbl_bucket(q->qp.qp_num); *p; p = &(*p)->tbl_next)
		if (*p == q) {
			*p = q->tbl_next;
			break;
		}
	pthread_mutex_unlock(&xs_qp_tbl_lock);
}

struct ibv_qp *xs_qp_lookup(struct ibv_context *ctx, uint32_t qpn)
{
	struct xs_qp *q;

	pthread_mutex_lock(&xs_qp_tbl_lock);
	for (q = *qp_tbl_bucket(qpn); q; q = q->tbl_next)
		if (q->qp.qp_num == qpn && (!ctx || q->qp.context == ctx))
			break;
	pthread_mutex_unlock(&xs_qp_tbl_lock);
	return q ? &q->qp : NULL;
}
