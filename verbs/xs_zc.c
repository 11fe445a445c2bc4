/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Zero-copy send (io_uring IORING_OP_SENDMSG_ZC) on the caller's thread.
 *
 * A large write leaves with SENDMSG_ZC from a small ring of the calling
 * thread (the caller owns the connection's transmit side, as for sendmsg;
 * no hand-off to the engine).  The kernel then holds the pages until the
 * peer has acknowledged them; xs_zc_settle waits for its notifications so
 * that the WR completes, and the application reuses its buffer, only once
 * the kernel has let go of it.  That wait costs up to a round trip per
 * call, which is why only writes of XSOCK_ZC_MIN octets or more use it.
 *
 * A peer on this host (loopback, or a veth into another namespace) gains
 * nothing: the kernel copies the pages when it hands them to the local
 * socket.  The notification says so (IORING_SEND_ZC_REPORT_USAGE) and the
 * connection sends with copies from then on. */
#include "config.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/xs_clock.h"
#include "verbs/xs_internal.h"
#include "util/xs_errno.h"

/* Linux 6.2 (liburing 2.3's header predates them) */
#ifndef IORING_SEND_ZC_REPORT_USAGE
#define IORING_SEND_ZC_REPORT_USAGE (1U << 3)
#endif
#ifndef IORING_NOTIF_USAGE_ZC_COPIED
#define IORING_NOTIF_USAGE_ZC_COPIED (1U << 31)
#endif

#define ZC_RING_ENTRIES 8

struct zc_ring {
	struct io_uring ring;
	pid_t pid; /* a child of fork shares the parent's mapping: not ours */
	unsigned pending; /* notifications still to come */
	bool copied; /* one of them said the kernel copied */
};

static __thread struct zc_ring *tls_zc;
static pthread_key_t zc_key;
static pthread_once_t zc_once = PTHREAD_ONCE_INIT;
static atomic_bool zc_unsupported; /* the kernel refused SENDMSG_ZC once */

static void zc_ring_free(void *p)
{
	struct zc_ring *z = p;

	if (!z)
		return;
	io_uring_queue_exit(&z->ring);
	free(z);
}

static void zc_key_make(void)
{
	if (pthread_key_create(&zc_key, zc_ring_free) != 0)
		atomic_store(&zc_unsupported, true);
}

/* The calling thread's ring, made on first use (NULL: none can be). */
static struct zc_ring *zc_ring(void)
{
	struct zc_ring *z = tls_zc;

	if (z && z->pid == getpid())
		return z;
	if (z) { /* inherited across fork: drop the child's copy of the mapping */
		zc_ring_free(z);
		tls_zc = NULL;
	}
	pthread_once(&zc_once, zc_key_make);
	if (atomic_load(&zc_unsupported))
		return NULL;
	z = calloc(1, sizeof(*z));
	if (!z)
		return NULL;
	if (io_uring_queue_init(ZC_RING_ENTRIES, &z->ring, 0) < 0) {
		free(z);
		return NULL;
	}
	z->pid = getpid();
	tls_zc = z;
	pthread_setspecific(zc_key, z);
	return z;
}

/* One completion: a notification is counted off, a send's result returned
 * (1 with *res set) and its notification, if one follows, counted on. */
static int zc_reap(struct zc_ring *z, struct io_uring_cqe *cqe, int *res)
{
	int got = 0;

	if (cqe->flags & IORING_CQE_F_NOTIF) {
		if (z->pending)
			z->pending--;
		if ((uint32_t)cqe->res & IORING_NOTIF_USAGE_ZC_COPIED)
			z->copied = true;
	} else {
		*res = cqe->res;
		if (cqe->flags & IORING_CQE_F_MORE)
			z->pending++;
		got = 1;
	}
	io_uring_cqe_seen(&z->ring, cqe);
	return got;
}

ssize_t xs_zc_send(int fd, const struct iovec *iov, int cnt)
{
	struct zc_ring *z = zc_ring();
	struct msghdr mh = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)cnt };
	struct io_uring_sqe *sqe;
	int res = 0, rc;

	if (!z)
		return -EOPNOTSUPP;
	/* notifications the CQ may not hold: wait for some first */
	while (z->pending >= ZC_RING_ENTRIES) {
		struct io_uring_cqe *cqe;

		rc = io_uring_wait_cqe(&z->ring, &cqe);
		if (rc < 0 && rc != -EINTR)
			return rc;
		if (rc == 0)
			zc_reap(z, cqe, &res);
	}
	sqe = io_uring_get_sqe(&z->ring);
	if (!sqe)
		return -EBUSY;
	/* mh lives on this stack until the send's result is in */
	io_uring_prep_sendmsg_zc(sqe, fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	sqe->ioprio |= IORING_SEND_ZC_REPORT_USAGE;
	rc = io_uring_submit(&z->ring);
	if (rc < 0)
		return rc;
	for (;;) {
		struct io_uring_cqe *cqe;

		rc = io_uring_wait_cqe(&z->ring, &cqe);
		if (rc == -EINTR)
			continue;
		if (rc < 0)
			return rc;
		if (zc_reap(z, cqe, &res))
			break;
	}
	if (res == -EINVAL || res == -EOPNOTSUPP) {
		/* no SENDMSG_ZC here (or not with these flags): say so once */
		if (!atomic_exchange(&zc_unsupported, true))
			xs_log("zero-copy send: the kernel refused SENDMSG_ZC (%s): sendmsg only",
			       xs_strerror(-res));
		return -EOPNOTSUPP;
	}
	return res;
}

int xs_zc_settle(unsigned timeout_ms, bool *copied)
{
	struct zc_ring *z = tls_zc;
	uint64_t deadline = timeout_ms ? xs_now_ms() + timeout_ms : 0;
	int res = 0;

	*copied = false;
	if (!z || z->pid != getpid())
		return 0;
	while (z->pending) {
		struct __kernel_timespec ts = { .tv_sec = 0, .tv_nsec = 200 * 1000 * 1000 };
		struct io_uring_cqe *cqe;
		int rc = io_uring_wait_cqe_timeout(&z->ring, &cqe, &ts);

		if (rc == 0) {
			zc_reap(z, cqe, &res);
			continue;
		}
		if (rc != -ETIME && rc != -EINTR)
			return rc;
		if (deadline && xs_now_ms() >= deadline) {
			/* the pages are still the kernel's; the connection is
			 * failed by the caller, and a late notification is
			 * counted off by the next settle */
			return -ETIMEDOUT;
		}
	}
	*copied = z->copied;
	z->copied = false;
	return 0;
}
