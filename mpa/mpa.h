/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* MPA (RFC 5044 + RFC 6581): connection setup frames, negotiation, FPDU
 * framing and deframing.  Pure code over byte buffers: no sockets here.
 * Internal calls return 0 / a length on success and -errno on failure;
 * protocol errors also fill a struct xs_err with the Terminate triple. */
#ifndef MPA_H
#define MPA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "util/xs_err.h"
#include "mpa/mpa_wire.h"

/* ---- Request / Reply frames ------------------------------------------ */

enum mpa_frame_type {
	MPA_REQUEST = 1,
	MPA_REPLY = 2,
};

struct mpa_frame {
	enum mpa_frame_type type;
	bool markers; /* M */
	bool crc; /* C */
	bool reject; /* R (Reply only) */
	bool enhanced; /* RFC 6581 flag: the IRD/ORD header leads the PD */
	/* RFC 7306 supported: MPA_FLAG_EXT_REQ in a Request, MPA_FLAG_EXT_REP
	 * in a Reply (the other bit of the two is just reserved there) */
	bool rdmap_ext;
	uint8_t res_bits; /* remaining reserved flag bits as seen/sent */
	uint8_t rev;
	/* RFC 6581 header, meaningful when rev == 2 && enhanced */
	uint16_t ird, ord; /* 14 bits each */
	bool p2p; /* A */
	bool rtr_send, rtr_write, rtr_read; /* B, C, D */
	/* ULP private data (after the IRD/ORD header when enhanced).  On decode
	 * it points into the caller's buffer. */
	const uint8_t *pdata;
	uint16_t pdata_len;
};

/* Bytes the encoded frame occupies. */
size_t mpa_frame_len(const struct mpa_frame *f);

/* Encode into buf.  Returns the length, -EMSGSIZE if cap is too small,
 * -EINVAL if the frame is not encodable (PD over 512 bytes, IRD/ORD > 0x3fff,
 * reject on a Request, rev not 1/2). */
ssize_t mpa_frame_encode(const struct mpa_frame *f, uint8_t *buf, size_t cap);

/* Decode a frame of the expected type from the start of buf (bytes as they
 * arrived; may be incomplete).  Never reads past the PD_Length the peer
 * announced.  Returns:
 *   0        complete; *frame_len = bytes used (PD included)
 *   -EAGAIN  need more; *frame_len = total bytes needed so far (20 until the
 *            header is in, then 20 + PD_Length)
 *   -EPROTO  invalid (wrong key, PD_Length > 512, rev not 1/2, IRD/ORD header
 *            missing although enhanced, Reject on a Request); err = LLP/0/0x04 */
int mpa_frame_decode(const uint8_t *buf, size_t len, enum mpa_frame_type expect,
		     struct mpa_frame *f, size_t *frame_len, struct xs_err *err);

/* ---- Negotiation ----------------------------------------------------- */

enum mpa_rtr {
	MPA_RTR_NONE = 0,
	MPA_RTR_SEND = 1, /* zero-length Send */
	MPA_RTR_WRITE = 2, /* zero-length RDMA Write */
	MPA_RTR_READ = 4, /* zero-length RDMA Read */
};
#define MPA_RTR_ALL (MPA_RTR_SEND | MPA_RTR_WRITE | MPA_RTR_READ)

/* What one endpoint wants and can do. */
struct mpa_prefs {
	uint8_t rev; /* highest revision spoken: 1 or 2 (2 sends the RFC 6581 header) */
	bool crc; /* ask for CRC */
	bool crc_refuse; /* responder: reject a peer that asks for CRC (siw's mpa_crc_strict) */
	bool markers_rx; /* want Markers on the data we receive */
	bool markers_tx_ok; /* willing to send Markers if the peer wants them */
	uint16_t ird, ord; /* resources offered (IRD) and wanted (ORD), <= 0x3fff */
	bool ord_strict; /* initiator: fail (Insufficient IRD) rather than lower ORD */
	bool p2p; /* initiator: request peer-to-peer mode with an RTR */
	uint8_t rtr_mask; /* MPA_RTR_* offered (initiator) / accepted (responder) */
	const uint8_t *pdata; /* ULP private data to send */
	uint16_t pdata_len;
	bool rdmap_ext; /* announce RFC 7306 support (MPA_FLAG_EXT_*) */
};

/* Fill prefs with the defaults that talk to Linux siw: rev 2, no markers
 * wanted but sent on request, CRC off unless asked, IRD/ORD 1/1, no P2P,
 * RFC 7306 not announced (an owner that implements it sets rdmap_ext). */
void mpa_prefs_default(struct mpa_prefs *p);

/* The outcome both ends operate with after the exchange. */
struct mpa_agreed {
	uint8_t rev;
	bool enhanced; /* IRD/ORD were negotiated (rev 2 + flag on both frames) */
	bool crc;
	bool markers_tx; /* we insert Markers */
	bool markers_rx; /* the peer inserts Markers */
	uint16_t ird, ord; /* our inbound / outbound RDMA Read limits */
	bool p2p;
	enum mpa_rtr rtr; /* the RTR the initiator sends (MPA_RTR_NONE: none) */
	bool rdmap_ext; /* both ends announced RFC 7306: its opcodes may be used */
};

/* Initiator: build the Request from prefs (pdata points at prefs' buffer). */
void mpa_request_build(const struct mpa_prefs *local, struct mpa_frame *req);

/* Responder: decide on a decoded Request.  Always fills *reply.
 *   0             accept: reply has R=0, *out is the agreement
 *   -ECONNREFUSED reject: reply has R=1; err says why (e.g. LLP/0/0x07 no
 *                 matching RTR, LLP/0/0x04 markers or CRC refused)
 * The responder echoes min(request rev, our rev), sets C if either side asks,
 * answers M with its own wish, and picks one RTR (Write, then Read, then Send). */
int mpa_respond(const struct mpa_prefs *local, const struct mpa_frame *req,
		struct mpa_frame *reply, struct mpa_agreed *out, struct xs_err *err);

/* Responder: a reject the ULP asked for (rdma_reject): R=1 with our PD. */
void mpa_reject_build(const struct mpa_prefs *local, const struct mpa_frame *req,
		      struct mpa_frame *reply);

/* Initiator: check the Reply against the Request we sent.
 *   0             *out is the agreement
 *   -ECONNREFUSED the peer rejected (R=1)
 *   -EPROTO       the Reply breaks the rules; err says how: LLP/0/0x04
 *                 (revision above ours, markers we cannot send), LLP/0/0x06
 *                 (peer ORD above our IRD, or IRD below our ORD with
 *                 ord_strict), LLP/0/0x07 (RTR not one of those offered) */
int mpa_initiator_complete(const struct mpa_prefs *local, const struct mpa_frame *req,
			   const struct mpa_frame *reply, struct mpa_agreed *out,
			   struct xs_err *err);

/* ---- FPDU sizing ----------------------------------------------------- */

/* Largest ULPDU whose FPDU fits one TCP segment of mss bytes (RFC 5044
 * section 4.4: MULPDU = EMSS - (6 + 4 * ceil(EMSS / 512) + EMSS mod 4) with
 * Markers, EMSS - (6 + EMSS mod 4) without), capped at 65535. 0 if mss is
 * too small to carry anything. */
size_t mpa_mulpdu(size_t mss, bool markers);

/* Pad octets after a ULPDU of len bytes (ULPDU_LENGTH + ULPDU + pad is a
 * multiple of 4). */
static inline size_t mpa_pad_len(size_t ulpdu_len)
{
	return (4 - ((ulpdu_len + MPA_HDR_LEN) & 3)) & 3;
}

/* ---- FPDU transmit --------------------------------------------------- */

struct mpa_tx {
	bool markers;
	bool crc;
	uint32_t pos; /* stream octets sent since the first FPDU (mod 2^32) */
};

void mpa_tx_init(struct mpa_tx *tx, bool markers, bool crc);

/* Wire length of the next FPDU carrying ulpdu_len bytes (markers counted at
 * the current stream position). */
size_t mpa_tx_wire_len(const struct mpa_tx *tx, size_t ulpdu_len);

#define MPA_TX_MAX_ULP_IOV 8
#define MPA_TX_MAX_MARKERS ((MPA_ULPDU_MAX + MPA_HDR_LEN + 3 + MPA_CRC_LEN) / (MPA_MARKER_INTERVAL - MPA_MARKER_LEN) + 2)
#define MPA_TX_MAX_IOV (2 * MPA_TX_MAX_MARKERS + MPA_TX_MAX_ULP_IOV + 4)

/* An FPDU as a gather list: the caller's ULPDU bytes are referenced, not
 * copied; header, markers, pad and CRC live in this struct. */
/* Octets after the ULPDU_LENGTH field where the caller may build the start
 * of its ULPDU (the DDP header): passed as the first ULPDU piece, it leaves
 * with the length field in one iovec and one CRC update. */
#define MPA_TX_HDR_ROOM 32

struct mpa_txframe {
	struct iovec iov[MPA_TX_MAX_IOV];
	int iovcnt;
	size_t wire_len;
	uint8_t hdr[MPA_HDR_LEN + MPA_TX_HDR_ROOM];
	uint8_t trailer[4 + MPA_CRC_LEN]; /* pad + CRC */
	uint8_t markers[MPA_TX_MAX_MARKERS][MPA_MARKER_LEN];
};

/* Frame one ULPDU given as up to MPA_TX_MAX_ULP_IOV pieces.  Computes the
 * CRC (when enabled; otherwise the field is zero), places Markers and
 * advances tx->pos.  Returns 0, -EMSGSIZE (ULPDU over 65535) or -EINVAL.
 * The frame's iovecs stay valid while *out and the ULPDU buffers live. */
int mpa_tx_frame(struct mpa_tx *tx, const struct iovec *ulpdu, int cnt, struct mpa_txframe *out);

/* Same, flattened into out (cap bytes).  Returns the wire length or -errno. */
ssize_t mpa_tx_frame_copy(struct mpa_tx *tx, const struct iovec *ulpdu, int cnt,
			  uint8_t *out, size_t cap);

/* ---- FPDU receive ---------------------------------------------------- */

enum mpa_rx_state {
	MPA_RX_HDR, /* ULPDU_LENGTH */
	MPA_RX_DATA, /* ULPDU bytes */
	MPA_RX_PAD,
	MPA_RX_CRC,
};

struct mpa_rx {
	bool markers;
	bool crc;
	size_t max_ulpdu; /* ULPDU_LENGTH above this is an error */
	uint32_t pos; /* stream octets received since the first FPDU (mod 2^32) */
	enum mpa_rx_state state;
	uint32_t fpdu_hdr_pos; /* stream position of this FPDU's ULPDU_LENGTH */
	uint32_t fpdu_start_pos; /* stream position of its first octet (a marker may lead) */
	uint16_t ulpdu_len;
	uint32_t done; /* octets of the current field consumed */
	uint32_t crc_state;
	uint8_t fld[4]; /* partial header / marker / CRC */
	uint8_t fld_len;
	uint8_t mk[MPA_MARKER_LEN]; /* partial marker */
	uint8_t mk_len; /* > 0 while inside a marker */
	bool in_fpdu; /* between the first octet of an FPDU and its CRC */
	/* CRC input not yet fed to ISA-L: contiguous pieces of one input
	 * buffer are merged into one update (each call costs ~15 ns) */
	const uint8_t *crc_pend;
	size_t crc_pend_len;
};

/* max_ulpdu: the MULPDU we announced/accept (0 = 65535). */
void mpa_rx_init(struct mpa_rx *rx, bool markers, bool crc, size_t max_ulpdu);

/* Start at a known stream position (after a resync; 0 at the first FPDU). */
void mpa_rx_reset_at(struct mpa_rx *rx, uint32_t pos);

enum mpa_rx_event_type {
	MPA_RX_EV_NEED_MORE = 0, /* all input consumed, nothing to report */
	MPA_RX_EV_DATA = 1, /* ULPDU bytes: data/len point into the input */
	MPA_RX_EV_FPDU_END = 2, /* the FPDU ended and its CRC is good */
};

struct mpa_rx_event {
	enum mpa_rx_event_type type;
	const uint8_t *data; /* DATA: into the caller's input */
	size_t len; /* DATA: bytes */
	uint32_t ulpdu_off; /* DATA: offset of data within the ULPDU */
	uint16_t ulpdu_len; /* DATA, FPDU_END: ULPDU_LENGTH of this FPDU */
};

/* Consume input (any chunking, down to one byte) until an event.  Returns the
 * event type (>= 0) with *consumed input bytes used, or -EPROTO with err set:
 * LLP/0/0x02 bad CRC; LLP/0/0x03 a Marker whose FPDUPTR disagrees with the
 * framing, or a ULPDU_LENGTH above max_ulpdu (the length field is what the
 * Marker check protects, so both are "Marker and ULPDU Length mismatch").
 * After an error the stream is dead; nothing past the announced lengths is
 * ever read.
 * DATA events hand out ULPDU bytes before the CRC is checked (so DDP can place
 * them directly); FPDU_END says the CRC was good.  Callers must not complete a
 * message before its last FPDU_END. */
int mpa_rx_step(struct mpa_rx *rx, const uint8_t *in, size_t len, size_t *consumed,
		struct mpa_rx_event *ev, struct xs_err *err);

/* Direct placement: in the DATA state, how many ULPDU octets can be received
 * contiguously before the next Marker or the end of the ULPDU (0 in other
 * states).  The caller reads that many bytes into its own buffer and reports
 * them with mpa_rx_data_absorb(), which updates the CRC and position. */
size_t mpa_rx_data_window(const struct mpa_rx *rx);
int mpa_rx_data_absorb(struct mpa_rx *rx, const uint8_t *data, size_t n);

/* Re-synchronise on bytes that start mid-stream at stream position pos
 * (counted like mpa_rx.pos).  Uses the Markers, in order, to find the first
 * FPDU start they reveal inside buf (the FPDU a Marker points into, or the
 * one after it when that FPDU began before buf and its ULPDU_LENGTH is in
 * buf): returns 0 with *fpdu_off = its offset in buf (a leading Marker
 * included), -EAGAIN if buf holds no usable Marker yet, -EPROTO
 * (LLP/0/0x03) if a Marker points at an impossible place. */
int mpa_rx_resync(const uint8_t *buf, size_t len, uint32_t pos, size_t *fpdu_off,
		  struct xs_err *err);

#endif
