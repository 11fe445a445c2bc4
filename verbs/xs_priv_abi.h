/* The private interface between libiwarp and libxsock (the same project
 * and release; version node XSOCK_PRIVATE_0 in libiwarp.map, looked up
 * by libxsock with dlsym).  Nothing here is part of the verbs ABI. */
#ifndef XS_PRIV_ABI_H
#define XS_PRIV_ABI_H

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

#endif
