/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Fuzz the FPDU deframer (mpa/mpa_rx.c) and marker resync.
 *
 * Input: 8 config octets, then the stream.
 *   c[0] bit 0 Markers, bit 1 CRC, bits 2-3 chunking (whole input / one
 *        octet at a time for 256 octets, then 61 / sizes from c[6..7] / sizes
 *        from the stream itself), bit 4 direct placement
 *        (mpa_rx_data_window + mpa_rx_data_absorb), bit 5 odd start
 *   c[1..2] max_ulpdu (0 = 65535)
 *   c[3..5] start stream position (c[3..4] times 4, c[5] the high octet)
 *   c[6..7] chunk-size pattern
 * The stream goes through mpa_rx_step in that chunking.  Checked: every DATA
 * event lies inside the octets that call consumed, offsets run contiguously
 * within the announced ULPDU_LENGTH (<= max_ulpdu), each FPDU_END follows a
 * complete ULPDU, errors carry an LLP/0/{0x02,0x03} triple, every call makes
 * progress.  Differential: each complete FPDU is framed again with
 * mpa_tx_frame at the same stream position; it must have the same wire
 * length and the same octets (except pad octets and the reserved halves of
 * Markers, which the receiver ignores, and then the CRC).  Finally
 * mpa_rx_resync runs on the stream and deframing restarts where it says. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "mpa/mpa.h"
#include "tests/fuzz/fuzz.h"

struct cfg {
	bool markers, crc, direct;
	unsigned chunking;
	size_t max_ulpdu;
	uint8_t pat[2];
};

struct run {
	const struct cfg *c;
	const uint8_t *buf;
	size_t len;
	uint32_t start_pos;
	struct mpa_rx rx;
	uint8_t *ulpdu; /* the current ULPDU's octets as delivered (cap len) */
	uint32_t next_off; /* next ULPDU offset expected */
	int cur_len; /* ULPDU_LENGTH of the FPDU in progress, -1 none yet */
	size_t fpdu_start; /* input offset of the FPDU in progress */
	unsigned fpdus;
	struct mpa_txframe *frame; /* scratch for reframe_check */
};

/* The FPDU at input [r->fpdu_start, end) carried r->ulpdu: frame it again. */
static void reframe_check(struct run *r, size_t end, uint16_t ulen)
{
	struct mpa_tx tx;
	struct mpa_txframe *f = r->frame;
	struct iovec v = { r->ulpdu, ulen };

	mpa_tx_init(&tx, r->c->markers, r->c->crc);
	tx.pos = r->start_pos + (uint32_t)r->fpdu_start;
	size_t wl = mpa_tx_wire_len(&tx, ulen);
	FUZZ_ASSERT(mpa_tx_frame(&tx, &v, 1, f) == 0);
	FUZZ_ASSERT(f->wire_len == wl);
	FUZZ_ASSERT(wl == end - r->fpdu_start);
	FUZZ_ASSERT(tx.pos == r->start_pos + (uint32_t)end);

	const uint8_t *in = r->buf + r->fpdu_start;
	const uint8_t *mk = &f->markers[0][0];
	size_t pad = mpa_pad_len(ulen), k = 0;
	bool ignored_differ = false;

	for (int i = 0; i < f->iovcnt; i++) {
		const uint8_t *p = f->iov[i].iov_base;

		for (size_t j = 0; j < f->iov[i].iov_len; j++, k++) {
			const uint8_t *a = p + j;

			FUZZ_ASSERT(k < wl);
			if (a >= mk && a < mk + sizeof(f->markers)) {
				/* Marker: reserved half ignored, FPDUPTR exact */
				if ((size_t)(a - mk) % MPA_MARKER_LEN < 2)
					ignored_differ |= *a != in[k];
				else
					FUZZ_ASSERT(*a == in[k]);
			} else if (a >= f->trailer && a < f->trailer + sizeof(f->trailer)) {
				if ((size_t)(a - f->trailer) < pad)
					ignored_differ |= *a != in[k];
				else if (r->c->crc && !ignored_differ)
					FUZZ_ASSERT(*a == in[k]);
			} else {
				/* ULPDU_LENGTH and ULPDU octets */
				FUZZ_ASSERT(*a == in[k]);
			}
		}
	}
	FUZZ_ASSERT(k == wl);
}

static size_t next_chunk(const struct cfg *c, const uint8_t *p, size_t left, unsigned i)
{
	size_t n;

	switch (c->chunking) {
	case 0:
		n = left;
		break;
	case 1:
		/* one octet at a time through the first FPDUs' headers and
		 * Markers, then faster (a per-octet walk of kilobytes costs
		 * executions and finds nothing new) */
		n = i < 256 ? 1 : 61;
		break;
	case 2:
		n = (size_t)c->pat[i & 1] + 1;
		break;
	default:
		n = (size_t)(p[0] & 0x3f) + 1;
		break;
	}
	return n < left ? n : left;
}

static void on_data(struct run *r, const uint8_t *data, size_t n, uint32_t off, uint16_t ulen)
{
	FUZZ_ASSERT(ulen > 0 && ulen <= r->c->max_ulpdu);
	if (r->cur_len < 0)
		r->cur_len = ulen;
	FUZZ_ASSERT(r->cur_len == ulen);
	FUZZ_ASSERT(off == r->next_off);
	FUZZ_ASSERT(n > 0 && (size_t)off + n <= ulen);
	/* a ULPDU that arrived has at most the input's size */
	FUZZ_ASSERT((size_t)off + n <= r->len);
	memcpy(r->ulpdu + off, data, n);
	r->next_off = off + (uint32_t)n;
}

/* Deframe r->buf from r->start_pos, checking every event. */
static void deframe(struct run *r)
{
	const struct cfg *c = r->c;
	size_t pos = 0;
	unsigned ci = 0;

	mpa_rx_init(&r->rx, c->markers, c->crc, c->max_ulpdu);
	mpa_rx_reset_at(&r->rx, r->start_pos);
	r->next_off = 0;
	r->cur_len = -1;
	r->fpdu_start = 0;
	r->fpdus = 0;

	while (pos < r->len) {
		size_t n = next_chunk(c, r->buf + pos, r->len - pos, ci++);
		const uint8_t *in = r->buf + pos;

		while (n > 0) {
			if (c->direct) {
				size_t w = mpa_rx_data_window(&r->rx);

				if (w > 0) {
					uint32_t off = r->rx.done;
					uint16_t ulen = r->rx.ulpdu_len;
					size_t take = w < n ? w : n;

					FUZZ_ASSERT(mpa_rx_data_absorb(&r->rx, in, w + 1) == -EINVAL);
					on_data(r, in, take, off, ulen);
					FUZZ_ASSERT(mpa_rx_data_absorb(&r->rx, in, take) == 0);
					in += take;
					n -= take;
					pos += take;
					continue;
				}
			}

			struct mpa_rx_event ev;
			struct xs_err err = { 0xff, 0xff, 0xff };
			size_t used = (size_t)-1;
			int rc = mpa_rx_step(&r->rx, in, n, &used, &ev, &err);

			if (rc < 0) {
				FUZZ_ASSERT(rc == -EPROTO);
				FUZZ_ASSERT(err.layer == XS_LAYER_LLP && err.etype == MPA_ETYPE);
				FUZZ_ASSERT(err.ecode == MPA_ECODE_CRC || err.ecode == MPA_ECODE_MARKER);
				FUZZ_ASSERT(c->crc || err.ecode != MPA_ECODE_CRC);
				FUZZ_ASSERT(used <= n);
				return;
			}
			FUZZ_ASSERT(used > 0 && used <= n);
			if (rc == MPA_RX_EV_DATA) {
				FUZZ_ASSERT(ev.data >= in && ev.data + ev.len <= in + used);
				on_data(r, ev.data, ev.len, ev.ulpdu_off, ev.ulpdu_len);
			} else if (rc == MPA_RX_EV_FPDU_END) {
				size_t end = pos + used;
				uint16_t ulen = ev.ulpdu_len;

				FUZZ_ASSERT(r->cur_len < 0 ? ulen == 0 : r->cur_len == ulen);
				FUZZ_ASSERT(r->next_off == ulen);
				FUZZ_ASSERT(ulen <= c->max_ulpdu);
				reframe_check(r, end, ulen);
				r->fpdus++;
				r->fpdu_start = end;
				r->next_off = 0;
				r->cur_len = -1;
			} else {
				FUZZ_ASSERT(rc == MPA_RX_EV_NEED_MORE && used == n);
			}
			in += used;
			n -= used;
			pos += used;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 8)
		return 0;
	struct cfg c = {
		.markers = data[0] & 1,
		.crc = data[0] & 2,
		.chunking = (data[0] >> 2) & 3,
		.direct = data[0] & 0x10,
		.pat = { data[6], data[7] },
	};
	size_t mu = (size_t)data[1] << 8 | data[2];

	c.max_ulpdu = mu ? mu : MPA_ULPDU_MAX;
	/* positions near 0 (where FPDUs start) are the interesting ones, but
	 * let the high part reach the 2^32 wrap */
	uint32_t start = ((uint32_t)data[3] << 8 | data[4]) * 4u + ((uint32_t)data[5] << 24);
	if (data[0] & 0x20)
		start += data[5] & 3; /* not 4-aligned: legal for a stream */

	/* The ULPDU copy and the reframing scratch are allocated once: a fresh
	 * frame (markers for a whole ULPDU) and a fresh ULPDU buffer per input
	 * cost page faults and ASan fills, a fifth of the run time.  The
	 * stream itself stays an exact-size heap block for ASan. */
	static uint8_t ulpdu[MPA_ULPDU_MAX];
	static struct mpa_txframe frame;
	struct run r = { .c = &c, .len = size - 8, .start_pos = start, .ulpdu = ulpdu,
			 .frame = &frame };
	uint8_t *buf = malloc(r.len ? r.len : 1);
	FUZZ_ASSERT(buf);
	memcpy(buf, data + 8, r.len);
	r.buf = buf;
	deframe(&r);

	/* Resync on the same octets, as if they started mid-stream there. */
	size_t off = (size_t)-1;
	struct xs_err err = { 0xff, 0xff, 0xff };
	int rc = mpa_rx_resync(buf, r.len, start, &off, &err);

	FUZZ_ASSERT(rc == 0 || rc == -EAGAIN || rc == -EPROTO);
	if (rc == -EPROTO)
		FUZZ_ASSERT(err.layer == XS_LAYER_LLP && err.etype == MPA_ETYPE &&
			    err.ecode == MPA_ECODE_MARKER);
	if (rc == 0) {
		FUZZ_ASSERT(off < r.len);
		struct cfg c2 = c;
		c2.markers = true;
		struct run r2 = { .c = &c2, .buf = buf + off, .len = r.len - off,
				  .start_pos = start + (uint32_t)off, .ulpdu = r.ulpdu,
				  .frame = r.frame };
		deframe(&r2);
	}
	free(buf);
	return 0;
}
