/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Terminate body: RFC 5040 layout round trips for every flag combination
 * with tagged/untagged terminated DDP headers and a Read Request header,
 * encode argument checks, truncation, and every Terminate Linux siw sent in
 * the attack vectors (siw-peer/vectors/attack-*.txt, copied here as hex),
 * decoded in siw's nibble-swapped layout and, to document the swap, in the
 * RFC layout. */
#include "config.h"

#include <errno.h>

#include "iwarp/rdmap.h"
#include "mpa/mpa_wire.h"
#include "tests/xs_test.h"
#include "util/xs_be.h"

static void fill_ddp_hdr(uint8_t *p, bool tagged)
{
	xs_rand_fill(p, ddp_hdr_len(tagged));
	p[0] = (uint8_t)((tagged ? DDP_FLAG_T : 0) | (p[0] & ~DDP_FLAG_T));
}

static void check_round_trips(void)
{
	uint8_t buf[RDMAP_TERM_MAX_LEN + 8];
	unsigned cases = 0;

	for (int iter = 0; iter < 200; iter++) {
		for (unsigned flags = 0; flags < 8; flags++) {
			for (int tagged = 0; tagged < 2; tagged++) {
				struct rdmap_term t = { 0 }, d;
				struct xs_err e;
				t.cause.layer = (uint8_t)xs_rand_below(16);
				t.cause.etype = (uint8_t)xs_rand_below(16);
				t.cause.ecode = (uint8_t)xs_rand64();
				t.m = flags & 4;
				t.d = flags & 2;
				t.r = flags & 1;
				if (t.m)
					t.ddp_seg_len = (uint16_t)xs_rand64();
				if (t.d) {
					fill_ddp_hdr(t.ddp_hdr, tagged);
					t.ddp_hdr_len = (uint8_t)ddp_hdr_len(tagged);
				}
				if (t.r) {
					xs_rand_fill(t.rdmap_hdr, sizeof t.rdmap_hdr);
					t.rdmap_hdr_len = RDMAP_READ_REQ_LEN;
				}
				memset(buf, 0xee, sizeof buf);
				ssize_t n = rdmap_term_encode(&t, buf, sizeof buf);
				if (t.m && !t.d) {
					/* the value would have nowhere to go */
					CHECK_EQ_U(n, -EINVAL);
					continue;
				}
				cases++;
				size_t want = 4 + (t.d ? 2 + t.ddp_hdr_len : 0) + (t.r ? 28 : 0);
				REQUIRE(n == (ssize_t)want);
				CHECK_EQ_U(buf[want], 0xee);
				/* control word, RFC layout */
				CHECK_EQ_U(buf[0], t.cause.layer << 4 | t.cause.etype);
				CHECK_EQ_U(buf[1], t.cause.ecode);
				CHECK_EQ_U(buf[2], (t.m ? 0x80 : 0) | (t.d ? 0x40 : 0) | (t.r ? 0x20 : 0));
				CHECK_EQ_U(buf[3], 0);
				size_t off = 4;
				if (t.d) {
					CHECK_EQ_U(xs_get_be16(buf + 4), t.m ? t.ddp_seg_len : 0);
					CHECK(memcmp(buf + 6, t.ddp_hdr, t.ddp_hdr_len) == 0);
					off += 2 + t.ddp_hdr_len;
				}
				if (t.r)
					CHECK(memcmp(buf + off, t.rdmap_hdr, 28) == 0);

				REQUIRE(rdmap_term_decode(buf, want, &d, &e) == 0);
				CHECK_EQ_U(d.cause.layer, t.cause.layer);
				CHECK_EQ_U(d.cause.etype, t.cause.etype);
				CHECK_EQ_U(d.cause.ecode, t.cause.ecode);
				CHECK_EQ_U(d.m, t.m);
				CHECK_EQ_U(d.d, t.d);
				CHECK_EQ_U(d.r, t.r);
				CHECK_EQ_U(d.ddp_seg_len, t.m ? t.ddp_seg_len : 0);
				CHECK_EQ_U(d.ddp_hdr_len, t.d ? t.ddp_hdr_len : 0);
				CHECK_EQ_U(d.rdmap_hdr_len, t.r ? 28 : 0);
				if (t.d)
					CHECK(memcmp(d.ddp_hdr, t.ddp_hdr, t.ddp_hdr_len) == 0);
				if (t.r)
					CHECK(memcmp(d.rdmap_hdr, t.rdmap_hdr, 28) == 0);

				/* every truncation, and one octet too many */
				for (size_t cut = 0; cut < want; cut++) {
					struct xs_err te = { 9, 9, 9 };
					CHECK_EQ_U(rdmap_term_decode(buf, cut, &d, &te), -EPROTO);
					CHECK_EQ_U(te.layer, 0);
					CHECK_EQ_U(te.etype, 2);
					CHECK_EQ_U(te.ecode, 0xff);
					if (cut < 4)
						CHECK_EQ_U(rdmap_term_decode_siw(buf, cut, &d, NULL), -EPROTO);
				}
				CHECK_EQ_U(rdmap_term_decode(buf, want + 1, &d, &e), -EPROTO);
				/* too small a buffer */
				for (size_t cap = 0; cap < want; cap++)
					CHECK_EQ_U(rdmap_term_encode(&t, buf, cap), -EMSGSIZE);
			}
		}
	}
	CHECK_EQ_U(cases, 200 * 6 * 2);
}

static void check_encode_args(void)
{
	uint8_t buf[RDMAP_TERM_MAX_LEN];
	struct rdmap_term t = { .cause = { 1, 2, 3 } };

	CHECK_EQ_U(RDMAP_TERM_MAX_LEN, 4 + 2 + 18 + 28);
	CHECK_EQ_U(rdmap_term_encode(&t, buf, sizeof buf), 4);
	t.cause.layer = 16;
	CHECK_EQ_U(rdmap_term_encode(&t, buf, sizeof buf), -EINVAL);
	t.cause.layer = 1;
	t.cause.etype = 16;
	CHECK_EQ_U(rdmap_term_encode(&t, buf, sizeof buf), -EINVAL);
	t.cause.etype = 2;

	/* D: the header length must match the header's own T bit */
	t.d = true;
	t.ddp_hdr[0] = DDP_FLAG_T | DDP_FLAG_L | 1;
	t.ddp_hdr_len = 18;
	CHECK_EQ_U(rdmap_term_encode(&t, buf, sizeof buf), -EINVAL);
	t.ddp_hdr_len = 14;
	CHECK_EQ_U(rdmap_term_encode(&t, buf, sizeof buf), 20);
	t.ddp_hdr[0] = DDP_FLAG_L | 1;
	CHECK_EQ_U(rdmap_term_encode(&t, buf, sizeof buf), -EINVAL);
	t.ddp_hdr_len = 18;
	CHECK_EQ_U(rdmap_term_encode(&t, buf, sizeof buf), 24);
	t.ddp_hdr_len = 0;
	CHECK_EQ_U(rdmap_term_encode(&t, buf, sizeof buf), -EINVAL);
	t.ddp_hdr_len = 18;

	/* R: exactly a Read Request header */
	t.r = true;
	t.rdmap_hdr_len = 0;
	CHECK_EQ_U(rdmap_term_encode(&t, buf, sizeof buf), -EINVAL);
	t.rdmap_hdr_len = 28;
	CHECK_EQ_U(rdmap_term_encode(&t, buf, sizeof buf), 52);

	/* D=1, M=0: the length field is carried, as zero */
	t.ddp_seg_len = 0x1234;
	REQUIRE(rdmap_term_encode(&t, buf, sizeof buf) == 52);
	CHECK_EQ_U(xs_get_be16(buf + 4), 0);
	t.m = true;
	REQUIRE(rdmap_term_encode(&t, buf, sizeof buf) == 52);
	CHECK_EQ_U(xs_get_be16(buf + 4), 0x1234);

	/* Decode: M without D is ignored (no field to be valid); an
	 * inconsistent header length (tagged T bit, 18 octets) is refused. */
	struct rdmap_term d;
	uint8_t mo[4] = { 0x02, 0x02, 0x80, 0x00 };
	CHECK_EQ_U(rdmap_term_decode(mo, 4, &d, NULL), 0);
	CHECK(!d.m && !d.d && !d.r);
	uint8_t tg[4 + 2 + 18] = { 0x11, 0x00, 0xc0, 0x00, 0x00, 0x40, 0xc1, 0x40 };
	CHECK_EQ_U(rdmap_term_decode(tg, sizeof tg, &d, NULL), -EPROTO);
	CHECK_EQ_U(rdmap_term_decode(tg, 4 + 2 + 14, &d, NULL), 0);
	CHECK_EQ_U(d.ddp_hdr_len, 14);
	CHECK_EQ_U(d.ddp_seg_len, 64);
	/* R without D: the RDMA header follows the control word */
	uint8_t ro[4 + 28] = { 0x01, 0x01, 0x20, 0x00, 0xaa };
	CHECK_EQ_U(rdmap_term_decode(ro, sizeof ro, &d, NULL), 0);
	CHECK(d.r && !d.d);
	CHECK_EQ_U(d.rdmap_hdr[0], 0xaa);
	/* Reserved bits are ignored */
	uint8_t rs[4] = { 0x12, 0x34, 0x1f, 0xff };
	CHECK_EQ_U(rdmap_term_decode(rs, 4, &d, NULL), 0);
	CHECK_EQ_U(d.cause.layer, 1);
	CHECK_EQ_U(d.cause.etype, 2);
	CHECK_EQ_U(d.cause.ecode, 0x34);
}

/* Terminates siw sent (full FPDUs from ATTACKS.md / attack-NAME.txt), what
 * siw meant (its log: "init TERM: layer L, type T, code C"), and what the
 * RFC layout reads for those without attached headers. */
struct siw_vec {
	const char *name;
	const char *fpdu;
	struct xs_err siw; /* decoded with rdmap_term_decode_siw */
	bool m, d, r;
	uint16_t seg_len;
	uint8_t hdr_len;
	int rfc_rc; /* rdmap_term_decode */
	struct xs_err rfc; /* if rfc_rc == 0 */
};

static const struct siw_vec vecs[] = {
	{ "badcrc", "00164147000000000000000200000001000000000202000075d367ed",
	  { 2, 0, 0x02 }, false, false, false, 0, 0, 0, { 0, 2, 0x02 } },
	{ "giantfpdu",
	  "002a41470000000000000002000000010000000021020300ffed414300000000000000000000000100000000553430b3",
	  { 1, 2, 0x02 }, true, true, false, 65517, 18, -EPROTO, { 0 } },
	{ "badstag", "0026414700000000000000020000000100000000110003000040c140deadbe00000000000000000000000000",
	  { 1, 1, 0x00 }, true, true, false, 64, 14, -EPROTO, { 0 } },
	{ "oob", "0026414700000000000000020000000100000000110103000040c140a4553b00000055b85362859000000000",
	  { 1, 1, 0x01 }, true, true, false, 64, 14, -EPROTO, { 0 } },
	{ "oobread",
	  "00464147000000000000000200000001000000001001070000004141000000000000000100000040000000000a0b0c0000007f0000003000000000405d3c2d00000055c21aedc59000000000",
	  { 0, 1, 0x01 }, true, true, true, 0, 18, -EPROTO, { 0 } },
	{ "readbad",
	  "00464147000000000000000200000001000000001000070000004141000000000000000100000040000000000a0b0c0000007f000000300000000040deadbe00000000000000000000000000",
	  { 0, 1, 0x00 }, true, true, true, 0, 18, -EPROTO, { 0 } },
	{ "norecv", "002a41470000000000000002000000010000000021020300001041430000000000000000000000020000000000000000",
	  { 1, 2, 0x02 }, true, true, false, 16, 18, -EPROTO, { 0 } },
	{ "ddpver", "00164147000000000000000200000001000000002106000000000000",
	  { 1, 2, 0x06 }, false, false, false, 0, 0, 0, { 2, 1, 0x06 } },
	{ "rdmapver", "00164147000000000000000200000001000000002005000000000000",
	  { 0, 2, 0x05 }, false, false, false, 0, 0, 0, { 2, 0, 0x05 } },
	{ "badopcode", "00164147000000000000000200000001000000002006000000000000",
	  { 0, 2, 0x06 }, false, false, false, 0, 0, 0, { 2, 0, 0x06 } },
	{ "badqn", "002a41470000000000000002000000010000000021010300001041430000000000000005000000010000000000000000",
	  { 1, 2, 0x01 }, true, true, false, 16, 18, -EPROTO, { 0 } },
	{ "badmsn", "002a41470000000000000002000000010000000021030300001041430000000000000000000003e80000000000000000",
	  { 1, 2, 0x03 }, true, true, false, 16, 18, -EPROTO, { 0 } },
	{ "badmo", "002a41470000000000000002000000010000000021040300001041430000000000000000000000010000004000000000",
	  { 1, 2, 0x04 }, true, true, false, 16, 18, -EPROTO, { 0 } },
};

static void check_siw_vectors(void)
{
	for (size_t i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++) {
		const struct siw_vec *v = &vecs[i];
		uint8_t f[128];
		size_t n = xs_hex(v->fpdu, f, sizeof f);
		size_t ulpdu = xs_get_be16(f);
		printf("vector %s\n", v->name);
		/* MPA length + ULPDU + CRC, no pad (all are multiples of 4) */
		REQUIRE(n == 2 + ulpdu + 4);

		/* The carrier: untagged, L, DV 1, QN 2, MSN 1, MO 0, RDMAP 0x47. */
		const uint8_t *u = f + 2;
		struct ddp_hdr h = { .tagged = u[0] & DDP_FLAG_T, .last = u[0] & DDP_FLAG_L,
				     .dv = u[0] & DDP_DV_MASK, .rsvdulp = u[1],
				     .rsvdulp2 = xs_get_be32(u + 2), .qn = xs_get_be32(u + 6),
				     .msn = xs_get_be32(u + 10), .mo = xs_get_be32(u + 14) };
		CHECK(!h.tagged && h.last && h.dv == 1);
		CHECK_EQ_U(h.msn, 1);
		CHECK_EQ_U(h.mo, 0);
		enum rdmap_opcode op;
		struct xs_err e;
		CHECK_EQ_U(rdmap_hdr_check(&h, &op, &e), 0);
		CHECK_EQ_U(op, RDMAP_OP_TERMINATE);

		const uint8_t *body = u + DDP_UNTAGGED_HDR_LEN;
		size_t blen = ulpdu - DDP_UNTAGGED_HDR_LEN;
		struct rdmap_term t;
		REQUIRE(rdmap_term_decode_siw(body, blen, &t, &e) == 0);
		CHECK_EQ_U(t.cause.layer, v->siw.layer);
		CHECK_EQ_U(t.cause.etype, v->siw.etype);
		CHECK_EQ_U(t.cause.ecode, v->siw.ecode);
		CHECK_EQ_U(t.m, v->m);
		CHECK_EQ_U(t.d, v->d);
		CHECK_EQ_U(t.r, v->r);
		CHECK_EQ_U(t.ddp_seg_len, v->seg_len);
		CHECK_EQ_U(t.ddp_hdr_len, v->hdr_len);
		CHECK_EQ_U(t.rdmap_hdr_len, v->r ? 28 : 0);
		/* every triple siw meant is one the RFCs define */
		CHECK(xs_err_lookup(&t.cause) != NULL);

		/* Our RFC encoder writes the same optional fields; only the
		 * control word differs (swapped nibbles, flags in bits 7..5). */
		uint8_t re[RDMAP_TERM_MAX_LEN];
		ssize_t rn = rdmap_term_encode(&t, re, sizeof re);
		REQUIRE(rn == (ssize_t)blen);
		CHECK_EQ_U(re[0], (body[0] & 0x0f) << 4 | body[0] >> 4);
		CHECK_EQ_U(re[1], body[1]);
		CHECK_EQ_U(re[2], ((body[2] & 1) << 7) | ((body[2] & 2) << 5) | ((body[2] & 4) << 3));
		CHECK(memcmp(re + 4, body + 4, blen - 4) == 0);

		/* The RFC reading: the swapped control word misleads it, and
		 * siw's flags sit in Reserved, so attached headers look like
		 * trailing garbage. */
		struct rdmap_term r;
		int rc = rdmap_term_decode(body, blen, &r, NULL);
		CHECK_EQ_U(rc, v->rfc_rc);
		if (rc == 0) {
			CHECK_EQ_U(r.cause.layer, v->rfc.layer);
			CHECK_EQ_U(r.cause.etype, v->rfc.etype);
			CHECK_EQ_U(r.cause.ecode, v->rfc.ecode);
			CHECK(!r.m && !r.d && !r.r);
		}
	}

	/* Details worth pinning down. */
	uint8_t f[128];
	struct rdmap_term t;
	/* badstag: the Write that hit STag 0xdeadbe00, TO 0, 64 octets */
	size_t n = xs_hex(vecs[2].fpdu, f, sizeof f);
	REQUIRE(rdmap_term_decode_siw(f + 20, n - 24, &t, NULL) == 0);
	CHECK_EQ_U(t.ddp_hdr[0], 0xc1);
	CHECK_EQ_U(t.ddp_hdr[1], 0x40);
	CHECK_EQ_U(xs_get_be32(t.ddp_hdr + 2), 0xdeadbe00u);
	CHECK_EQ_U(xs_get_be64(t.ddp_hdr + 6), 0);
	/* oobread: the quoted Read Request (siw puts the read size, 0x40, in the
	 * quoted header's MSN field instead of the MSN 1) */
	n = xs_hex(vecs[4].fpdu, f, sizeof f);
	REQUIRE(rdmap_term_decode_siw(f + 20, n - 24, &t, NULL) == 0);
	CHECK_EQ_U(t.ddp_hdr[1], 0x41);
	CHECK_EQ_U(xs_get_be32(t.ddp_hdr + 6), 1); /* QN */
	CHECK_EQ_U(xs_get_be32(t.ddp_hdr + 10), 0x40); /* "MSN" */
	struct rdmap_read_req rr;
	REQUIRE(rdmap_read_req_decode(t.rdmap_hdr, t.rdmap_hdr_len, &rr, NULL) == 0);
	CHECK_EQ_U(rr.sink_stag, 0x0a0b0c00u);
	CHECK_EQ_U(rr.sink_to, 0x7f0000003000ull);
	CHECK_EQ_U(rr.size, 64);
	CHECK_EQ_U(rr.src_stag, 0x5d3c2d00u);
	CHECK_EQ_U(rr.src_to, 0x55c21aedc590ull);
	/* badqn / badmsn / badmo: the quoted Send header shows the bad field */
	n = xs_hex(vecs[10].fpdu, f, sizeof f);
	REQUIRE(rdmap_term_decode_siw(f + 20, n - 24, &t, NULL) == 0);
	CHECK_EQ_U(xs_get_be32(t.ddp_hdr + 6), 5);
	n = xs_hex(vecs[11].fpdu, f, sizeof f);
	REQUIRE(rdmap_term_decode_siw(f + 20, n - 24, &t, NULL) == 0);
	CHECK_EQ_U(xs_get_be32(t.ddp_hdr + 10), 1000);
	n = xs_hex(vecs[12].fpdu, f, sizeof f);
	REQUIRE(rdmap_term_decode_siw(f + 20, n - 24, &t, NULL) == 0);
	CHECK_EQ_U(xs_get_be32(t.ddp_hdr + 14), 64);

	/* The README's headline case by itself: 02 02 00 00. */
	uint8_t b[4] = { 0x02, 0x02, 0x00, 0x00 };
	REQUIRE(rdmap_term_decode_siw(b, 4, &t, NULL) == 0);
	CHECK_EQ_U(t.cause.layer, XS_LAYER_LLP);
	CHECK_EQ_U(t.cause.etype, MPA_ETYPE);
	CHECK_EQ_U(t.cause.ecode, 0x02);
	REQUIRE(rdmap_term_decode(b, 4, &t, NULL) == 0);
	CHECK_EQ_U(t.cause.layer, XS_LAYER_RDMAP);
	CHECK_EQ_U(t.cause.etype, RDMAP_ETYPE_REMOTE_OP);
	CHECK_EQ_U(t.cause.ecode, 0x02);
	/* What we send for that error, which siw would misread the same way. */
	struct rdmap_term mine = { .cause = { XS_LAYER_LLP, 0, 0x02 } };
	REQUIRE(rdmap_term_encode(&mine, b, sizeof b) == 4);
	CHECK_EQ_U(xs_get_be32(b), 0x20020000u);
}

int main(void)
{
	xs_test_seed(5040);
	check_round_trips();
	check_encode_args();
	check_siw_vectors();
	return xs_test_result();
}
