/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* libxsock's extended calls on IWARP_MODE sockets (loopback, one process):
 * registration and the descriptor exchange over the stream; RDMA Write
 * and RDMA Read of 1 B, 4 KiB, 1 MiB and 16 MiB at unaligned offsets, data
 * checked byte for byte and guard bytes on both sides untouched, with the
 * Write's completion followed by a stream message (ordering) or with
 * XSOCK_PLACED; asynchronous stream sends that return at once and complete
 * while the caller computes (the peer reads with plain read()), ordered
 * before a later write(); asynchronous receives and RDMA Reads completing
 * through epoll on xsock_comp_fd; the application's own work request on
 * xsock_qp; access violations (a Read of a write-only registration, a
 * Write into a read-only one) giving error completions, SO_ERROR and the
 * end of the stream; and argument errors. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "tests/xs_test.h"
#include "tests/xs_test_sock.h"

#define MIB (1024u * 1024)
#define GUARD 4096u
#define MAXLEN (16u * MIB)

static const char *volatile stage = "start";

static void on_alarm(int sig)
{
	(void)sig;
	const char *m = "test-xsock-ext: timeout in ";
	if (write(2, m, strlen(m)) < 0 || write(2, stage, strlen(stage)) < 0 || write(2, "\n", 1) < 0)
		_exit(1);
	_exit(1);
}

struct pair {
	int c, s; /* client (initiator of the one-sided operations) and server */
};

static void pair_open(struct pair *p)
{
	struct sockaddr_in a;
	int l = xs_sock_listen(1, &a);

	REQUIRE(l >= 0);
	p->c = xs_sock_connect(1, &a);
	REQUIRE(p->c >= 0);
	p->s = accept(l, NULL, NULL);
	REQUIRE(p->s >= 0);
	close(l);
}

static void pair_close(struct pair *p)
{
	CHECK(close(p->c) == 0);
	CHECK(close(p->s) == 0);
}

/* One completion within 10 s. */
static int wait_one(int fd, struct xsock_comp *c)
{
	return xsock_wait_comp(fd, c, 1, 10000);
}

/* The server registers buf and sends its descriptor over the stream; the
 * client reads and decodes it. */
static void send_desc(struct pair *p, struct xsock_mr *mr, struct xsock_rdesc *got)
{
	struct xsock_rdesc d, back;
	uint8_t wire[XSOCK_RDESC_LEN];

	REQUIRE(xsock_mr_desc(mr, &d) == 0);
	xsock_rdesc_encode(&d, wire);
	/* the wire form is big-endian whatever the host */
	CHECK_EQ_U(wire[0], (uint8_t)(d.addr >> 56));
	CHECK_EQ_U(wire[11], (uint8_t)d.stag);
	CHECK_EQ_U(wire[12], (uint8_t)(d.len >> 24));
	REQUIRE(xs_write_full(p->s, wire, sizeof(wire)) == 0);
	memset(wire, 0, sizeof(wire));
	REQUIRE(xs_read_full(p->c, wire, sizeof(wire)) == 0);
	REQUIRE(xsock_rdesc_decode(wire, &back) == 0);
	CHECK_EQ_U(back.addr, d.addr);
	CHECK_EQ_U(back.stag, d.stag);
	CHECK_EQ_U(back.len, d.len);
	*got = back;
}

static bool all_is(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

/* ---- RDMA Write and Read, 1 B .. 16 MiB ---------------------------------------- */

static void test_rdma_sizes(void)
{
	static const size_t sizes[] = { 1, 4096, MIB, MAXLEN };
	size_t blen = MAXLEN + 2 * GUARD + 64;
	uint8_t *local = malloc(blen), *target = malloc(blen);
	struct xsock_mr *lmr, *tmr;
	struct xsock_rdesc rd;
	struct xsock_comp c;
	struct pair p;

	REQUIRE(local && target);
	stage = "rdma: connect, register, exchange descriptors";
	pair_open(&p);
	REQUIRE(xsock_reg(p.c, local, blen, 0, &lmr) == 0);
	REQUIRE(xsock_reg(p.s, target, blen, XSOCK_ACCESS_REMOTE_READ | XSOCK_ACCESS_REMOTE_WRITE,
			  &tmr) == 0);
	send_desc(&p, tmr, &rd);
	CHECK_EQ_U(rd.len, blen);

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t len = sizes[i];
		size_t loff = GUARD + 3 + i, roff = GUARD + 5 + 2 * i; /* unaligned */
		char note;

		/* Write, then a stream message: the peer sees the data once it
		 * has read the message */
		stage = "rdma write";
		memset(target, 0xa5, blen);
		memset(local, 0x5a, blen);
		xs_rand_fill(local + loff, len);
		REQUIRE(xsock_rdma_write(p.c, lmr, loff, len, &rd, roff, 100 + i, 0) == 0);
		REQUIRE(wait_one(p.c, &c) == 1);
		CHECK_EQ_U(c.cookie, 100 + i);
		CHECK_EQ_U(c.op, XSOCK_OP_WRITE);
		CHECK_EQ_U(c.status, 0);
		CHECK_EQ_U(c.len, len);
		REQUIRE(write(p.c, "W", 1) == 1);
		REQUIRE(read(p.s, &note, 1) == 1 && note == 'W');
		CHECK(memcmp(target + roff, local + loff, len) == 0);
		CHECK(all_is(target, roff, 0xa5));
		CHECK(all_is(target + roff + len, blen - roff - len, 0xa5));

		/* Write with XSOCK_PLACED: complete means placed */
		stage = "rdma write placed";
		xs_rand_fill(local + loff, len);
		REQUIRE(xsock_rdma_write(p.c, lmr, loff, len, &rd, roff, 200 + i, XSOCK_PLACED) == 0);
		REQUIRE(wait_one(p.c, &c) == 1);
		CHECK_EQ_U(c.cookie, 200 + i);
		CHECK_EQ_U(c.status, 0);
		CHECK_EQ_U(c.len, len);
		CHECK(memcmp(target + roff, local + loff, len) == 0);
		CHECK(all_is(target + roff + len, blen - roff - len, 0xa5));

		/* Read: local guards untouched */
		stage = "rdma read";
		xs_rand_fill(target + roff, len);
		memset(local, 0x3c, blen);
		REQUIRE(xsock_rdma_read(p.c, lmr, loff, len, &rd, roff, 300 + i, 0) == 0);
		REQUIRE(wait_one(p.c, &c) == 1);
		CHECK_EQ_U(c.cookie, 300 + i);
		CHECK_EQ_U(c.op, XSOCK_OP_READ);
		CHECK_EQ_U(c.status, 0);
		CHECK_EQ_U(c.len, len);
		CHECK(memcmp(local + loff, target + roff, len) == 0);
		CHECK(all_is(local, loff, 0x3c));
		CHECK(all_is(local + loff + len, blen - loff - len, 0x3c));
		printf("rdma %zu B: write, placed write, read ok\n", len);
	}

	/* several Reads and Writes in flight at once (beyond ORD queues), in
	 * order; a write() after the Reads is held back until they completed */
	stage = "rdma pipeline";
	enum { NOPS = 40, CHUNK = 8192 };
	xs_rand_fill(target, NOPS * CHUNK);
	memset(local, 0, blen);
	for (unsigned i = 0; i < NOPS; i++)
		REQUIRE(xsock_rdma_read(p.c, lmr, (size_t)i * CHUNK, CHUNK, &rd, (size_t)i * CHUNK, i,
					0) == 0);
	REQUIRE(write(p.c, "R", 1) == 1);
	unsigned got = 0;
	while (got < NOPS) {
		struct xsock_comp cs[8];
		int n = xsock_wait_comp(p.c, cs, 8, 10000);
		REQUIRE(n > 0);
		for (int k = 0; k < n; k++) {
			CHECK_EQ_U(cs[k].cookie, got);
			CHECK_EQ_U(cs[k].status, 0);
			got++;
		}
	}
	CHECK(memcmp(local, target, NOPS * CHUNK) == 0);
	char note;
	REQUIRE(read(p.s, &note, 1) == 1 && note == 'R');
	CHECK(xsock_poll_comp(p.c, &c, 1) == 0);

	/* the registrations go, then the sockets */
	CHECK(xsock_dereg(lmr) == 0);
	CHECK(xsock_dereg(tmr) == 0);
	pair_close(&p);
	free(local);
	free(target);
}

/* ---- asynchronous sends overlapping computation ---------------------------------- */

#define ASYNC_N 8
#define ASYNC_LEN MIB

struct reader {
	int fd;
	uint8_t *buf;
	size_t want;
	atomic_size_t got;
	atomic_bool go;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;

	while (!atomic_load(&r->go))
		usleep(1000);
	while (atomic_load(&r->got) < r->want) {
		ssize_t n = read(r->fd, r->buf + r->got, r->want - r->got);
		if (n <= 0)
			break;
		atomic_fetch_add(&r->got, (size_t)n);
	}
	return NULL;
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000;
}

static void test_async_send(void)
{
	size_t total = (size_t)ASYNC_N * ASYNC_LEN;
	uint8_t *src = malloc(total), *dst = malloc(total + 3);
	struct reader r = { .buf = dst, .want = total + 3 };
	struct xsock_comp cs[ASYNC_N];
	struct xsock_mr *mr;
	struct pair p;
	pthread_t t;

	REQUIRE(src && dst);
	stage = "async: connect";
	pair_open(&p);
	r.fd = p.s;
	xs_rand_fill(src, total);
	REQUIRE(xsock_reg(p.c, src, total, 0, &mr) == 0);
	REQUIRE(pthread_create(&t, NULL, reader_main, &r) == 0);

	/* 8 MiB against a 512 KiB ring nobody reads yet: the calls return at
	 * once and most of the data waits for credits */
	stage = "async: post";
	uint64_t t0 = now_us();
	for (unsigned i = 0; i < ASYNC_N; i++)
		REQUIRE(xsock_send_async(p.c, mr, (size_t)i * ASYNC_LEN, ASYNC_LEN, i, 0) == 0);
	uint64_t post_us = now_us() - t0;
	int early = xsock_poll_comp(p.c, cs, ASYNC_N);
	CHECK(early >= 0 && early < ASYNC_N);
	printf("async: 8 x 1 MiB posted in %llu us, %d complete before the peer read\n",
	       (unsigned long long)post_us, early);

	/* compute while the peer reads: no call into the socket meanwhile,
	 * the progress thread moves the data */
	stage = "async: compute";
	atomic_store(&r.go, true);
	uint64_t acc = 0, rounds = 0, t1 = now_us();
	while (atomic_load(&r.got) < total && now_us() - t1 < 20000000u) {
		for (size_t k = 0; k < 4096; k++)
			acc = acc * 6364136223846793005ull + src[(k * 4099 + rounds) % total];
		rounds++;
	}
	CHECK_EQ_U(atomic_load(&r.got), total); /* all of it arrived while computing */
	printf("async: peer got %zu B during %llu rounds of computation (%llu us, acc %llx)\n",
	       (size_t)atomic_load(&r.got), (unsigned long long)rounds,
	       (unsigned long long)(now_us() - t1), (unsigned long long)acc);

	/* completions: every send, in order, whole */
	stage = "async: completions";
	int n = early > 0 ? early : 0;
	while (n < ASYNC_N) {
		int k = xsock_wait_comp(p.c, cs + n, ASYNC_N - n, 10000);
		REQUIRE(k > 0);
		n += k;
	}
	for (unsigned i = 0; i < ASYNC_N; i++) {
		CHECK_EQ_U(cs[i].cookie, i);
		CHECK_EQ_U(cs[i].op, XSOCK_OP_SEND);
		CHECK_EQ_U(cs[i].status, 0);
		CHECK_EQ_U(cs[i].len, ASYNC_LEN);
	}
	/* a plain write() after them comes after them in the stream */
	REQUIRE(write(p.c, "end", 3) == 3);
	pthread_join(t, NULL);
	CHECK_EQ_U(r.got, total + 3);
	CHECK(memcmp(dst, src, total) == 0);
	CHECK(memcmp(dst + total, "end", 3) == 0);
	/* a registration in use cannot go; after completion it can */
	CHECK(xsock_dereg(mr) == 0);
	pair_close(&p);
	free(src);
	free(dst);
}

/* ---- completions through epoll on the completion fd ------------------------------ */

static void test_epoll(void)
{
	size_t len = 3 * MIB + 17;
	uint8_t *src = malloc(len), *dst = malloc(len), *rbuf = malloc(len);
	struct xsock_mr *dmr, *rmr;
	struct xsock_rdesc rd;
	struct epoll_event ev;
	struct xsock_comp c;
	struct pair p;

	REQUIRE(src && dst && rbuf);
	stage = "epoll: connect";
	pair_open(&p);
	REQUIRE(xsock_reg(p.s, dst, len, 0, &dmr) == 0);
	int sfd = xsock_comp_fd(p.s), cfd;
	REQUIRE(sfd >= 0);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	REQUIRE(ep >= 0);
	ev = (struct epoll_event){ .events = EPOLLIN, .data.u32 = 1 };
	REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev) == 0);

	/* an asynchronous receive of all of it (XSOCK_WAITALL) */
	stage = "epoll: async receive";
	REQUIRE(xsock_recv_async(p.s, dmr, 0, len, 77, XSOCK_WAITALL) == 0);
	CHECK(epoll_wait(ep, &ev, 1, 0) == 0);
	xs_rand_fill(src, len);
	REQUIRE(xs_write_full(p.c, src, len) == 0);
	REQUIRE(epoll_wait(ep, &ev, 1, 10000) == 1);
	CHECK_EQ_U(ev.data.u32, 1);
	REQUIRE(xsock_poll_comp(p.s, &c, 1) == 1);
	CHECK_EQ_U(c.cookie, 77);
	CHECK_EQ_U(c.op, XSOCK_OP_RECV);
	CHECK_EQ_U(c.status, 0);
	CHECK_EQ_U(c.len, len);
	CHECK(memcmp(src, dst, len) == 0);
	CHECK(epoll_wait(ep, &ev, 1, 0) == 0); /* drained: not readable */

	/* an RDMA Read completing by itself: the client's completion fd in
	 * the same epoll set, nothing called on the socket meanwhile */
	stage = "epoll: rdma read";
	REQUIRE(xsock_reg(p.c, rbuf, len, 0, &rmr) == 0);
	struct xsock_mr *smr;
	REQUIRE(xsock_reg(p.s, src, len, XSOCK_ACCESS_REMOTE_READ, &smr) == 0);
	send_desc(&p, smr, &rd);
	cfd = xsock_comp_fd(p.c);
	REQUIRE(cfd >= 0 && cfd != sfd);
	ev = (struct epoll_event){ .events = EPOLLIN, .data.u32 = 2 };
	REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &ev) == 0);
	REQUIRE(xsock_rdma_read(p.c, rmr, 0, len, &rd, 0, 88, 0) == 0);
	REQUIRE(epoll_wait(ep, &ev, 1, 10000) == 1);
	CHECK_EQ_U(ev.data.u32, 2);
	REQUIRE(xsock_poll_comp(p.c, &c, 1) == 1);
	CHECK_EQ_U(c.cookie, 88);
	CHECK_EQ_U(c.status, 0);
	CHECK(memcmp(rbuf, src, len) == 0);

	/* an asynchronous receive that completes with what is there (no
	 * WAITALL), then one that sees the end of the stream */
	stage = "epoll: partial receive and end of stream";
	REQUIRE(xsock_recv_async(p.s, dmr, 0, len, 90, 0) == 0);
	REQUIRE(write(p.c, "abc", 3) == 3);
	REQUIRE(xsock_wait_comp(p.s, &c, 1, 10000) == 1);
	CHECK_EQ_U(c.cookie, 90);
	CHECK_EQ_U(c.len, 3);
	CHECK(memcmp(dst, "abc", 3) == 0);
	REQUIRE(xsock_recv_async(p.s, dmr, 0, len, 91, 0) == 0);
	CHECK(shutdown(p.c, SHUT_WR) == 0);
	REQUIRE(xsock_wait_comp(p.s, &c, 1, 10000) == 1);
	CHECK_EQ_U(c.cookie, 91);
	CHECK_EQ_U(c.status, 0);
	CHECK_EQ_U(c.len, 0);

	close(ep);
	CHECK(xsock_dereg(dmr) == 0);
	CHECK(xsock_dereg(rmr) == 0);
	CHECK(xsock_dereg(smr) == 0);
	pair_close(&p);
	free(src);
	free(dst);
	free(rbuf);
}

/* ---- the QP itself ------------------------------------------------------------------ */

static void test_own_wr(void)
{
	uint8_t src[64], dst[64];
	struct xsock_mr *tmr, *lmr;
	struct xsock_rdesc rd;
	struct xsock_comp c;
	struct pair p;

	stage = "qp: own work request";
	pair_open(&p);
	REQUIRE(xsock_reg(p.s, dst, sizeof(dst), XSOCK_ACCESS_REMOTE_WRITE, &tmr) == 0);
	send_desc(&p, tmr, &rd);
	struct ibv_qp *qp = xsock_qp(p.c);
	struct ibv_pd *pd = xsock_pd(p.c);
	REQUIRE(qp && pd && qp->pd == pd);
	/* memory registered through xsock_reg is usable with its lkey too, but
	 * the point here is the plain verbs path */
	REQUIRE(xsock_reg(p.c, src, sizeof(src), 0, &lmr) == 0);
	struct ibv_mr *mr = ibv_reg_mr(pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(mr);
	memset(src, 0x77, sizeof(src));
	memset(dst, 0, sizeof(dst));
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = sizeof(src), .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = XSOCK_WRID_USER | 7, .opcode = IBV_WR_RDMA_WRITE,
				  .sg_list = &sge, .num_sge = 1, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	wr.wr.rdma.remote_addr = rd.addr;
	wr.wr.rdma.rkey = rd.stag;
	REQUIRE(ibv_post_send(qp, &wr, &bad) == 0);
	/* libxsock does not count a WR the program posted itself
	 * (xsock_wait_comp returns 0 when it has nothing outstanding), and
	 * the Write completes once the peer placed it (a Read Response,
	 * verbs/verbs_qp_tx.c): poll for it */
	int got = 0;
	for (int i = 0; i < 500 && got == 0; i++)
		if ((got = xsock_poll_comp(p.c, &c, 1)) == 0)
			usleep(10000);
	REQUIRE(got == 1);
	CHECK_EQ_U(c.op, XSOCK_OP_QP);
	CHECK_EQ_U(c.cookie, 7);
	CHECK_EQ_U(c.status, 0);
	/* the stream still works after it */
	char x;
	REQUIRE(write(p.c, "Q", 1) == 1);
	REQUIRE(read(p.s, &x, 1) == 1 && x == 'Q');
	CHECK(all_is(dst, sizeof(dst), 0x77));
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(xsock_dereg(lmr) == 0);
	CHECK(xsock_dereg(tmr) == 0);
	pair_close(&p);
}

/* ---- access violations -------------------------------------------------------------- */

static void check_broken(struct pair *p)
{
	int err = -1;
	socklen_t el = sizeof(err);
	uint8_t b[8];
	struct pollfd pf = { .fd = p->c, .events = POLLIN };

	CHECK(getsockopt(p->c, SOL_SOCKET, SO_ERROR, &err, &el) == 0);
	CHECK_EQ_U(err, ECONNRESET);
	CHECK(poll(&pf, 1, 5000) == 1 && (pf.revents & POLLIN));
	ssize_t n = read(p->c, b, sizeof(b));
	CHECK(n == 0 || (n < 0 && errno == ECONNRESET));
}

static void test_access(void)
{
	uint8_t ro[4096], wo[4096], local[4096];
	struct xsock_mr *romr, *womr, *lmr;
	struct xsock_rdesc rd;
	struct xsock_comp c;
	struct pair p;

	/* Read of a registration the peer did not open for reading */
	stage = "access: read of write-only";
	pair_open(&p);
	REQUIRE(xsock_reg(p.s, wo, sizeof(wo), XSOCK_ACCESS_REMOTE_WRITE, &womr) == 0);
	REQUIRE(xsock_reg(p.c, local, sizeof(local), 0, &lmr) == 0);
	send_desc(&p, womr, &rd);
	memset(local, 0x11, sizeof(local));
	REQUIRE(xsock_rdma_read(p.c, lmr, 0, 100, &rd, 0, 5, 0) == 0);
	REQUIRE(wait_one(p.c, &c) == 1);
	CHECK_EQ_U(c.cookie, 5);
	CHECK_EQ_U(c.status, EACCES);
	CHECK_EQ_U(c.len, 0);
	CHECK(all_is(local, sizeof(local), 0x11));
	check_broken(&p);
	errno = 0;
	CHECK(xsock_rdma_read(p.c, lmr, 0, 1, &rd, 0, 6, 0) == -1 && errno == EPIPE);
	CHECK(xsock_dereg(lmr) == 0);
	CHECK(xsock_dereg(womr) == 0);
	pair_close(&p);

	/* Write into a read-only registration: XSOCK_PLACED reports it */
	stage = "access: write to read-only";
	pair_open(&p);
	memset(ro, 0x22, sizeof(ro));
	REQUIRE(xsock_reg(p.s, ro, sizeof(ro), XSOCK_ACCESS_REMOTE_READ, &romr) == 0);
	REQUIRE(xsock_reg(p.c, local, sizeof(local), 0, &lmr) == 0);
	send_desc(&p, romr, &rd);
	memset(local, 0x33, sizeof(local));
	REQUIRE(xsock_rdma_write(p.c, lmr, 0, 100, &rd, 0, 9, XSOCK_PLACED) == 0);
	REQUIRE(wait_one(p.c, &c) == 1);
	CHECK_EQ_U(c.cookie, 9);
	CHECK(c.status != 0);
	printf("access: write to read-only: status %d (%s)\n", c.status, strerror(c.status));
	CHECK(all_is(ro, sizeof(ro), 0x22));
	check_broken(&p);
	/* the server side sees the end of the stream */
	uint8_t b;
	CHECK(read(p.s, &b, 1) <= 0);
	CHECK(xsock_dereg(lmr) == 0);
	/* the server's socket closes with the registration still there: its
	 * handle stays valid for xsock_dereg */
	pair_close(&p);
	CHECK(xsock_dereg(romr) == 0);
}

/* ---- argument errors --------------------------------------------------------------- */

static void test_errors(void)
{
	uint8_t buf[256];
	struct xsock_mr *mr, *mr2;
	struct xsock_rdesc rd = { .addr = 0x1000, .stag = 1, .len = 100 };
	struct pair p;
	int pfd[2];

	stage = "errors";
	REQUIRE(pipe(pfd) == 0);
	errno = 0;
	CHECK(xsock_reg(pfd[0], buf, sizeof(buf), 0, &mr) == -1 && errno == ENOTSOCK);
	close(pfd[0]);
	close(pfd[1]);
	errno = 0;
	CHECK(xsock_reg(1000000, buf, sizeof(buf), 0, &mr) == -1 && errno == EBADF);
	/* a listener (and a socket not yet connected) has no QP */
	struct sockaddr_in a;
	int l = xs_sock_listen(1, &a);
	REQUIRE(l >= 0);
	errno = 0;
	CHECK(xsock_reg(l, buf, sizeof(buf), 0, &mr) == -1 && errno == ENOTCONN);
	CHECK(xsock_qp(l) == NULL && errno == ENOTCONN);
	close(l);

	pair_open(&p);
	errno = 0;
	CHECK(xsock_reg(p.c, buf, sizeof(buf), 0x80, &mr) == -1 && errno == EINVAL);
	CHECK(xsock_reg(p.c, buf, 0, 0, &mr) == -1 && errno == EINVAL);
	REQUIRE(xsock_reg(p.c, buf, sizeof(buf), 0, &mr) == 0);
	REQUIRE(xsock_reg(p.s, buf, sizeof(buf), 0, &mr2) == 0);
	errno = 0; /* local range */
	CHECK(xsock_rdma_write(p.c, mr, 200, 57, &rd, 0, 0, 0) == -1 && errno == EINVAL);
	errno = 0; /* remote range */
	CHECK(xsock_rdma_write(p.c, mr, 0, 50, &rd, 51, 0, 0) == -1 && errno == EINVAL);
	errno = 0; /* flags */
	CHECK(xsock_rdma_read(p.c, mr, 0, 1, &rd, 0, 0, XSOCK_PLACED) == -1 && errno == EINVAL);
	errno = 0; /* a registration of the other socket */
	CHECK(xsock_send_async(p.c, mr2, 0, 1, 0, 0) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(xsock_recv_async(p.c, mr, 0, 0, 0, 0) == -1 && errno == EINVAL);
	struct xsock_comp c;
	errno = 0;
	CHECK(xsock_poll_comp(p.c, &c, 0) == -1 && errno == EINVAL);
	/* nothing outstanding: waiting returns at once */
	CHECK(xsock_wait_comp(p.c, &c, 1, -1) == 0);
	CHECK(xsock_dereg(mr) == 0);
	CHECK(xsock_dereg(mr2) == 0);
	pair_close(&p);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, on_alarm);
	alarm(120);
	xs_test_seed(5);
	test_errors();
	test_rdma_sizes();
	test_async_send();
	test_epoll();
	test_own_wr();
	test_access();
	return xs_test_result();
}
