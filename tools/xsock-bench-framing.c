/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* xsock-bench-framing: MPA/DDP framing and deframing throughput for 64 KiB
 * messages (RDMA Writes), CRC on, Markers off and on, next to memcpy of the
 * same buffers measured in the same run.  Not a test: it prints figures.
 *
 *   tx        segment + DDP headers + MPA framing (gather list, CRC) — the
 *             payload is not copied: a writev() hands it to the kernel.
 *   rx-copy   deframe + CRC check + placement from a staging buffer (one copy)
 *   rx-direct deframe + CRC check where the payload was received straight
 *             into the destination (iw_rx_direct: no copy by the stack)
 *   memcpy    64 KiB copies of the same buffers */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "iwarp/iw_stream.h"

#define MSG_SIZE (64 * 1024)
#define REGION_MSGS 64 /* destination region: 4 MiB, rotates */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct sink {
	uint8_t *wire;
	size_t len, cap;
	bool store;
};

static int sink_write(void *ctx, const struct iovec *iov, int cnt, size_t len)
{
	struct sink *s = ctx;

	if (!s->store) {
		s->len += len;
		return 0;
	}
	if (s->len + len > s->cap)
		return -1;
	for (int i = 0; i < cnt; i++) {
		memcpy(s->wire + s->len, iov[i].iov_base, iov[i].iov_len);
		s->len += iov[i].iov_len;
	}
	return 0;
}

static uint8_t *region;
static const uint32_t region_stag = 0x1234;

static int bench_resolve(void *ctx, uint32_t stag, uint64_t to, uint32_t len, uint8_t **dst,
			 struct xs_err *err)
{
	if (stag != region_stag || to > (uint64_t)MSG_SIZE * REGION_MSGS ||
	    len > (uint64_t)MSG_SIZE * REGION_MSGS - to) {
		xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_BASE_BOUNDS);
		return -1;
	}
	*dst = region + to;
	return 0;
}

static void bench(size_t mss, bool markers, double memcpy_gbs)
{
	size_t mulpdu = mpa_mulpdu(mss, markers);
	uint8_t *src = malloc(MSG_SIZE);
	struct sink sk = { 0 };
	struct iw_tx tx;
	struct iw_rx rx;
	struct xs_err err;
	unsigned msgs = 4096; /* 256 MiB per measurement */

	for (size_t i = 0; i < MSG_SIZE; i++)
		src[i] = (uint8_t)(i * 7);

	/* transmit framing */
	iw_tx_init(&tx, markers, true, mulpdu, sink_write, &sk);
	double t0 = now_s();
	for (unsigned m = 0; m < msgs; m++) {
		struct iovec v = { src, MSG_SIZE };
		iw_tx_tagged(&tx, RDMAP_OP_WRITE, region_stag, (uint64_t)(m % REGION_MSGS) * MSG_SIZE, &v, 1);
	}
	double tx_s = now_s() - t0;

	/* a wire image of REGION_MSGS messages to deframe, replayed */
	sk.cap = (size_t)REGION_MSGS * (MSG_SIZE + MSG_SIZE / 8) + 65536;
	sk.wire = malloc(sk.cap);
	sk.store = true;
	sk.len = 0;
	iw_tx_init(&tx, markers, true, mulpdu, sink_write, &sk);
	for (unsigned m = 0; m < REGION_MSGS; m++) {
		struct iovec v = { src, MSG_SIZE };
		iw_tx_tagged(&tx, RDMAP_OP_WRITE, region_stag, (uint64_t)m * MSG_SIZE, &v, 1);
	}
	unsigned reps = msgs / REGION_MSGS;
	double rx_s = 0, direct_s = 0;
	int bad = 0;

	for (unsigned r = 0; r < reps; r++) {
		iw_rx_init(&rx, markers, true, 0, bench_resolve, NULL, NULL, NULL);
		t0 = now_s();
		if (iw_rx_input(&rx, sk.wire, sk.len, &err) < 0)
			bad++;
		rx_s += now_s() - t0;
	}
	if (memcmp(region + (REGION_MSGS - 1) * (size_t)MSG_SIZE, src, MSG_SIZE) != 0)
		bad++;

	/* direct placement: payload octets are already where they belong (the
	 * socket read put them there); the stack only deframes and checks */
	for (unsigned r = 0; r < reps; r++) {
		iw_rx_init(&rx, markers, true, 0, bench_resolve, NULL, NULL, NULL);
		size_t off = 0;
		t0 = now_s();
		while (off < sk.len) {
			uint8_t *dst;
			size_t n = iw_rx_direct(&rx, &dst);
			if (n > 0) {
				if (n > sk.len - off)
					n = sk.len - off;
				/* the bytes at wire+off are what recv() would have put at dst */
				if (iw_rx_direct_done(&rx, n, &err) < 0) {
					bad++;
					break;
				}
				off += n;
				continue;
			}
			/* headers, markers, pad, CRC: a small read through the
			 * deframer (a few payload octets may come along and are
			 * copied), as an engine reading headers into a staging
			 * buffer would do */
			size_t step = sk.len - off < 32 ? sk.len - off : 32;
			if (iw_rx_input(&rx, sk.wire + off, step, &err) < 0) {
				bad++;
				break;
			}
			off += step;
		}
		direct_s += now_s() - t0;
	}

	double bytes = (double)msgs * MSG_SIZE;
	double tx_gbs = bytes / tx_s / 1e9, rx_gbs = bytes / rx_s / 1e9, dr_gbs = bytes / direct_s / 1e9;
	printf("MSS %5zu markers %-3s MULPDU %5zu | tx %6.2f GB/s (%.2fx memcpy) | rx-copy %6.2f GB/s (%.2fx) | rx-direct %6.2f GB/s (%.2fx)%s\n",
	       mss, markers ? "on" : "off", mulpdu, tx_gbs, tx_gbs / memcpy_gbs, rx_gbs,
	       rx_gbs / memcpy_gbs, dr_gbs, dr_gbs / memcpy_gbs, bad ? "  ERRORS" : "");
	free(sk.wire);
	free(src);
}

int main(void)
{
	region = malloc((size_t)MSG_SIZE * REGION_MSGS);
	uint8_t *src = malloc(MSG_SIZE);
	memset(src, 0x5a, MSG_SIZE);
	memset(region, 0, (size_t)MSG_SIZE * REGION_MSGS);

	/* memcpy of 64 KiB messages into the same rotating region */
	unsigned msgs = 4096;
	double t0 = now_s();
	for (unsigned m = 0; m < msgs; m++)
		memcpy(region + (size_t)(m % REGION_MSGS) * MSG_SIZE, src, MSG_SIZE);
	double mc_s = now_s() - t0;
	double memcpy_gbs = (double)msgs * MSG_SIZE / mc_s / 1e9;
	printf("64 KiB messages, CRC32c on; memcpy of the same buffers: %.2f GB/s\n", memcpy_gbs);

	bench(65483, false, memcpy_gbs); /* loopback MTU 65536 */
	bench(65483, true, memcpy_gbs);
	bench(1460, false, memcpy_gbs); /* Ethernet */
	bench(1460, true, memcpy_gbs);
	free(src);
	free(region);
	return 0;
}
