/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Zero-copy send (verbs/xs_zc.c): 1 MiB RDMA Writes (alone and corked with
 * a Send) and a 256 KiB Send; every octet arrives, and the sender's buffer
 * is overwritten as soon as each WR completes (the kernel must have let go
 * of it by then).  What the sender did is read from its connection's
 * counters (zc_writes, zc_copied in the statistics file) and the io_uring
 * instances its posting thread holds.
 *
 * Over loopback in one process, the defaults first (XSOCK_ZC=auto): a peer
 * on this host is known to get copies, so no write even tries (no ring, no
 * zero-copy write); then this program again with XSOCK_ZC=always: every
 * large write leaves with SENDMSG_ZC from one ring although the kernel
 * says it copied.
 *
 * "serve ADDR PORT" and "connect ADDR PORT" (tests/test-verbs-zc-veth.sh,
 * the two ends in two network namespaces joined by a veth pair) run the
 * same traffic with the defaults to a peer whose address is not ours: the
 * first large write tries SENDMSG_ZC, the kernel reports it copied, and
 * the connection falls back to copies for the rest (one zero-copy write,
 * one copied, one ring). */
#include "config.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/test-cm-util.h"

#define BIG (1u << 20)
#define SEND_LEN (256u << 10)
#define ROUNDS 24

struct side {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf; /* BIG for Writes, then SEND_LEN for Sends, then 4 for a tag */
};

#define BUF_LEN (BIG + SEND_LEN + 64)

/* io_uring instances open in this process */
static int rings_open(void)
{
	char path[300], link[128];
	struct dirent *d;
	DIR *dir = opendir("/proc/self/fd");
	int n = 0;

	REQUIRE(dir);
	while ((d = readdir(dir))) {
		snprintf(path, sizeof(path), "/proc/self/fd/%s", d->d_name);
		ssize_t l = readlink(path, link, sizeof(link) - 1);
		if (l > 0) {
			link[l] = 0;
			if (strstr(link, "io_uring"))
				n++;
		}
	}
	closedir(dir);
	return n;
}

static void make_qp(struct side *s, struct rdma_cm_id *id)
{
	s->id = id;
	s->cq = cm_rc_qp(id, 64, 16);
	s->buf = malloc(BUF_LEN);
	REQUIRE(s->buf);
	memset(s->buf, 0, BUF_LEN);
	s->mr = ibv_reg_mr(id->pd, s->buf, BUF_LEN,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	REQUIRE(s->mr);
}

static void free_side(struct side *s)
{
	ibv_dereg_mr(s->mr);
	rdma_destroy_qp(s->id);
	ibv_destroy_cq(s->cq);
	rdma_destroy_id(s->id);
	free(s->buf);
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 7 + seed * 13 + (i >> 12));
}

static bool same(const uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (uint8_t)(i * 7 + seed * 13 + (i >> 12)))
			return false;
	return true;
}

static void post_recv(struct side *s, uint64_t id, size_t off, size_t len)
{
	struct ibv_sge g = { .addr = (uintptr_t)s->buf + off, .length = (uint32_t)len,
			     .lkey = s->mr->lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &g, .num_sge = 1 }, *bad;

	CHECK_EQ_U(ibv_post_recv(s->id->qp, &w, &bad), 0);
}

/* Where the target's memory is (the accept's private data). */
struct target {
	uint64_t addr;
	uint32_t rkey;
};

/* Round r of the requester: a Write of BIG octets, its Send (tag r) corked
 * behind it on odd rounds, else posted once the Write completed; then the
 * peer's ack (a receive) too when acks. */
static void client_round(struct side *c, const struct target *t, unsigned r, int acks)
{
	struct ibv_sge wg = { .addr = (uintptr_t)c->buf, .length = BIG, .lkey = c->mr->lkey };
	struct ibv_sge sg = { .addr = (uintptr_t)c->buf + BIG, .length = 4, .lkey = c->mr->lkey };
	struct ibv_send_wr sw = { .wr_id = 2, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr ww = { .wr_id = 1, .sg_list = &wg, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc[4];
	int want = 2;

	ww.wr.rdma.rkey = t->rkey;
	ww.wr.rdma.remote_addr = t->addr;
	fill(c->buf, BIG, r);
	memcpy(c->buf + BIG, &r, 4);
	if (r % 2) { /* a corked chain: the Write, then its Send */
		ww.next = &sw;
		CHECK_EQ_U(ibv_post_send(c->id->qp, &ww, &bad), 0);
	} else {
		CHECK_EQ_U(ibv_post_send(c->id->qp, &ww, &bad), 0);
		CHECK_EQ_U(poll_n(c->cq, wc, 1, 5000), 1);
		CHECK(wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 1);
		memset(c->buf, 0xee, BIG); /* ours again once it completed */
		CHECK_EQ_U(ibv_post_send(c->id->qp, &sw, &bad), 0);
		want = 1;
	}
	CHECK_EQ_U(poll_n(c->cq, wc, want + acks, 5000), want + acks);
	for (int i = 0; i < want + acks; i++)
		CHECK(wc[i].status == IBV_WC_SUCCESS);
	memset(c->buf, 0xee, BIG);
}

/* Round r of the target: the Send tagged r, the Write's octets before it;
 * a receive for the next. */
static void server_round(struct side *s, unsigned r)
{
	struct ibv_wc wc;

	CHECK_EQ_U(poll_n(s->cq, &wc, 1, 5000), 1);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == 4);
	CHECK(memcmp(s->buf + BIG, &r, 4) == 0);
	if (!same(s->buf, BIG, r)) {
		fprintf(stderr, "round %u: the Write's octets differ\n", r);
		xs_test_failures++;
	}
	post_recv(s, 100 + r, BIG, SEND_LEN);
}

/* The requester's large Send, and the peer's ack when acks. */
static void client_big_send(struct side *c, int acks)
{
	struct ibv_sge sg = { .addr = (uintptr_t)c->buf + BIG, .length = SEND_LEN,
			      .lkey = c->mr->lkey };
	struct ibv_send_wr sw = { .wr_id = 3, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc[2];

	fill(c->buf + BIG, SEND_LEN, 99);
	CHECK_EQ_U(ibv_post_send(c->id->qp, &sw, &bad), 0);
	CHECK_EQ_U(poll_n(c->cq, wc, 1 + acks, 5000), 1 + acks);
	for (int i = 0; i < 1 + acks; i++)
		CHECK(wc[i].status == IBV_WC_SUCCESS);
	memset(c->buf + BIG, 0xee, SEND_LEN);
}

static void server_big_send(struct side *s)
{
	struct ibv_wc wc;

	CHECK_EQ_U(poll_n(s->cq, &wc, 1, 5000), 1);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == SEND_LEN);
	CHECK(same(s->buf + BIG, SEND_LEN, 99));
}

/* What the requester's connection did, from its counters. */
struct zc_seen {
	int rings; /* io_uring instances the posting thread added */
	uint64_t writes, copied; /* zc_writes, zc_copied; ~0: no statistics */
};

static void zc_counters(struct zc_seen *z)
{
	struct xs_stat_conn sc;

	z->writes = z->copied = ~0ull;
	if (cm_stat_slot(true, &sc)) {
		z->writes = sc.c.zc_writes;
		z->copied = sc.c.zc_copied;
	}
}

/* A new id on a new channel, resolved to addr:port. */
static struct rdma_cm_id *resolved_to(struct rdma_event_channel **ch, const char *addr,
				      uint16_t port)
{
	struct sockaddr_in dst = cm_sin(addr, port);
	struct rdma_cm_id *id;

	*ch = rdma_create_event_channel();
	REQUIRE(*ch);
	REQUIRE(rdma_create_id(*ch, &id, NULL, RDMA_PS_TCP) == 0);
	REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0);
	cm_expect_ack(*ch, RDMA_CM_EVENT_ADDR_RESOLVED, 2000, "addr resolved");
	REQUIRE(rdma_resolve_route(id, 2000) == 0);
	cm_expect_ack(*ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 2000, "route resolved");
	return id;
}

/* The target: the next request on lch accepted, its memory announced. */
static void server_accept(struct rdma_event_channel *lch, struct side *s)
{
	struct rdma_cm_event *ev = cm_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000, "request");
	struct rdma_conn_param cp;
	struct target t;

	REQUIRE(ev);
	make_qp(s, ev->id);
	rdma_ack_cm_event(ev);
	for (int i = 0; i < 8; i++)
		post_recv(s, 100 + i, BIG, SEND_LEN);
	t.addr = (uintptr_t)s->buf;
	t.rkey = s->mr->rkey;
	memset(&cp, 0, sizeof(cp));
	cp.private_data = &t;
	cp.private_data_len = sizeof(t);
	REQUIRE(rdma_accept(s->id, &cp) == 0);
	cm_expect_ack(lch, RDMA_CM_EVENT_ESTABLISHED, 3000, "server established");
}

/* The requester connected to addr:port; *t: the target's memory. */
static void client_connect(struct side *c, const char *addr, uint16_t port, struct target *t)
{
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;

	make_qp(c, resolved_to(&c->ch, addr, port));
	memset(&cp, 0, sizeof(cp));
	REQUIRE(rdma_connect(c->id, &cp) == 0);
	ev = cm_expect(c->ch, RDMA_CM_EVENT_ESTABLISHED, 10000, "client established");
	REQUIRE(ev && ev->param.conn.private_data_len >= sizeof(*t));
	memcpy(t, ev->param.conn.private_data, sizeof(*t));
	rdma_ack_cm_event(ev);
}

static void client_close(struct side *c)
{
	struct rdma_event_channel *ch = c->ch;

	CHECK(rdma_disconnect(c->id) == 0);
	cm_expect_ack(ch, RDMA_CM_EVENT_DISCONNECTED, 3000, "client disconnected");
	free_side(c);
	rdma_destroy_event_channel(ch);
}

/* Both ends in this process over loopback. */
static void traffic(struct zc_seen *z)
{
	struct rdma_event_channel *lch;
	struct rdma_cm_id *lid;
	uint16_t port = cm_listen(&lch, &lid);
	struct side c, s;
	struct target t;

	memset(&c, 0, sizeof(c));
	memset(&s, 0, sizeof(s));
	make_qp(&c, resolved_to(&c.ch, "127.0.0.1", port));
	struct rdma_conn_param cp;

	memset(&cp, 0, sizeof(cp));
	REQUIRE(rdma_connect(c.id, &cp) == 0);
	server_accept(lch, &s);
	cm_expect_ack(c.ch, RDMA_CM_EVENT_ESTABLISHED, 3000, "client established");
	t.addr = (uintptr_t)s.buf;
	t.rkey = s.mr->rkey;
	z->rings = rings_open();
	for (unsigned r = 0; r < ROUNDS; r++) {
		client_round(&c, &t, r, 0);
		server_round(&s, r);
	}
	client_big_send(&c, 0);
	server_big_send(&s);
	z->rings = rings_open() - z->rings;
	zc_counters(z);
	client_close(&c);
	cm_expect_ack(s.id->channel, RDMA_CM_EVENT_DISCONNECTED, 3000, "server disconnected");
	free_side(&s);
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(lch);
}

/* ---- the two ends in two processes (test-verbs-zc-veth.sh) -------------------- */

/* The target's ack of a round: the requester's next round may overwrite. */
static void server_ack(struct side *s)
{
	struct ibv_sge sg = { .addr = (uintptr_t)s->buf + BIG + SEND_LEN, .length = 4,
			      .lkey = s->mr->lkey };
	struct ibv_send_wr sw = { .wr_id = 9, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	CHECK_EQ_U(ibv_post_send(s->id->qp, &sw, &bad), 0);
	CHECK_EQ_U(poll_n(s->cq, &wc, 1, 5000), 1);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 9);
}

static int serve(const char *addr, uint16_t port)
{
	struct sockaddr_in a = cm_sin(addr, port);
	struct rdma_event_channel *lch = rdma_create_event_channel();
	struct rdma_cm_id *lid;
	struct side s;

	REQUIRE(lch && rdma_create_id(lch, &lid, NULL, RDMA_PS_TCP) == 0);
	REQUIRE(rdma_bind_addr(lid, (struct sockaddr *)&a) == 0);
	REQUIRE(rdma_listen(lid, 1) == 0);
	printf("listening on %s:%u\n", addr, port);
	fflush(stdout);
	memset(&s, 0, sizeof(s));
	server_accept(lch, &s);
	for (unsigned r = 0; r < ROUNDS; r++) {
		server_round(&s, r);
		server_ack(&s);
	}
	server_big_send(&s);
	server_ack(&s);
	cm_expect_ack(lch, RDMA_CM_EVENT_DISCONNECTED, 5000, "server disconnected");
	free_side(&s);
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(lch);
	return xs_test_result();
}

static int connect_to(const char *addr, uint16_t port)
{
	struct zc_seen z;
	struct side c;
	struct target t;

	memset(&c, 0, sizeof(c));
	client_connect(&c, addr, port, &t);
	z.rings = rings_open();
	for (unsigned r = 0; r < ROUNDS; r++) {
		post_recv(&c, 500 + r, BIG + SEND_LEN, 4); /* for its ack */
		client_round(&c, &t, r, 1);
	}
	post_recv(&c, 500 + ROUNDS, BIG + SEND_LEN, 4);
	client_big_send(&c, 1);
	z.rings = rings_open() - z.rings;
	zc_counters(&z);
	client_close(&c);
	printf("XSOCK_ZC=auto to %s: %d ring, %llu zero-copy write(s), %llu copied, then "
	       "copies\n", addr, z.rings, (unsigned long long)z.writes,
	       (unsigned long long)z.copied);
	if (z.rings == 1 && z.writes == 0) {
		printf("SKIP: the kernel refused SENDMSG_ZC\n");
		return XS_TEST_SKIP;
	}
	/* tried at once (a peer not on lo), the kernel said it copied, and
	 * not one of the later large writes tried again */
	CHECK_EQ_U(z.rings, 1);
	CHECK_EQ_U(z.writes, 1);
	CHECK_EQ_U(z.copied, 1);
	return xs_test_result();
}

int main(int argc, char **argv)
{
	static const char *const always[] = { "XSOCK_ZC", "always", NULL };
	int mode = xs_test_mode(argc, argv), rc;
	struct zc_seen z;

	if (argc == 4 && strcmp(argv[1], "serve") == 0)
		return serve(argv[2], (uint16_t)atoi(argv[3]));
	if (argc == 4 && strcmp(argv[1], "connect") == 0)
		return connect_to(argv[2], (uint16_t)atoi(argv[3]));
	if (mode == 0) { /* the defaults: a peer on this host gets copies */
		unsetenv("XSOCK_ZC");
		unsetenv("XSOCK_ZC_MIN");
	}
	traffic(&z);
	printf("XSOCK_ZC=%s over loopback: %d ring, %llu zero-copy write(s), %llu copied\n",
	       mode ? "always" : "auto", z.rings, (unsigned long long)z.writes,
	       (unsigned long long)z.copied);
	if (mode == 0) {
		CHECK_EQ_U(z.rings, 0);
		CHECK(z.writes == 0 || z.writes == ~0ull);
	} else {
		/* each of the 24 Writes (one corked with its Send) and the Send */
		CHECK_EQ_U(z.rings, 1);
		CHECK(z.writes == ROUNDS + 1 || z.writes == ~0ull);
	}
	rc = xs_test_result();
	if (mode == 0)
		rc = xs_test_both(rc, xs_test_rerun(argv[0], 1, always));
	return rc;
}
