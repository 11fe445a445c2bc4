/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Fuzz the decoders and encoders of the stack's local channels (issue 31
 * item 3, docs/architecture.md section 8): verbs/xs_local_wire.c (RoCE
 * forward, CM MAD forward and stray), libxsock/xsk_exec_wire.c (the exec
 * hand-over's header, entry and message lengths) and
 * libxsock/xsk_raddr_wire.c (XSOCK_RELAY_ADDR entries).
 *
 * Input: octet 0 picks the decoder (its value mod 5), the rest is the
 * message, handed over in a heap block of exactly its size:
 *   0  RoCE forward: 3 octets of the receiving QPN, then the datagram;
 *   1  CM datagram, either kind;
 *   2  exec header;
 *   3  exec entry, then message lengths;
 *   4  XSOCK_RELAY_ADDR entries.
 * Checks beyond "no crash, no sanitizer report":
 *   - forward: accepted only with version 0 and a segment size, its
 *     packets segment-size pieces (the last shorter) covering the payload
 *     exactly, each a BTH at least and for the QPN; the header re-encodes
 *     to the input's; a forward built from the input (its packets given
 *     the QPN) decodes to the same packets; a datagram longer than
 *     XS_LOCAL_FWD_MAX is refused without a read past the block;
 *   - CM: an accepted datagram re-encodes to the input octets; a message
 *     of either kind built from the input encodes (into exactly its size;
 *     one octet less is refused) and decodes to the same fields;
 *   - exec: a header, entry or lengths that decode re-encode to the
 *     input octets, and an entry's ring positions lie in its rings; any
 *     count encodes and decodes back if an execve may carry it;
 *   - relay: each entry that decodes re-encodes to the octets it used; an
 *     entry built from the input encodes and decodes to itself. */
#include "config.h"

#include <string.h>
#include <sys/socket.h>

#include "libxsock/xsk_exec_wire.h"
#include "libxsock/xsk_raddr_wire.h"
#include "roce/roce.h"
#include "tests/fuzz/fuzz.h"
#include "util/xs_be.h"
#include "verbs/xs_local_wire.h"

/* A heap copy of exactly len octets (ASan sees any read past it). */
static uint8_t *dup_exact(const uint8_t *p, size_t len)
{
	uint8_t *b = malloc(len ? len : 1);

	FUZZ_ASSERT(b);
	if (len)
		memcpy(b, p, len);
	return b;
}

/* ---- RoCE forward ----------------------------------------------------------- */

static void check_fwd_accepted(const uint8_t *d, size_t len, uint32_t qpn,
			       const struct xs_local_fwd *f0)
{
	struct xs_local_fwd f = *f0;
	uint8_t hdr[XS_LOCAL_FWD_HDR];
	const uint8_t *pkt;
	size_t n, off = XS_LOCAL_FWD_HDR;

	FUZZ_ASSERT(f.seg == xs_get_be16(d) && f.seg && xs_get_be16(d + 2) == 0);
	FUZZ_ASSERT(f.pkts == d + XS_LOCAL_FWD_HDR && f.len == len - XS_LOCAL_FWD_HDR);
	xs_local_fwd_hdr(hdr, f.seg);
	FUZZ_ASSERT(memcmp(hdr, d, sizeof(hdr)) == 0);
	while (xs_local_fwd_next(&f, &pkt, &n)) {
		struct roce_bth bth;

		FUZZ_ASSERT(pkt == d + off && n >= ROCE_BTH_LEN && off + n <= len);
		FUZZ_ASSERT(n == f0->seg || off + n == len);
		roce_bth_decode(pkt, &bth);
		FUZZ_ASSERT(bth.dqpn == qpn);
		off += n;
	}
	FUZZ_ASSERT(off == len);
}

/* A forward of the input's octets as packets of seg octets, each given the
 * QPN, decodes to those packets. */
static void check_fwd_built(const uint8_t *p, size_t len, uint32_t qpn)
{
	size_t seg = ROCE_BTH_LEN + (len ? p[0] : 0), plen = len, off;
	struct xs_local_fwd f;
	const uint8_t *pkt;
	uint8_t *b;
	size_t n;

	if (plen % seg && plen % seg < ROCE_BTH_LEN)
		plen -= plen % seg; /* no last packet shorter than a BTH */
	if (!plen || plen > XS_LOCAL_FWD_PKTS_MAX)
		return;
	b = malloc(XS_LOCAL_FWD_HDR + plen);
	FUZZ_ASSERT(b);
	xs_local_fwd_hdr(b, seg);
	memcpy(b + XS_LOCAL_FWD_HDR, p, plen);
	for (off = 0; off < plen; off += seg)
		xs_put_be32(b + XS_LOCAL_FWD_HDR + off + 4,
			    (xs_get_be32(b + XS_LOCAL_FWD_HDR + off + 4) & 0xff000000u) | qpn);
	FUZZ_ASSERT(xs_local_fwd_decode(b, XS_LOCAL_FWD_HDR + plen, qpn, &f) == XS_LOCAL_OK);
	check_fwd_accepted(b, XS_LOCAL_FWD_HDR + plen, qpn, &f);
	for (off = 0; xs_local_fwd_next(&f, &pkt, &n); off += n)
		FUZZ_ASSERT(memcmp(pkt, b + XS_LOCAL_FWD_HDR + off, n) == 0);
	/* the same for another QP: refused whole */
	FUZZ_ASSERT(xs_local_fwd_decode(b, XS_LOCAL_FWD_HDR + plen, qpn ^ 1, &f) ==
		    XS_LOCAL_NOQP);
	free(b);
}

static void fuzz_fwd(const uint8_t *p, size_t len)
{
	struct fuzz_in in = { p, len, 0 };
	uint32_t qpn = (uint32_t)fuzz_u8(&in) << 16;
	struct xs_local_fwd f;
	enum xs_local_err e;
	uint8_t *d;

	qpn |= fuzz_u16(&in);
	p += in.off;
	len -= in.off;
	d = dup_exact(p, len);
	e = xs_local_fwd_decode(d, len, qpn, &f);
	FUZZ_ASSERT(strcmp(xs_local_err_str(e), "?") != 0);
	if (e == XS_LOCAL_OK)
		check_fwd_accepted(d, len, qpn, &f);
	else
		FUZZ_ASSERT(len <= XS_LOCAL_FWD_HDR || e != XS_LOCAL_SHORT);
	/* a received length past the block: refused before any read of it */
	FUZZ_ASSERT(xs_local_fwd_decode(d, XS_LOCAL_FWD_MAX + 1 + len, qpn, &f) == XS_LOCAL_LONG);
	free(d);
	check_fwd_built(p, len, qpn);
}

/* ---- CM forward and stray --------------------------------------------------- */

static void check_cm_built(const uint8_t *p, size_t len)
{
	struct fuzz_in in = { p, len, 0 };
	struct xs_local_cm m = { 0 }, d;
	uint8_t flags = fuzz_u8(&in), mad[ROCE_MAD_LEN] = { 0 }, *b;
	size_t n, want;

	m.kind = flags & 1 ? XS_LOCAL_CM_STRAY : XS_LOCAL_CM_MAD;
	m.family = flags & 2 ? AF_INET6 : AF_INET;
	for (int i = 0; i < 16; i++) {
		m.local[i] = fuzz_u8(&in);
		m.peer[i] = fuzz_u8(&in);
	}
	if (m.family == AF_INET) {
		memset(m.local + 4, 0, 12);
		memset(m.peer + 4, 0, 12);
	}
	if (m.kind == XS_LOCAL_CM_STRAY) {
		m.port = fuzz_u16(&in);
		m.data = p + in.off;
		m.len = fuzz_left(&in) > XS_LOCAL_PKT_MAX ? XS_LOCAL_PKT_MAX : fuzz_left(&in);
		want = XS_LOCAL_STRAY_HDR + m.len;
		if (!m.len)
			return;
	} else {
		n = fuzz_left(&in) < sizeof(mad) ? fuzz_left(&in) : sizeof(mad);
		memcpy(mad, p + in.off, n);
		m.data = mad;
		m.len = ROCE_MAD_LEN;
		want = XS_LOCAL_CM_MAD_LEN;
	}
	b = malloc(want);
	FUZZ_ASSERT(b);
	FUZZ_ASSERT(xs_local_cm_encode(&m, b, want - 1) == 0);
	n = xs_local_cm_encode(&m, b, want);
	FUZZ_ASSERT(n == want);
	FUZZ_ASSERT(xs_local_cm_decode(b, n, &d) == XS_LOCAL_OK);
	FUZZ_ASSERT(d.kind == m.kind && d.family == m.family && d.len == m.len);
	FUZZ_ASSERT(!memcmp(d.local, m.local, 16) && !memcmp(d.peer, m.peer, 16));
	FUZZ_ASSERT(d.port == (m.kind == XS_LOCAL_CM_STRAY ? m.port : 0));
	FUZZ_ASSERT(memcmp(d.data, m.data, m.len) == 0);
	free(b);
}

static void fuzz_cm(const uint8_t *p, size_t len)
{
	uint8_t *d = dup_exact(p, len), *b;
	struct xs_local_cm m;
	enum xs_local_err e = xs_local_cm_decode(d, len, &m);

	FUZZ_ASSERT(strcmp(xs_local_err_str(e), "?") != 0 && e != XS_LOCAL_NOQP);
	if (e == XS_LOCAL_OK) {
		FUZZ_ASSERT(m.family == AF_INET || m.family == AF_INET6);
		FUZZ_ASSERT(m.data >= d && m.data + m.len == d + len);
		b = malloc(len);
		FUZZ_ASSERT(b);
		FUZZ_ASSERT(xs_local_cm_encode(&m, b, len) == len && memcmp(b, d, len) == 0);
		free(b);
	}
	if (len)
		FUZZ_ASSERT(xs_local_cm_decode(d, XS_LOCAL_CM_MAX + 1 + len, &m) != XS_LOCAL_OK);
	free(d);
	check_cm_built(p, len);
}

/* ---- exec hand-over ------------------------------------------------------------ */

static void fuzz_exec_hdr(const uint8_t *p, size_t len)
{
	struct fuzz_in in = { p, len, 0 };
	uint8_t *d = dup_exact(p, len), hdr[XSK_EXEC_HDR_LEN];
	uint32_t count, c2 = 0;

	if (!xsk_exec_hdr_decode(d, len, &count)) {
		FUZZ_ASSERT(count <= XSK_EXEC_MAX);
		xsk_exec_hdr_encode(hdr, count);
		FUZZ_ASSERT(memcmp(hdr, d, sizeof(hdr)) == 0);
	}
	free(d);
	count = fuzz_u32(&in);
	xsk_exec_hdr_encode(hdr, count);
	FUZZ_ASSERT((xsk_exec_hdr_decode(hdr, sizeof(hdr), &c2) == NULL) ==
		    (count <= XSK_EXEC_MAX));
	FUZZ_ASSERT(count > XSK_EXEC_MAX || c2 == count);
	FUZZ_ASSERT(xsk_exec_hdr_decode(hdr, sizeof(hdr) - 1, &c2) != NULL);
}

/* What a decoded entry promises its user (an independent model). */
static void check_ent(const struct xsk_exec_ent *e)
{
	const struct xsk *o = &e->sock;

	FUZZ_ASSERT(e->nfds >= 1 && e->nfds <= XSK_EXEC_FDS && e->tcpfd >= 0);
	for (int k = 0; k < e->nfds; k++)
		FUZZ_ASSERT(e->fds[k] >= 0);
	FUZZ_ASSERT(e->mem_len <= XSK_EXEC_RING_MAX && e->sbuf_size <= XSK_EXEC_RING_MAX);
	FUZZ_ASSERT(o->family == AF_INET || o->family == AF_INET6);
	FUZZ_ASSERT(o->rbuf_offset < o->rbuf_size && o->rbuf_free_offset < o->rbuf_size &&
		    o->rbuf_size <= e->mem_len);
	FUZZ_ASSERT(e->rmsg_cap == o->rmsg_cap && e->rmsg_cap <= XSK_EXEC_RMSG_MAX &&
		    o->rmsg_head < o->rmsg_cap && o->rmsg_count <= o->rmsg_cap);
	FUZZ_ASSERT(e->sbuf_size == o->sbuf_size && o->sbuf_head < o->sbuf_size &&
		    o->sbuf_tail < o->sbuf_size && o->sbuf_used <= o->sbuf_size);
	FUZZ_ASSERT(o->target_sge < RS_SGL_SIZE && o->nopts >= 0 && o->nopts <= XSK_MAX_OPTS);
}

static void fuzz_exec_ent(const uint8_t *p, size_t len)
{
	struct xsk_exec_ent *e = malloc(sizeof(*e));
	uint8_t *d = dup_exact(p, len), *b = malloc(XSK_EXEC_ENT_LEN);

	FUZZ_ASSERT(e && b);
	if (!xsk_exec_ent_decode(d, len, e)) {
		check_ent(e);
		xsk_exec_ent_encode(e, b);
		FUZZ_ASSERT(memcmp(b, d, XSK_EXEC_ENT_LEN) == 0);
	}
	free(b);
	free(d);
	free(e);
	if (len < XSK_EXEC_ENT_LEN)
		return;
	/* the message lengths after it */
	uint32_t n = (uint32_t)((len - XSK_EXEC_ENT_LEN) / 4);
	struct xsk_rmsg *r = calloc(n ? n : 1, sizeof(*r));

	FUZZ_ASSERT(r);
	d = dup_exact(p + XSK_EXEC_ENT_LEN, 4 * (size_t)n);
	b = malloc(4 * (size_t)n + 1);
	FUZZ_ASSERT(b);
	FUZZ_ASSERT(!xsk_exec_rmsg_decode(d, 4 * (size_t)n, n, r));
	xsk_exec_rmsg_encode(r, n, b);
	FUZZ_ASSERT(memcmp(b, d, 4 * (size_t)n) == 0);
	if (n)
		FUZZ_ASSERT(xsk_exec_rmsg_decode(d, 4 * (size_t)n - 1, n, r) != NULL);
	free(b);
	free(d);
	free(r);
}

/* ---- XSOCK_RELAY_ADDR ------------------------------------------------------------ */

static void check_raddr_built(const uint8_t *p, size_t len)
{
	struct fuzz_in in = { p, len, 0 };
	struct xsk_raddr_ent e, d;
	char s[XSK_RADDR_ENT_MAX + 1];
	size_t n, used;

	memset(&e, 0, sizeof(e));
	memset(&d, 0xa5, sizeof(d));
	e.ino = (uint64_t)fuzz_u32(&in) << 32 | fuzz_u32(&in);
	e.dev = (uint64_t)fuzz_u32(&in) << 32 | fuzz_u32(&in);
	for (int i = 0; i < XSK_RADDR_SA; i++) {
		((uint8_t *)&e.local)[i] = fuzz_u8(&in);
		((uint8_t *)&e.peer)[i] = fuzz_u8(&in);
	}
	e.local.ss_family = fuzz_u8(&in) & 1 ? AF_INET6 : AF_INET;
	e.peer.ss_family = fuzz_u8(&in) & 1 ? AF_INET6 : AF_INET;
	n = xsk_raddr_encode(&e, s);
	FUZZ_ASSERT(n <= XSK_RADDR_ENT_MAX && strlen(s) == n);
	FUZZ_ASSERT(!xsk_raddr_decode(s, n, &d, &used) && used == n);
	FUZZ_ASSERT(memcmp(&e, &d, sizeof(e)) == 0);
	FUZZ_ASSERT(xsk_raddr_decode(s, n - 1, &d, &used) != NULL);
}

static void fuzz_raddr(const uint8_t *p, size_t len)
{
	char *d = (char *)dup_exact(p, len), s[XSK_RADDR_ENT_MAX + 1];
	struct xsk_raddr_ent e;
	size_t off = 0, used;

	while (off < len && !xsk_raddr_decode(d + off, len - off, &e, &used)) {
		FUZZ_ASSERT(used > 0 && used <= len - off && used <= XSK_RADDR_ENT_MAX);
		FUZZ_ASSERT(e.local.ss_family == AF_INET || e.local.ss_family == AF_INET6);
		FUZZ_ASSERT(e.peer.ss_family == AF_INET || e.peer.ss_family == AF_INET6);
		FUZZ_ASSERT(xsk_raddr_encode(&e, s) == used && memcmp(s, d + off, used) == 0);
		off += used;
	}
	free(d);
	check_raddr_built(p, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	switch (data[0] % 5) {
	case 0:
		fuzz_fwd(data + 1, size - 1);
		break;
	case 1:
		fuzz_cm(data + 1, size - 1);
		break;
	case 2:
		fuzz_exec_hdr(data + 1, size - 1);
		break;
	case 3:
		fuzz_exec_ent(data + 1, size - 1);
		break;
	default:
		fuzz_raddr(data + 1, size - 1);
		break;
	}
	return 0;
}
