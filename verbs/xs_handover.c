/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Exec hand-over for libxsock (xsock(7) EXEC; verbs/xs_priv_abi.h).
 *
 * A connection crosses execve(2) as its TCP socket (a duplicate without
 * close-on-exec) and the few numbers of its stream at an FPDU boundary:
 * the agreed MPA options, the MPA stream positions (Markers) and the next
 * MSN of each untagged queue both ways.  The old process stops the stream
 * at that boundary (xs_conn_export) and never touches it again; the new
 * one builds a connection on the socket (xs_conn_adopt), an id for it
 * (xs_cm_adopt) and, once libxsock made the QP and registered its ring
 * under the STags the peer holds, starts it (xs_cm_adopt_start).  The
 * wire octets are only ever read by the same libiwarp that wrote them. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "verbs/xs_internal.h"
#include "verbs/xs_priv_abi.h"
#include "util/xs_errno.h"

_Static_assert(sizeof(struct xs_conn_wire) <= XSOCK_WIRE_LEN, "the wire state fits");

XS_EXPORT int xsock_priv_export(struct rdma_cm_id *id, uint8_t wire[XSOCK_WIRE_LEN], int timeout_ms)
{
	struct xs_conn *c = id ? xs_cm_conn(id) : NULL;
	struct xs_conn_wire w;
	int fd;

	if (!c || !wire)
		return -EINVAL;
	fd = xs_conn_export(c, &w, timeout_ms);
	if (fd < 0) {
		xs_log("exec hand-over: connection not handed over: %s", xs_strerror(-fd));
		return fd;
	}
	memset(wire, 0, XSOCK_WIRE_LEN);
	memcpy(wire, &w, sizeof(w));
	return fd;
}

XS_EXPORT void xsock_priv_export_undo(struct rdma_cm_id *id)
{
	struct xs_conn *c = id ? xs_cm_conn(id) : NULL;

	if (c)
		xs_conn_export_undo(c);
}

XS_EXPORT struct rdma_cm_id *xsock_priv_adopt(struct rdma_event_channel *ch, void *context, int fd,
					      const uint8_t wire[XSOCK_WIRE_LEN])
{
	struct xs_conn_wire w;
	struct xs_conn *c;
	struct rdma_cm_id *id;

	if (fd < 0 || !wire) {
		errno = EINVAL;
		return NULL;
	}
	memcpy(&w, wire, sizeof(w));
	c = xs_conn_adopt(fd, &w);
	if (!c)
		return NULL;
	id = xs_cm_adopt(ch, context, c);
	if (!id)
		xs_conn_put(c);
	return id;
}

XS_EXPORT int xsock_priv_adopt_start(struct rdma_cm_id *id)
{
	if (!id)
		return -EINVAL;
	return xs_cm_adopt_start(id);
}

XS_EXPORT struct ibv_mr *xsock_priv_reg_mr_stag(struct ibv_pd *pd, void *addr, size_t length,
						uint64_t iova, int access, uint32_t stag)
{
	return xs_mr_reg_stag(pd, addr, length, iova, (unsigned)access, stag);
}
