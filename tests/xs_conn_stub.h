/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Fake engine for tests/test-verbs-objects (see xs_conn_stub.c). */
#ifndef XS_CONN_STUB_H
#define XS_CONN_STUB_H

#include <pthread.h>

#include "verbs/xs_internal.h"

struct xs_conn {
	const struct xs_conn_ops *ops;
	void *qp;
	struct ddp_rx rx;
	pthread_mutex_t rx_lock;
	uint32_t msn[3];
	int fail_attach, fail_tx;
	/* what the QP sent */
	int nsend, ntagged, nreadreq, nterm, nreadresp, disconnected, puts;
	int holds; /* CQ references (xs_conn_hold - xs_conn_release) */
	/* corked chains: xs_conn_cork calls, flushes that carried messages,
	 * messages gathered since the last flush; fail_flush fails a flush */
	int ncork, nflush, gathered, fail_flush;
	bool corked;
	enum rdmap_opcode last_op;
	uint32_t last_inv, last_stag;
	uint64_t last_to;
	uint8_t data[4096];
	size_t len;
	struct rdmap_read_req last_rr;
	struct rdmap_term last_term;
	uint32_t resp_sink, resp_len;
	uint64_t resp_to;
	const uint8_t *resp_src;
};

/* One whole untagged message from the peer: place (real DDP code) and
 * deliver.  Returns ddp_rx_place's result. */
int stub_untagged(struct xs_conn *c, enum rdmap_opcode op, uint32_t qn, uint32_t inv,
		  const void *payload, uint32_t len, struct xs_err *err);
/* One whole tagged message (Write or Read Response): resolve, copy, last. */
int stub_tagged(struct xs_conn *c, enum rdmap_opcode op, uint32_t stag, uint64_t to,
		const void *payload, uint32_t len, struct xs_err *err);
void stub_fail(struct xs_conn *c, bool local, const struct xs_err *err);

#endif
