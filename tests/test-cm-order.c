/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Connection requests come to a listener in the order of the peer's
 * rdma_connect calls.  perftest -R -q N (ib_send_bw and the others) counts
 * them: the client's k-th connected QP is the k-th, and the server's QP for
 * its k-th RDMA_CM_EVENT_CONNECT_REQUEST is its peer (siw and the RNICs send
 * the MPA Request inside rdma_connect, so the wire keeps that order).  The
 * engine once ran its command queue last-in first-out: connections whose
 * rdma_connect came before the engine thread ran sent their MPA Requests in
 * reverse, QPs were paired crosswise and ib_send_bw -R -q 4 waited for ever
 * for credits that the server wrote to another QP's slot.
 *
 * In one process over loopback: ROUNDS times, NCONN ids on one channel (as
 * perftest has them) connect one right after the other, each with its index
 * as private data; the listener must see the indexes in order.  Then once
 * with the listener listening only after the first connect was refused
 * (perftest -R's client may connect before the server listens): the stack
 * dials that one again some ms later, and the others' Requests wait for
 * its. */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/test-cm-util.h"

#define NCONN 8
#define ROUNDS 40

struct client {
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
};

static void make_qp(struct client *c)
{
	c->cq = cm_rc_qp(c->id, 4, 2);
}

/* The next event on ch of the given type (for any id). */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch,
					enum rdma_cm_event_type type, const char *what)
{
	return cm_expect(ch, type, 3000, what);
}

/* One round; false when the listener saw another order. */
static bool round_in_order(struct rdma_event_channel *lch, uint16_t port, int round,
			   struct rdma_cm_id *late_lid)
{
	struct sockaddr_in dst = cm_sin("127.0.0.1", port);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct client cl[NCONN];
	struct rdma_cm_id *req[NCONN];
	uint8_t pd[NCONN];
	int seen[NCONN];
	bool ok = true;
	int i;

	REQUIRE(ch);
	memset(cl, 0, sizeof(cl));
	for (i = 0; i < NCONN; i++) {
		REQUIRE(rdma_create_id(ch, &cl[i].id, &cl[i], RDMA_PS_TCP) == 0);
		REQUIRE(rdma_resolve_addr(cl[i].id, NULL, (struct sockaddr *)&dst, 2000) == 0);
	}
	for (i = 0; i < NCONN; i++) {
		struct rdma_cm_event *ev = next_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED, "addr");
		REQUIRE(ev);
		REQUIRE(rdma_resolve_route(ev->id, 2000) == 0);
		rdma_ack_cm_event(ev);
	}
	for (i = 0; i < NCONN; i++) {
		struct rdma_cm_event *ev = next_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, "route");
		REQUIRE(ev);
		rdma_ack_cm_event(ev);
		make_qp(&cl[i]);
	}
	/* back to back, as perftest's route handler does them */
	for (i = 0; i < NCONN; i++) {
		struct rdma_conn_param p;

		if (i == 1 && late_lid) /* the first was refused: dialled again */
			REQUIRE(rdma_listen(late_lid, 16) == 0);

		memset(&p, 0, sizeof(p));
		pd[i] = (uint8_t)i;
		p.private_data = &pd[i];
		p.private_data_len = 1;
		REQUIRE(rdma_connect(cl[i].id, &p) == 0);
	}
	for (i = 0; i < NCONN; i++) {
		struct rdma_cm_event *ev = next_event(lch, RDMA_CM_EVENT_CONNECT_REQUEST, "request");
		REQUIRE(ev);
		REQUIRE(ev->param.conn.private_data_len >= 1);
		seen[i] = ((const uint8_t *)ev->param.conn.private_data)[0];
		req[i] = ev->id;
		rdma_ack_cm_event(ev);
		if (seen[i] != i)
			ok = false;
	}
	if (!ok) {
		fprintf(stderr, "round %d: requests came in the order", round);
		for (i = 0; i < NCONN; i++)
			fprintf(stderr, " %d", seen[i]);
		fprintf(stderr, "\n");
	}
	for (i = 0; i < NCONN; i++) {
		CHECK(rdma_reject(req[i], NULL, 0) == 0);
		CHECK(rdma_destroy_id(req[i]) == 0);
	}
	for (i = 0; i < NCONN; i++) {
		struct rdma_cm_event *ev = next_event(ch, RDMA_CM_EVENT_REJECTED, "rejected");
		if (ev)
			rdma_ack_cm_event(ev);
	}
	for (i = 0; i < NCONN; i++) {
		rdma_destroy_qp(cl[i].id);
		ibv_destroy_cq(cl[i].cq);
		rdma_destroy_id(cl[i].id);
	}
	rdma_destroy_event_channel(ch);
	return ok;
}

int main(void)
{
	struct rdma_event_channel *lch;
	struct rdma_cm_id *lid;
	uint16_t port = cm_listen(&lch, &lid);
	int bad = 0, r;

	for (r = 0; r < ROUNDS; r++)
		if (!round_in_order(lch, port, r, NULL))
			bad++;
	if (bad) {
		fprintf(stderr, "%d of %d rounds: CONNECT_REQUESTs out of rdma_connect order\n",
			bad, ROUNDS);
		xs_test_failures++;
	}
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(lch);

	/* bound, not listening: the first connect is refused */
	struct sockaddr_in a = cm_sin("127.0.0.1", 0);
	lch = rdma_create_event_channel();
	REQUIRE(lch);
	REQUIRE(rdma_create_id(lch, &lid, NULL, RDMA_PS_TCP) == 0);
	REQUIRE(rdma_bind_addr(lid, (struct sockaddr *)&a) == 0);
	port = ntohs(rdma_get_src_port(lid));
	REQUIRE(port != 0);
	if (!round_in_order(lch, port, ROUNDS, lid)) {
		fprintf(stderr, "listener late: CONNECT_REQUESTs out of rdma_connect order\n");
		xs_test_failures++;
	}
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(lch);
	return xs_test_result();
}
