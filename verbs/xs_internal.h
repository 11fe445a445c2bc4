/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Internal contract of libiwarp (the rdma-core compatible verbs/CM library):
 * the engine (xs_*.c, xs_engine_priv.h lists them: io_uring thread, TCP
 * connections, MPA handshake, the iWARP stream per connection), the verbs
 * objects (verbs_*.c: device, context, PD, MR/STags, CQ, completion
 * channel, QP) and the connection manager (cm_*.c: rdma_* calls) meet
 * here.  Nothing here is exported.
 *
 * Threads: application threads call verbs/CM; ONE engine thread per process
 * owns every socket's receive side and the handshakes (an application
 * thread polling a CQ may also receive, see xs_conn_poll).  Sends are framed and
 * written on the caller's thread (the fast path) under the connection's tx
 * lock; when the socket does not take them at once that thread waits for
 * room (conn_write_raw, bounded by XSOCK_TX_TIMEOUT_MS).  Only Read and
 * Atomic Responses are queued and flushed by the engine.  Upcalls (xs_conn_ops, accept/connect callbacks) run on the engine
 * thread.  While a libxsock thread blocks on a connection to receive on it
 * itself (xsock_priv_rx_wait), the engine parks that connection: its poll
 * fired, it does not receive, and it looks again about 1 ms later. */
#ifndef XS_INTERNAL_H
#define XS_INTERNAL_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include "iwarp/iw_stream.h"
#include "mpa/mpa.h"
#include "verbs/xs_priv_abi.h"
#include "verbs/xs_stat.h"
#include "verbs/xs_settings.h"

struct rdma_cm_id;
struct rdma_event_channel;

#define XS_EXPORT __attribute__((visibility("default")))

/* ---- descriptors the stack keeps (xs_fdkeep.c; any thread, no lock) -------- */

/* Record fd as the stack's (closefrom/close_range in libxsock skip it);
 * returns fd (so it wraps the call that made it; a negative fd is passed
 * through).  xs_fd_drop forgets it (before it goes to the application);
 * xs_fd_close forgets and closes it. */
int xs_fd_keep(int fd);
void xs_fd_drop(int fd);
/* At exit, before the stack's own handling: libxsock's exit close, once,
 * if it set one and it has not run (xs_close.c; xsock_priv_set_exit_close). */
void xs_run_exit_close(void);
int xs_fd_close(int fd);

/* Spare listening sockets (xs_spare.c): a closed listener's socket is kept
 * XS_SPARE_MS for a listen on the same address in this process.  Any
 * thread; a short internal lock.  keep: true if fd's socket was kept (a
 * duplicate; the caller closes fd).  take: the kept socket bound to
 * exactly addr (still listening, its backlog intact), or -1.  drop_port:
 * closes those on addr's port (a bind there to another address failed
 * because of them); true if there were any.  expire: closes the overdue
 * ones, returns how many are left. */
#define XS_SPARE_MS 1500
bool xs_spare_keep(int fd);
int xs_spare_take(const struct sockaddr *addr, socklen_t len);
bool xs_spare_drop_port(const struct sockaddr *addr);
unsigned xs_spare_expire(uint64_t now_ms);

/* ---- configuration (XSOCK_* of verbs/xs_settings.h, read once) ------------ */

/* Defaults of the pauses a peer that is not another xsock gets (Linux siw
 * needs them, docs/interop.md); an xsock peer (it answers RFC 7306 in the
 * MPA exchange) gets none.  The same as the table's (test-verbs-objects). */
#define XS_SETTLE_MS 100
#define XS_FIN_DELAY_MS 200

struct xs_config {
	uint8_t mpa_rev; /* XSOCK_MPA_REV: 1 or 2 (default 2) */
	bool crc; /* XSOCK_MPA_CRC: ask for CRC (default 0) */
	bool markers; /* XSOCK_MPA_MARKERS: ask for Markers (default 0) */
	uint8_t p2p_rtr; /* XSOCK_MPA_P2P: 0 none, or MPA_RTR_* to offer (write|read|send) */
	bool debug; /* XSOCK_DEBUG: log to stderr */
	unsigned mpa_timeout_ms; /* XSOCK_MPA_TIMEOUT_MS: TCP connect + MPA exchange (default 10000) */
	/* XSOCK_TX_TIMEOUT_MS: a sender blocked by a peer that takes nothing
	 * fails the connection after this long (default 30000, 0 = never) */
	unsigned tx_timeout_ms;
	/* XSOCK_MPA_SETTLE_MS: a responder whose peer is not an xsock waits
	 * this long after its Reply for the peer's first octets before it
	 * may send (default XS_SETTLE_MS) */
	unsigned settle_ms;
	unsigned connect_delay_ms; /* XSOCK_CONNECT_DELAY_MS: rdma_connect waits before its TCP connect (0) */
	/* XSOCK_CLASSIFY_MS: a mixed listener's wait for a client's first
	 * octets before it calls the connection plain TCP (default 200, 0 =
	 * mixed listeners off: MPA only) */
	unsigned classify_ms;
	/* XSOCK_FIN_DELAY_MS: rdma_disconnect's FIN to a peer that is not an
	 * xsock leaves this much later unless the peer's comes first (default
	 * XS_FIN_DELAY_MS; siw, docs/interop.md) */
	unsigned fin_delay_ms;
	/* XSOCK_LINGER_MS: a connection closed before the peer's FIN is read
	 * and drained by the engine until that FIN, at most this long (default
	 * 1000, 0 = close at once) */
	unsigned linger_ms;
	/* XSOCK_RNR_MS: a Send that arrives before its receive is posted
	 * waits this long for one (default 1000, 0 = Terminate at once) */
	unsigned rnr_ms;
	/* XSOCK_RDMAP_EXT: announce RFC 7306 (immediate data, atomics) in
	 * the MPA exchange (default 1; agreed only with another xsock) */
	bool rdmap_ext;
	/* XSOCK_ZC_MIN: a write of this many octets or more to a peer on
	 * another host leaves with io_uring SENDMSG_ZC (default 65536,
	 * 0 = never; xs_zc.c) */
	unsigned zc_min;
	/* XSOCK_ZC=always: zero-copy also to a peer on this host, where the
	 * kernel copies anyway (to measure it; default: auto) */
	bool zc_always;
	/* XSOCK_ROCE_OOO: the RoCE responder places RDMA Write MIDDLE/LAST
	 * packets that arrive ahead of a gap (default 1; xs_roce_resp.c) */
	bool roce_ooo;
	bool stat; /* XSOCK_STAT: live counters for xsock-stat(1) in /dev/shm (default 1; xs_stat.c) */
	/* XSOCK_EVENT_SPIN_US: ibv_get_cq_event receives on the channel's
	 * CQs this long before it sleeps (default 40, verbs_cq.c) */
	unsigned event_spin_us;
};

/* struct xs_config from the settings table, made on the first call; any
 * thread, no lock after that. */
const struct xs_config *xs_config(void);
/* The process's settings table (xs_config.c; the XSOCK_* that struct
 * xs_config does not hold): any thread, no lock of the caller's. */
struct xs_settings *xs_settings(void);
void xs_sleep_ms(unsigned ms); /* the whole time, across signals */

/* CLOCK_REALTIME ns from now, for pthread_cond_timedwait. */
static inline struct timespec xs_abstime_ns(uint64_t ns)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ns += (uint64_t)ts.tv_nsec;
	ts.tv_sec += (time_t)(ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	return ts;
}
void xs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- zero-copy send (xs_zc.c) ---------------------------------------------
 * Called by the thread that owns a connection's transmit side, on a ring of
 * its own (made on first use, freed at thread exit; a child of fork makes a
 * new one).  No lock of ours is taken. */

/* Queue iov on the TCP socket fd with SENDMSG_ZC, without waiting for room.
 * Returns the octets queued, -EAGAIN (no room), -EOPNOTSUPP (no zero-copy
 * in this process: send with sendmsg) or -errno.  The pages stay the
 * kernel's until xs_zc_settle. */
ssize_t xs_zc_send(int fd, const struct iovec *iov, int cnt);
/* Wait until the kernel has let go of every page this thread sent with
 * xs_zc_send (at most timeout_ms, 0 = no bound).  *copied: the kernel
 * copied them anyway (a peer on this host).  0, -ETIMEDOUT or -errno. */
int xs_zc_settle(unsigned timeout_ms, bool *copied);

/* ---- device limits (what ibv_query_device reports and what is enforced) -- */

/* per process; a QP costs no fixed table slot, only its memory and one TCP
 * fd, so the limit is there for ibv_query_device and a runaway program */
#define XS_MAX_QP 16384
#define XS_MAX_QP_WR 4096
#define XS_MAX_SGE 16
/* libfabric's ofi_rxm sizes one CQ for all its connections: (rx + tx) x
 * FI_UNIVERSE_SIZE (1024) = 262144 by default.  The ring is calloc'd, so
 * only the entries used cost memory.  irdma reports about as many. */
#define XS_MAX_CQE (1 << 20)
#define XS_MAX_MR_SIZE (1ull << 40)
#define XS_MAX_IRD 128
#define XS_MAX_ORD 128
#define XS_MAX_INLINE 256
/* shared receive queues: WRs are taken by the QPs as Sends arrive, so an
 * SRQ costs only its posted WRs' records */
#define XS_MAX_SRQ 4096
#define XS_MAX_SRQ_WR (4 * XS_MAX_QP_WR)
#define XS_MAX_SRQ_SGE XS_MAX_SGE
#define XS_MAX_PD_PRIV 252 /* MPA private data a ULP may send (siw accepts 256 incl. the RFC 6581 header) */

/* ---- verbs objects (verbs_*.c) --------------------------------------------- */

struct xs_context; /* wraps struct verbs_context */

/* The process-wide context CM ids use (id->verbs); opened on first use. */
struct ibv_context *xs_default_context(void);

/* STag lookup for remote access (MR registered with remote rights).  Fills
 * *dst for [to, to + len) or fails with the Terminate triple: invalid STag
 * (unknown, invalidated, wrong key) DDP/1/0x00 for tagged placement or
 * RDMAP/1/0x00 for a Read source; out of bounds DDP/1/0x01 or RDMAP/1/0x01;
 * wrong PD DDP/1/0x02 or RDMAP/1/0x03; missing right RDMAP/1/0x02; a Read
 * source whose TO + len wraps RDMAP/1/0x04. */
enum xs_access_kind {
	XS_ACCESS_REMOTE_WRITE, /* tagged RDMA Write placement */
	XS_ACCESS_REMOTE_READ, /* source of a Read Response we send */
	XS_ACCESS_READ_SINK, /* sink of a Read Response we receive (local write) */
	XS_ACCESS_REMOTE_ATOMIC, /* target of an RFC 7306 Atomic we carry out */
};
int xs_mr_resolve(struct ibv_pd *pd, uint32_t stag, uint64_t to, uint64_t len,
		  enum xs_access_kind kind, uint8_t **dst, struct xs_err *err);

/* Invalidate a remote STag named by Send with Invalidate (RFC 5040 6.?):
 * 0, or -EINVAL with "STag cannot be invalidated": RDMAP/2/0x09 for an
 * unknown STag, RDMAP/1/0x09 for an MR of another PD. */
int xs_mr_invalidate(struct ibv_pd *pd, uint32_t stag, struct xs_err *err);

/* Does cq hold a completion of QP qp_num the application has not polled?
 * Any thread; takes the CQ's lock. */
bool xs_cq_has_qp(struct ibv_cq *cq, uint32_t qp_num);

/* ---- connections (xs_engine.c; xs_tx.c, xs_rx.c, xs_close.c as noted) ----- */

struct xs_conn;

/* Upcalls from the engine thread to the QP attached to an established
 * connection. */
struct xs_conn_ops {
	/* tagged placement: see xs_mr_resolve; op tells Write from Read Response */
	int (*resolve)(void *qp, enum rdmap_opcode op, uint32_t stag, uint64_t to, uint32_t len,
		       uint8_t **dst, struct xs_err *err);
	/* an untagged message completed (Send*, Read Request, Terminate) */
	void (*deliver)(void *qp, enum rdmap_opcode op, uint32_t qn, const struct ddp_delivery *d);
	/* last segment of a tagged message placed (Read Response completes a Read) */
	void (*tagged_last)(void *qp, enum rdmap_opcode op, const struct ddp_hdr *h);
	/* acked transports (struct xs_tp_params.acked): the n oldest Sends
	 * and Writes were acknowledged by the peer, before any Read or
	 * Atomic posted after them completes */
	void (*acked)(void *qp, unsigned n);
	/* the stream failed: a protocol error we detected (local = true, a
	 * Terminate with err was sent), or the peer's Terminate was received
	 * (delivered first through deliver on QN 2), or the TCP connection
	 * broke/closed (err = LLP/0/0x01).  Called once; no upcall follows. */
	void (*failed)(void *qp, bool local, const struct xs_err *err);
};

/* Attach a QP to an established connection: its queues (QN 0 receive, QN 1
 * Read Requests with IRD buffers) become the stream's DDP queues and the
 * engine starts receiving.  The QP transmits through the calls below. */
int xs_conn_attach(struct xs_conn *c, const struct xs_conn_ops *ops, void *qp,
		   struct ddp_queue *q_send, struct ddp_queue *q_readreq,
		   struct ddp_queue *q_term, struct ddp_queue *q_aresp);
/* q_aresp: QN 3 (Atomic Responses, one 12-octet buffer per ORD), only on
 * a connection that agreed on RFC 7306 (NULL otherwise: an Atomic
 * Response is then an unexpected opcode anyway). */

/* The size of an IRD buffer (QN 1): a Read Request's 28 octets, or an
 * Atomic Request's 52 once RFC 7306 is agreed.  Any thread, no lock. */
static inline uint32_t xs_ird_buf_len(const struct mpa_agreed *a)
{
	return a->rdmap_ext ? RDMAP_ATOMIC_REQ_LEN : RDMAP_READ_REQ_LEN;
}

/* The engine holds this lock while it feeds received bytes to the stream
 * (placement into the QP's DDP queues); post_recv takes it to append to
 * the same queues.  xs_rx.c. */
void xs_conn_rx_lock(struct xs_conn *c);
void xs_conn_rx_unlock(struct xs_conn *c);

/* Transmit on the caller's thread: each call frames one RDMAP message and
 * returns once every octet is in the kernel's socket buffer (it waits for
 * room when TCP pushes back), so the caller may complete the WR on return.
 * -EPIPE / -ECONNRESET once the connection is gone; -ETIMEDOUT when the
 * peer took nothing for XSOCK_TX_TIMEOUT_MS (the connection is then shut
 * down, and the engine ends the stream as for a peer's close).  xs_tx.c,
 * as are the calls down to xs_conn_atomic_resp. */
int xs_conn_send(struct xs_conn *c, enum rdmap_opcode op, uint32_t inv_stag,
		 const struct iovec *iov, int cnt);
int xs_conn_tagged(struct xs_conn *c, enum rdmap_opcode op, uint32_t stag, uint64_t to,
		   const struct iovec *iov, int cnt);
int xs_conn_read_req(struct xs_conn *c, const struct rdmap_read_req *rr);
/* RFC 7306 Atomic Request (QN 1), as xs_conn_read_req: the caller's
 * thread, tx taken for the call; 0 or -errno. */
int xs_conn_atomic_req(struct xs_conn *c, const struct rdmap_atomic_req *r);
/* A chain of Sends and Writes posted together leaves in one sendmsg:
 * xs_conn_cork takes the transmit side for this thread (0 or -EPIPE), the
 * xs_conn_send/xs_conn_tagged calls that follow on this thread gather
 * their FPDUs (returning once they are gathered), xs_conn_cork_flush
 * writes what is gathered (0 or the error of the write, as xs_conn_send)
 * and xs_conn_uncork flushes and gives the transmit side back.  WRs
 * complete only after the flush that carried them. */
int xs_conn_cork(struct xs_conn *c);
int xs_conn_cork_flush(struct xs_conn *c);
int xs_conn_uncork(struct xs_conn *c);
/* Send a Terminate; on the engine thread (a QP upcall) the stream then
 * fails at once: failed(local = true, t->cause) and the closed callback. */
int xs_conn_terminate(struct xs_conn *c, const struct rdmap_term *t);

/* Responder side of RDMA Read (called from deliver on QN 1, engine thread):
 * queue a Read Response of len octets from src (already checked with
 * xs_mr_resolve) to the requester's sink.  The engine sends queued
 * responses in order without ever blocking its thread.  -ENOSPC beyond
 * the agreed IRD. */
int xs_conn_read_resp(struct xs_conn *c, uint32_t sink_stag, uint64_t sink_to,
		      const uint8_t *src, uint32_t len);
/* Responder side of an RFC 7306 Atomic (deliver on QN 1, the operation
 * already carried out): queue its Atomic Response (QN 3) with the word's
 * original value, in order with the queued Read Responses and counted
 * against the same IRD.  Same thread and return as xs_conn_read_resp. */
int xs_conn_atomic_resp(struct xs_conn *c, uint32_t req_id, uint64_t value);

/* The fast path of a polling application thread (ibv_poll_cq on an empty
 * CQ, the brief spin of ibv_get_cq_event): receive what the socket already
 * holds on the caller's thread, placing data and completing receives
 * exactly as the engine would, without a thread hand-off.  Never blocks:
 * -EBUSY at once if another thread (the engine) is receiving on this
 * connection.  A failure found here is handed to the engine, which ends
 * the stream.  Returns the octets consumed (at most about budget).
 * maybe: only if the socket may hold something; 0 without a system call
 * when the last receive emptied it and the engine's poll watches it.
 * xs_rx.c, as is xs_conn_rx_kick. */
ssize_t xs_conn_poll(struct xs_conn *c, size_t budget, bool maybe);
/* An application thread is about to wait on c's TCP socket to receive
 * itself (xsock_priv_rx_wait, cm_proc.c, for libxsock): on = 1 begin
 * (the socket or -1), 0 end, 2 "should the watch stop" (xs_rx.c).  Any
 * thread, no lock. */
int xs_conn_rx_wait(struct xs_conn *c, int on);
/* RNR (XSOCK_RNR_MS): a Send that finds no posted receive stops the
 * stream until one is posted, for at most that long (then DDP/2/0x02 as
 * before).  post_recv calls this after posting (never = false); the QP in
 * ERROR calls it with never = true: no receive will come, fail now.  Any
 * thread, any lock. */
void xs_conn_rx_kick(struct xs_conn *c, bool never);
/* Keep c allocated while someone other than its owner (a CQ) refers to
 * it; xs_conn_release drops that reference. */
void xs_conn_hold(struct xs_conn *c);
void xs_conn_release(struct xs_conn *c);

/* The negotiated MPA parameters. */
const struct mpa_agreed *xs_conn_agreed(const struct xs_conn *c);
/* Addresses of the TCP connection. */
int xs_conn_addrs(const struct xs_conn *c, struct sockaddr_storage *local,
		  struct sockaddr_storage *peer);
/* The connection's TCP socket, for libxsock's socket options: get or set
 * an option on it (XSOCK_TCP_GETOPT/XSOCK_TCP_SETOPT), or abort it with an RST
 * (XSOCK_TCP_ABORT, the SO_LINGER {1, 0} close; xs_priv_abi.h).  0 or
 * -errno. */
int xs_conn_tcp(struct xs_conn *c, int op, int level, int name, void *val, socklen_t *len);

/* The CM's view of the connection's end: called once on the engine thread
 * when the stream ends for any reason (peer FIN/RST, Terminate either way,
 * local disconnect completed), after the QP's failed upcall.  status 0 for a
 * graceful close, -errno otherwise. */
typedef void (*xs_conn_closed_fn)(void *ctx, int status);
void xs_conn_set_closed_cb(struct xs_conn *c, xs_conn_closed_fn cb, void *ctx);

/* Graceful close: FIN after queued tx; the peer sees DISCONNECTED.  The
 * attached QP gets failed(LLP/0/0x01) when the peer's FIN/RST arrives.
 * xs_close.c, as is xs_conn_put. */
void xs_conn_disconnect(struct xs_conn *c);
/* Drop the owner's reference (after disconnect or on destroy). */
void xs_conn_put(struct xs_conn *c);

/* ---- exec hand-over (xs_conn_export.c, for xs_handover.c; xsock(7) EXEC) --- */

/* What a connection's stream is at an FPDU boundary: all a new process
 * needs to go on with it over the same TCP socket. */
struct xs_conn_wire {
	struct mpa_agreed agreed;
	uint32_t tx_pos, rx_pos; /* MPA stream positions (Markers) */
	uint32_t tx_msn[3]; /* next MSN we send per untagged queue */
	uint32_t rx_msn[3]; /* next MSN we expect per untagged queue */
	struct xs_stat_carry carry; /* the counts so far (xs_stat.h) */
	bool initiator; /* this side connected (its XSOCK_STAT_LOG line says so) */
};
/* Application thread, before execve: stop the connection where its stream
 * is at an FPDU boundary both ways (receiving on this thread, bounded by
 * timeout_ms, if the peer's FPDU is half in), and keep it stopped: the
 * engine neither receives nor sends on it until xs_conn_export_undo.  A
 * duplicate of its TCP socket without close-on-exec, with *w filled, or
 * -ETIMEDOUT, -EPIPE (the stream is over), -EBUSY (another process owns
 * it). */
int xs_conn_export(struct xs_conn *c, struct xs_conn_wire *w, int timeout_ms);
void xs_conn_export_undo(struct xs_conn *c); /* execve failed: go on */
/* The new process: a connection on the inherited TCP socket fd, past its
 * handshake (CONN_ACCEPTED), whose stream goes on from w once a QP
 * attaches (xs_qp_bind_conn).  NULL with errno set. */
struct xs_conn *xs_conn_adopt(int fd, const struct xs_conn_wire *w);

/* cm_proc.c: an id on channel ch (NULL: its own) for an adopted connection,
 * and the start of its stream once the application created its QP (no
 * ESTABLISHED event: the connection was established before the execve).
 * NULL with errno / 0 or -errno. */
struct rdma_cm_id *xs_cm_adopt(struct rdma_event_channel *ch, void *context, struct xs_conn *conn);
int xs_cm_adopt_start(struct rdma_cm_id *id);
/* verbs_mr.c: register with a given STag (and TO base iova): the peer of an
 * adopted connection holds it.  NULL with errno EEXIST if it is in use. */
struct ibv_mr *xs_mr_reg_stag(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
			      unsigned access, uint32_t stag);

/* ---- handshakes (xs_listen.c, xs_handshake.c, xs_connect.c) --------------- */

/* The CM reaches these through the iWARP transport's table (xs_tp_iwarp.c). */

struct xs_listener;

/* Responder side: a TCP connection arrived and its MPA Request was read
 * (engine thread).  The CM takes ownership of conn (or calls
 * xs_conn_reject / xs_conn_put). */
typedef void (*xs_accept_fn)(void *ctx, struct xs_conn *conn, const struct mpa_frame *req);

/* A mixed listener's plain TCP connection (engine thread, the listener's
 * lock held as for xs_accept_fn): fd is the kernel socket (nonblocking,
 * close-on-exec, nothing read from it); the callee owns it. */
typedef void (*xs_plain_fn)(void *ctx, int fd);

/* Listen on addr; returns NULL with errno set.  The bound address is
 * readable with xs_listener_addr.  With plain (a mixed listener), each
 * accepted connection is classified by its first octets, peeked: the MPA
 * Request key goes on to cb, anything else (or nothing within
 * XSOCK_CLASSIFY_MS, or the peer's FIN) to plain.  Without, a connection
 * that sends no MPA Request is closed.  v6only: IPV6_V6ONLY for an AF_INET6
 * listener (RDMA_OPTION_ID_AFONLY), -1 for the system's default. */
struct xs_listener *xs_listen(const struct sockaddr *addr, socklen_t len, int backlog,
			      int v6only, xs_accept_fn cb, xs_plain_fn plain, void *ctx);
int xs_listener_addr(const struct xs_listener *l, struct sockaddr_storage *addr);
void xs_listener_close(struct xs_listener *l); /* no callback after it returns */

/* Responder: accept with our prefs (ird/ord/pdata from rdma_accept's
 * conn_param).  Sends the Reply; on success the connection is established
 * (attach the QP before calling so no data is missed: the engine starts
 * receiving when this returns 0).  -ECONNREFUSED if negotiation rejected it
 * (a Reply with R=1 was sent), -errno on socket errors. */
int xs_conn_accept(struct xs_conn *c, const struct mpa_prefs *prefs);
/* Responder: reject with private data (Reply R=1), then close. */
int xs_conn_reject(struct xs_conn *c, const void *pdata, uint8_t len);

/* Initiator: connect to dst (optionally from src), send the Request, read
 * the Reply.  cb runs on the engine thread exactly once:
 *   status 0              established (reply = the peer's Reply; attach
 *                         the QP inside cb: receiving starts after cb)
 *   -ECONNREFUSED         the peer rejected (reply has its private data)
 *   -ETIMEDOUT, -ECONNRESET, -EHOSTUNREACH, -EPROTO ...  conn is NULL/closed */
typedef void (*xs_connect_fn)(void *ctx, struct xs_conn *conn, int status,
			      const struct mpa_frame *reply);
/* A connect refused (no listener yet) is dialled again for this long by
 * rdma_connect: servers tell their client a port before they listen on it
 * (perftest -R's second connection, qperf -cm1 0.4.11); the kernel's CM
 * refuses at once and these programs' own retries are racy or broken.  A
 * connect nobody will ever accept is refused this much later. */
#define XS_REDIAL_MS 1500
int xs_connect(const struct sockaddr *dst, socklen_t dlen, const struct sockaddr *src,
	       socklen_t slen, const struct mpa_prefs *prefs, unsigned redial_ms, xs_connect_fn cb,
	       void *ctx);

/* ---- fork (xs_fork.c, xs_engine_fork.c; see xsock(7) FORK) ---------------- */

/* A connection's standing in this process after a fork. */
enum xs_fork_mode {
	XS_FORK_MINE = XSOCK_PRIV_FORK_MINE, /* never shared, or claimed by this process */
	/* shared by a fork, nobody claimed it yet: not received on */
	XS_FORK_DORMANT = XSOCK_PRIV_FORK_UNCLAIMED,
	XS_FORK_FOREIGN = XSOCK_PRIV_FORK_FOREIGN, /* another process uses it: no I/O, no FIN from here */
};

/* A MAP_SHARED page run of owner words made at a fork; refcounted by the
 * connections of this process that use one of its words. */
struct xs_arena;
void xs_arena_ref(struct xs_arena *a);
void xs_arena_unref(struct xs_arena *a); /* NULL is fine */

/* Claim a connection for this process: 0 (now or already ours), -EBUSY
 * if another process claimed it first.  Called by every transmit and by
 * the receive fast path; the engine receives on it from then on. */
int xs_conn_claim(struct xs_conn *c);
int xs_conn_fork_mode(struct xs_conn *c); /* enum xs_fork_mode, without claiming */
/* A listener inherited by a child accepts in this process from now on;
 * released, it accepts nothing until claimed again. */
void xs_listener_claim(struct xs_listener *l);
void xs_listener_release(struct xs_listener *l);

unsigned xs_engine_fork_prepare(void);
void xs_engine_fork_assign(struct xs_arena *a, _Atomic int *slots);
void xs_engine_fork_parent(void);
void xs_engine_fork_child(void);
/* The child gets private eventfds under the same fd numbers for every CM
 * event channel (cm_channel.c) and completion channel (verbs_cq.c): the
 * parent's are shared files, and reading one would take the other's
 * wake-up. */
void xs_cm_fork_child(void);
void xs_cq_fork_child(void);
/* Replace the file under fd by a new eventfd (same flags) holding value. */
int xs_fork_new_eventfd(int fd, unsigned flags, uint64_t value);
/* The CM id's connection (through its QP, or the CM's own) or listener
 * (cm_proc.c; xs_qp_conn: verbs_qp.c). */
struct xs_conn *xs_cm_conn(struct rdma_cm_id *id);
struct xs_listener *xs_cm_listener(struct rdma_cm_id *id);
/* A RoCE id's listener (xs_roce_cm.h), or NULL. */
struct xs_rcm_listener;
struct xs_rcm_listener *xs_cm_rlistener(struct rdma_cm_id *id);
struct xs_conn *xs_qp_conn(struct ibv_qp *qp);

/* ---- QP <-> CM (verbs_qp.c, used by cm_conn.c) ---------------------------- */

/* The QP's RDMA Read limits for the MPA exchange (from ibv_qp_init_attr /
 * modify_qp max_rd_atomic / max_dest_rd_atomic, capped at XS_MAX_IRD/ORD). */
void xs_qp_read_limits(struct ibv_qp *qp, uint16_t *ird, uint16_t *ord);
/* The connection is established with these agreed limits: attach the QP
 * (xs_conn_attach with its queues), move it to RTS.  0 or -errno. */
int xs_qp_bind_conn(struct ibv_qp *qp, struct xs_conn *c, const struct mpa_agreed *agreed);
/* Local disconnect / destroy: move to ERROR and flush every WR. */
void xs_qp_flush(struct ibv_qp *qp);
/* The QP numbered qpn on ctx (NULL: any device) while it exists, or NULL:
 * an external QP named by conn_param.qp_num (verbs_qp_table.c).  Any
 * thread, no lock of the caller's. */
struct ibv_qp *xs_qp_lookup(struct ibv_context *ctx, uint32_t qpn);

#endif
