/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* RDMAP control byte, opcode table, rdmap_hdr_check over every opcode x
 * buffer model x QN, and the Read Request header, including the real Read
 * Request siw sent (vector resp-rev2-crc0) and one siw accepted
 * (init-rev2-crc1). */
#include "config.h"

#include <errno.h>

#include "iwarp/rdmap.h"
#include "tests/xs_test.h"
#include "tests/xs_test_ddp.h"
#include "util/xs_be.h"

/* Independent expectation per opcode: 'T' tagged, '0'..'2' untagged on that
 * QN, 'x' refused. */
static const char expect[RDMAP_OP_COUNT] = { 'T', '1', 'T', '0', '0', '0', '0', '2',
					     'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x' };

static void check_table(void)
{
	static const char *const names[RDMAP_OP_COUNT] = {
		"RDMA Write", "RDMA Read Request", "RDMA Read Response", "Send",
		"Send with Invalidate", "Send with Solicited Event",
		"Send with Solicited Event and Invalidate", "Terminate", NULL, NULL,
		"Atomic Request", "Atomic Response", "Immediate Data",
		"Immediate Data with Solicited Event",
	};
	/* RFC 7306 table 1: QN, body length */
	static const int ext_qn[RDMAP_OP_COUNT] = { [0xa] = 1, [0xb] = 3, [0xc] = 0, [0xd] = 0 };
	static const unsigned ext_len[RDMAP_OP_COUNT] = { [0xa] = 52, [0xb] = 12, [0xc] = 8,
							  [0xd] = 8 };
	for (unsigned op = 0; op < RDMAP_OP_COUNT; op++) {
		const struct rdmap_op_info *i = &rdmap_ops[op];
		if (names[op]) {
			REQUIRE(i->name != NULL);
			CHECK(strcmp(i->name, names[op]) == 0);
		} else {
			CHECK(i->name == NULL);
		}
		CHECK_EQ_U(i->valid, expect[op] != 'x');
		CHECK_EQ_U(i->tagged, expect[op] == 'T');
		if (expect[op] >= '0' && expect[op] <= '2')
			CHECK_EQ_U(i->qn, (unsigned)(expect[op] - '0'));
		CHECK_EQ_U(i->ext, op >= 0xa && op <= 0xd);
		if (i->ext) {
			CHECK_EQ_U(i->qn, (unsigned)ext_qn[op]);
			CHECK(!i->tagged);
		}
		CHECK_EQ_U(i->body_len, op == RDMAP_OP_READ_REQ ? 28 : ext_len[op]);
		CHECK_EQ_U(i->solicited, op == RDMAP_OP_SEND_SE || op == RDMAP_OP_SEND_SE_INV ||
						 op == RDMAP_OP_IMM_DATA_SE);
		CHECK_EQ_U(i->invalidate, op == RDMAP_OP_SEND_INV || op == RDMAP_OP_SEND_SE_INV);
		CHECK_EQ_U(rdmap_ctrl_encode((enum rdmap_opcode)op), 0x40 | op);
	}
	CHECK_EQ_U(rdmap_ctrl_encode(RDMAP_OP_SEND), 0x43);
	CHECK_EQ_U(rdmap_ctrl_encode(RDMAP_OP_TERMINATE), 0x47);
}

static void expect_err(int rc, const struct xs_err *e, uint8_t l, uint8_t t, uint8_t c,
		       unsigned op, int tagged, uint32_t qn)
{
	if (rc != -EPROTO || e->layer != l || e->etype != t || e->ecode != c) {
		fprintf(stderr, "op %u tagged %d qn %u: rc %d triple %u/%u/0x%02x, want %u/%u/0x%02x\n",
			op, tagged, qn, rc, e->layer, e->etype, e->ecode, l, t, c);
		xs_test_failures++;
	}
}

static void check_hdr_check(void)
{
	static const uint32_t qns[] = { 0, 1, 2, 3, 4, 0x7fffffff, 0xffffffff };
	unsigned n = 0;

	for (unsigned op = 0; op < RDMAP_OP_COUNT; op++) {
		for (int tagged = 0; tagged < 2; tagged++) {
			for (size_t qi = 0; qi < sizeof(qns) / sizeof(qns[0]); qi++) {
				/* reserved bits 0x30 must not matter */
				for (uint8_t rsvd = 0; rsvd <= 0x30; rsvd += 0x10) {
					struct ddp_hdr h = { .tagged = tagged, .last = true,
							     .dv = DDP_VERSION,
							     .rsvdulp = (uint8_t)(0x40 | rsvd | op),
							     .qn = qns[qi] };
					struct xs_err e = { 9, 9, 9 };
					enum rdmap_opcode got = (enum rdmap_opcode)99;
					int rc = rdmap_hdr_check(&h, &got, &e);
					n++;
					CHECK_EQ_U(got, op);
					char k = expect[op];
					if (k == 'x' || (k == 'T') != (tagged == 1)) {
						expect_err(rc, &e, 0, 2, 0x06, op, tagged, qns[qi]);
					} else if (k == 'T') {
						CHECK_EQ_U(rc, 0);
					} else if (qns[qi] != (uint32_t)(k - '0')) {
						expect_err(rc, &e, 1, 2, 0x01, op, tagged, qns[qi]);
					} else {
						CHECK_EQ_U(rc, 0);
					}
				}
			}
		}
	}
	CHECK_EQ_U(n, 16 * 2 * 7 * 4);

	/* RDMAP version: RV 0, 2, 3 -> 0/2/0x05 whatever the opcode, model, QN. */
	for (unsigned rv = 0; rv < 4; rv++) {
		if (rv == RDMAP_VERSION)
			continue;
		for (unsigned op = 0; op < RDMAP_OP_COUNT; op++) {
			for (int tagged = 0; tagged < 2; tagged++) {
				struct ddp_hdr h = { .tagged = tagged, .dv = 1,
						     .rsvdulp = (uint8_t)(rv << 6 | op), .qn = 0 };
				struct xs_err e = { 9, 9, 9 };
				int rc = rdmap_hdr_check(&h, NULL, &e);
				expect_err(rc, &e, 0, 2, 0x05, op, tagged, 0);
			}
		}
	}
	/* err may be NULL */
	struct ddp_hdr h = { .tagged = false, .dv = 1, .rsvdulp = 0x43, .qn = 1 };
	CHECK_EQ_U(rdmap_hdr_check(&h, NULL, NULL), -EPROTO);
}

static void check_read_req(void)
{
	uint8_t b[RDMAP_READ_REQ_LEN + 4];
	struct xs_err e;

	/* Round trips, random fields; the layout is checked byte by byte. */
	for (int i = 0; i < 1000; i++) {
		struct rdmap_read_req r = {
			.sink_stag = (uint32_t)xs_rand64(), .sink_to = xs_rand64(),
			.size = (uint32_t)xs_rand64(), .src_stag = (uint32_t)xs_rand64(),
			.src_to = xs_rand64(),
		}, d;
		memset(b, 0xee, sizeof b);
		rdmap_read_req_encode(&r, b);
		CHECK_EQ_U(b[RDMAP_READ_REQ_LEN], 0xee); /* no overrun */
		CHECK_EQ_U(xs_get_be32(b), r.sink_stag);
		CHECK_EQ_U(xs_get_be64(b + 4), r.sink_to);
		CHECK_EQ_U(xs_get_be32(b + 12), r.size);
		CHECK_EQ_U(xs_get_be32(b + 16), r.src_stag);
		CHECK_EQ_U(xs_get_be64(b + 20), r.src_to);
		REQUIRE(rdmap_read_req_decode(b, RDMAP_READ_REQ_LEN, &d, &e) == 0);
		/* field by field: the struct's padding is not part of the round trip */
		CHECK_EQ_U(d.sink_stag, r.sink_stag);
		CHECK_EQ_U(d.sink_to, r.sink_to);
		CHECK_EQ_U(d.size, r.size);
		CHECK_EQ_U(d.src_stag, r.src_stag);
		CHECK_EQ_U(d.src_to, r.src_to);
	}

	/* siw's Read Request as the rping server (resp-rev2-crc0, CRC off):
	 * MPA length 0x2e, DDP untagged L=1 QN 1 MSN 1 MO 0, RDMAP 0x41. */
	uint8_t f[64];
	size_t n = xs_hex("00 2e 41 41 00 00 00 00 00 00 00 01 00 00 00 01"
			  "00 00 00 00 c9 e9 5b 00 00 00 56 45 32 36 9f 30"
			  "00 00 00 40 11 22 33 44 00 00 7f 00 00 00 10 00"
			  "00 00 00 00",
			  f, sizeof f);
	REQUIRE(n == 52);
	CHECK_EQ_U(xs_get_be16(f), 46);
	struct ddp_hdr h;
	xs_test_parse_ddp(f + 2, &h);
	CHECK(!h.tagged && h.last && h.dv == 1);
	CHECK_EQ_U(h.qn, 1);
	CHECK_EQ_U(h.msn, 1);
	CHECK_EQ_U(h.mo, 0);
	enum rdmap_opcode op;
	CHECK_EQ_U(rdmap_hdr_check(&h, &op, &e), 0);
	CHECK_EQ_U(op, RDMAP_OP_READ_REQ);
	struct rdmap_read_req r;
	size_t body = 46 - DDP_UNTAGGED_HDR_LEN;
	CHECK_EQ_U(body, rdmap_ops[op].body_len);
	REQUIRE(rdmap_read_req_decode(f + 2 + DDP_UNTAGGED_HDR_LEN, body, &r, &e) == 0);
	CHECK_EQ_U(r.sink_stag, 0xc9e95b00u);
	CHECK_EQ_U(r.sink_to, 0x564532369f30ull);
	CHECK_EQ_U(r.size, 64);
	CHECK_EQ_U(r.src_stag, 0x11223344u);
	CHECK_EQ_U(r.src_to, 0x7f0000001000ull);
	uint8_t re[RDMAP_READ_REQ_LEN];
	rdmap_read_req_encode(&r, re);
	CHECK(memcmp(re, f + 20, RDMAP_READ_REQ_LEN) == 0);

	/* The Read Request the host peer sent siw and siw answered
	 * (init-rev2-crc1, CRC on). */
	n = xs_hex("00 2e 41 41 00 00 00 00 00 00 00 01 00 00 00 01"
		   "00 00 00 00 0a 0b 0c 0d 00 00 00 00 00 01 00 00"
		   "00 00 00 40 e0 03 ac 00 00 00 55 87 ce 6d 93 70"
		   "19 f3 0f f7",
		   f, sizeof f);
	REQUIRE(n == 52);
	xs_test_parse_ddp(f + 2, &h);
	CHECK_EQ_U(rdmap_hdr_check(&h, &op, &e), 0);
	CHECK_EQ_U(op, RDMAP_OP_READ_REQ);
	REQUIRE(rdmap_read_req_decode(f + 20, 28, &r, &e) == 0);
	CHECK_EQ_U(r.sink_stag, 0x0a0b0c0du);
	CHECK_EQ_U(r.sink_to, 0x10000);
	CHECK_EQ_U(r.size, 64);
	CHECK_EQ_U(r.src_stag, 0xe003ac00u);
	CHECK_EQ_U(r.src_to, 0x5587ce6d9370ull);

	/* Wrong body length: RDMAP/2/0xff, nothing else touched. */
	static const size_t bad[] = { 0, 1, 27, 29, 32 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct xs_err be = { 9, 9, 9 };
		uint8_t big[40] = { 0 };
		CHECK_EQ_U(rdmap_read_req_decode(big, bad[i], &r, &be), -EPROTO);
		CHECK_EQ_U(be.layer, XS_LAYER_RDMAP);
		CHECK_EQ_U(be.etype, RDMAP_ETYPE_REMOTE_OP);
		CHECK_EQ_U(be.ecode, RDMAP_ECODE_UNSPECIFIED);
	}
}

int main(void)
{
	xs_test_seed(5040);
	check_table();
	check_hdr_check();
	check_read_req();
	return xs_test_result();
}
