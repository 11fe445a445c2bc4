/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* RDMAP wire format (RFC 5040, opcodes and queues of RFC 7306).  Constants
 * only; the RFC 7306 message bodies are in iwarp/rdmap_ext_wire.h. */
#ifndef RDMAP_WIRE_H
#define RDMAP_WIRE_H

/* RDMAP control = DDP RsvdULP byte: RV(2) Rsvd(2) Opcode(4) */
#define RDMAP_VERSION 1
#define RDMAP_RV_SHIFT 6
#define RDMAP_RSVD_MASK 0x30
#define RDMAP_OPCODE_MASK 0x0f

enum rdmap_opcode {
	RDMAP_OP_WRITE = 0x0,
	RDMAP_OP_READ_REQ = 0x1,
	RDMAP_OP_READ_RESP = 0x2,
	RDMAP_OP_SEND = 0x3,
	RDMAP_OP_SEND_INV = 0x4,
	RDMAP_OP_SEND_SE = 0x5,
	RDMAP_OP_SEND_SE_INV = 0x6,
	RDMAP_OP_TERMINATE = 0x7,
	/* RFC 7306 section 4.1 (table 1): 01000b and 01001b stay reserved */
	RDMAP_OP_ATOMIC_REQ = 0xa, /* 01010b, untagged QN 1 */
	RDMAP_OP_ATOMIC_RESP = 0xb, /* 01011b, untagged QN 3 */
	RDMAP_OP_IMM_DATA = 0xc, /* 01100b, untagged QN 0 */
	RDMAP_OP_IMM_DATA_SE = 0xd, /* 01101b, untagged QN 0 */
};
#define RDMAP_OP_COUNT 16

/* Untagged queue numbers (RFC 5040 section 5.1) */
#define RDMAP_QN_SEND 0
#define RDMAP_QN_READ_REQ 1
#define RDMAP_QN_TERMINATE 2
/* RFC 7306: Atomic Requests share QN 1 (and the IRD) with Read Requests;
 * Atomic Responses come back on a queue of their own */
#define RDMAP_QN_ATOMIC_RESP 3

/* Read Request body on QN 1:
 * SinkSTag(4) | SinkTO(8) | RDMARDSZ(4) | SrcSTag(4) | SrcTO(8) */
#define RDMAP_READ_REQ_LEN 28

/* Terminate body on QN 2 (RFC 5040 section 4.8):
 * Layer(4) EType(4) | ECode(8) | M D R Rsvd(13)
 * [DDP Segment Length(16)] [Terminated DDP header] [Terminated RDMAP header] */
#define RDMAP_TERM_CTRL_LEN 4
#define RDMAP_TERM_FLAG_M 0x80 /* DDP Segment Length valid */
#define RDMAP_TERM_FLAG_D 0x40 /* DDP header included */
#define RDMAP_TERM_FLAG_R 0x20 /* RDMAP header included */
#define RDMAP_TERM_SEGLEN_LEN 2
#define RDMAP_TERM_MAX_LEN (RDMAP_TERM_CTRL_LEN + RDMAP_TERM_SEGLEN_LEN + 18 + RDMAP_READ_REQ_LEN)

/* RDMAP error types and codes (RFC 5040 section 7, Layer 0) */
#define RDMAP_ETYPE_CATASTROPHIC 0x0
#define RDMAP_ETYPE_REMOTE_PROT 0x1
#define RDMAP_ETYPE_REMOTE_OP 0x2

#define RDMAP_ECODE_CATASTROPHIC 0x00
/* Remote Protection Error */
#define RDMAP_ECODE_INVALID_STAG 0x00
#define RDMAP_ECODE_BASE_BOUNDS 0x01
#define RDMAP_ECODE_ACCESS 0x02 /* access rights violation */
#define RDMAP_ECODE_STAG_NOT_ASSOC 0x03 /* STag not associated with RDMAP stream */
#define RDMAP_ECODE_TO_WRAP 0x04
#define RDMAP_ECODE_STAG_CANNOT_INV 0x09 /* STag cannot be invalidated */
#define RDMAP_ECODE_UNSPECIFIED 0xff
/* Remote Operation Error */
#define RDMAP_ECODE_VERSION 0x05 /* invalid RDMAP version */
#define RDMAP_ECODE_UNEXPECTED_OP 0x06
#define RDMAP_ECODE_STREAM_CATASTROPHIC 0x07 /* catastrophic error, localized to RDMAP stream */
#define RDMAP_ECODE_GLOBAL_CATASTROPHIC 0x08
/* 0x09 and 0xff as above */

#endif
