/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* RFC 7306 (RDMA Protocol Extensions): Immediate Data, Atomic Request and
 * Atomic Response bodies (sections 4.3-4.5), and the atomic operations. */
#include "config.h"

#include <errno.h>

#include "iwarp/rdmap_ext.h"
#include "util/xs_be.h"

void rdmap_imm_encode(uint64_t imm, uint8_t buf[RDMAP_IMM_LEN])
{
	xs_put_be64(buf, imm);
}

int rdmap_imm_decode(const uint8_t *buf, size_t len, uint64_t *imm, struct xs_err *err)
{
	if (len > RDMAP_IMM_LEN) {
		/* the Data Sink's buffer for it holds 8 octets */
		xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_TOO_LONG);
		return -EPROTO;
	}
	if (len < RDMAP_IMM_LEN) {
		xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNSPECIFIED);
		return -EPROTO;
	}
	*imm = xs_get_be64(buf);
	return 0;
}

void rdmap_atomic_req_encode(const struct rdmap_atomic_req *r, uint8_t buf[RDMAP_ATOMIC_REQ_LEN])
{
	xs_put_be32(buf, r->op & RDMAP_ATOMIC_OP_MASK);
	xs_put_be32(buf + 4, r->req_id);
	xs_put_be32(buf + 8, r->stag);
	xs_put_be64(buf + 12, r->to);
	xs_put_be64(buf + 20, r->add_swap);
	xs_put_be64(buf + 28, r->add_swap_mask);
	xs_put_be64(buf + 36, r->compare);
	xs_put_be64(buf + 44, r->compare_mask);
}

int rdmap_atomic_req_decode(const uint8_t *buf, size_t len, struct rdmap_atomic_req *r,
			    struct xs_err *err)
{
	if (len != RDMAP_ATOMIC_REQ_LEN) {
		xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNSPECIFIED);
		return -EPROTO;
	}
	r->op = (uint8_t)(xs_get_be32(buf) & RDMAP_ATOMIC_OP_MASK);
	r->req_id = xs_get_be32(buf + 4);
	r->stag = xs_get_be32(buf + 8);
	r->to = xs_get_be64(buf + 12);
	r->add_swap = xs_get_be64(buf + 20);
	r->add_swap_mask = xs_get_be64(buf + 28);
	r->compare = xs_get_be64(buf + 36);
	r->compare_mask = xs_get_be64(buf + 44);
	if (r->op > RDMAP_ATOMIC_CMP_SWAP) {
		/* a reserved operation: the request is not one we know */
		xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNEXPECTED_OP);
		return -EPROTO;
	}
	return 0;
}

int rdmap_atomic_req_check(const struct rdmap_atomic_req *r, struct xs_err *err)
{
	if (r->to % RDMAP_ATOMIC_SIZE) {
		xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNSPECIFIED);
		return -EPROTO;
	}
	return 0;
}

void rdmap_atomic_resp_encode(const struct rdmap_atomic_resp *r,
			      uint8_t buf[RDMAP_ATOMIC_RESP_LEN])
{
	xs_put_be32(buf, r->req_id);
	xs_put_be64(buf + 4, r->value);
}

int rdmap_atomic_resp_decode(const uint8_t *buf, size_t len, struct rdmap_atomic_resp *r,
			     struct xs_err *err)
{
	if (len != RDMAP_ATOMIC_RESP_LEN) {
		xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNSPECIFIED);
		return -EPROTO;
	}
	r->req_id = xs_get_be32(buf);
	r->value = xs_get_be64(buf + 4);
	return 0;
}

/* a + b with no carry out of a bit whose mask bit is set */
static uint64_t masked_add(uint64_t a, uint64_t b, uint64_t mask)
{
	uint64_t sum = 0;
	unsigned carry = 0;

	if (!mask)
		return a + b;
	for (unsigned i = 0; i < 64; i++) {
		unsigned x = (unsigned)(a >> i) & 1, y = (unsigned)(b >> i) & 1;

		sum |= (uint64_t)(x ^ y ^ carry) << i;
		carry = (x & y) | (x & carry) | (y & carry);
		if ((mask >> i) & 1)
			carry = 0;
	}
	return sum;
}

static uint64_t atomic_new(const struct rdmap_atomic_req *r, uint64_t old)
{
	switch (r->op) {
	case RDMAP_ATOMIC_FETCH_ADD:
		return masked_add(old, r->add_swap, r->add_swap_mask);
	case RDMAP_ATOMIC_SWAP:
		return (old & ~r->add_swap_mask) | (r->add_swap & r->add_swap_mask);
	case RDMAP_ATOMIC_CMP_SWAP:
		if ((old & r->compare_mask) != (r->compare & r->compare_mask))
			return old;
		return (old & ~r->add_swap_mask) | (r->add_swap & r->add_swap_mask);
	default:
		return old;
	}
}

uint64_t rdmap_atomic_apply(const struct rdmap_atomic_req *r, uint64_t *p)
{
	uint64_t old = __atomic_load_n(p, __ATOMIC_ACQUIRE);

	/* a CAS loop: the same word may be the target of other QPs' atomics
	 * (other engine threads never, but polling application threads do) */
	while (!__atomic_compare_exchange_n(p, &old, atomic_new(r, old), false, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE))
		;
	return old;
}
