/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A small epoll event loop in the style of redis's ae.c/anet.c serving
 * many concurrent clients through one IWARP_MODE (mixed) listener, and a
 * check that it never blocks: every socket call the loop makes (and the
 * non-blocking calls of the clients) is timed, and one that takes longer
 * than MAX_CALL_MS fails the test.
 *
 * The loop: a non-blocking listener (O_NONBLOCK by ioctl(FIONBIO) before
 * listen), accept4(SOCK_NONBLOCK | SOCK_CLOEXEC) until EAGAIN, reads until
 * EAGAIN, writes until EAGAIN with EPOLLOUT armed while output is pending
 * and EPOLLIN dropped while a connection's output is far behind (redis's
 * client output buffer), level-triggered; then an edge-triggered run.
 * Connections use read/write, recv/send, readv/writev, recvmsg/sendmsg, and
 * some are made blocking again (FIONBIO, fcntl) and use MSG_DONTWAIT.
 *
 * The protocol: a request is {type, length, seed} (3 x u32) and, for an
 * echo, length bytes pat(seed, k) which the server checks and echoes; a
 * generate request makes the server send length bytes pat(seed, k).  The
 * clients (threads, nice 10 so that the loop gets the CPU it needs): iWARP
 * and plain, blocking echo clients; slow readers of a 3 MB reply (the
 * server's writes go partial); clients that connect and close at once, or
 * after half a header, or stay silent past the classification time; and
 * non-blocking clients (SOCK_NONBLOCK connect: EINPROGRESS, POLLOUT,
 * SO_ERROR) that pipeline requests.  Every byte is checked on both sides.
 * Last, SIGTERM while the loop sleeps in epoll_wait on IWARP fds only must
 * interrupt it at once (redis's shutdown). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>

#include "tests/xs_test.h"
#include "tests/xs_test_sock.h"

/* No socket call of the loop may take longer: a non-blocking call that
 * waited for the network would take a handshake's deadline (seconds).  In
 * a sanitizer build on a loaded 2-CPU machine a client's connect once took
 * 204 ms of scheduling (CI, ASan, session 26): there the bound is 1 s. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MAX_CALL_MS 1000
#else
#define MAX_CALL_MS 200
#endif
#define RUN_MS 25000 /* bound on each run */
#define HDR 12
#define REQ_ECHO 1u
#define REQ_GEN 2u
#define OUT_HIGH (1u << 20) /* output this far behind: stop reading the client */
#define GEN_CHUNK 100000u /* not a divisor of the ring halves: writes go partial */
#define SLOW_LEN (3u << 20)
#define MAX_CONNS 256

static uint8_t pat(uint32_t seed, uint64_t k)
{
	return (uint8_t)(seed * 31u + k + (k >> 8) * 7u + (k >> 16) * 13u);
}

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void on_alarm(int sig)
{
	static const char m[] = "test-xsock-evloop: timeout\n";

	(void)sig;
	if (write(2, m, sizeof(m) - 1) < 0)
		_exit(1);
	_exit(1);
}

/* ---- timing ------------------------------------------------------------------- */

static pthread_mutex_t stat_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t worst_us[2]; /* the loop's, the clients' */
static const char *worst_what[2] = { "-", "-" };
static int slow_calls;

static void t_end(const char *what, int64_t t0)
{
	int64_t d = now_us() - t0;
	int w = strncmp(what, "client", 6) == 0;

	pthread_mutex_lock(&stat_mu);
	if (d > worst_us[w]) {
		worst_us[w] = d;
		worst_what[w] = what;
	}
	if (d > MAX_CALL_MS * 1000) {
		slow_calls++;
		fprintf(stderr, "test-xsock-evloop: %s took %lld ms\n", what, (long long)(d / 1000));
	}
	pthread_mutex_unlock(&stat_mu);
}

/* var = expr, timed; errno kept */
#define TIMED(what, var, expr)                   \
	do {                                     \
		int64_t t0_ = now_us();          \
		var = (expr);                    \
		int e_ = errno;                  \
		t_end(what, t0_);                \
		errno = e_;                      \
	} while (0)

/* ---- the server ------------------------------------------------------------------ */

struct conn {
	int fd;
	int io; /* 0 read/write, 1 recv/send + MSG_DONTWAIT on a blocking fd, 2 readv/writev, 3 recvmsg/sendmsg */
	bool iwarp;
	uint8_t in[16384];
	size_t in_len, in_off;
	/* the request being read */
	uint8_t hdr[HDR];
	size_t hdr_got;
	bool in_body;
	uint32_t len, seed;
	uint64_t body_got;
	/* output */
	uint8_t *out;
	size_t out_len, out_off, out_cap;
	uint64_t gen_left, gen_off;
	uint32_t gen_seed;
	uint32_t ev; /* registered (level-triggered) */
	bool eof;
};

struct server {
	int ep, lfd;
	bool et;
	struct conn *conns[MAX_CONNS];
	int nconns;
	int acc_iwarp, acc_plain, acc_eagain;
	int partial_writes, eagain_writes, eagain_reads;
	int bad_bytes, errors;
};

static void out_append(struct conn *c, const uint8_t *p, size_t n)
{
	if (c->out_off && c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (c->out_len + n > c->out_cap) {
		if (c->out_off) { /* compact */
			memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
			c->out_len -= c->out_off;
			c->out_off = 0;
		}
		if (c->out_len + n > c->out_cap) {
			size_t cap = c->out_cap ? c->out_cap : 65536;
			while (cap < c->out_len + n)
				cap *= 2;
			c->out = realloc(c->out, cap);
			REQUIRE(c->out);
			c->out_cap = cap;
		}
	}
	memcpy(c->out + c->out_len, p, n);
	c->out_len += n;
}

static size_t pending(const struct conn *c)
{
	return c->out_len - c->out_off;
}

/* stop reading while a generated reply or much output is pending */
static bool paused(const struct conn *c)
{
	return c->gen_left > 0 || pending(c) >= OUT_HIGH;
}

static void conn_close(struct server *sv, struct conn *c)
{
	int rc;

	for (int i = 0; i < sv->nconns; i++) {
		if (sv->conns[i] == c) {
			sv->conns[i] = sv->conns[--sv->nconns];
			break;
		}
	}
	TIMED("epoll_ctl(DEL)", rc, epoll_ctl(sv->ep, EPOLL_CTL_DEL, c->fd, NULL));
	CHECK(rc == 0);
	TIMED("close", rc, close(c->fd));
	CHECK(rc == 0);
	free(c->out);
	free(c);
}

static void set_events(struct server *sv, struct conn *c)
{
	uint32_t ev = 0;
	int rc;

	if (sv->et)
		return; /* registered once for both */
	if (!c->eof && !paused(c))
		ev |= EPOLLIN;
	if (pending(c) || c->gen_left)
		ev |= EPOLLOUT;
	if (ev == c->ev)
		return;
	struct epoll_event e = { .events = ev, .data.ptr = c };
	TIMED("epoll_ctl(MOD)", rc, epoll_ctl(sv->ep, EPOLL_CTL_MOD, c->fd, &e));
	CHECK(rc == 0);
	c->ev = ev;
}

/* Parse what was read: check echo payloads, queue replies. */
static void consume(struct server *sv, struct conn *c)
{
	while (c->in_off < c->in_len && !paused(c)) {
		if (!c->in_body) {
			size_t n = HDR - c->hdr_got;
			if (n > c->in_len - c->in_off)
				n = c->in_len - c->in_off;
			memcpy(c->hdr + c->hdr_got, c->in + c->in_off, n);
			c->hdr_got += n;
			c->in_off += n;
			if (c->hdr_got < HDR)
				break;
			uint32_t h[3];
			memcpy(h, c->hdr, HDR);
			c->hdr_got = 0;
			c->len = h[1];
			c->seed = h[2];
			if (h[0] == REQ_GEN) {
				c->gen_left = h[1];
				c->gen_off = 0;
				c->gen_seed = h[2];
			} else if (h[0] == REQ_ECHO) {
				c->in_body = h[1] > 0;
				c->body_got = 0;
			} else {
				sv->bad_bytes++;
				c->in_off = c->in_len;
				c->eof = true;
			}
			continue;
		}
		size_t n = c->len - c->body_got;
		if (n > c->in_len - c->in_off)
			n = c->in_len - c->in_off;
		const uint8_t *p = c->in + c->in_off;
		for (size_t i = 0; i < n; i++)
			if (p[i] != pat(c->seed, c->body_got + i))
				sv->bad_bytes++;
		out_append(c, p, n);
		c->body_got += n;
		c->in_off += n;
		if (c->body_got == c->len)
			c->in_body = false;
	}
	if (c->in_off == c->in_len)
		c->in_off = c->in_len = 0;
}

static ssize_t sv_read(struct conn *c, uint8_t *buf, size_t n)
{
	ssize_t r;
	struct iovec v[2] = { { buf, n / 2 }, { buf + n / 2, n - n / 2 } };
	struct msghdr mh = { .msg_iov = v, .msg_iovlen = 2 };

	switch (c->io) {
	case 0:
		TIMED("read", r, read(c->fd, buf, n));
		break;
	case 1:
		TIMED("recv(MSG_DONTWAIT)", r, recv(c->fd, buf, n, MSG_DONTWAIT));
		break;
	case 2:
		TIMED("readv", r, readv(c->fd, v, 2));
		break;
	default:
		TIMED("recvmsg", r, recvmsg(c->fd, &mh, 0));
		break;
	}
	return r;
}

static ssize_t sv_write(struct conn *c, const uint8_t *buf, size_t n)
{
	ssize_t r;
	struct iovec v[2] = { { (void *)(uintptr_t)buf, n / 3 },
			      { (void *)(uintptr_t)(buf + n / 3), n - n / 3 } };
	struct msghdr mh = { .msg_iov = v, .msg_iovlen = 2 };

	switch (c->io) {
	case 0:
		TIMED("write", r, write(c->fd, buf, n));
		break;
	case 1:
		TIMED("send(MSG_DONTWAIT)", r, send(c->fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL));
		break;
	case 2:
		TIMED("writev", r, writev(c->fd, v, 2));
		break;
	default:
		TIMED("sendmsg", r, sendmsg(c->fd, &mh, MSG_NOSIGNAL));
		break;
	}
	return r;
}

/* Write until done or EAGAIN; false if the connection is gone. */
static bool flush_out(struct server *sv, struct conn *c)
{
	for (;;) {
		while (c->gen_left && pending(c) < GEN_CHUNK) {
			uint8_t chunk[4096];
			size_t n = c->gen_left < sizeof(chunk) ? (size_t)c->gen_left : sizeof(chunk);
			for (size_t i = 0; i < n; i++)
				chunk[i] = pat(c->gen_seed, c->gen_off + i);
			out_append(c, chunk, n);
			c->gen_off += n;
			c->gen_left -= n;
		}
		size_t want = pending(c);
		if (!want)
			return true;
		ssize_t w = sv_write(c, c->out + c->out_off, want);
		if (w < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				sv->eagain_writes++;
				return true;
			}
			if (errno != EPIPE && errno != ECONNRESET) {
				fprintf(stderr, "write: %s\n", strerror(errno));
				sv->errors++;
			}
			return false;
		}
		if ((size_t)w < want)
			sv->partial_writes++;
		c->out_off += (size_t)w;
	}
}

/* Read until EAGAIN (or paused); false if the connection is done. */
static bool read_in(struct server *sv, struct conn *c)
{
	consume(sv, c);
	while (!c->eof && !paused(c)) {
		ssize_t r = sv_read(c, c->in + c->in_len, sizeof(c->in) - c->in_len);
		if (r < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				sv->eagain_reads++;
				break;
			}
			if (errno != ECONNRESET) {
				fprintf(stderr, "read: %s\n", strerror(errno));
				sv->errors++;
			}
			return false;
		}
		if (r == 0) {
			c->eof = true;
			break;
		}
		c->in_len += (size_t)r;
		consume(sv, c);
	}
	return true;
}

/* One connection's turn: read, write, maybe read again (output drained). */
static void serve(struct server *sv, struct conn *c, uint32_t got)
{
	if ((got & (EPOLLIN | EPOLLHUP | EPOLLERR)) || sv->et) {
		if (!read_in(sv, c)) {
			conn_close(sv, c);
			return;
		}
	}
	for (int round = 0; round < 2; round++) {
		bool was_paused = paused(c);
		if (!flush_out(sv, c)) {
			conn_close(sv, c);
			return;
		}
		if (!was_paused || paused(c))
			break;
		/* caught up: take what waited meanwhile (no new edge reports it) */
		if (!read_in(sv, c)) {
			conn_close(sv, c);
			return;
		}
	}
	if (c->eof && !pending(c) && !c->gen_left) {
		conn_close(sv, c);
		return;
	}
	set_events(sv, c);
}

static void accept_all(struct server *sv)
{
	static int seq;

	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd, rc;

		TIMED("accept4", fd, accept4(sv->lfd, (struct sockaddr *)&ss, &sl,
					     SOCK_NONBLOCK | SOCK_CLOEXEC));
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				sv->acc_eagain++;
				return;
			}
			fprintf(stderr, "accept4: %s\n", strerror(errno));
			sv->errors++;
			return;
		}
		CHECK(sl == sizeof(struct sockaddr_in) && ss.ss_family == AF_INET);
		CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
		CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
		int mode = -1, one = 1;
		socklen_t ml = sizeof(mode);
		CHECK(getsockopt(fd, SOL_IWARP, IWARP_MODE, &mode, &ml) == 0);
		CHECK(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0);
		struct conn *c = calloc(1, sizeof(*c));
		REQUIRE(c && sv->nconns < MAX_CONNS);
		c->fd = fd;
		c->iwarp = mode == 1;
		c->io = seq % 4;
		if (c->io == 1) {
			/* blocking again (FIONBIO or fcntl): MSG_DONTWAIT alone must do */
			int zero = 0;
			if (seq % 8 == 1)
				CHECK(ioctl(fd, FIONBIO, &zero) == 0);
			else
				CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0);
			CHECK(!(fcntl(fd, F_GETFL) & O_NONBLOCK));
		} else if (c->io == 2 && seq % 8 == 2) {
			/* off and on again through FIONBIO */
			int v = 0;
			CHECK(ioctl(fd, FIONBIO, &v) == 0);
			v = 1;
			CHECK(ioctl(fd, FIONBIO, &v) == 0);
			CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
		}
		seq++;
		if (c->iwarp)
			sv->acc_iwarp++;
		else
			sv->acc_plain++;
		c->ev = EPOLLIN;
		struct epoll_event e = { .events = sv->et ? (EPOLLIN | EPOLLOUT | EPOLLET) : EPOLLIN,
					 .data.ptr = c };
		TIMED("epoll_ctl(ADD)", rc, epoll_ctl(sv->ep, EPOLL_CTL_ADD, fd, &e));
		CHECK(rc == 0);
		sv->conns[sv->nconns++] = c;
	}
}

/* ---- the clients ----------------------------------------------------------------- */

enum kind {
	K_ECHO, /* blocking, one request at a time */
	K_SLOW, /* generate SLOW_LEN, read it late and slowly */
	K_ABRUPT, /* connect and close: at once, after half a header, or silent */
	K_NONBLOCK, /* SOCK_NONBLOCK connect, pipelined requests, poll */
};

struct client {
	pthread_t t;
	int id;
	bool iwarp;
	enum kind kind;
	struct sockaddr_in addr;
	uint64_t rng;
	char err[160];
};

static atomic_int clients_done;

static uint64_t c_rand(struct client *c)
{
	uint64_t z = (c->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#define C_FAIL(c, ...)                                                   \
	do {                                                             \
		snprintf((c)->err, sizeof((c)->err), __VA_ARGS__);       \
		goto out;                                                \
	} while (0)

static int c_socket(struct client *c, int type)
{
	int fd = socket(AF_INET, SOCK_STREAM | type, 0);

	if (fd >= 0 && c->iwarp && xs_sock_mode(fd, 1) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int read_check(int fd, uint64_t len, uint32_t seed, size_t chunk, int pause_us)
{
	uint8_t buf[65536];
	uint64_t got = 0;

	if (chunk > sizeof(buf))
		chunk = sizeof(buf);
	while (got < len) {
		size_t n = len - got < chunk ? (size_t)(len - got) : chunk;
		ssize_t r = read(fd, buf, n);
		if (r <= 0)
			return -1;
		for (ssize_t i = 0; i < r; i++)
			if (buf[i] != pat(seed, got + (uint64_t)i))
				return -2;
		got += (uint64_t)r;
		if (pause_us && got % (256u << 10) < (uint64_t)r)
			usleep((useconds_t)pause_us);
	}
	return 0;
}

static void fill_req(uint8_t *p, uint32_t type, uint32_t len, uint32_t seed)
{
	uint32_t h[3] = { type, len, seed };

	memcpy(p, h, HDR);
	if (type == REQ_ECHO)
		for (uint32_t k = 0; k < len; k++)
			p[HDR + k] = pat(seed, k);
}

static void client_echo(struct client *c, int fd)
{
	static __thread uint8_t req[HDR + 65536];

	for (int r = 0; r < 12; r++) {
		uint32_t len = 1 + (uint32_t)(c_rand(c) % 65536);
		uint32_t seed = (uint32_t)(c->id * 1000 + r);
		fill_req(req, REQ_ECHO, len, seed);
		if (xs_write_full(fd, req, HDR + len) < 0)
			C_FAIL(c, "echo write: %s", strerror(errno));
		int rc = read_check(fd, len, seed, 65536, 0);
		if (rc)
			C_FAIL(c, "echo %d: %s", r, rc == -2 ? "bad bytes" : strerror(errno));
	}
out:
	return;
}

static void client_slow(struct client *c, int fd)
{
	uint8_t req[HDR];
	uint32_t seed = (uint32_t)c->id * 7919u;

	fill_req(req, REQ_GEN, SLOW_LEN, seed);
	if (xs_write_full(fd, req, HDR) < 0)
		C_FAIL(c, "gen write: %s", strerror(errno));
	usleep(400000); /* the server's output backs up meanwhile */
	int rc = read_check(fd, SLOW_LEN, seed, 16384, 20000);
	if (rc)
		C_FAIL(c, "slow read: %s", rc == -2 ? "bad bytes" : strerror(errno));
out:
	return;
}

/* A non-blocking socket call that must not block either. */
static int c_poll(int fd, short ev, int ms)
{
	struct pollfd p = { .fd = fd, .events = ev };
	int rc = poll(&p, 1, ms);

	return rc == 1 ? p.revents : rc;
}

static void client_nonblock(struct client *c, int fd)
{
	enum { NREQ = 8 };
	uint8_t *req = malloc(NREQ * (HDR + 65536));
	size_t total = 0, sent = 0;
	uint32_t lens[NREQ];
	uint64_t done = 0, rtotal = 0, in_rep = 0;
	int ri = 0;
	uint8_t buf[32768];
	int64_t deadline = now_us() + 20000000;

	if (!req)
		C_FAIL(c, "malloc");
	for (int r = 0; r < NREQ; r++) {
		lens[r] = 1 + (uint32_t)(c_rand(c) % 65536);
		fill_req(req + total, REQ_ECHO, lens[r], (uint32_t)(c->id * 1000 + r));
		total += HDR + lens[r];
		rtotal += lens[r];
	}
	/* send and receive at once: the replies come while we still write */
	while (done < rtotal) {
		ssize_t n;
		if (now_us() > deadline)
			C_FAIL(c, "nonblocking client: timeout (sent %zu/%zu, got %llu/%llu)", sent,
			       total, (unsigned long long)done, (unsigned long long)rtotal);
		if (sent < total) {
			TIMED("client send", n, send(fd, req + sent, total - sent, MSG_NOSIGNAL));
			if (n > 0)
				sent += (size_t)n;
			else if (errno != EAGAIN)
				C_FAIL(c, "nb send: %s", strerror(errno));
		}
		TIMED("client recv", n, recv(fd, buf, sizeof(buf), 0));
		if (n == 0)
			C_FAIL(c, "nb recv: early EOF");
		if (n < 0) {
			if (errno != EAGAIN)
				C_FAIL(c, "nb recv: %s", strerror(errno));
			c_poll(fd, (short)(POLLIN | (sent < total ? POLLOUT : 0)), 1000);
			continue;
		}
		for (ssize_t i = 0; i < n; i++) {
			while (in_rep == lens[ri]) {
				ri++;
				in_rep = 0;
			}
			if (buf[i] != pat((uint32_t)(c->id * 1000 + ri), in_rep))
				C_FAIL(c, "nb: bad byte in reply %d", ri);
			in_rep++;
			done++;
		}
	}
out:
	free(req);
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	int fd = -1, rc;

	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
	if (c->kind == K_NONBLOCK) {
		fd = c_socket(c, SOCK_NONBLOCK);
		if (fd < 0)
			C_FAIL(c, "socket: %s", strerror(errno));
		TIMED("client connect", rc, connect(fd, (struct sockaddr *)&c->addr, sizeof(c->addr)));
		if (rc < 0 && errno != EINPROGRESS)
			C_FAIL(c, "nb connect: %s", strerror(errno));
		int ev = c_poll(fd, POLLOUT, 10000);
		int err = -1;
		socklen_t el = sizeof(err);
		if (ev <= 0 || !(ev & POLLOUT))
			C_FAIL(c, "nb connect: poll %d", ev);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err)
			C_FAIL(c, "nb connect: SO_ERROR %d", err);
		client_nonblock(c, fd);
		goto out;
	}
	fd = c_socket(c, 0);
	if (fd < 0)
		C_FAIL(c, "socket: %s", strerror(errno));
	struct timeval tv = { 15, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&c->addr, sizeof(c->addr)) < 0)
		C_FAIL(c, "connect: %s", strerror(errno));
	switch (c->kind) {
	case K_ECHO:
		client_echo(c, fd);
		break;
	case K_SLOW:
		client_slow(c, fd);
		break;
	case K_ABRUPT:
		if (c->id % 3 == 1) {
			if (write(fd, "\1\0\0\0\7", 5) != 5) /* half a header */
				C_FAIL(c, "abrupt write: %s", strerror(errno));
		} else if (c->id % 3 == 2) {
			usleep(300000); /* silent past the classification time */
		}
		break;
	case K_NONBLOCK:
		break;
	}
out:
	if (fd >= 0)
		close(fd);
	atomic_fetch_add(&clients_done, 1);
	return NULL;
}

/* ---- a run ----------------------------------------------------------------------- */

static void run(bool et, int nclients)
{
	struct server sv = { .et = et };
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int one = 1, rc, want_iwarp = 0, want_plain = 0;

	printf("%s-triggered, %d clients\n", et ? "edge" : "level", nclients);
	/* anet style: socket, SO_REUSEADDR, non-blocking, bind, listen */
	sv.lfd = socket(AF_INET, SOCK_STREAM, 0);
	REQUIRE(sv.lfd >= 0);
	REQUIRE(xs_sock_mode(sv.lfd, 1) == 0);
	REQUIRE(setsockopt(sv.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0);
	REQUIRE(ioctl(sv.lfd, FIONBIO, &one) == 0); /* before listen: a fresh socket */
	REQUIRE(bind(sv.lfd, (struct sockaddr *)&a, sizeof(a)) == 0);
	REQUIRE(listen(sv.lfd, 511) == 0);
	REQUIRE(getsockname(sv.lfd, (struct sockaddr *)&a, &al) == 0);
	CHECK(fcntl(sv.lfd, F_GETFL) & O_NONBLOCK);
	/* nobody there: EAGAIN at once */
	TIMED("accept4 (empty)", rc, accept4(sv.lfd, NULL, NULL, SOCK_NONBLOCK));
	CHECK(rc < 0 && errno == EAGAIN);
	sv.ep = epoll_create1(EPOLL_CLOEXEC);
	REQUIRE(sv.ep >= 0);
	struct epoll_event le = { .events = EPOLLIN | (et ? EPOLLET : 0), .data.ptr = NULL };
	REQUIRE(epoll_ctl(sv.ep, EPOLL_CTL_ADD, sv.lfd, &le) == 0);

	struct client *cl = calloc((size_t)nclients, sizeof(*cl));
	REQUIRE(cl);
	atomic_store(&clients_done, 0);
	for (int i = 0; i < nclients; i++) {
		cl[i].id = i;
		cl[i].addr = a;
		cl[i].rng = xs_rand64();
		/* kinds by i % 8: echo, echo, slow, slow, abrupt, abrupt, nb, nb;
		 * iWARP and plain alternate */
		static const enum kind kinds[8] = { K_ECHO,   K_ECHO,   K_SLOW,     K_SLOW,
						    K_ABRUPT, K_ABRUPT, K_NONBLOCK, K_NONBLOCK };
		cl[i].kind = kinds[i % 8];
		cl[i].iwarp = (i + i / 8) % 2 == 0;
		if (cl[i].iwarp)
			want_iwarp++;
		else
			want_plain++;
		REQUIRE(pthread_create(&cl[i].t, NULL, client_main, &cl[i]) == 0);
	}

	int64_t deadline = now_us() + (int64_t)RUN_MS * 1000;
	struct epoll_event evs[64];
	while (atomic_load(&clients_done) < nclients || sv.nconns > 0 ||
	       sv.acc_iwarp + sv.acc_plain < nclients) {
		if (now_us() > deadline) {
			fprintf(stderr, "run did not finish: %d/%d clients done, %d open, %d+%d accepted\n",
				atomic_load(&clients_done), nclients, sv.nconns, sv.acc_iwarp,
				sv.acc_plain);
			xs_test_failures++;
			break;
		}
		int n;
		int64_t t0 = now_us();
		n = epoll_wait(sv.ep, evs, 64, 100);
		int e = errno;
		/* a wait may sleep its timeout, not more */
		if (now_us() - t0 > (100 + MAX_CALL_MS) * 1000)
			t_end("epoll_wait beyond its timeout", t0);
		errno = e;
		if (n < 0) {
			CHECK(errno == EINTR);
			continue;
		}
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			if (!c) {
				accept_all(&sv);
				continue;
			}
			/* still open (an earlier event of this batch may have closed it)? */
			bool open = false;
			for (int j = 0; j < sv.nconns && !open; j++)
				open = sv.conns[j] == c;
			if (open)
				serve(&sv, c, evs[i].events);
		}
	}
	for (int i = 0; i < nclients; i++) {
		pthread_join(cl[i].t, NULL);
		if (cl[i].err[0]) {
			fprintf(stderr, "client %d (%s, kind %d): %s\n", i, cl[i].iwarp ? "iwarp" : "plain",
				cl[i].kind, cl[i].err);
			xs_test_failures++;
		}
	}
	printf("  accepted %d iwarp + %d plain (accept EAGAIN %d), partial writes %d, "
	       "write EAGAIN %d, read EAGAIN %d\n  slowest call: loop %s %lld us, clients %s %lld us\n",
	       sv.acc_iwarp, sv.acc_plain, sv.acc_eagain, sv.partial_writes, sv.eagain_writes,
	       sv.eagain_reads, worst_what[0], (long long)worst_us[0], worst_what[1],
	       (long long)worst_us[1]);
	CHECK_EQ_U(sv.acc_iwarp, want_iwarp);
	CHECK_EQ_U(sv.acc_plain, want_plain);
	CHECK(sv.partial_writes + sv.eagain_writes > 0);
	CHECK(sv.eagain_reads > 0);
	CHECK_EQ_U(sv.bad_bytes, 0);
	CHECK_EQ_U(sv.errors, 0);
	while (sv.nconns)
		conn_close(&sv, sv.conns[0]);
	close(sv.ep);
	close(sv.lfd);
	free(cl);
}

/* ---- SIGTERM in epoll_wait --------------------------------------------------------- */

static volatile sig_atomic_t got_term;

static void on_term(int sig)
{
	(void)sig;
	got_term = 1;
}

struct killer {
	pthread_t target;
	int delay_ms;
};

static void *killer_main(void *arg)
{
	struct killer *k = arg;

	usleep((useconds_t)k->delay_ms * 1000);
	pthread_kill(k->target, SIGTERM);
	return NULL;
}

/* redis: sigaction(SIGTERM) then epoll_wait with its timer's timeout; the
 * handler sets a flag the loop acts on when epoll_wait returns. */
static void case_sigterm(bool restart)
{
	struct sockaddr_in a;
	int l = xs_sock_listen(1, &a);
	REQUIRE(l >= 0);
	int c = xs_sock_connect(1, &a);
	REQUIRE(c >= 0);
	int s = accept(l, NULL, NULL);
	REQUIRE(s >= 0);
	int ep = epoll_create1(0);
	REQUIRE(ep >= 0);
	struct epoll_event e = { .events = EPOLLIN };
	e.data.fd = l;
	REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, l, &e) == 0);
	e.data.fd = s;
	REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, s, &e) == 0);

	struct sigaction sa = { .sa_handler = on_term, .sa_flags = restart ? SA_RESTART : 0 };
	sigemptyset(&sa.sa_mask);
	REQUIRE(sigaction(SIGTERM, &sa, NULL) == 0);
	got_term = 0;
	struct killer k = { pthread_self(), 100 };
	pthread_t kt;
	REQUIRE(pthread_create(&kt, NULL, killer_main, &k) == 0);
	int64_t t0 = now_us();
	struct epoll_event ev;
	int n = epoll_wait(ep, &ev, 1, 5000);
	int64_t took = (now_us() - t0) / 1000;
	printf("SIGTERM in epoll_wait (%s): %d (%s) after %lld ms\n",
	       restart ? "SA_RESTART" : "no SA_RESTART", n, n < 0 ? strerror(errno) : "-",
	       (long long)took);
	CHECK(n < 0 && errno == EINTR); /* epoll_wait is never restarted */
	CHECK(got_term);
	CHECK(took < 100 + MAX_CALL_MS);
	pthread_join(kt, NULL);
	signal(SIGTERM, SIG_DFL);
	close(ep);
	close(c);
	close(s);
	close(l);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, on_alarm);
	alarm(60);
	xs_test_seed((uint64_t)time(NULL));
	run(false, 64);
	run(true, 32);
	case_sigterm(false);
	case_sigterm(true);
	CHECK(slow_calls == 0);
	return xs_test_result();
}
