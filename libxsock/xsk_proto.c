/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The rsockets protocol (rdma-core librdmacm/docs/rsocket, iWARP variant)
 * over the stack's rdma_* and ibv_* calls.
 *
 * Connection data (40 octets, big-endian) travels as MPA private data after
 * the RFC 6581 header.  Each message is an RDMA Write into the peer's
 * advertised buffer (or target SGL entry), if it carries bytes, followed by
 * a 4-octet Send holding the 32-bit rsockets message (type in bits 31:29),
 * because iWARP has no RDMA Write with immediate data.  A Send consumes one
 * posted receive at the peer; credits count those receives and are granted
 * as an absolute 16-bit sequence number in an SGL (credit update) message.
 *
 * The receive ring is split in two halves: the connection data advertises
 * the first, a credit update right after establishment the second; a half
 * is advertised again (RDMA Write of an rs_sge into the peer's target SGL,
 * entries used alternately) once the application has read all of it.  A
 * sender fills a target SGE completely before it uses the next, so the
 * data of consecutive Data Transfer messages lies contiguously in the ring.
 *
 * Progress is driven by the application's own calls (read, write, poll,
 * epoll_wait ...): xsk_progress drains the CM channel and the completion
 * channel without blocking.  The inner epoll fd (the number the
 * application holds) contains both channels and the ready eventfd, which
 * is kept readable while the socket is readable, so a kernel-level wait on
 * the application's fd wakes for new events and for buffered data.
 *
 * The fast path (one wake-up and about three system calls per small
 * message, see scripts/bench-sockets.sh): a blocked read or write also
 * polls the connection's TCP socket (xsk_rx_wait_begin), while the engine
 * leaves that connection alone, and then receives on its own thread; a
 * Data Transfer's Write and Send go out as one chain (one sendmsg); the
 * CQ stays disarmed while a thread of ours polls it, and the channels are
 * looked at without system calls (libiwarp's XSOCK_PRIVATE_0 calls). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "libxsock/xsk_config.h"
#include "libxsock/xsk_priv.h"
#include "util/xs_be.h"
#include "verbs/xs_priv_abi.h"

#define XSK_RQ 384 /* credits we grant (rsockets' default queue size) */
#define XSK_RECV_EXTRA 32 /* receives posted beyond the credits (control messages) */
#define XSK_SQ 1024
#define XSK_SBUF (256u * 1024)
#define XSK_RBUF_DEFAULT (512u * 1024)
#define XSK_RD_DEPTH 16 /* IRD/ORD we ask for (RDMA Reads of the extended calls) */

#define WR_RECV (1ull << 63)
#define WR_DATA (1ull << 62)
#define WR_DISC (1ull << 59) /* a kernel stack's closing DISCONNECT (signaled) */

/* ---- connection data ---------------------------------------------------------- */

static void put_sge(uint8_t *p, const struct rs_sge_h *s)
{
	xs_put_be64(p, s->addr);
	xs_put_be32(p + 8, s->key);
	xs_put_be32(p + 12, s->length);
}

static void get_sge(const uint8_t *p, struct rs_sge_h *s)
{
	s->addr = xs_get_be64(p);
	s->key = xs_get_be32(p + 8);
	s->length = xs_get_be32(p + 12);
}

void rs_conn_encode(const struct rs_conn *c, uint8_t out[RS_CONN_DATA_LEN])
{
	memset(out, 0, RS_CONN_DATA_LEN);
	out[0] = c->version;
	out[1] = c->flags;
	xs_put_be16(out + 2, c->credits);
	out[7] = c->target_iomap_size;
	put_sge(out + 8, &c->target_sgl);
	put_sge(out + 24, &c->data_buf);
}

int rs_conn_decode(const uint8_t *in, size_t len, struct rs_conn *c)
{
	if (!in || len < RS_CONN_DATA_LEN)
		return -EPROTO;
	c->version = in[0];
	c->flags = in[1];
	c->credits = xs_get_be16(in + 2);
	c->target_iomap_size = in[7];
	get_sge(in + 8, &c->target_sgl);
	get_sge(in + 24, &c->data_buf);
	if (c->version != RS_VERSION || !c->credits || !c->target_sgl.length ||
	    !c->data_buf.length)
		return -EPROTO;
	return 0;
}

static bool host_is_be(void)
{
	return __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__;
}

/* ---- objects ------------------------------------------------------------------ */

/* The environment this file reads, once per process: the receive ring's
 * size (XSOCK_IWARP_RBUF) and how long a close lingers for unsent data
 * (XSOCK_LINGER_MS, as libiwarp reads it: 0..60000, default 1000), from
 * the settings table (verbs/xs_settings.h). */
static struct {
	uint32_t rbuf;
	int linger_ms;
} proto_env;
static pthread_once_t proto_env_once = PTHREAD_ONCE_INIT;

static void proto_env_load(void)
{
	proto_env.rbuf = (uint32_t)xsk_setting_num(XS_SET_IWARP_RBUF) & ~1u;
	proto_env.linger_ms = (int)xsk_setting_num(XS_SET_LINGER_MS);
}

struct xsk *xsk_new(int family)
{
	struct xsk *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	pthread_once(&proto_env_once, proto_env_load);
	pthread_mutex_init(&s->mu, NULL);
	s->family = family;
	s->owner_pid = getpid();
	s->epfd = -1;
	s->plain_fd = -1;
	s->ready_fd = -1;
	s->wake_fd = -1;
	s->rxw_fd = -1;
	s->rbuf_size = proto_env.rbuf;
	s->sbuf_size = XSK_SBUF;
	s->rq_size = XSK_RQ;
	s->rcvlowat = 1;
	return s;
}

static int set_nonblock(int fd)
{
	int fl = xsk_real.fcntl(fd, F_GETFL);

	if (fl < 0 || xsk_real.fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static int ep_add(struct xsk *s, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	if (xsk_real.epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	return 0;
}

int xsk_make_fds(struct xsk *s)
{
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->epfd < 0)
		return -errno;
	s->ready_fd = xsk_fd_keep(xsock_fd_high(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)));
	if (s->ready_fd < 0)
		return -errno;
	s->wake_fd = xsk_fd_keep(xsock_fd_high(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)));
	if (s->wake_fd < 0)
		return -errno;
	return ep_add(s, s->ready_fd);
}

static int make_channel(struct xsk *s, const struct xsk_stack *st)
{
	int rc;

	s->ch = st->create_event_channel();
	if (!s->ch)
		return -(errno ? errno : ENOMEM);
	rc = set_nonblock(s->ch->fd);
	if (!rc)
		rc = ep_add(s, s->ch->fd);
	return rc;
}

void xsk_set_ready(struct xsk *s)
{
	bool want = (xsk_revents(s) & (POLLIN | POLLERR | POLLHUP)) != 0;
	uint64_t v = 1;

	if (want == s->ready_set || s->ready_fd < 0)
		return;
	if (want) {
		if (xsk_real.write(s->ready_fd, &v, sizeof(v)) == sizeof(v))
			s->ready_set = true;
	} else {
		if (xsk_real.read(s->ready_fd, &v, sizeof(v)) == sizeof(v) || errno == EAGAIN)
			s->ready_set = false;
	}
}

void xsk_set_ready_after_io(struct xsk *s, bool nothing_found)
{
	if (nothing_found || !s->ready_set)
		xsk_set_ready(s);
}

/* ---- posting ------------------------------------------------------------------ */

/* The address (TO) of p in the receive memory as the MR knows it: its own
 * address, except after an exec hand-over, where the memory is registered
 * at the old process's addresses (the peer holds them). */
static uint64_t mem_to(const struct xsk *s, const void *p)
{
	return s->mem_iova + (uint64_t)((const uint8_t *)p - s->mem);
}

static int post_recv(struct xsk *s, unsigned i)
{
	struct ibv_sge sge = { .addr = mem_to(s, &s->rmsgbuf[i]), .length = 4,
			       .lkey = s->rmr->lkey };
	struct ibv_recv_wr wr = { .wr_id = WR_RECV | i, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return -ibv_post_recv(s->id->qp, &wr, &bad);
}

static uint32_t swap32(uint32_t v)
{
	return __builtin_bswap32(v);
}

/* A 4-octet Send carrying msg, in the peer's byte order. */
static int post_msg(struct xsk *s, uint32_t msg)
{
	uint32_t m = s->swap ? swap32(msg) : msg;
	struct ibv_sge sge = { .addr = (uintptr_t)&m, .length = sizeof(m) };
	struct ibv_send_wr wr = { .opcode = IBV_WR_SEND, .sg_list = &sge, .num_sge = 1,
				  .send_flags = IBV_SEND_INLINE };
	struct ibv_send_wr *bad;

	return -ibv_post_send(s->id->qp, &wr, &bad);
}

/* ---- resources ----------------------------------------------------------------- */

/* The receive memory as the peer of an adopted connection knows it. */
struct xsk_adopt_mr {
	uint32_t rkey;
	uint64_t iova;
};

/* The memory the stack places data in or sends from.  Over a kernel stack
 * it is MAP_SHARED, which fork never copies: the kernel keeps placing into
 * the pages it pinned at registration, and those must stay the owner's (a
 * private page written after a fork was copied for the writer on older
 * kernels, the old page left to the kernel and the child: the reason for
 * rdma-core's ibv_fork_init).  NULL on failure. */
static void *ring_alloc(const struct xsk_stack *st, size_t len)
{
	void *p;

	if (st->kernel) {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	if (posix_memalign(&p, 4096, len))
		return NULL;
	memset(p, 0, len);
	return p;
}

static void ring_free(const struct xsk_stack *st, void *p, size_t len)
{
	if (p && st && st->kernel)
		munmap(p, len);
	else
		free(p);
}

static int setup_qp(struct xsk *s, const struct xsk_stack *st, const struct xsk_adopt_mr *ad)
{
	struct ibv_context *ctx = s->id->verbs;
	uint32_t sgl_off, msg_off;
	int rc;

	if (!ctx)
		return -ENODEV;
	s->pd = st->alloc_pd(ctx);
	if (!s->pd)
		return -(errno ? errno : ENOMEM);
	s->cch = st->create_comp_channel(ctx);
	if (!s->cch)
		return -(errno ? errno : ENOMEM);
	rc = set_nonblock(s->cch->fd);
	if (!rc)
		rc = ep_add(s, s->cch->fd);
	if (rc)
		return rc;
	s->nrecv = s->rq_size + XSK_RECV_EXTRA;
	s->cq = st->create_cq(ctx, (int)(s->nrecv + XSK_SQ * 2 + 16), s, s->cch, 0);
	if (!s->cq)
		return -(errno ? errno : ENOMEM);
	sgl_off = s->rbuf_size;
	msg_off = sgl_off + RS_SGL_SIZE * RS_SGE_LEN;
	s->mem_len = msg_off + s->nrecv * 4u;
	s->mem = ring_alloc(st, s->mem_len);
	if (!s->mem)
		return -ENOMEM;
	s->rbuf = s->mem;
	s->target_sgl = (volatile struct rs_sge_h *)(void *)(s->mem + sgl_off);
	s->rmsgbuf = (uint32_t *)(void *)(s->mem + msg_off);
	s->mem_iova = ad ? ad->iova : (uintptr_t)s->mem;
	if (ad)
		s->rmr = st->reg_mr_stag(s->pd, s->mem, s->mem_len, ad->iova,
					 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, ad->rkey);
	else
		s->rmr = st->reg_mr(s->pd, s->mem, s->mem_len,
				    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!s->rmr)
		return -(errno ? errno : ENOMEM);
	s->sbuf = ring_alloc(st, s->sbuf_size);
	if (!s->sbuf)
		return -ENOMEM;
	s->smr = st->reg_mr(s->pd, s->sbuf, s->sbuf_size, IBV_ACCESS_LOCAL_WRITE);
	if (!s->smr)
		return -(errno ? errno : ENOMEM);
	s->rmsg_cap = s->nrecv + 1;
	s->rmsg = calloc(s->rmsg_cap, sizeof(*s->rmsg));
	if (!s->rmsg)
		return -ENOMEM;

	struct ibv_qp_init_attr qa = {
		.send_cq = s->cq,
		.recv_cq = s->cq,
		.cap = { .max_send_wr = XSK_SQ, .max_recv_wr = s->nrecv, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 64 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
	};
	if (st->create_qp(s->id, s->pd, &qa))
		return -(errno ? errno : ENOMEM);
	for (unsigned i = 0; i < s->nrecv; i++) {
		rc = post_recv(s, i);
		if (rc)
			return rc;
	}
	rc = ibv_req_notify_cq(s->cq, 0);
	if (rc)
		return -rc;
	s->cq_armed = true;
	if (ad)
		return 0; /* the ring goes on where the old process left it */

	/* receive ring: the first half goes out in the connection data */
	s->rbuf_offset = 0;
	s->rbuf_free_offset = s->rbuf_size / 2;
	s->rbuf_bytes_avail = s->rbuf_size / 2;
	s->rseq_no = 0;
	s->rseq_comp = s->rq_size / 2;
	s->remote_sge = 1; /* entry 0 is the data buffer of our connection data */
	return 0;
}

int xsk_adopt_conn(struct xsk *s, int tcpfd, const uint8_t *wire, uint32_t rkey, uint64_t iova,
		   const uint8_t *mem, const uint8_t *sbuf, const struct xsk_rmsg *rmsg,
		   unsigned rmsg_cap)
{
	const struct xsk_stack *st = xsk_stack();
	struct xsk_adopt_mr ad = { .rkey = rkey, .iova = iova };
	size_t mem_len = s->mem_len;
	int rc;

	if (!st)
		return -ENOSYS;
	if (!st->adopt || !st->adopt_start || !st->reg_mr_stag)
		return -EOPNOTSUPP;
	rc = xsk_make_fds(s);
	if (!rc)
		rc = make_channel(s, st);
	if (rc)
		return rc;
	s->id = st->adopt(s->ch, s, tcpfd, wire);
	if (!s->id)
		return -(errno ? errno : ENOMEM);
	rc = setup_qp(s, st, &ad);
	if (rc)
		return rc;
	if (s->mem_len != mem_len)
		return -EINVAL; /* another ring layout: not the same libxsock */
	if (s->rmsg_cap != rmsg_cap)
		return -EINVAL;
	memcpy(s->mem, mem, mem_len);
	memcpy(s->sbuf, sbuf, s->sbuf_size);
	memcpy(s->rmsg, rmsg, rmsg_cap * sizeof(*rmsg));
	rc = st->adopt_start(s->id);
	if (rc)
		return rc;
	xsk_progress(s);
	return 0;
}

static void local_conn(struct xsk *s, uint8_t out[RS_CONN_DATA_LEN])
{
	struct rs_conn c = {
		.version = RS_VERSION,
		.flags = host_is_be() ? RS_CONN_FLAG_NET : 0,
		.credits = s->rq_size,
		.target_sgl = { .addr = mem_to(s, (const void *)s->target_sgl), .key = s->rmr->rkey,
				.length = RS_SGL_SIZE },
		.data_buf = { .addr = mem_to(s, s->rbuf), .key = s->rmr->rkey,
			      .length = s->rbuf_size / 2 },
	};
	rs_conn_encode(&c, out);
}

static void give_credits(struct xsk *s);

/* The stream ended without the peer's DISCONNECT or SHUTDOWN (a work
 * request failed: the stack flushes them when the connection fails, and
 * then always reports DISCONNECTED) but DISCONNECTED, which tells a reset from a FIN, is not
 * here yet: no end of stream until it is. */
static bool end_unknown(const struct xsk *s)
{
	return s->qp_failed && !s->peer_ctrl && !s->cm_gone && !s->disc_sent && !s->shut_rd;
}

/* The peer's connection data: the connection is up. */
static int established(struct xsk *s, const void *pdata, size_t len)
{
	struct rs_conn rc;

	if (rs_conn_decode(pdata, len, &rc) < 0)
		return -EPROTO;
	s->swap = ((rc.flags & RS_CONN_FLAG_NET) != 0) != host_is_be();
	s->remote_sgl = rc.target_sgl;
	if (s->remote_sgl.length > 64)
		s->remote_sgl.length = 64;
	s->sseq_no = 0;
	/* The peer's first SGL message (its second ring half, credits) can be
	 * polled from the CQ before the ESTABLISHED event is read: an rsockets
	 * server on siw sends it right after accepting.  Wiping tsgl[1] here
	 * lost that half and the stream stalled once the first was full. */
	if (!s->sgl_seen)
		s->sseq_comp = rc.credits;
	s->target_sge = 0;
	s->tsgl[0] = rc.data_buf;
	s->state = XSK_CONNECTED;
	if (s->id) {
		memcpy(&s->local, &s->id->route.addr.src_storage, sizeof(s->local));
		memcpy(&s->peer, &s->id->route.addr.dst_storage, sizeof(s->peer));
		s->have_local = true;
	}
	xsk_opts_apply(s);
	give_credits(s);
	return 0;
}

/* ---- credits and the receive ring ----------------------------------------------- */

static void conn_broken(struct xsk *s)
{
	s->peer_gone = true;
	s->peer_shut_wr = true;
}

/* The connection ended without the peer's DISCONNECT (or SHUTDOWN then
 * DISCONNECT) control message: a TCP reset, a Terminate, a flushed WR.  As a
 * TCP socket after a RST, the application gets ECONNRESET once (recv after
 * the buffered data, send, SO_ERROR) instead of an end of file that looks
 * like a complete stream.  Seen with siw: rsockets closes once its sends
 * are queued in TCP, and a credit update arriving then made siw's socket
 * close with unread data, a RST that dropped the tail of the stream
 * (docs/interop.md). */
static void conn_reset(struct xsk *s)
{
	if (!s->peer_gone && !s->disc_sent && !s->err)
		s->err = ECONNRESET;
	conn_broken(s);
}

static void give_credits(struct xsk *s)
{
	uint32_t half = s->rbuf_size / 2;
	bool buf, seq;

	if (s->state != XSK_CONNECTED || s->peer_gone || s->disc_sent)
		return;
	buf = s->rbuf_bytes_avail >= half;
	seq = (int16_t)(uint16_t)(s->rseq_no - s->rseq_comp) >= 0;
	if (!buf && !seq)
		return;
	s->rseq_comp = (uint16_t)(s->rseq_no + s->rq_size / 2);
	if (buf) {
		struct rs_sge_h sge = { .addr = mem_to(s, s->rbuf + s->rbuf_free_offset),
					.key = s->rmr->rkey, .length = half };
		if (s->swap) {
			sge.addr = __builtin_bswap64(sge.addr);
			sge.key = swap32(sge.key);
			sge.length = swap32(sge.length);
		}
		/* the Write of the SGE and the SGL message: one chain, which
		 * the stack sends with one sendmsg */
		uint32_t m = RS_MSG(RS_OP_SGL, (uint16_t)(s->rseq_no + s->rq_size));
		if (s->swap)
			m = swap32(m);
		struct ibv_sge ib = { .addr = (uintptr_t)&sge, .length = sizeof(sge) };
		struct ibv_sge mb = { .addr = (uintptr_t)&m, .length = sizeof(m) };
		struct ibv_send_wr msg = { .opcode = IBV_WR_SEND, .sg_list = &mb, .num_sge = 1,
					   .send_flags = IBV_SEND_INLINE };
		struct ibv_send_wr wr = { .next = &msg, .opcode = IBV_WR_RDMA_WRITE, .sg_list = &ib,
					  .num_sge = 1, .send_flags = IBV_SEND_INLINE };
		struct ibv_send_wr *bad;
		wr.wr.rdma.remote_addr = s->remote_sgl.addr + (uint64_t)s->remote_sge * RS_SGE_LEN;
		wr.wr.rdma.rkey = s->remote_sgl.key;
		if (ibv_post_send(s->id->qp, &wr, &bad)) {
			conn_broken(s);
			return;
		}
		s->rbuf_bytes_avail -= half;
		s->rbuf_free_offset += half;
		if (s->rbuf_free_offset >= s->rbuf_size)
			s->rbuf_free_offset = 0;
		if (++s->remote_sge >= s->remote_sgl.length)
			s->remote_sge = 0;
		return;
	}
	if (post_msg(s, RS_MSG(RS_OP_SGL, (uint16_t)(s->rseq_no + s->rq_size))))
		conn_broken(s);
}

/* Pick up target SGL entries the peer wrote (an SGL message follows the
 * Write, so entries we finished are complete when we get here). */
static void refresh_tsgl(struct xsk *s)
{
	for (unsigned i = 0; i < RS_SGL_SIZE; i++) {
		if (s->tsgl[i].length)
			continue;
		struct rs_sge_h e;
		e.addr = s->target_sgl[i].addr;
		e.key = s->target_sgl[i].key;
		e.length = s->target_sgl[i].length;
		if (e.length) {
			s->tsgl[i] = e;
			s->target_sgl[i].length = 0;
		}
	}
}

static void handle_msg(struct xsk *s, uint32_t msg)
{
	switch (RS_MSG_OP(msg)) {
	case RS_OP_DATA: {
		uint32_t len = RS_MSG_DATA(msg);
		if (!len) { /* nothing to read: consumed now */
			s->rseq_no++;
			break;
		}
		if (s->rmsg_count == s->rmsg_cap) { /* cannot happen within credits */
			conn_broken(s);
			break;
		}
		s->rmsg[(s->rmsg_head + s->rmsg_count) % s->rmsg_cap].len = len;
		s->rmsg_count++;
		s->rbytes += len;
		break;
	}
	case RS_OP_SGL:
		s->sgl_seen = true;
		s->sseq_comp = (uint16_t)RS_MSG_DATA(msg);
		refresh_tsgl(s);
		break;
	case RS_OP_CTRL:
		if (RS_MSG_DATA(msg) == RS_CTRL_DISCONNECT) {
			s->peer_ctrl = true;
			conn_broken(s);
		} else if (RS_MSG_DATA(msg) == RS_CTRL_SHUTDOWN) {
			s->peer_ctrl = true;
			s->peer_shut_wr = true;
		}
		break;
	default: /* iomap updates, direct writes: not used by this side */
		break;
	}
}

/* rx (XSOCK_RX_*): an empty CQ makes the stack receive on the connection
 * first */
static void poll_cq_rx(struct xsk *s, int rx)
{
	const struct xsk_stack *st = xsk_stack();
	struct ibv_wc wc[32];
	int n;

	/* a short batch drained the CQ: polling an empty one would try the
	 * socket once more */
	for (n = 32; s->cq && n == 32 &&
		     (n = st && st->poll_cq ? st->poll_cq(s->cq, 32, wc, rx)
					    : ibv_poll_cq(s->cq, 32, wc)) > 0;) {
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS)
				s->qp_failed = true;
			if (wc[i].wr_id & WR_RECV) {
				unsigned idx = (unsigned)(wc[i].wr_id & 0xffffffffu);
				if (wc[i].status != IBV_WC_SUCCESS || idx >= s->nrecv) {
					conn_reset(s);
					continue;
				}
				s->rmsg_arrived++;
				handle_msg(s, s->rmsgbuf[idx]);
				if (!s->peer_gone && post_recv(s, idx))
					conn_broken(s);
			} else if (wc[i].wr_id & WR_DATA) {
				uint32_t len = (uint32_t)(wc[i].wr_id & 0xffffffffu);
				s->sbuf_used -= len;
				s->sbuf_tail += len;
				if (s->sbuf_tail >= s->sbuf_size)
					s->sbuf_tail = 0;
				if (wc[i].status != IBV_WC_SUCCESS)
					conn_reset(s);
			} else if (wc[i].wr_id == WR_DISC) {
				s->disc_pending = false;
			} else if (wc[i].wr_id & (XSK_WR_EXT | XSK_WR_USER)) {
				xsk_ext_wc(s, &wc[i]);
				if (wc[i].status != IBV_WC_SUCCESS)
					conn_reset(s);
			} else if (wc[i].status != IBV_WC_SUCCESS) {
				conn_reset(s);
			}
		}
	}
}

/* CQ events: libxsock keeps its CQ armed only while no thread of its own
 * is inside a locked section (where it polls the CQ anyway), so that the
 * completions it makes itself (its Writes, the receives its waiting thread
 * takes off the socket) cost no channel event; the arm at the end signals
 * at once if completions are left (cq_rearm). */
static void cq_disarm(struct xsk *s, const struct xsk_stack *st)
{
	if (st->cq_arm && s->cq && s->cq_armed) {
		st->cq_arm(s->cq, 0);
		s->cq_armed = false;
	}
}

static void cq_rearm(struct xsk *s, const struct xsk_stack *st)
{
	if (st->cq_arm && s->cq && !s->cq_armed) {
		st->cq_arm(s->cq, 1);
		s->cq_armed = true;
	}
}

static void poll_cq(struct xsk *s)
{
	poll_cq_rx(s, XSOCK_RX_MAYBE);
}

/* pending: the channel has events (xsk_progress looked) */
static void drain_cq_events(struct xsk *s, const struct xsk_stack *st, bool pending)
{
	struct ibv_cq *cq;
	void *ctx;
	unsigned n = 0;

	if (!s->cch)
		return;
	if (pending && st->comp_take) {
		while (st->comp_take(s->cch))
			n++;
	} else {
		/* only with an event pending: the stack's ibv_get_cq_event
		 * spins (40 us) before it looks at the fd, even on a
		 * nonblocking channel */
		while (pending && st->get_cq_event(s->cch, &cq, &ctx) == 0)
			n++;
	}
	if (n) {
		st->ack_cq_events(s->cq, n);
		s->cq_armed = false;
	}
	if (st->cq_arm)
		cq_disarm(s, st);
	else if (!s->cq_armed && s->cq && ibv_req_notify_cq(s->cq, 0) == 0)
		s->cq_armed = true;
}

/* ---- CM events ------------------------------------------------------------------ */

static int status_errno(int status, int dflt)
{
	if (status < 0)
		return -status;
	if (status > 0)
		return status;
	return dflt;
}

static void fail_connect(struct xsk *s, int err)
{
	s->state = XSK_CLOSED;
	s->err = err;
}

static void child_accept(struct xsk *l, const struct xsk_stack *st, struct rdma_cm_event *ev);

static void plain_arrived(struct xsk *l, struct rdma_cm_event *ev);

static void cm_event(struct xsk *s, const struct xsk_stack *st, struct rdma_cm_event *ev)
{
	uint8_t cd[RS_CONN_DATA_LEN];

	if ((int)ev->event == XSOCK_CM_EVENT_PLAIN) {
		plain_arrived(s, ev);
		return;
	}
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (s->state == XSK_CONNECTING && st->resolve_route(s->id, 2000))
			fail_connect(s, errno ? errno : EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED: {
		if (s->state != XSK_CONNECTING)
			break;
		int rc = setup_qp(s, st, NULL);
		if (rc) {
			fail_connect(s, -rc);
			break;
		}
		local_conn(s, cd);
		struct rdma_conn_param p = { .private_data = cd, .private_data_len = sizeof(cd),
					     .responder_resources = XSK_RD_DEPTH,
					     .initiator_depth = XSK_RD_DEPTH,
					     .retry_count = 7, .rnr_retry_count = 7 };
		if (st->connect(s->id, &p))
			fail_connect(s, errno ? errno : ECONNREFUSED);
		break;
	}
	case RDMA_CM_EVENT_ESTABLISHED:
		if (s->state == XSK_CONNECTING &&
		    established(s, ev->param.conn.private_data, ev->param.conn.private_data_len) < 0) {
			st->disconnect(s->id);
			fail_connect(s, ECONNREFUSED);
		}
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		if (s->state == XSK_CONNECTING)
			fail_connect(s, status_errno(ev->status, EHOSTUNREACH) == ETIMEDOUT ?
						ETIMEDOUT : EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		if (s->state == XSK_CONNECTING)
			fail_connect(s, ECONNREFUSED);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		s->cm_gone = true; /* (its status tells a reset) */
		if (s->state == XSK_CONNECTED) {
			poll_cq(s); /* a DISCONNECT message may be queued before it */
			conn_reset(s);
		} else if (s->state == XSK_CONNECTING) {
			fail_connect(s, ECONNRESET);
		}
		break;
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		if (s->state == XSK_LISTENING)
			child_accept(s, st, ev);
		else
			st->reject(ev->id, NULL, 0);
		break;
	default:
		break;
	}
}

/* A listener sets up each child here (QP, ring, MPA Reply) with its lock
 * held, which a non-blocking accept() waits for: a few per call, so that
 * a burst of clients never holds it long (the channel stays readable for
 * the service thread and the application's wait while events remain). */
#define XSK_CM_BATCH 2

static void drain_cm(struct xsk *s, const struct xsk_stack *st)
{
	struct rdma_cm_event *ev;
	int n = 0;

	while (s->ch && (s->state != XSK_LISTENING || n++ < XSK_CM_BATCH) &&
	       st->get_cm_event(s->ch, &ev) == 0) {
		cm_event(s, st, ev);
		st->ack_cm_event(ev);
	}
}

static void progress(struct xsk *s, bool ready, int rx)
{
	const struct xsk_stack *st = xsk_stack();
	bool cm_ev, cq_ev;

	if (!st || s->state == XSK_FRESH)
		return;
	if (!xsk_fork_use(s)) {
		fail_connect(s, EBUSY); /* another process uses it (xsock(7) FORK) */
		xsk_set_ready(s);
		return;
	}
	if (st->cm_pending && st->comp_pending) {
		/* the stack's queues, without a system call */
		cm_ev = s->ch && st->cm_pending(s->ch);
		cq_ev = s->cch && st->comp_pending(s->cch) > 0;
	} else {
		/* one syscall to see which channel has events (poll_cq
		 * receives whether or not the CQ channel fired) */
		struct pollfd p[2] = { { .fd = s->ch ? s->ch->fd : -1, .events = POLLIN },
				       { .fd = s->cch ? s->cch->fd : -1, .events = POLLIN } };
		if (xsk_real.poll(p, 2, 0) <= 0)
			p[0].revents = p[1].revents = 0;
		cm_ev = p[0].revents != 0;
		cq_ev = p[1].revents != 0;
	}
	if (cm_ev)
		drain_cm(s, st);
	drain_cq_events(s, st, cq_ev);
	poll_cq_rx(s, rx);
	if (s->ext)
		xsk_ext_progress(s);
	give_credits(s);
	cq_rearm(s, st);
	if (ready)
		xsk_set_ready(s);
	if (s->writers_waiting && s->wake_fd >= 0 && (xsk_revents(s) & (POLLOUT | POLLERR | POLLHUP))) {
		uint64_t one = 1;
		if (xsk_real.write(s->wake_fd, &one, sizeof(one)) < 0)
			s->writers_waiting = s->writers_waiting; /* full: already signalled */
	}
}

void xsk_progress(struct xsk *s)
{
	progress(s, true, XSOCK_RX_MAYBE);
}

void xsk_progress_rx(struct xsk *s, int rx)
{
	progress(s, true, rx);
}

bool xsk_progress_io(struct xsk *s, int flags, bool reading)
{
	/* after a wait on the TCP socket (rx_hint) it is likely readable;
	 * a non-blocking call with nothing buffered looks at the socket on
	 * this thread (no hand-off to the engine), one with data buffered
	 * only if the engine is not watching an emptied socket anyway */
	int rx = s->rx_hint ? XSOCK_RX_ALWAYS :
		 !(s->nonblock || (flags & MSG_DONTWAIT)) ? XSOCK_RX_NONE :
		 /* a watched socket (xsk_progress_watch): the application's
		  * epoll_wait reports what comes; a reader with data buffered
		  * and a writer that has room need nothing new */
		 s->rxw_fd >= 0 && (s->rbytes || !reading) ? XSOCK_RX_NONE :
		 !s->rbytes ? XSOCK_RX_ALWAYS : XSOCK_RX_MAYBE;

	s->rx_hint = false;
	progress(s, false, rx);
	return rx == XSOCK_RX_NONE && (s->nonblock || (flags & MSG_DONTWAIT));
}

/* ---- listen / accept ------------------------------------------------------------- */

int xsk_listen_start(struct xsk *s, const struct sockaddr *addr, int backlog)
{
	const struct xsk_stack *st = xsk_stack();
	int rc;

	if (!st)
		return -ENOSYS;
	rc = make_channel(s, st);
	if (rc)
		return rc;
	if (st->create_id(s->ch, &s->id, s, RDMA_PS_TCP))
		return -(errno ? errno : ENOMEM);
	if (s->v6only >= 0 &&
	    st->set_option(s->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &s->v6only, sizeof(int)))
		return -(errno ? errno : EINVAL);
	if (st->bind_addr(s->id, (struct sockaddr *)addr))
		return -(errno ? errno : EADDRNOTAVAIL);
	/* plain TCP clients too (xsock(7) MIXED LISTENER) */
	if (st->listen_mixed && st->listen_mixed(s->id) < 0)
		return -EINVAL;
	if (st->listen(s->id, backlog))
		return -(errno ? errno : EADDRINUSE);
	memcpy(&s->local, &s->id->route.addr.src_storage, sizeof(s->local));
	s->have_local = true;
	s->backlog = backlog;
	s->state = XSK_LISTENING;
	return 0;
}

static void acceptq_push(struct xsk *l, struct xsk *c)
{
	c->in_accept_queue = true;
	if (l->acceptq_tail)
		l->acceptq_tail->lst_next = c;
	else
		l->acceptq = c;
	l->acceptq_tail = c;
	l->acceptq_len++;
	l->acceptq_seq++;
}

static void child_accept(struct xsk *l, const struct xsk_stack *st, struct rdma_cm_event *ev)
{
	struct rdma_cm_id *id = ev->id;
	struct rs_conn peer;
	uint8_t cd[RS_CONN_DATA_LEN];
	struct xsk *c;
	int rc;

	if (rs_conn_decode(ev->param.conn.private_data, ev->param.conn.private_data_len,
			   &peer) < 0 ||
	    (l->backlog > 0 && l->acceptq_len >= l->backlog)) {
		st->reject(id, NULL, 0);
		st->destroy_id(id);
		return;
	}
	c = xsk_new(l->family);
	if (!c)
		goto refuse;
	c->rbuf_size = l->rbuf_size;
	c->id = id;
	id->context = c;
	if (xsk_make_fds(c) || make_channel(c, st) || st->migrate_id(id, c->ch))
		goto refuse_free;
	c->state = XSK_CONNECTING;
	rc = setup_qp(c, st, NULL);
	if (rc)
		goto refuse_free;
	local_conn(c, cd);
	struct rdma_conn_param p = { .private_data = cd, .private_data_len = sizeof(cd),
				     .responder_resources = ev->param.conn.responder_resources,
				     .initiator_depth = ev->param.conn.initiator_depth };
	if (st->accept(id, &p)) {
		xsk_free(c);
		return;
	}
	if (established(c, ev->param.conn.private_data, ev->param.conn.private_data_len) < 0) {
		xsk_free(c);
		return;
	}
	acceptq_push(l, c);
	return;
refuse_free:
	c->id = NULL; /* rejected and destroyed below */
	xsk_free(c);
refuse:
	st->reject(id, NULL, 0);
	st->destroy_id(id);
}

/* A plain TCP client of a mixed listener: queue its kernel socket behind
 * the connections that came before it. */
static void plain_arrived(struct xsk *l, struct rdma_cm_event *ev)
{
	int fd = ev->status;
	struct xsk *c = NULL;

	ev->status = -1; /* taken: rdma_ack_cm_event must not close it */
	if (fd < 0)
		return;
	if (l->state == XSK_LISTENING && !(l->backlog > 0 && l->acceptq_len >= l->backlog))
		c = xsk_new(l->family);
	if (!c) {
		xsk_real.close(fd); /* refused like an iWARP client over the backlog */
		return;
	}
	c->plain_fd = fd;
	acceptq_push(l, c);
}

struct xsk *xsk_accept_pop(struct xsk *l)
{
	struct xsk *c = l->acceptq;

	if (!c)
		return NULL;
	l->acceptq = c->lst_next;
	if (!l->acceptq)
		l->acceptq_tail = NULL;
	l->acceptq_len--;
	c->lst_next = NULL;
	c->in_accept_queue = false;
	return c;
}

/* ---- connect --------------------------------------------------------------------- */

int xsk_connect_start(struct xsk *s, const struct sockaddr *dst, socklen_t len)
{
	const struct xsk_stack *st = xsk_stack();
	int rc;

	if (!st)
		return -ENOSYS;
	if (len > sizeof(s->peer))
		return -EINVAL;
	rc = make_channel(s, st);
	if (rc)
		return rc;
	if (st->create_id(s->ch, &s->id, s, RDMA_PS_TCP))
		return -(errno ? errno : ENOMEM);
	memcpy(&s->peer, dst, len);
	s->state = XSK_CONNECTING;
	if (st->resolve_addr(s->id, s->have_local ? (struct sockaddr *)&s->local : NULL,
			     (struct sockaddr *)dst, 2000)) {
		s->state = XSK_FRESH;
		return -(errno ? errno : EHOSTUNREACH);
	}
	return 0;
}

/* ---- readiness --------------------------------------------------------------------- */

static uint32_t sbuf_contig(struct xsk *s)
{
	if (s->sbuf_used == 0) {
		s->sbuf_head = s->sbuf_tail = 0;
		return s->sbuf_size;
	}
	if (s->sbuf_head == s->sbuf_tail)
		return 0; /* full */
	if (s->sbuf_head > s->sbuf_tail)
		return s->sbuf_size - s->sbuf_head;
	return s->sbuf_tail - s->sbuf_head;
}

/* Credits and a target buffer for one more Data Transfer message. */
static bool stream_credit(struct xsk *s)
{
	if (s->state != XSK_CONNECTED || s->shut_wr || s->peer_gone)
		return false;
	if (s->sseq_no == s->sseq_comp)
		return false;
	return s->tsgl[s->target_sge].length != 0;
}

static bool can_send(struct xsk *s)
{
	if (!stream_credit(s) || (s->ext && !xsk_ext_stream_ok(s)))
		return false;
	return sbuf_contig(s) > 0;
}

short xsk_revents(struct xsk *s)
{
	short r = 0;

	switch (s->state) {
	case XSK_FRESH:
	case XSK_CONNECTING:
		break;
	case XSK_LISTENING:
		if (s->acceptq)
			r |= POLLIN;
		break;
	case XSK_CONNECTED:
		if (s->rbytes >= (size_t)s->rcvlowat || (s->peer_shut_wr && !end_unknown(s)) ||
		    s->shut_rd || s->err)
			r |= POLLIN;
		if (s->err)
			r |= POLLERR;
		if (s->peer_shut_wr)
			r |= POLLRDHUP;
		if (can_send(s) || s->shut_wr || s->peer_gone)
			r |= POLLOUT;
		if (s->peer_gone && (s->shut_wr || s->disc_sent))
			r |= POLLHUP;
		if (s->err) /* reset (conn_reset) */
			r |= POLLERR | POLLHUP;
		break;
	case XSK_CLOSED:
		r |= POLLIN | POLLOUT | POLLHUP;
		if (s->err)
			r |= POLLERR;
		break;
	}
	return r;
}

int xsk_wait_fds(struct xsk *s, int fds[3], bool writer)
{
	int n = 0;

	if (s->ch)
		fds[n++] = s->ch->fd;
	if (s->cch)
		fds[n++] = s->cch->fd;
	if (writer ? s->wake_fd >= 0 : s->ready_fd >= 0)
		fds[n++] = writer ? s->wake_fd : s->ready_fd;
	return n;
}

/* Whether an application thread may receive on the connection itself
 * (a blocked reader, or a watched socket's epoll_wait). */
static bool rx_on_app_thread(const struct xsk *s, const struct xsk_stack *st)
{
	return st && st->rx_wait && s->state == XSK_CONNECTED && s->id && !s->peer_gone;
}

int xsk_rx_wait_begin(struct xsk *s)
{
	const struct xsk_stack *st = xsk_stack();

	if (!rx_on_app_thread(s, st) || !xsk_fork_use(s))
		return -1;
	return st->rx_wait(s->id, 1);
}

void xsk_rx_wait_end(struct xsk *s)
{
	const struct xsk_stack *st = xsk_stack();

	if (st && st->rx_wait && s->id)
		st->rx_wait(s->id, 0);
	s->rx_hint = true;
}

void xsk_rx_unwatch(struct xsk *s)
{
	const struct xsk_stack *st = xsk_stack();

	if (s->rxw_fd < 0)
		return;
	xsk_real.epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->rxw_fd, NULL);
	if (st && st->rx_wait && s->id)
		st->rx_wait(s->id, 0);
	s->rxw_fd = -1;
}

static void rx_watch(struct xsk *s)
{
	const struct xsk_stack *st = xsk_stack();
	bool want = s->ep_in_regs > 0 && !s->shut_rd && !s->foreign && rx_on_app_thread(s, st);

	if (want && st->rx_wait(s->id, 2))
		want = false; /* stalled or ended: the engine takes it */
	if (!want) {
		xsk_rx_unwatch(s);
		return;
	}
	if (s->rxw_fd >= 0)
		return;
	int fd = st->rx_wait(s->id, 1);
	if (fd < 0)
		return;
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
	if (xsk_real.epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		st->rx_wait(s->id, 0);
		return;
	}
	s->rxw_fd = fd;
}

void xsk_progress_watch(struct xsk *s, int rx)
{
	xsk_progress_rx(s, rx);
	if (xsk_fork_use(s))
		rx_watch(s);
}

/* ---- data ------------------------------------------------------------------------- */

ssize_t xsk_recv_locked(struct xsk *s, const struct iovec *iov, int cnt, int flags)
{
	bool peek = (flags & MSG_PEEK) != 0;
	unsigned mi = 0;
	uint32_t off = s->rbuf_offset, mleft = 0;
	size_t total = 0;

	switch (s->state) {
	case XSK_LISTENING:
	case XSK_FRESH:
		return -ENOTCONN;
	case XSK_CONNECTING:
		return -EAGAIN;
	case XSK_CLOSED:
		if (s->err) {
			int e = s->err;
			s->err = 0;
			return -e;
		}
		return 0;
	case XSK_CONNECTED:
		break;
	}
	if (s->shut_rd)
		return 0;
	if (!s->rbytes && s->err) { /* a reset: the error once, then end of stream */
		int e = s->err;
		s->err = 0;
		return -e;
	}
	if (!s->rbytes)
		return s->peer_shut_wr && !end_unknown(s) ? 0 : -EAGAIN;
	for (int v = 0; v < cnt; v++) {
		uint8_t *dst = iov[v].iov_base;
		size_t want = iov[v].iov_len;

		while (want > 0) {
			if (!mleft) {
				if (mi >= s->rmsg_count)
					goto out;
				mleft = s->rmsg[(s->rmsg_head + mi) % s->rmsg_cap].len;
			}
			size_t n = want < mleft ? want : mleft;
			if (off + n > s->rbuf_size) /* cannot happen with a well-behaved peer */
				n = s->rbuf_size - off;
			memcpy(dst, s->rbuf + off, n);
			dst += n;
			want -= n;
			total += n;
			mleft -= (uint32_t)n;
			off += (uint32_t)n;
			if (off >= s->rbuf_size)
				off = 0;
			if (!peek) {
				struct xsk_rmsg *m = &s->rmsg[s->rmsg_head];
				m->len -= (uint32_t)n;
				s->rbytes -= n;
				s->rbuf_bytes_avail += (uint32_t)n;
				s->rbuf_offset = off;
				if (!m->len) {
					s->rmsg_head = (s->rmsg_head + 1) % s->rmsg_cap;
					s->rmsg_count--;
					s->rseq_no++;
				}
			} else if (!mleft) {
				mi++;
			}
		}
	}
out:
	if (!peek)
		give_credits(s);
	return (ssize_t)total;
}

/* One Data Transfer message of sge into the current target buffer, which
 * has room for it: the RDMA Write, then the 4-octet Send announcing it.
 * caller: sge is the application's own memory (lkey XSOCK_LKEY_CALLER),
 * sent before the post returns; nothing completes. */
static int post_data(struct xsk *s, struct ibv_sge *sge, uint64_t wr_id, bool caller)
{
	struct rs_sge_h *t = &s->tsgl[s->target_sge];
	uint64_t raddr = t->addr;
	uint32_t rkey = t->key;

	t->addr += sge->length;
	t->length -= sge->length;
	if (!t->length)
		s->target_sge = (s->target_sge + 1) % RS_SGL_SIZE;
	s->sseq_no++;
	/* one chain: the stack sends both FPDUs with one sendmsg */
	uint32_t m = RS_MSG(RS_OP_DATA, sge->length);
	if (s->swap)
		m = swap32(m);
	struct ibv_sge msge = { .addr = (uintptr_t)&m, .length = sizeof(m) };
	struct ibv_send_wr msg = { .opcode = IBV_WR_SEND, .sg_list = &msge, .num_sge = 1,
				   .send_flags = IBV_SEND_INLINE };
	struct ibv_send_wr wr = { .wr_id = wr_id, .next = &msg, .opcode = IBV_WR_RDMA_WRITE,
				  .sg_list = sge, .num_sge = 1,
				  .send_flags = caller ? 0 : IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (caller ? xsk_stack()->post_send_caller(s->id->qp, &wr, &bad)
		   : ibv_post_send(s->id->qp, &wr, &bad)) {
		conn_broken(s);
		return -EPIPE;
	}
	return 0;
}

int xsk_stream_post(struct xsk *s, uint64_t addr, uint32_t lkey, uint32_t len, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	uint32_t room;

	if (s->state != XSK_CONNECTED || s->shut_wr || s->peer_gone)
		return -EPIPE;
	if (!stream_credit(s))
		return 0;
	room = s->tsgl[s->target_sge].length;
	if (sge.length > room)
		sge.length = room;
	if (sge.length > RS_MAX_TRANSFER)
		sge.length = RS_MAX_TRANSFER;
	if (post_data(s, &sge, wr_id, false))
		return -EPIPE;
	return (int)sge.length;
}

ssize_t xsk_send_locked(struct xsk *s, const struct iovec *iov, int cnt, int flags, size_t *done)
{
	size_t sent = 0;
	int v = 0;
	size_t voff = 0;

	(void)flags;
	if (s->state == XSK_CLOSED && s->err) {
		int e = s->err;
		s->err = 0;
		return -e;
	}
	if (s->state == XSK_CONNECTING)
		return 0;
	if (s->state != XSK_CONNECTED)
		return -(s->state == XSK_CLOSED ? EPIPE : ENOTCONN);
	if (s->err && s->peer_gone) { /* reset by the peer: once, then EPIPE */
		int e = s->err;
		s->err = 0;
		return -e;
	}
	if (s->shut_wr || s->peer_gone)
		return -EPIPE;
	/* skip what an earlier round already sent */
	for (size_t skip = *done; v < cnt && skip; ) {
		if (skip >= iov[v].iov_len) {
			skip -= iov[v].iov_len;
			v++;
		} else {
			voff = skip;
			skip = 0;
		}
	}
	const struct xsk_stack *st = xsk_stack();
	if (st)
		cq_disarm(s, st); /* our Writes' completions need no event */
	if (st && st->post_send_caller) {
		/* libiwarp: straight from the application's buffer, which the
		 * stack has handed to the kernel when the post returns */
		while (v < cnt) {
			if (!stream_credit(s))
				poll_cq(s); /* the peer's SGL update may be in */
			if (!stream_credit(s) || (s->ext && !xsk_ext_stream_ok(s)))
				break;
			uint32_t xfer = RS_MAX_TRANSFER;
			size_t left = iov[v].iov_len - voff;
			if (xfer > s->tsgl[s->target_sge].length)
				xfer = s->tsgl[s->target_sge].length;
			if (xfer > left)
				xfer = (uint32_t)left;
			if (xfer) {
				struct ibv_sge sge = {
					.addr = (uintptr_t)iov[v].iov_base + voff,
					.length = xfer,
					.lkey = XSOCK_LKEY_CALLER,
				};
				if (post_data(s, &sge, 0, true)) {
					cq_rearm(s, st);
					return sent ? (ssize_t)sent : -EPIPE;
				}
			}
			sent += xfer;
			*done += xfer;
			voff += xfer;
			if (voff == iov[v].iov_len) {
				v++;
				voff = 0;
			}
		}
		cq_rearm(s, st);
		return (ssize_t)sent;
	}
	while (v < cnt && can_send(s)) {
		struct rs_sge_h *t = &s->tsgl[s->target_sge];
		uint32_t room = sbuf_contig(s);
		uint32_t xfer = RS_MAX_TRANSFER;

		if (xfer > room)
			xfer = room;
		if (xfer > t->length)
			xfer = t->length;
		/* gather into the send buffer */
		uint32_t got = 0;
		while (got < xfer && v < cnt) {
			size_t n = iov[v].iov_len - voff;
			if (n > xfer - got)
				n = xfer - got;
			memcpy(s->sbuf + s->sbuf_head + got, (const uint8_t *)iov[v].iov_base + voff, n);
			got += (uint32_t)n;
			voff += n;
			if (voff == iov[v].iov_len) {
				v++;
				voff = 0;
			}
		}
		if (!got)
			break;
		struct ibv_sge sge = { .addr = (uintptr_t)(s->sbuf + s->sbuf_head), .length = got,
				       .lkey = s->smr->lkey };
		s->sbuf_head += got;
		if (s->sbuf_head >= s->sbuf_size)
			s->sbuf_head = 0;
		s->sbuf_used += got;
		if (post_data(s, &sge, WR_DATA | got, false)) {
			if (st)
				cq_rearm(s, st);
			return sent ? (ssize_t)sent : -EPIPE;
		}
		sent += got;
		*done += got;
		/* the stack completes writes at once: reclaim the buffer */
		poll_cq(s);
	}
	if (st)
		cq_rearm(s, st);
	return (ssize_t)sent;
}

int xsk_shutdown_locked(struct xsk *s, int how)
{
	if (s->state != XSK_CONNECTED)
		return -ENOTCONN;
	if (how == SHUT_RD || how == SHUT_RDWR)
		s->shut_rd = true;
	if ((how == SHUT_WR || how == SHUT_RDWR) && !s->shut_wr) {
		s->shut_wr = true;
		if (!s->peer_gone && !s->disc_sent) {
			if (how == SHUT_RDWR) {
				s->disc_sent = true;
				post_msg(s, RS_MSG(RS_OP_CTRL, RS_CTRL_DISCONNECT));
			} else {
				post_msg(s, RS_MSG(RS_OP_CTRL, RS_CTRL_SHUTDOWN));
			}
		}
	}
	xsk_set_ready(s);
	return 0;
}

/* ---- the service thread ----------------------------------------------------------- */

static pthread_mutex_t svc_mu = PTHREAD_MUTEX_INITIALIZER;
static int svc_ep = -1;
static struct xsk *svc_list;
static bool svc_running; /* the thread reached its loop (fork waits for that) */

static void *svc_main(void *arg)
{
	struct epoll_event ev[16];

	pthread_mutex_lock(&svc_mu);
	svc_running = true;
	pthread_mutex_unlock(&svc_mu);
	for (;;) {
		int n = xsk_real.epoll_wait(svc_ep, ev, 16, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		pthread_mutex_lock(&svc_mu);
		for (int i = 0; i < n; i++) {
			struct xsk *s;
			for (s = svc_list; s && s != ev[i].data.ptr; s = s->svc_next)
				;
			if (!s)
				continue; /* removed meanwhile */
			pthread_mutex_lock(&s->mu);
			xsk_progress(s);
			pthread_mutex_unlock(&s->mu);
		}
		pthread_mutex_unlock(&svc_mu);
	}
	return arg;
}

int xsk_svc_add(struct xsk *s)
{
	int rc = 0;

	pthread_mutex_lock(&svc_mu);
	if (svc_ep < 0) {
		pthread_t t;
		svc_ep = xsk_fd_keep(epoll_create1(EPOLL_CLOEXEC));
		if (svc_ep < 0 || pthread_create(&t, NULL, svc_main, NULL)) {
			rc = -EAGAIN;
			if (svc_ep >= 0)
				xsk_fd_close(svc_ep);
			svc_ep = -1;
			goto out;
		}
		pthread_detach(t);
	}
	pthread_mutex_lock(&s->mu);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = s };
	if (s->ch && !s->in_svc && xsk_real.epoll_ctl(svc_ep, EPOLL_CTL_ADD, s->ch->fd, &ev) == 0) {
		s->in_svc = true;
		s->svc_next = svc_list;
		svc_list = s;
	}
	pthread_mutex_unlock(&s->mu);
out:
	pthread_mutex_unlock(&svc_mu);
	return rc;
}

static void svc_del(struct xsk *s)
{
	pthread_mutex_lock(&svc_mu);
	if (s->in_svc) {
		struct xsk **pp = &svc_list;
		while (*pp && *pp != s)
			pp = &(*pp)->svc_next;
		if (*pp)
			*pp = s->svc_next;
		xsk_real.epoll_ctl(svc_ep, EPOLL_CTL_DEL, s->ch->fd, NULL);
		s->in_svc = false;
	}
	pthread_mutex_unlock(&svc_mu);
}

void xsk_svc_fork_prepare(void)
{
	/* a thread still starting may be inside the allocator (a sanitizer's
	 * is not fork-safe): wait until it runs its loop */
	pthread_mutex_lock(&svc_mu);
	while (svc_ep >= 0 && !svc_running) {
		pthread_mutex_unlock(&svc_mu);
		sched_yield();
		pthread_mutex_lock(&svc_mu);
	}
}

void xsk_svc_fork_parent(void)
{
	pthread_mutex_unlock(&svc_mu);
}

/* The child has no service thread and must not wait on the parent's epoll
 * instance: listeners rejoin a new one when the child accepts on them. */
void xsk_svc_fork_child(void)
{
	pthread_mutex_init(&svc_mu, NULL);
	svc_running = false;
	if (svc_ep >= 0)
		xsk_fd_close(svc_ep);
	svc_ep = -1;
	while (svc_list) {
		struct xsk *s = svc_list;
		svc_list = s->svc_next;
		s->svc_next = NULL;
		s->in_svc = false;
	}
}

/* ---- teardown --------------------------------------------------------------------- */

/* ---- close over a kernel stack ------------------------------------------------ */

/* libiwarp's engine finishes a closed connection after close() returned
 * (it sends what was posted, then lingers until the peer's FIN).  Over a
 * kernel stack nothing outlives the QP and the cm_id, and siw fails the
 * work requests still queued when the QP leaves RTS: close() itself waits,
 * as rsockets' rclose does, for the stream's sends, then for the
 * DISCONNECT message, then (after rdma_disconnect) for the peer's end, so
 * that what arrives meanwhile is read rather than met by a reset.  The
 * whole wait is bounded by XSOCK_LINGER_MS (default 1000 ms). */
static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int close_linger_ms(void)
{
	pthread_once(&proto_env_once, proto_env_load);
	return proto_env.linger_ms;
}

static bool sends_done(const struct xsk *s)
{
	return s->sbuf_used == 0;
}

static bool disc_done(const struct xsk *s)
{
	return !s->disc_pending;
}

static bool cm_done(const struct xsk *s)
{
	return s->cm_gone;
}

/* Until done(s), the connection fails or the deadline (CLOCK_MONOTONIC
 * ms) passes; s->mu held, no other reference. */
static void close_wait(struct xsk *s, const struct xsk_stack *st, bool (*done)(const struct xsk *),
		       int64_t deadline)
{
	for (;;) {
		struct pollfd p[2] = { { .fd = s->ch ? s->ch->fd : -1, .events = POLLIN },
				       { .fd = s->cch ? s->cch->fd : -1, .events = POLLIN } };
		int64_t left;

		drain_cm(s, st);
		drain_cq_events(s, st, true);
		poll_cq_rx(s, XSOCK_RX_ALWAYS);
		left = deadline - now_ms();
		if (done(s) || s->qp_failed || left <= 0)
			return;
		xsk_real.poll(p, 2, (int)(left > 100 ? 100 : left));
	}
}

static void kernel_close(struct xsk *s, const struct xsk_stack *st)
{
	int64_t deadline = now_ms() + close_linger_ms();
	bool live = s->state == XSK_CONNECTED && !s->cm_gone && !s->qp_failed;

	if (live)
		close_wait(s, st, sends_done, deadline);
	if (s->state == XSK_CONNECTED && !s->peer_gone && !s->disc_sent && !s->qp_failed) {
		uint32_t m = RS_MSG(RS_OP_CTRL, RS_CTRL_DISCONNECT);
		struct ibv_sge sge = { .addr = (uintptr_t)&m, .length = sizeof(m) };
		struct ibv_send_wr wr = { .wr_id = WR_DISC, .opcode = IBV_WR_SEND, .sg_list = &sge,
					  .num_sge = 1,
					  .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED };
		struct ibv_send_wr *bad;

		if (s->swap)
			m = swap32(m);
		s->disc_sent = true;
		s->disc_pending = ibv_post_send(s->id->qp, &wr, &bad) == 0;
		if (live)
			close_wait(s, st, disc_done, deadline);
	}
	if (s->state == XSK_CONNECTED || s->state == XSK_CONNECTING)
		st->disconnect(s->id);
	if (live)
		close_wait(s, st, cm_done, deadline);
}

void xsk_free(struct xsk *s)
{
	const struct xsk_stack *st = xsk_stack();
	struct xsk *c;

	if (!s)
		return;
	if (xsk_relay_orphan(s))
		return; /* its relay thread frees it */
	xsk_relay_free(s); /* its threads use s */
	svc_del(s);
	xsk_ext_free(s);
	pthread_mutex_lock(&s->mu);
	xsk_rx_unwatch(s);
	while ((c = xsk_accept_pop(s)))
		xsk_free(c);
	if (st && s->id && !xsk_fork_quiet(s) && s->linger_on && !s->linger_s &&
	    s->state == XSK_CONNECTED && !s->peer_gone && st->tcp &&
	    st->tcp(s->id, XSOCK_TCP_ABORT, 0, 0, NULL, NULL) == 0) {
		/* SO_LINGER {1, 0}: an abortive close, the peer sees a reset */
		s->disc_sent = true;
	}
	if (st && st->kernel && xsk_fork_quiet(s)) {
		/* the kernel's objects are the other process's too: leave them
		 * (and the stack's small structures) to it, close our files */
		if (s->cch)
			xsk_real.close(s->cch->fd);
		if (s->ch)
			xsk_real.close(s->ch->fd);
		s->id = NULL;
		s->cch = NULL;
		s->ch = NULL;
		s->cq = NULL;
		s->rmr = s->smr = NULL;
		s->pd = NULL;
	}
	if (st && st->kernel && s->id && !xsk_fork_quiet(s)) {
		kernel_close(s, st);
	} else if (st && s->id && !xsk_fork_quiet(s)) {
		if (s->state == XSK_CONNECTED && !s->peer_gone && !s->disc_sent) {
			s->disc_sent = true;
			post_msg(s, RS_MSG(RS_OP_CTRL, RS_CTRL_DISCONNECT));
		}
		if (s->state == XSK_CONNECTED || s->state == XSK_CONNECTING)
			st->disconnect(s->id);
	}
	if (st && s->id && s->id->qp)
		st->destroy_qp(s->id);
	if (st && s->cch) {
		struct ibv_cq *cq;
		void *ctx;
		unsigned n = 0;
		while (st->get_cq_event(s->cch, &cq, &ctx) == 0)
			n++;
		if (n)
			st->ack_cq_events(s->cq, n);
	}
	if (st && s->cq)
		st->destroy_cq(s->cq);
	if (st && s->cch)
		st->destroy_comp_channel(s->cch);
	if (st && s->rmr)
		st->dereg_mr(s->rmr);
	if (st && s->smr)
		st->dereg_mr(s->smr);
	if (st && s->id)
		st->destroy_id(s->id);
	if (st && s->ch) {
		struct rdma_cm_event *ev;
		while (st->get_cm_event(s->ch, &ev) == 0) {
			if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
				st->reject(ev->id, NULL, 0);
				struct rdma_cm_id *cid = ev->id;
				st->ack_cm_event(ev);
				st->destroy_id(cid);
				continue;
			}
			st->ack_cm_event(ev);
		}
		st->destroy_event_channel(s->ch);
	}
	if (st && s->pd)
		st->dealloc_pd(s->pd);
	ring_free(st, s->mem, s->mem_len);
	ring_free(st, s->sbuf, s->sbuf_size);
	free(s->rmsg);
	if (s->plain_fd >= 0)
		xsk_real.close(s->plain_fd);
	if (s->ready_fd >= 0)
		xsk_fd_close(s->ready_fd);
	if (s->wake_fd >= 0)
		xsk_fd_close(s->wake_fd);
	if (s->epfd >= 0 && !s->epfd_app)
		xsk_real.close(s->epfd);
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
