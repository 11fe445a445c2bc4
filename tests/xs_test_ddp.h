/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Test-local reading of a DDP header, written independently of
 * ddp_hdr_decode() so RDMAP tests do not depend on the code DDP tests check. */
#ifndef XS_TEST_DDP_H
#define XS_TEST_DDP_H

#include <string.h>

#include "ddp/ddp.h"
#include "util/xs_be.h"

static inline void xs_test_parse_ddp(const uint8_t *u, struct ddp_hdr *h)
{
	memset(h, 0, sizeof(*h));
	h->tagged = u[0] & DDP_FLAG_T;
	h->last = u[0] & DDP_FLAG_L;
	h->dv = u[0] & DDP_DV_MASK;
	h->rsvdulp = u[1];
	if (h->tagged) {
		h->stag = xs_get_be32(u + 2);
		h->to = xs_get_be64(u + 6);
	} else {
		h->rsvdulp2 = xs_get_be32(u + 2);
		h->qn = xs_get_be32(u + 6);
		h->msn = xs_get_be32(u + 10);
		h->mo = xs_get_be32(u + 14);
	}
}

#endif
