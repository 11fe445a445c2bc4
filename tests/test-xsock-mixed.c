/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The mixed listener (xsock(7) MIXED LISTENER): one IWARP_MODE listener
 * takes iWARP clients and plain TCP clients on the same port.  Checked:
 * both kinds in either order and concurrently, data both ways,
 * getsockopt(IWARP_MODE) 1 on iWARP-accepted sockets and 0 on plain ones,
 * accept4 flags and the peer address on a plain socket, a client that
 * sends nothing (the server speaks first) accepted after XSOCK_CLASSIFY_MS,
 * a client that sends part of the MPA key and stops, clients that close
 * or reset at once, nonblocking accept with poll and epoll, the backlog,
 * closing the listener with plain clients pending, and no fd left open.
 * A plain client queued before a fork is the parent's alone.
 * A verbs listener (rdma_listen, as rping uses) is not mixed: it closes a
 * client that does not send an MPA Request and reports no event. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>

#include "tests/xs_test.h"
#include "tests/xs_test_sock.h"

#define WAIT_MS 10000 /* bound on every wait; far above any expected delay */

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "test-xsock-mixed: timeout\n";
	if (write(2, m, sizeof(m) - 1) < 0)
		_exit(1);
	_exit(1);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own */
}

static int iwarp_mode(int fd)
{
	int v = -1;
	socklen_t l = sizeof(v);

	if (getsockopt(fd, SOL_IWARP, IWARP_MODE, &v, &l) < 0)
		return -1;
	return v;
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1 && (p.revents & (POLLIN | POLLHUP | POLLERR));
}

/* One round trip: the client says msg, the server answers it reversed. */
static void exchange(int cli, int srv, const char *msg)
{
	size_t n = strlen(msg);
	char got[64], back[64];

	REQUIRE(n < sizeof(got));
	CHECK(xs_write_full(cli, msg, n) == 0);
	CHECK(xs_read_full(srv, got, n) == 0 && memcmp(got, msg, n) == 0);
	for (size_t i = 0; i < n; i++)
		back[i] = msg[n - 1 - i];
	CHECK(xs_write_full(srv, back, n) == 0);
	CHECK(xs_read_full(cli, got, n) == 0 && memcmp(got, back, n) == 0);
}

/* A plain client: an ordinary kernel socket (no IWARP_MODE). */
static int plain_connect(const struct sockaddr_in *a)
{
	return xs_sock_connect(0, a);
}

/* The server side of a plain client reads what was sent before accept. */
static int accept_checked(int l, int want_mode, struct sockaddr_in *peer)
{
	struct sockaddr_in pa;
	socklen_t pl = sizeof(pa);

	REQUIRE(readable(l, WAIT_MS)); /* a client the listener dropped never comes */
	int s = accept(l, (struct sockaddr *)&pa, &pl);

	REQUIRE(s >= 0);
	CHECK_EQ_U(iwarp_mode(s), want_mode);
	CHECK(pl == sizeof(pa) && pa.sin_family == AF_INET);
	if (peer)
		*peer = pa;
	return s;
}

static bool same_port(const struct sockaddr_in *peer, int cli)
{
	struct sockaddr_in la;
	socklen_t ll = sizeof(la);

	return getsockname(cli, (struct sockaddr *)&la, &ll) == 0 && la.sin_port == peer->sin_port &&
	       la.sin_addr.s_addr == peer->sin_addr.s_addr;
}

/* iWARP first, then plain; the plain client speaks before accept. */
static void case_iwarp_then_plain(void)
{
	struct sockaddr_in a, peer;
	int l = xs_sock_listen(1, &a);
	REQUIRE(l >= 0);
	CHECK_EQ_U(iwarp_mode(l), 1);

	int ic = xs_sock_connect(1, &a);
	REQUIRE(ic >= 0);
	int pc = plain_connect(&a);
	REQUIRE(pc >= 0);
	CHECK_EQ_U(iwarp_mode(pc), 0);
	CHECK(xs_write_full(pc, "early", 5) == 0);

	int is = accept_checked(l, 1, NULL);
	int ps = accept_checked(l, 0, &peer);
	CHECK(same_port(&peer, pc));
	char buf[8];
	CHECK(xs_read_full(ps, buf, 5) == 0 && memcmp(buf, "early", 5) == 0);
	exchange(ic, is, "iwarp-first");
	exchange(pc, ps, "plain-second");
	/* an ordinary socket: accept() without flags, kernel options */
	CHECK(!(fcntl(ps, F_GETFL) & O_NONBLOCK));
	CHECK(!(fcntl(ps, F_GETFD) & FD_CLOEXEC));
	int v = -1;
	socklen_t vl = sizeof(v);
	CHECK(getsockopt(ps, SOL_SOCKET, SO_ACCEPTCONN, &v, &vl) == 0 && v == 0);
	vl = sizeof(v);
	CHECK(getsockopt(ps, IPPROTO_TCP, TCP_NODELAY, &v, &vl) == 0 && v == 0);
	/* half-close: the plain client sees the server's FIN */
	CHECK(shutdown(ps, SHUT_WR) == 0);
	CHECK(readable(pc, WAIT_MS) && read(pc, buf, 1) == 0);
	close(pc);
	close(ps);
	close(ic);
	close(is);
	close(l);
}

/* Plain first (accepted with accept4 flags), then iWARP; the listener's
 * TCP_NODELAY is passed on to the plain socket as the kernel would. */
static void case_plain_then_iwarp(void)
{
	struct sockaddr_in a, peer;
	socklen_t pl = sizeof(peer);
	int one = 1, v = 0;
	socklen_t vl = sizeof(v);
	int l = xs_sock_listen(1, &a);
	REQUIRE(l >= 0);
	CHECK(setsockopt(l, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0);

	int pc = plain_connect(&a);
	REQUIRE(pc >= 0);
	CHECK(xs_write_full(pc, "GET /", 5) == 0);
	CHECK(readable(l, WAIT_MS)); /* classified: the plain client is queued */
	int ic = xs_sock_connect(1, &a);
	REQUIRE(ic >= 0);

	int ps = accept4(l, (struct sockaddr *)&peer, &pl, SOCK_NONBLOCK | SOCK_CLOEXEC);
	REQUIRE(ps >= 0);
	CHECK_EQ_U(iwarp_mode(ps), 0);
	CHECK(same_port(&peer, pc));
	CHECK(fcntl(ps, F_GETFL) & O_NONBLOCK);
	CHECK(fcntl(ps, F_GETFD) & FD_CLOEXEC);
	CHECK(getsockopt(ps, IPPROTO_TCP, TCP_NODELAY, &v, &vl) == 0 && v != 0);
	int is = accept_checked(l, 1, NULL);
	char buf[8];
	CHECK(readable(ps, WAIT_MS) && read(ps, buf, 5) == 5 && memcmp(buf, "GET /", 5) == 0);
	CHECK(fcntl(ps, F_SETFL, 0) == 0);
	exchange(pc, ps, "plain-first");
	exchange(ic, is, "iwarp-second");
	close(pc);
	close(ps);
	close(ic);
	close(is);
	close(l);
}

/* ---- concurrent clients ---------------------------------------------------------- */

#define NCONC 4

struct client {
	struct sockaddr_in a;
	int iwarp, id;
	bool ok;
};

/* Connect, say "<kind><id>", expect it back reversed, close. */
static void *client_main(void *arg)
{
	struct client *c = arg;
	char msg[16], got[16];
	int fd = xs_sock_connect(c->iwarp, &c->a);

	if (fd < 0)
		return NULL;
	snprintf(msg, sizeof(msg), "%s%02d", c->iwarp ? "iwarp" : "plain", c->id);
	size_t n = strlen(msg);
	if (iwarp_mode(fd) == c->iwarp && xs_write_full(fd, msg, n) == 0 &&
	    xs_read_full(fd, got, n) == 0) {
		c->ok = true;
		for (size_t i = 0; i < n; i++)
			c->ok = c->ok && got[i] == msg[n - 1 - i];
	}
	close(fd);
	return NULL;
}

static void case_concurrent(void)
{
	struct sockaddr_in a;
	struct client cl[2 * NCONC];
	pthread_t t[2 * NCONC];
	int l = xs_sock_listen(1, &a), kinds[2] = { 0, 0 };
	REQUIRE(l >= 0);

	for (int i = 0; i < 2 * NCONC; i++) {
		cl[i] = (struct client){ .a = a, .iwarp = i % 2, .id = i };
		REQUIRE(pthread_create(&t[i], NULL, client_main, &cl[i]) == 0);
	}
	for (int i = 0; i < 2 * NCONC; i++) {
		int s = accept(l, NULL, NULL);
		REQUIRE(s >= 0);
		int m = iwarp_mode(s);
		REQUIRE(m == 0 || m == 1);
		kinds[m]++;
		char msg[16], back[16];
		REQUIRE(xs_read_full(s, msg, 7) == 0); /* "iwarpNN" or "plainNN" */
		CHECK(memcmp(msg, m ? "iwarp" : "plain", 5) == 0);
		for (int k = 0; k < 7; k++)
			back[k] = msg[6 - k];
		CHECK(xs_write_full(s, back, 7) == 0);
		close(s);
	}
	for (int i = 0; i < 2 * NCONC; i++) {
		pthread_join(t[i], NULL);
		CHECK(cl[i].ok);
	}
	CHECK_EQ_U(kinds[0], NCONC);
	CHECK_EQ_U(kinds[1], NCONC);
	close(l);
}

/* ---- silent, partial and vanishing clients -------------------------------------- */

/* A server-speaks-first client (SMTP style) is plain once the
 * classification time passed; one that sent a prefix of the MPA key and
 * stopped is plain then too, with its octets intact. */
static void case_silent(unsigned cls_ms)
{
	struct sockaddr_in a;
	char buf[32];
	int l = xs_sock_listen(1, &a);
	REQUIRE(l >= 0);

	int64_t t0 = now_ms();
	int pc = plain_connect(&a);
	REQUIRE(pc >= 0);
	CHECK(readable(l, WAIT_MS));
	int64_t waited = now_ms() - t0;
	/* never classified before the client had its time to speak */
	CHECK(waited + 5 >= (int64_t)cls_ms);
	fprintf(stderr, "silent client accepted as plain after %lld ms (XSOCK_CLASSIFY_MS %u)\n",
		(long long)waited, cls_ms);
	int ps = accept_checked(l, 0, NULL);
	CHECK(xs_write_full(ps, "220 ready\r\n", 11) == 0);
	CHECK(xs_read_full(pc, buf, 11) == 0 && memcmp(buf, "220 ready\r\n", 11) == 0);
	exchange(pc, ps, "HELO x");
	close(pc);
	close(ps);

	pc = plain_connect(&a);
	REQUIRE(pc >= 0);
	CHECK(xs_write_full(pc, "MPA ID", 6) == 0);
	CHECK(readable(l, WAIT_MS));
	ps = accept_checked(l, 0, NULL);
	CHECK(xs_read_full(ps, buf, 6) == 0 && memcmp(buf, "MPA ID", 6) == 0);
	exchange(pc, ps, " Req? no");
	close(pc);
	close(ps);
	close(l);
}

/* Clients that close (FIN) or reset (RST) right after connecting must not
 * wedge the listener: a FIN-only client is accepted and reads EOF, a reset
 * one may be dropped; the clients after them work. */
static void case_vanishing(void)
{
	struct sockaddr_in a;
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	char buf[16];
	int l = xs_sock_listen(1, &a);
	REQUIRE(l >= 0);

	for (int i = 0; i < 3; i++) {
		int pc = plain_connect(&a);
		REQUIRE(pc >= 0);
		close(pc);
	}
	int rc = plain_connect(&a);
	REQUIRE(rc >= 0);
	CHECK(setsockopt(rc, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
	close(rc);
	int pc = plain_connect(&a);
	REQUIRE(pc >= 0);
	CHECK(xs_write_full(pc, "after", 5) == 0);

	/* the FIN-only ones come first (each reads EOF), maybe the reset
	 * one (EOF or ECONNRESET), then "after" */
	int eofs = 0, ps = -1;
	for (int i = 0; i < 6 && ps < 0; i++) {
		REQUIRE(readable(l, WAIT_MS));
		int s = accept(l, NULL, NULL);
		REQUIRE(s >= 0);
		CHECK_EQ_U(iwarp_mode(s), 0);
		REQUIRE(readable(s, WAIT_MS));
		ssize_t n = read(s, buf, 5);
		if (n == 5) {
			CHECK(memcmp(buf, "after", 5) == 0);
			ps = s;
			break;
		}
		CHECK(n == 0 || (n < 0 && errno == ECONNRESET));
		eofs++;
		close(s);
	}
	REQUIRE(ps >= 0);
	CHECK(eofs >= 3 && eofs <= 4);
	exchange(pc, ps, "still-fine");
	int ic = xs_sock_connect(1, &a);
	REQUIRE(ic >= 0);
	int is = accept_checked(l, 1, NULL);
	exchange(ic, is, "iwarp-too");
	close(ic);
	close(is);
	close(pc);
	close(ps);
	close(l);
}

/* The client's end sees the server's end go (EOF or reset) in time. */
static bool sees_close(int fd)
{
	char b[8];

	if (!readable(fd, WAIT_MS))
		return false;
	ssize_t n = read(fd, b, sizeof(b));
	return n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE));
}

/* An MPA Request whose key arrives in two segments is still iWARP: a raw
 * client (no rsockets connection data) gets an MPA Reply, a reject, not a
 * plain accept. */
static void case_split_request(void)
{
	static const uint8_t req[20] = "MPA ID Req Frame\x00\x01\x00\x00"; /* rev 1, no data */
	struct sockaddr_in a;
	char rep[20];
	int one = 1;
	int l = xs_sock_listen(1, &a);
	REQUIRE(l >= 0);
	int rc = plain_connect(&a);
	REQUIRE(rc >= 0);
	CHECK(setsockopt(rc, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0);
	CHECK(xs_write_full(rc, req, 9) == 0);
	CHECK(xs_write_full(rc, req + 9, sizeof(req) - 9) == 0);
	CHECK(readable(rc, WAIT_MS));
	CHECK(xs_read_full(rc, rep, sizeof(rep)) == 0 && memcmp(rep, "MPA ID Rep Frame", 16) == 0);
	CHECK(rep[16] & 0x20); /* R: rejected */
	CHECK(sees_close(rc));
	close(rc);
	close(l);
}

/* ---- nonblocking accept with poll and epoll --------------------------------------- */

static void case_nonblocking(void)
{
	struct sockaddr_in a;
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 7 }, got;
	int l = xs_sock_listen(1, &a);
	REQUIRE(l >= 0);
	CHECK(fcntl(l, F_SETFL, O_NONBLOCK) == 0);
	errno = 0;
	CHECK(accept(l, NULL, NULL) == -1 && errno == EAGAIN);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	REQUIRE(ep >= 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev) == 0);
	CHECK(epoll_wait(ep, &got, 1, 0) == 0);

	/* plain: epoll reports the listener, one accept, then EAGAIN */
	int pc = plain_connect(&a);
	REQUIRE(pc >= 0);
	CHECK(xs_write_full(pc, "x", 1) == 0);
	CHECK(epoll_wait(ep, &got, 1, WAIT_MS) == 1 && got.data.u32 == 7);
	int ps = accept(l, NULL, NULL);
	REQUIRE(ps >= 0);
	CHECK_EQ_U(iwarp_mode(ps), 0);
	errno = 0;
	CHECK(accept(l, NULL, NULL) == -1 && errno == EAGAIN);
	CHECK(epoll_wait(ep, &got, 1, 0) == 0);

	/* iWARP: the same through epoll, then a silent plain client through poll */
	int ic = xs_sock_connect(1, &a);
	REQUIRE(ic >= 0);
	CHECK(epoll_wait(ep, &got, 1, WAIT_MS) == 1 && got.data.u32 == 7);
	int is = accept(l, NULL, NULL);
	REQUIRE(is >= 0);
	CHECK_EQ_U(iwarp_mode(is), 1);
	errno = 0;
	CHECK(accept(l, NULL, NULL) == -1 && errno == EAGAIN);

	int sc = plain_connect(&a);
	REQUIRE(sc >= 0);
	struct pollfd p = { .fd = l, .events = POLLIN };
	CHECK(poll(&p, 1, WAIT_MS) == 1 && (p.revents & POLLIN));
	int ss = accept(l, NULL, NULL);
	REQUIRE(ss >= 0);
	CHECK_EQ_U(iwarp_mode(ss), 0);
	char c;
	CHECK(read(ps, &c, 1) == 1 && c == 'x');
	exchange(pc, ps, "nb-plain");
	exchange(ic, is, "nb-iwarp");
	exchange(sc, ss, "nb-silent");
	close(ep);
	close(sc);
	close(ss);
	close(ic);
	close(is);
	close(pc);
	close(ps);
	close(l);
}

/* ---- backlog and close --------------------------------------------------------------- */

static void case_backlog_close(void)
{
	struct sockaddr_in a;
	int l = socket(AF_INET, SOCK_STREAM, 0);
	socklen_t al = sizeof(a);
	REQUIRE(l >= 0 && xs_sock_mode(l, 1) == 0);
	a = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	REQUIRE(bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(l, 1) == 0 &&
		getsockname(l, (struct sockaddr *)&a, &al) == 0);

	/* backlog 1: the second plain client is refused once the first waits */
	int p1 = plain_connect(&a);
	REQUIRE(p1 >= 0);
	CHECK(xs_write_full(p1, "one", 3) == 0);
	CHECK(readable(l, WAIT_MS));
	int p2 = plain_connect(&a);
	REQUIRE(p2 >= 0);
	CHECK(xs_write_full(p2, "two", 3) == 0);
	CHECK(sees_close(p2));
	close(p2);

	/* closing the listener releases the queued plain client and the one
	 * still being classified (silent) */
	int p3 = plain_connect(&a);
	REQUIRE(p3 >= 0);
	close(l);
	CHECK(sees_close(p1));
	CHECK(sees_close(p3));
	close(p1);
	close(p3);
}

/* ---- fork ---------------------------------------------------------------------------- */

/* A plain client queued when the server forks is the parent's: the child's
 * nonblocking accept finds nothing, the parent gets the client. */
static void case_fork(void)
{
	struct sockaddr_in a;
	int l = xs_sock_listen(1, &a);
	REQUIRE(l >= 0);
	int pc = plain_connect(&a);
	REQUIRE(pc >= 0);
	CHECK(xs_write_full(pc, "queued", 6) == 0);
	REQUIRE(readable(l, WAIT_MS));

	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		alarm(30);
		int bad = fcntl(l, F_SETFL, O_NONBLOCK) != 0;
		errno = 0;
		int s = accept(l, NULL, NULL);
		bad |= !(s == -1 && errno == EAGAIN);
		_exit(bad);
	}
	int st = -1;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	int ps = accept_checked(l, 0, NULL);
	char buf[8];
	CHECK(xs_read_full(ps, buf, 6) == 0 && memcmp(buf, "queued", 6) == 0);
	exchange(pc, ps, "after-fork");
	close(pc);
	close(ps);
	close(l);
}

/* ---- a verbs listener is not mixed ------------------------------------------------- */

static void case_verbs_listener(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	REQUIRE(ch && rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	REQUIRE(rdma_bind_addr(id, (struct sockaddr *)&a) == 0 && rdma_listen(id, 4) == 0);
	a.sin_port = rdma_get_src_port(id);
	REQUIRE(a.sin_port != 0);
	int pc = plain_connect(&a);
	REQUIRE(pc >= 0);
	CHECK(xs_write_full(pc, "GET /index.html HTTP/1.0\r\n\r\n", 28) == 0);
	CHECK(sees_close(pc));
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	CHECK(poll(&p, 1, 0) == 0); /* no event for it */
	close(pc);
	CHECK(rdma_destroy_id(id) == 0);
	rdma_destroy_event_channel(ch);
}

/* ---- main ------------------------------------------------------------------------------- */

static bool fds_back_to(int base)
{
	for (int i = 0; i < 200; i++) {
		if (count_fds() == base)
			return true;
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return false;
}

/* The count once the stack closed what the last case let go (it closes a
 * connection's TCP socket on its engine thread, a little later). */
static int settled_fds(void)
{
	int n = count_fds(), same = 0;

	for (int i = 0; i < 100 && same < 6; i++) {
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		int m = count_fds();
		same = m == n ? same + 1 : 0;
		n = m;
	}
	return n;
}

int main(void)
{
	unsigned cls_ms;

	signal(SIGALRM, on_alarm);
	signal(SIGPIPE, SIG_IGN);
	alarm(240);
	/* the default, whatever the caller's environment says (read once,
	 * at the stack's first use) */
	setenv("XSOCK_CLASSIFY_MS", "200", 1);
	cls_ms = 200;

	/* the first case starts the stack's threads, epoll and eventfds;
	 * every later case must give back what it took */
	case_iwarp_then_plain();
	int base = settled_fds();
	REQUIRE(base > 0);
	fprintf(stderr, "iwarp then plain: done (%d fds)\n", base);
	case_plain_then_iwarp();
	fprintf(stderr, "plain then iwarp: done\n");
	case_concurrent();
	fprintf(stderr, "concurrent: done\n");
	case_silent(cls_ms);
	fprintf(stderr, "silent and partial-key clients: done\n");
	case_vanishing();
	fprintf(stderr, "vanishing clients: done\n");
	case_split_request();
	fprintf(stderr, "MPA Request in two segments: done\n");
	case_nonblocking();
	fprintf(stderr, "nonblocking accept, poll, epoll: done\n");
	case_backlog_close();
	fprintf(stderr, "backlog and close: done\n");
	case_fork();
	fprintf(stderr, "fork: done\n");
	case_verbs_listener();
	fprintf(stderr, "verbs listener (not mixed): done\n");
	CHECK(fds_back_to(base));
	if (count_fds() != base)
		fprintf(stderr, "fds: %d, expected %d\n", count_fds(), base);
	return xs_test_failures ? XS_TEST_FAIL : XS_TEST_PASS;
}
