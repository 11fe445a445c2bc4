/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* DDP placement: a property test of untagged and tagged placement under
 * random reordering and duplication, one crafted segment per error with the
 * exact Terminate triple (and no octet written anywhere), flush, MSN wrap. */
#include "config.h"

#include <errno.h>

#include "tests/xs_test.h"
#include "ddp/ddp.h"
#include "util/xs_be.h"

#define CANARY 0xa5

#define CHECK_ERR(e, l, t, c)                                                        \
	do {                                                                         \
		CHECK_EQ_U((e).layer, (l));                                          \
		CHECK_EQ_U((e).etype, (t));                                          \
		CHECK_EQ_U((e).ecode, (c));                                          \
	} while (0)

/* ---- Every buffer the test owns, to prove failures write nothing -------- */

#define MAX_TRACKED 64

static struct {
	uint8_t *p;
	size_t len;
	uint8_t *copy;
} tracked[MAX_TRACKED];
static int ntracked;

/* malloc exactly len octets (ASan catches any overrun), canary filled. */
static uint8_t *tbuf(size_t len)
{
	REQUIRE(ntracked < MAX_TRACKED);
	uint8_t *p = malloc(len ? len : 1);
	REQUIRE(p);
	memset(p, CANARY, len);
	tracked[ntracked].p = p;
	tracked[ntracked].len = len;
	tracked[ntracked].copy = malloc(len ? len : 1);
	REQUIRE(tracked[ntracked].copy);
	ntracked++;
	return p;
}

static void snapshot(void)
{
	for (int i = 0; i < ntracked; i++)
		memcpy(tracked[i].copy, tracked[i].p, tracked[i].len);
}

static bool unchanged(void)
{
	for (int i = 0; i < ntracked; i++)
		if (memcmp(tracked[i].copy, tracked[i].p, tracked[i].len))
			return false;
	return true;
}

static void tfree_all(void)
{
	for (int i = 0; i < ntracked; i++) {
		free(tracked[i].p);
		free(tracked[i].copy);
	}
	ntracked = 0;
}

/* ---- Tagged lookup: a few registered regions ------------------------------ */

struct region {
	uint32_t stag;
	uint64_t va; /* TO of the first octet */
	uint8_t *base;
	uint32_t len;
	uint32_t pd;
	bool no_write; /* reported as RDMAP/1/0x02 (access rights) */
};

struct lookup {
	struct region r[8];
	int n;
	uint32_t pd; /* this stream's protection domain */
	unsigned calls;
};

static int resolve(void *ctx, uint32_t stag, uint64_t to, uint32_t len, uint8_t **dst,
		   struct xs_err *err)
{
	struct lookup *lk = ctx;

	lk->calls++;
	for (int i = 0; i < lk->n; i++) {
		const struct region *r = &lk->r[i];
		if (r->stag != stag)
			continue;
		if (r->pd != lk->pd) {
			xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_STAG_NOT_ASSOC);
			return -EPROTO;
		}
		if (r->no_write) {
			xs_err_set(err, XS_LAYER_RDMAP, 1, 0x02);
			return -EACCES;
		}
		/* DDP guarantees to + len does not wrap. */
		if (to < r->va || to + len > r->va + r->len) {
			xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_BASE_BOUNDS);
			return -EPROTO;
		}
		*dst = r->base + (to - r->va);
		return 0;
	}
	xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_INVALID_STAG);
	return -EPROTO;
}

/* ---- Segments ------------------------------------------------------------ */

struct seg {
	struct ddp_hdr h;
	const uint8_t *payload;
	uint32_t len;
	int msg; /* index into the round's messages */
	int idx; /* segment number within it */
};

static void shuffle(struct seg *s, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)xs_rand_below(i);
		struct seg t = s[i - 1];
		s[i - 1] = s[j];
		s[j] = t;
	}
}

/* Retransmissions (some segments twice when dups), then any order. */
static size_t retransmit_and_shuffle(struct seg *segs, size_t nseg, size_t cap, bool dups)
{
	if (dups) {
		size_t n = nseg;
		for (size_t i = 0; i < n && nseg < cap; i++)
			if (xs_rand_below(4) == 0)
				segs[nseg++] = segs[i];
	}
	shuffle(segs, nseg);
	return nseg;
}

/* Append the segments of one message; the MULPDU is random but keeps a
 * message within 2 * DDP_OOO_MAX_RANGES segments, so no order can
 * fragment it beyond the range set (that limit has its own test). */
static size_t segment(struct seg *out, size_t cap, const struct ddp_hdr *tmpl,
		      const uint8_t *data, size_t len, int msg)
{
	size_t hl = ddp_hdr_len(tmpl->tagged);
	size_t minpay = (len + 2 * DDP_OOO_MAX_RANGES - 1) / (2 * DDP_OOO_MAX_RANGES);
	size_t pay = 1 + (size_t)xs_rand_below(xs_rand64() & 1 ? 16 : 2000);
	struct ddp_segmenter sg;
	struct ddp_hdr h;
	size_t off, n, k = 0;

	if (pay < minpay)
		pay = minpay;
	REQUIRE(ddp_seg_init(&sg, tmpl, len, hl + pay) == 0);
	while (ddp_seg_next(&sg, &h, &off, &n)) {
		REQUIRE(k < cap);
		out[k] = (struct seg){ h, data + off, (uint32_t)n, msg, (int)k };
		k++;
	}
	CHECK_EQ_U(k, ddp_seg_count(len, hl + pay, tmpl->tagged));
	return k;
}

/* ---- Untagged property test ----------------------------------------------- */

#define PQ 2 /* queues used per round */
#define PMSG 10 /* messages per queue at most */
#define PSEG 4096

struct pmsg {
	uint8_t *data; /* original */
	uint32_t len;
	uint8_t *buf; /* posted buffer, len + slack octets */
	uint32_t buf_len;
	uint8_t rsvdulp;
	uint32_t rsvdulp2;
	unsigned nseg, nplaced; /* distinct segments placed */
	bool *seen;
};

static void untagged_round(bool dups, uint32_t msn_start)
{
	static struct seg segs[PSEG];
	struct pmsg m[PQ][PMSG];
	struct ddp_queue q[PQ];
	struct ddp_rx rx;
	const uint32_t qns[PQ] = { 0, 2 };
	unsigned nmsg[PQ], ndel[PQ];
	uint32_t start[PQ];
	size_t nseg = 0;

	ddp_rx_init(&rx, NULL, NULL);
	for (int qi = 0; qi < PQ; qi++) {
		unsigned depth = 1 + (unsigned)xs_rand_below(PMSG);
		start[qi] = msn_start + (uint32_t)xs_rand_below(3) - 1;
		REQUIRE(ddp_queue_init(&q[qi], qns[qi], depth, start[qi]) == 0);
		REQUIRE(ddp_rx_add_queue(&rx, &q[qi]) == 0);
		nmsg[qi] = 1 + (unsigned)xs_rand_below(depth);
		ndel[qi] = 0;
		for (unsigned i = 0; i < nmsg[qi]; i++) {
			struct pmsg *p = &m[qi][i];
			uint64_t r = xs_rand_below(10);

			p->len = r == 0 ? 0 : (uint32_t)xs_rand_below(r < 5 ? 64 : 6000);
			p->buf_len = p->len + (xs_rand64() & 1 ? 0 : (uint32_t)xs_rand_below(32));
			p->data = malloc(p->len ? p->len : 1);
			REQUIRE(p->data);
			xs_rand_fill(p->data, p->len);
			p->buf = tbuf(p->buf_len);
			p->rsvdulp = (uint8_t)xs_rand64();
			p->rsvdulp2 = (uint32_t)xs_rand64();
			REQUIRE(ddp_queue_post(&q[qi], p->buf, p->buf_len, p) == 0);

			struct ddp_hdr t = { .dv = DDP_VERSION, .rsvdulp = p->rsvdulp,
					     .rsvdulp2 = p->rsvdulp2, .qn = qns[qi],
					     .msn = start[qi] + i };
			size_t k = segment(segs + nseg, PSEG - nseg, &t, p->data, p->len,
					   qi * PMSG + (int)i);
			p->nseg = (unsigned)k;
			p->nplaced = 0;
			p->seen = calloc(k, sizeof(bool));
			REQUIRE(p->seen);
			nseg += k;
		}
	}
	nseg = retransmit_and_shuffle(segs, nseg, PSEG, dups);

	for (size_t s = 0; s < nseg; s++) {
		struct xs_err err = { 0 };
		const struct seg *sg = &segs[s];
		int qi = sg->msg / PMSG;
		struct pmsg *p = &m[qi][sg->msg % PMSG];

		int rc = ddp_rx_place(&rx, &sg->h, sg->payload, sg->len, &err);
		if ((unsigned)(sg->msg % PMSG) < ndel[qi]) {
			/* A duplicate of a delivered message: behind the MSN
			 * window now, refused, the buffer left alone. */
			CHECK_EQ_U(rc, -EPROTO);
			CHECK_ERR(err, 1, 2, 0x03);
			CHECK(p->len == 0 || memcmp(p->buf, p->data, p->len) == 0);
			continue;
		}
		if (rc) {
			fprintf(stderr, "place rc %d err %u/%u/%u\n", rc, err.layer,
				err.etype, err.ecode);
			REQUIRE(rc == 0);
		}
		if (!p->seen[sg->idx]) {
			p->seen[sg->idx] = true;
			p->nplaced++;
		}
		/* Deliver whatever is ready; it must be exactly the prefix of
		 * complete messages, in MSN order. */
		for (int j = 0; j < PQ; j++) {
			struct ddp_delivery d;

			while (ddp_queue_deliver(&q[j], &d) == 1) {
				REQUIRE(ndel[j] < nmsg[j]);
				struct pmsg *e = &m[j][ndel[j]];
				CHECK(d.cookie == e);
				CHECK(d.addr == e->buf);
				CHECK_EQ_U(d.msg_len, e->len);
				CHECK_EQ_U(d.msn, q[j].msn_head - 1);
				CHECK_EQ_U(d.rsvdulp, e->rsvdulp);
				CHECK_EQ_U(d.rsvdulp2, e->rsvdulp2);
				CHECK(e->len == 0 || memcmp(e->buf, e->data, e->len) == 0);
				ndel[j]++;
			}
			unsigned prefix = 0;
			while (prefix < nmsg[j] && m[j][prefix].nplaced == m[j][prefix].nseg)
				prefix++;
			REQUIRE(ndel[j] == prefix);
		}
	}
	for (int qi = 0; qi < PQ; qi++) {
		CHECK_EQ_U(ndel[qi], nmsg[qi]);
		CHECK_EQ_U(q[qi].count, 0);
		CHECK_EQ_U(q[qi].msn_head, start[qi] + nmsg[qi]);
		for (unsigned i = 0; i < nmsg[qi]; i++) {
			struct pmsg *p = &m[qi][i];
			CHECK(p->len == 0 || memcmp(p->buf, p->data, p->len) == 0);
			for (uint32_t k = p->len; k < p->buf_len; k++)
				CHECK_EQ_U(p->buf[k], CANARY);
			free(p->data);
			free(p->seen);
		}
		ddp_queue_destroy(&q[qi]);
	}
	tfree_all();
}

/* ---- Tagged property test --------------------------------------------------- */

static void tagged_round(bool dups)
{
	static struct seg segs[PSEG];
	struct lookup lk = { .pd = 7 };
	uint8_t *image[4], *covered[4];
	struct ddp_rx rx;
	size_t nseg = 0;

	ddp_rx_init(&rx, resolve, &lk);
	lk.n = 1 + (int)xs_rand_below(4);
	for (int i = 0; i < lk.n; i++) {
		struct region *r = &lk.r[i];
		r->stag = ((uint32_t)xs_rand64() & ~3u) | (uint32_t)i; /* distinct */
		r->len = 1 + (uint32_t)xs_rand_below(20000);
		/* Some regions reach the top of the TO space (an end of 2^64
		 * itself counts as a wrap). */
		r->va = xs_rand_below(3) == 0 ? UINT64_MAX - r->len : xs_rand64() >> 2;
		r->base = tbuf(r->len);
		r->pd = lk.pd;
		image[i] = malloc(r->len);
		covered[i] = calloc(r->len, 1);
		REQUIRE(image[i] && covered[i]);
		xs_rand_fill(image[i], r->len);
	}
	/* Several RDMA Writes / Read Responses into slices of the regions;
	 * overlapping ones carry the same bytes (slices of one image). */
	int nw = 1 + (int)xs_rand_below(8);
	for (int w = 0; w < nw; w++) {
		int i = (int)xs_rand_below((uint64_t)lk.n);
		struct region *r = &lk.r[i];
		uint32_t off = (uint32_t)xs_rand_below(r->len + 1);
		uint32_t len = (uint32_t)xs_rand_below(r->len - off + 1);
		struct ddp_hdr t = { .tagged = true, .dv = DDP_VERSION, .rsvdulp = 0x40,
				     .stag = r->stag, .to = r->va + off };

		nseg += segment(segs + nseg, PSEG - nseg, &t, image[i] + off, len, w);
		memset(covered[i] + off, 1, len);
	}
	nseg = retransmit_and_shuffle(segs, nseg, PSEG, dups);
	for (size_t s = 0; s < nseg; s++) {
		struct xs_err err = { 0 };
		REQUIRE(ddp_rx_place(&rx, &segs[s].h, segs[s].payload, segs[s].len, &err) == 0);
	}
	for (int i = 0; i < lk.n; i++) {
		for (uint32_t k = 0; k < lk.r[i].len; k++) {
			uint8_t want = covered[i][k] ? image[i][k] : CANARY;
			if (lk.r[i].base[k] != want) {
				CHECK_EQ_U(lk.r[i].base[k], want);
				break;
			}
		}
		free(image[i]);
		free(covered[i]);
	}
	tfree_all();
}

/* ---- Crafted errors ---------------------------------------------------------- */

static struct ddp_hdr uh(uint32_t qn, uint32_t msn, uint32_t mo, bool last)
{
	return (struct ddp_hdr){ .dv = DDP_VERSION, .rsvdulp = 0x43, .qn = qn, .msn = msn,
				 .mo = mo, .last = last };
}

static struct ddp_hdr th(uint32_t stag, uint64_t to)
{
	return (struct ddp_hdr){ .tagged = true, .last = true, .dv = DDP_VERSION,
				 .rsvdulp = 0x40, .stag = stag, .to = to };
}

/* Place and expect failure with the triple, no octet written anywhere, and
 * the same from target (commit must refuse too). */
static void expect_fail(struct ddp_rx *rx, struct ddp_hdr h, const uint8_t *pl, uint32_t len,
			uint8_t l, uint8_t t, uint8_t c, int line)
{
	struct xs_err err = { 0xff, 0xff, 0xff };
	uint8_t *dst = NULL;

	snapshot();
	int rc = ddp_rx_place(rx, &h, pl, len, &err);
	if (rc >= 0 || err.layer != l || err.etype != t || err.ecode != c) {
		fprintf(stderr, "line %d: rc %d err %u/%u/%u, want %u/%u/0x%02x\n", line, rc,
			err.layer, err.etype, err.ecode, l, t, c);
		xs_test_failures++;
	}
	CHECK(unchanged());
	err = (struct xs_err){ 0xff, 0xff, 0xff };
	CHECK(ddp_rx_target(rx, &h, len, &dst, &err) < 0);
	CHECK_ERR(err, l, t, c);
	err = (struct xs_err){ 0xff, 0xff, 0xff };
	CHECK(ddp_rx_commit(rx, &h, len, &err) < 0 || h.tagged);
}
#define EXPECT_FAIL(rx, h, pl, len, l, t, c) expect_fail(rx, h, pl, len, l, t, c, __LINE__)

static int place(struct ddp_rx *rx, struct ddp_hdr h, const uint8_t *pl, uint32_t len)
{
	struct xs_err err;
	return ddp_rx_place(rx, &h, pl, len, &err);
}

static void test_untagged_errors(void)
{
	static uint8_t pl[512];
	struct ddp_queue q0, q1;
	struct ddp_rx rx;
	struct ddp_delivery d;

	xs_rand_fill(pl, sizeof pl);
	ddp_rx_init(&rx, resolve, NULL);
	REQUIRE(ddp_queue_init(&q0, 0, 8, 1) == 0);
	REQUIRE(ddp_queue_init(&q1, 1, 2, 1) == 0);
	REQUIRE(ddp_rx_add_queue(&rx, &q0) == 0);
	REQUIRE(ddp_rx_add_queue(&rx, &q1) == 0);
	uint8_t *b[6];
	for (int i = 0; i < 6; i++) {
		b[i] = tbuf(i == 4 ? 300 : 100);
		REQUIRE(ddp_queue_post(&q0, b[i], i == 4 ? 300 : 100, b[i]) == 0);
	}
	uint8_t *c = tbuf(100);
	REQUIRE(ddp_queue_post(&q1, c, 100, c) == 0);

	/* Invalid QN: a hole below DDP_MAX_QUEUES, one beyond, a huge one. */
	EXPECT_FAIL(&rx, uh(3, 1, 0, true), pl, 10, 1, 2, 0x01);
	EXPECT_FAIL(&rx, uh(7, 1, 0, true), pl, 10, 1, 2, 0x01);
	EXPECT_FAIL(&rx, uh(0x80000000u, 1, 0, true), pl, 10, 1, 2, 0x01);
	/* MSN with no buffer: msn_head + count (and up to 2^31 ahead). */
	EXPECT_FAIL(&rx, uh(0, 1 + 6, 0, true), pl, 10, 1, 2, 0x02);
	EXPECT_FAIL(&rx, uh(1, 1 + 1, 0, true), pl, 10, 1, 2, 0x02);
	EXPECT_FAIL(&rx, uh(0, 1 + 0x7fffffffu, 0, true), pl, 10, 1, 2, 0x02);
	/* MSN range not valid: already delivered (msn_head - 1), or 2^31 ahead. */
	EXPECT_FAIL(&rx, uh(0, 0, 0, true), pl, 10, 1, 2, 0x03);
	EXPECT_FAIL(&rx, uh(0, 1 + 0x80000000u, 0, true), pl, 10, 1, 2, 0x03);
	/* MO beyond the buffer. */
	EXPECT_FAIL(&rx, uh(0, 1, 101, false), pl, 0, 1, 2, 0x04);
	EXPECT_FAIL(&rx, uh(0, 1, 0xffffffffu, false), pl, 2, 1, 2, 0x04);
	/* Message too long for the buffer; a 32-bit MO + len overflow too. */
	EXPECT_FAIL(&rx, uh(0, 1, 50, false), pl, 51, 1, 2, 0x05);
	EXPECT_FAIL(&rx, uh(0, 1, 0, true), pl, 101, 1, 2, 0x05);
	EXPECT_FAIL(&rx, uh(0, 1, 100, false), pl, 1, 1, 2, 0x05);
	EXPECT_FAIL(&rx, uh(0, 1, 90, false), NULL, 0xfffffff0u, 1, 2, 0x05);
	/* Edge cases that are fine: exactly filling, empty at the end. */
	CHECK_EQ_U(place(&rx, uh(0, 1, 50, false), pl, 50), 0);
	CHECK_EQ_U(place(&rx, uh(0, 1, 100, false), pl, 0), 0);
	CHECK_EQ_U(ddp_queue_deliver(&q0, &d), 0); /* no L yet */

	/* MSN 2: L says the message is 10 octets; others must agree. */
	CHECK_EQ_U(place(&rx, uh(0, 2, 0, true), pl, 10), 0);
	EXPECT_FAIL(&rx, uh(0, 2, 10, true), pl, 5, 1, 2, 0x05); /* second L, other end */
	EXPECT_FAIL(&rx, uh(0, 2, 5, true), pl, 4, 1, 2, 0x05); /* ends before */
	EXPECT_FAIL(&rx, uh(0, 2, 10, false), pl, 1, 1, 2, 0x05); /* beyond the end */
	EXPECT_FAIL(&rx, uh(0, 2, 11, false), pl, 0, 1, 2, 0x05);
	CHECK_EQ_U(place(&rx, uh(0, 2, 0, true), pl, 10), 0); /* duplicate L: fine */
	CHECK_EQ_U(place(&rx, uh(0, 2, 4, false), pl + 4, 6), 0); /* inside: fine */
	/* MSN 3: bytes already placed beyond what a later L claims. */
	CHECK_EQ_U(place(&rx, uh(0, 3, 20, false), pl, 10), 0);
	EXPECT_FAIL(&rx, uh(0, 3, 0, true), pl, 10, 1, 2, 0x05);
	EXPECT_FAIL(&rx, uh(0, 3, 10, true), pl, 19, 1, 2, 0x05);
	CHECK_EQ_U(place(&rx, uh(0, 3, 10, true), pl, 20), 0); /* ends at 30: fine */
	CHECK_EQ_U(place(&rx, uh(0, 3, 0, false), pl, 10), 0);

	/* MSN 5 (300 octets): fill the range set, one more is refused as a
	 * local catastrophic error, merging ones still go in. */
	for (uint32_t i = 0; i < DDP_OOO_MAX_RANGES; i++)
		REQUIRE(place(&rx, uh(0, 5, 2 * i, false), pl, 1) == 0);
	CHECK_EQ_U(q0.ring[(q0.head + 4) % q0.depth].nranges, DDP_OOO_MAX_RANGES);
	EXPECT_FAIL(&rx, uh(0, 5, 200, false), pl, 1, 1, 0, 0x00);
	EXPECT_FAIL(&rx, uh(0, 5, 200, true), pl, 1, 1, 0, 0x00);
	CHECK_EQ_U(place(&rx, uh(0, 5, 2, false), pl, 1), 0); /* duplicate */
	CHECK_EQ_U(place(&rx, uh(0, 5, 127, false), pl, 1), 0); /* adjacent */
	CHECK_EQ_U(place(&rx, uh(0, 5, 250, true), pl, 0), 0); /* empty L */
	CHECK_EQ_U(place(&rx, uh(0, 5, 1, false), pl, 1), 0); /* merges 0..3 */
	CHECK_EQ_U(place(&rx, uh(0, 5, 200, false), pl, 1), 0); /* room now */
	CHECK_EQ_U(q0.ring[(q0.head + 4) % q0.depth].placed, 64 + 1 + 1 + 1);
	/* Filling everything merges to one range and completes the message. */
	CHECK_EQ_U(place(&rx, uh(0, 5, 0, false), pl, 250), 0);
	CHECK_EQ_U(q0.ring[(q0.head + 4) % q0.depth].nranges, 1);
	CHECK_EQ_U(q0.ring[(q0.head + 4) % q0.depth].placed, 250);

	/* MSN 1 completes; 1, 2, 3 are delivered, 4 is not complete, 5 waits. */
	EXPECT_FAIL(&rx, uh(0, 1, 0, true), pl, 50, 1, 2, 0x05); /* 50..100 placed */
	CHECK_EQ_U(place(&rx, uh(0, 1, 0, true), pl, 100), 0);
	for (uint32_t msn = 1; msn <= 3; msn++) {
		REQUIRE(ddp_queue_deliver(&q0, &d) == 1);
		CHECK_EQ_U(d.msn, msn);
		CHECK(d.cookie == b[msn - 1]);
		CHECK_EQ_U(d.msg_len, msn == 1 ? 100 : msn == 2 ? 10 : 30);
		CHECK_EQ_U(d.rsvdulp, 0x43);
	}
	CHECK_EQ_U(ddp_queue_deliver(&q0, &d), 0);
	/* Delivered MSNs are now behind: range error. */
	EXPECT_FAIL(&rx, uh(0, 3, 0, true), pl, 30, 1, 2, 0x03);
	EXPECT_FAIL(&rx, uh(0, 1, 0, false), pl, 1, 1, 2, 0x03);

	/* Flush pops the head whatever its state. */
	CHECK_EQ_U(place(&rx, uh(0, 4, 10, false), pl, 7), 0);
	REQUIRE(ddp_queue_flush(&q0, &d) == 1);
	CHECK_EQ_U(d.msn, 4);
	CHECK_EQ_U(d.msg_len, 7);
	CHECK(d.cookie == b[3]);
	EXPECT_FAIL(&rx, uh(0, 4, 0, true), pl, 1, 1, 2, 0x03);
	REQUIRE(ddp_queue_deliver(&q0, &d) == 1); /* 5 was complete */
	CHECK_EQ_U(d.msn, 5);
	CHECK_EQ_U(d.msg_len, 250);
	CHECK_EQ_U(q0.count, 1);
	REQUIRE(ddp_queue_flush(&q0, &d) == 1);
	CHECK_EQ_U(d.msg_len, 0);
	CHECK_EQ_U(ddp_queue_flush(&q0, &d), 0);
	CHECK_EQ_U(ddp_queue_deliver(&q0, &d), 0);
	EXPECT_FAIL(&rx, uh(0, 7, 0, true), pl, 0, 1, 2, 0x02); /* nothing posted */

	/* Zero-length Send into a zero-length (NULL) buffer. */
	REQUIRE(ddp_queue_post(&q0, NULL, 0, &q0) == 0);
	EXPECT_FAIL(&rx, uh(0, 7, 0, true), pl, 1, 1, 2, 0x05);
	EXPECT_FAIL(&rx, uh(0, 7, 1, true), pl, 0, 1, 2, 0x04);
	CHECK_EQ_U(place(&rx, uh(0, 7, 0, true), NULL, 0), 0);
	REQUIRE(ddp_queue_deliver(&q0, &d) == 1);
	CHECK(d.cookie == &q0);
	CHECK_EQ_U(d.msg_len, 0);
	CHECK_EQ_U(d.msn, 7);

	/* Posting beyond the depth; queue registration. */
	for (int i = 0; i < 8; i++)
		REQUIRE(ddp_queue_post(&q0, b[0], 100, NULL) == 0);
	CHECK_EQ_U(ddp_queue_post(&q0, b[0], 100, NULL), -ENOSPC);
	struct ddp_queue bad;
	REQUIRE(ddp_queue_init(&bad, DDP_MAX_QUEUES, 1, 1) == 0);
	CHECK_EQ_U(ddp_rx_add_queue(&rx, &bad), -EINVAL);
	ddp_queue_destroy(&bad);
	CHECK_EQ_U(ddp_queue_init(&bad, 0, 0, 1), -EINVAL);

	/* QN 1 is independent of QN 0. */
	CHECK_EQ_U(place(&rx, uh(1, 1, 0, true), pl, 100), 0);
	REQUIRE(ddp_queue_deliver(&q1, &d) == 1);
	CHECK(memcmp(c, pl, 100) == 0);

	ddp_queue_destroy(&q0);
	ddp_queue_destroy(&q1);
	tfree_all();
}

static void test_target_commit(void)
{
	struct ddp_queue q;
	struct ddp_rx rx;
	struct ddp_delivery d;
	struct xs_err err;
	uint8_t *dst = NULL;
	uint8_t *b = tbuf(64);

	ddp_rx_init(&rx, NULL, NULL);
	REQUIRE(ddp_queue_init(&q, 0, 1, 1) == 0);
	REQUIRE(ddp_rx_add_queue(&rx, &q) == 0);
	REQUIRE(ddp_queue_post(&q, b, 64, NULL) == 0);
	struct ddp_hdr h = uh(0, 1, 16, true);
	REQUIRE(ddp_rx_target(&rx, &h, 8, &dst, &err) == 0);
	CHECK(dst == b + 16);
	memset(dst, 1, 8);
	CHECK_EQ_U(ddp_queue_deliver(&q, &d), 0); /* not committed yet */
	REQUIRE(ddp_rx_commit(&rx, &h, 8, &err) == 0);
	CHECK_EQ_U(ddp_queue_deliver(&q, &d), 0); /* 0..16 missing */
	h = uh(0, 1, 0, false);
	REQUIRE(ddp_rx_target(&rx, &h, 16, &dst, &err) == 0);
	CHECK(dst == b);
	REQUIRE(ddp_rx_commit(&rx, &h, 16, &err) == 0);
	REQUIRE(ddp_queue_deliver(&q, &d) == 1);
	CHECK_EQ_U(d.msg_len, 24);
	ddp_queue_destroy(&q);
	tfree_all();
}

static void test_tagged_errors(void)
{
	static uint8_t pl[256];
	struct lookup lk = { .pd = 7 };
	struct ddp_rx rx;

	xs_rand_fill(pl, sizeof pl);
	lk.r[0] = (struct region){ 0x1000, 0x10000, tbuf(100), 100, 7, false };
	lk.r[1] = (struct region){ 0x2000, UINT64_MAX - 10, tbuf(10), 10, 7, false };
	lk.r[2] = (struct region){ 0x3000, 0, tbuf(10), 10, 8, false };
	lk.r[3] = (struct region){ 0x4000, 0, tbuf(10), 10, 7, true };
	lk.n = 4;
	ddp_rx_init(&rx, resolve, &lk);

	/* TO wrap is DDP's own check: resolve is not even asked. */
	lk.calls = 0;
	EXPECT_FAIL(&rx, th(0x2000, UINT64_MAX - 5), pl, 7, 1, 1, 0x03);
	EXPECT_FAIL(&rx, th(0x2000, UINT64_MAX - 5), pl, 6, 1, 1, 0x03); /* ends at 2^64 */
	EXPECT_FAIL(&rx, th(0x9999, UINT64_MAX), pl, 1, 1, 1, 0x03);
	EXPECT_FAIL(&rx, th(0x1000, 1ull << 63), pl, 0x80000000u, 1, 1, 0x01);
	CHECK_EQ_U(lk.calls, 2); /* only the last two got through (place + target) */
	/* Ending at TO 2^64 - 1 is fine. */
	CHECK_EQ_U(place(&rx, th(0x2000, UINT64_MAX - 5), pl, 5), 0);
	CHECK(memcmp(lk.r[1].base + 5, pl, 5) == 0);
	CHECK_EQ_U(place(&rx, th(0x2000, UINT64_MAX), pl, 0), 0);

	/* Resolve's triples pass through verbatim. */
	EXPECT_FAIL(&rx, th(0x1001, 0x10000), pl, 10, 1, 1, 0x00); /* unknown STag */
	EXPECT_FAIL(&rx, th(0x1000, 0x10000 + 91), pl, 10, 1, 1, 0x01); /* past the end */
	EXPECT_FAIL(&rx, th(0x1000, 0xffff), pl, 10, 1, 1, 0x01); /* before the base */
	EXPECT_FAIL(&rx, th(0x3000, 0), pl, 1, 1, 1, 0x02); /* other PD */
	EXPECT_FAIL(&rx, th(0x4000, 0), pl, 1, 0, 1, 0x02); /* RDMAP access rights */
	CHECK_EQ_U(place(&rx, th(0x1000, 0x10000 + 90), pl, 10), 0);
	CHECK(memcmp(lk.r[0].base + 90, pl, 10) == 0);

	/* No lookup at all: every STag is invalid. */
	struct ddp_rx none;
	ddp_rx_init(&none, NULL, NULL);
	EXPECT_FAIL(&none, th(0x1000, 0x10000), pl, 1, 1, 1, 0x00);
	tfree_all();
}

/* Start at 0xfffffffe and run across the wrap, out of order. */
static void test_msn_wrap(void)
{
	static uint8_t pl[64];
	struct ddp_queue q;
	struct ddp_rx rx;
	struct ddp_delivery d;
	uint8_t *b[4];

	xs_rand_fill(pl, sizeof pl);
	ddp_rx_init(&rx, NULL, NULL);
	REQUIRE(ddp_queue_init(&q, 0, 4, 0xfffffffeu) == 0);
	REQUIRE(ddp_rx_add_queue(&rx, &q) == 0);
	for (int i = 0; i < 4; i++) {
		b[i] = tbuf(16);
		REQUIRE(ddp_queue_post(&q, b[i], 16, b[i]) == 0);
	}
	/* MSNs 0xfffffffe, 0xffffffff, 0, 1 arrive in reverse. */
	const uint32_t msn[4] = { 0xfffffffeu, 0xffffffffu, 0, 1 };
	for (int i = 3; i >= 1; i--) {
		CHECK_EQ_U(place(&rx, uh(0, msn[i], 0, true), pl + 4 * i, 16), 0);
		CHECK_EQ_U(ddp_queue_deliver(&q, &d), 0);
	}
	EXPECT_FAIL(&rx, uh(0, 2, 0, true), pl, 1, 1, 2, 0x02);
	EXPECT_FAIL(&rx, uh(0, 0xfffffffdu, 0, true), pl, 1, 1, 2, 0x03);
	CHECK_EQ_U(place(&rx, uh(0, msn[0], 0, true), pl, 16), 0);
	for (int i = 0; i < 4; i++) {
		REQUIRE(ddp_queue_deliver(&q, &d) == 1);
		CHECK_EQ_U(d.msn, msn[i]);
		CHECK(d.cookie == b[i]);
		CHECK(memcmp(b[i], pl + 4 * i, 16) == 0);
	}
	CHECK_EQ_U(q.msn_head, 2);
	EXPECT_FAIL(&rx, uh(0, 0xffffffffu, 0, true), pl, 1, 1, 2, 0x03);
	EXPECT_FAIL(&rx, uh(0, 1, 0, true), pl, 1, 1, 2, 0x03);
	ddp_queue_destroy(&q);
	tfree_all();
}

int main(void)
{
	xs_test_seed(5041);

	test_untagged_errors();
	test_target_commit();
	test_tagged_errors();
	test_msn_wrap();
	for (int i = 0; i < 1000; i++) {
		uint32_t start = i % 4 == 0 ? 0xfffffffeu : 1 + (uint32_t)xs_rand_below(1000);
		untagged_round(i % 2, start);
		tagged_round(i % 2);
	}
	return xs_test_result();
}
