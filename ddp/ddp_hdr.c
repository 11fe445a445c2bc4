/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* DDP header encode/decode (RFC 5041 section 4). */
#include "config.h"

#include <errno.h>

#include "ddp/ddp.h"
#include "util/xs_be.h"

size_t ddp_hdr_encode(const struct ddp_hdr *h, uint8_t *buf)
{
	/* Reserved bits go out as zero.  DV is written as given (not forced to
	 * DDP_VERSION) so tools can craft a bad version on purpose. */
	uint8_t b0 = (uint8_t)(h->dv & DDP_DV_MASK);

	if (h->tagged)
		b0 |= DDP_FLAG_T;
	if (h->last)
		b0 |= DDP_FLAG_L;
	buf[0] = b0;
	buf[1] = h->rsvdulp;
	if (h->tagged) {
		xs_put_be32(buf + 2, h->stag);
		xs_put_be64(buf + 6, h->to);
		return DDP_TAGGED_HDR_LEN;
	}
	xs_put_be32(buf + 2, h->rsvdulp2);
	xs_put_be32(buf + 6, h->qn);
	xs_put_be32(buf + 10, h->msn);
	xs_put_be32(buf + 14, h->mo);
	return DDP_UNTAGGED_HDR_LEN;
}

int ddp_hdr_decode(const uint8_t *buf, size_t len, struct ddp_hdr *h, struct xs_err *err)
{
	if (len < 1 || len < ddp_hdr_len_from_byte(buf[0]))
		return -EAGAIN;

	/* Fill every field even on a bad version: the caller quotes the
	 * header in its Terminate. */
	*h = (struct ddp_hdr){ 0 };
	h->tagged = (buf[0] & DDP_FLAG_T) != 0;
	h->last = (buf[0] & DDP_FLAG_L) != 0;
	h->dv = buf[0] & DDP_DV_MASK; /* reserved bits ignored */
	h->rsvdulp = buf[1];
	if (h->tagged) {
		h->stag = xs_get_be32(buf + 2);
		h->to = xs_get_be64(buf + 6);
	} else {
		h->rsvdulp2 = xs_get_be32(buf + 2);
		h->qn = xs_get_be32(buf + 6);
		h->msn = xs_get_be32(buf + 10);
		h->mo = xs_get_be32(buf + 14);
	}

	if (h->dv != DDP_VERSION) {
		if (h->tagged)
			xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_VERSION);
		else
			xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_VERSION);
		return -EPROTO;
	}
	return 0;
}
