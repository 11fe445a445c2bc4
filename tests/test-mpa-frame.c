/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* MPA Request/Reply frames: encode/decode round trips, the real frames Linux
 * siw sent and received (vectors/NAME.req.bin and .rep.bin, as hex), incremental
 * decoding, and every invalid-frame rule (LLP/0/0x04). */
#include "config.h"

#include <errno.h>

#include "mpa/mpa.h"
#include "tests/xs_test.h"

struct vec {
	const char *name;
	enum mpa_frame_type type;
	const char *hex;
	bool m, c, r, enh;
	uint8_t res, rev;
	uint16_t ird, ord;
	bool p2p, rs, rw, rr;
	uint16_t pdata_len;
};

/* Real frames from siw-peer/vectors (siw or our test peer as sender). */
static const struct vec vecs[] = {
	{ "init-rev2-crc0 req", MPA_REQUEST,
	  "4d504120494420526571204672616d651002000400010001",
	  false, false, false, true, 0, 2, 1, 1, false, false, false, false, 0 },
	{ "init-rev2-crc0 rep", MPA_REPLY,
	  "4d504120494420526570204672616d651002000400010001",
	  false, false, false, true, 0, 2, 1, 1, false, false, false, false, 0 },
	{ "init-rev2-crc1 req", MPA_REQUEST,
	  "4d504120494420526571204672616d655002000400010001",
	  false, true, false, true, 0, 2, 1, 1, false, false, false, false, 0 },
	{ "init-rev2-crc1 rep", MPA_REPLY,
	  "4d504120494420526570204672616d655002000400010001",
	  false, true, false, true, 0, 2, 1, 1, false, false, false, false, 0 },
	{ "init-rev1-crc0 req", MPA_REQUEST, "4d504120494420526571204672616d6500010000",
	  false, false, false, false, 0, 1, 0, 0, false, false, false, false, 0 },
	{ "init-rev1-crc1 req", MPA_REQUEST, "4d504120494420526571204672616d6540010000",
	  false, true, false, false, 0, 1, 0, 0, false, false, false, false, 0 },
	{ "init-rev1-crc1 rep", MPA_REPLY, "4d504120494420526570204672616d6540010000",
	  false, true, false, false, 0, 1, 0, 0, false, false, false, false, 0 },
	{ "init-rev2-p2p req", MPA_REQUEST,
	  "4d504120494420526571204672616d65100200048001c001",
	  false, false, false, true, 0, 2, 1, 1, true, false, true, true, 0 },
	{ "init-rev2-p2p rep", MPA_REPLY,
	  "4d504120494420526570204672616d651002000480018001",
	  false, false, false, true, 0, 2, 1, 1, true, false, true, false, 0 },
	{ "init-rev2-gso req", MPA_REQUEST,
	  "4d504120494420526571204672616d651802000400010001",
	  false, false, false, true, 0x08, 2, 1, 1, false, false, false, false, 0 },
	{ "init-rev2-rejected rep", MPA_REPLY,
	  "4d504120494420526570204672616d653002000400010001",
	  false, false, true, true, 0, 2, 1, 1, false, false, false, false, 0 },
	{ "resp-rev2-markers req", MPA_REQUEST,
	  "4d504120494420526571204672616d659002000400010001",
	  true, false, false, true, 0, 2, 1, 1, false, false, false, false, 0 },
	{ "resp-rev2-markers rep", MPA_REPLY,
	  "4d504120494420526570204672616d653002000400000000",
	  false, false, true, true, 0, 2, 0, 0, false, false, false, false, 0 },
	{ "resp-rev2-pdata8 req", MPA_REQUEST,
	  "4d504120494420526571204672616d651002000c000100010102030405060708",
	  false, false, false, true, 0, 2, 1, 1, false, false, false, false, 8 },
	{ "resp-rev2-pdata8 rep", MPA_REPLY,
	  "4d504120494420526570204672616d651002000400010001",
	  false, false, false, true, 0, 2, 1, 1, false, false, false, false, 0 },
	{ "resp-rev2-ird16-ord16 req", MPA_REQUEST,
	  "4d504120494420526571204672616d651002000400100010",
	  false, false, false, true, 0, 2, 16, 16, false, false, false, false, 0 },
	{ "resp-rev2-ird16-ord16 rep", MPA_REPLY,
	  "4d504120494420526570204672616d651002000400100010",
	  false, false, false, true, 0, 2, 16, 16, false, false, false, false, 0 },
	{ "resp-rev2-crc-strict rep", MPA_REPLY,
	  "4d504120494420526570204672616d653002000400000000",
	  false, false, true, true, 0, 2, 0, 0, false, false, false, false, 0 },
	{ "resp-rev2-noenh req", MPA_REQUEST, "4d504120494420526571204672616d6500020000",
	  false, false, false, false, 0, 2, 0, 0, false, false, false, false, 0 },
	{ "resp-rev2-p2p-read req", MPA_REQUEST,
	  "4d504120494420526571204672616d651002000480014001",
	  false, false, false, true, 0, 2, 1, 1, true, false, false, true, 0 },
};

static void check_vec(const struct vec *v)
{
	uint8_t buf[600], out[600];
	struct mpa_frame f;
	struct xs_err err = { 0 };
	size_t len = xs_hex(v->hex, buf, sizeof(buf)), used = 0;

	fprintf(stderr, "vector %s\n", v->name);
	REQUIRE(mpa_frame_decode(buf, len, v->type, &f, &used, &err) == 0);
	CHECK_EQ_U(used, len);
	CHECK_EQ_U(f.type, v->type);
	CHECK_EQ_U(f.markers, v->m);
	CHECK_EQ_U(f.crc, v->c);
	CHECK_EQ_U(f.reject, v->r);
	CHECK_EQ_U(f.enhanced, v->enh);
	CHECK_EQ_U(f.res_bits, v->res);
	CHECK_EQ_U(f.rev, v->rev);
	CHECK_EQ_U(f.ird, v->ird);
	CHECK_EQ_U(f.ord, v->ord);
	CHECK_EQ_U(f.p2p, v->p2p);
	CHECK_EQ_U(f.rtr_send, v->rs);
	CHECK_EQ_U(f.rtr_write, v->rw);
	CHECK_EQ_U(f.rtr_read, v->rr);
	CHECK_EQ_U(f.pdata_len, v->pdata_len);
	if (v->pdata_len) {
		CHECK(f.pdata == buf + len - v->pdata_len);
	}
	/* Re-encoding gives the same bytes. */
	CHECK_EQ_U(mpa_frame_len(&f), len);
	REQUIRE(mpa_frame_encode(&f, out, sizeof(out)) == (ssize_t)len);
	CHECK(memcmp(out, buf, len) == 0);

	/* Byte at a time: -EAGAIN with the right need until complete. */
	for (size_t n = 0; n < len; n++) {
		size_t need = 0;
		int rc = mpa_frame_decode(buf, n, v->type, &f, &need, &err);

		CHECK_EQ_U(rc, (unsigned long long)-EAGAIN);
		CHECK_EQ_U(need, n < MPA_RR_HDR_LEN ? MPA_RR_HDR_LEN : len);
	}
}

static void expect_bad(const char *hex, enum mpa_frame_type type, const char *what)
{
	uint8_t buf[600];
	struct mpa_frame f;
	struct xs_err err = { 9, 9, 9 };
	size_t len = xs_hex(hex, buf, sizeof(buf)), used = 0;
	int rc = mpa_frame_decode(buf, len, type, &f, &used, &err);

	fprintf(stderr, "invalid: %s\n", what);
	CHECK_EQ_U(rc, (unsigned long long)-EPROTO);
	CHECK_EQ_U(err.layer, XS_LAYER_LLP);
	CHECK_EQ_U(err.etype, 0);
	CHECK_EQ_U(err.ecode, 0x04);
}

static void test_invalid(void)
{
	/* Wrong key (and a Reply key where a Request is expected). */
	expect_bad("4d504120494420526571204672616d661002000400010001", MPA_REQUEST, "bad key");
	expect_bad("4d504120494420526570204672616d651002000400010001", MPA_REQUEST,
		   "reply key on request");
	/* A wrong key is caught before the header is complete. */
	expect_bad("474554202f20", MPA_REQUEST, "HTTP instead of MPA");
	/* PD_Length 513. */
	expect_bad("4d504120494420526571204672616d6500020201", MPA_REQUEST, "PD_Length 513");
	/* Revisions 0 and 3. */
	expect_bad("4d504120494420526571204672616d6500000000", MPA_REQUEST, "rev 0");
	expect_bad("4d504120494420526571204672616d6500030000", MPA_REQUEST, "rev 3 (resp-rev3)");
	expect_bad("4d504120494420526570204672616d6500ff0000", MPA_REPLY, "rev 255");
	/* Reject on a Request. */
	expect_bad("4d504120494420526571204672616d653002000400010001", MPA_REQUEST,
		   "reject on request");
	/* Enhanced with PD_Length 2 (and 0). */
	expect_bad("4d504120494420526571204672616d65100200020001", MPA_REQUEST,
		   "enhanced, PD_Length 2");
	expect_bad("4d504120494420526570204672616d6510020000", MPA_REPLY, "enhanced, PD_Length 0");

	/* PD_Length 512 is fine (and needs all 532 bytes). */
	uint8_t buf[600] = { 0 };
	struct mpa_frame f;
	struct xs_err err;
	size_t used;

	memcpy(buf, MPA_KEY_REP, 16);
	buf[16] = 0x10;
	buf[17] = 2;
	buf[18] = 0x02;
	buf[19] = 0x00;
	CHECK_EQ_U(mpa_frame_decode(buf, 531, MPA_REPLY, &f, &used, &err),
		   (unsigned long long)-EAGAIN);
	CHECK_EQ_U(used, 532);
	CHECK_EQ_U(mpa_frame_decode(buf, 532, MPA_REPLY, &f, &used, &err), 0);
	CHECK_EQ_U(used, 532);
	CHECK_EQ_U(f.pdata_len, 508);
}

/* Bytes after the announced PD (the first FPDU) are not consumed. */
static void test_no_overread(void)
{
	uint8_t buf[64];
	struct mpa_frame f;
	struct xs_err err;
	size_t len = xs_hex("4d504120494420526570204672616d651002000c000100010102030405060708"
			    "00224143",
			    buf, sizeof(buf));
	size_t used = 0;

	REQUIRE(len == 36);
	CHECK_EQ_U(mpa_frame_decode(buf, len, MPA_REPLY, &f, &used, &err), 0);
	CHECK_EQ_U(used, 32);
	CHECK_EQ_U(f.pdata_len, 8);
	CHECK(f.pdata == buf + 24);
	CHECK_EQ_U(f.pdata[7], 8);

	/* Exactly header + PD in a heap buffer (ASan catches an over-read). */
	uint8_t *exact = malloc(32);
	REQUIRE(exact);
	memcpy(exact, buf, 32);
	CHECK_EQ_U(mpa_frame_decode(exact, 32, MPA_REPLY, &f, &used, &err), 0);
	CHECK_EQ_U(used, 32);
	free(exact);

	/* A lone 20-byte header announcing nothing. */
	uint8_t *hdr = malloc(20);
	REQUIRE(hdr);
	xs_hex("4d504120494420526571204672616d6540010000", hdr, 20);
	CHECK_EQ_U(mpa_frame_decode(hdr, 20, MPA_REQUEST, &f, &used, &err), 0);
	CHECK_EQ_U(used, 20);
	CHECK(f.pdata == NULL);
	free(hdr);
}

static void test_roundtrip(void)
{
	uint8_t pd[512], buf[600];

	xs_rand_fill(pd, sizeof(pd));
	for (int i = 0; i < 2000; i++) {
		struct mpa_frame f = { 0 }, g;
		struct xs_err err;
		size_t used;

		f.type = xs_rand_below(2) ? MPA_REQUEST : MPA_REPLY;
		f.rev = (uint8_t)(1 + xs_rand_below(2));
		f.markers = xs_rand_below(2);
		f.crc = xs_rand_below(2);
		f.reject = f.type == MPA_REPLY && xs_rand_below(2);
		f.enhanced = f.rev == 2 && xs_rand_below(4) != 0;
		f.rdmap_ext = xs_rand_below(2);
		/* the type's RFC 7306 bit is rdmap_ext, not a reserved bit */
		f.res_bits = (uint8_t)(xs_rand64() & MPA_FLAG_RES_MASK &
				       ~(f.type == MPA_REQUEST ? MPA_FLAG_EXT_REQ
							       : MPA_FLAG_EXT_REP));
		if (f.enhanced) {
			f.ird = (uint16_t)xs_rand_below(0x4000);
			f.ord = (uint16_t)xs_rand_below(0x4000);
			f.p2p = xs_rand_below(2);
			f.rtr_send = xs_rand_below(2);
			f.rtr_write = xs_rand_below(2);
			f.rtr_read = xs_rand_below(2);
		}
		f.pdata_len = (uint16_t)xs_rand_below(513 - (f.enhanced ? 4 : 0));
		f.pdata = f.pdata_len ? pd : NULL;

		ssize_t n = mpa_frame_encode(&f, buf, sizeof(buf));
		REQUIRE(n == (ssize_t)mpa_frame_len(&f));
		CHECK_EQ_U(mpa_frame_encode(&f, buf, (size_t)n - 1), (unsigned long long)-EMSGSIZE);
		REQUIRE(mpa_frame_decode(buf, (size_t)n, f.type, &g, &used, &err) == 0);
		CHECK_EQ_U(used, (size_t)n);
		CHECK_EQ_U(g.type, f.type);
		CHECK_EQ_U(g.rev, f.rev);
		CHECK_EQ_U(g.markers, f.markers);
		CHECK_EQ_U(g.crc, f.crc);
		CHECK_EQ_U(g.reject, f.reject);
		CHECK_EQ_U(g.enhanced, f.enhanced);
		CHECK_EQ_U(g.res_bits, f.res_bits);
		CHECK_EQ_U(g.rdmap_ext, f.rdmap_ext);
		/* on the wire: 0x04 in a Request, 0x02 in a Reply */
		CHECK_EQ_U(buf[16] & (f.type == MPA_REQUEST ? 0x04 : 0x02), f.rdmap_ext ? (f.type == MPA_REQUEST ? 0x04 : 0x02) : 0);
		CHECK_EQ_U(g.ird, f.ird);
		CHECK_EQ_U(g.ord, f.ord);
		CHECK_EQ_U(g.p2p, f.p2p);
		CHECK_EQ_U(g.rtr_send, f.rtr_send);
		CHECK_EQ_U(g.rtr_write, f.rtr_write);
		CHECK_EQ_U(g.rtr_read, f.rtr_read);
		CHECK_EQ_U(g.pdata_len, f.pdata_len);
		if (f.pdata_len)
			CHECK(memcmp(g.pdata, pd, f.pdata_len) == 0);
	}

	/* Not encodable. */
	struct mpa_frame f = { .type = MPA_REQUEST, .rev = 2, .enhanced = true };
	CHECK_EQ_U(mpa_frame_encode(&f, buf, sizeof(buf)), 24);
	f.reject = true;
	CHECK_EQ_U(mpa_frame_encode(&f, buf, sizeof(buf)), (unsigned long long)-EINVAL);
	f.reject = false;
	f.ird = 0x4000;
	CHECK_EQ_U(mpa_frame_encode(&f, buf, sizeof(buf)), (unsigned long long)-EINVAL);
	f.ird = 0;
	f.pdata = pd;
	f.pdata_len = 509;
	CHECK_EQ_U(mpa_frame_encode(&f, buf, sizeof(buf)), (unsigned long long)-EINVAL);
	f.pdata_len = 508;
	CHECK_EQ_U(mpa_frame_encode(&f, buf, sizeof(buf)), 532);
	f.rev = 3;
	CHECK_EQ_U(mpa_frame_encode(&f, buf, sizeof(buf)), (unsigned long long)-EINVAL);
	f.rev = 0;
	CHECK_EQ_U(mpa_frame_encode(&f, buf, sizeof(buf)), (unsigned long long)-EINVAL);
}

int main(void)
{
	xs_test_seed(5044);
	for (size_t i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++)
		check_vec(&vecs[i]);
	test_invalid();
	test_no_overread();
	test_roundtrip();
	return xs_test_result();
}
