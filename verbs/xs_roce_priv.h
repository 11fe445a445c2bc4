/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* What the RoCE engine's files share (nothing here leaves libiwarp):
 *
 *   xs_roce_conn.c   the connection: sockets, packet I/O, references,
 *                    receive (engine thread or a polling thread), timers
 *   xs_roce_fwd.c    packets for another QP of the host that shares the
 *                    receive socket's 4-tuple: passed on to its owner
 *   xs_roce_loop.c   the engine thread: one io_uring, a poll per socket
 *   xs_roce_req.c    requester and completer: segmentation at the path
 *                    MTU, PSNs, AckReq, the retransmit ring, go-back-N,
 *                    RNR back-off, Read Responses and Atomic ACKs
 *   xs_roce_resp.c   responder: PSN checks, duplicates, NAKs, placement
 *                    of Sends/Writes, Read and Atomic execution
 *   xs_tp_roce.c     the transport ops table
 *
 * Sockets.  rxe sends every packet to UDP 4791 from a source port that
 * both ends of a QP pair compute alike (xs_roce_udp_sport).  Each
 * connection has a receive socket bound to local:4791 with SO_REUSEPORT
 * and connected to peer:that port, so the kernel hands it exactly its
 * peer QP's packets, whatever process owns it (two processes share 4791
 * this way; a connected socket beats the unconnected ones of a reuseport
 * group).  It sends from an unconnected socket bound to local:sport with
 * IP_PMTUDISC_DO, so that every IPv4 datagram has DF set and
 * Identification 0, as the ICRC assumes (roce.h).
 *
 * Threads and locks.  rx_mu: the receive side (responder state and
 * placement into the QP's queues, the completer); the engine thread or a
 * thread polling a CQ holds it while it receives, post_recv while it
 * appends.  tx_mu: the requester (PSNs, the retransmit ring, timers); the
 * posting thread holds it while it sends, the completer under rx_mu.
 * Order: rx_mu before tx_mu.  A poster that waits for room drops tx_mu
 * and receives itself (trylock of rx_mu) or sleeps on tx_cv. */
#ifndef XS_ROCE_PRIV_H
#define XS_ROCE_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "ddp/ddp.h"
#include "roce/roce.h"
#include "verbs/xs_roce.h"

#pragma GCC visibility push(hidden)

#define XR_WINDOW 128 /* PSNs in flight (rxe's requester window) */
#define XR_RING 256 /* retransmit slots (power of 2) */
#define XR_ACKREQ_EVERY 32 /* AckReq at least every this many packets */
/* Atomic results kept for duplicates, by PSN modulo this: any two PSNs a
 * requester has in flight (128 at most, ours and rxe's
 * RXE_MAX_UNACKED_PSNS) have their own entry */
#define XR_ATOMIC_REPLAY 128
/* datagrams per recvmmsg: with UDP GRO each may hold up to 64 KiB of
 * packets of one size (cut again at the size the kernel reports) */
#define XR_BATCH 8
#define XR_TX_BATCH 64 /* packets per sendmmsg */
#define XR_PKT_MAX (ROCE_MAX_HDR_LEN + 4096 + 3 + ROCE_ICRC_LEN)
#define XR_RX_BUF 65536 /* one datagram, GRO'd or not (larger: MSG_TRUNC) */
/* UDP GSO: a run of packets of one size leaves in one sendmsg (the
 * kernel cuts it; IPv4 datagrams of 65507 octets at most) */
#define XR_GSO_MAX_SEGS 64
#define XR_GSO_MAX_BYTES 65507
#define XR_DEFAULT_TIMEOUT_US 500000 /* timeout 0 (infinite in IB): 0.5 s */

enum xr_kind { XR_SEND, XR_WRITE, XR_READ, XR_ATOMIC };

/* One packet in flight (requester).  A Read keeps its request to rebuild
 * it from the first response still missing. */
struct xr_slot {
	uint32_t psn; /* first PSN */
	uint32_t npsn; /* PSNs it takes (a Read: its response packets) */
	uint8_t kind; /* enum xr_kind */
	bool last; /* the last packet of its message */
	uint16_t len; /* octets in pkt */
	uint8_t *pkt; /* XR_PKT_MAX octets, the UDP payload as sent */
	struct xs_tp_read rd; /* XR_READ */
	uint32_t rd_got; /* response packets placed */
	uint32_t icrc0; /* the ICRC with IPv4 ID 0 (xr_xmit_flush renumbers) */
	uint32_t req_id; /* XR_ATOMIC */
};

struct xr_atomic_done {
	uint32_t psn;
	bool valid;
	uint64_t orig;
};

struct xs_roce_conn {
	atomic_int refs;
	struct xs_roce_path path;
	struct sockaddr_storage to; /* peer:4791 */
	struct sockaddr_storage rx_peer; /* the peer's address and source port */
	socklen_t to_len;
	struct roce_ip ip_tx, ip_rx; /* what the ICRC covers each way */
	/* with xsock-roced (relay): tx_fd -1, rx_fd -1 or the direct channel
	 * to a peer QP of this host (ROCED_DIRECT; set once, atomic) */
	int rx_fd, tx_fd;
	bool relay; /* fwd_fd is the QP's connection to xsock-roced: all its I/O */
	bool relay_eof_said; /* its end was said (rx_mu) */
	/* abstract Unix name of (local address, QPN): packets another
	 * connection's socket got for us (xs_roce_fwd.c); -1: none */
	int fwd_fd;
	atomic_bool dead; /* disconnected or failed: no more posts */
	atomic_bool fatal; /* failed: nothing more goes out or comes in */
	/* the QP let go while packets were unacknowledged: the engine keeps
	 * receiving ACKs (no upcall) and resending until the ring is empty,
	 * the retries run out or XSOCK_LINGER_MS passed (tx_mu) */
	atomic_bool lingering;
	uint64_t linger_end;
	/* ... or its responder ACKed lately: until linger_end it ACKs again
	 * the peer's retransmissions of what it took (a lost last ACK; TCP's
	 * TIME_WAIT), even with the ring empty (tx_mu) */
	bool time_wait;
	uint64_t last_ack_us; /* the responder's last ACK or response (rx_mu) */
	atomic_bool attached;
	atomic_bool closing; /* put: the engine unlists it and drops its reference */
	atomic_bool kick; /* attached: the engine drains what came before */
	bool armed; /* engine thread: its poll is armed */
	bool fwd_armed; /* ... and fwd_fd's (which holds a reference) */
	struct xs_roce_conn *next; /* the engine's list (xr_loop_mu) */

	/* the QP above (set at attach, under rx_mu) */
	const struct xs_conn_ops *up;
	void *qp;
	struct ddp_rx ddp; /* the QP's queues, QN 0 recv, 1 Read/Atomic Requests, 3 Atomic Resp */
	struct ddp_queue *q_recv, *q_rr, *q_aresp;
	struct xs_tp_params params;

	/* ---- responder, under rx_mu ---- */
	pthread_mutex_t rx_mu;
	uint32_t epsn; /* expected PSN */
	uint32_t msn; /* AETH MSN: requests completed */
	bool nak_seq_sent; /* one NAK per gap (go-back-N: then silence) */
	bool ack_due; /* an AckReq packet was taken: ACK after the batch */
	uint32_t ack_psn;
	int cur_kind; /* -1 none, XR_SEND or XR_WRITE: a message in progress */
	uint32_t cur_mo; /* Send: octets placed so far */
	uint64_t cur_va; /* Write: where the next packet goes */
	uint32_t cur_rkey, cur_left;
	uint32_t msn_recv, msn_rr, msn_aresp; /* DDP MSNs of the QP's queues */
	uint32_t cur_req_psn; /* the request the QP is executing (upcall) */
	/* out-of-order placement (XSOCK_ROCE_OOO): the Write in progress as
	 * its FIRST gave it, and the PSNs of it placed ahead of epsn (bit
	 * PSN % XR_WINDOW; only PSNs in (epsn, epsn + XR_WINDOW) are set) */
	uint32_t ooo_psn, ooo_rkey, ooo_len;
	uint64_t ooo_va;
	uint64_t ooo_ahead[XR_WINDOW / 64];
	uint64_t ooo_placed; /* packets placed ahead (logged at destroy) */
	struct xr_atomic_done adone[XR_ATOMIC_REPLAY];
	bool failed_up; /* failed was called (no upcall follows) */

	/* ---- requester, under tx_mu ---- */
	pthread_mutex_t tx_mu;
	pthread_cond_t tx_cv;
	bool rts;
	uint32_t psn_next; /* the next PSN to use */
	uint32_t psn_una; /* the oldest PSN not yet acknowledged */
	unsigned ring_head, ring_count; /* oldest slot, slots in use */
	struct xr_slot ring[XR_RING];
	uint8_t *ring_mem;
	unsigned since_ackreq;
	uint64_t rto_us; /* retransmit timeout */
	uint64_t rto_at; /* monotonic us; 0: no timer */
	uint64_t rnr_at; /* an RNR back-off ends then (0: none) */
	uint8_t retry_left, rnr_left; /* 7: infinite */
	uint8_t retry_cnt, rnr_retry;
	bool rd_nak_sent; /* a Read Response gap was answered once */
	unsigned acked_msgs; /* Sends/Writes ACKed, not yet told the QP */
	uint64_t tx_err; /* packets the kernel refused */
	/* ring slots built but not yet handed to the kernel: one sendmmsg
	 * per XR_TX_BATCH (tx_mu) */
	unsigned tx_batch_n;
	struct xr_slot *tx_batch[XR_TX_BATCH];
	atomic_bool gso; /* UDP_SEGMENT works here (cleared at its first refusal) */
	struct roce_icrc_idcache icrc_tx; /* tx_mu */
	/* the responder's Read Responses, built XR_GSO_MAX_SEGS at a time
	 * (rx_mu; made at the first Read) */
	uint8_t *rsp_mem;
	struct xr_slot rsp[XR_GSO_MAX_SEGS];
	struct roce_icrc_idcache icrc_rsp;

	uint8_t *rx_bufs; /* XR_BATCH * XR_RX_BUF, for the rx_mu holder */
	struct roce_icrc_idcache icrc_ids; /* rx_mu */
	uint64_t rx_bad; /* packets dropped: invalid, or not for this QP */
	uint64_t fwd_passed; /* packets passed on to another QP (rx_mu; logged at destroy) */
	/* what went over the wire, for XSOCK_STAT_LOG (xs_stat.h): atomic
	 * adds, as a Read Response leaves under rx_mu, the rest under tx_mu */
	uint64_t wire_tx_pkts, wire_tx_octets, wire_rx_pkts, wire_rx_octets;
};

/* ThreadSanitizer cannot see that what a thread receives from port 4791
 * was sent before by the thread that posted it (the kernel orders them):
 * without it, a Write's placement by the engine thread races with the
 * application's writes to the target buffer made before its peer posted
 * the Write (test-roce-rc under TSan, when the engine thread received
 * first).  A sender releases, a receiver acquires, one object for all
 * (the wire); nothing in other builds. */
#if defined(__SANITIZE_THREAD__)
/* (an atomic TSan models, not its interface calls, which libiwarp.so
 * would have to link: the RMWs make one release sequence) */
extern atomic_uint xr_wire;
static inline void xr_wire_send(void)
{
	atomic_fetch_add_explicit(&xr_wire, 1, memory_order_release);
}
static inline void xr_wire_recv(void)
{
	(void)atomic_load_explicit(&xr_wire, memory_order_acquire);
}
#else
static inline void xr_wire_send(void)
{
}
static inline void xr_wire_recv(void)
{
}
#endif

static inline struct xs_roce_conn *xr_of(struct xs_conn *c)
{
	return (struct xs_roce_conn *)(void *)c;
}
static inline struct xs_conn *xr_conn(struct xs_roce_conn *x)
{
	return (struct xs_conn *)(void *)x;
}

/* ---- xs_roce_conn.c ---- */
/* this thread is receiving (xr_rx_drain): a post from an upcall must not
 * wait for ACKs that only this thread would read */
extern __thread bool xr_in_rx;
/* connections lingering: exit waits for them (xs_roce_loop.c) */
extern atomic_uint xr_lingering;
uint64_t xr_now_us(void);
void xr_hold(struct xs_roce_conn *x);
void xr_put(struct xs_roce_conn *x);
/* Send one packet (any thread): 0, or -errno (counted; the timer
 * retransmits what was lost). */
int xr_xmit(struct xs_roce_conn *x, const uint8_t *pkt, size_t len);
/* Queue ring slot s for the next xr_xmit_flush (tx_mu held); flushes
 * when the batch is full. */
void xr_xmit_queue(struct xs_roce_conn *x, struct xr_slot *s);
void xr_xmit_flush(struct xs_roce_conn *x);
/* Send the built packets v[0..n) (n <= XR_TX_BATCH), runs of one length
 * with UDP GSO; ids: the caller's ICRC cache (its lock). */
void xr_xmit_slots(struct xs_roce_conn *x, struct xr_slot *const *v, unsigned n,
		   struct roce_icrc_idcache *ids);
/* Build and send a packet without payload, not kept (ACK, NAK, Atomic
 * ACK, a Read Request resent shortened). */
int xr_xmit_pkt(struct xs_roce_conn *x, struct roce_pkt *p);
/* Receive what is waiting on x's socket (rx_mu held): packets handled. */
ssize_t xr_rx_drain(struct xs_roce_conn *x, size_t budget);
/* One packet from the peer (rx_mu held): checked, then to the completer
 * or the responder. */
void xr_rx_packet(struct xs_roce_conn *x, const uint8_t *buf, size_t len);
/* Fail the connection: the QP's failed upcall once (rx_mu held, or the
 * caller knows no receive runs). */
void xr_fail(struct xs_roce_conn *x, bool local, const struct xs_err *err);

/* The QP's reference goes (tp->put): linger while packets are unACKed,
 * then unlist.  Any thread, no lock held. */
void xr_let_go(struct xs_roce_conn *x);

/* ---- xs_roce_relay.c (a connection to xsock-roced: x->relay) ---- */
/* Register x's peer with the daemon (x->fwd_fd, ip_tx set): 1 when the
 * peer's address is this host's, 0, or -errno. */
int xr_relay_peer(struct xs_roce_conn *x);
/* k packets of seg octets each (the last may be shorter) as one
 * ROCED_PKTS message: 0, or -errno (-EAGAIN: a loss the timer covers). */
int xr_relay_send(struct xs_roce_conn *x, const struct iovec *pkts, unsigned k, size_t seg);
/* A message from the daemon (*len octets): its RoCE forward body, with
 * *len its length (a remote peer's UDP port noted in ip_rx), or NULL
 * (not ROCED_PKTS).  rx_mu held. */
const uint8_t *xr_relay_pkts(struct xs_roce_conn *x, const uint8_t *buf, size_t *len);

/* ---- xs_roce_fwd.c ---- */
/* Bind x->fwd_fd (-1 if another process has the name): 0 or -errno. */
int xr_fwd_open(struct xs_roce_conn *x);
/* pkt (len octets from the peer) is for another QP: true, its QPN. */
bool xr_fwd_for(const struct xs_roce_conn *x, const uint8_t *pkt, size_t len, uint32_t *qpn);
/* Pass packets of seg octets each (the last may be shorter) on to QP qpn
 * of this address (rx_mu held; never waits). */
void xr_fwd_send(struct xs_roce_conn *x, uint32_t qpn, const uint8_t *pkts, size_t len, size_t seg);
/* Take what was passed on to x, or with xsock-roced all that came (rx_mu
 * held; the engine thread, or a thread polling the CQ): packets taken. */
ssize_t xr_fwd_drain(struct xs_roce_conn *x);

/* ---- xs_roce_loop.c ---- */
/* add: starts the thread with the first; the engine holds a reference
 * until its poll is gone.  remove (any thread, any lock: a flag and a
 * wakeup): unlist x and drop that reference.  kick: drain x soon. */
int xr_loop_add(struct xs_roce_conn *x);
void xr_loop_remove(struct xs_roce_conn *x);
void xr_loop_kick(struct xs_roce_conn *x);

/* ---- xs_roce_req.c ---- */
int xr_req_init(struct xs_roce_conn *x);
void xr_req_destroy(struct xs_roce_conn *x);
int xr_req_send(struct xs_roce_conn *x, unsigned flags, uint32_t inv, uint32_t imm,
		const struct iovec *iov, int cnt);
int xr_req_write(struct xs_roce_conn *x, unsigned flags, uint32_t rkey, uint64_t va,
		 uint32_t imm, const struct iovec *iov, int cnt);
int xr_req_read(struct xs_roce_conn *x, const struct xs_tp_read *r);
int xr_req_atomic(struct xs_roce_conn *x, const struct xs_tp_atomic *a);
/* the completer: a packet the peer's responder sent (rx_mu held) */
void xr_req_response(struct xs_roce_conn *x, const struct roce_pkt *p);
/* the retransmit and RNR timers (tx_mu not held): next deadline or 0 */
uint64_t xr_req_timer(struct xs_roce_conn *x, uint64_t now);

/* ---- xs_roce_resp.c ---- */
/* a request packet (rx_mu held) */
void xr_resp_request(struct xs_roce_conn *x, const struct roce_pkt *p);
/* after a batch: the ACK it owes (rx_mu held) */
void xr_resp_flush_ack(struct xs_roce_conn *x);
/* a request packet while the QP is gone (lingering; rx_mu held) */
void xr_resp_time_wait(struct xs_roce_conn *x, const struct roce_pkt *p);
int xr_resp_read(struct xs_roce_conn *x, uint32_t psn, const uint8_t *src, uint32_t len);
int xr_resp_atomic(struct xs_roce_conn *x, uint32_t psn, uint64_t orig);
int xr_resp_nak(struct xs_roce_conn *x, const struct rdmap_term *t);

#pragma GCC visibility pop

#endif
