/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The data calls on an IWARP socket: the read/write, recv/send,
 * recvfrom/sendto, recvmsg/sendmsg families, shutdown, their
 * _FORTIFY_SOURCE variants, and the relay threads' one-shot I/O.  A
 * blocking call waits as the kernel's would (SO_RCVLOWAT, MSG_WAITALL,
 * SO_RCVTIMEO/SO_SNDTIMEO, signals, SIGPIPE). */
#include "config.h"

#include <signal.h>
#include <stdlib.h>

#include "libxsock/xsk_intercept.h"
#include "libxsock/xsk_sock.h"

#define XSK_IOV_STACK 16

static size_t iov_total(const struct iovec *iov, int cnt)
{
	size_t t = 0;

	for (int i = 0; i < cnt; i++)
		t += iov[i].iov_len;
	return t;
}

/* iov minus its first skip bytes, into out (cap entries). */
static int iov_skip(const struct iovec *iov, int cnt, size_t skip, struct iovec *out)
{
	int n = 0;

	for (int i = 0; i < cnt; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		out[n].iov_base = (uint8_t *)iov[i].iov_base + skip;
		out[n].iov_len = iov[i].iov_len - skip;
		skip = 0;
		n++;
	}
	return n;
}

/* What both directions refuse (0 or -errno), and the call's start for
 * the signal rules (xsk_wait_step). */
static int data_begin(int cnt, int flags, struct xsk_sigsnap *snap)
{
	if (cnt < 0 || cnt > 1024)
		return -EINVAL;
	if (flags & MSG_OOB)
		return -EOPNOTSUPP; /* no urgent data on an IWARP socket */
	xsk_sig_snap(snap);
	return 0;
}

/* A blocking receive returns once it has min(SO_RCVLOWAT, len) bytes (all
 * of them with MSG_WAITALL), at end of stream or error, or (with what it
 * has, or EAGAIN/EINTR) after SO_RCVTIMEO or a signal. */
static ssize_t sk_recv(struct xsk *s, const struct iovec *iov, int cnt, int flags)
{
	bool peek = (flags & MSG_PEEK) != 0;
	size_t want = iov_total(iov, cnt), got = 0, target;
	struct iovec stackv[XSK_IOV_STACK], *v = stackv;
	struct xsk_sigsnap snap;
	int64_t deadline;
	ssize_t r = data_begin(cnt, flags, &snap);

	if (r)
		return xsk_fail((int)-r);
	xsk_lock(s);
	if (!xsk_relay_self)
		xsk_note_app_read(s);
	deadline = xsk_timeo_deadline(xsk_timeo(s, true));
	target = (flags & MSG_WAITALL) && !peek ? want :
		 (size_t)xsk_rcvlowat(s) < want ? (size_t)xsk_rcvlowat(s) : want;
	xsk_unlock(s);
	if (cnt > XSK_IOV_STACK) {
		v = malloc((size_t)cnt * sizeof(*v));
		if (!v)
			return xsk_fail(ENOMEM);
	}
	for (;;) {
		int n = iov_skip(iov, cnt, got, v);
		xsk_lock(s);
		xsk_progress_io(s, flags, true);
		bool nb = xsk_nonblock(s) || (flags & MSG_DONTWAIT);
		if (peek && !nb && xsk_peek_waits(s, target))
			r = -EAGAIN; /* MSG_PEEK under SO_RCVLOWAT: wait for the mark */
		else
			r = want ? xsk_recv_locked(s, v, n, flags) : 0;
		if (!want && xsk_state(s) != XSK_CONNECTED)
			r = -ENOTCONN;
		xsk_set_ready_after_io(s, r == -EAGAIN);
		xsk_unlock(s);
		if (r > 0) {
			got += (size_t)r;
			if (peek || got >= target)
				break;
			continue;
		}
		if (r == 0)
			break;
		if (r != -EAGAIN || nb) {
			if (!got) {
				errno = (int)-r;
				got = (size_t)-1;
			}
			break;
		}
		int w = xsk_wait_step(s, deadline, false, got > 0, &snap);
		if (w) {
			if (!got) {
				errno = -w; /* EAGAIN after SO_RCVTIMEO, EINTR */
				got = (size_t)-1;
			}
			break;
		}
	}
	if (v != stackv)
		free(v);
	return (ssize_t)got;
}

/* A blocking send returns when all is sent, or (with the count sent, or
 * EAGAIN/EINTR) after SO_SNDTIMEO or a signal. */
static ssize_t sk_send(struct xsk *s, const struct iovec *iov, int cnt, int flags)
{
	size_t total = iov_total(iov, cnt), done = 0;
	int64_t deadline = -2; /* set on the first look (one lock less) */
	struct xsk_sigsnap snap;
	ssize_t r = data_begin(cnt, flags, &snap);

	if (r)
		return xsk_fail((int)-r);
	for (;;) {
		xsk_lock(s);
		if (deadline == -2)
			deadline = xsk_timeo_deadline(xsk_timeo(s, false));
		bool skipped = xsk_progress_io(s, flags, false);
		r = xsk_send_locked(s, iov, cnt, flags, &done);
		bool nb = xsk_nonblock(s) || (flags & MSG_DONTWAIT);
		bool connecting = xsk_state(s) == XSK_CONNECTING;
		if (skipped && (r == -EAGAIN || (r >= 0 && done < total))) {
			xsk_set_rx_hint(s, true); /* the credits may wait in the TCP socket */
			xsk_unlock(s);
			continue;
		}
		xsk_set_ready_after_io(s, false);
		xsk_unlock(s);
		if (r < 0) {
			if (done)
				return (ssize_t)done;
			if (r == -EPIPE && !(flags & MSG_NOSIGNAL))
				raise(SIGPIPE);
			return xsk_fail((int)-r);
		}
		if (done >= total)
			return (ssize_t)done;
		if (nb) {
			if (done)
				return (ssize_t)done;
			return xsk_fail(connecting ? EAGAIN : EAGAIN);
		}
		int w = xsk_wait_step(s, deadline, true, done > 0, &snap);
		if (w)
			return done ? (ssize_t)done : xsk_fail(-w);
	}
}

/* write()'s send for sendfile (xsk_sendfile.c). */
ssize_t xsk_sock_send(struct xsk *s, const struct iovec *iov, int cnt, int flags)
{
	return sk_send(s, iov, cnt, flags);
}

/* fn_ (sk_recv or sk_send) on s_, whose reference goes; returns its
 * result.  Signals held off but in its waits (xsk_priv.h, xsk_sig_hold). */
#define IO_WRAP(fn_, s_, iov_, cnt_, flags_)             \
	do {                                             \
		xsk_sig_hold();                          \
		ssize_t r_ = fn_(s_, iov_, cnt_, flags_); \
		int e_ = errno;                          \
		xsk_fd_put(s_);                          \
		xsk_sig_release();                       \
		errno = e_;                              \
		return r_;                               \
	} while (0)
#define RECV_WRAP(s_, iov_, cnt_, flags_) IO_WRAP(sk_recv, s_, iov_, cnt_, flags_)
#define SEND_WRAP(s_, iov_, cnt_, flags_) IO_WRAP(sk_send, s_, iov_, cnt_, flags_)

ssize_t xsk_relay_io(struct xsk *s, void *buf, size_t n, int dir)
{
	struct iovec v = { buf, n };

	if (dir < 0) {
		int r;
		xsk_lock(s);
		r = xsk_shutdown_locked(s, SHUT_WR);
		xsk_set_ready(s);
		xsk_unlock(s);
		return r < 0 ? xsk_fail(-r) : 0;
	}
	return dir ? sk_send(s, &v, 1, MSG_DONTWAIT | MSG_NOSIGNAL) :
		     sk_recv(s, &v, 1, MSG_DONTWAIT);
}

/* A FRESH socket is still the kernel's: pass through; so is one whose
 * probe went plain (a blocking call waits for the probe's end: may_wait). */
static struct xsk *data_sock(int fd, bool rd, bool may_wait)
{
	struct xsk *s = xsk_tab_has(fd) ? xsk_fd_get(fd) : NULL;

	if (s && xsk_has_relay(s) && xsk_relay_take(fd, s, true, rd))
		return NULL;
	if (s && xsk_probing(s) &&
	    (may_wait && !xsk_nonblock(s) ? xsk_plain_settle(fd, s) : xsk_plain_step(fd, s))) {
		xsk_fd_put(s);
		return NULL;
	}
	if (s && xsk_state(s) == XSK_FRESH) {
		xsk_fd_put(s);
		return NULL;
	}
	return s;
}

struct xsk *xsk_data_sock(int fd, bool rd)
{
	return data_sock(fd, rd, true);
}

struct xsk *xsk_poll_sock(int fd, bool rd)
{
	return data_sock(fd, rd, false);
}

XSK_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	struct xsk *s = xsk_data_sock_fn(fd);

	if (!s)
		return REAL(read)(fd, buf, n);
	struct iovec v = { buf, n };
	RECV_WRAP(s, &v, 1, 0);
}

XSK_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	struct xsk *s = xsk_data_sock_fn(fd);

	if (!s)
		return REAL(write)(fd, buf, n);
	struct iovec v = { (void *)(uintptr_t)buf, n };
	SEND_WRAP(s, &v, 1, 0);
}

XSK_EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	struct xsk *s = xsk_data_sock_fn(fd);

	if (!s)
		return REAL(readv)(fd, iov, cnt);
	RECV_WRAP(s, iov, cnt, 0);
}

XSK_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	struct xsk *s = xsk_data_sock_fn(fd);

	if (!s)
		return REAL(writev)(fd, iov, cnt);
	SEND_WRAP(s, iov, cnt, 0);
}

XSK_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	struct xsk *s = xsk_data_sock_fn(fd);

	if (!s)
		return REAL(recv)(fd, buf, n, flags);
	struct iovec v = { buf, n };
	RECV_WRAP(s, &v, 1, flags);
}

XSK_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	struct xsk *s = xsk_data_sock_fn(fd);

	if (!s)
		return REAL(send)(fd, buf, n, flags);
	struct iovec v = { (void *)(uintptr_t)buf, n };
	SEND_WRAP(s, &v, 1, flags);
}

XSK_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *addr,
			    socklen_t *alen)
{
	struct xsk *s = xsk_data_sock_fn(fd);

	if (!s)
		return REAL(recvfrom)(fd, buf, n, flags, addr, alen);
	struct iovec v = { buf, n };
	ssize_t r = sk_recv(s, &v, 1, flags);
	if (r >= 0 && addr && alen) {
		xsk_lock(s);
		xsk_addr_copy(xsk_peer(s), addr, alen);
		xsk_unlock(s);
	}
	xsk_fd_put(s);
	return r;
}

XSK_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags,
			  const struct sockaddr *addr, socklen_t alen)
{
	struct xsk *s = xsk_data_sock_fn(fd);

	if (!s)
		return REAL(sendto)(fd, buf, n, flags, addr, alen);
	/* a connected stream socket ignores the address, as TCP does */
	struct iovec v = { (void *)(uintptr_t)buf, n };
	SEND_WRAP(s, &v, 1, flags);
}

XSK_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct xsk *s = xsk_data_sock_fn(fd);

	if (!s)
		return REAL(recvmsg)(fd, msg, flags);
	ssize_t r = sk_recv(s, msg->msg_iov, (int)msg->msg_iovlen, flags);
	if (r >= 0) {
		if (msg->msg_name && msg->msg_namelen) {
			xsk_lock(s);
			xsk_addr_copy(xsk_peer(s), msg->msg_name, &msg->msg_namelen);
			xsk_unlock(s);
		}
		msg->msg_controllen = 0;
		msg->msg_flags = 0;
	}
	xsk_fd_put(s);
	return r;
}

XSK_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct xsk *s = xsk_data_sock_fn(fd);

	if (!s)
		return REAL(sendmsg)(fd, msg, flags);
	SEND_WRAP(s, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

static int shutdown_held(int fd, int how)
{
	struct xsk *s = xsk_data_sock_fn(fd);
	int rc;

	if (!s)
		return REAL(shutdown)(fd, how);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
		xsk_fd_put(s);
		return (int)xsk_fail(EINVAL);
	}
	xsk_lock(s);
	xsk_progress(s);
	rc = xsk_shutdown_locked(s, how);
	xsk_unlock(s);
	xsk_fd_put(s);
	return rc ? (int)xsk_fail(-rc) : 0;
}

XSK_EXPORT int shutdown(int fd, int how)
{
	return XSK_HELD(int, shutdown_held(fd, how));
}


/* ---- _FORTIFY_SOURCE variants -------------------------------------------------------- */

XSK_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
XSK_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		abort();
	return read(fd, buf, n);
}

XSK_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
XSK_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (n > buflen)
		abort();
	return recv(fd, buf, n, flags);
}

XSK_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
				  struct sockaddr *addr, socklen_t *alen);
XSK_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
				  struct sockaddr *addr, socklen_t *alen)
{
	if (n > buflen)
		abort();
	return recvfrom(fd, buf, n, flags, addr, alen);
}
