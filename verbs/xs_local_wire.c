/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The local messages' formats (xs_local_wire.h): encode and decode. */
#include "config.h"

#include <string.h>
#include <sys/socket.h>

#include "roce/roce.h"
#include "util/xs_be.h"
#include "verbs/xs_local_wire.h"

const char *xs_local_err_str(enum xs_local_err e)
{
	switch (e) {
	case XS_LOCAL_OK:
		return "ok";
	case XS_LOCAL_SHORT:
		return "truncated";
	case XS_LOCAL_LONG:
		return "too long";
	case XS_LOCAL_KIND:
		return "unknown version or kind";
	case XS_LOCAL_ADDR:
		return "malformed address";
	case XS_LOCAL_SEG:
		return "malformed packet run";
	case XS_LOCAL_NOQP:
		return "for another QP";
	}
	return "?";
}

/* ---- RoCE forward ----------------------------------------------------------- */

void xs_local_fwd_hdr(uint8_t hdr[XS_LOCAL_FWD_HDR], size_t seg)
{
	xs_put_be16(hdr, (uint16_t)seg);
	xs_put_be16(hdr + 2, XS_LOCAL_FWD_VERSION);
}

bool xs_local_fwd_next(struct xs_local_fwd *f, const uint8_t **pkt, size_t *len)
{
	size_t n = f->len < f->seg ? f->len : f->seg;

	if (!f->len)
		return false;
	*pkt = f->pkts;
	*len = n;
	f->pkts += n;
	f->len -= n;
	return true;
}

enum xs_local_err xs_local_fwd_decode(const uint8_t *buf, size_t len, uint32_t qpn,
				      struct xs_local_fwd *f)
{
	struct xs_local_fwd all, it;
	enum xs_local_err e = XS_LOCAL_OK;
	const uint8_t *p;
	size_t n;

	if (len > XS_LOCAL_FWD_MAX)
		return XS_LOCAL_LONG;
	if (len <= XS_LOCAL_FWD_HDR)
		return XS_LOCAL_SHORT;
	if (xs_get_be16(buf + 2) != XS_LOCAL_FWD_VERSION)
		return XS_LOCAL_KIND;
	all.seg = xs_get_be16(buf);
	all.pkts = buf + XS_LOCAL_FWD_HDR;
	all.len = len - XS_LOCAL_FWD_HDR;
	if (!all.seg)
		return XS_LOCAL_SEG;
	it = all;
	/* every packet is a BTH at least and for qpn: the sender groups
	 * packets by QP, so one for another is no sender of ours */
	while (xs_local_fwd_next(&it, &p, &n)) {
		struct roce_bth bth;

		if (n < ROCE_BTH_LEN)
			return XS_LOCAL_SEG;
		roce_bth_decode(p, &bth);
		if (bth.dqpn != qpn)
			e = XS_LOCAL_NOQP; /* (a short packet after it still makes it SEG) */
	}
	if (e == XS_LOCAL_OK)
		*f = all;
	return e;
}

/* ---- CM forward and stray --------------------------------------------------- */

/* The family octet's value (4 or 6) for AF_INET / AF_INET6, 0 for others. */
static uint8_t family_octet(int family)
{
	return family == AF_INET ? 4 : family == AF_INET6 ? 6 : 0;
}

static void put_addr(uint8_t *out, int family, const uint8_t a[16])
{
	memset(out, 0, 16);
	memcpy(out, a, family == AF_INET ? 4 : 16);
}

/* An IPv4 address is its first 4 octets, the others zero. */
static bool addr_ok(int family, const uint8_t a[16])
{
	static const uint8_t zero[12];

	return family != AF_INET || !memcmp(a + 4, zero, sizeof(zero));
}

size_t xs_local_cm_encode(const struct xs_local_cm *m, uint8_t *out, size_t cap)
{
	uint8_t fam = family_octet(m->family);
	size_t n;

	if (!fam)
		return 0;
	if (m->kind == XS_LOCAL_CM_MAD) {
		n = XS_LOCAL_CM_MAD_LEN;
		if (m->len != ROCE_MAD_LEN || cap < n)
			return 0;
		out[0] = fam;
		put_addr(out + 1, m->family, m->local);
		put_addr(out + 17, m->family, m->peer);
		memcpy(out + 33, m->data, ROCE_MAD_LEN);
		return n;
	}
	if (m->kind != XS_LOCAL_CM_STRAY)
		return 0;
	n = XS_LOCAL_STRAY_HDR + m->len;
	if (!m->len || m->len > XS_LOCAL_PKT_MAX || cap < n)
		return 0;
	/* the sender's address first, then ours */
	out[0] = XS_LOCAL_STRAY | fam;
	put_addr(out + 1, m->family, m->peer);
	put_addr(out + 17, m->family, m->local);
	xs_put_be16(out + 33, m->port);
	memcpy(out + XS_LOCAL_STRAY_HDR, m->data, m->len);
	return n;
}

enum xs_local_err xs_local_cm_decode(const uint8_t *buf, size_t len, struct xs_local_cm *m)
{
	bool stray;
	uint8_t fam;

	if (!len)
		return XS_LOCAL_SHORT;
	stray = (buf[0] & XS_LOCAL_STRAY) != 0;
	fam = buf[0] & (uint8_t)~XS_LOCAL_STRAY;
	if (fam != 4 && fam != 6)
		return XS_LOCAL_KIND;
	if (len > (stray ? XS_LOCAL_STRAY_MAX : XS_LOCAL_CM_MAD_LEN))
		return XS_LOCAL_LONG;
	if (len < (stray ? XS_LOCAL_STRAY_HDR + 1 : XS_LOCAL_CM_MAD_LEN))
		return XS_LOCAL_SHORT;
	memset(m, 0, sizeof(*m));
	m->family = fam == 4 ? AF_INET : AF_INET6;
	if (stray) {
		m->kind = XS_LOCAL_CM_STRAY;
		memcpy(m->peer, buf + 1, 16);
		memcpy(m->local, buf + 17, 16);
		m->port = xs_get_be16(buf + 33);
		m->data = buf + XS_LOCAL_STRAY_HDR;
		m->len = len - XS_LOCAL_STRAY_HDR;
	} else {
		m->kind = XS_LOCAL_CM_MAD;
		memcpy(m->local, buf + 1, 16);
		memcpy(m->peer, buf + 17, 16);
		m->data = buf + 33;
		m->len = ROCE_MAD_LEN;
	}
	if (!addr_ok(m->family, m->local) || !addr_ok(m->family, m->peer))
		return XS_LOCAL_ADDR;
	return XS_LOCAL_OK;
}
