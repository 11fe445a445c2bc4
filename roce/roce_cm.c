/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* IB CM MADs and rdma_cm's private-data header over byte buffers
 * (roce_cm.h).  Offsets below are the kernel's ibta_vol1_c12.h ones, i.e.
 * after the 24-octet MAD header (A() adds it); a sub-octet field is
 * (octet, bit from the MSB, width) as IBA_FIELD_BLOC writes it. */
#include "config.h"

#include <string.h>

#include "roce/roce_cm.h"
#include "util/xs_be.h"

_Static_assert(ROCE_MAD_HDR_LEN + 140 + ROCE_CM_REQ_PDATA == ROCE_MAD_LEN, "REQ size");
_Static_assert(ROCE_MAD_HDR_LEN + 10 + ROCE_CM_MRA_PDATA == ROCE_MAD_LEN, "MRA size");
_Static_assert(ROCE_MAD_HDR_LEN + 12 + ROCE_CM_REJ_ARI + ROCE_CM_REJ_PDATA == ROCE_MAD_LEN,
	       "REJ size");
_Static_assert(ROCE_MAD_HDR_LEN + 36 + ROCE_CM_REP_PDATA == ROCE_MAD_LEN, "REP size");
_Static_assert(ROCE_MAD_HDR_LEN + 8 + ROCE_CM_RTU_PDATA == ROCE_MAD_LEN, "RTU size");
_Static_assert(ROCE_MAD_HDR_LEN + 12 + ROCE_CM_DREQ_PDATA == ROCE_MAD_LEN, "DREQ size");
_Static_assert(ROCE_MAD_HDR_LEN + 8 + ROCE_CM_DREP_PDATA == ROCE_MAD_LEN, "DREP size");

/* an attribute offset (ibta_vol1_c12.h) to a MAD offset */
#define A(off) (ROCE_MAD_HDR_LEN + (off))

/* REQ path fields, relative to the path's first octet (primary 52,
 * alternate 96) */
#define PATH_LEN 44

/* ---- field helpers --------------------------------------------------------- */

static unsigned bits_get(const uint8_t *b, size_t off, unsigned bit, unsigned width)
{
	return (unsigned)(b[off] >> (8 - bit - width)) & ((1u << width) - 1);
}

/* b is zeroed first by encode: or-ing in is enough; v is masked */
static void bits_put(uint8_t *b, size_t off, unsigned bit, unsigned width, unsigned v)
{
	b[off] |= (uint8_t)((v & ((1u << width) - 1)) << (8 - bit - width));
}

static uint32_t get_be24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static void put_be24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

/* ---- names ------------------------------------------------------------------ */

const char *roce_cm_err_str(enum roce_cm_err e)
{
	switch (e) {
	case ROCE_CM_OK:
		return "ok";
	case ROCE_CM_ERR_LEN:
		return "MAD not 256 octets";
	case ROCE_CM_ERR_BASE_VERSION:
		return "MAD base version not 1";
	case ROCE_CM_ERR_CLASS:
		return "MAD class not CM";
	case ROCE_CM_ERR_CLASS_VERSION:
		return "CM class version not 2";
	case ROCE_CM_ERR_METHOD:
		return "MAD method not SEND";
	case ROCE_CM_ERR_ATTR:
		return "CM attribute not REQ..DREP";
	case ROCE_CM_ERR_FIELD:
		return "CM field out of range";
	}
	return "?";
}

const char *roce_cm_attr_str(uint16_t attr)
{
	static const char *const names[] = { "REQ", "MRA", "REJ", "REP", "RTU", "DREQ", "DREP" };

	if (attr < ROCE_CM_ATTR_REQ || attr > ROCE_CM_ATTR_DREP)
		return "?";
	return names[attr - ROCE_CM_ATTR_REQ];
}

/* the names of Linux's ibcm_rej_reason_strs (cm.c) */
static const char *const rej_names[] = {
	[ROCE_CM_REJ_NO_QP] = "no QP",
	[ROCE_CM_REJ_NO_RESOURCES] = "no resources",
	[ROCE_CM_REJ_TIMEOUT] = "timeout",
	[ROCE_CM_REJ_UNSUPPORTED] = "unsupported",
	[ROCE_CM_REJ_INVALID_COMM_ID] = "invalid comm ID",
	[ROCE_CM_REJ_INVALID_COMM_INSTANCE] = "invalid comm instance",
	[ROCE_CM_REJ_INVALID_SERVICE_ID] = "invalid service ID",
	[ROCE_CM_REJ_INVALID_TRANSPORT_TYPE] = "invalid transport type",
	[ROCE_CM_REJ_STALE_CONN] = "stale connection",
	[ROCE_CM_REJ_INVALID_GID] = "invalid GID",
	[ROCE_CM_REJ_INVALID_MTU] = "invalid MTU",
	[ROCE_CM_REJ_INSUFFICIENT_RESP_RESOURCES] = "insufficient responder resources",
	[ROCE_CM_REJ_CONSUMER_DEFINED] = "consumer defined",
	[ROCE_CM_REJ_INVALID_RNR_RETRY] = "invalid RNR retry",
	[ROCE_CM_REJ_DUPLICATE_LOCAL_COMM_ID] = "duplicate local comm ID",
	[ROCE_CM_REJ_INVALID_CLASS_VERSION] = "invalid class version",
};

const char *roce_cm_rej_str(uint16_t reason)
{
	if (reason >= sizeof(rej_names) / sizeof(rej_names[0]) || !rej_names[reason])
		return "?";
	return rej_names[reason];
}

uint32_t roce_cm_mtu_octets(uint8_t ib_mtu)
{
	if (ib_mtu < 1 || ib_mtu > 5)
		return 0;
	return 128u << ib_mtu;
}

uint8_t roce_cm_mtu_enum(uint32_t octets)
{
	for (uint8_t e = 1; e <= 5; e++)
		if (octets == 128u << e)
			return e;
	return 0;
}

/* ---- MAD header ------------------------------------------------------------- */

void roce_cm_hdr_init(struct roce_cm_msg *m, uint16_t attr, uint64_t tid)
{
	memset(m, 0, sizeof(*m));
	m->hdr.base_version = ROCE_MAD_BASE_VERSION;
	m->hdr.mgmt_class = ROCE_MAD_CLASS_CM;
	m->hdr.class_version = ROCE_MAD_CLASS_VERSION_CM;
	m->hdr.method = ROCE_MAD_METHOD_SEND;
	m->hdr.tid = tid;
	m->hdr.attr_id = attr;
}

static void hdr_encode(const struct roce_mad_hdr *h, uint8_t *b)
{
	b[0] = h->base_version;
	b[1] = h->mgmt_class;
	b[2] = h->class_version;
	b[3] = h->method;
	xs_put_be16(b + 4, h->status);
	xs_put_be16(b + 6, h->class_specific);
	xs_put_be64(b + 8, h->tid);
	xs_put_be16(b + 16, h->attr_id);
	/* 18..19 reserved */
	xs_put_be32(b + 20, h->attr_mod);
}

static void hdr_decode(const uint8_t *b, struct roce_mad_hdr *h)
{
	h->base_version = b[0];
	h->mgmt_class = b[1];
	h->class_version = b[2];
	h->method = b[3];
	h->status = xs_get_be16(b + 4);
	h->class_specific = xs_get_be16(b + 6);
	h->tid = xs_get_be64(b + 8);
	h->attr_id = xs_get_be16(b + 16);
	h->attr_mod = xs_get_be32(b + 20);
}

/* ---- REQ -------------------------------------------------------------------- */

static void path_encode(const struct roce_cm_path *p, uint8_t *b)
{
	xs_put_be16(b, p->local_lid);
	xs_put_be16(b + 2, p->remote_lid);
	memcpy(b + 4, p->local_gid, 16);
	memcpy(b + 20, p->remote_gid, 16);
	/* flow label: the top 20 bits of octets 36..39 */
	xs_put_be32(b + 36, (p->flow_label & 0xfffffu) << 12);
	bits_put(b, 39, 2, 6, p->packet_rate);
	b[40] = p->traffic_class;
	b[41] = p->hop_limit;
	bits_put(b, 42, 0, 4, p->sl);
	bits_put(b, 42, 4, 1, p->subnet_local);
	bits_put(b, 43, 0, 5, p->local_ack_timeout);
}

static void path_decode(const uint8_t *b, struct roce_cm_path *p)
{
	p->local_lid = xs_get_be16(b);
	p->remote_lid = xs_get_be16(b + 2);
	memcpy(p->local_gid, b + 4, 16);
	memcpy(p->remote_gid, b + 20, 16);
	p->flow_label = xs_get_be32(b + 36) >> 12;
	p->packet_rate = (uint8_t)bits_get(b, 39, 2, 6);
	p->traffic_class = b[40];
	p->hop_limit = b[41];
	p->sl = (uint8_t)bits_get(b, 42, 0, 4);
	p->subnet_local = bits_get(b, 42, 4, 1);
	p->local_ack_timeout = (uint8_t)bits_get(b, 43, 0, 5);
}

static void req_encode(const struct roce_cm_req *r, uint8_t *b)
{
	xs_put_be32(b + A(0), r->local_comm_id);
	put_be24(b + A(5), r->vendor_id);
	xs_put_be64(b + A(8), r->service_id);
	xs_put_be64(b + A(16), r->local_ca_guid);
	xs_put_be32(b + A(28), r->local_qkey);
	put_be24(b + A(32), r->local_qpn);
	b[A(35)] = r->responder_resources;
	put_be24(b + A(36), r->local_eecn);
	b[A(39)] = r->initiator_depth;
	put_be24(b + A(40), r->remote_eecn);
	bits_put(b, A(43), 0, 5, r->remote_cm_response_timeout);
	bits_put(b, A(43), 5, 2, r->transport_service_type);
	bits_put(b, A(43), 7, 1, r->end_to_end_flow_control);
	put_be24(b + A(44), r->starting_psn);
	bits_put(b, A(47), 0, 5, r->local_cm_response_timeout);
	bits_put(b, A(47), 5, 3, r->retry_count);
	xs_put_be16(b + A(48), r->pkey);
	bits_put(b, A(50), 0, 4, r->path_mtu);
	bits_put(b, A(50), 4, 1, r->rdc_exists);
	bits_put(b, A(50), 5, 3, r->rnr_retry_count);
	bits_put(b, A(51), 0, 4, r->max_cm_retries);
	bits_put(b, A(51), 4, 1, r->srq);
	bits_put(b, A(51), 5, 3, r->extended_transport_type);
	path_encode(&r->primary, b + A(52));
	path_encode(&r->alternate, b + A(52 + PATH_LEN));
	bits_put(b, A(139), 5, 1, r->sap_supported);
	memcpy(b + A(140), r->pdata, ROCE_CM_REQ_PDATA);
}

static enum roce_cm_err req_decode(const uint8_t *b, struct roce_cm_req *r)
{
	r->local_comm_id = xs_get_be32(b + A(0));
	r->vendor_id = get_be24(b + A(5));
	r->service_id = xs_get_be64(b + A(8));
	r->local_ca_guid = xs_get_be64(b + A(16));
	r->local_qkey = xs_get_be32(b + A(28));
	r->local_qpn = get_be24(b + A(32));
	r->responder_resources = b[A(35)];
	r->local_eecn = get_be24(b + A(36));
	r->initiator_depth = b[A(39)];
	r->remote_eecn = get_be24(b + A(40));
	r->remote_cm_response_timeout = (uint8_t)bits_get(b, A(43), 0, 5);
	r->transport_service_type = (uint8_t)bits_get(b, A(43), 5, 2);
	r->end_to_end_flow_control = bits_get(b, A(43), 7, 1);
	r->starting_psn = get_be24(b + A(44));
	r->local_cm_response_timeout = (uint8_t)bits_get(b, A(47), 0, 5);
	r->retry_count = (uint8_t)bits_get(b, A(47), 5, 3);
	r->pkey = xs_get_be16(b + A(48));
	r->path_mtu = (uint8_t)bits_get(b, A(50), 0, 4);
	r->rdc_exists = bits_get(b, A(50), 4, 1);
	r->rnr_retry_count = (uint8_t)bits_get(b, A(50), 5, 3);
	r->max_cm_retries = (uint8_t)bits_get(b, A(51), 0, 4);
	r->srq = bits_get(b, A(51), 4, 1);
	r->extended_transport_type = (uint8_t)bits_get(b, A(51), 5, 3);
	path_decode(b + A(52), &r->primary);
	path_decode(b + A(52 + PATH_LEN), &r->alternate);
	r->sap_supported = bits_get(b, A(139), 5, 1);
	memcpy(r->pdata, b + A(140), ROCE_CM_REQ_PDATA);
	/* cm.c rejects these too (cm_validate_req_param: RC or UC; rdma_cm
	 * over RoCE only ever sends RC) */
	if (!roce_cm_mtu_octets(r->path_mtu) || r->transport_service_type != ROCE_CM_TST_RC)
		return ROCE_CM_ERR_FIELD;
	return ROCE_CM_OK;
}

/* ---- MRA, REJ, REP, RTU, DREQ, DREP ---------------------------------------- */

static void mra_encode(const struct roce_cm_mra *r, uint8_t *b)
{
	xs_put_be32(b + A(0), r->local_comm_id);
	xs_put_be32(b + A(4), r->remote_comm_id);
	bits_put(b, A(8), 0, 2, r->message_mraed);
	bits_put(b, A(9), 0, 5, r->service_timeout);
	memcpy(b + A(10), r->pdata, ROCE_CM_MRA_PDATA);
}

static void mra_decode(const uint8_t *b, struct roce_cm_mra *r)
{
	r->local_comm_id = xs_get_be32(b + A(0));
	r->remote_comm_id = xs_get_be32(b + A(4));
	r->message_mraed = (uint8_t)bits_get(b, A(8), 0, 2);
	r->service_timeout = (uint8_t)bits_get(b, A(9), 0, 5);
	memcpy(r->pdata, b + A(10), ROCE_CM_MRA_PDATA);
}

static void rej_encode(const struct roce_cm_rej *r, uint8_t *b)
{
	xs_put_be32(b + A(0), r->local_comm_id);
	xs_put_be32(b + A(4), r->remote_comm_id);
	bits_put(b, A(8), 0, 2, r->message_rejected);
	bits_put(b, A(9), 0, 7, r->ari_len);
	xs_put_be16(b + A(10), r->reason);
	memcpy(b + A(12), r->ari, ROCE_CM_REJ_ARI);
	memcpy(b + A(84), r->pdata, ROCE_CM_REJ_PDATA);
}

static enum roce_cm_err rej_decode(const uint8_t *b, struct roce_cm_rej *r)
{
	r->local_comm_id = xs_get_be32(b + A(0));
	r->remote_comm_id = xs_get_be32(b + A(4));
	r->message_rejected = (uint8_t)bits_get(b, A(8), 0, 2);
	r->ari_len = (uint8_t)bits_get(b, A(9), 0, 7);
	r->reason = xs_get_be16(b + A(10));
	memcpy(r->ari, b + A(12), ROCE_CM_REJ_ARI);
	memcpy(r->pdata, b + A(84), ROCE_CM_REJ_PDATA);
	return r->ari_len <= ROCE_CM_REJ_ARI ? ROCE_CM_OK : ROCE_CM_ERR_FIELD;
}

static void rep_encode(const struct roce_cm_rep *r, uint8_t *b)
{
	xs_put_be32(b + A(0), r->local_comm_id);
	xs_put_be32(b + A(4), r->remote_comm_id);
	xs_put_be32(b + A(8), r->local_qkey);
	put_be24(b + A(12), r->local_qpn);
	/* the vendor ID's three octets each follow a 24-bit field */
	b[A(15)] = (uint8_t)(r->vendor_id >> 16);
	put_be24(b + A(16), r->local_eecn);
	b[A(19)] = (uint8_t)(r->vendor_id >> 8);
	put_be24(b + A(20), r->starting_psn);
	b[A(23)] = (uint8_t)r->vendor_id;
	b[A(24)] = r->responder_resources;
	b[A(25)] = r->initiator_depth;
	bits_put(b, A(26), 0, 5, r->target_ack_delay);
	bits_put(b, A(26), 5, 2, r->failover_accepted);
	bits_put(b, A(26), 7, 1, r->end_to_end_flow_control);
	bits_put(b, A(27), 0, 3, r->rnr_retry_count);
	bits_put(b, A(27), 3, 1, r->srq);
	xs_put_be64(b + A(28), r->local_ca_guid);
	memcpy(b + A(36), r->pdata, ROCE_CM_REP_PDATA);
}

static void rep_decode(const uint8_t *b, struct roce_cm_rep *r)
{
	r->local_comm_id = xs_get_be32(b + A(0));
	r->remote_comm_id = xs_get_be32(b + A(4));
	r->local_qkey = xs_get_be32(b + A(8));
	r->local_qpn = get_be24(b + A(12));
	r->vendor_id = (uint32_t)b[A(15)] << 16 | (uint32_t)b[A(19)] << 8 | b[A(23)];
	r->local_eecn = get_be24(b + A(16));
	r->starting_psn = get_be24(b + A(20));
	r->responder_resources = b[A(24)];
	r->initiator_depth = b[A(25)];
	r->target_ack_delay = (uint8_t)bits_get(b, A(26), 0, 5);
	r->failover_accepted = (uint8_t)bits_get(b, A(26), 5, 2);
	r->end_to_end_flow_control = bits_get(b, A(26), 7, 1);
	r->rnr_retry_count = (uint8_t)bits_get(b, A(27), 0, 3);
	r->srq = bits_get(b, A(27), 3, 1);
	r->local_ca_guid = xs_get_be64(b + A(28));
	memcpy(r->pdata, b + A(36), ROCE_CM_REP_PDATA);
}

static void ids_encode(uint32_t local, uint32_t remote, uint8_t *b)
{
	xs_put_be32(b + A(0), local);
	xs_put_be32(b + A(4), remote);
}

static void ids_decode(const uint8_t *b, uint32_t *local, uint32_t *remote)
{
	*local = xs_get_be32(b + A(0));
	*remote = xs_get_be32(b + A(4));
}

/* ---- the MAD ---------------------------------------------------------------- */

void roce_cm_encode(const struct roce_cm_msg *m, uint8_t mad[ROCE_MAD_LEN])
{
	memset(mad, 0, ROCE_MAD_LEN);
	hdr_encode(&m->hdr, mad);
	switch (m->hdr.attr_id) {
	case ROCE_CM_ATTR_REQ:
		req_encode(&m->u.req, mad);
		break;
	case ROCE_CM_ATTR_MRA:
		mra_encode(&m->u.mra, mad);
		break;
	case ROCE_CM_ATTR_REJ:
		rej_encode(&m->u.rej, mad);
		break;
	case ROCE_CM_ATTR_REP:
		rep_encode(&m->u.rep, mad);
		break;
	case ROCE_CM_ATTR_RTU:
		ids_encode(m->u.rtu.local_comm_id, m->u.rtu.remote_comm_id, mad);
		memcpy(mad + A(8), m->u.rtu.pdata, ROCE_CM_RTU_PDATA);
		break;
	case ROCE_CM_ATTR_DREQ:
		ids_encode(m->u.dreq.local_comm_id, m->u.dreq.remote_comm_id, mad);
		put_be24(mad + A(8), m->u.dreq.remote_qpn);
		memcpy(mad + A(12), m->u.dreq.pdata, ROCE_CM_DREQ_PDATA);
		break;
	case ROCE_CM_ATTR_DREP:
		ids_encode(m->u.drep.local_comm_id, m->u.drep.remote_comm_id, mad);
		memcpy(mad + A(8), m->u.drep.pdata, ROCE_CM_DREP_PDATA);
		break;
	default: /* no attribute we know: the header alone, the rest 0 */
		break;
	}
}

void roce_cm_route(const uint8_t mad[ROCE_MAD_LEN], struct roce_cm_route *r)
{
	r->attr = xs_get_be16(mad + 16);
	r->service_id = r->attr == ROCE_CM_ATTR_REQ ? xs_get_be64(mad + A(8)) : 0;
	/* every attribute but REQ has its remote comm ID after its local */
	r->remote_comm_id = r->attr == ROCE_CM_ATTR_REQ ? 0 : xs_get_be32(mad + A(4));
	r->local_comm_id = xs_get_be32(mad + A(0));
}

enum roce_cm_err roce_cm_decode(const uint8_t *mad, size_t len, struct roce_cm_msg *m)
{
	if (len != ROCE_MAD_LEN)
		return ROCE_CM_ERR_LEN;
	memset(m, 0, sizeof(*m));
	hdr_decode(mad, &m->hdr);
	if (m->hdr.base_version != ROCE_MAD_BASE_VERSION)
		return ROCE_CM_ERR_BASE_VERSION;
	if (m->hdr.mgmt_class != ROCE_MAD_CLASS_CM)
		return ROCE_CM_ERR_CLASS;
	if (m->hdr.class_version != ROCE_MAD_CLASS_VERSION_CM)
		return ROCE_CM_ERR_CLASS_VERSION;
	if (m->hdr.method != ROCE_MAD_METHOD_SEND)
		return ROCE_CM_ERR_METHOD;
	switch (m->hdr.attr_id) {
	case ROCE_CM_ATTR_REQ:
		return req_decode(mad, &m->u.req);
	case ROCE_CM_ATTR_MRA:
		mra_decode(mad, &m->u.mra);
		return ROCE_CM_OK;
	case ROCE_CM_ATTR_REJ:
		return rej_decode(mad, &m->u.rej);
	case ROCE_CM_ATTR_REP:
		rep_decode(mad, &m->u.rep);
		return ROCE_CM_OK;
	case ROCE_CM_ATTR_RTU:
		ids_decode(mad, &m->u.rtu.local_comm_id, &m->u.rtu.remote_comm_id);
		memcpy(m->u.rtu.pdata, mad + A(8), ROCE_CM_RTU_PDATA);
		return ROCE_CM_OK;
	case ROCE_CM_ATTR_DREQ:
		ids_decode(mad, &m->u.dreq.local_comm_id, &m->u.dreq.remote_comm_id);
		m->u.dreq.remote_qpn = get_be24(mad + A(8));
		memcpy(m->u.dreq.pdata, mad + A(12), ROCE_CM_DREQ_PDATA);
		return ROCE_CM_OK;
	case ROCE_CM_ATTR_DREP:
		ids_decode(mad, &m->u.drep.local_comm_id, &m->u.drep.remote_comm_id);
		memcpy(m->u.drep.pdata, mad + A(8), ROCE_CM_DREP_PDATA);
		return ROCE_CM_OK;
	default:
		return ROCE_CM_ERR_ATTR;
	}
}

/* ---- rdma_cm's private-data header (cma.c: struct cma_hdr) ------------------ */

void roce_cma_hdr_encode(const struct roce_cma_hdr *h, uint8_t b[ROCE_CMA_HDR_LEN])
{
	b[0] = h->version;
	b[1] = (uint8_t)(h->ip_version << 4); /* the low nibble is reserved */
	xs_put_be16(b + 2, h->src_port);
	memcpy(b + 4, h->src_addr, 16);
	memcpy(b + 20, h->dst_addr, 16);
}

int roce_cma_hdr_decode(const uint8_t b[ROCE_CMA_HDR_LEN], struct roce_cma_hdr *h)
{
	h->version = b[0];
	h->ip_version = b[1] >> 4;
	h->src_port = xs_get_be16(b + 2);
	memcpy(h->src_addr, b + 4, 16);
	memcpy(h->dst_addr, b + 20, 16);
	if (h->version != ROCE_CMA_VERSION || (h->ip_version != 4 && h->ip_version != 6))
		return -1;
	return 0;
}
