/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The exec hand-over memfd's format (xsk_exec_wire.h): encode and decode. */
#include "config.h"

#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

#include "libxsock/xsk_exec_wire.h"
#include "util/xs_be.h"

/* An fd number or count as it travels: its 32 bits, big-endian. */
static void put_int(uint8_t *p, int v)
{
	xs_put_be32(p, (uint32_t)v);
}

static int get_int(const uint8_t *p)
{
	return (int)(int32_t)xs_get_be32(p);
}

void xsk_exec_hdr_encode(uint8_t out[XSK_EXEC_HDR_LEN], uint32_t count)
{
	xs_put_be64(out, XSK_EXEC_MAGIC);
	xs_put_be32(out + 8, (uint32_t)sizeof(struct xsk));
	xs_put_be32(out + 12, count);
}

const char *xsk_exec_hdr_decode(const uint8_t *buf, size_t len, uint32_t *count)
{
	if (len < XSK_EXEC_HDR_LEN)
		return "truncated header";
	if (xs_get_be64(buf) != XSK_EXEC_MAGIC || xs_get_be32(buf + 8) != sizeof(struct xsk))
		return "not from this libxsock";
	if (xs_get_be32(buf + 12) > XSK_EXEC_MAX)
		return "more sockets than an execve carries";
	*count = xs_get_be32(buf + 12);
	return NULL;
}

void xsk_exec_ent_encode(const struct xsk_exec_ent *e, uint8_t out[XSK_EXEC_ENT_LEN])
{
	uint8_t *p = out;

	put_int(p, e->nfds);
	p += 4;
	for (int k = 0; k < XSK_EXEC_FDS; k++, p += 4)
		put_int(p, e->fds[k]);
	put_int(p, e->tcpfd);
	p += 4;
	memcpy(p, e->wire, XSOCK_WIRE_LEN);
	p += XSOCK_WIRE_LEN;
	xs_put_be32(p, e->rkey);
	xs_put_be64(p + 4, e->iova);
	xs_put_be32(p + 12, e->mem_len);
	xs_put_be32(p + 16, e->sbuf_size);
	xs_put_be32(p + 20, e->rmsg_cap);
	memcpy(p + 24, &e->sock, sizeof(e->sock));
}

/* The flags of struct xsk the new program takes (xsk_exec.c:
 * stream_numbers, xsk_opts_copy): an octet other than 0 or 1 read as a
 * bool is undefined. */
static const size_t stream_flags[] = {
	offsetof(struct xsk, nonblock),	    offsetof(struct xsk, have_local),
	offsetof(struct xsk, linger_on),    offsetof(struct xsk, swap),
	offsetof(struct xsk, tsge_wait),    offsetof(struct xsk, shut_rd),
	offsetof(struct xsk, shut_wr),	    offsetof(struct xsk, peer_shut_wr),
	offsetof(struct xsk, peer_gone),    offsetof(struct xsk, peer_ctrl),
	offsetof(struct xsk, disc_sent),    offsetof(struct xsk, sgl_seen),
};

/* The stream numbers index the rings the entry's sizes make: each
 * position inside its ring, so that no read or write of the new program
 * falls outside one. */
static const char *stream_check(const struct xsk_exec_ent *e)
{
	const struct xsk *o = &e->sock;

	for (size_t i = 0; i < sizeof(stream_flags) / sizeof(stream_flags[0]); i++)
		if (((const uint8_t *)o)[stream_flags[i]] > 1)
			return "a flag neither 0 nor 1";

	if (o->family != AF_INET && o->family != AF_INET6)
		return "unknown address family";
	if (o->sbuf_size != e->sbuf_size || o->rmsg_cap != e->rmsg_cap)
		return "ring sizes not the socket's";
	if (!o->rbuf_size || o->rbuf_size > e->mem_len || o->rbuf_offset >= o->rbuf_size ||
	    o->rbuf_free_offset >= o->rbuf_size)
		return "receive ring position outside it";
	if (o->rmsg_head >= o->rmsg_cap || o->rmsg_count > o->rmsg_cap)
		return "message position outside its ring";
	if (o->sbuf_head >= o->sbuf_size || o->sbuf_tail >= o->sbuf_size ||
	    o->sbuf_used > o->sbuf_size)
		return "send ring position outside it";
	if (o->target_sge >= RS_SGL_SIZE)
		return "target SGL entry outside it";
	if (o->nopts < 0 || o->nopts > XSK_MAX_OPTS)
		return "more options than a socket holds";
	return NULL;
}

const char *xsk_exec_ent_decode(const uint8_t *buf, size_t len, struct xsk_exec_ent *e)
{
	const uint8_t *p = buf;

	if (len < XSK_EXEC_ENT_LEN)
		return "truncated entry";
	e->nfds = get_int(p);
	p += 4;
	for (int k = 0; k < XSK_EXEC_FDS; k++, p += 4)
		e->fds[k] = get_int(p);
	e->tcpfd = get_int(p);
	p += 4;
	memcpy(e->wire, p, XSOCK_WIRE_LEN);
	p += XSOCK_WIRE_LEN;
	e->rkey = xs_get_be32(p);
	e->iova = xs_get_be64(p + 4);
	e->mem_len = xs_get_be32(p + 12);
	e->sbuf_size = xs_get_be32(p + 16);
	e->rmsg_cap = xs_get_be32(p + 20);
	memcpy(&e->sock, p + 24, sizeof(e->sock));
	if (e->nfds < 1 || e->nfds > XSK_EXEC_FDS)
		return "fd count out of range";
	if (e->tcpfd < 0)
		return "negative fd";
	for (int k = 0; k < e->nfds; k++)
		if (e->fds[k] < 0)
			return "negative fd";
	if (e->mem_len > XSK_EXEC_RING_MAX || e->sbuf_size > XSK_EXEC_RING_MAX ||
	    !e->rmsg_cap || e->rmsg_cap > XSK_EXEC_RMSG_MAX)
		return "ring too large";
	return stream_check(e);
}

void xsk_exec_rmsg_encode(const struct xsk_rmsg *r, uint32_t n, uint8_t *out)
{
	for (uint32_t i = 0; i < n; i++)
		xs_put_be32(out + 4 * (size_t)i, r[i].len);
}

const char *xsk_exec_rmsg_decode(const uint8_t *buf, size_t len, uint32_t n, struct xsk_rmsg *r)
{
	if (len != 4 * (size_t)n)
		return "truncated message lengths";
	for (uint32_t i = 0; i < n; i++)
		r[i].len = xs_get_be32(buf + 4 * (size_t)i);
	return NULL;
}
