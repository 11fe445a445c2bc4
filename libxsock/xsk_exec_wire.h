/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The exec hand-over memfd (xsk_exec.c; xsock(7) EXEC): its format as
 * pure code over byte buffers, written before the execve and checked by
 * the new program's libxsock before anything is used.  The same libxsock
 * on both sides (sizeof(struct xsk) is in the header), yet the octets are
 * not trusted: the memfd is whatever the number in XSOCK_EXEC_FD names.
 * Integers are big-endian (util/xs_be.h):
 *   header:  be64 XSK_EXEC_MAGIC, be32 sizeof(struct xsk), be32 count
 *            (sockets carried, <= XSK_EXEC_MAX);
 *   count entries, each:
 *     be32 nfds (1..XSK_EXEC_FDS), XSK_EXEC_FDS x be32 fds (the first
 *     nfds >= 0), be32 tcpfd (>= 0), XSOCK_WIRE_LEN octets of libiwarp's
 *     stream state, be32 rkey, be64 iova, be32 mem_len, be32 sbuf_size,
 *     be32 rmsg_cap, then the old process's struct xsk as it was (its
 *     stream numbers; its pointers, fds and locks are not used);
 *     mem_len octets of receive memory, sbuf_size of send ring (both
 *     <= XSK_EXEC_RING_MAX), rmsg_cap x be32 unread message lengths. */
#ifndef XSK_EXEC_WIRE_H
#define XSK_EXEC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "libxsock/xsk_priv.h"

#define XSK_EXEC_MAGIC 0x58534b4558454332ull /* "XSKEXEC2" */
#define XSK_EXEC_MAX 64 /* sockets carried by one execve */
#define XSK_EXEC_FDS 8 /* fd numbers per socket */
#define XSK_EXEC_RING_MAX (64u << 20) /* octets of receive memory or send ring */
/* unread message lengths: more than an rq_size (16 bits) and its extra
 * receives need */
#define XSK_EXEC_RMSG_MAX (1u << 17)

#define XSK_EXEC_HDR_LEN 16
#define XSK_EXEC_ENT_FIXED (4 + 4 * XSK_EXEC_FDS + 4 + XSOCK_WIRE_LEN + 4 + 8 + 3 * 4)
#define XSK_EXEC_ENT_LEN (XSK_EXEC_ENT_FIXED + sizeof(struct xsk))

struct xsk_exec_ent {
	int nfds;
	int fds[XSK_EXEC_FDS];
	int tcpfd;
	uint8_t wire[XSOCK_WIRE_LEN];
	uint32_t rkey;
	uint64_t iova;
	uint32_t mem_len, sbuf_size, rmsg_cap;
	struct xsk sock; /* the stream numbers */
};

/* The header of count sockets. */
void xsk_exec_hdr_encode(uint8_t out[XSK_EXEC_HDR_LEN], uint32_t count);
/* NULL with *count set, or why not: shorter than the header, another
 * magic or sizeof(struct xsk) (not this libxsock), more than
 * XSK_EXEC_MAX sockets. */
const char *xsk_exec_hdr_decode(const uint8_t *buf, size_t len, uint32_t *count);

void xsk_exec_ent_encode(const struct xsk_exec_ent *e, uint8_t out[XSK_EXEC_ENT_LEN]);
/* NULL with *e set, or why not: shorter than an entry, nfds out of
 * range, a negative fd, rings over XSK_EXEC_RING_MAX or not the sizes the
 * stream numbers say (sbuf_size, rmsg_cap), a family other than IPv4 and
 * IPv6, ring positions outside their rings, more options than a socket
 * holds. */
const char *xsk_exec_ent_decode(const uint8_t *buf, size_t len, struct xsk_exec_ent *e);

/* The n unread message lengths (n <= XSK_EXEC_RMSG_MAX) into 4 * n octets,
 * and back (decode: NULL, or why not: not 4 * n octets). */
void xsk_exec_rmsg_encode(const struct xsk_rmsg *r, uint32_t n, uint8_t *out);
const char *xsk_exec_rmsg_decode(const uint8_t *buf, size_t len, uint32_t n, struct xsk_rmsg *r);

#endif
