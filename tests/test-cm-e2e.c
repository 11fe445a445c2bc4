/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Connection manager end to end in one process over loopback: a listener
 * and a connecting id on two channels.  Private data and IRD/ORD both ways,
 * a Send over the connected QPs, exactly one DISCONNECTED per side, the
 * reject path (REJECTED, -ECONNRESET, the Reply's data), no listener
 * (REJECTED, -ECONNREFUSED), rdma_accept(id, NULL) taking the request's
 * numbers, a synchronous-mode client (rdma_create_ep), and a peer that never
 * answers the MPA Request (UNREACHABLE, -ETIMEDOUT). */
#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "tests/test-cm-util.h"

struct side {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char buf[64];
};

static struct rdma_event_channel *lch;
static struct rdma_cm_id *lid;
static uint16_t lport;

static void make_qp(struct side *s, struct rdma_cm_id *id)
{
	s->id = id;
	s->cq = cm_rc_qp(id, 16, 8);
	REQUIRE(id->qp && id->pd);
	CHECK(id->send_cq == s->cq && id->recv_cq == s->cq);
	s->mr = ibv_reg_mr(id->pd, s->buf, sizeof(s->buf), IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(s->mr);
}

static void free_side(struct side *s)
{
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->id && s->id->qp)
		rdma_destroy_qp(s->id);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->id)
		rdma_destroy_id(s->id);
	memset(s, 0, sizeof(*s));
}

/* A client id on its own channel, address and route resolved, QP made. */
static void client_setup(struct side *c, uint16_t port)
{
	memset(c, 0, sizeof(*c));
	make_qp(c, cm_resolved_id(&c->ch, c, port));
}

static void client_free(struct side *c)
{
	struct rdma_event_channel *ch = c->ch;

	free_side(c);
	rdma_destroy_event_channel(ch);
}


static void test_accept_and_send(void)
{
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct side c, s;

	memset(&s, 0, sizeof(s));
	client_setup(&c, lport);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = "client-hi";
	cp.private_data_len = 9;
	cp.responder_resources = 4; /* our IRD */
	cp.initiator_depth = 2; /* our ORD */
	REQUIRE(rdma_connect(c.id, &cp) == 0);

	ev = cm_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 3000, "request");
	REQUIRE(ev);
	CHECK(ev->listen_id == lid);
	CHECK(ev->param.conn.private_data_len == 9 &&
	      memcmp(ev->param.conn.private_data, "client-hi", 9) == 0);
	CHECK_EQ_U(ev->param.conn.responder_resources, 2);
	CHECK_EQ_U(ev->param.conn.initiator_depth, 4);
	make_qp(&s, ev->id);
	rdma_ack_cm_event(ev);

	/* the server's receive is posted before the accept */
	struct ibv_sge sge = { .addr = (uintptr_t)s.buf, .length = sizeof(s.buf), .lkey = s.mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 }, *bad_r;
	CHECK(ibv_post_recv(s.id->qp, &rwr, &bad_r) == 0);

	memset(&cp, 0, sizeof(cp));
	cp.private_data = "server-hi!";
	cp.private_data_len = 10;
	cp.responder_resources = 2;
	cp.initiator_depth = 4;
	CHECK(rdma_accept(s.id, &cp) == 0);
	ev = cm_expect(s.id->channel, RDMA_CM_EVENT_ESTABLISHED, 3000, "server established");
	if (ev) {
		CHECK(ev->id == s.id);
		CHECK_EQ_U(ev->param.conn.responder_resources, 2);
		CHECK_EQ_U(ev->param.conn.initiator_depth, 4);
		rdma_ack_cm_event(ev);
	}
	ev = cm_expect(c.ch, RDMA_CM_EVENT_ESTABLISHED, 3000, "client established");
	if (ev) {
		CHECK(ev->id == c.id);
		CHECK(ev->status == 0);
		CHECK(ev->param.conn.private_data_len == 10 &&
		      memcmp(ev->param.conn.private_data, "server-hi!", 10) == 0);
		CHECK_EQ_U(ev->param.conn.responder_resources, 4);
		CHECK_EQ_U(ev->param.conn.initiator_depth, 2);
		rdma_ack_cm_event(ev);
	}
	CHECK(ntohs(rdma_get_dst_port(c.id)) == lport);
	CHECK(rdma_get_src_port(c.id) != 0);

	/* data flows over the QPs the CM attached */
	strcpy(c.buf, "ping over xsock");
	struct ibv_sge ssge = { .addr = (uintptr_t)c.buf, .length = 16, .lkey = c.mr->lkey };
	struct ibv_send_wr swr = { .wr_id = 9, .sg_list = &ssge, .num_sge = 1,
				   .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad_s;
	struct ibv_wc wc;
	CHECK(ibv_post_send(c.id->qp, &swr, &bad_s) == 0);
	CHECK(cm_poll_one(c.cq, &wc, 2000) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 9);
	CHECK(cm_poll_one(s.cq, &wc, 2000) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7 &&
	      wc.byte_len == 16);
	CHECK(strcmp(s.buf, "ping over xsock") == 0);

	/* disconnect: exactly one DISCONNECTED on each side */
	CHECK(rdma_disconnect(c.id) == 0);
	ev = cm_expect(c.ch, RDMA_CM_EVENT_DISCONNECTED, 3000, "client disconnected");
	if (ev)
		rdma_ack_cm_event(ev);
	ev = cm_expect(s.id->channel, RDMA_CM_EVENT_DISCONNECTED, 3000, "server disconnected");
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK(rdma_disconnect(s.id) == 0); /* after the peer: harmless */
	CHECK(rdma_disconnect(c.id) == 0);
	CHECK(!cm_readable(c.ch, 300));
	CHECK(!cm_readable(lch, 0));
	free_side(&s);
	client_free(&c);
}

static void test_reject(void)
{
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct side c;

	client_setup(&c, lport);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = "let me in";
	cp.private_data_len = 9;
	REQUIRE(rdma_connect(c.id, &cp) == 0);
	ev = cm_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 3000, "request to reject");
	REQUIRE(ev);
	struct rdma_cm_id *child = ev->id;
	rdma_ack_cm_event(ev);
	CHECK(rdma_reject(child, "go away", 7) == 0);
	CHECK(rdma_destroy_id(child) == 0);
	ev = cm_expect(c.ch, RDMA_CM_EVENT_REJECTED, 3000, "rejected");
	if (ev) {
		CHECK(ev->status == -ECONNRESET);
		CHECK(ev->param.conn.private_data_len == 7 &&
		      memcmp(ev->param.conn.private_data, "go away", 7) == 0);
		rdma_ack_cm_event(ev);
	}
	CHECK(!cm_readable(c.ch, 200));
	client_free(&c);
}

static void test_no_listener(void)
{
	struct rdma_cm_event *ev;
	struct side c;
	uint16_t port;

	/* a port that was just free */
	{
		struct sockaddr_in a = cm_sin("127.0.0.1", 0);
		socklen_t l = sizeof(a);
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		REQUIRE(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
		REQUIRE(getsockname(fd, (struct sockaddr *)&a, &l) == 0);
		port = ntohs(a.sin_port);
		close(fd);
	}
	client_setup(&c, port);
	REQUIRE(rdma_connect(c.id, NULL) == 0);
	ev = cm_expect(c.ch, RDMA_CM_EVENT_REJECTED, 3000, "no listener");
	if (ev) {
		CHECK(ev->status == -ECONNREFUSED);
		rdma_ack_cm_event(ev);
	}
	client_free(&c);
}

/* A server that tells its client a port before it listens (qperf -cm1,
 * perftest -R): the port reserved by rdma_bind_addr(0), the client's
 * connect refused at first, dialled again until the listener is there. */
static void test_listen_late(void)
{
	struct sockaddr_in a = cm_sin("127.0.0.1", 0);
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *late;
	struct side c, s;

	ch = rdma_create_event_channel();
	REQUIRE(ch);
	REQUIRE(rdma_create_id(ch, &late, NULL, RDMA_PS_TCP) == 0);
	REQUIRE(rdma_bind_addr(late, (struct sockaddr *)&a) == 0);
	client_setup(&c, ntohs(rdma_get_src_port(late)));
	REQUIRE(rdma_connect(c.id, NULL) == 0);
	usleep(60 * 1000);
	CHECK(!cm_readable(c.ch, 0)); /* not refused meanwhile */
	REQUIRE(rdma_listen(late, 4) == 0);
	ev = cm_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 3000, "request (late listener)");
	REQUIRE(ev);
	memset(&s, 0, sizeof(s));
	make_qp(&s, ev->id);
	rdma_ack_cm_event(ev);
	CHECK(rdma_accept(s.id, NULL) == 0);
	cm_expect_ack(c.ch, RDMA_CM_EVENT_ESTABLISHED, 3000, "client established (late)");
	cm_expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED, 3000, "server established (late)");
	CHECK(rdma_disconnect(c.id) == 0);
	cm_expect_ack(c.ch, RDMA_CM_EVENT_DISCONNECTED, 3000, "client disc (late)");
	cm_expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED, 3000, "server disc (late)");
	free_side(&s);
	client_free(&c);
	CHECK(rdma_destroy_id(late) == 0);
	rdma_destroy_event_channel(ch);
}

/* A server that destroys its listener after a connection and listens
 * again on the same port (perftest -R's test connection): a client in
 * between, here one that is not an xsock and does not dial again, is not
 * refused; its connection waits for the new listener (xs_spare.c). */
static void test_listen_again(void)
{
	static const char req_hex[] = "4d50412049442052657120467261 6d65 10 02 0004 0001 0001";
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l1, *l2;
	struct side c, s;
	uint8_t req[64];
	size_t n = xs_hex(req_hex, req, sizeof(req));
	uint16_t port = cm_listen(&ch, &l1);
	struct sockaddr_in a = cm_sin("127.0.0.1", port);

	client_setup(&c, port);
	REQUIRE(rdma_connect(c.id, NULL) == 0);
	ev = cm_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 3000, "request (first listener)");
	REQUIRE(ev);
	memset(&s, 0, sizeof(s));
	make_qp(&s, ev->id);
	rdma_ack_cm_event(ev);
	CHECK(rdma_accept(s.id, NULL) == 0);
	cm_expect_ack(c.ch, RDMA_CM_EVENT_ESTABLISHED, 3000, "client established (again)");
	cm_expect_ack(ch, RDMA_CM_EVENT_ESTABLISHED, 3000, "server established (again)");
	CHECK(rdma_destroy_id(l1) == 0);

	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	REQUIRE(fd >= 0);
	CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0); /* refused without it */
	CHECK(send(fd, req, n, MSG_NOSIGNAL) == (ssize_t)n);
	usleep(50 * 1000);
	REQUIRE(rdma_create_id(ch, &l2, NULL, RDMA_PS_TCP) == 0);
	REQUIRE(rdma_bind_addr(l2, (struct sockaddr *)&a) == 0);
	REQUIRE(rdma_listen(l2, 4) == 0);
	ev = cm_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 3000, "request (listener again)");
	if (ev) {
		struct rdma_cm_id *rid = ev->id;

		CHECK(rdma_reject(rid, NULL, 0) == 0);
		rdma_ack_cm_event(ev);
		CHECK(rdma_destroy_id(rid) == 0);
	}
	close(fd);
	CHECK(rdma_disconnect(c.id) == 0);
	cm_expect_ack(c.ch, RDMA_CM_EVENT_DISCONNECTED, 3000, "client disc (again)");
	cm_expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED, 3000, "server disc (again)");
	free_side(&s);
	client_free(&c);
	CHECK(rdma_destroy_id(l2) == 0);
	/* its kept socket does not stop a listen on another address */
	a = cm_sin("0.0.0.0", port);
	REQUIRE(rdma_create_id(ch, &l2, NULL, RDMA_PS_TCP) == 0);
	REQUIRE(rdma_bind_addr(l2, (struct sockaddr *)&a) == 0);
	CHECK(rdma_listen(l2, 4) == 0);
	CHECK(rdma_destroy_id(l2) == 0);
	/* a listener closed while the engine runs its listen command: the
	 * engine must not free it under the closing thread (TSan and ASan) */
	for (int i = 0; i < 200; i++) {
		REQUIRE(rdma_create_id(ch, &l2, NULL, RDMA_PS_TCP) == 0);
		REQUIRE(rdma_bind_addr(l2, (struct sockaddr *)&a) == 0);
		CHECK(rdma_listen(l2, 4) == 0);
		CHECK(rdma_destroy_id(l2) == 0);
	}
	rdma_destroy_event_channel(ch);
}

static void test_accept_null(void)
{
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct side c, s;

	client_setup(&c, lport);
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = 3;
	cp.initiator_depth = 1;
	REQUIRE(rdma_connect(c.id, &cp) == 0);
	ev = cm_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 3000, "request (null accept)");
	REQUIRE(ev);
	CHECK(ev->param.conn.private_data_len == 0);
	memset(&s, 0, sizeof(s));
	make_qp(&s, ev->id);
	rdma_ack_cm_event(ev);
	CHECK(rdma_accept(s.id, NULL) == 0); /* rping style */
	ev = cm_expect(s.id->channel, RDMA_CM_EVENT_ESTABLISHED, 3000, "server established (null)");
	if (ev) {
		CHECK_EQ_U(ev->param.conn.responder_resources, 1);
		CHECK_EQ_U(ev->param.conn.initiator_depth, 3);
		rdma_ack_cm_event(ev);
	}
	ev = cm_expect(c.ch, RDMA_CM_EVENT_ESTABLISHED, 3000, "client established (null)");
	if (ev) {
		CHECK(ev->param.conn.private_data_len == 0);
		CHECK_EQ_U(ev->param.conn.responder_resources, 3);
		CHECK_EQ_U(ev->param.conn.initiator_depth, 1);
		rdma_ack_cm_event(ev);
	}
	/* the server goes first this time */
	CHECK(rdma_disconnect(s.id) == 0);
	ev = cm_expect(s.id->channel, RDMA_CM_EVENT_DISCONNECTED, 3000, "server disc (null)");
	if (ev)
		rdma_ack_cm_event(ev);
	ev = cm_expect(c.ch, RDMA_CM_EVENT_DISCONNECTED, 3000, "client disc (null)");
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK(!cm_readable(c.ch, 200));
	CHECK(!cm_readable(lch, 0));
	free_side(&s);
	/* destroy without disconnecting the client side explicitly */
	client_free(&c);
}

/* Synchronous client: rdma_getaddrinfo + rdma_create_ep + rdma_connect that
 * returns once established; the listener answers from this thread's peer. */
static void *sync_client(void *arg)
{
	struct rdma_addrinfo hints, *res = NULL;
	struct ibv_qp_init_attr a;
	struct rdma_cm_id *id;
	char port[16];
	long rc = 1;

	(void)arg;
	snprintf(port, sizeof(port), "%u", lport);
	memset(&hints, 0, sizeof(hints));
	hints.ai_port_space = RDMA_PS_TCP;
	if (rdma_getaddrinfo("127.0.0.1", port, &hints, &res))
		return (void *)rc;
	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	if (rdma_create_ep(&id, res, NULL, &a) == 0) {
		/* the CM made the CQs */
		if (id->qp && id->send_cq && id->recv_cq && rdma_connect(id, NULL) == 0 &&
		    id->event && id->event->event == RDMA_CM_EVENT_ESTABLISHED)
			rc = 0;
		rdma_disconnect(id);
		rdma_destroy_ep(id);
	}
	rdma_freeaddrinfo(res);
	return (void *)rc;
}

static void test_sync_client(void)
{
	struct rdma_cm_event *ev;
	pthread_t t;
	void *ret = NULL;
	struct side s;

	REQUIRE(pthread_create(&t, NULL, sync_client, NULL) == 0);
	ev = cm_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 3000, "sync client request");
	if (ev) {
		memset(&s, 0, sizeof(s));
		make_qp(&s, ev->id);
		rdma_ack_cm_event(ev);
		int rc = rdma_accept(s.id, NULL);
		if (rc)
			fprintf(stderr, "sync accept: %s\n", strerror(errno));
		CHECK(rc == 0);
		ev = cm_expect(s.id->channel, RDMA_CM_EVENT_ESTABLISHED, 3000, "sync est");
		if (ev)
			rdma_ack_cm_event(ev);
		ev = cm_expect(s.id->channel, RDMA_CM_EVENT_DISCONNECTED, 3000, "sync disc");
		if (ev)
			rdma_ack_cm_event(ev);
		free_side(&s);
	}
	pthread_join(t, &ret);
	CHECK(ret == NULL);
}

/* A TCP listener that never answers the MPA Request: UNREACHABLE with
 * -ETIMEDOUT once XSOCK_MPA_TIMEOUT_MS (400 ms here) has passed. */
static void test_mpa_timeout(void)
{
	struct sockaddr_in a = cm_sin("127.0.0.1", 0);
	socklen_t l = sizeof(a);
	struct rdma_cm_event *ev;
	struct timespec t0, t1;
	struct side c;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	REQUIRE(fd >= 0);
	REQUIRE(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	REQUIRE(listen(fd, 4) == 0);
	REQUIRE(getsockname(fd, (struct sockaddr *)&a, &l) == 0);
	client_setup(&c, ntohs(a.sin_port));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	REQUIRE(rdma_connect(c.id, NULL) == 0);
	ev = cm_expect(c.ch, RDMA_CM_EVENT_UNREACHABLE, 5000, "silent peer");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (ev) {
		CHECK(ev->status == -ETIMEDOUT);
		rdma_ack_cm_event(ev);
	}
	double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	CHECK(ms >= 300); /* not before the deadline */
	client_free(&c);
	close(fd);
}

int main(void)
{
	/* before the library reads its configuration */
	setenv("XSOCK_MPA_TIMEOUT_MS", "400", 1);

	lport = cm_listen(&lch, &lid);

	test_accept_and_send();
	test_reject();
	test_no_listener();
	test_listen_late();
	test_listen_again();
	test_accept_null();
	test_sync_client();
	test_mpa_timeout();

	CHECK(rdma_destroy_id(lid) == 0);
	rdma_destroy_event_channel(lch);
	return xs_test_result();
}
