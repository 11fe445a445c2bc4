/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Private to the connection manager: librdmacm's rdma_* calls (rdma-core 44
 * ABI) over the engine's TCP + MPA handshakes (xs_internal.h).  The
 * structures behind the handles we give out and the calls between its files:
 *   cm_channel.c   event channels, the events on them, their delivery
 *   cm_id.c        ids, their addresses (bind, resolve), options, devices
 *   cm_qp.c        the QP and SRQ on an id
 *   cm_conn.c      connect, listen, accept, reject, disconnect; engine upcalls
 *   cm_endpoint.c  rdma_getaddrinfo and the synchronous endpoint calls
 *   cm_proc.c      the id side of exec hand-over and fork (xs_internal.h)
 * cm_rsocket.c (the r* calls) uses none of this.
 *
 * Objects: a channel (struct cm_chan) is a FIFO of events plus an eventfd
 * that is readable exactly while the FIFO is non-empty; an id (struct cm_id)
 * wraps the application's struct rdma_cm_id.  Engine upcalls (accept,
 * connect, closed) run on the engine thread; they take the id's lock, check
 * that the id still lives, and queue events under the channel's lock (order:
 * id lock, then channel lock).  No lock is held while calling into the
 * engine: its calls may wait for the engine thread, which may be waiting for
 * our lock in an upcall.  The CM creates no thread.
 *
 *   cm_roce.c      the same calls on xsock_roce0: the IB CM (xs_roce_cm.h)
 * Not supported: RDMA_PS_UDP/IB/IPOIB (EOPNOTSUPP), multicast, XRC, ECE. */
#ifndef CM_PRIV_H
#define CM_PRIV_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <rdma/rdma_cma.h>

#include "verbs/xs_internal.h"
#include "verbs/xs_transport.h"

#define CM_PDATA_MAX 255 /* rdma_conn_param.private_data_len is a uint8_t */

/* ---- objects ------------------------------------------------------------- */

struct cm_event {
	struct rdma_cm_event ev; /* first: the application holds &ev */
	struct cm_event *next;
	uint64_t held_ms; /* a DISCONNECTED held back since (see disc_held) */
	uint8_t pdata[CM_PDATA_MAX];
};

struct cm_chan {
	struct rdma_event_channel ch; /* first: the application holds &ch */
	pthread_mutex_t lock;
	struct cm_event *head, *tail;
	bool destroyed;
	struct cm_chan *grave_next;
	struct cm_chan *live_next, *live_prev; /* chan_live: for fork */
};

enum cm_state {
	CM_IDLE,
	CM_BOUND,
	CM_ADDR, /* address resolved */
	CM_ROUTE, /* route resolved */
	CM_LISTEN,
	CM_CONNECTING, /* rdma_connect issued, waiting for the engine */
	CM_RESPONSE, /* external QP: CONNECT_RESPONSE out, rdma_establish binds it */
	CM_REQ, /* passive child: request received, not yet accepted/rejected */
	CM_ACCEPTING, /* rdma_accept in progress */
	CM_CONNECTED,
	CM_DISCONNECTED,
	CM_FAILED,
};

struct cm_id {
	struct rdma_cm_id id; /* first: the application holds &id */
	pthread_mutex_t lock;
	int refs; /* atomic: the application's, an outstanding connect, the closed cb */
	struct cm_chan *chan;
	bool sync; /* chan is private (created with a NULL channel) */
	enum cm_state state;
	bool destroyed;
	bool disc_queued; /* the one DISCONNECTED went out */
	bool closed_early; /* the connection ended before ESTABLISHED was queued */
	bool closed_ref; /* a reference is held for the closed callback */
	/* The wire under this id (xs_transport.h); every call the CM makes
	 * into a transport goes through it.  Set at cm_alloc, inherited by a
	 * listener's requests. */
	const struct xs_transport_ops *tp;
	struct xs_listener *listener;
	/* The connection.  The CM owns it (conn_owned) until cm_qp_attach
	 * succeeds; from then on the QP holds the reference (ibv_destroy_qp
	 * disconnects and puts it) and conn is only borrowed for
	 * rdma_disconnect while the QP exists. */
	struct xs_conn *conn;
	bool conn_owned;
	/* An external QP (the application's ibv_create_qp, no id->qp):
	 * conn_param.qp_num of rdma_connect or rdma_accept, found in the QPN
	 * table (xs_qp_lookup) whenever it is used, as the application may
	 * destroy it; 0: none (QPNs 0 and 1 are never given out). */
	uint32_t ext_qpn;
	/* passive child: the initiator's numbers from the MPA Request */
	uint16_t req_ird, req_ord;
	bool req_enhanced;
	/* rdma_connect's private data, alive until the connect callback */
	uint8_t pdata[XS_MAX_PD_PRIV];
	/* CQs rdma_create_qp made because the caller gave none */
	struct ibv_comp_channel *own_sch, *own_rch;
	struct ibv_cq *own_scq, *own_rcq;
	/* rdma_create_ep on a passive id: rdma_get_request gives children a QP */
	bool ep_qp;
	struct ibv_pd *ep_pd;
	struct ibv_qp_init_attr ep_attr;
	/* libxsock's mixed listener (xsock_priv_listen_mixed): plain TCP
	 * clients come as XSOCK_CM_EVENT_PLAIN events */
	bool mixed;
	/* libxsock's connects (xsock_priv_cm_no_redial): a refused TCP connect
	 * is refused at once, as a kernel socket's is */
	bool no_redial;
	int afonly; /* RDMA_OPTION_ID_AFONLY: -1 unset */
	/* RDMA_OPTION_ID_ACK_TIMEOUT: -1 unset; the QP's timeout attribute
	 * (the RoCE requester's, query_qp's on iWARP) */
	int ack_timeout;
	/* rdma_bind_addr to port 0 takes a port at once, as the kernel's CM
	 * does (qperf sends it to its client before rdma_listen): a bound
	 * TCP socket holds it until listen or connect binds it again (-1) */
	int port_fd;
	/* RoCE (xsock_roce0): the IB CM under this id (cm_roce.c), not tp */
	bool roce;
	struct xs_rcm *rcm;
	struct xs_rcm_listener *rlistener;
	struct cm_roce_path *rpath; /* the path agreed (REQ, REP) */
};

static inline struct cm_chan *cm_chan_of(struct rdma_event_channel *ch)
{
	return (struct cm_chan *)ch;
}

static inline struct cm_id *cm_of(struct rdma_cm_id *id)
{
	return (struct cm_id *)id;
}

/* The rdma_* calls' failure: -1 with errno e. */
static inline int cm_err(int e)
{
	errno = e;
	return -1;
}

/* ---- channels and events (cm_channel.c) ---------------------------------- */

/* A new channel on a blocking eventfd of the stack's (any thread; takes
 * chan_live_lock).  NULL on failure. */
struct cm_chan *cm_chan_new(void);
/* Destroy c (NULL is fine): its queued events are freed, its fd closed, and
 * its memory kept for the process's life (a thread may still be in
 * cm_chan_pop).  Any thread; takes chan_live_lock, c->lock, then
 * chan_graveyard_lock, one after the other. */
void cm_chan_free(struct cm_chan *c);
/* Queue e at the tail (takes c->lock: a leaf, inside the id lock). */
void cm_chan_push(struct cm_chan *c, struct cm_event *e);
/* The next event, waiting for one outside c->lock (application thread, no
 * lock held).  With honour_nonblock, an O_NONBLOCK fd gives NULL with errno
 * EAGAIN; NULL with errno if the poll fails.  Never returns on a destroyed
 * channel (as a read already blocked on librdmacm's fd). */
struct cm_event *cm_chan_pop(struct cm_chan *c, bool honour_nonblock);
/* Unlink the events that name id (as id or listen_id) and append them to
 * *out in order (takes c->lock). */
void cm_chan_take(struct cm_chan *c, const struct rdma_cm_id *id, struct cm_event **out);

/* An event for c, or NULL (logged) without memory.  Any thread, no lock. */
struct cm_event *cm_ev_new(struct cm_id *c, enum rdma_cm_event_type type, int status);
/* Copy private data into e (at most CM_PDATA_MAX octets). */
void cm_ev_pdata(struct cm_event *e, const uint8_t *p, size_t len);
/* Free e (NULL is fine); a plain event still owning its socket closes it. */
void cm_ev_free(struct cm_event *e);
/* Queue e (NULL: nothing) on c's channel.  c->lock held, c not destroyed. */
void cm_queue(struct cm_id *c, struct cm_event *e);
void cm_queue_simple(struct cm_id *c, enum rdma_cm_event_type type, int status);
/* Sync mode (c->sync): wait for the next event on c's private channel, keep
 * it in id->event and return 0 if it is want with status 0, else -1 with
 * errno.  Application thread, no lock held. */
int cm_sync_wait(struct cm_id *c, enum rdma_cm_event_type want);

/* ---- ids and addresses (cm_id.c) ------------------------------------------ */

/* A new id with one reference, on chan (NULL: a private channel, sync
 * mode).  NULL without memory.  Any thread, no lock. */
struct cm_id *cm_alloc(struct cm_chan *chan, bool sync, void *context, enum rdma_port_space ps);
/* References (atomic, any thread, any lock): the last cm_put frees c. */
void cm_get(struct cm_id *c);
void cm_put(struct cm_id *c);
/* The id's device (the default context) and port.  c->lock held; 0 or
 * -ENODEV. */
int cm_set_verbs(struct cm_id *c);
/* The device's PD for ids (rdma_cm_id.pd until a QP names its own),
 * allocated at the first call; NULL with errno.  Any thread; takes the
 * leaf cm_pd_lock. */
struct ibv_pd *cm_default_pd(struct ibv_context *ctx);
/* Close the socket that holds a bound port 0's number: listen or connect
 * binds it itself now.  c->lock held. */
void cm_port_release(struct cm_id *c);

/* AF_INET/AF_INET6 sockaddr helpers (no lock).  cm_sa_len: 0 for another
 * family or NULL; cm_sa_copy: 0 or -EAFNOSUPPORT; cm_sa_is_any: the
 * wildcard address (true for another family). */
socklen_t cm_sa_len(const struct sockaddr *sa);
int cm_sa_copy(struct sockaddr_storage *dst, const struct sockaddr *src);
bool cm_sa_is_any(const struct sockaddr *sa);

/* ---- connections (cm_conn.c) ---------------------------------------------- */

/* Bind qp to c's established connection conn with the parameters its
 * transport agreed (tp->params, then xs_qp_attach).  CM or engine thread,
 * no CM lock held.  0 or -errno. */
int cm_qp_attach(struct cm_id *c, struct ibv_qp *qp, struct xs_conn *conn);

/* The QP c's connection goes to: id->qp, or the external QP named by
 * c->ext_qpn while it exists; NULL if neither.  c->lock held. */
struct ibv_qp *cm_conn_qp(struct cm_id *c);

/* Take a reference for conn's closed callback and install it (DISCONNECTED
 * from then on).  No lock held (takes c->lock, then calls the engine
 * without it); nothing if c is destroyed. */
void cm_arm_closed(struct cm_id *c, struct xs_conn *conn);

/* ---- the IB CM over RoCE (cm_roce.c) -------------------------------------- */

/* rdma_connect/listen/accept/reject/disconnect of an id on xsock_roce0
 * (c->roce): application thread, no lock held; 0 or -1 with errno. */
int cm_roce_connect(struct cm_id *c, const struct rdma_conn_param *param);
int cm_roce_listen(struct cm_id *c);
int cm_roce_accept(struct cm_id *c, const struct rdma_conn_param *param);
int cm_roce_reject(struct cm_id *c, const void *pdata, uint8_t len);
int cm_roce_disconnect(struct cm_id *c);
/* rdma_establish after CONNECT_RESPONSE (an external QP): the RTU. */
int cm_roce_establish(struct cm_id *c);
/* rdma_init_qp_attr's INIT, RTR and RTS on the path the REQ or REP agreed
 * (a->qp_state is the input); no lock held.  0, or -1 with errno; 1 for
 * INIT before there is a path (rdma_create_qp: the iWARP attributes). */
int cm_roce_init_qp_attr(struct cm_id *c, struct ibv_qp_attr *a, int *mask);
/* From rdma_destroy_id: no engine upcall for c after this. */
void cm_roce_destroy(struct cm_id *c);

#endif
