/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* stdio on an IWARP socket: fdopen. */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

#include "libxsock/xsk_intercept.h"

/* glibc's stdio writes through its internal write, which no interposer
 * sees: a FILE on an IWARP socket is a cookie stream over our calls. */
static ssize_t ck_read(void *c, char *buf, size_t n)
{
	return read((int)(intptr_t)c, buf, n);
}

static ssize_t ck_write(void *c, const char *buf, size_t n)
{
	ssize_t w = write((int)(intptr_t)c, buf, n);
	return w < 0 ? 0 : w; /* fopencookie: 0 = error */
}

static int ck_close(void *c)
{
	return close((int)(intptr_t)c);
}

XSK_EXPORT FILE *fdopen(int fd, const char *mode)
{
	static FILE *(*real_fdopen)(int, const char *);
	struct xsk *s = xsk_data_sock_fn(fd);

	if (!s) {
		if (!real_fdopen)
			*(void **)&real_fdopen = dlsym(RTLD_NEXT, "fdopen");
		return real_fdopen(fd, mode);
	}
	xsk_fd_put(s);
	cookie_io_functions_t io = { .read = ck_read, .write = ck_write, .close = ck_close };
	return fopencookie((void *)(intptr_t)fd, mode, io);
}
