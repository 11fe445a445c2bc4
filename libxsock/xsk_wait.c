/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A blocking call's wait (xsk_intercept.h): on the socket's channels and
 * eventfds, and on the connection's TCP socket so that the waiting thread
 * receives the data itself; with SO_RCVTIMEO/SO_SNDTIMEO deadlines and
 * the kernel's rules for signals (xsk_signal.c). */
#include "config.h"

#include <poll.h>
#include <unistd.h>

#include "libxsock/xsk_intercept.h"
#include "libxsock/xsk_sock.h"

/* Block until the socket may have made progress (or timeout).  A writer
 * registers itself so that a thread which makes the socket writable wakes
 * it.  0, -EINTR or -XSK_ERESTART (xsk_sig_poll; snap: the call's start). */
static int sk_wait(struct xsk *s, int timeout_ms, bool writer, struct xsk_sigsnap *snap)
{
	struct pollfd p[4];
	int fds[4], n, rc = 0, rxfd;

	xsk_lock(s);
	n = xsk_wait_fds(s, fds, writer);
	rxfd = n ? xsk_rx_wait_begin(s) : -1; /* receive the data on this thread */
	if (rxfd >= 0)
		fds[n++] = rxfd;
	if (writer) {
		xsk_writer_begin(s);
		/* another thread may have made progress since the caller's
		 * attempt, before it could see a waiting writer to wake */
		if (xsk_revents(s) & (POLLOUT | POLLERR | POLLHUP))
			timeout_ms = 0;
	}
	xsk_unlock(s);
	for (int i = 0; i < n; i++)
		p[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
	if (!n)
		return -ENOTCONN;
	rc = xsk_sig_poll(p, (nfds_t)n, timeout_ms, snap);
	if (rxfd >= 0) {
		xsk_lock(s);
		xsk_rx_wait_end(s);
		xsk_unlock(s);
	}
	if (writer) {
		xsk_lock(s);
		xsk_writer_end(s);
		xsk_unlock(s);
	}
	return rc;
}

int xsk_remaining(int64_t deadline)
{
	if (deadline < 0)
		return -1;
	int64_t left = deadline - xsk_now_ms();
	return left > 0 ? (int)left : 0;
}


int64_t xsk_timeo_deadline(int64_t us)
{
	if (!us)
		return -1;
	return xsk_now_ms() + (us < 0 ? 0 : (us + 999) / 1000);
}

int xsk_wait_step(struct xsk *s, int64_t deadline, bool writer, bool moved,
		  struct xsk_sigsnap *snap)
{
	int left = xsk_remaining(deadline);

	if (left == 0)
		return -EAGAIN;
	int w = sk_wait(s, left, writer, snap);
	if (w == -XSK_ERESTART) {
		if (deadline >= 0 || moved)
			return -EINTR;
		xsk_sig_snap(snap); /* restarted */
		return 0;
	}
	return w == -EINTR ? -EINTR : 0;
}

