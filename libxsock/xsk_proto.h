/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The rsockets protocol's calls for the rest of libxsock (the interposer,
 * the extended calls, fork, relays, exec): included by xsk_priv.h.
 *
 * The rsockets protocol (rdma-core librdmacm/docs/rsocket, iWARP variant)
 * over the stack's rdma_* and ibv_* calls.
 *
 * Connection data (40 octets, big-endian) travels as MPA private data after
 * the RFC 6581 header.  Each message is an RDMA Write into the peer's
 * advertised buffer (or target SGL entry), if it carries bytes, followed by
 * a 4-octet Send holding the 32-bit rsockets message (type in bits 31:29),
 * because iWARP has no RDMA Write with immediate data.  A Send consumes one
 * posted receive at the peer; credits count those receives and are granted
 * as an absolute 16-bit sequence number in an SGL (credit update) message.
 *
 * The receive ring is split in two halves: the connection data advertises
 * the first, a credit update right after establishment the second; a half
 * is advertised again (RDMA Write of an rs_sge into the peer's target SGL,
 * entries used alternately) once the application has read all of it.  A
 * sender fills a target SGE completely before it uses the next, so the
 * data of consecutive Data Transfer messages lies contiguously in the ring.
 *
 * Progress is driven by the application's own calls (read, write, poll,
 * epoll_wait ...): xsk_progress drains the CM channel and the completion
 * channel without blocking.  The inner epoll fd (the number the
 * application holds) contains both channels and the ready eventfd, which
 * is kept readable while the socket is readable, so a kernel-level wait on
 * the application's fd wakes for new events and for buffered data.
 *
 * The fast path (one wake-up and about three system calls per small
 * message, see scripts/bench-sockets.sh): a blocked read or write also
 * polls the connection's TCP socket (xsk_rx_wait_begin), while the engine
 * leaves that connection alone, and then receives on its own thread; a
 * Data Transfer's Write and Send go out as one chain (one sendmsg); the
 * CQ stays disarmed while a thread of ours polls it, and the channels are
 * looked at without system calls (libiwarp's XSOCK_PRIVATE_0 calls).
 *
 * The files, bottom up (each calls only those before it, but for the
 * one recursion noted in xsk_cm.c):
 *   xsk_wire.c    connection data encoding (xsk_wire.h: the wire format)
 *   xsk_res.c     the socket object, its fds, channels, rings, PD/CQ/QP/MRs,
 *                 posting receives and messages
 *   xsk_credit.c  credits, the receive ring, the CQ and its events
 *   xsk_ready.c   readiness: poll bits, the ready eventfd, room to send
 *   xsk_cm.c      CM events, listen/accept/connect, exec adoption, progress
 *   xsk_io.c      the receive wait on the TCP socket, the data calls
 *   xsk_svc.c     the service thread (listeners)
 *   xsk_close.c   teardown (xsk_free), and close over a kernel stack
 *   xsk_claim.c   after a fork: the claim of a connection (xsk_fork_use),
 *                 a quiet close (xsk_fork_quiet); declared in xsk_priv.h
 * They share xsk_proto_int.h.  They call up only through the hooks at the
 * end of this header; below them are xsk_sock.c (the option store,
 * xsk_opts_apply), xsk_real.c and xsk_config.c.
 *
 * Threads: application threads, with s->mu held unless noted; the service
 * thread runs xsk_progress on listeners (svc_mu, then s->mu).  Calls
 * return 0 / -errno unless noted. */
#ifndef XSK_PROTO_H
#define XSK_PROTO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

struct ibv_wc;
struct xsk;
struct xsk_rmsg;

/* ---- the socket object (xsk_res.c) ------------------------------------------ */

/* A new socket of family, FRESH, not locked; NULL without memory. */
struct xsk *xsk_new(int family);
/* Make the inner epoll fd + ready eventfd (called before the fd number is
 * taken over: no other thread sees s yet). */
int xsk_make_fds(struct xsk *s);
/* The fork child handler (xsk_fork.c; one thread): the pool of closed
 * connections' rings is emptied. */
void xsk_ring_pool_fork_child(void);

/* ---- readiness (xsk_ready.c) ------------------------------------------------ */

/* poll(2) bits the socket has now (after xsk_progress). */
short xsk_revents(struct xsk *s);
/* The fds to wait on for progress (at most 3): the channels, plus the
 * ready eventfd for a reader or the wake eventfd for a writer (another
 * thread may make the progress a waiter needs).  Returns how many. */
int xsk_wait_fds(struct xsk *s, int fds[3], bool writer);
/* The ready eventfd readable exactly while the socket is readable. */
void xsk_set_ready(struct xsk *s);
/* The same after a data call, lazily: the ready fd is set when the socket
 * became readable but left set when the call drained it (two system calls
 * per message saved), unless the call itself found nothing (nothing_found:
 * a kernel-level wait that woke for the stale mark and read EAGAIN must not
 * wake again).  libxsock's own waits (xsk_progress) clear it before they
 * block, so a stale mark costs at most one early wake-up.  s->mu held. */
void xsk_set_ready_after_io(struct xsk *s, bool nothing_found);

/* ---- connections and progress (xsk_cm.c) ------------------------------------ */

int xsk_connect_start(struct xsk *s, const struct sockaddr *dst, socklen_t len);
int xsk_listen_start(struct xsk *s, const struct sockaddr *addr, int backlog);
/* listener: the next established child, or a plain client's shell
 * (plain_fd >= 0), in the order they came; NULL if none */
struct xsk *xsk_accept_pop(struct xsk *s);
/* The new process of an exec hand-over: rebuild s's verbs on the inherited
 * TCP socket tcpfd with the stream state in wire, the receive memory
 * registered as the peer knows it (rkey at iova), mem_len octets of it
 * copied from mem, the send ring's from sbuf and the unread message
 * lengths from rmsg.  s carries the old process's stream numbers already
 * and is in no fd table yet (no lock).  0 or -errno. */
int xsk_adopt_conn(struct xsk *s, int tcpfd, const uint8_t *wire, uint32_t rkey, uint64_t iova,
		   const uint8_t *mem, const uint8_t *sbuf, const struct xsk_rmsg *rmsg,
		   unsigned rmsg_cap);
/* Make progress without blocking (CM events, completions, credits) and
 * update the ready eventfd. */
void xsk_progress(struct xsk *s);
/* The same with the receive mode rx (XSOCK_RX_*): ALWAYS after a wait on
 * the connection's TCP socket ended with it readable. */
void xsk_progress_rx(struct xsk *s, int rx);
/* The same without the ready eventfd, for a read or write (send flags)
 * that updates it with xsk_set_ready before it unlocks (a receive that
 * drains what progress found would otherwise set and clear it: two system
 * calls).  A blocking call does not try the TCP socket itself before its
 * first wait: it waits on that socket (xsk_rx_wait_begin), which says
 * when there is something to receive. */
/* reading: for a read (else a write).  Returns true when a non-blocking
 * call skipped the TCP socket (a watched socket): a writer short of room
 * sets rx_hint and calls again before it says EAGAIN. */
bool xsk_progress_io(struct xsk *s, int flags, bool reading);

/* ---- waiting and data (xsk_io.c) -------------------------------------------- */

/* A thread about to block on s (s->mu held): the connection's TCP socket
 * to poll for POLLIN as well, so that the waiting thread receives the data
 * itself (one wake-up, no engine hand-off), or -1.  A return >= 0 must be
 * followed by xsk_rx_wait_end once the wait is over. */
int xsk_rx_wait_begin(struct xsk *s);
void xsk_rx_wait_end(struct xsk *s);
/* An epoll set's socket, looked at by epoll_wait (s->mu held): progress
 * with the receive mode rx (XSOCK_RX_*), then keep the connection's TCP
 * socket in the inner epoll fd while the socket is registered for input
 * (ep_in_regs) and the application thread can take that input, so that
 * the next epoll_wait wakes on arriving octets and receives them itself
 * (the engine leaves such a connection alone: no hand-off, no eventfd).
 * xsk_rx_unwatch (s->mu held) ends the watch. */
void xsk_progress_watch(struct xsk *s, int rx);
void xsk_rx_unwatch(struct xsk *s);
/* Bytes read or sent (*done: bytes of iov an earlier round sent), 0 at end
 * of stream (recv) or without room (send), or -errno (-EAGAIN: nothing
 * yet). */
ssize_t xsk_recv_locked(struct xsk *s, const struct iovec *iov, int cnt, int flags);
ssize_t xsk_send_locked(struct xsk *s, const struct iovec *iov, int cnt, int flags, size_t *done);
/* One rsockets Data Transfer message straight from registered memory
 * (the extended calls): at most len bytes, bounded by the peer's target
 * buffer and RS_MAX_TRANSFER.  Bytes posted, 0 without credits or target
 * buffer, or -errno (the connection is broken). */
int xsk_stream_post(struct xsk *s, uint64_t addr, uint32_t lkey, uint32_t len, uint64_t wr_id);
int xsk_shutdown_locked(struct xsk *s, int how);

/* ---- the service thread (xsk_svc.c) ----------------------------------------- */

/* Hand a listener to the service thread, which accepts connection
 * requests while the application is not in accept() (the kernel's backlog
 * does that for TCP).  s->mu not held.  0 or -EAGAIN (no thread). */
int xsk_svc_add(struct xsk *s);
/* A thread of the application begins (on) or ends its wait in accept()
 * on the listener s (s->mu not held): while one waits, the service thread
 * is not woken for s's requests, which that thread accepts itself (one
 * wake-up per request, not two racing for s->mu).  No lock; the service
 * thread's epoll registration is changed by the first and the last. */
void xsk_svc_accept_wait(struct xsk *s, bool on);
/* The fork handlers (xsk_fork.c): prepare takes svc_mu (after a starting
 * thread reached its loop), the parent drops it, the child forgets the
 * thread and its epoll set. */
void xsk_svc_fork_prepare(void);
void xsk_svc_fork_parent(void);
void xsk_svc_fork_child(void);

/* ---- teardown (xsk_close.c) ------------------------------------------------- */

/* Closes everything and frees s (or leaves it to its relay thread);
 * s->mu not held, no other reference. */
void xsk_free(struct xsk *s);

/* ---- the layers above, called back -------------------------------------------- */

/* The extended calls (xsk_ext.c) keep their state in s->ext, the fork
 * relays (xsk_relay.c) theirs in s->relay.  Each module hands the protocol
 * its calls once, before it first sets its field (any thread, any lock);
 * the protocol calls them only while the field is set, so it never calls
 * those modules by name. */
struct xsk_ext_hooks {
	/* a completion tagged XSK_WR_EXT or XSK_WR_USER (s->mu held) */
	void (*wc)(struct xsk *s, const struct ibv_wc *wc);
	/* progress: post queued work, fill asynchronous receives (s->mu held) */
	void (*progress)(struct xsk *s);
	/* may the stream send now (false while an RDMA Read is outstanding or
	 * an asynchronous send waits: stream bytes stay in posting order) */
	bool (*stream_ok)(struct xsk *s);
	/* teardown, before the QP and PD go (s->mu not held) */
	void (*free)(struct xsk *s);
};
void xsk_proto_set_ext(const struct xsk_ext_hooks *h);

struct xsk_relay_hooks {
	/* over a kernel stack (s->mu not held): true if s went to its relay
	 * thread instead of being freed (this process made the connection,
	 * its application closed it, another process still holds a relay
	 * copy); that thread calls xsk_free again once the copy is closed */
	bool (*orphan)(struct xsk *s);
	/* before anything goes (s->mu not held): the relay threads end, the
	 * channels close */
	void (*free)(struct xsk *s);
	/* the claim after a fork went to this process (xsk_fork_use, s->mu
	 * held): serve the channels other processes still hold */
	void (*owner)(struct xsk *s);
};
void xsk_proto_set_relay(const struct xsk_relay_hooks *h);

#endif
