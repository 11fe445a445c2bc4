/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* RFC 7306 (RDMA Protocol Extensions) message bodies.  Constants only;
 * encode/decode in iwarp/rdmap_ext.c.  Opcodes and queue numbers are in
 * iwarp/rdmap_wire.h. */
#ifndef RDMAP_EXT_WIRE_H
#define RDMAP_EXT_WIRE_H

/* Immediate Data (QN 0): the untagged payload is the 8 octets of data. */
#define RDMAP_IMM_LEN 8
/* xsock's use of them (only on a connection that agreed on RFC 7306):
 * octets 0-3 the verbs imm_data (network order), octet 4 flags, the rest
 * zero.  ATTACHED: this Immediate Data belongs to the Send right behind it
 * on QN 0 (verbs Send with Immediate, which RFC 7306 lacks); it consumes
 * no receive, the Send's completion carries it. */
#define RDMAP_IMM_XS_FLAGS 4
#define RDMAP_IMM_XS_ATTACHED 0x01

/* Atomic Request (QN 1), RFC 7306 section 4.4:
 *   Reserved(28) AtomicOp(4) | Request Identifier(4) | Remote STag(4) |
 *   Remote Tagged Offset(8) | Add or Swap Data(8) | Add or Swap Mask(8) |
 *   Compare Data(8) | Compare Mask(8) */
#define RDMAP_ATOMIC_REQ_LEN 52
#define RDMAP_ATOMIC_OP_MASK 0x0f /* low 4 bits of the first word */
#define RDMAP_ATOMIC_FETCH_ADD 0x0
#define RDMAP_ATOMIC_SWAP 0x1
#define RDMAP_ATOMIC_CMP_SWAP 0x2
/* the remote operand is 8 octets at an 8-octet aligned Tagged Offset */
#define RDMAP_ATOMIC_SIZE 8

/* Atomic Response (QN 3): Original Request Identifier(4) | Original
 * Remote Data Value(8) */
#define RDMAP_ATOMIC_RESP_LEN 12

#endif
