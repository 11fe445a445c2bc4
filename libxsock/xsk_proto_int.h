/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Private to the protocol files (xsk_proto.h lists them): what they share.
 * Every call runs on an application thread or the service thread with
 * s->mu held, and none blocks, unless noted. */
#ifndef XSK_PROTO_INT_H
#define XSK_PROTO_INT_H

#include "libxsock/xsk_priv.h"

#define XSK_RQ 384 /* credits we grant at most (rsockets' default queue size) */
/* credits the connection data grants: the window doubles at each grant
 * while the peer uses it (xsk_give_credits), so a short connection posts
 * and flushes 64 receives, not 416 */
#define XSK_RQ_FIRST 32
#define XSK_RECV_EXTRA 32 /* receives posted beyond the credits (control messages) */
#define XSK_NRECV_MAX (XSK_RQ + XSK_RECV_EXTRA) /* what the QP, CQ and memory hold */
#define XSK_SQ 1024
#define XSK_SBUF (256u * 1024)
#define XSK_RD_DEPTH 16 /* IRD/ORD we ask for (RDMA Reads of the extended calls) */

#define WR_RECV (1ull << 63)
#define WR_DATA (1ull << 62)
#define WR_DISC (1ull << 59) /* ordered_close's DISCONNECT (signaled) */

/* The layers above (xsk_proto_set_ext, xsk_proto_set_relay; xsk_res.c):
 * set before the first s->ext / s->relay, used only while that is set. */
extern const struct xsk_ext_hooks *_Atomic xsk_ext_up;
extern const struct xsk_relay_hooks *_Atomic xsk_relay_up;

/* ---- xsk_res.c: the object and its resources ---------------------------------- */

/* The receive memory as the peer of an adopted connection knows it. */
struct xsk_adopt_mr {
	uint32_t rkey;
	uint64_t iova;
};

/* XSOCK_LINGER_MS (read once per process): how long a close over a kernel
 * stack waits.  Any thread, no lock. */
int xsk_linger_ms(void);
/* The CM event channel, nonblocking, in the inner epoll fd.  0 or -errno. */
int xsk_make_channel(struct xsk *s, const struct xsk_stack *st);
/* PD, completion channel, CQ, rings, MRs and the QP on s->id, receives
 * posted, CQ armed; the ring's first half ready to advertise (ad: an exec
 * hand-over's registration, the ring as the old process left it).  0 or
 * -errno (the caller frees s). */
int xsk_setup_qp(struct xsk *s, const struct xsk_stack *st, const struct xsk_adopt_mr *ad);
/* A ring from xsk_setup_qp (NULL: nothing), deregistered: kept for the
 * next connection or unmapped (any thread, takes the pool's lock). */
void xsk_ring_free(void *p, size_t len);
/* Our connection data (after xsk_setup_qp). */
void xsk_local_conn(struct xsk *s, uint8_t out[RS_CONN_DATA_LEN]);
/* The address (TO) of p in the receive memory as the MR knows it. */
uint64_t xsk_mem_to(const struct xsk *s, const void *p);
/* Post receive buffer i again; 0 or -errno. */
int xsk_post_recv(struct xsk *s, unsigned i);
/* Post receive buffers i .. i + n - 1, chained; 0 or -errno. */
int xsk_post_recvs(struct xsk *s, unsigned i, unsigned n);
/* A 4-octet Send carrying msg, in the peer's byte order; 0 or -errno. */
int xsk_post_msg(struct xsk *s, uint32_t msg);
/* wr becomes the zero-length RDMA Write with immediate carrying msg (msg_imm) */
void xsk_wr_imm(struct ibv_send_wr *wr, uint32_t msg);
/* wr, an RDMA Write, carries msg as immediate data and no Send follows it */
void xsk_wr_write_imm(struct ibv_send_wr *wr, uint32_t msg);

/* ---- xsk_credit.c: credits, the receive ring, the CQ ----------------------------- */

/* The peer is gone: no more sending, end of stream after the data. */
void xsk_conn_broken(struct xsk *s);
/* ... without its DISCONNECT: ECONNRESET once, as TCP after a RST. */
void xsk_conn_reset(struct xsk *s);
/* Advertise a consumed ring half and/or grant credits, if due. */
void xsk_give_credits(struct xsk *s);
/* Take completions off the CQ (rx: XSOCK_RX_*, what an empty CQ does);
 * xsk_poll_cq with XSOCK_RX_MAYBE. */
void xsk_poll_cq_rx(struct xsk *s, int rx);
void xsk_poll_cq(struct xsk *s);
/* The CQ disarmed while a thread of ours polls it, armed again after. */
void xsk_cq_disarm(struct xsk *s, const struct xsk_stack *st);
void xsk_cq_rearm(struct xsk *s, const struct xsk_stack *st);
/* Ack the completion channel's events (pending: it has some). */
void xsk_drain_cq_events(struct xsk *s, const struct xsk_stack *st, bool pending);

/* ---- xsk_ready.c: readiness ----------------------------------------------------- */

/* The stream failed but DISCONNECTED, which tells a reset from a FIN, is
 * not here yet: no end of stream until it is. */
bool xsk_end_unknown(const struct xsk *s);
/* Room in the send ring at its head (0: full). */
uint32_t xsk_sbuf_contig(struct xsk *s);
/* Credits and a target buffer for one more Data Transfer message. */
bool xsk_stream_credit(struct xsk *s);
/* ... and the send ring has room, the extended calls let the stream go. */
bool xsk_can_send(struct xsk *s);

/* ---- xsk_cm.c: CM events ------------------------------------------------------- */

/* Handle the channel's CM events (a listener: a few per call). */
void xsk_drain_cm(struct xsk *s, const struct xsk_stack *st);

/* ---- xsk_svc.c: the service thread ---------------------------------------------- */

/* Take s off the service thread (s->mu not held; takes svc_mu). */
void xsk_svc_del(struct xsk *s);

#endif
