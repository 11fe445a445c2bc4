/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The descriptors the stack keeps for itself (xsock(7) DESCRIPTORS).
 *
 * Daemons close every descriptor they did not open themselves: sshd's
 * closefrom(6) after its re-exec, Python's subprocess (close_range in the
 * child), systemd-style daemons.  Those the stack made (the engine's
 * eventfd and io_uring, listening and connected TCP sockets, event and
 * completion channels) are recorded here, and libxsock's closefrom(3) and
 * close_range(2) pass over them.  A bit per descriptor number below
 * XS_FDKEEP_MAX (higher numbers are not kept); lock-free, any thread. */
#include "config.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "verbs/xs_internal.h"

#define XS_FDKEEP_MAX 65536

static _Atomic uint64_t kept[XS_FDKEEP_MAX / 64];

int xs_fd_keep(int fd)
{
	if (fd >= 0 && fd < XS_FDKEEP_MAX)
		atomic_fetch_or_explicit(&kept[fd / 64], 1ull << (fd % 64), memory_order_relaxed);
	return fd;
}

void xs_fd_drop(int fd)
{
	if (fd >= 0 && fd < XS_FDKEEP_MAX)
		atomic_fetch_and_explicit(&kept[fd / 64], ~(1ull << (fd % 64)), memory_order_relaxed);
}

int xs_fd_close(int fd)
{
	xs_fd_drop(fd);
	return close(fd);
}

/* libxsock's own descriptors (xs_priv_abi.h) */
XS_EXPORT int xsock_priv_fd_keep(int fd)
{
	return xs_fd_keep(fd);
}

XS_EXPORT void xsock_priv_fd_drop(int fd)
{
	xs_fd_drop(fd);
}

/* the lowest kept descriptor >= fd, or -1 */
XS_EXPORT int xsock_priv_fd_next_kept(int fd)
{
	if (fd < 0)
		fd = 0;
	while (fd < XS_FDKEEP_MAX) {
		uint64_t w = atomic_load_explicit(&kept[fd / 64], memory_order_relaxed) >> (fd % 64);

		if (w)
			return fd + __builtin_ctzll(w);
		fd = (fd / 64 + 1) * 64;
	}
	return -1;
}
