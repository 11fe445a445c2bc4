/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* fork with libiwarp alone (xsock(7) FORK): a process holding an
 * established connection forks; the child leaves it alone (exits at once,
 * destroys its copies, or execs a program); the parent's connection keeps
 * working in both directions, and nothing the child did disconnected it.
 * Then a child that uses the connection first owns it: a send on the
 * parent's copy flushes (IBV_WC_WR_FLUSH_ERR) without disturbing it. */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/test-cm-util.h"

struct side {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char buf[64];
};

static void make_qp(struct side *s, struct rdma_cm_id *id)
{
	s->id = id;
	s->cq = cm_rc_qp(id, 32, 8);
	s->mr = ibv_reg_mr(id->pd, s->buf, sizeof(s->buf), IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(s->mr);
}

static void free_side(struct side *s)
{
	ibv_dereg_mr(s->mr);
	rdma_destroy_qp(s->id);
	ibv_destroy_cq(s->cq);
	rdma_destroy_id(s->id);
}


static int post_recv(struct side *s, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf, .length = sizeof(s->buf),
			       .lkey = s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(s->id->qp, &wr, &bad);
}

static int post_send(struct side *s, const char *msg, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf, .length = (uint32_t)strlen(msg) + 1,
			       .lkey = s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;

	strcpy(s->buf, msg);
	return ibv_post_send(s->id->qp, &wr, &bad);
}

/* from sends a message to to; both completions checked */
static void exchange(struct side *from, struct side *to, const char *msg)
{
	struct ibv_wc wc;

	CHECK(post_recv(to, 1) == 0);
	CHECK(post_send(from, msg, 2) == 0);
	CHECK(cm_poll_one(from->cq, &wc, 3000) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 2);
	CHECK(cm_poll_one(to->cq, &wc, 3000) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1);
	CHECK(strcmp(to->buf, msg) == 0);
}

static int wait_child(pid_t pid)
{
	int st = 0;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(void)
{
	struct rdma_event_channel *lch;
	struct rdma_cm_id *lid;
	struct rdma_cm_event *ev;
	struct side c = { 0 }, s = { 0 };
	struct ibv_wc wc;
	uint16_t port = cm_listen(&lch, &lid);
	pid_t pid;

	make_qp(&c, cm_resolved_id(&c.ch, &c, port));
	REQUIRE(rdma_connect(c.id, NULL) == 0);
	ev = cm_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 3000, "request");
	REQUIRE(ev);
	make_qp(&s, ev->id);
	rdma_ack_cm_event(ev);
	REQUIRE(rdma_accept(s.id, NULL) == 0);
	ev = cm_expect(s.id->channel, RDMA_CM_EVENT_ESTABLISHED, 3000, "server established");
	REQUIRE(ev);
	rdma_ack_cm_event(ev);
	ev = cm_expect(c.ch, RDMA_CM_EVENT_ESTABLISHED, 3000, "client established");
	REQUIRE(ev);
	rdma_ack_cm_event(ev);
	exchange(&c, &s, "before fork");

	/* 1: the child exits at once */
	CHECK(post_recv(&s, 1) == 0); /* posted before the fork, completed after */
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0)
		_exit(0);
	CHECK(wait_child(pid) == 0);
	CHECK(post_send(&c, "after child 1", 2) == 0);
	CHECK(cm_poll_one(c.cq, &wc, 3000) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 2);
	CHECK(cm_poll_one(s.cq, &wc, 3000) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1);
	CHECK(strcmp(s.buf, "after child 1") == 0);
	exchange(&s, &c, "back after child 1");

	/* 2: the child destroys its copies and exits normally: no disconnect */
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		free_side(&s);
		free_side(&c);
		rdma_destroy_event_channel(c.ch);
		rdma_destroy_id(lid);
		rdma_destroy_event_channel(lch);
		exit(xs_test_result());
	}
	CHECK(wait_child(pid) == 0);
	exchange(&c, &s, "after child 2");
	exchange(&s, &c, "back after child 2");
	CHECK(!cm_readable(c.ch, 0) && !cm_readable(s.id->channel, 0));

	/* 3: fork + exec of an unrelated program, and system() */
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", "exit 3", (char *)NULL);
		_exit(99);
	}
	CHECK(wait_child(pid) == 3);
	CHECK(system("exit 4") >> 8 == 4);
	exchange(&c, &s, "after exec");
	exchange(&s, &c, "back after exec");

	/* 4: the child uses the client side first and owns it from then on:
	 * the parent's send on its copy flushes; its server side still works */
	int pfd[2];
	REQUIRE(pipe(pfd) == 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		char b;
		close(pfd[1]);
		CHECK(post_send(&c, "from the child", 2) == 0);
		CHECK(cm_poll_one(c.cq, &wc, 3000) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 2);
		if (read(pfd[0], &b, 1) != 1) /* the parent has checked */
			xs_test_failures++;
		_exit(xs_test_result());
	}
	close(pfd[0]);
	CHECK(post_recv(&s, 1) == 0);
	CHECK(cm_poll_one(s.cq, &wc, 3000) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1);
	CHECK(strcmp(s.buf, "from the child") == 0);
	/* the copy is not ours: the WR flushes, and nothing reaches the peer */
	CHECK(post_send(&c, "parent", 3) == 0);
	CHECK(cm_poll_one(c.cq, &wc, 3000) && wc.wr_id == 3 && wc.status == IBV_WC_WR_FLUSH_ERR);
	CHECK(write(pfd[1], "x", 1) == 1);
	close(pfd[1]);
	CHECK(wait_child(pid) == 0);
	/* the parent's failed copy did not disconnect the connection */
	CHECK(!cm_readable(s.id->channel, 200));

	free_side(&s);
	free_side(&c);
	rdma_destroy_event_channel(c.ch);
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(lch);
	return xs_test_result();
}
