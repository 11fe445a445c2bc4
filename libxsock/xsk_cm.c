/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Connections: CM events (connect, the peer's connection data, accept,
 * disconnect), listen with its accept queue (iWARP children and a mixed
 * listener's plain TCP clients), connect, the adoption of a connection
 * after an exec, and progress, which drains the channels.
 *
 * The one call up out of the protocol's order: child_accept frees a child
 * that failed with xsk_free (xsk_close.c), which frees a listener's
 * children with it. */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "libxsock/xsk_proto_int.h"
#include "verbs/xs_priv_abi.h"

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
	s->plain_why = XSOCK_PLAIN_OTHER; /* the peer's answers say more below */
}

/* The peer's connection data: the connection is up. */
static int established(struct xsk *s, const void *pdata, size_t len)
{
	struct rs_conn rc;

	if (rs_conn_decode(pdata, len, &rc) < 0)
		return -EPROTO;
	s->swap = ((rc.flags & RS_CONN_FLAG_NET) != 0) != rs_host_is_be();
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
	xsk_give_credits(s);
	return 0;
}

static void child_accept(struct xsk *l, const struct xsk_stack *st, struct rdma_cm_event *ev);

static void plain_arrived(struct xsk *l, struct rdma_cm_event *ev);

static void cm_event(struct xsk *s, const struct xsk_stack *st, struct rdma_cm_event *ev)
{
	uint8_t cd[RS_CONN_DATA_LEN + 4];

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
		int rc = xsk_setup_qp(s, st, NULL);
		if (rc) {
			fail_connect(s, -rc);
			break;
		}
		xsk_local_conn(s, cd);
		/* after the connection data (which rsockets and we read up to
		 * its length): a line end, so that a plain server reading
		 * lines answers the MPA Request at once, with an error line or
		 * by closing, instead of waiting for more (xsk_conn.c's
		 * fallback then need not wait XSOCK_PLAIN_PROBE_MS) */
		memcpy(cd + RS_CONN_DATA_LEN, "\r\n\r\n", 4);
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
		if (s->state == XSK_CONNECTING) {
			s->mpa_rejected = ev->event == RDMA_CM_EVENT_REJECTED &&
					  ev->status == -ECONNRESET;
			fail_connect(s, ECONNREFUSED);
			/* (verbs/cm_conn.c) -EPROTO: octets that no MPA Reply
			 * begins with; REJECTED but an MPA reject: TCP closed
			 * or reset before any (after the engine dialled again) */
			if (ev->event == RDMA_CM_EVENT_REJECTED)
				s->plain_why = XSOCK_PLAIN_CLOSED;
			else if (ev->status == -EPROTO)
				s->plain_why = XSOCK_PLAIN_OCTETS;
		}
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		s->cm_gone = true; /* (its status tells a reset) */
		if (s->state == XSK_CONNECTED) {
			xsk_poll_cq(s); /* a DISCONNECT message may be queued before it */
			xsk_conn_reset(s);
		} else if (s->state == XSK_CONNECTING) {
			fail_connect(s, ECONNRESET);
			s->plain_why = XSOCK_PLAIN_CLOSED;
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

void xsk_drain_cm(struct xsk *s, const struct xsk_stack *st)
{
	struct rdma_cm_event *ev;
	int n = 0;

	while (s->ch && (s->state != XSK_LISTENING || n++ < XSK_CM_BATCH) &&
	       st->get_cm_event(s->ch, &ev) == 0) {
		cm_event(s, st, ev);
		st->ack_cm_event(ev);
	}
}

/* ---- progress ------------------------------------------------------------------ */

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
		/* one syscall to see which channel has events (xsk_poll_cq
		 * receives whether or not the CQ channel fired) */
		struct pollfd p[2] = { { .fd = s->ch ? s->ch->fd : -1, .events = POLLIN },
				       { .fd = s->cch ? s->cch->fd : -1, .events = POLLIN } };
		if (xsk_real.poll(p, 2, 0) <= 0)
			p[0].revents = p[1].revents = 0;
		cm_ev = p[0].revents != 0;
		cq_ev = p[1].revents != 0;
	}
	if (cm_ev)
		xsk_drain_cm(s, st);
	xsk_drain_cq_events(s, st, cq_ev);
	xsk_poll_cq_rx(s, rx);
	if (s->ext)
		xsk_ext_up->progress(s);
	xsk_give_credits(s);
	xsk_cq_rearm(s, st);
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
	rc = xsk_make_channel(s, st);
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
	if (xsk_make_fds(c) || xsk_make_channel(c, st) || st->migrate_id(id, c->ch))
		goto refuse_free;
	c->state = XSK_CONNECTING;
	rc = xsk_setup_qp(c, st, NULL);
	if (rc)
		goto refuse_free;
	xsk_local_conn(c, cd);
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
	rc = xsk_make_channel(s, st);
	if (rc)
		return rc;
	if (st->create_id(s->ch, &s->id, s, RDMA_PS_TCP))
		return -(errno ? errno : ENOMEM);
	if (st->cm_no_redial)
		st->cm_no_redial(s->id);
	memcpy(&s->peer, dst, len);
	s->state = XSK_CONNECTING;
	if (st->resolve_addr(s->id, s->have_local ? (struct sockaddr *)&s->local : NULL,
			     (struct sockaddr *)dst, 2000)) {
		s->state = XSK_FRESH;
		return -(errno ? errno : EHOSTUNREACH);
	}
	return 0;
}

/* ---- adoption after an exec ------------------------------------------------------ */

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
	if (!s->rq_size || s->rq_size > XSK_RQ)
		return -EINVAL; /* more credits than the receive buffers hold */
	rc = xsk_make_fds(s);
	if (!rc)
		rc = xsk_make_channel(s, st);
	if (rc)
		return rc;
	s->id = st->adopt(s->ch, s, tcpfd, wire);
	if (!s->id)
		return -(errno ? errno : ENOMEM);
	rc = xsk_setup_qp(s, st, &ad);
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
