/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* What unmodified programs do with IWARP sockets, beyond test-xsock-stream
 * and test-xsock-events:
 *  - inetd style: the socket dup2'ed over stdin and stdout, and a filter
 *    written against fds 0/1 (read(0)/write(1), then stdio through
 *    fdopen(0)/fdopen(1)) serves the peer; the old fds come back after;
 *  - epoll with EPOLLET: one report per arrival, none while unread data
 *    sits there, a new one for new data, EPOLLOUT once, re-arm with MOD;
 *  - half-close both directions: each side's SHUT_WR gives the other EOF
 *    after the data, while the other direction still carries data;
 *  - 16 threads sharing 8 sockets: on each connection one thread writes
 *    framed records while another reads the echoes on the same fd; every
 *    record is checked (length, sequence, contents) in order.
 * Linked with libxsock (as a preload would be). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "tests/xs_test.h"
#include "tests/xs_test_sock.h"

/* A connected IWARP pair: *c the client, *s the accepted socket. */
static void pair(int *c, int *s)
{
	struct sockaddr_in a;
	int l = xs_sock_listen(1, &a);

	REQUIRE(l >= 0);
	*c = xs_sock_connect(1, &a);
	REQUIRE(*c >= 0);
	*s = accept(l, NULL, NULL);
	REQUIRE(*s >= 0);
	close(l);
}

/* ---- inetd style ------------------------------------------------------------ */

/* The "program": upper-cases lines from stdin to stdout until EOF. */
static void upcase_filter(void)
{
	char line[256];
	FILE *in = fdopen(0, "r"), *out = fdopen(1, "w");

	REQUIRE(in && out);
	while (fgets(line, sizeof(line), in)) {
		for (char *p = line; *p; p++)
			if (*p >= 'a' && *p <= 'z')
				*p = (char)(*p - 'a' + 'A');
		fputs(line, out);
		fflush(out);
	}
	/* the streams own fds 0 and 1 now; closing them closes the socket copies */
	fclose(in);
	fclose(out);
}

static void test_inetd(void)
{
	int c, s, save0, save1;
	char buf[256];

	pair(&c, &s);
	fflush(stdout);
	save0 = dup(0);
	save1 = dup(1);
	REQUIRE(save0 >= 0 && save1 >= 0);
	REQUIRE(dup2(s, 0) == 0 && dup2(s, 1) == 1);
	close(s);

	/* raw fds first: a greeting through write(1), a word through read(0) */
	CHECK(write(1, "hello\n", 6) == 6);
	CHECK(xs_read_full(c, buf, 6) == 0 && !memcmp(buf, "hello\n", 6));
	CHECK(write(c, "ok", 2) == 2);
	CHECK(xs_read_full(0, buf, 2) == 0 && !memcmp(buf, "ok", 2));

	/* then the filter, over stdio on fds 0/1 */
	static const char req[] = "first line\nsecond Line\nlast one\n";
	static const char want[] = "FIRST LINE\nSECOND LINE\nLAST ONE\n";
	CHECK(xs_write_full(c, req, sizeof(req) - 1) == 0);
	CHECK(shutdown(c, SHUT_WR) == 0);
	upcase_filter();
	size_t got = 0;
	ssize_t r;
	while (got < sizeof(buf) && (r = read(c, buf + got, sizeof(buf) - got)) > 0)
		got += (size_t)r;
	CHECK(got == sizeof(want) - 1 && !memcmp(buf, want, got));

	/* the process's own stdin/stdout come back */
	REQUIRE(dup2(save0, 0) == 0 && dup2(save1, 1) == 1);
	close(save0);
	close(save1);
	int v = -1;
	socklen_t sl = sizeof(v);
	CHECK(getsockopt(1, SOL_IWARP, IWARP_MODE, &v, &sl) == -1 || v == 0);
	close(c);
}

/* ---- EPOLLET ------------------------------------------------------------------- */

static int ep_wait1(int ep, int ms, struct epoll_event *out)
{
	return epoll_wait(ep, out, 1, ms);
}

static void test_epollet(void)
{
	int c, s, ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev, out;
	char buf[64];

	REQUIRE(ep >= 0);
	pair(&c, &s);
	REQUIRE(fcntl(s, F_SETFL, O_NONBLOCK) == 0);
	ev = (struct epoll_event){ .events = EPOLLIN | EPOLLET, .data.u64 = 7 };
	REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) == 0);

	CHECK(ep_wait1(ep, 50, &out) == 0); /* nothing yet */
	CHECK(write(c, "abcd", 4) == 4);
	CHECK(ep_wait1(ep, 5000, &out) == 1 && out.data.u64 == 7 && (out.events & EPOLLIN));
	/* unread data, no news: no second report (level-triggered would) */
	CHECK(ep_wait1(ep, 100, &out) == 0);
	CHECK(read(s, buf, 2) == 2);
	CHECK(ep_wait1(ep, 100, &out) == 0);
	/* new data: a new edge, although data was already there */
	CHECK(write(c, "ef", 2) == 2);
	CHECK(ep_wait1(ep, 5000, &out) == 1 && (out.events & EPOLLIN));
	CHECK(read(s, buf, sizeof(buf)) == 4 && !memcmp(buf, "cdef", 4));
	CHECK(read(s, buf, sizeof(buf)) == -1 && errno == EAGAIN);
	CHECK(ep_wait1(ep, 100, &out) == 0);

	/* EPOLLOUT edge-triggered: reported once, and again after MOD */
	ev = (struct epoll_event){ .events = EPOLLIN | EPOLLOUT | EPOLLET, .data.u64 = 8 };
	REQUIRE(epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev) == 0);
	CHECK(ep_wait1(ep, 5000, &out) == 1 && out.data.u64 == 8 && (out.events & EPOLLOUT));
	CHECK(ep_wait1(ep, 100, &out) == 0);
	REQUIRE(epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev) == 0);
	CHECK(ep_wait1(ep, 5000, &out) == 1 && (out.events & EPOLLOUT));

	/* the peer's close: EPOLLIN (end of stream) or HUP as a new edge */
	close(c);
	CHECK(ep_wait1(ep, 5000, &out) == 1 && (out.events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)));
	CHECK(read(s, buf, sizeof(buf)) == 0);
	close(s);
	close(ep);
}

/* ---- half-close ------------------------------------------------------------------ */

static void test_half_close(void)
{
	int c, s;
	char buf[64];

	pair(&c, &s);
	/* client -> server closed first; server -> client still works */
	CHECK(write(c, "req", 3) == 3);
	CHECK(shutdown(c, SHUT_WR) == 0);
	CHECK(xs_read_full(s, buf, 3) == 0 && !memcmp(buf, "req", 3));
	CHECK(read(s, buf, sizeof(buf)) == 0);
	CHECK(read(s, buf, sizeof(buf)) == 0); /* EOF stays */
	CHECK(write(s, "resp1", 5) == 5);
	CHECK(xs_read_full(c, buf, 5) == 0 && !memcmp(buf, "resp1", 5));
	CHECK(send(c, "x", 1, MSG_NOSIGNAL) == -1 && errno == EPIPE);
	/* then server -> client */
	CHECK(write(s, "resp2", 5) == 5);
	CHECK(shutdown(s, SHUT_WR) == 0);
	CHECK(xs_read_full(c, buf, 5) == 0 && !memcmp(buf, "resp2", 5));
	CHECK(read(c, buf, sizeof(buf)) == 0);
	close(c);
	close(s);

	/* the other order: the server half-closes first */
	pair(&c, &s);
	CHECK(shutdown(s, SHUT_WR) == 0);
	CHECK(read(c, buf, sizeof(buf)) == 0);
	CHECK(write(c, "late", 4) == 4);
	CHECK(xs_read_full(s, buf, 4) == 0 && !memcmp(buf, "late", 4));
	CHECK(shutdown(c, SHUT_WR) == 0);
	CHECK(read(s, buf, sizeof(buf)) == 0);
	close(c);
	close(s);
}

/* ---- 16 threads on 8 sockets --------------------------------------------------------- */

#define NCONN 8
#define NREC 400

/* record: u32 length (of the whole record), u32 connection, u32 sequence,
 * then length - 12 octets of (conn * 31 + seq + i) */
static size_t rec_len(unsigned conn, unsigned seq)
{
	return 12 + (conn * 977u + seq * 131u) % 3000u;
}

static void rec_fill(uint8_t *p, unsigned conn, unsigned seq)
{
	uint32_t h[3] = { (uint32_t)rec_len(conn, seq), conn, seq };

	memcpy(p, h, sizeof(h));
	for (size_t i = 12; i < h[0]; i++)
		p[i] = (uint8_t)(conn * 31 + seq + i);
}

struct conn {
	unsigned id;
	int c, s;
	int bad;
};

static void *writer(void *arg)
{
	struct conn *k = arg;
	uint8_t rec[3100];

	for (unsigned q = 0; q < NREC; q++) {
		rec_fill(rec, k->id, q);
		if (xs_write_full(k->c, rec, rec_len(k->id, q))) {
			k->bad++;
			break;
		}
	}
	return NULL;
}

static void *reader(void *arg)
{
	struct conn *k = arg;
	uint8_t got[3100], want[3100];

	for (unsigned q = 0; q < NREC; q++) {
		uint32_t h[3];
		if (xs_read_full(k->c, h, sizeof(h)) || h[0] != rec_len(k->id, q) || h[1] != k->id ||
		    h[2] != q || xs_read_full(k->c, got + 12, h[0] - 12)) {
			k->bad++;
			break;
		}
		memcpy(got, h, sizeof(h));
		rec_fill(want, k->id, q);
		if (memcmp(got, want, h[0])) {
			k->bad++;
			break;
		}
	}
	return NULL;
}

/* the server side: one thread per connection echoes until EOF */
static void *echo(void *arg)
{
	struct conn *k = arg;
	uint8_t buf[4096];
	ssize_t n;

	while ((n = read(k->s, buf, sizeof(buf))) > 0)
		if (xs_write_full(k->s, buf, (size_t)n)) {
			k->bad++;
			break;
		}
	if (n < 0)
		k->bad++;
	shutdown(k->s, SHUT_WR);
	return NULL;
}

static void test_threads(void)
{
	struct conn k[NCONN];
	pthread_t tw[NCONN], tr[NCONN], te[NCONN];

	for (unsigned i = 0; i < NCONN; i++) {
		k[i] = (struct conn){ .id = i };
		pair(&k[i].c, &k[i].s);
	}
	for (unsigned i = 0; i < NCONN; i++) {
		REQUIRE(pthread_create(&te[i], NULL, echo, &k[i]) == 0);
		REQUIRE(pthread_create(&tw[i], NULL, writer, &k[i]) == 0);
		REQUIRE(pthread_create(&tr[i], NULL, reader, &k[i]) == 0);
	}
	for (unsigned i = 0; i < NCONN; i++) {
		pthread_join(tw[i], NULL);
		pthread_join(tr[i], NULL);
		/* all echoes arrived: end the echo thread with EOF */
		CHECK(shutdown(k[i].c, SHUT_WR) == 0);
		pthread_join(te[i], NULL);
		char x;
		CHECK(read(k[i].c, &x, 1) == 0);
		if (k[i].bad)
			fprintf(stderr, "connection %u: %d failures\n", i, k[i].bad);
		CHECK(k[i].bad == 0);
		close(k[i].c);
		close(k[i].s);
	}
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_inetd();
	test_epollet();
	test_half_close();
	test_threads();
	return xs_test_failures ? XS_TEST_FAIL : XS_TEST_PASS;
}
