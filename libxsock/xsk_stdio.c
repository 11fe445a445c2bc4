/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* stdio on an IWARP socket: fdopen, and the standard streams when the
 * socket is standard input, output or error (an inetd service's). */
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

static const cookie_io_functions_t ck_io = { .read = ck_read, .write = ck_write, .close = ck_close };

/* A cookie stream on fd whose fileno() is fd, as fdopen's would be (git
 * fstat()s fileno(stdout); freopen dup3s onto it).  glibc's cookie
 * functions never use _fileno, and any value but -1 marks it open. */
static FILE *ck_open(int fd, const char *mode)
{
	FILE *f = fopencookie((void *)(intptr_t)fd, mode, ck_io);

#ifdef __GLIBC__
	if (f)
		f->_fileno = fd;
#endif
	return f;
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
	return ck_open(fd, mode);
}

/* The standard streams libc made for fds 0-2 write and read with its
 * internal calls too: on an IWARP socket's fd number (its inner epoll fd)
 * the first fflush(stdout) failed with EINVAL (git upload-pack exec'd by
 * git daemon: "fatal: fflush error").  The stream of each of fds 0-2 that
 * names an IWARP socket becomes a cookie stream on that fd, once (it goes
 * on working through our calls whatever the fd becomes later).  What
 * libc's stream still holds stays there, as a dup2 would leave it (a fork
 * child flushing its parent's buffer would write it twice). */
static FILE *ck_std[3];

static FILE **std_slot(int fd)
{
	return fd == 0 ? &stdin : fd == 1 ? &stdout : &stderr;
}

void xsk_stdio_std(int fd)
{
	FILE *f;

	/* (not in a vfork child: stdout is its parent's too) */
	if (fd < 0 || fd > 2 || ck_std[fd] || !xsk_tab_has(fd) || xsk_vfork_child())
		return;
	f = ck_open(fd, fd ? "w" : "r");
	if (!f)
		return; /* libc's stream stays: it fails as before */
	if (fd == 2)
		setvbuf(f, NULL, _IONBF, 0); /* stderr is unbuffered */
	ck_std[fd] = f;
	*std_slot(fd) = f;
}
