/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The IB connection manager over RoCE v2 (issue 18): CM MADs (roce/roce_cm.h)
 * in UD SEND_ONLY packets between QP 1s, UDP port 4791, as the kernel's
 * rdma_cm speaks them with rdma_rxe.  xs_roce_cm.c is the MAD engine (its
 * sockets, thread, retransmissions, time-wait and the hand-over between
 * processes); cm_roce.c puts librdmacm's calls on it.
 *
 * Port 4791 is one per host and shared: every process's CM socket is bound
 * to the wildcard with SO_REUSEPORT, so a MAD reaches one of them, not
 * always the owner.  Owners are named by abstract Unix sockets (per network
 * namespace, gone with the process): a listener binds "xsock-rcm-sid-<SID>"
 * (so two listeners on one port fail with EADDRINUSE, as TCP), a process
 * "xsock-rcm-<TAG>" where TAG is the upper 16 bits of every local comm ID
 * it hands out.  A MAD for someone else is passed on there; one for nobody
 * is answered as the kernel would (REJ invalid service ID, DREP).
 *
 * Threads and locks: one engine thread per process ("xs-rcm"), started at
 * first use; its lock is never held across an upcall, and the upcall (the
 * event callback) runs on the engine thread with no engine lock held.  The
 * calls below: any thread, no lock required; 0 or -errno. */
#ifndef XS_ROCE_CM_H
#define XS_ROCE_CM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "roce/roce_cm.h"

struct xs_rcm; /* one connection's CM state, either side */
struct xs_rcm_listener;

enum xs_rcm_ev {
	XS_RCM_EV_REQ, /* listener: a new REQ (ev->rcm: a reference for the callee) */
	XS_RCM_EV_REP, /* active: the REP (answer with xs_rcm_rtu or xs_rcm_reject) */
	XS_RCM_EV_RTU, /* passive: the RTU came: established */
	XS_RCM_EV_REJ, /* the peer rejected (reason, pdata) */
	XS_RCM_EV_TIMEOUT, /* REQ or REP retries exhausted (REJ timeout sent) */
	XS_RCM_EV_DREQ, /* the peer disconnected (DREP sent) */
	XS_RCM_EV_TIMEWAIT_EXIT, /* time-wait over */
};

struct xs_rcm_event {
	enum xs_rcm_ev type;
	struct xs_rcm *rcm;
	const struct roce_cm_req *req; /* REQ */
	const struct roce_cm_rep *rep; /* REP */
	uint16_t reason; /* REJ */
	const uint8_t *pdata; /* REJ, REP, REQ (the whole 92 octets) */
	size_t pdata_len;
	/* REQ: our address (the packet's destination) and the peer's */
	const struct sockaddr_storage *local, *peer;
};

typedef void (*xs_rcm_cb)(void *ctx, const struct xs_rcm_event *ev);

/* What a REQ says of the active side (the rest is the engine's). */
struct xs_rcm_req_args {
	struct sockaddr_storage local, peer; /* IP addresses (ports ignored) */
	uint64_t service_id;
	uint32_t qpn, psn;
	uint8_t responder_resources, initiator_depth;
	uint8_t retry_count, rnr_retry_count; /* 3 bits each */
	uint8_t mtu; /* IB enum */
	uint32_t flow_label;
	uint8_t ack_timeout;
	bool no_redial; /* a REJ "no listener" ends the connect at once */
	uint8_t pdata[ROCE_CM_REQ_PDATA];
};

struct xs_rcm_rep_args {
	uint32_t qpn, psn;
	uint8_t responder_resources, initiator_depth;
	uint8_t rnr_retry_count;
	const void *pdata;
	size_t pdata_len; /* <= ROCE_CM_REP_PDATA */
};

/* A datagram a RoCE QP's receive socket took between its bind to port
 * 4791 and its connect (xs_roce_conn.c), when it was the port's most
 * specific socket: a MAD among such goes to the CM as if its socket had
 * received it (the engine is started for it if need be); anything else is
 * dropped.  from: the sender's address and port; local: ours. */
void xs_rcm_stray(const uint8_t *pkt, size_t len, const struct sockaddr_storage *from,
		  const struct sockaddr_storage *local);

/* Listen for REQs of service_id on local (the wildcard: any address).  An
 * AF_INET6 local takes IPv4 REQs too unless afonly (RDMA_OPTION_ID_AFONLY);
 * -EADDRINUSE if a family it would take has a listener on the service. */
int xs_rcm_listen(const struct sockaddr *local, bool afonly, uint64_t service_id, xs_rcm_cb cb,
		  void *ctx, struct xs_rcm_listener **out);
/* No callback for l after this returns. */
void xs_rcm_unlisten(struct xs_rcm_listener *l);
/* Fork: a listener shared with a fork's other side takes REQs in the
 * processes that claimed it (0 or -errno), none in one that released it;
 * a child's copies start released.  The fork_* calls are xs_fork.c's. */
int xs_rcm_listener_claim(struct xs_rcm_listener *l);
void xs_rcm_listener_release(struct xs_rcm_listener *l);
void xs_rcm_fork_prepare(void);
void xs_rcm_fork_parent(void);
void xs_rcm_fork_child(void);

/* Send a REQ; the answer comes as an event. */
int xs_rcm_connect(const struct xs_rcm_req_args *a, xs_rcm_cb cb, void *ctx, struct xs_rcm **out);
/* Passive: set the callback of a connection from XS_RCM_EV_REQ. */
void xs_rcm_set_cb(struct xs_rcm *r, xs_rcm_cb cb, void *ctx);
int xs_rcm_accept(struct xs_rcm *r, const struct xs_rcm_rep_args *a);
int xs_rcm_rtu(struct xs_rcm *r);
/* REJ the REQ (passive) or the REP (active) with reason. */
int xs_rcm_reject(struct xs_rcm *r, uint16_t reason, const void *pdata, size_t len);
/* DREQ (established), then time-wait. */
int xs_rcm_disconnect(struct xs_rcm *r);
/* The owner lets r go: no callback after this returns; an established
 * connection is disconnected first, a pending REQ rejected. */
void xs_rcm_put(struct xs_rcm *r);

#endif
