/* The two pauses the siw interop matrix needs (docs/interop.md), measured by
 * a raw MPA peer on loopback:
 *
 *   XSOCK_MPA_SETTLE_MS: Linux siw 6.1 is not ready for an FPDU right behind
 *   the MPA Reply.  As initiator it fails the connection (EPROTO) when FPDU
 *   bytes already follow the Reply it reads; as responder it does not read
 *   an FPDU that arrives before its QP owns the socket.  So an xsock
 *   responder's rdma_accept returns only SETTLE ms after the Reply (a Send
 *   posted right after it arrives that much later, never in the same read),
 *   and an xsock initiator's first FPDU leaves SETTLE ms after the Reply.
 *
 *   XSOCK_CONNECT_DELAY_MS: rdma_connect starts its TCP connect only after
 *   that long (perftest -R against a server that listens again late).
 *
 * Each check fails without the option: the Send then follows the Reply
 * within a few milliseconds. */
#include "config.h"

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/test-cm-util.h"

#define SETTLE_MS 400
#define DELAY_MS 300
#define STR_(x) #x
#define STR(x) STR_(x)

/* MPA rev 2 with the RFC 6581 header (flag 0x10), IRD = ORD = 1 */
static const char req_hex[] = "4d50412049442052657120467261 6d65 10 02 0004 0001 0001";
static const char rep_hex[] = "4d50412049442052657020467261 6d65 10 02 0004 0001 0001";

/* What the raw peer saw. */
struct raw {
	int fd; /* responder case: the connected socket; initiator case: the listener */
	bool ok;
	bool extra_behind_reply; /* FPDU bytes already there when the Reply was read */
	double t_conn, t_reply, t_fpdu;
};

/* After the MPA exchange: is anything behind it already, and when does the
 * first FPDU byte come? */
static void raw_first_fpdu(struct raw *r, int fd)
{
	uint8_t b;

	r->extra_behind_reply = recv(fd, &b, 1, MSG_DONTWAIT | MSG_PEEK) == 1;
	r->ok = cm_recv_full(fd, &b, 1);
	r->t_fpdu = cm_now_ms();
}

/* Raw initiator against an xsock listener: Request out, Reply in, then wait
 * for the responder's first FPDU. */
static void *raw_initiator(void *arg)
{
	struct raw *r = arg;
	uint8_t req[64], rep[64];
	size_t n = xs_hex(req_hex, req, sizeof(req));

	if (send(r->fd, req, n, MSG_NOSIGNAL) != (ssize_t)n || !cm_recv_full(r->fd, rep, 20) ||
	    memcmp(rep, "MPA ID Rep Frame", 16) != 0 ||
	    !cm_recv_full(r->fd, rep + 20, (size_t)(rep[18] << 8 | rep[19])))
		return NULL;
	r->t_reply = cm_now_ms();
	raw_first_fpdu(r, r->fd);
	return NULL;
}

/* Raw responder: accept, Request in, Reply out, then wait for the xsock
 * initiator's first FPDU. */
static void *raw_responder(void *arg)
{
	struct raw *r = arg;
	struct pollfd p = { .fd = r->fd, .events = POLLIN };
	uint8_t req[64], rep[64];
	size_t n = xs_hex(rep_hex, rep, sizeof(rep));
	int fd;

	if (poll(&p, 1, 5000) != 1 || (fd = accept(r->fd, NULL, NULL)) < 0)
		return NULL;
	r->t_conn = cm_now_ms();
	if (cm_recv_full(fd, req, 20) && memcmp(req, "MPA ID Req Frame", 16) == 0 &&
	    cm_recv_full(fd, req + 20, (size_t)(req[18] << 8 | req[19])) &&
	    send(fd, rep, n, MSG_NOSIGNAL) == (ssize_t)n) {
		r->t_reply = cm_now_ms();
		raw_first_fpdu(r, fd);
	}
	close(fd);
	return NULL;
}

struct side {
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char buf[8];
};

static void side_qp(struct side *s, struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 4, .max_recv_wr = 4,
					       .max_send_sge = 1, .max_recv_sge = 1 } };

	s->id = id;
	s->cq = ibv_create_cq(id->verbs, 8, NULL, NULL, 0);
	REQUIRE(s->cq);
	a.send_cq = a.recv_cq = s->cq;
	REQUIRE(rdma_create_qp(id, NULL, &a) == 0);
	s->mr = ibv_reg_mr(id->pd, s->buf, sizeof(s->buf), IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(s->mr);
}

static void side_send(struct side *s)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf, .length = sizeof(s->buf),
			       .lkey = s->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	CHECK(ibv_post_send(s->id->qp, &wr, &bad) == 0);
}

/* Disconnect, take the DISCONNECTED event (bounded), free everything. */
static void side_free(struct side *s, struct rdma_event_channel *ch)
{
	struct rdma_cm_event *ev;

	rdma_disconnect(s->id);
	while (cm_readable(ch, 3000) && rdma_get_cm_event(ch, &ev) == 0) {
		bool disc = ev->event == RDMA_CM_EVENT_DISCONNECTED;
		rdma_ack_cm_event(ev);
		if (disc)
			break;
	}
	ibv_dereg_mr(s->mr);
	rdma_destroy_qp(s->id);
	ibv_destroy_cq(s->cq);
	rdma_destroy_id(s->id);
}

static void test_responder(void)
{
	struct rdma_event_channel *lch;
	struct rdma_cm_id *lid;
	struct rdma_cm_event *ev;
	struct raw r = { .fd = -1 };
	struct side s = { 0 };
	struct sockaddr_in a = cm_sin("127.0.0.1", cm_listen(&lch, &lid));
	pthread_t t;

	r.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	REQUIRE(r.fd >= 0 && connect(r.fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	REQUIRE(pthread_create(&t, NULL, raw_initiator, &r) == 0);
	ev = cm_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000, "request");
	REQUIRE(ev);
	side_qp(&s, ev->id);
	double t0 = cm_now_ms();
	CHECK(rdma_accept(s.id, NULL) == 0);
	double t1 = cm_now_ms();
	rdma_ack_cm_event(ev);
	side_send(&s); /* at once: only the settle pause separates it from the Reply */
	pthread_join(t, NULL);
	CHECK(r.ok);
	CHECK(t1 - t0 >= SETTLE_MS);
	CHECK(!r.extra_behind_reply);
	/* the peer's clock starts when it has read the Reply, a little after
	 * it was sent; a loaded machine may delay that read */
	CHECK(r.t_fpdu - r.t_reply >= SETTLE_MS / 2);
	printf("responder: rdma_accept %.0f ms, first FPDU %.0f ms after the Reply\n", t1 - t0,
	       r.t_fpdu - r.t_reply);
	ev = cm_expect(lch, RDMA_CM_EVENT_ESTABLISHED, 5000, "established");
	if (ev)
		rdma_ack_cm_event(ev);
	close(r.fd);
	side_free(&s, lch);
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(lch);
}

static void test_initiator(void)
{
	struct sockaddr_in a = cm_sin("127.0.0.1", 0);
	socklen_t l = sizeof(a);
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct raw r = { .fd = -1 };
	struct side s = { 0 };
	pthread_t t;

	r.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	REQUIRE(r.fd >= 0 && bind(r.fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	REQUIRE(listen(r.fd, 4) == 0 && getsockname(r.fd, (struct sockaddr *)&a, &l) == 0);
	side_qp(&s, cm_resolved_id(&ch, NULL, ntohs(a.sin_port)));
	REQUIRE(pthread_create(&t, NULL, raw_responder, &r) == 0);
	double t0 = cm_now_ms();
	CHECK(rdma_connect(s.id, NULL) == 0);
	ev = cm_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000, "established");
	if (ev) {
		rdma_ack_cm_event(ev);
		side_send(&s);
	}
	pthread_join(t, NULL);
	CHECK(r.ok);
	CHECK(r.t_conn - t0 >= DELAY_MS);
	CHECK(!r.extra_behind_reply);
	CHECK(r.t_fpdu - r.t_reply >= SETTLE_MS / 2);
	printf("initiator: TCP connect %.0f ms after rdma_connect, first FPDU %.0f ms after the Reply\n",
	       r.t_conn - t0, r.t_fpdu - r.t_reply);
	side_free(&s, ch);
	rdma_destroy_event_channel(ch);
	close(r.fd);
}

int main(void)
{
	/* before the library reads its configuration */
	setenv("XSOCK_MPA_SETTLE_MS", STR(SETTLE_MS), 1);
	setenv("XSOCK_CONNECT_DELAY_MS", STR(DELAY_MS), 1);
	test_responder();
	test_initiator();
	return xs_test_result();
}
