/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* poll, ppoll, select and pselect over sets that hold IWARP sockets: their
 * readiness is computed by libxsock, the other fds (and the sockets'
 * channels and eventfds) go to the kernel's ppoll. */
#include "config.h"

#include <stdlib.h>

#include "libxsock/xsk_intercept.h"
#include "libxsock/xsk_sock.h"

/* From epoll_wait, without the kernel's report a watched socket has
 * nothing to receive; from poll, reported means xsk_rx_wait_begin's TCP
 * socket woke the wait. */
short xsk_poll_one(struct xsk *s, short events, bool ep, bool reported)
{
	short r;

	xsk_lock(s);
	if (events & POLLIN)
		xsk_note_app_read(s);
	if (ep) {
		xsk_progress_watch(s, reported ? XSOCK_RX_ALWAYS :
				      xsk_rx_watched(s) ? XSOCK_RX_NONE : XSOCK_RX_MAYBE);
	} else if (reported) {
		xsk_progress_rx(s, XSOCK_RX_ALWAYS);
		xsk_set_rx_hint(s, false); /* received just now */
	} else {
		xsk_progress(s);
	}
	r = xsk_revents(s);
	xsk_unlock(s);
	return (short)(r & (events | POLLERR | POLLHUP | POLLNVAL));
}

/* poll(2) over a set that contains IWARP sockets: their readiness is
 * computed here, the rest (and the IWARP sockets' event channels) go to
 * the kernel. */
static int poll_emul_held(struct pollfd *fds, nfds_t n, int timeout, const sigset_t *mask)
{
	struct xsk **socks = calloc(n ? n : 1, sizeof(*socks));
	struct pollfd *w = calloc(n * 5 + 1, sizeof(*w));
	bool *writer = calloc(n ? n : 1, sizeof(*writer));
	/* a reader waiting on the connection's TCP socket itself: its slot in
	 * w (0: none), then whether that socket woke us */
	nfds_t *rxw = calloc(n ? n : 1, sizeof(*rxw));
	bool *rx_woke = calloc(n ? n : 1, sizeof(*rx_woke));
	int64_t deadline = timeout < 0 ? -1 : xsk_now_ms() + timeout;
	int ret = 0;

	if (!socks || !w || !writer || !rxw || !rx_woke) {
		free(socks);
		free(w);
		free(writer);
		free(rxw);
		free(rx_woke);
		return (int)xsk_fail(ENOMEM);
	}
	for (nfds_t i = 0; i < n; i++)
		socks[i] = xsk_poll_sock(fds[i].fd, false);
	for (;;) {
		int ready = 0;
		nfds_t nw = 0;
		int64_t probe_end = -1; /* the nearest probe's deadline */

		for (nfds_t i = 0; i < n; i++) {
			if (socks[i] && xsk_probing(socks[i])) {
				if (xsk_plain_step(fds[i].fd, socks[i])) {
					/* the kernel's socket now: its wait */
					xsk_fd_put(socks[i]);
					socks[i] = NULL;
					continue;
				}
				if (xsk_probe_fd(socks[i]) >= 0 &&
				    (probe_end < 0 || xsk_probe_deadline(socks[i]) < probe_end))
					probe_end = xsk_probe_deadline(socks[i]);
			}
			if (!socks[i])
				continue;
			fds[i].revents = xsk_poll_one(socks[i], fds[i].events, false, rx_woke[i]);
			rx_woke[i] = false;
			if (fds[i].revents)
				ready++;
		}
		for (nfds_t i = 0; i < n; i++)
			if (!socks[i])
				w[nw++] = fds[i];
		for (nfds_t i = 0; i < n; i++) {
			if (socks[i] && !ready) {
				/* channels, the ready fd for readers, the wake fd
				 * (registered as a waiting writer) for writers */
				int cf[4]; /* xsk_wait_fds' 3, plus the wake fd of a reader-writer */
				struct xsk *sk = socks[i];
				xsk_lock(sk);
				int k = xsk_wait_fds(sk, cf, false);
				if (!(fds[i].events & POLLIN))
					k--; /* the ready fd is the last one */
				/* a reader waits on the TCP socket as well and
				 * receives on this thread (as a blocked read does) */
				int tcp = fds[i].events & POLLIN ? xsk_rx_wait_begin(sk) : -1;
				if (tcp >= 0) {
					rxw[i] = nw + 1;
					w[nw++] = (struct pollfd){ .fd = tcp, .events = POLLIN };
				}
				if ((fds[i].events & POLLOUT) && xsk_wake_fd(sk) >= 0) {
					cf[k++] = xsk_wake_fd(sk);
					xsk_writer_begin(sk);
					writer[i] = true;
					/* writable since xsk_poll_one: nobody woke us */
					if (xsk_revents(sk) & (POLLOUT | POLLERR | POLLHUP))
						xsk_writer_kick(sk);
				}
				xsk_unlock(sk);
				for (int j = 0; j < k; j++)
					w[nw++] = (struct pollfd){ .fd = cf[j], .events = POLLIN };
			}
		}
		int t = ready ? 0 : xsk_remaining(deadline);
		/* a probe's end decides without news on any fd (its silence),
		 * or came with the look above (no wake-up left) */
		int kt = t;
		for (nfds_t i = 0; i < n; i++)
			if (socks[i] && xsk_plain_due(socks[i]))
				kt = 0;
		if (probe_end >= 0 && (kt < 0 || xsk_remaining(probe_end) < kt))
			kt = xsk_remaining(probe_end);
		struct timespec ts = { kt / 1000, (long)(kt % 1000) * 1000000 };
		/* ready with only IWARP sockets: nothing left to ask the kernel */
		unsigned held = xsk_sig_open();
		int k = ready && !nw ? 0 : xsk_real.ppoll(w, nw, kt < 0 ? NULL : &ts, mask);
		int e = errno;
		xsk_sig_close(held);
		for (nfds_t i = 0; i < n; i++) {
			if (writer[i]) {
				xsk_lock(socks[i]);
				xsk_writer_end(socks[i]);
				xsk_unlock(socks[i]);
				writer[i] = false;
			}
			if (rxw[i]) {
				rx_woke[i] = k > 0 && (w[rxw[i] - 1].revents & POLLIN);
				xsk_lock(socks[i]);
				xsk_rx_wait_end(socks[i]);
				xsk_unlock(socks[i]);
				rxw[i] = 0;
			}
		}
		errno = e;
		if (k < 0) {
			ret = ready ? ready : -1;
			break;
		}
		nfds_t j = 0;
		int other = 0;
		for (nfds_t i = 0; i < n; i++) {
			if (!socks[i]) {
				fds[i].revents = w[j++].revents;
				if (fds[i].revents)
					other++;
			}
		}
		if (ready + other > 0 || t == 0) {
			ret = ready + other;
			break;
		}
		/* an IWARP socket's channel fired: recompute */
	}
	for (nfds_t i = 0; i < n; i++)
		if (socks[i])
			xsk_fd_put(socks[i]);
	free(socks);
	free(w);
	free(writer);
	free(rxw);
	free(rx_woke);
	return ret;
}

/* Signals held off but in the kernel's wait (xsk_priv.h, xsk_sig_hold):
 * a handler that forks never finds this thread in the allocator. */
static int poll_emul(struct pollfd *fds, nfds_t n, int timeout, const sigset_t *mask)
{
	int rc, e;

	xsk_sig_hold();
	rc = poll_emul_held(fds, n, timeout, mask);
	e = errno;
	xsk_sig_release();
	errno = e;
	return rc;
}

static bool any_iwarp_pollfd(const struct pollfd *fds, nfds_t n)
{
	for (nfds_t i = 0; i < n; i++) {
		/* NULL: still the kernel's, or now the relay's kernel socket */
		struct xsk *s = xsk_tab_has(fds[i].fd) ?
					xsk_poll_sock(fds[i].fd, fds[i].events & POLLIN) : NULL;
		if (s) {
			xsk_fd_put(s);
			return true;
		}
	}
	return false;
}

/* glibc declares poll's fds write-only (access attribute), which makes gcc
 * believe our read of the caller's array reads uninitialised memory. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
XSK_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (!any_iwarp_pollfd(fds, n))
		return REAL(poll)(fds, n, timeout);
	return poll_emul(fds, n, timeout, NULL);
}

static int ts_ms(const struct timespec *ts)
{
	if (!ts)
		return -1;
	int64_t ms = (int64_t)ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000;
	return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

XSK_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	if (!any_iwarp_pollfd(fds, n))
		return REAL(ppoll)(fds, n, ts, mask);
	return poll_emul(fds, n, ts_ms(ts), mask);
}
#pragma GCC diagnostic pop

XSK_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
XSK_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		abort();
	return poll(fds, n, timeout);
}

static bool any_iwarp_fdset(int nfds, fd_set *r, fd_set *w, fd_set *e)
{
	for (int fd = 0; fd < nfds && fd < FD_SETSIZE; fd++) {
		struct xsk *s;
		if (!xsk_tab_has(fd) ||
		    !((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (e && FD_ISSET(fd, e))))
			continue;
		/* NULL: still the kernel's, or now the relay's kernel socket */
		s = xsk_poll_sock(fd, r && FD_ISSET(fd, r));
		if (s) {
			xsk_fd_put(s);
			return true;
		}
	}
	return false;
}

static int select_emul_held(int nfds, fd_set *r, fd_set *w, fd_set *e, int timeout,
			    const sigset_t *mask)
{
	struct pollfd *p = calloc((size_t)(nfds > 0 ? nfds : 1), sizeof(*p));
	nfds_t n = 0;
	int rc, count = 0;

	if (!p)
		return (int)xsk_fail(ENOMEM);
	for (int fd = 0; fd < nfds && fd < FD_SETSIZE; fd++) {
		short ev = 0;
		if (r && FD_ISSET(fd, r))
			ev |= POLLIN;
		if (w && FD_ISSET(fd, w))
			ev |= POLLOUT;
		if (e && FD_ISSET(fd, e))
			ev |= POLLPRI;
		if (ev)
			p[n++] = (struct pollfd){ .fd = fd, .events = ev };
	}
	rc = poll_emul(p, n, timeout, mask);
	if (rc < 0) {
		free(p);
		return rc;
	}
	if (r)
		FD_ZERO(r);
	if (w)
		FD_ZERO(w);
	if (e)
		FD_ZERO(e);
	for (nfds_t i = 0; i < n; i++) {
		short re = p[i].revents;
		if (re & POLLNVAL) {
			free(p);
			return (int)xsk_fail(EBADF);
		}
		if (r && (p[i].events & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) {
			FD_SET(p[i].fd, r);
			count++;
		}
		if (w && (p[i].events & POLLOUT) && (re & (POLLOUT | POLLERR))) {
			FD_SET(p[i].fd, w);
			count++;
		}
		if (e && (p[i].events & POLLPRI) && (re & POLLPRI)) {
			FD_SET(p[i].fd, e);
			count++;
		}
	}
	free(p);
	return count;
}

/* Held off as poll_emul (its poll_emul's wait the one open time). */
static int select_emul(int nfds, fd_set *r, fd_set *w, fd_set *e, int timeout,
		       const sigset_t *mask)
{
	int rc, err;

	xsk_sig_hold();
	rc = select_emul_held(nfds, r, w, e, timeout, mask);
	err = errno;
	xsk_sig_release();
	errno = err;
	return rc;
}

XSK_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
	if (!any_iwarp_fdset(nfds, r, w, e))
		return REAL(select)(nfds, r, w, e, tv);
	int t = -1;
	if (tv) {
		int64_t ms = (int64_t)tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000;
		t = ms > 0x7fffffff ? 0x7fffffff : (int)ms;
	}
	return select_emul(nfds, r, w, e, t, NULL);
}

XSK_EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts,
		       const sigset_t *mask)
{
	if (!any_iwarp_fdset(nfds, r, w, e))
		return REAL(pselect)(nfds, r, w, e, ts, mask);
	return select_emul(nfds, r, w, e, ts_ms(ts), mask);
}

