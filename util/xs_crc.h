/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* CRC32c (Castagnoli) as used by MPA, computed by ISA-L's crc32_iscsi. */
#ifndef XS_CRC_H
#define XS_CRC_H

#include <stddef.h>
#include <stdint.h>

/* Incremental use: state = XS_CRC32C_INIT; state = xs_crc32c_update(state, ...)...;
 * value = xs_crc32c_final(state). */
#define XS_CRC32C_INIT 0xffffffffu

uint32_t xs_crc32c_update(uint32_t state, const void *buf, size_t len);

static inline uint32_t xs_crc32c_final(uint32_t state)
{
	return ~state;
}

/* One-shot CRC32c of a buffer ("123456789" -> 0xE3069283). */
uint32_t xs_crc32c(const void *buf, size_t len);

#endif
