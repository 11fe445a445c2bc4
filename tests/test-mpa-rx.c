/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* FPDU receive: random streams (markers x CRC) deframed under random
 * chunkings, down to one byte at a time, with and without direct placement;
 * each protocol error; resync from arbitrary stream offsets; and real siw
 * FPDUs (vector init-rev2-crc1, CRC on). */
#include "config.h"

#include <errno.h>

#include "mpa/mpa.h"
#include "tests/xs_test.h"
#include "util/xs_be.h"
#include "util/xs_crc.h"

#define POOL_LEN (1 << 17)
#define MAX_FPDUS 512

static uint8_t pool[POOL_LEN];

struct stream {
	uint8_t *buf;
	size_t len;
	size_t n;
	bool markers, crc;
	size_t ulen[MAX_FPDUS], uoff[MAX_FPDUS];
	uint32_t start[MAX_FPDUS + 1]; /* stream position of each FPDU (+ end) */
};

static size_t rand_ulen(size_t maxbig)
{
	switch (xs_rand_below(10)) {
	case 0:
		return xs_rand_below(8);
	case 1:
		return 1 + xs_rand_below(maxbig);
	default:
		return 1 + xs_rand_below(3000);
	}
}

static void make_stream_at(struct stream *s, uint32_t base, size_t n, bool markers, bool crc,
			   size_t maxbig)
{
	struct mpa_tx tx;
	size_t cap = 0;

	REQUIRE(n <= MAX_FPDUS);
	s->n = n;
	s->markers = markers;
	s->crc = crc;
	for (size_t i = 0; i < n; i++) {
		s->ulen[i] = rand_ulen(maxbig);
		s->uoff[i] = xs_rand_below(POOL_LEN - s->ulen[i] + 1);
		cap += s->ulen[i] + 8 + 4 * (s->ulen[i] / 508 + 3);
	}
	s->buf = malloc(cap);
	REQUIRE(s->buf);
	mpa_tx_init(&tx, markers, crc);
	tx.pos = base;
	s->len = 0;
	for (size_t i = 0; i < n; i++) {
		/* Several iovecs per ULPDU, as DDP would give. */
		struct iovec iov[2];
		size_t cut = xs_rand_below(s->ulen[i] + 1);

		iov[0].iov_base = pool + s->uoff[i];
		iov[0].iov_len = cut;
		iov[1].iov_base = pool + s->uoff[i] + cut;
		iov[1].iov_len = s->ulen[i] - cut;
		s->start[i] = tx.pos;
		ssize_t w = mpa_tx_frame_copy(&tx, iov, 2, s->buf + s->len, cap - s->len);
		REQUIRE(w > 0);
		s->len += (size_t)w;
	}
	s->start[n] = tx.pos;
}

static void make_stream(struct stream *s, size_t n, bool markers, bool crc, size_t maxbig)
{
	make_stream_at(s, 0, n, markers, crc, maxbig);
}

/* Checks events against the stream's ULPDUs from FPDU index k on. */
struct sink {
	const struct stream *s;
	size_t k, fill;
};

static void sink_data(struct sink *sk, const uint8_t *d, size_t n, uint32_t off, uint16_t ulen)
{
	const struct stream *s = sk->s;

	REQUIRE(sk->k < s->n);
	CHECK_EQ_U(off, sk->fill);
	CHECK_EQ_U(ulen, s->ulen[sk->k]);
	REQUIRE(sk->fill + n <= s->ulen[sk->k]);
	CHECK(memcmp(d, pool + s->uoff[sk->k] + sk->fill, n) == 0);
	sk->fill += n;
}

static void sink_end(struct sink *sk, uint16_t ulen)
{
	REQUIRE(sk->k < sk->s->n);
	CHECK_EQ_U(ulen, sk->s->ulen[sk->k]);
	CHECK_EQ_U(sk->fill, sk->s->ulen[sk->k]);
	sk->k++;
	sk->fill = 0;
}

static size_t pick_chunk(int mode, size_t left)
{
	size_t c;

	switch (mode) {
	case 0:
		c = 1;
		break;
	case 1:
		c = 1 + xs_rand_below(7);
		break;
	case 2:
		c = 1 + xs_rand_below(2000);
		break;
	default:
		c = left;
	}
	return c < left ? c : left;
}

/* Deframe buf (starting at FPDU k0) in the given chunking; placement mixes
 * in mpa_rx_data_window/absorb.  Returns the FPDUs completed. */
static size_t deframe(struct mpa_rx *rx, const struct stream *s, const uint8_t *buf, size_t len,
		      size_t k0, int mode, bool placement)
{
	struct sink sk = { .s = s, .k = k0 };
	size_t p = 0;

	while (p < len) {
		size_t win = mpa_rx_data_window(rx);

		if (placement && win && xs_rand_below(2)) {
			size_t n = 1 + xs_rand_below(win);

			if (n > len - p)
				n = len - p;
			/* "recv() into the ULP buffer": the bytes are the ULPDU's. */
			sink_data(&sk, buf + p, n, (uint32_t)sk.fill, (uint16_t)s->ulen[sk.k]);
			REQUIRE(mpa_rx_data_absorb(rx, buf + p, n) == 0);
			p += n;
			continue;
		}
		size_t chunk = pick_chunk(mode, len - p);
		const uint8_t *in = buf + p;
		size_t left = chunk;

		while (left) {
			struct mpa_rx_event ev;
			struct xs_err err = { 0 };
			size_t used = 0;
			int rc = mpa_rx_step(rx, in, left, &used, &ev, &err);

			if (rc < 0)
				fprintf(stderr, "step: rc %d err %u/%u/%u at %zu\n", rc, err.layer,
					err.etype, err.ecode, p);
			REQUIRE(rc >= 0);
			REQUIRE(used <= left);
			if (rc == MPA_RX_EV_DATA) {
				REQUIRE(ev.data >= in && ev.data + ev.len <= in + used);
				REQUIRE(ev.len > 0);
				sink_data(&sk, ev.data, ev.len, ev.ulpdu_off, ev.ulpdu_len);
			} else if (rc == MPA_RX_EV_FPDU_END) {
				sink_end(&sk, ev.ulpdu_len);
			} else {
				REQUIRE(used == left);
			}
			in += used;
			left -= used;
			p += used;
			if (rc == MPA_RX_EV_NEED_MORE)
				break;
			/* Let placement take over mid-chunk. */
			if (placement && mpa_rx_data_window(rx) && xs_rand_below(2))
				break;
		}
	}
	CHECK_EQ_U(sk.fill, 0);
	return sk.k - k0;
}

static void test_streams(void)
{
	for (int round = 0; round < 48; round++) {
		bool markers = round & 1, crc = round & 2, placement = round & 4;
		int mode = (round >> 3) % 4;
		size_t n = mode == 0 ? 40 : 150;
		size_t maxbig = mode == 0 ? 3000 : (markers ? 64000 : 65535);
		struct stream *s = malloc(sizeof(*s));
		struct mpa_rx rx;

		/* Some streams cross the 2^32 wrap of the stream position. */
		uint32_t base = round % 3 == 2 ? 0u - 4 * (uint32_t)xs_rand_below(20000) : 0;

		REQUIRE(s);
		make_stream_at(s, base, n, markers, crc, maxbig);
		mpa_rx_init(&rx, markers, crc, 0);
		mpa_rx_reset_at(&rx, base);
		CHECK_EQ_U(deframe(&rx, s, s->buf, s->len, 0, mode, placement), n);
		CHECK_EQ_U(rx.pos, s->start[n]);
		CHECK_EQ_U(rx.state, MPA_RX_HDR);
		CHECK(!rx.in_fpdu);
		free(s->buf);
		free(s);
	}
}

/* Runs a stream through mpa_rx_step whole; returns the first error. */
static int feed_err(struct mpa_rx *rx, const uint8_t *buf, size_t len, struct xs_err *err,
		    size_t *at)
{
	size_t p = 0;

	while (p < len) {
		struct mpa_rx_event ev;
		size_t used = 0;
		int rc = mpa_rx_step(rx, buf + p, len - p, &used, &ev, err);

		p += used;
		if (rc < 0) {
			*at = p;
			return rc;
		}
	}
	*at = p;
	return 0;
}

static void test_errors(void)
{
	struct stream *s = malloc(sizeof(*s));
	struct mpa_rx rx;
	struct xs_err err;
	size_t at;

	REQUIRE(s);
	/* Bad CRC: a flipped payload bit, and a flipped CRC byte. */
	make_stream(s, 20, true, true, 3000);
	for (int t = 0; t < 2; t++) {
		size_t k = 5 + xs_rand_below(10);
		size_t end = s->start[k + 1]; /* stream pos == buf offset here */
		size_t where = t ? end - 1 : end - 5 - xs_rand_below(2);

		/* Damage a byte that is not part of a marker. */
		if (where % 512 < 4)
			where = end - 1;
		s->buf[where] ^= 0x10;
		mpa_rx_init(&rx, true, true, 0);
		err = (struct xs_err){ 0 };
		CHECK_EQ_U(feed_err(&rx, s->buf, s->len, &err, &at), (unsigned long long)-EPROTO);
		CHECK_EQ_U(err.layer, XS_LAYER_LLP);
		CHECK_EQ_U(err.etype, 0);
		CHECK_EQ_U(err.ecode, 0x02);
		CHECK_EQ_U(at, end); /* detected at that FPDU's CRC, nothing beyond read */
		s->buf[where] ^= 0x10;
		/* With CRC off the same damage is ignored in the CRC field. */
		if (t) {
			mpa_rx_init(&rx, true, false, 0);
			s->buf[where] ^= 0x10;
			CHECK_EQ_U(feed_err(&rx, s->buf, s->len, &err, &at), 0);
			s->buf[where] ^= 0x10;
		}
	}
	/* A marker with a wrong FPDUPTR. */
	size_t m = 512 * (1 + xs_rand_below(s->len / 512 - 1));
	uint16_t ptr = xs_get_be16(s->buf + m + 2);
	xs_put_be16(s->buf + m + 2, (uint16_t)(ptr + 4));
	mpa_rx_init(&rx, true, true, 0);
	CHECK_EQ_U(feed_err(&rx, s->buf, s->len, &err, &at), (unsigned long long)-EPROTO);
	CHECK_EQ_U(err.layer, XS_LAYER_LLP);
	CHECK_EQ_U(err.etype, 0);
	CHECK_EQ_U(err.ecode, 0x03);
	CHECK_EQ_U(at, m + 4);
	xs_put_be16(s->buf + m + 2, ptr);
	/* Leading marker (position 0) must say 0. */
	s->buf[3] = 4;
	mpa_rx_init(&rx, true, true, 0);
	CHECK_EQ_U(feed_err(&rx, s->buf, s->len, &err, &at), (unsigned long long)-EPROTO);
	CHECK_EQ_U(err.ecode, 0x03);
	CHECK_EQ_U(at, 4);
	s->buf[3] = 0;
	mpa_rx_init(&rx, true, true, 0);
	CHECK_EQ_U(feed_err(&rx, s->buf, s->len, &err, &at), 0);
	free(s->buf);

	/* ULPDU_LENGTH above max_ulpdu: refused right after the length field. */
	uint8_t f[64];
	struct mpa_tx tx;
	struct iovec iov = { pool, 40 };
	mpa_tx_init(&tx, false, true);
	REQUIRE(mpa_tx_frame_copy(&tx, &iov, 1, f, sizeof(f)) == 48);
	mpa_rx_init(&rx, false, true, 39);
	CHECK_EQ_U(feed_err(&rx, f, 48, &err, &at), (unsigned long long)-EPROTO);
	CHECK_EQ_U(err.layer, XS_LAYER_LLP);
	CHECK_EQ_U(err.ecode, 0x03);
	CHECK_EQ_U(at, 2);
	mpa_rx_init(&rx, false, true, 40);
	CHECK_EQ_U(feed_err(&rx, f, 48, &err, &at), 0);

	/* Direct placement refuses more than the window. */
	mpa_rx_init(&rx, false, true, 0);
	CHECK_EQ_U(mpa_rx_data_window(&rx), 0);
	struct mpa_rx_event ev;
	size_t used;
	CHECK_EQ_U(mpa_rx_step(&rx, f, 2, &used, &ev, &err), MPA_RX_EV_NEED_MORE);
	CHECK_EQ_U(mpa_rx_data_window(&rx), 40);
	CHECK_EQ_U(mpa_rx_data_absorb(&rx, f + 2, 41), (unsigned long long)-EINVAL);
	CHECK_EQ_U(mpa_rx_data_absorb(&rx, f + 2, 40), 0);
	CHECK_EQ_U(mpa_rx_data_window(&rx), 0);
	CHECK_EQ_U(mpa_rx_step(&rx, f + 42, 6, &used, &ev, &err), MPA_RX_EV_FPDU_END);
	CHECK_EQ_U(used, 6);
	free(s);
}

/* Oracle: does [o, o+len) hold a marker that reveals an FPDU start inside
 * it (its own FPDU's start, or the next one when the header is visible)? */
static bool revealed(const struct stream *s, size_t o, size_t len)
{
	for (size_t m = (o + 511) / 512 * 512; m + 4 <= o + len; m += 512) {
		size_t k = 0;

		while (k + 1 < s->n && s->start[k + 1] <= m)
			k++;
		size_t st = s->start[k], hdr = st % 512 == 0 ? st + 4 : st;
		if (st >= o)
			return true;
		if (hdr >= o && hdr + 2 <= o + len && s->start[k + 1] < o + len)
			return true;
	}
	return false;
}

static void test_resync(void)
{
	struct stream *s = malloc(sizeof(*s));
	int found = 0, again = 0;

	REQUIRE(s);
	make_stream(s, 300, true, true, 3000);
	for (int t = 0; t < 1500; t++) {
		size_t o = xs_rand_below(s->len);
		size_t len = s->len - o;
		struct xs_err err;
		size_t off = 0;

		/* Sometimes only a window of the stream. */
		if (xs_rand_below(2)) {
			size_t w = 1 + xs_rand_below(3000);
			if (w < len)
				len = w;
		}
		int rc = mpa_rx_resync(s->buf + o, len, (uint32_t)o, &off, &err);

		if (rc == -EAGAIN) {
			CHECK(!revealed(s, o, len));
			again++;
			continue;
		}
		REQUIRE(rc == 0);
		REQUIRE(off < len);
		found++;
		/* A real FPDU start. */
		size_t k = 0;
		while (k < s->n && s->start[k] < o + off)
			k++;
		REQUIRE(k < s->n && s->start[k] == o + off);
		/* And the first one a marker can reveal: no FPDU starts in
		 * [o, o+off) that holds a marker at its start. */
		for (size_t j = 0; j < k; j++)
			if (s->start[j] >= o && s->start[j] % 512 == 0)
				CHECK(s->start[j] >= o + off);
		/* Deframing from there gives the remaining ULPDUs. */
		struct mpa_rx rx;
		mpa_rx_init(&rx, true, true, 0);
		mpa_rx_reset_at(&rx, (uint32_t)(o + off));
		size_t rest = s->len - o - off;
		CHECK_EQ_U(deframe(&rx, s, s->buf + o + off, rest, k, (int)xs_rand_below(4) + 1,
				   xs_rand_below(2)),
			   s->n - k);
	}
	printf("resync: %d found, %d need more\n", found, again);
	CHECK(found > 1000);

	/* No marker in the bytes: -EAGAIN. */
	struct xs_err err;
	size_t off;
	CHECK_EQ_U(mpa_rx_resync(s->buf + 4, 500, 4, &off, &err), (unsigned long long)-EAGAIN);
	/* A marker pointing at a non-multiple of 4. */
	uint8_t bad[16] = { 0, 0, 0, 6 };
	CHECK_EQ_U(mpa_rx_resync(bad, sizeof(bad), 1024, &off, &err), (unsigned long long)-EPROTO);
	CHECK_EQ_U(err.layer, XS_LAYER_LLP);
	CHECK_EQ_U(err.ecode, 0x03);
	/* A marker pointing at an FPDU that ended before it. */
	/* buf starts at stream 514; FPDU at 512 (leading marker), ULPDU_LENGTH 2
	 * at 516 (buf 2), so it ends at 524; the marker at 1024 (buf 510) claims
	 * its header is at 1024 - 508 = 516. */
	uint8_t bad2[600] = { 0 };
	xs_put_be16(bad2 + 2, 2);
	xs_put_be16(bad2 + 510 + 2, 508);
	CHECK_EQ_U(mpa_rx_resync(bad2, sizeof(bad2), 514, &off, &err), (unsigned long long)-EPROTO);
	CHECK_EQ_U(err.ecode, 0x03);
	free(s->buf);

	/* Across the 2^32 wrap of stream positions. */
	uint32_t base = 0u - 8192;
	make_stream_at(s, base, 60, true, false, 3000);
	for (int t = 0; t < 300; t++) {
		size_t o = xs_rand_below(s->len);
		int rc = mpa_rx_resync(s->buf + o, s->len - o, base + (uint32_t)o, &off, &err);

		if (rc == -EAGAIN)
			continue;
		REQUIRE(rc == 0);
		bool hit = false;
		for (size_t k = 0; k < s->n; k++)
			hit |= s->start[k] == base + (uint32_t)(o + off);
		CHECK(hit);
	}
	free(s->buf);
	free(s);
}

/* siw's FPDUs from vector init-rev2-crc1 (CRC on, no markers), in order. */
static const char *siw_fpdus =
	"00 22 41 43 00 00 00 00 00 00 00 00 00 00 00 01"
	"00 00 00 00 00 00 55 87 ce 6d 93 70 e0 03 ac 00"
	"00 00 00 40 43 fd ef d7"
	"00 4e c1 42 0a 0b 0c 0d 00 00 00 00 00 01 00 00"
	"72 64 6d 61 2d 70 69 6e 67 2d 30 3a 20 41 42 43"
	"44 45 46 47 48 49 4a 4b 4c 4d 4e 4f 50 51 52 53"
	"54 55 56 57 58 59 5a 5b 5c 5d 5e 5f 60 61 62 63"
	"64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 71 72 00"
	"48 80 b2 72"
	"00 22 41 43 00 00 00 00 00 00 00 00 00 00 00 02"
	"00 00 00 00 00 00 55 87 ce 6d 95 50 e1 92 60 00"
	"00 00 00 40 1e ce 3e 12";

static void test_siw(void)
{
	uint8_t buf[256], got[256];
	size_t len = xs_hex(siw_fpdus, buf, sizeof(buf));
	static const size_t ulen[3] = { 34, 78, 34 };
	static const size_t uoff[3] = { 2, 40 + 2, 40 + 84 + 2 };

	REQUIRE(len == 40 + 84 + 40);
	for (int mode = 0; mode < 4; mode++) {
		struct mpa_rx rx;
		size_t p = 0, k = 0, fill = 0;

		mpa_rx_init(&rx, false, true, 1454);
		while (p < len) {
			struct mpa_rx_event ev;
			struct xs_err err;
			size_t used, chunk = pick_chunk(mode, len - p);
			int rc = mpa_rx_step(&rx, buf + p, chunk, &used, &ev, &err);

			REQUIRE(rc >= 0);
			p += used;
			if (rc == MPA_RX_EV_DATA) {
				REQUIRE(fill + ev.len <= sizeof(got));
				CHECK_EQ_U(ev.ulpdu_off, fill);
				memcpy(got + fill, ev.data, ev.len);
				fill += ev.len;
			} else if (rc == MPA_RX_EV_FPDU_END) {
				REQUIRE(k < 3);
				CHECK_EQ_U(ev.ulpdu_len, ulen[k]);
				CHECK_EQ_U(fill, ulen[k]);
				CHECK(memcmp(got, buf + uoff[k], ulen[k]) == 0);
				k++;
				fill = 0;
			}
		}
		CHECK_EQ_U(k, 3);
	}
	/* "rdma-ping-0: " is in the Read Response's ULPDU. */
	CHECK(memcmp(buf + uoff[1] + 14, "rdma-ping-0: ", 13) == 0);

	/* One flipped byte anywhere: CRC error in that FPDU. */
	for (size_t i = 0; i < len; i++) {
		struct mpa_rx rx;
		struct xs_err err = { 0 };
		size_t at;

		buf[i] ^= 0x01;
		mpa_rx_init(&rx, false, true, 0);
		int rc = feed_err(&rx, buf, len, &err, &at);
		/* A flip in a length field may announce more than there
		 * is: still waiting.  Everything else is a CRC error. */
		if (rc == 0 && (i == 0 || i == 1 || i == 40 || i == 41 || i == 124 || i == 125)) {
			CHECK(rx.in_fpdu);
		} else {
			CHECK_EQ_U(rc, (unsigned long long)-EPROTO);
			CHECK_EQ_U(err.ecode, 0x02);
		}
		buf[i] ^= 0x01;
	}
}

int main(void)
{
	xs_test_seed(5044);
	xs_rand_fill(pool, sizeof(pool));
	test_streams();
	test_errors();
	test_resync();
	test_siw();
	return xs_test_result();
}
