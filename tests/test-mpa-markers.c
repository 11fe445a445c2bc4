/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* FPDU transmit framing against a byte-by-byte reference model: Markers at
 * every stream position p % 512 == 0, FPDUPTR values, pad, CRC (over the wire
 * bytes, Markers included, sent little-endian), for FPDUs starting at many
 * stream offsets; MULPDU values and that a MULPDU-sized FPDU fits the MSS. */
#include "config.h"

#include <errno.h>
#include <time.h>

#include "mpa/mpa.h"
#include "tests/xs_test.h"
#include "util/xs_be.h"
#include "util/xs_crc.h"

/* Reference: emit the FPDU one octet at a time, inserting a Marker before
 * any octet that would sit at a multiple of 512. */
struct ref {
	uint8_t *out;
	size_t w;
	uint32_t p, start, hdr;
	bool markers;
};

static void ref_marker_if_due(struct ref *r)
{
	if (!r->markers || r->p % 512 != 0)
		return;
	uint32_t ptr = r->p == r->start ? 0 : r->p - r->hdr;
	r->out[r->w++] = 0;
	r->out[r->w++] = 0;
	r->out[r->w++] = (uint8_t)(ptr >> 8);
	r->out[r->w++] = (uint8_t)ptr;
	r->p += 4;
}

static void ref_byte(struct ref *r, uint8_t b)
{
	ref_marker_if_due(r);
	r->out[r->w++] = b;
	r->p++;
}

static size_t ref_frame(uint32_t pos, const uint8_t *u, size_t len, bool markers, bool crc,
			uint8_t *out)
{
	struct ref r = { .out = out, .p = pos, .start = pos, .markers = markers };

	r.hdr = markers && pos % 512 == 0 ? pos + 4 : pos;
	ref_byte(&r, (uint8_t)(len >> 8));
	ref_byte(&r, (uint8_t)len);
	for (size_t i = 0; i < len; i++)
		ref_byte(&r, u[i]);
	/* pad: ULPDU_LENGTH + ULPDU + pad is a multiple of 4 */
	for (size_t i = 0; i < (4 - (2 + len) % 4) % 4; i++)
		ref_byte(&r, 0);
	ref_marker_if_due(&r);
	uint32_t c = crc ? xs_crc32c(out, r.w) : 0;
	for (int i = 0; i < 4; i++)
		ref_byte(&r, (uint8_t)(c >> (8 * i)));
	return r.w;
}

static uint8_t ulp[70000];
static uint8_t wire[72000], refw[72000];

/* Frame through mpa_tx_frame with the ULPDU cut into random iovecs, then
 * flatten; also through mpa_tx_frame_copy. */
static void check_one(uint32_t pos, size_t len, bool markers, bool crc)
{
	struct mpa_tx tx;
	struct mpa_txframe *f = malloc(sizeof(*f));
	struct iovec iov[MPA_TX_MAX_ULP_IOV];
	int cnt = (int)xs_rand_below(MPA_TX_MAX_ULP_IOV + 1);
	size_t off = 0;

	REQUIRE(f);
	if (len && !cnt)
		cnt = 1;
	for (int i = 0; i < cnt; i++) {
		size_t n = i == cnt - 1 ? len - off : xs_rand_below(len - off + 1);
		iov[i].iov_base = ulp + off;
		iov[i].iov_len = n;
		off += n;
	}

	size_t rn = ref_frame(pos, ulp, len, markers, crc, refw);

	mpa_tx_init(&tx, markers, crc);
	tx.pos = pos;
	CHECK_EQ_U(mpa_tx_wire_len(&tx, len), rn);
	REQUIRE(mpa_tx_frame(&tx, iov, cnt, f) == 0);
	CHECK_EQ_U(f->wire_len, rn);
	CHECK_EQ_U(tx.pos, pos + (uint32_t)rn);
	REQUIRE(f->iovcnt <= MPA_TX_MAX_IOV);
	size_t w = 0;
	for (int i = 0; i < f->iovcnt; i++) {
		REQUIRE(w + f->iov[i].iov_len <= sizeof(wire));
		memcpy(wire + w, f->iov[i].iov_base, f->iov[i].iov_len);
		w += f->iov[i].iov_len;
	}
	CHECK_EQ_U(w, rn);
	if (w != rn || memcmp(wire, refw, rn) != 0) {
		fprintf(stderr, "mismatch pos %u len %zu markers %d crc %d\n", pos, len, markers, crc);
		xs_test_failures++;
	}
	/* The CRC is over every wire octet before it, little-endian. */
	if (crc)
		CHECK_EQ_U(xs_get_le32(wire + rn - 4), xs_crc32c(wire, rn - 4));
	else
		CHECK_EQ_U(xs_get_le32(wire + rn - 4), 0);

	mpa_tx_init(&tx, markers, crc);
	tx.pos = pos;
	CHECK_EQ_U(mpa_tx_frame_copy(&tx, iov, cnt, wire, rn - 1), (unsigned long long)-EMSGSIZE);
	CHECK_EQ_U(tx.pos, pos);
	memset(wire, 0xee, rn);
	CHECK_EQ_U(mpa_tx_frame_copy(&tx, iov, cnt, wire, rn), rn);
	CHECK(memcmp(wire, refw, rn) == 0);
	free(f);
}

/* Hand-checked layouts (independent of the reference model). */
static void test_layouts(void)
{
	struct mpa_tx tx;
	struct iovec iov = { ulp, 0 };
	uint8_t *w = wire;
	ssize_t n;

	for (size_t i = 0; i < sizeof(ulp); i++)
		ulp[i] = (uint8_t)(i * 7 + 1);

	/* First FPDU: a Marker with FPDUPTR 0 leads it, then ULPDU_LENGTH. */
	mpa_tx_init(&tx, true, true);
	iov.iov_len = 16;
	n = mpa_tx_frame_copy(&tx, &iov, 1, w, sizeof(wire));
	CHECK_EQ_U(n, 4 + 2 + 16 + 2 + 4);
	CHECK_EQ_U(xs_get_be32(w), 0);
	CHECK_EQ_U(xs_get_be16(w + 4), 16);
	CHECK_EQ_U(w[22], 0);
	CHECK_EQ_U(w[23], 0);
	CHECK_EQ_U(xs_get_le32(w + 24), xs_crc32c(w, 24));

	/* A Marker between pad and CRC: marker, hdr at 4, 505 + 1 pad to 512. */
	mpa_tx_init(&tx, true, true);
	iov.iov_len = 505;
	n = mpa_tx_frame_copy(&tx, &iov, 1, w, sizeof(wire));
	CHECK_EQ_U(n, 520);
	CHECK_EQ_U(w[511], 0); /* pad */
	CHECK_EQ_U(xs_get_be16(w + 512), 0);
	CHECK_EQ_U(xs_get_be16(w + 514), 508); /* 512 - 4 */
	CHECK_EQ_U(xs_get_le32(w + 516), xs_crc32c(w, 516));
	CHECK(memcmp(w + 6, ulp, 505) == 0);
	/* The next FPDU starts at 520, no leading marker. */
	CHECK_EQ_U(tx.pos, 520);

	/* A Marker splitting the DDP header: FPDU at 500, marker at 512. */
	mpa_tx_init(&tx, true, false);
	tx.pos = 500;
	iov.iov_len = 30;
	n = mpa_tx_frame_copy(&tx, &iov, 1, w, sizeof(wire));
	CHECK_EQ_U(n, 2 + 30 + 0 + 4 + 4);
	CHECK_EQ_U(xs_get_be16(w), 30);
	CHECK(memcmp(w + 2, ulp, 10) == 0);
	CHECK_EQ_U(xs_get_be32(w + 12), 12); /* 00 00 | FPDUPTR 12 */
	CHECK(memcmp(w + 16, ulp + 10, 20) == 0);
	CHECK_EQ_U(xs_get_le32(w + 36), 0);

	/* An FPDU ending exactly at 512: the marker there is the next one's. */
	mpa_tx_init(&tx, true, false);
	tx.pos = 480;
	iov.iov_len = 26; /* 2 + 26 + 0 + 4 = 32 */
	n = mpa_tx_frame_copy(&tx, &iov, 1, w, sizeof(wire));
	CHECK_EQ_U(n, 32);
	CHECK_EQ_U(tx.pos, 512);
	iov.iov_len = 2;
	n = mpa_tx_frame_copy(&tx, &iov, 1, w, sizeof(wire));
	CHECK_EQ_U(n, 4 + 2 + 2 + 0 + 4);
	CHECK_EQ_U(xs_get_be32(w), 0);

	/* Two markers inside one FPDU: FPDUPTRs count earlier markers. */
	mpa_tx_init(&tx, true, false);
	tx.pos = 8;
	iov.iov_len = 1100;
	n = mpa_tx_frame_copy(&tx, &iov, 1, w, sizeof(wire));
	CHECK_EQ_U(n, 2 + 1100 + 2 + 4 + 8);
	CHECK_EQ_U(xs_get_be32(w + 504), 504);
	CHECK_EQ_U(xs_get_be32(w + 1016), 1016);

	/* Markers off: none anywhere. */
	mpa_tx_init(&tx, false, false);
	n = mpa_tx_frame_copy(&tx, &iov, 1, w, sizeof(wire));
	CHECK_EQ_U(n, 2 + 1100 + 2 + 4);

	/* Limits. */
	struct mpa_txframe *f = malloc(sizeof(*f));
	REQUIRE(f);
	mpa_tx_init(&tx, false, true);
	iov.iov_len = 65536;
	CHECK_EQ_U(mpa_tx_frame(&tx, &iov, 1, f), (unsigned long long)-EMSGSIZE);
	iov.iov_len = 65535;
	CHECK_EQ_U(mpa_tx_frame(&tx, &iov, 1, f), 0);
	CHECK_EQ_U(f->wire_len, 2 + 65535 + 3 + 4);
	/* With markers an FPDUPTR would not fit 16 bits. */
	mpa_tx_init(&tx, true, true);
	CHECK_EQ_U(mpa_tx_frame(&tx, &iov, 1, f), (unsigned long long)-EMSGSIZE);
	CHECK_EQ_U(tx.pos, 0);
	CHECK_EQ_U(mpa_tx_frame(&tx, &iov, MPA_TX_MAX_ULP_IOV + 1, f), (unsigned long long)-EINVAL);
	free(f);
}

static void test_sweep(void)
{
	static const size_t lens[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
				       17, 30, 250, 251, 252, 253, 254, 255, 500, 501, 502, 503,
				       504, 505, 506, 507, 508, 509, 510, 511, 512, 513, 514,
				       1000, 1010, 1011, 1012, 1013, 1014, 1015, 1016, 1017,
				       1018, 1019, 1020, 1021, 1022, 1023, 1024, 1025, 1026,
				       1099, 1100 };

	for (uint32_t pos = 0; pos <= 1024; pos += 4)
		for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
			for (int m = 0; m < 2; m++)
				check_one(pos, lens[i], m, pos % 8 == 0);
	/* Near the 2^32 wrap and with big ULPDUs. */
	for (int i = 0; i < 40; i++)
		check_one(0xffffffffu - 4 * (uint32_t)xs_rand_below(400) + 1, xs_rand_below(3000),
			  true, true);
	for (int i = 0; i < 6; i++)
		check_one(4 * (uint32_t)xs_rand_below(1000), 60000 + xs_rand_below(4500), true, true);
	check_one(0, 65535, false, true);
}

/* A stream of FPDUs: each starts where the last ended. */
static void test_stream(void)
{
	struct mpa_tx tx;
	uint32_t pos = 0;

	mpa_tx_init(&tx, true, true);
	for (int i = 0; i < 300; i++) {
		size_t len = xs_rand_below(1500);
		struct iovec iov = { ulp, len };
		ssize_t n = mpa_tx_frame_copy(&tx, &iov, 1, wire, sizeof(wire));
		size_t rn = ref_frame(pos, ulp, len, true, true, refw);

		REQUIRE(n == (ssize_t)rn);
		CHECK(memcmp(wire, refw, rn) == 0);
		pos += (uint32_t)rn;
		CHECK_EQ_U(tx.pos, pos);
	}
}

static void test_mulpdu(void)
{
	static const struct {
		size_t mss, plain, marked;
	} t[] = {
		{ 1460, 1454, 1442 },
		{ 1448, 1442, 1430 },
		{ 65483, 65474, 64962 },
		{ 536, 530, 522 },
		{ 9000, 8994, 8922 },
		{ 1461, 1454, 1442 },
		{ 70000, 65535, 65535 },
		{ 6, 0, 0 },
		{ 12, 6, 2 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		CHECK_EQ_U(mpa_mulpdu(t[i].mss, false), t[i].plain);
		CHECK_EQ_U(mpa_mulpdu(t[i].mss, true), t[i].marked);
	}
	/* The MULPDU-sized FPDU fits the segment wherever it starts. */
	static const size_t mss[] = { 536, 1448, 1460, 1461, 1462, 1463, 4096, 9000, 65483 };
	for (size_t i = 0; i < sizeof(mss) / sizeof(mss[0]); i++) {
		for (int m = 0; m < 2; m++) {
			size_t u = mpa_mulpdu(mss[i], m);
			for (uint32_t pos = 0; pos < 512; pos += 4) {
				struct mpa_tx tx = { .markers = m, .crc = true, .pos = pos };
				size_t wl = mpa_tx_wire_len(&tx, u);
				CHECK(wl <= mss[i]);
				if (wl > mss[i])
					fprintf(stderr, "mss %zu markers %d pos %u: %zu\n", mss[i], m,
						pos, wl);
			}
		}
	}
}

static void test_speed(void)
{
	static uint8_t big[65536];
	struct mpa_txframe *f = malloc(sizeof(*f));
	struct mpa_tx tx;
	struct iovec iov = { big, 65535 };
	struct timespec a, b;
	int iters = 2000;

	REQUIRE(f);
	mpa_tx_init(&tx, false, true);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < iters; i++)
		REQUIRE(mpa_tx_frame(&tx, &iov, 1, f) == 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
	printf("tx framing, 64 KiB ULPDU, CRC on, no markers: %.1f GB/s (iovcnt %d)\n",
	       65535.0 * iters / s / 1e9, f->iovcnt);
	CHECK_EQ_U(f->iovcnt, 3); /* hdr, ULPDU, pad+CRC */
	free(f);
}

int main(void)
{
	xs_test_seed(6581);
	test_layouts();
	xs_rand_fill(ulp, sizeof(ulp));
	test_sweep();
	test_stream();
	test_mulpdu();
	test_speed();
	return xs_test_result();
}
