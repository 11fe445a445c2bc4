/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* XSOCK_RELAY_ADDR's entries (xsk_raddr_wire.h): encode and decode. */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "libxsock/xsk_raddr_wire.h"

static const char hex[] = "0123456789abcdef";

static char *put_hex(char *p, const struct sockaddr_storage *ss)
{
	const uint8_t *b = (const uint8_t *)ss;

	for (int i = 0; i < XSK_RADDR_SA; i++) {
		*p++ = hex[b[i] >> 4];
		*p++ = hex[b[i] & 15];
	}
	return p;
}

size_t xsk_raddr_encode(const struct xsk_raddr_ent *e, char *out)
{
	char *p = out;

	p += sprintf(p, "%llu.%llu.", (unsigned long long)e->ino, (unsigned long long)e->dev);
	p = put_hex(p, &e->local);
	*p++ = '.';
	p = put_hex(p, &e->peer);
	*p++ = ',';
	*p = '\0';
	return (size_t)(p - out);
}

/* A cursor over the entry's octets: no read at or past end. */
struct cur {
	const char *p, *end;
};

/* A decimal number up to 2^64 - 1, then the separator sep. */
static bool get_num(struct cur *c, uint64_t *v, char sep)
{
	const char *start = c->p;

	*v = 0;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		unsigned d = (unsigned)(*c->p - '0');

		if (*v > (UINT64_MAX - d) / 10)
			return false;
		*v = *v * 10 + d;
		c->p++;
	}
	/* one digit at least, and no leading zero: the encoder's form only */
	if (c->p == start || (*start == '0' && c->p - start > 1))
		return false;
	if (c->p == c->end || *c->p != sep)
		return false;
	c->p++;
	return true;
}

static int hex_digit(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

/* An address of XSK_RADDR_SA octets in hex, then the separator sep. */
static bool get_addr(struct cur *c, struct sockaddr_storage *ss, char sep)
{
	uint8_t *b = (uint8_t *)ss;

	memset(ss, 0, sizeof(*ss));
	if (c->end - c->p < 2 * XSK_RADDR_SA + 1)
		return false;
	for (int i = 0; i < XSK_RADDR_SA; i++) {
		int hi = hex_digit(c->p[2 * i]), lo = hex_digit(c->p[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		b[i] = (uint8_t)(hi << 4 | lo);
	}
	c->p += 2 * XSK_RADDR_SA;
	if (*c->p != sep)
		return false;
	c->p++;
	return ss->ss_family == AF_INET || ss->ss_family == AF_INET6;
}

const char *xsk_raddr_decode(const char *s, size_t len, struct xsk_raddr_ent *e, size_t *used)
{
	struct cur c = { s, s + len };

	if (!get_num(&c, &e->ino, '.') || !get_num(&c, &e->dev, '.'))
		return "malformed inode or device number";
	if (!get_addr(&c, &e->local, '.') || !get_addr(&c, &e->peer, ','))
		return "malformed address";
	*used = (size_t)(c.p - s);
	return NULL;
}
