/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The messages between a process and xsock-roced (roced/README.md), the
 * host's RoCE v2 rendezvous: one daemon per network namespace owns UDP
 * 4791 and hands each process only its own QPs' packets and its own CM
 * MADs, over SOCK_SEQPACKET connections to the abstract name
 * @xsock-roced, each connection's owner known by SO_PEERCRED.  Pure code
 * over byte buffers: no sockets, no globals, any thread.  Both ends use
 * it, and the daemon trusts no octet a process sends: a message that
 * does not decode ends that process's connection.
 *
 * Every message: an 8-octet header,
 *     kind, version (ROCED_VERSION), be16 aux, be32 seq,
 * then the kind's body:
 *   CLAIM    (process: "a QP number, host-wide unique"; empty body);
 *            REPLY value: the QPN.  The connection becomes that QP's.
 *   PEER     (process, the QP's connection: where its peer is)
 *            family (4 or 6), 3 zeros, the local address, the peer's (16
 *            octets each: IPv4 in the first 4, 12 zeros after), be16 the
 *            peer's UDP source port (0: any), 2 zeros, be32 the peer's QPN;
 *            REPLY value: 1 when the peer's address is one of this
 *            host's (the two QPs' packets then travel between their
 *            connections, never by UDP), else 0.
 *   CM_OPEN  (process: "this connection is my CM's"; empty body);
 *            REPLY value: the CM's tag, the top 16 bits of every comm ID
 *            it makes (host-wide unique).
 *   LISTEN   (process: "REQs for this service come here"; the connection
 *            becomes the listener's) family, 7 zeros, be64 the service ID;
 *            REPLY: 0 or EADDRINUSE.
 *   PKTS     (both ways, the QP's connection; no reply) aux: the UDP
 *            source port they came from (daemon to process; 0: from a QP
 *            of this host, whose port is the one both ends computed),
 *            body: a RoCE forward (xs_local_wire.h: be16 segment size,
 *            be16 0, the packets back to back, all for one QP).
 *   MAD      (both ways, a CM's or a listener's connection; no reply)
 *            body: a CM forward (xs_local_wire.h: family, the receiver's
 *            address, the peer's, the MAD).
 *   REPLY    (daemon) aux: the request's kind, seq: the request's,
 *            be32 errno (0: done), be32 value.
 *   DIRECT   (daemon, a QP's connection; empty body, with one descriptor
 *            by SCM_RIGHTS) the QP and its peer of this host named each
 *            other: one end of a socketpair whose other end the peer got,
 *            on which their PKTS go from now on without the daemon (a
 *            socketpair's ends connect nowhere else, so only the two hold
 *            it).
 */
#ifndef ROCED_WIRE_H
#define ROCED_WIRE_H

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

#define ROCED_NAME "xsock-roced" /* the abstract name, without its NUL */
#define ROCED_VERSION 1
#define ROCED_HDR_LEN 8

enum roced_kind {
	ROCED_CLAIM = 1,
	ROCED_PEER = 2,
	ROCED_CM_OPEN = 3,
	ROCED_LISTEN = 4,
	ROCED_PKTS = 5,
	ROCED_MAD = 6,
	ROCED_REPLY = 7,
	ROCED_DIRECT = 8,
};

#define ROCED_PEER_LEN (ROCED_HDR_LEN + 4 + 16 + 16 + 4 + 4)
#define ROCED_LISTEN_LEN (ROCED_HDR_LEN + 8 + 8)
#define ROCED_REPLY_LEN (ROCED_HDR_LEN + 8)
#define ROCED_ERRNO_MAX 4095 /* a reply's errno is below this */

enum roced_err {
	ROCED_OK,
	ROCED_SHORT, /* shorter than its kind's length */
	ROCED_LONG, /* longer than its kind's length */
	ROCED_KIND, /* an unknown version or kind, or a family not 4 or 6 */
	ROCED_PAD, /* an octet that must be zero is not (reserved, padding, aux) */
	ROCED_ADDR, /* an IPv4 address with octets after its 4 */
	ROCED_VALUE, /* a QPN of 0, 1 or over 24 bits; an errno out of range */
};

/* A decoded message (or one to encode).  Addresses as in struct
 * xs_local_cm: 16 octets, IPv4 in the first 4. */
struct roced_msg {
	enum roced_kind kind;
	uint16_t aux; /* PKTS: the source port; REPLY: the request's kind */
	uint32_t seq;
	int family; /* PEER, LISTEN: AF_INET or AF_INET6 */
	uint8_t local[16], peer[16]; /* PEER */
	uint16_t peer_port; /* PEER */
	uint32_t peer_qpn; /* PEER */
	uint64_t service_id; /* LISTEN */
	uint32_t err, value; /* REPLY */
	const uint8_t *body; /* PKTS, MAD: what follows the header, in the buffer */
	size_t body_len;
};

/* A few words for XSOCK_DEBUG's line and the daemon's log. */
const char *roced_err_str(enum roced_err e);

/* m into out (cap octets): the length, or 0 when cap is too small or m is
 * not a message (kind, family).  PKTS and MAD: the header only (their
 * body is the sender's second iovec); the IPv4 addresses' last 12 octets
 * go as zeros whatever m holds. */
size_t roced_encode(const struct roced_msg *m, uint8_t *out, size_t cap);

/* A message of len octets as received (a whole SOCK_SEQPACKET record):
 * ROCED_OK with *m set (body points into buf), or why not.  PKTS' and
 * MAD's bodies are not looked into here: xs_local_fwd_decode and
 * xs_local_cm_decode decide on them. */
enum roced_err roced_decode(const uint8_t *buf, size_t len, struct roced_msg *m);

#pragma GCC visibility pop

#endif
