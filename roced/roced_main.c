/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* xsock-roced(8): the host's RoCE v2 rendezvous (roced/README.md).  One
 * thread: an epoll over UDP 4791 (IPv4 and IPv6), the abstract
 * SOCK_SEQPACKET name @xsock-roced and each process's connections to it.
 * The tables and every decision are roced_route.c's; the messages
 * roced_wire.c's and xs_local_wire.c's.  Nothing here blocks: a process
 * whose queue is full loses the datagram, as a full UDP queue would
 * (RoCE's retransmissions cover it). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "roce/roce.h"
#include "roce/roce_wire.h"
#include "roced/roced_route.h"
#include "roced/roced_wire.h"
#include "util/xs_be.h"
#include "verbs/xs_local_wire.h"

#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

#define RD_BUF (ROCED_HDR_LEN + XS_LOCAL_FWD_MAX + 64)

static struct roced_tab tab;
static int verbose;
static volatile sig_atomic_t stop;
static int udp_fd[2] = { -1, -1 }; /* IPv4, IPv6 */
static uint8_t rbuf[RD_BUF];
static uint64_t n_drop[ROCED_DROP_MAD + 1];

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void say(const char *what, const struct roced_client *c, enum roced_verdict v)
{
	if (verbose && c)
		fprintf(stderr, "xsock-roced: %s of pid %d: %s\n", what, (int)c->pid, roced_verdict_str(v));
	else if (verbose)
		fprintf(stderr, "xsock-roced: %s: %s\n", what, roced_verdict_str(v));
}

static void drop(const char *what, struct roced_client *c, enum roced_verdict v)
{
	n_drop[v]++;
	if (c)
		c->dropped++;
	say(what, c, v);
}

/* ---- addresses ----------------------------------------------------------- */

static void addr_of(struct roced_addr *a, const struct sockaddr_storage *ss)
{
	memset(a, 0, sizeof(*a));
	a->family = ss->ss_family;
	if (ss->ss_family == AF_INET)
		memcpy(a->a, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	else
		memcpy(a->a, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
}

static socklen_t sockaddr_of(struct sockaddr_storage *ss, const struct roced_addr *a, uint16_t port)
{
	memset(ss, 0, sizeof(*ss));
	ss->ss_family = (sa_family_t)a->family;
	if (a->family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;

		s->sin_port = htons(port);
		memcpy(&s->sin_addr, a->a, 4);
		return sizeof(*s);
	}
	struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;

	s->sin6_port = htons(port);
	memcpy(&s->sin6_addr, a->a, 16);
	return sizeof(*s);
}

/* a is an address of this network namespace: loopback, or an interface's
 * (getifaddrs, again when the last look is a second old) */
static bool is_local(const struct roced_addr *a)
{
	static struct ifaddrs *ifs;
	static time_t seen;
	time_t now = time(NULL);

	if (a->family == AF_INET && a->a[0] == 127)
		return true;
	if (a->family == AF_INET6 && IN6_IS_ADDR_LOOPBACK((const struct in6_addr *)a->a))
		return true;
	if (!ifs || now != seen) {
		if (ifs)
			freeifaddrs(ifs);
		ifs = NULL;
		if (getifaddrs(&ifs) < 0)
			return false;
		seen = now;
	}
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		struct roced_addr b;

		if (!i->ifa_addr || i->ifa_addr->sa_family != a->family)
			continue;
		addr_of(&b, (const struct sockaddr_storage *)(void *)i->ifa_addr);
		if (!memcmp(a->a, b.a, a->family == AF_INET ? 4 : 16))
			return true;
	}
	return false;
}

/* ---- to a process -------------------------------------------------------- */

static void to_client(struct roced_client *c, const uint8_t *hdr, size_t hlen, const void *body,
		      size_t blen)
{
	struct iovec iov[2] = { { (void *)hdr, hlen }, { (void *)body, blen } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = blen ? 2 : 1 };

	if (sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		n_drop[0]++; /* (TO_CLIENT's slot: a full queue) */
		c->dropped++;
	}
}

/* c and p, QPs of this host that name each other, get a socketpair of
 * their own: their packets no longer pass through here.  Without one
 * (no room for a descriptor), they go on through the daemon. */
static void direct_pair(struct roced_client *c, struct roced_client *p)
{
	struct roced_msg m = { .kind = ROCED_DIRECT };
	uint8_t hdr[ROCED_HDR_LEN];
	int sv[2], big = 4 << 20;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	roced_encode(&m, hdr, sizeof(hdr));
	for (int i = 0; i < 2; i++) {
		struct roced_client *to = i ? p : c;
		struct iovec iov = { hdr, sizeof(hdr) };
		union {
			char b[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} u;
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
				     .msg_controllen = sizeof(u.b) };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

		setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
		setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &sv[i], sizeof(int));
		if (sendmsg(to->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && verbose)
			fprintf(stderr, "xsock-roced: pid %d: no direct channel: %s\n", (int)to->pid,
				strerror(errno));
	}
	close(sv[0]);
	close(sv[1]);
	if (verbose)
		fprintf(stderr, "xsock-roced: QPs %u (pid %d) and %u (pid %d): a direct channel\n",
			c->qpn, (int)c->pid, p->qpn, (int)p->pid);
}

static void reply(struct roced_client *c, const struct roced_msg *req, int rc)
{
	struct roced_msg r = { .kind = ROCED_REPLY, .aux = (uint16_t)req->kind, .seq = req->seq };
	uint8_t out[ROCED_REPLY_LEN];

	if (rc < 0)
		r.err = (uint32_t)-rc;
	else
		r.value = (uint32_t)rc;
	to_client(c, out, roced_encode(&r, out, sizeof(out)), NULL, 0);
}

/* A packet run for c: PKTS with the UDP source port (0: a local QP's). */
static void pkts_to(struct roced_client *c, uint16_t sport, size_t seg, const uint8_t *pkts,
		    size_t len)
{
	struct roced_msg m = { .kind = ROCED_PKTS, .aux = sport };
	uint8_t hdr[ROCED_HDR_LEN + XS_LOCAL_FWD_HDR];

	roced_encode(&m, hdr, sizeof(hdr));
	xs_local_fwd_hdr(hdr + ROCED_HDR_LEN, seg);
	to_client(c, hdr, sizeof(hdr), pkts, len);
}

/* A MAD datagram for c: MAD with the receiver's view of the addresses. */
static void mad_to(struct roced_client *c, const struct roced_addr *rcv, const struct roced_addr *snd,
		   uint16_t sport, const uint8_t *dgram, size_t len)
{
	struct xs_local_cm cm = { .kind = XS_LOCAL_CM_STRAY, .family = rcv->family, .port = sport,
				  .data = dgram, .len = len };
	struct roced_msg m = { .kind = ROCED_MAD };
	uint8_t out[ROCED_HDR_LEN + XS_LOCAL_STRAY_MAX];
	size_t n;

	memcpy(cm.local, rcv->a, 16);
	memcpy(cm.peer, snd->a, 16);
	roced_encode(&m, out, sizeof(out));
	n = xs_local_cm_encode(&cm, out + ROCED_HDR_LEN, sizeof(out) - ROCED_HDR_LEN);
	if (n)
		to_client(c, out, ROCED_HDR_LEN + n, NULL, 0);
}

/* ---- to UDP -------------------------------------------------------------- */

/* len octets of packets of seg octets each to dst:4791 from src (one
 * sendmsg, cut by UDP GSO as the process's own socket would have, so
 * that the IPv4 Identifications are those its ICRCs assumed) */
static void udp_send(const struct roced_addr *src, const struct roced_addr *dst, const void *pkts,
		     size_t len, size_t seg)
{
	int fd = udp_fd[dst->family == AF_INET6];
	struct sockaddr_storage to;
	socklen_t tlen = sockaddr_of(&to, dst, ROCE_UDP_PORT);
	struct iovec iov = { (void *)pkts, len };
	union {
		char b[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = { .msg_name = &to, .msg_namelen = tlen, .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = u.b, .msg_controllen = sizeof(u.b) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	memset(u.b, 0, sizeof(u.b));
	if (dst->family == AF_INET) {
		struct in_pktinfo pi = { 0 };

		memcpy(&pi.ipi_spec_dst, src->a, 4);
		cm->cmsg_level = IPPROTO_IP;
		cm->cmsg_type = IP_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
	} else {
		struct in6_pktinfo pi = { 0 };

		memcpy(&pi.ipi6_addr, src->a, 16);
		cm->cmsg_level = IPPROTO_IPV6;
		cm->cmsg_type = IPV6_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
	}
	size_t used = CMSG_SPACE(dst->family == AF_INET ? sizeof(struct in_pktinfo)
							 : sizeof(struct in6_pktinfo));
	if (len > seg) {
		uint16_t s = (uint16_t)seg;

		cm = CMSG_NXTHDR(&mh, cm);
		cm->cmsg_level = SOL_UDP;
		cm->cmsg_type = UDP_SEGMENT;
		cm->cmsg_len = CMSG_LEN(sizeof(s));
		memcpy(CMSG_DATA(cm), &s, sizeof(s));
		used += CMSG_SPACE(sizeof(s));
	}
	mh.msg_controllen = used;
	if (sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && verbose)
		fprintf(stderr, "xsock-roced: send to UDP: %s\n", strerror(errno));
}

/* ---- a process's message ------------------------------------------------- */

static void client_pkts(struct roced_client *c, const struct roced_msg *m)
{
	struct xs_local_fwd f;
	struct roced_client *to = NULL;
	enum xs_local_err le;
	enum roced_verdict v;

	if (c->role != ROCED_ROLE_QP || !c->has_peer) {
		drop("packets", c, c->role != ROCED_ROLE_QP ? ROCED_DROP_ROLE : ROCED_DROP_NOQP);
		return;
	}
	/* every packet for the peer's QPN: a process reaches no other QP */
	le = xs_local_fwd_decode(m->body, m->body_len, c->peer_qpn, &f);
	if (le != XS_LOCAL_OK) {
		n_drop[ROCED_DROP_SOURCE]++;
		c->dropped++;
		if (verbose)
			fprintf(stderr, "xsock-roced: packets of pid %d: %s\n", (int)c->pid,
				xs_local_err_str(le));
		return;
	}
	v = roced_route_pkts(&tab, c, &to);
	if (v == ROCED_TO_CLIENT)
		pkts_to(to, 0, f.seg, f.pkts, f.len);
	else if (v == ROCED_TO_UDP)
		udp_send(&c->local, &c->peer, f.pkts, f.len, f.seg);
	else
		drop("packets", c, v);
}

static void client_mad(struct roced_client *c, const struct roced_msg *m)
{
	struct xs_local_cm cm;
	struct roced_addr src, dst;
	struct roced_client *to = NULL;
	enum roced_verdict v;

	if (xs_local_cm_decode(m->body, m->body_len, &cm) != XS_LOCAL_OK ||
	    cm.kind != XS_LOCAL_CM_STRAY) {
		drop("a MAD", c, ROCED_DROP_MAD);
		return;
	}
	src.family = dst.family = cm.family;
	memcpy(src.a, cm.local, 16);
	memcpy(dst.a, cm.peer, 16);
	bool dst_local = is_local(&dst);
	v = roced_route_mad(&tab, c, false, dst_local, cm.family, cm.data, cm.len, &to);
	if (v == ROCED_TO_CLIENT)
		mad_to(to, &dst, &src, ROCE_UDP_PORT, cm.data, cm.len);
	else if (v == ROCED_TO_UDP)
		udp_send(&src, &dst, cm.data, cm.len, cm.len);
	else
		drop("a MAD", c, v);
}

/* false: the connection is to end (a message that does not decode) */
static bool client_msg(struct roced_client *c, const uint8_t *buf, size_t len)
{
	struct roced_msg m;
	enum roced_err e = roced_decode(buf, len, &m);
	int rc;

	if (e != ROCED_OK || m.kind == ROCED_REPLY || m.kind == ROCED_DIRECT) {
		fprintf(stderr, "xsock-roced: pid %d uid %u: %s: connection closed\n", (int)c->pid,
			(unsigned)c->uid, e != ROCED_OK ? roced_err_str(e) : "a daemon's message from a process");
		return false;
	}
	switch (m.kind) {
	case ROCED_CLAIM:
		reply(c, &m, roced_claim(&tab, c));
		break;
	case ROCED_PEER: {
		struct roced_addr l = { .family = m.family }, p = { .family = m.family };

		memcpy(l.a, m.local, 16);
		memcpy(p.a, m.peer, 16);
		bool pl = is_local(&p);
		rc = roced_set_peer(c, &l, &p, m.peer_port, m.peer_qpn, pl);
		reply(c, &m, rc < 0 ? rc : pl);
		struct roced_client *pair = rc < 0 ? NULL : roced_pair_of(&tab, c);
		if (pair)
			direct_pair(c, pair);
		break;
	}
	case ROCED_CM_OPEN:
		reply(c, &m, roced_cm_open(&tab, c));
		break;
	case ROCED_LISTEN:
		reply(c, &m, roced_listen(&tab, c, m.family, m.service_id));
		break;
	case ROCED_PKTS:
		client_pkts(c, &m);
		break;
	case ROCED_MAD:
		client_mad(c, &m);
		break;
	case ROCED_REPLY:
	case ROCED_DIRECT:
		break;
	}
	return true;
}

static void client_end(int ep, struct roced_client *c)
{
	if (verbose)
		fprintf(stderr, "xsock-roced: pid %d: connection ended (%llu dropped)\n", (int)c->pid,
			(unsigned long long)c->dropped);
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	roced_forget(&tab, c);
	close(c->fd);
	free(c);
}

static void client_input(int ep, struct roced_client *c)
{
	for (;;) {
		ssize_t n = recv(c->fd, rbuf, sizeof(rbuf), MSG_DONTWAIT | MSG_TRUNC);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0 || (size_t)n > sizeof(rbuf) || !client_msg(c, rbuf, (size_t)n)) {
			client_end(ep, c);
			return;
		}
	}
}

static void accept_all(int ep, int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct ucred cr;
		socklen_t cl = sizeof(cr);

		if (fd < 0)
			return;
		struct roced_client *c = calloc(1, sizeof(*c));
		if (!c || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0) {
			free(c);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->uid = cr.uid;
		c->pid = cr.pid;
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			free(c);
		}
	}
}

/* ---- UDP ----------------------------------------------------------------- */

static void udp_mad(const struct roced_addr *src, uint16_t sport, const struct roced_addr *dst,
		    const uint8_t *d, size_t len)
{
	struct roced_client *to = NULL;
	enum roced_verdict v = roced_route_mad(&tab, NULL, is_local(src), false, src->family, d, len, &to);

	if (v == ROCED_TO_CLIENT)
		mad_to(to, dst, src, sport, d, len);
	else
		drop("a MAD by UDP", NULL, v);
}

/* One datagram (a GRO run of seg-octet packets): runs of one QP each go
 * to its owner. */
static void udp_datagram(const struct roced_addr *src, uint16_t sport, const struct roced_addr *dst,
			 const uint8_t *d, size_t len, size_t seg)
{
	struct roced_client *run_to = NULL;
	const uint8_t *run = NULL;
	size_t run_len = 0;

	for (size_t off = 0; off < len; off += seg) {
		size_t n = len - off < seg ? len - off : seg;
		const uint8_t *p = d + off;
		struct roced_client *to = NULL;
		enum roced_verdict v;

		if (n < ROCE_BTH_LEN) {
			drop("a packet by UDP", NULL, ROCED_DROP_MAD);
			continue;
		}
		uint32_t qpn = xs_get_be32(p + 4) & ROCE_QPN_MASK;
		if (qpn == 1) {
			udp_mad(src, sport, dst, p, n);
			v = ROCED_DROP_NOCM; /* (ends the run) */
		} else {
			v = roced_route_udp_pkt(&tab, qpn, src, sport, &to);
			if (v != ROCED_TO_CLIENT)
				drop("a packet by UDP", NULL, v);
		}
		if (run && (v != ROCED_TO_CLIENT || to != run_to)) {
			pkts_to(run_to, sport, seg, run, run_len);
			run = NULL;
			run_len = 0;
		}
		if (v != ROCED_TO_CLIENT)
			continue;
		if (!run) {
			run = p;
			run_to = to;
		}
		run_len += n;
	}
	if (run)
		pkts_to(run_to, sport, seg, run, run_len);
}

static void udp_input(int fd)
{
	for (;;) {
		struct sockaddr_storage from;
		struct iovec iov = { rbuf, XS_LOCAL_FWD_PKTS_MAX };
		union {
			char b[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(int)) + 64];
			struct cmsghdr align;
		} u;
		struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iov,
				     .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b) };
		ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT);
		struct roced_addr src, dst = { .family = 0 };
		size_t seg = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		if (mh.msg_flags & MSG_TRUNC)
			continue;
		addr_of(&src, &from);
		dst.family = src.family;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
				struct in_pktinfo pi;

				memcpy(&pi, CMSG_DATA(c), sizeof(pi));
				memcpy(dst.a, &pi.ipi_addr, 4);
			} else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
				struct in6_pktinfo pi;

				memcpy(&pi, CMSG_DATA(c), sizeof(pi));
				memcpy(dst.a, &pi.ipi6_addr, 16);
			} else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
				int s;

				memcpy(&s, CMSG_DATA(c), sizeof(s));
				seg = s > 0 ? (size_t)s : 0;
			}
		}
		uint16_t sport = ntohs(src.family == AF_INET ? ((struct sockaddr_in *)&from)->sin_port
							     : ((struct sockaddr_in6 *)&from)->sin6_port);
		udp_datagram(&src, sport, &dst, rbuf, (size_t)n, seg ? seg : (size_t)n);
	}
}

/* UDP 4791 of one family: SO_REUSEPORT without SO_REUSEADDR, so that no
 * process of another user binds beside it (a reuseport group is one
 * user's, and an SO_REUSEADDR socket binds beside another only if that
 * one has it too: udp.c, udp_lib_lport_inuse) */
static int udp_open(int family)
{
	int one = 1, pmtu = IP_PMTUDISC_DO, big = 8 << 20;
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_UDP);
	struct sockaddr_storage ss;
	struct roced_addr any = { .family = family };

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (family == AF_INET) {
		setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
		setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	} else {
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one));
	}
	setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	if (bind(fd, (struct sockaddr *)&ss, sockaddr_of(&ss, &any, ROCE_UDP_PORT)) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static int name_open(void)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(ROCED_NAME));

	if (fd < 0)
		return -1;
	memcpy(un.sun_path + 1, ROCED_NAME, strlen(ROCED_NAME));
	if (bind(fd, (struct sockaddr *)&un, len) < 0 || listen(fd, 256) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: xsock-roced [-v]\n"
		   "  The host's RoCE v2 rendezvous for libiwarp's xsock_roce0: owns UDP 4791\n"
		   "  in this network namespace and hands each process only its own packets\n"
		   "  (xsock-roced(8)).  -v: a line for every datagram dropped and connection.\n");
}

int main(int argc, char **argv)
{
	struct epoll_event evs[64];
	uint32_t seed = 0;
	int opt, ep, lfd;

	while ((opt = getopt(argc, argv, "vh")) != -1) {
		if (opt == 'v') {
			verbose = 1;
		} else {
			usage(opt == 'h' ? stdout : stderr);
			return opt == 'h' ? 0 : 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
		seed = (uint32_t)getpid() * 2654435761u;
	roced_tab_init(&tab, seed);
	lfd = name_open();
	if (lfd < 0) {
		fprintf(stderr, "xsock-roced: @%s: %s (another xsock-roced runs in this network namespace, "
				"or a process took its name)\n",
			ROCED_NAME, strerror(errno));
		return 1;
	}
	udp_fd[0] = udp_open(AF_INET);
	if (udp_fd[0] < 0) {
		fprintf(stderr, "xsock-roced: UDP port %u: %s (a RoCE process runs without the daemon, "
				"or another RoCE stack owns the port)\n",
			ROCE_UDP_PORT, strerror(errno));
		return 1;
	}
	udp_fd[1] = udp_open(AF_INET6); /* (none without IPv6) */
	ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	for (int i = 0; i < 2; i++) {
		if (udp_fd[i] < 0)
			continue;
		ev.data.ptr = &udp_fd[i];
		epoll_ctl(ep, EPOLL_CTL_ADD, udp_fd[i], &ev);
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	fprintf(stderr, "xsock-roced: listening on @%s and UDP %u\n", ROCED_NAME, ROCE_UDP_PORT);
	while (!stop) {
		int n = epoll_wait(ep, evs, 64, -1);

		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;

			if (!p)
				accept_all(ep, lfd);
			else if (p == &udp_fd[0] || p == &udp_fd[1])
				udp_input(*(int *)p);
			else
				client_input(ep, p);
		}
	}
	unsigned long long total = 0;
	for (size_t i = 1; i < sizeof(n_drop) / sizeof(n_drop[0]); i++)
		total += n_drop[i];
	fprintf(stderr, "xsock-roced: stopped (%llu datagrams dropped by its rules, %llu for full queues)\n",
		total, (unsigned long long)n_drop[0]);
	return 0;
}
