/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The RoCEv2 transport (issue 17): an RC engine over UDP port 4791 under
 * the transport interface (xs_transport.h), for QPs of the xsock_roce0
 * device.  What verbs_qp.c calls; the engine's own contracts are in
 * xs_roce_priv.h.
 *
 * A RoCE QP is connected by ibv_modify_qp without the CM: RTR makes the
 * connection (its sockets; packets that come before RTS wait in them),
 * RTS starts the requester and binds the QP (xs_qp_attach).  Any
 * application thread, the QP's lock held; 0 or -errno. */
#ifndef XS_ROCE_H
#define XS_ROCE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "verbs/xs_transport.h"

struct xs_roce_path {
	struct sockaddr_storage local, peer; /* IP addresses (ports ignored) */
	uint32_t qpn, dest_qpn;
	/* the QP's connection to xsock-roced (xs_roce_relay_on), when relay */
	bool relay;
	int relay_fd;
	uint32_t rq_psn;
	uint32_t mtu; /* path MTU in octets: 256 .. 4096 */
	uint32_t flow_label; /* the AV's GRH flow label (0: from the QPNs) */
	uint8_t min_rnr_timer;
};

struct xs_roce_req_attr {
	uint32_t sq_psn;
	uint8_t timeout; /* 4.096 us * 2^timeout; 0: the engine's default */
	uint8_t retry_cnt, rnr_retry; /* 7: infinite */
	uint16_t ird, ord; /* as the QP has them (tp->params) */
};

/* Who takes a datagram a QP's receive socket got before it was connected
 * (a MAD for the CM: xs_roce_conn.c, rx_sweep); set once by the CM at load
 * (xs_roce_cm.c), unset (dropped) where there is none (tests of the
 * engine alone).  Any thread. */
typedef void (*xs_roce_stray_fn)(const uint8_t *pkt, size_t len, const struct sockaddr_storage *from,
				 const struct sockaddr_storage *local);
void xs_roce_set_stray(xs_roce_stray_fn fn);

/* Pass one RC packet pkt[0..len) that reached the CM's socket on to QP
 * qpn of address local, whatever process owns it (xs_roce_fwd.c): 0,
 * -ENOENT (no such QP yet), -EAGAIN (its queue is full), or -errno.  Any
 * thread; never waits. */
int xs_roce_pass_to_qp(const struct sockaddr_storage *local, uint32_t qpn, const uint8_t *pkt,
		       size_t len);

/* ---- xsock-roced (xs_roce_relay.c) ---- */
struct roced_msg;
/* A daemon of root's (or of our user's) listens in this network
 * namespace: every RoCE socket of the process is a connection to it
 * (looked at once per process).  Any thread. */
bool xs_roce_relay_on(void);
/* A new connection to the daemon and its first request (CLAIM, CM_OPEN,
 * LISTEN): the fd (non-blocking, kept) with *value the reply's, or
 * -errno.  Any thread, no lock needed. */
int xs_roce_relay_open(const struct roced_msg *req, uint32_t *value);
/* A request on fd and its reply, which is the next message (bounded
 * wait): the reply's value, or -errno (its errno, -ETIMEDOUT, -EPROTO). */
int xs_roce_relay_call(int fd, const struct roced_msg *req);

/* RTR: -EADDRNOTAVAIL (local address not ours), -EINVAL, -ENOMEM, or the
 * socket calls' errors. */
int xs_roce_conn_create(const struct xs_roce_path *p, struct xs_conn **out);
/* RTS: the requester's attributes (before tp->attach). */
void xs_roce_conn_rts(struct xs_conn *c, const struct xs_roce_req_attr *a);
/* The QP's parameters (ird/ord as the QP asked, ext: atomics and
 * immediate data are native). */
void xs_roce_params(uint16_t ird, uint16_t ord, struct xs_tp_params *p);

/* The UDP source port of the packets the QP lqpn sends to rqpn: rxe's
 * rdma_get_udp_sport (include/rdma/ib_verbs.h), symmetric in the QPNs. */
uint16_t xs_roce_udp_sport(uint32_t flow_label, uint32_t lqpn, uint32_t rqpn);

/* Process exit (xs_close.c's destructor, after libxsock's exit close;
 * xsock_priv_exit_wait for _exit): the CM disconnects what the program
 * left up and waits for the answers, then the lingering connections get
 * their time; each bounded by XSOCK_LINGER_MS.  The engine's part alone:
 * xs_roce_loop_exit_wait. */
void xs_roce_exit_wait(void);
void xs_roce_loop_exit_wait(void);
/* Fork (xs_fork.c): the loop's lock, a leaf, is held across fork so
 * that a child (a worker that claims a listener and starts its own loop)
 * does not inherit it locked. */
void xs_roce_loop_fork_prepare(void);
void xs_roce_loop_fork_done(void);

extern const struct xs_transport_ops xs_tp_roce;

#endif
