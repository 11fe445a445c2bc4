/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* roce/: every header against octets written by hand from the IBTA layout
 * (Vol. 1 9.2-9.5) and back; the opcode table against rxe's (Linux 6.1
 * rxe_opcode.c); ICRC known answers; every roce_perr from a crafted
 * packet; build -> parse for every opcode with payloads of 0..9 octets.
 *
 * The ICRC known answers were computed outside this code: a one-off
 * python3 script built each whole IP datagram as a sender would (real TOS,
 * TTL, flow label, IP and UDP checksums), masked it as rxe_icrc.c:96-121
 * does and ran zlib.crc32 over 8 x 0xFF + the masked IP, UDP and BTH + the
 * rest; the datagrams are in the comments.  tshark 4.0's InfiniBand
 * dissector shows the ICRC (infiniband.invariant.crc) but has no
 * preference that checks it.
 * One vector is real hardware: a CNP a ConnectX-4 Lx sent (in
 * test_icrc_kat).
 * rxe's own packets (the .hex files of tests/vectors/roce, captured on the interop
 * guest's tap: README.md there) are parsed with their ICRC checked, and
 * their IPv4 IDs, which rxe hashes, found again by roce_icrc_find_id. */
#include "config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roce/roce.h"
#include "tests/xs_test.h"

static size_t hex(const char *h, uint8_t *b, size_t cap)
{
	return xs_hex(h, b, cap);
}

/* ---- headers against hand-written octets -------------------------------- */

static void test_bth(void)
{
	/* opcode 0x0a; SE, pad 2, TVer 0 -> 0xa0; P_Key 0xfffe; F B -> 0xc0,
	 * DestQP 0x123456; A -> 0x80, PSN 0xabcdef */
	uint8_t want[ROCE_BTH_LEN], b[ROCE_BTH_LEN];
	struct roce_bth h = { .opcode = 0x0a, .se = true, .pad = 2, .pkey = 0xfffe, .fecn = true,
			      .becn = true, .dqpn = 0x123456, .ackreq = true, .psn = 0xabcdef };
	struct roce_bth d;

	hex("0a a0 ff fe c0 12 34 56 80 ab cd ef", want, sizeof(want));
	roce_bth_encode(&h, b);
	CHECK(memcmp(b, want, sizeof(b)) == 0);
	roce_bth_decode(b, &d);
	CHECK(d.opcode == 0x0a && d.se && !d.mig && d.pad == 2 && d.tver == 0);
	CHECK(d.pkey == 0xfffe && d.fecn && d.becn && d.dqpn == 0x123456);
	CHECK(d.ackreq && d.psn == 0xabcdef);

	/* M and TVer; reserved bits ignored on decode; out-of-range values
	 * are masked on encode */
	hex("11 4f ff ff 3f 00 00 01 7f 00 00 02", want, sizeof(want));
	roce_bth_decode(want, &d);
	CHECK(d.opcode == 0x11 && !d.se && d.mig && d.pad == 0 && d.tver == 0xf);
	CHECK(!d.fecn && !d.becn && d.dqpn == 1 && !d.ackreq && d.psn == 2);
	h = (struct roce_bth){ .opcode = 0x11, .mig = true, .pad = 7, .tver = 0x1f, .pkey = 0xffff,
			       .dqpn = 0xff000001, .psn = 0xff000002 };
	roce_bth_encode(&h, b);
	hex("11 7f ff ff 00 00 00 01 00 00 00 02", want, sizeof(want));
	CHECK(memcmp(b, want, sizeof(b)) == 0);
}

static void test_ext(void)
{
	uint8_t want[ROCE_ATMETH_LEN], b[ROCE_ATMETH_LEN];

	struct roce_reth r = { .va = 0x0102030405060708ull, .rkey = 0x090a0b0c,
			       .dma_len = 0x0d0e0f10 }, rd;
	hex("01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10", want, sizeof(want));
	roce_reth_encode(&r, b);
	CHECK(memcmp(b, want, ROCE_RETH_LEN) == 0);
	roce_reth_decode(b, &rd);
	CHECK(rd.va == r.va && rd.rkey == r.rkey && rd.dma_len == r.dma_len);

	/* syndrome: NAK, remote access error (0x62); MSN 0xabcdef */
	struct roce_aeth a = { .syndrome = ROCE_AETH_NAK | ROCE_NAK_REMOTE_ACCESS, .msn = 0xabcdef },
			 ad;
	hex("62 ab cd ef", want, sizeof(want));
	roce_aeth_encode(&a, b);
	CHECK(memcmp(b, want, ROCE_AETH_LEN) == 0);
	roce_aeth_decode(b, &ad);
	CHECK(ad.syndrome == 0x62 && ad.msn == 0xabcdef);
	a.msn = 0xff000001; /* the MSN is 24 bits: the syndrome survives */
	roce_aeth_encode(&a, b);
	CHECK(b[0] == 0x62 && b[1] == 0 && b[2] == 0 && b[3] == 1);

	struct roce_atmeth m = { .va = 0x1112131415161718ull, .rkey = 0x191a1b1c,
				 .swap_add = 0x2122232425262728ull, .cmp = 0x3132333435363738ull },
			   md;
	hex("11 12 13 14 15 16 17 18 19 1a 1b 1c 21 22 23 24 25 26 27 28"
	    " 31 32 33 34 35 36 37 38",
	    want, sizeof(want));
	roce_atmeth_encode(&m, b);
	CHECK(memcmp(b, want, ROCE_ATMETH_LEN) == 0);
	roce_atmeth_decode(b, &md);
	CHECK(md.va == m.va && md.rkey == m.rkey && md.swap_add == m.swap_add && md.cmp == m.cmp);

	/* Q_Key, reserved octet, source QP */
	struct roce_deth dt = { .qkey = ROCE_GSI_QKEY, .src_qp = 0xfedcba }, dd;
	hex("80 01 00 00 00 fe dc ba", want, sizeof(want));
	roce_deth_encode(&dt, b);
	CHECK(memcmp(b, want, ROCE_DETH_LEN) == 0);
	b[4] = 0x5a; /* reserved: ignored */
	roce_deth_decode(b, &dd);
	CHECK(dd.qkey == ROCE_GSI_QKEY && dd.src_qp == 0xfedcba);

	hex("f1 f2 f3 f4 f5 f6 f7 f8", want, sizeof(want));
	roce_atmack_encode(0xf1f2f3f4f5f6f7f8ull, b);
	CHECK(memcmp(b, want, ROCE_ATMACK_LEN) == 0);
	CHECK(roce_atmack_decode(b) == 0xf1f2f3f4f5f6f7f8ull);
}

static void test_psn(void)
{
	CHECK(roce_psn_diff(5, 3) == 2 && roce_psn_diff(3, 5) == -2);
	CHECK(roce_psn_diff(0, 0xffffff) == 1 && roce_psn_diff(0xffffff, 0) == -1);
	CHECK(roce_psn_diff(0x800000, 0) == -0x800000 && roce_psn_diff(0x7fffff, 0) == 0x7fffff);
	CHECK(roce_psn_add(0xfffffe, 3) == 1);
	for (uint32_t n = 0; n < 8; n++)
		CHECK(roce_pad(n) == (4 - n % 4) % 4 && (n + roce_pad(n)) % 4 == 0);
}

/* ---- the opcode table against rxe_opcode.c ------------------------------- */

struct rxe_op {
	uint8_t op;
	uint8_t hdr_len; /* rxe's .length */
	uint32_t hdrs; /* rxe's header masks as ours */
	uint32_t pos; /* START/MIDDLE/END */
	bool payload;
};

/* transcribed from Linux 6.1 drivers/infiniband/sw/rxe/rxe_opcode.c */
static const struct rxe_op rxe_table[] = {
	{ 0x00, 12, 0, ROCE_F_FIRST, true },
	{ 0x01, 12, 0, ROCE_F_MIDDLE, true },
	{ 0x02, 12, 0, ROCE_F_LAST, true },
	{ 0x03, 16, ROCE_F_IMMDT, ROCE_F_LAST, true },
	{ 0x04, 12, 0, ROCE_F_FIRST | ROCE_F_LAST, true },
	{ 0x05, 16, ROCE_F_IMMDT, ROCE_F_FIRST | ROCE_F_LAST, true },
	{ 0x06, 28, ROCE_F_RETH, ROCE_F_FIRST, true },
	{ 0x07, 12, 0, ROCE_F_MIDDLE, true },
	{ 0x08, 12, 0, ROCE_F_LAST, true },
	{ 0x09, 16, ROCE_F_IMMDT, ROCE_F_LAST, true },
	{ 0x0a, 28, ROCE_F_RETH, ROCE_F_FIRST | ROCE_F_LAST, true },
	{ 0x0b, 32, ROCE_F_RETH | ROCE_F_IMMDT, ROCE_F_FIRST | ROCE_F_LAST, true },
	{ 0x0c, 28, ROCE_F_RETH, ROCE_F_FIRST | ROCE_F_LAST, false },
	{ 0x0d, 16, ROCE_F_AETH, ROCE_F_FIRST, true },
	{ 0x0e, 12, 0, ROCE_F_MIDDLE, true },
	{ 0x0f, 16, ROCE_F_AETH, ROCE_F_LAST, true },
	{ 0x10, 16, ROCE_F_AETH, ROCE_F_FIRST | ROCE_F_LAST, true },
	{ 0x11, 16, ROCE_F_AETH, ROCE_F_FIRST | ROCE_F_LAST, false },
	{ 0x12, 24, ROCE_F_AETH | ROCE_F_ATMACK, ROCE_F_FIRST | ROCE_F_LAST, false },
	{ 0x13, 40, ROCE_F_ATMETH, ROCE_F_FIRST | ROCE_F_LAST, false },
	{ 0x14, 40, ROCE_F_ATMETH, ROCE_F_FIRST | ROCE_F_LAST, false },
	{ 0x16, 16, ROCE_F_IETH, ROCE_F_LAST, true },
	{ 0x17, 16, ROCE_F_IETH, ROCE_F_FIRST | ROCE_F_LAST, true },
	{ 0x64, 20, ROCE_F_DETH, ROCE_F_FIRST | ROCE_F_LAST, true },
	{ 0x65, 24, ROCE_F_DETH | ROCE_F_IMMDT, ROCE_F_FIRST | ROCE_F_LAST, true },
};

#define HDR_FLAGS                                                                        \
	(ROCE_F_RETH | ROCE_F_AETH | ROCE_F_IMMDT | ROCE_F_IETH | ROCE_F_ATMETH |        \
	 ROCE_F_ATMACK | ROCE_F_DETH)
#define POS_FLAGS (ROCE_F_FIRST | ROCE_F_MIDDLE | ROCE_F_LAST)

static void test_opcodes(void)
{
	unsigned n = 0;

	for (unsigned op = 0; op < 256; op++)
		if (roce_ops[op].name)
			n++;
	CHECK_EQ_U(n, sizeof(rxe_table) / sizeof(rxe_table[0]));
	for (size_t i = 0; i < sizeof(rxe_table) / sizeof(rxe_table[0]); i++) {
		const struct rxe_op *r = &rxe_table[i];
		const struct roce_op_info *o = &roce_ops[r->op];

		REQUIRE(o->name);
		CHECK_EQ_U(o->hdr_len, r->hdr_len);
		CHECK_EQ_U(o->flags & HDR_FLAGS, r->hdrs);
		CHECK_EQ_U(o->flags & POS_FLAGS, r->pos);
		CHECK_EQ_U(!!(o->flags & ROCE_F_PAYLOAD), r->payload);
		/* one direction each; UD only for 0x64/0x65 */
		CHECK_EQ_U(!!(o->flags & ROCE_F_REQ) + !!(o->flags & ROCE_F_RESP), 1);
		CHECK_EQ_U(!!(o->flags & ROCE_F_UD), r->op >= 0x64);
		/* hdr_len is the sum of the headers the flags name */
		unsigned sum = ROCE_BTH_LEN;
		sum += (o->flags & ROCE_F_RETH) ? ROCE_RETH_LEN : 0;
		sum += (o->flags & ROCE_F_AETH) ? ROCE_AETH_LEN : 0;
		sum += (o->flags & ROCE_F_IMMDT) ? ROCE_IMMDT_LEN : 0;
		sum += (o->flags & ROCE_F_IETH) ? ROCE_IETH_LEN : 0;
		sum += (o->flags & ROCE_F_ATMETH) ? ROCE_ATMETH_LEN : 0;
		sum += (o->flags & ROCE_F_ATMACK) ? ROCE_ATMACK_LEN : 0;
		sum += (o->flags & ROCE_F_DETH) ? ROCE_DETH_LEN : 0;
		CHECK_EQ_U(sum, o->hdr_len);
		CHECK(o->hdr_len <= ROCE_MAX_HDR_LEN);
	}
	CHECK(roce_ops[0x15].name == NULL && roce_ops[0x18].name == NULL);
	CHECK(roce_ops[0x20].name == NULL && roce_ops[0x66].name == NULL);
	CHECK(roce_ops[0xff].name == NULL);
}

/* ---- ICRC known answers ------------------------------------------------- */

struct kat {
	const char *name;
	bool v6;
	const char *src, *dst;
	uint16_t sport, ip_id;
	const char *udp; /* the UDP payload: BTH .. ICRC */
	uint32_t icrc;
	uint8_t opcode;
	uint32_t paylen;
};

static const struct kat kat[] = {
	/* 45020034 1234 4000 4011 0e81 0a000302 0a000301 c0a5 12b7 0020 0000 ... */
	{ "IPv4 RC Send Only, IP ID 0x1234 (as rxe's)", false, "10.0.3.2", "10.0.3.1", 0xc0a5,
	  0x1234, "0430ffff000000118000012368656c6c6f0000003143a6a1", 0xa1a64331, 0x04, 5 },
	/* 6a512345 0034 11 39 2001:db8::1 2001:db8::2 c123 12b7 0034 1234 ... */
	{ "IPv6 RC Write Only with Immediate, FECN", true, "2001:db8::1", "2001:db8::2", 0xc123,
	  0,
	  "0ba0ffff8000abcd80fffffe00007f001234567800001a2b00000006deadbeef6162636465660000a2ea6419",
	  0x1964eaa2, 0x0b, 6 },
	/* 45000030 0000 4000 4011 20bb 0a000301 0a000302 c0b7 12b7 001c 0000 ... */
	{ "IPv4 RC ACK, BECN, IP ID 0", false, "10.0.3.1", "10.0.3.2", 0xc0b7, 0,
	  "1100ffff40000022000001241f0000050286de17", 0x17de8602, 0x11, 0 },
};

static void kat_ip(const struct kat *k, struct roce_ip *ip)
{
	*ip = (struct roce_ip){ .v6 = k->v6, .sport = k->sport, .dport = ROCE_UDP_PORT,
				.ip_id = k->ip_id };
	REQUIRE(inet_pton(k->v6 ? AF_INET6 : AF_INET, k->src, ip->src) == 1);
	REQUIRE(inet_pton(k->v6 ? AF_INET6 : AF_INET, k->dst, ip->dst) == 1);
}

static void test_icrc_kat(void)
{
	for (size_t i = 0; i < sizeof(kat) / sizeof(kat[0]); i++) {
		const struct kat *k = &kat[i];
		uint8_t b[256], out[256];
		size_t len = hex(k->udp, b, sizeof(b));
		struct roce_ip ip;
		struct roce_pkt p;

		printf("ICRC: %s\n", k->name);
		kat_ip(k, &ip);
		CHECK_EQ_U(roce_icrc(&ip, b, len - 4), k->icrc);
		CHECK_EQ_U(roce_icrc_get(b + len - 4), k->icrc);
		/* incremental: any split after the BTH gives the same */
		for (size_t cut = ROCE_BTH_LEN; cut <= len - 4; cut++) {
			uint32_t c = roce_icrc_start(&ip, b, len - 4);

			c = roce_icrc_add(c, b + ROCE_BTH_LEN, cut - ROCE_BTH_LEN);
			c = roce_icrc_add(c, b + cut, len - 4 - cut);
			CHECK_EQ_U(c, k->icrc);
		}
		REQUIRE(roce_pkt_parse(b, len, &ip, ROCE_PKEY_DEFAULT, &p) == ROCE_OK);
		CHECK_EQ_U(p.bth.opcode, k->opcode);
		CHECK_EQ_U(p.paylen, k->paylen);
		/* rebuilt from the parsed fields: the same octets */
		size_t n = roce_pkt_build(&p, p.payload, p.paylen, &ip, out);
		CHECK_EQ_U(n, len);
		CHECK(memcmp(out, b, len) == 0);
		/* what the ICRC covers: the IP ID, the addresses, the ports */
		struct roce_ip o = ip;
		o.ip_id ^= 1;
		CHECK(k->v6 || roce_pkt_parse(b, len, &o, ROCE_PKEY_DEFAULT, &p) == ROCE_E_ICRC);
		o = ip;
		o.src[3] ^= 1;
		CHECK(roce_pkt_parse(b, len, &o, ROCE_PKEY_DEFAULT, &p) == ROCE_E_ICRC);
		o = ip;
		o.sport ^= 1;
		CHECK(roce_pkt_parse(b, len, &o, ROCE_PKEY_DEFAULT, &p) == ROCE_E_ICRC);
		/* and what it does not: BTH octet 4 (FECN, BECN, resv6) */
		uint8_t m[256];
		memcpy(m, b, len);
		m[4] ^= 0xc0;
		CHECK(roce_pkt_parse(m, len, &ip, ROCE_PKEY_DEFAULT, &p) == ROCE_OK);
		/* any other octet does */
		for (size_t j = 0; j < len - 4; j++) {
			if (j == 4)
				continue;
			memcpy(m, b, len);
			m[j] ^= 0x01;
			CHECK_EQ_U(roce_icrc(&ip, m, len - 4) != k->icrc, 1);
		}
	}
	/* Real hardware: a CNP (opcode 0x81, BECN set, IP ID 0x718c) a
	 * ConnectX-4 Lx sent, as captured in scapy's test/contrib/roce.uts
	 * ("RoCE CNP captured on ConnectX-4 Lx"): 45c2003c 718c 4000 4011 9161
	 * 0a001101 0a001201, UDP 0000 12b7 0028 0000.  Not an opcode we take,
	 * but its ICRC is computed the same way: this checks the masks (TOS,
	 * TTL, checksums, BTH octet 4), the covered IP ID and the octet order
	 * against a NIC, independently of rxe and of the python script. */
	{
		struct kat cnp = { "ConnectX-4 Lx CNP", false, "10.0.17.1", "10.0.18.1", 0, 0x718c,
				   "8100ffff4000011800000000 00000000000000000000000000000000"
				   " 82fd002a",
				   0x2a00fd82, 0x81, 0 };
		uint8_t c[64];
		struct roce_ip ip;
		struct roce_pkt p;
		size_t len = hex(cnp.udp, c, sizeof(c));

		REQUIRE(len == 32);
		kat_ip(&cnp, &ip);
		CHECK_EQ_U(roce_icrc(&ip, c, len - 4), cnp.icrc);
		CHECK_EQ_U(roce_icrc_get(c + len - 4), cnp.icrc);
		CHECK(roce_pkt_parse(c, len, &ip, ROCE_PKEY_DEFAULT, &p) == ROCE_E_OPCODE);
	}

	/* ICRC stored least-significant octet first */
	uint8_t b[4];
	roce_icrc_put(0x11223344, b);
	CHECK(b[0] == 0x44 && b[1] == 0x33 && b[2] == 0x22 && b[3] == 0x11);
	CHECK_EQ_U(roce_icrc_get(b), 0x11223344);
}

/* ---- every parse error -------------------------------------------------- */

static struct roce_ip test_ip(void)
{
	struct roce_ip ip = { .sport = 0xc001, .dport = ROCE_UDP_PORT };

	memcpy(ip.src, (uint8_t[]){ 192, 0, 2, 1 }, 4);
	memcpy(ip.dst, (uint8_t[]){ 192, 0, 2, 2 }, 4);
	return ip;
}

static size_t build(uint8_t op, uint32_t paylen, uint8_t *out)
{
	struct roce_ip ip = test_ip();
	struct roce_pkt p = { .bth = { .opcode = op, .pkey = ROCE_PKEY_DEFAULT, .dqpn = 17 } };
	uint8_t pay[16] = "0123456789abcdef";

	return roce_pkt_build(&p, pay, paylen, &ip, out);
}

/* rewrite the ICRC after a change, so the check under test is the one hit */
static void refresh(uint8_t *b, size_t len)
{
	struct roce_ip ip = test_ip();

	roce_icrc_put(roce_icrc(&ip, b, len - 4), b + len - 4);
}

static void test_errors(void)
{
	struct roce_ip ip = test_ip();
	struct roce_pkt p;
	uint8_t b[128];
	size_t len;
	const uint16_t pk = ROCE_PKEY_DEFAULT;

	/* every error has its own text */
	for (enum roce_perr e = ROCE_OK; e < ROCE_E_COUNT; e++) {
		CHECK(roce_perr_str(e) && *roce_perr_str(e));
		for (enum roce_perr f = ROCE_OK; f < e; f++)
			CHECK(strcmp(roce_perr_str(e), roce_perr_str(f)) != 0);
	}
	CHECK(strcmp(roce_perr_str(ROCE_E_ICRC), "ICRC mismatch") == 0);
	CHECK(roce_perr_str(ROCE_E_COUNT) != NULL);
	CHECK(roce_perr_str((enum roce_perr)-1) != NULL);

	len = build(ROCE_RC_SEND_ONLY, 4, b);
	REQUIRE(len == 12 + 4 + 4);
	CHECK(roce_pkt_parse(b, len, &ip, pk, &p) == ROCE_OK);
	CHECK(roce_pkt_parse(b, 15, &ip, pk, &p) == ROCE_E_SHORT);
	CHECK(roce_pkt_parse(b, 0, &ip, pk, &p) == ROCE_E_SHORT);
	CHECK(roce_pkt_parse(b, 16, NULL, pk, &p) == ROCE_OK && p.paylen == 0);

	b[1] |= 0x01; /* TVer 1 */
	refresh(b, len);
	CHECK(roce_pkt_parse(b, len, &ip, pk, &p) == ROCE_E_TVER);
	b[1] &= 0xf0;

	/* opcodes rxe does not take: the gaps, UC, RD, CNP */
	const uint8_t bad_ops[] = { 0x15, 0x18, 0x1f, 0x20, 0x24, 0x40, 0x63, 0x66, 0x81, 0xff };
	for (size_t i = 0; i < sizeof(bad_ops); i++) {
		b[0] = bad_ops[i];
		refresh(b, len);
		CHECK(roce_pkt_parse(b, len, &ip, pk, &p) == ROCE_E_OPCODE);
	}
	b[0] = ROCE_RC_SEND_ONLY;

	/* headers that do not fit: an atomic (40 + 4) in 20 octets, and one
	 * octet short */
	b[0] = ROCE_RC_CMP_SWAP;
	refresh(b, len);
	CHECK(roce_pkt_parse(b, len, &ip, pk, &p) == ROCE_E_HDRLEN);
	len = build(ROCE_RC_CMP_SWAP, 0, b);
	CHECK(len == 44 && roce_pkt_parse(b, len, &ip, pk, &p) == ROCE_OK);
	refresh(b, len - 1);
	CHECK(roce_pkt_parse(b, len - 1, &ip, pk, &p) == ROCE_E_HDRLEN);

	/* pad longer than the payload */
	len = build(ROCE_RC_SEND_ONLY, 1, b);
	REQUIRE(len == 12 + 4 + 4 && (b[1] & ROCE_BTH_PAD_MASK) == 0x30);
	CHECK(roce_pkt_parse(b, len, &ip, pk, &p) == ROCE_OK && p.paylen == 1);
	len = build(ROCE_RC_SEND_ONLY, 0, b);
	b[1] |= 0x10; /* pad 1, no octet */
	refresh(b, len);
	CHECK(roce_pkt_parse(b, len, &ip, pk, &p) == ROCE_E_PAD);
	/* payload where the opcode has none: an ACK with 4 octets more, a
	 * Read Request with a pad count */
	len = build(ROCE_RC_ACK, 0, b);
	REQUIRE(len == 20);
	memmove(b + 20, b + 16, 4);
	refresh(b, 24);
	CHECK(roce_pkt_parse(b, 24, &ip, pk, &p) == ROCE_E_PAD);
	len = build(ROCE_RC_READ_REQ, 0, b);
	b[1] |= 0x20;
	refresh(b, len);
	CHECK(roce_pkt_parse(b, len, &ip, pk, &p) == ROCE_E_PAD);
	/* build refuses a payload the opcode cannot carry */
	CHECK(build(ROCE_RC_READ_REQ, 1, b) == 0 && build(ROCE_RC_ACK, 4, b) == 0);

	/* P_Key: rxe's pkey_match against 0xFFFF */
	len = build(ROCE_RC_SEND_ONLY, 8, b);
	CHECK(roce_pkt_parse(b, len, &ip, 0x7fff, &p) == ROCE_OK); /* limited vs full */
	CHECK(roce_pkt_parse(b, len, &ip, 0x8001, &p) == ROCE_E_PKEY);
	b[2] = 0x7f; /* limited member 0x7fff vs expected 0x7fff: no full member */
	refresh(b, len);
	CHECK(roce_pkt_parse(b, len, &ip, 0x7fff, &p) == ROCE_E_PKEY);
	CHECK(roce_pkt_parse(b, len, &ip, 0xffff, &p) == ROCE_OK);
	b[2] = 0x80;
	b[3] = 0x00; /* 0x8000: the invalid P_Key */
	refresh(b, len);
	CHECK(roce_pkt_parse(b, len, &ip, 0x8000, &p) == ROCE_E_PKEY);

	/* ICRC: a flipped payload octet, a flipped ICRC octet */
	len = build(ROCE_RC_SEND_ONLY, 8, b);
	b[13] ^= 0x80;
	CHECK(roce_pkt_parse(b, len, &ip, pk, &p) == ROCE_E_ICRC);
	CHECK(roce_pkt_parse(b, len, NULL, pk, &p) == ROCE_OK);
	b[13] ^= 0x80;
	b[len - 1] ^= 1;
	CHECK(roce_pkt_parse(b, len, &ip, pk, &p) == ROCE_E_ICRC);

	/* unknown opcodes are refused by the builders */
	struct roce_pkt q = { .bth = { .opcode = 0x15 } };
	CHECK(roce_pkt_encode_hdrs(&q, b) == 0);
	CHECK(roce_pkt_build(&q, NULL, 0, &ip, b) == 0);
	/* too big for a UDP datagram */
	static uint8_t big[ROCE_MAX_PKT_LEN + 64];
	q.bth.opcode = ROCE_RC_SEND_ONLY;
	/* 65504: the largest multiple of 4 in ROCE_MAX_PKT_LEN */
	CHECK(roce_pkt_build(&q, big, 65504 - 16, &ip, big) == 65504);
	CHECK(roce_pkt_build(&q, big, 65504 - 15, &ip, big) == 0);
}

/* ---- build -> parse for every opcode ------------------------------------ */

static void random_fields(struct roce_pkt *p, uint8_t op)
{
	*p = (struct roce_pkt){ 0 };
	p->bth.opcode = op;
	p->bth.se = xs_rand64() & 1;
	p->bth.mig = xs_rand64() & 1;
	p->bth.pkey = ROCE_PKEY_DEFAULT;
	p->bth.fecn = xs_rand64() & 1;
	p->bth.becn = xs_rand64() & 1;
	p->bth.dqpn = (uint32_t)xs_rand64() & ROCE_QPN_MASK;
	p->bth.ackreq = xs_rand64() & 1;
	p->bth.psn = (uint32_t)xs_rand64() & ROCE_PSN_MASK;
	p->reth = (struct roce_reth){ xs_rand64(), (uint32_t)xs_rand64(), (uint32_t)xs_rand64() };
	p->aeth = (struct roce_aeth){ (uint8_t)xs_rand64(), (uint32_t)xs_rand64() & ROCE_MSN_MASK };
	p->imm = (uint32_t)xs_rand64();
	p->ieth = (uint32_t)xs_rand64();
	p->atm = (struct roce_atmeth){ xs_rand64(), (uint32_t)xs_rand64(), xs_rand64(),
				       xs_rand64() };
	p->atm_orig = xs_rand64();
	p->deth = (struct roce_deth){ (uint32_t)xs_rand64(),
				      (uint32_t)xs_rand64() & ROCE_QPN_MASK };
}

static void test_roundtrip(void)
{
	unsigned n = 0;

	for (unsigned op = 0; op < 256; op++) {
		const struct roce_op_info *o = &roce_ops[op];

		if (!o->name)
			continue;
		for (uint32_t paylen = 0; paylen <= 9; paylen++) {
			struct roce_ip ip = test_ip();
			struct roce_pkt p, q;
			uint8_t pay[9], out[ROCE_MAX_HDR_LEN + 9 + 3 + 4];

			ip.v6 = xs_rand64() & 1;
			xs_rand_fill(ip.src, sizeof(ip.src));
			ip.ip_id = (uint16_t)xs_rand64();
			random_fields(&p, (uint8_t)op);
			xs_rand_fill(pay, sizeof(pay));
			size_t len = roce_pkt_build(&p, pay, paylen, &ip, out);

			if (paylen && !(o->flags & ROCE_F_PAYLOAD)) {
				CHECK(len == 0);
				continue;
			}
			REQUIRE(len == o->hdr_len + paylen + roce_pad(paylen) + 4);
			CHECK(len % 4 == 0 && p.bth.pad == roce_pad(paylen));
			enum roce_perr e = roce_pkt_parse(out, len, &ip, ROCE_PKEY_DEFAULT, &q);
			if (e != ROCE_OK) {
				fprintf(stderr, "%s paylen %u: %s\n", o->name, paylen,
					roce_perr_str(e));
				CHECK(0);
				continue;
			}
			n++;
			CHECK(q.paylen == paylen && memcmp(q.payload, pay, paylen) == 0);
			CHECK(q.payload == out + o->hdr_len);
			for (uint8_t k = 0; k < q.bth.pad; k++)
				CHECK(out[o->hdr_len + paylen + k] == 0);
			CHECK(q.bth.opcode == op && q.bth.se == p.bth.se && q.bth.mig == p.bth.mig);
			CHECK(q.bth.pad == p.bth.pad && q.bth.tver == 0 && q.bth.pkey == p.bth.pkey);
			CHECK(q.bth.fecn == p.bth.fecn && q.bth.becn == p.bth.becn);
			CHECK(q.bth.dqpn == p.bth.dqpn && q.bth.ackreq == p.bth.ackreq);
			CHECK(q.bth.psn == p.bth.psn);
			if (o->flags & ROCE_F_RETH)
				CHECK(q.reth.va == p.reth.va && q.reth.rkey == p.reth.rkey &&
				      q.reth.dma_len == p.reth.dma_len);
			if (o->flags & ROCE_F_AETH)
				CHECK(q.aeth.syndrome == p.aeth.syndrome && q.aeth.msn == p.aeth.msn);
			if (o->flags & ROCE_F_IMMDT)
				CHECK(q.imm == p.imm);
			if (o->flags & ROCE_F_IETH)
				CHECK(q.ieth == p.ieth);
			if (o->flags & ROCE_F_ATMETH)
				CHECK(q.atm.va == p.atm.va && q.atm.rkey == p.atm.rkey &&
				      q.atm.swap_add == p.atm.swap_add && q.atm.cmp == p.atm.cmp);
			if (o->flags & ROCE_F_ATMACK)
				CHECK(q.atm_orig == p.atm_orig);
			if (o->flags & ROCE_F_DETH)
				CHECK(q.deth.qkey == p.deth.qkey && q.deth.src_qp == p.deth.src_qp);
			/* headers the opcode lacks are left zero */
			if (!(o->flags & ROCE_F_RETH))
				CHECK(q.reth.va == 0 && q.reth.rkey == 0 && q.reth.dma_len == 0);
			if (!(o->flags & ROCE_F_IMMDT))
				CHECK(q.imm == 0);
			/* the headers encode back to the same octets */
			uint8_t hdr[ROCE_MAX_HDR_LEN];
			CHECK_EQ_U(roce_pkt_encode_hdrs(&q, hdr), o->hdr_len);
			CHECK(memcmp(hdr, out, o->hdr_len) == 0);
			/* a wrong P_Key and a wrong address are caught */
			CHECK(roce_pkt_parse(out, len, &ip, 0x1234, &q) == ROCE_E_PKEY);
			ip.dst[0] ^= 0x10;
			CHECK(roce_pkt_parse(out, len, &ip, ROCE_PKEY_DEFAULT, &q) == ROCE_E_ICRC);
		}
	}
	/* 25 opcodes: 20 with payload (10 sizes each), 5 without (1) */
	CHECK_EQ_U(n, 20 * 10 + 5);
}

/* ImmDt keeps the wire's order (as verbs' imm_data); IETH is host order */
static void test_imm_order(void)
{
	struct roce_ip ip = test_ip();
	struct roce_pkt p = { .bth = { .opcode = ROCE_RC_SEND_ONLY_IMM, .pkey = 0xffff } }, q;
	uint8_t b[64];

	p.imm = htonl(0x01020304);
	size_t len = roce_pkt_build(&p, NULL, 0, &ip, b);
	REQUIRE(len == 20);
	CHECK(b[12] == 1 && b[13] == 2 && b[14] == 3 && b[15] == 4);
	REQUIRE(roce_pkt_parse(b, len, &ip, 0xffff, &q) == ROCE_OK);
	CHECK(ntohl(q.imm) == 0x01020304);
	p = (struct roce_pkt){ .bth = { .opcode = ROCE_RC_SEND_ONLY_INV, .pkey = 0xffff },
			       .ieth = 0x0a0b0c0d };
	len = roce_pkt_build(&p, NULL, 0, &ip, b);
	CHECK(len == 20 && b[12] == 0x0a && b[15] == 0x0d);
	/* ip NULL: the ICRC octets are left zero */
	len = roce_pkt_build(&p, NULL, 0, NULL, b);
	CHECK(len == 20 && roce_icrc_get(b + 16) == 0);
}

/* the IPv4 ID an ICRC was computed with is found again (roce_icrc_id.c) */
static void test_icrc_find_id(void)
{
	struct roce_icrc_idcache cache;
	uint8_t pkt[1100];
	unsigned found = 0, escaped = 0;

	memset(&cache, 0, sizeof(cache));
	for (unsigned i = 0; i < sizeof(pkt); i++)
		pkt[i] = (uint8_t)xs_rand64();
	for (unsigned k = 0; k < 200; k++) {
		struct roce_ip ip = { .src = { 10, 0, 3, 2 }, .dst = { 10, 0, 3, 1 },
				      .sport = 0xc123, .dport = ROCE_UDP_PORT };
		size_t len = 12 + (k % 3) * 500 + (k & 3) * 4;
		uint16_t id = (uint16_t)xs_rand64();
		uint32_t want;

		ip.ip_id = id;
		want = roce_icrc(&ip, pkt, len);
		ip.ip_id = 0;
		found += roce_icrc_find_id(&cache, &ip, pkt, len, want) && ip.ip_id == id;
		pkt[len / 2] ^= 0x10; /* corrupted: must not pass (2^-16 may) */
		escaped += roce_icrc_find_id(&cache, &ip, pkt, len, want);
		pkt[len / 2] ^= 0x10;
	}
	CHECK_EQ_U(found, 200);
	CHECK(escaped <= 1);
	/* and the ICRC for a given ID from the one for ID 0 */
	for (unsigned k = 0; k < 50; k++) {
		struct roce_ip ip = { .src = { 10, 0, 3, 1 }, .dst = { 10, 0, 3, 2 },
				      .sport = 0xc777, .dport = ROCE_UDP_PORT };
		size_t len = 12 + (k % 5) * 260;
		uint16_t id = (uint16_t)xs_rand64();
		uint32_t c0 = roce_icrc(&ip, pkt, len);

		ip.ip_id = id;
		CHECK_EQ_U(roce_icrc_with_id(&cache, &ip, pkt, len, c0, id), roce_icrc(&ip, pkt, len));
	}
}

/* One vector file: every line parses with its ICRC, with the IP ID given
 * and with the ID solved for. */
static unsigned test_vector_file(const char *path, struct roce_icrc_idcache *cache)
{
	FILE *f = fopen(path, "r");
	char line[20000], fam[8], src[64], dst[64], hx[sizeof(line)];
	unsigned sport, dport, id, frag, n = 0;

	REQUIRE(f);
	while (fgets(line, sizeof(line), f)) {
		static uint8_t pkt[ROCE_MAX_PKT_LEN];
		struct roce_ip ip = { 0 };
		struct roce_pkt p;
		size_t len;

		if (line[0] == '#' || line[0] == '\n')
			continue;
		REQUIRE(sscanf(line, "%7s %63s %63s %u %u %x %x %s", fam, src, dst, &sport, &dport,
			       &id, &frag, hx) == 8);
		REQUIRE(!strcmp(fam, "v4") && frag == 0x4000);
		REQUIRE(inet_pton(AF_INET, src, ip.src) == 1 && inet_pton(AF_INET, dst, ip.dst) == 1);
		ip.sport = (uint16_t)sport;
		ip.dport = (uint16_t)dport;
		ip.ip_id = (uint16_t)id;
		len = hex(hx, pkt, sizeof(pkt));
		REQUIRE(len >= ROCE_BTH_LEN + ROCE_ICRC_LEN);
		if (roce_pkt_parse(pkt, len, &ip, ROCE_PKEY_DEFAULT, &p) != ROCE_OK) {
			fprintf(stderr, "%s: %s\n", path, line);
			CHECK(0);
			continue;
		}
		ip.ip_id = 0;
		CHECK(roce_icrc_find_id(cache, &ip, pkt, len - ROCE_ICRC_LEN,
					roce_icrc_get(pkt + len - ROCE_ICRC_LEN)));
		CHECK_EQ_U(ip.ip_id, id);
		n++;
	}
	fclose(f);
	return n;
}

static void test_rxe_vectors(void)
{
	const char *srcdir = getenv("srcdir");
	struct roce_icrc_idcache cache;
	char dir[4096];
	unsigned files = 0, pkts = 0;
	struct dirent *e;
	DIR *d;

	memset(&cache, 0, sizeof(cache));
	snprintf(dir, sizeof(dir), "%s/tests/vectors/roce", srcdir ? srcdir : ".");
	d = opendir(dir);
	REQUIRE(d);
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		char path[8192];

		if (l < 5 || strcmp(e->d_name + l - 4, ".hex"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		pkts += test_vector_file(path, &cache);
		files++;
	}
	closedir(d);
	CHECK(files >= 10);
	CHECK(pkts >= 100);
}

int main(void)
{
	xs_test_seed(4791);
	test_icrc_find_id();
	test_rxe_vectors();
	test_bth();
	test_ext();
	test_psn();
	test_opcodes();
	test_icrc_kat();
	test_errors();
	test_roundtrip();
	test_imm_order();
	return xs_test_result();
}
