/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The rsocket API (librdmacm's RDMACM_1.0 r* calls) over libxsock.
 *
 * libxsock already speaks the rsockets wire protocol on TCP sockets set to
 * IWARP_MODE, so an rsocket here is simply such a socket and every r* call
 * is libxsock's interposer of the libc call of the same name (which handles
 * IWARP fds and falls through to libc for any other fd).  Carried because
 * without them a program under xsock-run resolves rsocket() from the real
 * librdmacm, which finds no kernel RDMA device (rstream, riostream, rcopy,
 * rdma-core's librspreload.so).
 *
 * libxsock is loaded on first use with dlopen(RTLD_LOCAL) and its own
 * definitions are taken with dlsym on its handle: libiwarp must not link
 * against libxsock (libxsock itself dlopens libiwarp, xsk_real.c), and a
 * global load would interpose libc for the whole program, which plain
 * xsock-run does not ask for.  XSOCK_SOCK_LIB (exported by xsock-run) names
 * it; else libxsock.so.0 by the default search.  Under xsock-run --iwarp the
 * preloaded copy is found and shared.
 *
 * rsocket fds are ordinary fd numbers, so rpoll/rselect take them mixed with
 * any other fd, and calls on a non-rsocket fd act as the libc call.
 *
 * Not carried (libiwarp(7) RSOCKETS):
 *   SOCK_DGRAM: rsockets' datagrams need UD QPs, which iWARP has none of;
 *     librdmacm fails the first rbind/rsendto there (ibv_create_qp:
 *     EOPNOTSUPP); rsocket() fails at once with that errno, so that
 *     librspreload falls back to a kernel UDP socket.
 *   riomap/riowrite: libxsock does not implement the iomap messages
 *     (RS_OP_IOMAP_SGL, RS_OP_WRITE) and advertises an iomap size of 0;
 *     riomap(PROT_WRITE) then fails as librdmacm's does with no iomap
 *     entries left (ENOMEM).
 *   SOL_RDMA queue and inline sizes: libxsock sizes its queues itself
 *     (384 credits, as rsockets' default); the values are accepted and
 *     ignored. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <rdma/rsocket.h>

#include "libxsock/xsock.h"
#include "verbs/xs_internal.h"

/* what rgetsockopt(SOL_RDMA) reports: libxsock's credits (RDMA_SQSIZE and
 * RDMA_RQSIZE, rsockets' default 384); no inline data, no iomap */
#define RS_XSK_QSIZE 384

static struct {
	int (*socket)(int, int, int);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*shutdown)(int, int);
	int (*close)(int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*getpeername)(int, struct sockaddr *, socklen_t *);
	int (*getsockname)(int, struct sockaddr *, socklen_t *);
	int (*fcntl)(int, int, ...);
} xsk;
static int xsk_err;
static pthread_once_t xsk_once = PTHREAD_ONCE_INIT;

static void xsk_load_once(void)
{
	const char *lib = xs_settings_str(xs_settings(), XS_SET_SOCK_LIB);
	void *h;

	h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		xs_log("rsocket: cannot load %s: %s", lib, dlerror());
		xsk_err = ENOSYS;
		return;
	}
#define XSK_SYM(name)                                                          \
	do {                                                                   \
		*(void **)&xsk.name = dlsym(h, #name);                         \
		if (!xsk.name) {                                               \
			xs_log("rsocket: %s has no %s", lib, #name);           \
			xsk_err = ENOSYS;                                      \
			return;                                                \
		}                                                              \
	} while (0)
	XSK_SYM(socket);
	XSK_SYM(setsockopt);
	XSK_SYM(getsockopt);
	XSK_SYM(bind);
	XSK_SYM(listen);
	XSK_SYM(accept);
	XSK_SYM(connect);
	XSK_SYM(shutdown);
	XSK_SYM(close);
	XSK_SYM(recv);
	XSK_SYM(recvfrom);
	XSK_SYM(recvmsg);
	XSK_SYM(send);
	XSK_SYM(sendto);
	XSK_SYM(sendmsg);
	XSK_SYM(read);
	XSK_SYM(readv);
	XSK_SYM(poll);
	XSK_SYM(select);
	XSK_SYM(getpeername);
	XSK_SYM(getsockname);
	XSK_SYM(fcntl);
#undef XSK_SYM
}

/* 1 once libxsock is there; else 0 with errno ENOSYS (no rsockets) */
static int xsk_ready(void)
{
	pthread_once(&xsk_once, xsk_load_once);
	if (xsk_err) {
		errno = xsk_err;
		return 0;
	}
	return 1;
}

/* Call libxsock's NAME, or fail with -1 when it cannot be loaded. */
#define XSK_CALL(name, ...) (xsk_ready() ? xsk.name(__VA_ARGS__) : -1)

static int rs_fail(int e)
{
	errno = e;
	return -1;
}

/* An rsocket is an IWARP_MODE socket (librdmacm: EBADF for anything else). */
static int rs_is_rsocket(int fd)
{
	int on = 0;
	socklen_t len = sizeof(on);

	return xsk.getsockopt(fd, SOL_IWARP, IWARP_MODE, &on, &len) == 0 && on == 1;
}

XS_EXPORT int rsocket(int domain, int type, int protocol)
{
	int fd, on = 1, e;

	/* librdmacm's argument check, errno and all (AF_IB has no TCP here) */
	if ((domain != AF_INET && domain != AF_INET6) || (type != SOCK_STREAM && type != SOCK_DGRAM) ||
	    (type == SOCK_STREAM && protocol && protocol != IPPROTO_TCP) ||
	    (type == SOCK_DGRAM && protocol && protocol != IPPROTO_UDP))
		return rs_fail(ENOTSUP);
	if (type == SOCK_DGRAM)
		return rs_fail(EOPNOTSUPP); /* UD QPs: see the head comment */
	if (!xsk_ready())
		return -1;
	fd = xsk.socket(domain, SOCK_STREAM, protocol);
	if (fd < 0)
		return -1;
	if (xsk.setsockopt(fd, SOL_IWARP, IWARP_MODE, &on, sizeof(on))) {
		e = errno;
		xsk.close(fd);
		return rs_fail(e);
	}
	return fd;
}

XS_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	return XSK_CALL(bind, socket, addr, addrlen);
}

XS_EXPORT int rlisten(int socket, int backlog)
{
	return XSK_CALL(listen, socket, backlog);
}

XS_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return XSK_CALL(accept, socket, addr, addrlen);
}

XS_EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	return XSK_CALL(connect, socket, addr, addrlen);
}

XS_EXPORT int rshutdown(int socket, int how)
{
	return XSK_CALL(shutdown, socket, how);
}

/* librdmacm returns EBADF itself (not -1) for an fd that is no rsocket,
 * and leaves that fd open: so do we (tests/test-verbs-sweep.c). */
XS_EXPORT int rclose(int socket)
{
	if (!xsk_ready())
		return -1;
	if (!rs_is_rsocket(socket))
		return EBADF;
	return xsk.close(socket);
}

XS_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	return XSK_CALL(recv, socket, buf, len, flags);
}

XS_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr,
			    socklen_t *addrlen)
{
	return XSK_CALL(recvfrom, socket, buf, len, flags, src_addr, addrlen);
}

XS_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	return XSK_CALL(recvmsg, socket, msg, flags);
}

/* What a send on a connection that is gone returns: rsockets raises no
 * SIGPIPE and fails with ECONNRESET (rsocket.c: rsend, "if (!(rs->state &
 * rs_writable)) ret = ERR(ECONNRESET)"), where libxsock's send acts as the
 * kernel's TCP (EPIPE and SIGPIPE): rcopy against rxe's rsockets, whose
 * server had hung up, died of the signal instead of reporting the error. */
static ssize_t rs_send_ret(ssize_t n)
{
	if (n < 0 && errno == EPIPE)
		errno = ECONNRESET;
	return n;
}

XS_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	return rs_send_ret(XSK_CALL(send, socket, buf, len, flags | MSG_NOSIGNAL));
}

XS_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
			  const struct sockaddr *dest_addr, socklen_t addrlen)
{
	return rs_send_ret(
		XSK_CALL(sendto, socket, buf, len, flags | MSG_NOSIGNAL, dest_addr, addrlen));
}

XS_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	return rs_send_ret(XSK_CALL(sendmsg, socket, msg, flags | MSG_NOSIGNAL));
}

XS_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	return XSK_CALL(read, socket, buf, count);
}

XS_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	return XSK_CALL(readv, socket, iov, iovcnt);
}

/* rwrite/rwritev are rsend/rsendmsg with no flags in librdmacm too; the
 * send calls take MSG_NOSIGNAL, write and writev could not */
XS_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return rsend(socket, buf, count, 0);
}

XS_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	struct msghdr m = { .msg_iov = (struct iovec *)(uintptr_t)iov, .msg_iovlen = (size_t)iovcnt };

	if (iovcnt < 0)
		return rs_fail(EINVAL);
	return rsendmsg(socket, &m, 0);
}

XS_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	return XSK_CALL(poll, fds, nfds, timeout);
}

XS_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
		      struct timeval *timeout)
{
	return XSK_CALL(select, nfds, readfds, writefds, exceptfds, timeout);
}

XS_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return XSK_CALL(getpeername, socket, addr, addrlen);
}

XS_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return XSK_CALL(getsockname, socket, addr, addrlen);
}

XS_EXPORT int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{
	if (!xsk_ready())
		return -1;
	if (level != SOL_RDMA)
		return xsk.setsockopt(socket, level, optname, optval, optlen);
	if (!rs_is_rsocket(socket))
		return rs_fail(EBADF);
	switch (optname) {
	case RDMA_SQSIZE:
	case RDMA_RQSIZE:
	case RDMA_INLINE:
	case RDMA_IOMAPSIZE:
		/* libxsock sizes its queues itself and has no iomap: ignored
		 * (librdmacm reads an int here without a length check) */
		if (!optval || optlen < sizeof(int))
			return rs_fail(EINVAL);
		return 0;
	case RDMA_ROUTE:
		return 0; /* routes are resolved over IP when connecting */
	default:
		return rs_fail(ENOTSUP);
	}
}

XS_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	int v;

	if (!xsk_ready())
		return -1;
	if (level != SOL_RDMA)
		return xsk.getsockopt(socket, level, optname, optval, optlen);
	if (!rs_is_rsocket(socket))
		return rs_fail(EBADF);
	switch (optname) {
	case RDMA_SQSIZE:
	case RDMA_RQSIZE:
		v = RS_XSK_QSIZE;
		break;
	case RDMA_INLINE:
	case RDMA_IOMAPSIZE:
		v = 0;
		break;
	case RDMA_ROUTE:
		/* no IB path records on iWARP: none copied */
		if (!optlen || *optlen < sizeof(struct ibv_path_data))
			return rs_fail(EINVAL);
		*optlen = 0;
		return 0;
	default:
		return rs_fail(ENOTSUP);
	}
	if (!optval || !optlen || *optlen < sizeof(int))
		return rs_fail(EINVAL);
	memcpy(optval, &v, sizeof(v));
	*optlen = sizeof(v);
	return 0;
}

/* librdmacm knows F_GETFL and F_SETFL (O_NONBLOCK) only; the fd is a real
 * one here, so every command is passed on.  The argument is read as a
 * pointer-sized integer, as libxsock's fcntl reads it. */
XS_EXPORT int rfcntl(int socket, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return XSK_CALL(fcntl, socket, cmd, arg);
}

XS_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	if (!xsk_ready())
		return -1;
	if (!rs_is_rsocket(socket))
		return rs_fail(EBADF);
	if (prot & ~(PROT_WRITE | PROT_NONE))
		return rs_fail(EINVAL);
	/* no iomap entries (see the head comment): librdmacm's answer when
	 * all of them are taken */
	return rs_fail(ENOMEM);
}

XS_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	if (!xsk_ready())
		return -1;
	if (!rs_is_rsocket(socket))
		return rs_fail(EBADF);
	return rs_fail(EINVAL); /* nothing was mapped */
}

/* librdmacm returns 0 when no peer mapping covers the offset; -1 (EINVAL)
 * here, so that a caller retrying on a short write does not spin. */
XS_EXPORT size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	if (!xsk_ready())
		return (size_t)-1;
	if (!rs_is_rsocket(socket))
		return (size_t)rs_fail(EBADF);
	return (size_t)rs_fail(EINVAL);
}
