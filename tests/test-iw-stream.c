/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The three layers together (iwarp/iw_tx.c + iw_rx.c over mpa/ and ddp/):
 * 1. real siw traffic (vector init-rev2-crc1/-crc0: two Sends and a Read
 *    Response siw sent, CRC on and off) is deframed, checked and placed;
 * 2. xsock's Read Request FPDU is byte-identical to the one siw accepted;
 * 3. property test: random mixes of Sends, Writes and Read Requests, framed
 *    with random MULPDU, Markers and CRC on/off, fed back in random chunks
 *    (and through the direct-placement path) arrive exactly. */
#include "config.h"

#include <errno.h>

#include "iwarp/iw_stream.h"
#include "tests/xs_test.h"
#include "tests/vectors/siw-init-rev2-stream.h"

/* ---- a receiver with one tagged region and Send/Read Request queues ------ */

#define MAX_MSGS 64

struct rcv {
	uint32_t stag;
	uint64_t base_to;
	uint8_t *region;
	uint32_t region_len;
	struct ddp_queue q[3];
	uint8_t *bufs[MAX_MSGS];
	unsigned nsend, nrrq;
	uint32_t send_len[MAX_MSGS];
	enum rdmap_opcode send_op[MAX_MSGS];
	uint8_t rrq[MAX_MSGS][RDMAP_READ_REQ_LEN];
	unsigned tagged_last;
};

static int rcv_resolve(void *ctx, uint32_t stag, uint64_t to, uint32_t len, uint8_t **dst,
		       struct xs_err *err)
{
	struct rcv *r = ctx;

	if (stag != r->stag) {
		xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_INVALID_STAG);
		return -ENOENT;
	}
	if (to < r->base_to || to - r->base_to > r->region_len ||
	    len > r->region_len - (to - r->base_to)) {
		xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_BASE_BOUNDS);
		return -ERANGE;
	}
	*dst = r->region + (to - r->base_to);
	return 0;
}

static void rcv_deliver(void *ctx, enum rdmap_opcode op, uint32_t qn, const struct ddp_delivery *d)
{
	struct rcv *r = ctx;

	if (qn == RDMAP_QN_SEND && r->nsend < MAX_MSGS) {
		r->send_len[r->nsend] = d->msg_len;
		r->send_op[r->nsend] = op;
		r->nsend++;
	} else if (qn == RDMAP_QN_READ_REQ && r->nrrq < MAX_MSGS) {
		REQUIRE(d->msg_len == RDMAP_READ_REQ_LEN);
		r->nrrq++;
	}
}

static void rcv_tagged_last(void *ctx, enum rdmap_opcode op, const struct ddp_hdr *h)
{
	struct rcv *r = ctx;
	r->tagged_last++;
}

static const struct iw_rx_ops rcv_ops = { .deliver = rcv_deliver, .tagged_last = rcv_tagged_last };

static void rcv_init(struct rcv *r, struct iw_rx *rx, bool markers, bool crc, uint32_t send_buf_len)
{
	iw_rx_init(rx, markers, crc, 0, rcv_resolve, r, &rcv_ops, r);
	for (uint32_t qn = 0; qn < 3; qn++) {
		REQUIRE(ddp_queue_init(&r->q[qn], qn, MAX_MSGS, 1) == 0);
		REQUIRE(ddp_rx_add_queue(&rx->ddp, &r->q[qn]) == 0);
	}
	for (unsigned i = 0; i < MAX_MSGS; i++) {
		r->bufs[i] = malloc(send_buf_len);
		REQUIRE(r->bufs[i]);
		REQUIRE(ddp_queue_post(&r->q[0], r->bufs[i], send_buf_len, NULL) == 0);
		REQUIRE(ddp_queue_post(&r->q[1], r->rrq[i], RDMAP_READ_REQ_LEN, NULL) == 0);
	}
}

static void rcv_fini(struct rcv *r)
{
	for (unsigned i = 0; i < MAX_MSGS; i++)
		free(r->bufs[i]);
	for (int qn = 0; qn < 3; qn++)
		ddp_queue_destroy(&r->q[qn]);
}

/* ---- 1 + 2: siw's own bytes ---------------------------------------------- */

static void test_siw_stream(const char *hex, bool crc, size_t chunk)
{
	uint8_t wire[512];
	size_t len = xs_hex(hex, wire, sizeof(wire));
	uint8_t sink[64];
	struct rcv r = { .stag = 0x0a0b0c0d, .base_to = 0x10000, .region = sink, .region_len = 64 };
	struct iw_rx rx;
	struct xs_err err;

	memset(sink, 0, sizeof(sink));
	rcv_init(&r, &rx, false, crc, 64);
	for (size_t off = 0; off < len; off += chunk) {
		size_t n = len - off < chunk ? len - off : chunk;
		CHECK(iw_rx_input(&rx, wire + off, n, &err) == 0);
	}
	CHECK_EQ_U(r.nsend, 2);
	CHECK_EQ_U(r.send_len[0], 16);
	CHECK_EQ_U(r.send_op[0], RDMAP_OP_SEND);
	CHECK_EQ_U(r.tagged_last, 1);
	CHECK(memcmp(sink, "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr", 63) == 0);
	CHECK(memcmp(r.bufs[0] + 8, "\xe0\x03\xac\x00", 4) == 0 || !crc);
	CHECK_EQ_U(rx.fpdus, 3);
	rcv_fini(&r);

	if (crc) {
		/* one flipped payload byte: MPA CRC error, LLP/0/0x02 */
		wire[40 + 30] ^= 0x20;
		memset(&r, 0, sizeof(r));
		r.stag = 0x0a0b0c0d;
		r.base_to = 0x10000;
		r.region = sink;
		r.region_len = 64;
		rcv_init(&r, &rx, false, crc, 64);
		CHECK(iw_rx_input(&rx, wire, len, &err) == -EPROTO);
		CHECK_EQ_U(err.layer, XS_LAYER_LLP);
		CHECK_EQ_U(err.etype, MPA_ETYPE);
		CHECK_EQ_U(err.ecode, MPA_ECODE_CRC);
		rcv_fini(&r);
	}
}

struct capture {
	uint8_t *buf;
	size_t len, cap;
	unsigned fpdus;
};

static int capture_write(void *ctx, const struct iovec *iov, int cnt, size_t len)
{
	struct capture *c = ctx;

	REQUIRE(c->len + len <= c->cap);
	size_t sum = 0;
	for (int i = 0; i < cnt; i++) {
		memcpy(c->buf + c->len, iov[i].iov_base, iov[i].iov_len);
		c->len += iov[i].iov_len;
		sum += iov[i].iov_len;
	}
	CHECK_EQ_U(sum, len);
	c->fpdus++;
	return 0;
}

static void test_read_req_bytes(void)
{
	/* the Read Request the host peer sent and siw served (init-rev2-crc1) */
	uint8_t want[64];
	size_t wlen = xs_hex("00 2e 41 41 00 00 00 00 00 00 00 01 00 00 00 01 00 00 00 00 0a 0b 0c 0d"
			     "00 00 00 00 00 01 00 00 00 00 00 40 e0 03 ac 00 00 00 55 87 ce 6d 93 70"
			     "19 f3 0f f7",
			     want, sizeof(want));
	uint8_t got[256];
	struct capture c = { .buf = got, .cap = sizeof(got) };
	struct iw_tx tx;
	struct rdmap_read_req rr = { .sink_stag = 0x0a0b0c0d, .sink_to = 0x10000, .size = 64,
				     .src_stag = 0xe003ac00, .src_to = 0x5587ce6d9370 };

	REQUIRE(iw_tx_init(&tx, false, true, mpa_mulpdu(1460, false), capture_write, &c) == 0);
	CHECK(iw_tx_read_req(&tx, &rr) == 0);
	CHECK_EQ_U(c.len, wlen);
	CHECK(memcmp(got, want, wlen) == 0);
}

/* ---- 3: property test ------------------------------------------------------ */

enum { M_SEND, M_WRITE, M_RRQ };

static void test_random_streams(unsigned rounds)
{
	for (unsigned round = 0; round < rounds; round++) {
		bool markers = xs_rand_below(2), crc = xs_rand_below(2);
		size_t mss = 64 + xs_rand_below(9000);
		size_t mulpdu = mpa_mulpdu(mss, markers);
		if (mulpdu <= DDP_UNTAGGED_HDR_LEN + 1)
			continue;
		uint32_t region_len = 1 << 16;
		uint8_t *region = calloc(1, region_len), *expect = calloc(1, region_len);
		struct capture c = { .cap = 4 << 20 };
		c.buf = malloc(c.cap);
		REQUIRE(region && expect && c.buf);

		struct iw_tx tx;
		REQUIRE(iw_tx_init(&tx, markers, crc, mulpdu, capture_write, &c) == 0);
		unsigned nmsg = 1 + (unsigned)xs_rand_below(40);
		uint8_t *sends[MAX_MSGS];
		uint32_t send_len[MAX_MSGS];
		unsigned ns = 0, nr = 0, nw = 0;
		uint8_t payload[6000];
		for (unsigned m = 0; m < nmsg; m++) {
			int kind = (int)xs_rand_below(3);
			size_t len = xs_rand_below(sizeof(payload));
			xs_rand_fill(payload, len);
			struct iovec v[3];
			/* split the payload into up to 3 gather pieces */
			size_t a = len ? xs_rand_below(len + 1) : 0, b = a + (len - a ? xs_rand_below(len - a + 1) : 0);
			v[0] = (struct iovec){ payload, a };
			v[1] = (struct iovec){ payload + a, b - a };
			v[2] = (struct iovec){ payload + b, len - b };
			if (kind == M_SEND) {
				sends[ns] = malloc(len + 1);
				memcpy(sends[ns], payload, len);
				send_len[ns++] = (uint32_t)len;
				CHECK(iw_tx_send(&tx, xs_rand_below(2) ? RDMAP_OP_SEND : RDMAP_OP_SEND_SE, 0, v, 3) == 0);
			} else if (kind == M_WRITE) {
				uint32_t to = (uint32_t)xs_rand_below(region_len - len + 1);
				memcpy(expect + to, payload, len);
				CHECK(iw_tx_tagged(&tx, RDMAP_OP_WRITE, 0x77, 0x100000 + to, v, 3) == 0);
				nw++;
			} else {
				struct rdmap_read_req rr = { .sink_stag = (uint32_t)xs_rand64(), .sink_to = xs_rand64(),
							     .size = (uint32_t)xs_rand64(), .src_stag = (uint32_t)xs_rand64(),
							     .src_to = xs_rand64() };
				CHECK(iw_tx_read_req(&tx, &rr) == 0);
				nr++;
			}
		}

		/* feed back: random chunks, and direct placement in every other round */
		struct rcv r = { .stag = 0x77, .base_to = 0x100000, .region = region, .region_len = region_len };
		struct iw_rx rx;
		struct xs_err err;
		rcv_init(&r, &rx, markers, crc, sizeof(payload));
		bool direct = round & 1;
		size_t off = 0;
		while (off < c.len) {
			uint8_t *dst;
			size_t n = direct ? iw_rx_direct(&rx, &dst) : 0;
			if (n > 0) {
				if (n > c.len - off)
					n = c.len - off;
				n = 1 + xs_rand_below(n);
				memcpy(dst, c.buf + off, n); /* what recv() into dst would do */
				REQUIRE(iw_rx_direct_done(&rx, n, &err) == 0);
			} else {
				n = 1 + xs_rand_below(xs_rand_below(4) ? 64 : 4096);
				if (n > c.len - off)
					n = c.len - off;
				REQUIRE(iw_rx_input(&rx, c.buf + off, n, &err) == 0);
			}
			off += n;
		}
		CHECK_EQ_U(r.nsend, ns);
		for (unsigned i = 0; i < ns && i < r.nsend; i++) {
			CHECK_EQ_U(r.send_len[i], send_len[i]);
			CHECK(memcmp(r.bufs[i], sends[i], send_len[i]) == 0);
		}
		CHECK_EQ_U(r.nrrq, nr);
		CHECK_EQ_U(r.tagged_last, nw);
		CHECK(memcmp(region, expect, region_len) == 0);
		CHECK_EQ_U(rx.fpdus, c.fpdus);
		for (unsigned i = 0; i < ns; i++)
			free(sends[i]);
		rcv_fini(&r);
		free(region);
		free(expect);
		free(c.buf);
		if (xs_test_failures)
			break;
	}
}

int main(void)
{
	xs_test_seed(20261121);
	test_siw_stream(siw_crc1, true, 1000);
	test_siw_stream(siw_crc1, true, 1);
	test_siw_stream(siw_crc0, false, 7);
	test_read_req_bytes();
	test_random_streams(200);
	return xs_test_result();
}
