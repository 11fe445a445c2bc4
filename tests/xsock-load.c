/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Load through the verbs/CM API (scripts/load.sh; not a `make check` test).
 *
 *   xsock-load server PORT
 *   xsock-load client PORT CONNS SECONDS
 *
 * The server accepts every connection (its own QP per connection, one
 * shared PD, MR and CQ pair) and echoes each Send it receives.  The client
 * opens CONNS connections (at most 64 handshakes in flight, no echo
 * until all are up), then each connection keeps one 16-octet message (connection index, sequence
 * number) going back and forth until SECONDS have passed; every echo is
 * compared.  One thread each, sleeping on the completion channel and the
 * CM channel.  Both print their RSS with no connection and with all of
 * them; the client prints "load: ..." with the counts and exits 0 only if
 * every connection was established and no error happened.  The server
 * prints a line per change of its connection count and runs until killed. */
#include "config.h"

#include <stdlib.h>

#include "tests/test-verbs-util.h"

#define MSG 16
#define SLOT 64 /* octets per connection: receive MSG at 0, send MSG at 32 */
#define INFLIGHT 64
#define MAXCONN 20000

struct lconn {
	struct rdma_cm_id *id;
	unsigned idx;
	bool up, gone;
	uint64_t seq; /* client: the message in flight */
};

struct load {
	bool server;
	struct rdma_event_channel *ch;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *scq, *rcq;
	uint8_t *mem;
	struct ibv_mr *mr;
	struct lconn *c;
	unsigned n, up, handshaking, next, errors, disconnected;
	bool closing; /* the client's own teardown: events expected */
	bool echoing; /* the client's echoes start once every connection is up,
		       * so that they do not slow the handshakes still running */
	uint64_t echoes;
};

static void setup(struct load *L, struct ibv_context *ctx, unsigned maxconn)
{
	L->ctx = ctx;
	L->pd = ibv_alloc_pd(ctx);
	L->cc = ibv_create_comp_channel(ctx);
	REQUIRE(L->pd && L->cc);
	int cqe = (int)(maxconn * 2 + 64);
	if (cqe > 65536) /* the device's max_cqe */
		cqe = 65536;
	L->scq = ibv_create_cq(ctx, cqe, NULL, L->cc, 0);
	L->rcq = ibv_create_cq(ctx, cqe, NULL, L->cc, 0);
	REQUIRE(L->scq && L->rcq);
	REQUIRE(ibv_req_notify_cq(L->scq, 0) == 0 && ibv_req_notify_cq(L->rcq, 0) == 0);
	REQUIRE(fcntl(L->cc->fd, F_SETFL, fcntl(L->cc->fd, F_GETFL) | O_NONBLOCK) == 0);
	L->mem = calloc(maxconn, SLOT);
	REQUIRE(L->mem);
	L->mr = ibv_reg_mr(L->pd, L->mem, (size_t)maxconn * SLOT, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(L->mr);
}

static int make_conn_qp(struct load *L, struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.send_cq = L->scq;
	a.recv_cq = L->rcq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = 2;
	a.cap.max_recv_wr = 2;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	return rdma_create_qp(id, L->pd, &a);
}

static int post_recv(struct load *L, struct lconn *c)
{
	struct ibv_sge sg = { .addr = (uintptr_t)(L->mem + (size_t)c->idx * SLOT), .length = MSG,
			      .lkey = L->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = c->idx, .sg_list = &sg, .num_sge = 1 }, *bad;

	return ibv_post_recv(c->id->qp, &wr, &bad);
}

static int post_send(struct load *L, struct lconn *c, const uint8_t *msg)
{
	uint8_t *p = L->mem + (size_t)c->idx * SLOT + 32;
	struct ibv_sge sg = { .addr = (uintptr_t)p, .length = MSG, .lkey = L->mr->lkey };
	struct ibv_send_wr wr, *bad;

	memcpy(p, msg, MSG);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = c->idx;
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	return ibv_post_send(c->id->qp, &wr, &bad);
}

static void client_send_next(struct load *L, struct lconn *c)
{
	uint8_t m[MSG];
	uint64_t idx = c->idx;

	c->seq++;
	memcpy(m, &idx, 8);
	memcpy(m + 8, &c->seq, 8);
	if (post_send(L, c, m)) {
		fprintf(stderr, "load: post_send on %u failed\n", c->idx);
		L->errors++;
	}
}

static void load_err(struct load *L, const char *what, unsigned idx)
{
	if (L->closing)
		return;
	if (L->errors++ < 10)
		fprintf(stderr, "load: %s (connection %u)\n", what, idx);
}

/* ---- CM events ------------------------------------------------------------------ */

static void client_start_more(struct load *L, uint16_t port)
{
	struct sockaddr_in dst = cm_sin("127.0.0.1", port);

	while (L->next < L->n && L->handshaking < INFLIGHT) {
		struct lconn *c = &L->c[L->next];

		c->idx = L->next++;
		if (rdma_create_id(L->ch, &c->id, c, RDMA_PS_TCP) ||
		    rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&dst, 5000)) {
			load_err(L, "rdma_create_id/resolve_addr failed", c->idx);
			c->gone = true;
			continue;
		}
		L->handshaking++;
	}
}

static void cm_event(struct load *L, struct rdma_cm_event *ev)
{
	struct rdma_conn_param cp;
	struct lconn *c = ev->id->context;

	memset(&cp, 0, sizeof(cp));
	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST: {
		if (L->next >= L->n) {
			rdma_reject(ev->id, NULL, 0);
			load_err(L, "more connections than room", L->next);
			break;
		}
		c = &L->c[L->next];
		c->idx = L->next++;
		c->id = ev->id;
		ev->id->context = c;
		if (!L->ctx)
			setup(L, ev->id->verbs, L->n);
		if (make_conn_qp(L, ev->id) || post_recv(L, c) || post_recv(L, c) ||
		    rdma_accept(ev->id, &cp)) {
			char m[80];
			snprintf(m, sizeof(m), "accept failed: %s", strerror(errno));
			load_err(L, m, c->idx);
			c->gone = true;
		}
		break;
	}
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(ev->id, 5000))
			load_err(L, "resolve_route failed", c->idx);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (!L->ctx)
			setup(L, ev->id->verbs, L->n);
		if (make_conn_qp(L, ev->id) || post_recv(L, c) || rdma_connect(ev->id, &cp)) {
			char m[80];
			snprintf(m, sizeof(m), "connect failed: %s", strerror(errno));
			load_err(L, m, c->idx);
			c->gone = true;
			L->handshaking--;
		}
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		c->up = true;
		L->up++;
		if (!L->server) {
			L->handshaking--;
			if (L->echoing)
				client_send_next(L, c);
		}
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		L->disconnected++;
		if (c && c->up && !c->gone) {
			c->gone = true;
			L->up--;
		}
		if (!L->server)
			load_err(L, "DISCONNECTED", c ? c->idx : 0);
		break;
	default:
		if (!L->server && c && !c->up)
			L->handshaking--;
		load_err(L, rdma_event_str(ev->event), c ? c->idx : 0);
		if (c)
			c->gone = true;
		break;
	}
}

static void drain_cm(struct load *L)
{
	struct rdma_cm_event *ev;

	while (rdma_get_cm_event(L->ch, &ev) == 0) {
		cm_event(L, ev);
		rdma_ack_cm_event(ev);
	}
}

/* ---- completions --------------------------------------------------------------- */

static void drain_cq(struct load *L, bool more)
{
	struct ibv_wc wc[64];
	int n;

	while ((n = ibv_poll_cq(L->rcq, 64, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			struct lconn *c = &L->c[wc[i].wr_id];
			const uint8_t *m = L->mem + (size_t)c->idx * SLOT;

			if (wc[i].status != IBV_WC_SUCCESS) {
				/* a server's receives flush when its client leaves */
				if (!c->gone && !(L->server && wc[i].status == IBV_WC_WR_FLUSH_ERR))
					load_err(L, ibv_wc_status_str(wc[i].status), c->idx);
				continue;
			}
			if (L->server) {
				uint8_t copy[MSG];
				memcpy(copy, m, MSG);
				if (post_recv(L, c) || post_send(L, c, copy))
					load_err(L, "echo failed", c->idx);
				L->echoes++;
				continue;
			}
			uint64_t idx, seq;
			memcpy(&idx, m, 8);
			memcpy(&seq, m + 8, 8);
			if (wc[i].byte_len != MSG || idx != c->idx || seq != c->seq)
				load_err(L, "echo differs", c->idx);
			L->echoes++;
			if (post_recv(L, c))
				load_err(L, "post_recv failed", c->idx);
			if (more)
				client_send_next(L, c);
		}
	}
	while ((n = ibv_poll_cq(L->scq, 64, wc)) > 0)
		for (int i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS && !L->c[wc[i].wr_id].gone)
				load_err(L, ibv_wc_status_str(wc[i].status), (unsigned)wc[i].wr_id);
}

static void wait_any(struct load *L, int ms)
{
	struct pollfd p[2] = { { .fd = L->ch->fd, .events = POLLIN },
			       { .fd = L->cc ? L->cc->fd : -1, .events = POLLIN } };

	poll(p, 2, ms);
	if (L->cc && (p[1].revents & POLLIN)) {
		struct ibv_cq *cq;
		void *ctx;

		while (ibv_get_cq_event(L->cc, &cq, &ctx) == 0) {
			ibv_ack_cq_events(cq, 1);
			ibv_req_notify_cq(cq, 0);
		}
	}
}

int main(int argc, char **argv)
{
	struct load L;

	memset(&L, 0, sizeof(L));
	signal(SIGPIPE, SIG_IGN);
	if (argc < 3 || (strcmp(argv[1], "server") && (strcmp(argv[1], "client") || argc < 5))) {
		fprintf(stderr, "usage: xsock-load server PORT | client PORT CONNS SECONDS\n");
		return 2;
	}
	uint16_t port = (uint16_t)atoi(argv[2]);
	L.ch = rdma_create_event_channel();
	REQUIRE(L.ch);
	REQUIRE(fcntl(L.ch->fd, F_SETFL, fcntl(L.ch->fd, F_GETFL) | O_NONBLOCK) == 0);
	long rss0 = tv_rss_kib();

	if (strcmp(argv[1], "server") == 0) {
		struct rdma_cm_id *lid_;
		struct sockaddr_in a = cm_sin("127.0.0.1", port);

		L.server = true;
		L.n = MAXCONN;
		L.c = calloc(L.n, sizeof(*L.c));
		REQUIRE(L.c);
		REQUIRE(rdma_create_id(L.ch, &lid_, NULL, RDMA_PS_TCP) == 0);
		REQUIRE(rdma_bind_addr(lid_, (struct sockaddr *)&a) == 0);
		REQUIRE(rdma_listen(lid_, 1024) == 0);
		printf("server: listening on %u, RSS %ld KiB\n", port, rss0);
		fflush(stdout);
		unsigned last = 0;
		long rss_base = tv_rss_kib();
		for (;;) {
			wait_any(&L, 1000);
			drain_cm(&L);
			drain_cq(&L, true);
			if (L.up != last) {
				long r = tv_rss_kib();
				printf("server: %u connections, RSS %ld KiB (%+.1f KiB per connection), "
				       "%llu echoes, %u errors\n",
				       L.up, r, L.up ? (double)(r - rss_base) / L.up : 0.0,
				       (unsigned long long)L.echoes, L.errors);
				fflush(stdout);
				last = L.up;
			}
		}
	}

	L.n = (unsigned)atoi(argv[3]);
	int secs = atoi(argv[4]);
	REQUIRE(L.n > 0 && L.n <= MAXCONN && secs > 0);
	L.c = calloc(L.n, sizeof(*L.c));
	REQUIRE(L.c);
	double t0 = cm_now_ms(), tup = 0;
	/* connect: all of them, 60 s at most */
	while (cm_now_ms() - t0 < 60000) {
		client_start_more(&L, port);
		wait_any(&L, 100);
		drain_cm(&L);
		drain_cq(&L, true);
		if (L.up == L.n || (L.next == L.n && L.handshaking == 0))
			break;
	}
	tup = cm_now_ms();
	long rss1 = tv_rss_kib();
	unsigned reached = L.up;
	printf("client: %u of %u connections up in %.1f s; RSS %ld -> %ld KiB (%.1f KiB per "
	       "connection)\n",
	       reached, L.n, (tup - t0) / 1e3, rss0, rss1,
	       reached ? (double)(rss1 - rss0) / reached : 0.0);
	fflush(stdout);
	/* echo for secs: every connection's first message */
	L.echoing = true;
	for (unsigned i = 0; i < L.next; i++)
		if (L.c[i].up && !L.c[i].gone)
			client_send_next(&L, &L.c[i]);
	uint64_t e0 = L.echoes;
	while (cm_now_ms() - tup < secs * 1000.0) {
		wait_any(&L, 100);
		drain_cm(&L);
		drain_cq(&L, true);
	}
	double el = (cm_now_ms() - tup) / 1e3;
	uint64_t echoes = L.echoes - e0;
	/* let the messages in flight come back, then disconnect everything */
	double td = cm_now_ms();
	while (cm_now_ms() - td < 2000) {
		wait_any(&L, 50);
		drain_cm(&L);
		drain_cq(&L, false);
	}
	long rss2 = tv_rss_kib();
	unsigned errors = L.errors;
	L.closing = true;
	printf("load: %u connections, %.0f s, %llu echoes (%.0f/s), %u errors, %u disconnected "
	       "early; client RSS %ld KiB at the end\n",
	       reached, el, (unsigned long long)echoes, (double)echoes / el, errors,
	       L.disconnected, rss2);
	for (unsigned i = 0; i < L.next; i++) {
		if (!L.c[i].id)
			continue;
		if (L.c[i].up)
			rdma_disconnect(L.c[i].id);
		if (L.c[i].id->qp)
			rdma_destroy_qp(L.c[i].id);
	}
	drain_cm(&L);
	for (unsigned i = 0; i < L.next; i++)
		if (L.c[i].id)
			rdma_destroy_id(L.c[i].id);
	if (L.mr) {
		ibv_dereg_mr(L.mr);
		ibv_destroy_cq(L.scq);
		ibv_destroy_cq(L.rcq);
		ibv_destroy_comp_channel(L.cc);
		ibv_dealloc_pd(L.pd);
	}
	free(L.mem);
	free(L.c);
	rdma_destroy_event_channel(L.ch);
	return reached == L.n && errors == 0 ? 0 : 1;
}
