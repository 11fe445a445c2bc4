/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Spare listening sockets: a listener closed by its owner keeps its TCP
 * socket open a little longer, and a listen on the same address in this
 * process takes it over with what queued meanwhile.
 *
 * Why: servers tell their client to connect and then listen again on the
 * same port (perftest -R destroys its first listener after the parameter
 * exchange and listens anew for the test connection).  A client that is
 * quicker than that second listen is refused by the kernel, and such
 * programs' own retries are racy (perftest 4.5 retries on freed memory,
 * docs/interop.md).  With the socket kept, the early client's connection
 * waits in the backlog instead.  A socket nobody takes is closed after
 * XS_SPARE_MS (its queued connections are then reset, as before, only
 * later).  Only rdma_cm listeners that accepted a connection are kept:
 * that is the pattern, and it keeps another program's bind to a port just
 * freed from failing; libxsock's (mixed) listeners are sockets, whose
 * close frees the port at once as TCP's does. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/xs_clock.h"
#include "util/xs_sockaddr.h"
#include "verbs/xs_internal.h"

#define XS_SPARE_MAX 8

static struct xs_spare {
	int fd; /* kept (xs_fd_keep); -1: free slot */
	struct sockaddr_storage addr; /* what getsockname says */
	socklen_t len;
	uint64_t end_ms;
} spares[XS_SPARE_MAX] = { [0 ... XS_SPARE_MAX - 1] = { .fd = -1 } };
static pthread_mutex_t spare_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned spare_count;

/* spare_mu held */
static void spare_close(struct xs_spare *sp)
{
	xs_fd_close(sp->fd);
	sp->fd = -1;
	spare_count--;
}

/* closed: a closed listener's socket (duplicated here); else libxsock's
 * socket, its duplicate given to us. */
static bool spare_put(int fd, bool closed)
{
	struct xs_spare s = { .len = sizeof(s.addr) };
	bool kept = false;

	if (getsockname(fd, (struct sockaddr *)&s.addr, &s.len) < 0)
		return false;
	pthread_mutex_lock(&spare_mu);
	for (int i = 0; i < XS_SPARE_MAX && !kept; i++) {
		if (spares[i].fd >= 0)
			continue;
		s.fd = xs_fd_keep(closed ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : fd);
		if (s.fd < 0)
			break;
		s.end_ms = xs_now_ms() + XS_SPARE_MS;
		spares[i] = s;
		spare_count++;
		kept = true;
	}
	pthread_mutex_unlock(&spare_mu);
	if (kept && closed)
		xs_log("listener closed: its socket is kept %u ms for a listen on the same address",
		       XS_SPARE_MS);
	return kept;
}

bool xs_spare_keep(int fd)
{
	return spare_put(fd, true);
}

XS_EXPORT int xsock_priv_listen_socket(int fd)
{
	if (spare_put(fd, false))
		return 0;
	close(fd);
	return -ENOSPC;
}

int xs_spare_take(const struct sockaddr *addr, socklen_t len)
{
	int fd = -1;

	pthread_mutex_lock(&spare_mu);
	for (int i = 0; i < XS_SPARE_MAX && spare_count; i++) {
		if (spares[i].fd < 0 || spares[i].len != len ||
		    memcmp(&spares[i].addr, addr, len) != 0)
			continue;
		fd = spares[i].fd;
		spares[i].fd = -1;
		spare_count--;
		break;
	}
	pthread_mutex_unlock(&spare_mu);
	return fd;
}

bool xs_spare_drop_port(const struct sockaddr *addr)
{
	bool dropped = false;

	pthread_mutex_lock(&spare_mu);
	for (int i = 0; i < XS_SPARE_MAX && spare_count; i++) {
		if (spares[i].fd < 0 || xs_sa_port((struct sockaddr *)&spares[i].addr) != xs_sa_port(addr))
			continue;
		spare_close(&spares[i]);
		dropped = true;
	}
	pthread_mutex_unlock(&spare_mu);
	return dropped;
}

unsigned xs_spare_expire(uint64_t now)
{
	unsigned left;

	pthread_mutex_lock(&spare_mu);
	for (int i = 0; i < XS_SPARE_MAX && spare_count; i++) {
		if (spares[i].fd >= 0 && now >= spares[i].end_ms)
			spare_close(&spares[i]);
	}
	left = spare_count;
	pthread_mutex_unlock(&spare_mu);
	return left;
}
