/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The start of a system-call sandbox (xsock(7) FORK): setrlimit,
 * setrlimit64, prlimit, prlimit64 and prctl.
 *
 * OpenSSH's pre-authentication child, forked by the monitor, sets
 * RLIMIT_FSIZE, RLIMIT_NOFILE and RLIMIT_NPROC to 0, then installs a
 * seccomp filter (PR_SET_SECCOMP) that allows read, write, poll, select,
 * shutdown, close and little more, and kills the process on anything else
 * (eventfd2, io_uring_setup, dup3, fcntl, recvfrom ...).  The stack cannot
 * run there, and a descriptor can no longer become a relay socket once
 * RLIMIT_NOFILE is below its number (dup3 then fails).  So when a process
 * lowers RLIMIT_NOFILE to or below the number of an IWARP socket, or asks
 * for a seccomp filter, every connection it holds but has not used since
 * the last fork becomes its relay channel's kernel socket first
 * (xsk_tab_sandbox); the other process (the monitor, whose thread waits
 * for a client since the fork) drives the connection and relays, and the
 * sandboxed process's calls on it are plain AF_UNIX ones the filter
 * allows.  PR_SET_NO_NEW_PRIVS alone changes nothing for the stack: not a
 * sign.  A seccomp(2) system call made through syscall(2) is not seen. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "libxsock/xsk_intercept.h"
#include "libxsock/xsk_priv.h"

/* the filter: libiwarp's file system calls at exit go too */
static void seccomp_starts(void)
{
	const struct xsk_stack *st = xsk_stack();

	xsk_tab_sandbox();
	if (st && st->sandbox)
		st->sandbox();
}

static void nofile_lowered(pid_t pid, int res, const struct rlimit *rl)
{
	if (res != RLIMIT_NOFILE || !rl || (pid && pid != getpid()) || xsk_vfork_child())
		return;
	if (rl->rlim_cur < (rlim_t)xsk_tab_n && xsk_tab_next((int)rl->rlim_cur) >= 0)
		xsk_tab_sandbox();
}

/* (XSK_UNINSTRUMENTED: a sanitizer sets RLIMIT_CORE as it starts) */
XSK_UNINSTRUMENTED static int sys_prlimit(pid_t pid, int res, const struct rlimit *rl, struct rlimit *old)
{
	return (int)syscall(SYS_prlimit64, pid, res, rl, old);
}

XSK_EXPORT XSK_UNINSTRUMENTED int setrlimit(__rlimit_resource_t res, const struct rlimit *rl)
{
	if (res == RLIMIT_NOFILE)
		nofile_lowered(0, (int)res, rl);
	return sys_prlimit(0, (int)res, rl, NULL);
}

XSK_EXPORT XSK_UNINSTRUMENTED int setrlimit64(__rlimit_resource_t res, const struct rlimit64 *rl)
{
	_Static_assert(sizeof(struct rlimit64) == sizeof(struct rlimit), "64-bit rlimit");
	return setrlimit(res, (const struct rlimit *)rl);
}

XSK_EXPORT XSK_UNINSTRUMENTED int prlimit(pid_t pid, __rlimit_resource_t res,
					  const struct rlimit *rl, struct rlimit *old)
{
	if (res == RLIMIT_NOFILE)
		nofile_lowered(pid, (int)res, rl);
	return sys_prlimit(pid, (int)res, rl, old);
}

XSK_EXPORT XSK_UNINSTRUMENTED int prlimit64(pid_t pid, __rlimit_resource_t res, const struct rlimit64 *rl,
			 struct rlimit64 *old)
{
	return prlimit(pid, res, (const struct rlimit *)rl, (struct rlimit *)old);
}

XSK_EXPORT XSK_UNINSTRUMENTED int prctl(int option, ...)
{
	unsigned long a[4];
	va_list ap;

	va_start(ap, option);
	for (int i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	if (option == PR_SET_SECCOMP && !xsk_vfork_child())
		seccomp_starts();
	return (int)syscall(SYS_prctl, option, a[0], a[1], a[2], a[3]);
}
