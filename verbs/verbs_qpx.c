/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The extended post API (ibv_qp_to_qp_ex + ibv_wr_*): a QP created with
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS gets a builder.  ibv_wr_start opens a
 * batch, each ibv_wr_<op> starts a WR (wr_id and wr_flags as the caller set
 * them in the ibv_qp_ex), the wr_set_* calls give it data, and
 * ibv_wr_complete posts the whole batch through the same path as
 * ibv_post_send.  A mistake anywhere in the batch (an op the QP was not
 * created for, too many WRs or SGEs, inline data beyond the limit) is kept
 * and returned by ibv_wr_complete, and nothing of the batch is posted: the
 * setters return void, as rdma-core's providers do. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs/verbs_priv.h"

struct xs_wrb {
	pthread_mutex_t lock; /* held from wr_start to wr_complete/wr_abort */
	uint64_t ops; /* the QP's send_ops_flags */
	unsigned max_wr, max_sge;
	unsigned n; /* WRs of the open batch */
	int err; /* its first mistake */
	bool open;
	struct ibv_send_wr *wr; /* max_wr */
	struct ibv_sge *sge; /* max_wr x max(max_sge, 1) */
	uint8_t *inl; /* max_wr x XS_MAX_INLINE: inline data is copied when set */
};

static struct xs_wrb *wrb_of(struct ibv_qp_ex *qx)
{
	return xs_qp_wrb(&qx->qp_base);
}

static void wrb_fail(struct xs_wrb *b, int err)
{
	if (!b->err)
		b->err = err;
}

/* The next WR of the batch, or NULL (the mistake recorded). */
static struct ibv_send_wr *wrb_new(struct ibv_qp_ex *qx, enum ibv_wr_opcode op, uint64_t flag)
{
	struct xs_wrb *b = wrb_of(qx);
	struct ibv_send_wr *w;
	unsigned slots = b->max_sge ? b->max_sge : 1;

	if (!b->open) {
		wrb_fail(b, EINVAL);
		return NULL;
	}
	if (!(b->ops & flag)) {
		wrb_fail(b, EOPNOTSUPP);
		return NULL;
	}
	if (b->n >= b->max_wr) {
		wrb_fail(b, ENOMEM);
		return NULL;
	}
	w = &b->wr[b->n];
	memset(w, 0, sizeof(*w));
	w->wr_id = qx->wr_id;
	w->send_flags = qx->wr_flags;
	w->opcode = op;
	w->sg_list = &b->sge[(size_t)b->n * slots];
	b->n++;
	return w;
}

/* The WR the setters apply to: the last one started. */
static struct ibv_send_wr *wrb_cur(struct xs_wrb *b)
{
	if (!b->open || !b->n) {
		wrb_fail(b, EINVAL);
		return NULL;
	}
	return &b->wr[b->n - 1];
}

static void qpx_send(struct ibv_qp_ex *qx)
{
	wrb_new(qx, IBV_WR_SEND, IBV_QP_EX_WITH_SEND);
}

static void qpx_send_inv(struct ibv_qp_ex *qx, uint32_t invalidate_rkey)
{
	struct ibv_send_wr *w = wrb_new(qx, IBV_WR_SEND_WITH_INV, IBV_QP_EX_WITH_SEND_WITH_INV);

	if (w)
		w->invalidate_rkey = invalidate_rkey;
}

static void qpx_rdma_write(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t remote_addr)
{
	struct ibv_send_wr *w = wrb_new(qx, IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE);

	if (w) {
		w->wr.rdma.rkey = rkey;
		w->wr.rdma.remote_addr = remote_addr;
	}
}

static void qpx_rdma_read(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t remote_addr)
{
	struct ibv_send_wr *w = wrb_new(qx, IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ);

	if (w) {
		w->wr.rdma.rkey = rkey;
		w->wr.rdma.remote_addr = remote_addr;
	}
}

/* What a QP never gets in send_ops_flags (creation refuses them): a
 * caller reaching these anyway has its batch refused. */
static void qpx_refuse(struct ibv_qp_ex *qx)
{
	wrb_fail(wrb_of(qx), EOPNOTSUPP);
}

/* RFC 7306 operations: posted as their ibv_send_wr (EOPNOTSUPP from
 * ibv_wr_complete on a connection that did not agree on them) */
static void qpx_atomic_cmp_swp(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t remote_addr,
			       uint64_t compare, uint64_t swap)
{
	struct ibv_send_wr *w =
		wrb_new(qx, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP);

	if (w) {
		w->wr.atomic.rkey = rkey;
		w->wr.atomic.remote_addr = remote_addr;
		w->wr.atomic.compare_add = compare;
		w->wr.atomic.swap = swap;
	}
}

static void qpx_atomic_fetch_add(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t remote_addr,
				 uint64_t add)
{
	struct ibv_send_wr *w =
		wrb_new(qx, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD);

	if (w) {
		w->wr.atomic.rkey = rkey;
		w->wr.atomic.remote_addr = remote_addr;
		w->wr.atomic.compare_add = add;
	}
}

static void qpx_bind_mw(struct ibv_qp_ex *qx, struct ibv_mw *mw, uint32_t rkey,
			const struct ibv_mw_bind_info *bind_info)
{
	qpx_refuse(qx);
}

static void qpx_local_inv(struct ibv_qp_ex *qx, uint32_t invalidate_rkey)
{
	qpx_refuse(qx);
}

static void qpx_rdma_write_imm(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t remote_addr,
			       __be32 imm_data)
{
	struct ibv_send_wr *w =
		wrb_new(qx, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM);

	if (w) {
		w->wr.rdma.rkey = rkey;
		w->wr.rdma.remote_addr = remote_addr;
		w->imm_data = imm_data;
	}
}

static void qpx_send_imm(struct ibv_qp_ex *qx, __be32 imm_data)
{
	struct ibv_send_wr *w = wrb_new(qx, IBV_WR_SEND_WITH_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM);

	if (w)
		w->imm_data = imm_data;
}

static void qpx_send_tso(struct ibv_qp_ex *qx, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	qpx_refuse(qx);
}

static void qpx_set_ud_addr(struct ibv_qp_ex *qx, struct ibv_ah *ah, uint32_t remote_qpn,
			    uint32_t remote_qkey)
{
	qpx_refuse(qx);
}

static void qpx_set_xrc_srqn(struct ibv_qp_ex *qx, uint32_t remote_srqn)
{
	qpx_refuse(qx);
}

static void qpx_atomic_write(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t remote_addr,
			     const void *atomic_wr)
{
	qpx_refuse(qx);
}

static void qpx_set_sge_list(struct ibv_qp_ex *qx, size_t num_sge, const struct ibv_sge *sg_list)
{
	struct xs_wrb *b = wrb_of(qx);
	struct ibv_send_wr *w = wrb_cur(b);

	if (!w)
		return;
	if (num_sge > b->max_sge || (num_sge && !sg_list)) {
		wrb_fail(b, EINVAL);
		return;
	}
	memcpy(w->sg_list, sg_list, num_sge * sizeof(*sg_list));
	w->num_sge = (int)num_sge;
	w->send_flags &= ~(unsigned)IBV_SEND_INLINE;
}

static void qpx_set_sge(struct ibv_qp_ex *qx, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_sge s = { .addr = addr, .length = length, .lkey = lkey };

	qpx_set_sge_list(qx, 1, &s);
}

static void qpx_set_inline_data_list(struct ibv_qp_ex *qx, size_t num_buf,
				     const struct ibv_data_buf *buf_list)
{
	struct xs_wrb *b = wrb_of(qx);
	struct ibv_send_wr *w = wrb_cur(b);
	size_t total = 0;
	uint8_t *dst;

	if (!w)
		return;
	if (!b->max_sge || (num_buf && !buf_list)) {
		wrb_fail(b, EINVAL);
		return;
	}
	dst = b->inl + (size_t)(w - b->wr) * XS_MAX_INLINE;
	for (size_t i = 0; i < num_buf; i++) {
		if (buf_list[i].length > XS_MAX_INLINE - total) {
			wrb_fail(b, EINVAL);
			return;
		}
		memcpy(dst + total, buf_list[i].addr, buf_list[i].length);
		total += buf_list[i].length;
	}
	w->sg_list[0] = (struct ibv_sge){ .addr = (uintptr_t)dst, .length = (uint32_t)total };
	w->num_sge = 1;
	w->send_flags |= IBV_SEND_INLINE;
}

static void qpx_set_inline_data(struct ibv_qp_ex *qx, void *addr, size_t length)
{
	struct ibv_data_buf d = { .addr = addr, .length = length };

	qpx_set_inline_data_list(qx, 1, &d);
}

static void qpx_start(struct ibv_qp_ex *qx)
{
	struct xs_wrb *b = wrb_of(qx);

	pthread_mutex_lock(&b->lock);
	b->open = true;
	b->n = 0;
	b->err = 0;
}

static void wrb_close(struct xs_wrb *b)
{
	b->open = false;
	b->n = 0;
	b->err = 0;
	pthread_mutex_unlock(&b->lock);
}

static int qpx_complete(struct ibv_qp_ex *qx)
{
	struct xs_wrb *b = wrb_of(qx);
	struct ibv_send_wr *bad = NULL;
	int rc = b->err;

	if (!b->open)
		return EINVAL;
	if (!rc && b->n) {
		for (unsigned i = 0; i + 1 < b->n; i++)
			b->wr[i].next = &b->wr[i + 1];
		b->wr[b->n - 1].next = NULL;
		rc = xs_post_send(&qx->qp_base, b->wr, &bad);
	}
	wrb_close(b);
	return rc;
}

static void qpx_abort(struct ibv_qp_ex *qx)
{
	struct xs_wrb *b = wrb_of(qx);

	if (b->open)
		wrb_close(b);
}

int xs_qpx_init(struct ibv_qp_ex *qx, uint64_t send_ops, const struct ibv_qp_cap *cap,
		struct xs_wrb **out)
{
	struct xs_wrb *b;
	unsigned slots;

	if (send_ops & ~(uint64_t)XS_QPX_SEND_OPS)
		return EOPNOTSUPP;
	b = calloc(1, sizeof(*b));
	if (!b)
		return ENOMEM;
	pthread_mutex_init(&b->lock, NULL);
	b->ops = send_ops;
	b->max_wr = cap->max_send_wr ? cap->max_send_wr : 1;
	b->max_sge = cap->max_send_sge;
	slots = b->max_sge ? b->max_sge : 1;
	b->wr = calloc(b->max_wr, sizeof(*b->wr));
	b->sge = calloc((size_t)b->max_wr * slots, sizeof(*b->sge));
	b->inl = malloc((size_t)b->max_wr * XS_MAX_INLINE);
	if (!b->wr || !b->sge || !b->inl) {
		xs_qpx_destroy(b);
		return ENOMEM;
	}
	qx->comp_mask = 0;
	qx->wr_atomic_cmp_swp = qpx_atomic_cmp_swp;
	qx->wr_atomic_fetch_add = qpx_atomic_fetch_add;
	qx->wr_bind_mw = qpx_bind_mw;
	qx->wr_local_inv = qpx_local_inv;
	qx->wr_rdma_read = qpx_rdma_read;
	qx->wr_rdma_write = qpx_rdma_write;
	qx->wr_rdma_write_imm = qpx_rdma_write_imm;
	qx->wr_send = qpx_send;
	qx->wr_send_imm = qpx_send_imm;
	qx->wr_send_inv = qpx_send_inv;
	qx->wr_send_tso = qpx_send_tso;
	qx->wr_set_ud_addr = qpx_set_ud_addr;
	qx->wr_set_xrc_srqn = qpx_set_xrc_srqn;
	qx->wr_set_inline_data = qpx_set_inline_data;
	qx->wr_set_inline_data_list = qpx_set_inline_data_list;
	qx->wr_set_sge = qpx_set_sge;
	qx->wr_set_sge_list = qpx_set_sge_list;
	qx->wr_start = qpx_start;
	qx->wr_complete = qpx_complete;
	qx->wr_abort = qpx_abort;
	qx->wr_atomic_write = qpx_atomic_write;
	*out = b;
	return 0;
}

void xs_qpx_destroy(struct xs_wrb *b)
{
	if (!b)
		return;
	pthread_mutex_destroy(&b->lock);
	free(b->wr);
	free(b->sge);
	free(b->inl);
	free(b);
}
