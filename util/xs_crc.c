#include "config.h"

#include <isa-l/crc.h>
#include <limits.h>

#include "xs_crc.h"

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
	return state;
}

uint32_t xs_crc32c(const void *buf, size_t len)
{
	return xs_crc32c_final(xs_crc32c_update(XS_CRC32C_INIT, buf, len));
}
