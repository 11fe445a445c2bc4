/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* MPA negotiation, both sides: our initiator against our responder for a
 * table of preferences, and both against the real siw frames (vectors). */
#include "config.h"

#include <errno.h>

#include "mpa/mpa.h"
#include "tests/xs_test.h"

#define REQ_KEY "4d504120494420526571204672616d65"
#define REP_KEY "4d504120494420526570204672616d65"

struct run {
	struct mpa_frame req, rep;
	uint8_t req_bytes[600], rep_bytes[600];
	size_t req_len, rep_len;
	int rc_resp, rc_init;
	struct mpa_agreed ar, ai; /* responder, initiator */
	struct xs_err er, ei;
};

/* Frames go through encode + decode, as on the wire. */
static void wire(struct mpa_frame *f, uint8_t *bytes, size_t *len)
{
	struct xs_err err;
	size_t used;
	ssize_t n = mpa_frame_encode(f, bytes, 600);

	REQUIRE(n > 0);
	*len = (size_t)n;
	REQUIRE(mpa_frame_decode(bytes, *len, f->type, f, &used, &err) == 0);
	REQUIRE(used == *len);
}

static void run(const struct mpa_prefs *ini, const struct mpa_prefs *rsp, struct run *r)
{
	memset(r, 0, sizeof(*r));
	mpa_request_build(ini, &r->req);
	wire(&r->req, r->req_bytes, &r->req_len);
	r->rc_resp = mpa_respond(rsp, &r->req, &r->rep, &r->ar, &r->er);
	wire(&r->rep, r->rep_bytes, &r->rep_len);
	r->rc_init = mpa_initiator_complete(ini, &r->req, &r->rep, &r->ai, &r->ei);
}

/* The tests of RFC 5044/6581 behaviour compare exact bytes: without the
 * RFC 7306 announcement (test_rdmap_ext has it). */
static void prefs_rfc(struct mpa_prefs *p)
{
	mpa_prefs_default(p);
	p->rdmap_ext = false;
}

static bool bytes_eq(const uint8_t *b, size_t len, const char *hex)
{
	uint8_t want[600];
	size_t n = xs_hex(hex, want, sizeof(want));

	if (n != len || memcmp(b, want, n) != 0) {
		char got[1300] = "";
		for (size_t i = 0; i < len && i < 600; i++)
			sprintf(got + 2 * i, "%02x", b[i]);
		fprintf(stderr, "  got  %s\n  want %s\n", got, hex);
		return false;
	}
	return true;
}

static void check_err(const struct xs_err *e, uint8_t code)
{
	CHECK_EQ_U(e->layer, XS_LAYER_LLP);
	CHECK_EQ_U(e->etype, 0);
	CHECK_EQ_U(e->ecode, code);
}

static void check_ok(const struct run *r)
{
	CHECK_EQ_U(r->rc_resp, 0);
	CHECK_EQ_U(r->rc_init, 0);
	CHECK(!r->rep.reject);
	/* Both ends see the same connection, mirrored. */
	CHECK_EQ_U(r->ai.rev, r->ar.rev);
	CHECK_EQ_U(r->ai.enhanced, r->ar.enhanced);
	CHECK_EQ_U(r->ai.crc, r->ar.crc);
	CHECK_EQ_U(r->ai.markers_tx, r->ar.markers_rx);
	CHECK_EQ_U(r->ai.markers_rx, r->ar.markers_tx);
	CHECK_EQ_U(r->ai.p2p, r->ar.p2p);
	CHECK_EQ_U(r->ai.rtr, r->ar.rtr);
	if (r->ai.enhanced) {
		CHECK(r->ai.ord <= r->ar.ird);
		CHECK(r->ar.ord <= r->ai.ird);
	}
}

static void test_defaults(void)
{
	struct mpa_prefs a, b;
	struct run r;

	prefs_rfc(&a);
	prefs_rfc(&b);
	CHECK_EQ_U(a.rev, 2);
	CHECK(!a.crc && !a.crc_refuse && !a.markers_rx && a.markers_tx_ok);
	CHECK_EQ_U(a.ird, 1);
	CHECK_EQ_U(a.ord, 1);
	CHECK(!a.ord_strict && !a.p2p && a.rtr_mask == MPA_RTR_ALL && !a.pdata_len);
	run(&a, &b, &r);
	check_ok(&r);
	/* Exactly what siw sends and accepts (init-rev2-crc0). */
	CHECK(bytes_eq(r.req_bytes, r.req_len, REQ_KEY "1002000400010001"));
	CHECK(bytes_eq(r.rep_bytes, r.rep_len, REP_KEY "1002000400010001"));
	CHECK_EQ_U(r.ai.rev, 2);
	CHECK(r.ai.enhanced && !r.ai.crc && !r.ai.markers_tx && !r.ai.markers_rx);
	CHECK_EQ_U(r.ai.ird, 1);
	CHECK_EQ_U(r.ai.ord, 1);
	CHECK_EQ_U(r.ar.ird, 1);
	CHECK_EQ_U(r.ar.ord, 1);
	CHECK(!r.ai.p2p && r.ai.rtr == MPA_RTR_NONE);

	/* Private data both ways. */
	static const uint8_t pa[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, pb[3] = { 9, 9, 9 };
	a.pdata = pa;
	a.pdata_len = 8;
	b.pdata = pb;
	b.pdata_len = 3;
	run(&a, &b, &r);
	check_ok(&r);
	CHECK(bytes_eq(r.req_bytes, r.req_len, REQ_KEY "1002000c000100010102030405060708"));
	CHECK(bytes_eq(r.rep_bytes, r.rep_len, REP_KEY "1002000700010001090909"));
}

static void test_irdord(void)
{
	struct mpa_prefs a, b;
	struct run r;

	/* siw-like responder (device max 128) and a 16/16 request: 16/16. */
	prefs_rfc(&a);
	prefs_rfc(&b);
	a.ird = a.ord = 16;
	b.ird = b.ord = 128;
	run(&a, &b, &r);
	check_ok(&r);
	CHECK(bytes_eq(r.rep_bytes, r.rep_len, REP_KEY "1002000400100010"));
	CHECK_EQ_U(r.ai.ird, 16);
	CHECK_EQ_U(r.ai.ord, 16);
	CHECK_EQ_U(r.ar.ird, 16);
	CHECK_EQ_U(r.ar.ord, 16);

	/* Asymmetric: initiator IRD 3 ORD 8, responder IRD 5 ORD 2. */
	a.ird = 3;
	a.ord = 8;
	b.ird = 5;
	b.ord = 2;
	run(&a, &b, &r);
	check_ok(&r);
	CHECK_EQ_U(r.rep.ird, 5); /* min(5, req ORD 8) */
	CHECK_EQ_U(r.rep.ord, 2); /* min(2, req IRD 3) */
	CHECK_EQ_U(r.ai.ord, 5); /* lowered from 8 */
	CHECK_EQ_U(r.ai.ird, 2);
	CHECK_EQ_U(r.ar.ird, 5);
	CHECK_EQ_U(r.ar.ord, 2);

	/* Same with ord_strict: Insufficient IRD. */
	a.ord_strict = true;
	run(&a, &b, &r);
	CHECK_EQ_U(r.rc_resp, 0);
	CHECK_EQ_U(r.rc_init, (unsigned long long)-EPROTO);
	check_err(&r.ei, 0x06);
	/* ord_strict satisfied. */
	b.ird = 8;
	run(&a, &b, &r);
	check_ok(&r);
	CHECK_EQ_U(r.ai.ord, 8);

	/* A Reply whose ORD exceeds our IRD. */
	prefs_rfc(&a);
	prefs_rfc(&b);
	run(&a, &b, &r);
	struct mpa_agreed ag;
	struct xs_err e;
	r.rep.ord = 2;
	CHECK_EQ_U(mpa_initiator_complete(&a, &r.req, &r.rep, &ag, &e), (unsigned long long)-EPROTO);
	check_err(&e, 0x06);
}

static void test_crc(void)
{
	struct mpa_prefs a, b;
	struct run r;

	for (int m = 0; m < 4; m++) {
		prefs_rfc(&a);
		prefs_rfc(&b);
		a.crc = m & 1;
		b.crc = m & 2;
		run(&a, &b, &r);
		check_ok(&r);
		CHECK_EQ_U(r.req.crc, a.crc);
		CHECK_EQ_U(r.rep.crc, m != 0);
		CHECK_EQ_U(r.ai.crc, m != 0);
		CHECK_EQ_U(r.ar.crc, m != 0);
	}
	/* crc_refuse (siw mpa_crc_strict) vs a CRC request: exactly siw's reject. */
	prefs_rfc(&a);
	prefs_rfc(&b);
	a.crc = true;
	b.crc_refuse = true;
	run(&a, &b, &r);
	CHECK_EQ_U(r.rc_resp, (unsigned long long)-ECONNREFUSED);
	check_err(&r.er, 0x04);
	CHECK(bytes_eq(r.rep_bytes, r.rep_len, REP_KEY "3002000400000000"));
	CHECK_EQ_U(r.rc_init, (unsigned long long)-ECONNREFUSED);
	/* crc_refuse does not matter when CRC is not asked for. */
	a.crc = false;
	run(&a, &b, &r);
	check_ok(&r);
	CHECK(!r.ai.crc);
}

static void test_markers(void)
{
	struct mpa_prefs a, b;
	struct run r;

	for (int m = 0; m < 4; m++) {
		prefs_rfc(&a);
		prefs_rfc(&b);
		a.markers_rx = m & 1;
		b.markers_rx = m & 2;
		run(&a, &b, &r);
		check_ok(&r);
		CHECK_EQ_U(r.req.markers, a.markers_rx);
		CHECK_EQ_U(r.rep.markers, b.markers_rx);
		/* Markers per direction: whoever asked receives them. */
		CHECK_EQ_U(r.ai.markers_rx, a.markers_rx);
		CHECK_EQ_U(r.ai.markers_tx, b.markers_rx);
		CHECK_EQ_U(r.ar.markers_rx, b.markers_rx);
		CHECK_EQ_U(r.ar.markers_tx, a.markers_rx);
	}
	/* Responder cannot send markers: siw's reject (resp-rev2-markers). */
	prefs_rfc(&a);
	prefs_rfc(&b);
	a.markers_rx = true;
	b.markers_tx_ok = false;
	run(&a, &b, &r);
	CHECK(bytes_eq(r.req_bytes, r.req_len, REQ_KEY "9002000400010001"));
	CHECK_EQ_U(r.rc_resp, (unsigned long long)-ECONNREFUSED);
	check_err(&r.er, 0x04);
	CHECK(bytes_eq(r.rep_bytes, r.rep_len, REP_KEY "3002000400000000"));
	CHECK_EQ_U(r.rc_init, (unsigned long long)-ECONNREFUSED);
	/* Initiator cannot send the markers the Reply asks for. */
	prefs_rfc(&a);
	prefs_rfc(&b);
	a.markers_tx_ok = false;
	b.markers_rx = true;
	run(&a, &b, &r);
	CHECK_EQ_U(r.rc_resp, 0);
	CHECK_EQ_U(r.rc_init, (unsigned long long)-EPROTO);
	check_err(&r.ei, 0x04);
}

static void test_rev(void)
{
	struct mpa_prefs a, b;
	struct run r;

	/* Rev 1 initiator, rev 2 responder: rev 1, no IRD/ORD, own limits. */
	prefs_rfc(&a);
	prefs_rfc(&b);
	a.rev = 1;
	a.ird = 3;
	a.ord = 4;
	b.ird = 7;
	b.ord = 9;
	run(&a, &b, &r);
	check_ok(&r);
	CHECK(bytes_eq(r.req_bytes, r.req_len, REQ_KEY "00010000")); /* init-rev1-crc0 */
	CHECK(bytes_eq(r.rep_bytes, r.rep_len, REP_KEY "00010000"));
	CHECK_EQ_U(r.ai.rev, 1);
	CHECK(!r.ai.enhanced && !r.ar.enhanced);
	CHECK_EQ_U(r.ai.ird, 3);
	CHECK_EQ_U(r.ai.ord, 4);
	CHECK_EQ_U(r.ar.ird, 7);
	CHECK_EQ_U(r.ar.ord, 9);
	/* With CRC: init-rev1-crc1. */
	a.crc = true;
	run(&a, &b, &r);
	check_ok(&r);
	CHECK(bytes_eq(r.req_bytes, r.req_len, REQ_KEY "40010000"));
	CHECK(bytes_eq(r.rep_bytes, r.rep_len, REP_KEY "40010000"));

	/* Rev 2 initiator, rev 1 responder: legacy Reply accepted. */
	prefs_rfc(&a);
	prefs_rfc(&b);
	b.rev = 1;
	a.ord = 5;
	a.ord_strict = true; /* nothing negotiated, nothing to be strict about */
	run(&a, &b, &r);
	check_ok(&r);
	CHECK(bytes_eq(r.rep_bytes, r.rep_len, REP_KEY "00010000"));
	CHECK_EQ_U(r.ai.rev, 1);
	CHECK(!r.ai.enhanced);
	CHECK_EQ_U(r.ai.ord, 5);
	CHECK_EQ_U(r.ai.ird, 1);

	/* A Reply with a higher revision than the Request. */
	prefs_rfc(&a);
	prefs_rfc(&b);
	a.rev = 1;
	run(&a, &b, &r);
	struct mpa_frame rep = r.rep;
	struct mpa_agreed ag;
	struct xs_err e;
	rep.rev = 2;
	CHECK_EQ_U(mpa_initiator_complete(&a, &r.req, &rep, &ag, &e), (unsigned long long)-EPROTO);
	check_err(&e, 0x04);
}

static void test_p2p(void)
{
	static const struct {
		uint8_t offer, accept, pick;
	} t[] = {
		{ MPA_RTR_WRITE, MPA_RTR_ALL, MPA_RTR_WRITE },
		{ MPA_RTR_READ, MPA_RTR_ALL, MPA_RTR_READ },
		{ MPA_RTR_SEND, MPA_RTR_ALL, MPA_RTR_SEND },
		{ MPA_RTR_ALL, MPA_RTR_ALL, MPA_RTR_WRITE },
		{ MPA_RTR_READ | MPA_RTR_SEND, MPA_RTR_ALL, MPA_RTR_READ },
		{ MPA_RTR_WRITE | MPA_RTR_SEND, MPA_RTR_ALL, MPA_RTR_WRITE },
		{ MPA_RTR_ALL, MPA_RTR_READ | MPA_RTR_SEND, MPA_RTR_READ },
		{ MPA_RTR_ALL, MPA_RTR_SEND, MPA_RTR_SEND },
		{ MPA_RTR_WRITE | MPA_RTR_READ, MPA_RTR_READ, MPA_RTR_READ },
		{ MPA_RTR_WRITE, MPA_RTR_READ, MPA_RTR_NONE },
		{ MPA_RTR_SEND, MPA_RTR_WRITE | MPA_RTR_READ, MPA_RTR_NONE },
		{ MPA_RTR_ALL, 0, MPA_RTR_NONE },
	};
	struct mpa_prefs a, b;
	struct run r;

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		prefs_rfc(&a);
		prefs_rfc(&b);
		a.p2p = true;
		a.rtr_mask = t[i].offer;
		b.rtr_mask = t[i].accept;
		run(&a, &b, &r);
		CHECK(r.req.p2p);
		CHECK_EQ_U(r.req.rtr_send, !!(t[i].offer & MPA_RTR_SEND));
		CHECK_EQ_U(r.req.rtr_write, !!(t[i].offer & MPA_RTR_WRITE));
		CHECK_EQ_U(r.req.rtr_read, !!(t[i].offer & MPA_RTR_READ));
		if (t[i].pick == MPA_RTR_NONE) {
			CHECK_EQ_U(r.rc_resp, (unsigned long long)-ECONNREFUSED);
			check_err(&r.er, 0x07);
			CHECK(r.rep.reject);
			CHECK_EQ_U(r.rc_init, (unsigned long long)-ECONNREFUSED);
			continue;
		}
		check_ok(&r);
		CHECK(r.rep.p2p && r.ai.p2p);
		CHECK_EQ_U(r.ar.rtr, t[i].pick);
		CHECK_EQ_U(r.ai.rtr, t[i].pick);
		CHECK_EQ_U(r.rep.rtr_send + r.rep.rtr_write + r.rep.rtr_read, 1);
	}

	/* The Reply's RTR must be exactly one we offered. */
	prefs_rfc(&a);
	prefs_rfc(&b);
	a.p2p = true;
	a.rtr_mask = MPA_RTR_READ;
	run(&a, &b, &r);
	check_ok(&r);
	struct mpa_frame rep;
	struct mpa_agreed ag;
	struct xs_err e;

	rep = r.rep;
	rep.rtr_read = false;
	rep.rtr_write = true; /* not offered */
	CHECK_EQ_U(mpa_initiator_complete(&a, &r.req, &rep, &ag, &e), (unsigned long long)-EPROTO);
	check_err(&e, 0x07);
	rep = r.rep;
	rep.rtr_read = false; /* none */
	CHECK_EQ_U(mpa_initiator_complete(&a, &r.req, &rep, &ag, &e), (unsigned long long)-EPROTO);
	check_err(&e, 0x07);
	a.rtr_mask = MPA_RTR_ALL;
	mpa_request_build(&a, &r.req);
	rep = r.rep;
	rep.rtr_write = true; /* two */
	CHECK_EQ_U(mpa_initiator_complete(&a, &r.req, &rep, &ag, &e), (unsigned long long)-EPROTO);
	check_err(&e, 0x07);
	/* A peer without P2P: go on without an RTR. */
	rep = r.rep;
	rep.p2p = rep.rtr_read = false;
	CHECK_EQ_U(mpa_initiator_complete(&a, &r.req, &rep, &ag, &e), 0);
	CHECK(!ag.p2p && ag.rtr == MPA_RTR_NONE);
	/* P2P in a Reply to a non-P2P Request. */
	a.p2p = false;
	mpa_request_build(&a, &r.req);
	CHECK_EQ_U(mpa_initiator_complete(&a, &r.req, &r.rep, &ag, &e), (unsigned long long)-EPROTO);
	check_err(&e, 0x07);
}

/* Decode hex as a frame. */
static void frame_of(const char *hex, enum mpa_frame_type type, struct mpa_frame *f, uint8_t *buf)
{
	struct xs_err e;
	size_t used, n = xs_hex(hex, buf, 600);

	REQUIRE(mpa_frame_decode(buf, n, type, f, &used, &e) == 0);
}

/* siw as initiator: our responder's Reply for each real Request; the
 * vectors' Replies came from our test peer and siw accepted them. */
static void test_siw_requests(void)
{
	static const struct {
		const char *req, *rep;
		enum mpa_rtr rtr;
	} t[] = {
		{ "1002000400010001", "1002000400010001", MPA_RTR_NONE }, /* init-rev2-crc0 */
		{ "5002000400010001", "5002000400010001", MPA_RTR_NONE }, /* init-rev2-crc1 */
		{ "00010000", "00010000", MPA_RTR_NONE }, /* init-rev1-crc0 */
		{ "40010000", "40010000", MPA_RTR_NONE }, /* init-rev1-crc1 */
		{ "100200048001c001", "1002000480018001", MPA_RTR_WRITE }, /* init-rev2-p2p */
		{ "1802000400010001", "1002000400010001", MPA_RTR_NONE }, /* init-rev2-gso */
		{ "00020000", "00020000", MPA_RTR_NONE }, /* resp-rev2-noenh (ours) */
	};
	uint8_t rb[600], pb[600], out[600];
	char hex[200];
	struct mpa_prefs me;
	struct mpa_frame req, rep;
	struct mpa_agreed ag;
	struct xs_err e;

	mpa_prefs_default(&me);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		snprintf(hex, sizeof(hex), REQ_KEY "%s", t[i].req);
		frame_of(hex, MPA_REQUEST, &req, rb);
		CHECK_EQ_U(mpa_respond(&me, &req, &rep, &ag, &e), 0);
		ssize_t n = mpa_frame_encode(&rep, out, sizeof(out));
		REQUIRE(n > 0);
		snprintf(hex, sizeof(hex), REP_KEY "%s", t[i].rep);
		CHECK(bytes_eq(out, (size_t)n, hex));
		CHECK_EQ_U(ag.rtr, t[i].rtr);
		CHECK_EQ_U(ag.p2p, t[i].rtr != MPA_RTR_NONE);
		CHECK_EQ_U(ag.crc, req.crc);
		/* siw announces nothing: no RFC 7306, and no Reply bit it
		 * could trip over (the vectors' bytes above) */
		CHECK(!ag.rdmap_ext);
		CHECK(!rep.rdmap_ext);
	}
	/* init-rev2-rejected: the ULP rejects; the vector's exact Reply. */
	frame_of(REQ_KEY "1002000400010001", MPA_REQUEST, &req, rb);
	mpa_reject_build(&me, &req, &rep);
	ssize_t n = mpa_frame_encode(&rep, out, sizeof(out));
	REQUIRE(n > 0);
	CHECK(bytes_eq(out, (size_t)n, REP_KEY "3002000400010001"));

	/* siw as responder: our Requests equal the vectors', and siw's real
	 * Replies complete (or refuse) as expected. */
	struct mpa_prefs a;

	/* resp-rev2-p2p-write / -read */
	for (int rd = 0; rd < 2; rd++) {
		const char *hx = rd ? "1002000480014001" : "1002000480018001";
		mpa_prefs_default(&a);
		a.rdmap_ext = true;
		a.p2p = true;
		a.rtr_mask = rd ? MPA_RTR_READ : MPA_RTR_WRITE;
		mpa_request_build(&a, &req);
		n = mpa_frame_encode(&req, out, sizeof(out));
		/* the vector's Request plus the RFC 7306 bit (reserved to siw) */
		CHECK_EQ_U(out[16] & MPA_FLAG_EXT_REQ, MPA_FLAG_EXT_REQ);
		out[16] &= (uint8_t)~MPA_FLAG_EXT_REQ;
		snprintf(hex, sizeof(hex), REQ_KEY "%s", hx);
		CHECK(bytes_eq(out, (size_t)n, hex));
		snprintf(hex, sizeof(hex), REP_KEY "%s", hx);
		frame_of(hex, MPA_REPLY, &rep, pb);
		CHECK_EQ_U(mpa_initiator_complete(&a, &req, &rep, &ag, &e), 0);
		CHECK(ag.p2p);
		CHECK_EQ_U(ag.rtr, rd ? MPA_RTR_READ : MPA_RTR_WRITE);
		CHECK(!ag.rdmap_ext);
		/* what siw sends to a Request with the bit: echoed, not agreed */
		rep.res_bits |= MPA_FLAG_EXT_REQ;
		CHECK_EQ_U(mpa_initiator_complete(&a, &req, &rep, &ag, &e), 0);
		CHECK(!ag.rdmap_ext);
	}
	/* resp-rev2-ird16-ord16 */
	mpa_prefs_default(&a);
	a.ird = a.ord = 16;
	mpa_request_build(&a, &req);
	frame_of(REP_KEY "1002000400100010", MPA_REPLY, &rep, pb);
	CHECK_EQ_U(mpa_initiator_complete(&a, &req, &rep, &ag, &e), 0);
	CHECK_EQ_U(ag.ird, 16);
	CHECK_EQ_U(ag.ord, 16);
	/* resp-rev2-crc1 */
	mpa_prefs_default(&a);
	a.crc = true;
	mpa_request_build(&a, &req);
	frame_of(REP_KEY "5002000400010001", MPA_REPLY, &rep, pb);
	CHECK_EQ_U(mpa_initiator_complete(&a, &req, &rep, &ag, &e), 0);
	CHECK(ag.crc && ag.enhanced);
	/* resp-rev2-markers and resp-rev2-crc-strict: siw rejects. */
	mpa_prefs_default(&a);
	a.markers_rx = true;
	mpa_request_build(&a, &req);
	frame_of(REP_KEY "3002000400000000", MPA_REPLY, &rep, pb);
	CHECK_EQ_U(mpa_initiator_complete(&a, &req, &rep, &ag, &e), (unsigned long long)-ECONNREFUSED);
	/* resp-rev1-crc0: siw echoes rev 1 */
	mpa_prefs_default(&a);
	a.rev = 1;
	mpa_request_build(&a, &req);
	frame_of(REP_KEY "00010000", MPA_REPLY, &rep, pb);
	CHECK_EQ_U(mpa_initiator_complete(&a, &req, &rep, &ag, &e), 0);
	CHECK(!ag.enhanced && ag.rev == 1);
	/* siw's reply when our test peer was the responder and rejected. */
	mpa_prefs_default(&a);
	mpa_request_build(&a, &req);
	frame_of(REP_KEY "3002000400010001", MPA_REPLY, &rep, pb);
	CHECK_EQ_U(mpa_initiator_complete(&a, &req, &rep, &ag, &e), (unsigned long long)-ECONNREFUSED);
}

/* RFC 7306 announcement: Request bit 0x04, Reply bit 0x02, agreed only
 * when the Reply carries its own bit. */
static void test_rdmap_ext(void)
{
	struct mpa_prefs a, b;
	struct run r;

	/* xsock <-> xsock */
	mpa_prefs_default(&a);
	CHECK(!a.rdmap_ext); /* off unless the owner carries it out */
	a.rdmap_ext = true;
	b = a;
	run(&a, &b, &r);
	check_ok(&r);
	CHECK(bytes_eq(r.req_bytes, r.req_len, REQ_KEY "1402000400010001"));
	CHECK(bytes_eq(r.rep_bytes, r.rep_len, REP_KEY "1202000400010001"));
	CHECK(r.ar.rdmap_ext && r.ai.rdmap_ext);

	/* one side without it: neither uses it, and a responder without it
	 * sends no Reply bit */
	for (int side = 0; side < 2; side++) {
		mpa_prefs_default(&a);
		a.rdmap_ext = true;
		b = a;
		(side ? &a : &b)->rdmap_ext = false;
		run(&a, &b, &r);
		check_ok(&r);
		CHECK(!r.ar.rdmap_ext && !r.ai.rdmap_ext);
		CHECK(bytes_eq(r.rep_bytes, r.rep_len, REP_KEY "1002000400010001"));
	}

	/* siw as responder: its Reply is our Request with key, M, C, R
	 * rewritten, so 0x04 comes back; that is no answer */
	uint8_t rb[600];
	struct mpa_frame req, rep;
	struct mpa_agreed ag;
	struct xs_err e;

	mpa_prefs_default(&a);
	a.rdmap_ext = true;
	mpa_request_build(&a, &req);
	frame_of(REP_KEY "1402000400010001", MPA_REPLY, &rep, rb);
	CHECK(!rep.rdmap_ext);
	CHECK_EQ_U(rep.res_bits, MPA_FLAG_EXT_REQ);
	CHECK_EQ_U(mpa_initiator_complete(&a, &req, &rep, &ag, &e), 0);
	CHECK(!ag.rdmap_ext);
	/* the Reply bit in a Request is just reserved (echoed as seen) */
	frame_of(REQ_KEY "1202000400010001", MPA_REQUEST, &req, rb);
	CHECK(!req.rdmap_ext);
	CHECK_EQ_U(req.res_bits, MPA_FLAG_EXT_REP);
	CHECK_EQ_U(mpa_respond(&a, &req, &rep, &ag, &e), 0);
	CHECK(!ag.rdmap_ext && !rep.rdmap_ext);
	/* a rejecting Reply carries no agreement */
	frame_of(REQ_KEY "1402000400010001", MPA_REQUEST, &req, rb);
	mpa_reject_build(&a, &req, &rep);
	CHECK(rep.reject);
}

int main(void)
{
	test_defaults();
	test_irdord();
	test_crc();
	test_markers();
	test_rev();
	test_p2p();
	test_siw_requests();
	test_rdmap_ext();
	return xs_test_result();
}
