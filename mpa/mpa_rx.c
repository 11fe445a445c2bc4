/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* FPDU receive: a resumable deframer (HDR -> DATA -> PAD -> CRC) that strips
 * Markers wherever they fall, checks them and the CRC, and hands ULPDU bytes
 * out in place.  Any chunking of the input gives the same events' bytes. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "mpa/mpa.h"
#include "util/xs_be.h"
#include "util/xs_crc.h"

void mpa_rx_init(struct mpa_rx *rx, bool markers, bool crc, size_t max_ulpdu)
{
	memset(rx, 0, sizeof(*rx));
	rx->markers = markers;
	rx->crc = crc;
	rx->max_ulpdu = (max_ulpdu == 0 || max_ulpdu > MPA_ULPDU_MAX) ? MPA_ULPDU_MAX : max_ulpdu;
	mpa_rx_reset_at(rx, 0);
}

void mpa_rx_reset_at(struct mpa_rx *rx, uint32_t pos)
{
	rx->pos = pos;
	rx->state = MPA_RX_HDR;
	rx->fpdu_hdr_pos = pos;
	rx->fpdu_start_pos = pos;
	rx->ulpdu_len = 0;
	rx->done = 0;
	rx->crc_state = XS_CRC32C_INIT;
	rx->fld_len = 0;
	rx->mk_len = 0;
	rx->in_fpdu = false;
	rx->crc_pend_len = 0;
}

static int rx_fail(struct xs_err *err, uint8_t ecode)
{
	xs_err_set(err, XS_LAYER_LLP, MPA_ETYPE, ecode);
	return -EPROTO;
}

static bool marker_due(const struct mpa_rx *rx)
{
	return rx->markers && (rx->mk_len || rx->pos % MPA_MARKER_INTERVAL == 0);
}

/* Octets before the next marker position (markers on, none due now). */
static size_t to_next_marker(const struct mpa_rx *rx)
{
	if (!rx->markers)
		return SIZE_MAX;
	return MPA_MARKER_INTERVAL - rx->pos % MPA_MARKER_INTERVAL;
}

static void rx_crc_flush(struct mpa_rx *rx)
{
	if (rx->crc_pend_len)
		rx->crc_state = xs_crc32c_update(rx->crc_state, rx->crc_pend, rx->crc_pend_len);
	rx->crc_pend_len = 0;
}

/* Queue n octets for the CRC; flushed before every return from
 * mpa_rx_step (the input is the caller's only until then). */
static void rx_crc(struct mpa_rx *rx, const uint8_t *d, size_t n)
{
	if (!rx->crc || !n)
		return;
	if (rx->crc_pend_len && rx->crc_pend + rx->crc_pend_len == d) {
		rx->crc_pend_len += n;
		return;
	}
	rx_crc_flush(rx);
	rx->crc_pend = d;
	rx->crc_pend_len = n;
}

/* The first octet of an FPDU: reset the per-FPDU state. */
static void rx_begin_fpdu(struct mpa_rx *rx, bool leading_marker)
{
	rx->in_fpdu = true;
	rx->fpdu_start_pos = rx->pos;
	rx->fpdu_hdr_pos = rx->pos + (leading_marker ? MPA_MARKER_LEN : 0);
	rx->crc_state = XS_CRC32C_INIT;
}

static void rx_after_data(struct mpa_rx *rx)
{
	rx->done = 0;
	rx->state = mpa_pad_len(rx->ulpdu_len) ? MPA_RX_PAD : MPA_RX_CRC;
}

static size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

int mpa_rx_step(struct mpa_rx *rx, const uint8_t *in, size_t len, size_t *consumed,
		struct mpa_rx_event *ev, struct xs_err *err)
{
	size_t off = 0;

	memset(ev, 0, sizeof(*ev));
	while (off < len) {
		size_t avail = len - off;

		if (marker_due(rx)) {
			size_t take;

			if (!rx->mk_len && rx->state == MPA_RX_HDR && !rx->in_fpdu)
				rx_begin_fpdu(rx, true);
			take = min_sz(MPA_MARKER_LEN - rx->mk_len, avail);
			memcpy(rx->mk + rx->mk_len, in + off, take);
			rx_crc(rx, in + off, take);
			rx->mk_len = (uint8_t)(rx->mk_len + take);
			rx->pos += (uint32_t)take;
			off += take;
			if (rx->mk_len < MPA_MARKER_LEN)
				break;
			rx->mk_len = 0;

			uint32_t at = rx->pos - MPA_MARKER_LEN;
			uint32_t want = rx->fpdu_hdr_pos - at == MPA_MARKER_LEN ? 0 : at - rx->fpdu_hdr_pos;
			/* The reserved half is not checked (RFC 5044: ignore). */
			if (xs_get_be16(rx->mk + 2) != want) {
				*consumed = off;
				rx_crc_flush(rx);
				return rx_fail(err, MPA_ECODE_MARKER);
			}
			continue;
		}

		size_t room = min_sz(avail, to_next_marker(rx));
		const uint8_t *d = in + off;
		size_t n;

		switch (rx->state) {
		case MPA_RX_HDR:
			if (!rx->in_fpdu)
				rx_begin_fpdu(rx, false);
			n = min_sz(room, MPA_HDR_LEN - rx->fld_len);
			memcpy(rx->fld + rx->fld_len, d, n);
			rx_crc(rx, d, n);
			rx->fld_len = (uint8_t)(rx->fld_len + n);
			rx->pos += (uint32_t)n;
			off += n;
			if (rx->fld_len < MPA_HDR_LEN)
				break;
			rx->fld_len = 0;
			rx->ulpdu_len = xs_get_be16(rx->fld);
			if (rx->ulpdu_len > rx->max_ulpdu) {
				*consumed = off;
				rx_crc_flush(rx);
				return rx_fail(err, MPA_ECODE_MARKER);
			}
			rx->done = 0;
			if (rx->ulpdu_len)
				rx->state = MPA_RX_DATA;
			else
				rx_after_data(rx);
			break;
		case MPA_RX_DATA:
			n = min_sz(room, (size_t)rx->ulpdu_len - rx->done);
			rx_crc(rx, d, n);
			ev->type = MPA_RX_EV_DATA;
			ev->data = d;
			ev->len = n;
			ev->ulpdu_off = rx->done;
			ev->ulpdu_len = rx->ulpdu_len;
			rx->done += (uint32_t)n;
			rx->pos += (uint32_t)n;
			off += n;
			if (rx->done == rx->ulpdu_len)
				rx_after_data(rx);
			*consumed = off;
			rx_crc_flush(rx);
			return MPA_RX_EV_DATA;
		case MPA_RX_PAD:
			n = min_sz(room, mpa_pad_len(rx->ulpdu_len) - rx->done);
			rx_crc(rx, d, n);
			rx->done += (uint32_t)n;
			rx->pos += (uint32_t)n;
			off += n;
			if (rx->done == mpa_pad_len(rx->ulpdu_len)) {
				rx->done = 0;
				rx->state = MPA_RX_CRC;
			}
			break;
		case MPA_RX_CRC:
			n = min_sz(room, MPA_CRC_LEN - rx->fld_len);
			memcpy(rx->fld + rx->fld_len, d, n);
			rx->fld_len = (uint8_t)(rx->fld_len + n);
			rx->pos += (uint32_t)n;
			off += n;
			if (rx->fld_len < MPA_CRC_LEN)
				break;
			*consumed = off;
			rx_crc_flush(rx);
			if (rx->crc && xs_get_le32(rx->fld) != xs_crc32c_final(rx->crc_state))
				return rx_fail(err, MPA_ECODE_CRC);
			ev->type = MPA_RX_EV_FPDU_END;
			ev->ulpdu_len = rx->ulpdu_len;
			rx->fld_len = 0;
			rx->done = 0;
			rx->state = MPA_RX_HDR;
			rx->in_fpdu = false;
			return MPA_RX_EV_FPDU_END;
		}
	}
	*consumed = off;
	rx_crc_flush(rx);
	ev->type = MPA_RX_EV_NEED_MORE;
	return MPA_RX_EV_NEED_MORE;
}

size_t mpa_rx_data_window(const struct mpa_rx *rx)
{
	if (rx->state != MPA_RX_DATA || marker_due(rx))
		return 0;
	return min_sz((size_t)rx->ulpdu_len - rx->done, to_next_marker(rx));
}

int mpa_rx_data_absorb(struct mpa_rx *rx, const uint8_t *data, size_t n)
{
	if (n > mpa_rx_data_window(rx))
		return -EINVAL;
	if (!n)
		return 0;
	if (rx->crc)
		rx->crc_state = xs_crc32c_update(rx->crc_state, data, n);
	rx->done += (uint32_t)n;
	rx->pos += (uint32_t)n;
	if (rx->done == rx->ulpdu_len)
		rx_after_data(rx);
	return 0;
}

/* Stream octets an FPDU with ulpdu_len starting at start occupies (its
 * markers included). */
static uint32_t fpdu_wire_len(uint32_t start, uint16_t ulpdu_len)
{
	struct mpa_tx tx = { .markers = true, .crc = false, .pos = start };

	return (uint32_t)mpa_tx_wire_len(&tx, ulpdu_len);
}

int mpa_rx_resync(const uint8_t *buf, size_t len, uint32_t pos, size_t *fpdu_off,
		  struct xs_err *err)
{
	size_t o = (MPA_MARKER_INTERVAL - pos % MPA_MARKER_INTERVAL) % MPA_MARKER_INTERVAL;

	for (; o + MPA_MARKER_LEN <= len; o += MPA_MARKER_INTERVAL) {
		uint16_t d = xs_get_be16(buf + o + 2);
		uint32_t m = pos + (uint32_t)o;

		if (d == 0) {
			/* Only a marker leading its FPDU points at itself. */
			*fpdu_off = o;
			return 0;
		}
		/* ULPDU_LENGTH fields sit at multiples of 4, like markers. */
		if (d % 4)
			return rx_fail(err, MPA_ECODE_MARKER);

		uint32_t h = m - d;
		uint32_t s = (h - MPA_MARKER_LEN) % MPA_MARKER_INTERVAL == 0 ? h - MPA_MARKER_LEN : h;
		/* Offsets relative to buf; negative = before it. */
		int64_t h_off = (int64_t)o - d;
		int64_t s_off = h_off - (int64_t)(h - s);

		if (s_off >= 0) {
			*fpdu_off = (size_t)s_off;
			return 0;
		}
		/* The FPDU began before buf: its end is the next start, if we
		 * can read its ULPDU_LENGTH. */
		if (h_off < 0 || (size_t)h_off + MPA_HDR_LEN > len)
			continue;

		uint16_t ulen = xs_get_be16(buf + h_off);
		int64_t end_off = s_off + fpdu_wire_len(s, ulen);

		/* The marker must lie inside the FPDU it points into. */
		if (end_off <= (int64_t)o)
			return rx_fail(err, MPA_ECODE_MARKER);
		if (end_off < (int64_t)len) {
			*fpdu_off = (size_t)end_off;
			return 0;
		}
	}
	return -EAGAIN;
}
