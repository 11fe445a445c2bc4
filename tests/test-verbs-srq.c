/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Shared receive queues over real loopback connections: two server QPs on
 * one SRQ receive their clients' Sends (data, wr_id, qp_num and the QP's
 * own recv_cq checked, a two-SGE WR scattered), the limit event (once per
 * arming), a Send waiting for an empty SRQ until post_srq_recv, a QP moved
 * to ERR leaving the SRQ's WRs to the other QP and reporting
 * LAST_WQE_REACHED, EBUSY while QPs use it, ENOMEM when full, resizing,
 * the CM's rdma_create_srq*, and invalid arguments. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "tests/test-cm-util.h"
#include "tests/xs_test.h"

#define NBUF 16
#define BUFSZ 256

static struct rdma_event_channel *lch;
static struct rdma_cm_id *lid;
static uint16_t lport;
static struct ibv_context *vctx;
static struct ibv_pd *pd;

/* Async events queued so far, counted by kind and object. */
struct events {
	int limit, last_wqe, other;
	void *limit_srq, *last_wqe_qp;
};

static void drain_async(struct events *ev)
{
	struct ibv_async_event ae;

	memset(ev, 0, sizeof(*ev));
	while (ibv_get_async_event(vctx, &ae) == 0) {
		if (ae.event_type == IBV_EVENT_SRQ_LIMIT_REACHED) {
			ev->limit++;
			ev->limit_srq = ae.element.srq;
		} else if (ae.event_type == IBV_EVENT_QP_LAST_WQE_REACHED) {
			ev->last_wqe++;
			ev->last_wqe_qp = ae.element.qp;
		} else {
			ev->other++;
		}
		ibv_ack_async_event(&ae);
	}
}

/* ---- invalid arguments and the SRQ alone ------------------------------------------- */

static void test_device_attrs(void)
{
	struct ibv_device_attr a;
	struct ibv_device_attr_ex x;

	REQUIRE(ibv_query_device(vctx, &a) == 0);
	REQUIRE(ibv_query_device_ex(vctx, NULL, &x) == 0);
	CHECK(a.max_srq > 0 && a.max_srq_wr > 0 && a.max_srq_sge > 0);
	CHECK_EQ_U(x.orig_attr.max_srq, a.max_srq);
	CHECK_EQ_U(x.orig_attr.max_srq_wr, a.max_srq_wr);
	CHECK_EQ_U(x.orig_attr.max_srq_sge, a.max_srq_sge);
	CHECK(a.device_cap_flags & IBV_DEVICE_SRQ_RESIZE);
}

static struct ibv_srq *mk_srq(uint32_t max_wr, uint32_t max_sge, uint32_t limit)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = max_wr, .max_sge = max_sge, .srq_limit = limit } };

	return ibv_create_srq(pd, &sa);
}

static void test_bad_args(void)
{
	struct ibv_device_attr da;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq_attr qa;
	struct ibv_srq *s;
	uint32_t num = 0;

	REQUIRE(ibv_query_device(vctx, &da) == 0);
	errno = 0;
	CHECK(!ibv_create_srq(NULL, &sa) && errno == EINVAL);
	errno = 0;
	CHECK(!ibv_create_srq(pd, NULL) && errno == EINVAL);
	errno = 0;
	CHECK(!mk_srq(0, 1, 0) && errno == EINVAL);
	errno = 0;
	CHECK(!mk_srq((uint32_t)da.max_srq_wr + 1, 1, 0) && errno == EINVAL);
	errno = 0;
	CHECK(!mk_srq(1u << 31, 1, 0) && errno == EINVAL);
	errno = 0;
	CHECK(!mk_srq(4, (uint32_t)da.max_srq_sge + 1, 0) && errno == EINVAL);
	errno = 0;
	CHECK(!mk_srq(4, 1, 5) && errno == EINVAL); /* limit beyond max_wr */

	/* granted attributes: max_sge 0 gets one */
	sa.attr.max_sge = 0;
	s = ibv_create_srq(pd, &sa);
	REQUIRE(s);
	CHECK_EQ_U(sa.attr.max_wr, 4);
	CHECK_EQ_U(sa.attr.max_sge, 1);
	CHECK(s->pd == pd && s->context == vctx);
	memset(&qa, 0, sizeof(qa));
	CHECK(ibv_query_srq(s, &qa) == 0);
	CHECK(qa.max_wr == 4 && qa.max_sge == 1 && qa.srq_limit == 0);
	CHECK(ibv_query_srq(s, NULL) == EINVAL);
	CHECK(ibv_query_srq(NULL, &qa) == EINVAL);
	CHECK(ibv_get_srq_num(s, &num) == 0 && num != 0);

	/* modify */
	qa.max_wr = 0;
	CHECK(ibv_modify_srq(s, &qa, IBV_SRQ_MAX_WR) == EINVAL);
	qa.max_wr = (uint32_t)da.max_srq_wr + 1;
	CHECK(ibv_modify_srq(s, &qa, IBV_SRQ_MAX_WR) == EINVAL);
	qa.srq_limit = 5;
	CHECK(ibv_modify_srq(s, &qa, IBV_SRQ_LIMIT) == EINVAL);
	CHECK(ibv_modify_srq(s, &qa, 0x80) == EINVAL);
	CHECK(ibv_modify_srq(s, NULL, IBV_SRQ_LIMIT) == EINVAL);
	CHECK(ibv_modify_srq(NULL, &qa, IBV_SRQ_LIMIT) == EINVAL);
	qa.srq_limit = 2;
	CHECK(ibv_modify_srq(s, &qa, IBV_SRQ_LIMIT) == 0);
	CHECK(ibv_query_srq(s, &qa) == 0 && qa.srq_limit == 2);
	qa.srq_limit = 0; /* disarm */
	CHECK(ibv_modify_srq(s, &qa, IBV_SRQ_LIMIT) == 0);
	CHECK(ibv_destroy_srq(NULL) == EINVAL);
	CHECK(ibv_destroy_srq(s) == 0);

	/* the extended call: BASIC only */
	struct ibv_cq *cq = ibv_create_cq(vctx, 4, NULL, NULL, 0);
	struct ibv_srq_init_attr_ex sx = {
		.attr = { .max_wr = 4, .max_sge = 2 }, .pd = pd, .cq = cq, .srq_type = IBV_SRQT_XRC,
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ,
	};

	REQUIRE(cq);
	errno = 0;
	CHECK(!ibv_create_srq_ex(vctx, &sx) && errno == EOPNOTSUPP);
	sx.srq_type = IBV_SRQT_TM;
	errno = 0;
	CHECK(!ibv_create_srq_ex(vctx, &sx) && errno == EOPNOTSUPP);
	sx.srq_type = IBV_SRQT_BASIC;
	sx.comp_mask &= ~(uint32_t)IBV_SRQ_INIT_ATTR_PD;
	errno = 0;
	CHECK(!ibv_create_srq_ex(vctx, &sx) && errno == EINVAL);
	sx.comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	s = ibv_create_srq_ex(vctx, &sx); /* the CQ makes it take the context op */
	CHECK(s != NULL);
	if (s)
		CHECK(ibv_destroy_srq(s) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
}

/* post_srq_recv on an SRQ alone: bad_wr, EINVAL, ENOMEM when full, resize. */
static void test_post_limits(void)
{
	uint8_t *buf = calloc(NBUF, BUFSZ);
	struct ibv_mr *mr;
	struct ibv_srq *s = mk_srq(4, 2, 0);
	struct ibv_sge sg[3];
	struct ibv_recv_wr wr[6], *bad;
	struct ibv_srq_attr qa;

	REQUIRE(buf && s);
	mr = ibv_reg_mr(pd, buf, NBUF * BUFSZ, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(mr);
	for (int i = 0; i < 3; i++)
		sg[i] = (struct ibv_sge){ .addr = (uintptr_t)buf + (size_t)i * BUFSZ, .length = BUFSZ, .lkey = mr->lkey };
	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < 6; i++) {
		wr[i].wr_id = (uint64_t)i;
		wr[i].sg_list = sg;
		wr[i].num_sge = 2; /* a bounce each: freed with the SRQ */
		wr[i].next = i < 5 ? &wr[i + 1] : NULL;
	}
	/* too many SGEs: refused, bad_wr names it */
	wr[0].num_sge = 3;
	bad = NULL;
	CHECK(ibv_post_srq_recv(s, &wr[0], &bad) == EINVAL && bad == &wr[0]);
	wr[0].num_sge = 2;
	/* a bad lkey in the second: the first stays posted */
	struct ibv_sge badsg = { .addr = (uintptr_t)buf, .length = 16, .lkey = mr->lkey ^ 0x5a5a00 };

	wr[1].sg_list = &badsg;
	wr[1].num_sge = 1;
	bad = NULL;
	CHECK(ibv_post_srq_recv(s, &wr[0], &bad) == EINVAL && bad == &wr[1]);
	wr[1].sg_list = sg;
	wr[1].num_sge = 2;
	/* 1 posted: 3 more fit, the 5th of the chain is ENOMEM */
	bad = NULL;
	CHECK(ibv_post_srq_recv(s, &wr[1], &bad) == ENOMEM && bad == &wr[4]);
	/* resize: below the 4 posted is refused, up is granted */
	qa.max_wr = 3;
	CHECK(ibv_modify_srq(s, &qa, IBV_SRQ_MAX_WR) == EINVAL);
	qa.max_wr = 6;
	CHECK(ibv_modify_srq(s, &qa, IBV_SRQ_MAX_WR) == 0);
	CHECK(ibv_query_srq(s, &qa) == 0 && qa.max_wr == 6);
	bad = NULL;
	CHECK(ibv_post_srq_recv(s, &wr[4], &bad) == 0); /* 5, 6 */
	bad = NULL;
	wr[5].next = NULL;
	CHECK(ibv_post_srq_recv(s, &wr[5], &bad) == ENOMEM && bad == &wr[5]);
	/* NULL SRQ through the op */
	bad = NULL;
	CHECK(vctx->ops.post_srq_recv(NULL, &wr[5], &bad) == EINVAL && bad == &wr[5]);
	CHECK(ibv_destroy_srq(s) == 0); /* posted WRs (and their bounces) go with it */
	CHECK(ibv_dereg_mr(mr) == 0);
	free(buf);
}

/* A QP on an SRQ alone: its receive caps, post_recv refused, EBUSY. */
static void test_qp_on_srq(void)
{
	struct ibv_cq *cq = ibv_create_cq(vctx, 8, NULL, NULL, 0);
	struct ibv_srq *s = mk_srq(8, 1, 0);
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .srq = s, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_init_attr qi;
	struct ibv_qp_attr qa;
	struct ibv_recv_wr rw = { .wr_id = 1 }, *bad = NULL;
	struct ibv_qp *qp, *qp2;

	REQUIRE(cq && s);
	qp = ibv_create_qp(pd, &ia);
	REQUIRE(qp);
	CHECK(qp->srq == s);
	CHECK(ia.cap.max_recv_wr == 0 && ia.cap.max_recv_sge == 0);
	CHECK(ibv_query_qp(qp, &qa, IBV_QP_CAP, &qi) == 0);
	CHECK(qi.srq == s && qi.cap.max_recv_wr == 0 && qa.cap.max_recv_wr == 0);
	CHECK(ibv_post_recv(qp, &rw, &bad) == EINVAL && bad == &rw);
	/* the extended call too */
	struct ibv_qp_init_attr_ex ix = {
		.send_cq = cq, .recv_cq = cq, .srq = s, .qp_type = IBV_QPT_RC, .pd = pd,
		.comp_mask = IBV_QP_INIT_ATTR_PD, .cap = { .max_send_wr = 2, .max_send_sge = 1 },
	};

	qp2 = ibv_create_qp_ex(vctx, &ix);
	CHECK(qp2 && qp2->srq == s);
	CHECK(ibv_destroy_srq(s) == EBUSY);
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_destroy_srq(s) == EBUSY);
	if (qp2)
		CHECK(ibv_destroy_qp(qp2) == 0);
	CHECK(ibv_destroy_srq(s) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
}

/* ---- two connections sharing one SRQ ------------------------------------------------ */

struct client {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t buf[BUFSZ];
};

struct server {
	struct rdma_cm_id *id;
	struct ibv_cq *rcq, *scq;
};

static void connect_pair(struct client *c, struct server *s, struct ibv_srq *srq)
{
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1 };
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct rdma_cm_event *ev;

	memset(c, 0, sizeof(*c));
	memset(s, 0, sizeof(*s));
	c->id = cm_resolved_id(&c->ch, NULL, lport);
	c->cq = ibv_create_cq(vctx, 64, NULL, NULL, 0);
	REQUIRE(c->cq);
	ia.send_cq = ia.recv_cq = c->cq;
	REQUIRE(rdma_create_qp(c->id, pd, &ia) == 0);
	c->mr = ibv_reg_mr(pd, c->buf, sizeof(c->buf), IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(c->mr);
	REQUIRE(rdma_connect(c->id, &cp) == 0);
	ev = cm_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 3000, "request");
	REQUIRE(ev);
	s->id = ev->id;
	rdma_ack_cm_event(ev);
	s->rcq = ibv_create_cq(vctx, 64, NULL, NULL, 0);
	s->scq = ibv_create_cq(vctx, 64, NULL, NULL, 0);
	REQUIRE(s->rcq && s->scq);
	ia.send_cq = s->scq;
	ia.recv_cq = s->rcq;
	ia.srq = srq;
	REQUIRE(rdma_create_qp(s->id, pd, &ia) == 0);
	CHECK(s->id->qp->srq == srq);
	REQUIRE(rdma_accept(s->id, &cp) == 0);
	ev = cm_expect(lch, RDMA_CM_EVENT_ESTABLISHED, 3000, "server established");
	REQUIRE(ev);
	rdma_ack_cm_event(ev);
	ev = cm_expect(c->ch, RDMA_CM_EVENT_ESTABLISHED, 3000, "client established");
	REQUIRE(ev);
	rdma_ack_cm_event(ev);
}

static void free_pair(struct client *c, struct server *s)
{
	rdma_disconnect(c->id);
	rdma_destroy_qp(c->id);
	rdma_destroy_qp(s->id);
	CHECK(ibv_dereg_mr(c->mr) == 0);
	CHECK(ibv_destroy_cq(c->cq) == 0);
	CHECK(ibv_destroy_cq(s->rcq) == 0);
	CHECK(ibv_destroy_cq(s->scq) == 0);
	CHECK(rdma_destroy_id(c->id) == 0);
	CHECK(rdma_destroy_id(s->id) == 0);
	rdma_destroy_event_channel(c->ch);
}

/* Send len octets of tag (then its index) from the client; its completion. */
static void client_send(struct client *c, uint8_t tag, uint32_t len, uint64_t wr_id)
{
	struct ibv_sge sg = { .addr = (uintptr_t)c->buf, .length = len, .lkey = c->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	memset(c->buf, tag, len);
	c->buf[0] = (uint8_t)wr_id;
	REQUIRE(ibv_post_send(c->id->qp, &wr, &bad) == 0);
	REQUIRE(poll_n(c->cq, &wc, 1, 3000) == 1);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == wr_id);
}

static uint8_t *sbuf;
static struct ibv_mr *smr;

/* WR i receives into sbuf slot i (two SGEs of half a slot for odd i). */
static int srq_post(struct ibv_srq *srq, unsigned i)
{
	uint8_t *p = sbuf + (size_t)i * BUFSZ;
	struct ibv_sge sg[2] = {
		{ .addr = (uintptr_t)p, .length = BUFSZ / 2, .lkey = smr->lkey },
		{ .addr = (uintptr_t)p + BUFSZ / 2, .length = BUFSZ / 2, .lkey = smr->lkey },
	};
	struct ibv_recv_wr wr = { .wr_id = 1000 + i, .sg_list = sg, .num_sge = 2 }, *bad = NULL;

	if (!(i & 1)) {
		sg[0].length = BUFSZ;
		wr.num_sge = 1;
	}
	memset(p, 0, BUFSZ);
	return ibv_post_srq_recv(srq, &wr, &bad);
}

/* A receive completion on QP s: the message (tag, length) in its WR's slot. */
static void check_recv(const struct ibv_wc *wc, struct server *s, uint8_t tag, uint32_t len)
{
	CHECK(wc->status == IBV_WC_SUCCESS);
	CHECK(wc->opcode == IBV_WC_RECV);
	CHECK_EQ_U(wc->qp_num, s->id->qp->qp_num);
	CHECK_EQ_U(wc->byte_len, len);
	CHECK(wc->wr_id >= 1000 && wc->wr_id < 1000 + NBUF);
	if (wc->wr_id < 1000 || wc->wr_id >= 1000 + NBUF)
		return;
	const uint8_t *p = sbuf + (size_t)(wc->wr_id - 1000) * BUFSZ;
	bool same = true;

	for (uint32_t i = 1; i < len; i++)
		same = same && p[i] == tag;
	CHECK(same);
}

static void test_shared(void)
{
	struct ibv_srq *srq = mk_srq(NBUF, 2, 0);
	struct client ca, cb;
	struct server sa, sb;
	struct ibv_srq_attr qa = { .srq_limit = 3 };
	struct ibv_wc wc[8];
	struct events ev;

	REQUIRE(srq);
	sbuf = calloc(NBUF, BUFSZ);
	REQUIRE(sbuf);
	smr = ibv_reg_mr(pd, sbuf, NBUF * BUFSZ, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(smr);
	for (unsigned i = 0; i < 8; i++)
		REQUIRE(srq_post(srq, i) == 0);
	CHECK(ibv_modify_srq(srq, &qa, IBV_SRQ_LIMIT) == 0);
	connect_pair(&ca, &sa, srq);
	connect_pair(&cb, &sb, srq);
	drain_async(&ev);

	/* 3 Sends each, interleaved: each completes on its own QP's CQ */
	for (unsigned i = 0; i < 3; i++) {
		client_send(&ca, 0xa0, 200, i);
		client_send(&cb, 0xb0, 100 + i, i);
	}
	CHECK_EQ_U(poll_n(sa.rcq, wc, 3, 3000), 3);
	for (int i = 0; i < 3; i++)
		check_recv(&wc[i], &sa, 0xa0, 200);
	CHECK_EQ_U(poll_n(sb.rcq, wc, 3, 3000), 3);
	for (int i = 0; i < 3; i++)
		check_recv(&wc[i], &sb, 0xb0, 100 + (uint32_t)i);
	/* 8 - 6 = 2 < 3: the limit event, once, and disarmed */
	drain_async(&ev);
	CHECK_EQ_U(ev.limit, 1);
	CHECK(ev.limit_srq == srq);
	CHECK(ibv_query_srq(srq, &qa) == 0 && qa.srq_limit == 0);
	printf("two QPs on one SRQ, limit event: %s\n", xs_test_failures ? "(failures above)" : "ok");

	/* 2 left, 3 Sends: the third waits for post_srq_recv (RNR) */
	client_send(&ca, 0xa1, 50, 10);
	client_send(&ca, 0xa1, 50, 11);
	client_send(&ca, 0xa1, 50, 12); /* done once TCP has it */
	CHECK_EQ_U(poll_n(sa.rcq, wc, 3, 300), 2);
	REQUIRE(srq_post(srq, 8) == 0);
	CHECK_EQ_U(poll_n(sa.rcq, wc + 2, 1, 3000), 1);
	for (int i = 0; i < 3; i++)
		check_recv(&wc[i], &sa, 0xa1, 50);
	CHECK(ibv_query_qp(sa.id->qp, &(struct ibv_qp_attr){ 0 }, IBV_QP_STATE,
			   &(struct ibv_qp_init_attr){ 0 }) == 0);
	CHECK(sa.id->qp->state == IBV_QPS_RTS);
	drain_async(&ev);
	CHECK_EQ_U(ev.limit + ev.last_wqe + ev.other, 0);
	printf("a Send waits for post_srq_recv: %s\n", xs_test_failures ? "(failures above)" : "ok");

	/* QP A to ERR: the SRQ's WRs stay (nothing flushed on A's CQ), A says
	 * LAST_WQE_REACHED, and B goes on receiving from them */
	for (unsigned i = 9; i < 12; i++)
		REQUIRE(srq_post(srq, i) == 0);
	CHECK(ibv_modify_qp(sa.id->qp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR }, IBV_QP_STATE) == 0);
	CHECK_EQ_U(poll_n(sa.rcq, wc, 1, 200), 0);
	drain_async(&ev);
	CHECK_EQ_U(ev.last_wqe, 1);
	CHECK(ev.last_wqe_qp == sa.id->qp);
	for (unsigned i = 0; i < 3; i++)
		client_send(&cb, 0xb1, 64, 20 + i);
	CHECK_EQ_U(poll_n(sb.rcq, wc, 3, 3000), 3);
	for (int i = 0; i < 3; i++)
		check_recv(&wc[i], &sb, 0xb1, 64);
	CHECK(ibv_destroy_srq(srq) == EBUSY);
	printf("QP to ERR leaves the SRQ's WRs, LAST_WQE_REACHED: %s\n",
	       xs_test_failures ? "(failures above)" : "ok");

	free_pair(&ca, &sa);
	CHECK(ibv_destroy_srq(srq) == EBUSY);
	free_pair(&cb, &sb);
	drain_async(&ev);
	CHECK(ibv_destroy_srq(srq) == 0);
	CHECK(ibv_dereg_mr(smr) == 0);
	free(sbuf);
}

/* ---- librdmacm -------------------------------------------------------------------- */

static void test_cm(void)
{
	struct rdma_cm_id *id;
	struct sockaddr_in a = cm_sin("127.0.0.1", 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 2, .max_send_sge = 1 } };
	uint8_t buf[64];
	struct ibv_mr *mr;

	REQUIRE(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) == 0);
	REQUIRE(rdma_bind_addr(id, (struct sockaddr *)&a) == 0);
	CHECK(rdma_create_srq(NULL, NULL, &sa) == -1 && errno == EINVAL);
	CHECK(rdma_create_srq(id, NULL, NULL) == -1 && errno == EINVAL);
	CHECK(rdma_create_srq(id, NULL, &sa) == 0);
	REQUIRE(id->srq);
	CHECK(rdma_create_srq(id, NULL, &sa) == -1 && errno == EEXIST);
	/* the id's QP takes id->srq */
	CHECK(rdma_create_qp(id, NULL, &ia) == 0);
	REQUIRE(id->qp);
	CHECK(id->qp->srq == id->srq);
	/* rdma-core's inline rdma_post_recv posts to id->srq */
	mr = ibv_reg_mr(id->srq->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(mr);
	CHECK(rdma_post_recv(id, NULL, buf, sizeof(buf), mr) == 0);
	rdma_destroy_srq(id); /* a QP uses it: kept */
	CHECK(id->srq != NULL);
	rdma_destroy_qp(id);
	rdma_destroy_srq(id);
	CHECK(id->srq == NULL);
	CHECK(ibv_dereg_mr(mr) == 0);
	/* _ex: a type is needed, BASIC only */
	struct ibv_srq_init_attr_ex sx = { .attr = { .max_wr = 4, .max_sge = 1 } };

	CHECK(rdma_create_srq_ex(id, &sx) == -1 && errno == EINVAL);
	sx.comp_mask = IBV_SRQ_INIT_ATTR_TYPE;
	sx.srq_type = IBV_SRQT_XRC;
	CHECK(rdma_create_srq_ex(id, &sx) == -1 && errno == EOPNOTSUPP);
	sx.srq_type = IBV_SRQT_BASIC;
	CHECK(rdma_create_srq_ex(id, &sx) == 0 && id->srq);
	rdma_destroy_srq(id);
	CHECK(id->srq == NULL);
	rdma_destroy_srq(id); /* nothing left: nothing happens */
	rdma_destroy_srq(NULL);
	CHECK(rdma_destroy_id(id) == 0);
	/* rdma_destroy_ep takes the SRQ with it */
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP }, *res;

	REQUIRE(rdma_getaddrinfo("127.0.0.1", "0", &hints, &res) == 0);
	REQUIRE(rdma_create_ep(&id, res, NULL, NULL) == 0);
	rdma_freeaddrinfo(res);
	CHECK(rdma_create_srq(id, NULL, &sa) == 0);
	rdma_destroy_ep(id);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	lport = cm_listen(&lch, &lid);
	vctx = lid->verbs;
	REQUIRE(vctx);
	REQUIRE(fcntl(vctx->async_fd, F_SETFL, fcntl(vctx->async_fd, F_GETFL) | O_NONBLOCK) == 0);
	pd = ibv_alloc_pd(vctx);
	REQUIRE(pd);

	test_device_attrs();
	test_bad_args();
	test_post_limits();
	test_qp_on_srq();
	printf("SRQ verbs and invalid arguments: %s\n", xs_test_failures ? "(failures above)" : "ok");
	test_shared();
	test_cm();
	printf("rdma_create_srq*: %s\n", xs_test_failures ? "(failures above)" : "ok");

	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(rdma_destroy_id(lid) == 0);
	rdma_destroy_event_channel(lch);
	return xs_test_result();
}
