/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Timeouts, signals and socket options on IWARP sockets (xsock(7)
 * SIGNALS, OPTIONS), both ends in one process:
 *   SO_RCVTIMEO: recv with no data fails with EAGAIN after the timeout,
 *     accept likewise; SO_SNDTIMEO: a writer whose peer does not read gets
 *     a partial count or EAGAIN; a connect to a peer that never answers
 *     the MPA Request gets EINPROGRESS;
 *   a signal during a blocking recv/accept: SA_RESTART restarts it (the
 *     data sent after the signal arrives), without it EINTR, SA_RESTART
 *     with SO_RCVTIMEO EINTR, poll always EINTR; signal() is BSD (restart),
 *     siginterrupt(sig, 1) makes it interrupt; sigaction's oldact reports
 *     the application's handler; SA_SIGINFO handlers get their siginfo;
 *   SO_LINGER {1, 0}: the peer's recv fails with ECONNRESET, then EOF;
 *   TCP_MAXSEG > 0, SO_KEEPALIVE/TCP_KEEPIDLE reach the TCP connection,
 *   SO_RCVLOWAT holds back recv and poll until the mark.
 * Bounds on times are a lower bound and a generous upper bound only. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tests/xs_test.h"
#include "tests/xs_test_sock.h"

static const char *volatile stage = "start";
static volatile sig_atomic_t hits;
static volatile sig_atomic_t info_ok;

static void on_alarm(int sig)
{
	(void)sig;
	const char *m = "test-xsock-sig: timeout in ";
	if (write(2, m, strlen(m)) < 0 || write(2, stage, strlen(stage)) < 0 || write(2, "\n", 1) < 0)
		_exit(1);
	_exit(1);
}

static void on_usr1(int sig)
{
	if (sig == SIGUSR1)
		hits++;
}

static void on_usr1_info(int sig, siginfo_t *si, void *ctx)
{
	if (sig == SIGUSR1 && si && si->si_signo == SIGUSR1 && ctx)
		info_ok = 1;
	hits++;
}

static int64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void set_handler(int flags, bool info)
{
	struct sigaction sa = { .sa_flags = flags };

	if (info) {
		sa.sa_sigaction = on_usr1_info;
		sa.sa_flags |= SA_SIGINFO;
	} else {
		sa.sa_handler = on_usr1;
	}
	sigemptyset(&sa.sa_mask);
	REQUIRE(sigaction(SIGUSR1, &sa, NULL) == 0);
	hits = 0;
	info_ok = 0;
}

static int set_timeo(int fd, int name, long ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	return setsockopt(fd, SOL_SOCKET, name, &tv, sizeof(tv));
}

/* ---- a helper thread: signal the main thread once it sleeps in the call,
 * then optionally write to or connect to a socket ---- */

struct helper {
	pthread_t target;
	pid_t target_tid;
	atomic_int entering; /* the main thread is about to make the call */
	int signal; /* 0: none */
	int delay_ms; /* before the action */
	int write_fd; /* -1: none */
	const char *data;
	const struct sockaddr_in *connect_to; /* NULL: none */
	int conn_fd; /* what the connect made */
	pthread_t th;
};

/* true once the thread is asleep (it can only sleep inside the call) */
static bool asleep(pid_t tid)
{
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	FILE *f = fopen(path, "r");
	bool s = false;

	if (!f)
		return true; /* no /proc: rely on the delay */
	if (fgets(buf, sizeof(buf), f)) {
		char *p = strrchr(buf, ')');
		s = p && p[1] == ' ' && (p[2] == 'S' || p[2] == 'D');
	}
	fclose(f);
	return s;
}

static void *helper_main(void *arg)
{
	struct helper *h = arg;

	while (!atomic_load(&h->entering))
		sleep_ms(1);
	for (int i = 0; i < 5000 && !asleep(h->target_tid); i++)
		sleep_ms(1);
	sleep_ms(50);
	if (h->signal)
		pthread_kill(h->target, h->signal);
	sleep_ms(h->delay_ms);
	if (h->write_fd >= 0 && xs_write_full(h->write_fd, h->data, strlen(h->data)))
		fprintf(stderr, "helper: write failed: %s\n", strerror(errno));
	if (h->connect_to)
		h->conn_fd = xs_sock_connect(1, h->connect_to);
	return NULL;
}

static void helper_start(struct helper *h, int sig, int delay_ms, int write_fd, const char *data,
			 const struct sockaddr_in *connect_to)
{
	*h = (struct helper){ .target = pthread_self(), .target_tid = (pid_t)syscall(SYS_gettid),
			      .signal = sig, .delay_ms = delay_ms, .write_fd = write_fd,
			      .data = data, .connect_to = connect_to, .conn_fd = -1 };
	REQUIRE(pthread_create(&h->th, NULL, helper_main, h) == 0);
}

static void helper_join(struct helper *h)
{
	pthread_join(h->th, NULL);
	if (h->conn_fd >= 0)
		close(h->conn_fd);
}

/* ---- a connected pair ---- */

struct pair {
	int l, c, s;
	struct sockaddr_in addr;
};

static void pair_open(struct pair *p)
{
	p->l = xs_sock_listen(1, &p->addr);
	REQUIRE(p->l >= 0);
	p->c = xs_sock_connect(1, &p->addr);
	REQUIRE(p->c >= 0);
	p->s = accept(p->l, NULL, NULL);
	REQUIRE(p->s >= 0);
}

static void pair_close(struct pair *p)
{
	close(p->c);
	close(p->s);
	close(p->l);
}

/* ---- tests ---- */

static void test_rcvtimeo(void)
{
	struct pair p;
	char buf[16];
	struct timeval tv;
	socklen_t sl = sizeof(tv);

	pair_open(&p);
	CHECK(set_timeo(p.s, SO_RCVTIMEO, 300) == 0);
	CHECK(getsockopt(p.s, SOL_SOCKET, SO_RCVTIMEO, &tv, &sl) == 0 && sl == sizeof(tv) &&
	      tv.tv_sec == 0 && tv.tv_usec == 300000);
	struct timeval bad = { 1, 1000000 };
	errno = 0;
	CHECK(setsockopt(p.s, SOL_SOCKET, SO_RCVTIMEO, &bad, sizeof(bad)) < 0 && errno == EDOM);
	int64_t t0 = ms_now();
	errno = 0;
	ssize_t r = recv(p.s, buf, sizeof(buf), 0);
	int64_t dt = ms_now() - t0;
	CHECK(r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
	CHECK(dt >= 250 && dt < 10000);
	printf("SO_RCVTIMEO 300 ms: recv EAGAIN after %lld ms\n", (long long)dt);
	/* read() and MSG_WAITALL with some data: the partial count */
	CHECK(write(p.c, "abc", 3) == 3);
	t0 = ms_now();
	r = recv(p.s, buf, 10, MSG_WAITALL);
	dt = ms_now() - t0;
	CHECK(r == 3 && !memcmp(buf, "abc", 3));
	CHECK(dt >= 250 && dt < 10000);
	/* the listener's timeout: accept fails with EAGAIN, and is inherited */
	CHECK(set_timeo(p.l, SO_RCVTIMEO, 300) == 0);
	t0 = ms_now();
	errno = 0;
	CHECK(accept(p.l, NULL, NULL) < 0 && errno == EAGAIN);
	dt = ms_now() - t0;
	CHECK(dt >= 250 && dt < 10000);
	printf("SO_RCVTIMEO 300 ms: accept EAGAIN after %lld ms\n", (long long)dt);
	int c2 = xs_sock_connect(1, &p.addr);
	CHECK(c2 >= 0);
	int s2 = accept(p.l, NULL, NULL);
	CHECK(s2 >= 0);
	sl = sizeof(tv);
	CHECK(getsockopt(s2, SOL_SOCKET, SO_RCVTIMEO, &tv, &sl) == 0 && tv.tv_usec == 300000);
	close(c2);
	close(s2);
	pair_close(&p);
}

static void test_sndtimeo(void)
{
	struct pair p;
	static char chunk[65536];
	size_t total = 0;
	int64_t dt = 0;
	ssize_t last = 0;
	int e = 0;

	pair_open(&p);
	CHECK(set_timeo(p.c, SO_SNDTIMEO, 300) == 0);
	/* the peer never reads: the ring and the send buffer fill up */
	for (int i = 0; i < 1000; i++) {
		int64_t t0 = ms_now();
		errno = 0;
		last = send(p.c, chunk, sizeof(chunk), MSG_NOSIGNAL);
		e = errno;
		dt = ms_now() - t0;
		if (last != (ssize_t)sizeof(chunk))
			break;
		total += (size_t)last;
	}
	CHECK(last < (ssize_t)sizeof(chunk));
	CHECK(last > 0 || e == EAGAIN);
	CHECK(dt >= 250 && dt < 10000);
	printf("SO_SNDTIMEO 300 ms: %zu bytes went, then %zd (%s) after %lld ms\n", total,
	       last, last < 0 ? strerror(e) : "partial", (long long)dt);
	pair_close(&p);
}

/* A plain listener on 127.0.0.1:port (SO_REUSEADDR; the port may still
 * be the stack's a moment after its listener closed). */
static int plain_listen_at(struct sockaddr_in *a)
{
	for (int i = 0; i < 100; i++) {
		int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
		if (l < 0)
			return -1;
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(l, (struct sockaddr *)a, sizeof(*a)) == 0 && listen(l, 16) == 0)
			return l;
		close(l);
		usleep(10000);
	}
	return -1;
}

static void test_connect_timeo(void)
{
	/* a destination that answered MPA a moment ago (an xsock listener),
	 * now a plain listener that never answers the MPA Request: a known
	 * iWARP peer is not waited for as a probe, so SO_SNDTIMEO ends the
	 * connect as TCP's would */
	struct sockaddr_in a;
	int l = xs_sock_listen(1, &a);
	REQUIRE(l >= 0);
	int c = xs_sock_connect(1, &a);
	CHECK(c >= 0);
	close(c);
	close(l);
	l = plain_listen_at(&a);
	REQUIRE(l >= 0);
	c = socket(AF_INET, SOCK_STREAM, 0);
	REQUIRE(c >= 0 && xs_sock_mode(c, 1) == 0);
	CHECK(set_timeo(c, SO_SNDTIMEO, 300) == 0);
	int64_t t0 = ms_now();
	errno = 0;
	CHECK(connect(c, (struct sockaddr *)&a, sizeof(a)) < 0 && errno == EINPROGRESS);
	int64_t dt = ms_now() - t0;
	CHECK(dt >= 250 && dt < 10000);
	printf("SO_SNDTIMEO 300 ms, a known iWARP peer: connect EINPROGRESS after %lld ms\n",
	       (long long)dt);
	/* the connection attempt goes on */
	errno = 0;
	CHECK(connect(c, (struct sockaddr *)&a, sizeof(a)) < 0 && errno == EALREADY);
	close(c);
	close(l);

	/* a new destination, a silent plain listener: the probe gives up at
	 * SO_SNDTIMEO (shorter than XSOCK_PLAIN_PROBE_MS) and the connect
	 * goes on as plain TCP */
	l = xs_sock_listen(0, &a);
	REQUIRE(l >= 0);
	c = socket(AF_INET, SOCK_STREAM, 0);
	REQUIRE(c >= 0 && xs_sock_mode(c, 1) == 0);
	CHECK(set_timeo(c, SO_SNDTIMEO, 300) == 0);
	t0 = ms_now();
	CHECK(connect(c, (struct sockaddr *)&a, sizeof(a)) == 0);
	dt = ms_now() - t0;
	int mode = -1;
	socklen_t ml = sizeof(mode);
	CHECK(getsockopt(c, SOL_IWARP, IWARP_MODE, &mode, &ml) == 0 && mode == 0);
	CHECK(dt >= 250 && dt < 900);
	printf("SO_SNDTIMEO 300 ms, a silent plain listener: plain TCP after %lld ms\n",
	       (long long)dt);
	close(c);
	close(l);
}

/* recv interrupted by SIGUSR1: flags of the handler, a timeout or not;
 * the peer writes "late" after the signal. */
static void recv_case(const char *name, int flags, bool info, long timeo_ms, bool want_restart)
{
	struct pair p;
	struct helper h;
	char buf[16] = { 0 };

	stage = name;
	pair_open(&p);
	if (flags >= 0)
		set_handler(flags, info);
	if (timeo_ms)
		CHECK(set_timeo(p.s, SO_RCVTIMEO, timeo_ms) == 0);
	helper_start(&h, SIGUSR1, 150, p.c, "late", NULL);
	atomic_store(&h.entering, 1);
	errno = 0;
	ssize_t r = recv(p.s, buf, sizeof(buf), 0);
	int e = errno;
	if (want_restart) {
		CHECK(r == 4 && !memcmp(buf, "late", 4));
	} else {
		CHECK(r < 0 && e == EINTR);
		if (r < 0) { /* the socket still works: the data arrives */
			CHECK(set_timeo(p.s, SO_RCVTIMEO, 10000) == 0);
			CHECK(recv(p.s, buf, sizeof(buf), 0) == 4);
		}
	}
	CHECK(hits == 1);
	if (info)
		CHECK(info_ok == 1);
	printf("%s: recv %s\n", name, r >= 0 ? "restarted, got the data" : strerror(e));
	helper_join(&h);
	pair_close(&p);
}

static void test_recv_signals(void)
{
	struct sigaction old;

	recv_case("SA_RESTART", SA_RESTART, false, 0, true);
	CHECK(sigaction(SIGUSR1, NULL, &old) == 0 && old.sa_handler == on_usr1 &&
	      (old.sa_flags & SA_RESTART) && !(old.sa_flags & SA_SIGINFO));
	recv_case("SA_RESTART|SA_SIGINFO", SA_RESTART, true, 0, true);
	CHECK(sigaction(SIGUSR1, NULL, &old) == 0 && old.sa_sigaction == on_usr1_info &&
	      (old.sa_flags & SA_SIGINFO));
	recv_case("no SA_RESTART", 0, false, 0, false);
	recv_case("SA_RESTART with SO_RCVTIMEO", SA_RESTART, false, 10000, false);
	/* signal(): BSD semantics (restart), unless siginterrupt() */
	REQUIRE(signal(SIGUSR1, on_usr1) != SIG_ERR);
	hits = 0;
	recv_case("signal()", -1, false, 0, true);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	CHECK(siginterrupt(SIGUSR1, 1) == 0);
	hits = 0;
	recv_case("signal() + siginterrupt", -1, false, 0, false);
	CHECK(siginterrupt(SIGUSR1, 0) == 0);
#pragma GCC diagnostic pop
	hits = 0;
	recv_case("siginterrupt(0)", -1, false, 0, true);
	/* SIG_IGN/SIG_DFL pass through and are reported as set */
	struct sigaction ign = { .sa_handler = SIG_IGN };
	sigemptyset(&ign.sa_mask);
	CHECK(sigaction(SIGUSR1, &ign, &old) == 0 && old.sa_handler == on_usr1);
	CHECK(sigaction(SIGUSR1, NULL, &old) == 0 && old.sa_handler == SIG_IGN);
}

static void test_poll_accept_signals(void)
{
	struct pair p;
	struct helper h;

	pair_open(&p);
	/* poll: EINTR even under SA_RESTART */
	stage = "poll";
	set_handler(SA_RESTART, false);
	struct pollfd pf = { .fd = p.s, .events = POLLIN };
	helper_start(&h, SIGUSR1, 150, p.c, "x", NULL);
	atomic_store(&h.entering, 1);
	errno = 0;
	int r = poll(&pf, 1, 20000);
	CHECK(r < 0 && errno == EINTR);
	CHECK(hits == 1);
	helper_join(&h);
	char x;
	CHECK(recv(p.s, &x, 1, 0) == 1);

	/* accept under SA_RESTART: restarted, returns the client that
	 * connects after the signal */
	stage = "accept restart";
	helper_start(&h, SIGUSR1, 150, -1, NULL, &p.addr);
	atomic_store(&h.entering, 1);
	int a = accept(p.l, NULL, NULL);
	CHECK(a >= 0);
	CHECK(hits == 2);
	helper_join(&h);
	if (a >= 0)
		close(a);

	/* without SA_RESTART: EINTR */
	stage = "accept EINTR";
	set_handler(0, false);
	helper_start(&h, SIGUSR1, 0, -1, NULL, NULL);
	atomic_store(&h.entering, 1);
	errno = 0;
	a = accept(p.l, NULL, NULL);
	CHECK(a < 0 && errno == EINTR);
	CHECK(hits == 1);
	helper_join(&h);
	if (a >= 0)
		close(a);
	pair_close(&p);
}

static void test_linger_reset(void)
{
	struct pair p;
	char buf[8];
	struct linger lg = { 1, 0 }, got;
	socklen_t sl = sizeof(got);

	stage = "linger";
	pair_open(&p);
	CHECK(setsockopt(p.c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
	CHECK(getsockopt(p.c, SOL_SOCKET, SO_LINGER, &got, &sl) == 0 && got.l_onoff == 1 &&
	      got.l_linger == 0);
	CHECK(set_timeo(p.s, SO_RCVTIMEO, 10000) == 0);
	close(p.c);
	errno = 0;
	ssize_t r = recv(p.s, buf, sizeof(buf), 0);
	int e = errno;
	CHECK(r < 0 && e == ECONNRESET);
	printf("SO_LINGER {1, 0}: the peer's recv gives %zd (%s)\n", r, r < 0 ? strerror(e) : "-");
	CHECK(recv(p.s, buf, sizeof(buf), 0) == 0); /* then end of stream */
	close(p.s);
	close(p.l);
}

static void test_options(void)
{
	struct pair p;
	int v = 0;
	socklen_t sl = sizeof(v);

	stage = "options";
	pair_open(&p);
	CHECK(getsockopt(p.c, IPPROTO_TCP, TCP_MAXSEG, &v, &sl) == 0 && v > 0);
	printf("TCP_MAXSEG: %d\n", v);
	sl = sizeof(v);
	CHECK(getsockopt(p.s, IPPROTO_TCP, TCP_MAXSEG, &v, &sl) == 0 && v > 0);
	sl = sizeof(v);
	CHECK(getsockopt(p.l, IPPROTO_TCP, TCP_MAXSEG, &v, &sl) == 0 && v > 0);
	int on = 1, idle = 77;
	CHECK(setsockopt(p.c, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on)) == 0);
	CHECK(setsockopt(p.c, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) == 0);
	v = 0;
	sl = sizeof(v);
	CHECK(getsockopt(p.c, SOL_SOCKET, SO_KEEPALIVE, &v, &sl) == 0 && v == 1);
	v = 0;
	sl = sizeof(v);
	CHECK(getsockopt(p.c, IPPROTO_TCP, TCP_KEEPIDLE, &v, &sl) == 0 && v == 77);
	int bad = -5;
	errno = 0;
	CHECK(setsockopt(p.c, IPPROTO_TCP, TCP_KEEPIDLE, &bad, sizeof(bad)) < 0 && errno == EINVAL);
	struct tcp_info ti;
	sl = sizeof(ti);
	CHECK(getsockopt(p.c, IPPROTO_TCP, TCP_INFO, &ti, &sl) == 0 &&
	      ti.tcpi_state == TCP_ESTABLISHED && ti.tcpi_snd_mss > 0);
	sl = sizeof(v);
	CHECK(getsockopt(p.c, SOL_SOCKET, SO_TYPE, &v, &sl) == 0 && v == SOCK_STREAM);
	sl = sizeof(v);
	CHECK(getsockopt(p.l, SOL_SOCKET, SO_ACCEPTCONN, &v, &sl) == 0 && v == 1);
	errno = 0;
	CHECK(setsockopt(p.c, SOL_SOCKET, SO_SNDLOWAT, &on, sizeof(on)) < 0 && errno == ENOPROTOOPT);
	errno = 0;
	CHECK(send(p.c, "u", 1, MSG_OOB) < 0 && errno == EOPNOTSUPP);

	/* SO_RCVLOWAT 10: 4 bytes are not readable, 10 are */
	stage = "rcvlowat";
	int lw = 10;
	CHECK(setsockopt(p.s, SOL_SOCKET, SO_RCVLOWAT, &lw, sizeof(lw)) == 0);
	sl = sizeof(v);
	CHECK(getsockopt(p.s, SOL_SOCKET, SO_RCVLOWAT, &v, &sl) == 0 && v == 10);
	CHECK(write(p.c, "0123", 4) == 4);
	struct pollfd pf = { .fd = p.s, .events = POLLIN };
	CHECK(poll(&pf, 1, 300) == 0);
	struct helper h;
	helper_start(&h, 0, 100, p.c, "456789", NULL);
	atomic_store(&h.entering, 1);
	char buf[32] = { 0 };
	ssize_t r = recv(p.s, buf, sizeof(buf), 0);
	CHECK(r == 10 && !memcmp(buf, "0123456789", 10));
	helper_join(&h);
	CHECK(write(p.c, "abcdefghij", 10) == 10);
	CHECK(poll(&pf, 1, 10000) == 1 && (pf.revents & POLLIN));
	CHECK(recv(p.s, buf, 4, 0) == 4); /* len below the mark: what len asks */
	pair_close(&p);
}

int main(void)
{
	signal(SIGALRM, on_alarm);
	alarm(120);
	stage = "rcvtimeo";
	test_rcvtimeo();
	stage = "sndtimeo";
	test_sndtimeo();
	stage = "connect timeo";
	test_connect_timeo();
	test_recv_signals();
	test_poll_accept_signals();
	test_linger_reset();
	test_options();
	return xs_test_result();
}
