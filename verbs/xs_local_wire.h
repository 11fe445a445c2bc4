/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The messages libiwarp's processes of one host pass each other over
 * abstract Unix datagram names (docs/architecture.md section 8), encoded
 * and decoded here as pure code over byte buffers: no sockets, no
 * globals, any thread.  Senders and receivers both use these, so what one
 * writes is what the other checks.  Any process of the network namespace
 * can send to those names, so a decoder trusts no octet: each rejection
 * has its reason (enum xs_local_err), the caller counts it for xsock-stat
 * (local_bad; XS_LOCAL_NOQP: local_noqp) and drops the datagram.
 *
 * RoCE forward (xs_roce_fwd.c, to @xsock-rqp-<ip>-<qpn>): packets for a
 * QP of another process that reached a receive socket of ours:
 *     be16 segment size (1..65535), be16 version (0),
 *     the packets, of the segment size back to back (the last may be
 *     shorter), each at least a BTH, all of them for the name's QP;
 *     XS_LOCAL_FWD_MAX octets at most.
 * CM forward (xs_roce_cm_io.c, to @xsock-rcm-sid4-/sid6-<sid> or
 * @xsock-rcm-<tag>): a MAD for the process that owns its listener or its
 * comm ID:
 *     family (4 or 6), the receiver's address, the peer's (16 octets
 *     each: an IPv4 address in the first 4, the other 12 zero),
 *     the MAD (ROCE_MAD_LEN octets); exactly XS_LOCAL_CM_MAD_LEN octets.
 * CM stray (to the process's own @xsock-rcm-<tag>): a UDP datagram one
 * of its QP's sockets took before it was connected, for its CM engine to
 * take as its port 4791 socket would have:
 *     XS_LOCAL_STRAY | family, the sender's address, the receiver's,
 *     be16 the sender's UDP port, the UDP payload (1..XS_LOCAL_PKT_MAX
 *     octets). */
#ifndef XS_LOCAL_WIRE_H
#define XS_LOCAL_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "roce/roce_cm_wire.h"
#include "roce/roce_wire.h"

#pragma GCC visibility push(hidden)

enum xs_local_err {
	XS_LOCAL_OK,
	XS_LOCAL_SHORT, /* shorter than its header, or than its fixed length */
	XS_LOCAL_LONG, /* longer than the format allows (or truncated on receipt) */
	XS_LOCAL_KIND, /* an unknown version, kind or family */
	XS_LOCAL_ADDR, /* an IPv4 address with octets after its 4 */
	XS_LOCAL_SEG, /* segment size 0, or a packet shorter than a BTH */
	XS_LOCAL_NOQP, /* a packet for another QP than the one named */
};

/* A few words for XSOCK_DEBUG's line. */
const char *xs_local_err_str(enum xs_local_err e);

/* ---- RoCE forward ----------------------------------------------------------- */

#define XS_LOCAL_FWD_HDR 4
#define XS_LOCAL_FWD_VERSION 0
#define XS_LOCAL_FWD_PKTS_MAX 65536 /* one UDP datagram, GRO'd or not */
#define XS_LOCAL_FWD_MAX (XS_LOCAL_FWD_HDR + XS_LOCAL_FWD_PKTS_MAX)

/* A decoded forward: its packets, still in the buffer decoded. */
struct xs_local_fwd {
	size_t seg; /* each packet's size; the last may be shorter */
	const uint8_t *pkts;
	size_t len; /* all the packets' octets */
};

/* The header of a forward of packets of seg octets (1..65535): the
 * packets follow it (the sender's second iovec). */
void xs_local_fwd_hdr(uint8_t hdr[XS_LOCAL_FWD_HDR], size_t seg);

/* A forward datagram for QP qpn.  len is its length as received (recv's
 * with MSG_TRUNC); buf holds the first min(len, XS_LOCAL_FWD_MAX) octets:
 * a longer one is XS_LOCAL_LONG before anything is read.  XS_LOCAL_OK with
 * *f set, or SHORT (no packet), LONG, KIND (version), SEG, NOQP (a packet
 * for another QP: none of the datagram is taken). */
enum xs_local_err xs_local_fwd_decode(const uint8_t *buf, size_t len, uint32_t qpn,
				      struct xs_local_fwd *f);

/* The next packet of a decoded forward (f advances past it): false when
 * none is left. */
bool xs_local_fwd_next(struct xs_local_fwd *f, const uint8_t **pkt, size_t *len);

/* ---- CM forward and stray --------------------------------------------------- */

#define XS_LOCAL_STRAY 0x80 /* the first octet's flag: a stray */
#define XS_LOCAL_CM_MAD_LEN (1 + 16 + 16 + ROCE_MAD_LEN)
#define XS_LOCAL_STRAY_HDR (1 + 16 + 16 + 2)
/* the largest packet a stray carries: an RC packet of a 4096-octet path
 * MTU with its headers (the CM's XRCM_RX_MAX) */
#define XS_LOCAL_PKT_MAX (ROCE_MAX_HDR_LEN + 4096 + 3 + ROCE_ICRC_LEN)
#define XS_LOCAL_STRAY_MAX (XS_LOCAL_STRAY_HDR + XS_LOCAL_PKT_MAX)
/* the largest CM datagram of either kind: a receive buffer's size */
#define XS_LOCAL_CM_MAX (XS_LOCAL_STRAY_MAX > XS_LOCAL_CM_MAD_LEN ? XS_LOCAL_STRAY_MAX : \
								      XS_LOCAL_CM_MAD_LEN)

enum xs_local_cm_kind { XS_LOCAL_CM_MAD, XS_LOCAL_CM_STRAY };

/* A CM datagram.  The addresses are the receiver's view: local is the
 * receiver's, peer the other end's (the stray's sender). */
struct xs_local_cm {
	enum xs_local_cm_kind kind;
	int family; /* AF_INET or AF_INET6: both addresses' */
	uint8_t local[16], peer[16]; /* IPv4: the first 4, the rest 0 */
	uint16_t port; /* STRAY: the sender's UDP port (host order) */
	const uint8_t *data; /* MAD: ROCE_MAD_LEN octets; STRAY: the UDP payload */
	size_t len;
};

/* m into out (cap octets): the length, or 0 when m is not one of the two
 * kinds (family, a MAD of another length, a stray payload of 0 or more
 * than XS_LOCAL_PKT_MAX octets) or cap is too small.  An IPv4 address's
 * last 12 octets go as zeros whatever m holds. */
size_t xs_local_cm_encode(const struct xs_local_cm *m, uint8_t *out, size_t cap);

/* A CM datagram of len octets as received (MSG_TRUNC's; buf holds
 * min(len, XS_LOCAL_CM_MAX)), either kind by its first octet: XS_LOCAL_OK
 * with *m set (data points into buf), or SHORT, LONG (a MAD forward not of
 * its one length counts as SHORT or LONG), KIND (first octet), ADDR. */
enum xs_local_err xs_local_cm_decode(const uint8_t *buf, size_t len, struct xs_local_cm *m);

#pragma GCC visibility pop

#endif
