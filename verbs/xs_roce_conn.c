/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A RoCE connection: its two sockets (xs_roce_priv.h says why two), packet
 * I/O, references, and the receive loop that hands each valid packet to
 * the responder or the completer. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "verbs/xs_priv_abi.h"
#include "verbs/xs_roce_priv.h"
#include "verbs/xs_stat.h"
#include "util/xs_errno.h"

__thread bool xr_in_rx;
atomic_uint xr_lingering;
#if defined(__SANITIZE_THREAD__)
atomic_uint xr_wire;
#endif

uint64_t xr_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* rdma_calc_flow_label + rdma_flow_label_to_udp_sport (Linux
 * include/rdma/ib_verbs.h), which rxe_modify_qp uses for its QP's source
 * port once an AV with a GRH is set. */
uint16_t xs_roce_udp_sport(uint32_t fl, uint32_t lqpn, uint32_t rqpn)
{
	if (!fl) {
		uint64_t v = (uint64_t)lqpn * rqpn;

		v ^= v >> 20;
		v ^= v >> 40;
		fl = (uint32_t)(v & 0xfffff);
	}
	uint32_t lo = fl & 0x3fff, hi = fl & 0xfc000;

	lo ^= hi >> 14;
	return (uint16_t)(lo | ROCE_SPORT_BASE);
}

static void ip_fill(struct roce_ip *ip, const struct sockaddr_storage *src,
		    const struct sockaddr_storage *dst, uint16_t sport, uint16_t dport)
{
	memset(ip, 0, sizeof(*ip));
	ip->v6 = src->ss_family == AF_INET6;
	if (ip->v6) {
		memcpy(ip->src, &((const struct sockaddr_in6 *)src)->sin6_addr, 16);
		memcpy(ip->dst, &((const struct sockaddr_in6 *)dst)->sin6_addr, 16);
	} else {
		memcpy(ip->src, &((const struct sockaddr_in *)src)->sin_addr, 4);
		memcpy(ip->dst, &((const struct sockaddr_in *)dst)->sin_addr, 4);
	}
	ip->sport = sport;
	ip->dport = dport;
}

static socklen_t with_port(struct sockaddr_storage *ss, const struct sockaddr_storage *a,
			   uint16_t port)
{
	*ss = *a;
	if (ss->ss_family == AF_INET6) {
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
		return sizeof(struct sockaddr_in6);
	}
	((struct sockaddr_in *)ss)->sin_port = htons(port);
	return sizeof(struct sockaddr_in);
}

static bool same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr, 16);
	return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
	       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
}

static int udp_socket(const struct sockaddr_storage *local, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len = with_port(&ss, local, port);
	int one = 1, fd, big = 4 << 20;

	fd = xsock_fd_high(socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP));
	if (fd < 0)
		return -errno;
	xs_fd_keep(fd);
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, len) < 0) {
		int e = -errno;

		xs_fd_close(fd);
		return e;
	}
	/* bursts of a window of packets; root may pass rmem_max */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	return fd;
}

static _Atomic(xs_roce_stray_fn) stray_fn;

void xs_roce_set_stray(xs_roce_stray_fn fn)
{
	atomic_store(&stray_fn, fn);
}

/* Between its bind to port 4791 and its connect, a receive socket is the
 * port's most specific unconnected socket (bound to the local address,
 * the CM's to the wildcard), so the kernel gives it what arrives then for
 * nobody else: a MAD for the CM (cmtime's 100 connections at once lost a
 * REQ or two this way, each answered 2 s late, after its resend).  Once
 * connected it gets the peer's packets only, so anything else in its queue
 * came then and goes to the CM (xs_roce_set_stray).  true: from is the
 * peer. */
static bool from_peer(const struct xs_roce_conn *x, const struct sockaddr_storage *from)
{
	const struct sockaddr_storage *p = &x->rx_peer;

	if (!same_ip(from, p))
		return false;
	if (from->ss_family == AF_INET6)
		return ((const struct sockaddr_in6 *)from)->sin6_port ==
		       ((const struct sockaddr_in6 *)p)->sin6_port;
	return ((const struct sockaddr_in *)from)->sin_port ==
	       ((const struct sockaddr_in *)p)->sin_port;
}

static void rx_stray(const struct xs_roce_conn *x, const struct sockaddr_storage *from,
		     const uint8_t *d, size_t len)
{
	xs_roce_stray_fn fn = atomic_load(&stray_fn);

	if (fn)
		fn(d, len, from, &x->path.local);
}

static void conn_free(struct xs_roce_conn *x)
{
	if (x->rx_fd >= 0)
		xs_fd_close(x->rx_fd);
	if (x->tx_fd >= 0)
		xs_fd_close(x->tx_fd);
	if (x->fwd_fd >= 0)
		xs_fd_close(x->fwd_fd);
	xr_req_destroy(x);
	free(x->rx_bufs);
	free(x->rsp_mem);
	pthread_mutex_destroy(&x->rx_mu);
	pthread_mutex_destroy(&x->tx_mu);
	pthread_cond_destroy(&x->tx_cv);
	free(x);
}

/* Through xsock-roced: the QP's connection (a duplicate, so that the
 * connection may outlive the QP while it lingers) carries everything, and
 * the peer is registered before anything can come.  A peer of this host
 * gets our packets from the daemon as they are; a remote one gets them
 * from the daemon's UDP 4791, which the ICRC must then cover. */
static int relay_open(struct xs_roce_conn *x)
{
	int rc;

	x->fwd_fd = xsock_fd_high(fcntl(x->path.relay_fd, F_DUPFD_CLOEXEC, 0));
	if (x->fwd_fd < 0)
		return -errno;
	xs_fd_keep(x->fwd_fd);
	x->relay = true;
	rc = xr_relay_peer(x);
	if (rc < 0)
		return rc;
	if (!rc)
		x->ip_tx.sport = ROCE_UDP_PORT;
	atomic_store(&x->gso, true);
	return 0;
}

int xs_roce_conn_create(const struct xs_roce_path *p, struct xs_conn **out)
{
	struct xs_roce_conn *x;
	socklen_t plen;
	uint16_t sport, peer_sport; /* ours, the peer's (ip_tx, ip_rx keep them) */
	int rc, pmtu = IP_PMTUDISC_DO;

	if ((p->local.ss_family != AF_INET && p->local.ss_family != AF_INET6) ||
	    p->local.ss_family != p->peer.ss_family || p->mtu < 256 || p->mtu > 4096 ||
	    (p->mtu & (p->mtu - 1)) || !p->dest_qpn || p->dest_qpn > ROCE_QPN_MASK)
		return -EINVAL;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	atomic_init(&x->refs, 1);
	x->path = *p;
	x->path.rq_psn &= ROCE_PSN_MASK;
	x->rx_fd = x->tx_fd = x->fwd_fd = -1;
	x->cur_kind = -1;
	x->epsn = x->path.rq_psn;
	x->msn_recv = x->msn_rr = x->msn_aresp = 1; /* the QP's queues start at MSN 1 */
	pthread_mutex_init(&x->rx_mu, NULL);
	pthread_mutex_init(&x->tx_mu, NULL);
	pthread_cond_init(&x->tx_cv, NULL);
	/* Both ends of a pair compute the same port; two QPs of one host
	 * talking to each other over one address would then have the same
	 * 4-tuple both ways, so there the lower QPN keeps it and the other
	 * end flips its lowest bit. */
	sport = peer_sport = xs_roce_udp_sport(p->flow_label, p->qpn, p->dest_qpn);
	if (same_ip(&p->local, &p->peer)) {
		if (p->qpn < p->dest_qpn)
			peer_sport ^= 1;
		else
			sport ^= 1;
	}
	ip_fill(&x->ip_tx, &p->local, &p->peer, sport, ROCE_UDP_PORT);
	ip_fill(&x->ip_rx, &p->peer, &p->local, peer_sport, ROCE_UDP_PORT);
	x->to_len = with_port(&x->to, &p->peer, ROCE_UDP_PORT);
	rc = xr_req_init(x);
	if (rc < 0)
		goto fail;
	x->rx_bufs = malloc((size_t)XR_RX_BUF * XR_BATCH);
	if (!x->rx_bufs) {
		rc = -ENOMEM;
		goto fail;
	}
	if (p->relay) {
		rc = relay_open(x);
		if (rc < 0)
			goto fail;
		goto listed;
	}
	/* the name first: a packet passed on to it waits there until attach */
	rc = xr_fwd_open(x);
	if (rc < 0)
		goto fail;
	rc = x->rx_fd = udp_socket(&p->local, ROCE_UDP_PORT);
	if (rc < 0)
		goto fail;
	plen = with_port(&x->rx_peer, &p->peer, peer_sport);
	if (connect(x->rx_fd, (struct sockaddr *)&x->rx_peer, plen) < 0) {
		rc = -errno;
		goto fail;
	}
	/* a run of packets comes up in one datagram (xr_rx_drain cuts it) */
	setsockopt(x->rx_fd, SOL_UDP, UDP_GRO, &(int){ 1 }, sizeof(int));
	atomic_store(&x->gso, true);
	rc = x->tx_fd = udp_socket(&p->local, sport);
	if (rc < 0)
		goto fail;
	rc = p->local.ss_family == AF_INET6
		     ? setsockopt(x->tx_fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof(pmtu))
		     : setsockopt(x->tx_fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	if (rc < 0) {
		rc = -errno;
		goto fail;
	}
listed:
	rc = xr_loop_add(x);
	if (rc < 0)
		goto fail;
	xs_log("roce: QP %u -> %u sport %u peer sport %u mtu %u rq_psn %u%s", p->qpn,
	       p->dest_qpn, x->ip_tx.sport, x->ip_rx.sport, p->mtu, x->path.rq_psn,
	       x->relay ? " (through xsock-roced)" : "");
	*out = xr_conn(x);
	return 0;
fail:
	conn_free(x);
	return rc == -EADDRINUSE ? -EADDRNOTAVAIL : rc;
}

void xs_roce_conn_rts(struct xs_conn *c, const struct xs_roce_req_attr *a)
{
	struct xs_roce_conn *x = xr_of(c);
	uint64_t us;

	pthread_mutex_lock(&x->tx_mu);
	x->psn_next = x->psn_una = a->sq_psn & ROCE_PSN_MASK;
	/* IB: 4.096 us * 2^timeout; 0 waits forever there, a lossy UDP path
	 * cannot, so it gets XR_DEFAULT_TIMEOUT_US */
	us = a->timeout ? (4096ull << (a->timeout > 31 ? 31 : a->timeout)) / 1000u
			: XR_DEFAULT_TIMEOUT_US;
	x->rto_us = us < 1000 ? 1000 : us;
	x->retry_cnt = x->retry_left = a->retry_cnt;
	x->rnr_retry = x->rnr_left = a->rnr_retry;
	x->rts = true;
	xs_roce_params(a->ird, a->ord, &x->params);
	pthread_mutex_unlock(&x->tx_mu);
}

void xr_hold(struct xs_roce_conn *x)
{
	atomic_fetch_add_explicit(&x->refs, 1, memory_order_relaxed);
}

void xr_put(struct xs_roce_conn *x)
{
	if (atomic_fetch_sub_explicit(&x->refs, 1, memory_order_acq_rel) == 1)
		conn_free(x);
}

int xr_xmit(struct xs_roce_conn *x, const uint8_t *pkt, size_t len)
{
	ssize_t n;

	if (x->relay) {
		struct iovec iov = { (void *)pkt, len };
		int rc = xr_relay_send(x, &iov, 1, len);

		if (rc < 0)
			x->tx_err++;
		return rc;
	}
	xr_wire_send();
	do
		n = sendto(x->tx_fd, pkt, len, MSG_NOSIGNAL, (struct sockaddr *)&x->to, x->to_len);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		x->tx_err++;
		if (errno == EMSGSIZE)
			xs_log("roce: QP %u: %zu octets exceed the route's MTU", x->path.qpn, len);
		return -errno;
	}
	return 0;
}

/* Through xsock-roced: each run of packets one message (the daemon
 * sends it with UDP_SEGMENT as we would have, or hands it to a local
 * peer's connection as it is). */
static void relay_slots(struct xs_roce_conn *x, const struct mmsghdr *m, unsigned nm)
{
	for (unsigned i = 0; i < nm; i++) {
		const struct msghdr *h = &m[i].msg_hdr;

		if (xr_relay_send(x, h->msg_iov, (unsigned)h->msg_iovlen, h->msg_iov[0].iov_len) < 0) {
			x->tx_err++; /* lost: the retransmit timer sends it again */
			continue;
		}
		__atomic_fetch_add(&x->wire_tx_pkts, h->msg_iovlen, __ATOMIC_RELAXED);
		for (size_t e = 0; e < h->msg_iovlen; e++)
			__atomic_fetch_add(&x->wire_tx_octets, h->msg_iov[e].iov_len, __ATOMIC_RELAXED);
	}
}

/* The queued slots leave in one sendmmsg; a run of slots of one length
 * (the packets of a message but its last) is one message with
 * UDP_SEGMENT, which the kernel cuts into datagrams numbered with IPv4 IDs
 * 0, 1, ... (inet_gso_segment; one datagram: ID 0): each packet's ICRC
 * is set for its ID first. */
void xr_xmit_slots(struct xs_roce_conn *x, struct xr_slot *const *v, unsigned n,
		   struct roce_icrc_idcache *ids)
{
	struct mmsghdr m[XR_TX_BATCH];
	struct iovec iov[XR_TX_BATCH];
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} ctl[XR_TX_BATCH];
	unsigned nm = 0, done = 0;

	for (unsigned i = 0; i < n;) {
		struct xr_slot *s = v[i];
		unsigned k = 1, max = atomic_load(&x->gso) ? XR_GSO_MAX_BYTES / s->len : 1;

		if (max > XR_GSO_MAX_SEGS)
			max = XR_GSO_MAX_SEGS;
		while (i + k < n && k < max && v[i + k]->len == s->len)
			k++;
		for (unsigned j = 0; j < k; j++) {
			struct xr_slot *t = v[i + j];
			size_t body = t->len - ROCE_ICRC_LEN;

			roce_icrc_put(roce_icrc_with_id(ids, &x->ip_tx, t->pkt, body, t->icrc0,
							(uint16_t)j),
				      t->pkt + body);
			iov[i + j] = (struct iovec){ t->pkt, t->len };
		}
		m[nm] = (struct mmsghdr){ .msg_hdr = { .msg_name = &x->to, .msg_namelen = x->to_len,
						       .msg_iov = &iov[i], .msg_iovlen = k } };
		if (k > 1) {
			struct cmsghdr *c = (struct cmsghdr *)(void *)ctl[nm].buf;
			uint16_t seg = s->len;

			m[nm].msg_hdr.msg_control = ctl[nm].buf;
			m[nm].msg_hdr.msg_controllen = sizeof(ctl[nm].buf);
			c->cmsg_level = SOL_UDP;
			c->cmsg_type = UDP_SEGMENT;
			c->cmsg_len = CMSG_LEN(sizeof(seg));
			memcpy(CMSG_DATA(c), &seg, sizeof(seg));
		}
		nm++;
		i += k;
	}
	if (x->relay) {
		relay_slots(x, m, nm);
		return;
	}
	while (done < nm) {
		int r;

		xr_wire_send();
		r = sendmmsg(x->tx_fd, m + done, nm - done, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			/* lost: the retransmit timer sends it again */
			x->tx_err++;
			if (errno == EMSGSIZE)
				xs_log("roce: QP %u: packets of %zu octets exceed the route's MTU",
				       x->path.qpn, m[done].msg_hdr.msg_iov[0].iov_len);
			if (m[done].msg_hdr.msg_controllen && atomic_load(&x->gso) &&
			    (errno == EINVAL || errno == EIO || errno == EOPNOTSUPP)) {
				xs_log("roce: QP %u: UDP GSO refused (%s): one datagram a packet",
				       x->path.qpn, xs_strerror(errno));
				atomic_store(&x->gso, false);
			}
			done++;
			continue;
		}
		for (int j = 0; j < r; j++) {
			const struct msghdr *h = &m[done + (unsigned)j].msg_hdr;

			__atomic_fetch_add(&x->wire_tx_pkts, h->msg_iovlen, __ATOMIC_RELAXED);
			for (size_t e = 0; e < h->msg_iovlen; e++)
				__atomic_fetch_add(&x->wire_tx_octets, h->msg_iov[e].iov_len,
						   __ATOMIC_RELAXED);
		}
		done += (unsigned)r;
	}
}

void xr_xmit_flush(struct xs_roce_conn *x)
{
	unsigned n = x->tx_batch_n;

	x->tx_batch_n = 0;
	xr_xmit_slots(x, x->tx_batch, n, &x->icrc_tx);
}

void xr_xmit_queue(struct xs_roce_conn *x, struct xr_slot *s)
{
	x->tx_batch[x->tx_batch_n++] = s;
	if (x->tx_batch_n == XR_TX_BATCH)
		xr_xmit_flush(x);
}

int xr_xmit_pkt(struct xs_roce_conn *x, struct roce_pkt *p)
{
	uint8_t buf[ROCE_MAX_HDR_LEN + ROCE_ICRC_LEN];
	size_t len;

	p->bth.pkey = ROCE_PKEY_DEFAULT;
	p->bth.dqpn = x->path.dest_qpn;
	len = roce_pkt_build(p, NULL, 0, &x->ip_tx, buf);
	return len ? xr_xmit(x, buf, len) : -EINVAL;
}

void xr_fail(struct xs_roce_conn *x, bool local, const struct xs_err *err)
{
	atomic_store(&x->fatal, true);
	atomic_store(&x->dead, true);
	pthread_mutex_lock(&x->tx_mu);
	pthread_cond_broadcast(&x->tx_cv);
	pthread_mutex_unlock(&x->tx_mu);
	if (x->failed_up || !atomic_load(&x->attached))
		return;
	x->failed_up = true;
	x->up->failed(x->qp, local, err);
}

void xr_rx_packet(struct xs_roce_conn *x, const uint8_t *buf, size_t len)
{
	struct roce_pkt p;
	/* IPv6: the whole ICRC; IPv4: after the parse, with the ID solved
	 * for (a UDP socket does not see it; roce_icrc_find_id) */
	enum roce_perr e = roce_pkt_parse(buf, len, x->ip_rx.v6 ? &x->ip_rx : NULL,
					  ROCE_PKEY_DEFAULT, &p);

	if (e == ROCE_OK && !x->ip_rx.v6 &&
	    !roce_icrc_find_id(&x->icrc_ids, &x->ip_rx, buf, len - ROCE_ICRC_LEN,
			       roce_icrc_get(buf + len - ROCE_ICRC_LEN)))
		e = ROCE_E_ICRC;
	if (e != ROCE_OK) {
		x->rx_bad++;
		xs_log("roce: QP %u: packet of %zu octets dropped: %s", x->path.qpn, len,
		       roce_perr_str(e));
		return;
	}
	if (p.bth.dqpn != x->path.qpn || (roce_ops[p.bth.opcode].flags & ROCE_F_UD)) {
		x->rx_bad++;
		xs_log("roce: QP %u: packet for QP %u (opcode 0x%02x) dropped", x->path.qpn,
		       p.bth.dqpn, p.bth.opcode);
		return;
	}
	if (roce_ops[p.bth.opcode].flags & ROCE_F_RESP)
		xr_req_response(x, &p);
	else if (atomic_load(&x->attached))
		xr_resp_request(x, &p);
	else /* lingering: the QP is gone */
		xr_resp_time_wait(x, &p);
}

ssize_t xr_rx_drain(struct xs_roce_conn *x, size_t budget)
{
	uint8_t (*bufs)[XR_RX_BUF] = (uint8_t (*)[XR_RX_BUF])x->rx_bufs;
	struct mmsghdr m[XR_BATCH];
	struct iovec iov[XR_BATCH];
	struct sockaddr_storage from[XR_BATCH];
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl[XR_BATCH];
	ssize_t total = 0;
	bool was = xr_in_rx;

	if (x->relay) /* all comes on the daemon's connection */
		return xr_fwd_drain(x);
	xr_in_rx = true;
	while (!atomic_load(&x->fatal) && (size_t)total < budget) {
		int n;

		for (int i = 0; i < XR_BATCH; i++) {
			iov[i] = (struct iovec){ bufs[i], sizeof(bufs[i]) };
			memset(&m[i], 0, sizeof(m[i]));
			m[i].msg_hdr.msg_name = &from[i];
			m[i].msg_hdr.msg_namelen = sizeof(from[i]);
			m[i].msg_hdr.msg_iov = &iov[i];
			m[i].msg_hdr.msg_iovlen = 1;
			m[i].msg_hdr.msg_control = ctl[i].buf;
			m[i].msg_hdr.msg_controllen = sizeof(ctl[i].buf);
		}
		n = recvmmsg(x->rx_fd, m, XR_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			break;
		xr_wire_recv();
		for (int i = 0; i < n && !atomic_load(&x->fatal); i++) {
			size_t len = m[i].msg_len, seg = len;
			struct cmsghdr *c;
			bool stray;

			if (m[i].msg_hdr.msg_flags & MSG_TRUNC)
				continue;
			stray = !from_peer(x, &from[i]);
			/* UDP GRO: packets of one size back to back */
			for (c = CMSG_FIRSTHDR(&m[i].msg_hdr); c; c = CMSG_NXTHDR(&m[i].msg_hdr, c))
				if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
					int g;

					memcpy(&g, CMSG_DATA(c), sizeof(g));
					if (g > 0)
						seg = (size_t)g;
				}
			/* a run of packets for another QP (a shared 4-tuple:
			 * xs_roce_fwd.c) is passed on at once */
			size_t run = 0, run_len = 0;
			uint32_t run_qpn = 0, q;

			for (size_t off = 0; off < len && !atomic_load(&x->fatal); off += seg) {
				size_t n1 = len - off < seg ? len - off : seg;
				bool other = !stray && xr_fwd_for(x, bufs[i] + off, n1, &q);

				if (run_len && (!other || q != run_qpn)) {
					xr_fwd_send(x, run_qpn, bufs[i] + run, run_len, seg);
					run_len = 0;
				}
				if (stray) {
					rx_stray(x, &from[i], bufs[i] + off, n1);
				} else if (other) {
					if (!run_len)
						run = off, run_qpn = q;
					run_len += n1;
				} else {
					x->wire_rx_pkts++;
					x->wire_rx_octets += n1;
					xr_rx_packet(x, bufs[i] + off, n1);
				}
			}
			if (run_len)
				xr_fwd_send(x, run_qpn, bufs[i] + run, run_len, seg);
		}
		total += n;
		if (!atomic_load(&x->fatal))
			xr_resp_flush_ack(x);
		if (n < XR_BATCH)
			break;
	}
	xr_in_rx = was;
	return total;
}

/* The connection's line for XSOCK_STAT_LOG (rx_mu held). */
static void stat_log(const struct xs_roce_conn *x)
{
	struct xs_stat_addr loc = { 0 }, peer = { 0 };

	xs_stat_addr_of(&loc, &x->path.local);
	xs_stat_addr_of(&peer, &x->to);
	xs_stat_log(&(struct xs_stat_log_conn){
		.transport = "roce", .local = &loc, .peer = &peer,
		.tx_octets = __atomic_load_n(&x->wire_tx_octets, __ATOMIC_RELAXED),
		.rx_octets = x->wire_rx_octets,
		.tx_msgs = __atomic_load_n(&x->wire_tx_pkts, __ATOMIC_RELAXED),
		.rx_msgs = x->wire_rx_pkts });
}

void xr_let_go(struct xs_roce_conn *x)
{
	uint64_t now = xr_now_us(), linger_us = (uint64_t)xs_config()->linger_ms * 1000u;
	uint64_t last_ack, tw_us;
	bool linger = false, acked_lately;

	pthread_mutex_lock(&x->rx_mu);
	last_ack = x->last_ack_us;
	/* said when the QP goes, not when its memory does: a lingering
	 * connection is freed by the engine thread, which may still be at it
	 * when the process has exited (test-roce-loss read "placed ahead: 0"
	 * from a loaded machine's perftest server) */
	if (x->fwd_passed)
		xs_log("roce: QP %u: %llu packets passed on to QPs that share its 4-tuple", x->path.qpn,
		       (unsigned long long)x->fwd_passed);
	if (x->ooo_placed)
		xs_log("roce: QP %u: %llu Write packets placed ahead of a gap", x->path.qpn,
		       (unsigned long long)x->ooo_placed);
	stat_log(x);
	pthread_mutex_unlock(&x->rx_mu);
	pthread_mutex_lock(&x->tx_mu);
	/* a retransmission of what we ACKed comes within the peer's timeout,
	 * which we take to be ours (0.5 s if the QP never reached RTS) */
	tw_us = 3 * (x->rto_us ? x->rto_us : XR_DEFAULT_TIMEOUT_US);
	acked_lately = last_ack && now - last_ack < tw_us;
	if (atomic_load(&x->fatal) || !linger_us) {
		/* nothing to linger for */
	} else if (x->ring_count && x->rts) {
		/* as a TCP close sends what it holds: the QP went (its WRs
		 * flushed or unsignaled) while the peer had not ACKed them */
		linger = true;
		x->linger_end = now + linger_us;
	} else if (acked_lately) {
		/* our last ACK may be lost: the peer resends and must hear
		 * from us again (TIME_WAIT) */
		linger = true;
		x->time_wait = true;
		x->linger_end = now + (tw_us < linger_us ? tw_us : linger_us);
	}
	if (linger) {
		atomic_store(&x->lingering, true);
		atomic_fetch_add(&xr_lingering, 1);
	}
	pthread_mutex_unlock(&x->tx_mu);
	if (!linger)
		xr_loop_remove(x);
}
