/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Fuzz MPA Request/Reply frames (mpa/mpa_frame.c, mpa/mpa_negotiate.c).
 *
 * Input: byte 0 selects the negotiation preferences, the rest is the frame.
 * The frame is decoded as a Request and as a Reply, incrementally (growing
 * prefixes, honouring the length -EAGAIN asks for) and in one go; both must
 * agree.  A decoded frame must re-encode to exactly the bytes it came from.
 * Decoded Requests go through mpa_respond (the Reply it builds must encode
 * and decode back to itself), decoded Replies through mpa_initiator_complete
 * against Requests built from the same preferences; the agreements are
 * checked for the invariants the negotiation promises. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "mpa/mpa.h"
#include "tests/fuzz/fuzz.h"

#define FRAME_MAX (MPA_RR_HDR_LEN + MPA_PD_MAX)

static bool frames_equal(const struct mpa_frame *a, const struct mpa_frame *b)
{
	return a->type == b->type && a->markers == b->markers && a->crc == b->crc &&
	       a->reject == b->reject && a->enhanced == b->enhanced && a->res_bits == b->res_bits &&
	       a->rdmap_ext == b->rdmap_ext &&
	       a->rev == b->rev && a->ird == b->ird && a->ord == b->ord && a->p2p == b->p2p &&
	       a->rtr_send == b->rtr_send && a->rtr_write == b->rtr_write &&
	       a->rtr_read == b->rtr_read && a->pdata_len == b->pdata_len &&
	       (a->pdata_len == 0 || memcmp(a->pdata, b->pdata, a->pdata_len) == 0);
}

/* Encode f, decode it back as its own type: same frame, same length. */
static void check_encodable(const struct mpa_frame *f)
{
	uint8_t buf[FRAME_MAX];
	struct mpa_frame back;
	struct xs_err err;
	size_t used = 0;
	ssize_t n = mpa_frame_encode(f, buf, sizeof(buf));

	FUZZ_ASSERT(n > 0 && (size_t)n == mpa_frame_len(f));
	FUZZ_ASSERT(mpa_frame_decode(buf, (size_t)n, f->type, &back, &used, &err) == 0);
	FUZZ_ASSERT(used == (size_t)n);
	FUZZ_ASSERT(frames_equal(f, &back));
}

/* Preferences from a selector byte; variant v changes the mix. */
static void prefs_from(uint8_t sel, unsigned v, const uint8_t *pd, size_t pd_avail,
		       struct mpa_prefs *p)
{
	uint8_t b = (uint8_t)(sel ^ (v * 0x5b));

	mpa_prefs_default(p);
	p->rev = (b & 1) ? MPA_REV_1 : MPA_REV_2;
	p->crc = b & 2;
	p->crc_refuse = (b & 0x0c) == 0x0c;
	p->markers_rx = b & 4;
	p->markers_tx_ok = !(b & 8) || (b & 0x80);
	p->ord_strict = b & 0x10;
	p->p2p = b & 0x20;
	p->rtr_mask = (uint8_t)((b >> 5) & MPA_RTR_ALL);
	static const uint16_t lim[4] = { 0, 1, 16, MPA_IRDORD_MASK };
	p->ird = lim[(b >> 2) & 3];
	p->ord = lim[(b >> 6) & 3];
	/* private data: up to 8 octets of whatever follows */
	p->pdata_len = (uint16_t)(pd_avail < (size_t)(v * 3) ? pd_avail : v * 3);
	p->pdata = p->pdata_len ? pd : NULL;
}

static void check_agreed(const struct mpa_agreed *a)
{
	FUZZ_ASSERT(a->rev == MPA_REV_1 || a->rev == MPA_REV_2);
	FUZZ_ASSERT(a->ird <= MPA_IRDORD_MASK && a->ord <= MPA_IRDORD_MASK);
	FUZZ_ASSERT(a->rtr == MPA_RTR_NONE || a->rtr == MPA_RTR_SEND || a->rtr == MPA_RTR_WRITE ||
		    a->rtr == MPA_RTR_READ);
	FUZZ_ASSERT(a->p2p == (a->rtr != MPA_RTR_NONE));
	FUZZ_ASSERT(!a->enhanced || a->rev == MPA_REV_2);
}

static void responder(const struct mpa_frame *req, uint8_t sel, const uint8_t *pd, size_t pd_avail)
{
	for (unsigned v = 0; v < 3; v++) {
		struct mpa_prefs p;
		struct mpa_frame reply;
		struct mpa_agreed a;
		struct xs_err err = { 0xff, 0xff, 0xff };

		prefs_from(sel, v, pd, pd_avail, &p);
		int rc = mpa_respond(&p, req, &reply, &a, &err);

		FUZZ_ASSERT(rc == 0 || rc == -ECONNREFUSED);
		FUZZ_ASSERT(reply.type == MPA_REPLY);
		FUZZ_ASSERT(reply.reject == (rc != 0));
		FUZZ_ASSERT(reply.rev <= req->rev && reply.rev <= p.rev);
		if (rc == 0) {
			check_agreed(&a);
			FUZZ_ASSERT(a.crc == (req->crc || p.crc));
			FUZZ_ASSERT(!a.markers_tx || p.markers_tx_ok);
			if (a.enhanced)
				FUZZ_ASSERT(a.ird <= req->ord && a.ord <= req->ird);
			if (a.p2p)
				FUZZ_ASSERT(req->p2p && (a.rtr & p.rtr_mask));
		} else {
			FUZZ_ASSERT(err.layer == XS_LAYER_LLP && err.etype == MPA_ETYPE);
			FUZZ_ASSERT(!reply.p2p);
		}
		check_encodable(&reply);

		/* The initiator side of the same exchange, with our prefs as its
		 * own: must not crash, and an agreement must be sane. */
		struct mpa_agreed ai;
		rc = mpa_initiator_complete(&p, req, &reply, &ai, &err);
		FUZZ_ASSERT(rc == 0 || rc == -ECONNREFUSED || rc == -EPROTO);
		if (rc == 0)
			check_agreed(&ai);

		/* A ULP reject of the same Request encodes too. */
		mpa_reject_build(&p, req, &reply);
		FUZZ_ASSERT(reply.reject && !reply.p2p);
		check_encodable(&reply);
	}
}

static void initiator(const struct mpa_frame *reply, uint8_t sel, const uint8_t *pd,
		      size_t pd_avail)
{
	for (unsigned v = 0; v < 3; v++) {
		struct mpa_prefs p;
		struct mpa_frame req;
		struct mpa_agreed a;
		struct xs_err err = { 0xff, 0xff, 0xff };

		prefs_from(sel, v, pd, pd_avail, &p);
		mpa_request_build(&p, &req);
		check_encodable(&req);
		int rc = mpa_initiator_complete(&p, &req, reply, &a, &err);

		FUZZ_ASSERT(rc == 0 || rc == -ECONNREFUSED || rc == -EPROTO);
		if (rc == -ECONNREFUSED)
			FUZZ_ASSERT(reply->reject);
		if (rc == -EPROTO)
			FUZZ_ASSERT(err.layer == XS_LAYER_LLP && err.etype == MPA_ETYPE);
		if (rc == 0) {
			check_agreed(&a);
			FUZZ_ASSERT(a.rev <= req.rev);
			FUZZ_ASSERT(!a.markers_tx || p.markers_tx_ok);
			if (a.enhanced) {
				FUZZ_ASSERT(a.ord <= p.ord && a.ord <= reply->ird);
				FUZZ_ASSERT(reply->ord <= req.ird);
			}
			if (a.p2p)
				FUZZ_ASSERT(p.p2p && (a.rtr & p.rtr_mask));
		}
		/* and the responder's view of our Request against this prefs */
		struct mpa_frame r2;
		rc = mpa_respond(&p, &req, &r2, &a, &err);
		FUZZ_ASSERT(rc == 0 || rc == -ECONNREFUSED);
		check_encodable(&r2);
	}
}

static void one_type(const uint8_t *buf, size_t len, enum mpa_frame_type type, uint8_t sel)
{
	struct mpa_frame f, g;
	struct xs_err err = { 0xff, 0xff, 0xff };
	size_t used = 0, n = 0;
	int rc;

	/* Incremental: start empty, grow to what -EAGAIN asks for. */
	for (;;) {
		size_t need = 0;

		rc = mpa_frame_decode(buf, n, type, &f, &need, &err);
		if (rc != -EAGAIN)
			break;
		FUZZ_ASSERT(need > n && need <= FRAME_MAX);
		FUZZ_ASSERT(need == MPA_RR_HDR_LEN || n >= MPA_RR_HDR_LEN);
		if (need > len)
			break;
		n = need;
	}
	/* In one go on everything. */
	struct xs_err err2 = { 0xff, 0xff, 0xff };
	int rc2 = mpa_frame_decode(buf, len, type, &g, &used, &err2);

	if (rc == -EPROTO) {
		FUZZ_ASSERT(rc2 == -EPROTO);
		FUZZ_ASSERT(err.layer == XS_LAYER_LLP && err.etype == MPA_ETYPE &&
			    err.ecode == MPA_ECODE_BAD_RR);
		return;
	}
	if (rc == -EAGAIN) {
		/* the whole input may already show a wrong key */
		FUZZ_ASSERT(rc2 == -EAGAIN || (rc2 == -EPROTO && len < MPA_RR_HDR_LEN));
		return;
	}
	FUZZ_ASSERT(rc == 0 && rc2 == 0);
	FUZZ_ASSERT(n == used && used <= len);
	FUZZ_ASSERT(frames_equal(&f, &g));
	FUZZ_ASSERT(f.type == type && mpa_frame_len(&f) == used);
	if (f.pdata_len)
		FUZZ_ASSERT(f.pdata >= buf && f.pdata + f.pdata_len == buf + used);
	if (type == MPA_REQUEST)
		FUZZ_ASSERT(!f.reject);

	/* Round trip: the same bytes. */
	uint8_t out[FRAME_MAX];
	ssize_t el = mpa_frame_encode(&f, out, sizeof(out));
	FUZZ_ASSERT(el == (ssize_t)used);
	FUZZ_ASSERT(memcmp(out, buf, used) == 0);
	/* too small a buffer is refused, not overrun */
	FUZZ_ASSERT(mpa_frame_encode(&f, out, used - 1) == -EMSGSIZE);

	if (type == MPA_REQUEST)
		responder(&f, sel, buf + used, len - used);
	else
		initiator(&f, sel, buf + used, len - used);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t sel = data[0];
	size_t len = size - 1;
	/* An exact-size copy: ASan catches any read past the input. */
	uint8_t *buf = malloc(len ? len : 1);

	if (!buf)
		return 0;
	memcpy(buf, data + 1, len);
	one_type(buf, len, MPA_REQUEST, sel);
	one_type(buf, len, MPA_REPLY, sel);
	free(buf);
	return 0;
}
