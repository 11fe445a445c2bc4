/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* RFC 7306 wire part: opcode acceptance with and without the extension
 * agreed, Immediate Data, Atomic Request and Response layouts byte by
 * byte (offsets from RFC 7306 section 4), decode errors, and the atomic
 * operations (masked FetchAdd, Swap, CmpSwap) against a reference. */
#include "config.h"

#include <errno.h>

#include "iwarp/rdmap_ext.h"
#include "tests/xs_test.h"
#include "util/xs_be.h"

static void expect_triple(const struct xs_err *e, uint8_t l, uint8_t t, uint8_t c)
{
	CHECK_EQ_U(e->layer, l);
	CHECK_EQ_U(e->etype, t);
	CHECK_EQ_U(e->ecode, c);
}

static void check_opcodes(void)
{
	static const struct {
		uint8_t op;
		uint32_t qn;
	} ext[] = { { 0xa, 1 }, { 0xb, 3 }, { 0xc, 0 }, { 0xd, 0 } };

	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
		struct ddp_hdr h = { .dv = 1, .last = true, .rsvdulp = (uint8_t)(0x40 | ext[i].op),
				     .qn = ext[i].qn };
		struct xs_err e = { 9, 9, 9 };
		enum rdmap_opcode op;

		/* not agreed: unexpected OpCode, as before RFC 7306 */
		CHECK_EQ_U(rdmap_hdr_check(&h, &op, &e), -EPROTO);
		expect_triple(&e, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNEXPECTED_OP);
		CHECK_EQ_U(rdmap_hdr_check_ext(&h, false, &op, &e), -EPROTO);
		/* agreed: valid on its queue only, untagged only */
		CHECK_EQ_U(rdmap_hdr_check_ext(&h, true, &op, &e), 0);
		CHECK_EQ_U(op, ext[i].op);
		h.qn = (ext[i].qn + 1) % 4;
		CHECK_EQ_U(rdmap_hdr_check_ext(&h, true, &op, &e), -EPROTO);
		expect_triple(&e, XS_LAYER_DDP, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_INVALID_QN);
		h.qn = ext[i].qn;
		h.tagged = true;
		CHECK_EQ_U(rdmap_hdr_check_ext(&h, true, &op, &e), -EPROTO);
		expect_triple(&e, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNEXPECTED_OP);
	}
	/* 8, 9, 14, 15 stay reserved with the extension */
	for (unsigned op = 8; op < 16; op += (op == 9 ? 5 : 1)) {
		struct ddp_hdr h = { .dv = 1, .rsvdulp = (uint8_t)(0x40 | op) };
		struct xs_err e;

		CHECK_EQ_U(rdmap_hdr_check_ext(&h, true, NULL, &e), -EPROTO);
		expect_triple(&e, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNEXPECTED_OP);
	}
	/* RFC 5040 opcodes are unchanged by it */
	struct ddp_hdr w = { .tagged = true, .dv = 1, .rsvdulp = 0x40 };
	CHECK_EQ_U(rdmap_hdr_check_ext(&w, true, NULL, NULL), 0);
}

static void check_imm(void)
{
	uint8_t b[RDMAP_IMM_LEN + 1];
	uint64_t v = 0;
	struct xs_err e;

	memset(b, 0xee, sizeof b);
	rdmap_imm_encode(0x0102030405060708ull, b);
	static const uint8_t want[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	CHECK(memcmp(b, want, 8) == 0);
	CHECK_EQ_U(b[8], 0xee);
	CHECK_EQ_U(rdmap_imm_decode(b, 8, &v, &e), 0);
	CHECK_EQ_U(v, 0x0102030405060708ull);
	CHECK_EQ_U(rdmap_imm_decode(b, 9, &v, &e), -EPROTO);
	expect_triple(&e, XS_LAYER_DDP, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_TOO_LONG);
	for (size_t len = 0; len < 8; len++) {
		CHECK_EQ_U(rdmap_imm_decode(b, len, &v, &e), -EPROTO);
		expect_triple(&e, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNSPECIFIED);
	}
}

static void check_atomic_wire(void)
{
	uint8_t b[RDMAP_ATOMIC_REQ_LEN + 4];
	struct xs_err e;

	for (int i = 0; i < 1000; i++) {
		struct rdmap_atomic_req r = {
			.op = (uint8_t)(xs_rand64() % 3), .req_id = (uint32_t)xs_rand64(),
			.stag = (uint32_t)xs_rand64(), .to = xs_rand64(), .add_swap = xs_rand64(),
			.add_swap_mask = xs_rand64(), .compare = xs_rand64(),
			.compare_mask = xs_rand64(),
		}, d;
		memset(b, 0xee, sizeof b);
		rdmap_atomic_req_encode(&r, b);
		CHECK_EQ_U(b[RDMAP_ATOMIC_REQ_LEN], 0xee);
		CHECK_EQ_U(xs_get_be32(b), r.op); /* reserved bits zero */
		CHECK_EQ_U(xs_get_be32(b + 4), r.req_id);
		CHECK_EQ_U(xs_get_be32(b + 8), r.stag);
		CHECK_EQ_U(xs_get_be64(b + 12), r.to);
		CHECK_EQ_U(xs_get_be64(b + 20), r.add_swap);
		CHECK_EQ_U(xs_get_be64(b + 28), r.add_swap_mask);
		CHECK_EQ_U(xs_get_be64(b + 36), r.compare);
		CHECK_EQ_U(xs_get_be64(b + 44), r.compare_mask);
		/* reserved bits are ignored on receive */
		b[0] = 0xff;
		b[3] |= 0xf0;
		REQUIRE(rdmap_atomic_req_decode(b, RDMAP_ATOMIC_REQ_LEN, &d, &e) == 0);
		CHECK(memcmp(&d.req_id, &r.req_id, sizeof(r.req_id)) == 0);
		CHECK_EQ_U(d.op, r.op);
		CHECK_EQ_U(d.stag, r.stag);
		CHECK_EQ_U(d.to, r.to);
		CHECK_EQ_U(d.add_swap, r.add_swap);
		CHECK_EQ_U(d.add_swap_mask, r.add_swap_mask);
		CHECK_EQ_U(d.compare, r.compare);
		CHECK_EQ_U(d.compare_mask, r.compare_mask);
	}
	/* reserved operation codes */
	for (unsigned op = 3; op < 16; op++) {
		struct rdmap_atomic_req r = { .op = (uint8_t)op }, d;
		rdmap_atomic_req_encode(&r, b);
		CHECK_EQ_U(rdmap_atomic_req_decode(b, RDMAP_ATOMIC_REQ_LEN, &d, &e), -EPROTO);
		expect_triple(&e, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNEXPECTED_OP);
	}
	/* wrong lengths */
	for (size_t len = 0; len < sizeof b; len++) {
		struct rdmap_atomic_req d;
		if (len == RDMAP_ATOMIC_REQ_LEN)
			continue;
		CHECK_EQ_U(rdmap_atomic_req_decode(b, len, &d, &e), -EPROTO);
		expect_triple(&e, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNSPECIFIED);
	}
	/* alignment */
	for (uint64_t to = 0; to < 32; to++) {
		struct rdmap_atomic_req r = { .to = to };
		int rc = rdmap_atomic_req_check(&r, &e);
		CHECK_EQ_U(rc, to % 8 ? -EPROTO : 0);
		if (rc)
			expect_triple(&e, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP,
				      RDMAP_ECODE_UNSPECIFIED);
	}
	/* response */
	struct rdmap_atomic_resp rs = { .req_id = 0xa1b2c3d4, .value = 0x1122334455667788ull }, rd;
	uint8_t rb[RDMAP_ATOMIC_RESP_LEN];
	rdmap_atomic_resp_encode(&rs, rb);
	static const uint8_t want[12] = { 0xa1, 0xb2, 0xc3, 0xd4, 0x11, 0x22,
					  0x33, 0x44, 0x55, 0x66, 0x77, 0x88 };
	CHECK(memcmp(rb, want, sizeof want) == 0);
	CHECK_EQ_U(rdmap_atomic_resp_decode(rb, sizeof rb, &rd, &e), 0);
	CHECK_EQ_U(rd.req_id, rs.req_id);
	CHECK_EQ_U(rd.value, rs.value);
	CHECK_EQ_U(rdmap_atomic_resp_decode(rb, 11, &rd, &e), -EPROTO);
	expect_triple(&e, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNSPECIFIED);
}

/* masked add, bit by bit with 64-bit fields of width given by the mask */
static uint64_t ref_masked_add(uint64_t a, uint64_t b, uint64_t mask)
{
	uint64_t out = 0;
	unsigned lo = 0;

	for (unsigned i = 0; i < 64; i++) {
		if (((mask >> i) & 1) || i == 63) {
			unsigned w = i - lo + 1;
			uint64_t fm = w == 64 ? ~0ull : ((1ull << w) - 1) << lo;
			out |= (((a & fm) >> lo) + ((b & fm) >> lo)) << lo & fm;
			lo = i + 1;
		}
	}
	return out;
}

static void check_atomic_apply(void)
{
	uint64_t w;

	for (int i = 0; i < 2000; i++) {
		uint64_t old = xs_rand64(), a = xs_rand64(), m = i % 4 ? xs_rand64() : 0;
		struct rdmap_atomic_req r = { .op = RDMAP_ATOMIC_FETCH_ADD, .add_swap = a,
					      .add_swap_mask = m };
		w = old;
		CHECK_EQ_U(rdmap_atomic_apply(&r, &w), old);
		CHECK_EQ_U(w, ref_masked_add(old, a, m));
		if (!m)
			CHECK_EQ_U(w, old + a);

		uint64_t sm = i % 3 ? xs_rand64() : ~0ull;
		r = (struct rdmap_atomic_req){ .op = RDMAP_ATOMIC_SWAP, .add_swap = a,
					       .add_swap_mask = sm };
		w = old;
		CHECK_EQ_U(rdmap_atomic_apply(&r, &w), old);
		CHECK_EQ_U(w, (old & ~sm) | (a & sm));

		uint64_t cmp = i % 2 ? old : xs_rand64(), cm = i % 5 ? ~0ull : xs_rand64();
		r = (struct rdmap_atomic_req){ .op = RDMAP_ATOMIC_CMP_SWAP, .add_swap = a,
					       .add_swap_mask = ~0ull, .compare = cmp,
					       .compare_mask = cm };
		w = old;
		CHECK_EQ_U(rdmap_atomic_apply(&r, &w), old);
		CHECK_EQ_U(w, ((old ^ cmp) & cm) ? old : a);
	}
}

int main(void)
{
	xs_test_seed(7306);
	check_opcodes();
	check_imm();
	check_atomic_wire();
	check_atomic_apply();
	return xs_test_result();
}
