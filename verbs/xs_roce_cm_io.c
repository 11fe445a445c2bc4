/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The RoCE CM's sockets (xs_roce_cm_priv.h): UDP port 4791, where CM MADs
 * travel in UD SEND_ONLY packets between QP 1s (built and checked with
 * roce/: BTH, DETH with the GSI Q_Key, the ICRC), and the abstract Unix
 * names through which a MAD that reached the wrong process is passed on
 * (built and checked with xs_local_wire.h). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "roced/roced_wire.h"
#include "util/xs_clock.h"
#include "verbs/xs_internal.h"
#include "verbs/xs_roce.h"
#include "verbs/xs_priv_abi.h"
#include "verbs/xs_roce_cm_priv.h"
#include "util/xs_errno.h"

/* ---- addresses -------------------------------------------------------------- */

void xrcm_addr_bytes(const struct sockaddr_storage *ss, uint8_t b[16])
{
	memset(b, 0, 16);
	if (ss->ss_family == AF_INET)
		memcpy(b, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	else
		memcpy(b, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
}

void xrcm_addr_from(int family, const uint8_t b[16], struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	ss->ss_family = (sa_family_t)family;
	if (family == AF_INET)
		memcpy(&((struct sockaddr_in *)ss)->sin_addr, b, 4);
	else
		memcpy(&((struct sockaddr_in6 *)ss)->sin6_addr, b, 16);
}

bool xrcm_addr_eq(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	uint8_t x[16], y[16];

	if (a->ss_family != b->ss_family)
		return false;
	xrcm_addr_bytes(a, x);
	xrcm_addr_bytes(b, y);
	return !memcmp(x, y, 16);
}

bool xrcm_addr_any(const struct sockaddr_storage *a)
{
	static const uint8_t zero[16];
	uint8_t x[16];

	if (a->ss_family != AF_INET && a->ss_family != AF_INET6)
		return true;
	xrcm_addr_bytes(a, x);
	return !memcmp(x, zero, 16);
}

const char *xrcm_addr_str(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	const void *p = ss->ss_family == AF_INET ?
				(const void *)&((const struct sockaddr_in *)ss)->sin_addr :
				(const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;

	if (!inet_ntop(ss->ss_family, p, buf, (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}

/* ---- sockets ---------------------------------------------------------------- */

int xrcm_udp_open(int family)
{
	int one = 1, fd;
	int pmtu = IP_PMTUDISC_DO;
	struct sockaddr_storage ss;

	fd = xsock_fd_high(socket(family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
	if (fd < 0)
		return -errno;
	memset(&ss, 0, sizeof(ss));
	ss.ss_family = (sa_family_t)family;
	/* SO_REUSEADDR too: a reuseport group is one user's, and a process
	 * of another (nginx's workers run as nobody under a root master)
	 * binds beside it only with both sockets' sk_reuse (udp.c:
	 * udp_lib_lport_inuse); a MAD taken by the wrong group is passed on */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (family == AF_INET) {
		((struct sockaddr_in *)&ss)->sin_port = htons(ROCE_UDP_PORT);
		setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
		/* DF and Identification 0: what the ICRC we send assumes */
		setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	} else {
		((struct sockaddr_in6 *)&ss)->sin6_port = htons(ROCE_UDP_PORT);
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one));
	}
	if (bind(fd, (struct sockaddr *)&ss,
		 family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

/* The abstract names: a listener's service (sid) or a process's tag. */

static socklen_t unix_name(struct sockaddr_un *un, enum xrcm_name kind, uint64_t v)
{
	int n;

	memset(un, 0, sizeof(*un));
	un->sun_family = AF_UNIX;
	if (kind == XRCM_SID4 || kind == XRCM_SID6)
		n = snprintf(un->sun_path + 1, sizeof(un->sun_path) - 1, "xsock-rcm-sid%c-%016llx",
			     kind == XRCM_SID4 ? '4' : '6', (unsigned long long)v);
	else
		n = snprintf(un->sun_path + 1, sizeof(un->sun_path) - 1, "xsock-rcm-%04x",
			     (unsigned)v);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* An abstract datagram socket bound to the name: -EADDRINUSE if taken. */
int xrcm_unix_bind(enum xrcm_name kind, uint64_t v)
{
	struct sockaddr_un un;
	socklen_t len = unix_name(&un, kind, v);
	int fd = xsock_fd_high(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&un, len) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

/* A burst of MADs for another process (cmtime's 100 connections at once
 * between two processes of one host) fills its Unix queue, whose length
 * is net.unix.max_dgram_qlen (10): the owner drains it meanwhile, so try
 * again for up to this many milliseconds, then drop (the sender resends;
 * a REJ or an "unknown comm ID" answer would end the connection). */
#define XRCM_FWD_WAIT_MS 200

/* One try to pass a MAD on to the owner named: 0, or the errno. */
static int fwd_once(enum xrcm_name kind, uint64_t v, const struct sockaddr_storage *local,
		    const struct sockaddr_storage *peer, const uint8_t *mad)
{
	struct xs_local_cm m = { .kind = XS_LOCAL_CM_MAD, .family = local->ss_family,
				 .data = mad, .len = ROCE_MAD_LEN };
	uint8_t b[XS_LOCAL_CM_MAD_LEN];
	struct sockaddr_un un;
	socklen_t len = unix_name(&un, kind, v);
	size_t n;

	xrcm_addr_bytes(local, m.local);
	xrcm_addr_bytes(peer, m.peer);
	n = xs_local_cm_encode(&m, b, sizeof(b));
	if (!n)
		return EAFNOSUPPORT;
	if (sendto(xrcm.fdu, b, n, MSG_DONTWAIT, (struct sockaddr *)&un, len) == (ssize_t)n)
		return 0;
	return errno;
}

enum xrcm_fwd xrcm_forward(enum xrcm_name kind, uint64_t v, const struct sockaddr_storage *local,
			   const struct sockaddr_storage *peer, const uint8_t *mad)
{
	const struct timespec ms = { .tv_nsec = 1000000 };

	for (int i = 0; i < XRCM_FWD_WAIT_MS; i++) {
		int e = fwd_once(kind, v, local, peer, mad);

		if (!e)
			return XRCM_FWD_OK;
		if (e != EAGAIN && e != EWOULDBLOCK && e != ENOBUFS && e != EINTR)
			return XRCM_FWD_NOBODY;
		nanosleep(&ms, NULL);
	}
	return XRCM_FWD_BUSY;
}

/* peer is an address of this host: loopback, or the address we send from
 * (the kernel gives a local destination itself as the source) */
static bool peer_is_local(const struct sockaddr_storage *local, const struct sockaddr_storage *peer)
{
	if (peer->ss_family == AF_INET)
		return ((const uint8_t *)&((const struct sockaddr_in *)peer)->sin_addr)[0] == 127 ||
		       xrcm_addr_eq(local, peer);
	if (peer->ss_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)peer)->sin6_addr) ||
		       xrcm_addr_eq(local, peer);
	return false;
}

/* A MAD for a process of this host goes straight to its owner's name, not
 * through port 4791: the kernel gives each datagram of one address pair
 * to one socket of the port's reuseport group, which socket depends on the
 * kernel version (6.1 and 6.18 chose differently), and one that reaches a
 * process about to exit is lost with its queue (test-roce-cm: a fork
 * child's REJ and DREQ, taken by the child's own socket, went with it).
 * The owner takes it as one passed on (xrcm_rx_fwd).  False: not local,
 * nobody by that name (the kernel's rxe, a peer gone), or a full queue:
 * the caller sends it on the wire. */
static bool send_local(const struct sockaddr_storage *local, const struct sockaddr_storage *peer,
		       const uint8_t *mad)
{
	struct roce_cm_route rt;

	if (xrcm.relay || xrcm.fdu < 0 || !peer_is_local(local, peer))
		return false; /* (the daemon routes a local MAD itself) */
	roce_cm_route(mad, &rt);
	/* the owner's side of the addresses: ours is its peer */
	if (rt.attr == ROCE_CM_ATTR_REQ)
		return !fwd_once(peer->ss_family == AF_INET ? XRCM_SID4 : XRCM_SID6, rt.service_id,
				 peer, local, mad);
	return rt.remote_comm_id && !fwd_once(XRCM_TAG, rt.remote_comm_id >> 16, peer, local, mad);
}

/* Through xsock-roced: the datagram as it would leave UDP 4791, to the
 * daemon, which sends it or hands it to a local process's CM. */
static void relay_send(const struct sockaddr_storage *local, const struct sockaddr_storage *peer,
		       const uint8_t *pkt, size_t n)
{
	struct xs_local_cm m = { .kind = XS_LOCAL_CM_STRAY, .family = peer->ss_family,
				 .data = pkt, .len = n };
	struct roced_msg h = { .kind = ROCED_MAD };
	uint8_t b[ROCED_HDR_LEN + XS_LOCAL_STRAY_MAX];
	size_t len;

	xrcm_addr_bytes(local, m.local);
	xrcm_addr_bytes(peer, m.peer);
	roced_encode(&h, b, sizeof(b));
	len = xs_local_cm_encode(&m, b + ROCED_HDR_LEN, sizeof(b) - ROCED_HDR_LEN);
	if (!len || send(xrcm.fdu, b, ROCED_HDR_LEN + len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		xs_log("roce cm: MAD to xsock-roced lost: %s", len ? xs_strerror(errno) : "too long");
}

/* One MAD to peer's QP 1 from local (mu held or engine thread). */
void xrcm_send_mad(const struct sockaddr_storage *local, const struct sockaddr_storage *peer,
		     const uint8_t *mad)
{
	uint8_t pkt[XRCM_PKT_MAX];
	struct roce_pkt p;
	struct roce_ip ip;
	struct sockaddr_storage to = *peer;
	union {
		char b[CMSG_SPACE(sizeof(struct in6_pktinfo))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov;
	struct msghdr msg;
	struct cmsghdr *cm;
	bool v6 = peer->ss_family == AF_INET6;
	size_t n;

	if (send_local(local, peer, mad))
		return;
	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_UD_SEND_ONLY;
	p.bth.pkey = 0xffff;
	p.bth.dqpn = ROCE_GSI_QPN;
	p.deth.qkey = ROCE_GSI_QKEY;
	p.deth.src_qp = ROCE_GSI_QPN;
	memset(&ip, 0, sizeof(ip));
	ip.v6 = v6;
	xrcm_addr_bytes(local, ip.src);
	xrcm_addr_bytes(peer, ip.dst);
	ip.sport = ROCE_UDP_PORT;
	ip.dport = ROCE_UDP_PORT;
	n = roce_pkt_build(&p, mad, ROCE_MAD_LEN, &ip, pkt);
	if (!n)
		return;
	if (xrcm.relay) {
		relay_send(local, peer, pkt, n);
		return;
	}
	memset(&cbuf, 0, sizeof(cbuf));
	memset(&msg, 0, sizeof(msg));
	iov.iov_base = pkt;
	iov.iov_len = n;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_name = &to;
	msg.msg_control = cbuf.b;
	if (v6) {
		struct in6_pktinfo pi = { 0 };

		((struct sockaddr_in6 *)&to)->sin6_port = htons(ROCE_UDP_PORT);
		msg.msg_namelen = sizeof(struct sockaddr_in6);
		msg.msg_controllen = CMSG_SPACE(sizeof(pi));
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = IPPROTO_IPV6;
		cm->cmsg_type = IPV6_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		pi.ipi6_addr = ((const struct sockaddr_in6 *)local)->sin6_addr;
		pi.ipi6_ifindex = ((const struct sockaddr_in6 *)local)->sin6_scope_id;
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
	} else {
		struct in_pktinfo pi = { 0 };

		((struct sockaddr_in *)&to)->sin_port = htons(ROCE_UDP_PORT);
		msg.msg_namelen = sizeof(struct sockaddr_in);
		msg.msg_controllen = CMSG_SPACE(sizeof(pi));
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = IPPROTO_IP;
		cm->cmsg_type = IP_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		pi.ipi_spec_dst = ((const struct sockaddr_in *)local)->sin_addr;
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
	}
	if (sendmsg(v6 ? xrcm.fd6 : xrcm.fd4, &msg, MSG_DONTWAIT) < 0)
		xs_log("roce cm: send to QP 1 failed: %s", xs_strerror(errno));
}

/* ---- RC packets that came to the CM ------------------------------------------ */

/* An RC packet here is one its QP's receive socket was not connected for
 * yet: a responder sends as soon as it is RTS (rdma_accept lets it, before
 * the RTU), and its first packets beat the REP's processing on this side,
 * which cost a NAK-sequence round trip per connection (or a retransmit
 * timeout when it sent one packet).  Each goes on to its QP's name
 * (xs_roce_fwd.c), bound before the QP's socket, and waits there until the
 * QP's engine polls it; one whose name is not bound yet (the REP still in
 * another process's CM) is held and tried again each millisecond for up
 * to XRCM_EARLY_MS.  Engine thread only. */
#define XRCM_EARLY_N 8
#define XRCM_EARLY_MS 50

struct xrcm_early {
	uint64_t until;
	struct sockaddr_storage local;
	uint32_t qpn;
	uint16_t len;
	uint8_t pkt[XRCM_RX_MAX];
};

static struct xrcm_early *early_held;
static unsigned early_n;

static void early_drop(const struct xrcm_early *e, int err)
{
	xs_log("roce cm: RC packet for QP %u (opcode 0x%02x) that came before its socket dropped: %s",
	       e->qpn, e->pkt[0], err == -ENOENT ? "no such QP" : xs_strerror(-err));
}

static void xrcm_early(const uint8_t *pkt, size_t len, const struct sockaddr_storage *local,
		       uint32_t qpn)
{
	struct xrcm_early *e;
	int rc = xs_roce_pass_to_qp(local, qpn, pkt, len);

	if (rc != -ENOENT)
		return; /* passed on, or a full queue: a loss the peer resends */
	if (!early_held)
		early_held = calloc(XRCM_EARLY_N, sizeof(*early_held));
	if (!early_held || early_n == XRCM_EARLY_N || len > XRCM_RX_MAX)
		return;
	e = &early_held[early_n++];
	e->until = xs_now_ms() + XRCM_EARLY_MS;
	e->local = *local;
	e->qpn = qpn;
	e->len = (uint16_t)len;
	memcpy(e->pkt, pkt, len);
}

uint64_t xrcm_early_retry(void)
{
	uint64_t now;
	unsigned i = 0;

	if (!early_n)
		return 0;
	now = xs_now_ms();
	while (i < early_n) {
		struct xrcm_early *e = &early_held[i];
		int rc = xs_roce_pass_to_qp(&e->local, e->qpn, e->pkt, e->len);

		if (rc == -ENOENT && now < e->until) {
			i++;
			continue;
		}
		if (rc && rc != -EAGAIN)
			early_drop(e, rc);
		*e = early_held[--early_n];
	}
	return early_n ? now + 1 : 0;
}

/* One datagram from UDP port 4791 (engine thread, no lock): a MAD goes to
 * xrcm_handle_mad, an RC packet to its QP (xrcm_early); from: the sender's
 * address and port, local: ours. */
static void rx_datagram(const uint8_t *buf, size_t n, const struct sockaddr_storage *from,
			const struct sockaddr_storage *local)
{
	struct roce_pkt p;
	struct roce_ip ip;
	enum roce_perr pe;

	if (local->ss_family != from->ss_family)
		return;
	memset(&ip, 0, sizeof(ip));
	ip.v6 = from->ss_family == AF_INET6;
	xrcm_addr_bytes(from, ip.src);
	xrcm_addr_bytes(local, ip.dst);
	ip.sport = ntohs(ip.v6 ? ((const struct sockaddr_in6 *)from)->sin6_port :
				 ((const struct sockaddr_in *)from)->sin_port);
	ip.dport = ROCE_UDP_PORT;
	pe = roce_pkt_parse(buf, n, ip.v6 ? &ip : NULL, 0xffff, &p);
	if (pe == ROCE_OK && !ip.v6 &&
	    !roce_icrc_find_id(&xrcm.ids, &ip, buf, n - ROCE_ICRC_LEN,
			       roce_icrc_get(buf + n - ROCE_ICRC_LEN)))
		pe = ROCE_E_ICRC;
	if (pe != ROCE_OK) {
		xs_log("roce cm: packet on port %u dropped: %s", ROCE_UDP_PORT, roce_perr_str(pe));
		return;
	}
	if (!(roce_ops[p.bth.opcode].flags & ROCE_F_UD)) {
		xrcm_early(buf, n, local, p.bth.dqpn);
		return;
	}
	if (p.bth.opcode != ROCE_UD_SEND_ONLY || p.bth.dqpn != ROCE_GSI_QPN ||
	    p.deth.qkey != ROCE_GSI_QKEY || p.paylen != ROCE_MAD_LEN)
		return; /* not for QP 1 */
	xrcm_handle_mad(p.payload, local, from, false);
}

void xrcm_rx_udp(int fd)
{
	uint8_t buf[XRCM_RX_MAX + 1]; /* longer: truncated, its ICRC fails */
	struct sockaddr_storage from, local;
	union {
		char b[CMSG_SPACE(sizeof(struct in6_pktinfo)) + 64];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr msg;
	struct cmsghdr *cm;
	ssize_t n;
	int k;

	for (k = 0; k < 32; k++) {
		memset(&msg, 0, sizeof(msg));
		msg.msg_name = &from;
		msg.msg_namelen = sizeof(from);
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = cbuf.b;
		msg.msg_controllen = sizeof(cbuf.b);
		n = recvmsg(fd, &msg, MSG_DONTWAIT);
		if (n < 0)
			return;
		memset(&local, 0, sizeof(local));
		for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
			if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO) {
				struct in_pktinfo pi;

				memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
				local.ss_family = AF_INET;
				((struct sockaddr_in *)&local)->sin_addr = pi.ipi_addr;
			} else if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO) {
				struct in6_pktinfo pi;

				memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
				local.ss_family = AF_INET6;
				((struct sockaddr_in6 *)&local)->sin6_addr = pi.ipi6_addr;
				((struct sockaddr_in6 *)&local)->sin6_scope_id = pi.ipi6_ifindex;
			}
		}
		rx_datagram(buf, (size_t)n, &from, &local);
	}
}

/* A stray datagram (xs_rcm_stray) to the process's own Unix name, for its
 * engine to take as its port 4791 socket would have (xs_local_wire.h). */
bool xrcm_stray_send(const uint8_t *pkt, size_t len, const struct sockaddr_storage *from,
		     const struct sockaddr_storage *local)
{
	struct xs_local_cm m = { .kind = XS_LOCAL_CM_STRAY, .family = from->ss_family,
				 .data = pkt, .len = len };
	uint8_t b[XS_LOCAL_STRAY_MAX];
	struct sockaddr_un un;
	socklen_t ulen = unix_name(&un, XRCM_TAG, xrcm.tag);
	size_t n;

	if (from->ss_family != local->ss_family)
		return false;
	m.port = ntohs(from->ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)from)->sin6_port :
						     ((const struct sockaddr_in *)from)->sin_port);
	xrcm_addr_bytes(from, m.peer);
	xrcm_addr_bytes(local, m.local);
	n = xs_local_cm_encode(&m, b, sizeof(b));
	return n && sendto(xrcm.fdu, b, n, MSG_DONTWAIT, (struct sockaddr *)&un, ulen) ==
			    (ssize_t)n;
}

/* fd is still the process's or a listener's (mu held): a listener closed
 * since the poll may have left its number to an application's file */
static bool fwd_fd_live(int fd)
{
	struct xs_rcm_listener *l;

	if (fd == xrcm.fdu)
		return true;
	for (l = xrcm.listeners; l; l = l->next)
		if (l->fd[0] == fd || l->fd[1] == fd)
			return true;
	return false;
}

void xrcm_rx_fwd(int fd)
{
	uint8_t b[ROCED_HDR_LEN + XS_LOCAL_CM_MAX];
	struct sockaddr_storage local, peer;
	struct xs_local_cm m;
	enum xs_local_err e;
	ssize_t n;
	int k;

	for (k = 0; k < 32; k++) {
		pthread_mutex_lock(&xrcm.mu);
		n = fwd_fd_live(fd) ? recv(fd, b, sizeof(b), MSG_DONTWAIT | MSG_TRUNC) : -1;
		pthread_mutex_unlock(&xrcm.mu);
		if (n < 0)
			return;
		const uint8_t *body = b;
		size_t blen = (size_t)n;

		if (xrcm.relay) { /* the daemon's: a MAD message's body */
			struct roced_msg h;

			if ((size_t)n > sizeof(b) || roced_decode(b, (size_t)n, &h) != ROCED_OK ||
			    h.kind != ROCED_MAD) {
				xs_log("roce cm: a message of %zd octets from xsock-roced dropped", n);
				xs_stat_local_drop(XSOCK_LOCAL_BAD);
				continue;
			}
			body = h.body;
			blen = h.body_len;
		}
		/* any process may send to the names: decoded, never trusted */
		e = xs_local_cm_decode(body, blen, &m);
		if (e != XS_LOCAL_OK) {
			xs_log("roce cm: local datagram of %zd octets dropped: %s", n,
			       xs_local_err_str(e));
			xs_stat_local_drop(XSOCK_LOCAL_BAD);
			continue;
		}
		xrcm_addr_from(m.family, m.local, &local);
		xrcm_addr_from(m.family, m.peer, &peer);
		if (m.kind == XS_LOCAL_CM_MAD) {
			xrcm_handle_mad(m.data, &local, &peer, true);
			continue;
		}
		if (m.family == AF_INET)
			((struct sockaddr_in *)&peer)->sin_port = htons(m.port);
		else
			((struct sockaddr_in6 *)&peer)->sin6_port = htons(m.port);
		rx_datagram(m.data, m.len, &peer, &local);
	}
}
