/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* DDP wire format (RFC 5041).  Constants only. */
#ifndef DDP_WIRE_H
#define DDP_WIRE_H

/* Byte 0: T(1) L(1) Rsvd(4) DV(2); byte 1: RsvdULP (RDMAP control). */
#define DDP_FLAG_T 0x80 /* tagged */
#define DDP_FLAG_L 0x40 /* last segment of the message */
#define DDP_RSVD_MASK 0x3c
#define DDP_DV_MASK 0x03
#define DDP_VERSION 1

/* Tagged:   ctrl(2) | STag(4) | TO(8)                       = 14 octets
 * Untagged: ctrl(2) | RsvdULP(4) | QN(4) | MSN(4) | MO(4)   = 18 octets */
#define DDP_TAGGED_HDR_LEN 14
#define DDP_UNTAGGED_HDR_LEN 18
#define DDP_MAX_HDR_LEN DDP_UNTAGGED_HDR_LEN

/* DDP Terminate error types and codes (RFC 5041 section 7, Layer 1). */
#define DDP_ETYPE_CATASTROPHIC 0x0
#define DDP_ETYPE_TAGGED 0x1
#define DDP_ETYPE_UNTAGGED 0x2
#define DDP_ETYPE_RSVD 0x3 /* reserved for use by the DDP ULP (RDMAP) */

#define DDP_ECODE_CATASTROPHIC 0x00 /* local catastrophic error */

#define DDP_ECODE_T_INVALID_STAG 0x00
#define DDP_ECODE_T_BASE_BOUNDS 0x01 /* base or bounds violation */
#define DDP_ECODE_T_STAG_NOT_ASSOC 0x02 /* STag not associated with DDP stream */
#define DDP_ECODE_T_TO_WRAP 0x03
#define DDP_ECODE_T_VERSION 0x04 /* invalid DDP version */

#define DDP_ECODE_U_INVALID_QN 0x01
#define DDP_ECODE_U_NO_BUFFER 0x02 /* invalid MSN: no buffer available */
#define DDP_ECODE_U_MSN_RANGE 0x03 /* invalid MSN: MSN range is not valid */
#define DDP_ECODE_U_INVALID_MO 0x04
#define DDP_ECODE_U_TOO_LONG 0x05 /* DDP message too long for available buffer */
#define DDP_ECODE_U_VERSION 0x06 /* invalid DDP version */

#endif
