/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* RDMAP (RFC 5040) wire part: control byte, opcode table, Read Request,
 * Terminate, and the complete Terminate error-code table of all three layers.
 * Pure code over byte buffers. */
#ifndef RDMAP_H
#define RDMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/xs_err.h"
#include "ddp/ddp.h"
#include "iwarp/rdmap_wire.h"

static inline uint8_t rdmap_ctrl_encode(enum rdmap_opcode op)
{
	return (uint8_t)(RDMAP_VERSION << RDMAP_RV_SHIFT | ((unsigned)op & RDMAP_OPCODE_MASK));
}

/* What the opcode table knows about each opcode. */
struct rdmap_op_info {
	const char *name;
	bool valid; /* RFC 5040 (0-7): always accepted */
	bool ext; /* RFC 7306 (0xa-0xd): accepted once both ends agreed on it */
	bool tagged; /* carried in tagged DDP segments */
	uint8_t qn; /* untagged: the queue it travels on */
	uint8_t body_len; /* fixed RDMAP body in the payload (Read Request: 28) */
	bool solicited; /* SE */
	bool invalidate; /* carries an Invalidate STag in RsvdULP */
};

/* Indexed by opcode 0..15; entries 0xa-0xd are RFC 7306's (ext). */
extern const struct rdmap_op_info rdmap_ops[RDMAP_OP_COUNT];

/* Validate the RDMAP control byte of a decoded DDP header against the
 * opcode table: RV != 1 -> RDMAP/2/0x05; unknown or unsupported opcode, or an
 * opcode on the wrong kind of segment (tagged Send, untagged Write) ->
 * RDMAP/2/0x06; untagged opcode on the wrong QN -> DDP/2/0x01.  Returns 0 with
 * *op set, or -EPROTO. */
int rdmap_hdr_check(const struct ddp_hdr *h, enum rdmap_opcode *op, struct xs_err *err);
/* As rdmap_hdr_check; with ext the RFC 7306 opcodes are valid too (an
 * RFC 7306 opcode on a stream that did not agree on it is unexpected). */
int rdmap_hdr_check_ext(const struct ddp_hdr *h, bool ext, enum rdmap_opcode *op,
			struct xs_err *err);

struct rdmap_read_req {
	uint32_t sink_stag;
	uint64_t sink_to;
	uint32_t size;
	uint32_t src_stag;
	uint64_t src_to;
};

void rdmap_read_req_encode(const struct rdmap_read_req *r, uint8_t buf[RDMAP_READ_REQ_LEN]);
/* -EPROTO with RDMAP/2/0xff (unspecified error) if len != 28. */
int rdmap_read_req_decode(const uint8_t *buf, size_t len, struct rdmap_read_req *r,
			  struct xs_err *err);

struct rdmap_term {
	struct xs_err cause; /* layer, etype, ecode */
	bool m, d, r; /* Hdrct */
	uint16_t ddp_seg_len; /* valid when m */
	uint8_t ddp_hdr[DDP_MAX_HDR_LEN]; /* when d */
	uint8_t ddp_hdr_len;
	uint8_t rdmap_hdr[RDMAP_READ_REQ_LEN]; /* when r */
	uint8_t rdmap_hdr_len;
};

/* Encode the Terminate body (RFC layout: Layer in the high nibble).  The
 * DDP Segment Length and DDP header follow iff d, the RDMAP header iff r
 * (layout decisions: rdmap_term.c).  Returns its length, -EMSGSIZE, or
 * -EINVAL (m without d, ddp_hdr_len not matching its T bit, r without 28). */
ssize_t rdmap_term_encode(const struct rdmap_term *t, uint8_t *buf, size_t cap);
/* Decode an RFC-layout Terminate body.  -EPROTO (err RDMAP/2/0xff) if
 * truncated or longer than its M/D/R flags announce. */
int rdmap_term_decode(const uint8_t *buf, size_t len, struct rdmap_term *t, struct xs_err *err);
/* Linux siw lays the control word out with Layer in the LOW nibble and M/D/R
 * in bits 0/1/2 of byte 2; this decodes that variant (for diagnosis). */
int rdmap_term_decode_siw(const uint8_t *buf, size_t len, struct rdmap_term *t,
			  struct xs_err *err);

/* ---- Error table --------------------------------------------------------- */

struct xs_err_desc {
	uint8_t layer, etype, ecode;
	const char *name; /* e.g. "invalid STag" */
	const char *rfc; /* e.g. "RFC 5041 7.2" */
};

extern const struct xs_err_desc xs_err_table[];
extern const size_t xs_err_table_len;

/* Entry for a triple, NULL if the RFCs do not define it. */
const struct xs_err_desc *xs_err_lookup(const struct xs_err *e);
/* "DDP/untagged buffer error/0x02: invalid MSN - no buffer available", or
 * ".../0x42: unknown code"; truncated to cap; never NULL. */
const char *xs_err_str(const struct xs_err *e, char *buf, size_t cap);
const char *xs_layer_name(uint8_t layer);
const char *xs_etype_name(uint8_t layer, uint8_t etype);

#endif
