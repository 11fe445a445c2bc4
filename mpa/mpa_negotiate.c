/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* MPA connection setup negotiation (RFC 5044 section 7.1, RFC 6581).
 * Both sides are pure functions of (our prefs, the frames exchanged). */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "mpa/mpa.h"

static uint16_t min16(uint16_t a, uint16_t b)
{
	return a < b ? a : b;
}

void mpa_prefs_default(struct mpa_prefs *p)
{
	memset(p, 0, sizeof(*p));
	p->rev = MPA_REV_2;
	p->crc = false;
	p->crc_refuse = false;
	p->markers_rx = false;
	p->markers_tx_ok = true;
	p->ird = 1;
	p->ord = 1;
	p->ord_strict = false;
	p->p2p = false;
	p->rtr_mask = MPA_RTR_ALL;
	/* announced only by an owner that carries the RFC 7306 operations
	 * out (libiwarp does not yet: a peer that believed us would send
	 * opcodes our receive side Terminates) */
	p->rdmap_ext = false;
}

void mpa_request_build(const struct mpa_prefs *local, struct mpa_frame *req)
{
	memset(req, 0, sizeof(*req));
	req->type = MPA_REQUEST;
	req->rev = local->rev;
	req->crc = local->crc;
	req->markers = local->markers_rx;
	/* Rev 2 always carries the RFC 6581 header, as siw does. */
	req->enhanced = local->rev == MPA_REV_2;
	if (req->enhanced) {
		req->ird = local->ird & MPA_IRDORD_MASK;
		req->ord = local->ord & MPA_IRDORD_MASK;
		if (local->p2p) {
			req->p2p = true;
			req->rtr_send = local->rtr_mask & MPA_RTR_SEND;
			req->rtr_write = local->rtr_mask & MPA_RTR_WRITE;
			req->rtr_read = local->rtr_mask & MPA_RTR_READ;
		}
	}
	req->pdata = local->pdata;
	req->pdata_len = local->pdata_len;
	req->rdmap_ext = local->rdmap_ext;
}

static uint8_t frame_rtr_bits(const struct mpa_frame *f)
{
	return (f->rtr_send ? MPA_RTR_SEND : 0) | (f->rtr_write ? MPA_RTR_WRITE : 0) |
	       (f->rtr_read ? MPA_RTR_READ : 0);
}

static void frame_set_rtr(struct mpa_frame *f, uint8_t rtr)
{
	f->rtr_send = rtr & MPA_RTR_SEND;
	f->rtr_write = rtr & MPA_RTR_WRITE;
	f->rtr_read = rtr & MPA_RTR_READ;
}

/* The Reply an accepting responder would send, before any refusal. */
static void reply_base(const struct mpa_prefs *local, const struct mpa_frame *req,
		       struct mpa_frame *reply)
{
	memset(reply, 0, sizeof(*reply));
	reply->type = MPA_REPLY;
	/* We answer in the lower of the two revisions. */
	reply->rev = req->rev < local->rev ? req->rev : local->rev;
	/* RFC 5044: CRC is used if either side asks for it. */
	reply->crc = req->crc || local->crc;
	/* M in our Reply is our wish for what we receive. */
	reply->markers = local->markers_rx;
	/* IRD/ORD only if the initiator sent the header and we speak rev 2;
	 * we never offer more than the peer can use (siw does the same). */
	reply->enhanced = req->rev == MPA_REV_2 && req->enhanced && reply->rev == MPA_REV_2;
	if (reply->enhanced) {
		reply->ird = min16(local->ird & MPA_IRDORD_MASK, req->ord);
		reply->ord = min16(local->ord & MPA_IRDORD_MASK, req->ird);
	}
	reply->pdata = local->pdata;
	reply->pdata_len = local->pdata_len;
	/* answered only to a Request that announced it: siw (and older
	 * xsock) never see the Reply bit */
	reply->rdmap_ext = local->rdmap_ext && req->rdmap_ext;
}

/* A negotiation failure: R=1, no resources, no P2P, no PD (as siw). */
static int refuse(struct mpa_frame *reply, struct xs_err *err, uint8_t ecode)
{
	reply->reject = true;
	reply->ird = reply->ord = 0;
	reply->p2p = false;
	frame_set_rtr(reply, 0);
	reply->pdata = NULL;
	reply->pdata_len = 0;
	xs_err_set(err, XS_LAYER_LLP, MPA_ETYPE, ecode);
	return -ECONNREFUSED;
}

int mpa_respond(const struct mpa_prefs *local, const struct mpa_frame *req,
		struct mpa_frame *reply, struct mpa_agreed *out, struct xs_err *err)
{
	uint8_t rtr = MPA_RTR_NONE;

	reply_base(local, req, reply);
	memset(out, 0, sizeof(*out));

	/* The peer wants Markers we will not send: refuse with M cleared. */
	if (req->markers && !local->markers_tx_ok) {
		reply->markers = false;
		return refuse(reply, err, MPA_ECODE_BAD_RR);
	}
	/* siw's mpa_crc_strict: CRC asked for but we insist on none. */
	if (req->crc && local->crc_refuse) {
		reply->crc = false;
		return refuse(reply, err, MPA_ECODE_BAD_RR);
	}
	/* P2P: choose exactly one RTR, preferring Write, then Read, then Send
	 * (Write is the cheapest and what siw prefers). */
	if (reply->enhanced && req->p2p) {
		uint8_t both = frame_rtr_bits(req) & local->rtr_mask;

		if (both & MPA_RTR_WRITE)
			rtr = MPA_RTR_WRITE;
		else if (both & MPA_RTR_READ)
			rtr = MPA_RTR_READ;
		else if (both & MPA_RTR_SEND)
			rtr = MPA_RTR_SEND;
		else
			return refuse(reply, err, MPA_ECODE_NO_MATCHING_RTR);
		reply->p2p = true;
		frame_set_rtr(reply, rtr);
	}

	out->rev = reply->rev;
	out->enhanced = reply->enhanced;
	out->crc = reply->crc;
	out->markers_tx = req->markers;
	out->markers_rx = reply->markers;
	if (reply->enhanced) {
		out->ird = reply->ird;
		out->ord = reply->ord;
	} else {
		/* Legacy peer: no numbers exchanged, run with our own limits
		 * (siw uses 0/0 here, which breaks RDMA Read). */
		out->ird = local->ird;
		out->ord = local->ord;
	}
	out->p2p = reply->p2p;
	out->rtr = (enum mpa_rtr)rtr;
	out->rdmap_ext = reply->rdmap_ext;
	return 0;
}

void mpa_reject_build(const struct mpa_prefs *local, const struct mpa_frame *req,
		      struct mpa_frame *reply)
{
	/* Same numbers an accept would carry, R=1, our PD, no RTR. */
	reply_base(local, req, reply);
	reply->reject = true;
	reply->p2p = false;
	frame_set_rtr(reply, 0);
}

static int reply_bad(struct xs_err *err, uint8_t ecode)
{
	xs_err_set(err, XS_LAYER_LLP, MPA_ETYPE, ecode);
	return -EPROTO;
}

int mpa_initiator_complete(const struct mpa_prefs *local, const struct mpa_frame *req,
			   const struct mpa_frame *reply, struct mpa_agreed *out,
			   struct xs_err *err)
{
	enum mpa_rtr rtr = MPA_RTR_NONE;
	bool p2p = false;

	memset(out, 0, sizeof(*out));
	if (reply->reject)
		return -ECONNREFUSED;
	if (reply->rev > req->rev)
		return reply_bad(err, MPA_ECODE_BAD_RR);
	if (reply->markers && !local->markers_tx_ok)
		return reply_bad(err, MPA_ECODE_BAD_RR);

	bool enhanced = req->rev == MPA_REV_2 && req->enhanced && reply->rev == MPA_REV_2 &&
			reply->enhanced;
	uint16_t ird = local->ird, ord = local->ord;

	if (enhanced) {
		/* The peer may not issue more Reads than we can take. */
		if (reply->ord > req->ird)
			return reply_bad(err, MPA_ECODE_INSUFFICIENT_IRD);
		if (reply->ird < ord) {
			if (local->ord_strict)
				return reply_bad(err, MPA_ECODE_INSUFFICIENT_IRD);
			ord = reply->ird;
		}
		/* Our inbound limit is what the peer said it will use. */
		ird = reply->ord;

		uint8_t got = frame_rtr_bits(reply);
		if (req->p2p && reply->p2p) {
			uint8_t offered = frame_rtr_bits(req);

			/* Exactly one bit, and one we offered. */
			if (got == 0 || (got & (got - 1)) || !(got & offered))
				return reply_bad(err, MPA_ECODE_NO_MATCHING_RTR);
			rtr = (enum mpa_rtr)got;
			p2p = true;
		} else if (reply->p2p) {
			/* P2P we never asked for: the peer would wait for an
			 * RTR that never comes. */
			return reply_bad(err, MPA_ECODE_NO_MATCHING_RTR);
		}
		/* req->p2p without reply->p2p: the peer does not do P2P,
		 * go on without an RTR. */
	}

	out->rev = reply->rev;
	out->enhanced = enhanced;
	out->crc = req->crc || reply->crc;
	out->markers_tx = reply->markers;
	out->markers_rx = req->markers;
	out->ird = ird;
	out->ord = ord;
	out->p2p = p2p;
	out->rtr = rtr;
	/* the Reply's own bit: a Request bit echoed back (siw) is not it */
	out->rdmap_ext = req->rdmap_ext && reply->rdmap_ext;
	return 0;
}
