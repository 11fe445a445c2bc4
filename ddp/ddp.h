/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* DDP (RFC 5041): header encode/decode, segmentation and placement.
 * Pure code over byte buffers, independent of MPA and sockets.  The layer
 * above (RDMAP) owns STags and posts untagged buffers.  Calls return 0 or a
 * length on success, -errno on failure; protocol violations also fill a
 * struct xs_err with the Terminate triple (Layer DDP unless noted). */
#ifndef DDP_H
#define DDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/xs_err.h"
#include "ddp/ddp_wire.h"

struct ddp_hdr {
	bool tagged; /* T */
	bool last; /* L */
	uint8_t dv; /* DDP version (1) */
	uint8_t rsvdulp; /* byte 1: RDMAP control */
	/* tagged */
	uint32_t stag;
	uint64_t to;
	/* untagged */
	uint32_t rsvdulp2; /* 4 octets for the ULP (RDMAP: Invalidate STag) */
	uint32_t qn;
	uint32_t msn;
	uint32_t mo;
};

static inline size_t ddp_hdr_len(bool tagged)
{
	return tagged ? DDP_TAGGED_HDR_LEN : DDP_UNTAGGED_HDR_LEN;
}

/* Header length announced by a segment's first octet. */
static inline size_t ddp_hdr_len_from_byte(uint8_t b0)
{
	return ddp_hdr_len((b0 & DDP_FLAG_T) != 0);
}

/* Encode; buf must hold ddp_hdr_len(h->tagged) octets.  Returns that length.
 * Reserved bits are sent as zero; h->dv is sent as given (set DDP_VERSION),
 * so tools can craft a bad version. */
size_t ddp_hdr_encode(const struct ddp_hdr *h, uint8_t *buf);

/* Decode the header at the start of a segment of len octets.
 *   0        *h filled (the segment's payload starts at ddp_hdr_len(h->tagged))
 *   -EAGAIN  len is shorter than the header announces (not an error while a
 *            header is still arriving; a complete ULPDU that short is)
 *   -EPROTO  DV != 1: err = DDP/1/0x04 (tagged) or DDP/2/0x06 (untagged) */
int ddp_hdr_decode(const uint8_t *buf, size_t len, struct ddp_hdr *h, struct xs_err *err);

/* ---- Segmentation ------------------------------------------------------ */

/* Splits a message of msg_len payload octets into segments whose ULPDU
 * (header + payload) fits mulpdu.  A zero-length message is one segment. */
struct ddp_segmenter {
	struct ddp_hdr tmpl;
	size_t msg_len;
	size_t max_payload;
	size_t off;
	bool done;
};

/* Returns 0, or -EINVAL if mulpdu cannot carry the header plus one octet or
 * the offsets cannot express the message (untagged: msg_len > UINT32_MAX;
 * tagged: tmpl->to + msg_len > UINT64_MAX, which the receiver calls TO wrap). */
int ddp_seg_init(struct ddp_segmenter *s, const struct ddp_hdr *tmpl, size_t msg_len,
		 size_t mulpdu);

/* Next segment: *hdr is the template with TO (tagged: tmpl.to + off) or MO
 * (untagged: off) and L set on the last; *off and *len say which payload octets
 * it carries.  Returns true while there is a segment. */
bool ddp_seg_next(struct ddp_segmenter *s, struct ddp_hdr *hdr, size_t *off, size_t *len);

/* Number of segments a message needs. */
size_t ddp_seg_count(size_t msg_len, size_t mulpdu, bool tagged);

/* ---- Placement --------------------------------------------------------- */

/* Tagged lookup, supplied by the layer above: resolve (stag, to, len) to the
 * destination for len octets, or fail with the Terminate triple it wants sent
 * (e.g. DDP/1/0x00 unknown STag, DDP/1/0x01 out of bounds, RDMAP/1/0x02
 * access rights).  DDP itself checks TO wrap before calling. */
typedef int (*ddp_tagged_resolve_fn)(void *ctx, uint32_t stag, uint64_t to, uint32_t len,
				     uint8_t **dst, struct xs_err *err);

/* Out-of-order bookkeeping per message: disjoint byte ranges already placed.
 * Fixed capacity keeps memory bounded; a message fragmented beyond it is
 * refused (DDP/0/0x00) instead of growing. */
#define DDP_OOO_MAX_RANGES 64

struct ddp_range {
	uint32_t lo, hi; /* [lo, hi) */
};

/* One posted untagged buffer and the state of the message placed into it. */
struct ddp_rxbuf {
	uint8_t *addr;
	uint32_t len;
	void *cookie;
	bool last_seen; /* the L segment arrived: msg_len is known */
	uint32_t msg_len;
	uint32_t placed; /* distinct octets placed */
	uint8_t rsvdulp; /* from the last segment seen (RDMAP control) */
	uint32_t rsvdulp2; /* idem (Invalidate STag) */
	uint16_t nranges;
	struct ddp_range ranges[DDP_OOO_MAX_RANGES];
};

struct ddp_queue;

/* A queue fed on demand (a shared receive queue above): called when a
 * segment starts the message just past the posted buffers, to post one
 * (ddp_queue_post) and return 0, or return < 0 when there is none (the
 * segment then fails with DDP/2/0x02 as without a refill).  Runs where
 * placement runs, under whatever lock the owner places under. */
typedef int (*ddp_refill_fn)(void *ctx, struct ddp_queue *q);

/* Untagged queue (one per QN).  MSN n goes to the (n - msn_head)-th posted
 * buffer; messages are delivered strictly in MSN order. */
struct ddp_queue {
	uint32_t qn;
	uint32_t msn_head; /* MSN of the oldest undelivered message */
	unsigned depth; /* ring capacity */
	unsigned head; /* ring index of msn_head */
	unsigned count; /* posted, undelivered buffers */
	struct ddp_rxbuf *ring;
	ddp_refill_fn refill; /* optional, set by the owner after init */
	void *refill_ctx;
};

/* depth: maximum posted buffers; msn_start: first MSN (RFC 5041: 1). */
int ddp_queue_init(struct ddp_queue *q, uint32_t qn, unsigned depth, uint32_t msn_start);
void ddp_queue_destroy(struct ddp_queue *q);
/* -ENOSPC when depth buffers are outstanding. */
int ddp_queue_post(struct ddp_queue *q, uint8_t *addr, uint32_t len, void *cookie);

struct ddp_delivery {
	void *cookie;
	uint8_t *addr;
	uint32_t msg_len;
	uint32_t msn;
	uint8_t rsvdulp;
	uint32_t rsvdulp2;
};

/* Pop the next message if it is complete (all octets placed, L seen) and
 * every earlier one was delivered: 1 with *d filled, 0 if none is ready. */
int ddp_queue_deliver(struct ddp_queue *q, struct ddp_delivery *d);

/* Flush: pop the oldest posted buffer whatever its state (QP error path).
 * 1 with *d filled (msg_len = octets placed so far), 0 if empty. */
int ddp_queue_flush(struct ddp_queue *q, struct ddp_delivery *d);

/* A message with MSN msn that takes its place in q's MSN order but is
 * placed by the layer above, not into a posted buffer (RFC 7306 Immediate
 * Data).  take: it consumes the buffer its MSN names (nothing may have
 * been placed into it; the refill is asked for one), returned in *d with
 * msg_len 0; !take: it consumes none, the posted buffers serve the MSNs
 * after it (*d zeroed but msn).  msn must be the next to deliver.  0, or
 * -EPROTO with DDP/2/0x03 (another MSN, or octets already placed where
 * none may be) or DDP/2/0x02 (take, no buffer). */
int ddp_queue_pass(struct ddp_queue *q, uint32_t msn, bool take, struct ddp_delivery *d,
		   struct xs_err *err);

#define DDP_MAX_QUEUES 4

/* Receive side of one DDP stream. */
struct ddp_rx {
	struct ddp_queue *queues[DDP_MAX_QUEUES]; /* indexed by QN; NULL = invalid */
	ddp_tagged_resolve_fn resolve;
	void *resolve_ctx;
};

void ddp_rx_init(struct ddp_rx *rx, ddp_tagged_resolve_fn resolve, void *ctx);
/* -EINVAL if qn >= DDP_MAX_QUEUES, -EEXIST if another queue has that QN. */
int ddp_rx_add_queue(struct ddp_rx *rx, struct ddp_queue *q);

/* Direct placement in two steps: find where len payload octets of this
 * segment go (all checks done here), then, once they are there, commit. */
int ddp_rx_target(struct ddp_rx *rx, const struct ddp_hdr *h, uint32_t len, uint8_t **dst,
		  struct xs_err *err);
/* Records the octets as placed (untagged: range bookkeeping, L). */
int ddp_rx_commit(struct ddp_rx *rx, const struct ddp_hdr *h, uint32_t len, struct xs_err *err);

/* target + memcpy + commit.  Untagged errors: DDP/2/0x01 invalid QN,
 * 0x02 MSN with no buffer posted, 0x03 MSN outside any valid range (already
 * delivered or more than 2^31 ahead), 0x04 MO beyond the buffer, 0x05 message
 * too long for the buffer (or segments disagree on its end); DDP/0/0x00 if
 * the message would need more than DDP_OOO_MAX_RANGES ranges.  A segment of a
 * delivered (or flushed) message is 0x03.  Tagged: DDP/1/0x03 TO wrap (also
 * when the segment would end exactly at 2^64, which no uint64 can bound),
 * then whatever resolve reports.  A failure writes nothing. */
int ddp_rx_place(struct ddp_rx *rx, const struct ddp_hdr *h, const uint8_t *payload,
		 uint32_t len, struct xs_err *err);

#endif
