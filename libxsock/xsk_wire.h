/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The rsockets wire format (rdma-core librdmacm/docs/rsocket): constants,
 * the connection data and the 32-bit messages.  Formats only; the code
 * that encodes the connection data is xsk_wire.c, the protocol that uses
 * all this is described in xsk_proto.h. */
#ifndef XSK_WIRE_H
#define XSK_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RS_VERSION 1
#define RS_CONN_FLAG_NET 0x01 /* sender is big-endian (messages/SGEs in its order) */
#define RS_CONN_DATA_LEN 40
#define RS_SGE_LEN 16 /* struct rs_sge {u64 addr; u32 key; u32 length;} host order */
#define RS_SGL_SIZE 2

#define RS_OP_DATA 0u
#define RS_OP_WRITE 2u
#define RS_OP_SGL 4u
#define RS_OP_IOMAP_SGL 6u
#define RS_OP_CTRL 7u
#define RS_MSG(op, data) (((uint32_t)(op) << 29) | ((uint32_t)(data)&0x1fffffffu))
#define RS_MSG_OP(m) ((m) >> 29)
#define RS_MSG_DATA(m) ((m)&0x1fffffffu)
#define RS_CTRL_DISCONNECT 0u
#define RS_CTRL_KEEPALIVE 1u
#define RS_CTRL_SHUTDOWN 2u
#define RS_MAX_TRANSFER 65536u

struct rs_sge_h {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};
_Static_assert(sizeof(struct rs_sge_h) == RS_SGE_LEN, "rs_sge is 16 octets");

struct rs_conn {
	uint8_t version;
	uint8_t flags;
	uint16_t credits;
	uint8_t target_iomap_size;
	struct rs_sge_h target_sgl; /* addr/key of the SGL, length = entries */
	struct rs_sge_h data_buf;
};

/* Big-endian encode/decode of the 40-octet connection data. */
void rs_conn_encode(const struct rs_conn *c, uint8_t out[RS_CONN_DATA_LEN]);
int rs_conn_decode(const uint8_t *in, size_t len, struct rs_conn *c);

static inline bool rs_host_is_be(void)
{
	return __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__;
}

/* A message or SGE field in the peer's byte order (s->swap). */
static inline uint32_t rs_swap32(uint32_t v)
{
	return __builtin_bswap32(v);
}

#endif
