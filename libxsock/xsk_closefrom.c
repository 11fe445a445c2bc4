/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* closefrom(3) and close_range(2) (xsock(7) DESCRIPTORS).
 *
 * Daemons close every descriptor they did not open: sshd calls
 * closefrom(6) right after its re-exec (when the exec hand-over has just
 * rebuilt the connection on descriptors of the stack's), Python's
 * subprocess calls close_range() in the child before execve.  glibc's
 * closefrom calls the system call itself, so both are interposed: the
 * range is closed in pieces around the descriptors the stack keeps
 * (libiwarp's registry), and an IWARP socket (or an epoll set holding one)
 * in the range goes through close() as if the program had closed it.
 * CLOSE_RANGE_CLOEXEC is passed on whole: the stack's own descriptors are
 * close-on-exec already.  In a vfork child (Python's subprocess closes
 * there) the descriptor table is the child's but the memory is the
 * parent's: the IWARP sockets' numbers are closed as plain files there,
 * libxsock's table is not touched. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <linux/close_range.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "libxsock/xsk_priv.h"

static int sys_close_range(unsigned first, unsigned last, unsigned flags)
{
	return (int)syscall(SYS_close_range, first, last, flags);
}

/* the next descriptor >= fd that is not simply closed, or -1 */
static int next_special(int fd, int (*next_kept)(int))
{
	int k = next_kept ? next_kept(fd) : -1;
	int t = xsk_tab_next(fd);

	if (k < 0)
		return t;
	return t < 0 || k < t ? k : t;
}

XSK_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	const struct xsk_stack *st = xsk_stack();
	int (*next_kept)(int) = st ? st->fd_next_kept : NULL;
	unsigned cur = first;
	bool vforked = xsk_vfork_child();

	if (first > last || (flags & ~(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC))) {
		errno = EINVAL;
		return -1;
	}
	if (flags & CLOSE_RANGE_CLOEXEC)
		return sys_close_range(first, last, (unsigned)flags);
	if ((flags & CLOSE_RANGE_UNSHARE) && unshare(CLONE_FILES) < 0)
		return -1;
	while (cur <= last && cur <= INT_MAX) {
		int sp = next_special((int)cur, next_kept);

		if (sp < 0 || (unsigned)sp > last)
			return sys_close_range(cur, last, 0);
		if ((unsigned)sp > cur && sys_close_range(cur, (unsigned)sp - 1, 0) < 0)
			return -1;
		if (next_kept && next_kept(sp) == sp)
			; /* the stack's */
		else if (vforked)
			sys_close_range((unsigned)sp, (unsigned)sp, 0);
		else
			close(sp); /* an IWARP socket, or an epoll set with one */
		cur = (unsigned)sp + 1;
	}
	return 0;
}

XSK_EXPORT void closefrom(int lowfd)
{
	close_range(lowfd < 0 ? 0 : (unsigned)lowfd, ~0U, 0);
}
