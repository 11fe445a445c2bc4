/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* FPDU transmit: ULPDU_LENGTH | ULPDU | PAD | CRC with Markers every 512
 * stream octets (RFC 5044 sections 4 and 5).  The ULPDU is referenced, not
 * copied; the CRC is computed over exactly the wire bytes in order, one
 * update per contiguous piece. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "mpa/mpa.h"
#include "util/xs_be.h"
#include "util/xs_crc.h"

size_t mpa_mulpdu(size_t mss, bool markers)
{
	size_t over = 6 + mss % 4;
	size_t m;

	if (markers)
		over += 4 * ((mss + MPA_MARKER_INTERVAL - 1) / MPA_MARKER_INTERVAL);
	if (mss <= over)
		return 0;
	m = mss - over;
	return m > MPA_ULPDU_MAX ? MPA_ULPDU_MAX : m;
}

void mpa_tx_init(struct mpa_tx *tx, bool markers, bool crc)
{
	tx->markers = markers;
	tx->crc = crc;
	tx->pos = 0;
}

/* Octets an FPDU occupies when its marker-free content is content octets
 * and it starts at stream position pos.  A marker due exactly where the
 * FPDU ends belongs to the next one. */
static size_t wire_len_at(uint32_t pos, size_t content, bool markers)
{
	size_t total = 0;
	uint32_t p = pos;

	if (!markers)
		return content;
	while (content) {
		uint32_t in = p % MPA_MARKER_INTERVAL;
		size_t chunk;

		if (in == 0) {
			p += MPA_MARKER_LEN;
			total += MPA_MARKER_LEN;
			in = MPA_MARKER_LEN;
		}
		chunk = MPA_MARKER_INTERVAL - in;
		if (chunk > content)
			chunk = content;
		p += (uint32_t)chunk;
		total += chunk;
		content -= chunk;
	}
	return total;
}

size_t mpa_tx_wire_len(const struct mpa_tx *tx, size_t ulpdu_len)
{
	size_t content = MPA_HDR_LEN + ulpdu_len + mpa_pad_len(ulpdu_len) + MPA_CRC_LEN;

	return wire_len_at(tx->pos, content, tx->markers);
}

struct txb {
	struct mpa_txframe *f;
	uint32_t p; /* stream position of the next wire octet */
	uint32_t start, hdr; /* FPDU start, ULPDU_LENGTH position */
	uint32_t crc;
	const uint8_t *crc_pend; /* contiguous octets not yet fed to the CRC */
	size_t crc_pend_len;
	bool crc_on, markers;
	int nmk;
	int err;
};

static void txb_crc_flush(struct txb *b)
{
	if (b->crc_pend_len)
		b->crc = xs_crc32c_update(b->crc, b->crc_pend, b->crc_pend_len);
	b->crc_pend_len = 0;
}

/* One CRC update per contiguous run (each ISA-L call costs ~15 ns, as much
 * as 300 octets of data). */
static void txb_crc(struct txb *b, const uint8_t *d, size_t n)
{
	if (b->crc_pend_len && b->crc_pend + b->crc_pend_len == d) {
		b->crc_pend_len += n;
		return;
	}
	txb_crc_flush(b);
	b->crc_pend = d;
	b->crc_pend_len = n;
}

static void txb_iov(struct txb *b, const uint8_t *d, size_t n, bool crc)
{
	struct mpa_txframe *f = b->f;

	if (!n)
		return;
	if (crc && b->crc_on)
		txb_crc(b, d, n);
	b->p += (uint32_t)n;
	f->wire_len += n;
	/* Merge with the previous piece when it continues it in memory. */
	if (f->iovcnt) {
		struct iovec *last = &f->iov[f->iovcnt - 1];

		if ((const uint8_t *)last->iov_base + last->iov_len == d) {
			last->iov_len += n;
			return;
		}
	}
	if (f->iovcnt >= MPA_TX_MAX_IOV) {
		b->err = -EINVAL;
		return;
	}
	f->iov[f->iovcnt].iov_base = (void *)(uintptr_t)d;
	f->iov[f->iovcnt].iov_len = n;
	f->iovcnt++;
}

static void txb_marker_if_due(struct txb *b)
{
	uint32_t ptr;
	uint8_t *mk;

	if (!b->markers || b->p % MPA_MARKER_INTERVAL)
		return;
	if (b->nmk >= MPA_TX_MAX_MARKERS) {
		b->err = -EINVAL;
		return;
	}
	/* A marker leading the FPDU points at itself (0); any other one
	 * back to this FPDU's ULPDU_LENGTH. */
	ptr = b->p == b->start ? 0 : b->p - b->hdr;
	if (ptr > 0xffff) {
		b->err = -EMSGSIZE;
		return;
	}
	mk = b->f->markers[b->nmk++];
	xs_put_be16(mk, 0);
	xs_put_be16(mk + 2, (uint16_t)ptr);
	txb_iov(b, mk, MPA_MARKER_LEN, true);
}

/* Content octets: split at marker positions. */
static void txb_add(struct txb *b, const uint8_t *d, size_t n)
{
	while (n && !b->err) {
		size_t chunk = n;

		txb_marker_if_due(b);
		if (b->markers) {
			size_t room = MPA_MARKER_INTERVAL - b->p % MPA_MARKER_INTERVAL;

			if (chunk > room)
				chunk = room;
		}
		txb_iov(b, d, chunk, true);
		d += chunk;
		n -= chunk;
	}
}

int mpa_tx_frame(struct mpa_tx *tx, const struct iovec *ulpdu, int cnt, struct mpa_txframe *out)
{
	struct txb b;
	size_t len = 0, pad;

	if (cnt < 0 || cnt > MPA_TX_MAX_ULP_IOV || (cnt && !ulpdu))
		return -EINVAL;
	for (int i = 0; i < cnt; i++) {
		if (ulpdu[i].iov_len && !ulpdu[i].iov_base)
			return -EINVAL;
		len += ulpdu[i].iov_len;
		if (len > MPA_ULPDU_MAX)
			return -EMSGSIZE;
	}
	pad = mpa_pad_len(len);

	out->iovcnt = 0;
	out->wire_len = 0;
	memset(&b, 0, sizeof(b));
	b.f = out;
	b.p = tx->pos;
	b.start = tx->pos;
	b.markers = tx->markers;
	b.crc_on = tx->crc;
	b.crc = XS_CRC32C_INIT;
	b.hdr = b.start + (b.markers && b.start % MPA_MARKER_INTERVAL == 0 ? MPA_MARKER_LEN : 0);

	xs_put_be16(out->hdr, (uint16_t)len);
	txb_add(&b, out->hdr, MPA_HDR_LEN);
	for (int i = 0; i < cnt; i++)
		txb_add(&b, ulpdu[i].iov_base, ulpdu[i].iov_len);
	memset(out->trailer, 0, sizeof(out->trailer));
	txb_add(&b, out->trailer, pad);
	/* The CRC is 4-aligned: a marker may precede it, never split it. */
	txb_marker_if_due(&b);
	if (b.err)
		return b.err;
	txb_crc_flush(&b);
	if (b.crc_on)
		xs_put_le32(out->trailer + pad, xs_crc32c_final(b.crc));
	txb_iov(&b, out->trailer + pad, MPA_CRC_LEN, false);
	if (b.err)
		return b.err;
	tx->pos = b.p;
	return 0;
}

ssize_t mpa_tx_frame_copy(struct mpa_tx *tx, const struct iovec *ulpdu, int cnt,
			  uint8_t *out, size_t cap)
{
	struct mpa_txframe f;
	size_t len = 0, off = 0;
	int rc;

	if (cnt < 0 || cnt > MPA_TX_MAX_ULP_IOV || (cnt && !ulpdu))
		return -EINVAL;
	for (int i = 0; i < cnt; i++)
		len += ulpdu[i].iov_len;
	if (len > MPA_ULPDU_MAX)
		return -EMSGSIZE;
	if (mpa_tx_wire_len(tx, len) > cap)
		return -EMSGSIZE;
	rc = mpa_tx_frame(tx, ulpdu, cnt, &f);
	if (rc < 0)
		return rc;
	for (int i = 0; i < f.iovcnt; i++) {
		memcpy(out + off, f.iov[i].iov_base, f.iov[i].iov_len);
		off += f.iov[i].iov_len;
	}
	return (ssize_t)off;
}
