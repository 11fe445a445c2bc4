/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Packets for another QP of this host that came to a receive socket
 * because two connections share its 4-tuple.
 *
 * A receive socket is connected to the peer's address and the UDP source
 * port both ends compute from the QPNs or the flow label (14 bits:
 * xs_roce_udp_sport), so two connections of one host to one peer address
 * collide when their ports do: with 50 connections between two processes
 * of one host (redis-benchmark's), one run in three.  The kernel then
 * gives every packet of both to the same one of the two sockets, and the
 * other connection heard nothing: its retransmissions went to the first,
 * which dropped them as packets for another QP.
 *
 * Every connection binds an abstract Unix datagram name made of its local
 * address and QPN; a socket that gets a packet for another QPN from its
 * peer passes it on to that name, whatever process owns it, and the owner
 * takes it as its own socket would have (its engine thread polls the name
 * too).  A run of such packets of one size (a UDP GRO datagram) goes as
 * one datagram: a 4-octet header (the packets' size, version 0) and the
 * packets back to back (xs_local_wire.h).  A forward that finds the
 * owner's queue full is dropped: the sender's retransmit timer covers it
 * as any loss.  Any process may send to the name: a datagram that is not
 * such a forward, or holds a packet for another QP, is dropped whole and
 * counted (xsock-stat's local_bad, local_noqp). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "roced/roced_wire.h"
#include "verbs/xs_local_wire.h"
#include "verbs/xs_priv_abi.h"
#include "verbs/xs_roce_priv.h"
#include "util/xs_errno.h"

/* a forward is received into the QP's first two receive buffers */
_Static_assert(XS_LOCAL_FWD_MAX + ROCED_HDR_LEN <= 2 * XR_RX_BUF && XR_BATCH >= 2, "room for a forward");
_Static_assert(XR_RX_BUF <= XS_LOCAL_FWD_PKTS_MAX, "a forward holds a receive buffer's packets");

static socklen_t fwd_name(struct sockaddr_un *un, const struct sockaddr_storage *local,
			  uint32_t qpn)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	const void *a = local->ss_family == AF_INET6
				? (const void *)&((const struct sockaddr_in6 *)local)->sin6_addr
				: (const void *)&((const struct sockaddr_in *)local)->sin_addr;
	int n;

	inet_ntop(local->ss_family, a, ip, sizeof(ip));
	memset(un, 0, sizeof(*un));
	un->sun_family = AF_UNIX;
	n = snprintf(un->sun_path + 1, sizeof(un->sun_path) - 1, "xsock-rqp-%s-%06x", ip, qpn);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

int xr_fwd_open(struct xs_roce_conn *x)
{
	struct sockaddr_un un;
	socklen_t len = fwd_name(&un, &x->path.local, x->path.qpn);
	int fd = xsock_fd_high(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));

	x->fwd_fd = -1;
	if (fd < 0)
		return -errno;
	xs_fd_keep(fd);
	if (bind(fd, (struct sockaddr *)&un, len) < 0) {
		int e = errno;

		xs_fd_close(fd);
		if (e != EADDRINUSE)
			return -e;
		/* another process's QP has this number on this address: it
		 * takes what is passed on (a shared 4-tuple as well is rarer
		 * still), ours works as long as its socket is not shadowed */
		xs_log("roce: QP %u: QPN in use by another process on this address", x->path.qpn);
		return 0;
	}
	x->fwd_fd = fd;
	return 0;
}

bool xr_fwd_for(const struct xs_roce_conn *x, const uint8_t *pkt, size_t len, uint32_t *qpn)
{
	struct roce_bth bth;

	if (len < ROCE_BTH_LEN)
		return false;
	roce_bth_decode(pkt, &bth);
	*qpn = bth.dqpn;
	return *qpn != x->path.qpn;
}

/* a socket to pass packets on from when x has no name of its own */
static int fwd_any_fd(void)
{
	static _Atomic int fd = -1;
	int f = atomic_load(&fd), e = -1;

	if (f >= 0)
		return f;
	f = xsock_fd_high(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
	if (f < 0)
		return -1;
	xs_fd_keep(f);
	if (!atomic_compare_exchange_strong(&fd, &e, f)) {
		xs_fd_close(f);
		f = e;
	}
	return f;
}

/* One datagram of packets of seg octets to QP qpn of local from fd: 0 or
 * -errno (-ENOENT: nobody has the name). */
static int fwd_pass(int fd, const struct sockaddr_storage *local, uint32_t qpn,
		    const uint8_t *pkts, size_t len, size_t seg)
{
	uint8_t hdr[XS_LOCAL_FWD_HDR];
	struct iovec iov[2] = { { hdr, sizeof(hdr) }, { (void *)pkts, len } };
	struct sockaddr_un un;
	struct msghdr m = { .msg_name = &un, .msg_iov = iov, .msg_iovlen = 2 };

	m.msg_namelen = fwd_name(&un, local, qpn);
	xs_local_fwd_hdr(hdr, seg);
	xr_wire_send();
	if (sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0)
		return 0;
	if (errno == ECONNREFUSED)
		return -ENOENT;
	return -errno;
}

int xs_roce_pass_to_qp(const struct sockaddr_storage *local, uint32_t qpn, const uint8_t *pkt,
		       size_t len)
{
	int fd = fwd_any_fd();

	if (fd < 0)
		return -EMFILE;
	return fwd_pass(fd, local, qpn, pkt, len, len);
}

void xr_fwd_send(struct xs_roce_conn *x, uint32_t qpn, const uint8_t *pkts, size_t len, size_t seg)
{
	int rc = fwd_pass(x->fwd_fd >= 0 ? x->fwd_fd : fwd_any_fd(), &x->path.local, qpn, pkts, len,
			  seg);

	if (!rc) {
		x->fwd_passed += (len + seg - 1) / seg;
		return;
	}
	if (rc == -EAGAIN)
		return; /* the owner's queue is full: a loss its peer resends */
	x->rx_bad++;
	xs_log("roce: QP %u: packet for QP %u (opcode 0x%02x) dropped: %s", x->path.qpn, qpn,
	       pkts[0], rc == -ENOENT ? "no such QP" : xs_strerror(-rc));
}

/* One message from fd into buf (n octets, or -1): from the daemon's
 * connection with the descriptor a ROCED_DIRECT carries (*dfd, else -1);
 * from anywhere else without (a descriptor a peer passes is closed by
 * the kernel unread). */
static ssize_t fwd_recv(int fd, bool daemon, uint8_t *buf, size_t cap, int *dfd)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { buf, cap };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	*dfd = -1;
	if (!daemon)
		return recv(fd, buf, cap, MSG_DONTWAIT | MSG_TRUNC);
	mh.msg_control = u.b;
	mh.msg_controllen = sizeof(u.b);
	n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); n >= 0 && c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(dfd, CMSG_DATA(c), sizeof(int));
	return n;
}

/* The direct channel to the peer QP of this host (ROCED_DIRECT's): its
 * packets come and ours go there from now on (rx_mu held). */
static void take_direct(struct xs_roce_conn *x, int fd)
{
	if (__atomic_load_n(&x->rx_fd, __ATOMIC_ACQUIRE) >= 0) {
		close(fd);
		return;
	}
	fd = xsock_fd_high(fd);
	if (fd < 0)
		return;
	xs_fd_keep(fd);
	__atomic_store_n(&x->rx_fd, fd, __ATOMIC_RELEASE);
	xr_loop_kick(x); /* its poll is armed by the loop */
	xs_log("roce: QP %u: a direct channel to QP %u from xsock-roced", x->path.qpn,
	       x->path.dest_qpn);
}

/* What waits on fd, one of x's: packets taken. */
static ssize_t drain_fd(struct xs_roce_conn *x, int fd, bool daemon)
{
	uint8_t *buf = x->rx_bufs; /* XR_BATCH (>= 2) buffers of XR_RX_BUF */
	ssize_t n = -1, total = 0;
	int dfd;

	while (!atomic_load(&x->fatal) &&
	       (n = fwd_recv(fd, daemon, buf, XS_LOCAL_FWD_MAX + ROCED_HDR_LEN, &dfd)) > 0) {
		struct xs_local_fwd f;
		enum xs_local_err e;
		const uint8_t *pkt, *body = buf;
		size_t len, blen = (size_t)n;

		xr_wire_recv();
		if (dfd >= 0) {
			struct roced_msg m;

			if (roced_decode(buf, (size_t)n, &m) == ROCED_OK && m.kind == ROCED_DIRECT)
				take_direct(x, dfd);
			else
				close(dfd);
			continue;
		}
		/* the daemon's messages: the forward after their header */
		if (x->relay && (size_t)n <= XS_LOCAL_FWD_MAX + ROCED_HDR_LEN &&
		    !(body = xr_relay_pkts(x, buf, &blen))) {
			xs_log("roce: QP %u: a message of %zd octets from xsock-roced dropped", x->path.qpn,
			       n);
			xs_stat_local_drop(XSOCK_LOCAL_BAD);
			continue;
		}
		e = xs_local_fwd_decode(body, blen, x->path.qpn, &f);
		if (e != XS_LOCAL_OK) {
			xs_log("roce: QP %u: forward of %zd octets dropped: %s", x->path.qpn, n,
			       xs_local_err_str(e));
			xs_stat_local_drop(e == XS_LOCAL_NOQP ? XSOCK_LOCAL_NOQP : XSOCK_LOCAL_BAD);
			continue;
		}
		while (!atomic_load(&x->fatal) && xs_local_fwd_next(&f, &pkt, &len)) {
			if (x->relay) {
				x->wire_rx_pkts++;
				x->wire_rx_octets += len;
			}
			xr_rx_packet(x, pkt, len);
			total++;
		}
		if (!atomic_load(&x->fatal))
			xr_resp_flush_ack(x);
	}
	/* the daemon went away (or the peer's end of a direct channel): its
	 * packets stop, and the retransmit timer ends the QP as it would a
	 * peer that went silent */
	if (n == 0 && x->relay && !x->relay_eof_said) {
		x->relay_eof_said = true;
		xs_log("roce: QP %u: %s closed: its packets stop", x->path.qpn,
		       daemon ? "xsock-roced's connection" : "the direct channel to its peer");
	}
	return total;
}

ssize_t xr_fwd_drain(struct xs_roce_conn *x)
{
	bool was = xr_in_rx;
	ssize_t total = 0;
	int dfd;

	if (x->fwd_fd < 0)
		return 0;
	xr_in_rx = true;
	total = drain_fd(x, x->fwd_fd, x->relay);
	/* with xsock-roced, the direct channel to a peer of this host */
	dfd = x->relay ? __atomic_load_n(&x->rx_fd, __ATOMIC_ACQUIRE) : -1;
	if (dfd >= 0)
		total += drain_fd(x, dfd, false);
	xr_in_rx = was;
	return total;
}
