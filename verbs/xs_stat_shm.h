/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The layout of a process's statistics file, /dev/shm/xsock-UID-PID
 * (XS_STAT_DIR, XS_STAT_PREFIX): written by libiwarp (verbs/xs_stat.c),
 * read by xsock-stat(1) (tools/xsock-stat.c) from another process while
 * the writer runs.  Fixed-size fields only, no pointers; a reader checks
 * magic, version and the sizes before it looks further.
 *
 * Reading rules (the writer never waits for a reader):
 * - every field is read with a relaxed atomic load (it is stored whole);
 * - a slot is one connection while its gen is even and the same before and
 *   after the copy (gen is odd while the slot is filled or freed), and
 *   in_use is 1;
 * - closed is the sum of the connections gone: a connection moves its
 *   counters there and frees its slot between two bumps of seq (odd
 *   meanwhile), so a reader that sees the same even seq before and after
 *   its copy of closed and the slots counts every octet once;
 * - the plain TCP section (hdr.plain_off, plain_size: 0 in the files of
 *   releases before it, whose header had 64 reserved octets there) counts
 *   libxsock's connects that went on as plain TCP (went[], each read
 *   whole); last[] is consistent when its seq is even and the same before
 *   and after the copy;
 * - the local drops (hdr.has_local: 0 in the files of releases before
 *   them, whose header kept these octets reserved as zeros) count the
 *   messages on the stack's local channels that were dropped, each read
 *   whole. */
#ifndef XS_STAT_SHM_H
#define XS_STAT_SHM_H

#include <stdint.h>

#define XS_STAT_DIR "/dev/shm"
#define XS_STAT_PREFIX "xsock-" /* then "UID-PID" */
#define XS_STAT_MAGIC 0x3174617473637378ull /* "xscstat1" little-endian */
#define XS_STAT_VERSION 1
#define XS_STAT_SLOTS 16384 /* XS_MAX_QP: one per connection */
#define XS_STAT_ARGV0 64

/* A reader's copy, between its two loads of a generation number: the
 * copy's loads stay before the second load.  Under GCC's ThreadSanitizer,
 * which cannot model fences (-Wtsan), a compiler barrier: enough on the
 * x86 it runs on, whose loads are not reordered with loads. */
#if defined(__SANITIZE_THREAD__)
#define XS_STAT_READ_FENCE() __atomic_signal_fence(__ATOMIC_SEQ_CST)
#else
#define XS_STAT_READ_FENCE() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#endif

/* connection states (slot.state) */
enum xs_stat_state {
	XS_STAT_ESTABLISHED = 1, /* a QP is attached, the stream runs */
	XS_STAT_LINGER = 2, /* closed by its owner, draining to the peer's FIN */
	XS_STAT_CLOSED = 3, /* the stream ended (slot.status says how) */
};

/* One direction of a connection: one cache line, written by one thread
 * at a time (the other direction's writer never touches it). */
struct xs_stat_dir {
	uint64_t octets; /* FPDU octets (MPA stream after the handshake) */
	uint64_t fpdus;
	uint64_t sends; /* Send, Send with SE/Invalidate, Immediate Data */
	uint64_t writes; /* RDMA Writes */
	uint64_t reads; /* RDMA Read Requests */
	uint64_t read_resps; /* RDMA Read Responses (messages) */
	uint64_t atomics; /* RFC 7306 Atomic Requests */
	uint64_t terms; /* Terminates */
};

/* term_tx, term_rx: the last Terminate's triple each way,
 * (1 << 24) | layer << 16 | etype << 8 | ecode, 0 for none. */
struct xs_stat_counters {
	_Alignas(64) struct xs_stat_dir tx;
	_Alignas(64) struct xs_stat_dir rx;
	/* rare: a line of their own */
	_Alignas(64) uint64_t crc_errors; /* FPDUs whose MPA CRC was wrong (the stream then ends) */
	uint64_t flushed; /* WRs completed with IBV_WC_WR_FLUSH_ERR */
	uint32_t term_tx, term_rx;
	/* zero-copy send (xs_zc.c): writes that left with SENDMSG_ZC, and
	 * those the kernel then said it copied (XSOCK_ZC=auto: the last one) */
	uint64_t zc_writes, zc_copied;
};

/* Why a connect went on as plain TCP (xsock(7) PLAIN SERVERS): the index
 * of its count in xs_stat_plain.went[] (xs_priv_abi.h's enum
 * xsock_plain_why has the same values). */
enum xs_stat_plain_why {
	XS_STAT_PLAIN_OCTETS, /* the peer answered octets that are no MPA Reply */
	XS_STAT_PLAIN_CLOSED, /* the peer closed (or reset) before any */
	XS_STAT_PLAIN_SILENT, /* no answer in XSOCK_PLAIN_PROBE_MS (or SO_SNDTIMEO) */
	XS_STAT_PLAIN_REMEMBERED, /* a plain server lately: no MPA try */
	XS_STAT_PLAIN_OTHER, /* the stack could not try (its own error, no route) */
	XS_STAT_PLAIN_NWHY,
};
#define XS_STAT_PLAIN_WHYS 8 /* went[]'s room: reasons may be added */
#define XS_STAT_PLAIN_LAST 8

/* An address: family AF_INET or AF_INET6 (0: unknown), port in host order. */
struct xs_stat_addr {
	uint16_t family;
	uint16_t port;
	uint8_t addr[16];
};

struct xs_stat_conn {
	uint32_t gen;
	uint32_t in_use;
	uint32_t state; /* enum xs_stat_state */
	int32_t status; /* XS_STAT_CLOSED: 0 graceful, -errno otherwise */
	uint64_t opened_ns; /* CLOCK_REALTIME */
	struct xs_stat_addr local, peer;
	/* the MPA options agreed (struct mpa_agreed) */
	uint8_t mpa_rev, crc, markers_tx, markers_rx;
	uint8_t p2p, rtr, rdmap_ext, initiator;
	uint16_t ird, ord;
	uint32_t pad;
	struct xs_stat_counters c;
};

/* A destination that went plain. */
struct xs_stat_plain_dest {
	uint64_t when_ns; /* CLOCK_REALTIME */
	struct xs_stat_addr peer;
	uint32_t why; /* enum xs_stat_plain_why */
};

/* libxsock's connects that went on as plain TCP: kernel sockets from then
 * on, which the stack never sees (what VMA's vma_stats calls passthrough
 * sockets).  After the slots (hdr.plain_off). */
struct xs_stat_plain {
	uint64_t went[XS_STAT_PLAIN_WHYS]; /* by enum xs_stat_plain_why */
	uint32_t seq; /* odd while last[] changes */
	/* destinations ever recorded: the newest is in
	 * last[(nlast - 1) % XS_STAT_PLAIN_LAST] */
	uint32_t nlast;
	uint8_t pad[56];
	struct xs_stat_plain_dest last[XS_STAT_PLAIN_LAST];
};

struct xs_stat_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t hdr_size, slot_size, nslots;
	uint32_t hiwater; /* slots [0, hiwater) were ever used */
	uint32_t seq; /* odd while a connection moves to closed */
	int32_t pid;
	uint32_t uid;
	uint64_t created_ns; /* CLOCK_REALTIME: the file was made */
	char argv0[XS_STAT_ARGV0];
	uint64_t opened, closed_conns; /* connections ever opened, closed */
	struct xs_stat_counters closed; /* the counters of closed connections */
	/* struct xs_stat_plain: its offset in the file and size (0, 0: a
	 * file of an older release, which reserved these octets as zeros) */
	uint32_t plain_off, plain_size;
	/* messages on the stack's local channels dropped (xs_priv_abi.h's
	 * xsock_priv_local_drop): malformed, truncated or of an unknown
	 * version; for a QP or comm ID the process does not have.  has_local
	 * 0: a file of an older release (reserved zeros there) */
	uint32_t has_local, pad1;
	uint64_t local_bad, local_noqp;
	uint8_t reserved[32];
};

/* The file: the header, then nslots slots, then struct xs_stat_plain. */
struct xs_stat_file {
	struct xs_stat_hdr hdr;
	struct xs_stat_conn slot[];
};

_Static_assert(sizeof(struct xs_stat_dir) == 64, "xs_stat_dir: one cache line");
_Static_assert(sizeof(struct xs_stat_conn) == 320, "xs_stat_conn layout");
_Static_assert(sizeof(struct xs_stat_hdr) == 384, "xs_stat_hdr layout (version 1)");
_Static_assert(sizeof(struct xs_stat_plain_dest) == 32, "xs_stat_plain_dest layout");
_Static_assert(sizeof(struct xs_stat_plain) == 384, "xs_stat_plain layout");

#endif
