/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Helper of test-xsock-select.sh, run under xsock-run with selection
 * rules: xsock-select-check PORT EXPECT [PORT EXPECT]...
 *
 * For each PORT it listens on 127.0.0.1:PORT, connects to it, accepts,
 * checks that getsockopt(SOL_IWARP, IWARP_MODE) reports EXPECT (1 = IWARP,
 * 0 = TCP) on the listener, the connected and the accepted socket, and
 * copies 256 KiB through the connection (checked).  A plain sockets
 * program otherwise: it never sets IWARP_MODE itself.  Exit 0 / 1. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libxsock/xsock.h"

#define LEN (256 * 1024)

static int failures;

static int mode_of(int fd)
{
	int v = -1;
	socklen_t l = sizeof(v);

	if (getsockopt(fd, SOL_IWARP, IWARP_MODE, &v, &l) < 0)
		return errno == ENOPROTOOPT ? 0 : -1; /* no libxsock: plain TCP */
	return v;
}

static void expect(const char *what, int port, int fd, int want)
{
	int got = mode_of(fd);

	if (got != want) {
		fprintf(stderr, "port %d: %s IWARP_MODE %d, expected %d\n", port, what, got, want);
		failures++;
	}
}

struct writer {
	int fd;
	const unsigned char *buf;
	int rc;
};

static void *write_all(void *arg)
{
	struct writer *w = arg;
	size_t done = 0;

	while (done < LEN) {
		ssize_t n = write(w->fd, w->buf + done, LEN - done);
		if (n <= 0) {
			w->rc = -1;
			return NULL;
		}
		done += (size_t)n;
	}
	shutdown(w->fd, SHUT_WR);
	return NULL;
}

static int one_port(int port, int want)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	unsigned char *out = malloc(LEN), *in = malloc(LEN);
	int one = 1, lfd = -1, cfd = -1, afd = -1, rc = -1;
	size_t got = 0;

	if (!out || !in)
		goto out;
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	for (size_t i = 0; i < LEN; i++)
		out[i] = (unsigned char)(i * 7 + (size_t)port);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 4) < 0) {
		perror("listen");
		goto out;
	}
	expect("listener", port, lfd, want);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	if (cfd < 0 || connect(cfd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("connect");
		goto out;
	}
	afd = accept(lfd, NULL, NULL);
	if (afd < 0) {
		perror("accept");
		goto out;
	}
	expect("connected socket", port, cfd, want);
	expect("accepted socket", port, afd, want);

	struct writer w = { cfd, out, 0 };
	pthread_t t;
	if (pthread_create(&t, NULL, write_all, &w)) {
		perror("pthread_create");
		goto out;
	}
	for (;;) {
		ssize_t n = read(afd, in + got, LEN - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == LEN) {
			char c;
			n = read(afd, &c, 1); /* end of stream after the data */
			if (n != 0)
				got++;
			break;
		}
	}
	pthread_join(t, NULL);
	if (w.rc || got != LEN || memcmp(in, out, LEN)) {
		fprintf(stderr, "port %d: data check failed (%zu bytes)\n", port, got);
		goto out;
	}
	printf("port %d: IWARP_MODE %d, 256 KiB ok\n", port, want);
	rc = 0;
out:
	if (afd >= 0)
		close(afd);
	if (cfd >= 0)
		close(cfd);
	if (lfd >= 0)
		close(lfd);
	free(out);
	free(in);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc % 2 != 1) {
		fprintf(stderr, "usage: xsock-select-check PORT EXPECT [PORT EXPECT]...\n");
		return 99;
	}
	for (int i = 1; i + 1 < argc; i += 2)
		if (one_port(atoi(argv[i]), atoi(argv[i + 1])) < 0)
			failures++;
	return failures ? 1 : 0;
}
