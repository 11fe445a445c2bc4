/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* What the RoCE CM's two files share (nothing here leaves libiwarp):
 *   xs_roce_cm.c     the connection states, resends, time-wait, the engine
 *                    thread and the calls of xs_roce_cm.h
 *   xs_roce_cm_io.c  the CM sockets: UDP 4791 (MADs in UD SEND_ONLY
 *                    packets to and from QP 1) and the abstract Unix names
 *                    a MAD is passed on through to its owning process
 *                    (their format: xs_local_wire.h)
 * Threads and locks as xs_roce_cm.h says: xrcm.mu guards the engine; the
 * receive calls run on the engine thread without it. */
#ifndef XS_ROCE_CM_PRIV_H
#define XS_ROCE_CM_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "roce/roce.h"
#include "verbs/xs_local_wire.h"
#include "verbs/xs_roce_cm.h"

#pragma GCC visibility push(hidden)

#define XRCM_RESEND_MS 2000
#define XRCM_RETRIES 15 /* rdma_cm's max CM retries */
#define XRCM_DREQ_RETRIES 3
#define XRCM_TIMEWAIT_MS 1000
/* A REQ that finds no listener is sent again for this long before the
 * REJ is reported, as the iWARP transport dials a refused TCP connect
 * again (xs_connect.c: XS_REDIAL_MS): a client started just before its
 * server connects instead of failing */
#define XRCM_REDIAL_MS 1500
#define XRCM_REDIAL_GAP_MS 20
#define XRCM_MRA_TIMEOUT 20 /* what our MRAs ask for: 4.096 us * 2^20 ~ 4 s */
#define XRCM_PKT_MAX (ROCE_BTH_LEN + ROCE_DETH_LEN + ROCE_MAD_LEN + 3 + ROCE_ICRC_LEN)
/* the largest datagram the CM's sockets take: an RC packet of a 4096-octet
 * path MTU with its headers (xrcm_early), as large as a stray carries */
#define XRCM_RX_MAX XS_LOCAL_PKT_MAX

enum xrcm_state { S_REQ_SENT, S_REP_RCVD, S_REQ_RCVD, S_REP_SENT, S_EST, S_DREQ_SENT, S_TIMEWAIT,
		  S_DONE };

struct xs_rcm {
	struct xs_rcm *next;
	enum xrcm_state state;
	bool owned; /* the owner has not put it yet */
	bool active;
	uint32_t local_id, remote_id;
	uint32_t local_qpn, remote_qpn;
	uint64_t tid;
	struct sockaddr_storage local, peer;
	uint8_t mad[ROCE_MAD_LEN]; /* the last MAD sent, for resending */
	bool have_mad;
	int retries;
	uint64_t deadline; /* ms, 0: none */
	uint64_t redial_end; /* active: a REJ "no listener" before this resends */
	xs_rcm_cb cb;
	void *ctx;
};

/* A listener takes IPv4 REQs, IPv6 REQs or both (an AF_INET6 listener
 * without AFONLY, as the kernel's rdma_cm: cma_check_port); each family it
 * takes is an abstract name of its own, so that one process or two can
 * listen on a port with AF_INET and AF_INET6 (AFONLY) at once, as TCP
 * (redis-server listens on 0.0.0.0 and [::] with IPV6_V6ONLY). */
struct xs_rcm_listener {
	struct xs_rcm_listener *next;
	uint64_t sid;
	struct sockaddr_storage local; /* the wildcard: any */
	int fd[2]; /* the names that make the service ours: [0] IPv4, [1] IPv6; -1: not taken */
	/* this process takes no REQ for it (a fork's copy not claimed, or a
	 * parent's released by libxsock): its REQs go to the processes that
	 * read the shared names, as a TCP listener's connections go to the
	 * processes that accept on it */
	bool dormant;
	xs_rcm_cb cb;
	void *ctx;
};

struct xrcm_engine {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* a callback finished */
	pid_t pid; /* the process that started the engine (fork: again) */
	pthread_t thread;
	int fd4, fd6, fdu, wake;
	/* through xsock-roced (xs_roce_relay_on): no UDP socket (fd4, fd6
	 * -1), fdu the CM's connection to the daemon, each listener's fds its
	 * own connections; MADs go and come as ROCED_MAD */
	bool relay;
	uint16_t tag;
	uint16_t seq;
	struct xs_rcm *conns;
	struct xs_rcm_listener *listeners;
	/* the callback running on the engine thread (put/unlisten wait) */
	const void *in_cb;
	struct roce_icrc_idcache ids; /* engine thread only */
};

/* The process's engine (xs_roce_cm.c); mu guards all of it but ids. */
extern struct xrcm_engine xrcm;

/* ---- xs_roce_cm_io.c ---------------------------------------------------------- */

/* The 16 address octets of an IPv4 (first 4) or IPv6 address, and back. */
void xrcm_addr_bytes(const struct sockaddr_storage *ss, uint8_t b[16]);
void xrcm_addr_from(int family, const uint8_t b[16], struct sockaddr_storage *ss);
bool xrcm_addr_eq(const struct sockaddr_storage *a, const struct sockaddr_storage *b);
bool xrcm_addr_any(const struct sockaddr_storage *a);
const char *xrcm_addr_str(const struct sockaddr_storage *ss, char *buf, size_t len);

/* A CM socket: UDP 4791 on the wildcard, SO_REUSEPORT, PKTINFO, DF.
 * The fd or -errno. */
int xrcm_udp_open(int family);

/* The abstract names: a listener's service (sid) for IPv4 or IPv6 REQs,
 * or a process's tag. */
enum xrcm_name { XRCM_SID4, XRCM_SID6, XRCM_TAG };
/* A datagram socket bound to the name: the fd, -EADDRINUSE if taken. */
int xrcm_unix_bind(enum xrcm_name kind, uint64_t v);
/* Pass a MAD on to the owner named (engine thread, no lock held: it may
 * wait a little for room in the owner's queue). */
enum xrcm_fwd { XRCM_FWD_OK, XRCM_FWD_NOBODY, XRCM_FWD_BUSY };
enum xrcm_fwd xrcm_forward(enum xrcm_name kind, uint64_t v, const struct sockaddr_storage *local,
			   const struct sockaddr_storage *peer, const uint8_t *mad);
/* One MAD to peer's QP 1 from local (any thread). */
void xrcm_send_mad(const struct sockaddr_storage *local, const struct sockaddr_storage *peer,
		   const uint8_t *mad);
/* A stray datagram to the process's own Unix name, for its engine to take
 * as if its CM socket had received it (mu held, engine started). */
bool xrcm_stray_send(const uint8_t *pkt, size_t len, const struct sockaddr_storage *from,
		     const struct sockaddr_storage *local);
/* Receive what waits on a CM socket / a Unix socket (engine thread, no
 * lock): each MAD goes to xrcm_handle_mad. */
void xrcm_rx_udp(int fd);
void xrcm_rx_fwd(int fd);
/* Try the held RC packets again (xrcm_early; engine thread, no lock): the
 * time of the next try, 0 if none is held. */
uint64_t xrcm_early_retry(void);

/* ---- xs_roce_cm.c -------------------------------------------------------------- */

/* A MAD received (engine thread, no lock); forwarded: from another
 * process. */
void xrcm_handle_mad(const uint8_t *mad, const struct sockaddr_storage *local,
		     const struct sockaddr_storage *peer, bool forwarded);

#pragma GCC visibility pop

#endif
