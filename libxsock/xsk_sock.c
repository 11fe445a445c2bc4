/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The operations of xsk_sock.h that are not inline: the option store
 * (struct xsk's opts) and the connection's TCP socket, where the recorded
 * options go once it exists (xsk_opts_apply, from the protocol's
 * ESTABLISHED). */
#include "config.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>

#include "libxsock/xsk_sock.h"

void xsk_opt_record(struct xsk *s, int level, int name, int val)
{
	for (int i = 0; i < s->nopts; i++) {
		if (s->opts[i].level == level && s->opts[i].name == name) {
			s->opts[i].val = val;
			return;
		}
	}
	if (s->nopts < XSK_MAX_OPTS)
		s->opts[s->nopts++] = (struct xsk_opt){ level, name, val };
}

bool xsk_opt_find(const struct xsk *s, int level, int name, int *val)
{
	for (int i = 0; i < s->nopts; i++) {
		if (s->opts[i].level == level && s->opts[i].name == name) {
			*val = s->opts[i].val;
			return true;
		}
	}
	return false;
}

int xsk_opts_get(const struct xsk *s, struct xsk_opt out[XSK_MAX_OPTS])
{
	memcpy(out, s->opts, sizeof(s->opts));
	return s->nopts;
}

void xsk_opts_copy(struct xsk *c, const struct xsk *l)
{
	memcpy(c->opts, l->opts, sizeof(c->opts));
	c->nopts = l->nopts;
	c->rcvtimeo_us = l->rcvtimeo_us;
	c->sndtimeo_us = l->sndtimeo_us;
	c->rcvlowat = l->rcvlowat;
	c->linger_on = l->linger_on;
	c->linger_s = l->linger_s;
}

int xsk_sock_tcp(struct xsk *s, int op, int level, int name, void *val, socklen_t *len)
{
	const struct xsk_stack *st = xsk_stack();

	/* off iWARP (msg_imm: RoCE) no TCP connection carries the stream; the
	 * stack's call would reach the socket's own fd, and so this library
	 * again, under s's lock (redis-cli's SO_KEEPALIVE hung there) */
	if (!st || !st->tcp || !s->id || s->state != XSK_CONNECTED || s->msg_imm)
		return -ENOTCONN;
	return st->tcp(s->id, op, level, name, val, len);
}

/* Options the connection's TCP socket gets (int values): set on it once
 * the connection exists, read from it while it does. */
bool xsk_opt_tcp(int level, int name)
{
	switch (level) {
	case SOL_SOCKET:
		return name == SO_KEEPALIVE || name == SO_PRIORITY;
	case IPPROTO_TCP:
		return name == TCP_KEEPIDLE || name == TCP_KEEPINTVL || name == TCP_KEEPCNT ||
		       name == TCP_USER_TIMEOUT;
	case IPPROTO_IP:
		return name == IP_TOS || name == IP_TTL;
	case IPPROTO_IPV6:
		return name == IPV6_TCLASS || name == IPV6_UNICAST_HOPS;
	default:
		return false;
	}
}

void xsk_opts_apply(struct xsk *s)
{
	struct xsk_opt o[XSK_MAX_OPTS];
	int n = xsk_opts_get(s, o);

	for (int i = 0; i < n; i++) {
		if (!xsk_opt_tcp(o[i].level, o[i].name))
			continue;
		socklen_t l = sizeof(int);
		xsk_sock_tcp(s, XSOCK_TCP_SETOPT, o[i].level, o[i].name, &o[i].val, &l);
	}
}
