/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* xsock-roced's tables and its decisions (roced/README.md): who owns
 * which QPN, CM tag and listened service, and where a datagram or a
 * process's message goes.  No sockets here: the loop (roced_main.c) does
 * the I/O and asks these.  One thread (the daemon's only), no locks.
 *
 * The rules, each one check of these functions:
 *  - QPNs and CM tags are given out here, host-wide unique, and never to
 *    two connections at once; a connection's role (QP, CM, listener) is
 *    set once.
 *  - A UDP datagram for a QP is delivered only if the QP registered a
 *    peer that is not of this host and the datagram comes from that
 *    peer's address (and port, when one was registered).  A QP whose peer
 *    is of this host gets packets only from that peer QP's connection,
 *    and only when each names the other as its peer (addresses and QPNs
 *    both ways): a process can neither reach a QP that did not choose it
 *    nor pose as another's peer.
 *  - A process's packets go only to its QP's registered peer, and each
 *    must be for that peer's QPN (the caller checks with
 *    xs_local_fwd_decode).
 *  - A MAD from a process must carry a local comm ID of its own CM's tag;
 *    a MAD from a UDP source address of this host is dropped (local MADs
 *    travel between the daemon's connections only).  A REQ goes to the
 *    listener of its service ID and family, every other MAD to the CM
 *    whose tag its remote comm ID carries. */
#ifndef ROCED_ROUTE_H
#define ROCED_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#pragma GCC visibility push(hidden)

enum roced_role { ROCED_ROLE_NONE, ROCED_ROLE_QP, ROCED_ROLE_CM, ROCED_ROLE_LISTENER };

struct roced_addr {
	int family; /* AF_INET or AF_INET6 */
	uint8_t a[16]; /* IPv4: the first 4, 12 zeros */
};

/* One connection of a process (SO_PEERCRED's uid and pid). */
struct roced_client {
	int fd;
	uid_t uid;
	pid_t pid;
	enum roced_role role;
	/* ROCED_ROLE_QP */
	uint32_t qpn;
	bool has_peer, peer_local;
	struct roced_addr local, peer;
	uint16_t peer_port; /* 0: any */
	uint32_t peer_qpn;
	/* ROCED_ROLE_CM */
	uint16_t tag;
	/* ROCED_ROLE_LISTENER */
	int lfamily;
	uint64_t sid;
	/* the tables' chains */
	struct roced_client *qp_next, *l_next;
	/* what was dropped of what came for it or from it (the daemon's log) */
	uint64_t dropped;
};

#define ROCED_QP_BUCKETS 4096
#define ROCED_TAGS 65536

struct roced_tab {
	struct roced_client *qp[ROCED_QP_BUCKETS];
	struct roced_client *tag[ROCED_TAGS];
	struct roced_client *listeners;
	uint32_t qpn_next; /* where the next claim starts looking */
	uint16_t tag_next;
	unsigned nqp;
};

/* An empty table; seed: where QPNs and tags start (the daemon's random
 * start, so that a restarted daemon does not give a QPN a peer may still
 * send to). */
void roced_tab_init(struct roced_tab *t, uint32_t seed);

/* c takes a QPN (role QP): the QPN, or -EBUSY (c has a role), -ENOSPC. */
int roced_claim(struct roced_tab *t, struct roced_client *c);
/* c (role QP) registers its peer: 0, or -EINVAL (c is no QP). */
int roced_set_peer(struct roced_client *c, const struct roced_addr *local,
		   const struct roced_addr *peer, uint16_t peer_port, uint32_t peer_qpn,
		   bool peer_local);
/* c takes a CM tag (role CM): the tag, or -EBUSY, -ENOSPC. */
int roced_cm_open(struct roced_tab *t, struct roced_client *c);
/* c listens (role listener): 0, or -EBUSY (c has a role), -EADDRINUSE
 * (the service and family have a listener). */
int roced_listen(struct roced_tab *t, struct roced_client *c, int family, uint64_t sid);
/* c's connection ended: whatever it held is free. */
void roced_forget(struct roced_tab *t, struct roced_client *c);

struct roced_client *roced_qp_of(const struct roced_tab *t, uint32_t qpn);

enum roced_verdict {
	ROCED_TO_CLIENT, /* *to gets it */
	ROCED_TO_UDP, /* the daemon sends it from UDP 4791 */
	ROCED_DROP_NOQP, /* no such QP, or it has no peer yet */
	ROCED_DROP_SOURCE, /* not from the QP's registered peer */
	ROCED_DROP_LOCAL, /* a local MAD or packet that came by UDP */
	ROCED_DROP_ROLE, /* a message the connection's role does not send */
	ROCED_DROP_COMMID, /* a MAD whose local comm ID is not its sender's */
	ROCED_DROP_NOCM, /* no listener for the REQ, no CM with the tag */
	ROCED_DROP_MAD, /* shorter than a MAD datagram */
};
const char *roced_verdict_str(enum roced_verdict v);

/* A UDP datagram's packet (its first, or one of a GRO run) for QPN qpn
 * (not 1) from src:sport.  ROCED_TO_CLIENT with *to, or a drop. */
enum roced_verdict roced_route_udp_pkt(const struct roced_tab *t, uint32_t qpn,
				       const struct roced_addr *src, uint16_t sport,
				       struct roced_client **to);
/* c (a QP that just registered its peer) and its peer QP of this host
 * name each other: the peer, to be given a direct channel with c, or
 * NULL. */
struct roced_client *roced_pair_of(const struct roced_tab *t, const struct roced_client *c);
/* A process's packets from its QP connection c (the caller has checked
 * that each is for c->peer_qpn): ROCED_TO_CLIENT (the peer is of this
 * host and names c back), ROCED_TO_UDP (to c->peer:4791 from c->local),
 * or a drop. */
enum roced_verdict roced_route_pkts(const struct roced_tab *t, const struct roced_client *c,
				    struct roced_client **to);
/* A MAD datagram (the UDP payload: BTH, DETH, MAD, ICRC; len octets)
 * from src (from_local: src is an address of this host) or, when from is
 * not NULL, sent by that process's connection to dst (dst_local: dst is
 * of this host).  ROCED_TO_CLIENT, ROCED_TO_UDP (from a process, dst not
 * local) or a drop. */
enum roced_verdict roced_route_mad(const struct roced_tab *t, const struct roced_client *from,
				   bool from_local, bool dst_local, int family,
				   const uint8_t *dgram, size_t len, struct roced_client **to);

#pragma GCC visibility pop

#endif
