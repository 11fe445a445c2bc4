/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Shared receive queues (ibv_*_srq, the post_srq_recv and create_srq_ex
 * context ops).
 *
 * An SRQ is a FIFO of checked receive WRs.  The QPs created on it have no
 * receives of their own: their QN 0 DDP queue is fed on demand (its refill,
 * qp_srq_refill in verbs_qp_rx.c) with the oldest WR here when a Send
 * starts to arrive, on the engine thread or a polling caller's, under that
 * connection's rx lock and the QP's rx_lock.  The WR then belongs to that
 * QP: it completes on the QP's recv_cq with its qp_num, or is flushed
 * there if the QP fails while the Send is half in; WRs still here are not
 * touched by a QP's error.
 * A Send that finds the SRQ empty waits as for an empty RQ (XSOCK_RNR_MS):
 * post_srq_recv kicks every attached QP's connection.
 *
 * WR records come from a pool grown in chunks (the first holds max_wr): a
 * WR a QP took leaves the FIFO, so up to max_wr more can be posted while
 * the QPs hold theirs.  Resizing (IBV_SRQ_MAX_WR) only moves the bound on
 * posted WRs: a size below those posted is EINVAL.
 *
 * Locks: lock guards everything here; it nests inside a QP's rx_lock and
 * outside the async event lock (see verbs_priv.h). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs/verbs_priv.h"

#define XS_SRQ_GROW 16

struct xs_srq_chunk {
	struct xs_srq_chunk *next;
	/* then n struct xs_rwr, then n * max_sge struct xs_sg */
};

struct xs_srq {
	struct ibv_srq srq;
	pthread_mutex_t lock;
	uint32_t num;
	unsigned max_wr, max_sge;
	unsigned limit; /* armed srq_limit, 0 = disarmed */
	unsigned posted; /* WRs in the FIFO */
	struct xs_rwr *head, *tail; /* the FIFO, oldest first */
	struct xs_rwr *free;
	struct xs_srq_chunk *chunks;
	struct ibv_qp **qps; /* attached QPs */
	unsigned nqps, qps_cap;
};

static int xs_nsrq;
static uint32_t xs_srqn_next = 1;

static struct xs_srq *to_xs_srq(struct ibv_srq *srq)
{
	return (struct xs_srq *)srq;
}

/* n more WR records on the free list (lock held, or not yet published). */
static int srq_grow(struct xs_srq *s, unsigned n)
{
	size_t rw = (size_t)n * sizeof(struct xs_rwr);
	struct xs_srq_chunk *k = calloc(1, sizeof(*k) + rw + (size_t)n * s->max_sge * sizeof(struct xs_sg));
	struct xs_rwr *r;
	struct xs_sg *sg;

	if (!k)
		return ENOMEM;
	r = (struct xs_rwr *)(k + 1);
	sg = (struct xs_sg *)((uint8_t *)r + rw);
	for (unsigned i = n; i-- > 0;) {
		r[i].sg = &sg[(size_t)i * s->max_sge];
		r[i].next = s->free;
		s->free = &r[i];
	}
	k->next = s->chunks;
	s->chunks = k;
	return 0;
}

static bool srq_attr_ok(const struct ibv_srq_attr *a)
{
	return a->max_wr > 0 && a->max_wr <= XS_MAX_SRQ_WR && a->max_sge <= XS_MAX_SRQ_SGE &&
	       a->srq_limit <= a->max_wr;
}

XS_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct xs_srq *s;

	if (!pd || !attr || !srq_attr_ok(&attr->attr)) {
		errno = EINVAL;
		return NULL;
	}
	if (__atomic_add_fetch(&xs_nsrq, 1, __ATOMIC_RELAXED) > XS_MAX_SRQ) {
		__atomic_sub_fetch(&xs_nsrq, 1, __ATOMIC_RELAXED);
		errno = ENOMEM;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		goto nomem;
	s->max_wr = attr->attr.max_wr;
	s->max_sge = attr->attr.max_sge ? attr->attr.max_sge : 1;
	s->limit = attr->attr.srq_limit;
	if (srq_grow(s, s->max_wr)) {
		free(s);
		goto nomem;
	}
	do
		s->num = __atomic_fetch_add(&xs_srqn_next, 1, __ATOMIC_RELAXED) & 0xffffff;
	while (s->num == 0);
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->srq.mutex, NULL);
	pthread_cond_init(&s->srq.cond, NULL);
	s->srq.context = pd->context;
	s->srq.srq_context = attr->srq_context;
	s->srq.pd = pd;
	s->srq.handle = s->num;
	/* what was granted */
	attr->attr.max_sge = s->max_sge;
	return &s->srq;
nomem:
	__atomic_sub_fetch(&xs_nsrq, 1, __ATOMIC_RELAXED);
	errno = ENOMEM;
	return NULL;
}

/* ibv_create_srq_ex (the inline call comes here for anything but a plain
 * BASIC SRQ with a PD): BASIC only, a CQ is accepted and unused (it is
 * XRC's); XRC and tag matching are EOPNOTSUPP. */
struct ibv_srq *xs_create_srq_ex(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *ax)
{
	const uint32_t known = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ;
	struct ibv_srq_init_attr a;
	struct ibv_srq *srq;

	if (!ctx || !ax) {
		errno = EINVAL;
		return NULL;
	}
	if ((ax->comp_mask & ~known) ||
	    ((ax->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && ax->srq_type != IBV_SRQT_BASIC)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(ax->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !ax->pd || ax->pd->context != ctx) {
		errno = EINVAL;
		return NULL;
	}
	memset(&a, 0, sizeof(a));
	a.srq_context = ax->srq_context;
	a.attr = ax->attr;
	srq = ibv_create_srq(ax->pd, &a);
	if (srq)
		ax->attr = a.attr;
	return srq;
}

int xs_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num)
{
	if (!srq || !srq_num)
		return EINVAL;
	*srq_num = to_xs_srq(srq)->num;
	return 0;
}

XS_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
	struct xs_srq *s = to_xs_srq(srq);
	unsigned max_wr;
	int rc = 0;

	if (!srq || !attr || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
		return EINVAL;
	pthread_mutex_lock(&s->lock);
	max_wr = (mask & IBV_SRQ_MAX_WR) ? attr->max_wr : s->max_wr;
	if ((mask & IBV_SRQ_MAX_WR) &&
	    (attr->max_wr == 0 || attr->max_wr > XS_MAX_SRQ_WR || attr->max_wr < s->posted))
		rc = EINVAL; /* never below what is posted: those WRs are the caller's */
	else if ((mask & IBV_SRQ_LIMIT) && attr->srq_limit > max_wr)
		rc = EINVAL;
	if (!rc) {
		s->max_wr = max_wr;
		if (mask & IBV_SRQ_LIMIT)
			s->limit = attr->srq_limit; /* armed; 0 disarms */
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

XS_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct xs_srq *s = to_xs_srq(srq);

	if (!srq || !attr)
		return EINVAL;
	pthread_mutex_lock(&s->lock);
	attr->max_wr = s->max_wr;
	attr->max_sge = s->max_sge;
	attr->srq_limit = s->limit;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

XS_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	struct xs_srq *s = to_xs_srq(srq);
	struct xs_srq_chunk *k;

	if (!srq)
		return EINVAL;
	pthread_mutex_lock(&s->lock);
	if (s->nqps) {
		pthread_mutex_unlock(&s->lock);
		return EBUSY; /* as the kernel: its QPs go first */
	}
	pthread_mutex_unlock(&s->lock);
	for (struct xs_rwr *r = s->head; r; r = r->next)
		free(r->bounce);
	while ((k = s->chunks)) {
		s->chunks = k->next;
		free(k);
	}
	free(s->qps);
	xs_async_forget(srq->context, srq); /* an unread LIMIT_REACHED names it */
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&srq->mutex);
	pthread_cond_destroy(&srq->cond);
	free(s);
	__atomic_sub_fetch(&xs_nsrq, 1, __ATOMIC_RELAXED);
	return 0;
}

/* ---- posting -------------------------------------------------------------------- */

static int post_one(struct xs_srq *s, const struct ibv_recv_wr *wr)
{
	struct xs_rwr *r;
	int rc;

	if (wr->num_sge < 0 || (unsigned)wr->num_sge > s->max_sge)
		return EINVAL;
	if (s->posted >= s->max_wr)
		return ENOMEM;
	if (!s->free && srq_grow(s, XS_SRQ_GROW))
		return ENOMEM;
	r = s->free;
	rc = xs_rwr_fill(r, s->srq.pd, wr, s->max_sge);
	if (rc)
		return rc;
	s->free = r->next;
	r->next = NULL;
	if (s->tail)
		s->tail->next = r;
	else
		s->head = r;
	s->tail = r;
	s->posted++;
	return 0;
}

int xs_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct xs_srq *s = to_xs_srq(srq);
	bool posted = false;
	int rc = 0;

	if (!srq) {
		if (bad)
			*bad = wr;
		return EINVAL;
	}
	pthread_mutex_lock(&s->lock);
	for (; wr; wr = wr->next) {
		rc = post_one(s, wr);
		if (rc) {
			if (bad)
				*bad = wr;
			break;
		}
		posted = true;
	}
	/* a Send on any of its QPs may be waiting for one (RNR) */
	for (unsigned i = 0; posted && i < s->nqps; i++)
		xs_qp_rx_kick(s->qps[i]);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* ---- the QPs' side -------------------------------------------------------------- */

int xs_srq_attach(struct ibv_srq *srq, struct ibv_qp *qp)
{
	struct xs_srq *s = to_xs_srq(srq);
	int rc = 0;

	/* the contexts of a process share the one device (as PDs and CQs do
	 * here): an SRQ serves QPs of any of them */
	pthread_mutex_lock(&s->lock);
	if (s->nqps == s->qps_cap) {
		unsigned ncap = s->qps_cap ? s->qps_cap * 2 : 4;
		struct ibv_qp **n = realloc(s->qps, ncap * sizeof(*n));

		if (n) {
			s->qps = n;
			s->qps_cap = ncap;
		} else {
			rc = ENOMEM;
		}
	}
	if (!rc)
		s->qps[s->nqps++] = qp;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void xs_srq_detach(struct ibv_srq *srq, struct ibv_qp *qp)
{
	struct xs_srq *s = to_xs_srq(srq);

	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < s->nqps; i++) {
		if (s->qps[i] == qp) {
			s->qps[i] = s->qps[--s->nqps];
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
}

struct xs_rwr *xs_srq_take(struct ibv_srq *srq)
{
	struct xs_srq *s = to_xs_srq(srq);
	struct xs_rwr *r;

	pthread_mutex_lock(&s->lock);
	r = s->head;
	if (r) {
		s->head = r->next;
		if (!s->head)
			s->tail = NULL;
		r->next = NULL;
		s->posted--;
		if (s->limit && s->posted < s->limit) {
			/* once per arming, as the kernel's providers */
			struct ibv_async_event ev = {
				.element.srq = srq,
				.event_type = IBV_EVENT_SRQ_LIMIT_REACHED,
			};

			s->limit = 0;
			xs_async_event(srq->context, &ev);
		}
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

void xs_srq_put(struct ibv_srq *srq, struct xs_rwr *r)
{
	struct xs_srq *s = to_xs_srq(srq);

	pthread_mutex_lock(&s->lock);
	free(r->bounce);
	r->bounce = NULL;
	r->next = s->free;
	s->free = r;
	pthread_mutex_unlock(&s->lock);
}
