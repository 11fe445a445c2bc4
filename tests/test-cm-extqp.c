/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* rdma_cm with external QPs (rdma-core's test_rdmacm_async_traffic_external_qp
 * flow), in one process over loopback: both sides make their QP with
 * ibv_create_qp (no rdma_create_qp: id->qp stays NULL), move it with
 * rdma_init_qp_attr and ibv_modify_qp, and name it by conn_param.qp_num.
 * The server moves its QP to RTS and accepts (ESTABLISHED); the client gets
 * CONNECT_RESPONSE, moves its QP and calls rdma_establish (no event).  A
 * Send the server posts before the client's rdma_establish arrives after
 * it.  Also: no QP and no conn_param, or a qp_num naming no QP, is EINVAL
 * (connect and accept); an external QP destroyed before rdma_disconnect.
 * Twice: on xsock0, then (mode 1) on xsock_roce0 (XSOCK_TRANSPORT=roce,
 * the IB CM: the server's ESTABLISHED comes with the RTU that
 * rdma_establish sends, the early Send by the requester's retry). */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/test-cm-util.h"

struct side {
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	struct ibv_qp *qp; /* external: not id->qp */
	struct ibv_mr *mr;
	char buf[64];
};

static bool roce; /* mode 1: the CM's device is xsock_roce0 */
static struct rdma_event_channel *lch;
static struct rdma_cm_id *lid;
static uint16_t lport;

/* The application's own QP on the id's device and PD. */
static void ext_qp(struct side *s, struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a;

	s->id = id;
	REQUIRE(id->verbs && id->pd);
	s->cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
	REQUIRE(s->cq);
	memset(&a, 0, sizeof(a));
	a.send_cq = s->cq;
	a.recv_cq = s->cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = 8;
	a.cap.max_recv_wr = 8;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	s->qp = ibv_create_qp(id->pd, &a);
	REQUIRE(s->qp);
	CHECK(id->qp == NULL);
	s->mr = ibv_reg_mr(id->pd, s->buf, sizeof(s->buf), IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(s->mr);
}

/* One step of the QP's move as the CM says it (rdma_init_qp_attr). */
static void move(struct side *s, enum ibv_qp_state to)
{
	struct ibv_qp_attr qa = { .qp_state = to };
	int mask = 0;

	CHECK(rdma_init_qp_attr(s->id, &qa, &mask) == 0);
	CHECK(qa.qp_state == to && (mask & IBV_QP_STATE));
	CHECK(ibv_modify_qp(s->qp, &qa, mask) == 0);
}

static void post_recv(struct side *s, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf, .length = sizeof(s->buf),
			       .lkey = s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	CHECK(ibv_post_recv(s->qp, &wr, &bad) == 0);
}

static void post_send(struct side *s, const char *msg, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf, .length = (uint32_t)strlen(msg) + 1,
			       .lkey = s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;

	strcpy(s->buf, msg);
	CHECK(ibv_post_send(s->qp, &wr, &bad) == 0);
}


static void expect_wc(struct side *s, uint64_t wr_id, const char *what)
{
	struct ibv_wc wc;

	if (!cm_poll_one(s->cq, &wc, 3000)) {
		fprintf(stderr, "%s: no completion\n", what);
		xs_test_failures++;
		return;
	}
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != wr_id) {
		fprintf(stderr, "%s: wr_id %llu status %s\n", what, (unsigned long long)wc.wr_id,
			ibv_wc_status_str(wc.status));
		xs_test_failures++;
	}
}

static void free_side(struct side *s)
{
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->qp)
		CHECK(ibv_destroy_qp(s->qp) == 0);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->id)
		rdma_destroy_id(s->id);
	memset(s, 0, sizeof(*s));
}

/* Client and server connected over external QPs; the server's first Send
 * posted before the client's rdma_establish. */
static void connect_pair(struct side *c, struct rdma_event_channel **cch, struct side *s)
{
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;

	memset(c, 0, sizeof(*c));
	memset(s, 0, sizeof(*s));
	ext_qp(c, cm_resolved_id(cch, c, lport));
	/* no QP on the id and none named: EINVAL, as librdmacm */
	CHECK(rdma_connect(c->id, NULL) == -1 && errno == EINVAL);
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = c->qp->qp_num ^ 0x800000; /* no such QP */
	CHECK(rdma_connect(c->id, &cp) == -1 && errno == EINVAL);
	cp.qp_num = c->qp->qp_num;
	cp.private_data = "ext-client";
	cp.private_data_len = 10;
	REQUIRE(rdma_connect(c->id, &cp) == 0);

	ev = cm_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 3000, "request");
	REQUIRE(ev);
	/* >=: over the IB CM the length is the whole field (56), as the kernel's */
	CHECK(ev->param.conn.private_data_len >= 10 &&
	      memcmp(ev->param.conn.private_data, "ext-client", 10) == 0);
	ext_qp(s, ev->id);
	rdma_ack_cm_event(ev);
	/* the passive side moves its QP before the accept (rdma-core's order) */
	move(s, IBV_QPS_INIT);
	post_recv(s, 11);
	move(s, IBV_QPS_RTR);
	move(s, IBV_QPS_RTS);
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = s->qp->qp_num ^ 0x800000;
	CHECK(rdma_accept(s->id, &cp) == -1 && errno == EINVAL);
	cp.qp_num = s->qp->qp_num;
	cp.private_data = "ext-server!";
	cp.private_data_len = 11;
	CHECK(rdma_accept(s->id, &cp) == 0);
	CHECK(s->id->qp == NULL);
	CHECK(rdma_establish(s->id) == -1 && errno == EINVAL); /* not the active side */
	post_send(s, "early from server", 12); /* before the client's QP is bound */

	ev = cm_expect(*cch, RDMA_CM_EVENT_CONNECT_RESPONSE, 3000, "client response");
	if (ev) {
		CHECK(ev->id == c->id && ev->status == 0);
		CHECK(ev->param.conn.private_data_len >= 11 &&
		      memcmp(ev->param.conn.private_data, "ext-server!", 11) == 0);
		rdma_ack_cm_event(ev);
	}
	move(c, IBV_QPS_INIT);
	post_recv(c, 21);
	move(c, IBV_QPS_RTR);
	move(c, IBV_QPS_RTS);
	CHECK(rdma_establish(c->id) == 0);
	CHECK(rdma_establish(c->id) == -1 && errno == EINVAL); /* once */
	cm_expect_ack(s->id->channel, RDMA_CM_EVENT_ESTABLISHED, 3000, "server established");
	CHECK(!cm_readable(*cch, 200)); /* no ESTABLISHED after rdma_establish */
	CHECK(ibv_query_qp(c->qp, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_RTS);
	CHECK(ntohs(rdma_get_dst_port(c->id)) == lport);

	expect_wc(s, 12, "server's early send");
	expect_wc(c, 21, "client's receive of the early send");
	CHECK(strcmp(c->buf, "early from server") == 0);
}

static void test_traffic(void)
{
	struct rdma_event_channel *cch;
	struct side c, s;

	connect_pair(&c, &cch, &s);
	post_send(&c, "ping over an external QP", 22);
	expect_wc(&c, 22, "client's send");
	expect_wc(&s, 11, "server's receive");
	CHECK(strcmp(s.buf, "ping over an external QP") == 0);

	CHECK(rdma_disconnect(c.id) == 0);
	cm_expect_ack(cch, RDMA_CM_EVENT_DISCONNECTED, 3000, "client disconnected");
	cm_expect_ack(s.id->channel, RDMA_CM_EVENT_DISCONNECTED, 3000, "server disconnected");
	CHECK(rdma_disconnect(s.id) == 0);
	CHECK(!cm_readable(cch, 200));
	free_side(&s);
	free_side(&c);
	rdma_destroy_event_channel(cch);
}

/* The application destroys its QP before rdma_disconnect and
 * rdma_destroy_id: the CM must not touch it.  On iWARP the connection
 * goes with the QP; over the IB CM with the DREQ. */
static void test_qp_destroyed_first(void)
{
	struct rdma_event_channel *cch;
	struct side c, s;

	connect_pair(&c, &cch, &s);
	CHECK(ibv_destroy_qp(c.qp) == 0);
	c.qp = NULL;
	if (!roce)
		cm_expect_ack(s.id->channel, RDMA_CM_EVENT_DISCONNECTED, 3000,
			      "server disconnected");
	CHECK(rdma_disconnect(c.id) == 0);
	cm_expect_ack(cch, RDMA_CM_EVENT_DISCONNECTED, 3000, "client disconnected");
	if (roce)
		cm_expect_ack(s.id->channel, RDMA_CM_EVENT_DISCONNECTED, 3000,
			      "server disconnected");
	CHECK(!cm_readable(cch, 200));
	free_side(&s);
	free_side(&c);
	rdma_destroy_event_channel(cch);
}

/* A request whose acceptor names no QP is still refused cleanly. */
static void test_accept_no_qp(void)
{
	struct rdma_event_channel *cch;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct side c, s;

	memset(&s, 0, sizeof(s));
	memset(&c, 0, sizeof(c));
	ext_qp(&c, cm_resolved_id(&cch, &c, lport));
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = c.qp->qp_num;
	REQUIRE(rdma_connect(c.id, &cp) == 0);
	ev = cm_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 3000, "request");
	REQUIRE(ev);
	s.id = ev->id;
	rdma_ack_cm_event(ev);
	CHECK(rdma_accept(s.id, NULL) == -1 && errno == EINVAL);
	memset(&cp, 0, sizeof(cp));
	CHECK(rdma_accept(s.id, &cp) == -1 && errno == EINVAL); /* qp_num 0 */
	CHECK(rdma_reject(s.id, NULL, 0) == 0);
	ev = cm_expect(cch, RDMA_CM_EVENT_REJECTED, 3000, "client rejected");
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK(rdma_establish(c.id) == -1 && errno == EINVAL);
	free_side(&s);
	free_side(&c);
	rdma_destroy_event_channel(cch);
}

int main(int argc, char **argv)
{
	static const char *const roce_env[] = { "XSOCK_TRANSPORT", "roce", NULL };
	int mode = xs_test_mode(argc, argv);

	roce = mode == 1;
	lport = cm_listen(&lch, &lid);
	CHECK(strcmp(ibv_get_device_name(lid->verbs->device),
		     roce ? "xsock_roce0" : "xsock0") == 0);

	test_traffic();
	test_qp_destroyed_first();
	test_accept_no_qp();

	CHECK(rdma_destroy_id(lid) == 0);
	rdma_destroy_event_channel(lch);
	if (mode == 0) {
		int rc = xs_test_result();

		return xs_test_both(rc, xs_test_rerun(argv[0], 1, roce_env));
	}
	return xs_test_result();
}
