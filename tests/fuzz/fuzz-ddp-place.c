/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Fuzz DDP header decoding and placement (ddp/ddp_hdr.c, ddp_place.c,
 * ddp_seg.c) without MPA in front.
 *
 * Setup from the first 8 octets: three tagged regions and three untagged
 * queues (QN 0, 1, 2) with posted buffers, every one a heap block of exactly
 * its size, so ASan reports any octet placed outside them; delivered and
 * flushed buffers are freed at once, so a stale pointer is a use-after-free.
 * Then records until the input ends:
 *   op & 3 == 0  a segment: raw DDP header (14 or 18 octets by its T bit),
 *                payload length (16 bits), payload octets; placed with
 *                ddp_rx_place (op & 4) or ddp_rx_target + memcpy +
 *                ddp_rx_commit; errors are checked to write nothing
 *   op & 3 == 1  ddp_queue_deliver on queue (op >> 2) % 3
 *   op & 3 == 2  ddp_queue_flush on that queue
 *   op & 3 == 3  post a new buffer (length from the next octet) there
 * A model of each queue (posted buffers in order, MSN) checks deliveries:
 * the buffer posted for that MSN, msg_len within the buffer. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "ddp/ddp.h"
#include "tests/fuzz/fuzz.h"

#define NREG 3
#define NQ 3
#define QDEPTH_MAX 8

struct region {
	uint32_t stag;
	uint64_t base;
	uint32_t len;
	uint8_t *mem;
	bool no_access; /* resolve answers with an access error */
};

struct mbuf {
	uint8_t *addr;
	uint32_t len;
};

struct model_q {
	struct mbuf b[QDEPTH_MAX];
	unsigned head, count, depth;
	uint32_t msn;
};

struct st {
	struct region reg[NREG];
	struct ddp_queue q[NQ];
	struct model_q m[NQ];
	struct ddp_rx rx;
	unsigned refused;
};

static int resolve(void *ctx, uint32_t stag, uint64_t to, uint32_t len, uint8_t **dst,
		   struct xs_err *err)
{
	struct st *s = ctx;

	/* DDP promises no TO wrap here */
	FUZZ_ASSERT(len <= UINT64_MAX - to);
	for (int i = 0; i < NREG; i++) {
		struct region *r = &s->reg[i];

		if (r->stag != stag)
			continue;
		if (r->no_access) {
			xs_err_set(err, XS_LAYER_RDMAP, 1, 0x02);
			return -EACCES;
		}
		if (to < r->base || to - r->base > r->len || len > r->len - (to - r->base)) {
			xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_BASE_BOUNDS);
			return -ERANGE;
		}
		*dst = r->mem ? r->mem + (to - r->base) : NULL;
		return 0;
	}
	xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_INVALID_STAG);
	return -ENOENT;
}

static uint8_t *alloc_exact(uint32_t len)
{
	/* zero-length buffers are posted as NULL, as a verbs SGE of 0 may be */
	if (len == 0)
		return NULL;
	uint8_t *p = malloc(len);
	FUZZ_ASSERT(p);
	memset(p, 0xee, len);
	return p;
}

static void post(struct st *s, unsigned qi, uint32_t len)
{
	struct model_q *m = &s->m[qi];
	uint8_t *p = alloc_exact(len);
	int rc = ddp_queue_post(&s->q[qi], p, len, p);

	if (m->count == m->depth) {
		FUZZ_ASSERT(rc == -ENOSPC);
		free(p);
		return;
	}
	FUZZ_ASSERT(rc == 0);
	m->b[(m->head + m->count) % m->depth] = (struct mbuf){ p, len };
	m->count++;
}

/* Pop one delivered/flushed message from the model and check it. */
static void popped(struct st *s, unsigned qi, const struct ddp_delivery *d, bool flushed)
{
	struct model_q *m = &s->m[qi];

	FUZZ_ASSERT(m->count > 0);
	struct mbuf *b = &m->b[m->head];
	FUZZ_ASSERT(d->addr == b->addr && d->cookie == b->addr);
	FUZZ_ASSERT(d->msg_len <= b->len);
	FUZZ_ASSERT(d->msn == m->msn);
	(void)flushed;
	free(b->addr);
	m->head = (m->head + 1) % m->depth;
	m->count--;
	m->msn++;
}

/* FNV-1a style, eight octets a step (octet by octet it was a third of the
 * run time), over a buffer; the tail octet by octet. */
static uint64_t hash_buf(uint64_t h, const uint8_t *p, uint32_t len)
{
	uint32_t k = 0;

	for (; k + 8 <= len; k += 8) {
		uint64_t w;
		memcpy(&w, p + k, 8);
		h = (h ^ w) * 1099511628211ull;
		h ^= h >> 29;
	}
	for (; k < len; k++)
		h = (h ^ p[k]) * 1099511628211ull;
	return h;
}

/* A hash of every octet we own: a failed placement must change none. */
static uint64_t mem_hash(const struct st *s)
{
	uint64_t h = 1469598103934665603ull;

	for (int i = 0; i < NREG; i++)
		h = hash_buf(h, s->reg[i].mem, s->reg[i].len);
	for (int qi = 0; qi < NQ; qi++) {
		const struct model_q *m = &s->m[qi];
		for (unsigned j = 0; j < m->count; j++) {
			const struct mbuf *b = &m->b[(m->head + j) % m->depth];
			h = hash_buf(h, b->addr, b->len);
		}
	}
	return h;
}

/* [p, p + n) must lie inside what this segment may touch. */
static void check_dst(const struct st *s, const struct ddp_hdr *h, const uint8_t *p, uint32_t n)
{
	if (n == 0)
		return;
	FUZZ_ASSERT(p);
	if (h->tagged) {
		for (int i = 0; i < NREG; i++) {
			const struct region *r = &s->reg[i];
			if (r->stag == h->stag) {
				FUZZ_ASSERT(p == r->mem + (h->to - r->base));
				FUZZ_ASSERT(p + n <= r->mem + r->len);
				return;
			}
		}
		FUZZ_ASSERT(!"tagged target outside every region");
	}
	FUZZ_ASSERT(h->qn < NQ);
	const struct model_q *m = &s->m[h->qn];
	uint32_t d = h->msn - m->msn;
	FUZZ_ASSERT(d < m->count);
	const struct mbuf *b = &m->b[(m->head + d) % m->depth];
	FUZZ_ASSERT(p == b->addr + h->mo && (uint64_t)h->mo + n <= b->len);
}

/* Segmenting a message like this one gives contiguous, complete pieces. */
static void check_seg(const struct ddp_hdr *tmpl, size_t msg_len, size_t mulpdu)
{
	struct ddp_segmenter sg;

	if (ddp_seg_init(&sg, tmpl, msg_len, mulpdu) < 0) {
		FUZZ_ASSERT(mulpdu <= ddp_hdr_len(tmpl->tagged) ||
			    (tmpl->tagged && msg_len > UINT64_MAX - tmpl->to));
		return;
	}
	struct ddp_hdr h;
	size_t off, len, next = 0, cnt = 0;
	bool last = false;
	while (ddp_seg_next(&sg, &h, &off, &len)) {
		FUZZ_ASSERT(!last && off == next);
		FUZZ_ASSERT(len + ddp_hdr_len(h.tagged) <= mulpdu);
		FUZZ_ASSERT(len > 0 || msg_len == 0);
		if (h.tagged)
			FUZZ_ASSERT(h.to == tmpl->to + off);
		else
			FUZZ_ASSERT(h.mo == off && h.qn == tmpl->qn && h.msn == tmpl->msn);
		last = h.last;
		next = off + len;
		cnt++;
	}
	FUZZ_ASSERT(last && next == msg_len);
	FUZZ_ASSERT(cnt == ddp_seg_count(msg_len, mulpdu, tmpl->tagged));
}

static void segment(struct st *s, struct fuzz_in *in, uint8_t op)
{
	uint8_t hb[DDP_MAX_HDR_LEN] = { 0 };
	size_t hl = ddp_hdr_len_from_byte(in->off < in->len ? in->p[in->off] : 0);

	for (size_t i = 0; i < hl; i++)
		hb[i] = fuzz_u8(in);
	/* up to 2 KiB: far beyond every buffer and region here */
	uint16_t plen = fuzz_u16(in) & 0x7ff;
	uint8_t *payload = malloc(plen ? plen : 1);
	FUZZ_ASSERT(payload);
	size_t have = fuzz_left(in) < plen ? fuzz_left(in) : plen;
	memcpy(payload, in->p + in->off, have);
	in->off += have;
	memset(payload + have, 0xa5, plen - have);

	struct ddp_hdr h;
	struct xs_err err = { 0xff, 0xff, 0xff };
	/* a short header is "need more", never an error */
	FUZZ_ASSERT(ddp_hdr_decode(hb, hl - 1, &h, &err) == -EAGAIN);
	int rc = ddp_hdr_decode(hb, hl, &h, &err);
	if (rc < 0) {
		FUZZ_ASSERT(rc == -EPROTO && err.layer == XS_LAYER_DDP);
		FUZZ_ASSERT(h.dv != DDP_VERSION);
		goto out;
	}
	FUZZ_ASSERT(h.dv == DDP_VERSION && ddp_hdr_len(h.tagged) == hl);
	/* re-encode: same octets apart from the reserved bits */
	uint8_t re[DDP_MAX_HDR_LEN];
	FUZZ_ASSERT(ddp_hdr_encode(&h, re) == hl);
	FUZZ_ASSERT(re[0] == (hb[0] & (uint8_t)~DDP_RSVD_MASK) && memcmp(re + 1, hb + 1, hl - 1) == 0);
	check_seg(&h, plen, (size_t)(op >> 3) * 97 + hl);

	uint8_t *dst = NULL;
	rc = ddp_rx_target(&s->rx, &h, plen, &dst, &err);
	if (rc < 0) {
		/* no octet may change on a refused segment (hashing all memory
		 * is the slow part: the first few refusals of each input) */
		bool hash = s->refused++ < 8;
		uint64_t before = hash ? mem_hash(s) : 0;
		struct xs_err e2 = { 0xff, 0xff, 0xff };
		FUZZ_ASSERT(ddp_rx_place(&s->rx, &h, payload, plen, &e2) == rc);
		FUZZ_ASSERT(e2.layer == err.layer && e2.etype == err.etype && e2.ecode == err.ecode);
		FUZZ_ASSERT(!hash || mem_hash(s) == before);
		FUZZ_ASSERT(err.layer <= XS_LAYER_DDP);
		goto out;
	}
	check_dst(s, &h, dst, plen);
	if (op & 4) {
		FUZZ_ASSERT(ddp_rx_place(&s->rx, &h, payload, plen, &err) == 0);
	} else {
		if (plen)
			memcpy(dst, payload, plen);
		FUZZ_ASSERT(ddp_rx_commit(&s->rx, &h, plen, &err) == 0);
	}
	if (plen)
		FUZZ_ASSERT(memcmp(dst, payload, plen) == 0);
out:
	free(payload);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 8)
		return 0;
	struct fuzz_in in = { data, size, 0 };
	struct st *s = calloc(1, sizeof(*s));
	FUZZ_ASSERT(s);

	uint8_t c0 = fuzz_u8(&in), c1 = fuzz_u8(&in), c2 = fuzz_u8(&in), c3 = fuzz_u8(&in);
	uint32_t msn0 = fuzz_u32(&in);

	s->reg[0] = (struct region){ .stag = 0x100, .base = 0, .len = 1u + c1 };
	s->reg[1] = (struct region){ .stag = 0x200, .base = 0x10000, .len = (uint32_t)c2 * 4 };
	/* a region ending at the top of the TO space */
	s->reg[2] = (struct region){ .stag = 0x300, .base = UINT64_MAX - 511, .len = 512 };
	if (c0 & 0x80)
		s->reg[1].no_access = true;
	for (int i = 0; i < NREG; i++)
		s->reg[i].mem = alloc_exact(s->reg[i].len);
	ddp_rx_init(&s->rx, resolve, s);
	for (unsigned qi = 0; qi < NQ; qi++) {
		unsigned depth = 1 + ((c3 >> qi) & 7) % QDEPTH_MAX;
		uint32_t msn = qi == 0 ? msn0 : 1;

		FUZZ_ASSERT(ddp_queue_init(&s->q[qi], qi, depth, msn) == 0);
		FUZZ_ASSERT(ddp_rx_add_queue(&s->rx, &s->q[qi]) == 0);
		s->m[qi].depth = depth;
		s->m[qi].msn = msn;
		/* posted: c0 selects how many, sizes 0, 16, 28, 64, ... */
		unsigned n = (c0 >> (2 * qi)) & 3;
		for (unsigned j = 0; j < n; j++) {
			static const uint32_t sizes[4] = { 64, 28, 0, 300 };
			post(s, qi, sizes[(j + qi) & 3]);
		}
	}
	FUZZ_ASSERT(ddp_rx_add_queue(&s->rx, &s->q[0]) == 0); /* same queue again: fine */

	while (fuzz_left(&in) > 0) {
		uint8_t op = fuzz_u8(&in);
		unsigned qi = (op >> 2) % NQ;
		struct ddp_delivery d;

		switch (op & 3) {
		case 0:
			segment(s, &in, op);
			break;
		case 1:
			while (ddp_queue_deliver(&s->q[qi], &d) == 1)
				popped(s, qi, &d, false);
			break;
		case 2:
			if (ddp_queue_flush(&s->q[qi], &d) == 1)
				popped(s, qi, &d, true);
			else
				FUZZ_ASSERT(s->m[qi].count == 0);
			break;
		default:
			post(s, qi, fuzz_u8(&in) * 3u);
			break;
		}
	}

	for (unsigned qi = 0; qi < NQ; qi++) {
		struct ddp_delivery d;
		while (ddp_queue_deliver(&s->q[qi], &d) == 1)
			popped(s, qi, &d, false);
		while (ddp_queue_flush(&s->q[qi], &d) == 1)
			popped(s, qi, &d, true);
		FUZZ_ASSERT(s->m[qi].count == 0);
		ddp_queue_destroy(&s->q[qi]);
	}
	for (int i = 0; i < NREG; i++)
		free(s->reg[i].mem);
	free(s);
	return 0;
}
