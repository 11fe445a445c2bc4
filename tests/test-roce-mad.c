/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* roce/roce_cm.c: the two MADs rdma_rxe sent (tests/vectors/roce/cm-req.hex:
 * a REQ and, unanswered, its REJ timeout) decoded field by field, the
 * values checked independently with a one-off python3 decode at
 * ibta_vol1_c12.h's offsets; encode -> decode -> encode of all seven
 * messages with every field distinct and with every field at its widest;
 * fields of every message at the octets ibta_vol1_c12.h names;
 * every roce_cm_err; rdma_cm's cma_hdr. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roce/roce_cm.h"
#include "roce/roce_wire.h"
#include "tests/xs_test.h"
#include "util/xs_be.h"

/* UDP payload: BTH + DETH, the MAD, the ICRC */
#define MAD_OFF (ROCE_BTH_LEN + ROCE_DETH_LEN)

static const uint8_t gid_local[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 3, 2 };
static const uint8_t gid_remote[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 3, 1 };
static const uint8_t ip4_local[16] = { [12] = 10, 0, 3, 2 };
static const uint8_t ip4_remote[16] = { [12] = 10, 0, 3, 1 };
static const uint8_t zero[ROCE_MAD_LEN];

/* the MADs of cm-req.hex, in file order */
static unsigned read_mads(uint8_t mads[][ROCE_MAD_LEN], unsigned cap)
{
	const char *srcdir = getenv("srcdir");
	char path[4096], line[4096], hx[sizeof(line)];
	unsigned n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/tests/vectors/roce/cm-req.hex", srcdir ? srcdir : ".");
	f = fopen(path, "r");
	REQUIRE(f);
	while (fgets(line, sizeof(line), f)) {
		uint8_t pkt[1024];
		size_t len;

		if (line[0] == '#' || line[0] == '\n')
			continue;
		REQUIRE(sscanf(line, "%*s %*s %*s %*u %*u %*x %*x %s", hx) == 1);
		len = xs_hex(hx, pkt, sizeof(pkt));
		REQUIRE(len == MAD_OFF + ROCE_MAD_LEN + ROCE_ICRC_LEN && n < cap);
		memcpy(mads[n++], pkt + MAD_OFF, ROCE_MAD_LEN);
	}
	fclose(f);
	return n;
}

static void check_rxe_hdr(const struct roce_mad_hdr *h, uint16_t attr)
{
	CHECK_EQ_U(h->base_version, 1);
	CHECK_EQ_U(h->mgmt_class, ROCE_MAD_CLASS_CM);
	CHECK_EQ_U(h->class_version, 2);
	CHECK_EQ_U(h->method, ROCE_MAD_METHOD_SEND);
	CHECK_EQ_U(h->status, 0);
	CHECK_EQ_U(h->class_specific, 0);
	CHECK_EQ_U(h->tid, 0x00000002bc14c9f8ull);
	CHECK_EQ_U(h->attr_id, attr);
	CHECK_EQ_U(h->attr_mod, 0);
}

static void test_rxe_req(const uint8_t *mad)
{
	struct roce_cm_msg m;
	const struct roce_cm_req *r = &m.u.req;
	struct roce_cma_hdr c;
	uint8_t again[ROCE_MAD_LEN];

	REQUIRE(roce_cm_decode(mad, ROCE_MAD_LEN, &m) == ROCE_CM_OK);
	check_rxe_hdr(&m.hdr, ROCE_CM_ATTR_REQ);
	CHECK_EQ_U(r->local_comm_id, 0xf8c914bc);
	CHECK_EQ_U(r->vendor_id, 0);
	CHECK_EQ_U(r->service_id, 0x0000000001061c06ull);
	CHECK_EQ_U(r->service_id, roce_cm_service_id(7174));
	CHECK_EQ_U(r->local_ca_guid, 0x505400fffe787302ull);
	CHECK_EQ_U(r->local_qkey, 0);
	CHECK_EQ_U(r->local_qpn, 0x11);
	CHECK_EQ_U(r->responder_resources, 1);
	CHECK_EQ_U(r->local_eecn, 0);
	CHECK_EQ_U(r->initiator_depth, 1);
	CHECK_EQ_U(r->remote_eecn, 0);
	CHECK_EQ_U(r->remote_cm_response_timeout, 20);
	CHECK_EQ_U(r->transport_service_type, ROCE_CM_TST_RC);
	CHECK(!r->end_to_end_flow_control);
	CHECK_EQ_U(r->starting_psn, 0x921689);
	CHECK_EQ_U(r->local_cm_response_timeout, 20);
	CHECK_EQ_U(r->retry_count, 7);
	CHECK_EQ_U(r->pkey, 0xffff);
	CHECK_EQ_U(r->path_mtu, 3);
	CHECK_EQ_U(roce_cm_mtu_octets(r->path_mtu), 1024);
	CHECK(!r->rdc_exists);
	CHECK_EQ_U(r->rnr_retry_count, 7);
	CHECK_EQ_U(r->max_cm_retries, 15);
	CHECK(!r->srq);
	CHECK_EQ_U(r->extended_transport_type, 0);
	CHECK_EQ_U(r->primary.local_lid, 0xffff);
	CHECK_EQ_U(r->primary.remote_lid, 0xffff);
	CHECK(memcmp(r->primary.local_gid, gid_local, 16) == 0);
	CHECK(memcmp(r->primary.remote_gid, gid_remote, 16) == 0);
	CHECK_EQ_U(r->primary.flow_label, 0x1262f);
	CHECK_EQ_U(r->primary.packet_rate, 0);
	CHECK_EQ_U(r->primary.traffic_class, 0);
	CHECK_EQ_U(r->primary.hop_limit, 64);
	CHECK_EQ_U(r->primary.sl, 0);
	CHECK(!r->primary.subnet_local);
	CHECK_EQ_U(r->primary.local_ack_timeout, 19);
	/* no alternate path: all 0 */
	CHECK(memcmp(mad + ROCE_MAD_HDR_LEN + 96, zero, 44) == 0);
	CHECK_EQ_U(r->alternate.local_lid, 0);
	CHECK_EQ_U(r->alternate.flow_label, 0);
	CHECK(!r->sap_supported);

	/* rdma_cm's header in the private data, the rest 0 */
	REQUIRE(roce_cma_hdr_decode(r->pdata, &c) == 0);
	CHECK_EQ_U(c.version, ROCE_CMA_VERSION);
	CHECK_EQ_U(c.ip_version, 4);
	CHECK_EQ_U(c.src_port, 0x8cb7);
	CHECK(memcmp(c.src_addr, ip4_local, 16) == 0);
	CHECK(memcmp(c.dst_addr, ip4_remote, 16) == 0);
	CHECK(memcmp(r->pdata + ROCE_CMA_HDR_LEN, zero, ROCE_CM_REQ_PDATA - ROCE_CMA_HDR_LEN) == 0);
	CHECK_EQ_U(r->primary.flow_label, roce_cm_flow_label(0x8cb7, 7174));

	/* nothing reserved was set: encode gives the same octets */
	roce_cm_encode(&m, again);
	CHECK(memcmp(again, mad, ROCE_MAD_LEN) == 0);
}

static void test_rxe_rej(const uint8_t *mad)
{
	static const uint8_t guid[8] = { 0x50, 0x54, 0x00, 0xff, 0xfe, 0x78, 0x73, 0x02 };
	struct roce_cm_msg m;
	const struct roce_cm_rej *r = &m.u.rej;
	uint8_t again[ROCE_MAD_LEN];

	REQUIRE(roce_cm_decode(mad, ROCE_MAD_LEN, &m) == ROCE_CM_OK);
	check_rxe_hdr(&m.hdr, ROCE_CM_ATTR_REJ);
	/* the active side gave up waiting: its own comm ID, none from us */
	CHECK_EQ_U(r->local_comm_id, 0xf8c914bc);
	CHECK_EQ_U(r->remote_comm_id, 0);
	CHECK_EQ_U(r->message_rejected, ROCE_CM_MSG_OTHER);
	CHECK_EQ_U(r->reason, ROCE_CM_REJ_TIMEOUT);
	CHECK(!strcmp(roce_cm_rej_str(r->reason), "timeout"));
	/* ARI of a timeout: the sender's CA GUID */
	CHECK_EQ_U(r->ari_len, 8);
	CHECK(memcmp(r->ari, guid, 8) == 0);
	CHECK(memcmp(r->ari + 8, zero, ROCE_CM_REJ_ARI - 8) == 0);
	CHECK(memcmp(r->pdata, zero, ROCE_CM_REJ_PDATA) == 0);
	roce_cm_encode(&m, again);
	CHECK(memcmp(again, mad, ROCE_MAD_LEN) == 0);
}

static void test_rxe(void)
{
	uint8_t mads[4][ROCE_MAD_LEN];

	REQUIRE(read_mads(mads, 4) == 2);
	test_rxe_req(mads[0]);
	test_rxe_rej(mads[1]);
}

/* ---- round trips ------------------------------------------------------------ */

/* Field values: with widest, all ones; otherwise a different pattern for
 * every call (never 0 for a field of 2 bits or more). */
static bool widest;
static uint64_t next_k;

static uint64_t val(unsigned width)
{
	uint64_t mask = width >= 64 ? ~0ull : (1ull << width) - 1;
	uint64_t v;

	if (widest)
		return mask;
	v = (++next_k * 0x9e3779b97f4a7c15ull) >> 7;
	v &= mask;
	if (width >= 2 && (v == 0 || v == mask))
		v = next_k & mask ? next_k & mask : 1;
	return v;
}

#define SET(f, w) ((f) = (__typeof__(f))val(w))
#define SETB(f) ((f) = widest || (++next_k & 1))

static void fill(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = widest ? 0xff : (uint8_t)(val(8) ^ i);
}

static void fill_path(struct roce_cm_path *p)
{
	SET(p->local_lid, 16);
	SET(p->remote_lid, 16);
	fill(p->local_gid, 16);
	fill(p->remote_gid, 16);
	SET(p->flow_label, 20);
	SET(p->packet_rate, 6);
	SET(p->traffic_class, 8);
	SET(p->hop_limit, 8);
	SET(p->sl, 4);
	SETB(p->subnet_local);
	SET(p->local_ack_timeout, 5);
}

static void fill_msg(struct roce_cm_msg *m, uint16_t attr)
{
	roce_cm_hdr_init(m, attr, val(64));
	SET(m->hdr.status, 16);
	SET(m->hdr.class_specific, 16);
	SET(m->hdr.attr_mod, 32);
	switch (attr) {
	case ROCE_CM_ATTR_REQ: {
		struct roce_cm_req *r = &m->u.req;

		SET(r->local_comm_id, 32);
		SET(r->vendor_id, 24);
		SET(r->service_id, 64);
		SET(r->local_ca_guid, 64);
		SET(r->local_qkey, 32);
		SET(r->local_qpn, 24);
		SET(r->responder_resources, 8);
		SET(r->local_eecn, 24);
		SET(r->initiator_depth, 8);
		SET(r->remote_eecn, 24);
		SET(r->remote_cm_response_timeout, 5);
		r->transport_service_type = ROCE_CM_TST_RC; /* decode takes no other */
		SETB(r->end_to_end_flow_control);
		SET(r->starting_psn, 24);
		SET(r->local_cm_response_timeout, 5);
		SET(r->retry_count, 3);
		SET(r->pkey, 16);
		r->path_mtu = widest ? 5 : (uint8_t)(1 + val(8) % 5);
		SETB(r->rdc_exists);
		SET(r->rnr_retry_count, 3);
		SET(r->max_cm_retries, 4);
		SETB(r->srq);
		SET(r->extended_transport_type, 3);
		fill_path(&r->primary);
		fill_path(&r->alternate);
		SETB(r->sap_supported);
		fill(r->pdata, sizeof(r->pdata));
		break;
	}
	case ROCE_CM_ATTR_MRA:
		SET(m->u.mra.local_comm_id, 32);
		SET(m->u.mra.remote_comm_id, 32);
		SET(m->u.mra.message_mraed, 2);
		SET(m->u.mra.service_timeout, 5);
		fill(m->u.mra.pdata, sizeof(m->u.mra.pdata));
		break;
	case ROCE_CM_ATTR_REJ:
		SET(m->u.rej.local_comm_id, 32);
		SET(m->u.rej.remote_comm_id, 32);
		SET(m->u.rej.message_rejected, 2);
		m->u.rej.ari_len = widest ? ROCE_CM_REJ_ARI : (uint8_t)(val(8) % ROCE_CM_REJ_ARI);
		SET(m->u.rej.reason, 16);
		fill(m->u.rej.ari, sizeof(m->u.rej.ari));
		fill(m->u.rej.pdata, sizeof(m->u.rej.pdata));
		break;
	case ROCE_CM_ATTR_REP: {
		struct roce_cm_rep *r = &m->u.rep;

		SET(r->local_comm_id, 32);
		SET(r->remote_comm_id, 32);
		SET(r->local_qkey, 32);
		SET(r->local_qpn, 24);
		SET(r->vendor_id, 24);
		SET(r->local_eecn, 24);
		SET(r->starting_psn, 24);
		SET(r->responder_resources, 8);
		SET(r->initiator_depth, 8);
		SET(r->target_ack_delay, 5);
		SET(r->failover_accepted, 2);
		SETB(r->end_to_end_flow_control);
		SET(r->rnr_retry_count, 3);
		SETB(r->srq);
		SET(r->local_ca_guid, 64);
		fill(r->pdata, sizeof(r->pdata));
		break;
	}
	case ROCE_CM_ATTR_RTU:
		SET(m->u.rtu.local_comm_id, 32);
		SET(m->u.rtu.remote_comm_id, 32);
		fill(m->u.rtu.pdata, sizeof(m->u.rtu.pdata));
		break;
	case ROCE_CM_ATTR_DREQ:
		SET(m->u.dreq.local_comm_id, 32);
		SET(m->u.dreq.remote_comm_id, 32);
		SET(m->u.dreq.remote_qpn, 24);
		fill(m->u.dreq.pdata, sizeof(m->u.dreq.pdata));
		break;
	case ROCE_CM_ATTR_DREP:
		SET(m->u.drep.local_comm_id, 32);
		SET(m->u.drep.remote_comm_id, 32);
		fill(m->u.drep.pdata, sizeof(m->u.drep.pdata));
		break;
	default:
		REQUIRE(0);
	}
}

/* Both sides were zeroed whole before their fields were set (hdr_init,
 * decode), so comparing the structs' octets compares the fields. */
static void roundtrip(uint16_t attr)
{
	struct roce_cm_msg m, d;
	uint8_t a[ROCE_MAD_LEN], b[ROCE_MAD_LEN];

	fill_msg(&m, attr);
	roce_cm_encode(&m, a);
	CHECK_EQ_U(roce_cm_decode(a, sizeof(a), &d), ROCE_CM_OK);
	CHECK(memcmp(&m, &d, sizeof(m)) == 0);
	roce_cm_encode(&d, b);
	CHECK(memcmp(a, b, sizeof(a)) == 0);
	if (memcmp(&m, &d, sizeof(m)))
		fprintf(stderr, "  %s (widest %d)\n", roce_cm_attr_str(attr), widest);
}

static void test_roundtrip(void)
{
	for (int w = 0; w < 2; w++) {
		widest = w;
		for (uint16_t attr = ROCE_CM_ATTR_REQ; attr <= ROCE_CM_ATTR_DREP; attr++)
			for (int i = 0; i < (w ? 1 : 50); i++)
				roundtrip(attr);
	}
	widest = false;
}

/* the widest values land where ibta_vol1_c12.h puts them */
static void test_layout(void)
{
	struct roce_cm_msg m;
	uint8_t b[ROCE_MAD_LEN];
	const uint8_t *a = b + ROCE_MAD_HDR_LEN;

	roce_cm_hdr_init(&m, ROCE_CM_ATTR_REQ, 0x0102030405060708ull);
	m.u.req.local_qpn = 0xffffffff; /* masked to 24 bits */
	m.u.req.path_mtu = 5;
	m.u.req.retry_count = 0xff;
	m.u.req.primary.flow_label = 0xffffffff;
	m.u.req.primary.packet_rate = 0xff;
	m.u.req.alternate.local_ack_timeout = 0xff;
	m.u.req.sap_supported = true;
	roce_cm_encode(&m, b);
	CHECK_EQ_U(xs_get_be64(b + 8), 0x0102030405060708ull);
	CHECK_EQ_U(b[16] << 8 | b[17], ROCE_CM_ATTR_REQ);
	CHECK(a[31] == 0 && a[32] == 0xff && a[33] == 0xff && a[34] == 0xff && a[35] == 0);
	CHECK_EQ_U(a[47], 0x07);
	CHECK_EQ_U(a[50], 0x50);
	CHECK(a[88] == 0xff && a[89] == 0xff && a[90] == 0xf0 && a[91] == 0x3f);
	CHECK_EQ_U(a[139], 0xfc);

	roce_cm_hdr_init(&m, ROCE_CM_ATTR_REP, 1);
	m.u.rep.vendor_id = 0xabcdef;
	m.u.rep.local_qpn = 0x123456;
	m.u.rep.rnr_retry_count = 7;
	m.u.rep.srq = true;
	roce_cm_encode(&m, b);
	CHECK(a[12] == 0x12 && a[13] == 0x34 && a[14] == 0x56);
	CHECK(a[15] == 0xab && a[19] == 0xcd && a[23] == 0xef && a[27] == 0xf0);
	roce_cm_hdr_init(&m, ROCE_CM_ATTR_REP, 1);
	m.u.rep.target_ack_delay = 0x11;
	m.u.rep.failover_accepted = 2;
	m.u.rep.end_to_end_flow_control = true;
	m.u.rep.local_ca_guid = 0x1122334455667788ull;
	m.u.rep.pdata[0] = 0x5a;
	roce_cm_encode(&m, b);
	CHECK(a[26] == 0x8d && a[28] == 0x11 && a[35] == 0x88 && a[36] == 0x5a);

	roce_cm_hdr_init(&m, ROCE_CM_ATTR_MRA, 1);
	m.u.mra.remote_comm_id = 0x01020304;
	m.u.mra.message_mraed = 0xff;
	m.u.mra.service_timeout = 0xff;
	m.u.mra.pdata[0] = 0x5a;
	roce_cm_encode(&m, b);
	CHECK(a[4] == 1 && a[7] == 4 && a[8] == 0xc0 && a[9] == 0xf8 && a[10] == 0x5a);

	roce_cm_hdr_init(&m, ROCE_CM_ATTR_REJ, 1);
	m.u.rej.message_rejected = 1;
	m.u.rej.ari_len = ROCE_CM_REJ_ARI;
	m.u.rej.reason = 0x1234;
	m.u.rej.ari[0] = 0xa1;
	m.u.rej.pdata[0] = 0x5a;
	roce_cm_encode(&m, b);
	CHECK(a[8] == 0x40 && a[9] == 0x90 && a[10] == 0x12 && a[11] == 0x34);
	CHECK(a[12] == 0xa1 && a[84] == 0x5a);

	roce_cm_hdr_init(&m, ROCE_CM_ATTR_DREQ, 1);
	m.u.dreq.remote_qpn = 0xabcdef;
	m.u.dreq.pdata[0] = 0x5a;
	roce_cm_encode(&m, b);
	CHECK(a[8] == 0xab && a[10] == 0xef && a[11] == 0 && a[12] == 0x5a);

	roce_cm_hdr_init(&m, ROCE_CM_ATTR_DREP, 1);
	m.u.drep.remote_comm_id = 0x01020304;
	m.u.drep.pdata[0] = 0x5a;
	roce_cm_encode(&m, b);
	CHECK(a[7] == 4 && a[8] == 0x5a);
	roce_cm_hdr_init(&m, ROCE_CM_ATTR_RTU, 1);
	m.u.rtu.pdata[ROCE_CM_RTU_PDATA - 1] = 0x5a;
	roce_cm_encode(&m, b);
	CHECK(b[ROCE_MAD_LEN - 1] == 0x5a);
}

/* ---- errors, names ---------------------------------------------------------- */

static void test_errors(void)
{
	struct roce_cm_msg m;
	uint8_t b[ROCE_MAD_LEN + 1], ok[ROCE_MAD_LEN];
	static const uint16_t bad_attr[] = { 0x0000, 0x000f, 0x0017, 0x0018, 0x0019, 0x001a,
					     0x0010 | 0x8000, 0xffff };

	roce_cm_hdr_init(&m, ROCE_CM_ATTR_REQ, 7);
	m.u.req.path_mtu = 3;
	roce_cm_encode(&m, ok);
	memcpy(b, ok, ROCE_MAD_LEN);
	CHECK_EQ_U(roce_cm_decode(b, ROCE_MAD_LEN, &m), ROCE_CM_OK);
	CHECK_EQ_U(roce_cm_decode(b, 0, &m), ROCE_CM_ERR_LEN);
	CHECK_EQ_U(roce_cm_decode(b, ROCE_MAD_LEN - 1, &m), ROCE_CM_ERR_LEN);
	CHECK_EQ_U(roce_cm_decode(b, ROCE_MAD_LEN + 1, &m), ROCE_CM_ERR_LEN);

	b[0] = 2;
	CHECK_EQ_U(roce_cm_decode(b, ROCE_MAD_LEN, &m), ROCE_CM_ERR_BASE_VERSION);
	b[0] = 1;
	b[1] = 0x81; /* directed-route SMP */
	CHECK_EQ_U(roce_cm_decode(b, ROCE_MAD_LEN, &m), ROCE_CM_ERR_CLASS);
	b[1] = ROCE_MAD_CLASS_CM;
	b[2] = 1;
	CHECK_EQ_U(roce_cm_decode(b, ROCE_MAD_LEN, &m), ROCE_CM_ERR_CLASS_VERSION);
	b[2] = 2;
	b[3] = 0x01; /* GET */
	CHECK_EQ_U(roce_cm_decode(b, ROCE_MAD_LEN, &m), ROCE_CM_ERR_METHOD);
	b[3] = 0x83; /* a response bit on SEND */
	CHECK_EQ_U(roce_cm_decode(b, ROCE_MAD_LEN, &m), ROCE_CM_ERR_METHOD);
	b[3] = ROCE_MAD_METHOD_SEND;
	for (size_t i = 0; i < sizeof(bad_attr) / sizeof(bad_attr[0]); i++) {
		xs_put_be16(b + 16, bad_attr[i]);
		CHECK_EQ_U(roce_cm_decode(b, ROCE_MAD_LEN, &m), ROCE_CM_ERR_ATTR);
		CHECK(!strcmp(roce_cm_attr_str(bad_attr[i]), "?"));
	}
	xs_put_be16(b + 16, ROCE_CM_ATTR_REQ);

	/* REQ path MTU: 0 and 6..15 refused */
	for (unsigned mtu = 0; mtu < 16; mtu++) {
		b[ROCE_MAD_HDR_LEN + 50] = (uint8_t)(mtu << 4);
		CHECK_EQ_U(roce_cm_decode(b, ROCE_MAD_LEN, &m),
			   mtu >= 1 && mtu <= 5 ? ROCE_CM_OK : ROCE_CM_ERR_FIELD);
	}
	b[ROCE_MAD_HDR_LEN + 50] = 3 << 4;
	/* transport service type: only RC */
	for (unsigned t = 0; t < 4; t++) {
		b[ROCE_MAD_HDR_LEN + 43] = (uint8_t)(t << 1);
		CHECK_EQ_U(roce_cm_decode(b, ROCE_MAD_LEN, &m), t ? ROCE_CM_ERR_FIELD : ROCE_CM_OK);
	}
	b[ROCE_MAD_HDR_LEN + 43] = 0;

	/* REJ ARI length: up to 72 */
	roce_cm_hdr_init(&m, ROCE_CM_ATTR_REJ, 7);
	roce_cm_encode(&m, b);
	for (unsigned l = 0; l < 128; l++) {
		b[ROCE_MAD_HDR_LEN + 9] = (uint8_t)(l << 1);
		CHECK_EQ_U(roce_cm_decode(b, ROCE_MAD_LEN, &m),
			   l <= ROCE_CM_REJ_ARI ? ROCE_CM_OK : ROCE_CM_ERR_FIELD);
	}
	/* encode masks: 0x7f fits the field but decode refuses it */
	roce_cm_hdr_init(&m, ROCE_CM_ATTR_REJ, 7);
	m.u.rej.ari_len = 0xff;
	roce_cm_encode(&m, b);
	CHECK_EQ_U(b[ROCE_MAD_HDR_LEN + 9], 0xfe);
	CHECK_EQ_U(roce_cm_decode(b, ROCE_MAD_LEN, &m), ROCE_CM_ERR_FIELD);

	/* every error has its own name */
	for (int e = ROCE_CM_OK; e <= ROCE_CM_ERR_FIELD; e++) {
		const char *s = roce_cm_err_str((enum roce_cm_err)e);

		CHECK(s && s[0] && strcmp(s, "?"));
		for (int f = ROCE_CM_OK; f < e; f++)
			CHECK(strcmp(s, roce_cm_err_str((enum roce_cm_err)f)));
	}
	CHECK(!strcmp(roce_cm_err_str((enum roce_cm_err)(ROCE_CM_ERR_FIELD + 1)), "?"));
}

static void test_names(void)
{
	static const char *const attrs[] = { "REQ", "MRA", "REJ", "REP", "RTU", "DREQ", "DREP" };

	for (uint16_t a = ROCE_CM_ATTR_REQ; a <= ROCE_CM_ATTR_DREP; a++)
		CHECK(!strcmp(roce_cm_attr_str(a), attrs[a - ROCE_CM_ATTR_REQ]));
	CHECK(!strcmp(roce_cm_rej_str(ROCE_CM_REJ_INVALID_SERVICE_ID), "invalid service ID"));
	CHECK(!strcmp(roce_cm_rej_str(ROCE_CM_REJ_STALE_CONN), "stale connection"));
	CHECK(!strcmp(roce_cm_rej_str(ROCE_CM_REJ_CONSUMER_DEFINED), "consumer defined"));
	CHECK(!strcmp(roce_cm_rej_str(0), "?"));
	CHECK(!strcmp(roce_cm_rej_str(2), "?"));
	CHECK(!strcmp(roce_cm_rej_str(32), "?"));
	CHECK(!strcmp(roce_cm_rej_str(0xffff), "?"));

	for (uint8_t e = 1; e <= 5; e++) {
		CHECK_EQ_U(roce_cm_mtu_octets(e), 128u << e);
		CHECK_EQ_U(roce_cm_mtu_enum(128u << e), e);
	}
	CHECK_EQ_U(roce_cm_mtu_octets(0), 0);
	CHECK_EQ_U(roce_cm_mtu_octets(6), 0);
	CHECK_EQ_U(roce_cm_mtu_octets(0xff), 0);
	CHECK_EQ_U(roce_cm_mtu_enum(0), 0);
	CHECK_EQ_U(roce_cm_mtu_enum(1500), 0);
	CHECK_EQ_U(roce_cm_mtu_enum(8192), 0);
	CHECK_EQ_U(roce_cm_service_id(0xffff), 0x000000000106ffffull);
	CHECK_EQ_U(roce_cm_flow_label(0xffff, 0xffff), (0xffffu * 32) & 0xfffff);
}

/* ---- cma_hdr ---------------------------------------------------------------- */

static void test_cma_hdr(void)
{
	struct roce_cma_hdr h = { .version = ROCE_CMA_VERSION, .ip_version = 4,
				  .src_port = 0xc001 };
	struct roce_cma_hdr d;
	uint8_t b[ROCE_CMA_HDR_LEN], want[ROCE_CMA_HDR_LEN];

	memcpy(h.src_addr, ip4_local, 16);
	memcpy(h.dst_addr, ip4_remote, 16);
	roce_cma_hdr_encode(&h, b);
	xs_hex("00 40 c0 01 00000000 00000000 00000000 0a000302"
	       " 00000000 00000000 00000000 0a000301", want, sizeof(want));
	CHECK(memcmp(b, want, sizeof(b)) == 0);
	REQUIRE(roce_cma_hdr_decode(b, &d) == 0);
	CHECK(d.version == 0 && d.ip_version == 4 && d.src_port == 0xc001);
	CHECK(!memcmp(d.src_addr, ip4_local, 16) && !memcmp(d.dst_addr, ip4_remote, 16));

	h.ip_version = 6;
	for (int i = 0; i < 16; i++) {
		h.src_addr[i] = (uint8_t)(0xfe - i);
		h.dst_addr[i] = (uint8_t)(0x20 + i);
	}
	roce_cma_hdr_encode(&h, b);
	CHECK_EQ_U(b[1], 0x60);
	REQUIRE(roce_cma_hdr_decode(b, &d) == 0);
	CHECK(d.ip_version == 6 && d.src_port == 0xc001);
	CHECK(!memcmp(d.src_addr, h.src_addr, 16) && !memcmp(d.dst_addr, h.dst_addr, 16));

	/* the low nibble of the IP version octet is reserved */
	b[1] = 0x6f;
	CHECK(roce_cma_hdr_decode(b, &d) == 0 && d.ip_version == 6);
	for (unsigned v = 0; v < 16; v++) {
		b[1] = (uint8_t)(v << 4);
		CHECK_EQ_U(roce_cma_hdr_decode(b, &d), v == 4 || v == 6 ? 0 : -1);
	}
	b[1] = 0x40;
	b[0] = 1;
	CHECK_EQ_U(roce_cma_hdr_decode(b, &d), -1);
	b[0] = 0xff;
	CHECK_EQ_U(roce_cma_hdr_decode(b, &d), -1);
}

int main(void)
{
	xs_test_seed(1);
	test_rxe();
	test_roundtrip();
	test_layout();
	test_errors();
	test_names();
	test_cma_hdr();
	return xs_test_result();
}
