/* Verbs error paths over real loopback connections (issue 3).
 *
 * Two endpoints in this process (a listener's child and a connecting id),
 * or a raw MPA peer built from the wire libraries (to see the exact
 * Terminate the library sends, or to be a peer that never answers), or a
 * forked raw peer that is SIGKILLed.  Every wait is bounded.
 *
 * Remote errors (one connection each): the requester's completions, the
 * following WRs flushed on both sides, both QPs in ERR, DISCONNECTED on both
 * sides, QP_FATAL on both, the target memory untouched (guard bytes), and
 * (raw peer) the Terminate's Layer/EType/ECode and headers on the wire.
 * RDMA Write and Send complete on the requester once the LLP took them
 * (iWARP has no acknowledgement; siw and iWARP NICs do the same), so
 * their own completion is SUCCESS; the error then shows as the QP's
 * asynchronous error and the flush.  An RDMA Read completes with the
 * status the Terminate maps to (RDMAP Remote Protection -> REM_ACCESS_ERR).
 *
 * Then: modify_qp(ERR) flushing in order, rdma_disconnect with WRs
 * outstanding, a SIGKILLed peer, and invalid application input. */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "iwarp/iw_stream.h"
#include "mpa/mpa.h"
#include "tests/test-cm-util.h"

#define TLEN 4096 /* the target MR */
#define GUARD 4096 /* guard bytes each side */
#define FILL_T 0x5a
#define FILL_C 0x33
#define NRECV 4
#define MAXWC 512

static struct rdma_event_channel *lch;
static struct rdma_cm_id *lid;
static uint16_t lport;
static struct ibv_context *vctx;

/* ---- endpoints ------------------------------------------------------------- */

enum tmr { T_RW, T_RO, T_WO, T_PD2, T_COUNT };

struct ep {
	struct rdma_event_channel *ch; /* client: its own; server: lch */
	struct rdma_cm_id *id;
	struct ibv_cq *scq, *rcq;
	uint8_t *mem; /* GUARD | TLEN | GUARD */
	struct ibv_mr *mr[T_COUNT]; /* all over mem + GUARD, TLEN */
	struct ibv_pd *pd2;
	uint8_t *rbuf; /* receive buffers */
	struct ibv_mr *rmr;
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void make_qp(struct ep *e, struct rdma_cm_id *id, unsigned depth, uint8_t fill)
{
	struct ibv_qp_init_attr a;
	unsigned rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	e->id = id;
	REQUIRE(id->verbs);
	e->scq = ibv_create_cq(id->verbs, MAXWC, NULL, NULL, 0);
	e->rcq = ibv_create_cq(id->verbs, MAXWC, NULL, NULL, 0);
	REQUIRE(e->scq && e->rcq);
	memset(&a, 0, sizeof(a));
	a.send_cq = e->scq;
	a.recv_cq = e->rcq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = depth;
	a.cap.max_recv_wr = depth;
	a.cap.max_send_sge = 2;
	a.cap.max_recv_sge = 2;
	a.cap.max_inline_data = 64;
	REQUIRE(rdma_create_qp(id, NULL, &a) == 0);
	e->mem = malloc(2 * GUARD + TLEN);
	REQUIRE(e->mem);
	memset(e->mem, fill, 2 * GUARD + TLEN);
	e->pd2 = ibv_alloc_pd(id->verbs);
	REQUIRE(e->pd2);
	e->mr[T_RW] = ibv_reg_mr(id->pd, e->mem + GUARD, TLEN, (int)rw);
	e->mr[T_RO] = ibv_reg_mr(id->pd, e->mem + GUARD, TLEN,
				 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	e->mr[T_WO] = ibv_reg_mr(id->pd, e->mem + GUARD, TLEN,
				 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	e->mr[T_PD2] = ibv_reg_mr(e->pd2, e->mem + GUARD, TLEN, (int)rw);
	for (int i = 0; i < T_COUNT; i++)
		REQUIRE(e->mr[i]);
	e->rbuf = calloc(depth, 256);
	REQUIRE(e->rbuf);
	e->rmr = ibv_reg_mr(id->pd, e->rbuf, (size_t)depth * 256, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(e->rmr);
}

static void free_ep(struct ep *e)
{
	if (e->id && e->id->qp)
		rdma_destroy_qp(e->id);
	for (int i = 0; i < T_COUNT; i++)
		if (e->mr[i])
			CHECK(ibv_dereg_mr(e->mr[i]) == 0);
	if (e->rmr)
		CHECK(ibv_dereg_mr(e->rmr) == 0);
	if (e->pd2)
		CHECK(ibv_dealloc_pd(e->pd2) == 0);
	if (e->scq)
		CHECK(ibv_destroy_cq(e->scq) == 0);
	if (e->rcq)
		CHECK(ibv_destroy_cq(e->rcq) == 0);
	if (e->id)
		CHECK(rdma_destroy_id(e->id) == 0);
	if (e->ch && e->ch != lch)
		rdma_destroy_event_channel(e->ch);
	free(e->mem);
	free(e->rbuf);
	memset(e, 0, sizeof(*e));
}

static int post_recvs(struct ep *e, unsigned n, uint64_t wr_id0)
{
	for (unsigned i = 0; i < n; i++) {
		struct ibv_sge sg = { .addr = (uintptr_t)(e->rbuf + (size_t)i * 256),
				      .length = 256,
				      .lkey = e->rmr->lkey };
		struct ibv_recv_wr wr = { .wr_id = wr_id0 + i, .sg_list = &sg, .num_sge = 1 }, *bad;
		int rc = ibv_post_recv(e->id->qp, &wr, &bad);

		if (rc)
			return rc;
	}
	return 0;
}

static struct rdma_conn_param conn_param(void)
{
	struct rdma_conn_param cp;

	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = 4;
	cp.initiator_depth = 4;
	return cp;
}

/* The listener's next request: QP, MRs, n receives posted, accepted. */
static bool server_accept(struct ep *s, unsigned depth, unsigned nrecv)
{
	struct rdma_conn_param cp = conn_param();
	struct rdma_cm_event *ev;

	memset(s, 0, sizeof(*s));
	ev = cm_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 3000, "request");
	if (!ev)
		return false;
	s->ch = lch;
	make_qp(s, ev->id, depth, FILL_T);
	rdma_ack_cm_event(ev);
	CHECK(post_recvs(s, nrecv, 100) == 0);
	CHECK(rdma_accept(s->id, &cp) == 0);
	ev = cm_expect(lch, RDMA_CM_EVENT_ESTABLISHED, 3000, "server established");
	if (!ev)
		return false;
	rdma_ack_cm_event(ev);
	return true;
}

/* A connected pair: the client (requester) and the server (target). */
static bool pair_up(struct ep *c, struct ep *s, unsigned depth, unsigned c_recv, unsigned s_recv)
{
	struct rdma_conn_param cp = conn_param();
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	memset(c, 0, sizeof(*c));
	id = cm_resolved_id(&c->ch, NULL, lport);
	c->id = id;
	make_qp(c, id, depth, FILL_C);
	CHECK(post_recvs(c, c_recv, 200) == 0);
	REQUIRE(rdma_connect(id, &cp) == 0);
	if (!server_accept(s, depth, s_recv))
		return false;
	ev = cm_expect(c->ch, RDMA_CM_EVENT_ESTABLISHED, 3000, "client established");
	if (!ev)
		return false;
	rdma_ack_cm_event(ev);
	return true;
}

/* Up to n completions within ms. */
static int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n, int ms)
{
	double end = now_ms() + ms;
	int got = 0;

	while (got < n) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		if (r < 0)
			return -1;
		got += r;
		if (got < n) {
			if (now_ms() > end)
				break;
			usleep(500);
		}
	}
	return got;
}

static bool cq_empty(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	return ibv_poll_cq(cq, 1, &wc) == 0;
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return (enum ibv_qp_state)-1;
	return a.qp_state;
}

static bool wait_state(struct ibv_qp *qp, enum ibv_qp_state st, int ms)
{
	double end = now_ms() + ms;

	while (qp_state(qp) != st) {
		if (now_ms() > end)
			return false;
		usleep(500);
	}
	return true;
}

/* Async events queued so far (the context's fd is non-blocking). */
static int drain_async(struct ibv_qp *qa, int *na, struct ibv_qp *qb, int *nb)
{
	struct ibv_async_event ae;
	int n = 0;

	*na = *nb = 0;
	while (ibv_get_async_event(vctx, &ae) == 0) {
		if (ae.event_type == IBV_EVENT_QP_FATAL && ae.element.qp == qa)
			(*na)++;
		else if (ae.event_type == IBV_EVENT_QP_FATAL && qb && ae.element.qp == qb)
			(*nb)++;
		else
			fprintf(stderr, "unexpected async event %s\n",
				ibv_event_type_str(ae.event_type));
		ibv_ack_async_event(&ae);
		n++;
	}
	return n;
}

static bool all_bytes(const uint8_t *p, size_t len, uint8_t v)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			return false;
	return true;
}

static int post1(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op, struct ibv_sge *sg,
		 int nsge, uint32_t rkey, uint64_t raddr, uint32_t inv)
{
	struct ibv_send_wr wr, *bad = NULL;
	int rc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.sg_list = sg;
	wr.num_sge = nsge;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.rkey = rkey;
	wr.wr.rdma.remote_addr = raddr;
	if (op == IBV_WR_SEND_WITH_INV)
		wr.invalidate_rkey = inv;
	rc = ibv_post_send(qp, &wr, &bad);
	if (rc)
		CHECK(bad == &wr);
	return rc;
}

/* ---- a raw MPA initiator (wire libraries, no verbs) -------------------------- */

struct raw {
	int fd;
	struct mpa_agreed ag;
	struct iw_tx tx;
	struct iw_rx rx;
	struct ddp_queue q[3];
	uint8_t qbuf[3][4][256];
	bool got_term;
	struct rdmap_term term;
	int nsend, nreadreq;
};

static int raw_write(void *ctx, const struct iovec *iov, int cnt, size_t len)
{
	struct raw *r = ctx;
	struct iovec v[MPA_TX_MAX_IOV];
	struct iovec *p = v;
	size_t left = len;

	if (cnt > MPA_TX_MAX_IOV)
		return -EINVAL;
	memcpy(v, iov, (size_t)cnt * sizeof(*v));
	while (left) {
		ssize_t n = writev(r->fd, p, cnt);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EPIPE;
		left -= (size_t)n;
		while (cnt && (size_t)n >= p->iov_len) {
			n -= (ssize_t)p->iov_len;
			p++;
			cnt--;
		}
		if (cnt) {
			p->iov_base = (uint8_t *)p->iov_base + n;
			p->iov_len -= (size_t)n;
		}
	}
	return 0;
}

static int raw_resolve(void *ctx, uint32_t stag, uint64_t to, uint32_t len, uint8_t **dst,
		       struct xs_err *err)
{
	(void)ctx, (void)stag, (void)to, (void)len, (void)dst;
	xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_INVALID_STAG);
	return -ENOENT;
}

static void raw_deliver(void *ctx, enum rdmap_opcode op, uint32_t qn, const struct ddp_delivery *d)
{
	struct raw *r = ctx;
	struct xs_err e;

	(void)op;
	if (qn == RDMAP_QN_TERMINATE && !r->got_term)
		r->got_term = rdmap_term_decode(d->addr, d->msg_len, &r->term, &e) == 0;
	else if (qn == RDMAP_QN_SEND)
		r->nsend++;
	else if (qn == RDMAP_QN_READ_REQ)
		r->nreadreq++;
	if (qn != RDMAP_QN_TERMINATE)
		ddp_queue_post(&r->q[qn], d->addr, 256, NULL);
}

static const struct iw_rx_ops raw_ops = { .deliver = raw_deliver };

/* TCP connect and send the MPA Request (the listener answers later). */
static void raw_connect(struct raw *r, struct mpa_prefs *p, struct mpa_frame *req)
{
	struct sockaddr_in a = cm_sin("127.0.0.1", lport);
	uint8_t buf[600];
	ssize_t n;

	memset(r, 0, sizeof(*r));
	r->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	REQUIRE(r->fd >= 0);
	REQUIRE(connect(r->fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	mpa_prefs_default(p);
	p->ird = p->ord = 4;
	mpa_request_build(p, req);
	n = mpa_frame_encode(req, buf, sizeof(buf));
	REQUIRE(n > 0);
	REQUIRE(write(r->fd, buf, (size_t)n) == n);
}

/* Read the Reply and start the stream.  false on failure. */
static bool raw_established(struct raw *r, const struct mpa_prefs *p, const struct mpa_frame *req)
{
	uint8_t buf[600];
	size_t have = 0, need = 20;
	struct mpa_frame f;
	struct xs_err err;
	struct pollfd pf = { .fd = r->fd, .events = POLLIN };

	for (;;) {
		/* read exactly the frame: nothing follows until we send */
		int rc = mpa_frame_decode(buf, have, MPA_REPLY, &f, &need, &err);

		if (rc == 0)
			break;
		if (rc != -EAGAIN || need > sizeof(buf) || poll(&pf, 1, 2000) != 1)
			return false;
		ssize_t n = read(r->fd, buf + have, need - have);
		if (n <= 0)
			return false;
		have += (size_t)n;
	}
	if (mpa_initiator_complete(p, req, &f, &r->ag, &err) != 0)
		return false;
	iw_rx_init(&r->rx, r->ag.markers_rx, r->ag.crc, 0, raw_resolve, r, &raw_ops, r);
	for (uint32_t qn = 0; qn < 3; qn++) {
		REQUIRE(ddp_queue_init(&r->q[qn], qn, 4, 1) == 0);
		REQUIRE(ddp_rx_add_queue(&r->rx.ddp, &r->q[qn]) == 0);
		for (int i = 0; i < 4; i++)
			REQUIRE(ddp_queue_post(&r->q[qn], r->qbuf[qn][i], 256, NULL) == 0);
	}
	REQUIRE(iw_tx_init(&r->tx, r->ag.markers_tx, r->ag.crc, mpa_mulpdu(1448, r->ag.markers_tx),
			   raw_write, r) == 0);
	return true;
}

/* Read until a Terminate was decoded and the peer closed (2 s at most).
 * Returns true if the stream ended (EOF/RST) within the time. */
static bool raw_until_eof(struct raw *r)
{
	struct pollfd pf = { .fd = r->fd, .events = POLLIN };
	uint8_t buf[4096];
	struct xs_err err;
	bool rx_ok = true;

	for (;;) {
		if (poll(&pf, 1, 2000) != 1)
			return false;
		ssize_t n = read(r->fd, buf, sizeof(buf));
		if (n <= 0)
			return true;
		if (rx_ok && iw_rx_input(&r->rx, buf, (size_t)n, &err) < 0) {
			fprintf(stderr, "raw peer: stream error %u/%u/0x%02x\n", err.layer, err.etype,
				err.ecode);
			rx_ok = false;
		}
	}
}

/* An RDMA Write framed by hand: iw_tx refuses TOs that wrap. */
static int raw_write_any_to(struct raw *r, uint32_t stag, uint64_t to, uint8_t *data,
			    uint32_t len)
{
	struct ddp_hdr h = { .tagged = true, .last = true, .dv = DDP_VERSION,
			     .rsvdulp = rdmap_ctrl_encode(RDMAP_OP_WRITE), .stag = stag, .to = to };
	uint8_t hb[DDP_MAX_HDR_LEN];
	struct iovec ulp[2] = { { hb, ddp_hdr_encode(&h, hb) }, { data, len } };
	int rc = mpa_tx_frame(&r->tx.mpa, ulp, 2, &r->tx.frame);

	if (rc < 0)
		return rc;
	return raw_write(r, r->tx.frame.iov, r->tx.frame.iovcnt, r->tx.frame.wire_len);
}

static void raw_close(struct raw *r)
{
	close(r->fd);
	for (int qn = 0; qn < 3; qn++)
		ddp_queue_destroy(&r->q[qn]);
}

/* ---- remote errors -------------------------------------------------------- */

enum rop { R_WRITE, R_READ, R_SEND, R_SEND_INV };
enum rkey_kind { K_GOOD, K_BAD_INDEX, K_BAD_KEY };

struct rcase {
	const char *name;
	enum rop op;
	enum tmr mr; /* the target MR named */
	enum rkey_kind key;
	int64_t off; /* TO relative to the MR's base */
	bool wrap; /* TO near 2^64 */
	uint32_t len;
	unsigned s_recv; /* receives the target posted */
	enum ibv_wc_status st; /* the requester's own completion */
	uint8_t layer, etype, ecode; /* the Terminate */
};

#define L_RDMAP XS_LAYER_RDMAP
#define L_DDP XS_LAYER_DDP

static const struct rcase rcases[] = {
	{ "write unknown STag index", R_WRITE, T_RW, K_BAD_INDEX, 0, false, 64, NRECV,
	  IBV_WC_SUCCESS, L_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_INVALID_STAG },
	{ "write wrong STag key", R_WRITE, T_RW, K_BAD_KEY, 0, false, 64, NRECV, IBV_WC_SUCCESS,
	  L_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_INVALID_STAG },
	{ "write past the end", R_WRITE, T_RW, K_GOOD, TLEN - 32, false, 64, NRECV,
	  IBV_WC_SUCCESS, L_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_BASE_BOUNDS },
	{ "write below the base", R_WRITE, T_RW, K_GOOD, -16, false, 64, NRECV, IBV_WC_SUCCESS,
	  L_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_BASE_BOUNDS },
	{ "write TO wrap", R_WRITE, T_RW, K_GOOD, 0, true, 64, NRECV, IBV_WC_SUCCESS, L_DDP,
	  DDP_ETYPE_TAGGED, DDP_ECODE_T_TO_WRAP },
	{ "write without REMOTE_WRITE", R_WRITE, T_RO, K_GOOD, 0, false, 64, NRECV,
	  IBV_WC_SUCCESS, L_RDMAP, RDMAP_ETYPE_REMOTE_PROT, RDMAP_ECODE_ACCESS },
	{ "write to another PD", R_WRITE, T_PD2, K_GOOD, 0, false, 64, NRECV, IBV_WC_SUCCESS,
	  L_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_STAG_NOT_ASSOC },
	{ "read unknown STag", R_READ, T_RW, K_BAD_INDEX, 0, false, 64, NRECV,
	  IBV_WC_REM_ACCESS_ERR, L_RDMAP, RDMAP_ETYPE_REMOTE_PROT, RDMAP_ECODE_INVALID_STAG },
	{ "read wrong key", R_READ, T_RW, K_BAD_KEY, 0, false, 64, NRECV, IBV_WC_REM_ACCESS_ERR,
	  L_RDMAP, RDMAP_ETYPE_REMOTE_PROT, RDMAP_ECODE_INVALID_STAG },
	{ "read past the end", R_READ, T_RW, K_GOOD, TLEN - 8, false, 64, NRECV,
	  IBV_WC_REM_ACCESS_ERR, L_RDMAP, RDMAP_ETYPE_REMOTE_PROT, RDMAP_ECODE_BASE_BOUNDS },
	{ "read TO wrap", R_READ, T_RW, K_GOOD, 0, true, 64, NRECV, IBV_WC_REM_ACCESS_ERR,
	  L_RDMAP, RDMAP_ETYPE_REMOTE_PROT, RDMAP_ECODE_TO_WRAP },
	{ "read without REMOTE_READ", R_READ, T_WO, K_GOOD, 0, false, 64, NRECV,
	  IBV_WC_REM_ACCESS_ERR, L_RDMAP, RDMAP_ETYPE_REMOTE_PROT, RDMAP_ECODE_ACCESS },
	{ "read from another PD", R_READ, T_PD2, K_GOOD, 0, false, 64, NRECV,
	  IBV_WC_REM_ACCESS_ERR, L_RDMAP, RDMAP_ETYPE_REMOTE_PROT, RDMAP_ECODE_STAG_NOT_ASSOC },
	{ "send without a posted receive", R_SEND, T_RW, K_GOOD, 0, false, 16, 0, IBV_WC_SUCCESS,
	  L_DDP, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_NO_BUFFER },
	{ "send longer than the receive", R_SEND, T_RW, K_GOOD, 0, false, 300, NRECV,
	  IBV_WC_SUCCESS, L_DDP, DDP_ETYPE_UNTAGGED, DDP_ECODE_U_TOO_LONG },
	{ "send with invalidate, unknown STag", R_SEND_INV, T_RW, K_BAD_INDEX, 0, false, 16, NRECV,
	  IBV_WC_SUCCESS, L_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_STAG_CANNOT_INV },
	{ "send with invalidate, another PD's STag", R_SEND_INV, T_PD2, K_GOOD, 0, false, 16,
	  NRECV, IBV_WC_SUCCESS, L_RDMAP, RDMAP_ETYPE_REMOTE_PROT, RDMAP_ECODE_STAG_CANNOT_INV },
};

static uint32_t case_rkey(const struct rcase *k, const struct ep *s)
{
	uint32_t good = s->mr[k->mr]->rkey;

	switch (k->key) {
	case K_BAD_INDEX:
		return 0xfffffe00u | (good & 0xff);
	case K_BAD_KEY:
		return good ^ 0x5a;
	default:
		return good;
	}
}

static uint64_t case_to(const struct rcase *k, const struct ep *s)
{
	if (k->wrap)
		return UINT64_MAX - 15;
	return (uint64_t)(uintptr_t)s->mr[k->mr]->addr + (uint64_t)k->off;
}

/* The Terminate names the offending message: its DDP header (and for a
 * Read Request the RDMAP header). */
static void check_term_headers(const struct rcase *k, const struct rdmap_term *t, uint32_t rkey,
			       uint64_t to)
{
	struct ddp_hdr h;
	struct xs_err e;

	CHECK(t->d);
	if (!t->d || ddp_hdr_decode(t->ddp_hdr, t->ddp_hdr_len, &h, &e) != 0) {
		xs_test_failures++;
		return;
	}
	if (k->op == R_WRITE) {
		CHECK(h.tagged && h.stag == rkey && h.to == to);
	} else if (k->op == R_READ) {
		struct rdmap_read_req rr;

		CHECK(!h.tagged && h.qn == RDMAP_QN_READ_REQ);
		CHECK(t->r && rdmap_read_req_decode(t->rdmap_hdr, t->rdmap_hdr_len, &rr, &e) == 0 &&
		      rr.src_stag == rkey && rr.src_to == to);
	} else {
		CHECK(!h.tagged && h.qn == RDMAP_QN_SEND);
	}
}

/* The raw peer commits the offence; the library target answers with a
 * Terminate, fails its QP and closes. */
static void remote_error_raw(const struct rcase *k)
{
	struct mpa_prefs p;
	struct mpa_frame req;
	struct raw r;
	struct ep s;
	uint8_t data[512];
	uint32_t rkey;
	uint64_t to;
	int rc = -1;

	memset(data, 0xc3, sizeof(data));
	raw_connect(&r, &p, &req);
	if (!server_accept(&s, 16, k->s_recv) || !raw_established(&r, &p, &req)) {
		fprintf(stderr, "%s: raw connection failed\n", k->name);
		xs_test_failures++;
		goto out;
	}
	rkey = case_rkey(k, &s);
	to = case_to(k, &s);
	struct iovec iov = { data, k->len };
	switch (k->op) {
	case R_WRITE:
		if (k->wrap)
			rc = raw_write_any_to(&r, rkey, to, data, k->len);
		else
			rc = iw_tx_tagged(&r.tx, RDMAP_OP_WRITE, rkey, to, &iov, 1);
		break;
	case R_READ: {
		struct rdmap_read_req rr = { .sink_stag = 0x4242, .sink_to = 0x1000, .size = k->len,
					     .src_stag = rkey, .src_to = to };
		rc = iw_tx_read_req(&r.tx, &rr);
		break;
	}
	case R_SEND:
		rc = iw_tx_send(&r.tx, RDMAP_OP_SEND, 0, &iov, 1);
		break;
	case R_SEND_INV:
		rc = iw_tx_send(&r.tx, RDMAP_OP_SEND_INV, rkey, &iov, 1);
		break;
	}
	CHECK(rc == 0);
	CHECK(raw_until_eof(&r)); /* the target closes after its Terminate */
	if (!r.got_term) {
		fprintf(stderr, "%s: no Terminate received\n", k->name);
		xs_test_failures++;
	} else {
		if (r.term.cause.layer != k->layer || r.term.cause.etype != k->etype ||
		    r.term.cause.ecode != k->ecode) {
			fprintf(stderr, "%s: Terminate %u/%u/0x%02x, wanted %u/%u/0x%02x\n", k->name,
				r.term.cause.layer, r.term.cause.etype, r.term.cause.ecode, k->layer,
				k->etype, k->ecode);
			xs_test_failures++;
		}
		check_term_headers(k, &r.term, rkey, to);
	}
	CHECK(wait_state(s.id->qp, IBV_QPS_ERR, 1000));
	struct rdma_cm_event *ev = cm_expect(lch, RDMA_CM_EVENT_DISCONNECTED, 2000, k->name);
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK(all_bytes(s.mem, 2 * GUARD + TLEN, FILL_T));
	int na, nb;
	drain_async(s.id->qp, &na, NULL, &nb);
	CHECK_EQ_U(na, 1);
out:
	free_ep(&s);
	raw_close(&r);
}

/* Library to library: completions, flush, states, events, memory. */
static void remote_error_verbs(const struct rcase *k)
{
	struct ibv_wc wc[MAXWC];
	struct ep c, s;
	uint8_t *sink;
	int n, na, nb;

	if (!pair_up(&c, &s, 16, NRECV, k->s_recv)) {
		fprintf(stderr, "%s: connection failed\n", k->name);
		xs_test_failures++;
		goto out;
	}
	uint32_t rkey = case_rkey(k, &s);
	uint64_t to = case_to(k, &s);
	/* source / sink: the client's own MR, second half of it */
	sink = c.mem + GUARD + TLEN / 2;
	struct ibv_sge sg = { .addr = (uintptr_t)sink, .length = k->len, .lkey = c.mr[T_RW]->lkey };
	enum ibv_wr_opcode op = k->op == R_WRITE ? IBV_WR_RDMA_WRITE
				: k->op == R_READ ? IBV_WR_RDMA_READ
				: k->op == R_SEND ? IBV_WR_SEND
						  : IBV_WR_SEND_WITH_INV;
	if (k->len > TLEN / 2)
		sg.addr = (uintptr_t)(c.mem + GUARD);
	if (k->op == R_WRITE && k->wrap) {
		/* the requester cannot segment it: refused, the QP unharmed */
		struct ibv_send_wr wr = { .wr_id = 1, .opcode = op, .sg_list = &sg, .num_sge = 1,
					  .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;

		wr.wr.rdma.rkey = rkey;
		wr.wr.rdma.remote_addr = to;
		CHECK(ibv_post_send(c.id->qp, &wr, &bad) == EINVAL && bad == &wr);
		CHECK(qp_state(c.id->qp) == IBV_QPS_RTS && cq_empty(c.scq));
		CHECK(rdma_disconnect(c.id) == 0);
		struct rdma_cm_event *ev = cm_expect(c.ch, RDMA_CM_EVENT_DISCONNECTED, 2000, k->name);
		if (ev)
			rdma_ack_cm_event(ev);
		ev = cm_expect(lch, RDMA_CM_EVENT_DISCONNECTED, 2000, k->name);
		if (ev)
			rdma_ack_cm_event(ev);
		goto out;
	}
	CHECK(post1(c.id->qp, 1, op, &sg, 1, rkey, to, rkey) == 0);
	/* a good Read right behind it: the target is in ERR when it arrives */
	struct ibv_sge sg2 = { .addr = (uintptr_t)(c.mem + GUARD), .length = 32,
			       .lkey = c.mr[T_RW]->lkey };
	CHECK(post1(c.id->qp, 2, IBV_WR_RDMA_READ, &sg2, 1, s.mr[T_RW]->rkey,
		    (uintptr_t)s.mr[T_RW]->addr, 0) == 0);

	/* the requester: its WR, then the Read flushed */
	n = poll_n(c.scq, wc, 2, 2000);
	CHECK_EQ_U(n, 2);
	if (n >= 1) {
		CHECK_EQ_U(wc[0].wr_id, 1);
		if (wc[0].status != k->st)
			fprintf(stderr, "%s: requester status %s, wanted %s\n", k->name,
				ibv_wc_status_str(wc[0].status), ibv_wc_status_str(k->st));
		CHECK_EQ_U(wc[0].status, k->st);
		CHECK_EQ_U(wc[0].qp_num, c.id->qp->qp_num);
	}
	if (n >= 2) {
		CHECK_EQ_U(wc[1].wr_id, 2);
		CHECK_EQ_U(wc[1].status, IBV_WC_WR_FLUSH_ERR);
		CHECK_EQ_U(wc[1].opcode, IBV_WC_RDMA_READ);
	}
	CHECK(wait_state(c.id->qp, IBV_QPS_ERR, 1000));
	CHECK(wait_state(s.id->qp, IBV_QPS_ERR, 1000));
	/* the requester's receives flushed in order */
	n = poll_n(c.rcq, wc, NRECV, 1000);
	CHECK_EQ_U(n, NRECV);
	for (int i = 0; i < n; i++)
		CHECK(wc[i].wr_id == 200u + (unsigned)i && wc[i].status == IBV_WC_WR_FLUSH_ERR);
	/* the target's: a Send with a bad invalidate consumed the first */
	unsigned first = 0;
	n = poll_n(s.rcq, wc, (int)k->s_recv, 1000);
	CHECK_EQ_U(n, k->s_recv);
	if (k->op == R_SEND_INV && n > 0) {
		CHECK(wc[0].wr_id == 100 && wc[0].status == IBV_WC_REM_INV_REQ_ERR &&
		      wc[0].opcode == IBV_WC_RECV && !(wc[0].wc_flags & IBV_WC_WITH_INV));
		first = 1;
	}
	for (int i = (int)first; i < n; i++)
		CHECK(wc[i].wr_id == 100u + (unsigned)i && wc[i].status == IBV_WC_WR_FLUSH_ERR);
	/* the target's MR stays valid and untouched */
	CHECK(all_bytes(s.mem, 2 * GUARD + TLEN, FILL_T));
	if (k->op == R_READ)
		CHECK(all_bytes(c.mem + GUARD, TLEN, FILL_C));

	/* WRs posted in ERR complete flushed at once, on both sides */
	CHECK(post1(c.id->qp, 3, IBV_WR_SEND, &sg2, 1, 0, 0, 0) == 0);
	CHECK(post1(s.id->qp, 4, IBV_WR_RDMA_WRITE, &sg2, 0, 1, 0, 0) == 0);
	CHECK(post_recvs(&c, 1, 300) == 0);
	CHECK(post_recvs(&s, 1, 400) == 0);
	CHECK(poll_n(c.scq, wc, 1, 100) == 1 && wc[0].wr_id == 3 &&
	      wc[0].status == IBV_WC_WR_FLUSH_ERR && wc[0].opcode == IBV_WC_SEND);
	CHECK(poll_n(s.scq, wc, 1, 100) == 1 && wc[0].wr_id == 4 &&
	      wc[0].status == IBV_WC_WR_FLUSH_ERR && wc[0].opcode == IBV_WC_RDMA_WRITE);
	CHECK(poll_n(c.rcq, wc, 1, 100) == 1 && wc[0].wr_id == 300 &&
	      wc[0].status == IBV_WC_WR_FLUSH_ERR);
	CHECK(poll_n(s.rcq, wc, 1, 100) == 1 && wc[0].wr_id == 400 &&
	      wc[0].status == IBV_WC_WR_FLUSH_ERR);

	struct rdma_cm_event *ev = cm_expect(c.ch, RDMA_CM_EVENT_DISCONNECTED, 2000, k->name);
	if (ev)
		rdma_ack_cm_event(ev);
	ev = cm_expect(lch, RDMA_CM_EVENT_DISCONNECTED, 2000, k->name);
	if (ev)
		rdma_ack_cm_event(ev);
	/* the QP's asynchronous error, once on each side */
	drain_async(c.id->qp, &na, s.id->qp, &nb);
	if (na != 1 || nb != 1)
		fprintf(stderr, "%s: QP_FATAL requester %d target %d\n", k->name, na, nb);
	CHECK(na == 1 && nb == 1);
	CHECK(cq_empty(c.scq) && cq_empty(c.rcq) && cq_empty(s.scq) && cq_empty(s.rcq));
	CHECK(!cm_readable(c.ch, 0) && !cm_readable(lch, 0));
out:
	free_ep(&s);
	free_ep(&c);
}

static void test_remote_errors(void)
{
	for (size_t i = 0; i < sizeof(rcases) / sizeof(rcases[0]); i++) {
		int before = xs_test_failures;

		remote_error_raw(&rcases[i]);
		remote_error_verbs(&rcases[i]);
		printf("%-45s %s\n", rcases[i].name, xs_test_failures == before ? "ok" : "FAILED");
	}
}

/* ---- modify_qp(ERR) with WRs outstanding -------------------------------------- */

/* A raw peer that never answers: the library QP's Reads stay outstanding. */
static void test_modify_err_flush(void)
{
	struct ibv_wc wc[MAXWC];
	struct mpa_prefs p;
	struct mpa_frame req;
	struct raw r;
	struct ep s;
	int n;

	raw_connect(&r, &p, &req);
	if (!server_accept(&s, 16, 6) || !raw_established(&r, &p, &req)) {
		xs_test_failures++;
		goto out;
	}
	struct ibv_sge sg = { .addr = (uintptr_t)(s.mem + GUARD), .length = 64,
			      .lkey = s.mr[T_RW]->lkey };
	for (int i = 0; i < 3; i++) /* ORD 4: none of them waits */
		CHECK(post1(s.id->qp, 10 + (unsigned)i, IBV_WR_RDMA_READ, &sg, 1, 0x1234, 0x10, 0) == 0);
	usleep(20000);
	CHECK(cq_empty(s.scq) && cq_empty(s.rcq));
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	CHECK(ibv_modify_qp(s.id->qp, &a, IBV_QP_STATE) == 0);
	CHECK_EQ_U(qp_state(s.id->qp), IBV_QPS_ERR);
	n = poll_n(s.scq, wc, 3, 500);
	CHECK_EQ_U(n, 3);
	for (int i = 0; i < n; i++)
		CHECK(wc[i].wr_id == 10u + (unsigned)i && wc[i].status == IBV_WC_WR_FLUSH_ERR &&
		      wc[i].opcode == IBV_WC_RDMA_READ && wc[i].qp_num == s.id->qp->qp_num);
	n = poll_n(s.rcq, wc, 6, 500);
	CHECK_EQ_U(n, 6);
	for (int i = 0; i < n; i++)
		CHECK(wc[i].wr_id == 100u + (unsigned)i && wc[i].status == IBV_WC_WR_FLUSH_ERR &&
		      wc[i].opcode == IBV_WC_RECV);
	CHECK(cq_empty(s.scq) && cq_empty(s.rcq));
	/* ERR -> ERR is allowed and flushes nothing twice */
	CHECK(ibv_modify_qp(s.id->qp, &a, IBV_QP_STATE) == 0);
	CHECK(cq_empty(s.scq) && cq_empty(s.rcq));
	/* the connection goes on until disconnected */
	CHECK(rdma_disconnect(s.id) == 0);
	struct rdma_cm_event *ev = cm_expect(lch, RDMA_CM_EVENT_DISCONNECTED, 2000, "modify err");
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK(raw_until_eof(&r));
	CHECK(!r.got_term && r.nreadreq == 3);
out:
	free_ep(&s);
	raw_close(&r);
}

/* ---- rdma_disconnect with WRs outstanding ------------------------------------------ */

#define BIG (1u << 20)
#define NBIG 24

struct writer {
	struct ep *c;
	uint32_t rkey;
	uint64_t to;
	struct ibv_mr *mr;
	uint8_t *buf;
	int rc;
};

static void *write_many(void *arg)
{
	struct writer *w = arg;
	struct ibv_sge sg = { .addr = (uintptr_t)w->buf, .length = BIG, .lkey = w->mr->lkey };
	struct ibv_send_wr wr[NBIG], *bad;

	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < NBIG; i++) {
		wr[i].wr_id = 1000 + (unsigned)i;
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].sg_list = &sg;
		wr[i].num_sge = 1;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].wr.rdma.rkey = w->rkey;
		wr[i].wr.rdma.remote_addr = w->to;
		wr[i].next = i + 1 < NBIG ? &wr[i + 1] : NULL;
	}
	w->rc = ibv_post_send(w->c->id->qp, wr, &bad);
	return NULL;
}

static void count_done(struct ibv_cq *cq, int want, int ms, int *ok, int *flushed, int *other)
{
	struct ibv_wc wc[MAXWC];
	double end = now_ms() + ms;

	*ok = *flushed = *other = 0;
	while (*ok + *flushed + *other < want && now_ms() < end) {
		int n = ibv_poll_cq(cq, MAXWC, wc);

		for (int i = 0; i < n; i++) {
			if (wc[i].status == IBV_WC_SUCCESS)
				(*ok)++;
			else if (wc[i].status == IBV_WC_WR_FLUSH_ERR)
				(*flushed)++;
			else
				(*other)++;
		}
		if (n == 0)
			usleep(500);
	}
}

static void test_disconnect_outstanding(void)
{
	struct ep c, s;
	struct writer w;
	pthread_t t;
	int ok, fl, other;

	if (!pair_up(&c, &s, 128, 100, 100)) {
		xs_test_failures++;
		goto out;
	}
	/* the server's big MR to write into, the client's source */
	uint8_t *dst = malloc(BIG), *src = malloc(BIG);
	REQUIRE(dst && src);
	memset(src, 7, BIG);
	struct ibv_mr *dmr = ibv_reg_mr(s.id->pd, dst, BIG,
					IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
						IBV_ACCESS_REMOTE_READ);
	w.mr = ibv_reg_mr(c.id->pd, src, BIG, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(dmr && w.mr);
	w.c = &c;
	w.rkey = dmr->rkey;
	w.to = (uintptr_t)dst;
	w.buf = src;
	w.rc = -1;
	/* Reads in flight from both sides too */
	struct ibv_sge rs = { .addr = (uintptr_t)src, .length = 65536, .lkey = w.mr->lkey };
	struct ibv_sge rs2 = { .addr = (uintptr_t)(s.mem + GUARD), .length = TLEN,
			       .lkey = s.mr[T_RW]->lkey };
	REQUIRE(pthread_create(&t, NULL, write_many, &w) == 0);
	CHECK(post1(s.id->qp, 2000, IBV_WR_RDMA_READ, &rs2, 1, c.mr[T_RW]->rkey,
		    (uintptr_t)c.mr[T_RW]->addr, 0) == 0);
	usleep(3000);
	CHECK(rdma_disconnect(c.id) == 0);
	double t0 = now_ms();
	pthread_join(t, NULL);
	CHECK(w.rc == 0);
	/* a Read posted after the disconnect flushes at once */
	CHECK(post1(c.id->qp, 3000, IBV_WR_RDMA_READ, &rs, 1, dmr->rkey, (uintptr_t)dst, 0) == 0);
	count_done(c.scq, NBIG + 1, 3000, &ok, &fl, &other);
	printf("disconnect: client writes %d ok, %d flushed, %d other (%.0f ms)\n", ok, fl, other,
	       now_ms() - t0);
	CHECK(ok + fl == NBIG + 1 && other == 0 && fl >= 1);
	count_done(c.rcq, 100, 2000, &ok, &fl, &other);
	CHECK(ok == 0 && fl == 100 && other == 0);
	count_done(s.scq, 1, 2000, &ok, &fl, &other);
	CHECK(ok + fl == 1 && other == 0);
	count_done(s.rcq, 100, 2000, &ok, &fl, &other);
	CHECK(ok == 0 && fl == 100 && other == 0);
	struct rdma_cm_event *ev = cm_expect(c.ch, RDMA_CM_EVENT_DISCONNECTED, 2000, "disc client");
	if (ev)
		rdma_ack_cm_event(ev);
	ev = cm_expect(lch, RDMA_CM_EVENT_DISCONNECTED, 2000, "disc server");
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK(qp_state(c.id->qp) == IBV_QPS_ERR && qp_state(s.id->qp) == IBV_QPS_ERR);
	CHECK(ibv_dereg_mr(dmr) == 0);
	CHECK(ibv_dereg_mr(w.mr) == 0);
	free(dst);
	free(src);
	int na, nb;
	drain_async(c.id->qp, &na, s.id->qp, &nb);
	CHECK(na == 0 && nb == 0); /* a graceful close is no QP error */
out:
	free_ep(&s);
	free_ep(&c);
}

/* A Terminate the target must send while its own application thread is
 * in the middle of big Writes the other way (one engine thread serves both
 * ends here): no deadlock, everything completes, both sides disconnect. */
static void test_terminate_while_sending(void)
{
	struct ep c, s;
	struct writer w;
	pthread_t t;
	struct timespec dl;
	int ok, fl, other;

	if (!pair_up(&c, &s, 64, 0, 0)) {
		xs_test_failures++;
		goto out;
	}
	uint8_t *dst = malloc(BIG), *src = malloc(BIG);
	REQUIRE(dst && src);
	memset(src, 9, BIG);
	struct ibv_mr *dmr = ibv_reg_mr(c.id->pd, dst, BIG,
					IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	w.mr = ibv_reg_mr(s.id->pd, src, BIG, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(dmr && w.mr);
	w.c = &s; /* the target writes to the requester */
	w.rkey = dmr->rkey;
	w.to = (uintptr_t)dst;
	w.buf = src;
	w.rc = -1;
	REQUIRE(pthread_create(&t, NULL, write_many, &w) == 0);
	usleep(2000);
	struct ibv_sge sg = { .addr = (uintptr_t)(c.mem + GUARD), .length = 64,
			      .lkey = c.mr[T_RW]->lkey };
	CHECK(post1(c.id->qp, 1, IBV_WR_RDMA_READ, &sg, 1, 0xfffffe00, 0, 0) == 0);
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 5;
	if (pthread_timedjoin_np(t, NULL, &dl) != 0) {
		fprintf(stderr, "terminate while sending: post_send still blocked after 5 s\n");
		_exit(XS_TEST_FAIL); /* a hang: nothing can be cleaned up */
	}
	CHECK(w.rc == 0);
	struct ibv_wc wc;
	CHECK(poll_n(c.scq, &wc, 1, 2000) == 1 && wc.wr_id == 1 &&
	      (wc.status == IBV_WC_REM_ACCESS_ERR || wc.status == IBV_WC_WR_FLUSH_ERR));
	count_done(s.scq, NBIG, 2000, &ok, &fl, &other);
	printf("terminate while sending: Read %s, target writes %d ok %d flushed\n",
	       ibv_wc_status_str(wc.status), ok, fl);
	CHECK(ok + fl == NBIG && other == 0);
	struct rdma_cm_event *ev = cm_expect(c.ch, RDMA_CM_EVENT_DISCONNECTED, 2000, "tws client");
	if (ev)
		rdma_ack_cm_event(ev);
	ev = cm_expect(lch, RDMA_CM_EVENT_DISCONNECTED, 2000, "tws server");
	if (ev)
		rdma_ack_cm_event(ev);
	int na, nb;
	drain_async(c.id->qp, &na, s.id->qp, &nb);
	CHECK(ibv_dereg_mr(dmr) == 0);
	CHECK(ibv_dereg_mr(w.mr) == 0);
	free(dst);
	free(src);
out:
	free_ep(&s);
	free_ep(&c);
}

/* ---- a peer SIGKILLed mid-transfer ---------------------------------------------------- */

static void *killer(void *arg)
{
	pid_t pid = *(pid_t *)arg;

	usleep(300000);
	kill(pid, SIGKILL);
	return NULL;
}

static void test_peer_killed(void)
{
	struct mpa_prefs p;
	struct mpa_frame req;
	struct raw r;
	struct ep s;
	int sv[2], status = 0, ok, fl, other;
	pid_t pid;
	pthread_t t;
	char ready;

	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		/* the child: a raw peer that connects and then reads nothing */
		close(sv[0]);
		raw_connect(&r, &p, &req);
		if (!raw_established(&r, &p, &req))
			_exit(1);
		if (write(sv[1], "r", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(sv[1]);
	if (!server_accept(&s, 64, 50)) {
		xs_test_failures++;
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		close(sv[0]);
		free_ep(&s);
		return;
	}
	struct pollfd pf = { .fd = sv[0], .events = POLLIN };
	CHECK(poll(&pf, 1, 3000) == 1 && read(sv[0], &ready, 1) == 1);
	close(sv[0]);

	uint8_t *src = calloc(1, BIG);
	REQUIRE(src);
	struct ibv_mr *mr = ibv_reg_mr(s.id->pd, src, BIG, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(mr);
	struct ibv_sge rsg = { .addr = (uintptr_t)src, .length = 4096, .lkey = mr->lkey };
	for (int i = 0; i < 4; i++) /* never answered */
		CHECK(post1(s.id->qp, 10 + (unsigned)i, IBV_WR_RDMA_READ, &rsg, 1, 0x4400, 0, 0) == 0);
	/* Writes until the socket is full; the kill unblocks post_send */
	REQUIRE(pthread_create(&t, NULL, killer, &pid) == 0);
	struct ibv_sge wsg = { .addr = (uintptr_t)src, .length = BIG, .lkey = mr->lkey };
	int nw = 0;
	double t0 = now_ms(), tkill = 0;
	for (; nw < 40; nw++) {
		CHECK(post1(s.id->qp, 100 + (unsigned)nw, IBV_WR_RDMA_WRITE, &wsg, 1, 0x4400, 0, 0) == 0);
		if (qp_state(s.id->qp) == IBV_QPS_ERR) {
			nw++;
			break;
		}
	}
	pthread_join(t, NULL);
	REQUIRE(waitpid(pid, &status, 0) == pid);
	tkill = now_ms();
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	count_done(s.scq, 4 + nw, 1000, &ok, &fl, &other);
	printf("peer killed after %.0f ms: %d Writes posted, %d ok, %d flushed, %d other, "
	       "in %.0f ms after the kill\n", tkill - t0, nw, ok, fl, other, now_ms() - tkill);
	CHECK(ok + fl == 4 + nw && other == 0 && fl >= 4);
	count_done(s.rcq, 50, 1000, &ok, &fl, &other);
	CHECK(ok == 0 && fl == 50 && other == 0);
	CHECK(now_ms() - tkill < 1000);
	struct rdma_cm_event *ev = cm_expect(lch, RDMA_CM_EVENT_DISCONNECTED, 1000, "peer killed");
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK(qp_state(s.id->qp) == IBV_QPS_ERR);
	int na, nb;
	drain_async(s.id->qp, &na, NULL, &nb);
	CHECK(ibv_dereg_mr(mr) == 0);
	free(src);
	free_ep(&s);
}

/* ---- invalid application input -------------------------------------------------------- */

static void test_bad_input(void)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge sg[3];
	struct ibv_wc wc[8];
	struct ep c, s;
	int na, nb;

	if (!pair_up(&c, &s, 4, 0, 4)) {
		xs_test_failures++;
		goto out;
	}
	struct ibv_qp *qp = c.id->qp;
	uint8_t *b = c.mem + GUARD;
	for (int i = 0; i < 3; i++)
		sg[i] = (struct ibv_sge){ .addr = (uintptr_t)b, .length = 8, .lkey = c.mr[T_RW]->lkey };

	/* verbs errnos: the WR is refused, the QP is unharmed */
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1;
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = sg;
	wr.num_sge = 3; /* max_send_sge is 2 */
	wr.send_flags = IBV_SEND_SIGNALED;
	bad = NULL;
	CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL && bad == &wr);
	wr.num_sge = -1;
	CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL && bad == &wr);
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	sg[0].length = 300; /* beyond max_inline_data */
	CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL && bad == &wr);
	sg[0].length = 8;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL && bad == &wr);
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL && bad == &wr);
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL && bad == &wr);
	wr.opcode = IBV_WR_RDMA_READ; /* max_sge_rd is 1 */
	wr.num_sge = 2;
	CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL && bad == &wr);
	/* a list stops at the bad WR; the good one before it went */
	struct ibv_send_wr w2 = wr;
	wr.opcode = IBV_WR_SEND;
	wr.num_sge = 1;
	wr.next = &w2;
	w2.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	w2.wr_id = 2;
	CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL && bad == &w2);
	wr.next = NULL;
	CHECK(poll_n(c.scq, wc, 1, 1000) == 1 && wc[0].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS);
	CHECK(poll_n(s.rcq, wc, 1, 1000) == 1 && wc[0].wr_id == 100 &&
	      wc[0].status == IBV_WC_SUCCESS && wc[0].byte_len == 8);
	/* receives: too many SGEs, an unregistered lkey, more than the queue holds */
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 50;
	rwr.sg_list = sg;
	rwr.num_sge = 3;
	CHECK(ibv_post_recv(qp, &rwr, &rbad) == EINVAL && rbad == &rwr);
	rwr.num_sge = 1;
	sg[0].lkey = 0xffffff00;
	CHECK(ibv_post_recv(qp, &rwr, &rbad) == EINVAL && rbad == &rwr);
	sg[0].lkey = c.mr[T_RW]->lkey;
	CHECK(post_recvs(&c, 4, 200) == 0);
	CHECK(post_recvs(&c, 1, 204) == ENOMEM);
	CHECK(qp_state(qp) == IBV_QPS_RTS);
	CHECK(cq_empty(c.scq) && cq_empty(c.rcq));
	CHECK(drain_async(qp, &na, NULL, &nb) == 0);

	/* a local protection error completes the WR with LOC_PROT_ERR and
	 * fails the QP (rdma-core providers do the same) */
	sg[0].length = TLEN + 1; /* beyond the MR */
	wr.wr_id = 5;
	CHECK(ibv_post_send(qp, &wr, &bad) == 0);
	CHECK(poll_n(c.scq, wc, 1, 100) == 1 && wc[0].wr_id == 5 &&
	      wc[0].status == IBV_WC_LOC_PROT_ERR);
	CHECK(qp_state(qp) == IBV_QPS_ERR);
	CHECK(poll_n(c.rcq, wc, 4, 500) == 4 && wc[0].wr_id == 200 && wc[3].wr_id == 203 &&
	      wc[3].status == IBV_WC_WR_FLUSH_ERR);
	struct rdma_cm_event *ev;
	CHECK(rdma_disconnect(c.id) == 0);
	ev = cm_expect(c.ch, RDMA_CM_EVENT_DISCONNECTED, 2000, "bad input client");
	if (ev)
		rdma_ack_cm_event(ev);
	ev = cm_expect(lch, RDMA_CM_EVENT_DISCONNECTED, 2000, "bad input server");
	if (ev)
		rdma_ack_cm_event(ev);
	free_ep(&s);
	free_ep(&c);

	/* an unregistered lkey on a Send, and on a Read's sink */
	for (int k = 0; k < 2; k++) {
		if (!pair_up(&c, &s, 4, 0, 4)) {
			xs_test_failures++;
			goto out;
		}
		sg[0] = (struct ibv_sge){ .addr = (uintptr_t)(c.mem + GUARD), .length = 8,
					  .lkey = c.mr[T_RW]->lkey ^ 0x80 };
		CHECK(post1(c.id->qp, 6, k ? IBV_WR_RDMA_READ : IBV_WR_SEND, sg, 1,
			    s.mr[T_RW]->rkey, (uintptr_t)s.mr[T_RW]->addr, 0) == 0);
		CHECK(poll_n(c.scq, wc, 1, 100) == 1 && wc[0].wr_id == 6 &&
		      wc[0].status == IBV_WC_LOC_PROT_ERR &&
		      wc[0].opcode == (k ? IBV_WC_RDMA_READ : IBV_WC_SEND));
		CHECK(qp_state(c.id->qp) == IBV_QPS_ERR);
		/* nothing reached the target */
		usleep(20000);
		CHECK(cq_empty(s.rcq) && qp_state(s.id->qp) == IBV_QPS_RTS);
		CHECK(rdma_disconnect(c.id) == 0);
		ev = cm_expect(c.ch, RDMA_CM_EVENT_DISCONNECTED, 2000, "lkey client");
		if (ev)
			rdma_ack_cm_event(ev);
		ev = cm_expect(lch, RDMA_CM_EVENT_DISCONNECTED, 2000, "lkey server");
		if (ev)
			rdma_ack_cm_event(ev);
		drain_async(c.id->qp, &na, s.id->qp, &nb);
		free_ep(&s);
		free_ep(&c);
	}
out:
	free_ep(&s);
	free_ep(&c);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	lport = cm_listen(&lch, &lid);
	vctx = lid->verbs;
	REQUIRE(vctx);
	REQUIRE(fcntl(vctx->async_fd, F_SETFL, fcntl(vctx->async_fd, F_GETFL) | O_NONBLOCK) == 0);

	test_remote_errors();
	test_modify_err_flush();
	printf("modify_qp(ERR) flush: %s\n", xs_test_failures ? "(failures above)" : "ok");
	test_disconnect_outstanding();
	test_terminate_while_sending();
	test_peer_killed();
	test_bad_input();

	CHECK(rdma_destroy_id(lid) == 0);
	rdma_destroy_event_channel(lch);
	return xs_test_result();
}
