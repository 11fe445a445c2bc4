/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* xsock.h: the public interface of libxsock, the sockets interposer that
 * carries TCP sockets set to IWARP_MODE over xsock's software iWARP stack
 * (the rsockets protocol over MPA/DDP/RDMAP).  See xsock(7).
 *
 *   int on = 1;
 *   setsockopt(fd, SOL_IWARP, IWARP_MODE, &on, sizeof(on));   // before connect()/listen()
 *
 * Accepted sockets inherit the mode; getsockopt(fd, SOL_IWARP, IWARP_MODE)
 * reports 1 for a socket carried over iWARP and 0 for any other socket.
 *
 * Why these values cannot collide with Linux: a setsockopt level is either
 * SOL_SOCKET (1), an IP protocol number (0..255, IPPROTO_MPTCP 262) or one of
 * the SOL_* constants of <linux/socket.h> (255..287 in Linux 6.x).  SOL_IWARP
 * is 0x69774152 ("iWAR"), far outside every range the kernel will ever
 * allocate from.  Without libxsock loaded, the kernel answers this level on a
 * TCP socket with ENOPROTOOPT, so a program can tell "not available" from
 * "refused".  Option numbers are private to a level, so IWARP_MODE needs no
 * further care. */
#ifndef XSOCK_H
#define XSOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SOL_IWARP 0x69774152

/* int: 1 = carry this TCP socket over iWARP (set before connect/listen),
 * 0 = plain TCP.  getsockopt: 1 if the socket is (or will be) an iWARP
 * socket. */
#define IWARP_MODE 1

/* Environment (also set by xsock-run --iwarp):
 *   XSOCK_IWARP=all   every AF_INET/AF_INET6 SOCK_STREAM socket the program
 *                     creates starts in IWARP_MODE.
 *   XSOCK_IWARP_RBUF  receive ring size in bytes (default 524288). */

/* ---- extended calls (version node XSOCK_1.0; one man3 page each) ------------
 *
 * Opt-in calls on a connected IWARP socket: register memory, hand the peer
 * a descriptor of it (over the socket itself), then RDMA Write / RDMA Read
 * against the peer's registered memory, and asynchronous stream sends and
 * receives, all completing through the socket's completion queue
 * (xsock_poll_comp, xsock_wait_comp, or an eventfd for poll/epoll).  Every
 * call returns -1 and sets errno on failure, like the socket calls. */

struct ibv_qp;
struct ibv_pd;

/* A memory registration on one socket (opaque). */
struct xsock_mr;

/* What the peer needs to reach a registration: the address of its first
 * byte as the peer names it, its STag and its length.  Sent on the wire as
 * XSOCK_RDESC_LEN octets, big-endian (xsock_rdesc_encode/decode):
 *   0..7 addr   8..11 stag   12..15 len */
struct xsock_rdesc {
	uint64_t addr;
	uint32_t stag;
	uint32_t len;
};
#define XSOCK_RDESC_LEN 16

/* xsock_reg access: what the peer may do (local access is always granted). */
#define XSOCK_ACCESS_REMOTE_READ 0x1
#define XSOCK_ACCESS_REMOTE_WRITE 0x2

/* Operation flags. */
#define XSOCK_FENCE 0x1 /* start only after every earlier RDMA Read completed */
#define XSOCK_PLACED 0x2 /* xsock_rdma_write: complete once the peer placed it */
#define XSOCK_WAITALL 0x4 /* xsock_recv_async: complete only when len bytes came */

/* struct xsock_comp.op */
#define XSOCK_OP_WRITE 1
#define XSOCK_OP_READ 2
#define XSOCK_OP_SEND 3
#define XSOCK_OP_RECV 4
#define XSOCK_OP_QP 5 /* a work request the application posted on xsock_qp() */

/* wr_id bit an application sets on work requests it posts itself on
 * xsock_qp(fd): their completions come back as XSOCK_OP_QP with
 * cookie = wr_id without this bit (bits 61..63 must be clear). */
#define XSOCK_WRID_USER (1ull << 60)

struct xsock_comp {
	uint64_t cookie; /* as given when the operation was posted */
	int op; /* XSOCK_OP_* */
	int status; /* 0, or a positive errno value */
	size_t len; /* bytes transferred (0 for a receive at end of stream) */
};

int xsock_reg(int fd, void *buf, size_t len, int access, struct xsock_mr **mr);
int xsock_dereg(struct xsock_mr *mr);
int xsock_mr_desc(const struct xsock_mr *mr, struct xsock_rdesc *desc);
void xsock_rdesc_encode(const struct xsock_rdesc *desc, uint8_t out[XSOCK_RDESC_LEN]);
int xsock_rdesc_decode(const uint8_t in[XSOCK_RDESC_LEN], struct xsock_rdesc *desc);

int xsock_rdma_write(int fd, const struct xsock_mr *mr, size_t local_off, size_t len,
		     const struct xsock_rdesc *remote, uint64_t remote_off, uint64_t cookie,
		     int flags);
int xsock_rdma_read(int fd, const struct xsock_mr *mr, size_t local_off, size_t len,
		    const struct xsock_rdesc *remote, uint64_t remote_off, uint64_t cookie,
		    int flags);
int xsock_send_async(int fd, const struct xsock_mr *mr, size_t off, size_t len, uint64_t cookie,
		     int flags);
int xsock_recv_async(int fd, const struct xsock_mr *mr, size_t off, size_t len, uint64_t cookie,
		     int flags);

int xsock_poll_comp(int fd, struct xsock_comp *comp, int max);
int xsock_wait_comp(int fd, struct xsock_comp *comp, int max, int timeout_ms);
int xsock_comp_fd(int fd);

struct ibv_qp *xsock_qp(int fd);
struct ibv_pd *xsock_pd(int fd);

#ifdef __cplusplus
}
#endif

#endif
