/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* MPA wire format: RFC 5044, with the RFC 6581 enhanced connection setup.
 * Constants only; encode/decode lives in mpa_frame.c, mpa_tx.c, mpa_rx.c. */
#ifndef MPA_WIRE_H
#define MPA_WIRE_H

/* Request / Reply frame: Key(16) | M C R Res(5) | Rev(8) | PD_Length(16) | PD */
#define MPA_KEY_LEN 16
#define MPA_KEY_REQ "MPA ID Req Frame"
#define MPA_KEY_REP "MPA ID Rep Frame"
#define MPA_RR_HDR_LEN 20
#define MPA_PD_MAX 512 /* RFC 5044: PD_Length MUST NOT exceed 512 */
#define MPA_PD_MAX_SIW 256 /* what Linux siw accepts, incl. the IRD/ORD header */

#define MPA_FLAG_M 0x80 /* sender of this frame wants Markers on what it receives */
#define MPA_FLAG_C 0x40 /* CRC */
#define MPA_FLAG_R 0x20 /* Reject (Reply only) */
#define MPA_FLAG_ENHANCED 0x10 /* RFC 6581: PD starts with the IRD/ORD header */
#define MPA_FLAG_RES_MASK 0x0f /* reserved; siw's try_gso uses 0x08 */
/* xsock: RFC 7306 (Atomics, Immediate Data) supported, one reserved bit
 * per direction.  Linux siw builds its Reply from the Request it got
 * (siw_proc_mpareq rewrites key, M, C, R and keeps the rest), so a bit we
 * set in a Request comes back in siw's Reply: the Reply's answer must be
 * another bit, one no Request ever carries.  RFC 5044 reserved bits are
 * "not checked on receive": siw, and xsock before this, ignore both. */
#define MPA_FLAG_EXT_REQ 0x04 /* Request: the initiator supports RFC 7306 */
#define MPA_FLAG_EXT_REP 0x02 /* Reply: so does the responder, both use it */

#define MPA_REV_1 1
#define MPA_REV_2 2 /* RFC 6581 */

/* RFC 6581 IRD/ORD header: |A|B| IRD(14) |C|D| ORD(14)| */
#define MPA_IRDORD_LEN 4
#define MPA_IRD_P2P 0x8000 /* A: peer-to-peer, an RTR follows the Reply */
#define MPA_IRD_RTR_SEND 0x4000 /* B: zero-length Send RTR */
#define MPA_ORD_RTR_WRITE 0x8000 /* C: zero-length RDMA Write RTR */
#define MPA_ORD_RTR_READ 0x4000 /* D: zero-length RDMA Read RTR */
#define MPA_IRDORD_MASK 0x3fff

/* FPDU: ULPDU_LENGTH(16) | ULPDU | PAD(0..3) | CRC(32), Markers every 512
 * octets of the stream counted from the first octet of the first FPDU. */
#define MPA_HDR_LEN 2
#define MPA_CRC_LEN 4
#define MPA_MARKER_LEN 4
#define MPA_MARKER_INTERVAL 512
#define MPA_ULPDU_MAX 65535

/* LLP (MPA) Terminate codes: Layer 2, EType 0 (RFC 5044 section 8,
 * extended by RFC 6581 section 7). */
#define MPA_ETYPE 0x0
#define MPA_ECODE_TCP_CLOSED 0x01 /* TCP connection closed, terminated or lost */
#define MPA_ECODE_CRC 0x02 /* MPA CRC error */
#define MPA_ECODE_MARKER 0x03 /* Marker and ULPDU_LENGTH field mismatch */
#define MPA_ECODE_BAD_RR 0x04 /* invalid MPA Request or Reply frame */
#define MPA_ECODE_LOCAL_CATASTROPHIC 0x05 /* RFC 6581 */
#define MPA_ECODE_INSUFFICIENT_IRD 0x06 /* RFC 6581 */
#define MPA_ECODE_NO_MATCHING_RTR 0x07 /* RFC 6581 */

#endif
