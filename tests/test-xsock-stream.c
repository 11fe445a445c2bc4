/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* libxsock stream semantics on IWARP_MODE sockets (loopback, one process,
 * the peer in a thread): the mode option, a multi-megabyte transfer with
 * random write and read sizes checked byte for byte, partial reads,
 * MSG_PEEK, MSG_WAITALL, MSG_DONTWAIT / O_NONBLOCK, FIONREAD, readv/writev,
 * sendmsg/recvmsg, shutdown(SHUT_WR) giving EOF while the other direction
 * still works, close giving EOF, a peer ending without close giving
 * ECONNRESET after its data, ECONNREFUSED, addresses, dup2, stdio
 * through fdopen, and plain TCP sockets / pipes falling through. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "tests/xs_test.h"
#include "tests/xs_test_sock.h"

#define BIG (3u * 1024 * 1024 + 12345)

static uint8_t *src, *dst;
static const char *volatile stage = "start";

/* a hang names the step it hung in */
static void on_alarm(int sig)
{
	(void)sig;
	const char *m = "test-xsock-stream: timeout in ";
	if (write(2, m, strlen(m)) < 0 || write(2, stage, strlen(stage)) < 0 || write(2, "\n", 1) < 0)
		_exit(1);
	_exit(1);
}

struct peer {
	int lfd;
	int mode; /* what the server thread does */
	int rc;
};

/* echo server: read everything until EOF, check, then send it back */
static void *bulk_server(void *arg)
{
	struct peer *p = arg;
	int c = accept(p->lfd, NULL, NULL);
	size_t got = 0;

	p->rc = -1;
	if (c < 0)
		return NULL;
	int on = -1;
	socklen_t sl = sizeof(on);
	if (getsockopt(c, SOL_IWARP, IWARP_MODE, &on, &sl) < 0 || on != 1)
		goto out;
	unsigned seed = 7;
	while (got < BIG) {
		/* random read sizes: partial reads across message boundaries */
		size_t want = 1 + (size_t)rand_r(&seed) % 70000;
		if (want > BIG - got)
			want = BIG - got;
		ssize_t n = read(c, dst + got, want);
		if (n <= 0)
			goto out;
		got += (size_t)n;
	}
	char x;
	if (read(c, &x, 1) != 0) /* the client shut its write side */
		goto out;
	if (memcmp(src, dst, BIG))
		goto out;
	if (xs_write_full(c, dst, BIG))
		goto out;
	p->rc = 0;
out:
	close(c);
	return NULL;
}

static void test_bulk(void)
{
	struct sockaddr_in a, peer, local;
	struct peer p = { 0 };
	pthread_t t;
	socklen_t al;

	p.lfd = xs_sock_listen(1, &a);
	REQUIRE(p.lfd >= 0);
	REQUIRE(pthread_create(&t, NULL, bulk_server, &p) == 0);
	int fd = xs_sock_connect(1, &a);
	REQUIRE(fd >= 0);
	al = sizeof(peer);
	CHECK(getpeername(fd, (struct sockaddr *)&peer, &al) == 0);
	CHECK_EQ_U(ntohs(peer.sin_port), ntohs(a.sin_port));
	al = sizeof(local);
	CHECK(getsockname(fd, (struct sockaddr *)&local, &al) == 0);
	CHECK_EQ_U(local.sin_family, AF_INET);
	size_t done = 0;
	while (done < BIG) {
		size_t n = 1 + xs_rand_below(100000);
		if (n > BIG - done)
			n = BIG - done;
		if (xs_rand_below(2)) {
			struct iovec v[2] = { { src + done, n / 2 }, { src + done + n / 2, n - n / 2 } };
			REQUIRE(writev(fd, v, 2) == (ssize_t)n);
		} else {
			REQUIRE(xs_write_full(fd, src + done, n) == 0);
		}
		done += n;
	}
	CHECK(shutdown(fd, SHUT_WR) == 0);
	/* writing after SHUT_WR: EPIPE (MSG_NOSIGNAL: no signal) */
	errno = 0;
	CHECK(send(fd, "x", 1, MSG_NOSIGNAL) == -1 && errno == EPIPE);
	uint8_t *back = malloc(BIG);
	REQUIRE(back);
	CHECK(recv(fd, back, BIG, MSG_WAITALL) == (ssize_t)BIG);
	CHECK(memcmp(back, src, BIG) == 0);
	char x;
	CHECK(read(fd, &x, 1) == 0); /* server closed: EOF */
	free(back);
	pthread_join(t, NULL);
	CHECK(p.rc == 0);
	close(fd);
	close(p.lfd);
}

/* small messages: peek, partial reads, FIONREAD, nonblocking, msg calls */
static void test_small(void)
{
	struct sockaddr_in a;
	int l = xs_sock_listen(1, &a);
	REQUIRE(l >= 0);
	int c = xs_sock_connect(1, &a);
	REQUIRE(c >= 0);
	int s = accept(l, NULL, NULL);
	REQUIRE(s >= 0);
	char buf[64];

	/* nothing there: EAGAIN with MSG_DONTWAIT and with O_NONBLOCK */
	errno = 0;
	CHECK(recv(s, buf, sizeof(buf), MSG_DONTWAIT) == -1 && errno == EAGAIN);
	int fl = fcntl(s, F_GETFL);
	CHECK(fl >= 0 && fcntl(s, F_SETFL, fl | O_NONBLOCK) == 0);
	CHECK(fcntl(s, F_GETFL) & O_NONBLOCK);
	errno = 0;
	CHECK(read(s, buf, sizeof(buf)) == -1 && errno == EAGAIN);
	CHECK(fcntl(s, F_SETFL, fl) == 0);

	CHECK(write(c, "hello ", 6) == 6);
	CHECK(send(c, "world", 5, 0) == 5);
	/* both messages visible through FIONREAD once they arrived */
	int avail = 0;
	for (int i = 0; i < 2000 && avail < 11; i++) {
		CHECK(ioctl(s, FIONREAD, &avail) == 0);
		if (avail < 11)
			usleep(1000);
	}
	CHECK_EQ_U(avail, 11);
	memset(buf, 0, sizeof(buf));
	CHECK(recv(s, buf, 8, MSG_PEEK) == 8); /* across the two messages */
	CHECK(memcmp(buf, "hello wo", 8) == 0);
	memset(buf, 0, sizeof(buf));
	CHECK(read(s, buf, 3) == 3); /* partial read of the first message */
	CHECK(memcmp(buf, "hel", 3) == 0);
	CHECK(recv(s, buf, sizeof(buf), MSG_PEEK) == 8);
	CHECK(memcmp(buf, "lo world", 8) == 0);
	char a1[4] = { 0 }, a2[8] = { 0 };
	struct iovec v[2] = { { a1, 4 }, { a2, 8 } };
	struct msghdr mh = { .msg_iov = v, .msg_iovlen = 2 };
	CHECK(recvmsg(s, &mh, 0) == 8);
	CHECK(memcmp(a1, "lo w", 4) == 0 && memcmp(a2, "orld", 4) == 0);
	CHECK(ioctl(s, FIONREAD, &avail) == 0 && avail == 0);

	/* sendmsg the other way */
	char ab[] = "ab", cd[] = "cd";
	struct iovec w[2] = { { ab, 2 }, { cd, 2 } };
	struct msghdr wm = { .msg_iov = w, .msg_iovlen = 2 };
	CHECK(sendmsg(s, &wm, 0) == 4);
	CHECK(recv(c, buf, 4, MSG_WAITALL) == 4 && memcmp(buf, "abcd", 4) == 0);

	/* close with data unread by nobody: the peer sees EOF */
	close(s);
	CHECK(read(c, buf, sizeof(buf)) == 0);
	close(c);
	close(l);
}

static void test_refused_and_mode(void)
{
	struct sockaddr_in a;
	int l = xs_sock_listen(0, &a); /* learn a free port, then free it */
	REQUIRE(l >= 0);
	close(l);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	REQUIRE(fd >= 0);
	int on = 7;
	socklen_t sl = sizeof(on);
	CHECK(getsockopt(fd, SOL_IWARP, IWARP_MODE, &on, &sl) == 0 && on == 0);
	CHECK(xs_sock_mode(fd, 1) == 0);
	sl = sizeof(on);
	CHECK(getsockopt(fd, SOL_IWARP, IWARP_MODE, &on, &sl) == 0 && on == 1);
	errno = 0;
	CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == -1 && errno == ECONNREFUSED);
	close(fd);

	/* not a TCP socket: refused; unknown option: ENOPROTOOPT */
	int u = socket(AF_INET, SOCK_DGRAM, 0);
	errno = 0;
	CHECK(xs_sock_mode(u, 1) == -1 && errno == EOPNOTSUPP);
	errno = 0;
	CHECK(setsockopt(u, SOL_IWARP, 99, &on, sizeof(on)) == -1 && errno == ENOPROTOOPT);
	close(u);
	int p[2];
	REQUIRE(pipe(p) == 0);
	errno = 0;
	CHECK(getsockopt(p[0], SOL_IWARP, IWARP_MODE, &on, &sl) == -1 && errno == ENOTSOCK);
	close(p[0]);
	close(p[1]);
}

/* Plain sockets, pipes: untouched by the interposer. */
static void test_fallthrough(void)
{
	struct sockaddr_in a;
	int l = xs_sock_listen(0, &a);
	REQUIRE(l >= 0);
	int c = xs_sock_connect(0, &a);
	REQUIRE(c >= 0);
	int s = accept(l, NULL, NULL);
	REQUIRE(s >= 0);
	int on = 7;
	socklen_t sl = sizeof(on);
	CHECK(getsockopt(s, SOL_IWARP, IWARP_MODE, &on, &sl) == 0 && on == 0);
	char buf[8] = { 0 };
	CHECK(write(c, "plain", 5) == 5);
	CHECK(recv(s, buf, 5, MSG_WAITALL) == 5 && !memcmp(buf, "plain", 5));
	close(c);
	close(s);
	close(l);
	int p[2];
	REQUIRE(pipe(p) == 0);
	CHECK(write(p[1], "pipe", 4) == 4 && read(p[0], buf, 4) == 4 && !memcmp(buf, "pipe", 4));
	close(p[0]);
	close(p[1]);
}

/* stdio over an IWARP socket, and dup2 onto another number (inetd style) */
static void test_stdio_dup(void)
{
	struct sockaddr_in a;
	int l = xs_sock_listen(1, &a);
	REQUIRE(l >= 0);
	int c = xs_sock_connect(1, &a);
	REQUIRE(c >= 0);
	int s = accept(l, NULL, NULL);
	REQUIRE(s >= 0);

	FILE *out = fdopen(c, "w");
	REQUIRE(out);
	CHECK(fprintf(out, "line %d\nsecond line\n", 42) > 0);
	CHECK(fflush(out) == 0);
	int s2 = dup(s);
	CHECK(s2 >= 0);
	close(s); /* the dup keeps the socket */
	int hi = 200;
	CHECK(dup2(s2, hi) == hi);
	close(s2);
	FILE *in = fdopen(hi, "r");
	REQUIRE(in);
	char line[64];
	CHECK(fgets(line, sizeof(line), in) && !strcmp(line, "line 42\n"));
	CHECK(fgets(line, sizeof(line), in) && !strcmp(line, "second line\n"));
	CHECK(fclose(out) == 0); /* closes c: EOF for the reader */
	CHECK(fgets(line, sizeof(line), in) == NULL && feof(in));
	CHECK(fclose(in) == 0);
	close(l);
}

/* Many small messages read one at a time (rstream's 64-byte bandwidth
 * run): credits follow what the reader consumed, as in rsockets.  They
 * followed what arrived, so a sender ahead of its reader overflowed the
 * reader's message queue, the connection was taken for broken and both
 * ends waited for ever. */
#define NSMALL 20000
#define SMALL 64

static void *small_writer(void *arg)
{
	int fd = *(int *)arg;
	uint8_t b[SMALL];

	for (unsigned i = 0; i < NSMALL; i++) {
		memset(b, (int)(i & 0xff), sizeof(b));
		if (xs_write_full(fd, b, sizeof(b)) < 0)
			return (void *)1;
	}
	return NULL;
}

static void test_many_small(void)
{
	struct sockaddr_in a;
	int l = xs_sock_listen(1, &a);
	uint8_t b[SMALL];
	pthread_t t;
	unsigned bad = 0;
	void *trc = NULL;

	stage = "many small messages";
	REQUIRE(l >= 0);
	int c = xs_sock_connect(1, &a);
	REQUIRE(c >= 0);
	int s = accept(l, NULL, NULL);
	REQUIRE(s >= 0);
	REQUIRE(pthread_create(&t, NULL, small_writer, &c) == 0);
	for (unsigned i = 0; i < NSMALL; i++) {
		if (i % 256 == 0) /* a slower reader: the writer gets ahead */
			usleep(1000);
		if (xs_read_full(s, b, sizeof(b)) < 0) {
			bad = NSMALL;
			break;
		}
		for (unsigned k = 0; k < sizeof(b); k++)
			bad += b[k] != (uint8_t)(i & 0xff);
	}
	CHECK(pthread_join(t, &trc) == 0 && trc == NULL);
	CHECK_EQ_U(bad, 0);
	close(c);
	close(s);
	close(l);
}

/* A peer that ends without close: its process exits, so its kernel sends a
 * FIN but no rsockets DISCONNECT message (a TCP reset, as siw's close with
 * unread data sends, ends the same way).  The data that arrived is read,
 * then ECONNRESET once, then end of file; before, the end looked like a
 * complete stream. */
static void test_abort(void)
{
	struct sockaddr_in a;
	int l = xs_sock_listen(1, &a), go[2];
	char b[16], x = 0;

	REQUIRE(l >= 0);
	REQUIRE(pipe(go) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(l);
		close(go[1]);
		int c = xs_sock_connect(1, &a);
		if (c < 0 || write(c, "tail", 4) != 4)
			_exit(2);
		if (read(go[0], &x, 1) != 1) /* the parent has the data */
			_exit(3);
		/* no close, and an exit libxsock does not see (as a crash):
		 * no DISCONNECT message (its _exit closes as exit() does) */
		syscall(SYS_exit_group, 0);
	}
	close(go[0]);
	int s = accept(l, NULL, NULL);
	REQUIRE(s >= 0);
	int avail = 0;
	for (int i = 0; i < 5000 && avail < 4; i++) {
		CHECK(ioctl(s, FIONREAD, &avail) == 0);
		if (avail < 4)
			usleep(1000);
	}
	CHECK_EQ_U(avail, 4);
	CHECK(write(go[1], &x, 1) == 1);
	memset(b, 0, sizeof(b));
	CHECK(read(s, b, sizeof(b)) == 4 && memcmp(b, "tail", 4) == 0);
	errno = 0;
	CHECK(read(s, b, sizeof(b)) == -1 && errno == ECONNRESET);
	CHECK(read(s, b, sizeof(b)) == 0);
	int st = 0;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(go[1]);
	close(s);
	close(l);
}

int main(void)
{
	xs_test_seed(20261121);
	src = malloc(BIG);
	dst = malloc(BIG);
	REQUIRE(src && dst);
	xs_rand_fill(src, BIG);
	signal(SIGALRM, on_alarm);
	alarm(120);
	stage = "refused_and_mode";
	test_refused_and_mode();
	stage = "fallthrough";
	test_fallthrough();
	stage = "small";
	test_small();
	stage = "stdio_dup";
	test_stdio_dup();
	stage = "bulk";
	test_bulk();
	stage = "abort";
	test_abort();
	test_many_small();
	free(src);
	free(dst);
	return xs_test_result();
}
