/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The send FIFO of a QP: completions of its send queue in WR order.  An
 * outstanding RDMA Read (or Atomic), and on an acked transport (RoCE) a
 * Send or Write the peer has not acknowledged, holds its place at the
 * head; a WR done behind it waits there and completes with it
 * (verbs_qp_priv.h). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs/verbs_qp_priv.h"

void sq_pop(struct xs_qp *q)
{
	if (q->sq[q->sq_head].read)
		q->rd_count--;
	q->sq_head = (q->sq_head + 1) % q->sq_cap;
	q->sq_count--;
}

/* Room for n more entries (rd_lock held).  0, or ENOMEM: the FIFO holds
 * max_send_wr + ORD WRs, a send queue the consumer overran. */
int sq_reserve(struct xs_qp *q, unsigned n_more)
{
	unsigned need = q->sq_count + n_more, ncap;
	struct xs_sqe *n;

	if (need <= q->sq_cap)
		return 0;
	if (need > q->sq_max)
		return ENOMEM;
	for (ncap = q->sq_cap ? q->sq_cap : 16; ncap < need; ncap *= 2)
		;
	if (ncap > q->sq_max)
		ncap = q->sq_max;
	n = malloc(ncap * sizeof(*n));
	if (!n)
		return ENOMEM;
	for (unsigned i = 0; i < q->sq_count; i++)
		n[i] = *sq_at(q, i);
	free(q->sq);
	q->sq = n;
	q->sq_cap = ncap;
	q->sq_head = 0;
	return 0;
}

/* rd_lock held: the slot's completion takes the CQ's next entry (pushed
 * when filled if the CQ is full: it overflows then anyway) */
void slot_to_cq(struct xs_qp *q, struct xs_sq_slot *slot)
{
	slot->where = xs_cq_reserve(q->qp.send_cq, 1, &slot->seq) == 0 ? XS_SLOT_CQ
									   : XS_SLOT_PUSH;
}

/* Complete the done WRs at the head (rd_lock held): the Read before them
 * completed. */
void sq_drain(struct xs_qp *q)
{
	while (q->sq_count && !q->sq[q->sq_head].read && !q->sq[q->sq_head].wait_ack) {
		struct xs_sqe *e = &q->sq[q->sq_head];

		if (e->slot) /* still going out: its CQ entry is its place now */
			slot_to_cq(q, e->slot);
		else
			push_wc(q->qp.send_cq, q, e->wr_id, e->op, e->st, e->len);
		sq_pop(q);
	}
}

/* A Send, Write or failed WR is done: complete it now, or behind the Reads
 * posted before it.  A successful unsignaled WR completes nothing. */
void sq_complete(struct xs_qp *q, uint64_t wr_id, enum ibv_wc_opcode op,
		 enum ibv_wc_status st, uint32_t len, bool signaled)
{
	if (!signaled && st == IBV_WC_SUCCESS)
		return;
	pthread_mutex_lock(&q->rd_lock);
	if (q->sq_count && sq_reserve(q, 1) == 0) {
		*sq_at(q, q->sq_count) = (struct xs_sqe){
			.wr_id = wr_id, .len = len, .op = op, .st = st, .signaled = true,
		};
		q->sq_count++;
	} else {
		/* nothing before it (or no room, which sq_room ruled out) */
		push_wc(q->qp.send_cq, q, wr_id, op, st, len);
	}
	pthread_mutex_unlock(&q->rd_lock);
}

/* Before a signaled Send/Write's data goes out: its completion's place,
 * the CQ's next entry, or the send FIFO's tail behind a Read.  0, or
 * ENOMEM (the send queue is full).  sq_lock held. */
int sq_take(struct xs_qp *q, struct xs_sq_slot *slot)
{
	int rc = 0;

	pthread_mutex_lock(&q->rd_lock);
	if (!q->sq_count) {
		slot_to_cq(q, slot);
	} else if ((rc = sq_reserve(q, 1)) == 0) {
		*sq_at(q, q->sq_count) = (struct xs_sqe){ .slot = slot, .signaled = true };
		q->sq_count++;
		slot->where = XS_SLOT_FIFO;
	}
	pthread_mutex_unlock(&q->rd_lock);
	return rc;
}

/* The WR of sq_take is done (sent, or failed with st). */
void sq_settle(struct xs_qp *q, struct xs_sq_slot *slot, uint64_t wr_id,
	       enum ibv_wc_opcode op, enum ibv_wc_status st, uint32_t len)
{
	struct ibv_wc wc = make_wc(q, wr_id, op, st, len);

	pthread_mutex_lock(&q->rd_lock);
	switch (slot->where) {
	case XS_SLOT_CQ:
		xs_cq_fill(q->qp.send_cq, slot->seq, &wc);
		break;
	case XS_SLOT_FIFO:
		for (unsigned i = 0; i < q->sq_count; i++) {
			struct xs_sqe *e = sq_at(q, i);

			if (e->slot == slot) {
				e->slot = NULL;
				e->wr_id = wr_id;
				e->op = op;
				e->st = st;
				e->len = len;
				break;
			}
		}
		sq_drain(q);
		break;
	case XS_SLOT_PUSH:
		push_wc(q->qp.send_cq, q, wr_id, op, st, len);
		break;
	case XS_SLOT_GONE: /* discarded by a move to RESET */
		break;
	}
	slot->where = XS_SLOT_GONE;
	pthread_mutex_unlock(&q->rd_lock);
}
