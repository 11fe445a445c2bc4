/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Gather-list bookkeeping after a partial writev()/sendmsg(). */
#ifndef XS_IOV_H
#define XS_IOV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Drop the first n octets of the list *iov (*cnt entries): whole entries
 * are skipped, the first remaining one is trimmed in place. */
static inline void xs_iov_advance(struct iovec **iov, int *cnt, size_t n)
{
	struct iovec *p = *iov;

	while (n > 0 && *cnt > 0 && n >= p->iov_len) {
		n -= p->iov_len;
		p++;
		(*cnt)--;
	}
	if (n > 0 && *cnt > 0) {
		p->iov_base = (uint8_t *)p->iov_base + n;
		p->iov_len -= n;
	}
	*iov = p;
}

#endif
