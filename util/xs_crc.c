/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
#include "config.h"

#include <isa-l/crc.h>
#include <limits.h>

#include "xs_crc.h"

/* ISA-L's AVX-512 CRC kernels return with the upper vector state dirty;
 * the SSE code that follows (every struct copy) then pays a transition
 * penalty that tripled the cost of framing 1.4 KB FPDUs.  Clear it. */
static inline void xs_vzeroupper(void)
{
#if defined(__x86_64__)
	if (__builtin_cpu_supports("avx"))
		__asm__ volatile("vzeroupper" ::: "memory");
#endif
}

uint32_t xs_crc32c_update(uint32_t state, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	/* crc32_iscsi takes an int length; feed huge buffers in slices. */
	while (len > 0) {
		int n = len > (size_t)INT_MAX ? INT_MAX : (int)len;

		state = crc32_iscsi((unsigned char *)p, n, state);
		p += n;
		len -= (size_t)n;
	}
	xs_vzeroupper();
	return state;
}

uint32_t xs_crc32c(const void *buf, size_t len)
{
	return xs_crc32c_final(xs_crc32c_update(XS_CRC32C_INIT, buf, len));
}
