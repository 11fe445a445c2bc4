/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
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
 * Then: modify_qp(ERR) flushing in order, send queue completions in WR
 * order (Sends behind a Read), rdma_disconnect with WRs
 * outstanding, a SIGKILLed peer, and invalid application input.
 *
 * All of it twice (issue 29): with the defaults, where two xsocks agree on
 * RFC 7306, then again as a siw-compatible xsock (XSOCK_RDMAP_EXT=0), this
 * program re-run.  Raw peers never announce RFC 7306: only the library to
 * library connections differ.  Each run first proves which it got (the
 * statistics file's agreement, Send with Immediate accepted or refused). */
#include "config.h"

#include "tests/test-verbs-util.h"
#include "verbs/xs_priv_abi.h"

static bool ext_mode; /* this run's library pairs agree on RFC 7306 */

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

	if (!raw_pair(&r, &p, &req, &s, 16, 6))
		goto out;
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

/* ---- send queue completion order ------------------------------------------------- */

/* Completions keep WR order on a send queue (verbs; libfabric's verbs
 * provider pops its own WR list per completion and corrupts it otherwise):
 * Sends posted behind an RDMA Read complete after it, here never (the raw
 * peer does not answer) until modify_qp(ERR) flushes all in order, the
 * successful unsignaled Send with no completion.  Then over a real pair:
 * Read, Send, Write complete in that order. */
static void test_sq_order(void)
{
	struct ibv_wc wc[MAXWC];
	struct mpa_prefs p;
	struct mpa_frame req;
	struct raw r;
	struct ep s, c;
	int n;

	if (!raw_pair(&r, &p, &req, &s, 16, 2))
		goto out;
	struct ibv_sge sg = { .addr = (uintptr_t)(s.mem + GUARD), .length = 64,
			      .lkey = s.mr[T_RW]->lkey };
	struct ibv_send_wr quiet = { .wr_id = 12, .sg_list = &sg, .num_sge = 1,
				     .opcode = IBV_WR_SEND }, *bad;
	CHECK(post1(s.id->qp, 10, IBV_WR_RDMA_READ, &sg, 1, 0x1234, 0x10, 0) == 0);
	CHECK(post1(s.id->qp, 11, IBV_WR_SEND, &sg, 1, 0, 0, 0) == 0);
	CHECK(ibv_post_send(s.id->qp, &quiet, &bad) == 0);
	CHECK(post1(s.id->qp, 13, IBV_WR_SEND, &sg, 1, 0, 0, 0) == 0);
	usleep(20000);
	CHECK(cq_empty(s.scq)); /* the Sends wait behind the Read */
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	CHECK(ibv_modify_qp(s.id->qp, &a, IBV_QP_STATE) == 0);
	n = poll_n(s.scq, wc, 3, 500);
	CHECK_EQ_U(n, 3);
	if (n == 3) {
		CHECK(wc[0].wr_id == 10 && wc[0].opcode == IBV_WC_RDMA_READ);
		CHECK(wc[1].wr_id == 11 && wc[1].opcode == IBV_WC_SEND);
		CHECK(wc[2].wr_id == 13 && wc[2].opcode == IBV_WC_SEND);
		for (int i = 0; i < n; i++)
			CHECK(wc[i].status == IBV_WC_WR_FLUSH_ERR);
	}
	CHECK(cq_empty(s.scq));
	CHECK_EQ_U(poll_n(s.rcq, wc, 2, 500), 2);
	CHECK(rdma_disconnect(s.id) == 0);
	struct rdma_cm_event *ev = cm_expect(lch, RDMA_CM_EVENT_DISCONNECTED, 2000, "sq order");
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK(raw_until_eof(&r));
	CHECK(!r.got_term && r.nreadreq == 1 && r.nsend == 3);
out:
	free_ep(&s);
	raw_close(&r);

	if (!pair_up(&c, &s, 16, 0, 4)) {
		xs_test_failures++;
		goto out2;
	}
	/* the Read's target and what the Send and Write carry do not overlap:
	 * the Send goes out while the Read's Response may be landing (TSan) */
	struct ibv_sge rsg = { .addr = (uintptr_t)(c.mem + GUARD), .length = TLEN / 2,
			       .lkey = c.mr[T_RW]->lkey };
	struct ibv_sge ssg = { .addr = (uintptr_t)(c.mem + GUARD + TLEN / 2), .length = 64,
			       .lkey = c.mr[T_RW]->lkey };
	for (int round = 0; round < 20; round++) {
		CHECK(post1(c.id->qp, 20, IBV_WR_RDMA_READ, &rsg, 1, s.mr[T_RW]->rkey,
			    (uintptr_t)s.mr[T_RW]->addr, 0) == 0);
		CHECK(post1(c.id->qp, 21, IBV_WR_SEND, &ssg, 1, 0, 0, 0) == 0);
		CHECK(post1(c.id->qp, 22, IBV_WR_RDMA_WRITE, &ssg, 1, s.mr[T_RW]->rkey,
			    (uintptr_t)s.mr[T_RW]->addr + TLEN / 2, 0) == 0);
		n = poll_n(c.scq, wc, 3, 2000);
		CHECK_EQ_U(n, 3);
		for (int i = 0; i < n; i++)
			CHECK(wc[i].wr_id == 20u + (unsigned)i && wc[i].status == IBV_WC_SUCCESS);
		CHECK_EQ_U(poll_n(s.rcq, wc, 1, 2000), 1);
		CHECK(post_recvs(&s, 1, 100) == 0);
	}
	CHECK(rdma_disconnect(c.id) == 0);
	cm_expect_ack(c.ch, RDMA_CM_EVENT_DISCONNECTED, 2000, "sq order client");
	cm_expect_ack(lch, RDMA_CM_EVENT_DISCONNECTED, 2000, "sq order server");
out2:
	free_ep(&c);
	free_ep(&s);
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
	double t0 = cm_now_ms();
	pthread_join(t, NULL);
	CHECK(w.rc == 0);
	/* a Read posted after the disconnect flushes at once */
	CHECK(post1(c.id->qp, 3000, IBV_WR_RDMA_READ, &rs, 1, dmr->rkey, (uintptr_t)dst, 0) == 0);
	count_done(c.scq, NBIG + 1, 3000, &ok, &fl, &other);
	printf("disconnect: client writes %d ok, %d flushed, %d other (%.0f ms)\n", ok, fl, other,
	       cm_now_ms() - t0);
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
	double t0 = cm_now_ms(), tkill = 0;
	for (; nw < 40; nw++) {
		CHECK(post1(s.id->qp, 100 + (unsigned)nw, IBV_WR_RDMA_WRITE, &wsg, 1, 0x4400, 0, 0) == 0);
		if (qp_state(s.id->qp) == IBV_QPS_ERR) {
			nw++;
			break;
		}
	}
	pthread_join(t, NULL);
	REQUIRE(waitpid(pid, &status, 0) == pid);
	tkill = cm_now_ms();
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	count_done(s.scq, 4 + nw, 1000, &ok, &fl, &other);
	printf("peer killed after %.0f ms: %d Writes posted, %d ok, %d flushed, %d other, "
	       "in %.0f ms after the kill\n", tkill - t0, nw, ok, fl, other, cm_now_ms() - tkill);
	CHECK(ok + fl == 4 + nw && other == 0 && fl >= 4);
	count_done(s.rcq, 50, 1000, &ok, &fl, &other);
	CHECK(ok == 0 && fl == 50 && other == 0);
	CHECK(cm_now_ms() - tkill < 1000);
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

static void refuse_ext_ops(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	static const enum ibv_wr_opcode ops[] = { IBV_WR_ATOMIC_CMP_AND_SWP,
						  IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_SEND_WITH_IMM,
						  IBV_WR_RDMA_WRITE_WITH_IMM };
	struct ibv_send_wr *bad;

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		wr->opcode = ops[i];
		bad = NULL;
		CHECK(ibv_post_send(qp, wr, &bad) == EOPNOTSUPP && bad == wr);
	}
}

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
	/* RFC 7306 operations on a connection that did not agree on them
	 * (agreed, they are accepted: test_agreed and test-verbs-ext) */
	if (!ext_mode)
		refuse_ext_ops(qp, &wr);
	wr.opcode = IBV_WR_RDMA_READ; /* max_sge_rd is 1 */
	wr.num_sge = 2;
	CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL && bad == &wr);
	/* a list stops at the bad WR; the good one before it went */
	struct ibv_send_wr w2 = wr;
	wr.opcode = IBV_WR_SEND;
	wr.num_sge = 1;
	wr.next = &w2;
	w2.opcode = ext_mode ? IBV_WR_SEND : IBV_WR_ATOMIC_CMP_AND_SWP;
	if (ext_mode) /* too many SGEs */
		w2.num_sge = 3;
	w2.wr_id = 2;
	CHECK(ibv_post_send(qp, &wr, &bad) == (ext_mode ? EINVAL : EOPNOTSUPP) && bad == &w2);
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

	/* an unregistered lkey on a Send, on a Read's sink, and libxsock's
	 * private "caller's memory" lkey through the public call */
	for (int k = 0; k < 3; k++) {
		if (!pair_up(&c, &s, 4, 0, 4)) {
			xs_test_failures++;
			goto out;
		}
		sg[0] = (struct ibv_sge){ .addr = (uintptr_t)(c.mem + GUARD), .length = 8,
					  .lkey = k == 2 ? XSOCK_LKEY_CALLER : c.mr[T_RW]->lkey ^ 0x80 };
		CHECK(post1(c.id->qp, 6, k == 1 ? IBV_WR_RDMA_READ : IBV_WR_SEND, sg, 1,
			    s.mr[T_RW]->rkey, (uintptr_t)s.mr[T_RW]->addr, 0) == 0);
		CHECK(poll_n(c.scq, wc, 1, 100) == 1 && wc[0].wr_id == 6 &&
		      wc[0].status == IBV_WC_LOC_PROT_ERR &&
		      wc[0].opcode == (k == 1 ? IBV_WC_RDMA_READ : IBV_WC_SEND));
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

/* ---- both ends blocked sending --------------------------------------------------- */

#define BB_MSG (256u << 10)
#define BB_SENDS 64
#define BB_RECVS 4

struct bb_side {
	struct ep *e;
	uint8_t *src, *dst;
	struct ibv_mr *smr, *dmr;
	int sent, received, errors;
};

static int bb_post_recv(struct bb_side *b, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct ibv_sge sg = { .addr = (uintptr_t)b->dst, .length = BB_MSG,
				      .lkey = b->dmr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sg, .num_sge = 1 }, *bad;

		if (ibv_post_recv(b->e->id->qp, &wr, &bad))
			return -1;
	}
	return 0;
}

/* Each end: four receives, then 64 Sends of 256 KiB in one post, then
 * completions, reposting as the peer's Sends arrive. */
static void *bb_run(void *arg)
{
	struct bb_side *b = arg;
	struct ibv_send_wr wr[BB_SENDS], *bad;
	struct ibv_sge sg = { .addr = (uintptr_t)b->src, .length = BB_MSG, .lkey = b->smr->lkey };
	struct ibv_wc wc[16];

	for (int i = 0; i < BB_SENDS; i++)
		wr[i] = (struct ibv_send_wr){ .wr_id = 2, .sg_list = &sg, .num_sge = 1,
					      .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
					      .next = i + 1 < BB_SENDS ? &wr[i + 1] : NULL };
	if (ibv_post_send(b->e->id->qp, wr, &bad)) {
		b->errors++;
		return NULL;
	}
	for (int spins = 0; (b->sent < BB_SENDS || b->received < BB_SENDS) && spins < 20000;
	     spins++) {
		int n = ibv_poll_cq(b->e->scq, 16, wc);

		for (int i = 0; i < n; i++)
			wc[i].status == IBV_WC_SUCCESS ? b->sent++ : b->errors++;
		n = ibv_poll_cq(b->e->rcq, 16, wc);
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].byte_len != BB_MSG) {
				b->errors++;
				continue;
			}
			b->received++;
			if (b->received + BB_RECVS <= BB_SENDS && bb_post_recv(b, 1))
				b->errors++;
		}
		if (!n)
			usleep(500);
	}
	return NULL;
}

/* Both ends post more Sends than the other has receives, in one call each:
 * each poster blocks on a full socket while each engine holds the other's
 * next Send for a receive only that poster's caller will post (qperf
 * rc_bi_bw).  The waiting posters read the stalled input aside, so both
 * posts return and everything arrives, with no Terminate. */
/* libxsock's private post (xs_priv_abi.h): a Write and a Send from
 * unregistered memory, which the caller may reuse when the call returns;
 * a Read, whose sink would be written later, is refused */
static void test_post_caller(void)
{
	struct ibv_send_wr wr[2], *bad;
	struct ibv_sge sg[2];
	struct ibv_wc wc[2];
	struct ep c, s;
	uint8_t mine[300];

	if (!pair_up(&c, &s, 4, 0, 4)) {
		xs_test_failures++;
		goto out;
	}
	for (unsigned i = 0; i < sizeof(mine); i++)
		mine[i] = (uint8_t)(i * 7 + 1);
	memset(wr, 0, sizeof(wr));
	sg[0] = (struct ibv_sge){ .addr = (uintptr_t)mine, .length = 200, .lkey = XSOCK_LKEY_CALLER };
	sg[1] = (struct ibv_sge){ .addr = (uintptr_t)(mine + 200), .length = 100,
				  .lkey = XSOCK_LKEY_CALLER };
	wr[0] = (struct ibv_send_wr){ .wr_id = 1, .next = &wr[1], .sg_list = &sg[0], .num_sge = 1,
				      .opcode = IBV_WR_RDMA_WRITE };
	wr[0].wr.rdma.rkey = s.mr[T_RW]->rkey;
	wr[0].wr.rdma.remote_addr = (uintptr_t)s.mr[T_RW]->addr + 64;
	wr[1] = (struct ibv_send_wr){ .wr_id = 2, .sg_list = &sg[1], .num_sge = 1,
				      .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	CHECK(xsock_priv_post_send_caller(c.id->qp, wr, &bad) == 0);
	memset(mine, 0xee, sizeof(mine)); /* the caller's memory is its own again */
	CHECK(poll_n(c.scq, wc, 1, 1000) == 1 && wc[0].wr_id == 2 && wc[0].status == IBV_WC_SUCCESS);
	CHECK(poll_n(s.rcq, wc, 1, 1000) == 1 && wc[0].status == IBV_WC_SUCCESS &&
	      wc[0].byte_len == 100);
	bool same = true;
	for (unsigned i = 0; i < 300; i++) {
		uint8_t got = i < 200 ? ((uint8_t *)s.mr[T_RW]->addr)[64 + i] : s.rbuf[i - 200];
		same = same && got == (uint8_t)(i * 7 + 1);
	}
	CHECK(same);
	wr[0].opcode = IBV_WR_RDMA_READ;
	wr[0].next = NULL;
	bad = NULL;
	CHECK(xsock_priv_post_send_caller(c.id->qp, wr, &bad) == EINVAL && bad == &wr[0]);
	CHECK(qp_state(c.id->qp) == IBV_QPS_RTS);
out:
	free_ep(&s);
	free_ep(&c);
}

static void test_both_blocked(void)
{
	struct bb_side b[2];
	pthread_t t[2];
	struct ep c, s;

	if (!pair_up(&c, &s, BB_SENDS + BB_RECVS, 0, 0)) {
		xs_test_failures++;
		return;
	}
	for (int i = 0; i < 2; i++) {
		struct ep *e = i ? &s : &c;

		b[i] = (struct bb_side){ .e = e, .src = malloc(BB_MSG), .dst = malloc(BB_MSG) };
		REQUIRE(b[i].src && b[i].dst);
		memset(b[i].src, 0x40 + i, BB_MSG);
		b[i].smr = ibv_reg_mr(e->id->pd, b[i].src, BB_MSG, IBV_ACCESS_LOCAL_WRITE);
		b[i].dmr = ibv_reg_mr(e->id->pd, b[i].dst, BB_MSG, IBV_ACCESS_LOCAL_WRITE);
		REQUIRE(b[i].smr && b[i].dmr);
		REQUIRE(bb_post_recv(&b[i], BB_RECVS) == 0);
	}
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_create(&t[i], NULL, bb_run, &b[i]) == 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ_U((unsigned)b[i].sent, BB_SENDS);
		CHECK_EQ_U((unsigned)b[i].received, BB_SENDS);
		CHECK_EQ_U((unsigned)b[i].errors, 0);
		CHECK(all_bytes(b[i].dst, BB_MSG, (uint8_t)(0x40 + (1 - i))));
		CHECK(qp_state(b[i].e->id->qp) == IBV_QPS_RTS);
	}
	printf("both ends blocked sending: %d+%d Sends of %u KiB through\n", b[0].received,
	       b[1].received, BB_MSG >> 10);
	for (int i = 0; i < 2; i++) {
		CHECK(ibv_dereg_mr(b[i].smr) == 0);
		CHECK(ibv_dereg_mr(b[i].dmr) == 0);
	}
	free_ep(&c);
	free_ep(&s);
	for (int i = 0; i < 2; i++) {
		free(b[i].src);
		free(b[i].dst);
	}
}

/* ---- which RFC 7306 agreement this run has ------------------------------------------- */

/* A library pair: both ends recorded the agreement this run claims, and a
 * Send with Immediate goes (agreed) or is refused (EOPNOTSUPP). */
static void test_agreed(void)
{
	struct ibv_wc wc;
	struct ep c, s;
	int n, ext = 0;

	if (!pair_up(&c, &s, 4, 0, 4)) {
		xs_test_failures++;
		goto out;
	}
	struct xs_stat_conn sc, ss;
	if (cm_stat_slot(true, &sc) && cm_stat_slot(false, &ss)) {
		ext = sc.rdmap_ext + ss.rdmap_ext;
		n = 2;
		CHECK_EQ_U(ext, (ext_mode ? 2 : 0));
	} else {
		n = 0;
		printf("RFC 7306: no statistics file, agreement not read\n");
	}
	struct ibv_sge sg = { .addr = (uintptr_t)(c.mem + GUARD), .length = 8,
			      .lkey = c.mr[T_RW]->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sg, .num_sge = 1,
				  .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htonl(0x7306) }, *bad = NULL;
	int rc = ibv_post_send(c.id->qp, &wr, &bad);
	if (!ext_mode) {
		CHECK(rc == EOPNOTSUPP && bad == &wr);
	} else if (rc != 0) {
		CHECK_EQ_U(rc, 0);
	} else {
		CHECK(poll_n(c.scq, &wc, 1, 1000) == 1 && wc.status == IBV_WC_SUCCESS);
		CHECK(poll_n(s.rcq, &wc, 1, 1000) == 1 && wc.status == IBV_WC_SUCCESS &&
		      (wc.wc_flags & IBV_WC_WITH_IMM) && wc.imm_data == htonl(0x7306));
	}
	printf("RFC 7306 %s: %d of %d ends say so, Send with Immediate %s\n",
	       ext_mode ? "agreed" : "not agreed", ext, n, rc ? "refused" : "delivered");
	CHECK(rdma_disconnect(c.id) == 0);
	cm_expect_ack(c.ch, RDMA_CM_EVENT_DISCONNECTED, 2000, "agreed client");
	cm_expect_ack(lch, RDMA_CM_EVENT_DISCONNECTED, 2000, "agreed server");
out:
	free_ep(&s);
	free_ep(&c);
}

static void run_suite(void)
{
	verbs_test_listen();

	test_agreed();
	test_remote_errors();
	test_modify_err_flush();
	printf("modify_qp(ERR) flush: %s\n", xs_test_failures ? "(failures above)" : "ok");
	test_sq_order();
	printf("send queue completion order: %s\n", xs_test_failures ? "(failures above)" : "ok");
	test_disconnect_outstanding();
	test_terminate_while_sending();
	test_both_blocked();
	test_peer_killed();
	test_bad_input();
	test_post_caller();

	CHECK(rdma_destroy_id(lid) == 0);
	rdma_destroy_event_channel(lch);
}

int main(int argc, char **argv)
{
	static const char *const siw[] = { "XSOCK_RDMAP_EXT", "0", NULL };
	int mode = xs_test_mode(argc, argv), rc;

	signal(SIGPIPE, SIG_IGN);
	/* the defaults first: two xsocks agree on RFC 7306 */
	if (mode == 0)
		unsetenv("XSOCK_RDMAP_EXT");
	ext_mode = mode == 0;
	printf("== %s\n", ext_mode ? "defaults (RFC 7306 agreed)" : "XSOCK_RDMAP_EXT=0 (siw-compatible)");
	run_suite();
	rc = xs_test_result();
	if (mode == 0)
		rc = xs_test_both(rc, xs_test_rerun(argv[0], 1, siw));
	return rc;
}
