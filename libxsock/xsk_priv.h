/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Private to libxsock: the real libc entry points, the stack's entry
 * points (resolved in libiwarp itself), the IWARP socket object and the
 * calls between the interposer's files (xsk_intercept.h: the interposed
 * POSIX calls, the fd table, poll/select/epoll; xsk_fork.c, xsk_relay.c,
 * xsk_exec.c, xsk_ext.c) and the protocol files (xsk_proto.h: the rsockets
 * protocol over the stack's rdma_* and ibv_* API).  Dependencies go one
 * way: interposer files -> protocol files (and xsk_claim.c) -> xsk_sock.c,
 * xsk_config.c, xsk_settings.c -> xsk_real.c; a lower file calls a higher
 * one only through a hook it was handed (struct xsk_ext_hooks,
 * xsk_relay_hooks, xsk_stack_on_load, xsk_relay_set_io).
 *
 * Internal calls return 0 / -errno; only the interposed calls set errno. */
#ifndef XSK_PRIV_H
#define XSK_PRIV_H

#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "verbs/xs_priv_abi.h"

#define XSK_EXPORT __attribute__((visibility("default")))
/* A sanitizer's runtime calls sigaction and setrlimit while it starts,
 * before it can run instrumented code (TSan faults in its function-entry
 * hook): the interposed calls it makes are not instrumented, and reach
 * instrumented code only once libxsock's constructors ran (sigaction) or
 * for what no runtime sets (RLIMIT_NOFILE, PR_SET_SECCOMP). */
#define XSK_UNINSTRUMENTED __attribute__((no_sanitize("thread", "address", "undefined")))

/* ---- real calls (xsk_real.c) ------------------------------------------------ */

struct xsk_libc {
	int (*socket)(int, int, int);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*close)(int);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	int (*shutdown)(int, int);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*getpeername)(int, struct sockaddr *, socklen_t *);
	int (*getsockname)(int, struct sockaddr *, socklen_t *);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
		       const sigset_t *);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
	int (*fcntl)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	pid_t (*fork)(void);
};
extern struct xsk_libc xsk_real;

/* The stack, looked up in its own handle so that another librdmacm or
 * libibverbs loaded by the program never answers: libiwarp, or rdma-core's
 * librdmacm.so.1 (XSOCK_IWARP_LIB; its handle finds the ibv_* calls in
 * libibverbs, a dependency).  rdma-core has none of the xsock_priv_*
 * calls below: each is NULL there and libxsock uses the standard calls
 * instead (xsock(7) KERNEL STACK). */
struct xsk_stack {
	struct rdma_event_channel *(*create_event_channel)(void);
	void (*destroy_event_channel)(struct rdma_event_channel *);
	int (*create_id)(struct rdma_event_channel *, struct rdma_cm_id **, void *,
			 enum rdma_port_space);
	int (*destroy_id)(struct rdma_cm_id *);
	int (*bind_addr)(struct rdma_cm_id *, struct sockaddr *);
	int (*resolve_addr)(struct rdma_cm_id *, struct sockaddr *, struct sockaddr *, int);
	int (*resolve_route)(struct rdma_cm_id *, int);
	int (*create_qp)(struct rdma_cm_id *, struct ibv_pd *, struct ibv_qp_init_attr *);
	void (*destroy_qp)(struct rdma_cm_id *);
	int (*connect)(struct rdma_cm_id *, struct rdma_conn_param *);
	int (*listen)(struct rdma_cm_id *, int);
	int (*accept)(struct rdma_cm_id *, struct rdma_conn_param *);
	int (*reject)(struct rdma_cm_id *, const void *, uint8_t);
	int (*disconnect)(struct rdma_cm_id *);
	int (*get_cm_event)(struct rdma_event_channel *, struct rdma_cm_event **);
	int (*ack_cm_event)(struct rdma_cm_event *);
	int (*migrate_id)(struct rdma_cm_id *, struct rdma_event_channel *);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	int (*dealloc_pd)(struct ibv_pd *);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
	int (*dereg_mr)(struct ibv_mr *);
	struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *);
	int (*destroy_comp_channel)(struct ibv_comp_channel *);
	struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *,
				    int);
	int (*destroy_cq)(struct ibv_cq *);
	int (*get_cq_event)(struct ibv_comp_channel *, struct ibv_cq **, void **);
	void (*ack_cq_events)(struct ibv_cq *, unsigned int);
	int (*query_qp)(struct ibv_qp *, struct ibv_qp_attr *, int, struct ibv_qp_init_attr *);
	int (*set_option)(struct rdma_cm_id *, int, int, void *, size_t);
	/* exec hand-over (verbs/xs_priv_abi.h; NULL if absent) */
	__typeof__(xsock_priv_export) *export;
	__typeof__(xsock_priv_export_undo) *export_undo;
	__typeof__(xsock_priv_adopt) *adopt;
	__typeof__(xsock_priv_adopt_start) *adopt_start;
	__typeof__(xsock_priv_reg_mr_stag) *reg_mr_stag;
	/* the descriptors the stack keeps (verbs/xs_fdkeep.c; NULL if absent) */
	__typeof__(xsock_priv_fd_keep) *fd_keep;
	__typeof__(xsock_priv_fd_drop) *fd_drop;
	__typeof__(xsock_priv_fd_next_kept) *fd_next_kept;
	__typeof__(xsock_priv_exit_wait) *exit_wait; /* (NULL if absent) */
	__typeof__(xsock_priv_sandbox) *sandbox; /* (NULL if absent) */
	/* libiwarp's private fork support (NULL if absent): claim the id's
	 * connection or listener for this process (0, -EBUSY if another
	 * process uses it); its standing without claiming (0 ours, 1 shared
	 * and unclaimed, 2 another process's) */
	__typeof__(xsock_priv_claim) *claim;
	__typeof__(xsock_priv_fork_mode) *fork_mode;
	/* a listener accepts nothing here until claimed again (0, -EINVAL) */
	__typeof__(xsock_priv_release) *release;
	/* an option on the id's TCP connection, or an abortive close (op:
	 * XSOCK_TCP_GETOPT, XSOCK_TCP_SETOPT, XSOCK_TCP_ABORT); 0 or -errno
	 * (NULL if absent) */
	__typeof__(xsock_priv_tcp) *tcp;
	/* the mixed listener (verbs/xs_priv_abi.h; NULL if absent) */
	__typeof__(xsock_priv_listen_mixed) *listen_mixed;
	/* the application's bound socket becomes the listener's (NULL if absent) */
	__typeof__(xsock_priv_listen_socket) *listen_socket;
	/* its refused connects are refused at once (NULL if absent) */
	__typeof__(xsock_priv_cm_no_redial) *cm_no_redial;
	/* libiwarp's receive fast path (NULL if absent): the TCP socket a
	 * thread about to block may poll to receive on its own thread (on 1,
	 * -1 for none), and the end of that wait (on 0) */
	__typeof__(xsock_priv_rx_wait) *rx_wait;
	/* ... and its queues without system calls (NULL if absent): events
	 * queued on a CM / completion channel, take one completion event,
	 * disarm (0) or arm (1, signalling at once if completions wait) */
	__typeof__(xsock_priv_cm_pending) *cm_pending;
	__typeof__(xsock_priv_comp_pending) *comp_pending;
	__typeof__(xsock_priv_comp_take) *comp_take;
	__typeof__(xsock_priv_cq_arm) *cq_arm;
	__typeof__(xsock_priv_poll_cq) *poll_cq; /* XSOCK_RX_* */
	/* Sends and Writes from the caller's unregistered memory, on the
	 * socket when it returns (xsock_priv_post_send_caller; NULL if absent) */
	__typeof__(xsock_priv_post_send_caller) *post_send_caller;
	/* a connect that went plain TCP, for xsock-stat (NULL if absent) */
	__typeof__(xsock_priv_plain) *plain;
	/* a local message dropped, for xsock-stat (NULL if absent) */
	__typeof__(xsock_priv_local_drop) *local_drop;
	const void *base; /* load address of libiwarp (to recognise its own sockets) */
	/* The verbs and CM objects are the kernel's (no xsock_priv_fork_init:
	 * rdma-core): after a fork, parent and child hold the same QP, CQ, MR
	 * and cm_id through shared files, but the kernel obeys only the
	 * process that opened them (EACCES for the others).  The maker owns
	 * a connection for good, other processes are relay clients and close
	 * their copies quietly (xsk_fork_use, xsk_fork_quiet, xsk_relay.c);
	 * the rings are MAP_SHARED, never copied at fork (xsk_res.c) */
	bool kernel;
};


/* Resolve libc's entry points once (idempotent, thread-safe). */
void xsk_real_init(void);
/* The stack, loaded on first use; NULL (errno set) if libiwarp is missing. */
const struct xsk_stack *xsk_stack(void);
/* fn runs once the stack has loaded (after the stack's own fork handlers
 * are registered), on the loading thread; at once if it already has (a
 * library constructor may open a socket before libxsock's constructors).
 * One hook: xsk_fork.c's constructor registers its handlers so.  Any
 * thread. */
void xsk_stack_on_load(void (*fn)(void));
/* True if the code at ret (a return address) belongs to libiwarp: its own
 * TCP sockets are never IWARP sockets. */
bool xsk_from_stack(const void *ret);
/* A message of a local channel libxsock reads (the exec hand-over,
 * XSOCK_RELAY_ADDR) dropped as malformed: what and why on standard error
 * with XSOCK_DEBUG=1, and counted in the statistics file (xsock-stat's
 * local_bad; the stack is loaded for it).  Any thread, no lock held. */
void xsk_local_drop(const char *what, const char *why);
/* A descriptor libxsock keeps for itself (closefrom/close_range pass over
 * it: libiwarp's registry, verbs/xs_fdkeep.c); returns fd.  xsk_fd_close
 * forgets and closes it.  Any thread. */
int xsk_fd_keep(int fd);
int xsk_fd_close(int fd);

#include "libxsock/xsk_wire.h"

/* ---- the IWARP socket ------------------------------------------------------- */

enum xsk_state {
	XSK_FRESH, /* IWARP_MODE set; the fd is still the original TCP socket */
	XSK_CONNECTING,
	XSK_CONNECTED,
	XSK_LISTENING,
	XSK_CLOSED, /* connect failed or connection over (err says why) */
};

struct xsk_opt {
	int level, name, val;
};
#define XSK_MAX_OPTS 16

struct xsk_rmsg {
	uint32_t len; /* bytes of this Data Transfer message not yet read */
};

/* The socket.  Its layout is a contract between the protocol files
 * (xsk_proto.h's, xsk_claim.c, xsk_ext.c, xsk_fork.c, xsk_relay.c,
 * xsk_exec.c) and the
 * accessors of xsk_sock.h / xsk_sock.c: the interposer (xsk_intercept.h's
 * files, xsk_epoll_et.c, xsk_sendfile.c) uses only those. */
struct xsk {
	pthread_mutex_t mu;
	/* its reference count, once an fd number names it (xsk_fdtab.c;
	 * set under the table lock at the first attach, then fixed) */
	struct xsk_file *file;
	enum xsk_state state;
	bool nonblock;
	bool cloexec;
	bool by_rules; /* made a candidate by the selection rules (xsk_config.c) */
	int family;
	int err; /* pending SO_ERROR (positive errno) */
	int backlog;
	int v6only; /* an AF_INET6 listener's IPV6_V6ONLY when it was taken over (-1: IPv4) */
	int epfd; /* the inner epoll fd: the number the application holds */
	bool epfd_app; /* the application holds epfd (its close closes it) */
	int ready_fd; /* eventfd in epfd: readable while the socket is readable */
	bool ready_set;
	int wake_fd; /* eventfd (not in epfd): a blocked writer's wake-up */
	int writers_waiting;

	struct sockaddr_storage local, peer;
	bool have_local;
	struct xsk_opt opts[XSK_MAX_OPTS];
	int nopts;
	/* options libxsock honours itself (xsk_sockopt.c) */
	int64_t rcvtimeo_us, sndtimeo_us; /* SO_RCVTIMEO/SO_SNDTIMEO: 0 none, < 0 no wait */
	int rcvlowat; /* SO_RCVLOWAT (>= 1) */
	bool linger_on; /* SO_LINGER */
	int linger_s;

	/* CM */
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct xsk *lst_next; /* accept queue link */
	/* a mixed listener's plain TCP client waiting in the accept queue: the
	 * kernel socket accept() returns as it is (-1: an IWARP socket) */
	int plain_fd;
	struct xsk *acceptq, *acceptq_tail; /* listener: established children */
	int acceptq_len;
	unsigned acceptq_seq; /* connections queued so far (EPOLLET edges) */

	/* verbs */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	bool cq_armed;
	/* a blocking call's wait on the TCP socket ended (xsk_rx_wait_end):
	 * its next progress receives there (xsk_progress_io) */
	bool rx_hint;
	/* an epoll set's socket (xsk_progress_watch): the TCP socket in epfd, or -1;
	 * ep_in_regs: registrations asking for EPOLLIN (table lock) */
	int rxw_fd;
	_Atomic int ep_in_regs;
	struct ibv_mr *rmr; /* rbuf + target SGL + message buffers */
	struct ibv_mr *smr;
	uint8_t *mem; /* one allocation: rbuf | target_sgl | rmsgbuf */
	uint64_t mem_iova; /* its TO base in rmr (its address, or the old one after an exec) */
	size_t mem_len;
	uint8_t *sbuf;

	/* receive side */
	uint8_t *rbuf;
	uint32_t rbuf_size;
	uint32_t rbuf_offset; /* next byte to read */
	uint32_t rbuf_free_offset; /* start of the next half to advertise */
	uint32_t rbuf_bytes_avail; /* consumed, not yet advertised */
	size_t rbytes; /* readable bytes */
	struct xsk_rmsg *rmsg;
	unsigned rmsg_cap, rmsg_head, rmsg_count;
	uint32_t *rmsgbuf; /* posted receive buffers, one 32-bit message each */
	unsigned nrecv;
	uint16_t rq_size; /* credits we grant */
	/* rseq_no counts the data messages the application consumed, as
	 * rsockets does: credits are granted against it, so unread
	 * messages never outnumber rmsg; rmsg_arrived counts every message
	 * received (EPOLLET's edges) */
	uint16_t rseq_no, rseq_comp, rmsg_arrived;
	struct rs_sge_h remote_sgl; /* the peer's target SGL */
	unsigned remote_sge;
	bool swap; /* the peer's byte order differs */
	/* rsockets' form on a device that is not iWARP (no RS_OPT_MSG_SEND): each
	 * message is the immediate data of an RDMA Write with immediate, in
	 * network order, not a 4-octet Send (xsk_setup_qp) */
	bool msg_imm;

	/* send side */
	volatile struct rs_sge_h *target_sgl; /* written by the peer */
	struct rs_sge_h tsgl[RS_SGL_SIZE]; /* our copy of the entries in use */
	unsigned target_sge;
	bool tsge_wait; /* current entry exhausted: wait for an SGL update */
	uint16_t sseq_no, sseq_comp;
	uint32_t sbuf_size, sbuf_head, sbuf_tail, sbuf_used;

	/* stream state */
	bool shut_rd, shut_wr; /* local shutdown */
	bool peer_shut_wr; /* SHUTDOWN received: EOF after the data */
	bool peer_gone; /* DISCONNECT received or the connection ended */
	bool peer_ctrl; /* ... by the peer's DISCONNECT/SHUTDOWN (not a reset) */
	bool cm_gone; /* DISCONNECTED arrived (its status tells a reset) */
	bool qp_failed; /* a work request completed in error */
	bool disc_sent;
	bool disc_pending; /* ordered_close: its DISCONNECT not yet completed */
	bool sgl_seen; /* an SGL message came (possibly before ESTABLISHED was read) */
	bool in_accept_queue;
	/* connect: REJECTED with ECONNRESET, an MPA reject as siw reports
	 * it (xsk_conn.c does not fall back to plain TCP then) */
	bool mpa_rejected;
	/* ... and otherwise, why it failed if it goes plain TCP instead
	 * (enum xsock_plain_why, set with the failure by xsk_cm.c) */
	uint8_t plain_why;
	/* a non-blocking connect to a destination not known yet (xsk_plain.c):
	 * the application's own TCP socket, kept aside (xsk_fd_keep) while
	 * the stack tries MPA on a connection of its own, or -1; when the try
	 * is given up (xsk_now_ms); and a call making the fd that kernel
	 * socket again (no events meanwhile) */
	int probe_fd;
	int64_t probe_deadline;
	bool probe_switching;

	/* listeners: the service thread answers connection requests, except
	 * while threads wait in accept() (accept_waiters), which do it then */
	struct xsk *svc_next;
	_Atomic bool in_svc;
	_Atomic int accept_waiters;

	/* epoll registrations naming this socket (xsk_epoll.c; the table lock) */
	struct xsk_epreg *regs;

	/* the extended calls' state (xsk_ext.c), NULL until one is used */
	struct xsk_ext *ext;
	/* fork (xsk_fork.c) */
	unsigned claim_gen; /* xsk_fork_gen when last claimed */
	pid_t owner_pid; /* the process that made it: a kernel stack obeys it alone */
	bool foreign; /* another process uses the connection: EBUSY here */
	/* a look found the connection unclaimed though claim_gen said ours:
	 * it came between libiwarp's fork handler and the new xsk_fork_gen,
	 * so its wait has no TCP socket; fork_parent wakes it (s->mu) */
	bool fork_kick;
	_Atomic unsigned svc_gen; /* listener: xsk_fork_gen when handed to the service thread */
	unsigned refresh_gen; /* child: xsk_fork_gen when its fds were remade */
	int refresh_fd; /* ... and the first application fd number given the new epoll */
	/* relay channels made at forks (xsk_relay.c; s->mu) */
	struct xsk_relay *relay;
	unsigned relay_gen; /* the fork that made the newest channel (table lock) */
	/* xsk_fork_gen when the application last read or polled for input
	 * (not the relay): received data stays its own (xsk_relay.c) */
	unsigned app_read_gen;
	/* input a relay client did not read before it ended (xsk_relay.c),
	 * read before the ring (xsk_recv_locked; s->mu) */
	struct {
		uint8_t *buf;
		size_t n, off;
	} unread;
};

/* One registration of an IWARP fd in an application epoll set. */
struct xsk_epreg {
	struct xsk_epreg *next_in_set; /* list per epoll fd */
	struct xsk_epreg *next_of_sock; /* list per socket */
	int epfd, fd;
	struct xsk *s;
	uint32_t events; /* the application's interest */
	epoll_data_t data;
	bool disabled; /* EPOLLONESHOT fired */
	/* added, modified or taken over since epoll_wait last looked at it:
	 * the next wait looks once without a kernel report */
	bool look;
	/* EPOLLET: what the last look saw (xsk_epoll_edge) */
	uint32_t et_events;
	uint16_t et_rseq;
	uint32_t et_tail;
	unsigned et_acc;
};

/* EPOLLET on an IWARP socket (xsk_epoll_et.c): true if got (the events the
 * socket has now) is a new edge for registration r: a bit that was clear
 * at the last look, or a message or send completion since (spurious
 * reports are allowed, missed edges are not).  Records what it saw.
 * The table lock held (xsk_tab_lock), s->mu not held. */
bool xsk_epoll_edge(struct xsk_epreg *r, struct xsk *s, uint32_t got);

/* ---- the protocol (xsk_proto.h) ---------------------------------------- */

#include "libxsock/xsk_proto.h"

/* The socket options the connection's TCP socket gets (xsk_sock.c):
 * the recorded ones, once the connection exists (s->mu held). */
void xsk_opts_apply(struct xsk *s);
/* The socket options and the ones libxsock honours itself (timeouts,
 * SO_RCVLOWAT, SO_LINGER) of l onto c: an accepted socket gets its
 * listener's, an exec hand-over the old process's (xsk_sock.c). */
void xsk_opts_copy(struct xsk *c, const struct xsk *l);

/* ---- exec hand-over (xsk_exec.c; xsock(7) EXEC) -------------------------------- */

/* Each fd number naming a socket (xsk_fdtab.c; table lock held). */
void xsk_tab_each(void (*fn)(int fd, struct xsk *s, void *arg), void *arg);
/* The lowest fd number >= fd naming an IWARP socket or an epoll set that
 * holds one (close() has work to do there), or -1.  No lock. */
int xsk_tab_next(int fd);
/* fd names s from now on (the new process). 0 or -EMFILE. */
int xsk_tab_adopt(int fd, struct xsk *s);

/* The blocking send of write(2) and send(2) (SO_SNDTIMEO, signals,
 * O_NONBLOCK; SIGPIPE unless MSG_NOSIGNAL): the count sent, or -1 with
 * errno set (xsk_data.c; s->mu not held). */
ssize_t xsk_sock_send(struct xsk *s, const struct iovec *iov, int cnt, int flags);

/* ---- signals (xsk_signal.c) -------------------------------------------------- */

/* Signals held off inside the stack (xsock(7) FORK): while a thread holds
 * one of libxsock's locks (and so while it is in the stack below them),
 * the trampoline runs none of the application's handlers on it; a signal
 * arriving then is kept and raised again on the thread when its last lock
 * goes.  So a handler that forks (the postgres postmaster) or calls back
 * into libxsock never finds a lock its own thread holds: the fork
 * handlers lock as they do for a fork from another thread.  The poll
 * families and the data calls on IWARP sockets hold signals off for the
 * whole call but their waits (the allocator they call is the fork's
 * too: glibc's fork takes its locks).  A fault
 * (SIGSEGV... from the kernel) and a handler with SA_RESETHAND run at
 * once.  Thread: the calling thread's count, async-signal-safe; hold
 * before taking the lock, release after dropping it. */
extern __thread volatile unsigned xsk_sig_depth __attribute__((tls_model("initial-exec")));
extern __thread volatile unsigned xsk_sig_npend __attribute__((tls_model("initial-exec")));
/* Raise the signals held back (xsk_sig_depth is 0). */
void xsk_sig_flush(void);

/* The depth is written by its own thread only (and its handlers, which
 * nest), but the fork gate reads it from the forking thread: relaxed
 * atomic stores (a plain move on x86) so that read is not a data race. */
static inline void xsk_sig_depth_set(unsigned d)
{
	__atomic_store_n(&xsk_sig_depth, d, __ATOMIC_RELAXED);
}

/* The fork gate (xsk_fork_gate.c): a fork waits until no other thread
 * is inside the stack.  xsk_gate_register: the calling thread's depth
 * word joins the gate's list (once per thread, from its first hold;
 * async-signal-safe).  Around fork, on the forking thread, from
 * xsk_fork.c's handlers: wait (before any lock), then parent or child. */
extern __thread volatile bool xsk_gate_known __attribute__((tls_model("initial-exec")));
void xsk_gate_register(void);
void xsk_gate_fork_wait(void);
void xsk_gate_fork_parent(void);
void xsk_gate_fork_child(void);

static inline void xsk_sig_hold(void)
{
	if (__builtin_expect(!xsk_gate_known, 0))
		xsk_gate_register();
	xsk_sig_depth_set(xsk_sig_depth + 1);
	atomic_signal_fence(memory_order_seq_cst); /* before the lock */
}

static inline void xsk_sig_release(void)
{
	atomic_signal_fence(memory_order_seq_cst); /* after the unlock */
	unsigned d = xsk_sig_depth - 1;

	xsk_sig_depth_set(d);
	if (d == 0 && xsk_sig_npend)
		xsk_sig_flush();
}

/* A blocking wait within a held call, no lock held (the poll families'
 * kernel wait, xsk_sig_poll): the signals held back run, and handlers run
 * during the wait as the kernel's would; close gives the depth back. */
static inline unsigned xsk_sig_open(void)
{
	unsigned d = xsk_sig_depth;

	atomic_signal_fence(memory_order_seq_cst);
	xsk_sig_depth_set(0);
	if (xsk_sig_npend)
		xsk_sig_flush();
	return d;
}

static inline void xsk_sig_close(unsigned d)
{
	xsk_sig_depth_set(d);
	atomic_signal_fence(memory_order_seq_cst);
}

/* type_ r = call_, with signals held off but in its waits: the interposed
 * calls whose stack part allocates or frees outside libxsock's locks
 * (accept4, listen, bind, the option calls, shutdown), so that a handler
 * that forks never finds its own thread inside the allocator (the child
 * would find the allocator's lock held; glibc's fork would wait on it in
 * the parent).  errno survives the release, whose handlers may change it.
 * Only around calls that never block in the kernel outside xsk_sig_poll. */
#define XSK_HELD(type_, call_)                 \
	({                                     \
		xsk_sig_hold();                \
		type_ held_r_ = (call_);       \
		int held_e_ = errno;           \
		xsk_sig_release();             \
		errno = held_e_;               \
		held_r_;                       \
	})

/* libxsock's locks: pthread's, with signals held off while held. */
static inline void xsk_mutex_lock(pthread_mutex_t *m)
{
	xsk_sig_hold();
	pthread_mutex_lock(m);
}

static inline void xsk_mutex_unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
	xsk_sig_release();
}

/* Around fork (xsk_fork.c): signals held off from prepare to the end of
 * the parent's or the child's handlers; the child keeps none held back
 * for the parent (the kernel clears its pending signals too), and its
 * count is the forking thread's before the fork (its locks are
 * re-initialised, not unlocked). */
void xsk_sig_fork_prepare(void);
void xsk_sig_fork_parent(void);
void xsk_sig_fork_child(void);
/* A thread of libxsock's own (service, relay, completions): created with
 * every signal blocked, the application's handlers never run on it. */
int xsk_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/* What the application's signal handlers did on this thread: counts of
 * handler runs with and without SA_RESTART. */
struct xsk_sigsnap {
	unsigned restart, intr;
};
void xsk_sig_snap(struct xsk_sigsnap *snap);
/* poll(2) for a blocking socket call, by the kernel's rules for the
 * interrupted call: 0 (progress or timeout: look again), -EINTR, or
 * -XSK_ERESTART (only SA_RESTART handlers ran since snap; the caller
 * restarts unless it has a timeout or moved data).  A handler that ran
 * since snap but before the wait counts as an interruption, as a signal
 * pending when the kernel would sleep does. */
#define XSK_ERESTART 512 /* the kernel's ERESTARTSYS (never an errno) */
int xsk_sig_poll(struct pollfd *p, nfds_t n, int timeout_ms, struct xsk_sigsnap *snap);

/* ---- the extended calls (xsk_ext.c) ----------------------------------------- */

/* wr_id tags on the socket's QP: the stream uses bit 63 (receives) and 62
 * (its data Writes) and 0 (unsignaled); bit 61 marks the extended calls'
 * work requests, XSOCK_WRID_USER (bit 60) the application's own. */
#define XSK_WR_EXT (1ull << 61)
#define XSK_WR_USER (1ull << 60)

/* The socket an fd names, with a reference (NULL: not an IWARP socket);
 * xsk_fd_put drops it (xsk_fdtab.c: lock-free but for the last put,
 * which takes the table lock and frees the socket).  Any thread. */
struct xsk *xsk_fd_get(int fd);
void xsk_fd_put(struct xsk *s);
/* ---- after a fork: who uses a connection (xsk_claim.c; called by the
 * protocol files and the interposer's) ---------------------------------------- */

/* Incremented in parent and child at each fork (atomic; by xsk_fork.c). */
extern _Atomic unsigned xsk_fork_gen;
/* This process's pid, as fork's child handler saw it (xsk_fork.c sets it
 * there and at registration): a child of vfork(2) or clone(2) without a
 * copied address space (Python's subprocess, posix_spawn) runs no handler
 * and shares the parent's memory. */
extern pid_t xsk_fork_pid;
/* true in the child of a vfork(2) (memory shared with the parent, which
 * waits): change nothing of libxsock's state there */
bool xsk_vfork_child(void);
/* First use after a fork (from xsk_progress, s->mu held): claim the
 * connection or listener; a socket another process claimed first becomes
 * foreign.  false if s is foreign (the caller reports EBUSY). */
bool xsk_fork_use(struct xsk *s);
/* A sandbox starts (s->mu held): true if s's connection is not this
 * process's since the last fork (unclaimed or foreign); it becomes
 * foreign here, for good, without a claim. */
bool xsk_fork_give_up(struct xsk *s);
/* Only the process that made s's connection can drive it (xsk_claim.c):
 * over a kernel stack (the kernel obeys that process alone) and over
 * RoCE (the connection's state and its engine are that process's memory
 * and thread); every other process's copy is a relay client. */
bool xsk_maker_only(const struct xsk *s);
/* This process may not run the stack (a seccomp sandbox that refuses
 * open(): OpenSSH's pre-authentication child); probed once per process. */
bool xsk_fork_sandboxed(void);
/* close(): true if closing must not disconnect (the connection is shared
 * and this process has not used it, or another process uses it).  Over a
 * kernel stack: true in every process but the one that made the socket
 * (the kernel's objects are then left alone: see xsk_free). */
bool xsk_fork_quiet(struct xsk *s);

/* ---- fork (xsk_fork.c: the handlers, above the fd table and the relays) ---- */

/* accept(): a listener inherited by a child gets a service thread again. */
void xsk_fork_listener_use(struct xsk *s);
/* Memory for the fork handlers (xsk_fork.c): mmap's, zeroed, not malloc's,
 * because a fork from a signal handler (postgres' postmaster) runs them
 * where malloc must not be called.  NULL on failure; any thread. */
void *xsk_fork_alloc(size_t len);
void xsk_fork_free(void *p, size_t len);
/* xsk_fdtab.c for xsk_fork.c's handlers: fork prepare locks the table
 * (making the relay channels, with s->mu). */
void xsk_tab_fork_prepare(void);
/* The parent: unlock the table, then call fn once per listener and once
 * per connection (s->mu not held, a reference held). */
void xsk_tab_fork_parent(void (*fn)(struct xsk *s));
/* The child: re-initialise the table lock; call fn once per fd number
 * naming a socket (in increasing order). */
void xsk_tab_fork_child(void (*fn)(int fd, struct xsk *s));

/* ---- a connection used by two processes at once (xsk_relay.c) ------------- */

/* true on a relay thread (its reads are not the application's) */
extern __thread bool xsk_relay_self;
/* fork prepare: a channel for s (s->mu not held); the relay lock */
void xsk_relay_fork_prepare(struct xsk *s);
void xsk_relay_fork_prepare_all(void);
void xsk_relay_fork_parent(void);
/* After the fork, in each process (s->mu not held): the newest channel's
 * side of its pipe; the parent starts a thread waiting for a client. */
void xsk_relay_fork_side(struct xsk *s, bool parent);
/* The relayed sockets' addresses (xsk_relay_addr.c) across fork:
 * prepare; parent and child. */
void xsk_raddr_fork_prepare(void);
void xsk_raddr_fork_done(void);
void xsk_relay_fork_child(void);
/* the claim after a fork went to another process (s->mu held): the fd
 * the application's number becomes, or -1 (rd: the call that found it
 * reads: the owner's thread forwards input; sandbox: a sandbox starts,
 * xsk_tab_sandbox: what this process leaves unread goes back to the
 * connection when it ends).  The owner's side is the protocol's hook
 * (struct xsk_relay_hooks, owner). */
int xsk_relay_client(struct xsk *s, bool rd, bool sandbox);
/* xsk_data.c's, handed to the relay threads by xsk_fork.c when it
 * registers the fork handlers (before any relay exists): one non-blocking
 * call on s (dir 1 send, 0 receive, -1 shutdown(SHUT_WR)); -1 with errno
 * as the interposed calls */
/* Put input back in front of what s has received (s->mu held): the bytes
 * a relayed process left unread.  0 or -ENOMEM. */
int xsk_unread_add(struct xsk *s, const void *p, size_t n);
/* A system-call sandbox starts (xsk_sandbox.c, before it is on): every
 * connection this process holds but does not drive becomes its relay
 * channel's kernel socket now, while dup3 and eventfd writes still work
 * (xsk_fdtab.c; the table lock and s->mu not held). */
void xsk_tab_sandbox(void);
typedef ssize_t xsk_relay_io_fn(struct xsk *s, void *buf, size_t n, int dir);
xsk_relay_io_fn xsk_relay_io;
void xsk_relay_set_io(xsk_relay_io_fn *io);

#endif
