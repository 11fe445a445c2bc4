/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Helpers for the libxsock tests: IWARP_MODE listeners and clients on
 * loopback with kernel-chosen ports. */
#ifndef XS_TEST_SOCK_H
#define XS_TEST_SOCK_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libxsock/xsock.h"

static inline int xs_sock_mode(int fd, int on)
{
	return setsockopt(fd, SOL_IWARP, IWARP_MODE, &on, sizeof(on));
}

/* A listener on 127.0.0.1:0 (iwarp: in IWARP_MODE); *addr gets its address. */
static inline int xs_sock_listen(int iwarp, struct sockaddr_in *addr)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	socklen_t al = sizeof(*addr);

	if (fd < 0)
		return -1;
	if (iwarp && xs_sock_mode(fd, 1) < 0)
		goto fail;
	*addr = (struct sockaddr_in){ .sin_family = AF_INET,
				      .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (bind(fd, (struct sockaddr *)addr, sizeof(*addr)) < 0 || listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)addr, &al) < 0)
		goto fail;
	return fd;
fail:
	close(fd);
	return -1;
}

static inline int xs_sock_connect(int iwarp, const struct sockaddr_in *addr)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	if ((iwarp && xs_sock_mode(fd, 1) < 0) ||
	    connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* read/write exactly n bytes (blocking fds) */
static inline int xs_read_full(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static inline int xs_write_full(int fd, const void *buf, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t w = write(fd, (const char *)buf + done, n - done);
		if (w <= 0)
			return -1;
		done += (size_t)w;
	}
	return 0;
}

#endif
