/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* RoCEv2 under the transport interface: the ops table of xs_transport.h
 * over the RoCE engine (xs_roce_priv.h).  The CM side is issue 18's (IB
 * CM MADs on QP 1): until then a RoCE QP is connected by the program
 * itself (ibv_modify_qp to RTR and RTS) and the CM calls say EOPNOTSUPP. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "verbs/xs_roce_priv.h"

/* the QP's Write and Read Response targets come through up->resolve;
 * DDP's own tagged path is never used here */
static int no_tagged(void *ctx, uint32_t stag, uint64_t to, uint32_t len, uint8_t **dst,
		     struct xs_err *err)
{
	(void)ctx, (void)stag, (void)to, (void)len, (void)dst;
	xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, 0);
	return -EPROTO;
}

static int tp_attach(struct xs_conn *c, const struct xs_conn_ops *up, void *qp,
		     const struct xs_tp_queues *q)
{
	struct xs_roce_conn *x = xr_of(c);

	pthread_mutex_lock(&x->rx_mu);
	x->up = up;
	x->qp = qp;
	ddp_rx_init(&x->ddp, no_tagged, x);
	x->q_recv = q->recv;
	x->q_rr = q->read_req;
	x->q_aresp = q->atomic_resp;
	ddp_rx_add_queue(&x->ddp, q->recv);
	ddp_rx_add_queue(&x->ddp, q->read_req);
	if (q->term)
		ddp_rx_add_queue(&x->ddp, q->term);
	if (q->atomic_resp)
		ddp_rx_add_queue(&x->ddp, q->atomic_resp);
	atomic_store(&x->attached, true);
	pthread_mutex_unlock(&x->rx_mu);
	xr_loop_kick(x); /* what came between RTR and now */
	return 0;
}

void xs_roce_params(uint16_t ird, uint16_t ord, struct xs_tp_params *p)
{
	memset(p, 0, sizeof(*p));
	p->ird = ird;
	p->ord = ord;
	p->ext = true; /* atomics and immediate data are RoCE's own */
	p->req_buf_len = RDMAP_ATOMIC_REQ_LEN;
	p->acked = true; /* RC: a WR is done when the peer ACKs it */
}

static void tp_params(const struct xs_conn *c, struct xs_tp_params *p)
{
	*p = xr_of((struct xs_conn *)(uintptr_t)c)->params;
}

static int tp_send(struct xs_conn *c, unsigned flags, uint32_t inv, uint32_t imm,
		   const struct iovec *iov, int cnt)
{
	return xr_req_send(xr_of(c), flags, inv, imm, iov, cnt);
}

static int tp_write(struct xs_conn *c, unsigned flags, uint32_t stag, uint64_t to, uint32_t imm,
		    const struct iovec *iov, int cnt)
{
	return xr_req_write(xr_of(c), flags, stag, to, imm, iov, cnt);
}

static int tp_read_req(struct xs_conn *c, const struct xs_tp_read *r)
{
	return xr_req_read(xr_of(c), r);
}

static int tp_atomic_req(struct xs_conn *c, const struct xs_tp_atomic *a)
{
	return xr_req_atomic(xr_of(c), a);
}

/* each packet leaves as it is built: nothing to gather */
static int tp_cork(struct xs_conn *c)
{
	return atomic_load(&xr_of(c)->dead) ? -EPIPE : 0;
}

static int tp_nop(struct xs_conn *c)
{
	(void)c;
	return 0;
}

static int tp_terminate(struct xs_conn *c, const struct rdmap_term *t)
{
	return xr_resp_nak(xr_of(c), t);
}

static int tp_read_resp(struct xs_conn *c, uint32_t sink_stag, uint64_t sink_to,
			const uint8_t *src, uint32_t len)
{
	(void)sink_stag;
	return xr_resp_read(xr_of(c), (uint32_t)sink_to, src, len);
}

static int tp_atomic_resp(struct xs_conn *c, uint32_t req_id, uint64_t value)
{
	return xr_resp_atomic(xr_of(c), req_id, value);
}

static void tp_rx_lock(struct xs_conn *c)
{
	pthread_mutex_lock(&xr_of(c)->rx_mu);
}

static void tp_rx_unlock(struct xs_conn *c)
{
	pthread_mutex_unlock(&xr_of(c)->rx_mu);
}

/* A posted receive: the requester's RNR timer resends (RoCE has no
 * other signal); never: nothing to wake. */
static void tp_rx_kick(struct xs_conn *c, bool never)
{
	(void)c, (void)never;
}

static ssize_t tp_poll(struct xs_conn *c, size_t budget, bool maybe)
{
	struct xs_roce_conn *x = xr_of(c);
	ssize_t n = 0;

	(void)maybe;
	if (pthread_mutex_trylock(&x->rx_mu))
		return -EBUSY;
	if (atomic_load(&x->attached) && !atomic_load(&x->dead))
		n = xr_rx_drain(x, budget ? budget : XR_BATCH);
	pthread_mutex_unlock(&x->rx_mu);
	return n;
}

static void tp_hold(struct xs_conn *c)
{
	xr_hold(xr_of(c));
}

static void tp_release(struct xs_conn *c)
{
	xr_put(xr_of(c));
}

/* from an upcall too (rx_mu may be held): flags only */
static void tp_disconnect(struct xs_conn *c)
{
	struct xs_roce_conn *x = xr_of(c);

	atomic_store(&x->dead, true);
	pthread_mutex_lock(&x->tx_mu);
	pthread_cond_broadcast(&x->tx_cv);
	pthread_mutex_unlock(&x->tx_mu);
}

/* The QP's reference: no upcall runs after this returns; what the QP
 * sent and the peer has not ACKed yet is still resent (xr_let_go). */
static void tp_put(struct xs_conn *c)
{
	struct xs_roce_conn *x = xr_of(c);

	tp_disconnect(c);
	pthread_mutex_lock(&x->rx_mu);
	atomic_store(&x->attached, false);
	x->failed_up = true;
	pthread_mutex_unlock(&x->rx_mu);
	xr_let_go(x);
	xr_put(x);
}

static struct xs_listener *tp_listen(const struct sockaddr *addr, socklen_t len, int backlog,
				     int v6only, xs_accept_fn cb, xs_plain_fn plain, void *ctx)
{
	(void)addr, (void)len, (void)backlog, (void)v6only, (void)cb, (void)plain, (void)ctx;
	xs_log("roce: rdma_cm over RoCE is not there yet (IB CM): listen refused");
	errno = EOPNOTSUPP;
	return NULL;
}

static int tp_listener_addr(const struct xs_listener *l, struct sockaddr_storage *addr)
{
	(void)l, (void)addr;
	return -EOPNOTSUPP;
}

static void tp_listener_close(struct xs_listener *l)
{
	(void)l;
}

static int tp_connect(const struct sockaddr *dst, socklen_t dlen, const struct sockaddr *src,
		      socklen_t slen, const struct mpa_prefs *prefs, unsigned redial_ms,
		      xs_connect_fn cb, void *ctx)
{
	(void)dst, (void)dlen, (void)src, (void)slen, (void)prefs, (void)redial_ms, (void)cb,
		(void)ctx;
	xs_log("roce: rdma_cm over RoCE is not there yet (IB CM): connect refused");
	return -EOPNOTSUPP;
}

static int tp_accept(struct xs_conn *c, const struct mpa_prefs *prefs)
{
	(void)c, (void)prefs;
	return -EOPNOTSUPP;
}

static int tp_reject(struct xs_conn *c, const void *pdata, uint8_t len)
{
	(void)c, (void)pdata, (void)len;
	return -EOPNOTSUPP;
}

static const struct mpa_agreed *tp_agreed(const struct xs_conn *c)
{
	(void)c;
	return NULL;
}

static int tp_addrs(const struct xs_conn *c, struct sockaddr_storage *local,
		    struct sockaddr_storage *peer)
{
	const struct xs_roce_conn *x = xr_of((struct xs_conn *)(uintptr_t)c);

	*local = x->path.local;
	*peer = x->path.peer;
	return 0;
}

static void tp_set_closed_cb(struct xs_conn *c, xs_conn_closed_fn cb, void *ctx)
{
	(void)c, (void)cb, (void)ctx;
}

const struct xs_transport_ops xs_tp_roce = {
	.name = "roce",
	.attach = tp_attach,
	.params = tp_params,
	.send = tp_send,
	.write = tp_write,
	.read_req = tp_read_req,
	.atomic_req = tp_atomic_req,
	.cork = tp_cork,
	.cork_flush = tp_nop,
	.uncork = tp_nop,
	.terminate = tp_terminate,
	.read_resp = tp_read_resp,
	.atomic_resp = tp_atomic_resp,
	.rx_lock = tp_rx_lock,
	.rx_unlock = tp_rx_unlock,
	.rx_kick = tp_rx_kick,
	.poll = tp_poll,
	.hold = tp_hold,
	.release = tp_release,
	.disconnect = tp_disconnect,
	.put = tp_put,
	.listen = tp_listen,
	.listener_addr = tp_listener_addr,
	.listener_close = tp_listener_close,
	.connect = tp_connect,
	.accept = tp_accept,
	.reject = tp_reject,
	.agreed = tp_agreed,
	.addrs = tp_addrs,
	.set_closed_cb = tp_set_closed_cb,
};
