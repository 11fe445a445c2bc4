/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Exec hand-over of a connection (xsock(7) EXEC; driven by xs_handover.c):
 * the exporting process stops the stream at an FPDU boundary both ways and
 * records where it is (struct xs_conn_wire); the new program adopts the
 * inherited TCP socket and goes on from there once a QP attaches. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "util/xs_clock.h"
#include "verbs/xs_engine_priv.h"
#include "verbs/xs_internal.h"

/* Between FPDUs, and no untagged message half placed (rx_mu held). */
static bool rx_at_boundary(const struct xs_conn *c)
{
	const struct mpa_rx *m = &c->rx.mpa;

	if (m->state != MPA_RX_HDR || m->fld_len || m->mk_len || m->in_fpdu)
		return false;
	for (unsigned qn = 0; qn < 3; qn++) {
		const struct ddp_queue *q = c->rx.ddp.queues[qn];
		if (q && q->count && q->ring[q->head].placed)
			return false;
	}
	return true;
}

static void export_tx_release(struct xs_conn *c)
{
	pthread_mutex_lock(&c->tx_mu);
	c->tx_busy = false;
	pthread_cond_broadcast(&c->tx_cv);
	pthread_mutex_unlock(&c->tx_mu);
}

int xs_conn_export(struct xs_conn *c, struct xs_conn_wire *w, int timeout_ms)
{
	uint64_t end = xs_now_ms() + (uint64_t)timeout_ms;

	if (xs_conn_claim(c) < 0)
		return -EBUSY;
	/* transmit: no FPDU half written, no Read Response queued; then the
	 * side is ours (posters wait for it) */
	pthread_mutex_lock(&c->tx_mu);
	while ((c->tx_busy || c->rr_count) && !atomic_load(&c->dead)) {
		if (xs_now_ms() >= end) {
			pthread_mutex_unlock(&c->tx_mu);
			return -ETIMEDOUT;
		}
		struct timespec ts = xs_abstime_ns(10 * 1000 * 1000);

		pthread_cond_timedwait(&c->tx_cv, &c->tx_mu, &ts);
	}
	if (atomic_load(&c->dead) || atomic_load(&c->fin_sent)) {
		pthread_mutex_unlock(&c->tx_mu);
		return -EPIPE;
	}
	c->tx_busy = true;
	pthread_mutex_unlock(&c->tx_mu);
	/* receive: up to the next FPDU boundary on this thread (the peer
	 * writes whole FPDUs, so this is at most the rest of one) */
	for (;;) {
		pthread_mutex_lock(&c->rx_mu);
		if (c->state != CONN_ESTABLISHED || atomic_load(&c->dead) || c->rx_defer ||
		    atomic_load(&c->rx_app_eof))
			break;
		if (rx_at_boundary(c))
			goto stopped;
		xs_rx_receive(c, 1u << 16, false);
		if (c->state == CONN_ESTABLISHED && !c->rx_defer && rx_at_boundary(c))
			goto stopped;
		xs_rx_unlock(c);
		if (xs_now_ms() >= end) {
			export_tx_release(c);
			return -ETIMEDOUT;
		}
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		poll(&p, 1, 10);
	}
	xs_rx_unlock(c);
	export_tx_release(c);
	return -EPIPE;
stopped:
	memset(w, 0, sizeof(*w));
	w->agreed = c->agreed;
	w->tx_pos = c->tx.mpa.pos;
	w->rx_pos = c->rx.mpa.pos;
	memcpy(w->tx_msn, c->tx.msn, sizeof(w->tx_msn));
	for (unsigned qn = 0; qn < 3; qn++)
		w->rx_msn[qn] = c->rx.ddp.queues[qn] ? c->rx.ddp.queues[qn]->msn_head : 1;
	xs_stat_conn_carry_out(c->stat, &w->carry);
	w->initiator = c->initiator;
	/* the copy that survives execve (the engine's is close-on-exec) */
	int fd = fcntl(c->fd, F_DUPFD, 3);
	if (fd < 0) {
		int e = errno;
		xs_rx_unlock(c);
		export_tx_release(c);
		return -e;
	}
	c->export_thread = pthread_self();
	c->exported = true; /* rx_mu stays held until execve or the undo */
	return fd;
}

void xs_conn_export_undo(struct xs_conn *c)
{
	if (!c->exported)
		return;
	c->exported = false;
	xs_rx_unlock(c);
	export_tx_release(c);
	xs_eng_command(c, CMD_ARM); /* what came meanwhile */
}

struct xs_conn *xs_conn_adopt(int fd, const struct xs_conn_wire *w)
{
	int rc = xs_eng_get();
	int one = 1, fl;

	if (rc < 0) {
		errno = -rc;
		return NULL;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return NULL;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct xs_conn *c = xs_eng_conn_new(fd);
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->refs++; /* the owner's */
	c->agreed = w->agreed;
	xs_hs_stream_setup(c);
	c->tx.mpa.pos = w->tx_pos;
	memcpy(c->tx.msn, w->tx_msn, sizeof(c->tx.msn));
	mpa_rx_reset_at(&c->rx.mpa, w->rx_pos);
	c->rx.fpdus = w->carry.rx_msgs; /* xs_stat_rx sets the slot's count from it */
	c->adopted = true;
	memcpy(c->adopt_rx_msn, w->rx_msn, sizeof(c->adopt_rx_msn));
	c->adopt_carry = w->carry;
	c->initiator = w->initiator;
	c->state = CONN_ACCEPTED;
	return c;
}
