/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* RFC 7306 (RDMA Protocol Extensions): Immediate Data and the Atomic
 * Request/Response bodies, and the atomic operation itself on an 8-octet
 * word.  Pure code over byte buffers, as iwarp/rdmap.h. */
#ifndef RDMAP_EXT_H
#define RDMAP_EXT_H

#include <stddef.h>
#include <stdint.h>

#include "iwarp/rdmap.h"
#include "iwarp/rdmap_ext_wire.h"

struct rdmap_atomic_req {
	uint8_t op; /* RDMAP_ATOMIC_* */
	uint32_t req_id;
	uint32_t stag;
	uint64_t to;
	uint64_t add_swap, add_swap_mask;
	uint64_t compare, compare_mask;
};

struct rdmap_atomic_resp {
	uint32_t req_id;
	uint64_t value; /* the remote word before the operation */
};

void rdmap_imm_encode(uint64_t imm, uint8_t buf[RDMAP_IMM_LEN]);
/* -EPROTO with DDP/2/0x05 (too long for the 8-octet buffer) or RDMAP/2/0xff
 * (shorter) unless len == 8. */
int rdmap_imm_decode(const uint8_t *buf, size_t len, uint64_t *imm, struct xs_err *err);

/* The reserved bits are sent as zero and ignored on receive. */
void rdmap_atomic_req_encode(const struct rdmap_atomic_req *r,
			     uint8_t buf[RDMAP_ATOMIC_REQ_LEN]);
/* -EPROTO: RDMAP/2/0xff if len != 52, RDMAP/2/0x06 (unexpected OpCode)
 * for an atomic operation code RFC 7306 reserves. */
int rdmap_atomic_req_decode(const uint8_t *buf, size_t len, struct rdmap_atomic_req *r,
			    struct xs_err *err);
/* The Terminate for a request the responder cannot carry out, checked in
 * this order: remote TO not 8-octet aligned -> RDMAP/2/0xff (RFC 7306
 * defines no code of its own; siw-style "unspecified").  0 if none. */
int rdmap_atomic_req_check(const struct rdmap_atomic_req *r, struct xs_err *err);

void rdmap_atomic_resp_encode(const struct rdmap_atomic_resp *r,
			      uint8_t buf[RDMAP_ATOMIC_RESP_LEN]);
/* -EPROTO with RDMAP/2/0xff if len != 12. */
int rdmap_atomic_resp_decode(const uint8_t *buf, size_t len, struct rdmap_atomic_resp *r,
			     struct xs_err *err);

/* Carry out r on the host-order word at p (8-octet aligned), atomically
 * with respect to other threads of this process; returns the old value.
 * FetchAdd: masked add (a set Add Mask bit ends a field: no carry out of
 * it; mask 0 is a plain 64-bit add).  Swap: the Swap Mask bits of the
 * word take the Swap Data.  CmpSwap: if the Compare Mask bits equal
 * Compare Data, the Swap Mask bits take the Swap Data. */
uint64_t rdmap_atomic_apply(const struct rdmap_atomic_req *r, uint64_t *p);

#endif
