/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Zero-copy send (verbs/xs_zc.c) over loopback in one process.
 *
 * With XSOCK_ZC=always, 1 MiB RDMA Writes (alone and corked with a Send)
 * and a 256 KiB Send leave with SENDMSG_ZC from the posting thread's own
 * ring: every octet arrives, the sender's buffer is overwritten as soon as
 * each WR completes (the kernel must have let go of it by then), and the
 * posting thread holds one more io_uring than before.  In a child with the
 * defaults, the same traffic to a peer on this host never makes that ring
 * (the kernel would copy anyway). */
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

/* The traffic; returns how many io_uring instances the posting (this)
 * thread added. */
static int traffic(void)
{
	struct rdma_event_channel *lch;
	struct rdma_cm_id *lid;
	uint16_t port = cm_listen(&lch, &lid);
	struct rdma_cm_event *ev;
	struct side c, s;
	struct ibv_wc wc[4];
	int before, after;

	memset(&c, 0, sizeof(c));
	memset(&s, 0, sizeof(s));
	make_qp(&c, cm_resolved_id(&c.ch, &c, port));
	struct rdma_conn_param cp;

	memset(&cp, 0, sizeof(cp));
	REQUIRE(rdma_connect(c.id, &cp) == 0);
	ev = cm_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 3000, "request");
	REQUIRE(ev);
	make_qp(&s, ev->id);
	rdma_ack_cm_event(ev);
	for (int i = 0; i < 8; i++)
		post_recv(&s, 100 + i, BIG, SEND_LEN);
	REQUIRE(rdma_accept(s.id, &cp) == 0);
	cm_expect_ack(s.id->channel, RDMA_CM_EVENT_ESTABLISHED, 3000, "server established");
	cm_expect_ack(c.ch, RDMA_CM_EVENT_ESTABLISHED, 3000, "client established");
	before = rings_open();

	for (unsigned r = 0; r < ROUNDS; r++) {
		struct ibv_sge wg = { .addr = (uintptr_t)c.buf, .length = BIG, .lkey = c.mr->lkey };
		struct ibv_sge sg = { .addr = (uintptr_t)c.buf + BIG, .length = 4,
				      .lkey = c.mr->lkey };
		struct ibv_send_wr sw = { .wr_id = 2, .sg_list = &sg, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
		struct ibv_send_wr ww = { .wr_id = 1, .sg_list = &wg, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;
		int want = 2;

		ww.wr.rdma.rkey = s.mr->rkey;
		ww.wr.rdma.remote_addr = (uintptr_t)s.buf;
		fill(c.buf, BIG, r);
		memcpy(c.buf + BIG, &r, 4);
		if (r % 2) { /* a corked chain: the Write, then its Send */
			ww.next = &sw;
			CHECK_EQ_U(ibv_post_send(c.id->qp, &ww, &bad), 0);
		} else {
			CHECK_EQ_U(ibv_post_send(c.id->qp, &ww, &bad), 0);
			CHECK_EQ_U(poll_n(c.cq, wc, 1, 5000), 1);
			CHECK(wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 1);
			memset(c.buf, 0xee, BIG); /* ours again once it completed */
			CHECK_EQ_U(ibv_post_send(c.id->qp, &sw, &bad), 0);
			want = 1;
		}
		CHECK_EQ_U(poll_n(c.cq, wc, want, 5000), want);
		for (int i = 0; i < want; i++)
			CHECK(wc[i].status == IBV_WC_SUCCESS);
		memset(c.buf, 0xee, BIG);
		CHECK_EQ_U(poll_n(s.cq, wc, 1, 5000), 1);
		CHECK(wc[0].status == IBV_WC_SUCCESS && wc[0].byte_len == 4);
		CHECK(memcmp(s.buf + BIG, &r, 4) == 0);
		if (!same(s.buf, BIG, r)) {
			fprintf(stderr, "round %u: the Write's octets differ\n", r);
			xs_test_failures++;
		}
		post_recv(&s, 100 + r, BIG, SEND_LEN);
	}

	/* a large Send */
	{
		struct ibv_sge sg = { .addr = (uintptr_t)c.buf + BIG, .length = SEND_LEN,
				      .lkey = c.mr->lkey };
		struct ibv_send_wr sw = { .wr_id = 3, .sg_list = &sg, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		fill(c.buf + BIG, SEND_LEN, 99);
		CHECK_EQ_U(ibv_post_send(c.id->qp, &sw, &bad), 0);
		CHECK_EQ_U(poll_n(c.cq, wc, 1, 5000), 1);
		CHECK(wc[0].status == IBV_WC_SUCCESS);
		memset(c.buf + BIG, 0xee, SEND_LEN);
		CHECK_EQ_U(poll_n(s.cq, wc, 1, 5000), 1);
		CHECK(wc[0].status == IBV_WC_SUCCESS && wc[0].byte_len == SEND_LEN);
		CHECK(same(s.buf + BIG, SEND_LEN, 99));
	}
	after = rings_open();

	CHECK(rdma_disconnect(c.id) == 0);
	cm_expect_ack(c.ch, RDMA_CM_EVENT_DISCONNECTED, 3000, "client disconnected");
	cm_expect_ack(s.id->channel, RDMA_CM_EVENT_DISCONNECTED, 3000, "server disconnected");
	struct rdma_event_channel *cch = c.ch;

	free_side(&s);
	free_side(&c);
	rdma_destroy_event_channel(cch);
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(lch);
	return after - before;
}

int main(void)
{
	int st;
	pid_t pid = fork();

	REQUIRE(pid >= 0);
	if (pid == 0) { /* the defaults: a peer on this host gets copies */
		unsetenv("XSOCK_ZC");
		unsetenv("XSOCK_ZC_MIN");
		CHECK_EQ_U(traffic(), 0);
		_exit(xs_test_result());
	}
	REQUIRE(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	/* before the library reads its configuration */
	setenv("XSOCK_ZC", "always", 1);
	CHECK_EQ_U(traffic(), 1);
	return xs_test_result();
}
