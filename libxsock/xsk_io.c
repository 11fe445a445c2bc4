/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The data path: a blocked or epoll thread's wait on the connection's TCP
 * socket (it receives there itself), read and write over the ring and the
 * peer's target buffers, Data Transfer messages from registered memory,
 * and shutdown. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "libxsock/xsk_proto_int.h"
#include "verbs/xs_priv_abi.h"

/* ---- the receive wait on the TCP socket ------------------------------------------ */

/* Whether an application thread may receive on the connection itself
 * (a blocked reader, or a watched socket's epoll_wait). */
static bool rx_on_app_thread(const struct xsk *s, const struct xsk_stack *st)
{
	return st && st->rx_wait && s->state == XSK_CONNECTED && s->id && !s->peer_gone;
}

/* The stack would not let this thread receive (s->mu held): if that is
 * because the connection is a fork's and nobody's yet, this process's
 * claim predates the fork (the look came after libiwarp's parent handler
 * made it unclaimed and before fork_parent moved xsk_fork_gen on), and the
 * wait about to start watches no TCP socket: nothing would wake it (git
 * clone's side-band thread, in read() while git forks index-pack, hung 1
 * clone in 60).  fork_parent wakes it (xsk_fork.c, parent_sock) so that
 * its next look claims the connection. */
static void rx_refused(struct xsk *s, const struct xsk_stack *st)
{
	if (st->fork_mode && st->fork_mode(s->id) == XSOCK_PRIV_FORK_UNCLAIMED)
		s->fork_kick = true;
}

int xsk_rx_wait_begin(struct xsk *s)
{
	const struct xsk_stack *st = xsk_stack();
	int fd;

	if (!rx_on_app_thread(s, st) || !xsk_fork_use(s))
		return -1;
	fd = st->rx_wait(s->id, 1);
	if (fd < 0)
		rx_refused(s, st);
	return fd;
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

	if (want && st->rx_wait(s->id, 2)) {
		want = false; /* stalled or ended: the engine takes it */
		rx_refused(s, st);
	}
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

int xsk_unread_add(struct xsk *s, const void *p, size_t n)
{
	uint8_t *b;

	if (!n)
		return 0;
	b = malloc(s->unread.n + n);
	if (!b)
		return -ENOMEM;
	memcpy(b, p, n); /* older than what is there */
	if (s->unread.n)
		memcpy(b + n, s->unread.buf + s->unread.off, s->unread.n);
	free(s->unread.buf);
	s->unread.buf = b;
	s->unread.off = 0;
	s->unread.n += n;
	return 0;
}

/* The bytes put back (xsk_unread_add), before anything in the ring. */
static ssize_t unread_read(struct xsk *s, const struct iovec *iov, int cnt, bool peek)
{
	size_t total = 0, off = s->unread.off, left = s->unread.n;

	for (int v = 0; v < cnt && left; v++) {
		size_t k = iov[v].iov_len < left ? iov[v].iov_len : left;
		memcpy(iov[v].iov_base, s->unread.buf + off, k);
		off += k;
		left -= k;
		total += k;
	}
	if (!peek) {
		s->unread.off = off;
		s->unread.n = left;
		if (!left) {
			free(s->unread.buf);
			s->unread.buf = NULL;
			s->unread.off = 0;
		}
	}
	return (ssize_t)total;
}

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
	if (s->unread.n)
		return unread_read(s, iov, cnt, peek);
	if (!s->rbytes && s->err) { /* a reset: the error once, then end of stream */
		int e = s->err;
		s->err = 0;
		return -e;
	}
	if (!s->rbytes)
		return s->peer_shut_wr && !xsk_end_unknown(s) ? 0 : -EAGAIN;
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
		xsk_give_credits(s);
	return (ssize_t)total;
}

/* One Data Transfer message of sge into the current target buffer, which
 * has room for it: the RDMA Write, then the 4-octet Send announcing it
 * (msg_imm: one RDMA Write with the message as its immediate data).
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
		m = rs_swap32(m);
	struct ibv_sge msge = { .addr = (uintptr_t)&m, .length = sizeof(m) };
	struct ibv_send_wr msg = { .opcode = IBV_WR_SEND, .sg_list = &msge, .num_sge = 1,
				   .send_flags = IBV_SEND_INLINE };
	struct ibv_send_wr wr = { .wr_id = wr_id, .next = &msg, .opcode = IBV_WR_RDMA_WRITE,
				  .sg_list = sge, .num_sge = 1,
				  .send_flags = caller ? 0 : IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (s->msg_imm) /* the message rides on the Write (rsockets off iWARP) */
		xsk_wr_write_imm(&wr, RS_MSG(RS_OP_DATA, sge->length));
	if (caller ? xsk_stack()->post_send_caller(s->id->qp, &wr, &bad)
		   : ibv_post_send(s->id->qp, &wr, &bad)) {
		xsk_conn_broken(s);
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
	if (!xsk_stream_credit(s))
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
		xsk_cq_disarm(s, st); /* our Writes' completions need no event */
	if (st && st->post_send_caller) {
		/* libiwarp: straight from the application's buffer, which the
		 * stack has handed to the kernel when the post returns */
		while (v < cnt) {
			if (!xsk_stream_credit(s))
				xsk_poll_cq(s); /* the peer's SGL update may be in */
			if (!xsk_stream_credit(s) || (s->ext && !xsk_ext_up->stream_ok(s)))
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
					xsk_cq_rearm(s, st);
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
		xsk_cq_rearm(s, st);
		return (ssize_t)sent;
	}
	while (v < cnt && xsk_can_send(s)) {
		struct rs_sge_h *t = &s->tsgl[s->target_sge];
		uint32_t room = xsk_sbuf_contig(s);
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
				xsk_cq_rearm(s, st);
			return sent ? (ssize_t)sent : -EPIPE;
		}
		sent += got;
		*done += got;
		/* the stack completes writes at once: reclaim the buffer */
		xsk_poll_cq(s);
	}
	if (st)
		xsk_cq_rearm(s, st);
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
				xsk_post_msg(s, RS_MSG(RS_OP_CTRL, RS_CTRL_DISCONNECT));
			} else {
				xsk_post_msg(s, RS_MSG(RS_OP_CTRL, RS_CTRL_SHUTDOWN));
			}
		}
	}
	xsk_set_ready(s);
	return 0;
}
