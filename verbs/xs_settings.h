/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Every XSOCK_* setting in one table, and the one parser for them
 * (verbs/xs_settings.c), compiled into both libiwarp and libxsock.
 *
 * One table per process: libiwarp's (xsock_priv_settings) when libiwarp is
 * in the process, else libxsock's own, which libxsock hands to libiwarp
 * when it loads it later (libxsock/xsk_settings.c).  Each row is parsed on
 * its first read, once; an invalid value keeps the default and is said in
 * one line on stderr, once.  xsock-run(1) and xsock(7) document every row
 * with its default, `xsock-run --help` lists the user-facing ones
 * (tests/test-man.sh checks both against tests/xsock-settings-dump). */
#ifndef XS_SETTINGS_H
#define XS_SETTINGS_H

#include <pthread.h>
#include <stdbool.h>

/* Kinds, and what is valid for each (anything else is invalid):
 *   BOOL  1 yes on true / 0 no off false (any case)
 *   UINT  decimal digits, lo..hi (IWARP_RBUF: also 0x hex)
 *   ENUM  one of the '|'-separated words; the value is its index
 *   STR   any text
 * Unset or empty: the default.  A UINT whose default is "" has no value
 * then (XS_SET_NONE). */
enum xs_kind { XS_KIND_BOOL, XS_KIND_UINT, XS_KIND_ENUM, XS_KIND_STR };

/* Who reads a row; XS_INTERNAL: set by xsock itself, not in --help. */
#define XS_BY_IWARP 1u
#define XS_BY_XSOCK 2u
#define XS_BY_BOTH (XS_BY_IWARP | XS_BY_XSOCK)
#define XS_INTERNAL 4u
#define XS_HEX 8u /* UINT: 0x... is taken too */

/* X(NAME, kind, default, lo, hi, words, flags, doc): NAME without XSOCK_. */
#define XS_SETTINGS(X)                                                                          \
	X(MPA_REV, UINT, "2", 1, 2, NULL, XS_BY_IWARP, "MPA revision to offer")                    \
	X(MPA_CRC, BOOL, "0", 0, 0, NULL, XS_BY_IWARP, "ask for MPA CRC32c")                       \
	X(MPA_MARKERS, BOOL, "0", 0, 0, NULL, XS_BY_IWARP, "ask the peer for MPA Markers")         \
	X(MPA_P2P, ENUM, "off", 0, 0, "off|write|read|send|0", XS_BY_IWARP,                        \
	  "RFC 6581 peer-to-peer ready-to-receive message to offer")                                \
	X(MPA_TIMEOUT_MS, UINT, "10000", 1, 3600000, NULL, XS_BY_IWARP,                            \
	  "limit for the TCP connect plus the MPA exchange")                                       \
	X(MPA_SETTLE_MS, UINT, "100", 0, 10000, NULL, XS_BY_IWARP,                                 \
	  "a responder's pause after its Reply to a peer that is not an xsock")                    \
	X(TX_TIMEOUT_MS, UINT, "30000", 0, 3600000, NULL, XS_BY_IWARP,                             \
	  "a sender the peer takes nothing from fails the connection (0 never)")                   \
	X(CONNECT_DELAY_MS, UINT, "0", 0, 10000, NULL, XS_BY_IWARP,                                \
	  "rdma_connect waits this long before its TCP connect")                                   \
	X(CLASSIFY_MS, UINT, "200", 0, 60000, NULL, XS_BY_IWARP,                                   \
	  "a mixed listener's wait for a client's first octets (0: iWARP only)")                   \
	X(FIN_DELAY_MS, UINT, "200", 0, 10000, NULL, XS_BY_IWARP,                                  \
	  "the FIN to a peer that is not an xsock leaves this much later")                         \
	X(LINGER_MS, UINT, "1000", 0, 60000, NULL, XS_BY_BOTH,                                     \
	  "a closed connection drains (until the peer's FIN or ACK), this long at most")                    \
	X(RNR_MS, UINT, "1000", 0, 60000, NULL, XS_BY_IWARP,                                       \
	  "a Send that arrives before its receive waits this long (0: Terminate)")                 \
	X(RDMAP_EXT, BOOL, "1", 0, 0, NULL, XS_BY_IWARP,                                           \
	  "announce RFC 7306 (immediate data, atomics) in the MPA exchange")                       \
	X(ZC_MIN, UINT, "65536", 0, 1073741824, NULL, XS_BY_IWARP,                                 \
	  "writes of this many octets or more use SENDMSG_ZC (0 never)")                           \
	X(ZC, ENUM, "auto", 0, 0, "auto|always|off|0", XS_BY_IWARP,                                \
	  "zero-copy send: auto, always (to measure it) or off")                                   \
	X(EVENT_SPIN_US, UINT, "40", 0, 1000000, NULL, XS_BY_IWARP,                                \
	  "ibv_get_cq_event receives this long before it sleeps")                                  \
	X(TRANSPORT, ENUM, "iwarp", 0, 0, "iwarp|roce", XS_BY_BOTH,                                \
	  "the device the CM binds to: xsock0 (iwarp) or xsock_roce0 (roce)")                     \
	X(ROCE_OOO, BOOL, "1", 0, 0, NULL, XS_BY_IWARP,                                            \
	  "RoCE: place RDMA Write packets that arrive ahead of a gap")                           \
	X(STAT, BOOL, "1", 0, 0, NULL, XS_BY_IWARP,                                                \
	  "live counters for xsock-stat(1) in /dev/shm")                                         \
	X(STAT_LOG, STR, "", 0, 0, NULL, XS_BY_IWARP,                                              \
	  "append one JSON line per ended connection to this file")                                \
	X(DEBUG, BOOL, "0", 0, 0, NULL, XS_BY_BOTH, "one line on stderr per refusal or error")    \
	X(IWARP, ENUM, "0", 0, 0, "0|all|1", XS_BY_XSOCK,                                          \
	  "all (or 1): every TCP socket is an IWARP socket")                                       \
	X(RULES, STR, "", 0, 0, NULL, XS_BY_XSOCK, "selection rules, ';'-separated (xsock.conf(5))") \
	X(CONFIG, STR, "", 0, 0, NULL, XS_BY_XSOCK,                                                \
	  "the file of selection rules (unset: /etc/xsock.conf if it exists)")                 \
	X(IWARP_RBUF, UINT, "524288", 8192, 67108864, NULL, XS_BY_XSOCK | XS_HEX,                  \
	  "an IWARP socket's receive ring in octets")                                              \
	X(IWARP_LIB, STR, "libiwarp.so.0", 0, 0, NULL, XS_BY_XSOCK,                                \
	  "the verbs/CM library libxsock runs on (librdmacm.so.1: the kernel's)")                 \
	X(STACK_PRIV, BOOL, "1", 0, 0, NULL, XS_BY_XSOCK,                                          \
	  "use libiwarp's private calls (0: standard verbs and CM calls only)")                    \
	X(PLAIN_PROBE_MS, UINT, "1000", 0, 60000, NULL, XS_BY_XSOCK,                              \
	  "an IWARP connect to a new destination waits this long for MPA, then goes plain TCP (0: never)") \
	X(PLAIN_TTL_S, UINT, "60", 0, 86400, NULL, XS_BY_XSOCK,                                   \
	  "how long a destination found plain (or iWARP) is remembered")                        \
	X(SOCK_LIB, STR, "libxsock.so.0", 0, 0, NULL, XS_BY_IWARP,                                 \
	  "the libxsock libiwarp's r* calls load (set by xsock-run)")                              \
	X(EXEC_FD, UINT, "", 0, 2147483647, NULL, XS_BY_XSOCK | XS_INTERNAL,                       \
	  "the hand-over memfd across execve (set by libxsock)")                                    \
	X(RELAY_ADDR, STR, "", 0, 0, NULL, XS_BY_XSOCK | XS_INTERNAL,                               \
	  "relayed sockets' TCP addresses across execve (set by libxsock)")

enum xs_set {
#define XS_SET_ENUM_(name, ...) XS_SET_##name,
	XS_SETTINGS(XS_SET_ENUM_)
#undef XS_SET_ENUM_
	XS_SET_COUNT
};

struct xs_setting_row {
	const char *name; /* "XSOCK_..." */
	enum xs_kind kind;
	const char *dflt; /* as documented; parsed like a value */
	unsigned long lo, hi; /* UINT */
	const char *words; /* ENUM */
	unsigned flags; /* XS_BY_*, XS_INTERNAL, XS_HEX */
	const char *doc;
};

extern const struct xs_setting_row xs_setting_rows[XS_SET_COUNT];

#define XS_SET_NONE (~0ul) /* a UINT without default, unset */

/* One process's values.  Static storage, XS_SETTINGS_INIT; never freed. */
struct xs_settings {
	pthread_mutex_t mu; /* parsing; readers of a parsed row take none */
	bool done[XS_SET_COUNT]; /* release-stored once the row is parsed */
	unsigned long num[XS_SET_COUNT]; /* BOOL 0/1, UINT, ENUM word index */
	const char *str[XS_SET_COUNT]; /* STR: the environment's or the default */
};
#define XS_SETTINGS_INIT { .mu = PTHREAD_MUTEX_INITIALIZER }

/* A row's value, parsed from the environment on the first call for that
 * row (an invalid value: the default, and one line on stderr).  Any
 * thread; takes t->mu the first time only.  BOOL, UINT, ENUM: */
unsigned long xs_settings_num(struct xs_settings *t, enum xs_set id);
/* STR: never NULL ("" when unset and no default). */
const char *xs_settings_str(struct xs_settings *t, enum xs_set id);

/* The parser itself, no environment, no output: 0 and *num set, or -1
 * (invalid).  For tests and the two calls above. */
int xs_setting_parse(const struct xs_setting_row *r, const char *text, unsigned long *num);

#endif
