/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Transmit side of an iWARP stream: RDMAP message -> DDP segments -> FPDUs. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "iwarp/iw_stream.h"

int iw_tx_init(struct iw_tx *tx, bool markers, bool crc, size_t mulpdu, iw_tx_write_fn write,
	       void *ctx)
{
	if (mulpdu <= DDP_UNTAGGED_HDR_LEN || mulpdu > MPA_ULPDU_MAX || !write)
		return -EINVAL;
	memset(tx, 0, sizeof(*tx));
	mpa_tx_init(&tx->mpa, markers, crc);
	tx->mulpdu = mulpdu;
	for (int i = 0; i < IW_QN_COUNT; i++)
		tx->msn[i] = 1;
	tx->write = write;
	tx->write_ctx = ctx;
	return 0;
}

/* Collect payload octets [off, off + len) of a gather list into out[],
 * returning the number of pieces (at most max). */
static int iw_slice_iov(const struct iovec *iov, int cnt, size_t off, size_t len,
			struct iovec *out, int max)
{
	int n = 0;

	for (int i = 0; i < cnt && len > 0; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t take = iov[i].iov_len - off;
		if (take > len)
			take = len;
		if (n == max)
			return -EINVAL;
		out[n].iov_base = (uint8_t *)iov[i].iov_base + off;
		out[n].iov_len = take;
		n++;
		len -= take;
		off = 0;
	}
	return len ? -EINVAL : n;
}

static size_t iw_iov_len(const struct iovec *iov, int cnt)
{
	size_t len = 0;

	for (int i = 0; i < cnt; i++)
		len += iov[i].iov_len;
	return len;
}

/* Segment one message and write each segment as one FPDU.  RDMAP bodies
 * (Read Request, Terminate) travel as the DDP payload. */
static int iw_tx_message(struct iw_tx *tx, const struct ddp_hdr *tmpl, const struct iovec *iov,
			 int cnt)
{
	struct ddp_segmenter seg;
	struct ddp_hdr h;
	size_t off, len;
	size_t total = iw_iov_len(iov, cnt);
	int rc;

	rc = ddp_seg_init(&seg, tmpl, total, tx->mulpdu);
	if (rc < 0)
		return rc;
	while (ddp_seg_next(&seg, &h, &off, &len)) {
		/* the DDP header goes right behind the MPA length field */
		uint8_t *hdr = tx->frame.hdr + MPA_HDR_LEN;
		struct iovec ulp[MPA_TX_MAX_ULP_IOV];

		_Static_assert(DDP_MAX_HDR_LEN <= MPA_TX_HDR_ROOM, "header room");
		ulp[0].iov_base = hdr;
		ulp[0].iov_len = ddp_hdr_encode(&h, hdr);
		int n = iw_slice_iov(iov, cnt, off, len, ulp + 1, MPA_TX_MAX_ULP_IOV - 1);
		if (n < 0)
			return n;
		rc = mpa_tx_frame(&tx->mpa, ulp, n + 1, &tx->frame);
		if (rc < 0)
			return rc;
		rc = tx->write(tx->write_ctx, tx->frame.iov, tx->frame.iovcnt, tx->frame.wire_len);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void iw_untagged_tmpl(struct iw_tx *tx, struct ddp_hdr *h, enum rdmap_opcode op, uint32_t qn)
{
	memset(h, 0, sizeof(*h));
	h->dv = DDP_VERSION;
	h->rsvdulp = rdmap_ctrl_encode(op);
	h->qn = qn;
	h->msn = tx->msn[qn]++;
}

int iw_tx_send(struct iw_tx *tx, enum rdmap_opcode op, uint32_t inv_stag, const struct iovec *iov,
	       int cnt)
{
	struct ddp_hdr h;

	if (op != RDMAP_OP_SEND && op != RDMAP_OP_SEND_SE && op != RDMAP_OP_SEND_INV &&
	    op != RDMAP_OP_SEND_SE_INV && op != RDMAP_OP_IMM_DATA && op != RDMAP_OP_IMM_DATA_SE)
		return -EINVAL;
	iw_untagged_tmpl(tx, &h, op, RDMAP_QN_SEND);
	if (rdmap_ops[op].invalidate)
		h.rsvdulp2 = inv_stag;
	return iw_tx_message(tx, &h, iov, cnt);
}

int iw_tx_tagged(struct iw_tx *tx, enum rdmap_opcode op, uint32_t stag, uint64_t to,
		 const struct iovec *iov, int cnt)
{
	struct ddp_hdr h;

	if (op != RDMAP_OP_WRITE && op != RDMAP_OP_READ_RESP)
		return -EINVAL;
	memset(&h, 0, sizeof(h));
	h.tagged = true;
	h.dv = DDP_VERSION;
	h.rsvdulp = rdmap_ctrl_encode(op);
	h.stag = stag;
	h.to = to;
	return iw_tx_message(tx, &h, iov, cnt);
}

int iw_tx_read_req(struct iw_tx *tx, const struct rdmap_read_req *rr)
{
	uint8_t body[RDMAP_READ_REQ_LEN];
	struct iovec iov = { body, sizeof(body) };
	struct ddp_hdr h;

	rdmap_read_req_encode(rr, body);
	iw_untagged_tmpl(tx, &h, RDMAP_OP_READ_REQ, RDMAP_QN_READ_REQ);
	return iw_tx_message(tx, &h, &iov, 1);
}

int iw_tx_terminate(struct iw_tx *tx, const struct rdmap_term *t)
{
	uint8_t body[RDMAP_TERM_MAX_LEN];
	ssize_t n = rdmap_term_encode(t, body, sizeof(body));
	struct ddp_hdr h;

	if (n < 0)
		return (int)n;
	struct iovec iov = { body, (size_t)n };
	iw_untagged_tmpl(tx, &h, RDMAP_OP_TERMINATE, RDMAP_QN_TERMINATE);
	return iw_tx_message(tx, &h, &iov, 1);
}

int iw_tx_atomic_req(struct iw_tx *tx, const struct rdmap_atomic_req *r)
{
	uint8_t body[RDMAP_ATOMIC_REQ_LEN];
	struct iovec iov = { body, sizeof(body) };
	struct ddp_hdr h;

	rdmap_atomic_req_encode(r, body);
	iw_untagged_tmpl(tx, &h, RDMAP_OP_ATOMIC_REQ, RDMAP_QN_READ_REQ);
	return iw_tx_message(tx, &h, &iov, 1);
}

void iw_tx_atomic_resp_hdr(struct iw_tx *tx, struct ddp_hdr *h)
{
	iw_untagged_tmpl(tx, h, RDMAP_OP_ATOMIC_RESP, RDMAP_QN_ATOMIC_RESP);
	h->last = true;
}
