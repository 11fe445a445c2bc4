/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Who uses a connection after fork(2) (xsock(7), section FORK): the fork
 * generation, the first use that claims a connection for this process
 * (xsk_fork_use), whether a close must leave it alone (xsk_fork_quiet),
 * the sandbox probe, and whether this is a vfork child.  Below both the protocol files, which claim on
 * progress, and xsk_fork.c, which moves the generation on at each fork. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "libxsock/xsk_config.h"
#include "libxsock/xsk_proto_int.h"

_Atomic unsigned xsk_fork_gen;
pid_t xsk_fork_pid;

/* A forked child that may not run the stack: OpenSSH's pre-authentication
 * child installs a seccomp filter that kills the process on any system
 * call outside read/write/poll and a few more (eventfd2, io_uring_setup,
 * dup3 included), and answers open() with EACCES.  Starting the engine or
 * a relay there would be a SIGSYS; the copy is left unusable instead
 * (EBUSY), with one line under XSOCK_DEBUG.  Probed once per process, on
 * its first claim after a fork. */
static pid_t probed_pid;
static bool probed_sandbox;

bool xsk_fork_sandboxed(void)
{
	pid_t me = getpid();
	int fd;

	if (probed_pid == me)
		return probed_sandbox;
	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	probed_sandbox = fd < 0 && (errno == EACCES || errno == EPERM);
	if (fd >= 0)
		xsk_real.close(fd);
	probed_pid = me;
	if (probed_sandbox && xsk_debug())
		fprintf(stderr, "libxsock: pid %d runs in a system-call sandbox (open is refused): "
				"its copies of IWARP connections are unusable here (EBUSY)\n",
			(int)me);
	return probed_sandbox;
}

bool xsk_maker_only(const struct xsk *s)
{
	const struct xsk_stack *st = xsk_stack();

	return st && (st->kernel || s->msg_imm);
}

bool xsk_fork_use(struct xsk *s)
{
	unsigned g = atomic_load_explicit(&xsk_fork_gen, memory_order_relaxed);
	const struct xsk_stack *st;

	if (s->foreign)
		return false;
	if (s->claim_gen == g)
		return true;
	if (g && xsk_fork_sandboxed()) {
		s->foreign = true;
		return false;
	}
	s->claim_gen = g;
	st = xsk_stack();
	if (xsk_maker_only(s) && s->owner_pid != getpid())
		s->foreign = true; /* the maker's alone: a relay client */
	else if (st && st->claim && s->id && st->claim(s->id) == -EBUSY)
		s->foreign = true;
	else if (s->relay)
		xsk_relay_up->owner(s); /* xsk_relay.c: serve the other processes' copies */
	return !s->foreign;
}

bool xsk_fork_give_up(struct xsk *s)
{
	unsigned g = atomic_load_explicit(&xsk_fork_gen, memory_order_relaxed);

	if (!g || (s->claim_gen == g && !s->foreign))
		return false; /* ours: the sandbox stops the stack here (xsock(7) BUGS) */
	s->claim_gen = g;
	s->foreign = true;
	return true;
}

bool xsk_fork_quiet(struct xsk *s)
{
	const struct xsk_stack *st = xsk_stack();

	if (s->foreign)
		return true;
	if (xsk_maker_only(s))
		return s->owner_pid != getpid();
	return st && st->fork_mode && s->id && st->fork_mode(s->id) != 0;
}

bool xsk_vfork_child(void)
{
	pid_t p = xsk_fork_pid;

	return p && getpid() != p;
}
