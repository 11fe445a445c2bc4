/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* fork with IWARP sockets (xsock(7) FORK).
 *  1. pre-fork server: a client process opens N+1 IWARP connections and
 *     sends each a different checked payload; the server accepts N, forks
 *     a child per connection that echoes it (and closes its copy of the
 *     listener), closing its own copy at once; the last connection is
 *     served by the parent itself, so its listener still works.
 *  2. a process keeps using a connected IWARP pair while children run
 *     system(), popen() and fork+exec.
 *  3. both sides use one socket: the child uses it first and owns it; the
 *     parent's copy becomes the relay channel (the child's thread carries
 *     its writes) and keeps the connection's addresses, its close does not
 *     disconnect; the child's close does (the peer reads EOF).
 *  4. a process that owns a connection ends with _exit without closing it
 *     (rsync's receiver): the peer reads the data, then EOF, not a reset.
 *  5. a thread blocked in read() while another forks again and again
 *     (git clone's side-band thread while git forks index-pack): every
 *     octet arrives; a look between libiwarp's fork handler and libxsock's
 *     left the reader waiting with nothing to wake it (1 clone in 60). */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/xs_test.h"
#include "tests/xs_test_sock.h"

#define NCONN 4
#define PAYLOAD (96 * 1024)

static void fill(uint8_t *b, size_t n, unsigned k)
{
	uint32_t x = 0x9e3779b9u * (k + 1);

	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		b[i] = (uint8_t)(x >> 16);
	}
}

static int wait_child(pid_t pid)
{
	int st = 0;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Echo until EOF, then close. */
static int echo(int fd)
{
	uint8_t buf[16384];
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (xs_write_full(fd, buf, (size_t)n) < 0)
			return 1;
	return n == 0 && close(fd) == 0 ? 0 : 1;
}

/* The client process: all connections first, then each payload, each
 * echo checked after its half-close. */
static int client(const struct sockaddr_in *addr)
{
	static uint8_t out[PAYLOAD], in[PAYLOAD];
	int fds[NCONN + 1];

	for (int i = 0; i <= NCONN; i++) {
		fds[i] = xs_sock_connect(1, addr);
		if (fds[i] < 0) {
			perror("client connect");
			return 1;
		}
	}
	for (int i = 0; i <= NCONN; i++) {
		fill(out, PAYLOAD - (size_t)i, (unsigned)i);
		if (xs_write_full(fds[i], out, PAYLOAD - (size_t)i) < 0 ||
		    shutdown(fds[i], SHUT_WR) < 0) {
			perror("client write");
			return 1;
		}
	}
	for (int i = 0; i <= NCONN; i++) {
		size_t len = PAYLOAD - (size_t)i;
		fill(out, len, (unsigned)i);
		if (xs_read_full(fds[i], in, len) < 0 || memcmp(in, out, len) != 0 ||
		    read(fds[i], in, 1) != 0) {
			fprintf(stderr, "client: echo %d wrong\n", i);
			return 1;
		}
		close(fds[i]);
	}
	return 0;
}

static void test_prefork_server(void)
{
	struct sockaddr_in addr;
	pid_t kids[NCONN], cl;
	int lfd = xs_sock_listen(1, &addr);
	int mode = 0;
	socklen_t ml = sizeof(mode);

	REQUIRE(lfd >= 0);
	cl = fork();
	REQUIRE(cl >= 0);
	if (cl == 0) {
		close(lfd);
		_exit(client(&addr));
	}
	for (int i = 0; i < NCONN; i++) {
		int fd = accept(lfd, NULL, NULL);
		REQUIRE(fd >= 0);
		CHECK(getsockopt(fd, SOL_IWARP, IWARP_MODE, &mode, &ml) == 0 && mode == 1);
		kids[i] = fork();
		REQUIRE(kids[i] >= 0);
		if (kids[i] == 0) {
			close(lfd);
			_exit(echo(fd));
		}
		CHECK(close(fd) == 0); /* the parent's copy: nothing reaches the peer */
	}
	/* the listener still accepts in the parent, which serves this one */
	int fd = accept(lfd, NULL, NULL);
	CHECK(fd >= 0);
	if (fd >= 0)
		CHECK(echo(fd) == 0);
	for (int i = 0; i < NCONN; i++)
		CHECK(wait_child(kids[i]) == 0);
	CHECK(wait_child(cl) == 0);
	CHECK(close(lfd) == 0);
}

/* A connected IWARP pair in this process. */
static void make_pair(int *a, int *b)
{
	struct sockaddr_in addr;
	int lfd = xs_sock_listen(1, &addr);

	REQUIRE(lfd >= 0);
	*a = xs_sock_connect(1, &addr);
	REQUIRE(*a >= 0);
	*b = accept(lfd, NULL, NULL);
	REQUIRE(*b >= 0);
	close(lfd);
}

static void roundtrip(int a, int b, unsigned k)
{
	uint8_t out[4096], in[4096];

	fill(out, sizeof(out), k);
	CHECK(xs_write_full(a, out, sizeof(out)) == 0);
	CHECK(xs_read_full(b, in, sizeof(in)) == 0 && memcmp(in, out, sizeof(in)) == 0);
	CHECK(xs_write_full(b, in, sizeof(in)) == 0);
	CHECK(xs_read_full(a, out, sizeof(out)) == 0 && memcmp(in, out, sizeof(in)) == 0);
}

static void test_exec_children(void)
{
	int a, b;
	char line[32] = "";

	make_pair(&a, &b);
	roundtrip(a, b, 1);
	CHECK(system("exit 5") >> 8 == 5);
	roundtrip(a, b, 2);
	FILE *p = popen("echo popen-ok", "r");
	CHECK(p != NULL);
	if (p) {
		CHECK(fgets(line, sizeof(line), p) != NULL && strcmp(line, "popen-ok\n") == 0);
		CHECK(pclose(p) == 0);
	}
	roundtrip(a, b, 3);
	/* data in flight while the child execs */
	uint8_t out[1000], in[1000];
	fill(out, sizeof(out), 4);
	CHECK(xs_write_full(a, out, sizeof(out)) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", "exit 6", (char *)NULL);
		_exit(99);
	}
	CHECK(wait_child(pid) == 6);
	CHECK(xs_read_full(b, in, sizeof(in)) == 0 && memcmp(in, out, sizeof(in)) == 0);
	roundtrip(b, a, 5);
	/* a child that exits without touching the sockets */
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0)
		_exit(0);
	CHECK(wait_child(pid) == 0);
	roundtrip(a, b, 6);
	/* close: the peer sees EOF */
	CHECK(close(a) == 0);
	CHECK(read(b, in, 1) == 0);
	CHECK(close(b) == 0);
}

static void test_both_use(void)
{
	int a, b, pfd[2];
	char buf[16];

	make_pair(&a, &b);
	REQUIRE(pipe(pfd) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		char x;
		close(pfd[1]);
		close(b); /* never used here: no effect on the connection */
		int ok = write(a, "child", 5) == 5 && read(pfd[0], &x, 1) == 1 &&
			 xs_read_full(a, buf, 5) == 0 && memcmp(buf, "reply", 5) == 0;
		close(a); /* the owner's close: the peer sees EOF */
		_exit(ok ? 0 : 1);
	}
	close(pfd[0]);
	CHECK(xs_read_full(b, buf, 5) == 0 && memcmp(buf, "child", 5) == 0);
	/* the parent's copy of a is relayed through the child, the owner */
	struct pollfd p = { .fd = a, .events = POLLOUT };
	CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLOUT));
	CHECK(write(a, "x", 1) == 1);
	CHECK(xs_read_full(b, buf, 1) == 0 && buf[0] == 'x');
	/* the relayed copy keeps its TCP identity: sshd's and rsync's rules
	 * by address, TCP_NODELAY */
	struct sockaddr_in pa, sb, la, pb;
	socklen_t l1 = sizeof(pa), l2 = sizeof(sb), l3 = sizeof(la), l4 = sizeof(pb);
	int dom = 0, one = 1;
	socklen_t dl = sizeof(dom);
	CHECK(getpeername(a, (struct sockaddr *)&pa, &l1) == 0 && pa.sin_family == AF_INET);
	CHECK(getsockname(b, (struct sockaddr *)&sb, &l2) == 0 && l1 == l2 &&
	      pa.sin_port == sb.sin_port && pa.sin_addr.s_addr == sb.sin_addr.s_addr);
	CHECK(getsockname(a, (struct sockaddr *)&la, &l3) == 0 && la.sin_family == AF_INET);
	CHECK(getpeername(b, (struct sockaddr *)&pb, &l4) == 0 && la.sin_port == pb.sin_port);
	CHECK(getsockopt(a, SOL_SOCKET, SO_DOMAIN, &dom, &dl) == 0 && dom == AF_INET);
	CHECK(setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0);
	CHECK(close(a) == 0); /* no disconnect */
	CHECK(xs_write_full(b, "reply", 5) == 0);
	CHECK(write(pfd[1], "g", 1) == 1);
	close(pfd[1]);
	CHECK(wait_child(pid) == 0);
	CHECK(read(b, buf, 1) == 0);
	CHECK(close(b) == 0);
}

static void test_owner_exit(void)
{
	struct sockaddr_in addr;
	char buf[16];
	int lfd = xs_sock_listen(1, &addr);

	REQUIRE(lfd >= 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(lfd);
		int fd = xs_sock_connect(1, &addr);
		_exit(fd >= 0 && xs_write_full(fd, "last", 4) == 0 ? 0 : 1);
	}
	int fd = accept(lfd, NULL, NULL);
	REQUIRE(fd >= 0);
	CHECK(xs_read_full(fd, buf, 4) == 0 && memcmp(buf, "last", 4) == 0);
	errno = 0;
	ssize_t n = read(fd, buf, 1);
	if (n != 0)
		fprintf(stderr, "after the owner's _exit: read %zd, errno %d\n", n, errno);
	CHECK(n == 0);
	CHECK(wait_child(pid) == 0);
	CHECK(close(fd) == 0);
	CHECK(close(lfd) == 0);
}

#define FR_CHUNK 512
#define FR_CHUNKS 4000
#define FR_FORKS 300

struct fork_reader {
	int fd;
	_Atomic size_t got;
	_Atomic bool ok;
};

static void *fr_read(void *arg)
{
	struct fork_reader *r = arg;
	uint8_t want[FR_CHUNK], in[FR_CHUNK];
	bool ok = true;

	for (unsigned i = 0; i < FR_CHUNKS && ok; i++) {
		fill(want, sizeof(want), i);
		ok = xs_read_full(r->fd, in, sizeof(in)) == 0 && memcmp(in, want, sizeof(in)) == 0;
		if (ok)
			r->got += sizeof(in);
	}
	r->ok = ok;
	return NULL;
}

static void *fr_write(void *arg)
{
	int fd = *(int *)arg;
	uint8_t out[FR_CHUNK];

	for (unsigned i = 0; i < FR_CHUNKS; i++) {
		fill(out, sizeof(out), i);
		if (xs_write_full(fd, out, sizeof(out)) != 0)
			break;
		if (i % 16 == 0)
			usleep(200); /* the reader blocks and wakes often */
	}
	return NULL;
}

static void test_fork_while_reading(void)
{
	struct fork_reader r = { .fd = -1 };
	pthread_t rt, wt;
	int a, b;

	make_pair(&a, &b);
	r.fd = a;
	REQUIRE(pthread_create(&rt, NULL, fr_read, &r) == 0);
	REQUIRE(pthread_create(&wt, NULL, fr_write, &b) == 0);
	for (int i = 0; i < FR_FORKS && r.got < (size_t)FR_CHUNK * FR_CHUNKS; i++) {
		pid_t pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0)
			_exit(0);
		CHECK(wait_child(pid) == 0);
	}
	/* bounded: a reader left waiting would never end */
	for (int i = 0; i < 2000 && r.got < (size_t)FR_CHUNK * FR_CHUNKS; i++)
		usleep(10000);
	if (r.got < (size_t)FR_CHUNK * FR_CHUNKS) {
		fprintf(stderr, "a reader during forks stalled at %zu of %d octets\n",
			(size_t)r.got, FR_CHUNK * FR_CHUNKS);
		CHECK(false);
		return; /* its threads end with the process */
	}
	pthread_join(rt, NULL);
	pthread_join(wt, NULL);
	CHECK(r.ok);
	CHECK(close(a) == 0);
	CHECK(close(b) == 0);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_prefork_server();
	test_exec_children();
	test_both_use();
	test_owner_exit();
	test_fork_while_reading();
	return xs_test_result();
}
