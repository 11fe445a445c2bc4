/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* RDMAP Terminate body (RFC 5040 4.8), in the RFC layout and in the
 * nibble-swapped layout Linux siw actually sends.
 *
 * Layout decision (the RFC marks every optional field "if any"):
 *
 *   Terminate Control (32)
 *   DDP Segment Length (16)        present iff D
 *   Terminated DDP Header (14|18)  present iff D; length from its own T bit
 *   Terminated RDMA Header (28)    present iff R (a Read Request header)
 *
 * - The DDP Segment Length travels with the DDP header: it stands where the
 *   MPA ULPDU_LENGTH stood in front of the offending header, which is how
 *   siw builds it and how tshark (packet-iwarp-ddp-rdmap.c) parses it
 *   (length field only under D).  M says whether its value is meaningful;
 *   D=1, M=0 carries the field as zero.  M without D has nowhere to put the
 *   value: encode refuses it (-EINVAL), decode ignores M there.
 * - R without D is accepted (the RDMA header then follows the control word
 *   directly, as tshark reads it), although RFC 5040 only expects R with D
 *   for Read Request errors.  Encode does not police which errors carry R.
 * - The terminated DDP header's length is taken from its T bit.  tshark 4.0
 *   picks 14 octets when the low nibble of byte 0 (EType) is 1 and 18
 *   otherwise; the two agree for DDP-layer errors and for RDMAP errors on
 *   tagged segments, and differ only for RDMAP Remote Protection errors
 *   (EType 1) that quote an untagged header (Read Request), where tshark
 *   misplaces the following fields.  The header itself is right.
 * - Nothing may follow the last present field: a body whose length is not
 *   exactly what the flags announce is -EPROTO (a Terminate is one whole
 *   DDP message, so extra octets mean a different layout).
 * - Reserved bits (13) are sent as zero and ignored on receive; in the RFC
 *   reading, siw's flags land there. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "iwarp/rdmap.h"
#include "util/xs_be.h"

/* siw (struct iwarp_terminate bitfields on little-endian) */
#define SIW_TERM_FLAG_M 0x01
#define SIW_TERM_FLAG_D 0x02
#define SIW_TERM_FLAG_R 0x04

ssize_t rdmap_term_encode(const struct rdmap_term *t, uint8_t *buf, size_t cap)
{
	size_t len = RDMAP_TERM_CTRL_LEN;

	if (t->cause.layer > 0xf || t->cause.etype > 0xf)
		return -EINVAL;
	if (t->m && !t->d)
		return -EINVAL;
	if (t->d) {
		if (t->ddp_hdr_len != ddp_hdr_len_from_byte(t->ddp_hdr[0]))
			return -EINVAL;
		len += RDMAP_TERM_SEGLEN_LEN + t->ddp_hdr_len;
	}
	if (t->r) {
		if (t->rdmap_hdr_len != RDMAP_READ_REQ_LEN)
			return -EINVAL;
		len += RDMAP_READ_REQ_LEN;
	}
	if (len > cap)
		return -EMSGSIZE;

	buf[0] = (uint8_t)(t->cause.layer << 4 | t->cause.etype);
	buf[1] = t->cause.ecode;
	buf[2] = (uint8_t)((t->m ? RDMAP_TERM_FLAG_M : 0) | (t->d ? RDMAP_TERM_FLAG_D : 0) |
			   (t->r ? RDMAP_TERM_FLAG_R : 0));
	buf[3] = 0;

	size_t off = RDMAP_TERM_CTRL_LEN;
	if (t->d) {
		xs_put_be16(buf + off, t->m ? t->ddp_seg_len : 0);
		off += RDMAP_TERM_SEGLEN_LEN;
		memcpy(buf + off, t->ddp_hdr, t->ddp_hdr_len);
		off += t->ddp_hdr_len;
	}
	if (t->r) {
		memcpy(buf + off, t->rdmap_hdr, RDMAP_READ_REQ_LEN);
		off += RDMAP_READ_REQ_LEN;
	}
	return (ssize_t)off;
}

/* Optional fields after an already decoded control word (same in both
 * layouts). */
static int term_decode_rest(const uint8_t *buf, size_t len, struct rdmap_term *t,
			    struct xs_err *err)
{
	size_t off = RDMAP_TERM_CTRL_LEN;

	if (t->d) {
		/* need the segment length and the first header octet (T bit) */
		if (len < off + RDMAP_TERM_SEGLEN_LEN + 1)
			goto bad;
		t->ddp_seg_len = xs_get_be16(buf + off);
		off += RDMAP_TERM_SEGLEN_LEN;
		size_t hl = ddp_hdr_len_from_byte(buf[off]);
		if (len < off + hl)
			goto bad;
		memcpy(t->ddp_hdr, buf + off, hl);
		t->ddp_hdr_len = (uint8_t)hl;
		off += hl;
	}
	if (t->r) {
		if (len < off + RDMAP_READ_REQ_LEN)
			goto bad;
		memcpy(t->rdmap_hdr, buf + off, RDMAP_READ_REQ_LEN);
		t->rdmap_hdr_len = RDMAP_READ_REQ_LEN;
		off += RDMAP_READ_REQ_LEN;
	}
	if (off != len)
		goto bad;
	return 0;
bad:
	/* A malformed Terminate has no code of its own. */
	xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNSPECIFIED);
	return -EPROTO;
}

int rdmap_term_decode(const uint8_t *buf, size_t len, struct rdmap_term *t, struct xs_err *err)
{
	memset(t, 0, sizeof(*t));
	if (len < RDMAP_TERM_CTRL_LEN) {
		xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNSPECIFIED);
		return -EPROTO;
	}
	t->cause.layer = buf[0] >> 4;
	t->cause.etype = buf[0] & 0x0f;
	t->cause.ecode = buf[1];
	t->d = buf[2] & RDMAP_TERM_FLAG_D;
	t->r = buf[2] & RDMAP_TERM_FLAG_R;
	t->m = t->d && (buf[2] & RDMAP_TERM_FLAG_M);
	return term_decode_rest(buf, len, t, err);
}

int rdmap_term_decode_siw(const uint8_t *buf, size_t len, struct rdmap_term *t,
			  struct xs_err *err)
{
	memset(t, 0, sizeof(*t));
	if (len < RDMAP_TERM_CTRL_LEN) {
		xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNSPECIFIED);
		return -EPROTO;
	}
	t->cause.layer = buf[0] & 0x0f;
	t->cause.etype = buf[0] >> 4;
	t->cause.ecode = buf[1];
	t->d = buf[2] & SIW_TERM_FLAG_D;
	t->r = buf[2] & SIW_TERM_FLAG_R;
	t->m = t->d && (buf[2] & SIW_TERM_FLAG_M);
	return term_decode_rest(buf, len, t, err);
}
