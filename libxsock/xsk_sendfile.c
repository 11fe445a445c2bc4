/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* sendfile(2) and sendfile64 to an IWARP socket (nginx, lighttpd, ...).
 *
 * The kernel would splice the file into the socket; libxsock reads it
 * (pread at the offset, or at in_fd's file position) and sends it with
 * write()'s own send, so O_NONBLOCK, SO_SNDTIMEO, signals and SIGPIPE are
 * the same.  The checks follow the kernel's do_sendfile() in its order:
 * EFAULT (offset pointer), EBADF (in_fd not open for reading), ESPIPE (an
 * offset on a pipe or socket), EINVAL (negative offset, count beyond
 * ssize_t, offset + count wrapping, in_fd not a regular file or block
 * device), then a count clamped to MAX_RW_COUNT.  The offset or the file
 * position moves by what the socket took, never by what was read: bytes
 * read but not sent are read again by the next call.  Any other out_fd
 * (and an IWARP socket that is still the kernel's) goes to libc. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "libxsock/xsk_priv.h"
#include "libxsock/xsk_sock.h"

_Static_assert(sizeof(off_t) == 8, "sendfile64 is sendfile");

#define XSK_SF_MAX 0x7ffff000L /* the kernel's MAX_RW_COUNT */
#define XSK_SF_CHUNK 65536u /* one read, one rsockets Data Transfer at most */

static ssize_t (*real_sendfile64)(int, int, off_t *, size_t);
static pthread_once_t sf_once = PTHREAD_ONCE_INIT;

static void sf_init(void)
{
	*(void **)&real_sendfile64 = dlsym(RTLD_NEXT, "sendfile64");
}

/* *off, read as the kernel's copy_from_user would: -EFAULT for a pointer
 * into nothing (process_vm_readv answers that without a signal). */
static int off_load(const off_t *off, off_t *pos)
{
	struct iovec l = { pos, sizeof(*pos) }, r = { (void *)(uintptr_t)off, sizeof(*off) };

	if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)sizeof(*pos))
		return 0;
	if (errno == EFAULT)
		return -EFAULT;
	*pos = *off; /* no process_vm_readv (seccomp): as a plain load */
	return 0;
}

/* in_fd as do_sendfile() checks it: 0, or -errno in the kernel's order. */
static int sf_check_in(int in, bool with_off, off_t pos, size_t count)
{
	struct stat st;
	int fl;

	if (fstat(in, &st) < 0) /* ours: an IWARP socket is S_IFSOCK */
		return -errno; /* EBADF */
	bool seekable = S_ISREG(st.st_mode) || S_ISBLK(st.st_mode);
	if (!seekable || pos < 0) {
		/* error paths only: is it open for reading? */
		fl = xsk_real.fcntl(in, F_GETFL);
		if (fl < 0 || (fl & O_PATH) || (fl & O_ACCMODE) == O_WRONLY)
			return -EBADF;
	}
	if (with_off && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
		return -ESPIPE; /* no FMODE_PREAD */
	if (pos < 0 || (ssize_t)count < 0 || (off_t)((uint64_t)pos + count) < 0)
		return -EINVAL; /* rw_verify_area */
	if (!seekable)
		return -EINVAL; /* splice_direct_to_actor: no socket or pipe input */
	return 0;
}

/* Up to count bytes of in from pos to s; the count sent, or -1 (errno). */
static ssize_t sf_send(struct xsk *s, int in, off_t pos, size_t count)
{
	size_t cap = count < XSK_SF_CHUNK ? count : XSK_SF_CHUNK, done = 0;
	uint8_t *buf = malloc(cap); /* not 64 KiB of a thread's stack */

	if (!buf) {
		errno = ENOMEM;
		return -1;
	}
	while (done < count) {
		size_t want = count - done < cap ? count - done : cap;
		xsk_lock(s);
		bool nb = xsk_nonblock(s);
		uint32_t room = xsk_sbuf_room(s);
		bool out = (xsk_revents(s) & POLLOUT) != 0;
		xsk_unlock(s);
		if (nb && done && !out)
			break; /* the socket is full: do not read what it cannot take */
		if (nb && room && want > room)
			want = room;
		ssize_t n = pread(in, buf, want, pos + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0 && !done) {
				free(buf);
				return -1;
			}
			break; /* end of file (or an error after some bytes) */
		}
		struct iovec v = { buf, (size_t)n };
		ssize_t w = xsk_sock_send(s, &v, 1, 0);
		if (w < 0) {
			if (!done) {
				int e = errno;
				free(buf);
				errno = e;
				return -1;
			}
			break;
		}
		done += (size_t)w;
		if (w < n)
			break; /* nonblocking and full, SO_SNDTIMEO, or a signal */
	}
	free(buf);
	return (ssize_t)done;
}

XSK_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count);
XSK_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	struct xsk *s = xsk_fd_get(out);
	off_t pos;
	ssize_t r;
	int rc;

	if (s && xsk_state(s) == XSK_FRESH) {
		xsk_fd_put(s);
		s = NULL;
	}
	if (!s) {
		pthread_once(&sf_once, sf_init);
		return real_sendfile64(out, in, off, count);
	}
	rc = off ? off_load(off, &pos) : 0;
	if (!rc && !off) {
		pos = lseek(in, 0, SEEK_CUR);
		if (pos < 0)
			pos = 0; /* a pipe or socket: the checks refuse it */
	}
	if (!rc)
		rc = sf_check_in(in, off != NULL, pos, count);
	if (rc) {
		xsk_fd_put(s);
		errno = -rc;
		return -1;
	}
	if (count > XSK_SF_MAX)
		count = XSK_SF_MAX;
	r = count ? sf_send(s, in, pos, count) : 0;
	xsk_fd_put(s);
	if (r > 0) {
		int e = errno;
		if (off)
			*off = pos + r;
		else
			lseek(in, pos + r, SEEK_SET);
		errno = e;
	}
	return r;
}

/* _FILE_OFFSET_BITS=64 programs (nginx) call sendfile64: on x86_64 it is
 * the same call. */
XSK_EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t count)
	__attribute__((alias("sendfile")));
