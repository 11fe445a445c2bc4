/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* RoCEv2 on the wire (IBTA Vol. 1 ch. 9 transport headers, Annex A17
 * RoCEv2): the constants and header sizes.  Every header is big-endian;
 * roce_hdr.c encodes and decodes them field by field. */
#ifndef ROCE_WIRE_H
#define ROCE_WIRE_H

#define ROCE_UDP_PORT 4791 /* IANA: every RoCEv2 packet goes to it */
#define ROCE_SPORT_BASE 0xC000 /* rxe: 0xC000 | hash14(qpn) */

#define ROCE_BTH_LEN 12
#define ROCE_RETH_LEN 16
#define ROCE_AETH_LEN 4
#define ROCE_IMMDT_LEN 4
#define ROCE_IETH_LEN 4
#define ROCE_ATMETH_LEN 28
#define ROCE_ATMACK_LEN 8
#define ROCE_DETH_LEN 8
#define ROCE_ICRC_LEN 4
#define ROCE_MAX_HDR_LEN (ROCE_BTH_LEN + ROCE_ATMETH_LEN) /* largest: atomic */
/* The largest UDP payload (BTH .. ICRC) an IPv4 datagram carries: 65535 -
 * 20 (IP) - 8 (UDP).  roce_pkt_build refuses more; the ICRC's IP and UDP
 * length fields are 16 bits. */
#define ROCE_MAX_PKT_LEN 65507
/* The pseudo headers the ICRC starts with: 8 octets of 0xFF for the masked
 * LRH (rxe_icrc.c:91-94), the IP header (20 or 40), the UDP header (8). */
#define ROCE_LRH_MASK_LEN 8
#define ROCE_IPV4_HDR_LEN 20
#define ROCE_IPV6_HDR_LEN 40
#define ROCE_UDP_HDR_LEN 8

#define ROCE_PKEY_DEFAULT 0xffff
#define ROCE_PSN_MASK 0xffffffu
#define ROCE_QPN_MASK 0xffffffu
#define ROCE_MSN_MASK 0xffffffu
#define ROCE_QP1 1 /* GSI: CM MADs (issue 18) */
#define ROCE_GSI_QKEY 0x80010000u

/* BTH octet 1: SE(7) M(6) PadCnt(5:4) TVer(3:0) */
#define ROCE_BTH_SE 0x80
#define ROCE_BTH_MIG 0x40
#define ROCE_BTH_PAD_SHIFT 4
#define ROCE_BTH_PAD_MASK 0x30
#define ROCE_BTH_TVER_MASK 0x0f
/* BTH octet 4: F(7) B(6) resv6; octet 8: A(7) resv7 */
#define ROCE_BTH_FECN 0x80
#define ROCE_BTH_BECN 0x40
#define ROCE_BTH_ACKREQ 0x80

/* The opcodes rxe implements (rxe_opcode.c), RC and UD. */
enum roce_opcode {
	ROCE_RC_SEND_FIRST = 0x00,
	ROCE_RC_SEND_MIDDLE = 0x01,
	ROCE_RC_SEND_LAST = 0x02,
	ROCE_RC_SEND_LAST_IMM = 0x03,
	ROCE_RC_SEND_ONLY = 0x04,
	ROCE_RC_SEND_ONLY_IMM = 0x05,
	ROCE_RC_WRITE_FIRST = 0x06,
	ROCE_RC_WRITE_MIDDLE = 0x07,
	ROCE_RC_WRITE_LAST = 0x08,
	ROCE_RC_WRITE_LAST_IMM = 0x09,
	ROCE_RC_WRITE_ONLY = 0x0a,
	ROCE_RC_WRITE_ONLY_IMM = 0x0b,
	ROCE_RC_READ_REQ = 0x0c,
	ROCE_RC_READ_RESP_FIRST = 0x0d,
	ROCE_RC_READ_RESP_MIDDLE = 0x0e,
	ROCE_RC_READ_RESP_LAST = 0x0f,
	ROCE_RC_READ_RESP_ONLY = 0x10,
	ROCE_RC_ACK = 0x11,
	ROCE_RC_ATOMIC_ACK = 0x12,
	ROCE_RC_CMP_SWAP = 0x13,
	ROCE_RC_FETCH_ADD = 0x14,
	ROCE_RC_SEND_LAST_INV = 0x16,
	ROCE_RC_SEND_ONLY_INV = 0x17,
	ROCE_UD_SEND_ONLY = 0x64,
	ROCE_UD_SEND_ONLY_IMM = 0x65,
};

/* AETH syndrome: bit 7 reserved, bits 6-5 the type, bits 4-0 its value:
 * 0b0_00_ttttt ACK (t: credit count, 0x1f none), 0b0_01_ttttt RNR NAK
 * (t: the RNR timer code), 0b0_10_xxxxx reserved, 0b0_11_nnnnn NAK (n:
 * enum roce_nak).  rxe masks the type with 0xe0, bit 7 included
 * (rxe_hdr.h:735), so a syndrome with bit 7 set is no type it knows. */
#define ROCE_AETH_TYPE_MASK 0x60
#define ROCE_AETH_ACK 0x00
#define ROCE_AETH_RNR_NAK 0x20
#define ROCE_AETH_NAK 0x60
#define ROCE_AETH_VALUE_MASK 0x1f
#define ROCE_AETH_CREDIT_INVALID 0x1f
enum roce_nak {
	ROCE_NAK_PSN_SEQ = 0x00,
	ROCE_NAK_INVALID_REQ = 0x01,
	ROCE_NAK_REMOTE_ACCESS = 0x02,
	ROCE_NAK_REMOTE_OP = 0x03,
	ROCE_NAK_INVALID_RD_REQ = 0x04,
};

#endif
