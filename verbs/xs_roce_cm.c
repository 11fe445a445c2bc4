/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The IB CM MAD engine over RoCE v2 (xs_roce_cm.h): the CM sockets, the
 * engine thread, the connection states, retransmissions, time-wait, and
 * passing MADs on to the process that owns them.
 *
 * States follow IBTA vol 1 12.9 as the kernel's cm.c keeps them:
 *   active:  REQ_SENT -(REP)-> REP_RCVD -(rtu)-> EST
 *   passive: REQ_RCVD -(accept)-> REP_SENT -(RTU)-> EST
 *   EST -(disconnect)-> DREQ_SENT -(DREP)-> TIMEWAIT;  EST -(DREQ)-> TIMEWAIT
 *   any -(REJ, retries exhausted)-> TIMEWAIT -> DONE (freed once put)
 * A REQ, REP or DREQ is resent every XRCM_RESEND_MS until answered (the
 * kernel waits ~4 s, the REQ's CM response timeout 20; resending sooner
 * only brings an MRA or the same answer again). */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "roce/roce.h"
#include "roced/roced_wire.h"
#include "util/xs_clock.h"
#include "verbs/xs_roce.h"
#include "verbs/xs_internal.h"
#include "verbs/xs_priv_abi.h"
#include "verbs/xs_rand.h"
#include "verbs/xs_roce_cm_priv.h"
#include "util/xs_errno.h"

struct xrcm_engine xrcm = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
			    .fd4 = -1, .fd6 = -1, .fdu = -1, .wake = -1 };

/* Encode m as r's last MAD and send it; resent until answered when
 * retries > 0 (mu held). */
static void conn_send(struct xs_rcm *r, const struct roce_cm_msg *m, int retries)
{
	roce_cm_encode(m, r->mad);
	r->have_mad = true;
	r->retries = retries;
	r->deadline = retries ? xs_now_ms() + XRCM_RESEND_MS : 0;
	xrcm_send_mad(&r->local, &r->peer, r->mad);
	if (xrcm.wake >= 0 && retries)
		(void)!eventfd_write(xrcm.wake, 1);
}

static void timewait(struct xs_rcm *r, uint64_t ms)
{
	r->state = S_TIMEWAIT;
	r->deadline = xs_now_ms() + ms;
	if (xrcm.wake >= 0)
		(void)!eventfd_write(xrcm.wake, 1);
}

/* A REJ from nobody's connection (an unknown service, an old REP). */
static void send_rej_raw(const struct sockaddr_storage *local, const struct sockaddr_storage *peer,
			 uint64_t tid, uint32_t remote_id, uint8_t msg_rejected, uint16_t reason)
{
	struct roce_cm_msg m;
	uint8_t mad[ROCE_MAD_LEN];

	roce_cm_hdr_init(&m, ROCE_CM_ATTR_REJ, tid);
	m.u.rej.local_comm_id = 0;
	m.u.rej.remote_comm_id = remote_id;
	m.u.rej.message_rejected = msg_rejected;
	m.u.rej.reason = reason;
	roce_cm_encode(&m, mad);
	xrcm_send_mad(local, peer, mad);
}

/* ---- engine start (first use, again in a fork child) ----------------------- */

static void *loop_main(void *arg);

static uint32_t new_local_id(void)
{
	if (++xrcm.seq == 0)
		xrcm.seq = 1;
	return (uint32_t)xrcm.tag << 16 | xrcm.seq;
}

static void listener_close(struct xs_rcm_listener *l)
{
	for (int i = 0; i < 2; i++)
		if (l->fd[i] >= 0)
			close(l->fd[i]);
	free(l);
}

static void reset_after_fork(void)
{
	/* the parent's connections and thread are not ours: forget them
	 * (their memory is the child's copy, freed here) */
	while (xrcm.conns) {
		struct xs_rcm *r = xrcm.conns;

		xrcm.conns = r->next;
		free(r);
	}
	/* the listeners stay, with their names shared with the parent, and
	 * dormant since the fork (xs_rcm_fork_child) until claimed */
	if (xrcm.fd4 >= 0)
		close(xrcm.fd4);
	if (xrcm.fd6 >= 0)
		close(xrcm.fd6);
	if (xrcm.fdu >= 0)
		close(xrcm.fdu);
	if (xrcm.wake >= 0)
		close(xrcm.wake);
	xrcm.fd4 = xrcm.fd6 = xrcm.fdu = xrcm.wake = -1;
	xrcm.pid = 0;
	xrcm.in_cb = NULL;
}

/* Through xsock-roced: the CM's connection and its tag (mu held). */
static int relay_start(void)
{
	struct roced_msg open = { .kind = ROCED_CM_OPEN };
	uint32_t tag = 0;
	int fd = xs_roce_relay_open(&open, &tag);

	if (fd < 0) {
		xs_log("roce cm: xsock-roced gave no CM channel: %s", xs_strerror(-fd));
		return fd;
	}
	xs_fd_drop(fd); /* closed as the CM's other files are */
	xrcm.fdu = fd;
	xrcm.tag = (uint16_t)tag;
	return 0;
}

/* A listener's connection for family's REQs for sid: fd or -errno
 * (-EADDRINUSE: the service has a listener on the host). */
static int relay_listen(int family, uint64_t sid)
{
	struct roced_msg l = { .kind = ROCED_LISTEN, .family = family, .service_id = sid };
	uint32_t v;
	int fd = xs_roce_relay_open(&l, &v);

	if (fd >= 0)
		xs_fd_drop(fd);
	return fd;
}

/* mu held. */
static int start(void)
{
	pthread_attr_t at;
	sigset_t all, old;
	int rc, i;

	if (xrcm.pid == getpid())
		return 0;
	if (xrcm.pid)
		reset_after_fork();
	xrcm.relay = xs_roce_relay_on();
	if (xrcm.relay) {
		rc = relay_start();
		if (rc < 0)
			return rc;
		goto thread;
	}
	xrcm.fd4 = xrcm_udp_open(AF_INET);
	if (xrcm.fd4 < 0) {
		rc = xrcm.fd4;
		xs_log("roce cm: cannot bind UDP port %u: %s", ROCE_UDP_PORT, xs_strerror(-rc));
		xrcm.fd4 = -1;
		return rc;
	}
	xrcm.fd6 = xrcm_udp_open(AF_INET6); /* no IPv6: IPv4 only */
	if (xrcm.fd6 < 0)
		xrcm.fd6 = -1;
	for (i = 0; i < 64; i++) {
		uint16_t tag = 0;

		if (xs_rand_bytes(&tag, sizeof(tag)) || !tag)
			continue;
		xrcm.fdu = xrcm_unix_bind(XRCM_TAG, tag);
		if (xrcm.fdu >= 0) {
			xrcm.tag = tag;
			break;
		}
	}
thread:
	xrcm.wake = xsock_fd_high(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	if (xrcm.fdu < 0 || xrcm.wake < 0) {
		rc = xrcm.fdu < 0 ? xrcm.fdu : -errno;
		reset_after_fork();
		return rc < 0 ? rc : -EMFILE;
	}
	xrcm.seq = (uint16_t)getpid();
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	/* the application's handlers never run on it (one that forks would
	 * find this thread's locks held: xsock(7) FORK) */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&xrcm.thread, &at, loop_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&at);
	if (rc) {
		reset_after_fork();
		return -rc;
	}
	xrcm.pid = getpid();
	return 0;
}

/* ---- receive ------------------------------------------------------------------ */

/* A delivery decided under mu, made after it. */
struct pending {
	struct xs_rcm_event ev;
	xs_rcm_cb cb;
	void *ctx;
	const void *who;
	/* or a MAD for another process: passed on once mu is released */
	bool fwd;
	enum xrcm_name fwd_kind;
	uint64_t fwd_v;
};

static void no_owner(const struct roce_cm_msg *m, const struct sockaddr_storage *local,
		     const struct sockaddr_storage *peer);

/* Pass the MAD on to the process named, after mu (dispatch). */
static void pass_on(struct pending *out, enum xrcm_name kind, uint64_t v)
{
	out->fwd = true;
	out->fwd_kind = kind;
	out->fwd_v = v;
}

static struct xs_rcm *find_local(uint32_t local_id)
{
	struct xs_rcm *r;

	for (r = xrcm.conns; r; r = r->next)
		if (r->local_id == local_id && r->state != S_DONE)
			return r;
	return NULL;
}

/* The listener of sid for a REQ to local: one that takes local's family
 * and is bound to the wildcard or to local, and is not dormant unless
 * dormant_too (mu held). */
static struct xs_rcm_listener *find_listener(uint64_t sid, const struct sockaddr_storage *local,
					     bool dormant_too)
{
	int fam = local->ss_family == AF_INET ? 0 : 1;
	struct xs_rcm_listener *l;

	for (l = xrcm.listeners; l; l = l->next)
		if (l->sid == sid && l->fd[fam] >= 0 && (dormant_too || !l->dormant) &&
		    (xrcm_addr_any(&l->local) || xrcm_addr_eq(&l->local, local)))
			return l;
	return NULL;
}

static void on_req(const struct roce_cm_msg *m, const struct sockaddr_storage *local,
		   const struct sockaddr_storage *peer, bool forwarded, struct pending *out)
{
	const struct roce_cm_req *q = &m->u.req;
	struct xs_rcm_listener *l = find_listener(q->service_id, local, false);
	struct xs_rcm *r;
	char a[64];

	if (!l) {
		if (forwarded && !find_listener(q->service_id, local, true)) {
			/* the sender found our name for the service: gone since,
			 * or no sender of ours */
			xs_log("roce cm: forwarded REQ for service 0x%016llx not listened on here",
			       (unsigned long long)q->service_id);
			xs_stat_local_drop(XSOCK_LOCAL_NOQP);
			no_owner(m, local, peer);
		} else {
			/* (one read from the name of a listener a fork made
			 * dormant after this thread's poll began goes back to
			 * the name, for the process that claims it: answered
			 * here it was a REJ for a server that listens, and
			 * pgbench's connect over RoCE refused, 1 run in 5 with
			 * the postmaster forking a backend meanwhile) */
			if (forwarded)
				xs_log("roce cm: REQ for service 0x%016llx read while its listener "
				       "went dormant (a fork): back to its name",
				       (unsigned long long)q->service_id);
			pass_on(out, local->ss_family == AF_INET ? XRCM_SID4 : XRCM_SID6,
				q->service_id);
		}
		return;
	}
	for (r = xrcm.conns; r; r = r->next) {
		if (r->active || !xrcm_addr_eq(&r->peer, peer))
			continue;
		if (r->remote_id == q->local_comm_id && r->state != S_DONE) {
			/* a duplicate: our answer again, or an MRA while the
			 * application decides */
			if (r->state == S_REQ_RCVD) {
				struct roce_cm_msg a2;
				uint8_t mra[ROCE_MAD_LEN];

				roce_cm_hdr_init(&a2, ROCE_CM_ATTR_MRA, r->tid);
				a2.u.mra.local_comm_id = r->local_id;
				a2.u.mra.remote_comm_id = r->remote_id;
				a2.u.mra.message_mraed = ROCE_CM_MSG_REQ;
				a2.u.mra.service_timeout = XRCM_MRA_TIMEOUT;
				roce_cm_encode(&a2, mra);
				xrcm_send_mad(&r->local, &r->peer, mra);
			} else if (r->have_mad && r->state == S_REP_SENT) {
				xrcm_send_mad(&r->local, &r->peer, r->mad);
			}
			return;
		}
		if (r->state == S_TIMEWAIT && r->remote_qpn == q->local_qpn) {
			xs_log("roce cm: REQ from %s QP %u still in time-wait: REJ stale connection",
			       xrcm_addr_str(peer, a, sizeof(a)), q->local_qpn);
			send_rej_raw(local, peer, m->hdr.tid, q->local_comm_id, ROCE_CM_MSG_REQ,
				     ROCE_CM_REJ_STALE_CONN);
			return;
		}
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		send_rej_raw(local, peer, m->hdr.tid, q->local_comm_id, ROCE_CM_MSG_REQ,
			     ROCE_CM_REJ_NO_RESOURCES);
		return;
	}
	r->state = S_REQ_RCVD;
	r->owned = true; /* the listener's callee takes it */
	r->local_id = new_local_id();
	r->remote_id = q->local_comm_id;
	r->remote_qpn = q->local_qpn;
	r->tid = m->hdr.tid;
	r->local = *local;
	r->peer = *peer;
	r->next = xrcm.conns;
	xrcm.conns = r;
	out->ev.type = XS_RCM_EV_REQ;
	out->ev.rcm = r;
	out->ev.req = q;
	out->ev.pdata = q->pdata;
	out->ev.pdata_len = sizeof(q->pdata);
	out->cb = l->cb;
	out->ctx = l->ctx;
	out->who = l;
	xrcm.in_cb = l;
}

static void deliver_conn(struct xs_rcm *r, enum xs_rcm_ev type, struct pending *out)
{
	if (!r->owned || !r->cb)
		return;
	out->ev.type = type;
	out->ev.rcm = r;
	out->cb = r->cb;
	out->ctx = r->ctx;
	out->who = r;
	/* from now until the callback returns (run_pending), a put of r
	 * waits: its owner may free ctx once put returns */
	xrcm.in_cb = r;
}

/* Answer a DREQ nobody owns (any more), as cm.c: cm_issue_drep. */
static void send_drep_raw(const struct roce_cm_msg *m, const struct sockaddr_storage *local,
			  const struct sockaddr_storage *peer)
{
	struct roce_cm_msg a;
	uint8_t mad[ROCE_MAD_LEN];

	roce_cm_hdr_init(&a, ROCE_CM_ATTR_DREP, m->hdr.tid);
	a.u.drep.local_comm_id = m->u.dreq.remote_comm_id;
	a.u.drep.remote_comm_id = m->u.dreq.local_comm_id;
	roce_cm_encode(&a, mad);
	xrcm_send_mad(local, peer, mad);
}

/* A MAD nobody here or elsewhere owns, answered as the kernel would: a REQ
 * with REJ invalid service ID, a DREQ with a DREP (cm_issue_drep), a REP
 * with REJ invalid comm ID; anything else is dropped (engine thread, mu
 * held or not). */
static void no_owner(const struct roce_cm_msg *m, const struct sockaddr_storage *local,
		     const struct sockaddr_storage *peer)
{
	char a[64];

	switch (m->hdr.attr_id) {
	case ROCE_CM_ATTR_REQ:
		xs_log("roce cm: REQ from %s for service 0x%016llx: nobody listens (REJ invalid "
		       "service ID)",
		       xrcm_addr_str(peer, a, sizeof(a)), (unsigned long long)m->u.req.service_id);
		send_rej_raw(local, peer, m->hdr.tid, m->u.req.local_comm_id, ROCE_CM_MSG_REQ,
			     ROCE_CM_REJ_INVALID_SERVICE_ID);
		break;
	case ROCE_CM_ATTR_DREQ:
		send_drep_raw(m, local, peer);
		break;
	case ROCE_CM_ATTR_REP:
		send_rej_raw(local, peer, m->hdr.tid, m->u.rep.local_comm_id, ROCE_CM_MSG_REP,
			     ROCE_CM_REJ_INVALID_COMM_ID);
		break;
	default:
		xs_log("roce cm: %s for unknown comm ID 0x%08x dropped",
		       roce_cm_attr_str(m->hdr.attr_id), m->u.rtu.remote_comm_id);
		break;
	}
}

/* A decoded MAD (mu held); forwarded: it came from another process. */
static void dispatch(const uint8_t *mad, const struct roce_cm_msg *m,
		     const struct sockaddr_storage *local, const struct sockaddr_storage *peer,
		     bool forwarded, struct pending *out)
{
	uint16_t attr = m->hdr.attr_id;
	uint32_t to_id;
	struct xs_rcm *r;
	struct roce_cm_msg a;

	if (attr == ROCE_CM_ATTR_REQ) {
		on_req(m, local, peer, forwarded, out);
		return;
	}
	/* every other message names our comm ID as its remote one */
	to_id = m->u.rtu.remote_comm_id; /* the same position in each */
	r = find_local(to_id);
	if (!r && attr == ROCE_CM_ATTR_REJ && !to_id) {
		/* a REJ of the peer's own REQ (it timed out our REP) */
		for (r = xrcm.conns; r; r = r->next)
			if (!r->active && r->remote_id == m->u.rej.local_comm_id &&
			    xrcm_addr_eq(&r->peer, peer) && r->state != S_DONE)
				break;
	}
	if (!r) {
		if (!forwarded && to_id && (to_id >> 16) != xrcm.tag) {
			pass_on(out, XRCM_TAG, to_id >> 16);
			return;
		}
		if (forwarded) {
			xs_log("roce cm: forwarded %s for comm ID 0x%08x not ours",
			       roce_cm_attr_str(attr), to_id);
			xs_stat_local_drop(XSOCK_LOCAL_NOQP);
		}
		no_owner(m, local, peer);
		return;
	}
	switch (attr) {
	case ROCE_CM_ATTR_REP:
		if (r->state == S_REQ_SENT) {
			r->remote_id = m->u.rep.local_comm_id;
			r->remote_qpn = m->u.rep.local_qpn;
			r->state = S_REP_RCVD;
			r->deadline = 0;
			deliver_conn(r, XS_RCM_EV_REP, out);
			out->ev.rep = &m->u.rep;
			out->ev.pdata = m->u.rep.pdata;
			out->ev.pdata_len = sizeof(m->u.rep.pdata);
		} else if (r->state == S_EST && r->active && r->have_mad) {
			xrcm_send_mad(&r->local, &r->peer, r->mad); /* our RTU was lost */
		}
		break;
	case ROCE_CM_ATTR_MRA:
		if (r->state == S_REQ_SENT || r->state == S_REP_SENT) {
			unsigned t = m->u.mra.service_timeout;
			uint64_t ms = t > 24 ? 60000 : ((4096ull << t) / 1000000 + 1);

			r->deadline = xs_now_ms() + XRCM_RESEND_MS + ms;
		}
		break;
	case ROCE_CM_ATTR_REJ: {
		char s[64];

		if (r->state == S_TIMEWAIT || r->state == S_DONE)
			break;
		if (r->state == S_REQ_SENT && m->u.rej.reason == ROCE_CM_REJ_INVALID_SERVICE_ID &&
		    xs_now_ms() + XRCM_REDIAL_GAP_MS < r->redial_end) {
			/* the peer kept no state: the same REQ again soon */
			r->deadline = xs_now_ms() + XRCM_REDIAL_GAP_MS;
			r->retries = XRCM_RETRIES;
			break;
		}
		xs_log("roce cm: REJ from %s: %s (%u)", xrcm_addr_str(peer, s, sizeof(s)),
		       roce_cm_rej_str(m->u.rej.reason), m->u.rej.reason);
		timewait(r, XRCM_TIMEWAIT_MS);
		deliver_conn(r, XS_RCM_EV_REJ, out);
		out->ev.reason = m->u.rej.reason;
		out->ev.pdata = m->u.rej.pdata;
		out->ev.pdata_len = sizeof(m->u.rej.pdata);
		break;
	}
	case ROCE_CM_ATTR_RTU:
		if (r->state == S_REP_SENT) {
			r->state = S_EST;
			r->deadline = 0;
			deliver_conn(r, XS_RCM_EV_RTU, out);
		}
		break;
	case ROCE_CM_ATTR_DREQ:
		roce_cm_hdr_init(&a, ROCE_CM_ATTR_DREP, m->hdr.tid);
		a.u.drep.local_comm_id = r->local_id;
		a.u.drep.remote_comm_id = r->remote_id;
		if (r->state == S_EST || r->state == S_DREQ_SENT || r->state == S_REP_SENT ||
		    r->state == S_REP_RCVD) {
			bool tell = r->state != S_DREQ_SENT;

			conn_send(r, &a, 0);
			timewait(r, XRCM_TIMEWAIT_MS);
			if (tell)
				deliver_conn(r, XS_RCM_EV_DREQ, out);
		} else if (r->state == S_TIMEWAIT) {
			roce_cm_encode(&a, r->mad);
			xrcm_send_mad(&r->local, &r->peer, r->mad); /* our DREP was lost */
		}
		break;
	case ROCE_CM_ATTR_DREP:
		if (r->state == S_DREQ_SENT)
			timewait(r, XRCM_TIMEWAIT_MS);
		break;
	default:
		break;
	}
}

/* xrcm.in_cb was set when p was filled, under the same hold of mu that
 * decided it: setting it here instead left a window (the MAD forwarding
 * in between made it wide) in which the owner's put returned and freed
 * ctx before the callback ran (ASan: cm_roce.c on_event on a destroyed
 * id, redis-server shutting down under redis-benchmark over RoCE). */
static void run_pending(struct pending *p)
{
	if (!p->cb)
		return;
	p->cb(p->ctx, &p->ev);
	pthread_mutex_lock(&xrcm.mu);
	xrcm.in_cb = NULL;
	pthread_cond_broadcast(&xrcm.cv);
	pthread_mutex_unlock(&xrcm.mu);
}

void xrcm_handle_mad(const uint8_t *mad, const struct sockaddr_storage *local,
		       const struct sockaddr_storage *peer, bool forwarded)
{
	struct roce_cm_msg *m = malloc(sizeof(*m)); /* ~1 KiB: not on a small stack */
	struct pending p;
	enum roce_cm_err e;

	if (!m)
		return;
	e = roce_cm_decode(mad, ROCE_MAD_LEN, m);
	if (e != ROCE_CM_OK) {
		xs_log("roce cm: %sMAD dropped: %s", forwarded ? "forwarded " : "",
		       roce_cm_err_str(e));
		if (forwarded) /* no process of ours forwards what does not decode */
			xs_stat_local_drop(XSOCK_LOCAL_BAD);
		free(m);
		return;
	}
	memset(&p, 0, sizeof(p));
	pthread_mutex_lock(&xrcm.mu);
	dispatch(mad, m, local, peer, forwarded, &p);
	pthread_mutex_unlock(&xrcm.mu);
	if (p.fwd) {
		enum xrcm_fwd f = xrcm_forward(p.fwd_kind, p.fwd_v, local, peer, mad);

		if (f == XRCM_FWD_NOBODY)
			no_owner(m, local, peer);
		else if (f == XRCM_FWD_BUSY)
			xs_log("roce cm: %s dropped: its owner's queue stayed full (the sender resends)",
			       roce_cm_attr_str(m->hdr.attr_id));
	}
	p.ev.local = local;
	p.ev.peer = peer;
	run_pending(&p);
	free(m);
}

/* ---- timers ------------------------------------------------------------------- */

/* Due resends, exhausted retries, time-waits over; frees what is done and
 * put.  Returns the next deadline (0: none); at most one event in *out. */
static uint64_t timers(struct pending *out)
{
	uint64_t now = xs_now_ms(), next = 0;
	struct xs_rcm **pp = &xrcm.conns, *r;

	while ((r = *pp)) {
		if (r->deadline && r->deadline <= now && !out->cb) {
			if (r->state == S_TIMEWAIT) {
				r->state = S_DONE;
				r->deadline = 0;
				deliver_conn(r, XS_RCM_EV_TIMEWAIT_EXIT, out);
			} else if (r->retries > 0) {
				r->retries--;
				r->deadline = now + XRCM_RESEND_MS;
				xrcm_send_mad(&r->local, &r->peer, r->mad);
			} else if (r->state == S_DREQ_SENT) {
				timewait(r, XRCM_TIMEWAIT_MS);
			} else {
				char a[64];

				xs_log("roce cm: %s to %s unanswered after %d tries: REJ timeout",
				       r->state == S_REQ_SENT ? "REQ" : "REP",
				       xrcm_addr_str(&r->peer, a, sizeof(a)), XRCM_RETRIES + 1);
				send_rej_raw(&r->local, &r->peer, r->tid, r->remote_id,
					     r->state == S_REQ_SENT ? ROCE_CM_MSG_OTHER :
								      ROCE_CM_MSG_REP,
					     ROCE_CM_REJ_TIMEOUT);
				timewait(r, XRCM_TIMEWAIT_MS);
				deliver_conn(r, XS_RCM_EV_TIMEOUT, out);
			}
		}
		if (r->state == S_DONE && !r->owned && xrcm.in_cb != r && out->who != r) {
			*pp = r->next;
			free(r);
			continue;
		}
		if (r->deadline && (!next || r->deadline < next))
			next = r->deadline;
		pp = &r->next;
	}
	return next;
}

/* The engine's poll set: its four sockets and two per listener (engine
 * thread only; grown, never shrunk).  false: no memory for n. */
static struct pollfd xrcm_pf_min[16];
static struct pollfd *xrcm_pf = xrcm_pf_min;
static size_t xrcm_pf_cap = 16;

static bool pf_room(size_t n)
{
	struct pollfd *pf;
	size_t cap = xrcm_pf_cap;

	if (n <= cap)
		return true;
	while (cap < n)
		cap *= 2;
	pf = malloc(cap * sizeof(*pf));
	if (!pf)
		return false;
	if (xrcm_pf != xrcm_pf_min)
		free(xrcm_pf);
	xrcm_pf = pf;
	xrcm_pf_cap = cap;
	return true;
}

static void *loop_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd *pf;
		struct xs_rcm_listener *l;
		struct pending p;
		uint64_t next, early = xrcm_early_retry();
		int n = 0, i, tmo;

		memset(&p, 0, sizeof(p));
		pthread_mutex_lock(&xrcm.mu);
		if (xrcm.pid != getpid()) {
			pthread_mutex_unlock(&xrcm.mu);
			return NULL;
		}
		next = timers(&p);
		if (early && (!next || early < next))
			next = early;
		i = 0;
		for (l = xrcm.listeners; l; l = l->next)
			i += 2;
		if (!pf_room(4 + (size_t)i))
			xs_log("roce cm: no memory to poll %d listener sockets", i);
		pf = xrcm_pf;
		pf[n++] = (struct pollfd){ .fd = xrcm.wake, .events = POLLIN };
		pf[n++] = (struct pollfd){ .fd = xrcm.fd4, .events = POLLIN };
		pf[n++] = (struct pollfd){ .fd = xrcm.fd6, .events = POLLIN };
		pf[n++] = (struct pollfd){ .fd = xrcm.fdu, .events = POLLIN };
		for (l = xrcm.listeners; l && (size_t)n + 2 <= xrcm_pf_cap; l = l->next)
			for (i = 0; i < 2; i++)
				if (l->fd[i] >= 0 && !l->dormant)
					pf[n++] = (struct pollfd){ .fd = l->fd[i], .events = POLLIN };
		pthread_mutex_unlock(&xrcm.mu);
		if (p.cb) {
			run_pending(&p);
			continue; /* more may be due */
		}
		tmo = -1;
		if (next) {
			uint64_t now = xs_now_ms();

			tmo = next <= now ? 0 : (int)(next - now);
		}
		if (poll(pf, (nfds_t)n, tmo) <= 0)
			continue;
		if (pf[0].revents) {
			eventfd_t v;

			(void)!eventfd_read(xrcm.wake, &v);
		}
		if (pf[1].revents)
			xrcm_rx_udp(pf[1].fd);
		if (pf[2].fd >= 0 && pf[2].revents)
			xrcm_rx_udp(pf[2].fd);
		for (i = 3; i < n; i++)
			if (pf[i].revents & POLLIN)
				xrcm_rx_fwd(pf[i].fd);
	}
	return NULL;
}

/* ---- the calls ---------------------------------------------------------------- */

/* Wait until no callback for who runs (not from the callback itself). */
static void wait_cb(const void *who)
{
	while (xrcm.in_cb == who && !pthread_equal(pthread_self(), xrcm.thread))
		pthread_cond_wait(&xrcm.cv, &xrcm.mu);
}

/* The RoCE engine passes its stray datagrams here (xs_roce.h). */
__attribute__((constructor)) static void stray_hook(void)
{
	xs_roce_set_stray(xs_rcm_stray);
}

void xs_rcm_stray(const uint8_t *pkt, size_t len, const struct sockaddr_storage *from,
		  const struct sockaddr_storage *local)
{
	bool sent = false;

	pthread_mutex_lock(&xrcm.mu);
	if (!start())
		sent = xrcm_stray_send(pkt, len, from, local);
	pthread_mutex_unlock(&xrcm.mu);
	if (!sent)
		xs_log("roce: a datagram taken before its QP's socket was connected dropped");
}

int xs_rcm_listen(const struct sockaddr *local, bool afonly, uint64_t service_id, xs_rcm_cb cb,
		  void *ctx, struct xs_rcm_listener **out)
{
	struct xs_rcm_listener *l = calloc(1, sizeof(*l));
	bool v6 = local->sa_family == AF_INET6;
	int rc;

	if (!l)
		return -ENOMEM;
	l->fd[0] = l->fd[1] = -1;
	pthread_mutex_lock(&xrcm.mu);
	rc = start();
	if (!rc && (!v6 || !afonly)) {
		l->fd[0] = xrcm.relay ? relay_listen(AF_INET, service_id)
				      : xrcm_unix_bind(XRCM_SID4, service_id);
		rc = l->fd[0] < 0 ? l->fd[0] : 0;
	}
	if (!rc && v6) {
		l->fd[1] = xrcm.relay ? relay_listen(AF_INET6, service_id)
				      : xrcm_unix_bind(XRCM_SID6, service_id);
		rc = l->fd[1] < 0 ? l->fd[1] : 0;
	}
	if (rc) {
		pthread_mutex_unlock(&xrcm.mu);
		listener_close(l);
		return rc;
	}
	l->sid = service_id;
	if (local->sa_family == AF_INET)
		memcpy(&l->local, local, sizeof(struct sockaddr_in));
	else if (local->sa_family == AF_INET6)
		memcpy(&l->local, local, sizeof(struct sockaddr_in6));
	l->cb = cb;
	l->ctx = ctx;
	l->next = xrcm.listeners;
	xrcm.listeners = l;
	(void)!eventfd_write(xrcm.wake, 1); /* poll its socket */
	pthread_mutex_unlock(&xrcm.mu);
	*out = l;
	return 0;
}

void xs_rcm_unlisten(struct xs_rcm_listener *l)
{
	struct xs_rcm_listener **pp;

	pthread_mutex_lock(&xrcm.mu);
	for (pp = &xrcm.listeners; *pp; pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	}
	wait_cb(l);
	(void)!eventfd_write(xrcm.wake, 1);
	pthread_mutex_unlock(&xrcm.mu);
	/* the engine may still poll the numbers once; it reads only from
	 * listed fds (fwd_fd_live), and these are not listed any more */
	listener_close(l);
}

/* Fork (xs_fork.c).  The engine thread may hold mu at fork, or run a
 * callback that holds an id's lock (cm_roce.c: a REQ for the listener
 * while the application forks for the last one): the child must inherit
 * neither locked.  Postgres' backend closed its copy of the listener and
 * waited for ever on the id's lock (a stray child, port 4791's sockets
 * still held, took the MADs hashed to them).  So prepare waits for the
 * callback to end, and with mu held no other starts.  The child's
 * listeners are the parent's names, shared: dormant there until claimed
 * (a pre-fork server's workers claim them when they accept; a child that
 * never accepts takes none). */
void xs_rcm_fork_prepare(void)
{
	pthread_mutex_lock(&xrcm.mu);
	while (xrcm.in_cb && xrcm.pid == getpid() && !pthread_equal(pthread_self(), xrcm.thread))
		pthread_cond_wait(&xrcm.cv, &xrcm.mu);
}

void xs_rcm_fork_parent(void)
{
	pthread_mutex_unlock(&xrcm.mu);
}

void xs_rcm_fork_child(void)
{
	/* the parent's sockets on port 4791 are closed here at once, not at
	 * the child's first use: a child that outlives its parent (stuck, or
	 * a daemon's) would keep them bound, unread, and the MADs the kernel
	 * hashes to them would be lost for every process of the host */
	int *fds[] = { &xrcm.fd4, &xrcm.fd6, &xrcm.fdu, &xrcm.wake };

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
	for (struct xs_rcm_listener *l = xrcm.listeners; l; l = l->next)
		l->dormant = true;
	xrcm.in_cb = NULL; /* the parent's thread ran it: no wait for it here */
	pthread_mutex_unlock(&xrcm.mu);
	pthread_cond_init(&xrcm.cv, NULL);
}

/* This process takes l's REQs from now on (an engine of its own started
 * first in a fork child): 0 or -errno. */
int xs_rcm_listener_claim(struct xs_rcm_listener *l)
{
	int rc;

	pthread_mutex_lock(&xrcm.mu);
	rc = start();
	if (!rc && l->dormant) {
		l->dormant = false;
		(void)!eventfd_write(xrcm.wake, 1); /* poll its names again */
	}
	pthread_mutex_unlock(&xrcm.mu);
	return rc;
}

/* REQs for l go to the other processes that share it (a REQ here is
 * passed on through its name) until this process claims it again. */
void xs_rcm_listener_release(struct xs_rcm_listener *l)
{
	pthread_mutex_lock(&xrcm.mu);
	l->dormant = true;
	if (xrcm.wake >= 0 && xrcm.pid == getpid())
		(void)!eventfd_write(xrcm.wake, 1);
	pthread_mutex_unlock(&xrcm.mu);
}

int xs_rcm_connect(const struct xs_rcm_req_args *a, xs_rcm_cb cb, void *ctx, struct xs_rcm **out)
{
	struct xs_rcm *r = calloc(1, sizeof(*r));
	struct roce_cm_msg *m = calloc(1, sizeof(*m));
	struct roce_cm_req *q;
	uint64_t tid = 0;
	int rc;

	if (!r || !m) {
		free(r);
		free(m);
		return -ENOMEM;
	}
	pthread_mutex_lock(&xrcm.mu);
	rc = start();
	if (rc) {
		pthread_mutex_unlock(&xrcm.mu);
		free(r);
		free(m);
		return rc;
	}
	r->active = true;
	r->owned = true;
	r->state = S_REQ_SENT;
	r->local_id = new_local_id();
	r->local_qpn = a->qpn;
	r->local = a->local;
	r->peer = a->peer;
	r->cb = cb;
	r->ctx = ctx;
	(void)xs_rand_bytes(&tid, sizeof(tid));
	r->tid = tid;
	roce_cm_hdr_init(m, ROCE_CM_ATTR_REQ, tid);
	q = &m->u.req;
	q->local_comm_id = r->local_id;
	q->service_id = a->service_id;
	q->local_ca_guid = 0x0200000000000000ull | ((uint64_t)xrcm.tag << 16); /* locally administered */
	q->local_qpn = a->qpn;
	q->responder_resources = a->responder_resources;
	q->initiator_depth = a->initiator_depth;
	q->remote_cm_response_timeout = 20; /* as rdma_cm: CMA_CM_RESPONSE_TIMEOUT */
	q->transport_service_type = ROCE_CM_TST_RC;
	q->starting_psn = a->psn & 0xffffff;
	q->local_cm_response_timeout = 20;
	q->retry_count = a->retry_count;
	q->pkey = 0xffff;
	q->path_mtu = a->mtu;
	q->rnr_retry_count = a->rnr_retry_count;
	q->max_cm_retries = XRCM_RETRIES;
	q->primary.local_lid = 0xffff;
	q->primary.remote_lid = 0xffff;
	{
		uint8_t b[16];
		struct sockaddr_storage ss[2] = { a->local, a->peer };
		uint8_t *gid[2] = { q->primary.local_gid, q->primary.remote_gid };
		int i;

		for (i = 0; i < 2; i++) {
			xrcm_addr_bytes(&ss[i], b);
			if (ss[i].ss_family == AF_INET) {
				memset(gid[i], 0, 10);
				gid[i][10] = gid[i][11] = 0xff;
				memcpy(gid[i] + 12, b, 4);
			} else {
				memcpy(gid[i], b, 16);
			}
		}
	}
	q->primary.flow_label = a->flow_label & 0xfffff;
	q->primary.hop_limit = 64;
	q->primary.local_ack_timeout = a->ack_timeout;
	memcpy(q->pdata, a->pdata, sizeof(q->pdata));
	r->next = xrcm.conns;
	xrcm.conns = r;
	r->redial_end = xs_now_ms() + (a->no_redial ? 0 : XRCM_REDIAL_MS);
	conn_send(r, m, XRCM_RETRIES);
	pthread_mutex_unlock(&xrcm.mu);
	free(m);
	*out = r;
	return 0;
}

void xs_rcm_set_cb(struct xs_rcm *r, xs_rcm_cb cb, void *ctx)
{
	pthread_mutex_lock(&xrcm.mu);
	r->cb = cb;
	r->ctx = ctx;
	pthread_mutex_unlock(&xrcm.mu);
}

int xs_rcm_accept(struct xs_rcm *r, const struct xs_rcm_rep_args *a)
{
	struct roce_cm_msg *m = calloc(1, sizeof(*m));
	struct roce_cm_rep *p;
	int rc = 0;

	if (!m)
		return -ENOMEM;
	if (a->pdata_len > ROCE_CM_REP_PDATA) {
		free(m);
		return -EINVAL;
	}
	pthread_mutex_lock(&xrcm.mu);
	if (r->state != S_REQ_RCVD) {
		rc = r->state == S_TIMEWAIT ? -ECONNRESET : -EINVAL;
	} else {
		roce_cm_hdr_init(m, ROCE_CM_ATTR_REP, r->tid);
		p = &m->u.rep;
		p->local_comm_id = r->local_id;
		p->remote_comm_id = r->remote_id;
		p->local_qpn = a->qpn;
		r->local_qpn = a->qpn;
		p->starting_psn = a->psn & 0xffffff;
		p->responder_resources = a->responder_resources;
		p->initiator_depth = a->initiator_depth;
		p->target_ack_delay = 15; /* as rxe's device (its ack delay) */
		p->end_to_end_flow_control = true;
		p->rnr_retry_count = a->rnr_retry_count;
		p->local_ca_guid = 0x0200000000000000ull | ((uint64_t)xrcm.tag << 16);
		if (a->pdata_len)
			memcpy(p->pdata, a->pdata, a->pdata_len);
		r->state = S_REP_SENT;
		conn_send(r, m, XRCM_RETRIES);
	}
	pthread_mutex_unlock(&xrcm.mu);
	free(m);
	return rc;
}

int xs_rcm_rtu(struct xs_rcm *r)
{
	struct roce_cm_msg *m = calloc(1, sizeof(*m));
	int rc = 0;

	if (!m)
		return -ENOMEM;
	pthread_mutex_lock(&xrcm.mu);
	if (r->state != S_REP_RCVD) {
		rc = r->state == S_TIMEWAIT ? -ECONNRESET : -EINVAL;
	} else {
		roce_cm_hdr_init(m, ROCE_CM_ATTR_RTU, r->tid);
		m->u.rtu.local_comm_id = r->local_id;
		m->u.rtu.remote_comm_id = r->remote_id;
		r->state = S_EST;
		conn_send(r, m, 0);
	}
	pthread_mutex_unlock(&xrcm.mu);
	free(m);
	return rc;
}

/* mu held */
static void reject_locked(struct xs_rcm *r, uint16_t reason, const void *pdata, size_t len)
{
	struct roce_cm_msg *m = calloc(1, sizeof(*m));

	if (!m)
		return;
	roce_cm_hdr_init(m, ROCE_CM_ATTR_REJ, r->tid);
	m->u.rej.local_comm_id = r->local_id;
	m->u.rej.remote_comm_id = r->remote_id;
	m->u.rej.message_rejected = r->state == S_REQ_RCVD ? ROCE_CM_MSG_REQ : ROCE_CM_MSG_REP;
	m->u.rej.reason = reason;
	if (len)
		memcpy(m->u.rej.pdata, pdata, len);
	conn_send(r, m, 0);
	timewait(r, XRCM_TIMEWAIT_MS);
	free(m);
}

int xs_rcm_reject(struct xs_rcm *r, uint16_t reason, const void *pdata, size_t len)
{
	int rc = 0;

	if (len > ROCE_CM_REJ_PDATA)
		return -EINVAL;
	pthread_mutex_lock(&xrcm.mu);
	if (r->state == S_REQ_RCVD || r->state == S_REP_RCVD)
		reject_locked(r, reason, pdata, len);
	else
		rc = -EINVAL;
	pthread_mutex_unlock(&xrcm.mu);
	return rc;
}

/* mu held */
static void disconnect_locked(struct xs_rcm *r)
{
	struct roce_cm_msg m;

	roce_cm_hdr_init(&m, ROCE_CM_ATTR_DREQ, r->tid);
	m.u.dreq.local_comm_id = r->local_id;
	m.u.dreq.remote_comm_id = r->remote_id;
	m.u.dreq.remote_qpn = r->remote_qpn;
	r->state = S_DREQ_SENT;
	conn_send(r, &m, XRCM_DREQ_RETRIES);
}

int xs_rcm_disconnect(struct xs_rcm *r)
{
	int rc = 0;

	pthread_mutex_lock(&xrcm.mu);
	if (r->state == S_EST || r->state == S_REP_SENT)
		disconnect_locked(r);
	else if (r->state != S_DREQ_SENT && r->state != S_TIMEWAIT && r->state != S_DONE)
		rc = -EINVAL;
	pthread_mutex_unlock(&xrcm.mu);
	return rc;
}

/* The owner is done with r (mu held): an established connection gets its
 * DREQ, a handshake its REJ, as cm.c: cm_destroy_id. */
static void end_locked(struct xs_rcm *r)
{
	if (r->state == S_EST || r->state == S_REP_SENT)
		disconnect_locked(r);
	else if (r->state == S_REQ_RCVD)
		reject_locked(r, ROCE_CM_REJ_CONSUMER_DEFINED, NULL, 0);
	else if (r->state == S_REQ_SENT || r->state == S_REP_RCVD)
		reject_locked(r, ROCE_CM_REJ_TIMEOUT, NULL, 0);
}

void xs_rcm_put(struct xs_rcm *r)
{
	pthread_mutex_lock(&xrcm.mu);
	if (xrcm.pid != getpid()) { /* a fork child: the parent's connection */
		pthread_mutex_unlock(&xrcm.mu);
		return;
	}
	end_locked(r);
	r->owned = false;
	r->cb = NULL;
	wait_cb(r);
	(void)!eventfd_write(xrcm.wake, 1); /* the engine frees it when done */
	pthread_mutex_unlock(&xrcm.mu);
}

/* The DREQs out at exit are resent this often (XRCM_RESEND_MS is longer
 * than the whole wait). */
#define XRCM_EXIT_RESEND_MS 250

/* Process exit: what the kernel does when a process's rdma_cm file closes
 * (ucma_close -> rdma_destroy_id; cm.c: cm_destroy_id): a connection the
 * program did not destroy gets its DREQ (established) or REJ (handshake),
 * then every DREQ out, its own or the one just sent, gets up to
 * XSOCK_LINGER_MS for its DREP or the peer's crossing DREQ, which is
 * answered (the engine thread runs until the process is gone).  Without
 * it a peer's DREQ that crossed ours at the end of a run met a closed
 * port and the peer resent it until its CM timed out. */
static void cm_exit_wait(void)
{
	uint64_t now = xs_now_ms(), end = now + xs_config()->linger_ms;
	uint64_t resend = now + XRCM_EXIT_RESEND_MS;
	struct xs_rcm *r;
	bool waiting = true;

	pthread_mutex_lock(&xrcm.mu);
	if (xrcm.pid != getpid()) { /* a fork child, or never started */
		pthread_mutex_unlock(&xrcm.mu);
		return;
	}
	for (r = xrcm.conns; r; r = r->next)
		if (r->owned)
			end_locked(r);
	while (waiting && (now = xs_now_ms()) < end) {
		bool again = now >= resend;

		waiting = false;
		for (r = xrcm.conns; r; r = r->next) {
			if (r->state != S_DREQ_SENT)
				continue;
			waiting = true;
			if (again)
				xrcm_send_mad(&r->local, &r->peer, r->mad);
		}
		if (again)
			resend = now + XRCM_EXIT_RESEND_MS;
		if (waiting) {
			pthread_mutex_unlock(&xrcm.mu);
			xs_sleep_ms(5);
			pthread_mutex_lock(&xrcm.mu);
		}
	}
	pthread_mutex_unlock(&xrcm.mu);
}

/* At exit, after libxsock's exit close (xs_close.c's exit_destructor):
 * its sockets each get their data and DISCONNECT message ACKed before
 * their DREQ.  When this ran first it sent every DREQ, and each of
 * libxsock's closes then waited XSOCK_LINGER_MS for an ACK that could no
 * longer come (wrk's exit with 64 connections over RoCE: a minute). */
void xs_roce_exit_wait(void)
{
	cm_exit_wait();
	xs_roce_loop_exit_wait();
}
