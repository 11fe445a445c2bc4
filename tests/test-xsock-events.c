/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* libxsock readiness: nonblocking connect (EINPROGRESS, then writable and
 * SO_ERROR 0), nonblocking accept (EAGAIN, then readable), poll and select
 * over IWARP sockets mixed with a pipe, and an epoll set mixing an IWARP
 * socket, a listener and a pipe (level-triggered and EPOLLONESHOT). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tests/xs_test.h"
#include "tests/xs_test_sock.h"

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "test-xsock-events: timeout\n";
	if (write(2, m, sizeof(m) - 1) < 0)
		_exit(1);
	_exit(1);
}

int main(void)
{
	struct sockaddr_in a;
	int p[2], c, s, l, err;
	socklen_t sl;
	char buf[16];

	signal(SIGALRM, on_alarm);
	alarm(60);
	REQUIRE(pipe(p) == 0);
	l = xs_sock_listen(1, &a);
	REQUIRE(l >= 0);
	CHECK(fcntl(l, F_SETFL, O_NONBLOCK) == 0);
	errno = 0;
	CHECK(accept(l, NULL, NULL) == -1 && errno == EAGAIN);

	/* nonblocking connect */
	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	REQUIRE(c >= 0 && xs_sock_mode(c, 1) == 0);
	int rc = connect(c, (struct sockaddr *)&a, sizeof(a));
	CHECK(rc == 0 || (rc == -1 && errno == EINPROGRESS));
	struct pollfd pf = { .fd = c, .events = POLLOUT };
	CHECK(poll(&pf, 1, 10000) == 1 && (pf.revents & POLLOUT));
	err = -1;
	sl = sizeof(err);
	CHECK(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &sl) == 0 && err == 0);

	/* the listener becomes readable; accept4 with flags */
	pf = (struct pollfd){ .fd = l, .events = POLLIN };
	CHECK(poll(&pf, 1, 10000) == 1 && (pf.revents & POLLIN));
	s = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	REQUIRE(s >= 0);
	CHECK(fcntl(s, F_GETFL) & O_NONBLOCK);
	CHECK(fcntl(s, F_GETFD) & FD_CLOEXEC);

	/* poll over an IWARP socket and a pipe: nothing, then each alone */
	struct pollfd set[2] = { { .fd = s, .events = POLLIN }, { .fd = p[0], .events = POLLIN } };
	CHECK(poll(set, 2, 50) == 0);
	CHECK(write(p[1], "x", 1) == 1);
	CHECK(poll(set, 2, 5000) == 1 && !set[0].revents && (set[1].revents & POLLIN));
	CHECK(read(p[0], buf, 1) == 1);
	CHECK(send(c, "ping", 4, 0) == 4);
	CHECK(poll(set, 2, 5000) == 1 && (set[0].revents & POLLIN) && !set[1].revents);

	/* select sees the same */
	fd_set rs, ws;
	FD_ZERO(&rs);
	FD_ZERO(&ws);
	FD_SET(s, &rs);
	FD_SET(p[0], &rs);
	FD_SET(c, &ws);
	struct timeval tv = { 5, 0 };
	int maxfd = s > p[0] ? s : p[0];
	maxfd = maxfd > c ? maxfd : c;
	CHECK(select(maxfd + 1, &rs, &ws, NULL, &tv) == 2);
	CHECK(FD_ISSET(s, &rs) && !FD_ISSET(p[0], &rs) && FD_ISSET(c, &ws));
	CHECK(read(s, buf, sizeof(buf)) == 4 && !memcmp(buf, "ping", 4));

	/* epoll: an IWARP socket, a listener and a pipe in one set */
	int ep = epoll_create1(EPOLL_CLOEXEC);
	REQUIRE(ep >= 0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 1 };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) == 0);
	ev = (struct epoll_event){ .events = EPOLLIN, .data.u64 = 2 };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) == 0);
	ev = (struct epoll_event){ .events = EPOLLIN, .data.u64 = 3 };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev) == 0);
	struct epoll_event out[4];
	CHECK(epoll_wait(ep, out, 4, 50) == 0);
	CHECK(send(c, "pong", 4, 0) == 4);
	int n = epoll_wait(ep, out, 4, 5000);
	CHECK(n == 1 && out[0].data.u64 == 1 && (out[0].events & EPOLLIN));
	/* level-triggered: still there until read */
	n = epoll_wait(ep, out, 4, 0);
	CHECK(n == 1 && out[0].data.u64 == 1);
	CHECK(read(s, buf, sizeof(buf)) == 4 && !memcmp(buf, "pong", 4));
	CHECK(write(p[1], "y", 1) == 1);
	n = epoll_wait(ep, out, 4, 5000);
	CHECK(n == 1 && out[0].data.u64 == 2);
	CHECK(read(p[0], buf, 1) == 1);
	/* writability and one-shot */
	ev = (struct epoll_event){ .events = EPOLLOUT | EPOLLONESHOT, .data.u64 = 1 };
	CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev) == 0);
	n = epoll_wait(ep, out, 4, 5000);
	CHECK(n == 1 && out[0].data.u64 == 1 && (out[0].events & EPOLLOUT));
	CHECK(epoll_wait(ep, out, 4, 50) == 0);
	/* a new connection makes the listener readable */
	int c2 = xs_sock_connect(1, &a);
	CHECK(c2 >= 0);
	n = epoll_wait(ep, out, 4, 5000);
	CHECK(n == 1 && out[0].data.u64 == 3);
	int s2 = accept(l, NULL, NULL);
	CHECK(s2 >= 0);
	CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL) == 0);
	/* peer close: readable with EOF */
	ev = (struct epoll_event){ .events = EPOLLIN | EPOLLRDHUP, .data.u64 = 4 };
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s2, &ev) == 0);
	close(c2);
	n = epoll_wait(ep, out, 4, 5000);
	CHECK(n == 1 && out[0].data.u64 == 4 && (out[0].events & EPOLLIN));
	CHECK(read(s2, buf, sizeof(buf)) == 0);

	close(ep);
	close(s2);

	/* a wait libxsock does not see (the raw system call, as io_uring or
	 * a static program would): the number is readable while data waits;
	 * after a read drained it, at most one stale report, which a read
	 * that finds nothing clears */
	CHECK(send(c, "abc", 3, 0) == 3);
	struct pollfd kp = { .fd = s, .events = POLLIN };
	CHECK(syscall(SYS_ppoll, &kp, 1, &(struct timespec){ 5, 0 }, NULL, 0) == 1 &&
	      (kp.revents & POLLIN));
	ssize_t got = 0;
	for (int i = 0; i < 100 && got < 3; i++) {
		ssize_t r = recv(s, buf, sizeof(buf), MSG_DONTWAIT);
		if (r > 0)
			got += r;
		else
			usleep(10000);
	}
	CHECK(got == 3);
	kp.revents = 0;
	if (syscall(SYS_ppoll, &kp, 1, &(struct timespec){ 0, 0 }, NULL, 0) == 1) {
		errno = 0;
		CHECK(recv(s, buf, sizeof(buf), MSG_DONTWAIT) == -1 && errno == EAGAIN);
	}
	CHECK(syscall(SYS_ppoll, &kp, 1, &(struct timespec){ 0, 50000000 }, NULL, 0) == 0);

	close(s);
	close(c);
	close(l);
	close(p[0]);
	close(p[1]);
	return xs_test_result();
}
