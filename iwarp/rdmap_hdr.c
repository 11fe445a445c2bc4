/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* RDMAP control byte, opcode table and the Read Request header
 * (RFC 5040 sections 4.1-4.4; opcodes 8-11 from RFC 7306). */
#include "config.h"

#include <errno.h>

#include "iwarp/rdmap.h"
#include "iwarp/rdmap_ext_wire.h"
#include "util/xs_be.h"

const struct rdmap_op_info rdmap_ops[RDMAP_OP_COUNT] = {
	[RDMAP_OP_WRITE] = { .name = "RDMA Write", .valid = true, .tagged = true },
	[RDMAP_OP_READ_REQ] = { .name = "RDMA Read Request", .valid = true,
				.qn = RDMAP_QN_READ_REQ, .body_len = RDMAP_READ_REQ_LEN },
	[RDMAP_OP_READ_RESP] = { .name = "RDMA Read Response", .valid = true, .tagged = true },
	[RDMAP_OP_SEND] = { .name = "Send", .valid = true, .qn = RDMAP_QN_SEND },
	[RDMAP_OP_SEND_INV] = { .name = "Send with Invalidate", .valid = true,
				.qn = RDMAP_QN_SEND, .invalidate = true },
	[RDMAP_OP_SEND_SE] = { .name = "Send with Solicited Event", .valid = true,
			       .qn = RDMAP_QN_SEND, .solicited = true },
	[RDMAP_OP_SEND_SE_INV] = { .name = "Send with Solicited Event and Invalidate",
				   .valid = true, .qn = RDMAP_QN_SEND, .solicited = true,
				   .invalidate = true },
	[RDMAP_OP_TERMINATE] = { .name = "Terminate", .valid = true, .qn = RDMAP_QN_TERMINATE },
	/* RFC 7306 table 1 (8 and 9 are reserved there): valid only on a
	 * stream whose ends agreed on the extension (rdmap_hdr_check_ext) */
	[RDMAP_OP_ATOMIC_REQ] = { .name = "Atomic Request", .ext = true,
				  .qn = RDMAP_QN_READ_REQ, .body_len = RDMAP_ATOMIC_REQ_LEN },
	[RDMAP_OP_ATOMIC_RESP] = { .name = "Atomic Response", .ext = true,
				   .qn = RDMAP_QN_ATOMIC_RESP, .body_len = RDMAP_ATOMIC_RESP_LEN },
	[RDMAP_OP_IMM_DATA] = { .name = "Immediate Data", .ext = true, .qn = RDMAP_QN_SEND,
				.body_len = RDMAP_IMM_LEN },
	[RDMAP_OP_IMM_DATA_SE] = { .name = "Immediate Data with Solicited Event", .ext = true,
				   .qn = RDMAP_QN_SEND, .body_len = RDMAP_IMM_LEN,
				   .solicited = true },
	/* 8, 9, 14, 15: reserved, name NULL */
};

int rdmap_hdr_check(const struct ddp_hdr *h, enum rdmap_opcode *op, struct xs_err *err)
{
	return rdmap_hdr_check_ext(h, false, op, err);
}

int rdmap_hdr_check_ext(const struct ddp_hdr *h, bool ext, enum rdmap_opcode *op,
			struct xs_err *err)
{
	uint8_t ctrl = h->rsvdulp;
	unsigned code = ctrl & RDMAP_OPCODE_MASK;
	const struct rdmap_op_info *info = &rdmap_ops[code];

	/* The opcode is reported even on failure: the caller may want it for
	 * the Terminate (e.g. to attach a Read Request header). */
	if (op)
		*op = (enum rdmap_opcode)code;

	/* RDMAP_RSVD_MASK bits are ignored on receive (RFC 5040 4.1). */
	if (ctrl >> RDMAP_RV_SHIFT != RDMAP_VERSION) {
		xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_VERSION);
		return -EPROTO;
	}
	/* Unknown, unimplemented, or on the wrong buffer model (tagged Send,
	 * untagged Write): all "unexpected OpCode". */
	if (!(info->valid || (ext && info->ext)) || h->tagged != info->tagged) {
		xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNEXPECTED_OP);
		return -EPROTO;
	}
	/* A known untagged opcode on another queue: the QN is what is wrong,
	 * reported as DDP would (RFC 5041 7.2, invalid QN). */
	if (!h->tagged && h->qn != info->qn) {
		xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_INVALID_QN);
		return -EPROTO;
	}
	return 0;
}

void rdmap_read_req_encode(const struct rdmap_read_req *r, uint8_t buf[RDMAP_READ_REQ_LEN])
{
	xs_put_be32(buf, r->sink_stag);
	xs_put_be64(buf + 4, r->sink_to);
	xs_put_be32(buf + 12, r->size);
	xs_put_be32(buf + 16, r->src_stag);
	xs_put_be64(buf + 20, r->src_to);
}

/* A Read Request whose body is not exactly 28 octets has no code of its
 * own in RFC 5040: it is neither a bad opcode nor a DDP buffer problem (the
 * message fitted the posted Read Request slot), so it is reported as RDMAP
 * Remote Operation Error / Unspecified Error (0/2/0xff). */
int rdmap_read_req_decode(const uint8_t *buf, size_t len, struct rdmap_read_req *r,
			  struct xs_err *err)
{
	if (len != RDMAP_READ_REQ_LEN) {
		xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNSPECIFIED);
		return -EPROTO;
	}
	r->sink_stag = xs_get_be32(buf);
	r->sink_to = xs_get_be64(buf + 4);
	r->size = xs_get_be32(buf + 12);
	r->src_stag = xs_get_be32(buf + 16);
	r->src_to = xs_get_be64(buf + 20);
	return 0;
}
