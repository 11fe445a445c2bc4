/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The iWARP transport (xs_transport.h): the ops table over the engine's
 * xs_conn_* calls (xs_internal.h names the engine file of each).  Where
 * the verbs-level types differ from RDMAP's, the conversion is here:
 * Send/Write flags to RDMAP opcodes, immediate data to RFC 7306 Immediate
 * Data messages (xsock's layout, iwarp/rdmap_ext_wire.h), Read and Atomic
 * requests to their RDMAP headers, an MPA agreement to the QP's
 * parameters.  Each wrapper makes one or two direct calls into the
 * engine; the others are the engine's own functions.  Threads and locks:
 * those of the xs_conn_* call. */
#include "config.h"

#include <string.h>

#include "iwarp/rdmap_ext.h"
#include "verbs/xs_transport.h"

_Static_assert(XS_TP_ATOMIC_SIZE == RDMAP_ATOMIC_SIZE, "verbs atomics are RFC 7306's");

static int tp_attach(struct xs_conn *c, const struct xs_conn_ops *up, void *qp,
		     const struct xs_tp_queues *q)
{
	return xs_conn_attach(c, up, qp, q->recv, q->read_req, q->term, q->atomic_resp);
}

void xs_tp_iwarp_params(const struct mpa_agreed *a, struct xs_tp_params *p)
{
	memset(p, 0, sizeof(*p));
	p->ird = a->ird;
	p->ord = a->ord;
	p->ext = a->rdmap_ext;
	p->req_buf_len = xs_ird_buf_len(a);
}

static void tp_params(const struct xs_conn *c, struct xs_tp_params *p)
{
	xs_tp_iwarp_params(xs_conn_agreed(c), p);
}

/* The Immediate Data message of a WR with imm (8 octets: xsock's layout
 * in iwarp/rdmap_ext_wire.h). */
static int send_imm(struct xs_conn *c, uint32_t imm, bool attached, bool se)
{
	uint8_t body[RDMAP_IMM_LEN] = { 0 };
	struct iovec iov = { body, sizeof(body) };

	memcpy(body, &imm, sizeof(imm)); /* already network order */
	if (attached)
		body[RDMAP_IMM_XS_FLAGS] = RDMAP_IMM_XS_ATTACHED;
	return xs_conn_send(c, se ? RDMAP_OP_IMM_DATA_SE : RDMAP_OP_IMM_DATA, 0, &iov, 1);
}

static int tp_send(struct xs_conn *c, unsigned flags, uint32_t inv_stag, uint32_t imm,
		   const struct iovec *iov, int cnt)
{
	bool se = flags & XS_TP_SE;

	if (flags & XS_TP_INV)
		return xs_conn_send(c, se ? RDMAP_OP_SEND_SE_INV : RDMAP_OP_SEND_INV, inv_stag, iov,
				    cnt);
	if (flags & XS_TP_IMM) {
		/* the Immediate Data right before its Send (the caller holds
		 * sq_lock: no other message of ours on QN 0 comes between) */
		int rc = send_imm(c, imm, true, false);

		if (rc)
			return rc;
	}
	return xs_conn_send(c, se ? RDMAP_OP_SEND_SE : RDMAP_OP_SEND, 0, iov, cnt);
}

static int tp_write(struct xs_conn *c, unsigned flags, uint32_t stag, uint64_t to, uint32_t imm,
		    const struct iovec *iov, int cnt)
{
	int rc = xs_conn_tagged(c, RDMAP_OP_WRITE, stag, to, iov, cnt);

	/* the Write, then the Immediate Data that completes a receive (it
	 * arrives after every octet of the Write: TCP order) */
	if (rc == 0 && (flags & XS_TP_IMM))
		rc = send_imm(c, imm, false, flags & XS_TP_SE);
	return rc;
}

static int tp_read_req(struct xs_conn *c, const struct xs_tp_read *r)
{
	struct rdmap_read_req rr = {
		.sink_stag = r->sink_stag,
		.sink_to = r->sink_to,
		.size = r->len,
		.src_stag = r->src_stag,
		.src_to = r->src_to,
	};

	return xs_conn_read_req(c, &rr);
}

static int tp_atomic_req(struct xs_conn *c, const struct xs_tp_atomic *a)
{
	struct rdmap_atomic_req ar = { .stag = a->stag, .to = a->to, .req_id = a->req_id };

	if (a->cmp_swap) {
		/* masks all ones: the whole word compares and takes swap */
		ar.op = RDMAP_ATOMIC_CMP_SWAP;
		ar.compare = a->compare_add;
		ar.compare_mask = UINT64_MAX;
		ar.add_swap = a->swap;
		ar.add_swap_mask = UINT64_MAX;
	} else {
		ar.op = RDMAP_ATOMIC_FETCH_ADD; /* Add Mask 0: a plain 64-bit add */
		ar.add_swap = a->compare_add;
	}
	return xs_conn_atomic_req(c, &ar);
}

const struct xs_transport_ops xs_tp_iwarp = {
	.name = "iwarp",
	.attach = tp_attach,
	.params = tp_params,
	.send = tp_send,
	.write = tp_write,
	.read_req = tp_read_req,
	.atomic_req = tp_atomic_req,
	.cork = xs_conn_cork,
	.cork_flush = xs_conn_cork_flush,
	.uncork = xs_conn_uncork,
	.terminate = xs_conn_terminate,
	.read_resp = xs_conn_read_resp,
	.atomic_resp = xs_conn_atomic_resp,
	.rx_lock = xs_conn_rx_lock,
	.rx_unlock = xs_conn_rx_unlock,
	.rx_kick = xs_conn_rx_kick,
	.poll = xs_conn_poll,
	.hold = xs_conn_hold,
	.release = xs_conn_release,
	.disconnect = xs_conn_disconnect,
	.put = xs_conn_put,
	.listen = xs_listen,
	.listener_addr = xs_listener_addr,
	.listener_close = xs_listener_close,
	.connect = xs_connect,
	.accept = xs_conn_accept,
	.reject = xs_conn_reject,
	.agreed = xs_conn_agreed,
	.addrs = xs_conn_addrs,
	.set_closed_cb = xs_conn_set_closed_cb,
};
