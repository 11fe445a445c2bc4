/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* What an xsock does for a peer that is not another xsock, right after the
 * MPA exchange (Linux siw 6.1, docs/interop.md), seen by a raw MPA peer on
 * loopback, with the defaults a user gets:
 *
 *   responder: siw as initiator fails the connection (EPROTO) when FPDU
 *   octets already follow the Reply it reads.  rdma_accept returns at
 *   once, but nothing is sent before the initiator's first octets or
 *   XS_SETTLE_MS after the Reply, so a Send posted right after it never
 *   shares that read.
 *
 *   initiator: siw as responder does not read an FPDU that arrives before
 *   its QP owns the socket until more octets arrive.  The xsock initiator
 *   sends zero-length RDMA Writes after the Reply, 5 ms apart and doubling.
 *
 * A peer that answers RFC 7306 in the MPA exchange (another xsock) gets
 * neither.  The knobs themselves (XSOCK_MPA_SETTLE_MS, which bounds the
 * responder's wait, and XSOCK_CONNECT_DELAY_MS) are checked in a child
 * started with them set ("knobs"). */
#include "config.h"

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mpa/mpa_wire.h"
#include "verbs/xs_internal.h"
#include "tests/test-cm-util.h"

#define KNOB_SETTLE_MS 3000
#define KNOB_DELAY_MS 300
#define STR_(x) #x
#define STR(x) STR_(x)

/* MPA rev 2 with the RFC 6581 header, IRD = ORD = 1; byte 16 (the flags)
 * is set per case: ENHANCED, plus EXT_REQ / EXT_REP for an xsock peer */
static const char req_hex[] = "4d50412049442052657120467261 6d65 10 02 0004 0001 0001";
static const char rep_hex[] = "4d50412049442052657020467261 6d65 10 02 0004 0001 0001";
/* a zero-length RDMA Write, STag 1, TO 0, no CRC (what siw's Write RTR is) */
static const char zwrite_hex[] = "000e c140 00000001 0000000000000000 00000000";

/* What the raw peer saw. */
struct raw {
	int fd; /* responder case: the connected socket; initiator case: the listener */
	bool xsock; /* answer as another xsock would (EXT_REQ / EXT_REP) */
	bool talk_first; /* initiator: send a zero-length Write right after the Reply */
	bool answer; /* responder: send a zero-length Write after the first FPDU */
	bool ok;
	bool extra_behind_reply; /* FPDU bytes already there when the Reply was read */
	double t_conn, t_reply, t_fpdu;
	int fpdus, kicks, first_op; /* after the Reply: FPDUs, zero-length Writes, first opcode */
};

/* One FPDU (no CRC, no Markers): its DDP/RDMAP control bytes and length. */
static bool raw_fpdu(int fd, uint8_t ctl[2], size_t *ulpdu, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint8_t b[2048];

	if (poll(&p, 1, ms) != 1 || !cm_recv_full(fd, b, 2))
		return false;
	*ulpdu = (size_t)(b[0] << 8 | b[1]);
	size_t rest = ((*ulpdu + 2 + 3) & ~(size_t)3) - 2 + 4;
	if (rest > sizeof(b) || !cm_recv_full(fd, b, rest))
		return false;
	ctl[0] = b[0];
	ctl[1] = b[1];
	return true;
}

/* After the MPA exchange: is anything behind it already, when does the
 * first FPDU come, and what follows it for watch_ms? */
static void raw_watch(struct raw *r, int fd, int watch_ms)
{
	uint8_t b, ctl[2];
	size_t len;

	r->extra_behind_reply = recv(fd, &b, 1, MSG_DONTWAIT | MSG_PEEK) == 1;
	r->ok = raw_fpdu(fd, ctl, &len, 5000);
	r->t_fpdu = cm_now_ms();
	if (!r->ok)
		return;
	r->first_op = ctl[1] & 0x0f;
	r->fpdus = 1;
	if (r->answer) {
		uint8_t zw[32];
		size_t zn = xs_hex(zwrite_hex, zw, sizeof(zw));
		if (send(fd, zw, zn, MSG_NOSIGNAL) != (ssize_t)zn)
			r->ok = false;
	}
	double end = r->t_fpdu + watch_ms;
	while (cm_now_ms() < end && raw_fpdu(fd, ctl, &len, (int)(end - cm_now_ms()) + 1)) {
		r->fpdus++;
		/* tagged, last, RDMA Write (opcode 0), no payload */
		if ((ctl[0] & 0xc0) == 0xc0 && (ctl[1] & 0x0f) == 0 && len == 14)
			r->kicks++;
	}
}

/* Raw initiator against an xsock listener: Request out, Reply in, then
 * (talk_first) a zero-length Write, then the responder's FPDUs. */
static void *raw_initiator(void *arg)
{
	struct raw *r = arg;
	uint8_t req[64], rep[64], zw[32];
	size_t n = xs_hex(req_hex, req, sizeof(req)), zn = xs_hex(zwrite_hex, zw, sizeof(zw));

	if (r->xsock)
		req[16] |= MPA_FLAG_EXT_REQ;
	if (send(r->fd, req, n, MSG_NOSIGNAL) != (ssize_t)n || !cm_recv_full(r->fd, rep, 20) ||
	    memcmp(rep, "MPA ID Rep Frame", 16) != 0 ||
	    !cm_recv_full(r->fd, rep + 20, (size_t)(rep[18] << 8 | rep[19])))
		return NULL;
	r->t_reply = cm_now_ms();
	if (r->talk_first && send(r->fd, zw, zn, MSG_NOSIGNAL) != (ssize_t)zn)
		return NULL;
	raw_watch(r, r->fd, 0);
	return NULL;
}

/* Raw responder: accept, Request in, Reply out, then the xsock initiator's
 * FPDUs for 1500 ms after its first. */
static void *raw_responder(void *arg)
{
	struct raw *r = arg;
	struct pollfd p = { .fd = r->fd, .events = POLLIN };
	uint8_t req[64], rep[64];
	size_t n = xs_hex(rep_hex, rep, sizeof(rep));
	int fd;

	if (r->xsock)
		rep[16] |= MPA_FLAG_EXT_REP;
	if (poll(&p, 1, 5000) != 1 || (fd = accept(r->fd, NULL, NULL)) < 0)
		return NULL;
	r->t_conn = cm_now_ms();
	if (cm_recv_full(fd, req, 20) && memcmp(req, "MPA ID Req Frame", 16) == 0 &&
	    cm_recv_full(fd, req + 20, (size_t)(req[18] << 8 | req[19])) &&
	    send(fd, rep, n, MSG_NOSIGNAL) == (ssize_t)n) {
		r->t_reply = cm_now_ms();
		raw_watch(r, fd, 1500);
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

/* xsock responder, raw initiator; returns how long rdma_accept took (the
 * first FPDU's delay is in r). */
static double run_responder(struct raw *r, const char *what)
{
	struct rdma_event_channel *lch;
	struct rdma_cm_id *lid;
	struct rdma_cm_event *ev;
	struct side s = { 0 };
	struct sockaddr_in a = cm_sin("127.0.0.1", cm_listen(&lch, &lid));
	pthread_t t;

	r->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	REQUIRE(r->fd >= 0 && connect(r->fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	REQUIRE(pthread_create(&t, NULL, raw_initiator, r) == 0);
	ev = cm_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000, "request");
	REQUIRE(ev);
	side_qp(&s, ev->id);
	double t0 = cm_now_ms();
	CHECK(rdma_accept(s.id, NULL) == 0);
	double t1 = cm_now_ms();
	rdma_ack_cm_event(ev);
	side_send(&s); /* at once: only the settle wait separates it from the Reply */
	pthread_join(t, NULL);
	CHECK(r->ok);
	CHECK(r->first_op == 3); /* our Send; a zero-length Write draws no Terminate */
	printf("responder, %s: rdma_accept %.0f ms, first FPDU %.0f ms after the Reply\n", what,
	       t1 - t0, r->t_fpdu - r->t_reply);
	ev = cm_expect(lch, RDMA_CM_EVENT_ESTABLISHED, 5000, "established");
	if (ev)
		rdma_ack_cm_event(ev);
	close(r->fd);
	side_free(&s, lch);
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(lch);
	return t1 - t0;
}

/* xsock initiator, raw responder; returns when the TCP connect came,
 * counted from rdma_connect. */
static double run_initiator(struct raw *r, const char *what)
{
	struct sockaddr_in a = cm_sin("127.0.0.1", 0);
	socklen_t l = sizeof(a);
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct side s = { 0 };
	pthread_t t;

	r->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	REQUIRE(r->fd >= 0 && bind(r->fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	REQUIRE(listen(r->fd, 4) == 0 && getsockname(r->fd, (struct sockaddr *)&a, &l) == 0);
	side_qp(&s, cm_resolved_id(&ch, NULL, ntohs(a.sin_port)));
	REQUIRE(pthread_create(&t, NULL, raw_responder, r) == 0);
	double t0 = cm_now_ms();
	CHECK(rdma_connect(s.id, NULL) == 0);
	ev = cm_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000, "established");
	if (ev) {
		rdma_ack_cm_event(ev);
		side_send(&s);
	}
	pthread_join(t, NULL);
	CHECK(r->ok);
	CHECK(r->first_op == 3);
	printf("initiator, %s: %d FPDUs after the Send within 1.5 s, %d of them zero-length Writes\n",
	       what, r->fpdus - 1, r->kicks);
	side_free(&s, ch);
	rdma_destroy_event_channel(ch);
	close(r->fd);
	return r->t_conn - t0;
}

static void test_defaults(void)
{
	struct raw r = { .fd = -1 };

	/* a silent siw initiator: the whole settle wait, in the first send */
	run_responder(&r, "silent peer");
	CHECK(!r.extra_behind_reply);
	/* the peer's clock starts when it has read the Reply, a little after
	 * it was sent; a loaded machine may delay that read */
	CHECK(r.t_fpdu - r.t_reply >= XS_SETTLE_MS / 2);

	/* a siw responder: kicks after the Send (5, 10, 20 ... ms) */
	memset(&r, 0, sizeof(r));
	run_initiator(&r, "siw-like peer");
	CHECK(r.kicks >= 3);
	CHECK(r.kicks == r.fpdus - 1);

	/* a siw responder that answers: its socket has moved, kicks end (one
	 * may have crossed the answer) */
	memset(&r, 0, sizeof(r));
	r.answer = true;
	run_initiator(&r, "siw-like peer that answers");
	CHECK(r.kicks <= 1);

	/* another xsock: no kick */
	memset(&r, 0, sizeof(r));
	r.xsock = true;
	run_initiator(&r, "xsock peer");
	CHECK(r.kicks == 0 && r.fpdus == 1);
}

/* With XSOCK_MPA_SETTLE_MS=KNOB_SETTLE_MS and XSOCK_CONNECT_DELAY_MS set. */
static void test_knobs(void)
{
	struct raw r = { .fd = -1 };

	/* rdma_accept never waits; the initiator's first octets end the
	 * send's wait long before the bound */
	r.talk_first = true;
	CHECK(run_responder(&r, "peer talks first") < KNOB_SETTLE_MS / 2);
	CHECK(r.t_fpdu - r.t_reply < KNOB_SETTLE_MS / 2);
	/* a silent one: the whole bound, and still rdma_accept returns at once */
	memset(&r, 0, sizeof(r));
	CHECK(run_responder(&r, "silent peer, long bound") < KNOB_SETTLE_MS / 2);
	CHECK(r.t_fpdu - r.t_reply >= KNOB_SETTLE_MS / 2);
	/* an xsock initiator: no wait */
	memset(&r, 0, sizeof(r));
	r.xsock = true;
	CHECK(run_responder(&r, "xsock peer") < KNOB_SETTLE_MS / 2);
	CHECK(r.t_fpdu - r.t_reply < KNOB_SETTLE_MS / 2);
	/* rdma_connect's TCP connect leaves the delay later */
	memset(&r, 0, sizeof(r));
	r.xsock = true;
	CHECK(run_initiator(&r, "connect delay") >= KNOB_DELAY_MS);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "knobs") == 0) {
		test_knobs();
		return xs_test_result();
	}
	test_defaults();
	/* the knobs are read once per process: check them in a child */
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		setenv("XSOCK_MPA_SETTLE_MS", STR(KNOB_SETTLE_MS), 1);
		setenv("XSOCK_CONNECT_DELAY_MS", STR(KNOB_DELAY_MS), 1);
		execl("/proc/self/exe", argv[0], "knobs", (char *)NULL);
		_exit(127);
	}
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return xs_test_result();
}
