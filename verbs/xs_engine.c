/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The engine: one io_uring thread per process that owns the receive side of
 * every TCP connection, accepts and connects, runs the MPA handshakes and
 * serves RDMA Read Responses; plus the transmit path that application
 * threads run directly (the fast path: no hand-off to another thread).
 *
 * io_uring is used for readiness (one-shot POLL_ADD re-armed per event) and
 * a wake-up eventfd; the socket I/O itself is nonblocking recv/writev on the
 * engine thread, which lets a receive go straight into the buffer the DDP
 * header names (iw_rx_direct) instead of through a staging copy. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/xs_clock.h"
#include "util/xs_be.h"
#include "util/xs_iov.h"
#include "verbs/xs_internal.h"
#include "verbs/xs_priv_abi.h"

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
/* Receive sizes around direct placement: the octets taken with a payload
 * for the CRC and the next FPDU's headers, and the payload window beyond
 * which FPDUs count as large. */
#define XS_RTAIL 256
#define XS_RLARGE 4096
#define XS_RR_MAX XS_MAX_IRD
/* A corked chain: gather entries, and octets copied (FPDU headers,
 * trailers and small payloads, which may not outlive their WR's call). */
#define XS_CORK_IOV 256 /* a 1 MiB Write in 32 KiB FPDUs: ~100 pieces */
#define XS_CORK_BUF 8192
/* the engine's batch of FPDUs for one sendmsg (Read Responses) */
#define XS_REM_IOV (256 + MPA_TX_MAX_IOV)
#define XS_REM_BUF 8192
#define XS_FRAME_SCRATCH \
	(sizeof(((struct mpa_txframe *)0)->hdr) + sizeof(((struct mpa_txframe *)0)->trailer) + \
	 sizeof(((struct mpa_txframe *)0)->markers))
#define XS_HS_MAX (MPA_RR_HDR_LEN + MPA_PD_MAX)

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

/* The late list (a delayed FIN, a lingering close) is looked at this often. */
#define XS_LATE_TICK_MS 10
/* A connect refused (no listener yet) is dialled again for this long, from
 * 5 ms apart doubling: servers tell their client a port before they listen
 * on it (perftest -R's second connection, qperf -cm1 0.4.11); the kernel's
 * CM refuses at once and these programs' own retries are racy or broken.
 * A connect nobody will ever accept is refused this much later. */
#define XS_REDIAL_MS 1500
#define XS_RX_OVER_MAX (256u << 20)
#define XS_REDIAL_FIRST_MS 5

/* Linux siw as responder sends its MPA Reply and only then moves the
 * socket to its QP: FPDU octets arriving in between stay unread until more
 * arrive (siw_accept, siw_cm_llp_data_ready; docs/interop.md), and the
 * initiator's first Send waits there for ever while the application
 * waits for its answer.  An initiator whose peer is not an xsock
 * therefore sends a zero-length RDMA Write (which siw, like xsock, places
 * nowhere and checks nothing of: siw_proc_write) this long after the
 * Reply and again at doubling intervals until XS_KICK_LAST_MS, while the
 * peer has sent nothing: one of them arrives after the socket moved and
 * makes siw read what waits.  Once the peer speaks its socket has moved:
 * whatever we send next makes it read; a last kick goes out only if we had
 * sent before its first octets and have sent nothing since, a tick later
 * (rsockets: both ends send at once, ours may be waiting there).  Other
 * kicks could only meet the peer's close (unread octets there make Linux
 * reset the connection and drop the peer's unsent tail).  Nothing waits
 * for them and an xsock peer gets none. */
#define XS_KICK_FIRST_MS 5
#define XS_KICK_LAST_MS 640

/* A mixed listener looks again at a client that sent only part of the MPA
 * Request key this often (its octets stay in the socket, so a poll for
 * input would fire at once). */
#define XS_CLS_TICK_MS 10

/* How long the engine leaves a connection alone after its poll fired while
 * an application thread was waiting to receive on it (xsock_priv_rx_wait):
 * that thread receives, and the engine looks again after this pause. */
#define XS_PARK_NS (1000 * 1000)
/* ... and the next look when every parked connection's waiter received
 * during the last pause (park_keep): an epoll set's sockets stay watched
 * for long, and a 1 ms timer would wake the engine a thousand times a
 * second for nothing. */
#define XS_PARK_KEEP_NS (10 * 1000 * 1000)

struct xs_conn {
	int fd;
	/* Read by application threads (posts, polls, accept) while the engine
	 * changes them: atomic, so each reader sees one value, not a torn or
	 * stale one (ThreadSanitizer found these). */
	_Atomic enum conn_state state;
	int refs; /* owner + engine (engine mutex) */
	_Atomic bool owner_gone;
	bool initiator;
	bool poll_armed;
	bool want_out; /* POLLOUT wanted (pending Read Responses) */
	_Atomic bool dead; /* stream failed or closed: no more tx */
	_Atomic bool fin_sent;
	bool disconnect_asked;
	bool engine_ref_dropped;
	/* engine thread: on eng.late for a FIN due at fin_due_ms (0 = none,
	 * XSOCK_FIN_DELAY_MS) or a linger ending at linger_end_ms */
	struct xs_conn *late_next;
	bool on_late_list;
	uint64_t fin_due_ms;
	uint64_t linger_end_ms;
	/* engine thread: an initiator whose peer is not an xsock sends
	 * zero-length RDMA Writes after the Reply (on eng.kick, kick_scan) */
	struct xs_conn *kick_next;
	bool on_kick_list;
	bool kick_pending; /* engine_tx frames one */
	bool kick_spoke; /* kick_scan has seen the peer's first octets */
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
	uint64_t rnr_due_ms; /* engine thread: on eng.rnr until then */
	bool on_rnr_list;
	struct xs_conn *rnr_next;
	/* initiator: a refused connect is dialled again until redial_end_ms
	 * (engine thread; see redial_track) */
	struct sockaddr_storage dst, src;
	socklen_t dst_len, src_len;
	uint64_t redial_end_ms, redial_due_ms;
	unsigned redial_wait_ms;
	bool on_redial_list, refused_now;
	struct xs_conn *redial_next;
	/* initiator: the order of its xs_connect among all (dial_blocked);
	 * req_held: connected and on eng.redial, its MPA Request waiting for
	 * an earlier connect's */
	uint64_t dial_seq;
	bool req_held;
	_Atomic bool rx_parked; /* on eng.parked, poll not re-armed (engine thread writes) */
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
	 * all on the socket; their headers and trailers copied to tx_rem_buf */
	struct iovec tx_rem[XS_REM_IOV];
	int tx_remcnt;
	size_t tx_rem_used;
	uint8_t tx_rem_buf[XS_REM_BUF];
	/* a corked WR chain (xs_conn_cork, the posting thread only): FPDUs
	 * gathered here go out with one sendmsg at the flush */
	struct iovec cork_iov[XS_CORK_IOV];
	int cork_cnt;
	size_t cork_len, cork_used;
	uint8_t cork_buf[XS_CORK_BUF];
	struct xs_rresp rr[XS_RR_MAX];
	unsigned rr_head, rr_count;
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

	/* fork (xs_fork.c): every connection is on eng.conns; after a fork a
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
	struct xs_stat_conn *stat; /* its counters for xsock-stat (xs_stat.c; NULL: none) */
};

enum { CMD_ARM = 1, CMD_CLOSE = 2, CMD_TX = 4, CMD_RXDEFER = 8, CMD_FIN = 16, CMD_RXKICK = 32 };
enum { XS_RX_DEFER_PROTO = 1, XS_RX_DEFER_TERM = 2, XS_RX_DEFER_QPTERM = 3 };

struct xs_listener {
	int fd;
	xs_accept_fn cb;
	xs_plain_fn plain; /* mixed listener: non-MPA connections (NULL: MPA only) */
	void *ctx;
	pthread_mutex_t mu; /* held around callbacks; closing is set under it */
	int refs; /* the listener itself + connections still reading a Request (eng.mu) */
	_Atomic bool closing;
	struct xs_listener *cmd_next;
	bool cmd_queued;
	/* fork: on eng.listeners; a child's copy accepts nothing until this
	 * process uses it (xs_fork_claim_listener) */
	struct xs_listener *all_next, *all_prev;
	bool poll_armed;
	bool fork_dormant;
	bool forked; /* another process may hold the socket: never shutdown() */
	_Atomic bool accepted; /* it took a connection (xs_spare.c) */
	bool spared; /* closed, its socket kept by xs_spare.c: no shutdown() */
};

static struct {
	pthread_once_t once;
	int init_err;
	pthread_t thread;
	struct io_uring ring;
	int wake_fd;
	uint64_t wake_buf;
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
	struct xs_listener *listeners;
	bool started;
	_Atomic bool pause_req;
	bool paused;
	pthread_cond_t pause_cv;
} eng = { .once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER,
	  .reg_mu = PTHREAD_MUTEX_INITIALIZER, .pause_cv = PTHREAD_COND_INITIALIZER,
	  .late_cv = PTHREAD_COND_INITIALIZER };

static __thread bool on_engine_thread;
/* the connection an application thread is receiving on (xs_conn_poll) */
static __thread struct xs_conn *tls_rx_conn;
/* the connection whose WR chain this thread is posting corked */
static __thread struct xs_conn *tls_cork;

static void *engine_main(void *arg);

static void engine_init(void)
{
	int rc;

	eng.wake_fd = xs_fd_keep(eventfd(0, EFD_CLOEXEC));
	if (eng.wake_fd < 0) {
		eng.init_err = -errno;
		return;
	}
	rc = io_uring_queue_init(256, &eng.ring, 0);
	if (rc < 0) {
		eng.init_err = rc;
		xs_fd_close(eng.wake_fd);
		return;
	}
	xs_fd_keep(eng.ring.ring_fd);
	/*
	 * An RNIC has no thread in the process: a process-directed signal the
	 * application blocks to read it from a signalfd (tgtd's SIGUSR2) must
	 * not land on the engine, where its default action kills the process.
	 * Created with every signal blocked (inherited, so no window).
	 */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&eng.thread, NULL, engine_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		eng.init_err = -rc;
		xs_fd_drop(eng.ring.ring_fd);
		io_uring_queue_exit(&eng.ring);
		xs_fd_close(eng.wake_fd);
		return;
	}
	pthread_detach(eng.thread);
	eng.started = true;
}

static int engine_get(void)
{
	pthread_once(&eng.once, engine_init);
	return eng.init_err;
}

static void engine_wake(void)
{
	uint64_t one = 1;

	if (write(eng.wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		xs_log("engine wake: %s", strerror(errno));
}

/* Ask the engine thread to do something with a connection. */
static void conn_command(struct xs_conn *c, unsigned flags)
{
	engine_get(); /* a forked child starts its engine on first use */
	pthread_mutex_lock(&eng.mu);
	if (!c->cmd_flags) {
		c->cmd_next = eng.cmds;
		eng.cmds = c;
		c->refs++;
	}
	c->cmd_flags |= flags;
	pthread_mutex_unlock(&eng.mu);
	engine_wake();
}

static void listener_unref(struct xs_listener *l);

static void conn_free(struct xs_conn *c)
{
	pthread_mutex_lock(&eng.reg_mu);
	if (c->all_prev)
		c->all_prev->all_next = c->all_next;
	else
		eng.conns = c->all_next;
	if (c->all_next)
		c->all_next->all_prev = c->all_prev;
	xs_arena_unref(c->arena);
	pthread_mutex_unlock(&eng.reg_mu);
	xs_stat_conn_close(c->stat);
	if (c->listener)
		listener_unref(c->listener);
	if (c->fd >= 0)
		xs_fd_close(c->fd);
	pthread_mutex_destroy(&c->rx_mu);
	pthread_mutex_destroy(&c->tx_mu);
	pthread_cond_destroy(&c->tx_cv);
	free(c->rbuf);
	free(c->rx_over);
	free(c);
}

static void conn_ref(struct xs_conn *c)
{
	pthread_mutex_lock(&eng.mu);
	c->refs++;
	pthread_mutex_unlock(&eng.mu);
}

static void conn_unref(struct xs_conn *c)
{
	bool last;

	pthread_mutex_lock(&eng.mu);
	last = --c->refs == 0;
	pthread_mutex_unlock(&eng.mu);
	if (last)
		conn_free(c);
}

static struct xs_conn *conn_new(int fd)
{
	struct xs_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->rbuf = malloc(XS_RBUF);
	if (!c->rbuf) {
		free(c);
		return NULL;
	}
	c->fd = xs_fd_keep(fd);
	c->refs = 1; /* the engine's reference; the owner takes one more */
	pthread_mutex_init(&c->rx_mu, NULL);
	pthread_mutex_init(&c->tx_mu, NULL);
	pthread_cond_init(&c->tx_cv, NULL);
	pthread_mutex_lock(&eng.reg_mu);
	c->all_next = eng.conns;
	if (eng.conns)
		eng.conns->all_prev = c;
	eng.conns = c;
	pthread_mutex_unlock(&eng.reg_mu);
	return c;
}

/* shutdown(2) only on a connection this process owns: a dormant or foreign
 * copy of a forked connection belongs to another process. */
static void conn_shut(struct xs_conn *c, int how)
{
	if (atomic_load_explicit(&c->fork_mode, memory_order_acquire) == XS_FORK_MINE)
		shutdown(c->fd, how);
}

static void late_add(struct xs_conn *c);

/* The peer answered RFC 7306 in the MPA exchange, which only another xsock
 * does: it needs none of the pauses Linux siw needs (docs/interop.md). */
static bool peer_is_xsock(const struct xs_conn *c)
{
	return c->agreed.rdmap_ext;
}

static unsigned fin_delay(const struct xs_conn *c)
{
	return peer_is_xsock(c) ? 0 : xs_config()->fin_delay_ms;
}

/* Our FIN, now or (XSOCK_FIN_DELAY_MS) a little later from the engine.
 * Linux siw fails its own last Send with LOC_QP_OP_ERR when the peer's
 * FIN arrives before that Send's completion, even though the Send is on
 * the wire (docs/interop.md); a peer whose completion lags its transmit
 * (siw under emulation) needs the pause.  The peer's own FIN still ends
 * the connection at once (conn_fail); an xsock peer gets the FIN at once. */
static void conn_fin(struct xs_conn *c)
{
	unsigned delay = fin_delay(c);

	if (!delay) {
		conn_shut(c, SHUT_WR);
	} else if (!on_engine_thread) {
		conn_command(c, CMD_FIN);
	} else if (!c->fin_due_ms) {
		c->fin_due_ms = xs_now_ms() + delay;
		late_add(c);
	}
}

static void listener_list_del(struct xs_listener *l)
{
	pthread_mutex_lock(&eng.reg_mu);
	if (l->all_prev)
		l->all_prev->all_next = l->all_next;
	else
		eng.listeners = l->all_next;
	if (l->all_next)
		l->all_next->all_prev = l->all_prev;
	pthread_mutex_unlock(&eng.reg_mu);
}

static void listener_unref(struct xs_listener *l)
{
	bool last;

	pthread_mutex_lock(&eng.mu);
	last = --l->refs == 0;
	pthread_mutex_unlock(&eng.mu);
	if (last) {
		listener_list_del(l);
		xs_fd_close(l->fd);
		pthread_mutex_destroy(&l->mu);
		free(l);
	}
}

static void arm_poll(void *obj, int tag, int fd, unsigned events);

/* A pending poll holds a reference: the listener outlives its last CQE. */
static void listener_arm(struct xs_listener *l)
{
	pthread_mutex_lock(&eng.mu);
	l->refs++;
	pthread_mutex_unlock(&eng.mu);
	l->poll_armed = true;
	arm_poll(l, TAG_LISTENER, l->fd, POLLIN);
}

/* An SQE, submitting what is queued first if the ring is full. */
static struct io_uring_sqe *eng_sqe(void)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&eng.ring);

	if (!sqe) {
		io_uring_submit(&eng.ring);
		sqe = io_uring_get_sqe(&eng.ring);
	}
	return sqe;
}

/* The read of the wake-up eventfd, re-armed after each wake-up. */
static void arm_wake(void)
{
	struct io_uring_sqe *sqe = eng_sqe();

	io_uring_prep_read(sqe, eng.wake_fd, &eng.wake_buf, sizeof(eng.wake_buf), 0);
	io_uring_sqe_set_data(sqe, (void *)(uintptr_t)TAG_WAKE);
}

static void arm_poll(void *obj, int tag, int fd, unsigned events)
{
	struct io_uring_sqe *sqe = eng_sqe();

	io_uring_prep_poll_add(sqe, fd, events);
	io_uring_sqe_set_data(sqe, (void *)((uintptr_t)obj | (uintptr_t)tag));
}

/* Engine: cancel the pending poll of obj (its CQE then arrives with
 * -ECANCELED and drops the poll's reference as usual). */
static void poll_cancel(void *obj, int tag)
{
	struct io_uring_sqe *sqe = eng_sqe();

	io_uring_prep_poll_remove(sqe, (uint64_t)((uintptr_t)obj | (uintptr_t)tag));
	io_uring_sqe_set_data(sqe, NULL); /* tag 0: nothing to do */
}

static void hs_track(struct xs_conn *c);
static bool redial_track(struct xs_conn *c);
static bool dial_blocked(const struct xs_conn *c);
static void dial_hold(struct xs_conn *c);

static void conn_arm(struct xs_conn *c)
{
	unsigned ev = POLLIN | POLLRDHUP;

	if (c->poll_armed || c->state == CONN_CLOSED || c->on_redial_list ||
	    atomic_load_explicit(&c->fork_mode, memory_order_acquire) != XS_FORK_MINE)
		return;
	if (c->state == CONN_CONNECTING)
		ev = POLLOUT;
	else if (c->state == CONN_WAIT_ACCEPT || c->state == CONN_ACCEPTED)
		ev = 0;
	else if (c->state == CONN_WAIT_REQUEST && c->cls_partial)
		ev = 0; /* the classification timer looks again (cls_scan) */
	else if (c->state == CONN_ESTABLISHED && atomic_load(&c->rx_stalled))
		ev = 0; /* unread input would fire it at once: post_recv kicks */
	if (c->want_out)
		ev |= POLLOUT;
	if (!ev)
		return;
	hs_track(c);
	c->poll_armed = true;
	atomic_store(&c->rx_watch, c->state == CONN_ESTABLISHED && (ev & POLLIN));
	conn_ref(c); /* the pending poll holds the connection */
	arm_poll(c, TAG_CONN, c->fd, ev);
}

/* ---- transmit ------------------------------------------------------------- */

/* A stalled stream's input may be read by a poster waiting for room (see
 * rx_over): while its Send still waits and the buffer has room. */
static bool rx_over_wanted(struct xs_conn *c)
{
	return atomic_load(&c->rx_stalled) && c->rx_over_len < XS_RX_OVER_MAX;
}

/* Application thread, tx owned: what arrived on a stalled stream, into
 * rx_over (a FIN or an error is left for the engine to find).  The stalled
 * rest of rbuf moves in first, when rx_over is empty; what the receive
 * path consumed already is dropped from the front. */
static void rx_over_read(struct xs_conn *c)
{
	pthread_mutex_lock(&c->rx_mu);
	if (!atomic_load(&c->rx_stalled) || c->state != CONN_ESTABLISHED || c->dead)
		goto out;
	if (c->rx_over_off) {
		c->rx_over_len -= c->rx_over_off;
		memmove(c->rx_over, c->rx_over + c->rx_over_off, c->rx_over_len);
		c->rx_over_off = 0;
	}
	size_t pend = c->rx_over_len ? 0 : c->rx_pend_len;
	size_t need = c->rx_over_len + pend + XS_RBUF;

	if (need > c->rx_over_cap && need <= XS_RX_OVER_MAX + XS_RBUF) {
		size_t cap = c->rx_over_cap ? c->rx_over_cap : 1u << 20;
		uint8_t *b;

		while (cap < need)
			cap *= 2;
		if (cap > XS_RX_OVER_MAX + XS_RBUF)
			cap = XS_RX_OVER_MAX + XS_RBUF;
		b = realloc(c->rx_over, cap);
		if (b) {
			c->rx_over = b;
			c->rx_over_cap = cap;
		}
	}
	if (c->rx_over_cap < need)
		goto out;
	if (pend) {
		memcpy(c->rx_over, c->rbuf + c->rx_pend_off, pend);
		c->rx_over_len = pend;
		c->rx_pend_len = 0;
	}
	ssize_t n = recv(c->fd, c->rx_over + c->rx_over_len, c->rx_over_cap - c->rx_over_len,
			 MSG_DONTWAIT);
	if (n > 0)
		c->rx_over_len += (size_t)n;
out:
	pthread_mutex_unlock(&c->rx_mu);
}

/* Wait for room in the socket.  A peer whose window stays shut for
 * XSOCK_TX_TIMEOUT_MS is broken: shutting the socket down makes the
 * engine's poll see the end and fail the stream (QP error, flush,
 * DISCONNECTED) as for any closed connection. */
static int wait_writable(struct xs_conn *c)
{
	struct pollfd p = { .fd = c->fd, .events = POLLOUT };
	unsigned limit = xs_config()->tx_timeout_ms;
	uint64_t deadline = limit ? xs_now_ms() + limit : 0;

	for (;;) {
		if (c->dead)
			return -EPIPE;
		p.events = POLLOUT | (rx_over_wanted(c) ? POLLIN : 0);
		int n = poll(&p, 1, 200);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0) {
			if (p.revents & (POLLERR | POLLHUP))
				return -EPIPE;
			if (!(p.revents & POLLOUT)) {
				rx_over_read(c);
				continue;
			}
			return 0;
		}
		if (deadline && xs_now_ms() >= deadline) {
			xs_log("peer took nothing for %u ms: closing", limit);
			shutdown(c->fd, SHUT_RDWR);
			return -ETIMEDOUT;
		}
	}
}

enum { ZC_UNKNOWN, ZC_ON, ZC_OFF };

/* A peer on this host: the kernel copies what it delivers to a local
 * socket, so zero-copy send only adds its notifications. */
static bool peer_is_local(const struct xs_conn *c)
{
	struct sockaddr_storage l, p;

	if (xs_conn_addrs(c, &l, &p) < 0)
		return true;
	if (p.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)&p, *b = (const void *)&l;

		return (ntohl(a->sin_addr.s_addr) >> 24) == 127 ||
		       a->sin_addr.s_addr == b->sin_addr.s_addr;
	}
	if (p.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)&p, *b = (const void *)&l;

		return IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) ||
		       (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && a->sin6_addr.s6_addr[12] == 127) ||
		       memcmp(&a->sin6_addr, &b->sin6_addr, sizeof(a->sin6_addr)) == 0;
	}
	return true;
}

/* Whether a write of len octets leaves with SENDMSG_ZC (tx owner). */
static bool zc_wanted(struct xs_conn *c, size_t len)
{
	unsigned min = xs_config()->zc_min;

	if (!min || len < min || c->zc == ZC_OFF)
		return false;
	if (c->zc == ZC_UNKNOWN) {
		c->zc = peer_is_local(c) && !xs_config()->zc_always ? ZC_OFF : ZC_ON;
		if (c->zc == ZC_OFF)
			return false;
	}
	return true;
}

/* The pages of this write's zero-copy sends are the kernel's until their
 * notifications: the write is not done (its WR does not complete) before. */
static int zc_finish(struct xs_conn *c, int rc)
{
	bool copied = false;
	int src = xs_zc_settle(xs_config()->tx_timeout_ms, &copied);

	if (copied && !xs_config()->zc_always) {
		c->zc = ZC_OFF;
		xs_log("zero-copy send: the kernel copied anyway (a peer on this host): copies from now on");
	}
	if (src < 0 && rc == 0) {
		xs_log("zero-copy send: the kernel kept the pages: %s; closing", strerror(-src));
		shutdown(c->fd, SHUT_RDWR);
		rc = src;
	}
	return rc;
}

/* All of iov on the socket, waiting for room when TCP pushes back. */
static int conn_write_raw(struct xs_conn *c, const struct iovec *iov, int cnt, size_t len)
{
	struct iovec v[XS_CORK_IOV > MPA_TX_MAX_IOV ? XS_CORK_IOV : MPA_TX_MAX_IOV];
	struct iovec *p = v;
	size_t left = len;
	bool zc = zc_wanted(c, len), zc_sent = false;
	int rc = 0;

	memcpy(v, iov, (size_t)cnt * sizeof(*v));
	while (left > 0) {
		struct msghdr mh = { .msg_iov = p, .msg_iovlen = (size_t)cnt };
		ssize_t n;

		if (zc) {
			n = xs_zc_send(c->fd, p, cnt);
			if (n == -EOPNOTSUPP) {
				zc = false;
				c->zc = ZC_OFF;
				continue;
			}
			if (n < 0) {
				errno = (int)-n;
				n = -1;
			} else {
				zc_sent = true;
			}
		} else {
			n = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				rc = wait_writable(c);
				if (rc < 0)
					break;
				continue;
			}
			rc = -errno;
			break;
		}
		atomic_fetch_add_explicit(&c->tx_writes, 1, memory_order_relaxed);
		left -= (size_t)n;
		xs_iov_advance(&p, &cnt, (size_t)n);
	}
	return zc_sent ? zc_finish(c, rc) : rc;
}

static int cork_flush(struct xs_conn *c)
{
	int rc = 0;

	if (c->cork_cnt)
		rc = conn_write_raw(c, c->cork_iov, c->cork_cnt, c->cork_len);
	c->cork_cnt = 0;
	c->cork_len = 0;
	c->cork_used = 0;
	return rc;
}

/* p lies in the FPDU scratch, which the next FPDU's framing rewrites. */
static bool in_frame(const struct xs_conn *c, const void *p)
{
	const uint8_t *b = p, *f = (const uint8_t *)&c->tx.frame;

	return b >= f && b < f + sizeof(c->tx.frame);
}

/* Copied rather than referenced: the FPDU scratch and small pieces (a
 * WR's inline data lives on post_send's stack). */
static bool cork_copies(const struct xs_conn *c, const struct iovec *v)
{
	return v->iov_len <= XS_MAX_INLINE || in_frame(c, v->iov_base);
}

/* A cork on this thread: FPDUs gather until cork_end's one sendmsg
 * (tx owned). */
static void cork_begin(struct xs_conn *c)
{
	c->cork_cnt = 0;
	c->cork_len = 0;
	c->cork_used = 0;
	tls_cork = c;
}

static int cork_end(struct xs_conn *c)
{
	int rc = cork_flush(c);

	tls_cork = NULL;
	return rc;
}

/* The iw_tx writer used on application threads: all of the FPDU, waiting
 * for room when TCP pushes back; inside a corked chain the FPDU joins the
 * others for one sendmsg at the flush. */
static int conn_write_blocking(void *ctx, const struct iovec *iov, int cnt, size_t len)
{
	struct xs_conn *c = ctx;
	size_t copy = 0;
	int rc;

	xs_stat_tx(c->stat, &c->tx.frame);
	if (tls_cork != c)
		return conn_write_raw(c, iov, cnt, len);
	for (int i = 0; i < cnt; i++)
		if (cork_copies(c, &iov[i]))
			copy += iov[i].iov_len;
	if (c->cork_cnt + cnt > XS_CORK_IOV || c->cork_used + copy > XS_CORK_BUF) {
		rc = cork_flush(c);
		if (rc < 0)
			return rc;
		if (cnt > XS_CORK_IOV || copy > XS_CORK_BUF)
			return conn_write_raw(c, iov, cnt, len);
	}
	for (int i = 0; i < cnt; i++) {
		struct iovec *last = c->cork_cnt ? &c->cork_iov[c->cork_cnt - 1] : NULL;

		if (!iov[i].iov_len)
			continue;
		if (cork_copies(c, &iov[i])) {
			uint8_t *dst = c->cork_buf + c->cork_used;
			memcpy(dst, iov[i].iov_base, iov[i].iov_len);
			c->cork_used += iov[i].iov_len;
			if (last && (uint8_t *)last->iov_base + last->iov_len == dst) {
				last->iov_len += iov[i].iov_len; /* contiguous copies merge */
				continue;
			}
			c->cork_iov[c->cork_cnt++] = (struct iovec){ dst, iov[i].iov_len };
		} else {
			c->cork_iov[c->cork_cnt++] = iov[i];
		}
	}
	c->cork_len += len;
	return 0;
}

static int tx_acquire(struct xs_conn *c)
{
	if (xs_conn_claim(c) < 0)
		return -EBUSY;
	pthread_mutex_lock(&c->tx_mu);
	while ((c->tx_busy || c->rtr_wait || c->rtr_answering || c->settle_wait) && !c->dead) {
		if (c->tx_busy || c->rtr_wait || c->rtr_answering) {
			pthread_cond_wait(&c->tx_cv, &c->tx_mu);
			continue;
		}
		/* settle_wait alone: until the peer's first octets (the
		 * receive path wakes us) or the bound */
		uint64_t now = xs_now_ms();
		if (atomic_load_explicit(&c->rx_any, memory_order_relaxed) ||
		    now >= c->settle_end_ms) {
			c->settle_wait = false;
			xs_log("accept: peer is not an xsock: first send %llu ms after the Reply, %s",
			       (unsigned long long)(now + xs_config()->settle_ms - c->settle_end_ms),
			       atomic_load(&c->rx_any) ? "the peer has spoken" :
							 "the peer silent, the wait's bound reached");
			continue;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t ns = (uint64_t)ts.tv_nsec + (c->settle_end_ms - now) * 1000000u;
		ts.tv_sec += (time_t)(ns / 1000000000u);
		ts.tv_nsec = (long)(ns % 1000000000u);
		pthread_cond_timedwait(&c->tx_cv, &c->tx_mu, &ts);
	}
	if (c->dead || c->state != CONN_ESTABLISHED) {
		pthread_mutex_unlock(&c->tx_mu);
		return -EPIPE;
	}
	c->tx_busy = true;
	pthread_mutex_unlock(&c->tx_mu);
	return 0;
}

static void tx_release(struct xs_conn *c)
{
	bool kick;

	pthread_mutex_lock(&c->tx_mu);
	c->tx_busy = false;
	kick = c->rr_count > 0 || c->disconnect_asked;
	pthread_cond_broadcast(&c->tx_cv);
	pthread_mutex_unlock(&c->tx_mu);
	if (kick)
		conn_command(c, CMD_TX);
}

/* A message of several FPDUs leaves in one sendmsg (a system call per
 * FPDU cost a 1 MiB Write a third of its time): corked inside tx. */
static bool msg_batch_begin(struct xs_conn *c, const struct iovec *iov, int cnt)
{
	size_t total = 0;

	for (int i = 0; i < cnt; i++)
		total += iov[i].iov_len;
	if (total <= c->tx.mulpdu)
		return false;
	cork_begin(c);
	return true;
}

static int msg_batch_end(struct xs_conn *c, int rc)
{
	int frc = cork_end(c);

	return rc < 0 ? rc : frc;
}

int xs_conn_send(struct xs_conn *c, enum rdmap_opcode op, uint32_t inv_stag,
		 const struct iovec *iov, int cnt)
{
	int rc;

	if (tls_cork == c)
		return iw_tx_send(&c->tx, op, inv_stag, iov, cnt);
	rc = tx_acquire(c);
	if (rc < 0)
		return rc;
	bool batch = msg_batch_begin(c, iov, cnt);
	rc = iw_tx_send(&c->tx, op, inv_stag, iov, cnt);
	if (batch)
		rc = msg_batch_end(c, rc);
	tx_release(c);
	return rc;
}

int xs_conn_tagged(struct xs_conn *c, enum rdmap_opcode op, uint32_t stag, uint64_t to,
		   const struct iovec *iov, int cnt)
{
	int rc;

	if (tls_cork == c)
		return iw_tx_tagged(&c->tx, op, stag, to, iov, cnt);
	rc = tx_acquire(c);
	if (rc < 0)
		return rc;
	bool batch = msg_batch_begin(c, iov, cnt);
	rc = iw_tx_tagged(&c->tx, op, stag, to, iov, cnt);
	if (batch)
		rc = msg_batch_end(c, rc);
	tx_release(c);
	return rc;
}

int xs_conn_cork(struct xs_conn *c)
{
	int rc = tx_acquire(c);

	if (rc < 0)
		return rc;
	cork_begin(c);
	return 0;
}

int xs_conn_cork_flush(struct xs_conn *c)
{
	return tls_cork == c ? cork_flush(c) : 0;
}

int xs_conn_uncork(struct xs_conn *c)
{
	int rc;

	if (tls_cork != c)
		return 0;
	rc = cork_end(c);
	tx_release(c);
	return rc;
}

int xs_conn_read_req(struct xs_conn *c, const struct rdmap_read_req *rr)
{
	int rc = tx_acquire(c);

	if (rc < 0)
		return rc;
	rc = iw_tx_read_req(&c->tx, rr);
	tx_release(c);
	return rc;
}

static void conn_fail(struct xs_conn *c, bool local, const struct xs_err *err, int status);
static void rnr_track(struct xs_conn *c);
static void conn_rx_kick(struct xs_conn *c, bool expire);
static void conn_terminate_fail(struct xs_conn *c, const struct rdmap_term *t);

int xs_conn_terminate(struct xs_conn *c, const struct rdmap_term *t)
{
	int rc;

	/* From a QP upcall (engine thread, rx_mu held) never wait for the tx
	 * side: an application thread may own it while it waits for socket
	 * room that only this thread's receiving can make (both ends in one
	 * process).  Send it if the tx side is free, then fail the stream, as
	 * for a protocol error the engine finds itself. */
	if (on_engine_thread) {
		conn_terminate_fail(c, t);
		return 0;
	}
	if (tls_rx_conn == c) {
		/* an upcall of an application thread's receive: the engine
		 * ends the stream; nothing more of this input is placed */
		if (!c->rx_defer) {
			c->rx_defer_term = *t;
			c->rx_defer = XS_RX_DEFER_QPTERM;
			conn_command(c, CMD_RXDEFER);
		}
		return 0;
	}
	rc = tx_acquire(c);
	if (rc < 0)
		return rc;
	rc = iw_tx_terminate(&c->tx, t);
	xs_stat_term(c->stat, true, &t->cause);
	tx_release(c);
	return rc;
}

int xs_conn_atomic_req(struct xs_conn *c, const struct rdmap_atomic_req *r)
{
	int rc = tx_acquire(c);

	if (rc < 0)
		return rc;
	rc = iw_tx_atomic_req(&c->tx, r);
	tx_release(c);
	return rc;
}

static int rr_queue(struct xs_conn *c, const struct xs_rresp *in)
{
	pthread_mutex_lock(&c->tx_mu);
	if (c->rr_count >= XS_RR_MAX || c->rr_count >= (unsigned)c->agreed.ird + 1) {
		pthread_mutex_unlock(&c->tx_mu);
		return -ENOSPC;
	}
	c->rr[(c->rr_head + c->rr_count) % XS_RR_MAX] = *in;
	c->rr_count++;
	pthread_mutex_unlock(&c->tx_mu);
	/* on the engine thread the pump runs after this round of input */
	if (!on_engine_thread)
		conn_command(c, CMD_TX);
	return 0;
}

int xs_conn_read_resp(struct xs_conn *c, uint32_t sink_stag, uint64_t sink_to,
		      const uint8_t *src, uint32_t len)
{
	struct xs_rresp r = { .sink_stag = sink_stag, .sink_to = sink_to, .src = src, .len = len };

	return rr_queue(c, &r);
}

int xs_conn_atomic_resp(struct xs_conn *c, uint32_t req_id, uint64_t value)
{
	struct xs_rresp r = { .atomic = true, .req_id = req_id, .value = value };

	return rr_queue(c, &r);
}

/* Engine: room in tx_rem for one more FPDU of any shape. */
static bool rem_room(const struct xs_conn *c)
{
	return c->tx_remcnt + MPA_TX_MAX_IOV <= XS_REM_IOV &&
	       c->tx_rem_used + XS_FRAME_SCRATCH <= XS_REM_BUF;
}

/* Engine: the FPDU just framed in c->tx.frame joins tx_rem; its pieces in
 * the frame scratch (rewritten for the next FPDU) are copied. */
static void rem_append(struct xs_conn *c)
{
	const struct mpa_txframe *f = &c->tx.frame;

	xs_stat_tx(c->stat, f);
	for (int i = 0; i < f->iovcnt; i++) {
		struct iovec v = f->iov[i];
		const uint8_t *b = v.iov_base;

		/* the frame scratch, and an Atomic Response's body (c->ar_body
		 * holds the next one) */
		if (in_frame(c, b) || (b >= c->ar_body && b < c->ar_body + sizeof(c->ar_body))) {
			uint8_t *dst = c->tx_rem_buf + c->tx_rem_used;
			memcpy(dst, b, v.iov_len);
			c->tx_rem_used += v.iov_len;
			v.iov_base = dst;
		}
		c->tx_rem[c->tx_remcnt++] = v;
	}
}

/* Engine: write the rest of tx_rem without blocking.  1 when it is all
 * out, 0 if the socket is full (ownership kept), -errno. */
static int engine_flush_rem(struct xs_conn *c)
{
	while (c->tx_remcnt > 0) {
		struct msghdr mh = { .msg_iov = c->tx_rem, .msg_iovlen = (size_t)c->tx_remcnt };
		ssize_t n = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		struct iovec *p = c->tx_rem;
		int cnt = c->tx_remcnt;
		atomic_fetch_add_explicit(&c->tx_writes, 1, memory_order_relaxed);
		xs_iov_advance(&p, &cnt, (size_t)n);
		memmove(c->tx_rem, p, (size_t)cnt * sizeof(*p));
		c->tx_remcnt = cnt;
	}
	c->tx_rem_used = 0;
	return 1;
}

/* Engine: frame the queued Atomic Response into tx_rem (its body in
 * c->ar_body, which lives until the next one). */
static int engine_atomic_resp_fpdu(struct xs_conn *c, const struct xs_rresp *r)
{
	struct rdmap_atomic_resp ar = { .req_id = r->req_id, .value = r->value };
	uint8_t *hdr = c->tx.frame.hdr + MPA_HDR_LEN;
	struct ddp_hdr h;
	int rc;

	rdmap_atomic_resp_encode(&ar, c->ar_body);
	iw_tx_atomic_resp_hdr(&c->tx, &h);
	struct iovec ulp[2] = {
		{ hdr, ddp_hdr_encode(&h, hdr) },
		{ c->ar_body, sizeof(c->ar_body) },
	};
	rc = mpa_tx_frame(&c->tx.mpa, ulp, 2, &c->tx.frame);
	if (rc < 0)
		return rc;
	rem_append(c);
	pthread_mutex_lock(&c->tx_mu);
	c->rr_head = (c->rr_head + 1) % XS_RR_MAX;
	c->rr_count--;
	pthread_mutex_unlock(&c->tx_mu);
	return 0;
}

/* Engine: frame a kick (XS_KICK_FIRST_MS) into tx_rem: a zero-length RDMA
 * Write naming STag 1, TO 0, as siw's own Write RTR does. */
static int engine_kick_fpdu(struct xs_conn *c)
{
	struct ddp_hdr h = { .tagged = true, .last = true, .dv = DDP_VERSION,
			     .rsvdulp = rdmap_ctrl_encode(RDMAP_OP_WRITE), .stag = 1 };
	uint8_t *hdr = c->tx.frame.hdr + MPA_HDR_LEN;
	struct iovec ulp = { hdr, ddp_hdr_encode(&h, hdr) };
	int rc;

	c->kick_pending = false;
	rc = mpa_tx_frame(&c->tx.mpa, &ulp, 1, &c->tx.frame);
	if (rc < 0)
		return rc;
	rem_append(c);
	return 0;
}

/* Engine: frame the next Read Response segment into tx_rem. */
static int engine_next_rr_fpdu(struct xs_conn *c)
{
	struct xs_rresp *r = &c->rr[c->rr_head];
	struct ddp_hdr h;
	size_t off, len;
	int rc;

	if (r->atomic)
		return engine_atomic_resp_fpdu(c, r);
	if (!c->rr_active) {
		struct ddp_hdr tmpl = { .tagged = true, .dv = DDP_VERSION,
					.rsvdulp = rdmap_ctrl_encode(RDMAP_OP_READ_RESP),
					.stag = r->sink_stag, .to = r->sink_to };
		rc = ddp_seg_init(&c->rr_seg, &tmpl, r->len, c->tx.mulpdu);
		if (rc < 0)
			return rc;
		c->rr_active = true;
	}
	if (!ddp_seg_next(&c->rr_seg, &h, &off, &len))
		return -EINVAL;
	uint8_t *hdr = c->tx.frame.hdr + MPA_HDR_LEN;
	struct iovec ulp[2] = {
		{ hdr, ddp_hdr_encode(&h, hdr) },
		{ (void *)(uintptr_t)(r->src + off), len },
	};
	rc = mpa_tx_frame(&c->tx.mpa, ulp, len ? 2 : 1, &c->tx.frame);
	if (rc < 0)
		return rc;
	rem_append(c);
	if (h.last) {
		c->rr_active = false;
		pthread_mutex_lock(&c->tx_mu);
		c->rr_head = (c->rr_head + 1) % XS_RR_MAX;
		c->rr_count--;
		pthread_mutex_unlock(&c->tx_mu);
	}
	return 0;
}

/* Engine: serve queued Read Responses and a pending disconnect, never
 * blocking.  Takes tx ownership only when no application thread has it. */
static void engine_tx(struct xs_conn *c)
{
	int rc;

	pthread_mutex_lock(&c->tx_mu);
	if (c->dead || c->state != CONN_ESTABLISHED || (c->tx_busy && !c->tx_engine)) {
		pthread_mutex_unlock(&c->tx_mu);
		return; /* the owner kicks us when it releases */
	}
	if (!c->tx_busy && !c->rr_count && !c->disconnect_asked && !c->kick_pending) {
		if (c->rtr_answering) {
			c->rtr_answering = false;
			pthread_cond_broadcast(&c->tx_cv);
		}
		pthread_mutex_unlock(&c->tx_mu);
		return;
	}
	c->tx_busy = true;
	c->tx_engine = true;
	pthread_mutex_unlock(&c->tx_mu);

	for (;;) {
		rc = engine_flush_rem(c);
		if (rc == 0) {
			c->want_out = true;
			return; /* keep ownership until POLLOUT */
		}
		if (rc < 0)
			break;
		/* frame what fits, then one sendmsg for all of it */
		int framed = 0;
		while (rem_room(c)) {
			if (c->rr_count || c->rr_active)
				rc = engine_next_rr_fpdu(c);
			else if (c->kick_pending)
				rc = engine_kick_fpdu(c);
			else
				break;
			if (rc < 0)
				break;
			framed++;
		}
		if (rc < 0 || !framed)
			break;
	}
	c->want_out = false;
	pthread_mutex_lock(&c->tx_mu);
	c->tx_busy = false;
	c->tx_engine = false;
	if (!c->rr_count)
		c->rtr_answering = false; /* the Read RTR's answer is out */
	bool fin = c->disconnect_asked && !c->fin_sent;
	if (fin)
		c->fin_sent = true;
	pthread_cond_broadcast(&c->tx_cv);
	pthread_mutex_unlock(&c->tx_mu);
	if (rc < 0) {
		struct xs_err e;
		xs_err_set(&e, XS_LAYER_LLP, MPA_ETYPE, MPA_ECODE_TCP_CLOSED);
		conn_fail(c, false, &e, rc);
		return;
	}
	if (fin)
		conn_fin(c);
}

/* ---- receive ---------------------------------------------------------------- */

/* RFC 6581: the responder may send once the initiator's RTR is in. */
static void rtr_done(struct xs_conn *c)
{
	pthread_mutex_lock(&c->tx_mu);
	c->rtr_wait = false;
	pthread_cond_broadcast(&c->tx_cv);
	pthread_mutex_unlock(&c->tx_mu);
}

static int conn_resolve(void *ctx, uint32_t stag, uint64_t to, uint32_t len, uint8_t **dst,
			struct xs_err *err)
{
	struct xs_conn *c = ctx;

	if (c->dead || c->rx_defer) {
		/* the stream ended in the middle of this input */
		xs_err_set(err, XS_LAYER_LLP, MPA_ETYPE, MPA_ECODE_TCP_CLOSED);
		return -EPIPE;
	}
	if (len == 0 && (c->rx.op == RDMAP_OP_WRITE ||
			 (c->rtr_rresp && c->rx.op == RDMAP_OP_READ_RESP))) {
		/* a zero-length Write (an RTR, a peer's kick) places nothing
		 * and, as in siw, names no buffer that is checked (siw sends
		 * STag 1); or the answer to our Read RTR: not the ULP's */
		c->rtr_eat_last = true;
		*dst = NULL;
		return 0;
	}
	if (c->rtr_wait) {
		/* a peer that skipped the RTR: be liberal, let data flow */
		xs_log("P2P: first FPDU is not an RTR; accepting it");
		rtr_done(c);
	}
	if (!c->ops)
		return -ENOENT;
	return c->ops->resolve(c->qp, c->rx.op, stag, to, len, dst, err);
}

/* Untagged input while the responder waits for the RTR: a zero-length Read
 * Request is the Read RTR (answered with a zero-length Read Response, its
 * IRD buffer handed back).  true if it was consumed here.  The answer goes
 * out before any ULP FPDU: on the engine thread at once; from an
 * application thread's receive (ibv_poll_cq) the engine sends it and the
 * ULP waits for that (rtr_answering): engine_tx is the engine's alone, two
 * threads in it would both own the tx side (a doubled answer, the
 * initiator Terminates). */
static bool rtr_untagged(struct xs_conn *c, uint32_t qn, const struct ddp_delivery *d)
{
	struct rdmap_read_req rr;
	struct xs_err err;

	if (qn == RDMAP_QN_TERMINATE)
		return false;
	if (qn == RDMAP_QN_READ_REQ && rdmap_read_req_decode(d->addr, d->msg_len, &rr, &err) == 0 &&
	    rr.size == 0) {
		if (ddp_queue_post(c->q_readreq, d->addr, xs_ird_buf_len(&c->agreed), NULL) < 0)
			xs_log("P2P: IRD buffer lost");
		if (!on_engine_thread) {
			pthread_mutex_lock(&c->tx_mu);
			c->rtr_answering = true;
			pthread_mutex_unlock(&c->tx_mu);
		}
		if (xs_conn_read_resp(c, rr.sink_stag, rr.sink_to, NULL, 0) < 0) {
			xs_log("P2P: Read RTR not answered");
			pthread_mutex_lock(&c->tx_mu);
			c->rtr_answering = false;
			pthread_mutex_unlock(&c->tx_mu);
		} else if (on_engine_thread) {
			engine_tx(c);
		}
		rtr_done(c);
		return true;
	}
	xs_log("P2P: first message is not an RTR; accepting it");
	rtr_done(c);
	return false;
}

static void conn_deliver(void *ctx, enum rdmap_opcode op, uint32_t qn, const struct ddp_delivery *d)
{
	struct xs_conn *c = ctx;

	if (c->dead || c->rx_defer)
		return; /* the stream ended earlier in this input */
	xs_stat_rx_msg(c->stat, op);
	if (qn == RDMAP_QN_TERMINATE) {
		struct rdmap_term t;
		struct xs_err e;

		c->term_seen = true;
		if (rdmap_term_decode(d->addr, d->msg_len, &t, &e) == 0 ||
		    rdmap_term_decode_siw(d->addr, d->msg_len, &t, &e) == 0)
			c->term_cause = t.cause;
		else
			xs_err_set(&c->term_cause, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP,
				   RDMAP_ECODE_UNSPECIFIED);
		xs_stat_term(c->stat, false, &c->term_cause);
	}
	if (c->rtr_wait && rtr_untagged(c, qn, d))
		return;
	if (c->ops)
		c->ops->deliver(c->qp, op, qn, d);
}

static void conn_tagged_last(void *ctx, enum rdmap_opcode op, const struct ddp_hdr *h)
{
	struct xs_conn *c = ctx;

	xs_stat_rx_msg(c->stat, op);
	if (c->rtr_eat_last) {
		c->rtr_eat_last = false;
		if (op == RDMAP_OP_READ_RESP)
			c->rtr_rresp = false;
		else
			rtr_done(c);
		return;
	}
	if (c->ops && c->ops->tagged_last)
		c->ops->tagged_last(c->qp, op, h);
}

static const struct iw_rx_ops conn_rx_ops = {
	.deliver = conn_deliver,
	.tagged_last = conn_tagged_last,
};

static void conn_report_closed(struct xs_conn *c, int status)
{
	xs_conn_closed_fn cb = NULL;
	void *ctx = NULL;

	if (!c->closed_reported && !c->owner_gone) {
		c->closed_reported = true;
		cb = c->closed_cb;
		ctx = c->closed_ctx;
	}
	if (cb)
		cb(ctx, status);
}

/* The stream is over: tell the QP (once) and the CM; engine thread, rx_mu held. */
static void conn_fail(struct xs_conn *c, bool local, const struct xs_err *err, int status)
{
	pthread_mutex_lock(&c->tx_mu);
	bool was_dead = c->dead;
	c->dead = true;
	pthread_cond_broadcast(&c->tx_cv);
	pthread_mutex_unlock(&c->tx_mu);
	if (was_dead)
		return;
	if (c->ops && !c->owner_gone)
		c->ops->failed(c->qp, local, err);
	conn_shut(c, SHUT_RDWR);
	c->state = CONN_CLOSED;
	xs_stat_state(c->stat, XS_STAT_CLOSED, status);
	conn_report_closed(c, status);
}

/* Engine thread: the Terminate t (if the tx side is free), then fail. */
static void conn_terminate_fail(struct xs_conn *c, const struct rdmap_term *t)
{
	pthread_mutex_lock(&c->tx_mu);
	bool free_tx = !c->tx_busy && !c->dead;
	if (free_tx)
		c->tx_busy = true;
	pthread_mutex_unlock(&c->tx_mu);
	if (free_tx) {
		uint8_t body[RDMAP_TERM_MAX_LEN];
		ssize_t n = rdmap_term_encode(t, body, sizeof(body));
		if (n > 0) {
			/* a Terminate is small: one nonblocking attempt */
			struct ddp_hdr h = { .dv = DDP_VERSION, .last = true, .qn = RDMAP_QN_TERMINATE,
					     .rsvdulp = rdmap_ctrl_encode(RDMAP_OP_TERMINATE),
					     .msn = c->tx.msn[RDMAP_QN_TERMINATE]++ };
			uint8_t *hdr = c->tx.frame.hdr + MPA_HDR_LEN;
			struct iovec ulp[2] = { { hdr, ddp_hdr_encode(&h, hdr) }, { body, (size_t)n } };
			if (mpa_tx_frame(&c->tx.mpa, ulp, 2, &c->tx.frame) == 0) {
				xs_stat_tx(c->stat, &c->tx.frame);
				struct msghdr mh = { .msg_iov = c->tx.frame.iov,
						     .msg_iovlen = (size_t)c->tx.frame.iovcnt };
				if (sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
					xs_log("Terminate not sent: %s", strerror(errno));
			}
		}
		xs_stat_term(c->stat, true, &t->cause);
		pthread_mutex_lock(&c->tx_mu);
		c->tx_busy = false;
		pthread_mutex_unlock(&c->tx_mu);
	}
	conn_fail(c, true, &t->cause, -EPROTO);
}

/* A protocol error we found: Terminate (if the tx side is free), then fail. */
static void conn_protocol_error(struct xs_conn *c, const struct xs_err *err)
{
	struct rdmap_term t = { .cause = *err };

	xs_stat_rx_error(c->stat, err);
	if (c->rx.hdr_len && c->rx.hdr_got == c->rx.hdr_len) {
		t.d = true;
		memcpy(t.ddp_hdr, c->rx.hdr, c->rx.hdr_len);
		t.ddp_hdr_len = c->rx.hdr_len;
	}
	conn_terminate_fail(c, &t);
}

/* Receive what the socket holds (rx_mu held) until it would block or the
 * budget is used.  On the engine thread a failure ends the stream here;
 * on an application thread (engine = false, the poll_cq fast path) a
 * protocol error or a peer's Terminate is parked in rx_defer for the
 * engine, which owns every upcall that ends a stream, and a FIN or socket
 * error is left for the engine's own poll to find.  Returns the octets
 * consumed. */
static size_t conn_receive_locked(struct xs_conn *c, size_t budget, bool engine)
{
	struct xs_err err;
	size_t got = 0;
	bool emptied = false;

	while (budget > 0 && c->state == CONN_ESTABLISHED && !c->dead && !c->rx_defer) {
		uint8_t *dst;
		size_t win, asked, fed = 0, used = 0;
		ssize_t n;
		int rc = 0;

		if (atomic_load(&c->rx_stalled)) {
			/* a receive may be there now: go on where the Send stopped */
			if (atomic_load(&c->rnr_off))
				c->rx.rnr = false;
			bool over = c->rx_over_len > 0;

			if (over)
				rc = iw_rx_input_part(&c->rx, c->rx_over + c->rx_over_off,
						      c->rx_over_len - c->rx_over_off, &used, &err);
			else
				rc = iw_rx_input_part(&c->rx, c->rbuf + c->rx_pend_off,
						      c->rx_pend_len, &used, &err);
			if (rc == -EAGAIN) {
				if (over) {
					c->rx_over_off += used;
				} else {
					c->rx_pend_off += used;
					c->rx_pend_len -= used;
				}
				if (used && engine) /* another Send: its own wait */
					rnr_track(c);
				else if (used)
					conn_command(c, CMD_RXKICK);
				break;
			}
			if (rc < 0)
				goto fail;
			c->rx_pend_len = 0;
			if (over) { /* served: give the memory back */
				free(c->rx_over);
				c->rx_over = NULL;
				c->rx_over_cap = c->rx_over_off = c->rx_over_len = 0;
			}
			atomic_store(&c->rx_stalled, false);
			if (!engine)
				conn_command(c, CMD_ARM); /* the engine's poll is off */
		}
		win = iw_rx_direct(&c->rx, &dst);
		if (win > 0) {
			/* payload whose destination is known: straight there, and
			 * in the same call the CRC and the next FPDU's headers */
			struct iovec v[2] = { { dst, win }, { c->rbuf, XS_RTAIL } };
			struct msghdr mh = { .msg_iov = v, .msg_iovlen = 2 };
			asked = win + XS_RTAIL;
			n = recvmsg(c->fd, &mh, MSG_DONTWAIT);
			if (n > 0)
				rc = iw_rx_direct_done(&c->rx, (size_t)n < win ? (size_t)n : win, &err);
			if (n > 0 && (size_t)n > win && rc == 0) {
				fed = (size_t)n - win;
				rc = iw_rx_input_part(&c->rx, c->rbuf, fed, &used, &err);
			}
		} else {
			/* inside a stream of large FPDUs a big read would stage
			 * payload here only to copy it again: read the headers */
			asked = c->rx_large ? XS_RTAIL : XS_RBUF;
			n = recv(c->fd, c->rbuf, asked, MSG_DONTWAIT);
			if (n > 0) {
				fed = (size_t)n;
				rc = iw_rx_input_part(&c->rx, c->rbuf, fed, &used, &err);
			}
		}
		xs_stat_rx(c->stat, n, c->rx.fpdus);
		if (n > 0 && !atomic_load_explicit(&c->rx_any, memory_order_relaxed)) {
			atomic_store(&c->tx_at_rx, atomic_load(&c->tx_writes));
			atomic_store(&c->rx_any, true);
			pthread_mutex_lock(&c->tx_mu);
			if (c->settle_wait) /* a sender waits for these octets */
				pthread_cond_broadcast(&c->tx_cv);
			pthread_mutex_unlock(&c->tx_mu);
		}
		if (rc == -EAGAIN) {
			/* RNR: keep the rest, stop reading until a receive comes */
			c->rx_pend_off = used;
			c->rx_pend_len = fed - used;
			atomic_store(&c->rx_stalled, true);
			if (engine)
				rnr_track(c);
			else
				conn_command(c, CMD_RXKICK); /* the engine keeps the time */
			got += (size_t)n;
			break;
		}
		if (n > 0 && rc == 0) {
			/* at an FPDU boundary right after a large payload the
			 * next FPDU is likely large too: read its header alone */
			size_t w = iw_rx_direct(&c->rx, &dst);
			c->rx_large = w >= XS_RLARGE || (w == 0 && win >= XS_RLARGE);
		}
		if (rc < 0) {
fail:
			if (engine) {
				conn_protocol_error(c, &err);
			} else if (!c->rx_defer) {
				c->rx_defer_err = err;
				c->rx_defer = XS_RX_DEFER_PROTO;
				conn_command(c, CMD_RXDEFER);
			}
			break;
		}
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			if (!engine) {
				/* the engine's poll sees the end too, but the
				 * RST's error is read only once */
				if (n < 0 && errno == ECONNRESET)
					c->rx_reset = ECONNRESET;
				/* the engine's poll sees it too: wake it now if it
				 * parked the connection (else its pause ends within
				 * XS_PARK_NS), and stop waiters polling it */
				if (!atomic_exchange(&c->rx_app_eof, true) &&
				    atomic_load(&c->rx_parked))
					conn_command(c, CMD_ARM);
				break;
			}
			/* FIN or RST: after a Terminate it is the remote error */
			struct xs_err e;
			if (c->term_seen)
				e = c->term_cause;
			else
				xs_err_set(&e, XS_LAYER_LLP, MPA_ETYPE, MPA_ECODE_TCP_CLOSED);
			int status = n == 0 && (c->fin_sent || !c->term_seen) ? 0 : -ECONNRESET;
			if (n < 0)
				status = -errno;
			else if (c->rx_reset)
				status = -c->rx_reset;
			conn_fail(c, false, &e, status);
			break;
		}
		if (n < 0) {
			emptied = errno == EAGAIN || errno == EWOULDBLOCK;
			break;
		}
		got += (size_t)n;
		budget = (size_t)n < budget ? budget - (size_t)n : 0;
		/* a short read emptied the socket: another recv would only say
		 * EAGAIN (what arrives later makes the socket readable again,
		 * for the engine's re-armed poll as for a waiting thread) */
		if (!c->term_seen && (size_t)n < asked) {
			emptied = true;
			break;
		}
		if (c->term_seen) {
			if (engine) {
				conn_fail(c, false, &c->term_cause, -ECONNRESET);
			} else {
				c->rx_defer = XS_RX_DEFER_TERM;
				conn_command(c, CMD_RXDEFER);
			}
			break;
		}
	}
	atomic_store(&c->rx_empty, emptied);
	return got;
}

static void conn_receive(struct xs_conn *c)
{
	/* An application thread receiving here (xs_conn_poll) takes what is
	 * there; waiting for its lock would only add a wake-up.  What it
	 * leaves keeps the socket readable, and the re-armed poll fires. */
	if (pthread_mutex_trylock(&c->rx_mu))
		return;
	conn_receive_locked(c, 4u << 20, true); /* then let other connections run */
	pthread_mutex_unlock(&c->rx_mu);
}

/* Engine: end the stream for what an application thread's receive found. */
static void conn_rx_deferred(struct xs_conn *c)
{
	pthread_mutex_lock(&c->rx_mu);
	if (c->rx_defer == XS_RX_DEFER_PROTO && !c->dead)
		conn_protocol_error(c, &c->rx_defer_err);
	else if (c->rx_defer == XS_RX_DEFER_TERM && !c->dead)
		conn_fail(c, false, &c->term_cause, -ECONNRESET);
	else if (c->rx_defer == XS_RX_DEFER_QPTERM && !c->dead)
		conn_terminate_fail(c, &c->rx_defer_term);
	pthread_mutex_unlock(&c->rx_mu);
}

/* ---- handshakes ------------------------------------------------------------ */

static int hs_read(struct xs_conn *c, enum mpa_frame_type type, struct mpa_frame *f)
{
	struct xs_err err;

	for (;;) {
		if (c->hs_need > sizeof(c->hs_buf))
			return -EPROTO;
		while (c->hs_have < c->hs_need) {
			ssize_t n = recv(c->fd, c->hs_buf + c->hs_have, c->hs_need - c->hs_have,
					 MSG_DONTWAIT);
			if (n == 0)
				return -ECONNRESET;
			if (n < 0)
				return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
			c->hs_have += (size_t)n;
		}
		int rc = mpa_frame_decode(c->hs_buf, c->hs_have, type, f, &c->hs_need, &err);
		if (rc != -EAGAIN)
			return rc;
	}
}

static int send_small(int fd, const uint8_t *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd p = { .fd = fd, .events = POLLOUT };
				poll(&p, 1, 1000);
				continue;
			}
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static void stream_setup(struct xs_conn *c)
{
	int mss = 0;
	socklen_t sl = sizeof(mss);

	if (getsockopt(c->fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &sl) < 0 || mss <= 0)
		mss = 1460;
	/* FPDUs the size of a TCP segment (RFC 5044 section 4.4): an RNIC
	 * places each segment alone, and a capture dissects (tshark keeps no
	 * MPA state across segments).  64 KiB FPDUs to another xsock were
	 * tried: tshark then finds most CRCs bad; the gain was within noise. */
	size_t mulpdu = mpa_mulpdu((size_t)mss, c->agreed.markers_tx);
	iw_tx_init(&c->tx, c->agreed.markers_tx, c->agreed.crc, mulpdu, conn_write_blocking, c);
	iw_rx_init(&c->rx, c->agreed.markers_rx, c->agreed.crc, 0, conn_resolve, c, &conn_rx_ops, c);
	c->rx.rnr = xs_config()->rnr_ms > 0;
	c->rx.ext = c->agreed.rdmap_ext;
}

/* Initiator in peer-to-peer mode: the RTR is the first FPDU (RFC 6581 4),
 * sent before anyone else may transmit on the connection: a zero-length
 * Write or Read Request naming STag 1 and TO 0 as siw does, or a
 * zero-length Send. */
static int send_rtr(struct xs_conn *c)
{
	struct rdmap_read_req rr = { .sink_stag = 1, .src_stag = 1 };

	if (!c->agreed.p2p)
		return 0;
	switch (c->agreed.rtr) {
	case MPA_RTR_WRITE:
		return iw_tx_tagged(&c->tx, RDMAP_OP_WRITE, 1, 0, NULL, 0);
	case MPA_RTR_READ:
		c->rtr_rresp = true;
		return iw_tx_read_req(&c->tx, &rr);
	case MPA_RTR_SEND:
		return iw_tx_send(&c->tx, RDMAP_OP_SEND, 0, NULL, 0);
	default:
		return 0;
	}
}

static void kick_start(struct xs_conn *c);

static void connect_done(struct xs_conn *c, int status, const struct mpa_frame *reply)
{
	xs_connect_fn cb = c->connect_cb;

	c->connect_cb = NULL;
	if (status == 0) {
		c->state = CONN_ACCEPTED;
		stream_setup(c);
		status = send_rtr(c);
		if (status < 0)
			xs_log("P2P: RTR not sent: %s", strerror(-status));
		else if (!peer_is_xsock(c))
			kick_start(c);
	}
	if (status != 0) {
		c->state = CONN_CLOSED;
		conn_shut(c, SHUT_RDWR);
	}
	if (cb)
		cb(c->connect_ctx, status == 0 ? c : NULL, status, reply);
	if (status != 0) {
		/* nobody owns a failed connection: drop the owner's and the
		 * engine's references (a pending poll still holds one) */
		c->owner_gone = true;
		c->engine_ref_dropped = true;
		conn_unref(c);
		conn_unref(c);
	}
}

/* Responder: give up a connection nobody owns yet (bad or missing Request). */
static void responder_drop(struct xs_conn *c)
{
	c->state = CONN_CLOSED;
	c->owner_gone = true;
	c->engine_ref_dropped = true;
	conn_shut(c, SHUT_RDWR);
	conn_unref(c); /* the engine's; a pending poll's keeps it until conn_event ends */
}

/* ---- the mixed listener: iWARP or plain TCP (engine thread) -----------------------
 * A connection accepted by a mixed listener is looked at with MSG_PEEK
 * before anything is read: the 16-octet MPA Request key makes it iWARP
 * (the Request is then read as on any listener); other octets, or the
 * peer's FIN, make it plain TCP at once; a strict prefix of the key, or
 * nothing at all, waits until XSOCK_CLASSIFY_MS after the accept and is
 * then plain too (a protocol where the server speaks first).  A plain
 * connection is handed over untouched: every octet the client sent is
 * still in the kernel socket for the application to read. */

enum cls_result { CLS_IWARP, CLS_WAIT, CLS_PLAIN, CLS_DROP };

static enum cls_result cls_peek(struct xs_conn *c, bool final)
{
	uint8_t b[MPA_KEY_LEN];
	ssize_t n = recv(c->fd, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);

	c->cls_partial = false;
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
		xs_log("mixed listener: client gone before it was classified (%s)",
		       strerror(errno));
		return CLS_DROP;
	}
	if (n == 0)
		return CLS_PLAIN; /* FIN without a word: the application reads the EOF */
	if (n < 0)
		return final ? CLS_PLAIN : CLS_WAIT;
	if (memcmp(b, MPA_KEY_REQ, (size_t)n) != 0)
		return CLS_PLAIN;
	if (n == MPA_KEY_LEN)
		return CLS_IWARP;
	if (final)
		return CLS_PLAIN; /* a prefix of the key and no more: not MPA */
	c->cls_partial = true;
	return CLS_WAIT;
}

/* Give a plain connection to the listener's owner; the xs_conn ends here
 * (no shutdown: the socket lives on in the application). */
static void conn_plain(struct xs_conn *c)
{
	struct xs_listener *l = c->listener;
	int fd = c->fd;

	if (c->poll_armed)
		poll_cancel(c, TAG_CONN); /* io_uring must drop its hold on the file */
	c->fd = -1;
	xs_fd_drop(fd); /* the application's from now on */
	c->state = CONN_CLOSED;
	c->owner_gone = true;
	c->engine_ref_dropped = true;
	pthread_mutex_lock(&l->mu);
	if (l->closing || !l->plain)
		close(fd);
	else
		l->plain(l->ctx, fd);
	pthread_mutex_unlock(&l->mu);
	conn_unref(c); /* the engine's; the caller's (poll or hs list) keeps c for now */
}

/* true if c is iWARP (read its Request now); otherwise c waits, or was
 * handed over or dropped. */
static bool cls_step(struct xs_conn *c)
{
	enum cls_result r = cls_peek(c, xs_now_ms() >= c->cls_deadline_ms);

	switch (r) {
	case CLS_IWARP: {
		int one = 1;
		c->cls_pending = false;
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		return true;
	}
	case CLS_WAIT:
		return false;
	case CLS_PLAIN:
		c->cls_pending = false;
		conn_plain(c);
		return false;
	case CLS_DROP:
		c->cls_pending = false;
		responder_drop(c);
		return false;
	}
	return false;
}

/* Arm the classification timer for the nearest deadline (or the next look
 * at a partial key) while any connection waits to be classified. */
/* One io_uring timeout per kind (the handshake scan, classification,
 * parked connections, the late list): armed at most once at a time,
 * *armed cleared by its handler. */
static void eng_timeout_arm(bool *armed, struct __kernel_timespec *ts, uint64_t ns, int tag)
{
	struct io_uring_sqe *sqe;

	if (*armed)
		return;
	sqe = eng_sqe();
	ts->tv_sec = (long long)(ns / 1000000000u);
	ts->tv_nsec = (long long)(ns % 1000000000u);
	io_uring_prep_timeout(sqe, ts, 0, 0);
	io_uring_sqe_set_data(sqe, (void *)(uintptr_t)tag);
	*armed = true;
}

static void cls_timer_arm(void)
{
	uint64_t now = xs_now_ms(), next = UINT64_MAX;

	if (eng.ctimer_armed)
		return;
	for (struct xs_conn *c = eng.hs_list; c; c = c->hs_next) {
		if (!c->cls_pending || c->state != CONN_WAIT_REQUEST || c->owner_gone)
			continue;
		uint64_t t = c->cls_deadline_ms;
		if (c->cls_partial && now + XS_CLS_TICK_MS < t)
			t = now + XS_CLS_TICK_MS;
		if (t < next)
			next = t;
	}
	if (next == UINT64_MAX)
		return;
	uint64_t ms = next > now ? next - now : 0;
	if (ms < 1)
		ms = 1;
	eng_timeout_arm(&eng.ctimer_armed, &eng.ctimer_ts, ms * 1000000u, TAG_CTIMER);
}

static void conn_handshake(struct xs_conn *c);

/* The classification timer fired: look again at partial keys, and call
 * every connection past its deadline plain. */
static void cls_scan(void)
{
	uint64_t now = xs_now_ms();

	eng.ctimer_armed = false;
	/* the hs list holds a reference on each entry and only hs_scan
	 * unlinks, so walking it while connections change state is safe */
	for (struct xs_conn *c = eng.hs_list; c; c = c->hs_next) {
		if (!c->cls_pending || c->state != CONN_WAIT_REQUEST || c->owner_gone)
			continue;
		if (!c->cls_partial && now < c->cls_deadline_ms)
			continue; /* its poll reports the first octets */
		conn_handshake(c);
		if (c->state != CONN_CLOSED)
			conn_arm(c);
	}
	cls_timer_arm();
}

static void conn_handshake(struct xs_conn *c)
{
	struct mpa_frame f;
	struct xs_err err;
	int rc;

	switch (c->state) {
	case CONN_CONNECTING: {
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (c->refused_now) { /* connect() itself said so */
			c->refused_now = false;
			soerr = ECONNREFUSED;
		}
		if (soerr == ECONNREFUSED && redial_track(c))
			return;
		if (soerr) {
			connect_done(c, -soerr, NULL);
			return;
		}
		if (dial_blocked(c)) {
			dial_hold(c);
			return;
		}
		uint8_t buf[XS_HS_MAX];
		ssize_t n = mpa_frame_encode(&c->req, buf, sizeof(buf));
		rc = n < 0 ? (int)n : send_small(c->fd, buf, (size_t)n);
		if (rc < 0) {
			connect_done(c, rc, NULL);
			return;
		}
		c->state = CONN_WAIT_REPLY;
		c->hs_have = 0;
		c->hs_need = MPA_RR_HDR_LEN;
		break;
	}
	case CONN_WAIT_REPLY:
		rc = hs_read(c, MPA_REPLY, &f);
		if (rc == -EAGAIN)
			break;
		if ((rc == -ECONNRESET || rc == -EPIPE) && !c->hs_have) {
			/* closed before any Reply octet: a proxy or NAT (QEMU's
			 * user network) accepted for a server that does not
			 * listen (yet), which is a refused connect */
			c->state = CONN_CONNECTING;
			if (redial_track(c))
				return;
			rc = -ECONNREFUSED;
		}
		if (rc < 0) {
			connect_done(c, rc, NULL);
			return;
		}
		rc = mpa_initiator_complete(&c->prefs, &c->req, &f, &c->agreed, &err);
		if (rc == -ECONNREFUSED)
			xs_log("MPA Reply: the peer rejected the connection");
		else if (rc < 0)
			xs_log("MPA Reply refused: %d (layer %u etype %u code 0x%02x)", rc, err.layer,
			       err.etype, err.ecode);
		connect_done(c, rc, &f);
		return;
	case CONN_WAIT_REQUEST:
		if (c->cls_pending && !cls_step(c)) {
			if (c->cls_pending)
				cls_timer_arm();
			return;
		}
		rc = hs_read(c, MPA_REQUEST, &c->req);
		if (rc == -EAGAIN)
			break;
		if (rc < 0) {
			xs_log("bad MPA Request (%d): closing", rc);
			responder_drop(c);
			return;
		}
		c->state = CONN_WAIT_ACCEPT;
		conn_ref(c); /* the CM's reference */
		/* under the listener's lock: xs_listener_close waits for us */
		pthread_mutex_lock(&c->listener->mu);
		if (c->listener->closing) {
			pthread_mutex_unlock(&c->listener->mu);
			conn_unref(c); /* the CM's */
			responder_drop(c);
			return;
		}
		c->listener->cb(c->listener->ctx, c, &c->req);
		pthread_mutex_unlock(&c->listener->mu);
		return;
	default:
		break;
	}
}

/* ---- handshake deadlines (engine thread) ------------------------------------------
 * A peer that never answers must not leave a connect or an accepted TCP
 * connection pending forever: each connection in CONNECTING, WAIT_REPLY or
 * WAIT_REQUEST is on a list scanned by a 250 ms io_uring timeout that runs
 * only while the list is not empty.  The list holds a reference; entries that
 * moved on are dropped at the next scan. */

static bool hs_pending(const struct xs_conn *c)
{
	return c->state == CONN_CONNECTING || c->state == CONN_WAIT_REPLY ||
	       c->state == CONN_WAIT_REQUEST;
}

static void timer_arm(void)
{
	eng_timeout_arm(&eng.timer_armed, &eng.timer_ts, 250u * 1000 * 1000, TAG_TIMER);
}

static void hs_track(struct xs_conn *c)
{
	if (c->on_hs_list || !hs_pending(c))
		return;
	conn_ref(c);
	c->on_hs_list = true;
	c->hs_deadline_ms = xs_now_ms() + xs_config()->mpa_timeout_ms;
	c->hs_next = eng.hs_list;
	eng.hs_list = c;
	timer_arm();
}

static void hs_scan(void)
{
	uint64_t now = xs_now_ms();
	struct xs_conn **pp = &eng.hs_list;

	while (*pp) {
		struct xs_conn *c = *pp;

		if (hs_pending(c) && !c->owner_gone && now < c->hs_deadline_ms) {
			pp = &c->hs_next;
			continue;
		}
		*pp = c->hs_next;
		c->on_hs_list = false;
		if (hs_pending(c) && !c->owner_gone) {
			xs_log("MPA %s: no answer within %u ms", c->initiator ? "connect" : "Request",
			       xs_config()->mpa_timeout_ms);
			if (c->initiator) {
				/* refused until now (redial_track): say so */
				connect_done(c, c->redial_wait_ms ? -ECONNREFUSED : -ETIMEDOUT, NULL);
			} else if (c->cls_pending) {
				c->cls_pending = false; /* XSOCK_CLASSIFY_MS beyond the MPA timeout */
				conn_plain(c);
			} else {
				responder_drop(c);
			}
		}
		conn_unref(c); /* the list's */
	}
	if (eng.hs_list)
		timer_arm();
}

/* ---- parked connections (engine thread) -------------------------------------------
 * Data came while an application thread waits on the socket to receive it
 * itself: the engine stays out (no lock race, no CQ event, no second
 * wake-up) and re-arms its poll XS_PARK_NS later, so a socket nobody reads
 * any more is received on again within that pause (park_keep: unless the
 * waiter received meanwhile). */

static void park_timer_arm(void)
{
	eng_timeout_arm(&eng.park_armed, &eng.park_ts, XS_PARK_NS, TAG_PARK);
}

static void conn_park(struct xs_conn *c)
{
	if (c->rx_parked) { /* re-armed meanwhile by a command: once on the list */
		conn_unref(c);
		return;
	}
	c->rx_parked = true;
	c->park_gen = atomic_load_explicit(&c->app_rx_gen, memory_order_relaxed);
	c->park_next = eng.parked;
	eng.parked = c;
	park_timer_arm();
}

/* A parked connection stays parked, its poll not re-armed, while its
 * waiter still receives on it: an application thread received since the
 * last look (an epoll set's socket is watched between its waits too). */
static bool park_keep(struct xs_conn *c)
{
	unsigned gen = atomic_load_explicit(&c->app_rx_gen, memory_order_relaxed);

	if (c->poll_armed || c->state != CONN_ESTABLISHED || c->owner_gone || c->want_out ||
	    c->rr_count || gen == c->park_gen || atomic_load(&c->rx_app_eof) ||
	    atomic_load_explicit(&c->app_waiters, memory_order_acquire) <= 0 ||
	    atomic_load_explicit(&c->fork_mode, memory_order_acquire) != XS_FORK_MINE)
		return false;
	c->park_gen = gen;
	return true;
}

static void park_expired(void)
{
	struct xs_conn *c = eng.parked, *kept = NULL;

	eng.park_armed = false;
	eng.parked = NULL;
	while (c) {
		struct xs_conn *next = c->park_next;

		if (park_keep(c)) {
			c->park_next = kept;
			kept = c;
			c = next;
			continue;
		}
		c->rx_parked = false;
		c->park_next = NULL;
		if (c->state != CONN_CLOSED && !c->owner_gone)
			conn_arm(c);
		conn_unref(c); /* the parked poll's */
		c = next;
	}
	eng.parked = kept;
	if (kept)
		eng_timeout_arm(&eng.park_armed, &eng.park_ts, XS_PARK_KEEP_NS, TAG_PARK);
}

/* ---- delayed FIN and lingering close (engine thread) --------------------------------
 * A TCP socket closed with unread octets in its receive queue answers with
 * a RST, and the peer's kernel then drops what it had not yet delivered to
 * its application: the tail of a stream the peer's ULP already counted as
 * sent (seen with siw and rsockets: a credit update arriving just as one
 * side closed).  The kernel's TCP avoids that by finishing the close
 * itself; here the engine does: a connection whose owner closes before
 * the peer's FIN goes to CONN_LINGER, sends its FIN, reads and drops what
 * still arrives and closes at the peer's FIN or after XSOCK_LINGER_MS.
 * Process exit waits for these (bounded, xs_engine_exit_wait). */

static void late_timer_arm(void)
{
	eng_timeout_arm(&eng.late_armed, &eng.late_ts, XS_LATE_TICK_MS * 1000u * 1000u, TAG_LATE);
}

static void late_add(struct xs_conn *c)
{
	if (c->on_late_list)
		return;
	conn_ref(c);
	c->on_late_list = true;
	c->late_next = eng.late;
	eng.late = c;
	pthread_mutex_lock(&eng.mu);
	eng.late_count++;
	eng.late_pid = getpid();
	pthread_mutex_unlock(&eng.mu);
	late_timer_arm();
}

static void linger_end(struct xs_conn *c)
{
	c->state = CONN_CLOSED;
	conn_shut(c, SHUT_RDWR);
	if (!c->engine_ref_dropped) {
		c->engine_ref_dropped = true;
		conn_unref(c); /* the late list's reference keeps c for now */
	}
}

/* Engine: go on with a stalled stream (a receive was posted, or time is
 * up: expire), and read the socket again. */
static void conn_rx_kick(struct xs_conn *c, bool expire)
{
	pthread_mutex_lock(&c->rx_mu);
	if (atomic_load(&c->rx_stalled) && c->state == CONN_ESTABLISHED && !c->dead &&
	    !c->owner_gone) {
		if (expire)
			c->rx.rnr = false;
		conn_receive_locked(c, 4u << 20, true);
		if (!atomic_load(&c->rnr_off))
			c->rx.rnr = xs_config()->rnr_ms > 0;
		if (atomic_load(&c->rx_stalled) && !c->on_rnr_list)
			rnr_track(c); /* stalled on an application thread */
	}
	pthread_mutex_unlock(&c->rx_mu);
	if (c->state != CONN_CLOSED)
		conn_arm(c);
}

/* A Send waits for its receive (engine thread): until XSOCK_RNR_MS from
 * now, on the list the late timer looks at. */
static void rnr_track(struct xs_conn *c)
{
	c->rnr_due_ms = xs_now_ms() + xs_config()->rnr_ms;
	if (c->on_rnr_list)
		return;
	conn_ref(c);
	c->on_rnr_list = true;
	c->rnr_next = eng.rnr;
	eng.rnr = c;
	late_timer_arm();
}

/* Still no receive when the time is up: the Send fails the stream as it
 * would have at once without the wait (DDP/2/0x02, Terminate). */
static void rnr_scan(uint64_t now)
{
	struct xs_conn **pp = &eng.rnr;

	while (*pp) {
		struct xs_conn *c = *pp;
		bool stalled = atomic_load(&c->rx_stalled) && c->state == CONN_ESTABLISHED &&
			       !c->dead;

		if (stalled && now < c->rnr_due_ms) {
			pp = &c->rnr_next;
			continue;
		}
		*pp = c->rnr_next;
		c->on_rnr_list = false;
		if (stalled)
			conn_rx_kick(c, true);
		conn_unref(c); /* the list's */
	}
}

/* Engine: c waits on the redial list until due_ms (the list's reference). */
static void redial_list_add(struct xs_conn *c, uint64_t due_ms)
{
	c->redial_due_ms = due_ms;
	conn_ref(c);
	c->on_redial_list = true;
	c->redial_next = eng.redial;
	eng.redial = c;
	late_timer_arm();
}

/* Engine: must c's MPA Request wait?  While an earlier connect to the same
 * address was refused and is to be dialled again: the listener reports
 * CONNECT_REQUESTs in the order Requests come, and perftest -R -q N pairs
 * its QPs by that order (the k-th rdma_connect with the k-th request). */
static bool dial_blocked(const struct xs_conn *c)
{
	bool blocked = false;

	if (!c->dst_len)
		return false;
	pthread_mutex_lock(&eng.reg_mu);
	for (const struct xs_conn *r = eng.conns; r && !blocked; r = r->all_next)
		blocked = r != c && r->initiator && r->state == CONN_CONNECTING &&
			  (r->redial_wait_ms || r->refused_now) && r->dial_seq < c->dial_seq &&
			  r->dst_len == c->dst_len && memcmp(&r->dst, &c->dst, c->dst_len) == 0;
	pthread_mutex_unlock(&eng.reg_mu);
	return blocked;
}

/* Engine: a connected c whose Request waits (dial_blocked) looks again in
 * XS_REDIAL_FIRST_MS, from the redial list (redial_scan arms it). */
static void dial_hold(struct xs_conn *c)
{
	c->req_held = true;
	redial_list_add(c, xs_now_ms() + XS_REDIAL_FIRST_MS);
}

/* Engine: a refused connect waits its turn on the redial list, while time
 * is left (false: refuse it now). */
static bool redial_track(struct xs_conn *c)
{
	uint64_t now = xs_now_ms();

	if (c->on_redial_list || !c->dst_len)
		return false;
	c->redial_wait_ms = c->redial_wait_ms ? 2 * c->redial_wait_ms : XS_REDIAL_FIRST_MS;
	if (now + c->redial_wait_ms > c->redial_end_ms)
		return false;
	if (c->redial_wait_ms == XS_REDIAL_FIRST_MS)
		xs_log("connect refused: dialling again for up to %u ms", XS_REDIAL_MS);
	redial_list_add(c, now + c->redial_wait_ms);
	return true;
}

/* Engine: the same connect again on a fresh socket in the same descriptor
 * (its number stays what the owner and the fork code know). */
static void redial(struct xs_conn *c)
{
	int fd = socket(c->dst.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1, rc = 0;

	if (fd < 0 || dup3(fd, c->fd, O_CLOEXEC) < 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (rc == 0) {
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (c->src_len)
			(void)bind(c->fd, (struct sockaddr *)&c->src, c->src_len);
		if (connect(c->fd, (struct sockaddr *)&c->dst, c->dst_len) < 0 &&
		    errno != EINPROGRESS)
			rc = -errno;
	}
	if (rc == -ECONNREFUSED && redial_track(c))
		return;
	if (rc < 0) {
		connect_done(c, rc, NULL);
		return;
	}
	conn_arm(c);
}

static void redial_scan(uint64_t now)
{
	struct xs_conn **pp = &eng.redial;
	struct xs_conn *due = NULL;

	while (*pp) { /* unlinked first: a redial may list it again */
		struct xs_conn *c = *pp;

		if (now < c->redial_due_ms && c->state == CONN_CONNECTING) {
			pp = &c->redial_next;
			continue;
		}
		*pp = c->redial_next;
		c->on_redial_list = false;
		/* in the order of the connects (dial_blocked) */
		struct xs_conn **dp = &due;
		while (*dp && (*dp)->dial_seq < c->dial_seq)
			dp = &(*dp)->redial_next;
		c->redial_next = *dp;
		*dp = c;
	}
	while (due) {
		struct xs_conn *c = due;

		due = c->redial_next;
		if (c->state == CONN_CONNECTING && c->req_held) {
			c->req_held = false;
			conn_arm(c); /* connected: POLLOUT at once, conn_handshake */
		} else if (c->state == CONN_CONNECTING) { /* not closed by its owner meanwhile */
			redial(c);
		}
		conn_unref(c); /* the list's */
	}
}

/* Engine: c (an initiator, its Reply just read) kicks its peer from now
 * on (XS_KICK_FIRST_MS); the list holds a reference. */
static void kick_start(struct xs_conn *c)
{
	if (c->on_kick_list)
		return;
	conn_ref(c);
	c->on_kick_list = true;
	c->kick_wait_ms = XS_KICK_FIRST_MS;
	c->kick_due_ms = xs_now_ms() + XS_KICK_FIRST_MS;
	c->kick_next = eng.kick;
	eng.kick = c;
	late_timer_arm();
}

static void kick_send(struct xs_conn *c, const char *why)
{
	c->kick_pending = true;
	engine_tx(c); /* an owner sending now kicks by itself */
	c->kick_pending = false; /* never later: it could meet a close */
	xs_log("kick: zero-length Write %s", why);
}

static void kick_scan(uint64_t now)
{
	struct xs_conn **pp = &eng.kick;

	while (*pp) {
		struct xs_conn *c = *pp;
		enum conn_state st = c->state;
		bool more = false;

		if ((st != CONN_ACCEPTED && st != CONN_ESTABLISHED) || c->dead) {
			more = false; /* gone */
		} else if (st == CONN_ACCEPTED) {
			more = true; /* its QP is not attached yet */
		} else if (atomic_load(&c->rx_any)) {
			unsigned at_rx = atomic_load(&c->tx_at_rx);

			if (!c->kick_spoke) {
				c->kick_spoke = true;
				more = true; /* the application's turn: look next tick */
			} else if (at_rx > 0 && atomic_load(&c->tx_writes) == at_rx) {
				kick_send(c, "after the peer's first octets, nothing sent since");
			}
		} else if (now < c->kick_due_ms) {
			more = true;
		} else {
			kick_send(c, "while the peer is silent");
			if (c->kick_wait_ms < XS_KICK_LAST_MS) {
				c->kick_wait_ms *= 2;
				c->kick_due_ms = now + c->kick_wait_ms;
				more = true;
			}
		}
		if (more) {
			pp = &c->kick_next;
			continue;
		}
		*pp = c->kick_next;
		c->on_kick_list = false;
		conn_unref(c); /* the list's */
	}
}

static void late_scan(void)
{
	uint64_t now = xs_now_ms();
	struct xs_conn **pp = &eng.late;

	eng.late_armed = false;
	while (*pp) {
		struct xs_conn *c = *pp;

		/* a closed connection's shutdown(SHUT_RDWR) sent the FIN */
		if (c->fin_due_ms && (now >= c->fin_due_ms || c->state == CONN_CLOSED)) {
			c->fin_due_ms = 0;
			if (c->state != CONN_CLOSED)
				conn_shut(c, SHUT_WR);
		}
		if (c->state == CONN_LINGER && now >= c->linger_end_ms)
			linger_end(c);
		if (c->fin_due_ms || c->state == CONN_LINGER) {
			pp = &c->late_next;
			continue;
		}
		*pp = c->late_next;
		c->on_late_list = false;
		pthread_mutex_lock(&eng.mu);
		if (--eng.late_count == 0)
			pthread_cond_broadcast(&eng.late_cv);
		pthread_mutex_unlock(&eng.mu);
		conn_unref(c); /* the list's */
	}
	rnr_scan(now);
	redial_scan(now);
	kick_scan(now);
	if (eng.late || eng.rnr || eng.redial || eng.kick || xs_spare_expire(now))
		late_timer_arm();
}

/* The owner let go of an established connection (CMD_CLOSE): linger
 * rather than close, unless lingering is off or another process may
 * hold the socket.  Returns false when the caller closes as before. */
static bool linger_start(struct xs_conn *c, unsigned flags)
{
	unsigned linger = xs_config()->linger_ms;
	bool fin_now = false;

	if (!linger || c->state != CONN_ESTABLISHED ||
	    atomic_load_explicit(&c->fork_mode, memory_order_acquire) != XS_FORK_MINE)
		return false;
	pthread_mutex_lock(&c->tx_mu);
	if (!c->fin_sent) {
		c->fin_sent = true;
		fin_now = true;
	}
	pthread_mutex_unlock(&c->tx_mu);
	if (fin_now || (flags & CMD_FIN))
		conn_fin(c);
	c->state = CONN_LINGER;
	xs_stat_state(c->stat, XS_STAT_LINGER, 0);
	c->linger_end_ms = xs_now_ms() + fin_delay(c) + linger;
	late_add(c);
	conn_arm(c); /* a parked connection has no poll armed */
	return true;
}

/* Input on a lingering connection: drop it; the peer's FIN or an error ends it. */
static void linger_input(struct xs_conn *c)
{
	for (;;) {
		ssize_t n = recv(c->fd, c->rbuf, XS_RBUF, MSG_DONTWAIT);

		if (n > 0 || (n < 0 && errno == EINTR))
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			conn_arm(c);
			return;
		}
		linger_end(c); /* its shutdown sends a FIN still due */
		return;
	}
}

/* Process exit: give lingering connections and delayed FINs their time
 * (the engine thread dies with the process, and the kernel would reset a
 * socket closed with unread input).  Bounded by the settings.  A
 * destructor for exit(); libxsock calls it for _exit (xs_priv_abi.h). */
__attribute__((destructor)) static void xs_engine_exit_wait(void)
{
	const struct xs_config *cfg = xs_config();
	struct timespec ts;

	if (!eng.started || (!cfg->fin_delay_ms && !cfg->linger_ms))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t ns = (uint64_t)ts.tv_nsec +
		      ((uint64_t)cfg->fin_delay_ms + cfg->linger_ms + 100) * 1000000u;
	ts.tv_sec += (time_t)(ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	pthread_mutex_lock(&eng.mu);
	/* the disconnects and closes just asked for are commands the engine
	 * may not have run yet: two whole passes from now have run them */
	unsigned target = eng.passes + 2;
	while ((int)(target - eng.passes) > 0) {
		pthread_mutex_unlock(&eng.mu);
		engine_wake();
		pthread_mutex_lock(&eng.mu);
		if ((int)(target - eng.passes) > 0 &&
		    pthread_cond_timedwait(&eng.late_cv, &eng.mu, &ts) == ETIMEDOUT)
			break;
	}
	while (eng.late_count && eng.late_pid == getpid())
		if (pthread_cond_timedwait(&eng.late_cv, &eng.mu, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&eng.mu);
}

XS_EXPORT void xsock_priv_exit_wait(void)
{
	xs_engine_exit_wait();
}

/* ---- engine thread ----------------------------------------------------------- */

static void conn_event(struct xs_conn *c, int res)
{
	c->poll_armed = false;
	atomic_store(&c->rx_watch, false);
	if (c->state == CONN_LINGER) {
		linger_input(c);
		conn_unref(c); /* the poll's reference */
		return;
	}
	if (c->state == CONN_CLOSED || c->owner_gone ||
	    atomic_load_explicit(&c->fork_mode, memory_order_acquire) != XS_FORK_MINE) {
		conn_unref(c); /* the poll's reference */
		return;
	}
	if (c->state == CONN_ESTABLISHED && res == POLLIN && !c->want_out && !c->rr_count &&
	    atomic_load_explicit(&c->app_waiters, memory_order_acquire) > 0) {
		conn_park(c); /* keeps the poll's reference */
		return;
	}
	if (c->state == CONN_ESTABLISHED) {
		if (res & POLLOUT)
			engine_tx(c);
		if (res & (POLLIN | POLLRDHUP | POLLERR | POLLHUP))
			conn_receive(c);
		if (c->rr_count && !c->want_out)
			engine_tx(c);
	} else {
		conn_handshake(c);
	}
	if (c->state != CONN_CLOSED)
		conn_arm(c);
	conn_unref(c);
}

static void listener_event(struct xs_listener *l)
{
	while (!l->closing) { /* a spared socket's backlog is the next listener's */
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			break;
		unsigned cls_ms = l->plain ? xs_config()->classify_ms : 0;
		int one = 1;
		if (!cls_ms) /* a mixed listener's plain connection keeps TCP's defaults */
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct xs_conn *c = conn_new(fd);
		if (!c) {
			xs_fd_close(fd);
			continue;
		}
		atomic_store(&l->accepted, true);
		pthread_mutex_lock(&eng.mu);
		l->refs++;
		pthread_mutex_unlock(&eng.mu);
		c->listener = l;
		c->state = CONN_WAIT_REQUEST;
		c->hs_need = MPA_RR_HDR_LEN;
		if (cls_ms) {
			c->cls_pending = true;
			c->cls_deadline_ms = xs_now_ms() + cls_ms;
		}
		conn_arm(c); /* the Request (or the first octets) read when it arrives */
		if (cls_ms)
			cls_timer_arm();
	}
	if (!l->closing)
		listener_arm(l);
}

static void run_commands(void)
{
	struct xs_conn *list;
	struct xs_listener *ll;

	pthread_mutex_lock(&eng.mu);
	list = eng.cmds;
	eng.cmds = NULL;
	ll = eng.lcmds;
	eng.lcmds = NULL;
	pthread_mutex_unlock(&eng.mu);

	while (ll) {
		struct xs_listener *next = ll->cmd_next;
		ll->cmd_queued = false;
		if (ll->closing) {
			if ((ll->forked || ll->spared) && ll->poll_armed)
				poll_cancel(ll, TAG_LISTENER); /* no shutdown() woke it */
			if (ll->spared)
				late_timer_arm(); /* late_scan expires it */
			listener_unref(ll); /* its own reference */
		} else if (!ll->fork_dormant && !ll->poll_armed) {
			listener_arm(ll);
		}
		ll = next;
	}
	/* conn_command pushes onto the front: run the commands in the order
	 * they were given.  Connections armed in reverse sent their MPA
	 * Requests in reverse, so a listener's CONNECT_REQUESTs came in another
	 * order than the peer's rdma_connect calls (perftest -R -q N pairs its
	 * QPs by that order). */
	struct xs_conn *fifo = NULL;
	while (list) {
		struct xs_conn *c = list;
		list = c->cmd_next;
		c->cmd_next = fifo;
		fifo = c;
	}
	list = fifo;
	while (list) {
		struct xs_conn *c = list;
		list = c->cmd_next;
		pthread_mutex_lock(&eng.mu);
		unsigned flags = c->cmd_flags;
		c->cmd_flags = 0;
		pthread_mutex_unlock(&eng.mu);
		if ((flags & CMD_CLOSE) && linger_start(c, flags)) {
			/* the engine's reference stays until the linger ends */
		} else if (flags & CMD_CLOSE) {
			if (c->state != CONN_CLOSED) {
				c->state = CONN_CLOSED;
				conn_shut(c, SHUT_RDWR);
			}
			if (c->poll_armed &&
			    atomic_load_explicit(&c->fork_mode, memory_order_acquire) != XS_FORK_MINE)
				poll_cancel(c, TAG_CONN); /* no shutdown() woke it */
			if (!c->engine_ref_dropped) {
				c->engine_ref_dropped = true;
				conn_unref(c);
			}
		} else {
			if (flags & CMD_FIN)
				conn_fin(c);
			if (flags & CMD_RXDEFER)
				conn_rx_deferred(c);
			if (flags & CMD_RXKICK)
				conn_rx_kick(c, false);
			if (flags & CMD_TX)
				engine_tx(c);
			if (flags & (CMD_ARM | CMD_TX))
				conn_arm(c);
		}
		conn_unref(c); /* the command's reference */
	}
	pthread_mutex_lock(&eng.mu);
	eng.passes++;
	pthread_cond_broadcast(&eng.late_cv);
	pthread_mutex_unlock(&eng.mu);
}

static void *engine_main(void *arg)
{
	struct io_uring_cqe *cqe;

	on_engine_thread = true;
	arm_wake();
	for (;;) {
		io_uring_submit_and_wait(&eng.ring, 1);
		unsigned head, n = 0;
		io_uring_for_each_cqe(&eng.ring, head, cqe) {
			uintptr_t ud = (uintptr_t)io_uring_cqe_get_data(cqe);
			int res = cqe->res;
			int tag = (int)(ud & 7);
			void *obj = (void *)(ud & ~(uintptr_t)7);

			n++;
			if (tag == TAG_WAKE) {
				arm_wake();
			} else if (tag == TAG_LISTENER) {
				struct xs_listener *l = obj;
				l->poll_armed = false;
				if (!l->closing && !l->fork_dormant)
					listener_event(l);
				listener_unref(l); /* the poll's reference */
			} else if (tag == TAG_CONN) {
				conn_event(obj, res < 0 ? POLLERR : res);
			} else if (tag == TAG_TIMER) {
				eng.timer_armed = false;
				hs_scan();
			} else if (tag == TAG_CTIMER) {
				cls_scan();
			} else if (tag == TAG_PARK) {
				park_expired();
			} else if (tag == TAG_LATE) {
				late_scan();
			}
		}
		io_uring_cq_advance(&eng.ring, n);
		run_commands();
		if (atomic_load_explicit(&eng.pause_req, memory_order_acquire)) {
			/* fork() in progress (xs_engine_pause): hold nothing */
			pthread_mutex_lock(&eng.mu);
			eng.paused = true;
			pthread_cond_broadcast(&eng.pause_cv);
			while (atomic_load(&eng.pause_req))
				pthread_cond_wait(&eng.pause_cv, &eng.mu);
			eng.paused = false;
			pthread_mutex_unlock(&eng.mu);
		}
	}
	return arg;
}

/* ---- public (internal) API --------------------------------------------------- */

/* The thread that exported c holds rx_mu until its execve: the receives
 * libxsock reposts while it records the stream state need no more. */
static bool rx_held_by_export(const struct xs_conn *c)
{
	return c->exported && pthread_equal(c->export_thread, pthread_self());
}

void xs_conn_rx_lock(struct xs_conn *c)
{
	if (!rx_held_by_export(c))
		pthread_mutex_lock(&c->rx_mu);
}

void xs_conn_rx_unlock(struct xs_conn *c)
{
	if (!rx_held_by_export(c))
		pthread_mutex_unlock(&c->rx_mu);
}

int xs_conn_attach(struct xs_conn *c, const struct xs_conn_ops *ops, void *qp,
		   struct ddp_queue *q_send, struct ddp_queue *q_readreq,
		   struct ddp_queue *q_term, struct ddp_queue *q_aresp)
{
	if (c->state != CONN_ACCEPTED)
		return -EINVAL;
	if (!on_engine_thread)
		pthread_mutex_lock(&c->rx_mu);
	c->ops = ops;
	c->qp = qp;
	if (c->adopted) {
		/* posted buffers are numbered from msn_head on */
		q_send->msn_head = c->adopt_rx_msn[0];
		q_readreq->msn_head = c->adopt_rx_msn[1];
		q_term->msn_head = c->adopt_rx_msn[2];
	}
	ddp_rx_add_queue(&c->rx.ddp, q_send);
	ddp_rx_add_queue(&c->rx.ddp, q_readreq);
	c->q_readreq = q_readreq;
	ddp_rx_add_queue(&c->rx.ddp, q_term);
	if (q_aresp)
		ddp_rx_add_queue(&c->rx.ddp, q_aresp);
	c->stat = xs_stat_conn_open(c, c->fd, &c->agreed, c->initiator);
	c->state = CONN_ESTABLISHED;
	if (!on_engine_thread)
		pthread_mutex_unlock(&c->rx_mu);
	conn_command(c, CMD_ARM);
	return 0;
}

void xs_conn_hold(struct xs_conn *c)
{
	conn_ref(c);
}

void xs_conn_release(struct xs_conn *c)
{
	conn_unref(c);
}

void xs_conn_rx_kick(struct xs_conn *c, bool never)
{
	if (never)
		atomic_store(&c->rnr_off, true);
	if (atomic_load(&c->rx_stalled))
		conn_command(c, CMD_RXKICK);
}

ssize_t xs_conn_poll(struct xs_conn *c, size_t budget, bool maybe)
{
	ssize_t got = 0;

	if (maybe && atomic_load(&c->rx_watch) && atomic_load(&c->rx_empty))
		return 0; /* the engine's poll sees what comes to the emptied socket */
	if (xs_conn_claim(c) < 0)
		return -EPIPE; /* another process uses this connection */
	if (on_engine_thread || pthread_mutex_trylock(&c->rx_mu))
		return -EBUSY; /* the engine is receiving: it completes what comes */
	if (!c->owner_gone && c->ops) {
		atomic_fetch_add_explicit(&c->app_rx_gen, 1, memory_order_relaxed);
		tls_rx_conn = c;
		got = (ssize_t)conn_receive_locked(c, budget, false);
		tls_rx_conn = NULL;
	}
	pthread_mutex_unlock(&c->rx_mu);
	return got;
}

/* Private to libxsock: an application thread is about to block until the
 * id's connection is readable, to receive on it itself (through its CQ's
 * xs_conn_poll).  on = 1: returns the TCP socket to poll for POLLIN and
 * counts the waiter, or -1 (nothing counted) when there is nothing to
 * receive there (not established, not this process's, or the end was
 * seen: the engine reports it); on = 0: the waiter is done; on = 2 (a
 * waiter that stays between waits, an epoll set's socket): 1 when it
 * should stop waiting on the TCP socket, whose input the application
 * thread cannot take (the conditions of on = 1, or a stalled stream). */
/* Whether an application thread may wait on the connection's TCP socket
 * to receive on it: established, alive, this process's, its end not seen. */
static bool rx_waitable(struct xs_conn *c)
{
	return c->state == CONN_ESTABLISHED && !c->dead && !c->owner_gone &&
	       !atomic_load(&c->rx_app_eof) &&
	       atomic_load_explicit(&c->fork_mode, memory_order_acquire) == XS_FORK_MINE;
}

XS_EXPORT int xsock_priv_rx_wait(struct rdma_cm_id *id, int on)
{
	struct xs_conn *c = id ? xs_cm_conn(id) : NULL;

	if (!c)
		return -1;
	if (on == 2)
		return !rx_waitable(c) || atomic_load(&c->rx_stalled);
	if (!on) {
		/* the waiter may have seen the socket readable: its next
		 * receive looks (xs_conn_poll) */
		atomic_store(&c->rx_empty, false);
		atomic_fetch_sub_explicit(&c->app_waiters, 1, memory_order_release);
		return 0;
	}
	if (!rx_waitable(c))
		return -1;
	atomic_fetch_add_explicit(&c->app_waiters, 1, memory_order_acq_rel);
	return c->fd;
}

const struct mpa_agreed *xs_conn_agreed(const struct xs_conn *c)
{
	return &c->agreed;
}

int xs_conn_addrs(const struct xs_conn *c, struct sockaddr_storage *local,
		  struct sockaddr_storage *peer)
{
	socklen_t l = sizeof(*local), p = sizeof(*peer);

	if (local && getsockname(c->fd, (struct sockaddr *)local, &l) < 0)
		return -errno;
	if (peer && getpeername(c->fd, (struct sockaddr *)peer, &p) < 0)
		return -errno;
	return 0;
}

int xs_conn_tcp(struct xs_conn *c, int op, int level, int name, void *val, socklen_t *len)
{
	struct sockaddr sa = { .sa_family = AF_UNSPEC };

	if (c->fd < 0)
		return -ENOTCONN;
	switch (op) {
	case XSOCK_TCP_GETOPT:
		return getsockopt(c->fd, level, name, val, len) < 0 ? -errno : 0;
	case XSOCK_TCP_SETOPT:
		return setsockopt(c->fd, level, name, val, *len) < 0 ? -errno : 0;
	case XSOCK_TCP_ABORT:
		/* connect(AF_UNSPEC) disconnects a TCP socket with an RST */
		return connect(c->fd, &sa, sizeof(sa)) < 0 ? -errno : 0;
	default:
		return -EINVAL;
	}
}

void xs_conn_set_closed_cb(struct xs_conn *c, xs_conn_closed_fn cb, void *ctx)
{
	c->closed_cb = cb;
	c->closed_ctx = ctx;
}

void xs_conn_disconnect(struct xs_conn *c)
{
	pthread_mutex_lock(&c->tx_mu);
	c->disconnect_asked = true;
	bool now = !c->tx_busy && !c->fin_sent && !c->rr_count;
	if (now)
		c->fin_sent = true;
	pthread_mutex_unlock(&c->tx_mu);
	if (now)
		conn_fin(c);
	else
		conn_command(c, CMD_TX);
}

void xs_conn_put(struct xs_conn *c)
{
	/* after this no upcall runs: the engine makes them under rx_mu */
	if (!on_engine_thread)
		pthread_mutex_lock(&c->rx_mu);
	c->owner_gone = true;
	c->ops = NULL;
	c->qp = NULL;
	c->closed_cb = NULL;
	if (!on_engine_thread)
		pthread_mutex_unlock(&c->rx_mu);
	pthread_mutex_lock(&c->tx_mu);
	c->dead = true;
	pthread_cond_broadcast(&c->tx_cv);
	pthread_mutex_unlock(&c->tx_mu);
	conn_command(c, CMD_CLOSE);
	conn_unref(c); /* the owner's reference */
}

/* ---- listen / accept / connect ------------------------------------------------- */

/* A bind refused because of a kept listening socket just dropped: the
 * closed listener's own descriptor goes with the engine's next passes
 * (run_commands), a little later.  Bounded: about a second. */
static int bind_again(int fd, const struct sockaddr *addr, socklen_t len)
{
	for (int i = 0; i < 100; i++) {
		if (bind(fd, addr, len) == 0)
			return 0;
		if (errno != EADDRINUSE)
			return -1;
		engine_wake();
		xs_sleep_ms(10);
	}
	return -1;
}

struct xs_listener *xs_listen(const struct sockaddr *addr, socklen_t len, int backlog,
			      int v6only, xs_accept_fn cb, xs_plain_fn plain, void *ctx)
{
	int rc = engine_get();

	if (rc < 0) {
		errno = -rc;
		return NULL;
	}
	struct xs_listener *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	/* the socket of a listener on this address closed just before: its
	 * queued connections are this one's (xs_spare.c) */
	l->fd = xs_spare_take(addr, len);
	if (l->fd >= 0) {
		int fl = fcntl(l->fd, F_GETFL);
		if (fl < 0 || fcntl(l->fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
		    listen(l->fd, backlog > 0 ? backlog : 128) < 0)
			goto fail_fd;
		goto listening;
	}
	l->fd = xs_fd_keep(socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	int one = 1;
	if (l->fd < 0)
		goto fail;
	setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* a dual-stack server (redis, nginx) listens on 0.0.0.0 and on [::]
	 * with IPV6_V6ONLY: without it the second bind fails */
	if (addr->sa_family == AF_INET6 && v6only >= 0 &&
	    setsockopt(l->fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only)) < 0)
		goto fail_fd;
	if (bind(l->fd, addr, len) < 0 &&
	    (errno != EADDRINUSE || !xs_spare_drop_port(addr) || bind_again(l->fd, addr, len) < 0))
		goto fail_fd; /* (a kept socket on the port, another address: not ours to keep) */
	if (listen(l->fd, backlog > 0 ? backlog : 128) < 0)
		goto fail_fd;
listening:
	l->cb = cb;
	l->plain = plain;
	l->ctx = ctx;
	l->refs = 1;
	pthread_mutex_init(&l->mu, NULL);
	pthread_mutex_lock(&eng.reg_mu);
	l->all_next = eng.listeners;
	if (eng.listeners)
		eng.listeners->all_prev = l;
	eng.listeners = l;
	pthread_mutex_unlock(&eng.reg_mu);
	pthread_mutex_lock(&eng.mu);
	l->cmd_next = eng.lcmds;
	eng.lcmds = l;
	l->cmd_queued = true;
	pthread_mutex_unlock(&eng.mu);
	engine_wake();
	return l;
fail_fd:
	rc = errno;
	xs_fd_close(l->fd);
	errno = rc;
fail:
	rc = errno;
	free(l);
	errno = rc;
	return NULL;
}

int xs_listener_addr(const struct xs_listener *l, struct sockaddr_storage *addr)
{
	socklen_t sl = sizeof(*addr);

	return getsockname(l->fd, (struct sockaddr *)addr, &sl) < 0 ? -errno : 0;
}

void xs_listener_close(struct xs_listener *l)
{
	/* no callback starts after this and none is running when it returns
	 * (unless called from within one, on the engine thread) */
	if (!on_engine_thread)
		pthread_mutex_lock(&l->mu);
	l->closing = true;
	if (!on_engine_thread)
		pthread_mutex_unlock(&l->mu);
	/* the engine closes and frees it once no connection refers to it */
	engine_get();
	/* a listener that took a connection keeps its socket a while for a
	 * listen on the same address (xs_spare.c); not a mixed one (libxsock's
	 * sockets: a closed TCP listener frees its port at once) */
	bool spare = !l->forked && !l->plain && atomic_load(&l->accepted) &&
		     xs_spare_keep(l->fd);
	pthread_mutex_lock(&eng.mu);
	l->spared = spare;
	if (!l->forked && !spare)
		shutdown(l->fd, SHUT_RDWR);
	if (!l->cmd_queued) {
		l->cmd_next = eng.lcmds;
		eng.lcmds = l;
		l->cmd_queued = true;
	}
	pthread_mutex_unlock(&eng.mu);
	engine_wake();
}

int xs_conn_accept(struct xs_conn *c, const struct mpa_prefs *prefs)
{
	struct mpa_frame rep;
	struct xs_err err;
	uint8_t buf[XS_HS_MAX];
	int rc;

	if (c->state != CONN_WAIT_ACCEPT)
		return -EINVAL;
	if (atomic_load(&c->fork_mode) != XS_FORK_MINE)
		return -EBUSY; /* the parent's request (xsock(7) FORK) */
	rc = mpa_respond(prefs, &c->req, &rep, &c->agreed, &err);
	ssize_t n = mpa_frame_encode(&rep, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	int wrc = send_small(c->fd, buf, (size_t)n);
	if (rc < 0 || wrc < 0) {
		c->state = CONN_CLOSED;
		conn_shut(c, SHUT_RDWR);
		return rc < 0 ? rc : wrc;
	}
	c->state = CONN_ACCEPTED;
	stream_setup(c);
	c->rtr_wait = c->agreed.p2p && c->agreed.rtr != MPA_RTR_NONE;
	/* XSOCK_MPA_SETTLE_MS (xs_config.c): our first FPDU must not reach
	 * a siw initiator together with the Reply.  Its first octets prove it
	 * has read the Reply; until then, or the bound, senders wait
	 * (tx_acquire), rdma_accept does not.  With an RTR the initiator has
	 * read the Reply anyway; an xsock reads both. */
	if (!c->rtr_wait && !peer_is_xsock(c) && xs_config()->settle_ms) {
		pthread_mutex_lock(&c->tx_mu);
		c->settle_wait = true;
		c->settle_end_ms = xs_now_ms() + xs_config()->settle_ms;
		pthread_mutex_unlock(&c->tx_mu);
	}
	return 0;
}

int xs_conn_reject(struct xs_conn *c, const void *pdata, uint8_t len)
{
	struct mpa_prefs prefs;
	struct mpa_frame rep;
	uint8_t buf[XS_HS_MAX];

	if (c->state != CONN_WAIT_ACCEPT)
		return -EINVAL;
	if (atomic_load(&c->fork_mode) != XS_FORK_MINE)
		return -EBUSY; /* the parent's request (xsock(7) FORK) */
	mpa_prefs_default(&prefs);
	prefs.rev = xs_config()->mpa_rev;
	prefs.pdata = pdata;
	prefs.pdata_len = len;
	mpa_reject_build(&prefs, &c->req, &rep);
	ssize_t n = mpa_frame_encode(&rep, buf, sizeof(buf));
	int rc = n < 0 ? (int)n : send_small(c->fd, buf, (size_t)n);
	c->state = CONN_CLOSED;
	conn_shut(c, SHUT_WR);
	return rc;
}

int xs_connect(const struct sockaddr *dst, socklen_t dlen, const struct sockaddr *src,
	       socklen_t slen, const struct mpa_prefs *prefs, xs_connect_fn cb, void *ctx)
{
	int rc = engine_get();

	if (rc < 0)
		return rc;
	if (prefs->pdata_len > MPA_PD_MAX - MPA_IRDORD_LEN)
		return -EINVAL;
	int fd = xsock_fd_high(socket(dst->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	if (fd < 0)
		return -errno;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (src && slen && bind(fd, src, slen) < 0 && errno != EADDRNOTAVAIL) {
		/* a wildcard source that cannot be bound is not an error */
		xs_log("bind source: %s", strerror(errno));
	}
	struct xs_conn *c = conn_new(fd);
	if (!c) {
		xs_fd_close(fd);
		return -ENOMEM;
	}
	c->initiator = true;
	static _Atomic uint64_t dial_seq;
	c->dial_seq = atomic_fetch_add(&dial_seq, 1) + 1;
	if (dlen <= sizeof(c->dst)) {
		memcpy(&c->dst, dst, dlen);
		c->dst_len = dlen;
	}
	if (src && slen && slen <= sizeof(c->src)) {
		memcpy(&c->src, src, slen);
		c->src_len = slen;
	}
	c->redial_end_ms = xs_now_ms() + XS_REDIAL_MS;
	c->prefs = *prefs;
	if (prefs->pdata_len) {
		memcpy(c->prefs_pdata, prefs->pdata, prefs->pdata_len);
		c->prefs.pdata = c->prefs_pdata;
	}
	mpa_request_build(&c->prefs, &c->req);
	c->connect_cb = cb;
	c->connect_ctx = ctx;
	c->refs++; /* the owner's (not yet shared with the engine thread) */
	c->state = CONN_CONNECTING;
	if (connect(fd, dst, dlen) < 0 && errno != EINPROGRESS) {
		if (errno == ECONNREFUSED) {
			/* the engine dials again (redial_track) */
			c->refused_now = true;
		} else {
			rc = -errno;
			conn_free(c);
			return rc;
		}
	}
	conn_command(c, CMD_ARM);
	return 0;
}

/* ---- fork (driven by xs_fork.c) -----------------------------------------------
 * prepare: the engine thread parks at the end of its loop (holding no lock)
 * and the registry is locked; each connection gets the mode it has on both
 * sides of the fork.  An established connection this process may use
 * becomes DORMANT in parent and child: neither receives on it until one of
 * them claims it (xs_conn_claim: a compare-and-swap of the owner word in
 * memory both processes map), so no process consumes the other's octets.
 * Anything else (a handshake in progress, a connection another thread is
 * using at this moment, a closed one) stays with the parent: FOREIGN in the
 * child. */

/* ---- exec hand-over (xsock(7) EXEC) ---------------------------------------------- */

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
		struct timespec ts;
		if (xs_now_ms() >= end) {
			pthread_mutex_unlock(&c->tx_mu);
			return -ETIMEDOUT;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
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
		conn_receive_locked(c, 1u << 16, false);
		if (c->state == CONN_ESTABLISHED && !c->rx_defer && rx_at_boundary(c))
			goto stopped;
		pthread_mutex_unlock(&c->rx_mu);
		if (xs_now_ms() >= end) {
			export_tx_release(c);
			return -ETIMEDOUT;
		}
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		poll(&p, 1, 10);
	}
	pthread_mutex_unlock(&c->rx_mu);
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
	/* the copy that survives execve (the engine's is close-on-exec) */
	int fd = fcntl(c->fd, F_DUPFD, 3);
	if (fd < 0) {
		int e = errno;
		pthread_mutex_unlock(&c->rx_mu);
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
	pthread_mutex_unlock(&c->rx_mu);
	export_tx_release(c);
	conn_command(c, CMD_ARM); /* what came meanwhile */
}

struct xs_conn *xs_conn_adopt(int fd, const struct xs_conn_wire *w)
{
	int rc = engine_get();
	int one = 1, fl;

	if (rc < 0) {
		errno = -rc;
		return NULL;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return NULL;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct xs_conn *c = conn_new(fd);
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->refs++; /* the owner's */
	c->agreed = w->agreed;
	stream_setup(c);
	c->tx.mpa.pos = w->tx_pos;
	memcpy(c->tx.msn, w->tx_msn, sizeof(c->tx.msn));
	mpa_rx_reset_at(&c->rx.mpa, w->rx_pos);
	c->adopted = true;
	memcpy(c->adopt_rx_msn, w->rx_msn, sizeof(c->adopt_rx_msn));
	c->state = CONN_ACCEPTED;
	return c;
}

int xs_conn_claim(struct xs_conn *c)
{
	int m = atomic_load_explicit(&c->fork_mode, memory_order_acquire);
	int me, owner = 0;

	if (m == XS_FORK_MINE)
		return 0;
	if (m == XS_FORK_FOREIGN)
		return -EBUSY;
	me = (int)getpid();
	if (!atomic_compare_exchange_strong(c->share, &owner, me) && owner != me) {
		atomic_store(&c->fork_mode, XS_FORK_FOREIGN);
		return -EBUSY;
	}
	m = XS_FORK_DORMANT;
	if (atomic_compare_exchange_strong(&c->fork_mode, &m, XS_FORK_MINE))
		conn_command(c, CMD_ARM | CMD_TX); /* receive from now on */
	return 0;
}

int xs_conn_fork_mode(struct xs_conn *c)
{
	int m = atomic_load_explicit(&c->fork_mode, memory_order_acquire);

	if (m == XS_FORK_DORMANT && c->share) {
		int owner = atomic_load(c->share);
		if (owner && owner != (int)getpid())
			return XS_FORK_FOREIGN;
	}
	return m;
}

/* The parent of a fork gives its listener up like the child (libxsock's
 * listeners, xsock_priv_release): a process that does not use it after the
 * fork (nginx's master) must not take connections nobody there accepts. */
void xs_listener_release(struct xs_listener *l)
{
	pthread_mutex_lock(&eng.mu);
	if (!l->closing)
		l->fork_dormant = true; /* an armed poll completes into nothing */
	pthread_mutex_unlock(&eng.mu);
}

void xs_listener_claim(struct xs_listener *l)
{
	bool wake = false;

	pthread_mutex_lock(&eng.mu);
	if (l->fork_dormant && !l->closing) {
		l->fork_dormant = false;
		if (!l->cmd_queued) {
			l->cmd_next = eng.lcmds;
			eng.lcmds = l;
			l->cmd_queued = true;
		}
		wake = true;
	}
	pthread_mutex_unlock(&eng.mu);
	if (wake) {
		engine_get();
		engine_wake();
	}
}

/* Park the engine thread (if this process has one) and lock the registry;
 * return the number of connections that need a new owner word. */
unsigned xs_engine_fork_prepare(void)
{
	unsigned need = 0;

	pthread_mutex_lock(&eng.mu);
	if (eng.started) {
		atomic_store(&eng.pause_req, true);
		pthread_mutex_unlock(&eng.mu);
		engine_wake();
		pthread_mutex_lock(&eng.mu);
		while (!eng.paused)
			pthread_cond_wait(&eng.pause_cv, &eng.mu);
	}
	pthread_mutex_unlock(&eng.mu);
	pthread_mutex_lock(&eng.reg_mu);
	pthread_mutex_lock(&eng.mu);
	for (struct xs_conn *c = eng.conns; c; c = c->all_next) {
		int m = xs_conn_fork_mode(c);
		bool idle = false;

		if (m != XS_FORK_FOREIGN && c->state == CONN_ESTABLISHED && !c->owner_gone &&
		    pthread_mutex_trylock(&c->rx_mu) == 0) {
			pthread_mutex_lock(&c->tx_mu);
			idle = !c->dead && (!c->tx_busy || c->tx_engine);
			pthread_mutex_unlock(&c->tx_mu);
			pthread_mutex_unlock(&c->rx_mu);
		}
		c->fork_next = idle ? XS_FORK_DORMANT : XS_FORK_FOREIGN;
		if (m == XS_FORK_FOREIGN)
			atomic_store(&c->fork_mode, XS_FORK_FOREIGN);
		/* a word nobody claimed since the last fork still describes
		 * identical copies: keep it; else a fresh one */
		if (idle && !(c->share && atomic_load(c->share) == 0))
			need++;
	}
	return need;
}

/* Give the connections that need one a word of the new arena (owner 0). */
void xs_engine_fork_assign(struct xs_arena *a, _Atomic int *slots)
{
	unsigned i = 0;

	for (struct xs_conn *c = eng.conns; c; c = c->all_next) {
		if (c->fork_next != XS_FORK_DORMANT || (c->share && atomic_load(c->share) == 0))
			continue;
		if (!a) {
			c->fork_next = XS_FORK_FOREIGN; /* no shared word: the parent keeps it */
			continue;
		}
		xs_arena_unref(c->arena);
		c->arena = a;
		xs_arena_ref(a);
		c->share = &slots[i++];
		atomic_store(c->share, 0);
	}
}

void xs_engine_fork_parent(void)
{
	for (struct xs_conn *c = eng.conns; c; c = c->all_next)
		if (c->fork_next == XS_FORK_DORMANT)
			atomic_store(&c->fork_mode, XS_FORK_DORMANT);
	for (struct xs_listener *l = eng.listeners; l; l = l->all_next)
		l->forked = true;
	atomic_store(&eng.pause_req, false);
	pthread_cond_broadcast(&eng.pause_cv);
	pthread_mutex_unlock(&eng.mu);
	pthread_mutex_unlock(&eng.reg_mu);
}

/* The child: no engine thread, and the ring belongs to the parent.  Drop
 * what the parent's ring and command queues held, give every connection
 * its mode, and let the first use start a new engine. */
void xs_engine_fork_child(void)
{
	struct xs_conn *c, *next;
	struct xs_listener *l, *lnext;

	/* fork_prepare left both locked by this (the forking) thread:
	 * unlock, not re-initialise (a locked mutex must not be
	 * initialised; ThreadSanitizer then reports a double lock) */
	pthread_mutex_unlock(&eng.mu);
	pthread_mutex_unlock(&eng.reg_mu);
	pthread_cond_init(&eng.pause_cv, NULL);
	atomic_store(&eng.pause_req, false);
	eng.paused = false;
	if (eng.started) {
		xs_fd_drop(eng.ring.ring_fd);
		io_uring_queue_exit(&eng.ring); /* our mapping and fd only */
		xs_fd_close(eng.wake_fd);
	}
	eng.started = false;
	eng.init_err = 0;
	eng.once = (pthread_once_t)PTHREAD_ONCE_INIT;
	eng.timer_armed = false;
	eng.ctimer_armed = false;
	for (c = eng.cmds; c; c = c->cmd_next) {
		c->cmd_flags = 0;
		c->refs--;
	}
	eng.cmds = NULL;
	for (c = eng.hs_list; c; c = c->hs_next) {
		c->on_hs_list = false;
		c->refs--;
	}
	eng.hs_list = NULL;
	for (c = eng.parked; c; c = c->park_next) {
		c->rx_parked = false;
		c->refs--;
	}
	eng.parked = NULL;
	eng.park_armed = false;
	/* the parent's delayed FINs and lingering closes stay the parent's */
	for (c = eng.late; c; c = c->late_next) {
		c->on_late_list = false;
		c->fin_due_ms = 0;
		c->refs--;
		if (c->state == CONN_LINGER && !c->engine_ref_dropped) {
			c->engine_ref_dropped = true;
			c->refs--;
		}
	}
	eng.late = NULL;
	eng.late_armed = false;
	eng.late_count = 0;
	pthread_cond_init(&eng.late_cv, NULL);
	for (l = eng.lcmds; l; l = l->cmd_next) {
		l->cmd_queued = false;
		if (l->closing)
			l->refs--; /* run_commands would have dropped its own */
	}
	eng.lcmds = NULL;
	for (c = eng.conns; c; c = next) {
		next = c->all_next;
		pthread_mutex_init(&c->rx_mu, NULL);
		pthread_mutex_init(&c->tx_mu, NULL);
		pthread_cond_init(&c->tx_cv, NULL);
		atomic_store(&c->fork_mode, c->fork_next);
		if (c->fork_next == XS_FORK_FOREIGN) {
			c->dead = true; /* the parent's: no tx from here */
			c->tx_busy = false;
		}
		if (c->poll_armed) {
			c->poll_armed = false;
			atomic_store(&c->rx_watch, false);
			c->refs--;
		}
		if (c->refs <= 0)
			conn_free(c);
	}
	for (l = eng.listeners; l; l = lnext) {
		lnext = l->all_next;
		pthread_mutex_init(&l->mu, NULL);
		l->forked = true;
		l->fork_dormant = true;
		if (l->poll_armed) {
			l->poll_armed = false;
			l->refs--;
		}
		if (l->refs <= 0) {
			l->refs = 1;
			listener_unref(l);
		}
	}
}
