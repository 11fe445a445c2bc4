/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* How an xsock connection ends, seen by a raw TCP peer on loopback
 * (verbs/xs_close.c: delayed FIN and lingering close):
 *
 *   linger:   the QP and id are destroyed before the peer's FIN; what the
 *             peer still sends is read and dropped, and the socket closes
 *             at the peer's FIN.  Without it the kernel answers the data
 *             with a RST (the peer sees ECONNRESET or EPIPE).
 *   delay:    XSOCK_FIN_DELAY_MS holds rdma_disconnect's FIN back without
 *             blocking the caller; the peer's own FIN ends the wait; a peer
 *             that answers RFC 7306 (another xsock) gets it at once.
 *   exit:     a process that exits right after closing waits for both (in
 *             a destructor), so the FIN is still late and the input still
 *             drained; without the wait the kernel closes at exit.
 *
 * Each check fails without the feature it names. */
#include "config.h"

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mpa/mpa_wire.h"
#include "tests/test-cm-util.h"

#define FIN_DELAY_MS 300
#define STR_(x) #x
#define STR(x) STR_(x)

static const char rep_hex[] = "4d50412049442052657020467261 6d65 10 02 0004 0001 0001";
/* the raw peer answers as another xsock would (MPA_FLAG_EXT_REP) */
static bool raw_as_xsock;

/* A TCP listener on 127.0.0.1 (kernel port). */
static int raw_listen(uint16_t *port)
{
	struct sockaddr_in a = cm_sin("127.0.0.1", 0);
	socklen_t l = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	REQUIRE(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	REQUIRE(listen(fd, 4) == 0 && getsockname(fd, (struct sockaddr *)&a, &l) == 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* Accept one connection and answer its MPA Request; -1 on failure. */
static int raw_accept_mpa(int lfd)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	uint8_t req[64], rep[64];
	size_t n = xs_hex(rep_hex, rep, sizeof(rep));
	int fd;

	if (raw_as_xsock)
		rep[16] |= MPA_FLAG_EXT_REP;
	if (poll(&p, 1, 5000) != 1 || (fd = accept(lfd, NULL, NULL)) < 0)
		return -1;
	if (cm_recv_full(fd, req, 20) && memcmp(req, "MPA ID Req Frame", 16) == 0 &&
	    cm_recv_full(fd, req + 20, (size_t)(req[18] << 8 | req[19])) &&
	    send(fd, rep, n, MSG_NOSIGNAL) == (ssize_t)n)
		return fd;
	close(fd);
	return -1;
}

/* Wait (5 s at most) for the peer's FIN: its time, or -1 (timeout, data, error). */
static double raw_wait_fin(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char b[64];

	if (poll(&p, 1, 5000) != 1 || recv(fd, b, sizeof(b), 0) != 0)
		return -1;
	return cm_now_ms();
}

/* Send octets that are not MPA (the closed side must not parse them). */
static bool raw_send_junk(int fd, size_t len)
{
	static char junk[65536];

	memset(junk, 0x5a, sizeof(junk));
	while (len > 0) {
		size_t n = len < sizeof(junk) ? len : sizeof(junk);
		ssize_t w = send(fd, junk, n, MSG_NOSIGNAL);
		if (w <= 0)
			return false;
		len -= (size_t)w;
	}
	return true;
}

/* After our FIN: did the connection end without a reset? */
static int raw_end_error(int fd)
{
	char b[16];
	int err = 0;
	socklen_t l = sizeof(err);

	shutdown(fd, SHUT_WR);
	usleep(100 * 1000); /* a RST, if one comes, is in by then */
	if (recv(fd, b, sizeof(b), MSG_DONTWAIT) < 0)
		return errno;
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
	return err;
}

struct side {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
};

static void side_connect(struct side *s, uint16_t port)
{
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 4, .max_recv_wr = 4,
					       .max_send_sge = 1, .max_recv_sge = 1 } };
	struct rdma_cm_event *ev;

	s->id = cm_resolved_id(&s->ch, NULL, port);
	s->cq = ibv_create_cq(s->id->verbs, 8, NULL, NULL, 0);
	REQUIRE(s->cq);
	a.send_cq = a.recv_cq = s->cq;
	REQUIRE(rdma_create_qp(s->id, NULL, &a) == 0);
	REQUIRE(rdma_connect(s->id, NULL) == 0);
	ev = cm_expect(s->ch, RDMA_CM_EVENT_ESTABLISHED, 5000, "established");
	REQUIRE(ev);
	rdma_ack_cm_event(ev);
}

static void side_free(struct side *s)
{
	struct rdma_cm_event *ev = cm_expect(s->ch, RDMA_CM_EVENT_DISCONNECTED, 3000, "disconnected");

	if (ev)
		rdma_ack_cm_event(ev);
	rdma_destroy_qp(s->id);
	ibv_destroy_cq(s->cq);
	rdma_destroy_id(s->id);
	rdma_destroy_event_channel(s->ch);
}

/* exit: a child process connects, disconnects, frees and exits at once. */
static void test_exit(void)
{
	uint16_t port;
	int lfd = raw_listen(&port), fds[2];
	double t0 = 0;

	REQUIRE(pipe(fds) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct side s;
		close(fds[0]);
		side_connect(&s, port);
		t0 = cm_now_ms();
		rdma_disconnect(s.id);
		side_free(&s);
		if (write(fds[1], &t0, sizeof(t0)) != sizeof(t0))
			_exit(3);
		exit(xs_test_result()); /* destructors run: the engine's exit wait */
	}
	close(fds[1]);
	int fd = raw_accept_mpa(lfd);
	CHECK(fd >= 0);
	if (fd >= 0) {
		double t_fin = raw_wait_fin(fd);
		CHECK(read(fds[0], &t0, sizeof(t0)) == sizeof(t0));
		CHECK(t_fin > 0 && t_fin - t0 >= FIN_DELAY_MS * 0.8);
		/* the child is still there, lingering: it takes this and goes
		 * at our FIN */
		CHECK(raw_send_junk(fd, 256 * 1024));
		CHECK(waitpid(pid, NULL, WNOHANG) == 0);
		int err = raw_end_error(fd);
		CHECK(err == 0);
		printf("exit: FIN %.0f ms after rdma_disconnect; end: %s\n", t_fin - t0,
		       err ? strerror(err) : "clean");
		close(fd);
	}
	int st = -1;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(fds[0]);
	close(lfd);
}

struct raw_job {
	int lfd, fd;
	int go[2]; /* the xsock side writes its rdma_disconnect time when done */
	bool peer_fin_first;
	double t0, t_fin;
	int err;
};

static void *raw_job_run(void *arg)
{
	struct raw_job *j = arg;

	j->fd = raw_accept_mpa(j->lfd);
	if (j->fd < 0 || read(j->go[0], &j->t0, sizeof(j->t0)) != sizeof(j->t0))
		return NULL;
	if (j->peer_fin_first) {
		shutdown(j->fd, SHUT_WR);
		j->t_fin = raw_wait_fin(j->fd);
		return NULL;
	}
	j->err = raw_send_junk(j->fd, 256 * 1024) ? 0 : EPIPE;
	j->t_fin = raw_wait_fin(j->fd);
	if (!j->err)
		j->err = raw_end_error(j->fd);
	return NULL;
}

/* linger and delay: the QP and id are gone before the peer's FIN, the
 * peer sends more, and the FIN still comes late and the end is clean.
 * peer_fin_first: the peer closes first and our FIN follows at once. */
static void test_close(bool peer_fin_first)
{
	struct raw_job j = { .fd = -1, .peer_fin_first = peer_fin_first };
	struct side s;
	uint16_t port;
	pthread_t t;

	j.lfd = raw_listen(&port);
	REQUIRE(pipe(j.go) == 0);
	REQUIRE(pthread_create(&t, NULL, raw_job_run, &j) == 0);
	side_connect(&s, port);
	double t0 = cm_now_ms();
	CHECK(rdma_disconnect(s.id) == 0);
	if (peer_fin_first) {
		CHECK(write(j.go[1], &t0, sizeof(t0)) == sizeof(t0));
		pthread_join(t, NULL);
		side_free(&s);
		CHECK(j.t_fin > 0 && j.t_fin - t0 < FIN_DELAY_MS * 0.8);
		printf("peer first: our FIN %.0f ms after rdma_disconnect\n", j.t_fin - t0);
	} else {
		side_free(&s);
		double t1 = cm_now_ms();
		CHECK(t1 - t0 < FIN_DELAY_MS * 0.8); /* the delay is not the caller's */
		CHECK(write(j.go[1], &t0, sizeof(t0)) == sizeof(t0));
		pthread_join(t, NULL);
		if (raw_as_xsock) /* no delay for another xsock */
			CHECK(j.t_fin > 0 && j.t_fin - t0 < FIN_DELAY_MS * 0.8);
		else
			CHECK(j.t_fin > 0 && j.t_fin - t0 >= FIN_DELAY_MS * 0.8);
		CHECK(j.err == 0);
		printf("linger: freed in %.1f ms, FIN %.0f ms after rdma_disconnect; end: %s\n",
		       t1 - t0, j.t_fin - t0, j.err ? strerror(j.err) : "clean");
	}
	if (j.fd >= 0)
		close(j.fd);
	close(j.go[0]);
	close(j.go[1]);
	close(j.lfd);
}

int main(void)
{
	setenv("XSOCK_FIN_DELAY_MS", STR(FIN_DELAY_MS), 1);
	test_exit(); /* first: the child's engine is the first of its process */
	test_close(false);
	test_close(true);
	raw_as_xsock = true;
	test_close(false);
	return xs_test_result();
}
