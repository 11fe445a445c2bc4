/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* DDP segmentation: for many (length, MULPDU, tagged) combinations the
 * segments cover the message exactly once and in order, TO/MO follow the
 * offset, L is on the last only, every ULPDU fits the MULPDU, and the count
 * matches ddp_seg_count.  Plus the zero-length message and bad arguments. */
#include "config.h"

#include <errno.h>

#include "tests/xs_test.h"
#include "ddp/ddp.h"
#include "util/xs_be.h"

static struct ddp_hdr make_tmpl(bool tagged)
{
	struct ddp_hdr t = { 0 };

	t.tagged = tagged;
	t.last = xs_rand64() & 1; /* must be ignored: L is the segmenter's */
	t.dv = DDP_VERSION;
	t.rsvdulp = (uint8_t)xs_rand64();
	if (tagged) {
		t.stag = (uint32_t)xs_rand64();
		/* Sometimes close to the top of the TO space. */
		t.to = xs_rand64() & 1 ? xs_rand64() >> 1 : UINT64_MAX - (1u << 20);
	} else {
		t.rsvdulp2 = (uint32_t)xs_rand64();
		t.qn = (uint32_t)xs_rand_below(4);
		t.msn = (uint32_t)xs_rand64();
		t.mo = (uint32_t)xs_rand64(); /* must be ignored: MO is the offset */
	}
	return t;
}

static void check_split(size_t msg_len, size_t mulpdu, bool tagged)
{
	struct ddp_hdr t = make_tmpl(tagged), h;
	struct ddp_segmenter s;
	size_t hl = ddp_hdr_len(tagged), off, len, expect = 0, nseg = 0;

	REQUIRE(ddp_seg_init(&s, &t, msg_len, mulpdu) == 0);
	while (ddp_seg_next(&s, &h, &off, &len)) {
		nseg++;
		REQUIRE(nseg <= msg_len + 1); /* no runaway */
		CHECK_EQ_U(off, expect); /* contiguous, in order, no overlap */
		CHECK(hl + len <= mulpdu);
		CHECK(len > 0 || msg_len == 0);
		CHECK_EQ_U(h.last, off + len == msg_len);
		/* Non-last segments are full: the count is minimal. */
		if (!h.last)
			CHECK_EQ_U(len, mulpdu - hl);
		CHECK_EQ_U(h.tagged, tagged);
		CHECK_EQ_U(h.dv, t.dv);
		CHECK_EQ_U(h.rsvdulp, t.rsvdulp);
		if (tagged) {
			CHECK_EQ_U(h.stag, t.stag);
			CHECK_EQ_U(h.to, t.to + off);
		} else {
			CHECK_EQ_U(h.mo, off);
			CHECK_EQ_U(h.msn, t.msn);
			CHECK_EQ_U(h.qn, t.qn);
			CHECK_EQ_U(h.rsvdulp2, t.rsvdulp2);
		}
		/* The encoded ULPDU fits the MULPDU. */
		uint8_t b[DDP_MAX_HDR_LEN];
		CHECK(ddp_hdr_encode(&h, b) + len <= mulpdu);
		expect = off + len;
	}
	CHECK_EQ_U(expect, msg_len);
	CHECK_EQ_U(nseg, ddp_seg_count(msg_len, mulpdu, tagged));
	CHECK_EQ_U(nseg, msg_len ? (msg_len - 1) / (mulpdu - hl) + 1 : 1);
	/* Exhausted for good. */
	CHECK(!ddp_seg_next(&s, &h, &off, &len));
	CHECK(!ddp_seg_next(&s, &h, &off, &len));
}

int main(void)
{
	xs_test_seed(5041);

	/* Exhaustive over small sizes, including exact multiples. */
	for (int tagged = 0; tagged <= 1; tagged++) {
		size_t hl = ddp_hdr_len(tagged);
		for (size_t mulpdu = hl + 1; mulpdu <= hl + 40; mulpdu++)
			for (size_t len = 0; len <= 200; len++)
				check_split(len, mulpdu, tagged);
	}
	/* Random realistic ones (MPA MULPDU is around 1.4k-64k). */
	for (int i = 0; i < 3000; i++) {
		bool tagged = xs_rand64() & 1;
		size_t hl = ddp_hdr_len(tagged);
		size_t mulpdu = hl + 1 + (size_t)xs_rand_below(xs_rand64() & 1 ? 64 : 9000);
		size_t len = (size_t)xs_rand_below(xs_rand64() & 1 ? 4096 : 200000);
		check_split(len, mulpdu, tagged);
	}
	/* A huge MULPDU: one segment. */
	check_split(100000, SIZE_MAX, false);
	check_split(100000, SIZE_MAX, true);
	CHECK_EQ_U(ddp_seg_count(100000, SIZE_MAX, true), 1);

	/* Zero-length message: one empty segment with L. */
	for (int tagged = 0; tagged <= 1; tagged++) {
		struct ddp_hdr t = make_tmpl(tagged), h;
		struct ddp_segmenter s;
		size_t off = 99, len = 99;

		REQUIRE(ddp_seg_init(&s, &t, 0, 1500) == 0);
		REQUIRE(ddp_seg_next(&s, &h, &off, &len));
		CHECK_EQ_U(off, 0);
		CHECK_EQ_U(len, 0);
		CHECK(h.last);
		CHECK(tagged ? h.to == t.to : h.mo == 0);
		CHECK(!ddp_seg_next(&s, &h, &off, &len));
		CHECK_EQ_U(ddp_seg_count(0, 1500, tagged), 1);
	}

	/* MULPDU that cannot carry the header plus one octet. */
	for (int tagged = 0; tagged <= 1; tagged++) {
		struct ddp_hdr t = make_tmpl(tagged);
		struct ddp_segmenter s;
		size_t hl = ddp_hdr_len(tagged);

		for (size_t m = 0; m <= hl; m++) {
			CHECK_EQ_U(ddp_seg_init(&s, &t, 10, m), -EINVAL);
			CHECK_EQ_U(ddp_seg_init(&s, &t, 0, m), -EINVAL);
			CHECK_EQ_U(ddp_seg_count(10, m, tagged), 0);
		}
		CHECK_EQ_U(ddp_seg_init(&s, &t, 10, hl + 1), 0);
		CHECK_EQ_U(ddp_seg_count(10, hl + 1, tagged), 10);
	}
	/* 15 octets carry a tagged header plus one octet, not an untagged one. */
	{
		struct ddp_hdr t = make_tmpl(true);
		struct ddp_segmenter s;
		CHECK_EQ_U(ddp_seg_init(&s, &t, 1, 15), 0);
		t = make_tmpl(false);
		CHECK_EQ_U(ddp_seg_init(&s, &t, 1, 15), -EINVAL);
	}

	/* Messages the offsets cannot express. */
	{
		struct ddp_hdr t = make_tmpl(true);
		struct ddp_segmenter s;

		t.to = UINT64_MAX - 99;
		CHECK_EQ_U(ddp_seg_init(&s, &t, 99, 1500), 0); /* last octet at 2^64-1 */
		check_split(99, 1500, true);
		CHECK_EQ_U(ddp_seg_init(&s, &t, 100, 1500), -EINVAL); /* ends at 2^64 */
		CHECK_EQ_U(ddp_seg_init(&s, &t, 101, 1500), -EINVAL);
#if SIZE_MAX > UINT32_MAX
		t = make_tmpl(false);
		CHECK_EQ_U(ddp_seg_init(&s, &t, (size_t)UINT32_MAX + 1, 1500), -EINVAL);
		CHECK_EQ_U(ddp_seg_init(&s, &t, UINT32_MAX, 1500), 0);
#endif
	}
	return xs_test_result();
}
