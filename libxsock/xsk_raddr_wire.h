/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* XSOCK_RELAY_ADDR's entries (xsk_relay_addr.c: the TCP identity of the
 * relayed sockets an execve carries), as pure code over strings.  The
 * variable is the environment the new program was given, so its decoder
 * takes only what the encoder writes.  One entry:
 *     INO "." DEV "." LOCAL "." PEER ","
 * INO and DEV in decimal (no sign, no leading zero, at most 2^64 - 1),
 * LOCAL and PEER the first XSK_RADDR_SA octets of the sockaddr in
 * lower-case hex (two digits an octet; the octets as the host holds them),
 * each of family AF_INET or AF_INET6.  Entries follow each other. */
#ifndef XSK_RADDR_WIRE_H
#define XSK_RADDR_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define XSK_RADDR_SA 28 /* octets of an address carried: sizeof(struct sockaddr_in6) */
/* the longest entry, without a terminating NUL */
#define XSK_RADDR_ENT_MAX (20 + 1 + 20 + 1 + 2 * XSK_RADDR_SA + 1 + 2 * XSK_RADDR_SA + 1)

struct xsk_raddr_ent {
	uint64_t ino, dev;
	struct sockaddr_storage local, peer; /* octets after XSK_RADDR_SA: zero */
};

/* e at out, NUL-terminated (XSK_RADDR_ENT_MAX + 1 octets of room): the
 * entry's length. */
size_t xsk_raddr_encode(const struct xsk_raddr_ent *e, char *out);

/* The entry at the start of the len octets at s: NULL with *e and *used
 * (its length, with the ',') set, or why not: a number that is not one
 * (empty, a sign, a leading zero, more than 64 bits), an address not
 * 2 * XSK_RADDR_SA lower-case hex digits or of another family, a missing
 * separator (the string ends before it). */
const char *xsk_raddr_decode(const char *s, size_t len, struct xsk_raddr_ent *e, size_t *used);

#endif
