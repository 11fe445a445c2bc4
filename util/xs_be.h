/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Big-endian (network order) load/store helpers over byte buffers.
 * Every wire field goes through these: no casts of wire bytes to structs. */
#ifndef XS_BE_H
#define XS_BE_H

#include <stdint.h>

static inline void xs_put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void xs_put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void xs_put_be64(uint8_t *p, uint64_t v)
{
	xs_put_be32(p, (uint32_t)(v >> 32));
	xs_put_be32(p + 4, (uint32_t)v);
}

static inline uint16_t xs_get_be16(const uint8_t *p)
{
	return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint32_t xs_get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t xs_get_be64(const uint8_t *p)
{
	return (uint64_t)xs_get_be32(p) << 32 | xs_get_be32(p + 4);
}

/* The MPA CRC field is the one little-endian exception (RFC 5044 follows
 * iSCSI: the CRC register is sent least-significant byte first). */
static inline void xs_put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t xs_get_le32(const uint8_t *p)
{
	return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

#endif
