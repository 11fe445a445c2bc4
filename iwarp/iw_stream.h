/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* One iWARP stream (RDMAP over DDP over MPA) as pure byte-buffer code:
 * iw_tx turns RDMAP messages into framed FPDUs handed to a writer callback;
 * iw_rx turns received bytes into placed data and delivered messages.
 * Sockets, threads and verbs objects live above this (the engine). */
#ifndef IW_STREAM_H
#define IW_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "ddp/ddp.h"
#include "iwarp/rdmap.h"
#include "iwarp/rdmap_ext.h"
#include "mpa/mpa.h"

/* ---- transmit ------------------------------------------------------------ */

/* untagged queues: QN 0-2 (RFC 5040) and the Atomic Response's QN 3 (RFC 7306) */
#define IW_QN_COUNT 4

/* Writes one FPDU (iov/cnt, total len octets) to the LLP.  Returns 0 or -errno.
 * One call = one FPDU, so a caller that writes each with one writev() keeps
 * FPDUs aligned to TCP segments. */
typedef int (*iw_tx_write_fn)(void *ctx, const struct iovec *iov, int cnt, size_t len);

struct iw_tx {
	struct mpa_tx mpa;
	size_t mulpdu; /* largest ULPDU per FPDU */
	uint32_t msn[IW_QN_COUNT]; /* next MSN per untagged queue (QN 0-3) */
	iw_tx_write_fn write;
	void *write_ctx;
	struct mpa_txframe frame; /* scratch for the FPDU being written */
};

/* mulpdu from mpa_mulpdu(mss, markers).  MSNs start at 1 (RFC 5041). */
int iw_tx_init(struct iw_tx *tx, bool markers, bool crc, size_t mulpdu, iw_tx_write_fn write,
	       void *ctx);

/* Send, Send with SE, with Invalidate (inv_stag used for *_INV opcodes). */
int iw_tx_send(struct iw_tx *tx, enum rdmap_opcode op, uint32_t inv_stag, const struct iovec *iov,
	       int cnt);
/* RDMA Write (RDMAP_OP_WRITE) or Read Response (RDMAP_OP_READ_RESP) to (stag, to). */
int iw_tx_tagged(struct iw_tx *tx, enum rdmap_opcode op, uint32_t stag, uint64_t to,
		 const struct iovec *iov, int cnt);
int iw_tx_read_req(struct iw_tx *tx, const struct rdmap_read_req *rr);
/* RFC 7306 (a stream that agreed on it): an Atomic Request on QN 1.
 * Immediate Data goes through iw_tx_send (RDMAP_OP_IMM_DATA*, 8 octets). */
int iw_tx_atomic_req(struct iw_tx *tx, const struct rdmap_atomic_req *r);
/* The DDP header of the next Atomic Response (QN 3, its MSN taken, L set):
 * the engine frames the 12-octet body itself, in order with its Read
 * Responses. */
void iw_tx_atomic_resp_hdr(struct iw_tx *tx, struct ddp_hdr *h);
int iw_tx_terminate(struct iw_tx *tx, const struct rdmap_term *t);

/* ---- receive ------------------------------------------------------------- */

struct iw_rx_ops {
	/* An untagged message completed, in MSN order on its queue
	 * (Send*, Read Request on QN 1, Terminate on QN 2). */
	void (*deliver)(void *ctx, enum rdmap_opcode op, uint32_t qn, const struct ddp_delivery *d);
	/* The last segment of a tagged message (Write, Read Response) was placed
	 * and its FPDU passed the CRC.  Optional. */
	void (*tagged_last)(void *ctx, enum rdmap_opcode op, const struct ddp_hdr *h);
};

struct iw_rx {
	struct mpa_rx mpa;
	struct ddp_rx ddp;
	const struct iw_rx_ops *ops;
	void *ops_ctx;
	/* the DDP segment in progress */
	uint8_t hdr[DDP_MAX_HDR_LEN];
	uint8_t hdr_got;
	uint8_t hdr_len;
	bool hdr_done;
	struct ddp_hdr h;
	enum rdmap_opcode op;
	uint8_t *dst; /* where payload octet 0 of this segment goes */
	uint32_t payload_len;
	uint32_t ulp_next; /* next ULPDU offset expected from MPA */
	uint64_t fpdus; /* FPDUs accepted (statistics) */
	/* The owner's choice: a Send (QN 0) finding no posted receive stalls
	 * the stream (iw_rx_input_part says -EAGAIN) instead of failing it */
	bool rnr;
	bool stalled; /* that segment's header is in; its payload is not placed */
	/* RFC 7306 opcodes are valid (both ends agreed on the extension) */
	bool ext;
	/* Immediate Data (QN 0): its 8 octets land here, not in a receive
	 * buffer; imm_take: it consumes one (not attached to a Send), known
	 * when its header is in only if its body came with it (imm_known) */
	uint8_t imm_body[RDMAP_IMM_LEN];
	bool imm_take, imm_known;
	uint16_t stall_ulpdu_len;
	uint32_t stall_data; /* payload octets MPA took: the next input's first */
};

/* The owner adds queues to rx->ddp (ddp_rx_add_queue) and posts buffers. */
void iw_rx_init(struct iw_rx *rx, bool markers, bool crc, size_t max_ulpdu,
		ddp_tagged_resolve_fn resolve, void *resolve_ctx, const struct iw_rx_ops *ops,
		void *ops_ctx);

/* Feed received octets (any chunking).  Returns 0 when all were consumed, or
 * -EPROTO with err = the Terminate triple to send (the stream is dead). */
int iw_rx_input(struct iw_rx *rx, const uint8_t *buf, size_t len, struct xs_err *err);

/* As iw_rx_input, and with rx->rnr set a Send that finds no posted
 * receive stops the stream before its payload: -EAGAIN, *used = octets
 * consumed (the caller keeps buf[*used..len) and feeds it again, with what
 * follows, once a receive may be there; until one is, -EAGAIN with
 * *used = 0).  With rx->rnr cleared, a stalled Send fails as
 * iw_rx_input would have (DDP/2/0x02). */
int iw_rx_input_part(struct iw_rx *rx, const uint8_t *buf, size_t len, size_t *used,
		     struct xs_err *err);

/* Direct placement: when the next octets are payload whose destination is
 * known, *dst and the returned count say where up to that many octets may be
 * received; the caller then reports them with iw_rx_direct_done().  Returns 0
 * when the next octets must go through iw_rx_input(). */
size_t iw_rx_direct(const struct iw_rx *rx, uint8_t **dst);
int iw_rx_direct_done(struct iw_rx *rx, size_t n, struct xs_err *err);

#endif
