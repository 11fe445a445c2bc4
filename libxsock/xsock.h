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
 *   XSOCK_IWARP_RBUF  receive ring size in bytes (default 524288).
 *
 * The extended (zero-copy, asynchronous, one-sided) calls are not in this
 * version; see xsock(7) "NOT YET SUPPORTED". */

#ifdef __cplusplus
}
#endif

#endif
