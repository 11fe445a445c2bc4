/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* MPA Request/Reply frames (RFC 5044 section 7.1, RFC 6581 section 5). */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "mpa/mpa.h"
#include "util/xs_be.h"

static bool frame_has_irdord(const struct mpa_frame *f)
{
	return f->rev == MPA_REV_2 && f->enhanced;
}

size_t mpa_frame_len(const struct mpa_frame *f)
{
	return MPA_RR_HDR_LEN + (frame_has_irdord(f) ? MPA_IRDORD_LEN : 0) + f->pdata_len;
}

/* In rev 1 the ENHANCED bit is just another reserved bit: it travels in
 * res_bits so a decoded frame re-encodes to the same bytes. */
static uint8_t res_mask(uint8_t rev)
{
	return rev == MPA_REV_1 ? (MPA_FLAG_RES_MASK | MPA_FLAG_ENHANCED) : MPA_FLAG_RES_MASK;
}

/* the flag bit that says RFC 7306 in this kind of frame */
static uint8_t ext_bit(enum mpa_frame_type t)
{
	return t == MPA_REQUEST ? MPA_FLAG_EXT_REQ : MPA_FLAG_EXT_REP;
}

ssize_t mpa_frame_encode(const struct mpa_frame *f, uint8_t *buf, size_t cap)
{
	size_t pd_len, len;
	uint8_t flags;

	if (f->rev != MPA_REV_1 && f->rev != MPA_REV_2)
		return -EINVAL;
	if (f->type == MPA_REQUEST && f->reject)
		return -EINVAL;
	if (f->type != MPA_REQUEST && f->type != MPA_REPLY)
		return -EINVAL;
	if (f->enhanced && f->rev != MPA_REV_2)
		return -EINVAL;
	if (f->ird > MPA_IRDORD_MASK || f->ord > MPA_IRDORD_MASK)
		return -EINVAL;
	if (f->pdata_len && !f->pdata)
		return -EINVAL;
	pd_len = (frame_has_irdord(f) ? MPA_IRDORD_LEN : 0) + f->pdata_len;
	if (pd_len > MPA_PD_MAX)
		return -EINVAL;
	len = MPA_RR_HDR_LEN + pd_len;
	if (cap < len)
		return -EMSGSIZE;

	memcpy(buf, f->type == MPA_REQUEST ? MPA_KEY_REQ : MPA_KEY_REP, MPA_KEY_LEN);
	flags = f->res_bits & res_mask(f->rev) & (uint8_t)~ext_bit(f->type);
	if (f->rdmap_ext)
		flags |= ext_bit(f->type);
	if (f->markers)
		flags |= MPA_FLAG_M;
	if (f->crc)
		flags |= MPA_FLAG_C;
	if (f->reject)
		flags |= MPA_FLAG_R;
	if (f->enhanced)
		flags |= MPA_FLAG_ENHANCED;
	buf[16] = flags;
	buf[17] = f->rev;
	xs_put_be16(buf + 18, (uint16_t)pd_len);
	uint8_t *p = buf + MPA_RR_HDR_LEN;
	if (frame_has_irdord(f)) {
		uint16_t ird = f->ird, ord = f->ord;

		if (f->p2p)
			ird |= MPA_IRD_P2P;
		if (f->rtr_send)
			ird |= MPA_IRD_RTR_SEND;
		if (f->rtr_write)
			ord |= MPA_ORD_RTR_WRITE;
		if (f->rtr_read)
			ord |= MPA_ORD_RTR_READ;
		xs_put_be16(p, ird);
		xs_put_be16(p + 2, ord);
		p += MPA_IRDORD_LEN;
	}
	if (f->pdata_len)
		memcpy(p, f->pdata, f->pdata_len);
	return (ssize_t)len;
}

static int bad_frame(struct xs_err *err)
{
	xs_err_set(err, XS_LAYER_LLP, MPA_ETYPE, MPA_ECODE_BAD_RR);
	return -EPROTO;
}

int mpa_frame_decode(const uint8_t *buf, size_t len, enum mpa_frame_type expect,
		     struct mpa_frame *f, size_t *frame_len, struct xs_err *err)
{
	const char *key = expect == MPA_REQUEST ? MPA_KEY_REQ : MPA_KEY_REP;
	size_t have = len < MPA_KEY_LEN ? len : MPA_KEY_LEN;
	uint8_t flags, rev;
	uint16_t pd_len;

	/* Fail early on a peer that is not speaking MPA at all. */
	if (memcmp(buf, key, have) != 0)
		return bad_frame(err);
	if (len < MPA_RR_HDR_LEN) {
		*frame_len = MPA_RR_HDR_LEN;
		return -EAGAIN;
	}
	flags = buf[16];
	rev = buf[17];
	pd_len = xs_get_be16(buf + 18);
	if (rev != MPA_REV_1 && rev != MPA_REV_2)
		return bad_frame(err);
	if (pd_len > MPA_PD_MAX)
		return bad_frame(err);
	if (expect == MPA_REQUEST && (flags & MPA_FLAG_R))
		return bad_frame(err);
	bool enhanced = rev == MPA_REV_2 && (flags & MPA_FLAG_ENHANCED);
	if (enhanced && pd_len < MPA_IRDORD_LEN)
		return bad_frame(err);
	if (len < (size_t)MPA_RR_HDR_LEN + pd_len) {
		*frame_len = (size_t)MPA_RR_HDR_LEN + pd_len;
		return -EAGAIN;
	}

	memset(f, 0, sizeof(*f));
	f->type = expect;
	f->markers = flags & MPA_FLAG_M;
	f->crc = flags & MPA_FLAG_C;
	f->reject = flags & MPA_FLAG_R;
	f->enhanced = enhanced;
	f->rdmap_ext = flags & ext_bit(expect);
	f->res_bits = flags & res_mask(rev) & (uint8_t)~ext_bit(expect);
	f->rev = rev;
	const uint8_t *pd = buf + MPA_RR_HDR_LEN;
	if (enhanced) {
		uint16_t ird = xs_get_be16(pd), ord = xs_get_be16(pd + 2);

		f->ird = ird & MPA_IRDORD_MASK;
		f->ord = ord & MPA_IRDORD_MASK;
		f->p2p = ird & MPA_IRD_P2P;
		f->rtr_send = ird & MPA_IRD_RTR_SEND;
		f->rtr_write = ord & MPA_ORD_RTR_WRITE;
		f->rtr_read = ord & MPA_ORD_RTR_READ;
		pd += MPA_IRDORD_LEN;
		pd_len -= MPA_IRDORD_LEN;
	}
	f->pdata = pd_len ? pd : NULL;
	f->pdata_len = pd_len;
	*frame_len = (size_t)(pd - buf) + pd_len;
	return 0;
}
