/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* What each destination turned out to be: an iWARP peer (an xsock, siw,
 * rsockets) or a plain TCP server, remembered for XSOCK_PLAIN_TTL_S so that
 * only the first connection to a plain server pays for the MPA attempt
 * (xsk_conn.c: connect's fallback).
 *
 * A small table, replaced oldest first.  Its lock is only ever tried: a
 * fork from a signal handler that interrupted a lookup leaves the child's
 * copy locked, and the child then merely forgets (every lookup says
 * unknown), never waits. */
#include "config.h"

#include <netinet/in.h>
#include <pthread.h>

#include "libxsock/xsk_intercept.h"

#define XSK_PEER_SLOTS 64

struct peer_slot {
	struct sockaddr_in6 addr; /* v4 as v4-mapped; family 0: empty */
	enum xsk_peer_kind kind;
	int64_t until_ms;
};

static struct peer_slot peers[XSK_PEER_SLOTS];
static pthread_mutex_t peers_mu = PTHREAD_MUTEX_INITIALIZER;

/* sa as the table's key: false if it is neither IPv4 nor IPv6. */
static bool peer_key(const struct sockaddr *sa, struct sockaddr_in6 *k)
{
	memset(k, 0, sizeof(*k));
	k->sin6_family = AF_INET6;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		k->sin6_port = in->sin_port;
		k->sin6_addr.s6_addr[10] = 0xff;
		k->sin6_addr.s6_addr[11] = 0xff;
		memcpy(&k->sin6_addr.s6_addr[12], &in->sin_addr, 4);
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		k->sin6_port = in6->sin6_port;
		k->sin6_addr = in6->sin6_addr;
		return true;
	}
	return false;
}

static bool same(const struct sockaddr_in6 *a, const struct sockaddr_in6 *b)
{
	return a->sin6_port == b->sin6_port &&
	       memcmp(&a->sin6_addr, &b->sin6_addr, sizeof(a->sin6_addr)) == 0;
}

enum xsk_peer_kind xsk_peer_lookup(const struct sockaddr *sa)
{
	struct sockaddr_in6 k;
	enum xsk_peer_kind kind = XSK_PEER_UNKNOWN;
	int64_t now = xsk_now_ms();

	if (!peer_key(sa, &k) || pthread_mutex_trylock(&peers_mu))
		return XSK_PEER_UNKNOWN;
	for (int i = 0; i < XSK_PEER_SLOTS; i++)
		if (peers[i].addr.sin6_family && same(&peers[i].addr, &k) &&
		    peers[i].until_ms > now) {
			kind = peers[i].kind;
			break;
		}
	pthread_mutex_unlock(&peers_mu);
	return kind;
}

void xsk_peer_learn(const struct sockaddr *sa, enum xsk_peer_kind kind, int64_t ttl_ms)
{
	struct sockaddr_in6 k;
	int slot = 0;

	if (!peer_key(sa, &k) || pthread_mutex_trylock(&peers_mu))
		return;
	for (int i = 0; i < XSK_PEER_SLOTS; i++) {
		if (peers[i].addr.sin6_family && same(&peers[i].addr, &k)) {
			slot = i;
			break;
		}
		if (peers[i].until_ms < peers[slot].until_ms)
			slot = i; /* the oldest (or an empty one) */
	}
	peers[slot].addr = k;
	peers[slot].kind = kind;
	peers[slot].until_ms = kind == XSK_PEER_UNKNOWN ? 0 : xsk_now_ms() + ttl_ms;
	pthread_mutex_unlock(&peers_mu);
}
