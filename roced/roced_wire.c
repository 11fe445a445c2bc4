/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* xsock-roced's messages (roced_wire.h): encode and decode. */
#include "config.h"

#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#include "roced/roced_wire.h"
#include "util/xs_be.h"

const char *roced_err_str(enum roced_err e)
{
	switch (e) {
	case ROCED_OK:
		return "ok";
	case ROCED_SHORT:
		return "truncated";
	case ROCED_LONG:
		return "too long";
	case ROCED_KIND:
		return "unknown version, kind or family";
	case ROCED_PAD:
		return "reserved octets not zero";
	case ROCED_ADDR:
		return "malformed address";
	case ROCED_VALUE:
		return "a value out of range";
	}
	return "?";
}

static int family_octet(int family)
{
	return family == AF_INET ? 4 : family == AF_INET6 ? 6 : 0;
}

static void put_addr(uint8_t *p, int family, const uint8_t a[16])
{
	memset(p, 0, 16);
	memcpy(p, a, family == AF_INET ? 4 : 16);
}

static size_t kind_len(enum roced_kind k)
{
	switch (k) {
	case ROCED_CLAIM:
	case ROCED_CM_OPEN:
	case ROCED_PKTS:
	case ROCED_MAD:
	case ROCED_DIRECT:
		return ROCED_HDR_LEN;
	case ROCED_PEER:
		return ROCED_PEER_LEN;
	case ROCED_LISTEN:
		return ROCED_LISTEN_LEN;
	case ROCED_REPLY:
		return ROCED_REPLY_LEN;
	}
	return 0;
}

size_t roced_encode(const struct roced_msg *m, uint8_t *out, size_t cap)
{
	size_t len = kind_len(m->kind);
	int fam = family_octet(m->family);

	if (!len || cap < len)
		return 0;
	if ((m->kind == ROCED_PEER || m->kind == ROCED_LISTEN) && !fam)
		return 0;
	memset(out, 0, len);
	out[0] = (uint8_t)m->kind;
	out[1] = ROCED_VERSION;
	if (m->kind == ROCED_PKTS || m->kind == ROCED_REPLY)
		xs_put_be16(out + 2, m->aux);
	xs_put_be32(out + 4, m->seq);
	uint8_t *b = out + ROCED_HDR_LEN;
	switch (m->kind) {
	case ROCED_PEER:
		b[0] = (uint8_t)fam;
		put_addr(b + 4, m->family, m->local);
		put_addr(b + 20, m->family, m->peer);
		xs_put_be16(b + 36, m->peer_port);
		xs_put_be32(b + 40, m->peer_qpn);
		break;
	case ROCED_LISTEN:
		b[0] = (uint8_t)fam;
		xs_put_be64(b + 8, m->service_id);
		break;
	case ROCED_REPLY:
		xs_put_be32(b, m->err);
		xs_put_be32(b + 4, m->value);
		break;
	default:
		break;
	}
	return len;
}

static bool zeros(const uint8_t *p, size_t n)
{
	while (n--)
		if (*p++)
			return false;
	return true;
}

/* A family octet and an address of it: ROCED_OK, KIND or ADDR. */
static enum roced_err get_addr(uint8_t fam, const uint8_t *p, uint8_t a[16])
{
	if (fam != 4 && fam != 6)
		return ROCED_KIND;
	if (fam == 4 && !zeros(p + 4, 12))
		return ROCED_ADDR;
	memcpy(a, p, 16);
	return ROCED_OK;
}

enum roced_err roced_decode(const uint8_t *buf, size_t len, struct roced_msg *m)
{
	enum roced_err e;
	size_t want;

	memset(m, 0, sizeof(*m));
	if (len < ROCED_HDR_LEN)
		return ROCED_SHORT;
	if (buf[1] != ROCED_VERSION)
		return ROCED_KIND;
	m->kind = (enum roced_kind)buf[0];
	want = kind_len(m->kind);
	if (!want)
		return ROCED_KIND;
	m->aux = xs_get_be16(buf + 2);
	m->seq = xs_get_be32(buf + 4);
	if (m->aux && m->kind != ROCED_PKTS && m->kind != ROCED_REPLY)
		return ROCED_PAD;
	if (len < want)
		return ROCED_SHORT;
	/* PKTS and MAD carry a body; the others are exactly their length */
	if (len > want && m->kind != ROCED_PKTS && m->kind != ROCED_MAD)
		return ROCED_LONG;
	const uint8_t *b = buf + ROCED_HDR_LEN;
	switch (m->kind) {
	case ROCED_PEER:
		if (!zeros(b + 1, 3) || !zeros(b + 38, 2))
			return ROCED_PAD;
		if ((e = get_addr(b[0], b + 4, m->local)) || (e = get_addr(b[0], b + 20, m->peer)))
			return e;
		m->family = b[0] == 4 ? AF_INET : AF_INET6;
		m->peer_port = xs_get_be16(b + 36);
		m->peer_qpn = xs_get_be32(b + 40);
		if (m->peer_qpn < 2 || m->peer_qpn > 0xffffff)
			return ROCED_VALUE;
		break;
	case ROCED_LISTEN:
		if (b[0] != 4 && b[0] != 6)
			return ROCED_KIND;
		if (!zeros(b + 1, 7))
			return ROCED_PAD;
		m->family = b[0] == 4 ? AF_INET : AF_INET6;
		m->service_id = xs_get_be64(b + 8);
		break;
	case ROCED_REPLY:
		m->err = xs_get_be32(b);
		m->value = xs_get_be32(b + 4);
		if (m->err > ROCED_ERRNO_MAX || !kind_len((enum roced_kind)m->aux) ||
		    m->aux == ROCED_REPLY)
			return ROCED_VALUE;
		break;
	case ROCED_PKTS:
	case ROCED_MAD:
		m->body = b;
		m->body_len = len - ROCED_HDR_LEN;
		break;
	default:
		break;
	}
	return ROCED_OK;
}
