/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Edge-triggered epoll (EPOLLET) on IWARP sockets.  libxsock computes an
 * IWARP socket's events itself (level-triggered); for an EPOLLET
 * registration an event is reported only on an edge: an event bit that was
 * clear when the registration was last looked at, or anything that may have
 * made the socket newly readable or writable since (a message received:
 * data, credits, an SGL update, a control message; a send completion; a
 * connection queued on a listener: an accept() until EAGAIN cleared the
 * bit where no look saw it clear).
 * That may report an edge twice, which EPOLLET allows; it never hides one.
 * The kernel sees the socket's inner epoll fd with EPOLLET too, so an
 * epoll_wait with unread data and no news sleeps instead of spinning. */
#include "config.h"

#include "libxsock/xsk_priv.h"
#include "libxsock/xsk_sock.h"

bool xsk_epoll_edge(struct xsk_epreg *r, struct xsk *s, uint32_t got)
{
	xsk_lock(s);
	uint16_t rseq;
	uint32_t tail;
	unsigned acc;
	xsk_edge_marks(s, &rseq, &tail, &acc);
	xsk_unlock(s);

	bool edge = (got & ~r->et_events) || rseq != r->et_rseq || tail != r->et_tail ||
		    acc != r->et_acc;
	r->et_events = got;
	r->et_rseq = rseq;
	r->et_tail = tail;
	r->et_acc = acc;
	return edge;
}
