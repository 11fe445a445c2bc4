/* The private interface between libiwarp and libxsock (the same project
 * and release; version node XSOCK_PRIVATE_0 in libiwarp.map, looked up
 * by libxsock with dlsym).  Nothing here is part of the verbs ABI. */
#ifndef XS_PRIV_ABI_H
#define XS_PRIV_ABI_H

#include <rdma/rdma_cma.h>

/* The mixed listener (xsock(7) MIXED LISTENER).  Called on a listening
 * id before rdma_listen: each TCP connection it accepts is classified by
 * its first octets (MSG_PEEK): the MPA Request key makes it an iWARP
 * connection (RDMA_CM_EVENT_CONNECT_REQUEST as usual); other octets, the
 * peer's FIN, or nothing within XSOCK_CLASSIFY_MS make it plain TCP, queued
 * on the id's channel as an event of type XSOCK_CM_EVENT_PLAIN (id and
 * listen_id = the listener) whose status is the connection's kernel socket
 * (O_NONBLOCK, FD_CLOEXEC, no octet read).  Whoever gets the event takes the
 * socket by setting status to -1; rdma_ack_cm_event closes a socket not
 * taken, as does destroying the id or the channel with the event queued.
 * 0, or -EINVAL (not an id, or already listening). */
int xsock_priv_listen_mixed(struct rdma_cm_id *id);

#define XSOCK_CM_EVENT_PLAIN 0x7870 /* not an rdma_cm_event_type: "xp" */

/* A descriptor only the stack uses (a channel's eventfd, a connection's
 * TCP socket) moved out of the low numbers the application's own files
 * get: a TCP socket costs the kernel one descriptor but an IWARP socket
 * several, and programs size tables by descriptor number (wrk's event
 * loop takes 10 + 3 per connection).  The lowest free number from half
 * the soft RLIMIT_NOFILE (at most 4096) up; fd itself when there is none.
 * Keeps FD_CLOEXEC (all of them have it). */
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>
static inline int xsock_fd_high(int fd)
{
	static int base; /* 0: not yet known, -1: do not move */
	struct rlimit rl;
	int b = __atomic_load_n(&base, __ATOMIC_RELAXED), n;

	if (!b) {
		b = -1;
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= 256)
			b = rl.rlim_cur / 2 > 4096 ? 4096 : (int)(rl.rlim_cur / 2);
		__atomic_store_n(&base, b, __ATOMIC_RELAXED);
	}
	if (fd < 0 || b < 0 || fd >= b)
		return fd;
	n = fcntl(fd, F_DUPFD_CLOEXEC, b);
	if (n < 0)
		return fd;
	close(fd);
	return n;
}

#endif
