/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* rdma_cm over RoCE v2 through the built library (XSOCK_TRANSPORT=roce: the
 * CM's device is xsock_roce0; the verbs device list is unchanged):
 *   - connect/accept on 127.0.0.1 with private data both ways (56 octets in
 *     the REQ after rdma_cm's header, 196 in the REP), the IRD/ORD in the
 *     events, a Send across, rdma_disconnect: DISCONNECTED on both sides,
 *     then TIMEWAIT_EXIT;
 *   - rdma_reject with private data: REJECTED, status 28 (consumer defined);
 *   - nobody listening: REJECTED, status 8 (invalid service ID);
 *   - private data longer than the REQ/REP take: EINVAL; a second listener
 *     on a port: EADDRINUSE, but an IPv6 one with AFONLY beside an IPv4
 *     one is fine;
 *   - the same between two processes (a fork child listens): the MADs reach
 *     their owner whichever process's socket on port 4791 gets them; the
 *     first child listens on 40 more ports after its own (every listener's
 *     sockets are polled);
 *   - a process that exits with its connection up (no rdma_disconnect, no
 *     destroy) disconnects it as the kernel does when the rdma_cm file
 *     closes: the peer sees DISCONNECTED (the DREQ sent at exit). */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "tests/xs_test.h"

#define PORT_BASE 17480

/* The next event on ch within 10 s: its type and status (acked). */
static int next_ev(struct rdma_event_channel *ch, struct rdma_cm_event **out)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };

	if (poll(&p, 1, 10000) != 1)
		return -1;
	return rdma_get_cm_event(ch, out);
}

static int expect(struct rdma_event_channel *ch, enum rdma_cm_event_type t, int status,
		  struct rdma_cm_event **keep)
{
	struct rdma_cm_event *e;

	if (next_ev(ch, &e)) {
		fprintf(stderr, "no event (want %s)\n", rdma_event_str(t));
		xs_test_failures++;
		return -1;
	}
	if (e->event != t || e->status != status) {
		fprintf(stderr, "want %s status %d, got %s status %d\n", rdma_event_str(t),
			status, rdma_event_str(e->event), e->status);
		xs_test_failures++;
		rdma_ack_cm_event(e);
		return -1;
	}
	if (keep)
		*keep = e;
	else
		rdma_ack_cm_event(e);
	return 0;
}

static struct sockaddr_in lo(int port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	return s;
}

static struct ibv_qp *make_qp(struct rdma_cm_id *id, struct ibv_pd **pd)
{
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 4, .max_recv_wr = 4,
					       .max_send_sge = 1, .max_recv_sge = 1 } };

	*pd = ibv_alloc_pd(id->verbs);
	if (!*pd || rdma_create_qp(id, *pd, &a))
		return NULL;
	return id->qp;
}

/* The active side: connect to port, expect ESTABLISHED (or REJECTED with
 * want_reject), send one message, disconnect. */
static void active(int port, int want_reject)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct sockaddr_in dst = lo(port);
	struct rdma_conn_param cp = { .responder_resources = 3, .initiator_depth = 2,
				      .retry_count = 7, .rnr_retry_count = 7 };
	uint8_t pd[57], buf[64] = "hello over roce";
	struct rdma_cm_event *e;
	struct ibv_pd *ibpd;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	int i;

	REQUIRE(ch && rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 1000) == 0);
	expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL);
	REQUIRE(rdma_resolve_route(id, 1000) == 0);
	expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL);
	REQUIRE(make_qp(id, &ibpd));
	for (i = 0; i < 57; i++)
		pd[i] = (uint8_t)(i + 1);
	cp.private_data = pd;
	cp.private_data_len = 57; /* one more than the REQ takes */
	errno = 0;
	CHECK(rdma_connect(id, &cp) == -1 && errno == EINVAL);
	cp.private_data_len = 56;
	REQUIRE(rdma_connect(id, &cp) == 0);
	if (want_reject) {
		if (expect(ch, RDMA_CM_EVENT_REJECTED, want_reject, &e) == 0) {
			if (want_reject == 28)
				CHECK(e->param.conn.private_data_len >= 3 &&
				      !memcmp(e->param.conn.private_data, "no!", 3));
			rdma_ack_cm_event(e);
		}
		goto out;
	}
	if (expect(ch, RDMA_CM_EVENT_ESTABLISHED, 0, &e) == 0) {
		const uint8_t *p = e->param.conn.private_data;

		CHECK_EQ_U(e->param.conn.private_data_len, 196);
		CHECK(p && p[0] == 0xa5 && p[195] == 0x5a);
		CHECK_EQ_U(e->param.conn.responder_resources, 2); /* the REP's ORD */
		rdma_ack_cm_event(e);
	}
	mr = ibv_reg_mr(ibpd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(mr);
	{
		struct ibv_sge s = { .addr = (uintptr_t)buf, .length = 16, .lkey = mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &s, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
		struct ibv_send_wr *bad;
		int n = 0, k;

		REQUIRE(ibv_post_send(id->qp, &wr, &bad) == 0);
		for (k = 0; k < 5000 && n == 0; k++) {
			n = ibv_poll_cq(id->send_cq, 1, &wc);
			if (!n)
				usleep(1000);
		}
		if (n != 1 || wc.status != IBV_WC_SUCCESS)
			fprintf(stderr, "send: n %d status %s\n", n,
				n == 1 ? ibv_wc_status_str(wc.status) : "-");
		CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7);
	}
	/* the passive side disconnects first: DISCONNECTED here */
	expect(ch, RDMA_CM_EVENT_DISCONNECTED, 0, NULL);
	CHECK_EQ_U(rdma_disconnect(id), 0);
	expect(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0, NULL);
	ibv_dereg_mr(mr);
out:
	rdma_destroy_qp(id);
	ibv_dealloc_pd(ibpd);
	CHECK_EQ_U(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

enum passive_end { END_DISCONNECT, END_REJECT, END_EXIT };
static int extra_listeners; /* passive() listens on this many more ports */

/* The passive side: accept one connection (or reject it), receive one
 * message, disconnect (END_EXIT: exit(3) with the connection up).
 * ready: written once listening (-1: none). */
static void passive(int port, enum passive_end how, int ready)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *l, *l2, *c;
	struct sockaddr_in a = lo(port);
	struct rdma_cm_event *e;
	uint8_t rep[197], buf[64] = { 0 };
	struct rdma_conn_param cp = { .responder_resources = 2, .initiator_depth = 2 };
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	int i;

	REQUIRE(ch && rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) == 0);
	REQUIRE(rdma_bind_addr(l, (struct sockaddr *)&a) == 0);
	REQUIRE(rdma_listen(l, 4) == 0);
	/* more listeners after it (a server of many ports): the CM engine
	 * once polled the sockets of the newest 30 only */
	for (i = 0; i < extra_listeners; i++) {
		struct sockaddr_in6 x = { .sin6_family = AF_INET6,
					  .sin6_port = htons((uint16_t)(port + 1000 + i)),
					  .sin6_addr = IN6ADDR_ANY_INIT };
		struct rdma_cm_id *xl;

		REQUIRE(rdma_create_id(ch, &xl, NULL, RDMA_PS_TCP) == 0);
		REQUIRE(rdma_bind_addr(xl, (struct sockaddr *)&x) == 0);
		REQUIRE(rdma_listen(xl, 4) == 0); /* (freed at exit) */
	}
	REQUIRE(rdma_create_id(ch, &l2, NULL, RDMA_PS_TCP) == 0);
	REQUIRE(rdma_bind_addr(l2, (struct sockaddr *)&a) == 0 || errno == EADDRINUSE);
	errno = 0;
	CHECK(rdma_listen(l2, 4) == -1 && errno == EADDRINUSE);
	rdma_destroy_id(l2);
	/* IPv6 on the same port: with AFONLY beside the IPv4 listener (as
	 * TCP: redis-server listens on 0.0.0.0 and [::] V6ONLY); without it
	 * an IPv6 listener takes IPv4 too: EADDRINUSE */
	{
		struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
					   .sin6_addr = IN6ADDR_ANY_INIT };
		int one = 1;

		REQUIRE(rdma_create_id(ch, &l2, NULL, RDMA_PS_TCP) == 0);
		CHECK_EQ_U(rdma_set_option(l2, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one,
					   sizeof(one)), 0);
		CHECK_EQ_U(rdma_bind_addr(l2, (struct sockaddr *)&a6), 0);
		CHECK_EQ_U(rdma_listen(l2, 4), 0);
		rdma_destroy_id(l2);
		REQUIRE(rdma_create_id(ch, &l2, NULL, RDMA_PS_TCP) == 0);
		errno = 0;
		CHECK(rdma_bind_addr(l2, (struct sockaddr *)&a6) == -1 ? errno == EADDRINUSE
								       : rdma_listen(l2, 4) == -1 &&
										 errno == EADDRINUSE);
		rdma_destroy_id(l2);
	}
	if (ready >= 0)
		CHECK(write(ready, "r", 1) == 1);
	if (expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 0, &e))
		return;
	c = e->id;
	CHECK_EQ_U(e->param.conn.private_data_len, 56);
	CHECK(e->param.conn.private_data &&
	      ((const uint8_t *)e->param.conn.private_data)[0] == 1 &&
	      ((const uint8_t *)e->param.conn.private_data)[55] == 56);
	/* the initiator's numbers as the acceptor should use them */
	CHECK_EQ_U(e->param.conn.responder_resources, 2);
	CHECK_EQ_U(e->param.conn.initiator_depth, 3);
	rdma_ack_cm_event(e);
	if (how == END_REJECT) {
		CHECK_EQ_U(rdma_reject(c, "no!", 3), 0);
		rdma_destroy_id(c);
		goto out;
	}
	REQUIRE(make_qp(c, &pd));
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(mr);
	{
		struct ibv_sge s = { .addr = (uintptr_t)buf, .length = sizeof(buf), .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 9, .sg_list = &s, .num_sge = 1 }, *bad;

		REQUIRE(ibv_post_recv(c->qp, &wr, &bad) == 0);
	}
	memset(rep, 0, sizeof(rep));
	rep[0] = 0xa5;
	rep[195] = 0x5a;
	cp.private_data = rep;
	cp.private_data_len = 197;
	errno = 0;
	CHECK(rdma_accept(c, &cp) == -1 && errno == EINVAL);
	cp.private_data_len = 196;
	REQUIRE(rdma_accept(c, &cp) == 0);
	expect(ch, RDMA_CM_EVENT_ESTABLISHED, 0, NULL);
	for (i = 0; i < 5000; i++) {
		if (ibv_poll_cq(c->recv_cq, 1, &wc) == 1)
			break;
		usleep(1000);
	}
	CHECK(i < 5000 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 16 &&
	      !strcmp((char *)buf, "hello over roce"));
	if (how == END_EXIT)
		exit(xs_test_result()); /* the library's exit handler disconnects */
	CHECK_EQ_U(rdma_disconnect(c), 0);
	expect(ch, RDMA_CM_EVENT_DISCONNECTED, 0, NULL);
	rdma_destroy_qp(c);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	rdma_destroy_id(c);
out:
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

int main(void)
{
	struct ibv_device **l;
	struct ibv_context **devs;
	int n = -1, p[2], st = 0;
	pid_t pid;
	char c;

	xs_test_seed(1);
	setenv("XSOCK_TRANSPORT", "roce", 1); /* before the library's first read */
	devs = rdma_get_devices(&n);
	REQUIRE(devs);
	CHECK_EQ_U(n, 1);
	REQUIRE(devs[0]);
	CHECK(strcmp(ibv_get_device_name(devs[0]->device), "xsock_roce0") == 0);
	CHECK_EQ_U(devs[0]->device->transport_type, IBV_TRANSPORT_IB);
	rdma_free_devices(devs);
	l = ibv_get_device_list(&n);
	REQUIRE(l);
	CHECK_EQ_U(n, 2);
	CHECK(strcmp(ibv_get_device_name(l[0]), "xsock0") == 0);
	ibv_free_device_list(l);

	/* nobody listens: REJ invalid service ID */
	active(PORT_BASE + (getpid() % 97) * 4, 8);

	/* two processes: the child listens (and accepts, rejects, exits) */
	for (int round = 0; round < 3; round++) {
		int port = PORT_BASE + 1 + (getpid() % 97) * 4 + round;

		REQUIRE(pipe(p) == 0);
		pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0) {
			close(p[0]);
			extra_listeners = round == 0 ? 40 : 0;
			passive(port, (enum passive_end)round, p[1]);
			_exit(xs_test_result());
		}
		close(p[1]);
		CHECK(read(p[0], &c, 1) == 1);
		close(p[0]);
		active(port, round == 1 ? 28 : 0);
		REQUIRE(waitpid(pid, &st, 0) == pid);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	return xs_test_result();
}
