/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* What the engine's files share: the connection and listener objects, the
 * engine's own state, and the calls they make across files.  Nothing here
 * leaves libiwarp; the verbs objects and the CM use xs_internal.h.
 *
 *   xs_engine.c      the ring and its thread loop, commands, references,
 *                    arming, accessors
 *   xs_tx.c          transmit: tx ownership, cork, zero-copy, Read and
 *                    Atomic Responses (xs_tx_engine), siw kicks
 *   xs_rx.c          receive and placement, stream failure, the receive
 *                    fast path, RNR stalls, parked connections
 *   xs_handshake.c   MPA exchanges, mixed-listener classification,
 *                    handshake deadlines, accept/reject
 *   xs_close.c       delayed FIN, lingering close, the late tick, exit wait
 *   xs_connect.c     xs_connect and the redial of refused connects
 *   xs_listen.c      listening sockets and their accept loop
 *   xs_engine_fork.c claims and the engine's side of fork
 *   xs_conn_export.c exec hand-over: export and adopt a connection
 *
 * Threads: "engine thread" below means the one thread of engine_main
 * (xs_eng_on_thread); it alone touches the ring, the engine's lists (hs,
 * parked, late, rnr, redial, kick) and the per-connection fields its
 * comments call "engine thread".  Locks: xs_eng.reg_mu (the fork registry)
 * before xs_eng.mu; a connection's rx_mu (receive state) before its tx_mu
 * (transmit ownership, never held across a write); xs_eng.mu (command
 * queues, references, late_count) innermost, as xs_eng_command and the
 * references take it under rx_mu (xs_engine_fork_prepare holds it and
 * only trylocks rx_mu).  No call below may be made holding xs_eng.mu. */
#ifndef XS_ENGINE_PRIV_H
#define XS_ENGINE_PRIV_H

#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "verbs/xs_internal.h"

/* hidden like their definitions, so calls and TLS stay module-local */
#pragma GCC visibility push(hidden)

enum conn_state {
	CONN_CONNECTING, /* initiator: TCP connect in progress */
	CONN_WAIT_REPLY, /* initiator: Request sent */
	CONN_WAIT_REQUEST, /* responder: reading the Request */
	CONN_WAIT_ACCEPT, /* responder: Request handed to the CM */
	CONN_ACCEPTED, /* handshake done, waiting for a QP to attach */
	CONN_ESTABLISHED, /* receiving */
	/* the owner closed before the peer's FIN: the engine reads and drops
	 * what still comes until that FIN (or XSOCK_LINGER_MS), so that
	 * closing a socket with unread octets does not reset the connection */
	CONN_LINGER,
	CONN_CLOSED,
};

#define XS_RBUF 65536
#define XS_RR_MAX XS_MAX_IRD
/* A corked chain: gather entries, and octets copied (FPDU headers,
 * trailers and small payloads, which may not outlive their WR's call). */
#define XS_CORK_IOV 256 /* a 1 MiB Write in 32 KiB FPDUs: ~100 pieces */
#define XS_CORK_BUF 8192
/* the engine's batch of FPDUs for one sendmsg (Read Responses) */
#define XS_REM_IOV (256 + MPA_TX_MAX_IOV)
#define XS_REM_BUF 8192
#define XS_HS_MAX (MPA_RR_HDR_LEN + MPA_PD_MAX)
#define XS_RX_OVER_MAX (256u << 20)

/* One queued RDMA Read Response or RFC 7306 Atomic Response (responder
 * side): both count against the IRD and leave in the order their
 * requests came. */
struct xs_rresp {
	uint32_t sink_stag;
	uint64_t sink_to;
	const uint8_t *src;
	uint32_t len;
	bool atomic; /* an Atomic Response: req_id, value */
	uint32_t req_id;
	uint64_t value;
};

/* io_uring user_data tags (low bits of the object pointer) */
enum { TAG_WAKE = 1, TAG_LISTENER = 2, TAG_CONN = 3, TAG_TIMER = 4, TAG_CTIMER = 5, TAG_PARK = 6,
       TAG_LATE = 7 };

struct xs_conn {
	int fd;
	/* Read by application threads (posts, polls, accept) while the engine
	 * changes them: atomic, so each reader sees one value, not a torn or
	 * stale one (ThreadSanitizer found these). */
	_Atomic enum conn_state state;
	/* owner + engine + a CQ poll in progress: atomic, so that taking one
	 * (every empty ibv_poll_cq does) needs no lock */
	atomic_int refs;
	_Atomic bool owner_gone;
	bool initiator;
	bool poll_armed;
	bool want_out; /* POLLOUT wanted (pending Read Responses) */
	_Atomic bool dead; /* stream failed or closed: no more tx */
	_Atomic bool fin_sent;
	bool disconnect_asked;
	bool engine_ref_dropped;
	/* engine thread: on xs_eng.late for a FIN due at fin_due_ms (0 = none,
	 * XSOCK_FIN_DELAY_MS) or a linger ending at linger_end_ms */
	struct xs_conn *late_next;
	bool on_late_list;
	uint64_t fin_due_ms;
	uint64_t linger_end_ms;
	/* engine thread: an initiator whose peer is not an xsock sends
	 * zero-length RDMA Writes after the Reply (on xs_eng.kick, xs_tx_kick_scan) */
	struct xs_conn *kick_next;
	bool on_kick_list;
	bool kick_pending; /* xs_tx_engine frames one */
	bool kick_spoke; /* xs_tx_kick_scan has seen the peer's first octets */
	_Atomic bool rx_any; /* the peer sent an octet after the handshake (rx_mu) */
	_Atomic unsigned tx_writes; /* sendmsg calls that sent FPDU octets */
	uint8_t zc; /* large writes: ZC_UNKNOWN, ZC_ON (SENDMSG_ZC) or ZC_OFF (tx owner) */
	_Atomic unsigned tx_at_rx; /* tx_writes when the peer's first octets came */
	uint64_t kick_due_ms;
	unsigned kick_wait_ms;

	/* handshake */
	struct mpa_prefs prefs;
	uint8_t prefs_pdata[MPA_PD_MAX];
	struct mpa_frame req; /* sent (initiator) or received (responder) */
	uint8_t req_buf[XS_HS_MAX];
	uint8_t hs_buf[XS_HS_MAX];
	size_t hs_have, hs_need;
	struct mpa_agreed agreed;
	xs_connect_fn connect_cb;
	void *connect_ctx;
	struct xs_listener *listener;
	/* mixed listener: the first octets are not classified yet (engine
	 * thread); cls_partial: a strict prefix of the key is waiting */
	bool cls_pending;
	bool cls_partial;
	uint64_t cls_deadline_ms;

	/* receive (engine thread, under rx_mu) */
	pthread_mutex_t rx_mu;
	struct iw_rx rx;
	const struct xs_conn_ops *ops;
	void *qp;
	bool term_seen;
	struct xs_err term_cause;
	uint8_t *rbuf;
	bool rx_large; /* large FPDUs are streaming in: read headers only */
	int rx_defer; /* XS_RX_DEFER_*: an app thread's receive found the end */
	/* an app thread's receive queued Read Responses: it sends them after
	 * (xs_conn_poll, xs_tx_caller_pump) */
	bool rx_rr_queued;
	struct xs_err rx_defer_err;
	struct rdmap_term rx_defer_term; /* QPTERM: the QP's Terminate to send */
	/* Application threads blocked until this socket is readable, to
	 * receive on it themselves (libxsock, xsock_priv_rx_wait): while there
	 * are any, the engine's poll parks the connection instead of
	 * receiving, so one wake-up (theirs) carries the data. */
	_Atomic int app_waiters;
	/* rx_watch: the engine's poll waits for POLLIN on the socket (it
	 * receives what comes); rx_empty: the last receive found the socket
	 * empty.  Both: an application thread's "maybe" receive
	 * (xs_conn_poll) has nothing to find and skips the system call. */
	_Atomic bool rx_watch;
	_Atomic bool rx_empty;
	_Atomic bool rx_app_eof; /* an application thread's receive met FIN or an error */
	/* The engine's poll fired while an application thread held rx_mu:
	 * the engine did not re-arm (the socket stays readable, so the poll
	 * would fire at once, again and again, for as long as the holder
	 * works: a close flushing its receives); the holder re-arms it as it
	 * lets go (xs_rx_unlock). */
	_Atomic bool rx_missed;
	/* The poll armed once as the handshake ended (the Request went to
	 * the CM, or the Reply came), while c waits for its QP, is still
	 * pending: the attach needs no command to the engine
	 * (xs_conn_attach).  Nothing is read before the QP attaches. */
	_Atomic bool attach_poll;
	bool attach_poll_used;
	/* RNR: a Send arrived before its receive was posted.  The stream
	 * stops there (rx_mu): the rest of rbuf waits at rx_pend_off, the
	 * socket is not read (TCP's window holds the sender back, as a busy
	 * RNIC's ACKs would) until post_recv kicks it (xs_conn_rx_kick) or
	 * XSOCK_RNR_MS passes, which Terminates as RFC 5041 wants. */
	_Atomic bool rx_stalled;
	_Atomic bool rnr_off; /* no receive can come any more: fail at once */
	size_t rx_pend_off, rx_pend_len;
	/* An application thread waiting for socket room while the stream is
	 * stalled reads what arrives into rx_over (rx_mu; rx_pend moved to
	 * its start): both ends' posters blocked on full sockets while both
	 * engines wait for receives that only those posters' callers will
	 * post would wait for each other until XSOCK_RNR_MS (qperf
	 * rc_bi_bw).  Consumed before the socket; at most XS_RX_OVER_MAX. */
	uint8_t *rx_over;
	size_t rx_over_cap, rx_over_off, rx_over_len;
	uint64_t rnr_due_ms; /* engine thread: on xs_eng.rnr until then */
	bool on_rnr_list;
	struct xs_conn *rnr_next;
	/* initiator: a refused connect is dialled again until redial_end_ms
	 * (engine thread; see xs_connect_redial_track) */
	struct sockaddr_storage dst, src;
	socklen_t dst_len, src_len;
	uint64_t redial_end_ms, redial_due_ms;
	unsigned redial_wait_ms;
	bool on_redial_list, refused_now;
	bool refused_counted; /* in xs_eng.refused_conns (xs_connect_refused) */
	struct xs_conn *redial_next;
	/* initiator: the order of its xs_connect among all (xs_connect_blocked);
	 * req_held: connected and on xs_eng.redial, its MPA Request waiting for
	 * an earlier connect's */
	uint64_t dial_seq;
	bool req_held;
	_Atomic bool rx_parked; /* on xs_eng.parked, poll not re-armed (engine thread writes) */
	struct xs_conn *park_next;
	/* app_rx_gen: bumped by each receive on an application thread;
	 * park_gen: its value when the engine last parked or kept the
	 * connection parked (engine thread) */
	_Atomic unsigned app_rx_gen;
	unsigned park_gen;

	/* transmit: exclusive ownership by one thread at a time */
	pthread_mutex_t tx_mu;
	pthread_cond_t tx_cv;
	bool tx_busy; /* someone is writing FPDUs */
	bool tx_engine; /* ... and it is the engine (a partial FPDU is pending) */
	/* responder, initiator not an xsock (XSOCK_MPA_SETTLE_MS): nothing is
	 * sent until its first octets (rx_any) or settle_end_ms (tx_mu; kept
	 * away from the receive side's flags, which rx_mu guards) */
	bool settle_wait;
	uint64_t settle_end_ms;
	struct iw_tx tx;
	/* engine: the FPDUs it framed (a batch of Read Responses), not yet
	 * all on the socket (tx_rem, their headers and trailers in tx_rem_buf) */
	int tx_remcnt;
	size_t tx_rem_used;
	/* a corked WR chain (xs_conn_cork, the posting thread only): FPDUs
	 * gathered in cork_iov go out with one sendmsg at the flush */
	int cork_cnt;
	size_t cork_len, cork_used;
	unsigned rr_head, rr_count; /* the Read Responses queued in rr */
	uint8_t ar_body[RDMAP_ATOMIC_RESP_LEN]; /* the Atomic Response going out */
	struct ddp_segmenter rr_seg;
	bool rr_active;

	xs_conn_closed_fn closed_cb;
	void *closed_ctx;
	bool closed_reported;
	int rx_reset; /* an application thread's receive took the RST's error (rx_mu) */

	/* RFC 6581 peer-to-peer mode: the responder sends nothing until the
	 * initiator's RTR arrived (rtr_wait); an initiator that sent a Read RTR
	 * absorbs the zero-length Read Response (rtr_rresp). */
	bool rtr_wait;
	/* the Read RTR's answer is queued for the engine (it came in on an
	 * application thread's receive): the ULP may not send before it */
	bool rtr_answering;
	bool rtr_rresp;
	bool rtr_eat_last; /* the tagged message being placed is the RTR's */
	struct ddp_queue *q_readreq; /* the QP's IRD buffers (QN 1) */

	/* handshake deadline (engine thread): on the hs list while connecting,
	 * waiting for a Reply or waiting for a Request */
	struct xs_conn *hs_next;
	bool on_hs_list;
	uint64_t hs_deadline_ms;

	struct xs_conn *cmd_next; /* engine command queue */
	unsigned cmd_flags;

	/* fork (xs_fork.c): every connection is on xs_eng.conns; after a fork a
	 * shared connection is DORMANT here until this process claims it
	 * through the shared owner word, or FOREIGN once another did */
	struct xs_conn *all_next, *all_prev;
	_Atomic int fork_mode; /* enum xs_fork_mode */
	int fork_next; /* the mode the fork being prepared gives it */
	_Atomic int *share; /* owner pid in a MAP_SHARED arena, 0 = unclaimed */
	struct xs_arena *arena;

	/* exec hand-over (xsock(7) EXEC): exported (rx_mu and the tx side
	 * held for the execve), or adopted (the untagged queues' MSNs to
	 * start from when the QP attaches) */
	bool exported;
	pthread_t export_thread;
	bool adopted;
	uint32_t adopt_rx_msn[3];
	struct xs_stat_carry adopt_carry; /* the old image's counts, for c->stat */
	struct xs_stat_conn *stat; /* its counters for xsock-stat (xs_stat.c; NULL: none) */

	/* ---- scratch, last: xs_eng_conn_new clears only what is above tx_rem
	 * (these 34 KiB are read only below the counts kept above) */
	struct iovec tx_rem[XS_REM_IOV];
	uint8_t tx_rem_buf[XS_REM_BUF];
	struct iovec cork_iov[XS_CORK_IOV];
	uint8_t cork_buf[XS_CORK_BUF];
	struct xs_rresp rr[XS_RR_MAX];
};


enum { CMD_ARM = 1, CMD_CLOSE = 2, CMD_TX = 4, CMD_RXDEFER = 8, CMD_FIN = 16, CMD_RXKICK = 32 };
enum { XS_RX_DEFER_PROTO = 1, XS_RX_DEFER_TERM = 2, XS_RX_DEFER_QPTERM = 3 };


struct xs_listener {
	int fd;
	xs_accept_fn cb;
	xs_plain_fn plain; /* mixed listener: non-MPA connections (NULL: MPA only) */
	void *ctx;
	pthread_mutex_t mu; /* held around callbacks; closing is set under it */
	int refs; /* the listener itself + connections still reading a Request (xs_eng.mu) */
	_Atomic bool closing;
	/* the command queue (xs_eng.mu): run_commands takes the batch, and
	 * what each entry asks for, in one hold of the lock, so a close queued
	 * meanwhile waits for the next batch and the caller is done with the
	 * listener before the engine frees it */
	struct xs_listener *cmd_next, *run_next;
	bool cmd_queued;
	bool close_cmd; /* xs_listener_close asked for its end (xs_eng.mu) */
	bool run_close; /* close_cmd as the engine's batch saw it (engine thread) */
	/* fork: on xs_eng.listeners; a child's copy accepts nothing until this
	 * process uses it (xs_fork_claim_listener) */
	struct xs_listener *all_next, *all_prev;
	bool poll_armed;
	/* set under xs_eng.mu by the process's fork handlers, read by the
	 * engine thread as a listener's poll completes */
	_Atomic bool fork_dormant;
	bool forked; /* another process may hold the socket: never shutdown() */
	_Atomic bool accepted; /* it took a connection (xs_spare.c) */
	bool spared; /* closed, its socket kept by xs_spare.c: no shutdown() */
};

/* The engine: one per process (xs_engine.c defines it). */
struct xs_engine {
	pthread_once_t once;
	int init_err;
	pthread_t thread;
	struct io_uring ring;
	int wake_fd;
	uint64_t wake_buf;
	/* a wake-up was written and the engine has not yet taken its read's
	 * completion: another is not needed (xs_eng_wake) */
	_Atomic bool wake_posted;
	pthread_mutex_t mu; /* command queues and refcounts */
	struct xs_conn *cmds;
	struct xs_listener *lcmds;
	/* engine thread only: connections with a handshake deadline */
	struct xs_conn *hs_list;
	bool timer_armed;
	struct __kernel_timespec timer_ts;
	/* the mixed listeners' classification deadlines (engine thread) */
	bool ctimer_armed;
	struct __kernel_timespec ctimer_ts;
	/* engine thread only: parked connections (each holds the reference
	 * of the poll that fired) and the timer that re-arms them */
	struct xs_conn *parked;
	bool park_armed;
	struct __kernel_timespec park_ts;
	/* engine thread only: connections with a delayed FIN or lingering
	 * after close (each holds a reference); late_count (mu) lets exit
	 * wait for them (late_cv) */
	struct xs_conn *late;
	struct xs_conn *rnr; /* stalled connections (engine thread only) */
	struct xs_conn *redial; /* refused connects to dial again (engine thread only) */
	struct xs_conn *kick; /* initiators kicking a siw responder (engine thread only) */
	bool late_armed;
	struct __kernel_timespec late_ts;
	unsigned late_count;
	pthread_cond_t late_cv;
	pid_t late_pid;
	unsigned passes; /* command passes done (mu; late_cv is signalled) */
	/* fork: the registry of connections and listeners (reg_mu, taken
	 * before mu), and the engine's pause around fork() */
	pthread_mutex_t reg_mu;
	struct xs_conn *conns;
	/* connects refused, to be dialled again, and not done yet: while 0
	 * no connect waits behind another (xs_connect_blocked skips its scan
	 * of conns, which a client's lingering connections made long); one
	 * whose end is missed keeps the scan on, as before */
	atomic_uint refused_conns;
	struct xs_listener *listeners;
	bool started;
	_Atomic bool pause_req;
	bool paused;
	pthread_cond_t pause_cv;
};

extern struct xs_engine xs_eng;
/* true on the engine thread (engine_main) */
extern __thread bool xs_eng_on_thread;
/* the connection an application thread is receiving on (xs_conn_poll) */
extern __thread struct xs_conn *xs_rx_tls_conn;

/* ---- the engine (xs_engine.c) --------------------------------------------- */

/* Start the engine thread once per process (a forked child starts its own
 * on first use).  Any thread.  0, or the -errno of the start. */
int xs_eng_get(void);
/* Wake the engine thread (its eventfd).  Any thread, any lock. */
void xs_eng_wake(void);
/* Ask the engine thread to do CMD_* flags with c: queued (holding a
 * reference until run_commands), then the engine is woken.  Any thread;
 * takes xs_eng.mu. */
void xs_eng_command(struct xs_conn *c, unsigned flags);
/* A connection on the TCP socket fd (kept: xs_fd_keep), holding one
 * reference (the engine's), on the fork registry.  Any thread; takes
 * reg_mu.  NULL if out of memory. */
struct xs_conn *xs_eng_conn_new(int fd);
/* Unlink c from the registry, close its socket and free it: from the last
 * xs_eng_unref (or a connection nobody else saw yet).  Takes reg_mu, and
 * xs_eng.mu for the listener's reference. */
void xs_eng_conn_free(struct xs_conn *c);
/* References (atomic refs, no lock); the last one frees c.  Any thread. */
void xs_eng_ref(struct xs_conn *c);
void xs_eng_unref(struct xs_conn *c);
/* shutdown(2) of c's socket, only if this process owns it (a dormant or
 * foreign copy after a fork belongs to another process).  Any thread. */
void xs_eng_shut(struct xs_conn *c, int how);
/* A listener's last reference closes its socket and frees it.  Any thread;
 * takes xs_eng.mu, then reg_mu. */
void xs_eng_listener_unref(struct xs_listener *l);
/* Engine thread: arm l's accept poll (the pending poll holds a reference). */
void xs_eng_listener_arm(struct xs_listener *l);
/* Engine thread: arm c's one-shot poll for what its state waits for
 * (nothing if armed already, closed, on the redial list or not this
 * process's); the pending poll holds a reference, and a handshake goes on
 * the deadline list. */
void xs_eng_arm(struct xs_conn *c);
/* Engine thread: cancel obj's pending poll (its CQE then comes with
 * -ECANCELED and drops the poll's reference as usual). */
void xs_eng_poll_cancel(void *obj, int tag);
/* Engine thread: one io_uring timeout per kind (the handshake scan,
 * classification, parked connections, the late list), armed at most once
 * at a time; *armed is cleared by its handler. */
void xs_eng_timeout_arm(bool *armed, struct __kernel_timespec *ts, uint64_t ns, int tag);

/* The peer answered RFC 7306 in the MPA exchange, which only another xsock
 * does: it needs none of the pauses Linux siw needs (docs/interop.md). */
static inline bool xs_eng_peer_is_xsock(const struct xs_conn *c)
{
	return c->agreed.rdmap_ext;
}

/* ---- transmit (xs_tx.c) --------------------------------------------------- */

/* The transmit side of a stream whose MPA exchange is done: FPDUs of at
 * most mulpdu octets, written on the posting thread.  The thread that
 * finished the handshake, before anyone transmits. */
void xs_tx_stream_init(struct xs_conn *c, size_t mulpdu);
/* Engine thread: send queued Read/Atomic Responses, a kick and a pending
 * disconnect's FIN, never blocking.  Takes tx ownership only when no
 * application thread has it (tx_mu briefly); keeps it with want_out set
 * while the socket is full.  A write error fails the stream (xs_rx_fail). */
void xs_tx_engine(struct xs_conn *c);
/* An application thread, after a receive that queued Read Responses
 * (rx_rr_queued; no lock held): they go out on this thread if tx is free
 * (xs_tx.c rr_pump_caller), else the engine is asked to send them. */
void xs_tx_caller_pump(struct xs_conn *c);
/* Engine thread: c, an initiator whose peer is not an xsock, its Reply
 * just read, kicks the peer from now on (XS_KICK_FIRST_MS; the kick list
 * holds a reference).  xs_tx_kick_scan: the late tick's look at the list. */
void xs_tx_kick_start(struct xs_conn *c);
void xs_tx_kick_scan(uint64_t now);

/* ---- receive (xs_rx.c) ---------------------------------------------------- */

/* The receive side of a stream whose MPA exchange is done (as
 * xs_tx_stream_init). */
void xs_rx_stream_init(struct xs_conn *c);
/* rx_mu held: receive what the socket holds until it would block or about
 * budget octets are read.  engine = true on the engine thread: a failure
 * ends the stream here; false (an application thread, xs_conn_poll): it
 * is left for the engine (rx_defer, CMD_RXDEFER; a FIN for its poll).
 * Returns the octets consumed. */
size_t xs_rx_receive(struct xs_conn *c, size_t budget, bool engine);
/* Engine thread: the stream is over.  Once: the QP's failed upcall,
 * shutdown, CONN_CLOSED, the closed callback with status.  Takes tx_mu
 * briefly; the receive path calls it with rx_mu held. */
void xs_rx_fail(struct xs_conn *c, bool local, const struct xs_err *err, int status);
/* Engine thread: send the Terminate t if the tx side is free (one
 * nonblocking attempt), then xs_rx_fail(local). */
void xs_rx_terminate_fail(struct xs_conn *c, const struct rdmap_term *t);
/* Engine thread (CMD_RXDEFER): end the stream for what an application
 * thread's receive found.  Takes rx_mu. */
void xs_rx_deferred(struct xs_conn *c);
/* Engine thread: go on with a stalled stream (a receive was posted, or
 * expire: its XSOCK_RNR_MS are up) and arm its poll again.  Takes rx_mu. */
void xs_rx_kick(struct xs_conn *c, bool expire);
/* Engine thread, the late tick: fail the streams whose Send waited
 * XSOCK_RNR_MS for a receive. */
void xs_rx_rnr_scan(uint64_t now);
/* Application thread owning tx, waiting for room (wait_writable): read
 * what arrives on a stalled stream into rx_over.  Takes rx_mu. */
void xs_rx_over_read(struct xs_conn *c);
/* Engine thread: c's poll fired while an application thread waits to
 * receive on it: leave it to that thread (the poll's reference is kept)
 * and look again XS_PARK_NS later (xs_rx_park_expired, TAG_PARK). */
void xs_rx_park(struct xs_conn *c);
void xs_rx_park_expired(void);

/* A stalled stream's input may be read by a poster waiting for room (see
 * rx_over): while its Send still waits and the buffer has room.  Tx owner. */
static inline bool xs_rx_over_wanted(struct xs_conn *c)
{
	return atomic_load(&c->rx_stalled) && c->rx_over_len < XS_RX_OVER_MAX;
}

/* Application thread: let go of rx_mu, and give the engine back the poll
 * it left to us meanwhile (rx_missed).  The flag's seq_cst load comes after
 * the unlock (a locked instruction on x86, a release store that a
 * load-acquire does not pass on ARMv8), as the engine's seq_cst store
 * comes before its trylock.  No fence: ThreadSanitizer refuses them. */
static inline void xs_rx_unlock(struct xs_conn *c)
{
	pthread_mutex_unlock(&c->rx_mu);
	if (atomic_load(&c->rx_missed) && atomic_exchange(&c->rx_missed, false))
		xs_eng_command(c, CMD_ARM);
}

/* Engine thread: c's poll fired for input.  Returns false when an
 * application thread holds rx_mu: it takes what is there (waiting for its
 * lock would only add a wake-up), and its xs_rx_unlock re-arms the poll;
 * the caller does not. */
static inline bool xs_rx_engine_receive(struct xs_conn *c)
{
	if (pthread_mutex_trylock(&c->rx_mu)) {
		atomic_store(&c->rx_missed, true);
		if (pthread_mutex_trylock(&c->rx_mu))
			return false;
	}
	atomic_store(&c->rx_missed, false);
	xs_rx_receive(c, 4u << 20, true); /* then let other connections run */
	pthread_mutex_unlock(&c->rx_mu);
	return true;
}

/* ---- handshakes (xs_handshake.c) ------------------------------------------ */

/* Both sides of the stream once the MPA parameters are agreed: FPDU size
 * from the TCP MSS, then xs_tx_stream_init and xs_rx_stream_init.  The
 * thread that completed the exchange (or adopted the connection). */
void xs_hs_stream_setup(struct xs_conn *c);
/* Engine thread: an initiator's connect ended (status 0: the Reply
 * accepted it).  Runs the connect callback; a failed connection loses the
 * owner's and the engine's references. */
void xs_hs_connect_done(struct xs_conn *c, int status, const struct mpa_frame *reply);
/* Engine thread: take c's handshake a step on (its poll fired, or a
 * timer): connect, Request, Reply, classification. */
void xs_hs_progress(struct xs_conn *c);
/* Engine thread: a connection in CONNECTING, WAIT_REPLY or WAIT_REQUEST
 * goes on the deadline list (XSOCK_MPA_TIMEOUT_MS; the list holds a
 * reference); xs_hs_scan (TAG_TIMER) ends those past it. */
void xs_hs_track(struct xs_conn *c);
void xs_hs_scan(void);
/* Engine thread: the mixed listeners' classification timer (TAG_CTIMER):
 * armed for the nearest deadline; xs_hs_cls_scan looks again. */
void xs_hs_cls_arm(void);
void xs_hs_cls_scan(void);

/* ---- closing (xs_close.c) ------------------------------------------------- */

/* Our FIN: now, or XSOCK_FIN_DELAY_MS later from the engine (a command
 * when called off the engine thread).  Any thread. */
void xs_close_fin(struct xs_conn *c);
/* Engine thread: the late tick (XS_LATE_TICK_MS, TAG_LATE) and its look
 * at every timed list: delayed FINs, lingers, RNR, redials, kicks, spare
 * listeners. */
void xs_close_late_arm(void);
void xs_close_late_scan(void);
/* Engine thread (CMD_CLOSE): linger rather than close.  true when it
 * lingers (the engine's reference stays until the linger ends), false
 * when the caller closes at once. */
bool xs_close_linger_start(struct xs_conn *c, unsigned flags);
/* Engine thread: the poll of a lingering connection fired: drop what came;
 * the peer's FIN or an error ends it. */
void xs_close_linger_input(struct xs_conn *c);

/* ---- connect and redial (xs_connect.c) ------------------------------------ */

/* c's connect was refused, to be dialled again: counted in
 * xs_eng.refused_conns until xs_hs_connect_done (the thread that owns c:
 * the connecting one, then the engine). */
void xs_connect_refused(struct xs_conn *c);
/* Engine thread: must c's MPA Request wait for an earlier connect to the
 * same address that is to be dialled again?  Takes reg_mu (none while no
 * connect is refused). */
bool xs_connect_blocked(const struct xs_conn *c);
/* Engine thread: c, connected, looks again XS_REDIAL_FIRST_MS later. */
void xs_connect_hold(struct xs_conn *c);
/* Engine thread: a refused connect goes on the redial list (true) while
 * its time lasts; false: refuse it now. */
bool xs_connect_redial_track(struct xs_conn *c);
/* Engine thread, the late tick: dial again what is due. */
void xs_connect_redial_scan(uint64_t now);

/* ---- listeners (xs_listen.c) ---------------------------------------------- */

/* Engine thread: l's poll fired: accept every queued connection. */
void xs_listen_accept(struct xs_listener *l);

#pragma GCC visibility pop

#endif
