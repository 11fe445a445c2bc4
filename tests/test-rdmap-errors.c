/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Error classes rdmap_hdr_check / the RDMAP decoders detect, with exact
 * triples (several inputs are the attack messages sent to siw, from
 * siw-peer/vectors/attack-*.txt), and the completeness of xs_err_table
 * against every ECODE constant of the wire headers. */
#include "config.h"

#include <errno.h>

#include "iwarp/rdmap.h"
#include "mpa/mpa_wire.h"
#include "tests/xs_test.h"
#include "tests/xs_test_ddp.h"
#include "util/xs_be.h"


#define EXPECT_TRIPLE(rc, e, l, t, c)                                                \
	do {                                                                         \
		CHECK_EQ_U(rc, -EPROTO);                                             \
		CHECK_EQ_U((e).layer, l);                                            \
		CHECK_EQ_U((e).etype, t);                                            \
		CHECK_EQ_U((e).ecode, c);                                            \
	} while (0)

static int check_fpdu(const char *hex, struct xs_err *e)
{
	uint8_t f[64];
	size_t n = xs_hex(hex, f, sizeof f);
	REQUIRE(n >= 2 + DDP_UNTAGGED_HDR_LEN);
	struct ddp_hdr h;
	xs_test_parse_ddp(f + 2, &h);
	*e = (struct xs_err){ 9, 9, 9 };
	return rdmap_hdr_check(&h, NULL, e);
}

static void check_classes(void)
{
	struct xs_err e;
	int rc;

	/* attack rdmapver: Send with RV 0 (RDMAP control 0x03) */
	rc = check_fpdu("00 22 41 03 00 00 00 00 00 00 00 00 00 00 00 01"
			"00 00 00 00 00 00 7f 00 00 00 10 00 11 22 33 44"
			"00 00 00 40 00 00 00 00", &e);
	EXPECT_TRIPLE(rc, e, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_VERSION);

	/* attack badopcode: untagged QN 0, reserved opcode 12 */
	rc = check_fpdu("00 22 41 4c 00 00 00 00 00 00 00 00 00 00 00 01"
			"00 00 00 00 00 00 7f 00 00 00 10 00 11 22 33 44"
			"00 00 00 40 00 00 00 00", &e);
	EXPECT_TRIPLE(rc, e, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNEXPECTED_OP);

	/* attack badqn: Send on QN 5 */
	rc = check_fpdu("00 22 41 43 00 00 00 00 00 00 00 05 00 00 00 01"
			"00 00 00 00 00 00 7f 00 00 00 10 00 11 22 33 44"
			"00 00 00 40 00 00 00 00", &e);
	EXPECT_TRIPLE(rc, e, XS_LAYER_DDP, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_INVALID_QN);

	/* attack ddpver: DV 0 is DDP's to refuse (RFC 5041), not RDMAP's */
	rc = check_fpdu("00 22 40 43 00 00 00 00 00 00 00 00 00 00 00 01"
			"00 00 00 00 00 00 7f 00 00 00 10 00 11 22 33 44"
			"00 00 00 40 00 00 00 00", &e);
	CHECK_EQ_U(rc, 0);

	/* Crafted: every other way to be wrong at this layer. */
	struct ddp_hdr h = { .tagged = true, .dv = 1, .rsvdulp = 0x43 }; /* tagged Send */
	rc = rdmap_hdr_check(&h, NULL, &e);
	EXPECT_TRIPLE(rc, e, 0, 2, 0x06);
	h = (struct ddp_hdr){ .tagged = false, .dv = 1, .rsvdulp = 0x40 }; /* untagged Write */
	rc = rdmap_hdr_check(&h, NULL, &e);
	EXPECT_TRIPLE(rc, e, 0, 2, 0x06);
	h = (struct ddp_hdr){ .tagged = false, .dv = 1, .rsvdulp = 0x42, .qn = 1 }; /* untagged Read Resp */
	rc = rdmap_hdr_check(&h, NULL, &e);
	EXPECT_TRIPLE(rc, e, 0, 2, 0x06);
	h = (struct ddp_hdr){ .tagged = true, .dv = 1, .rsvdulp = 0x47 }; /* tagged Terminate */
	rc = rdmap_hdr_check(&h, NULL, &e);
	EXPECT_TRIPLE(rc, e, 0, 2, 0x06);
	h = (struct ddp_hdr){ .tagged = false, .dv = 1, .rsvdulp = 0x4a, .qn = 1 }; /* RFC 7306 Atomic Req */
	rc = rdmap_hdr_check(&h, NULL, &e);
	EXPECT_TRIPLE(rc, e, 0, 2, 0x06);
	h = (struct ddp_hdr){ .tagged = false, .dv = 1, .rsvdulp = 0x41, .qn = 0 }; /* Read Req on QN 0 */
	rc = rdmap_hdr_check(&h, NULL, &e);
	EXPECT_TRIPLE(rc, e, 1, 2, 0x01);
	h = (struct ddp_hdr){ .tagged = false, .dv = 1, .rsvdulp = 0x47, .qn = 1 }; /* Terminate on QN 1 */
	rc = rdmap_hdr_check(&h, NULL, &e);
	EXPECT_TRIPLE(rc, e, 1, 2, 0x01);
	h = (struct ddp_hdr){ .tagged = false, .dv = 1, .rsvdulp = 0xc3, .qn = 0 }; /* RV 3 */
	rc = rdmap_hdr_check(&h, NULL, &e);
	EXPECT_TRIPLE(rc, e, 0, 2, 0x05);

	/* Read Request of 27 octets; a truncated Terminate. */
	uint8_t b[32] = { 0 };
	struct rdmap_read_req r;
	rc = rdmap_read_req_decode(b, 27, &r, &e);
	EXPECT_TRIPLE(rc, e, 0, 2, 0xff);
	struct rdmap_term t;
	rc = rdmap_term_decode(b, 3, &t, &e);
	EXPECT_TRIPLE(rc, e, 0, 2, 0xff);
}

/* Every ECODE constant of rdmap_wire.h, ddp_wire.h and mpa_wire.h with the
 * EType it belongs to and the RFC wording.  The source scan below makes
 * sure this list stays complete. */
struct expect_row {
	const char *constant;
	uint8_t layer, etype, ecode;
	const char *name;
};

#define E(c, l, t, n) { #c, l, t, c, n }
static const struct expect_row expected[] = {
	E(RDMAP_ECODE_CATASTROPHIC, 0, RDMAP_ETYPE_CATASTROPHIC, "local catastrophic error"),
	E(RDMAP_ECODE_INVALID_STAG, 0, RDMAP_ETYPE_REMOTE_PROT, "invalid STag"),
	E(RDMAP_ECODE_BASE_BOUNDS, 0, RDMAP_ETYPE_REMOTE_PROT, "base or bounds violation"),
	E(RDMAP_ECODE_ACCESS, 0, RDMAP_ETYPE_REMOTE_PROT, "access rights violation"),
	E(RDMAP_ECODE_STAG_NOT_ASSOC, 0, RDMAP_ETYPE_REMOTE_PROT,
	  "STag not associated with RDMAP stream"),
	E(RDMAP_ECODE_TO_WRAP, 0, RDMAP_ETYPE_REMOTE_PROT, "TO wrap error"),
	E(RDMAP_ECODE_STAG_CANNOT_INV, 0, RDMAP_ETYPE_REMOTE_PROT, "STag cannot be invalidated"),
	E(RDMAP_ECODE_UNSPECIFIED, 0, RDMAP_ETYPE_REMOTE_PROT, "unspecified error"),
	E(RDMAP_ECODE_VERSION, 0, RDMAP_ETYPE_REMOTE_OP, "invalid RDMAP version"),
	E(RDMAP_ECODE_UNEXPECTED_OP, 0, RDMAP_ETYPE_REMOTE_OP, "unexpected OpCode"),
	E(RDMAP_ECODE_STREAM_CATASTROPHIC, 0, RDMAP_ETYPE_REMOTE_OP,
	  "catastrophic error, localized to RDMAP stream"),
	E(RDMAP_ECODE_GLOBAL_CATASTROPHIC, 0, RDMAP_ETYPE_REMOTE_OP, "catastrophic error, global"),
	E(RDMAP_ECODE_STAG_CANNOT_INV, 0, RDMAP_ETYPE_REMOTE_OP, "STag cannot be invalidated"),
	E(RDMAP_ECODE_UNSPECIFIED, 0, RDMAP_ETYPE_REMOTE_OP, "unspecified error"),

	E(DDP_ECODE_CATASTROPHIC, 1, DDP_ETYPE_CATASTROPHIC, "local catastrophic error"),
	E(DDP_ECODE_T_INVALID_STAG, 1, DDP_ETYPE_TAGGED, "invalid STag"),
	E(DDP_ECODE_T_BASE_BOUNDS, 1, DDP_ETYPE_TAGGED, "base or bounds violation"),
	E(DDP_ECODE_T_STAG_NOT_ASSOC, 1, DDP_ETYPE_TAGGED, "STag not associated with DDP stream"),
	E(DDP_ECODE_T_TO_WRAP, 1, DDP_ETYPE_TAGGED, "TO wrap"),
	E(DDP_ECODE_T_VERSION, 1, DDP_ETYPE_TAGGED, "invalid DDP version"),
	E(DDP_ECODE_U_INVALID_QN, 1, DDP_ETYPE_UNTAGGED, "invalid QN"),
	E(DDP_ECODE_U_NO_BUFFER, 1, DDP_ETYPE_UNTAGGED, "invalid MSN - no buffer available"),
	E(DDP_ECODE_U_MSN_RANGE, 1, DDP_ETYPE_UNTAGGED, "invalid MSN - MSN range is not valid"),
	E(DDP_ECODE_U_INVALID_MO, 1, DDP_ETYPE_UNTAGGED, "invalid MO"),
	E(DDP_ECODE_U_TOO_LONG, 1, DDP_ETYPE_UNTAGGED, "DDP message too long for available buffer"),
	E(DDP_ECODE_U_VERSION, 1, DDP_ETYPE_UNTAGGED, "invalid DDP version"),

	E(MPA_ECODE_TCP_CLOSED, 2, MPA_ETYPE, "TCP connection closed, terminated or lost"),
	E(MPA_ECODE_CRC, 2, MPA_ETYPE, "MPA CRC error"),
	E(MPA_ECODE_MARKER, 2, MPA_ETYPE, "MPA Marker and ULPDU Length field mismatch"),
	E(MPA_ECODE_BAD_RR, 2, MPA_ETYPE, "invalid MPA Request frame or MPA Response frame"),
	E(MPA_ECODE_LOCAL_CATASTROPHIC, 2, MPA_ETYPE, "local catastrophic error"),
	E(MPA_ECODE_INSUFFICIENT_IRD, 2, MPA_ETYPE, "insufficient IRD resources"),
	E(MPA_ECODE_NO_MATCHING_RTR, 2, MPA_ETYPE, "no matching RTR option"),
};
#define N_EXPECTED (sizeof(expected) / sizeof(expected[0]))

static void check_table(void)
{
	char buf[160];

	CHECK_EQ_U(xs_err_table_len, N_EXPECTED);
	for (size_t i = 0; i < N_EXPECTED; i++) {
		const struct expect_row *x = &expected[i];
		struct xs_err e = { x->layer, x->etype, x->ecode };
		const struct xs_err_desc *d = xs_err_lookup(&e);
		if (!d) {
			fprintf(stderr, "no row for %s (%u/%u/0x%02x)\n", x->constant, x->layer,
				x->etype, x->ecode);
			xs_test_failures++;
			continue;
		}
		CHECK(strcmp(d->name, x->name) == 0);
		xs_err_str(&e, buf, sizeof buf);
		CHECK(strstr(buf, d->name) != NULL);
		CHECK(strstr(buf, xs_layer_name(e.layer)) == buf);
		CHECK(strstr(buf, xs_etype_name(e.layer, e.etype)) != NULL);
	}
	for (size_t i = 0; i < xs_err_table_len; i++) {
		const struct xs_err_desc *d = &xs_err_table[i];
		struct xs_err e = { d->layer, d->etype, d->ecode };
		CHECK(xs_err_lookup(&e) == d); /* found, and no earlier duplicate */
		for (size_t j = i + 1; j < xs_err_table_len; j++) {
			const struct xs_err_desc *o = &xs_err_table[j];
			CHECK(!(o->layer == d->layer && o->etype == d->etype && o->ecode == d->ecode));
		}
		CHECK(d->name && d->name[0]);
		CHECK(d->rfc && strncmp(d->rfc, "RFC ", 4) == 0);
		CHECK(d->layer <= 2 && d->etype <= 0xf);
		/* every etype with a row has a name */
		CHECK(strcmp(xs_etype_name(d->layer, d->etype), "unknown error type") != 0);
		/* the citation matches the layer */
		if (d->layer == 0)
			CHECK(strncmp(d->rfc, "RFC 5040", 8) == 0);
		if (d->layer == 1)
			CHECK(strncmp(d->rfc, "RFC 5041", 8) == 0);
		if (d->layer == 2)
			CHECK(strncmp(d->rfc, d->ecode <= 4 ? "RFC 5044" : "RFC 6581", 8) == 0);
	}

	xs_err_str(&(struct xs_err){ 1, 2, 2 }, buf, sizeof buf);
	CHECK(strcmp(buf, "DDP/untagged buffer error/0x02: invalid MSN - no buffer available") == 0);
	xs_err_str(&(struct xs_err){ 0, 2, 0xff }, buf, sizeof buf);
	CHECK(strcmp(buf, "RDMAP/remote operation error/0xff: unspecified error") == 0);
	xs_err_str(&(struct xs_err){ 2, 0, 2 }, buf, sizeof buf);
	CHECK(strcmp(buf, "LLP/MPA/0x02: MPA CRC error") == 0);

	/* Undefined triples */
	static const struct xs_err unknown[] = {
		{ 0, 0, 0x01 }, { 0, 1, 0x05 }, { 0, 2, 0x00 }, { 0, 3, 0x00 }, { 1, 2, 0x00 },
		{ 1, 2, 0x07 }, { 1, 3, 0x00 }, { 1, 1, 0x05 }, { 2, 0, 0x00 }, { 2, 0, 0x08 },
		{ 2, 1, 0x02 }, { 3, 0, 0x00 }, { 0xf, 0xf, 0xff },
	};
	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		CHECK(xs_err_lookup(&unknown[i]) == NULL);
		const char *s = xs_err_str(&unknown[i], buf, sizeof buf);
		CHECK(s == buf);
		CHECK(strstr(buf, "unknown code") != NULL);
	}
	xs_err_str(&(struct xs_err){ 0, 2, 0x42 }, buf, sizeof buf);
	CHECK(strcmp(buf, "RDMAP/remote operation error/0x42: unknown code") == 0);
	xs_err_str(&(struct xs_err){ 3, 1, 0x00 }, buf, sizeof buf);
	CHECK(strcmp(buf, "unknown layer/unknown error type/0x00: unknown code") == 0);
	CHECK(strcmp(xs_etype_name(1, 3), "reserved for use by the ULP") == 0);

	/* Never NULL, never past cap */
	CHECK(xs_err_str(&(struct xs_err){ 1, 2, 2 }, NULL, 0) != NULL);
	CHECK(xs_err_str(&(struct xs_err){ 1, 2, 2 }, buf, 0) != NULL);
	memset(buf, 'x', sizeof buf);
	CHECK(xs_err_str(&(struct xs_err){ 1, 2, 2 }, buf, 4) == buf);
	CHECK(strcmp(buf, "DDP") == 0);
	CHECK_EQ_U(buf[4], 'x');
}

/* Scan the wire headers for ECODE constants and demand each one is in
 * expected[] (so a new constant without a table row fails here). */
static void check_headers_scanned(void)
{
	const char *top = getenv("XS_TOP_SRCDIR");
	if (!top) {
		printf("XS_TOP_SRCDIR unset: header scan skipped\n");
		return;
	}
	static const char *const files[] = { "iwarp/rdmap_wire.h", "ddp/ddp_wire.h",
					     "mpa/mpa_wire.h" };
	unsigned found = 0;
	for (size_t i = 0; i < 3; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/%s", top, files[i]);
		FILE *f = fopen(path, "r");
		REQUIRE(f != NULL);
		char line[512];
		while (fgets(line, sizeof line, f)) {
			char name[128];
			if (sscanf(line, "#define %127s", name) != 1 || !strstr(name, "_ECODE_"))
				continue;
			found++;
			bool listed = false;
			for (size_t j = 0; j < N_EXPECTED; j++)
				listed |= strcmp(expected[j].constant, name) == 0;
			if (!listed) {
				fprintf(stderr, "%s: %s has no expected row\n", files[i], name);
				xs_test_failures++;
			}
		}
		fclose(f);
	}
	/* 12 RDMAP + 12 DDP + 7 MPA constants today */
	CHECK(found >= 31);
}

int main(void)
{
	check_classes();
	check_table();
	check_headers_scanned();
	return xs_test_result();
}
