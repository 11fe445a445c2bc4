/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* xsock-roced's tables and routing decisions (roced_route.h). */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "roce/roce.h"
#include "roce/roce_cm.h"
#include "roced/roced_route.h"

const char *roced_verdict_str(enum roced_verdict v)
{
	switch (v) {
	case ROCED_TO_CLIENT:
		return "to a process";
	case ROCED_TO_UDP:
		return "to UDP";
	case ROCED_DROP_NOQP:
		return "no such QP, or no peer registered";
	case ROCED_DROP_SOURCE:
		return "not from the QP's peer";
	case ROCED_DROP_LOCAL:
		return "a local sender's datagram by UDP";
	case ROCED_DROP_ROLE:
		return "not this connection's to send";
	case ROCED_DROP_COMMID:
		return "a MAD with another CM's comm ID";
	case ROCED_DROP_NOCM:
		return "no listener or CM for the MAD";
	case ROCED_DROP_MAD:
		return "a truncated MAD datagram";
	}
	return "?";
}

void roced_tab_init(struct roced_tab *t, uint32_t seed)
{
	memset(t, 0, sizeof(*t));
	t->qpn_next = seed & ROCE_QPN_MASK;
	t->tag_next = (uint16_t)(seed >> 8);
}

static unsigned bucket(uint32_t qpn)
{
	return (qpn * 2654435761u) >> 20; /* 12 bits: ROCED_QP_BUCKETS */
}

struct roced_client *roced_qp_of(const struct roced_tab *t, uint32_t qpn)
{
	struct roced_client *c = t->qp[bucket(qpn)];

	while (c && c->qpn != qpn)
		c = c->qp_next;
	return c;
}

int roced_claim(struct roced_tab *t, struct roced_client *c)
{
	if (c->role != ROCED_ROLE_NONE)
		return -EBUSY;
	if (t->nqp >= ROCE_QPN_MASK / 2)
		return -ENOSPC;
	for (;;) {
		uint32_t n = t->qpn_next++ & ROCE_QPN_MASK;

		if (n < 2 || roced_qp_of(t, n))
			continue;
		c->role = ROCED_ROLE_QP;
		c->qpn = n;
		c->qp_next = t->qp[bucket(n)];
		t->qp[bucket(n)] = c;
		t->nqp++;
		return (int)n;
	}
}

int roced_set_peer(struct roced_client *c, const struct roced_addr *local,
		   const struct roced_addr *peer, uint16_t peer_port, uint32_t peer_qpn,
		   bool peer_local)
{
	if (c->role != ROCED_ROLE_QP || local->family != peer->family)
		return -EINVAL;
	c->local = *local;
	c->peer = *peer;
	c->peer_port = peer_port;
	c->peer_qpn = peer_qpn;
	c->peer_local = peer_local;
	c->has_peer = true;
	return 0;
}

int roced_cm_open(struct roced_tab *t, struct roced_client *c)
{
	if (c->role != ROCED_ROLE_NONE)
		return -EBUSY;
	for (unsigned i = 0; i < ROCED_TAGS; i++) {
		uint16_t tag = t->tag_next++;

		if (!tag || t->tag[tag]) /* tag 0: comm IDs from 1 << 16 on */
			continue;
		c->role = ROCED_ROLE_CM;
		c->tag = tag;
		t->tag[tag] = c;
		return tag;
	}
	return -ENOSPC;
}

static struct roced_client *listener_of(const struct roced_tab *t, int family, uint64_t sid)
{
	struct roced_client *c = t->listeners;

	while (c && (c->lfamily != family || c->sid != sid))
		c = c->l_next;
	return c;
}

int roced_listen(struct roced_tab *t, struct roced_client *c, int family, uint64_t sid)
{
	if (c->role != ROCED_ROLE_NONE)
		return -EBUSY;
	if (listener_of(t, family, sid))
		return -EADDRINUSE;
	c->role = ROCED_ROLE_LISTENER;
	c->lfamily = family;
	c->sid = sid;
	c->l_next = t->listeners;
	t->listeners = c;
	return 0;
}

void roced_forget(struct roced_tab *t, struct roced_client *c)
{
	struct roced_client **pp;

	switch (c->role) {
	case ROCED_ROLE_QP:
		for (pp = &t->qp[bucket(c->qpn)]; *pp; pp = &(*pp)->qp_next)
			if (*pp == c) {
				*pp = c->qp_next;
				t->nqp--;
				break;
			}
		break;
	case ROCED_ROLE_CM:
		if (t->tag[c->tag] == c)
			t->tag[c->tag] = NULL;
		break;
	case ROCED_ROLE_LISTENER:
		for (pp = &t->listeners; *pp; pp = &(*pp)->l_next)
			if (*pp == c) {
				*pp = c->l_next;
				break;
			}
		break;
	case ROCED_ROLE_NONE:
		break;
	}
	c->role = ROCED_ROLE_NONE;
}

static bool addr_eq(const struct roced_addr *a, const struct roced_addr *b)
{
	return a->family == b->family && !memcmp(a->a, b->a, a->family == AF_INET ? 4 : 16);
}

enum roced_verdict roced_route_udp_pkt(const struct roced_tab *t, uint32_t qpn,
				       const struct roced_addr *src, uint16_t sport,
				       struct roced_client **to)
{
	struct roced_client *c = roced_qp_of(t, qpn);

	if (!c || !c->has_peer)
		return ROCED_DROP_NOQP;
	/* a peer of this host sends through its connection, never by UDP:
	 * a datagram from a local address is anyone's */
	if (c->peer_local)
		return ROCED_DROP_LOCAL;
	if (!addr_eq(src, &c->peer) || (c->peer_port && sport != c->peer_port))
		return ROCED_DROP_SOURCE;
	*to = c;
	return ROCED_TO_CLIENT;
}

/* both ends named each other: p is c's peer and c is p's */
static bool paired(const struct roced_client *c, const struct roced_client *p)
{
	return p->has_peer && p->peer_qpn == c->qpn && addr_eq(&p->peer, &c->local) &&
	       addr_eq(&p->local, &c->peer);
}

struct roced_client *roced_pair_of(const struct roced_tab *t, const struct roced_client *c)
{
	struct roced_client *p;

	if (c->role != ROCED_ROLE_QP || !c->has_peer || !c->peer_local)
		return NULL;
	p = roced_qp_of(t, c->peer_qpn);
	return p && p != c && paired(c, p) ? p : NULL;
}

enum roced_verdict roced_route_pkts(const struct roced_tab *t, const struct roced_client *c,
				    struct roced_client **to)
{
	struct roced_client *p;

	if (c->role != ROCED_ROLE_QP)
		return ROCED_DROP_ROLE;
	if (!c->has_peer)
		return ROCED_DROP_NOQP;
	if (!c->peer_local)
		return ROCED_TO_UDP;
	p = roced_qp_of(t, c->peer_qpn);
	if (!p || !p->has_peer)
		return ROCED_DROP_NOQP;
	if (!paired(c, p))
		return ROCED_DROP_SOURCE;
	*to = p;
	return ROCED_TO_CLIENT;
}

enum roced_verdict roced_route_mad(const struct roced_tab *t, const struct roced_client *from,
				   bool from_local, bool dst_local, int family,
				   const uint8_t *dgram, size_t len, struct roced_client **to)
{
	struct roce_cm_route rt;
	struct roced_client *c;

	if (len < ROCE_BTH_LEN + ROCE_DETH_LEN + ROCE_MAD_LEN + ROCE_ICRC_LEN)
		return ROCED_DROP_MAD;
	roce_cm_route(dgram + ROCE_BTH_LEN + ROCE_DETH_LEN, &rt);
	if (from) {
		/* a CM sends as itself only (a REJ may not know its own yet) */
		if (from->role != ROCED_ROLE_CM)
			return ROCED_DROP_ROLE;
		if (rt.local_comm_id >> 16 != from->tag &&
		    !(rt.attr == ROCE_CM_ATTR_REJ && !rt.local_comm_id))
			return ROCED_DROP_COMMID;
		if (!dst_local)
			return ROCED_TO_UDP;
	} else if (from_local) {
		return ROCED_DROP_LOCAL;
	}
	if (rt.attr == ROCE_CM_ATTR_REQ)
		c = listener_of(t, family, rt.service_id);
	else
		c = rt.remote_comm_id ? t->tag[rt.remote_comm_id >> 16] : NULL;
	if (!c)
		return ROCED_DROP_NOCM;
	*to = c;
	return ROCED_TO_CLIENT;
}
