/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* IB CM MADs (IBTA vol 1, chapter 12) as rdma_cm sends them over RoCE v2:
 * 256-octet MADs carried by UD SEND_ONLY packets to QP 1 (roce.h builds and
 * parses the packet; this file only the MAD in its payload), and rdma_cm's
 * 36-octet private-data header at the front of a REQ's private data.
 *
 * Field positions are the kernel's include/rdma/ibta_vol1_c12.h (offsets
 * after the 24-octet MAD header; a sub-octet field's bits count from the
 * octet's most significant bit) and drivers/infiniband/core/cma.c (struct
 * cma_hdr).  Decoded fields are in host order; encode writes every octet
 * (reserved ones 0), decode checks what a receiver must (roce_cm_err).
 * Pure code: no I/O, no allocation, any thread. */
#ifndef ROCE_CM_H
#define ROCE_CM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "roce/roce_cm_wire.h"

struct roce_mad_hdr {
	uint8_t base_version; /* ROCE_MAD_BASE_VERSION */
	uint8_t mgmt_class; /* ROCE_MAD_CLASS_CM */
	uint8_t class_version; /* ROCE_MAD_CLASS_VERSION_CM */
	uint8_t method; /* ROCE_MAD_METHOD_SEND */
	uint16_t status;
	uint16_t class_specific;
	uint64_t tid;
	uint16_t attr_id; /* enum roce_cm_attr */
	uint32_t attr_mod;
};

/* A REQ's path (primary or alternate). */
struct roce_cm_path {
	uint16_t local_lid, remote_lid; /* 0xffff over RoCE */
	uint8_t local_gid[16], remote_gid[16]; /* the sender's is local */
	uint32_t flow_label; /* 20 bits */
	uint8_t packet_rate; /* 6 bits */
	uint8_t traffic_class;
	uint8_t hop_limit;
	uint8_t sl; /* 4 bits */
	bool subnet_local;
	uint8_t local_ack_timeout; /* 5 bits */
};

struct roce_cm_req {
	uint32_t local_comm_id;
	uint32_t vendor_id; /* 24 bits */
	uint64_t service_id;
	uint64_t local_ca_guid;
	uint32_t local_qkey;
	uint32_t local_qpn; /* 24 bits */
	uint8_t responder_resources;
	uint32_t local_eecn; /* 24 bits */
	uint8_t initiator_depth;
	uint32_t remote_eecn; /* 24 bits */
	uint8_t remote_cm_response_timeout; /* 5 bits */
	uint8_t transport_service_type; /* 2 bits: ROCE_CM_TST_RC */
	bool end_to_end_flow_control;
	uint32_t starting_psn; /* 24 bits */
	uint8_t local_cm_response_timeout; /* 5 bits */
	uint8_t retry_count; /* 3 bits */
	uint16_t pkey;
	uint8_t path_mtu; /* 4 bits, IB enum: 1 = 256 .. 5 = 4096 */
	bool rdc_exists;
	uint8_t rnr_retry_count; /* 3 bits */
	uint8_t max_cm_retries; /* 4 bits */
	bool srq;
	uint8_t extended_transport_type; /* 3 bits */
	struct roce_cm_path primary, alternate;
	bool sap_supported;
	uint8_t pdata[ROCE_CM_REQ_PDATA];
};

struct roce_cm_mra {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t message_mraed; /* 2 bits: ROCE_CM_MSG_REQ / _REP / _LAP */
	uint8_t service_timeout; /* 5 bits */
	uint8_t pdata[ROCE_CM_MRA_PDATA];
};

struct roce_cm_rej {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t message_rejected; /* 2 bits: ROCE_CM_MSG_REQ / _REP / _OTHER */
	uint8_t ari_len; /* 7 bits, <= ROCE_CM_REJ_ARI */
	uint16_t reason; /* enum roce_cm_rej_reason */
	uint8_t ari[ROCE_CM_REJ_ARI];
	uint8_t pdata[ROCE_CM_REJ_PDATA];
};

struct roce_cm_rep {
	uint32_t local_comm_id, remote_comm_id;
	uint32_t local_qkey;
	uint32_t local_qpn; /* 24 bits */
	uint32_t vendor_id; /* 24 bits, in three octets (H, M, L) */
	uint32_t local_eecn; /* 24 bits */
	uint32_t starting_psn; /* 24 bits */
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t target_ack_delay; /* 5 bits */
	uint8_t failover_accepted; /* 2 bits */
	bool end_to_end_flow_control;
	uint8_t rnr_retry_count; /* 3 bits */
	bool srq;
	uint64_t local_ca_guid;
	uint8_t pdata[ROCE_CM_REP_PDATA];
};

/* RTU, DREP: the two comm IDs and private data */
struct roce_cm_rtu {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t pdata[ROCE_CM_RTU_PDATA];
};

struct roce_cm_dreq {
	uint32_t local_comm_id, remote_comm_id;
	uint32_t remote_qpn; /* 24 bits: the receiver's QPN */
	uint8_t pdata[ROCE_CM_DREQ_PDATA];
};

struct roce_cm_drep {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t pdata[ROCE_CM_DREP_PDATA];
};

/* One CM MAD: hdr.attr_id says which member of u is valid. */
struct roce_cm_msg {
	struct roce_mad_hdr hdr;
	union {
		struct roce_cm_req req;
		struct roce_cm_mra mra;
		struct roce_cm_rej rej;
		struct roce_cm_rep rep;
		struct roce_cm_rtu rtu;
		struct roce_cm_dreq dreq;
		struct roce_cm_drep drep;
	} u;
};

enum roce_cm_err {
	ROCE_CM_OK = 0,
	ROCE_CM_ERR_LEN, /* not exactly ROCE_MAD_LEN octets */
	ROCE_CM_ERR_BASE_VERSION, /* base version != 1 */
	ROCE_CM_ERR_CLASS, /* not the CM class */
	ROCE_CM_ERR_CLASS_VERSION, /* CM class version != 2 */
	ROCE_CM_ERR_METHOD, /* not SEND */
	ROCE_CM_ERR_ATTR, /* an attribute other than REQ..DREP (LAP, APR, SIDR, ...) */
	ROCE_CM_ERR_FIELD, /* a field out of range (REJ ARI length > 72, REQ path MTU 0 or > 5, ...) */
};

const char *roce_cm_err_str(enum roce_cm_err e);

/* mad: exactly ROCE_MAD_LEN octets (len is checked).  On error *m is
 * unspecified. */
enum roce_cm_err roce_cm_decode(const uint8_t *mad, size_t len, struct roce_cm_msg *m);
/* Writes ROCE_MAD_LEN octets: the header from m->hdr (base/class/version/
 * method as given: callers use roce_cm_hdr_init), the attribute from the
 * member attr_id names.  Values wider than their field are masked. */
void roce_cm_encode(const struct roce_cm_msg *m, uint8_t mad[ROCE_MAD_LEN]);
/* m->hdr for a CM SEND of attr with transaction ID tid; the rest of *m
 * zeroed. */
void roce_cm_hdr_init(struct roce_cm_msg *m, uint16_t attr, uint64_t tid);
/* Who a MAD is for, read off its octets without a full decode (a local
 * channel routes by it): the attribute, and for a REQ its service ID, for
 * every other message the remote comm ID (the receiver's own; 0 when the
 * sender does not know it: a REJ of a REP it timed out). */
struct roce_cm_route {
	uint16_t attr;
	uint64_t service_id; /* REQ */
	uint32_t remote_comm_id; /* the rest */
	uint32_t local_comm_id; /* every attribute's first field: the sender's */
};
void roce_cm_route(const uint8_t mad[ROCE_MAD_LEN], struct roce_cm_route *r);
/* "REQ", "REP", ... or "attr 0x..": for logs (static storage for unknown
 * ones is not used: unknown gives "?"). */
const char *roce_cm_attr_str(uint16_t attr);
/* A REJ reason's name ("invalid service ID", "stale connection", ...),
 * "?" for others. */
const char *roce_cm_rej_str(uint16_t reason);

/* ---- rdma_cm's private-data header (cma.c: struct cma_hdr) ----------------- */

struct roce_cma_hdr {
	uint8_t version; /* ROCE_CMA_VERSION */
	uint8_t ip_version; /* 4 or 6 (the octet's upper nibble) */
	uint16_t src_port; /* the active side's rdma_cm port */
	/* IPv4: the address in the last 4 octets, the 12 before them 0
	 * (union cma_ip_addr), not ::ffff:a.b.c.d */
	uint8_t src_addr[16], dst_addr[16];
};

void roce_cma_hdr_encode(const struct roce_cma_hdr *h, uint8_t b[ROCE_CMA_HDR_LEN]);
/* -1 if the version is not 0 or the IP version not 4 or 6. */
int roce_cma_hdr_decode(const uint8_t b[ROCE_CMA_HDR_LEN], struct roce_cma_hdr *h);

/* rdma_cm's service ID for a port of the TCP port space (RDMA_PS_TCP). */
static inline uint64_t roce_cm_service_id(uint16_t port)
{
	return ROCE_CM_SID_PS_TCP | port;
}

/* The 20-bit flow label rdma_cm puts in a RoCE v2 REQ's path from the two
 * rdma_cm ports (cma.c: cma_get_roce_udp_flow_label, IPv4 or flow info 0). */
static inline uint32_t roce_cm_flow_label(uint16_t src_port, uint16_t dst_port)
{
	return ((uint32_t)src_port * 31 + dst_port) & 0xfffffu;
}

/* IB path MTU enum <-> octets (0 for an invalid value). */
uint32_t roce_cm_mtu_octets(uint8_t ib_mtu);
uint8_t roce_cm_mtu_enum(uint32_t octets);

#endif
