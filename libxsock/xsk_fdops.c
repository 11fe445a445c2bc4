/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The calls that manage fd numbers naming IWARP sockets: close, exit and
 * _exit (the sockets closed as close(2) would), dup/dup2/dup3 and
 * F_DUPFD (more numbers for one socket), fcntl and ioctl (O_NONBLOCK,
 * FIONBIO, FIONREAD), fstat (a socket, not the inner epoll fd). */
#include "config.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "libxsock/xsk_intercept.h"
#include "libxsock/xsk_sock.h"

XSK_EXPORT int close(int fd)
{
	if (xsk_tab_used(fd))
		xsk_tab_detach(fd);
	return REAL(close)(fd);
}

/* exit(3): registered before main, so it runs after the program's own
 * handlers.  The kernel would close an IWARP socket's TCP connection at
 * exit with the peer's last control messages unread, which is a reset
 * that can cost the peer the data it has not read yet: close the sockets
 * as close(2) does (the rsockets DISCONNECT, then the engine drains until
 * the peer's FIN: libiwarp's exit wait), after stdio has flushed into
 * them. */
int xsk_close_own(int fd) __attribute__((alias("close"), visibility("hidden")));

void xsk_exit_close(void)
{
	static atomic_bool done;

	/* once: libiwarp's exit handling may call it too (xsk_real.c) */
	if (atomic_exchange(&done, true))
		return;
	fflush(NULL);
	for (int fd = xsk_tab_next_of(NULL, 0); fd >= 0; fd = xsk_tab_next_of(NULL, fd + 1))
		xsk_close_own(fd);
}

/* _exit skips atexit and destructors, but a process that owns IWARP
 * connections must still close them as exit() does: rsync's receiver,
 * which its parent ends with SIGUSR2 and whose handler calls _exit, owned
 * the daemon's connection about 1 upload in 50 (it read first after the
 * fork); the kernel then closed the socket with the peer's credit updates
 * unread and reset it, and the client lost rsync's last message
 * ("Connection reset by peer").  Not in a vfork child, whose memory is its
 * parent's.  As with exit() from a signal handler, a handler that
 * interrupted this thread inside libxsock may wait on its locks. */
static void exit_quick(void)
{
	const struct xsk_stack *st;
	bool any = false;

	if (!xsk_tab_n || xsk_vfork_child())
		return;
	for (int fd = xsk_tab_next_of(NULL, 0); fd >= 0; fd = xsk_tab_next_of(NULL, fd + 1)) {
		struct xsk *s = xsk_fd_get(fd);
		/* only connections this process owns: a copy it never used
		 * (sshd's sandboxed child, whose seccomp filter kills a
		 * process that makes an eventfd) is left as it is */
		bool own = s && xsk_state(s) == XSK_CONNECTED && !xsk_fork_quiet(s);

		if (s)
			xsk_fd_put(s);
		if (own && !any && xsk_fork_sandboxed())
			return;
		if (own) {
			any = true;
			xsk_close_own(fd);
		}
	}
	if (!any)
		return; /* (no stdio flush: _exit's callers rely on that) */
	st = xsk_stack();
	if (st && st->exit_wait)
		st->exit_wait();
}

XSK_EXPORT void _exit(int status)
{
	static void (*real_exit)(int);

	exit_quick();
	if (!real_exit)
		*(void **)&real_exit = dlsym(RTLD_NEXT, "_exit");
	if (real_exit)
		real_exit(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

XSK_EXPORT void _Exit(int status)
{
	_exit(status);
}

static void dup_note(int oldfd, int newfd)
{
	struct xsk *s;

	if (newfd < 0 || oldfd == newfd)
		return;
	if (xsk_tab_used(newfd))
		xsk_tab_detach(newfd); /* closed by dup2/dup3 */
	s = xsk_tab_has(oldfd) ? xsk_fd_get(oldfd) : NULL;
	if (!s)
		return;
	if ((unsigned)newfd < (unsigned)xsk_tab_n)
		(void)xsk_tab_attach(newfd, s); /* s has its file: no failure */
	xsk_fd_put(s);
}

XSK_EXPORT int dup(int fd)
{
	int nfd = REAL(dup)(fd);

	if (nfd >= 0 && xsk_tab_has(fd)) {
		dup_note(fd, nfd);
		xsk_stdio_std(nfd); /* close(1); dup(sock): inetd's old way */
	}
	return nfd;
}

XSK_EXPORT int dup2(int fd, int nfd)
{
	int rc = REAL(dup2)(fd, nfd);

	if (rc >= 0) {
		dup_note(fd, rc);
		xsk_stdio_std(rc); /* the connection as stdout, then printf */
	}
	return rc;
}

XSK_EXPORT int dup3(int fd, int nfd, int flags)
{
	int rc = REAL(dup3)(fd, nfd, flags);

	if (rc >= 0) {
		dup_note(fd, rc);
		xsk_stdio_std(rc);
	}
	return rc;
}

XSK_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;
	struct xsk *s;
	int rc;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!xsk_tab_has(fd))
		return REAL(fcntl)(fd, cmd, arg);
	rc = REAL(fcntl)(fd, cmd, arg);
	if (rc < 0)
		return rc;
	switch (cmd) {
	case F_SETFL:
		s = xsk_fd_get(fd);
		if (s) {
			xsk_set_nonblock(s, ((long)(uintptr_t)arg & O_NONBLOCK) != 0);
			xsk_fd_put(s);
		}
		break;
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		dup_note(fd, rc);
		break;
	default:
		break;
	}
	return rc;
}

/* A program built with _FILE_OFFSET_BITS=64 (redis, nginx) calls fcntl64;
 * on x86_64 it is the same call. */
XSK_EXPORT int fcntl64(int fd, int cmd, ...) __attribute__((alias("fcntl")));

/* fstat(2) on an IWARP socket: the fd number holds the inner epoll fd, but
 * the application asked about a socket (inetd-style programs, nginx and
 * sshd look at S_ISSOCK). */
static int stat_fix(int fd, int rc, struct stat *st)
{
	if (rc == 0 && st && xsk_tab_has(fd))
		st->st_mode = (st->st_mode & ~(mode_t)S_IFMT) | S_IFSOCK;
	return rc;
}

XSK_EXPORT int fstat(int fd, struct stat *st)
{
	static int (*real_fstat)(int, struct stat *);

	if (!real_fstat)
		*(void **)&real_fstat = dlsym(RTLD_NEXT, "fstat");
	return stat_fix(fd, real_fstat(fd, st), st);
}

/* struct stat64 is struct stat on x86_64 */
_Static_assert(sizeof(struct stat64) == sizeof(struct stat), "stat64 is stat");
XSK_EXPORT int fstat64(int fd, struct stat64 *st)
{
	static int (*real_fstat64)(int, struct stat64 *);

	if (!real_fstat64)
		*(void **)&real_fstat64 = dlsym(RTLD_NEXT, "fstat64");
	return stat_fix(fd, real_fstat64(fd, st), (struct stat *)st);
}

/* FIONBIO on any IWARP socket, also one not yet connected or listening
 * (anet sets it before listen): the kernel's flag on the fd, and ours,
 * which connect, accept and the data calls obey. */
static int set_fionbio(int fd, void *arg)
{
	struct xsk *s = xsk_fd_get(fd);
	int rc = REAL(ioctl)(fd, FIONBIO, arg);

	if (s && rc == 0) {
		int v = 0;
		memcpy(&v, arg, sizeof(v));
		xsk_lock(s);
		xsk_set_nonblock(s, v != 0);
		xsk_unlock(s);
	}
	if (s)
		xsk_fd_put(s);
	return rc;
}

XSK_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;
	struct xsk *s;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (req == FIONBIO && xsk_tab_has(fd))
		return set_fionbio(fd, arg);
	s = xsk_poll_sock(fd, false);
	if (!s)
		return REAL(ioctl)(fd, req, arg);
	int rc = 0;
	xsk_lock(s);
	if (req == FIONREAD) {
		xsk_progress(s);
		int v = xsk_fionread(s);
		if (arg)
			memcpy(arg, &v, sizeof(v));
		else
			rc = (int)xsk_fail(EFAULT);
	} else {
		rc = (int)xsk_fail(ENOTTY);
	}
	xsk_unlock(s);
	xsk_fd_put(s);
	return rc;
}

