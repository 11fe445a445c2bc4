/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Fuzz the whole receive path: iw_rx_input (MPA deframing, DDP headers,
 * RDMAP checks, placement, in-order delivery) with an owner like
 * tests/test-iw-stream.c's, then the RDMAP decoders on what is delivered
 * (Read Requests on QN 1, Terminates on QN 2, both layouts).
 *
 * Input: 4 config octets, then the payload.
 *   c[0] bits 0-1 mode: 0 raw stream, CRC off; 1 raw stream, CRC on (almost
 *        nothing random passes it); 2 the harness frames the payload itself
 *        with CRC on: it is a list of ULPDUs, each prefixed by a 16-bit
 *        length, framed with mpa_tx_frame_copy, so DDP/RDMAP see the
 *        fuzzer's bytes through a CRC-checked stream; 3 the same, CRC off
 *        bit 2 Markers; bits 3-4 chunking (whole / one octet / sizes from
 *        c[1] / c[1]-sized chunks with direct placement via iw_rx_direct)
 *        bits 5-7 posted Send buffer sizes
 *   c[1] chunk size; c[2] region size (bit 0: RFC 7306 agreed); c[3]
 *   max_ulpdu / 256 (0 = 65535)
 * Every region and posted buffer is a heap block of exactly its size. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "iwarp/iw_stream.h"
#include "iwarp/rdmap_ext.h"
#include "tests/fuzz/fuzz.h"

#define NREG 2
#define NBUF 8

struct region {
	uint32_t stag;
	uint64_t base;
	uint32_t len;
	uint8_t *mem;
};

struct posted {
	uint8_t *addr;
	uint32_t len;
};

struct owner {
	struct region reg[NREG];
	struct ddp_queue q[3];
	struct posted bufs[3][NBUF];
	unsigned delivered[3], tagged_last;
	uint64_t placed_hint;
};

static int resolve(void *ctx, uint32_t stag, uint64_t to, uint32_t len, uint8_t **dst,
		   struct xs_err *err)
{
	struct owner *o = ctx;

	FUZZ_ASSERT(len <= UINT64_MAX - to);
	for (int i = 0; i < NREG; i++) {
		struct region *r = &o->reg[i];

		if (r->stag != stag)
			continue;
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

static void check_read_req(const uint8_t *p, uint32_t len)
{
	struct rdmap_read_req rr;
	struct xs_err err = { 0xff, 0xff, 0xff };
	int rc = rdmap_read_req_decode(p, len, &rr, &err);

	if (len != RDMAP_READ_REQ_LEN) {
		FUZZ_ASSERT(rc == -EPROTO && err.layer == XS_LAYER_RDMAP);
		return;
	}
	FUZZ_ASSERT(rc == 0);
	uint8_t re[RDMAP_READ_REQ_LEN];
	rdmap_read_req_encode(&rr, re);
	FUZZ_ASSERT(memcmp(re, p, RDMAP_READ_REQ_LEN) == 0);
}

/* RFC 7306 bodies: what decodes re-encodes to the same octets (the
 * Atomic Request's reserved bits excepted), anything else is a Terminate
 * triple, and an atomic on any word never faults */
static void check_ext(const uint8_t *p, size_t len)
{
	struct xs_err err = { 0xff, 0xff, 0xff };
	struct rdmap_atomic_req ar;
	struct rdmap_atomic_resp rs;
	uint64_t imm;

	if (rdmap_imm_decode(p, len, &imm, &err) == 0) {
		uint8_t re[RDMAP_IMM_LEN];
		rdmap_imm_encode(imm, re);
		FUZZ_ASSERT(len == RDMAP_IMM_LEN && memcmp(re, p, len) == 0);
	} else {
		FUZZ_ASSERT(err.layer != 0xff);
	}
	int rc = rdmap_atomic_req_decode(p, len, &ar, &err);
	if (rc == 0) {
		uint8_t re[RDMAP_ATOMIC_REQ_LEN];
		uint64_t word = imm;
		rdmap_atomic_req_encode(&ar, re);
		FUZZ_ASSERT(memcmp(re + 4, p + 4, RDMAP_ATOMIC_REQ_LEN - 4) == 0);
		FUZZ_ASSERT((re[3] & 0x0f) == (p[3] & 0x0f));
		(void)rdmap_atomic_req_check(&ar, &err);
		(void)rdmap_atomic_apply(&ar, &word);
	} else {
		FUZZ_ASSERT(rc == -EPROTO && err.layer == XS_LAYER_RDMAP);
	}
	if (rdmap_atomic_resp_decode(p, len, &rs, &err) == 0) {
		uint8_t re[RDMAP_ATOMIC_RESP_LEN];
		rdmap_atomic_resp_encode(&rs, re);
		FUZZ_ASSERT(memcmp(re, p, len) == 0);
	}
}

static bool term_equal(const struct rdmap_term *a, const struct rdmap_term *b)
{
	return a->cause.layer == b->cause.layer && a->cause.etype == b->cause.etype &&
	       a->cause.ecode == b->cause.ecode && a->m == b->m && a->d == b->d && a->r == b->r &&
	       (!a->m || a->ddp_seg_len == b->ddp_seg_len) && a->ddp_hdr_len == b->ddp_hdr_len &&
	       memcmp(a->ddp_hdr, b->ddp_hdr, a->ddp_hdr_len) == 0 &&
	       a->rdmap_hdr_len == b->rdmap_hdr_len &&
	       memcmp(a->rdmap_hdr, b->rdmap_hdr, a->rdmap_hdr_len) == 0;
}

static void check_term(const uint8_t *p, uint32_t len)
{
	for (int siw = 0; siw < 2; siw++) {
		struct rdmap_term t, back;
		struct xs_err err = { 0xff, 0xff, 0xff };
		int rc = siw ? rdmap_term_decode_siw(p, len, &t, &err) : rdmap_term_decode(p, len, &t, &err);

		if (rc < 0) {
			FUZZ_ASSERT(rc == -EPROTO && err.layer == XS_LAYER_RDMAP);
			continue;
		}
		FUZZ_ASSERT(rc == 0 && !(t.m && !t.d));
		/* what was decoded encodes (RFC layout) and decodes back */
		uint8_t re[RDMAP_TERM_MAX_LEN];
		ssize_t n = rdmap_term_encode(&t, re, sizeof(re));
		FUZZ_ASSERT(n > 0 && (siw || (size_t)n == len));
		FUZZ_ASSERT(rdmap_term_decode(re, (size_t)n, &back, &err) == 0);
		FUZZ_ASSERT(term_equal(&t, &back));
		/* the RDMA header a Terminate quotes is a Read Request */
		if (t.r)
			check_read_req(t.rdmap_hdr, t.rdmap_hdr_len);
		if (t.d) {
			struct ddp_hdr h;
			(void)ddp_hdr_decode(t.ddp_hdr, t.ddp_hdr_len, &h, &err);
		}
	}
}

/* An RFC 7306 Atomic Request as delivered on QN 1: the stream passes on
 * any length (the QP answers a wrong one with a Terminate), so the
 * decoder refuses all but 52 octets with an RDMAP error, and what it
 * takes re-encodes to the same request. */
static void check_atomic_req(const uint8_t *p, uint32_t len)
{
	struct rdmap_atomic_req r, back;
	struct xs_err err = { 0xff, 0xff, 0xff };
	int rc = rdmap_atomic_req_decode(p, len, &r, &err);

	if (rc) {
		FUZZ_ASSERT(rc == -EPROTO && err.layer == XS_LAYER_RDMAP);
		return;
	}
	FUZZ_ASSERT(len == RDMAP_ATOMIC_REQ_LEN);
	uint8_t re[RDMAP_ATOMIC_REQ_LEN];
	rdmap_atomic_req_encode(&r, re);
	FUZZ_ASSERT(rdmap_atomic_req_decode(re, sizeof(re), &back, &err) == 0);
	FUZZ_ASSERT(r.op == back.op && r.req_id == back.req_id && r.stag == back.stag &&
		    r.to == back.to && r.add_swap == back.add_swap &&
		    r.add_swap_mask == back.add_swap_mask && r.compare == back.compare &&
		    r.compare_mask == back.compare_mask);
}

static void on_deliver(void *ctx, enum rdmap_opcode op, uint32_t qn, const struct ddp_delivery *d)
{
	struct owner *o = ctx;

	FUZZ_ASSERT(qn < 3);
	const struct posted *b = d->cookie;
	if (op == RDMAP_OP_IMM_DATA || op == RDMAP_OP_IMM_DATA_SE) {
		/* RFC 7306 (c[2] bit 0): its 8 octets are the stream's, the
		 * buffer (none when attached to a Send) gets nothing */
		FUZZ_ASSERT(qn == RDMAP_QN_SEND && d->msg_len == RDMAP_IMM_LEN && d->addr);
		FUZZ_ASSERT(!b || (b >= o->bufs[0] && b < o->bufs[0] + NBUF));
		o->delivered[qn]++;
		return;
	}
	FUZZ_ASSERT(b && b->addr == d->addr && d->msg_len <= b->len);
	switch (op) {
	case RDMAP_OP_SEND:
	case RDMAP_OP_SEND_INV:
	case RDMAP_OP_SEND_SE:
	case RDMAP_OP_SEND_SE_INV:
		FUZZ_ASSERT(qn == RDMAP_QN_SEND);
		break;
	case RDMAP_OP_READ_REQ:
		FUZZ_ASSERT(qn == RDMAP_QN_READ_REQ);
		check_read_req(d->addr, d->msg_len);
		break;
	case RDMAP_OP_TERMINATE:
		FUZZ_ASSERT(qn == RDMAP_QN_TERMINATE);
		check_term(d->addr, d->msg_len);
		break;
	case RDMAP_OP_ATOMIC_REQ: /* RFC 7306 agreed (c[2] bit 0) */
		FUZZ_ASSERT(qn == RDMAP_QN_READ_REQ);
		check_atomic_req(d->addr, d->msg_len);
		break;
	default:
		FUZZ_ASSERT(!"untagged delivery with a tagged or unknown opcode");
	}
	o->delivered[qn]++;
}

static void on_tagged_last(void *ctx, enum rdmap_opcode op, const struct ddp_hdr *h)
{
	struct owner *o = ctx;

	FUZZ_ASSERT(op == RDMAP_OP_WRITE || op == RDMAP_OP_READ_RESP);
	FUZZ_ASSERT(h->tagged && h->last);
	o->tagged_last++;
}

static const struct iw_rx_ops ops = { .deliver = on_deliver, .tagged_last = on_tagged_last };

static uint8_t *alloc_exact(uint32_t len)
{
	if (len == 0)
		return NULL;
	uint8_t *p = malloc(len);
	FUZZ_ASSERT(p);
	memset(p, 0xee, len);
	return p;
}

static void owner_init(struct owner *o, struct iw_rx *rx, const uint8_t *c)
{
	static const uint32_t send_sizes[8][2] = { { 64, 64 }, { 0, 16 }, { 1, 300 }, { 4096, 8 },
						   { 16, 0 }, { 100, 2 }, { 9000, 1 }, { 33, 33 } };
	const uint32_t *ss = send_sizes[c[0] >> 5];

	o->reg[0] = (struct region){ .stag = 0x0a0b0c0d, .base = 0x10000, .len = 64 };
	o->reg[1] = (struct region){ .stag = 0x77, .base = 0x100000, .len = (uint32_t)c[2] * 16 };
	for (int i = 0; i < NREG; i++)
		o->reg[i].mem = alloc_exact(o->reg[i].len);
	iw_rx_init(rx, c[0] & 4, (c[0] & 3) == 1 || (c[0] & 3) == 2, (size_t)c[3] * 256, resolve, o,
		   &ops, o);
	rx->ext = c[2] & 1; /* RFC 7306 opcodes agreed */
	for (uint32_t qn = 0; qn < 3; qn++) {
		FUZZ_ASSERT(ddp_queue_init(&o->q[qn], qn, NBUF, 1) == 0);
		FUZZ_ASSERT(ddp_rx_add_queue(&rx->ddp, &o->q[qn]) == 0);
		for (unsigned i = 0; i < NBUF; i++) {
			uint32_t len = qn == RDMAP_QN_SEND ? ss[i & 1]
				       : qn == RDMAP_QN_READ_REQ ? RDMAP_READ_REQ_LEN
								 : RDMAP_TERM_MAX_LEN;
			struct posted *b = &o->bufs[qn][i];
			b->addr = alloc_exact(len);
			b->len = len;
			FUZZ_ASSERT(ddp_queue_post(&o->q[qn], b->addr, len, b) == 0);
		}
	}
}

static void owner_fini(struct owner *o)
{
	for (int qn = 0; qn < 3; qn++) {
		struct ddp_delivery d;

		while (ddp_queue_flush(&o->q[qn], &d) == 1) {
			const struct posted *b = d.cookie;
			FUZZ_ASSERT(b && d.msg_len <= b->len);
		}
		ddp_queue_destroy(&o->q[qn]);
		for (int i = 0; i < NBUF; i++)
			free(o->bufs[qn][i].addr);
	}
	for (int i = 0; i < NREG; i++)
		free(o->reg[i].mem);
}

/* Mode 2/3: the payload is [len16 ULPDU]...; frame each ULPDU. */
static uint8_t *frame_all(const uint8_t *p, size_t len, bool markers, bool crc, size_t *out_len)
{
	struct mpa_tx tx;
	size_t total = 0, off = 0;

	/* pass 1: sizes */
	mpa_tx_init(&tx, markers, crc);
	while (off + 2 <= len) {
		size_t u = (size_t)p[off] << 8 | p[off + 1];
		off += 2;
		if (u > len - off)
			u = len - off;
		size_t wl = mpa_tx_wire_len(&tx, u);
		total += wl;
		tx.pos += (uint32_t)wl;
		off += u;
	}
	uint8_t *out = malloc(total ? total : 1);
	FUZZ_ASSERT(out);
	/* pass 2: frame */
	mpa_tx_init(&tx, markers, crc);
	size_t w = 0;
	off = 0;
	while (off + 2 <= len) {
		size_t u = (size_t)p[off] << 8 | p[off + 1];
		off += 2;
		if (u > len - off)
			u = len - off;
		struct iovec v = { (void *)(uintptr_t)(p + off), u };
		ssize_t n = mpa_tx_frame_copy(&tx, &v, 1, out + w, total - w);
		FUZZ_ASSERT(n > 0 && (size_t)n <= total - w);
		w += (size_t)n;
		off += u;
	}
	FUZZ_ASSERT(w == total);
	*out_len = total;
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 4)
		return 0;
	const uint8_t *c = data;
	check_ext(data + 4, size - 4 < 64 ? size - 4 : 64);
	unsigned mode = c[0] & 3, chunking = (c[0] >> 3) & 3;
	bool markers = c[0] & 4;
	size_t len = size - 4;
	uint8_t *stream;

	if (mode >= 2) {
		stream = frame_all(data + 4, len, markers, mode == 2, &len);
	} else {
		stream = malloc(len ? len : 1);
		FUZZ_ASSERT(stream);
		memcpy(stream, data + 4, len);
	}

	struct owner *o = calloc(1, sizeof(*o));
	struct iw_rx *rx = malloc(sizeof(*rx));
	FUZZ_ASSERT(o && rx);
	owner_init(o, rx, c);

	size_t off = 0;
	struct xs_err err = { 0xff, 0xff, 0xff };
	int rc = 0;

	while (off < len && rc == 0) {
		size_t n = chunking == 0 ? len - off : chunking == 1 ? 1 : (size_t)c[1] + 1;

		if (n > len - off)
			n = len - off;
		if (chunking == 3) {
			uint8_t *dst = NULL;
			size_t w = iw_rx_direct(rx, &dst);

			if (w > 0) {
				/* receive straight into the destination */
				size_t take = w < len - off ? w : len - off;
				memcpy(dst, stream + off, take);
				rc = iw_rx_direct_done(rx, take, &err);
				FUZZ_ASSERT(rc == 0);
				/* more than the window is refused, nothing changes */
				size_t w2 = iw_rx_direct(rx, &dst);
				if (w2 > 0) {
					struct xs_err e2;
					FUZZ_ASSERT(iw_rx_direct_done(rx, w2 + 1, &e2) < 0);
					FUZZ_ASSERT(e2.layer == XS_LAYER_LLP);
				}
				off += take;
				continue;
			}
		}
		rc = iw_rx_input(rx, stream + off, n, &err);
		off += n;
	}
	if (rc < 0) {
		/* iw_stream.h: every stream error is -EPROTO (regression input:
		 * crashes/fuzz-rdmap-rx/errno-passthrough-unknown-stag) */
		FUZZ_ASSERT(rc == -EPROTO);
		FUZZ_ASSERT(err.layer <= XS_LAYER_LLP && err.etype <= 0xf);
		/* the Terminate we would send carries a triple the RFCs define */
		FUZZ_ASSERT(xs_err_lookup(&err) != NULL);
	}
	if (mode >= 2 && rc < 0)
		FUZZ_ASSERT(!(err.layer == XS_LAYER_LLP && err.ecode == MPA_ECODE_CRC));

	owner_fini(o);
	free(o);
	free(rx);
	free(stream);
	return 0;
}
