/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Helper of test-xsock-exec.sh: an inetd in miniature and its service, a
 * plain sockets program run under `xsock-run --iwarp` (every TCP socket
 * is an IWARP socket; it never sets IWARP_MODE itself).
 *
 *   xsock-exec-check inetd PORT N PROG ARGS...
 *       listen on 127.0.0.1:PORT; for each of N connections: accept, fork;
 *       the child writes "HELLO <i>\n", makes the connection its stdin and
 *       stdout (dup2, close) and execs PROG ARGS; the parent closes its
 *       copy and reaps the children.  Exit 0 if every child exited 0.
 *   xsock-exec-check inetd-keep|inetd-cloexec|inetd-dup PORT N PROG ARGS...
 *       the same, with: the parent keeping its copies open until every
 *       child has exited; the connection accepted close-on-exec and
 *       dup2'ed onto stdin, stdout and stderr, its own number left open
 *       (closed by the exec); close(0), dup, close(1), dup (the old way).
 *   xsock-exec-check stdio-echo
 *       the echo with stdio (fread from stdin, fwrite and fflush to
 *       stdout; fileno(stdout) must be 1): git upload-pack's way.
 *   xsock-exec-check spawn PROG ARGS...
 *       git daemon --serve's way: fork, the child execs PROG with the
 *       inherited stdin and stdout, the parent closes both and waits.
 *   xsock-exec-check echo
 *       stdin to stdout until end of file (the service); with a read or
 *       write error: "echo: read: <error>" on stderr, exit 3.
 *   xsock-exec-check client PORT BYTES
 *       connect, send BYTES pseudo-random octets at once (the service is
 *       exec'ed while they arrive: some wait in the old process's ring),
 *       shut down the write side and read until end of file: expects
 *       "HELLO <i>\n" then the same octets.  Prints what it got; exit 0/1.
 *   xsock-exec-check reexec PORT
 *       connect, write "A", exec itself as "reexec2" on the same socket
 *       (no fork), which writes "B" and reads the peer's reply.
 *   xsock-exec-check reexec-lim PORT
 *       connect, name the socket also by fd 200, lower RLIMIT_NOFILE to
 *       100 and exec itself as "reexec3": the new process cannot take the
 *       socket over under 200, so it gives it up under the lower number
 *       too; reexec3 expects a plain failure there (no crash, no IWARP
 *       socket left behind: with ASan, no use after free).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static uint8_t pattern(size_t i)
{
	uint32_t x = (uint32_t)i * 2654435761u;
	return (uint8_t)(x >> 13);
}

static struct sockaddr_in lo_addr(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int do_inetd(const char *style, int port, int n, char **argv)
{
	struct sockaddr_in a = lo_addr(port);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1, bad = 0;
	bool keep = !strcmp(style, "inetd-keep"), cloexec = !strcmp(style, "inetd-cloexec");
	bool olddup = !strcmp(style, "inetd-dup");
	int kept[64], nkept = 0;

	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 16) < 0) {
		perror("inetd: listen");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		int c = accept4(l, NULL, NULL, cloexec ? SOCK_CLOEXEC : 0);
		if (c < 0) {
			perror("inetd: accept");
			return 1;
		}
		pid_t pid = fork();
		if (pid == 0) {
			char hello[32];
			int len = snprintf(hello, sizeof(hello), "HELLO %d\n", i);
			close(l);
			if (write_all(c, hello, (size_t)len) < 0) {
				perror("inetd child: write");
				_exit(2);
			}
			if (olddup) {
				close(0);
				close(1);
				if (dup(c) != 0 || dup(c) != 1) {
					perror("inetd child: dup");
					_exit(2);
				}
				close(c);
			} else {
				dup2(c, 0);
				dup2(c, 1);
				if (cloexec)
					dup2(c, 2); /* c itself goes at the exec */
				else
					close(c);
			}
			execvp(argv[0], argv);
			perror("inetd child: execvp");
			_exit(127);
		}
		if (keep && nkept < 64)
			kept[nkept++] = c; /* open while the service runs */
		else
			close(c);
	}
	for (int i = 0; i < n; i++) {
		int st;
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "inetd: a service failed (status %d)\n", st);
			bad = 1;
		}
	}
	for (int i = 0; i < nkept; i++)
		close(kept[i]);
	return bad;
}

static int do_echo(void)
{
	char buf[65536];

	for (;;) {
		ssize_t n = read(0, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "echo: read: %s\n", strerror(errno));
			return 3;
		}
		if (n == 0)
			return 0;
		if (write_all(1, buf, (size_t)n) < 0) {
			fprintf(stderr, "echo: write: %s\n", strerror(errno));
			return 3;
		}
	}
}

static int do_stdio_echo(void)
{
	char buf[8192];
	size_t n;

	if (fileno(stdout) != 1 || fileno(stdin) != 0) {
		fprintf(stderr, "stdio-echo: fileno(stdin) %d, fileno(stdout) %d\n", fileno(stdin),
			fileno(stdout));
		return 3;
	}
	while ((n = fread(buf, 1, sizeof(buf), stdin)) > 0) {
		if (fwrite(buf, 1, n, stdout) != n || fflush(stdout)) {
			fprintf(stderr, "stdio-echo: write: %s\n", strerror(errno));
			return 3;
		}
	}
	if (ferror(stdin)) {
		fprintf(stderr, "stdio-echo: read: %s\n", strerror(errno));
		return 3;
	}
	return 0;
}

static int do_spawn(char **argv)
{
	int st;
	pid_t pid = fork();

	if (pid < 0) {
		perror("spawn: fork");
		return 1;
	}
	if (pid == 0) {
		execvp(argv[0], argv);
		perror("spawn: execvp");
		_exit(127);
	}
	close(0);
	close(1);
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st))
		return 1;
	return WEXITSTATUS(st);
}

static int connect_to(int port)
{
	struct sockaddr_in a = lo_addr(port);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	for (int tries = 0; tries < 100; tries++) {
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			return fd;
		close(fd);
		usleep(50000);
		fd = socket(AF_INET, SOCK_STREAM, 0);
	}
	perror("client: connect");
	return -1;
}

struct sender {
	int fd;
	const uint8_t *buf;
	size_t len;
	int rc;
};

static void *sender_main(void *arg)
{
	struct sender *sd = arg;

	if (write_all(sd->fd, sd->buf, sd->len) < 0 || shutdown(sd->fd, SHUT_WR) < 0) {
		perror("client: send");
		sd->rc = 1;
	}
	return NULL;
}

static int do_client(int port, size_t bytes)
{
	int fd = connect_to(port);
	uint8_t *out = malloc(bytes), *in = malloc(bytes + 64);
	size_t got = 0;

	if (fd < 0 || !out || !in)
		return 1;
	for (size_t i = 0; i < bytes; i++)
		out[i] = pattern(i);
	/* the service echoes while we send: send on another thread so that
	 * neither side waits for the other's ring forever */
	struct sender sd = { .fd = fd, .buf = out, .len = bytes };
	pthread_t t;
	if (pthread_create(&t, NULL, sender_main, &sd))
		return 1;
	for (;;) {
		ssize_t n = read(fd, in + got, bytes + 64 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "client: read: %s\n", strerror(errno));
			return 1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got == bytes + 64)
			break;
	}
	pthread_join(t, NULL);
	char *nl = memchr(in, '\n', got < 32 ? got : 32);
	if (!nl || strncmp((char *)in, "HELLO ", 6)) {
		fprintf(stderr, "client: no greeting (%zu octets)\n", got);
		return 1;
	}
	size_t hl = (size_t)(nl - (char *)in) + 1;
	if (got - hl != bytes || memcmp(in + hl, out, bytes)) {
		size_t k = 0;
		while (k < got - hl && k < bytes && in[hl + k] == out[k])
			k++;
		fprintf(stderr, "client: echo differs: %zu of %zu octets back, first difference at %zu\n",
			got - hl, bytes, k);
		return 1;
	}
	printf("client: %.*s + %zu octets echoed, identical\n", (int)hl - 1, (char *)in, bytes);
	return sd.rc;
}

/* exec without fork: the connection moves to the new image of this
 * program, which goes on with it. */
static int do_reexec(int port, const char *self)
{
	int fd = connect_to(port);
	char fdstr[16];

	if (fd < 0 || write_all(fd, "A", 1) < 0)
		return 1;
	snprintf(fdstr, sizeof(fdstr), "%d", fd);
	execl(self, self, "reexec2", fdstr, (char *)NULL);
	perror("reexec: execl");
	return 1;
}

static int do_reexec2(int fd)
{
	char buf[16];
	ssize_t n;

	if (write_all(fd, "B", 1) < 0) {
		perror("reexec2: write");
		return 1;
	}
	shutdown(fd, SHUT_WR);
	n = read(fd, buf, sizeof(buf));
	if (n < 4 || memcmp(buf, "HELL", 4)) {
		fprintf(stderr, "reexec2: read %zd: %s\n", n, n < 0 ? strerror(errno) : "short");
		return 1;
	}
	printf("reexec: the new image sent and received on the inherited socket\n");
	return 0;
}

/* An exec hand-over that fails half-way: the fd number above the new
 * process's limit cannot be given the socket, the one below already was. */
static int do_reexec_lim(int port, const char *self)
{
	int fd = connect_to(port);
	struct rlimit rl;
	char fdstr[16];

	if (fd < 0 || fd >= 100 || dup2(fd, 200) != 200 || write_all(fd, "A", 1) < 0)
		return 1;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 1;
	rl.rlim_cur = 100;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 1;
	snprintf(fdstr, sizeof(fdstr), "%d", fd);
	execl(self, self, "reexec3", fdstr, (char *)NULL);
	perror("reexec-lim: execl");
	return 1;
}

static int do_reexec3(int fd)
{
	if (write(fd, "B", 1) == 1) {
		fprintf(stderr, "reexec3: fd %d still carries the connection\n", fd);
		return 1;
	}
	printf("reexec-lim: the half-done take-over was undone (write: %s)\n", strerror(errno));
	return 0;
}

/* What daemons do with the descriptors they did not open (sshd after its
 * re-exec, Python's subprocess in the child): close them all, then go on
 * (here: exec the service) with the inherited connection. */
static int do_closefrom(char **argv)
{
	closefrom(3);
	if (close_range(3, ~0U, 0) < 0 || close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
		perror("closefrom: close_range");
		return 1;
	}
	execvp(argv[0], argv);
	perror("closefrom: execvp");
	return 127;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 5 && !strncmp(argv[1], "inetd", 5))
		return do_inetd(argv[1], atoi(argv[2]), atoi(argv[3]), argv + 4);
	if (argc == 2 && !strcmp(argv[1], "echo"))
		return do_echo();
	if (argc == 2 && !strcmp(argv[1], "stdio-echo"))
		return do_stdio_echo();
	if (argc >= 3 && !strcmp(argv[1], "spawn"))
		return do_spawn(argv + 2);
	if (argc == 4 && !strcmp(argv[1], "client"))
		return do_client(atoi(argv[2]), strtoul(argv[3], NULL, 0));
	if (argc >= 3 && !strcmp(argv[1], "closefrom"))
		return do_closefrom(argv + 2);
	if (argc == 3 && !strcmp(argv[1], "reexec"))
		return do_reexec(atoi(argv[2]), "/proc/self/exe");
	if (argc == 3 && !strcmp(argv[1], "reexec2"))
		return do_reexec2(atoi(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "reexec-lim"))
		return do_reexec_lim(atoi(argv[2]), "/proc/self/exe");
	if (argc == 3 && !strcmp(argv[1], "reexec3"))
		return do_reexec3(atoi(argv[2]));
	fprintf(stderr, "usage: see the comment at the top of tests/xsock-exec-check.c\n");
	return 2;
}
