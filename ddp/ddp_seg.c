/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* DDP segmentation (RFC 5041 section 5.1): split a message so that every
 * ULPDU (DDP header + payload) fits the MULPDU the LLP announced. */
#include "config.h"

#include <errno.h>

#include "ddp/ddp.h"
#include "util/xs_be.h"

int ddp_seg_init(struct ddp_segmenter *s, const struct ddp_hdr *tmpl, size_t msg_len,
		 size_t mulpdu)
{
	size_t hl = ddp_hdr_len(tmpl->tagged);

	if (mulpdu <= hl)
		return -EINVAL;
	/* The offsets must be expressible: MO is 32 bits, and a tagged
	 * message may not make the TO wrap (the receiver would refuse it). */
	if (tmpl->tagged) {
		if ((uint64_t)msg_len > UINT64_MAX - tmpl->to)
			return -EINVAL;
	} else if ((uint64_t)msg_len > UINT32_MAX) {
		return -EINVAL;
	}

	s->tmpl = *tmpl;
	s->tmpl.last = false;
	s->msg_len = msg_len;
	s->max_payload = mulpdu - hl;
	s->off = 0;
	s->done = false;
	return 0;
}

bool ddp_seg_next(struct ddp_segmenter *s, struct ddp_hdr *hdr, size_t *off, size_t *len)
{
	if (s->done)
		return false;

	size_t n = s->msg_len - s->off;

	if (n > s->max_payload)
		n = s->max_payload;
	*hdr = s->tmpl;
	if (hdr->tagged)
		hdr->to = s->tmpl.to + s->off;
	else
		hdr->mo = (uint32_t)s->off;
	hdr->last = s->off + n == s->msg_len;
	*off = s->off;
	*len = n;
	s->off += n;
	s->done = hdr->last;
	return true;
}

size_t ddp_seg_count(size_t msg_len, size_t mulpdu, bool tagged)
{
	size_t hl = ddp_hdr_len(tagged);

	if (mulpdu <= hl)
		return 0;
	if (msg_len == 0)
		return 1;

	size_t maxpay = mulpdu - hl;

	return msg_len / maxpay + (msg_len % maxpay != 0);
}
