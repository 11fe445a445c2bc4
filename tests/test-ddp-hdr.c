/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* DDP header encode/decode: random round trips, headers captured from Linux
 * siw (vector init-rev2-crc0, bytes after the 2-octet MPA length), bad
 * versions, short input, reserved bits. */
#include "config.h"

#include <errno.h>

#include "tests/xs_test.h"
#include "ddp/ddp.h"
#include "util/xs_be.h"

static void random_hdr(struct ddp_hdr *h)
{
	*h = (struct ddp_hdr){ 0 };
	h->tagged = xs_rand64() & 1;
	h->last = xs_rand64() & 1;
	h->dv = DDP_VERSION;
	h->rsvdulp = (uint8_t)xs_rand64();
	if (h->tagged) {
		h->stag = (uint32_t)xs_rand64();
		h->to = xs_rand64();
	} else {
		h->rsvdulp2 = (uint32_t)xs_rand64();
		h->qn = (uint32_t)xs_rand64();
		h->msn = (uint32_t)xs_rand64();
		h->mo = (uint32_t)xs_rand64();
	}
}

static bool hdr_eq(const struct ddp_hdr *a, const struct ddp_hdr *b)
{
	return a->tagged == b->tagged && a->last == b->last && a->dv == b->dv &&
	       a->rsvdulp == b->rsvdulp && a->stag == b->stag && a->to == b->to &&
	       a->rsvdulp2 == b->rsvdulp2 && a->qn == b->qn && a->msn == b->msn &&
	       a->mo == b->mo;
}

static void test_round_trip(void)
{
	for (int i = 0; i < 10000; i++) {
		struct ddp_hdr h, g;
		struct xs_err err = { 0xff, 0xff, 0xff };
		uint8_t buf[DDP_MAX_HDR_LEN + 8];

		random_hdr(&h);
		xs_rand_fill(buf, sizeof buf);
		size_t n = ddp_hdr_encode(&h, buf);
		REQUIRE(n == ddp_hdr_len(h.tagged));
		CHECK_EQ_U(ddp_hdr_len_from_byte(buf[0]), n);
		CHECK_EQ_U(buf[0] & DDP_RSVD_MASK, 0); /* reserved sent as zero */
		CHECK_EQ_U(buf[0] & DDP_DV_MASK, DDP_VERSION);
		/* Field positions, independent of the decoder. */
		CHECK_EQ_U(buf[1], h.rsvdulp);
		if (h.tagged) {
			CHECK_EQ_U(xs_get_be32(buf + 2), h.stag);
			CHECK_EQ_U(xs_get_be64(buf + 6), h.to);
		} else {
			CHECK_EQ_U(xs_get_be32(buf + 6), h.qn);
			CHECK_EQ_U(xs_get_be32(buf + 10), h.msn);
			CHECK_EQ_U(xs_get_be32(buf + 14), h.mo);
		}
		/* Decoding the exact header, or with payload after it. */
		CHECK_EQ_U(ddp_hdr_decode(buf, n, &g, &err), 0);
		CHECK(hdr_eq(&h, &g));
		CHECK_EQ_U(ddp_hdr_decode(buf, sizeof buf, &g, &err), 0);
		CHECK(hdr_eq(&h, &g));
		CHECK_EQ_U(err.layer, 0xff); /* untouched on success */
	}
}

static void test_siw(void)
{
	uint8_t b[32];
	struct ddp_hdr h;
	struct xs_err err;
	size_t n;

	/* Untagged Send, MSN 1: T=0 L=1 DV=1, RDMAP ctrl 0x43 (RV 1, Send). */
	n = xs_hex("41 43 00000000 00000000 00000001 00000000", b, sizeof b);
	REQUIRE(n == 18);
	CHECK_EQ_U(ddp_hdr_decode(b, n, &h, &err), 0);
	CHECK(!h.tagged);
	CHECK(h.last);
	CHECK_EQ_U(h.dv, 1);
	CHECK_EQ_U(h.rsvdulp, 0x43);
	CHECK_EQ_U(h.rsvdulp2, 0);
	CHECK_EQ_U(h.qn, 0);
	CHECK_EQ_U(h.msn, 1);
	CHECK_EQ_U(h.mo, 0);
	/* Re-encoding gives the same octets. */
	uint8_t e[32];
	CHECK_EQ_U(ddp_hdr_encode(&h, e), 18);
	CHECK(memcmp(e, b, 18) == 0);

	/* Same vector, sent by the test peer (siw accepted it): Read Request,
	 * untagged on QN 1, MSN 1: "41 41 ... 00000001 00000001". */
	n = xs_hex("41 41 00000000 00000001 00000001 00000000", b, sizeof b);
	CHECK_EQ_U(ddp_hdr_decode(b, n, &h, &err), 0);
	CHECK(!h.tagged && h.last);
	CHECK_EQ_U(h.rsvdulp, 0x41);
	CHECK_EQ_U(h.qn, 1);
	CHECK_EQ_U(h.msn, 1);

	/* siw's tagged Read Response: STag 0x0a0b0c0d, TO 0x10000, ctrl 0x42. */
	n = xs_hex("c1 42 0a0b0c0d 0000000000010000", b, sizeof b);
	REQUIRE(n == 14);
	CHECK_EQ_U(ddp_hdr_decode(b, n, &h, &err), 0);
	CHECK(h.tagged);
	CHECK(h.last);
	CHECK_EQ_U(h.dv, 1);
	CHECK_EQ_U(h.rsvdulp, 0x42);
	CHECK_EQ_U(h.stag, 0x0a0b0c0du);
	CHECK_EQ_U(h.to, 0x10000u);
	CHECK_EQ_U(ddp_hdr_encode(&h, e), 14);
	CHECK(memcmp(e, b, 14) == 0);

	/* Test peer's RDMA Write (siw accepted it): STag 0x01ba2900, TO 0x558f38e00f30, ctrl 0x40. */
	n = xs_hex("c1 40 01ba2900 0000558f38e00f30", b, sizeof b);
	CHECK_EQ_U(ddp_hdr_decode(b, n, &h, &err), 0);
	CHECK(h.tagged && h.last);
	CHECK_EQ_U(h.rsvdulp, 0x40);
	CHECK_EQ_U(h.stag, 0x01ba2900u);
	CHECK_EQ_U(h.to, 0x558f38e00f30ull);

	/* Attack vector ddpver: a Send with DV=0 (siw answered DDP/2/0x06). */
	n = xs_hex("40 43 00000000 00000000 00000001 00000000", b, sizeof b);
	err = (struct xs_err){ 0 };
	CHECK_EQ_U(ddp_hdr_decode(b, n, &h, &err), -EPROTO);
	CHECK_EQ_U(err.layer, XS_LAYER_DDP);
	CHECK_EQ_U(err.etype, 2);
	CHECK_EQ_U(err.ecode, 0x06);
	CHECK_EQ_U(h.msn, 1); /* fields still decoded for the Terminate */
}

static void test_bad_version(void)
{
	for (int tagged = 0; tagged <= 1; tagged++) {
		for (uint8_t dv = 0; dv <= 3; dv++) {
			struct ddp_hdr h, g;
			struct xs_err err = { 0xff, 0xff, 0xff };
			uint8_t buf[DDP_MAX_HDR_LEN];

			random_hdr(&h);
			h.tagged = tagged;
			h.dv = dv;
			size_t n = ddp_hdr_encode(&h, buf);
			CHECK_EQ_U(buf[0] & DDP_DV_MASK, dv);
			int rc = ddp_hdr_decode(buf, n, &g, &err);
			if (dv == DDP_VERSION) {
				CHECK_EQ_U(rc, 0);
				continue;
			}
			CHECK_EQ_U(rc, -EPROTO);
			CHECK_EQ_U(err.layer, 1);
			CHECK_EQ_U(err.etype, tagged ? 1 : 2);
			CHECK_EQ_U(err.ecode, tagged ? 0x04 : 0x06);
			CHECK_EQ_U(g.dv, dv);
			CHECK_EQ_U(g.tagged, tagged);
			/* A NULL err is allowed. */
			CHECK_EQ_U(ddp_hdr_decode(buf, n, &g, NULL), -EPROTO);
		}
	}
}

static void test_short(void)
{
	uint8_t t[14], u[18];
	struct ddp_hdr h;
	struct xs_err err;

	xs_hex("c1 42 0a0b0c0d 0000000000010000", t, sizeof t);
	xs_hex("41 43 00000000 00000000 00000001 00000000", u, sizeof u);
	for (size_t len = 0; len < sizeof t; len++)
		CHECK_EQ_U(ddp_hdr_decode(t, len, &h, &err), -EAGAIN);
	for (size_t len = 0; len < sizeof u; len++)
		CHECK_EQ_U(ddp_hdr_decode(u, len, &h, &err), -EAGAIN);
	CHECK_EQ_U(ddp_hdr_decode(t, 13, &h, &err), -EAGAIN);
	CHECK_EQ_U(ddp_hdr_decode(u, 17, &h, &err), -EAGAIN);
	CHECK_EQ_U(ddp_hdr_decode(t, 14, &h, &err), 0);
	CHECK_EQ_U(ddp_hdr_decode(u, 18, &h, &err), 0);
	/* 14 octets of an untagged header are not enough, whatever follows. */
	CHECK_EQ_U(ddp_hdr_decode(u, 14, &h, &err), -EAGAIN);
	/* A bad version is only reported once the header is complete. */
	t[0] = 0xc0;
	CHECK_EQ_U(ddp_hdr_decode(t, 13, &h, &err), -EAGAIN);
	CHECK_EQ_U(ddp_hdr_decode(t, 14, &h, &err), -EPROTO);
}

static void test_reserved_ignored(void)
{
	for (int i = 0; i < 1000; i++) {
		struct ddp_hdr h, g;
		struct xs_err err;
		uint8_t buf[DDP_MAX_HDR_LEN];

		random_hdr(&h);
		size_t n = ddp_hdr_encode(&h, buf);
		buf[0] |= (uint8_t)(xs_rand64() & DDP_RSVD_MASK);
		CHECK_EQ_U(ddp_hdr_decode(buf, n, &g, &err), 0);
		CHECK(hdr_eq(&h, &g));
	}
	/* Every reserved bit set on the siw Send header. */
	uint8_t b[18];
	struct ddp_hdr h;
	struct xs_err err;
	xs_hex("7d 43 00000000 00000000 00000001 00000000", b, sizeof b);
	CHECK_EQ_U(ddp_hdr_decode(b, 18, &h, &err), 0);
	CHECK(!h.tagged && h.last && h.dv == 1 && h.msn == 1);
	xs_hex("fd 42 0a0b0c0d 0000000000010000", b, sizeof b);
	CHECK_EQ_U(ddp_hdr_decode(b, 14, &h, &err), 0);
	CHECK(h.tagged && h.last && h.dv == 1 && h.stag == 0x0a0b0c0du);
}

int main(void)
{
	xs_test_seed(5041);
	test_round_trip();
	test_siw();
	test_bad_version();
	test_short();
	test_reserved_ignored();
	return xs_test_result();
}
