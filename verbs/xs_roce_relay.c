/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The RoCE engine and CM as clients of xsock-roced (roced/README.md; the
 * messages: roced/roced_wire.h).  When a daemon of root (or of this
 * process's own user) listens on @xsock-roced in the process's network
 * namespace, the process binds no UDP socket at all: each QP is a
 * SOCK_SEQPACKET connection to the daemon that holds its QPN (claimed at
 * ibv_create_qp), its packets go and come as ROCED_PKTS messages on it,
 * the CM's MADs as ROCED_MAD on a connection of its own, and each
 * listener's REQs on one more.  The kernel checks who each connection's
 * owner is (SO_PEERCRED, for the daemon's rules); the process checks that
 * the daemon is root's, since any process may bind the abstract name
 * first. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "roced/roced_wire.h"
#include "verbs/xs_local_wire.h"
#include "verbs/xs_priv_abi.h"
#include "verbs/xs_roce_priv.h"

#define RELAY_CALL_MS 2000 /* a reply comes at once: this is a daemon that hung */

/* A connection to the daemon, checked: fd (non-blocking, close-on-exec,
 * kept from closefrom), or -errno: -ENOENT (none listens), -EPERM (the
 * name is another user's, not root's). */
static int relay_connect(void)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(ROCED_NAME));
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	int fd = xsock_fd_high(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));

	if (fd < 0)
		return -errno;
	memcpy(un.sun_path + 1, ROCED_NAME, strlen(ROCED_NAME));
	if (connect(fd, (struct sockaddr *)&un, len) < 0) {
		int e = errno;

		close(fd);
		return e == ECONNREFUSED ? -ENOENT : -e;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 ||
	    (cr.uid != 0 && cr.uid != geteuid())) {
		close(fd);
		return -EPERM;
	}
	xs_fd_keep(fd);
	return fd;
}

static struct {
	pthread_mutex_t mu;
	pid_t pid; /* the process that looked (a fork child looks again) */
	bool on;
} relay = { .mu = PTHREAD_MUTEX_INITIALIZER };

bool xs_roce_relay_on(void)
{
	pid_t pid = getpid();
	bool on;

	pthread_mutex_lock(&relay.mu);
	if (relay.pid != pid) {
		int fd = relay_connect();

		relay.pid = pid;
		relay.on = fd >= 0;
		if (fd >= 0)
			xs_fd_close(fd);
		if (fd == -EPERM)
			xs_log("roce: @%s is another user's, not root's: not used (each process binds "
			       "UDP %u itself)",
			       ROCED_NAME, ROCE_UDP_PORT);
		else if (fd >= 0)
			xs_log("roce: %s carries this process's RoCE packets and MADs", "xsock-roced");
	}
	on = relay.on;
	pthread_mutex_unlock(&relay.mu);
	return on;
}

int xs_roce_relay_call(int fd, const struct roced_msg *req)
{
	static _Atomic uint32_t seq;
	struct roced_msg m = *req, r;
	uint8_t out[ROCED_LISTEN_LEN > ROCED_PEER_LEN ? ROCED_LISTEN_LEN : ROCED_PEER_LEN];
	uint8_t in[ROCED_REPLY_LEN + 1];
	size_t n;
	ssize_t got;

	m.seq = atomic_fetch_add(&seq, 1);
	n = roced_encode(&m, out, sizeof(out));
	if (!n)
		return -EINVAL;
	if (send(fd, out, n, MSG_NOSIGNAL) != (ssize_t)n)
		return errno == EAGAIN ? -EBUSY : -errno;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int rc = poll(&p, 1, RELAY_CALL_MS);

		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0)
			return -ETIMEDOUT;
		got = recv(fd, in, sizeof(in), MSG_DONTWAIT | MSG_TRUNC);
		if (got < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (got <= 0)
			return -ECONNRESET;
		break;
	}
	if (roced_decode(in, (size_t)got, &r) != ROCED_OK || r.kind != ROCED_REPLY ||
	    r.aux != req->kind || r.seq != m.seq)
		return -EPROTO;
	return r.err ? -(int)r.err : (int)r.value;
}

int xs_roce_relay_open(const struct roced_msg *req, uint32_t *value)
{
	int fd = relay_connect(), rc;

	if (fd < 0)
		return fd;
	rc = xs_roce_relay_call(fd, req);
	if (rc < 0) {
		xs_fd_close(fd);
		return rc;
	}
	*value = (uint32_t)rc;
	return fd;
}

int xr_relay_peer(struct xs_roce_conn *x)
{
	const struct xs_roce_path *p = &x->path;
	struct roced_msg m = { .kind = ROCED_PEER, .family = p->local.ss_family,
			       .peer_qpn = p->dest_qpn };

	/* (ip_tx: the addresses as octets, IPv4's last 12 zero) */
	memcpy(m.local, x->ip_tx.src, 16);
	memcpy(m.peer, x->ip_tx.dst, 16);
	return xs_roce_relay_call(x->fwd_fd, &m);
}

int xr_relay_send(struct xs_roce_conn *x, const struct iovec *pkts, unsigned k, size_t seg)
{
	uint8_t hdr[ROCED_HDR_LEN + XS_LOCAL_FWD_HDR];
	struct iovec iov[1 + XR_GSO_MAX_SEGS];
	struct roced_msg m = { .kind = ROCED_PKTS };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 1 + k };

	if (k > XR_GSO_MAX_SEGS)
		return -EINVAL;
	roced_encode(&m, hdr, sizeof(hdr));
	xs_local_fwd_hdr(hdr + ROCED_HDR_LEN, seg);
	iov[0] = (struct iovec){ hdr, sizeof(hdr) };
	memcpy(iov + 1, pkts, k * sizeof(*pkts));
	/* the direct channel to a peer of this host, once the daemon gave it */
	int fd = __atomic_load_n(&x->rx_fd, __ATOMIC_ACQUIRE);

	xr_wire_send();
	if (sendmsg(fd >= 0 ? fd : x->fwd_fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		return -errno;
	return 0;
}

const uint8_t *xr_relay_pkts(struct xs_roce_conn *x, const uint8_t *buf, size_t *len)
{
	struct roced_msg m;

	if (roced_decode(buf, *len, &m) != ROCED_OK || m.kind != ROCED_PKTS)
		return NULL;
	/* a remote peer's packets: the ICRC covers the port they came from
	 * (rxe's is the QPNs' hash, an xsock's behind its daemon 4791) */
	if (m.aux)
		x->ip_rx.sport = m.aux;
	*len = m.body_len;
	return m.body;
}
