/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Live per-connection counters for xsock-stat(1) (xs_stat.c; layout in
 * xs_stat_shm.h), included by xs_internal.h.
 *
 * The hooks below are one line each in the engine and the QP; all take a
 * NULL slot (a connection made while XSOCK_STAT=0, or before the file could
 * be made) and then do nothing.  Each counter has one writer at a time: tx
 * counters the thread that owns the connection's transmit side (tx_busy),
 * rx counters the holder of its rx lock, so an increment is a plain add
 * stored whole (XS_STAT_ADD): no locked instruction on the data path. */
#ifndef XS_STAT_H
#define XS_STAT_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ddp/ddp_wire.h"
#include "iwarp/rdmap_wire.h"
#include "mpa/mpa.h"
#include "util/xs_err.h"
#include "verbs/xs_priv_abi.h"
#include "verbs/xs_stat_shm.h"

struct xs_conn;

/* One writer at a time: read, add, store whole for a reader elsewhere. */
#define XS_STAT_ADD(s, f, n) __atomic_store_n(&(s)->f, (s)->f + (n), __ATOMIC_RELAXED)
#define XS_STAT_SET(s, f, v) __atomic_store_n(&(s)->f, (v), __ATOMIC_RELAXED)

/* A connection established (xs_conn_attach, before it receives or sends):
 * its slot, or NULL (XSOCK_STAT=0, no room, the file cannot be made).  The
 * first call makes the file.  owner: the connection, for xs_stat_flushed.
 * Any thread; takes the stat lock. */
struct xs_stat_conn *xs_stat_conn_open(const struct xs_conn *owner, int fd,
				       const struct mpa_agreed *a, bool initiator);
/* The application closed it, or it failed: its XSOCK_STAT_LOG line now
 * (once; a process may exit before a lingering connection is freed).
 * Any thread; takes the stat lock.  NULL is fine. */
void xs_stat_conn_ended(struct xs_stat_conn *s);
/* The connection is freed: its counters join the process's closed totals
 * and the slot is free.  Any thread (nobody writes the slot any more);
 * takes the stat lock.  NULL is fine. */
void xs_stat_conn_close(struct xs_stat_conn *s);
/* The fork child's first handler (xs_fork.c, before the engine's, which
 * frees connections and so takes the stat lock): the lock, which another
 * thread of the parent may have held at the fork, made anew, and the
 * child's own file.  The forking thread only. */
void xs_stat_fork_child(void);
/* A connection ended: with XSOCK_STAT_LOG set, one JSON line in that
 * file (xs_stat_log.c), so that a connection of a process that is gone is
 * still accounted for (what VMA's VMA_STATS_FILE is for).  transport:
 * "iwarp" or "roce"; addresses may be NULL.  Any thread; one write(2)
 * with O_APPEND, no lock. */
struct xs_stat_log_conn {
	const char *transport;
	const struct xs_stat_addr *local, *peer;
	bool initiator;
	uint64_t tx_octets, rx_octets, tx_msgs, rx_msgs;
};
void xs_stat_log(const struct xs_stat_log_conn *c);
/* What a connection carried before an exec hand-over, so that the new
 * image's account (its slot, its XSOCK_STAT_LOG line) is the whole
 * connection's and not only what came after the execve.  _out: the old
 * image, its connection stopped (xs_conn_export), zeros for NULL; _in:
 * the new image's slot once opened, NULL is fine.  Any thread, no lock. */
struct xs_stat_carry {
	uint64_t tx_octets, rx_octets, tx_msgs, rx_msgs;
};
void xs_stat_conn_carry_out(const struct xs_stat_conn *s, struct xs_stat_carry *out);
void xs_stat_conn_carry_in(struct xs_stat_conn *s, const struct xs_stat_carry *in);
/* The address as the statistics file keeps it. */
void xs_stat_addr_of(struct xs_stat_addr *out, const struct sockaddr_storage *ss);

/* A WR of owner's QP completed as flushed.  Any thread; takes the stat
 * lock (flushes are rare: the slot is looked up by owner). */
void xs_stat_flushed(const struct xs_conn *owner);

/* A message on a local channel dropped (xs_priv_abi.h's enum
 * xsock_local_why): counted in the file's header, which is made now if
 * need be (nothing with XSOCK_STAT=0).  Rare (a hostile or broken local
 * peer): any thread; takes the stat lock. */
void xs_stat_local_drop(enum xsock_local_why why);

/* The counter a message of each RDMAP opcode adds to (its index among
 * the uint64_t of struct xs_stat_dir; 0, the octets: none). */
#define XS_STAT_MSG(f) (offsetof(struct xs_stat_dir, f) / sizeof(uint64_t))
static const uint8_t xs_stat_msg_field[RDMAP_OP_COUNT] = {
	[RDMAP_OP_SEND] = XS_STAT_MSG(sends),	    [RDMAP_OP_SEND_INV] = XS_STAT_MSG(sends),
	[RDMAP_OP_SEND_SE] = XS_STAT_MSG(sends),    [RDMAP_OP_SEND_SE_INV] = XS_STAT_MSG(sends),
	[RDMAP_OP_IMM_DATA] = XS_STAT_MSG(sends),   [RDMAP_OP_IMM_DATA_SE] = XS_STAT_MSG(sends),
	[RDMAP_OP_WRITE] = XS_STAT_MSG(writes),	    [RDMAP_OP_READ_REQ] = XS_STAT_MSG(reads),
	[RDMAP_OP_READ_RESP] = XS_STAT_MSG(read_resps), [RDMAP_OP_ATOMIC_REQ] = XS_STAT_MSG(atomics),
	[RDMAP_OP_TERMINATE] = XS_STAT_MSG(terms),
};

/* The message an FPDU ends (its DDP header's L bit), by RDMAP opcode. */
static inline void xs_stat_msg(struct xs_stat_dir *d, unsigned op)
{
	unsigned f = xs_stat_msg_field[op & RDMAP_OPCODE_MASK];
	uint64_t *p = (uint64_t *)d + f;

	if (f)
		__atomic_store_n(p, *p + 1, __ATOMIC_RELAXED);
}

/* Transmit side, the tx owner: the FPDU just framed in f (its DDP header
 * right behind the MPA length field, as iw_tx and the engine frame it). */
static inline void xs_stat_tx(struct xs_stat_conn *s, const struct mpa_txframe *f)
{
	if (!s)
		return;
	XS_STAT_ADD(&s->c.tx, fpdus, 1);
	XS_STAT_ADD(&s->c.tx, octets, f->wire_len);
	if (f->hdr[MPA_HDR_LEN] & DDP_FLAG_L)
		xs_stat_msg(&s->c.tx, f->hdr[MPA_HDR_LEN + 1] & RDMAP_OPCODE_MASK);
}

/* Receive side, rx lock held: n octets read from the socket (n <= 0:
 * none), fpdus the stream's count of FPDUs taken so far (iw_rx.fpdus). */
static inline void xs_stat_rx(struct xs_stat_conn *s, ssize_t n, uint64_t fpdus)
{
	if (!s)
		return;
	if (n > 0)
		XS_STAT_ADD(&s->c.rx, octets, (uint64_t)n);
	XS_STAT_SET(&s->c.rx, fpdus, fpdus);
}

/* Receive side, rx lock held: a message arrived (its last segment). */
static inline void xs_stat_rx_msg(struct xs_stat_conn *s, enum rdmap_opcode op)
{
	if (s)
		xs_stat_msg(&s->c.rx, op);
}

/* The last Terminate's triple: sent (tx owner) or received (rx lock). */
static inline void xs_stat_term(struct xs_stat_conn *s, bool tx, const struct xs_err *e)
{
	if (s)
		__atomic_store_n(tx ? &s->c.term_tx : &s->c.term_rx,
				 1u << 24 | (uint32_t)e->layer << 16 | (uint32_t)e->etype << 8 | e->ecode,
				 __ATOMIC_RELAXED);
}

/* Transmit side, the tx owner: a write left with SENDMSG_ZC, and whether
 * the kernel said it copied the pages anyway. */
static inline void xs_stat_zc(struct xs_stat_conn *s, bool copied)
{
	if (!s)
		return;
	XS_STAT_ADD(&s->c, zc_writes, 1);
	if (copied)
		XS_STAT_ADD(&s->c, zc_copied, 1);
}

/* Receive side, rx lock held: the stream failed with err (a CRC error is
 * counted). */
static inline void xs_stat_rx_error(struct xs_stat_conn *s, const struct xs_err *err)
{
	if (s && err->layer == XS_LAYER_LLP && err->etype == MPA_ETYPE && err->ecode == MPA_ECODE_CRC)
		XS_STAT_ADD(&s->c, crc_errors, 1);
}

/* The connection's state changed (any thread: a plain store). */
static inline void xs_stat_state(struct xs_stat_conn *s, enum xs_stat_state st, int status)
{
	if (!s)
		return;
	XS_STAT_SET(s, status, status);
	XS_STAT_SET(s, state, (uint32_t)st);
}

/* A work completion's status (make_wc in verbs_qp_priv.h). */
static inline void xs_stat_wc(const struct xs_conn *owner, enum ibv_wc_status st)
{
	if (st == IBV_WC_WR_FLUSH_ERR && owner)
		xs_stat_flushed(owner);
}

#endif
