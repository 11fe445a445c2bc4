/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Readiness: the poll(2) bits of a socket, the ready eventfd kept
 * readable while it is readable, the fds a waiter polls, and whether the
 * stream may send (credits, a target buffer, room in the send ring). */
#include "config.h"

#include <errno.h>
#include <unistd.h>

#include "libxsock/xsk_proto_int.h"

/* ---- the ready eventfd ----------------------------------------------------------- */

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

/* ---- readiness --------------------------------------------------------------------- */

/* The stream ended without the peer's DISCONNECT or SHUTDOWN (a work
 * request failed: the stack flushes them when the connection fails, and
 * then always reports DISCONNECTED) but DISCONNECTED, which tells a reset from a FIN, is not
 * here yet: no end of stream until it is. */
bool xsk_end_unknown(const struct xsk *s)
{
	return s->qp_failed && !s->peer_ctrl && !s->cm_gone && !s->disc_sent && !s->shut_rd;
}

uint32_t xsk_sbuf_contig(struct xsk *s)
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
bool xsk_stream_credit(struct xsk *s)
{
	if (s->state != XSK_CONNECTED || s->shut_wr || s->peer_gone)
		return false;
	if (s->sseq_no == s->sseq_comp)
		return false;
	return s->tsgl[s->target_sge].length != 0;
}

bool xsk_can_send(struct xsk *s)
{
	if (!xsk_stream_credit(s) || (s->ext && !xsk_ext_up->stream_ok(s)))
		return false;
	return xsk_sbuf_contig(s) > 0;
}

short xsk_revents(struct xsk *s)
{
	short r = 0;

	/* a probe not decided yet (xsk_plain.c): a connect in progress,
	 * whatever the stack's try came to */
	if (s->probe_fd >= 0 || s->probe_switching)
		return 0;
	switch (s->state) {
	case XSK_FRESH:
	case XSK_CONNECTING:
		break;
	case XSK_LISTENING:
		if (s->acceptq)
			r |= POLLIN;
		break;
	case XSK_CONNECTED:
		if (s->rbytes + s->unread.n >= (size_t)s->rcvlowat || (s->peer_shut_wr && !xsk_end_unknown(s)) ||
		    s->shut_rd || s->err)
			r |= POLLIN;
		if (s->err)
			r |= POLLERR;
		if (s->peer_shut_wr)
			r |= POLLRDHUP;
		if (xsk_can_send(s) || s->shut_wr || s->peer_gone)
			r |= POLLOUT;
		if (s->peer_gone && (s->shut_wr || s->disc_sent))
			r |= POLLHUP;
		if (s->err) /* reset (xsk_conn_reset) */
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
