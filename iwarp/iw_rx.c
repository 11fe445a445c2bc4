/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Receive side of an iWARP stream: MPA deframing -> DDP header -> RDMAP
 * checks -> DDP placement -> in-order delivery.  Payload octets are copied
 * once, from the input straight to their destination (or received there
 * directly through iw_rx_direct). */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "iwarp/iw_stream.h"

void iw_rx_init(struct iw_rx *rx, bool markers, bool crc, size_t max_ulpdu,
		ddp_tagged_resolve_fn resolve, void *resolve_ctx, const struct iw_rx_ops *ops,
		void *ops_ctx)
{
	memset(rx, 0, sizeof(*rx));
	mpa_rx_init(&rx->mpa, markers, crc, max_ulpdu);
	ddp_rx_init(&rx->ddp, resolve, resolve_ctx);
	rx->ops = ops;
	rx->ops_ctx = ops_ctx;
}

static bool iw_is_imm(enum rdmap_opcode op)
{
	return op == RDMAP_OP_IMM_DATA || op == RDMAP_OP_IMM_DATA_SE;
}

/* An Immediate Data header: its body goes to imm_body.  One that consumes
 * a receive (not attached to a Send: body octet 4, when it came with the
 * header) must find one posted, as a Send does (the RNR wait included). */
static int iw_rx_imm_target(struct iw_rx *rx, const uint8_t *body, size_t body_n,
			    struct xs_err *err)
{
	uint8_t *unused;

	if (rx->payload_len > RDMAP_IMM_LEN || !rx->h.last) {
		/* the Data Sink's buffer for it holds 8 octets, one segment */
		xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_TOO_LONG);
		return -EPROTO;
	}
	if (rx->payload_len < RDMAP_IMM_LEN || rx->h.mo) {
		xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNSPECIFIED);
		return -EPROTO;
	}
	if (!rx->stalled) {
		rx->imm_known = body_n > RDMAP_IMM_XS_FLAGS;
		rx->imm_take = !rx->imm_known || !(body[RDMAP_IMM_XS_FLAGS] & RDMAP_IMM_XS_ATTACHED);
	}
	if (rx->imm_known && rx->imm_take) {
		struct ddp_hdr h = rx->h;

		h.last = false; /* only asks: is a receive there for this MSN */
		return ddp_rx_target(&rx->ddp, &h, 0, &unused, err);
	}
	return 0;
}

/* The whole DDP header is in: decode, check the RDMAP control, find where
 * the payload goes (body: the body_n payload octets that came with it).
 * A ULPDU must at least hold its header. */
static int iw_rx_header(struct iw_rx *rx, uint16_t ulpdu_len, const uint8_t *body,
			size_t body_n, struct xs_err *err)
{
	int rc;

	rc = ddp_hdr_decode(rx->hdr, rx->hdr_len, &rx->h, err);
	if (rc < 0)
		return rc;
	rc = rdmap_hdr_check_ext(&rx->h, rx->ext, &rx->op, err);
	if (rc < 0)
		return rc;
	rx->payload_len = (uint32_t)ulpdu_len - rx->hdr_len;
	if (iw_is_imm(rx->op)) {
		rc = iw_rx_imm_target(rx, body, body_n, err);
		rx->dst = rx->imm_body;
	} else {
		rc = ddp_rx_target(&rx->ddp, &rx->h, rx->payload_len, &rx->dst, err);
	}
	if (rc < 0 && rx->rnr && !rx->h.tagged && rx->h.qn == RDMAP_QN_SEND &&
	    err->layer == XS_LAYER_DDP && err->etype == DDP_ETYPE_UNTAGGED &&
	    err->ecode == DDP_ECODE_U_NO_BUFFER) {
		/* no receive yet: wait for one (the caller stops reading) */
		rx->stalled = true;
		rx->stall_ulpdu_len = ulpdu_len;
		return -EAGAIN;
	}
	if (rc < 0)
		return -EPROTO; /* the triple is in err; the resolver's errno is not ours */
	rx->stalled = false;
	rx->hdr_done = true;
	return 0;
}

static int iw_rx_data(struct iw_rx *rx, const struct mpa_rx_event *ev, struct xs_err *err)
{
	const uint8_t *p = ev->data;
	size_t n = ev->len;
	uint32_t off = ev->ulpdu_off;

	if (n == 0)
		return 0;
	if (off == 0) {
		/* first octets of a new ULPDU: its first octet says the header length */
		rx->hdr_got = 0;
		rx->hdr_done = false;
		rx->hdr_len = (uint8_t)ddp_hdr_len_from_byte(p[0]);
		if (ev->ulpdu_len < rx->hdr_len) {
			xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_CATASTROPHIC, DDP_ECODE_CATASTROPHIC);
			return -EPROTO;
		}
	}
	if (!rx->hdr_done) {
		size_t take = rx->hdr_len - rx->hdr_got;
		if (take > n)
			take = n;
		memcpy(rx->hdr + rx->hdr_got, p, take);
		rx->hdr_got = (uint8_t)(rx->hdr_got + take);
		p += take;
		n -= take;
		off += (uint32_t)take;
		if (rx->hdr_got < rx->hdr_len)
			goto out;
		int rc = iw_rx_header(rx, ev->ulpdu_len, p, n, err);
		if (rc == -EAGAIN) {
			/* the n payload octets after the header went through
			 * MPA already: the caller hands them back on resume */
			rx->stall_data = (uint32_t)n;
			rx->ulp_next = off;
			return rc;
		}
		if (rc < 0)
			return rc;
	}
	if (n > 0)
		memcpy(rx->dst + (off - rx->hdr_len), p, n);
	off += (uint32_t)n;
out:
	rx->ulp_next = off;
	return 0;
}

static int iw_rx_fpdu_end(struct iw_rx *rx, struct xs_err *err)
{
	struct ddp_delivery d;
	int rc;

	if (!rx->hdr_done) {
		xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_CATASTROPHIC, DDP_ECODE_CATASTROPHIC);
		return -EPROTO;
	}
	if (iw_is_imm(rx->op)) {
		/* its own MSN on QN 0 (checked by rdmap_hdr_check_ext) and a
		 * receive only if not attached to the Send that follows */
		bool take = !(rx->imm_body[RDMAP_IMM_XS_FLAGS] & RDMAP_IMM_XS_ATTACHED);
		struct ddp_queue *q = rx->ddp.queues[RDMAP_QN_SEND];

		if (!q) {
			xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_INVALID_QN);
			return -EPROTO;
		}
		rc = ddp_queue_pass(q, rx->h.msn, take, &d, err);
		if (rc < 0)
			return rc;
		rx->fpdus++;
		rx->hdr_done = false;
		rx->ulp_next = 0;
		d.addr = rx->imm_body;
		d.msg_len = RDMAP_IMM_LEN;
		d.rsvdulp = rx->h.rsvdulp;
		if (rx->ops && rx->ops->deliver)
			rx->ops->deliver(rx->ops_ctx, rx->op, RDMAP_QN_SEND, &d);
		goto deliver;
	}
	rc = ddp_rx_commit(&rx->ddp, &rx->h, rx->payload_len, err);
	if (rc < 0)
		return rc;
	rx->fpdus++;
	rx->hdr_done = false;
	rx->ulp_next = 0;
	if (rx->h.tagged) {
		if (rx->h.last && rx->ops && rx->ops->tagged_last)
			rx->ops->tagged_last(rx->ops_ctx, rx->op, &rx->h);
		return 0;
	}
deliver:;
	/* ddp_rx_commit validated the QN, so the queue exists */
	struct ddp_queue *q = rx->ddp.queues[rx->h.qn];
	while (ddp_queue_deliver(q, &d) == 1) {
		enum rdmap_opcode op = (enum rdmap_opcode)(d.rsvdulp & RDMAP_OPCODE_MASK);
		if (rx->ops && rx->ops->deliver)
			rx->ops->deliver(rx->ops_ctx, op, rx->h.qn, &d);
	}
	return 0;
}

int iw_rx_input(struct iw_rx *rx, const uint8_t *buf, size_t len, struct xs_err *err)
{
	size_t used;

	return iw_rx_input_part(rx, buf, len, &used, err);
}

int iw_rx_input_part(struct iw_rx *rx, const uint8_t *buf, size_t len, size_t *consumed,
		     struct xs_err *err)
{
	const uint8_t *start = buf;

	*consumed = 0;
	if (rx->stalled) {
		int rc = iw_rx_header(rx, rx->stall_ulpdu_len, NULL, 0, err);

		if (rc < 0)
			return rc; /* still no receive (-EAGAIN), or now an error */
		if (len < rx->stall_data) {
			xs_err_set(err, XS_LAYER_LLP, MPA_ETYPE, MPA_ECODE_LOCAL_CATASTROPHIC);
			return -EPROTO;
		}
		if (rx->stall_data)
			memcpy(rx->dst, buf, rx->stall_data);
		rx->ulp_next += rx->stall_data;
		buf += rx->stall_data;
		len -= rx->stall_data;
		rx->stall_data = 0;
	}
	while (len > 0) {
		struct mpa_rx_event ev;
		size_t used = 0;
		int rc = mpa_rx_step(&rx->mpa, buf, len, &used, &ev, err);

		if (rc < 0)
			return rc;
		buf += used;
		len -= used;
		if (rc == MPA_RX_EV_DATA)
			rc = iw_rx_data(rx, &ev, err);
		else if (rc == MPA_RX_EV_FPDU_END)
			rc = iw_rx_fpdu_end(rx, err);
		else
			rc = 0;
		if (rc == -EAGAIN) {
			/* the event's data ends the input MPA took */
			*consumed = (size_t)(buf - start) - rx->stall_data;
			return rc;
		}
		if (rc < 0)
			return rc;
	}
	*consumed = (size_t)(buf - start);
	return 0;
}

size_t iw_rx_direct(const struct iw_rx *rx, uint8_t **dst)
{
	if (!rx->hdr_done)
		return 0;
	size_t n = mpa_rx_data_window(&rx->mpa);
	if (n == 0)
		return 0;
	*dst = rx->dst + (rx->ulp_next - rx->hdr_len);
	return n;
}

int iw_rx_direct_done(struct iw_rx *rx, size_t n, struct xs_err *err)
{
	int rc = mpa_rx_data_absorb(&rx->mpa, rx->dst + (rx->ulp_next - rx->hdr_len), n);

	if (rc < 0) {
		xs_err_set(err, XS_LAYER_LLP, MPA_ETYPE, MPA_ECODE_LOCAL_CATASTROPHIC);
		return rc;
	}
	rx->ulp_next += (uint32_t)n;
	return 0;
}
