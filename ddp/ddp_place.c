/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* DDP placement (RFC 5041 sections 5.2-5.4 and 7): tagged segments go where
 * the layer above says; untagged segments go to the buffer posted for their
 * (QN, MSN) at offset MO, in any order, and messages are delivered strictly
 * in MSN order once every octet and the L segment have arrived.  Memory is
 * fixed at queue init: nothing is allocated on the data path. */
#include "config.h"

#include <errno.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/ddp.h"
#include "util/xs_be.h"

/* MSNs at or beyond msn_head + 2^31 are "behind" in serial-number
 * arithmetic (RFC 1982): they were delivered already. */
#define DDP_MSN_HALF 0x80000000u

static void ddp_rxbuf_reset(struct ddp_rxbuf *b, uint8_t *addr, uint32_t len, void *cookie)
{
	b->addr = addr;
	b->len = len;
	b->cookie = cookie;
	b->last_seen = false;
	b->msg_len = 0;
	b->placed = 0;
	b->rsvdulp = 0;
	b->rsvdulp2 = 0;
	b->nranges = 0;
}

/* Rings of destroyed queues kept for the next ones: a connection's setup
 * cleared and faulted in fresh pages for its rings (416 entries, 230 KiB
 * with their ranges, for a receive queue), a quarter of an accepting
 * server's CPU per connection.  An entry is read only once posted
 * (ddp_rxbuf_reset), so a ring is neither cleared new nor when reused.
 * Lock-free slots, so a fork child finds them consistent; at most
 * DDP_RING_KEEP rings stay kept until the process exits.  Each block starts
 * with a header holding its depth. */
#define DDP_RING_KEEP 16
#define DDP_RING_HDR alignof(max_align_t)
static struct ddp_rxbuf *_Atomic ddp_ring_kept[DDP_RING_KEEP];

static unsigned ddp_ring_depth(const struct ddp_rxbuf *ring)
{
	unsigned d;

	memcpy(&d, (const char *)ring - DDP_RING_HDR, sizeof(d));
	return d;
}

static void ddp_ring_free(struct ddp_rxbuf *ring)
{
	for (int i = 0; i < DDP_RING_KEEP; i++) {
		struct ddp_rxbuf *none = NULL;

		if (atomic_compare_exchange_strong(&ddp_ring_kept[i], &none, ring))
			return;
	}
	free((char *)ring - DDP_RING_HDR);
}

static struct ddp_rxbuf *ddp_ring_alloc(unsigned depth)
{
	char *p;

	for (int i = 0; i < DDP_RING_KEEP; i++) {
		struct ddp_rxbuf *r = atomic_exchange(&ddp_ring_kept[i], NULL);

		if (r && ddp_ring_depth(r) == depth)
			return r;
		if (r)
			ddp_ring_free(r); /* another depth: kept for its kind */
	}
	/* (no overflow in size_t: fewer than 2^32 entries of 552 octets) */
	p = malloc(DDP_RING_HDR + (size_t)depth * sizeof(struct ddp_rxbuf));
	if (!p)
		return NULL;
	memcpy(p, &depth, sizeof(depth));
	return (struct ddp_rxbuf *)(void *)(p + DDP_RING_HDR);
}

int ddp_queue_init(struct ddp_queue *q, uint32_t qn, unsigned depth, uint32_t msn_start)
{
	memset(q, 0, sizeof(*q));
	if (depth == 0)
		return -EINVAL;
	q->ring = ddp_ring_alloc(depth);
	if (!q->ring)
		return -ENOMEM;
	q->qn = qn;
	q->msn_head = msn_start;
	q->depth = depth;
	return 0;
}

void ddp_queue_destroy(struct ddp_queue *q)
{
	if (q->ring)
		ddp_ring_free(q->ring);
	q->ring = NULL;
	q->depth = 0;
	q->head = 0;
	q->count = 0;
}

int ddp_queue_post(struct ddp_queue *q, uint8_t *addr, uint32_t len, void *cookie)
{
	if (q->count >= q->depth)
		return -ENOSPC;
	ddp_rxbuf_reset(&q->ring[(q->head + q->count) % q->depth], addr, len, cookie);
	q->count++;
	return 0;
}

static bool ddp_rxbuf_complete(const struct ddp_rxbuf *b)
{
	return b->last_seen && b->placed == b->msg_len;
}

/* Hand out the head buffer and advance the ring and the expected MSN. */
static void ddp_queue_pop(struct ddp_queue *q, struct ddp_delivery *d, uint32_t msg_len)
{
	struct ddp_rxbuf *b = &q->ring[q->head];

	d->cookie = b->cookie;
	d->addr = b->addr;
	d->msg_len = msg_len;
	d->msn = q->msn_head;
	d->rsvdulp = b->rsvdulp;
	d->rsvdulp2 = b->rsvdulp2;
	ddp_rxbuf_reset(b, NULL, 0, NULL);
	q->head = (q->head + 1) % q->depth;
	q->count--;
	q->msn_head++;
}

int ddp_queue_deliver(struct ddp_queue *q, struct ddp_delivery *d)
{
	if (q->count == 0 || !ddp_rxbuf_complete(&q->ring[q->head]))
		return 0;
	ddp_queue_pop(q, d, q->ring[q->head].msg_len);
	return 1;
}

int ddp_queue_flush(struct ddp_queue *q, struct ddp_delivery *d)
{
	if (q->count == 0)
		return 0;
	ddp_queue_pop(q, d, q->ring[q->head].placed);
	return 1;
}

/* a buffer nothing was placed into yet */
static bool ddp_rxbuf_untouched(const struct ddp_rxbuf *b)
{
	return !b->nranges && !b->last_seen;
}

int ddp_queue_pass(struct ddp_queue *q, uint32_t msn, bool take, struct ddp_delivery *d,
		   struct xs_err *err)
{
	xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_MSN_RANGE);
	if (msn != q->msn_head)
		return -EPROTO;
	if (take) {
		if (!q->count && q->refill && q->depth)
			q->refill(q->refill_ctx, q);
		if (!q->count) {
			xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_NO_BUFFER);
			return -EPROTO;
		}
		if (!ddp_rxbuf_untouched(&q->ring[q->head]))
			return -EPROTO;
		ddp_queue_pop(q, d, 0);
		return 0;
	}
	/* the posted buffers move up one MSN: none may hold a later
	 * message's octets already (a peer sending out of MSN order) */
	for (unsigned i = 0; i < q->count; i++)
		if (!ddp_rxbuf_untouched(&q->ring[(q->head + i) % q->depth]))
			return -EPROTO;
	memset(d, 0, sizeof(*d));
	d->msn = q->msn_head++;
	return 0;
}

void ddp_rx_init(struct ddp_rx *rx, ddp_tagged_resolve_fn resolve, void *ctx)
{
	memset(rx, 0, sizeof(*rx));
	rx->resolve = resolve;
	rx->resolve_ctx = ctx;
}

int ddp_rx_add_queue(struct ddp_rx *rx, struct ddp_queue *q)
{
	if (!q || q->qn >= DDP_MAX_QUEUES)
		return -EINVAL;
	if (rx->queues[q->qn] && rx->queues[q->qn] != q)
		return -EEXIST;
	rx->queues[q->qn] = q;
	return 0;
}

/* ---- Range set ---------------------------------------------------------
 * b->ranges is sorted by lo; ranges are disjoint and never adjacent (those
 * are merged), so b->placed is the sum of their lengths. */

/* Ranges that [lo, hi) overlaps or touches: n of them from *first on (when
 * n is 0, *first is where [lo, hi) would be inserted). */
static unsigned ddp_ranges_span(const struct ddp_rxbuf *b, uint32_t lo, uint32_t hi,
				unsigned *first)
{
	unsigned i = 0, j;

	while (i < b->nranges && b->ranges[i].hi < lo)
		i++;
	for (j = i; j < b->nranges && b->ranges[j].lo <= hi; j++)
		;
	*first = i;
	return j - i;
}

/* Ranges the set would hold after adding [lo, hi). */
static unsigned ddp_ranges_after(const struct ddp_rxbuf *b, uint32_t lo, uint32_t hi)
{
	unsigned first, n;

	if (lo == hi)
		return b->nranges;
	n = ddp_ranges_span(b, lo, hi, &first);
	return n ? b->nranges - n + 1u : b->nranges + 1u;
}

/* Add [lo, hi); the caller checked capacity with ddp_ranges_after. */
static void ddp_ranges_add(struct ddp_rxbuf *b, uint32_t lo, uint32_t hi)
{
	unsigned first, n;

	if (lo == hi)
		return;
	n = ddp_ranges_span(b, lo, hi, &first);
	if (n == 0) {
		memmove(&b->ranges[first + 1], &b->ranges[first],
			(b->nranges - first) * sizeof(b->ranges[0]));
		b->ranges[first] = (struct ddp_range){ lo, hi };
		b->nranges++;
		b->placed += hi - lo;
		return;
	}

	/* Merge [lo, hi) with ranges first..last into one. */
	unsigned last = first + n - 1;
	uint32_t old = 0;

	for (unsigned k = first; k <= last; k++)
		old += b->ranges[k].hi - b->ranges[k].lo;
	if (b->ranges[first].lo < lo)
		lo = b->ranges[first].lo;
	if (b->ranges[last].hi > hi)
		hi = b->ranges[last].hi;
	b->ranges[first] = (struct ddp_range){ lo, hi };
	memmove(&b->ranges[first + 1], &b->ranges[last + 1],
		(b->nranges - last - 1) * sizeof(b->ranges[0]));
	b->nranges = (uint16_t)(b->nranges - (n - 1));
	b->placed = b->placed - old + (hi - lo);
}

/* ---- Untagged ------------------------------------------------------------ */

static int ddp_untagged_err(struct xs_err *err, uint8_t etype, uint8_t ecode)
{
	xs_err_set(err, XS_LAYER_DDP, etype, ecode);
	return -EPROTO;
}

/* Every check an untagged segment must pass before any octet is written;
 * returns the buffer it belongs to. */
static int ddp_untagged_check(struct ddp_rx *rx, const struct ddp_hdr *h, uint32_t len,
			      struct ddp_rxbuf **out, struct xs_err *err)
{
	struct ddp_queue *q = h->qn < DDP_MAX_QUEUES ? rx->queues[h->qn] : NULL;

	if (!q)
		return ddp_untagged_err(err, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_INVALID_QN);

	uint32_t d = h->msn - q->msn_head;

	if (d >= DDP_MSN_HALF)
		return ddp_untagged_err(err, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_MSN_RANGE);
	/* only the next message in order takes a buffer on demand: a peer
	 * naming MSNs far ahead must not drain the owner's pool */
	if (d == q->count && q->refill && q->count < q->depth)
		q->refill(q->refill_ctx, q);
	if (d >= q->count)
		return ddp_untagged_err(err, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_NO_BUFFER);

	struct ddp_rxbuf *b = &q->ring[(q->head + d) % q->depth];
	uint64_t end = (uint64_t)h->mo + len;

	if (h->mo > b->len)
		return ddp_untagged_err(err, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_INVALID_MO);
	if (end > b->len)
		return ddp_untagged_err(err, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_TOO_LONG);
	/* Segments must agree on where the message ends. */
	if (b->last_seen) {
		if (end > b->msg_len || (h->last && end != b->msg_len))
			return ddp_untagged_err(err, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_TOO_LONG);
	} else if (h->last && b->nranges && b->ranges[b->nranges - 1].hi > end) {
		return ddp_untagged_err(err, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_TOO_LONG);
	}
	/* A peer scattering tiny pieces must not make us grow: refuse. */
	if (ddp_ranges_after(b, h->mo, (uint32_t)end) > DDP_OOO_MAX_RANGES)
		return ddp_untagged_err(err, DDP_ETYPE_CATASTROPHIC, DDP_ECODE_CATASTROPHIC);
	*out = b;
	return 0;
}

/* ---- Tagged -------------------------------------------------------------- */

static int ddp_tagged_check_wrap(const struct ddp_hdr *h, uint32_t len, struct xs_err *err)
{
	/* An end offset of exactly 2^64 counts as a wrap too: it is not
	 * representable, and bounds checks above us compute to + len. */
	if (len > UINT64_MAX - h->to) {
		xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_TO_WRAP);
		return -EPROTO;
	}
	return 0;
}

static int ddp_tagged_target(struct ddp_rx *rx, const struct ddp_hdr *h, uint32_t len,
			     uint8_t **dst, struct xs_err *err)
{
	int rc = ddp_tagged_check_wrap(h, len, err);

	if (rc)
		return rc;
	if (!rx->resolve) {
		/* No STag can be valid without a lookup. */
		xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_INVALID_STAG);
		return -EPROTO;
	}

	struct xs_err e = { XS_LAYER_DDP, DDP_ETYPE_CATASTROPHIC, DDP_ECODE_CATASTROPHIC };
	uint8_t *p = NULL;

	rc = rx->resolve(rx->resolve_ctx, h->stag, h->to, len, &p, &e);
	if (rc < 0) {
		xs_err_set(err, e.layer, e.etype, e.ecode);
		return rc;
	}
	if (rc > 0 || (!p && len)) {
		/* The lookup broke its contract: a local fault, not the peer's. */
		xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_CATASTROPHIC, DDP_ECODE_CATASTROPHIC);
		return -EFAULT;
	}
	*dst = p;
	return 0;
}

/* ---- Entry points -------------------------------------------------------- */

int ddp_rx_target(struct ddp_rx *rx, const struct ddp_hdr *h, uint32_t len, uint8_t **dst,
		  struct xs_err *err)
{
	if (h->tagged)
		return ddp_tagged_target(rx, h, len, dst, err);

	struct ddp_rxbuf *b;
	int rc = ddp_untagged_check(rx, h, len, &b, err);

	if (rc)
		return rc;
	/* No arithmetic on a NULL address (zero-length buffer). */
	*dst = b->addr ? b->addr + h->mo : NULL;
	return 0;
}

int ddp_rx_commit(struct ddp_rx *rx, const struct ddp_hdr *h, uint32_t len, struct xs_err *err)
{
	if (h->tagged)
		return ddp_tagged_check_wrap(h, len, err); /* nothing to track */

	struct ddp_rxbuf *b;
	int rc = ddp_untagged_check(rx, h, len, &b, err);

	if (rc)
		return rc;
	ddp_ranges_add(b, h->mo, h->mo + len);
	if (h->last) {
		b->last_seen = true;
		b->msg_len = h->mo + len;
	}
	b->rsvdulp = h->rsvdulp;
	b->rsvdulp2 = h->rsvdulp2;
	return 0;
}

int ddp_rx_place(struct ddp_rx *rx, const struct ddp_hdr *h, const uint8_t *payload,
		 uint32_t len, struct xs_err *err)
{
	uint8_t *dst = NULL;
	int rc = ddp_rx_target(rx, h, len, &dst, err);

	if (rc)
		return rc;
	if (len)
		memcpy(dst, payload, len);
	return ddp_rx_commit(rx, h, len, err);
}
