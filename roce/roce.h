/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* roce/: RoCEv2 packets as pure code over byte buffers (like mpa/, ddp/):
 * the headers (roce_hdr.c), the opcode table (roce_opcode.c), the ICRC
 * (roce_icrc.c, ISA-L's reflected CRC-32) and the validation of a received
 * packet with one precise error per rejection (roce_pkt.c).  No I/O, no
 * allocation, no locks: any thread. */
#ifndef ROCE_H
#define ROCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "roce/roce_wire.h"

/* ---- headers (roce_hdr.c): decoded fields in host order -------------------- */

struct roce_bth {
	uint8_t opcode;
	bool se, mig;
	uint8_t pad; /* 0..3 */
	uint8_t tver; /* 0 */
	uint16_t pkey;
	bool fecn, becn;
	uint32_t dqpn; /* 24 bits */
	bool ackreq;
	uint32_t psn; /* 24 bits */
};

struct roce_reth {
	uint64_t va;
	uint32_t rkey;
	uint32_t dma_len;
};

struct roce_aeth {
	uint8_t syndrome;
	uint32_t msn; /* 24 bits */
};

struct roce_atmeth {
	uint64_t va;
	uint32_t rkey;
	uint64_t swap_add;
	uint64_t cmp;
};

struct roce_deth {
	uint32_t qkey;
	uint32_t src_qp; /* 24 bits */
};

/* encode writes exactly the header's octets (reserved ones 0); decode reads
 * them (the caller checked the length). */
void roce_bth_encode(const struct roce_bth *h, uint8_t b[ROCE_BTH_LEN]);
void roce_bth_decode(const uint8_t b[ROCE_BTH_LEN], struct roce_bth *h);
void roce_reth_encode(const struct roce_reth *h, uint8_t b[ROCE_RETH_LEN]);
void roce_reth_decode(const uint8_t b[ROCE_RETH_LEN], struct roce_reth *h);
void roce_aeth_encode(const struct roce_aeth *h, uint8_t b[ROCE_AETH_LEN]);
void roce_aeth_decode(const uint8_t b[ROCE_AETH_LEN], struct roce_aeth *h);
void roce_atmeth_encode(const struct roce_atmeth *h, uint8_t b[ROCE_ATMETH_LEN]);
void roce_atmeth_decode(const uint8_t b[ROCE_ATMETH_LEN], struct roce_atmeth *h);
void roce_deth_encode(const struct roce_deth *h, uint8_t b[ROCE_DETH_LEN]);
void roce_deth_decode(const uint8_t b[ROCE_DETH_LEN], struct roce_deth *h);
/* AtomicAckETH: the original value, 8 octets */
void roce_atmack_encode(uint64_t orig, uint8_t b[ROCE_ATMACK_LEN]);
uint64_t roce_atmack_decode(const uint8_t b[ROCE_ATMACK_LEN]);

/* PSN arithmetic modulo 2^24: a - b as a signed distance in
 * [-2^23, 2^23). */
static inline int32_t roce_psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}
static inline uint32_t roce_psn_add(uint32_t a, uint32_t n)
{
	return (a + n) & ROCE_PSN_MASK;
}
/* the pad count that brings len to a multiple of 4 */
static inline uint8_t roce_pad(uint32_t len)
{
	return (uint8_t)((4 - (len & 3)) & 3);
}

/* ---- opcode table (roce_opcode.c) ------------------------------------------- */

enum roce_op_flag {
	ROCE_F_RETH = 1u << 0,
	ROCE_F_AETH = 1u << 1,
	ROCE_F_IMMDT = 1u << 2,
	ROCE_F_IETH = 1u << 3,
	ROCE_F_ATMETH = 1u << 4,
	ROCE_F_ATMACK = 1u << 5,
	ROCE_F_DETH = 1u << 6,
	ROCE_F_PAYLOAD = 1u << 7, /* may carry payload */
	ROCE_F_FIRST = 1u << 8,
	ROCE_F_MIDDLE = 1u << 9,
	ROCE_F_LAST = 1u << 10, /* ONLY = FIRST|LAST */
	ROCE_F_REQ = 1u << 11, /* requester -> responder */
	ROCE_F_RESP = 1u << 12, /* responder -> requester (ACK, Read Resp, Atomic ACK) */
	ROCE_F_SEND = 1u << 13,
	ROCE_F_WRITE = 1u << 14,
	ROCE_F_READ = 1u << 15,
	ROCE_F_ATOMIC = 1u << 16,
	ROCE_F_UD = 1u << 17,
};

struct roce_op_info {
	const char *name; /* NULL: not an opcode we take */
	uint32_t flags; /* enum roce_op_flag */
	uint8_t hdr_len; /* BTH and every extension header */
};

extern const struct roce_op_info roce_ops[256];

/* The opcode of a packet of a message of kind k: the first, a middle one,
 * the last, or the only one. */
enum roce_msg_kind {
	ROCE_MSG_SEND,
	ROCE_MSG_SEND_IMM,
	ROCE_MSG_SEND_INV,
	ROCE_MSG_WRITE,
	ROCE_MSG_WRITE_IMM,
	ROCE_MSG_READ_RESP,
	ROCE_MSG_KINDS
};
uint8_t roce_msg_opcode(enum roce_msg_kind k, bool first, bool last);

/* ---- ICRC (roce_icrc.c) ----------------------------------------------------- */

/* The addresses the ICRC covers through the masked IP and UDP headers.
 * IPv4 is assumed to be a 20-octet header with DF set (rxe_net.c:285,246
 * and an unconnected UDP socket with IP_PMTUDISC_DO both set it).  The
 * Identification is covered too: an unconnected UDP socket with DF sends
 * 0 (include/net/ip.h:573-574), but rxe does not: prepare_ipv4_hdr calls
 * __ip_select_ident (rxe_net.c:252, net/ipv4/route.c:494-508), a hashed
 * counter, so checking rxe's IPv4 ICRC needs the ID from the received IP
 * header (a raw or packet socket).  IPv6 has no ID. */
struct roce_ip {
	bool v6;
	uint8_t src[16], dst[16]; /* IPv4: the first 4 octets */
	uint16_t sport, dport; /* host order */
	uint16_t ip_id; /* IPv4 Identification, host order (0: what we send) */
};

/* ICRC of one UDP payload pkt[0..len) (BTH up to and including the pad,
 * without the 4 ICRC octets; len >= ROCE_BTH_LEN, else 0 is returned, and
 * len <= ROCE_MAX_PKT_LEN - 4 for the 16-bit length fields).  The value as
 * stored: the caller writes it little-endian (roce_icrc_put). */
uint32_t roce_icrc(const struct roce_ip *ip, const uint8_t *pkt, size_t len);
/* Incremental: start over the pseudo headers and the (masked) BTH, then
 * add the rest in pieces; the result is roce_icrc's.  len is the length
 * roce_icrc would get (so the masked IP/UDP lengths are right). */
uint32_t roce_icrc_start(const struct roce_ip *ip, const uint8_t bth[ROCE_BTH_LEN], size_t len);
uint32_t roce_icrc_add(uint32_t crc, const void *p, size_t n);
void roce_icrc_put(uint32_t icrc, uint8_t b[ROCE_ICRC_LEN]);
uint32_t roce_icrc_get(const uint8_t b[ROCE_ICRC_LEN]);

/* An IPv4 ICRC without the ID (roce_icrc_id.c): the ID that makes
 * roce_icrc(ip, pkt, len) equal want is solved for (ID 0 tried first);
 * true with ip->ip_id set, false if none does (IPv6: only the ICRC as it
 * is).  The cache keeps the solver of a few lengths; the caller owns it
 * (zeroed before first use, one user at a time). */
#define ROCE_ICRC_IDC_SLOTS 8
struct roce_icrc_idc {
	uint32_t len;
	uint8_t n;
	uint32_t col[16]; /* the ICRC's change for each ID bit */
	uint32_t vec[16], piv[16];
	uint16_t comb[16];
};
struct roce_icrc_idcache {
	struct roce_icrc_idc slot[ROCE_ICRC_IDC_SLOTS];
};
bool roce_icrc_find_id(struct roce_icrc_idcache *cache, struct roce_ip *ip, const uint8_t *pkt,
		       size_t len, uint32_t want);
/* The other way (a sender whose datagrams the kernel numbers, UDP GSO):
 * the ICRC of pkt[0..len) with IPv4 ID id, from icrc0, its ICRC with ID
 * 0 (ip->ip_id is ignored).  IPv6: icrc0. */
uint32_t roce_icrc_with_id(struct roce_icrc_idcache *cache, const struct roce_ip *ip,
			   const uint8_t *pkt, size_t len, uint32_t icrc0, uint16_t id);

/* ---- a whole packet (roce_pkt.c) -------------------------------------------- */

struct roce_pkt {
	struct roce_bth bth;
	struct roce_reth reth; /* the headers roce_ops[opcode] names are set */
	struct roce_aeth aeth;
	uint32_t imm; /* ImmDt as the wire has it (network order, as verbs) */
	uint32_t ieth; /* the R_Key to invalidate, host order */
	struct roce_atmeth atm;
	uint64_t atm_orig; /* AtomicAckETH */
	struct roce_deth deth;
	const uint8_t *payload; /* into the parsed buffer (without the pad) */
	uint32_t paylen;
};

enum roce_perr {
	ROCE_OK = 0,
	ROCE_E_SHORT, /* shorter than BTH + ICRC */
	ROCE_E_TVER, /* TVer not 0 */
	ROCE_E_OPCODE, /* an opcode roce_ops does not take */
	ROCE_E_HDRLEN, /* the opcode's headers do not fit */
	ROCE_E_PAD, /* pad longer than the payload, or payload where none may be */
	ROCE_E_PKEY, /* P_Key not the expected one */
	ROCE_E_ICRC, /* ICRC mismatch */
	ROCE_E_COUNT
};

/* One line: "ICRC mismatch" etc. */
const char *roce_perr_str(enum roce_perr e);

/* Parse and check one UDP payload buf[0..len) (BTH .. ICRC).  ip: the
 * addresses for the ICRC (NULL: not checked).  pkey: the P_Key expected,
 * matched as rxe's pkey_match does (low 15 bits equal and not 0, one side
 * a full member: 0xFFFF takes 0x7FFF too).  Checks in this order: length,
 * TVer, opcode, headers fit, pad, P_Key, ICRC.  *p is zeroed first; from
 * ROCE_E_TVER on p->bth holds the decoded BTH.  On ROCE_OK every header
 * the opcode has is decoded into *p (the others stay 0) and
 * p->payload/paylen is the payload without pad. */
enum roce_perr roce_pkt_parse(const uint8_t *buf, size_t len, const struct roce_ip *ip,
			      uint16_t pkey, struct roce_pkt *p);

/* Encode the BTH and the extension headers p->bth.opcode has, from *p,
 * into hdr (room for ROCE_MAX_HDR_LEN); returns the length (roce_ops'
 * hdr_len), 0 if the opcode is not in the table.  The caller sets
 * p->bth.pad (roce_pad of the payload length). */
size_t roce_pkt_encode_hdrs(const struct roce_pkt *p, uint8_t *hdr);

/* Build a whole packet into out (room: hdr_len + paylen + 3 + 4): headers,
 * payload, pad (zeros), ICRC (ip NULL: 4 zero octets).  Sets p->bth.pad,
 * and p->payload/paylen to the copy in out (payload may overlap out).
 * Returns the length; 0 if the opcode is unknown, if it carries no payload
 * and paylen is not 0, or if the packet would exceed ROCE_MAX_PKT_LEN. */
size_t roce_pkt_build(struct roce_pkt *p, const void *payload, uint32_t paylen,
		      const struct roce_ip *ip, uint8_t *out);
/* roce_pkt_build for a payload already in place at out +
 * roce_ops[opcode].hdr_len (a sender that gathers it there itself). */
size_t roce_pkt_finish(struct roce_pkt *p, uint32_t paylen, const struct roce_ip *ip,
		       uint8_t *out);

#endif
