/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The RoCE personality of the device (verbs/verbs_roce_dev.c): the device
 * xsock_roce0 beside xsock0, its RoCE v2 GID table of port 1 and the MTU
 * rule, for the RoCE transport and the QP's path attributes.
 *
 * The GID table is this process's snapshot of the host's addresses
 * (getifaddrs, refreshed at most once a second by the queries): interfaces
 * that are up, in if_nameindex order, each one's IPv4 addresses
 * (::ffff:a.b.c.d) then its IPv6 ones, all of type RoCE v2.  An index can
 * shift when an address comes or goes: resolve a QP's sgid_index when the
 * QP is modified, not earlier.  Every call: any thread, no lock held by the
 * caller; they take the table's own leaf lock. */
#ifndef XS_ROCE_DEV_H
#define XS_ROCE_DEV_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <sys/socket.h>

/* ctx was opened on xsock_roce0 (a QP's device: qp->context). */
bool xs_ctx_is_roce(const struct ibv_context *ctx);

/* The local IP address of GID index idx of port 1 (IPv4 from
 * ::ffff:a.b.c.d; an IPv6 link-local one with its interface as scope id),
 * port 0: 0, or -EINVAL for no such entry (out of the table or empty). */
int xs_roce_gid_addr(unsigned idx, struct sockaddr_storage *ss);

/* A GID (::ffff:a.b.c.d -> AF_INET, else AF_INET6, scope 0) as an
 * address, port 0. */
void xs_roce_gid_to_addr(const union ibv_gid *gid, struct sockaddr_storage *ss);

/* The IB MTU (enum ibv_mtu) for an interface MTU, as rxe sets its port's
 * (rxe.c:rxe_set_mtu, rxe_param.h:eth_mtu_int_to_enum): the MTU less 80
 * octets of headers (RXE_MAX_HDR_LENGTH) rounded down to 256, 512, 1024,
 * 2048 or 4096; IBV_MTU_256 when less than 256 remains. */
int xs_roce_mtu_from_netdev(unsigned netdev_mtu);

#endif
