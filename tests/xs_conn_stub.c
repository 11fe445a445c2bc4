/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A fake engine for the verbs object tests: the xs_conn_* calls of
 * verbs/xs_internal.h record what the QP asked for through the iWARP
 * transport (verbs/xs_tp_iwarp.c, compiled in with the verbs objects),
 * and helpers drive the QP's upcalls as the engine would (placing through
 * the real DDP code). */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "tests/xs_conn_stub.h"

int xs_conn_attach(struct xs_conn *c, const struct xs_conn_ops *ops, void *qp,
		   struct ddp_queue *q_send, struct ddp_queue *q_readreq, struct ddp_queue *q_term,
		   struct ddp_queue *q_aresp)
{
	c->ops = ops;
	c->qp = qp;
	ddp_rx_init(&c->rx, NULL, NULL);
	ddp_rx_add_queue(&c->rx, q_send);
	ddp_rx_add_queue(&c->rx, q_readreq);
	ddp_rx_add_queue(&c->rx, q_term);
	if (q_aresp)
		ddp_rx_add_queue(&c->rx, q_aresp);
	for (int i = 0; i < 3; i++)
		c->msn[i] = 1;
	return c->fail_attach;
}

void xs_conn_rx_lock(struct xs_conn *c)
{
	pthread_mutex_lock(&c->rx_lock);
}

void xs_conn_rx_unlock(struct xs_conn *c)
{
	pthread_mutex_unlock(&c->rx_lock);
}

static void record(struct xs_conn *c, const struct iovec *iov, int cnt)
{
	c->len = 0;
	for (int i = 0; i < cnt; i++) {
		if (c->len + iov[i].iov_len <= sizeof(c->data))
			memcpy(c->data + c->len, iov[i].iov_base, iov[i].iov_len);
		c->len += iov[i].iov_len;
	}
}

int xs_conn_cork(struct xs_conn *c)
{
	if (c->fail_tx)
		return -EPIPE;
	c->ncork++;
	c->corked = true;
	c->gathered = 0;
	return 0;
}

int xs_conn_cork_flush(struct xs_conn *c)
{
	if (!c->corked || !c->gathered)
		return 0;
	c->gathered = 0;
	c->nflush++;
	return c->fail_flush ? -EPIPE : 0;
}

int xs_conn_uncork(struct xs_conn *c)
{
	int rc = xs_conn_cork_flush(c);

	c->corked = false;
	return rc;
}

int xs_conn_send(struct xs_conn *c, enum rdmap_opcode op, uint32_t inv_stag,
		 const struct iovec *iov, int cnt)
{
	if (c->fail_tx)
		return -EPIPE;
	c->gathered += c->corked;
	c->nsend++;
	c->last_op = op;
	c->last_inv = inv_stag;
	record(c, iov, cnt);
	return 0;
}

int xs_conn_tagged(struct xs_conn *c, enum rdmap_opcode op, uint32_t stag, uint64_t to,
		   const struct iovec *iov, int cnt)
{
	if (c->fail_tx)
		return -EPIPE;
	c->gathered += c->corked;
	c->ntagged++;
	c->last_op = op;
	c->last_stag = stag;
	c->last_to = to;
	record(c, iov, cnt);
	return 0;
}

int xs_conn_read_req(struct xs_conn *c, const struct rdmap_read_req *rr)
{
	if (c->fail_tx)
		return -EPIPE;
	c->nreadreq++;
	c->last_rr = *rr;
	return 0;
}

int xs_conn_terminate(struct xs_conn *c, const struct rdmap_term *t)
{
	c->nterm++;
	c->last_term = *t;
	return 0;
}

int xs_conn_atomic_req(struct xs_conn *c, const struct rdmap_atomic_req *r)
{
	(void)r;
	return c->fail_tx ? -EPIPE : 0;
}

int xs_conn_atomic_resp(struct xs_conn *c, uint32_t req_id, uint64_t value)
{
	(void)c;
	(void)req_id;
	(void)value;
	return 0;
}

int xs_conn_read_resp(struct xs_conn *c, uint32_t sink_stag, uint64_t sink_to,
		      const uint8_t *src, uint32_t len)
{
	c->nreadresp++;
	c->resp_sink = sink_stag;
	c->resp_to = sink_to;
	c->resp_src = src;
	c->resp_len = len;
	return 0;
}

void xs_conn_disconnect(struct xs_conn *c)
{
	c->disconnected++;
}

void xs_conn_put(struct xs_conn *c)
{
	c->puts++;
}

/* the CQ fast path: nothing waits in a stub's socket */
ssize_t xs_conn_poll(struct xs_conn *c, size_t budget, bool maybe)
{
	return 0;
}

void xs_conn_hold(struct xs_conn *c)
{
	c->holds++;
}

void xs_conn_release(struct xs_conn *c)
{
	c->holds--;
}

void xs_conn_rx_kick(struct xs_conn *c, bool never)
{
	(void)c; /* the stub's stream never stalls (no RNR wait) */
	(void)never;
}

/* ---- driving the upcalls ---------------------------------------------------- */

int stub_untagged(struct xs_conn *c, enum rdmap_opcode op, uint32_t qn, uint32_t inv,
		  const void *payload, uint32_t len, struct xs_err *err)
{
	struct ddp_hdr h = {
		.tagged = false,
		.last = true,
		.dv = DDP_VERSION,
		.rsvdulp = rdmap_ctrl_encode(op),
		.rsvdulp2 = inv,
		.qn = qn,
		.msn = c->msn[qn]++,
		.mo = 0,
	};
	struct ddp_delivery d;
	int rc;

	pthread_mutex_lock(&c->rx_lock);
	rc = ddp_rx_place(&c->rx, &h, payload, len, err);
	while (rc == 0 && ddp_queue_deliver(c->rx.queues[qn], &d) == 1)
		c->ops->deliver(c->qp, op, qn, &d);
	pthread_mutex_unlock(&c->rx_lock);
	return rc;
}

int stub_tagged(struct xs_conn *c, enum rdmap_opcode op, uint32_t stag, uint64_t to,
		const void *payload, uint32_t len, struct xs_err *err)
{
	struct ddp_hdr h = { .tagged = true, .last = true, .dv = DDP_VERSION, .stag = stag, .to = to };
	uint8_t *dst;
	int rc;

	pthread_mutex_lock(&c->rx_lock);
	rc = c->ops->resolve(c->qp, op, stag, to, len, &dst, err);
	if (rc == 0) {
		memcpy(dst, payload, len);
		c->ops->tagged_last(c->qp, op, &h);
	}
	pthread_mutex_unlock(&c->rx_lock);
	return rc;
}

void stub_fail(struct xs_conn *c, bool local, const struct xs_err *err)
{
	c->ops->failed(c->qp, local, err);
}

/* ---- the CM side of the iWARP transport (xs_tp_iwarp.c): no connection
 * is ever made through the stub ------------------------------------------------ */

const struct mpa_agreed *xs_conn_agreed(const struct xs_conn *c)
{
	static const struct mpa_agreed none = { .rev = 2, .ird = 1, .ord = 1 };

	(void)c;
	return &none;
}

struct xs_listener *xs_listen(const struct sockaddr *addr, socklen_t len, int backlog,
			      int v6only, xs_accept_fn cb, xs_plain_fn plain, void *ctx)
{
	errno = EOPNOTSUPP;
	return NULL;
}

int xs_listener_addr(const struct xs_listener *l, struct sockaddr_storage *addr)
{
	return -EOPNOTSUPP;
}

void xs_listener_close(struct xs_listener *l)
{
}

int xs_connect(const struct sockaddr *dst, socklen_t dlen, const struct sockaddr *src,
	       socklen_t slen, const struct mpa_prefs *prefs, unsigned redial_ms, xs_connect_fn cb,
	       void *ctx)
{
	return -EOPNOTSUPP;
}

int xs_conn_accept(struct xs_conn *c, const struct mpa_prefs *prefs)
{
	return -EOPNOTSUPP;
}

int xs_conn_reject(struct xs_conn *c, const void *pdata, uint8_t len)
{
	return -EOPNOTSUPP;
}

int xs_conn_addrs(const struct xs_conn *c, struct sockaddr_storage *local,
		  struct sockaddr_storage *peer)
{
	return -EOPNOTSUPP;
}

void xs_conn_set_closed_cb(struct xs_conn *c, xs_conn_closed_fn cb, void *ctx)
{
}
