/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The extended (opt-in) calls of libxsock: memory registration and remote
 * descriptors, one-sided RDMA Write/Read, asynchronous stream sends and
 * receives, and their completions (see xsock.h and the xsock_*(3) pages).
 *
 * Everything is posted on the socket's own QP, next to the rsockets stream.
 * Work requests carry XSK_WR_EXT | slot as wr_id, so the protocol's CQ loop
 * (xsk_credit.c) hands their completions here (xsk_ext_wc, one of the
 * hooks of xsk_proto.h); the stream never sees them.
 *
 * Operations start in the order they were posted (one FIFO per socket, the
 * transmit queue): an operation that cannot start yet (no credits for a
 * stream send, ORD reached for a Read, XSOCK_FENCE with Reads outstanding)
 * holds back the ones behind it.  Stream data of read()/write() and of
 * xsock_send_async keep their posting order: the stream's own sends wait
 * while the transmit queue is not empty or a Read is outstanding (the Read
 * Response could otherwise be built after the peer acted on a later stream
 * message).
 *
 * Completion needs someone to poll the CQ: the application does when it
 * calls into the socket, and a progress thread does while the socket has
 * work outstanding (its completion channel is then in the thread's epoll
 * set), so the completion eventfd becomes readable without any call.
 *
 * Locks: s->mu, then ext_mu.  The thread takes ext_mu, marks the socket
 * busy, drops ext_mu, then takes s->mu; xsk_ext_free waits until the
 * socket is not busy. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "libxsock/xsk_priv.h"
#include "libxsock/xsock.h"
#include "util/xs_be.h"
#include "util/xs_clock.h"

#define EXT_OPS 256 /* operations in flight per socket (bounds CQ use) */
#define EXT_WR_MAX (1u << 30) /* longest single work request */

struct ext_op {
	int kind; /* XSOCK_OP_* */
	int flags;
	uint64_t cookie;
	struct xsock_mr *mr;
	uint8_t *buf; /* local memory (inside mr) */
	size_t len;
	size_t posted; /* bytes handed to the QP (or received) */
	uint64_t raddr;
	uint32_t rkey;
	unsigned wrs; /* work requests not yet completed */
	unsigned reads; /* of them, RDMA Reads */
	int phase; /* RDMA: 0 data, 1 the XSOCK_PLACED Read, 2 all posted */
	int status;
	bool used;
	bool queued; /* in the transmit queue: completes when it leaves */
	struct ext_op *next; /* transmit or receive queue */
};

struct xsock_mr {
	struct ibv_mr *ib; /* NULL once the socket is closed */
	struct xsk_ext *x;
	void *addr;
	size_t len;
	atomic_int inuse; /* operations referring to it */
	struct xsock_mr *next;
};

struct xsk_ext {
	struct xsk *s;
	struct ext_op ops[EXT_OPS];
	unsigned nops;
	struct ext_op *txq, *txq_tail; /* not (fully) started, in order */
	struct ext_op *rxq, *rxq_tail; /* asynchronous receives, in order */
	unsigned reads_out; /* RDMA Reads posted and not completed */
	unsigned ord; /* the Reads the connection allows outstanding */
	struct xsock_comp *comp; /* ring of completions not yet polled */
	unsigned comp_cap, comp_head, comp_n;
	int efd; /* readable while comp_n > 0 */
	bool efd_set;
	struct xsock_mr *mrs; /* ext_mu */
	bool watched; /* ext_mu: the progress thread watches the channel */
	int busy; /* ext_mu: the progress thread is in the socket */
	struct xsk_ext *wnext; /* ext_mu: list of watched sockets */
};

static pthread_mutex_t ext_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ext_cond = PTHREAD_COND_INITIALIZER;
static int ext_ep = -1;
static struct xsk_ext *watch_list;

static int fail(int e)
{
	errno = e;
	return -1;
}

/* ---- descriptors -------------------------------------------------------------- */

XSK_EXPORT void xsock_rdesc_encode(const struct xsock_rdesc *d, uint8_t out[XSOCK_RDESC_LEN])
{
	xs_put_be64(out, d->addr);
	xs_put_be32(out + 8, d->stag);
	xs_put_be32(out + 12, d->len);
}

XSK_EXPORT int xsock_rdesc_decode(const uint8_t in[XSOCK_RDESC_LEN], struct xsock_rdesc *d)
{
	if (!in || !d)
		return fail(EINVAL);
	d->addr = xs_get_be64(in);
	d->stag = xs_get_be32(in + 8);
	d->len = xs_get_be32(in + 12);
	return 0;
}

/* ---- the socket's extended state ------------------------------------------------ */

/* The protocol's hooks into this file (struct xsk_ext_hooks, xsk_proto.h),
 * handed over before the first s->ext is set. */
static void xsk_ext_wc(struct xsk *s, const struct ibv_wc *wc);
static void xsk_ext_progress(struct xsk *s);
static bool xsk_ext_stream_ok(struct xsk *s);
static void xsk_ext_free(struct xsk *s);
static const struct xsk_ext_hooks ext_hooks = {
	.wc = xsk_ext_wc,
	.progress = xsk_ext_progress,
	.stream_ok = xsk_ext_stream_ok,
	.free = xsk_ext_free,
};

/* The socket of fd with its extended state, made on first use of a
 * connected socket (need_conn: connected now); s->mu held on success;
 * -errno. */
static int ext_get(int fd, struct xsk **sp, bool need_conn)
{
	struct xsk *s = xsk_fd_get(fd);
	const struct xsk_stack *st = xsk_stack();
	int rc = 0;

	if (!s)
		return xsk_real.fcntl(fd, F_GETFD) < 0 ? -EBADF : -ENOTSOCK;
	xsk_mutex_lock(&s->mu);
	xsk_progress(s);
	if (!need_conn && s->ext)
		goto ok;
	if (s->state != XSK_CONNECTED || !s->id || !s->id->qp || !st) {
		rc = s->state == XSK_CLOSED ? -EPIPE : -ENOTCONN;
		goto fail;
	}
	if (!s->ext) {
		struct xsk_ext *x = calloc(1, sizeof(*x));
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qi;

		if (!x) {
			rc = -ENOMEM;
			goto fail;
		}
		x->s = s;
		x->ord = 1;
		if (st->query_qp(s->id->qp, &qa, IBV_QP_MAX_QP_RD_ATOMIC, &qi) == 0 &&
		    qa.max_rd_atomic)
			x->ord = qa.max_rd_atomic;
		x->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (x->efd < 0) {
			rc = -errno;
			free(x);
			goto fail;
		}
		xsk_proto_set_ext(&ext_hooks);
		s->ext = x;
	}
ok:
	*sp = s;
	return 0;
fail:
	xsk_mutex_unlock(&s->mu);
	xsk_fd_put(s);
	return rc;
}

static void ext_put(struct xsk *s)
{
	xsk_mutex_unlock(&s->mu);
	xsk_fd_put(s);
}

static void efd_update(struct xsk_ext *x)
{
	uint64_t v = 1;

	if (x->comp_n && !x->efd_set) {
		if (xsk_real.write(x->efd, &v, sizeof(v)) == sizeof(v))
			x->efd_set = true;
	} else if (!x->comp_n && x->efd_set) {
		if (xsk_real.read(x->efd, &v, sizeof(v)) == sizeof(v) || errno == EAGAIN)
			x->efd_set = false;
	}
}

static void comp_push(struct xsk_ext *x, uint64_t cookie, int op, int status, size_t len)
{
	if (x->comp_n == x->comp_cap) {
		unsigned cap = x->comp_cap ? x->comp_cap * 2 : 64;
		struct xsock_comp *c = malloc(cap * sizeof(*c));

		if (!c)
			return; /* lost: nothing better to do without memory */
		for (unsigned i = 0; i < x->comp_n; i++)
			c[i] = x->comp[(x->comp_head + i) % x->comp_cap];
		free(x->comp);
		x->comp = c;
		x->comp_cap = cap;
		x->comp_head = 0;
	}
	x->comp[(x->comp_head + x->comp_n) % x->comp_cap] =
		(struct xsock_comp){ .cookie = cookie, .op = op, .status = status, .len = len };
	x->comp_n++;
	efd_update(x);
}

static int comp_pop(struct xsk_ext *x, struct xsock_comp *out, int max)
{
	int n = 0;

	while (n < max && x->comp_n) {
		out[n++] = x->comp[x->comp_head];
		x->comp_head = (x->comp_head + 1) % x->comp_cap;
		x->comp_n--;
	}
	efd_update(x);
	return n;
}

/* ---- the progress thread ------------------------------------------------------- */

static void *ext_thread(void *arg)
{
	struct epoll_event ev[16];

	for (;;) {
		int n = xsk_real.epoll_wait(ext_ep, ev, 16, -1);

		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++) {
			struct xsk_ext *x;

			xsk_mutex_lock(&ext_mu);
			for (x = watch_list; x && x != ev[i].data.ptr; x = x->wnext)
				;
			if (x)
				x->busy++;
			xsk_mutex_unlock(&ext_mu);
			if (!x)
				continue; /* no longer watched */
			struct xsk *s = x->s;
			xsk_mutex_lock(&s->mu);
			xsk_progress(s);
			xsk_mutex_unlock(&s->mu);
			xsk_mutex_lock(&ext_mu);
			x->busy--;
			pthread_cond_broadcast(&ext_cond);
			xsk_mutex_unlock(&ext_mu);
		}
	}
	return arg;
}

static bool has_work(const struct xsk_ext *x)
{
	return x->nops > 0;
}

static void unwatch_locked(struct xsk_ext *x)
{
	struct xsk_ext **pp = &watch_list;

	if (!x->watched)
		return;
	while (*pp && *pp != x)
		pp = &(*pp)->wnext;
	if (*pp)
		*pp = x->wnext;
	if (x->s->cch)
		xsk_real.epoll_ctl(ext_ep, EPOLL_CTL_DEL, x->s->cch->fd, NULL);
	x->watched = false;
}

/* Watch the socket's completion channel while it has work (s->mu held). */
static void watch_update(struct xsk_ext *x)
{
	bool want = has_work(x) && x->s->cch;

	if (want == x->watched)
		return;
	xsk_mutex_lock(&ext_mu);
	if (!want) {
		unwatch_locked(x);
	} else {
		if (ext_ep < 0) {
			pthread_t t;

			ext_ep = epoll_create1(EPOLL_CLOEXEC);
			if (ext_ep >= 0 && xsk_thread_start(&t, ext_thread, NULL) == 0) {
				pthread_detach(t);
			} else if (ext_ep >= 0) {
				xsk_real.close(ext_ep);
				ext_ep = -1;
			}
		}
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = x };
		if (ext_ep >= 0 &&
		    xsk_real.epoll_ctl(ext_ep, EPOLL_CTL_ADD, x->s->cch->fd, &ev) == 0) {
			x->watched = true;
			x->wnext = watch_list;
			watch_list = x;
		}
	}
	xsk_mutex_unlock(&ext_mu);
}

/* ---- operations ------------------------------------------------------------------ */

static int status_errno(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_REM_ACCESS_ERR:
		return EACCES;
	case IBV_WC_LOC_PROT_ERR:
	case IBV_WC_LOC_ACCESS_ERR:
		return EFAULT;
	case IBV_WC_REM_INV_REQ_ERR:
	case IBV_WC_LOC_LEN_ERR:
		return EINVAL;
	case IBV_WC_WR_FLUSH_ERR:
		return ECONNRESET;
	default:
		return EIO;
	}
}

static struct ext_op *op_new(struct xsk_ext *x)
{
	for (unsigned i = 0; i < EXT_OPS; i++) {
		if (!x->ops[i].used) {
			struct ext_op *o = &x->ops[i];

			memset(o, 0, sizeof(*o));
			o->used = true;
			x->nops++;
			return o;
		}
	}
	return NULL;
}

static void op_done(struct xsk_ext *x, struct ext_op *o)
{
	comp_push(x, o->cookie, o->kind, o->status, o->status ? 0 : o->posted);
	if (o->mr)
		atomic_fetch_sub(&o->mr->inuse, 1);
	o->used = false;
	x->nops--;
}

static bool op_started(const struct ext_op *o)
{
	if (o->kind == XSOCK_OP_WRITE || o->kind == XSOCK_OP_READ)
		return o->phase == 2;
	return o->posted == o->len;
}

static void op_maybe_done(struct xsk_ext *x, struct ext_op *o)
{
	if (!o->wrs && (op_started(o) || o->status))
		op_done(x, o);
}

static uint64_t op_wrid(struct xsk_ext *x, const struct ext_op *o)
{
	return XSK_WR_EXT | (uint64_t)(o - x->ops);
}

static int post_rdma(struct xsk *s, struct ext_op *o, enum ibv_wr_opcode opc, size_t off,
		     uint32_t len, uint64_t raddr)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(o->buf + off), .length = len,
			       .lkey = o->mr->ib->lkey };
	struct ibv_send_wr wr = { .wr_id = op_wrid(s->ext, o), .opcode = opc, .sg_list = &sge,
				  .num_sge = 1, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = o->rkey;
	int rc = ibv_post_send(s->id->qp, &wr, &bad);
	if (rc)
		return -rc;
	o->wrs++;
	if (opc == IBV_WR_RDMA_READ) {
		o->reads++;
		s->ext->reads_out++;
	}
	return 0;
}

/* Start as much of the head operation as possible; true if it is fully
 * started (the next one may go). */
static bool op_start(struct xsk *s, struct ext_op *o)
{
	struct xsk_ext *x = s->ext;
	int rc = 0;

	if ((o->flags & XSOCK_FENCE) && x->reads_out && !o->posted)
		return false;
	switch (o->kind) {
	case XSOCK_OP_WRITE:
	case XSOCK_OP_READ: {
		bool rd = o->kind == XSOCK_OP_READ;
		if (o->phase == 0) {
			do { /* once for a zero-length operation */
				size_t n = o->len - o->posted;
				if (n > EXT_WR_MAX)
					n = EXT_WR_MAX;
				if (rd && x->reads_out >= x->ord)
					return false;
				rc = post_rdma(s, o, rd ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
					       o->posted, (uint32_t)n, o->raddr + o->posted);
				if (rc)
					break;
				o->posted += n;
			} while (o->posted < o->len);
			if (!rc)
				o->phase = !rd && (o->flags & XSOCK_PLACED) ? 1 : 2;
		}
		if (!rc && o->phase == 1) {
			/* Read Responses follow the Writes before them: a zero-length
			 * Read completes once the peer placed the Write */
			if (x->reads_out >= x->ord)
				return false;
			rc = post_rdma(s, o, IBV_WR_RDMA_READ, o->len, 0, o->raddr);
			if (!rc)
				o->phase = 2;
		}
		break;
	}
	case XSOCK_OP_SEND:
		if (x->reads_out)
			return false; /* stream data waits for earlier Reads */
		while (o->posted < o->len) {
			size_t n = o->len - o->posted;
			rc = xsk_stream_post(s, (uintptr_t)(o->buf + o->posted), o->mr->ib->lkey,
					     n > RS_MAX_TRANSFER ? RS_MAX_TRANSFER : (uint32_t)n,
					     op_wrid(x, o));
			if (rc <= 0)
				break;
			o->wrs++;
			o->posted += (size_t)rc;
			rc = 0;
		}
		if (o->posted < o->len && !rc)
			return false; /* no credits: the rest goes later */
		break;
	default:
		break;
	}
	if (rc < 0)
		o->status = -rc;
	return true;
}

/* Start queued operations in order. */
static void tx_kick(struct xsk *s)
{
	struct xsk_ext *x = s->ext;

	while (x->txq) {
		struct ext_op *o = x->txq;
		bool broken = s->state != XSK_CONNECTED || s->peer_gone;

		if (broken && !o->status)
			o->status = EPIPE;
		if (!o->status && !op_start(s, o))
			break;
		x->txq = o->next;
		if (!x->txq)
			x->txq_tail = NULL;
		o->next = NULL;
		o->queued = false;
		op_maybe_done(x, o);
	}
}

/* Fill asynchronous receives from the stream, in order. */
static void rx_fill(struct xsk *s)
{
	struct xsk_ext *x = s->ext;

	while (x->rxq) {
		struct ext_op *o = x->rxq;
		struct iovec v = { o->buf + o->posted, o->len - o->posted };
		ssize_t n = xsk_recv_locked(s, &v, 1, 0);

		if (n == -EAGAIN)
			break;
		if (n < 0)
			o->status = (int)-n;
		else
			o->posted += (size_t)n;
		if (n > 0 && (o->flags & XSOCK_WAITALL) && o->posted < o->len)
			continue;
		x->rxq = o->next;
		if (!x->rxq)
			x->rxq_tail = NULL;
		op_done(x, o);
	}
}

static void xsk_ext_progress(struct xsk *s)
{
	struct xsk_ext *x = s->ext;

	tx_kick(s);
	rx_fill(s);
	watch_update(x);
}

static bool xsk_ext_stream_ok(struct xsk *s)
{
	return !s->ext->txq && !s->ext->reads_out;
}

static void xsk_ext_wc(struct xsk *s, const struct ibv_wc *wc)
{
	struct xsk_ext *x = s->ext;

	if (!x)
		return;
	if (!(wc->wr_id & XSK_WR_EXT)) { /* the application's own work request */
		comp_push(x, wc->wr_id & ~XSK_WR_USER, XSOCK_OP_QP, status_errno(wc->status),
			  wc->status == IBV_WC_SUCCESS ? wc->byte_len : 0);
		return;
	}
	unsigned i = (unsigned)(wc->wr_id & 0xffffu);
	if (i >= EXT_OPS || !x->ops[i].used || !x->ops[i].wrs)
		return;
	struct ext_op *o = &x->ops[i];
	o->wrs--;
	if (wc->status == IBV_WC_SUCCESS && wc->opcode == IBV_WC_RDMA_READ && o->reads) {
		o->reads--;
		x->reads_out--;
	}
	if (o->reads > o->wrs) { /* an error completion's opcode is undefined */
		x->reads_out -= o->reads - o->wrs;
		o->reads = o->wrs;
	}
	if (wc->status != IBV_WC_SUCCESS && !o->status) {
		o->status = status_errno(wc->status);
		if (s->state == XSK_CONNECTED)
			s->err = ECONNRESET;
	}
	if (!o->queued)
		op_maybe_done(x, o);
}

static void xsk_ext_free(struct xsk *s)
{
	struct xsk_ext *x = s->ext;
	const struct xsk_stack *st = xsk_stack();

	if (!x)
		return;
	xsk_mutex_lock(&ext_mu);
	unwatch_locked(x);
	while (x->busy)
		pthread_cond_wait(&ext_cond, &ext_mu);
	/* registrations the application did not release: their handles stay
	 * valid for xsock_dereg, which then only frees them */
	for (struct xsock_mr *m = x->mrs; m; m = m->next) {
		if (m->ib && st)
			st->dereg_mr(m->ib);
		m->ib = NULL;
		m->x = NULL;
	}
	xsk_mutex_unlock(&ext_mu);
	xsk_real.close(x->efd);
	free(x->comp);
	free(x);
	s->ext = NULL;
}

/* ---- registration ---------------------------------------------------------------- */

XSK_EXPORT int xsock_reg(int fd, void *buf, size_t len, int access, struct xsock_mr **mrp)
{
	const struct xsk_stack *st = xsk_stack();
	struct xsock_mr *m;
	struct xsk *s;
	int ib = IBV_ACCESS_LOCAL_WRITE, rc;

	if (!mrp || !buf || !len || (access & ~(XSOCK_ACCESS_REMOTE_READ | XSOCK_ACCESS_REMOTE_WRITE)))
		return fail(EINVAL);
	if (access & XSOCK_ACCESS_REMOTE_READ)
		ib |= IBV_ACCESS_REMOTE_READ;
	if (access & XSOCK_ACCESS_REMOTE_WRITE)
		ib |= IBV_ACCESS_REMOTE_WRITE;
	rc = ext_get(fd, &s, true);
	if (rc)
		return fail(-rc);
	m = calloc(1, sizeof(*m));
	if (!m) {
		ext_put(s);
		return fail(ENOMEM);
	}
	m->ib = st->reg_mr(s->pd, buf, len, ib);
	if (!m->ib) {
		rc = errno ? errno : ENOMEM;
		free(m);
		ext_put(s);
		return fail(rc);
	}
	m->x = s->ext;
	m->addr = buf;
	m->len = len;
	xsk_mutex_lock(&ext_mu);
	m->next = s->ext->mrs;
	s->ext->mrs = m;
	xsk_mutex_unlock(&ext_mu);
	ext_put(s);
	*mrp = m;
	return 0;
}

XSK_EXPORT int xsock_dereg(struct xsock_mr *m)
{
	const struct xsk_stack *st = xsk_stack();
	int rc = 0;

	if (!m)
		return fail(EINVAL);
	xsk_mutex_lock(&ext_mu);
	if (atomic_load(&m->inuse)) {
		xsk_mutex_unlock(&ext_mu);
		return fail(EBUSY);
	}
	if (m->x) {
		struct xsock_mr **pp = &m->x->mrs;
		while (*pp && *pp != m)
			pp = &(*pp)->next;
		if (*pp)
			*pp = m->next;
	}
	if (m->ib && st && st->dereg_mr(m->ib))
		rc = errno ? errno : EINVAL;
	xsk_mutex_unlock(&ext_mu);
	free(m);
	return rc ? fail(rc) : 0;
}

XSK_EXPORT int xsock_mr_desc(const struct xsock_mr *m, struct xsock_rdesc *d)
{
	if (!m || !d)
		return fail(EINVAL);
	if (!m->ib)
		return fail(ENOTCONN);
	if (m->len > UINT32_MAX)
		return fail(EOVERFLOW);
	d->addr = (uintptr_t)m->addr;
	d->stag = m->ib->rkey;
	d->len = (uint32_t)m->len;
	return 0;
}

/* ---- posting ------------------------------------------------------------------------ */

/* Queue an operation on fd's socket (s->mu taken and released here). */
static int ext_post(int fd, int kind, const struct xsock_mr *mr, size_t off, size_t len,
		    const struct xsock_rdesc *remote, uint64_t roff, uint64_t cookie, int flags)
{
	struct xsk *s;
	struct ext_op *o;
	int rc, allowed = XSOCK_FENCE;

	if (kind == XSOCK_OP_WRITE)
		allowed |= XSOCK_PLACED;
	if (kind == XSOCK_OP_RECV)
		allowed = XSOCK_WAITALL;
	if (!mr || (flags & ~allowed) || off > mr->len || len > mr->len - off)
		return fail(EINVAL);
	if ((kind == XSOCK_OP_SEND || kind == XSOCK_OP_RECV) && !len)
		return fail(EINVAL);
	if (remote && (roff > remote->len || len > remote->len - roff ||
		       remote->addr > UINT64_MAX - remote->len))
		return fail(EINVAL);
	rc = ext_get(fd, &s, true);
	if (rc)
		return fail(-rc);
	struct xsk_ext *x = s->ext;
	if (mr->x != x || !mr->ib) {
		rc = EINVAL; /* registered on another socket */
		goto out;
	}
	if (kind != XSOCK_OP_RECV && (s->peer_gone || s->shut_wr)) {
		rc = EPIPE;
		goto out;
	}
	o = op_new(x);
	if (!o) {
		rc = EAGAIN;
		goto out;
	}
	o->kind = kind;
	o->flags = flags;
	o->cookie = cookie;
	o->mr = (struct xsock_mr *)mr;
	atomic_fetch_add(&o->mr->inuse, 1);
	o->buf = (uint8_t *)mr->addr + off;
	o->len = len;
	if (remote) {
		o->raddr = remote->addr + roff;
		o->rkey = remote->stag;
	}
	if (kind == XSOCK_OP_RECV) {
		if (x->rxq_tail)
			x->rxq_tail->next = o;
		else
			x->rxq = o;
		x->rxq_tail = o;
	} else {
		o->queued = true;
		if (x->txq_tail)
			x->txq_tail->next = o;
		else
			x->txq = o;
		x->txq_tail = o;
	}
	/* start it now if nothing is ahead of it; collect what completed */
	xsk_progress(s);
	rc = 0;
out:
	ext_put(s);
	return rc ? fail(rc) : 0;
}

XSK_EXPORT int xsock_rdma_write(int fd, const struct xsock_mr *mr, size_t local_off, size_t len,
				const struct xsock_rdesc *remote, uint64_t remote_off,
				uint64_t cookie, int flags)
{
	if (!remote)
		return fail(EINVAL);
	return ext_post(fd, XSOCK_OP_WRITE, mr, local_off, len, remote, remote_off, cookie, flags);
}

XSK_EXPORT int xsock_rdma_read(int fd, const struct xsock_mr *mr, size_t local_off, size_t len,
			       const struct xsock_rdesc *remote, uint64_t remote_off,
			       uint64_t cookie, int flags)
{
	if (!remote)
		return fail(EINVAL);
	return ext_post(fd, XSOCK_OP_READ, mr, local_off, len, remote, remote_off, cookie, flags);
}

XSK_EXPORT int xsock_send_async(int fd, const struct xsock_mr *mr, size_t off, size_t len,
				uint64_t cookie, int flags)
{
	return ext_post(fd, XSOCK_OP_SEND, mr, off, len, NULL, 0, cookie, flags);
}

XSK_EXPORT int xsock_recv_async(int fd, const struct xsock_mr *mr, size_t off, size_t len,
				uint64_t cookie, int flags)
{
	return ext_post(fd, XSOCK_OP_RECV, mr, off, len, NULL, 0, cookie, flags);
}

/* ---- completions ----------------------------------------------------------------- */

XSK_EXPORT int xsock_poll_comp(int fd, struct xsock_comp *comp, int max)
{
	struct xsk *s;
	int rc, n;

	if (!comp || max <= 0)
		return fail(EINVAL);
	rc = ext_get(fd, &s, false);
	if (rc)
		return fail(-rc);
	n = comp_pop(s->ext, comp, max);
	ext_put(s);
	return n;
}

static int64_t now_ms(void)
{
	return (int64_t)xs_now_ms();
}

XSK_EXPORT int xsock_wait_comp(int fd, struct xsock_comp *comp, int max, int timeout_ms)
{
	int64_t end = timeout_ms >= 0 ? now_ms() + timeout_ms : 0;

	if (!comp || max <= 0)
		return fail(EINVAL);
	for (;;) {
		struct pollfd p[2];
		struct xsk *s;
		int rc = ext_get(fd, &s, false), n, left = -1;

		if (rc)
			return fail(-rc);
		n = comp_pop(s->ext, comp, max);
		p[0] = (struct pollfd){ .fd = s->ext->efd, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = s->cch ? s->cch->fd : -1, .events = POLLIN };
		bool idle = !has_work(s->ext);
		ext_put(s);
		if (n)
			return n;
		if (idle) /* nothing outstanding: nothing will complete */
			return 0;
		if (timeout_ms >= 0) {
			int64_t now = now_ms();
			if (now >= end)
				return 0;
			left = (int)(end - now);
		}
		if (xsk_real.poll(p, 2, left) < 0)
			return -1;
	}
}

XSK_EXPORT int xsock_comp_fd(int fd)
{
	struct xsk *s;
	int rc = ext_get(fd, &s, false), efd;

	if (rc)
		return fail(-rc);
	efd = s->ext->efd;
	ext_put(s);
	return efd;
}

/* ---- the verbs objects ------------------------------------------------------------ */

XSK_EXPORT struct ibv_qp *xsock_qp(int fd)
{
	struct xsk *s;
	struct ibv_qp *qp;
	int rc = ext_get(fd, &s, true);

	if (rc) {
		errno = -rc;
		return NULL;
	}
	qp = s->id->qp;
	ext_put(s);
	return qp;
}

XSK_EXPORT struct ibv_pd *xsock_pd(int fd)
{
	struct xsk *s;
	struct ibv_pd *pd;
	int rc = ext_get(fd, &s, true);

	if (rc) {
		errno = -rc;
		return NULL;
	}
	pd = s->pd;
	ext_put(s);
	return pd;
}
