/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* RFC 7306 between two xsock ends over real loopback connections: RDMA
 * Write with Immediate (data placed, the receive completed with the imm,
 * byte_len 0, nothing in its buffer), Send with Immediate (data and imm,
 * one receive), the solicited flag, Write with Immediate into an SRQ,
 * FetchAdd and CmpSwap (hit and miss) with their old values, an Atomic
 * completing behind a Read in WR order, an unaligned remote address
 * (EINVAL at post), an MR without REMOTE_ATOMIC (REM_ACCESS_ERR, QP in
 * ERR), the ibv_wr_* builders, and (a child with XSOCK_RDMAP_EXT=0) a
 * connection that did not agree refusing the opcodes with EOPNOTSUPP.
 * And the Write fence (verbs/verbs_qp_tx.c): a signaled RDMA Write on a
 * send CQ with a completion channel, to a target process that is stopped,
 * does not complete until it runs again and has placed the data, which it
 * then finds in its memory at once. */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "tests/test-verbs-util.h"
#include "tests/xs_test.h"

/* remote offsets in the server's target memory */
#define OFF_DATA 16
#define OFF_WORD 64

static struct ibv_mr *atomic_mr(struct ep *s)
{
	struct ibv_mr *mr = ibv_reg_mr(s->id->pd, s->mem + GUARD, TLEN,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);

	REQUIRE(mr);
	return mr;
}

static int post_wr(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;
	int rc = ibv_post_send(qp, wr, &bad);

	if (rc)
		CHECK(bad == wr);
	return rc;
}

static void test_write_imm_and_send_imm(void)
{
	struct ibv_send_wr wr;
	struct ibv_wc wc[4];
	struct ep c, s;

	if (!pair_up(&c, &s, 16, 0, 4)) {
		xs_test_failures++;
		goto out;
	}
	uint8_t *src = c.mem + GUARD;
	struct ibv_sge sg = { .addr = (uintptr_t)src, .length = 5, .lkey = c.mr[T_RW]->lkey };

	memcpy(src, "hello", 5);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(0x12345678);
	wr.wr.rdma.rkey = s.mr[T_RW]->rkey;
	wr.wr.rdma.remote_addr = (uintptr_t)(s.mem + GUARD + OFF_DATA);
	CHECK_EQ_U(post_wr(c.id->qp, &wr), 0);
	CHECK(poll_n(c.scq, wc, 1, 3000) == 1 && wc[0].wr_id == 1 &&
	      wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_RDMA_WRITE);
	CHECK(poll_n(s.rcq, wc, 1, 3000) == 1);
	CHECK(wc[0].wr_id == 100 && wc[0].status == IBV_WC_SUCCESS &&
	      wc[0].opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc[0].byte_len == 0 &&
	      (wc[0].wc_flags & IBV_WC_WITH_IMM) && wc[0].imm_data == htonl(0x12345678) &&
	      wc[0].qp_num == s.id->qp->qp_num);
	CHECK(memcmp(s.mem + GUARD + OFF_DATA, "hello", 5) == 0);
	CHECK(all_bytes(s.rbuf, 256, 0)); /* nothing placed into the receive */

	/* solicited: Immediate Data with Solicited Event, same completion */
	wr.wr_id = 2;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
	wr.imm_data = htonl(0xa5a5a5a5);
	CHECK_EQ_U(post_wr(c.id->qp, &wr), 0);
	CHECK(poll_n(c.scq, wc, 1, 3000) == 1 && wc[0].wr_id == 2 &&
	      wc[0].status == IBV_WC_SUCCESS);
	CHECK(poll_n(s.rcq, wc, 1, 3000) == 1 && wc[0].wr_id == 101 &&
	      wc[0].opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc[0].imm_data == htonl(0xa5a5a5a5));

	/* Send with Immediate: the data and the imm in one receive */
	memcpy(src, "data", 4);
	sg.length = 4;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 3;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(0xdeadbeef);
	CHECK_EQ_U(post_wr(c.id->qp, &wr), 0);
	CHECK(poll_n(c.scq, wc, 1, 3000) == 1 && wc[0].wr_id == 3 &&
	      wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_SEND);
	CHECK(poll_n(s.rcq, wc, 1, 3000) == 1);
	CHECK(wc[0].wr_id == 102 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_RECV &&
	      wc[0].byte_len == 4 && (wc[0].wc_flags & IBV_WC_WITH_IMM) &&
	      wc[0].imm_data == htonl(0xdeadbeef));
	CHECK(memcmp(s.rbuf + 2 * 256, "data", 4) == 0);
	/* the next plain Send takes the next receive, with no imm */
	wr.wr_id = 4;
	wr.opcode = IBV_WR_SEND;
	CHECK_EQ_U(post_wr(c.id->qp, &wr), 0);
	CHECK(poll_n(s.rcq, wc, 1, 3000) == 1 && wc[0].wr_id == 103 &&
	      wc[0].opcode == IBV_WC_RECV && !(wc[0].wc_flags & IBV_WC_WITH_IMM));
	CHECK(poll_n(c.scq, wc, 1, 3000) == 1 && wc[0].wr_id == 4);
	CHECK(qp_state(c.id->qp) == IBV_QPS_RTS && qp_state(s.id->qp) == IBV_QPS_RTS);
out:
	free_ep(&c);
	free_ep(&s);
	printf("write/send with immediate: %s\n", xs_test_failures ? "(failures above)" : "ok");
}

/* Write with Immediate into a server QP on an SRQ. */
static void test_write_imm_srq(void)
{
	struct rdma_conn_param cp = conn_param();
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct rdma_cm_event *ev;
	struct ibv_qp_init_attr qa;
	struct ibv_send_wr wr;
	struct ibv_wc wc[2];
	struct ibv_srq *srq = NULL;
	struct ibv_cq *scq = NULL, *rcq = NULL;
	struct ibv_mr *smr = NULL, *rmr = NULL;
	struct rdma_cm_id *sid = NULL;
	struct ibv_pd *spd = NULL;
	uint8_t *smem = calloc(1, 4096), *rbuf = calloc(2, 256);
	struct ep c;

	REQUIRE(smem && rbuf);
	memset(&c, 0, sizeof(c));
	c.id = cm_resolved_id(&c.ch, NULL, lport);
	make_qp(&c, c.id, 8, FILL_C);
	REQUIRE(rdma_connect(c.id, &cp) == 0);
	ev = cm_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 3000, "request");
	if (!ev) {
		xs_test_failures++;
		goto out;
	}
	sid = ev->id;
	rdma_ack_cm_event(ev);
	spd = ibv_alloc_pd(sid->verbs);
	REQUIRE(spd);
	srq = ibv_create_srq(spd, &sa);
	scq = ibv_create_cq(sid->verbs, 16, NULL, NULL, 0);
	rcq = ibv_create_cq(sid->verbs, 16, NULL, NULL, 0);
	REQUIRE(srq && scq && rcq);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = scq;
	qa.recv_cq = rcq;
	qa.srq = srq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 8;
	qa.cap.max_send_sge = 1;
	REQUIRE(rdma_create_qp(sid, spd, &qa) == 0);
	smr = ibv_reg_mr(spd, smem, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	rmr = ibv_reg_mr(spd, rbuf, 512, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(smr && rmr);
	for (int i = 0; i < 2; i++) {
		struct ibv_sge rs = { .addr = (uintptr_t)(rbuf + i * 256), .length = 256,
				      .lkey = rmr->lkey };
		struct ibv_recv_wr rw = { .wr_id = 500 + (uint64_t)i, .sg_list = &rs, .num_sge = 1 },
				   *rbad;

		CHECK_EQ_U(ibv_post_srq_recv(srq, &rw, &rbad), 0);
	}
	CHECK(rdma_accept(sid, &cp) == 0);
	ev = cm_expect(lch, RDMA_CM_EVENT_ESTABLISHED, 3000, "server established");
	if (ev)
		rdma_ack_cm_event(ev);
	ev = cm_expect(c.ch, RDMA_CM_EVENT_ESTABLISHED, 3000, "client established");
	if (!ev) {
		xs_test_failures++;
		goto out;
	}
	rdma_ack_cm_event(ev);

	struct ibv_sge sg = { .addr = (uintptr_t)(c.mem + GUARD), .length = 3,
			      .lkey = c.mr[T_RW]->lkey };

	memcpy(c.mem + GUARD, "srq", 3);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 7;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(77);
	wr.wr.rdma.rkey = smr->rkey;
	wr.wr.rdma.remote_addr = (uintptr_t)smem + 100;
	CHECK_EQ_U(post_wr(c.id->qp, &wr), 0);
	CHECK(poll_n(c.scq, wc, 1, 3000) == 1 && wc[0].status == IBV_WC_SUCCESS);
	CHECK(poll_n(rcq, wc, 1, 3000) == 1 && wc[0].wr_id == 500 &&
	      wc[0].opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc[0].byte_len == 0 &&
	      wc[0].imm_data == htonl(77) && wc[0].qp_num == sid->qp->qp_num);
	CHECK(memcmp(smem + 100, "srq", 3) == 0);
	CHECK(all_bytes(rbuf, 512, 0));
out:
	free_ep(&c);
	if (sid && sid->qp)
		rdma_destroy_qp(sid);
	if (smr)
		ibv_dereg_mr(smr);
	if (rmr)
		ibv_dereg_mr(rmr);
	if (srq)
		CHECK_EQ_U(ibv_destroy_srq(srq), 0);
	if (scq)
		ibv_destroy_cq(scq);
	if (rcq)
		ibv_destroy_cq(rcq);
	if (sid)
		rdma_destroy_id(sid);
	if (spd)
		CHECK_EQ_U(ibv_dealloc_pd(spd), 0);
	free(smem);
	free(rbuf);
	printf("write with immediate into an SRQ: %s\n",
	       xs_test_failures ? "(failures above)" : "ok");
}

static void atomic_wr(struct ibv_send_wr *wr, struct ibv_sge *sg, uint64_t wr_id,
		      enum ibv_wr_opcode op, uint32_t rkey, uint64_t raddr, uint64_t cmp_add,
		      uint64_t swap)
{
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = wr_id;
	wr->opcode = op;
	wr->sg_list = sg;
	wr->num_sge = 1;
	wr->send_flags = IBV_SEND_SIGNALED;
	wr->wr.atomic.rkey = rkey;
	wr->wr.atomic.remote_addr = raddr;
	wr->wr.atomic.compare_add = cmp_add;
	wr->wr.atomic.swap = swap;
}

static void test_atomics(void)
{
	struct ibv_send_wr wr, rd;
	struct ibv_wc wc[4];
	struct ibv_mr *amr;
	struct ep c, s;
	uint64_t v, old;

	if (!pair_up(&c, &s, 16, 0, 4)) {
		xs_test_failures++;
		goto out;
	}
	amr = atomic_mr(&s);
	uint8_t *word = s.mem + GUARD + OFF_WORD, *res = c.mem + GUARD + 8;
	uint64_t raddr = (uintptr_t)word;
	struct ibv_sge sg = { .addr = (uintptr_t)res, .length = 8, .lkey = c.mr[T_RW]->lkey };

	v = 100;
	memcpy(word, &v, 8);
	atomic_wr(&wr, &sg, 1, IBV_WR_ATOMIC_FETCH_AND_ADD, amr->rkey, raddr, 5, 0);
	CHECK_EQ_U(post_wr(c.id->qp, &wr), 0);
	CHECK(poll_n(c.scq, wc, 1, 3000) == 1 && wc[0].wr_id == 1 &&
	      wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_FETCH_ADD &&
	      wc[0].byte_len == 8);
	memcpy(&old, res, 8);
	memcpy(&v, word, 8);
	CHECK(old == 100 && v == 105);
	/* CmpSwap, a hit */
	atomic_wr(&wr, &sg, 2, IBV_WR_ATOMIC_CMP_AND_SWP, amr->rkey, raddr, 105, 7);
	CHECK_EQ_U(post_wr(c.id->qp, &wr), 0);
	CHECK(poll_n(c.scq, wc, 1, 3000) == 1 && wc[0].wr_id == 2 &&
	      wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_COMP_SWAP);
	memcpy(&old, res, 8);
	memcpy(&v, word, 8);
	CHECK(old == 105 && v == 7);
	/* and a miss: the word stays, the old value comes back */
	atomic_wr(&wr, &sg, 3, IBV_WR_ATOMIC_CMP_AND_SWP, amr->rkey, raddr, 999, 1);
	CHECK_EQ_U(post_wr(c.id->qp, &wr), 0);
	CHECK(poll_n(c.scq, wc, 1, 3000) == 1 && wc[0].wr_id == 3 &&
	      wc[0].status == IBV_WC_SUCCESS);
	memcpy(&old, res, 8);
	memcpy(&v, word, 8);
	CHECK(old == 7 && v == 7);

	/* completion order: a Read, then an Atomic, then a Write, one post */
	struct ibv_sge rsg = { .addr = (uintptr_t)(c.mem + GUARD + 1024), .length = 2048,
			       .lkey = c.mr[T_RW]->lkey };
	struct ibv_send_wr wrw;
	struct ibv_sge wsg = { .addr = (uintptr_t)(c.mem + GUARD), .length = 4,
			       .lkey = c.mr[T_RW]->lkey };

	memset(&rd, 0, sizeof(rd));
	rd.wr_id = 10;
	rd.opcode = IBV_WR_RDMA_READ;
	rd.sg_list = &rsg;
	rd.num_sge = 1;
	rd.send_flags = IBV_SEND_SIGNALED;
	rd.wr.rdma.rkey = s.mr[T_RW]->rkey;
	rd.wr.rdma.remote_addr = (uintptr_t)(s.mem + GUARD + 1024);
	atomic_wr(&wr, &sg, 11, IBV_WR_ATOMIC_FETCH_AND_ADD, amr->rkey, raddr, 1, 0);
	memset(&wrw, 0, sizeof(wrw));
	wrw.wr_id = 12;
	wrw.opcode = IBV_WR_RDMA_WRITE;
	wrw.sg_list = &wsg;
	wrw.num_sge = 1;
	wrw.send_flags = IBV_SEND_SIGNALED;
	wrw.wr.rdma.rkey = s.mr[T_RW]->rkey;
	wrw.wr.rdma.remote_addr = (uintptr_t)(s.mem + GUARD + 512);
	rd.next = &wr;
	wr.next = &wrw;
	CHECK_EQ_U(post_wr(c.id->qp, &rd), 0);
	CHECK(poll_n(c.scq, wc, 3, 3000) == 3);
	CHECK(wc[0].wr_id == 10 && wc[0].opcode == IBV_WC_RDMA_READ &&
	      wc[0].status == IBV_WC_SUCCESS);
	CHECK(wc[1].wr_id == 11 && wc[1].opcode == IBV_WC_FETCH_ADD &&
	      wc[1].status == IBV_WC_SUCCESS);
	CHECK(wc[2].wr_id == 12 && wc[2].opcode == IBV_WC_RDMA_WRITE &&
	      wc[2].status == IBV_WC_SUCCESS);
	memcpy(&old, res, 8);
	CHECK(old == 7);
	CHECK(all_bytes(c.mem + GUARD + 1024, 2048, FILL_T));

	/* the extended post API */
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(c.id->qp);

	if (qx) { /* rdma_create_qp made a plain QP: no builder */
		xs_test_failures++;
		fprintf(stderr, "unexpected ibv_qp_ex on a plain QP\n");
	}

	/* an unaligned remote address is refused at post time */
	atomic_wr(&wr, &sg, 20, IBV_WR_ATOMIC_FETCH_AND_ADD, amr->rkey, raddr + 4, 1, 0);
	CHECK_EQ_U(post_wr(c.id->qp, &wr), EINVAL);
	sg.length = 4; /* and a local SGE that is not 8 octets */
	atomic_wr(&wr, &sg, 21, IBV_WR_ATOMIC_FETCH_AND_ADD, amr->rkey, raddr, 1, 0);
	CHECK_EQ_U(post_wr(c.id->qp, &wr), EINVAL);
	sg.length = 8;
	CHECK(cq_empty(c.scq) && qp_state(c.id->qp) == IBV_QPS_RTS);

	/* an MR without REMOTE_ATOMIC: the responder Terminates */
	atomic_wr(&wr, &sg, 30, IBV_WR_ATOMIC_FETCH_AND_ADD, s.mr[T_RW]->rkey, raddr, 1, 0);
	CHECK_EQ_U(post_wr(c.id->qp, &wr), 0);
	CHECK(poll_n(c.scq, wc, 1, 3000) == 1 && wc[0].wr_id == 30 &&
	      wc[0].status == IBV_WC_REM_ACCESS_ERR);
	CHECK(wait_state(c.id->qp, IBV_QPS_ERR, 3000));
	memcpy(&v, word, 8);
	CHECK(v == 8);
	int na, nb;

	drain_async(c.id->qp, &na, s.id->qp, &nb);
	CHECK(ibv_dereg_mr(amr) == 0);
out:
	free_ep(&c);
	free_ep(&s);
	printf("atomics: %s\n", xs_test_failures ? "(failures above)" : "ok");
}

/* ibv_wr_* on a QP made with ibv_create_qp_ex and the RFC 7306 send ops. */
static void test_qpx(void)
{
	struct rdma_conn_param cp = conn_param();
	struct ibv_qp_init_attr_ex ax;
	struct rdma_cm_event *ev;
	struct ibv_wc wc[2];
	struct ibv_qp_ex *qx;
	struct ibv_mr *amr;
	struct ep c, s;
	uint64_t v, old;

	memset(&c, 0, sizeof(c));
	c.id = cm_resolved_id(&c.ch, NULL, lport);
	c.scq = ibv_create_cq(c.id->verbs, 16, NULL, NULL, 0);
	c.rcq = ibv_create_cq(c.id->verbs, 16, NULL, NULL, 0);
	REQUIRE(c.scq && c.rcq);
	memset(&ax, 0, sizeof(ax));
	ax.send_cq = c.scq;
	ax.recv_cq = c.rcq;
	ax.qp_type = IBV_QPT_RC;
	ax.cap.max_send_wr = 8;
	ax.cap.max_recv_wr = 8;
	ax.cap.max_send_sge = 1;
	ax.cap.max_recv_sge = 1;
	ax.pd = c.id->pd;
	ax.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ax.send_ops_flags = IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
			    IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	REQUIRE(rdma_create_qp_ex(c.id, &ax) == 0);
	c.mem = calloc(1, 2 * GUARD + TLEN);
	REQUIRE(c.mem);
	c.mr[0] = ibv_reg_mr(c.id->pd, c.mem + GUARD, TLEN, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(c.mr[0]);
	REQUIRE(rdma_connect(c.id, &cp) == 0);
	if (!server_accept(&s, 8, 2)) {
		xs_test_failures++;
		goto out;
	}
	ev = cm_expect(c.ch, RDMA_CM_EVENT_ESTABLISHED, 3000, "client established");
	if (!ev) {
		xs_test_failures++;
		goto out;
	}
	rdma_ack_cm_event(ev);
	amr = atomic_mr(&s);
	qx = ibv_qp_to_qp_ex(c.id->qp);
	REQUIRE(qx);
	v = 40;
	memcpy(s.mem + GUARD + OFF_WORD, &v, 8);
	ibv_wr_start(qx);
	qx->wr_id = 1;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_fetch_add(qx, amr->rkey, (uintptr_t)(s.mem + GUARD + OFF_WORD), 2);
	ibv_wr_set_sge(qx, c.mr[0]->lkey, (uintptr_t)(c.mem + GUARD), 8);
	qx->wr_id = 2;
	ibv_wr_atomic_cmp_swp(qx, amr->rkey, (uintptr_t)(s.mem + GUARD + OFF_WORD), 42, 9);
	ibv_wr_set_sge(qx, c.mr[0]->lkey, (uintptr_t)(c.mem + GUARD + 8), 8);
	qx->wr_id = 3;
	ibv_wr_rdma_write_imm(qx, s.mr[T_RW]->rkey, (uintptr_t)(s.mem + GUARD), htonl(3));
	ibv_wr_set_sge(qx, c.mr[0]->lkey, (uintptr_t)(c.mem + GUARD + 16), 4);
	qx->wr_id = 4;
	ibv_wr_send_imm(qx, htonl(4));
	ibv_wr_set_sge(qx, c.mr[0]->lkey, (uintptr_t)(c.mem + GUARD + 16), 4);
	CHECK_EQ_U(ibv_wr_complete(qx), 0);
	CHECK(poll_n(c.scq, wc, 2, 3000) == 2 && wc[0].wr_id == 1 &&
	      wc[0].opcode == IBV_WC_FETCH_ADD && wc[1].wr_id == 2 &&
	      wc[1].opcode == IBV_WC_COMP_SWAP && wc[1].status == IBV_WC_SUCCESS);
	CHECK(poll_n(c.scq, wc, 2, 3000) == 2 && wc[0].wr_id == 3 && wc[1].wr_id == 4);
	memcpy(&old, c.mem + GUARD, 8);
	CHECK(old == 40);
	memcpy(&old, c.mem + GUARD + 8, 8);
	CHECK(old == 42);
	memcpy(&v, s.mem + GUARD + OFF_WORD, 8);
	CHECK(v == 9);
	CHECK(poll_n(s.rcq, wc, 2, 3000) == 2 && wc[0].opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
	      wc[0].imm_data == htonl(3) && wc[1].opcode == IBV_WC_RECV &&
	      wc[1].imm_data == htonl(4) && (wc[1].wc_flags & IBV_WC_WITH_IMM));
	CHECK(ibv_dereg_mr(amr) == 0);
out:
	free_ep(&c);
	free_ep(&s);
	printf("ibv_wr_* immediate and atomics: %s\n",
	       xs_test_failures ? "(failures above)" : "ok");
}

/* XSOCK_RDMAP_EXT=0 (this process): the connection does not agree. */
static void test_off(void)
{
	static const enum ibv_wr_opcode ops[] = { IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE_WITH_IMM,
						  IBV_WR_ATOMIC_CMP_AND_SWP,
						  IBV_WR_ATOMIC_FETCH_AND_ADD };
	struct ibv_device_attr da;
	struct ibv_send_wr wr;
	struct ibv_wc wc[1];
	struct ep c, s;

	CHECK(ibv_query_device(vctx, &da) == 0 && da.atomic_cap == IBV_ATOMIC_HCA);
	if (!pair_up(&c, &s, 4, 0, 4)) {
		xs_test_failures++;
		goto out;
	}
	struct ibv_sge sg = { .addr = (uintptr_t)(c.mem + GUARD), .length = 8,
			      .lkey = c.mr[T_RW]->lkey };

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		atomic_wr(&wr, &sg, i, ops[i], s.mr[T_RW]->rkey, (uintptr_t)(s.mem + GUARD), 1, 2);
		CHECK_EQ_U(post_wr(c.id->qp, &wr), EOPNOTSUPP);
	}
	CHECK(cq_empty(c.scq) && qp_state(c.id->qp) == IBV_QPS_RTS);
	/* plain operations go on */
	wr.opcode = IBV_WR_SEND;
	CHECK_EQ_U(post_wr(c.id->qp, &wr), 0);
	CHECK(poll_n(s.rcq, wc, 1, 3000) == 1 && wc[0].status == IBV_WC_SUCCESS &&
	      !(wc[0].wc_flags & IBV_WC_WITH_IMM));
out:
	free_ep(&c);
	free_ep(&s);
	printf("extension off: %s\n", xs_test_failures ? "(failures above)" : "ok");
}

/* The target of test_write_fence, in a child: accepts, tells the parent
 * its port, rkey and address (pipe up), then waits for a byte (pipe down)
 * and checks the memory without any verbs call: only the engine thread
 * placed it. */
struct fence_msg {
	uint16_t port;
	uint32_t rkey;
	uint64_t addr;
};

static void fence_target(int up, int down)
{
	struct fence_msg m;
	struct ep s;
	char b;

	verbs_test_listen();
	m.port = lport;
	REQUIRE(write(up, &m, sizeof(m)) == (ssize_t)sizeof(m));
	REQUIRE(server_accept(&s, 4, 0));
	m.rkey = s.mr[T_RW]->rkey;
	m.addr = (uintptr_t)(s.mem + GUARD + OFF_DATA);
	REQUIRE(write(up, &m, sizeof(m)) == (ssize_t)sizeof(m));
	REQUIRE(read(down, &b, 1) == 1);
	CHECK(memcmp(s.mem + GUARD + OFF_DATA, "placed", 6) == 0);
	_exit(xs_test_failures ? 1 : 0);
}

static void test_write_fence(void)
{
	int up[2], down[2], st = 0;
	struct rdma_conn_param cp = conn_param();
	struct rdma_cm_event *ev;
	struct ibv_send_wr wr;
	struct fence_msg m;
	struct ibv_wc wc[1];
	struct ep c;
	pid_t pid;

	REQUIRE(pipe(up) == 0 && pipe(down) == 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		fence_target(up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	memset(&c, 0, sizeof(c));
	REQUIRE(read(up[0], &m, sizeof(m)) == (ssize_t)sizeof(m));
	c.id = cm_resolved_id(&c.ch, NULL, m.port);
	/* a consumer that sleeps for its completions: a channel on the CQ */
	struct ibv_comp_channel *cch = ibv_create_comp_channel(c.id->verbs);
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4,
						.max_send_sge = 1, .max_recv_sge = 1 } };

	REQUIRE(cch);
	c.scq = ibv_create_cq(c.id->verbs, 8, NULL, cch, 0);
	c.rcq = ibv_create_cq(c.id->verbs, 8, NULL, NULL, 0);
	REQUIRE(c.scq && c.rcq);
	qa.send_cq = c.scq;
	qa.recv_cq = c.rcq;
	REQUIRE(rdma_create_qp(c.id, NULL, &qa) == 0);
	c.mem = calloc(1, 2 * GUARD + TLEN);
	REQUIRE(c.mem);
	c.mr[T_RW] = ibv_reg_mr(c.id->pd, c.mem + GUARD, TLEN, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(c.mr[T_RW]);
	REQUIRE(rdma_connect(c.id, &cp) == 0);
	ev = cm_expect(c.ch, RDMA_CM_EVENT_ESTABLISHED, 5000, "fence: established");
	REQUIRE(ev);
	rdma_ack_cm_event(ev);
	REQUIRE(read(up[0], &m, sizeof(m)) == (ssize_t)sizeof(m));

	/* the target cannot place while stopped: no completion */
	REQUIRE(kill(pid, SIGSTOP) == 0);
	REQUIRE(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st));
	uint8_t *src = c.mem + GUARD;
	struct ibv_sge sg = { .addr = (uintptr_t)src, .length = 6, .lkey = c.mr[T_RW]->lkey };

	memcpy(src, "placed", 6);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 7;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.rkey = m.rkey;
	wr.wr.rdma.remote_addr = m.addr;
	CHECK_EQ_U(post_wr(c.id->qp, &wr), 0);
	int early = poll_n(c.scq, wc, 1, 300);

	CHECK_EQ_U(early, 0);
	REQUIRE(kill(pid, SIGCONT) == 0);
	/* running again: the data is placed, then the Write completes */
	if (!early)
		CHECK(poll_n(c.scq, wc, 1, 5000) == 1);
	CHECK(wc[0].wr_id == 7 && wc[0].status == IBV_WC_SUCCESS &&
	      wc[0].opcode == IBV_WC_RDMA_WRITE);
	CHECK(write(down[1], "x", 1) == 1);
	REQUIRE(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(up[0]);
	close(down[1]);
	free_ep(&c);
	CHECK(ibv_destroy_comp_channel(cch) == 0);
	printf("write fence: %s\n", xs_test_failures ? "(failures above)" : "ok");
}

int main(void)
{
	int st = 0;
	pid_t pid;

	signal(SIGPIPE, SIG_IGN);
	/* the configuration is read once per process: the child is the
	 * end that does not announce RFC 7306 */
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		setenv("XSOCK_RDMAP_EXT", "0", 1);
		verbs_test_listen();
		test_off();
		_exit(xs_test_failures ? 1 : 0);
	}
	REQUIRE(waitpid(pid, &st, 0) == pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "the extension-off child failed\n");
		xs_test_failures++;
	}
	verbs_test_listen();
	test_write_imm_and_send_imm();
	test_write_imm_srq();
	test_atomics();
	test_qpx();
	test_write_fence();
	return xs_test_result();
}
