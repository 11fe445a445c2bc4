/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The private interface between libiwarp and libxsock (the same project
 * and release; version node XSOCK_PRIVATE_0 in libiwarp.map, looked up
 * by libxsock with dlsym).  Nothing here is part of the verbs ABI. */
#ifndef XS_PRIV_ABI_H
#define XS_PRIV_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

/* The mixed listener (xsock(7) MIXED LISTENER).  Called on a listening
 * id before rdma_listen: each TCP connection it accepts is classified by
 * its first octets (MSG_PEEK): the MPA Request key makes it an iWARP
 * connection (RDMA_CM_EVENT_CONNECT_REQUEST as usual); other octets, the
 * peer's FIN, or nothing within XSOCK_CLASSIFY_MS make it plain TCP, queued
 * on the id's channel as an event of type XSOCK_CM_EVENT_PLAIN (id and
 * listen_id = the listener) whose status is the connection's kernel socket
 * (O_NONBLOCK, FD_CLOEXEC, no octet read).  Whoever gets the event takes the
 * socket by setting status to -1; rdma_ack_cm_event closes a socket not
 * taken, as does destroying the id or the channel with the event queued.
 * 0, or -EINVAL (not an id, or already listening). */
int xsock_priv_listen_mixed(struct rdma_cm_id *id);

#define XSOCK_CM_EVENT_PLAIN 0x7870 /* not an rdma_cm_event_type: "xp" */

/* A connect of libxsock's that went on as plain TCP (xsock(7) PLAIN
 * SERVERS): the kernel socket connected (or connecting), to peer, for why.
 * Counted by why in the process's statistics file, made now if need be
 * (xsock-stat(1); nothing with XSOCK_STAT=0), with the destination among
 * the last few.  The values are xs_stat_shm.h's enum xs_stat_plain_why.
 * Any thread, no lock held. */
enum xsock_plain_why {
	XSOCK_PLAIN_OCTETS, /* the peer answered octets that are no MPA Reply */
	XSOCK_PLAIN_CLOSED, /* it refused, reset or closed the connection before any */
	XSOCK_PLAIN_SILENT, /* no answer in XSOCK_PLAIN_PROBE_MS (or SO_SNDTIMEO) */
	XSOCK_PLAIN_REMEMBERED, /* a plain TCP server lately: no MPA try */
	XSOCK_PLAIN_OTHER, /* the stack could not try (its error, no route) */
};
void xsock_priv_plain(int why, const struct sockaddr *peer, socklen_t len);
/* A message on one of the stack's local channels dropped (issue 31 item
 * 3: docs/architecture.md section 8): malformed, truncated or of an
 * unknown version (libxsock's: the exec hand-over memfd, XSOCK_RELAY_ADDR;
 * libiwarp's own: the RoCE forwarding names), or for a QP or comm ID this
 * process does not have.  Counted in the process's statistics file, made
 * now if need be (xsock-stat(1): local_bad, local_noqp; nothing with
 * XSOCK_STAT=0).  Any thread, no lock held. */
enum xsock_local_why {
	XSOCK_LOCAL_BAD, /* malformed, truncated, unknown version */
	XSOCK_LOCAL_NOQP, /* for a QP or comm ID this process does not have */
};
void xsock_priv_local_drop(int why);
/* A system-call sandbox starts in this process (libxsock sees its
 * setrlimit/prctl): the statistics file is removed now, not at exit. */
void xsock_priv_sandbox(void);

/* The process's XSOCK_* settings (verbs/xs_settings.h; verbs/xs_config.c),
 * so that each is parsed, and an invalid one said, once per process.
 * offer: a table libxsock began before it loaded libiwarp, taken as the
 * process's if libiwarp has used none yet; NULL to ask only.  size:
 * sizeof(struct xs_settings).  Returns the process's table, or NULL when
 * size differs (another release).  Any thread, no lock held. */
struct xs_settings;
struct xs_settings *xsock_priv_settings(struct xs_settings *offer, size_t size);

/* Exec hand-over (xsock(7) EXEC; verbs/xs_handover.c).  The stream state
 * of an established connection travels as XSOCK_WIRE_LEN opaque octets
 * (the same libiwarp on both sides of the execve).
 *
 * xsock_priv_export: before execve, on the thread that calls it: stop the
 * id's connection at an FPDU boundary both ways (bounded by timeout_ms)
 * and keep it stopped; returns a duplicate of its TCP socket without
 * close-on-exec (wire filled), or -errno (-ETIMEDOUT, -EPIPE, -EBUSY).
 * xsock_priv_export_undo: the execve failed; the connection goes on.
 * xsock_priv_adopt: the new process: an id on ch for the TCP socket fd and
 * the wire state (NULL, errno set); the caller creates the PD, CQ, QP (with
 * rdma_create_qp), registers the peer's STags with xsock_priv_reg_mr_stag,
 * posts its receives, then calls xsock_priv_adopt_start (0 or -errno):
 * the stream goes on with no CM event. */
#define XSOCK_WIRE_LEN 128
int xsock_priv_export(struct rdma_cm_id *id, uint8_t wire[XSOCK_WIRE_LEN], int timeout_ms);
void xsock_priv_export_undo(struct rdma_cm_id *id);
struct rdma_cm_id *xsock_priv_adopt(struct rdma_event_channel *ch, void *context, int fd,
				    const uint8_t wire[XSOCK_WIRE_LEN]);
int xsock_priv_adopt_start(struct rdma_cm_id *id);
struct ibv_mr *xsock_priv_reg_mr_stag(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
				      int access, uint32_t stag);

/* ibv_post_send for Sends and RDMA Writes whose SGEs may name the
 * caller's own memory, unregistered, with lkey XSOCK_LKEY_CALLER (valid
 * only in this call): libiwarp has handed every octet to the kernel
 * when the call returns (its Sends and Writes go out on the caller's
 * thread, xsock(7) FAST PATH), so the memory is free again, as with
 * IBV_SEND_INLINE of any size.  libxsock's write() sends from the
 * application's buffer this way, without a staging copy.  Other
 * opcodes, or that lkey with another opcode: EINVAL. */
#define XSOCK_LKEY_CALLER 0xfeu /* below 256: never an STag libiwarp makes */
int xsock_priv_post_send_caller(struct ibv_qp *qp, struct ibv_send_wr *wr,
				struct ibv_send_wr **bad);

/* xsock_priv_poll_cq(cq, n, wc, rx): ibv_poll_cq, and when the CQ is
 * empty a receive on its connections on the caller's thread first: never
 * (a thread that will wait on the socket itself), always, or only where
 * the socket may hold something (no system call when the last receive
 * emptied it and libiwarp's engine watches it: a readiness check). */
enum { XSOCK_RX_NONE = 0, XSOCK_RX_ALWAYS = 1, XSOCK_RX_MAYBE = 2 };
int xsock_priv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc, int rx);

/* What exit() does for the stack's connections after the application's
 * atexit handlers (a destructor): wait, bounded by XSOCK_FIN_DELAY_MS and
 * XSOCK_LINGER_MS, until closed connections have lingered and delayed FINs
 * went out.  For libxsock's _exit, which skips destructors.  Any thread. */
void xsock_priv_exit_wait(void);

/* libxsock's exit close (its sockets closed as close(2) does, each with
 * its data and DISCONNECT message ACKed first over RoCE), which the
 * stack's exit handling runs before its own if it has not run yet: the
 * order of libxsock's atexit handler and libiwarp's destructors is the
 * loader's, and a RoCE CM that disconnected first left each close waiting
 * for ACKs that could no longer come.  Set once at load; any thread. */
void xsock_priv_set_exit_close(void (*fn)(void));

/* Descriptors the stack keeps for itself (xs_fdkeep.c): closefrom and
 * close_range in libxsock pass over them.  keep returns fd (or -errno);
 * next_kept the lowest kept descriptor >= fd, or -1. */
int xsock_priv_fd_keep(int fd);
/* libxsock's listen (xs_spare.c): fd, a duplicate of the application's
 * bound TCP socket made with libc's fcntl (not one libxsock's table
 * names), is the stack's from now on, kept for the rdma_listen on its
 * address that follows,
 * which listens on it: the port is never free between the application's
 * bind and the stack's listen (a process binding the ports in turn, as
 * Open MPI's TCP BTL does, took it in that moment).  0 or -errno. */
int xsock_priv_listen_socket(int fd);
/* libxsock's connect: the id's refused TCP connect is refused at once, as
 * a kernel socket's is (rdma_connect dials again for XS_REDIAL_MS: a
 * program trying X displays :0 to :N, as hwloc does in every Open MPI
 * rank, waited that long for each).  0 or -EINVAL.  Any thread. */
int xsock_priv_cm_no_redial(struct rdma_cm_id *id);
void xsock_priv_fd_drop(int fd);
int xsock_priv_fd_next_kept(int fd);

/* Fork support (xs_fork.c).  fork_init: install libiwarp's atfork
 * handlers (idempotent).  claim: the id's connection or listener is this
 * process's from now on (0, -EBUSY if another process uses it).
 * release: a listener accepts nothing here until claimed again (0,
 * -EINVAL).  fork_mode: the id's standing without claiming (0 ours, 1
 * shared and unclaimed, 2 another process's). */
void xsock_priv_fork_init(void);
int xsock_priv_claim(struct rdma_cm_id *id);
int xsock_priv_release(struct rdma_cm_id *id);
int xsock_priv_fork_mode(struct rdma_cm_id *id);
enum {
	XSOCK_PRIV_FORK_MINE = 0,
	XSOCK_PRIV_FORK_UNCLAIMED = 1,
	XSOCK_PRIV_FORK_FOREIGN = 2,
};

/* An option on the id's TCP connection, or an abortive close (RST):
 * op is one of these.  0 or -errno. */
enum { XSOCK_TCP_GETOPT, XSOCK_TCP_SETOPT, XSOCK_TCP_ABORT };
int xsock_priv_tcp(struct rdma_cm_id *id, int op, int level, int name, void *val,
		   socklen_t *len);

/* The receive fast path (cm_proc.c, then xs_rx.c:xs_conn_rx_wait): on 1,
 * the TCP socket a thread about to block may poll to receive on its own
 * thread (-1 for none); on 0, the end of that wait; on 2, whether an epoll
 * watch should stop (1: stalled, ended, or not this process's). */
int xsock_priv_rx_wait(struct rdma_cm_id *id, int on);

/* Queues without system calls: CM events queued on a channel
 * (cm_channel.c), completion events queued on a completion channel, take
 * one (verbs_cq.c), disarm (0) or arm (1, signalling at once if
 * completions wait) a CQ's notification. */
int xsock_priv_cm_pending(struct rdma_event_channel *channel);
int xsock_priv_comp_pending(struct ibv_comp_channel *channel);
int xsock_priv_comp_take(struct ibv_comp_channel *channel);
int xsock_priv_cq_arm(struct ibv_cq *cq, int on);

/* A descriptor only the stack uses (a channel's eventfd, a connection's
 * TCP socket) moved out of the low numbers the application's own files
 * get: a TCP socket costs the kernel one descriptor but an IWARP socket
 * several, and programs size tables by descriptor number (wrk's event
 * loop takes 10 + 3 per connection).  The lowest free number from half
 * the soft RLIMIT_NOFILE (at most 4096) up; fd itself when there is none.
 * Keeps FD_CLOEXEC (all of them have it). */
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>
static inline int xsock_fd_high(int fd)
{
	static int base; /* 0: not yet known, -1: do not move */
	struct rlimit rl;
	int b = __atomic_load_n(&base, __ATOMIC_RELAXED), n;

	if (!b) {
		b = -1;
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= 256)
			b = rl.rlim_cur / 2 > 4096 ? 4096 : (int)(rl.rlim_cur / 2);
		__atomic_store_n(&base, b, __ATOMIC_RELAXED);
	}
	if (fd < 0 || b < 0 || fd >= b)
		return fd;
	n = fcntl(fd, F_DUPFD_CLOEXEC, b);
	if (n < 0)
		return fd;
	close(fd);
	return n;
}

#endif
