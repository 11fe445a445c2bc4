/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Verbs objects without a network: device, context (through the inline
 * calls of <infiniband/verbs.h>), PD, MR/STags and xs_mr_resolve, CQ and
 * completion channel, QP state machine, and the QP's data path against a
 * fake engine (tests/xs_conn_stub.c). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/xs_conn_stub.h"
#include "tests/xs_test.h"
#include "verbs/verbs_priv.h"

static struct ibv_context *ctx;
static struct ibv_pd *pd;

static void test_device(void)
{
	struct ibv_device **l;
	struct ibv_device_attr da;
	struct ibv_device_attr_ex dax;
	struct ibv_port_attr pa;
	union ibv_gid gid;
	enum xs_gid_type_sysfs gt = 7;
	__be16 pkey;
	int n = -1, cmd_fd, async_fd;
	char buf[64];

	for (int i = 0; i < 3; i++) {
		l = ibv_get_device_list(&n);
		REQUIRE(l);
		CHECK_EQ_U(n, 2); /* xsock0 first; xsock_roce0: tests/test-roce-dev */
		CHECK(l[2] == NULL);
		CHECK(strcmp(ibv_get_device_name(l[0]), "xsock0") == 0);
		CHECK_EQ_U(l[0]->node_type, IBV_NODE_RNIC);
		CHECK_EQ_U(l[0]->transport_type, IBV_TRANSPORT_IWARP);
		CHECK_EQ_U(ibv_get_device_index(l[0]), 0);
		if (i < 2)
			ibv_free_device_list(l);
	}
	ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	REQUIRE(ctx);
	CHECK(ctx->abi_compat == __VERBS_ABI_IS_EXTENDED);
	CHECK_EQ_U(ctx->num_comp_vectors, 1);
	CHECK(fcntl(ctx->cmd_fd, F_GETFD) >= 0);
	CHECK(fcntl(ctx->async_fd, F_GETFD) >= 0);
	CHECK(verbs_get_ctx(ctx) != NULL);

	CHECK_EQ_U(ibv_query_device(ctx, &da), 0);
	CHECK(strcmp(da.fw_ver, "xsock " PACKAGE_VERSION) == 0);
	CHECK_EQ_U(da.max_qp_rd_atom, XS_MAX_IRD);
	CHECK_EQ_U(da.max_qp_init_rd_atom, XS_MAX_ORD);
	CHECK_EQ_U(da.atomic_cap, IBV_ATOMIC_HCA); /* RFC 7306, refused per connection */
	CHECK_EQ_U(da.max_sge, XS_MAX_SGE);
	CHECK_EQ_U(da.phys_port_cnt, 1);
	CHECK_EQ_U(da.vendor_id, XS_VENDOR_ID);
	CHECK_EQ_U(da.vendor_part_id, XS_VENDOR_PART_ID);
	/* inline wrappers that go through the verbs_context */
	memset(&dax, 0xaa, sizeof(dax));
	CHECK_EQ_U(ibv_query_device_ex(ctx, NULL, &dax), 0);
	CHECK_EQ_U(dax.orig_attr.max_qp_wr, XS_MAX_QP_WR);
	CHECK_EQ_U(dax.comp_mask, 0);
	CHECK_EQ_U(dax.phys_port_cnt_ex, da.phys_port_cnt);
	CHECK_EQ_U(dax.orig_attr.vendor_id, da.vendor_id);
	CHECK_EQ_U(dax.orig_attr.node_guid, da.node_guid);
	CHECK_EQ_U(dax.orig_attr.max_cqe, da.max_cqe);
	CHECK_EQ_U(dax.orig_attr.max_qp_rd_atom, da.max_qp_rd_atom);
	memset(&pa, 0xaa, sizeof(pa));
	CHECK_EQ_U(ibv_query_port(ctx, 1, &pa), 0);
	CHECK_EQ_U(pa.state, IBV_PORT_ACTIVE);
	CHECK_EQ_U(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
	CHECK_EQ_U(pa.max_mtu, IBV_MTU_4096);
	CHECK_EQ_U(pa.active_mtu, IBV_MTU_1024);
	CHECK_EQ_U(pa.gid_tbl_len, 1);
	CHECK_EQ_U(pa.pkey_tbl_len, 1);
	CHECK_EQ_U(pa.flags, 0);
	CHECK(ibv_query_port(ctx, 2, &pa) != 0);
	CHECK_EQ_U(ibv_query_gid(ctx, 1, 0, &gid), 0);
	CHECK(ibv_query_gid(ctx, 1, 1, &gid) < 0);
	CHECK_EQ_U(ibv_query_gid_type(ctx, 1, 0, &gt), 0);
	CHECK_EQ_U(gt, 0);
	CHECK_EQ_U(ibv_query_pkey(ctx, 1, 0, &pkey), 0);
	CHECK_EQ_U(pkey, 0xffff);
	errno = 0;
	CHECK(ibv_read_sysfs_file("/sys/class/infiniband/xsock0", "fw_ver", buf, sizeof(buf)) < 0);
	CHECK_EQ_U(errno, ENOENT);
	CHECK_EQ_U(ibv_fork_init(), 0);
	CHECK(strcmp(ibv_node_type_str(IBV_NODE_RNIC), "iWARP NIC") == 0);
	CHECK(strcmp(ibv_port_state_str(IBV_PORT_ACTIVE), "active") == 0);
	CHECK(strcmp(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR), "Work Request Flushed Error") == 0);
	CHECK(strcmp(ibv_event_type_str(IBV_EVENT_QP_FATAL), "unknown") != 0);
	CHECK_EQ_U(ibv_rate_to_mult(IBV_RATE_10_GBPS), 4);
	CHECK_EQ_U(mult_to_ibv_rate(4), IBV_RATE_10_GBPS);
	CHECK_EQ_U(ibv_rate_to_mbps(IBV_RATE_25_GBPS), 25781);
	CHECK_EQ_U(mbps_to_ibv_rate(25781), IBV_RATE_25_GBPS);
	errno = 0;
	CHECK(ibv_create_ah(NULL, NULL) == NULL && errno == EOPNOTSUPP);
	CHECK(ibv_qp_to_qp_ex(NULL) == NULL && errno == EOPNOTSUPP);
	errno = 0;
	CHECK(ibv_create_srq(NULL, NULL) == NULL && errno == EINVAL); /* test-verbs-srq */
	CHECK(xs_default_context() != NULL && xs_default_context() == xs_default_context());

	/* a second context: fds are closed on close */
	{
		struct ibv_device **l2 = ibv_get_device_list(NULL);
		struct ibv_context *c2 = ibv_open_device(l2[0]);

		REQUIRE(c2);
		cmd_fd = c2->cmd_fd;
		async_fd = c2->async_fd;
		CHECK_EQ_U(ibv_close_device(c2), 0);
		CHECK(fcntl(cmd_fd, F_GETFD) < 0);
		CHECK(fcntl(async_fd, F_GETFD) < 0);
		ibv_free_device_list(l2);
	}
}

static uint8_t mem[8192];

static void test_mr(void)
{
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	struct ibv_mr *mr, *ro, *other, *dead;
	uint8_t *dst;
	struct xs_err e;
	uint32_t dead_stag;

	REQUIRE(pd2);
	errno = 0;
	CHECK(ibv_reg_mr(pd, mem, sizeof(mem), IBV_ACCESS_REMOTE_WRITE) == NULL && errno == EINVAL);
	CHECK(ibv_reg_mr(pd, mem, 0, IBV_ACCESS_LOCAL_WRITE) == NULL && errno == EINVAL);
	CHECK(ibv_reg_mr(pd, mem, XS_MAX_MR_SIZE + 1, IBV_ACCESS_LOCAL_WRITE) == NULL);
	mr = ibv_reg_mr_iova2(pd, mem, 4096, 0x100000, IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	REQUIRE(mr);
	CHECK_EQ_U(mr->lkey, mr->rkey);
	CHECK(mr->rkey >= 256); /* STags 0..255 never name an MR */
	CHECK(mr->addr == mem && mr->length == 4096 && mr->pd == pd);
	ro = ibv_reg_mr(pd, mem + 4096, 4096, IBV_ACCESS_REMOTE_READ);
	REQUIRE(ro);
	other = ibv_reg_mr(pd2, mem, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	REQUIRE(other);
	dead = ibv_reg_mr(pd, mem, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	REQUIRE(dead);
	dead_stag = dead->rkey;
	CHECK_EQ_U(ibv_dereg_mr(dead), 0);

#define RES(stag, to, len, kind) xs_mr_resolve(pd, stag, to, len, kind, &dst, &e)
#define TRIPLE(l, t, c) CHECK(e.layer == (l) && e.etype == (t) && e.ecode == (c))
	/* success, incl. both boundaries (iova-based TO) */
	CHECK_EQ_U(RES(mr->rkey, 0x100000, 4096, XS_ACCESS_REMOTE_WRITE), 0);
	CHECK(dst == mem);
	CHECK_EQ_U(RES(mr->rkey, 0x100fff, 1, XS_ACCESS_REMOTE_READ), 0);
	CHECK(dst == mem + 4095);
	CHECK_EQ_U(RES(mr->rkey, 0x101000, 0, XS_ACCESS_REMOTE_WRITE), 0);
	/* invalid STag: unknown, wrong key, deregistered */
	CHECK(RES(0, 0, 1, XS_ACCESS_REMOTE_WRITE) < 0);
	TRIPLE(1, 1, 0x00);
	CHECK(RES(mr->rkey ^ 0x01, 0x100000, 1, XS_ACCESS_REMOTE_WRITE) < 0);
	TRIPLE(1, 1, 0x00);
	CHECK(RES(mr->rkey ^ 0x01, 0x100000, 1, XS_ACCESS_REMOTE_READ) < 0);
	TRIPLE(0, 1, 0x00);
	CHECK(RES(dead_stag, (uintptr_t)mem, 1, XS_ACCESS_REMOTE_WRITE) < 0);
	TRIPLE(1, 1, 0x00);
	/* wrong PD */
	CHECK(RES(other->rkey, (uintptr_t)mem, 1, XS_ACCESS_REMOTE_WRITE) < 0);
	TRIPLE(1, 1, 0x02);
	CHECK(RES(other->rkey, (uintptr_t)mem, 1, XS_ACCESS_REMOTE_READ) < 0);
	TRIPLE(0, 1, 0x03);
	/* missing right */
	CHECK(RES(ro->rkey, (uintptr_t)mem + 4096, 1, XS_ACCESS_REMOTE_WRITE) < 0);
	TRIPLE(0, 1, 0x02);
	CHECK(RES(ro->rkey, (uintptr_t)mem + 4096, 1, XS_ACCESS_READ_SINK) < 0);
	TRIPLE(0, 1, 0x02);
	/* out of bounds, and TOs that would overflow */
	CHECK(RES(mr->rkey, 0x100001, 4096, XS_ACCESS_REMOTE_WRITE) < 0);
	TRIPLE(1, 1, 0x01);
	CHECK(RES(mr->rkey, 0xfffff, 1, XS_ACCESS_REMOTE_READ) < 0);
	TRIPLE(0, 1, 0x01);
	CHECK(RES(mr->rkey, UINT64_MAX, 2, XS_ACCESS_REMOTE_WRITE) < 0);
	TRIPLE(1, 1, 0x01);
	CHECK(RES(mr->rkey, 0x100800, UINT64_MAX, XS_ACCESS_REMOTE_WRITE) < 0);
	TRIPLE(1, 1, 0x01);
	CHECK(RES(mr->rkey, UINT64_MAX - 1, 4, XS_ACCESS_REMOTE_READ) < 0);
	TRIPLE(0, 1, 0x04); /* a Read source's TO wrap */
	/* local lookups use the same table */
	CHECK(xs_mr_local(pd, mr->lkey, 0x100010, 16, true) == mem + 16);
	CHECK(xs_mr_local(pd, ro->lkey, (uintptr_t)mem + 4096, 16, true) == NULL);
	CHECK(xs_mr_local(pd, ro->lkey, (uintptr_t)mem + 4096, 16, false) == mem + 4096);
	/* invalidation: only MRs of the PD */
	CHECK(xs_mr_invalidate(pd, other->rkey, &e) < 0);
	TRIPLE(0, 1, 0x09); /* another PD's: Remote Protection Error (as siw) */
	CHECK(xs_mr_invalidate(pd, 0xfffffe00, &e) < 0);
	TRIPLE(0, 2, 0x09); /* unknown: Remote Operation Error */
	CHECK_EQ_U(xs_mr_invalidate(pd2, other->rkey, &e), 0);
	CHECK(xs_mr_resolve(pd2, other->rkey, (uintptr_t)mem, 1, XS_ACCESS_REMOTE_WRITE, &dst, &e) < 0);
	TRIPLE(1, 1, 0x00);
#undef RES
#undef TRIPLE
	CHECK_EQ_U(ibv_dereg_mr(ro), 0);
	CHECK_EQ_U(ibv_dereg_mr(other), 0);
	CHECK_EQ_U(ibv_dereg_mr(mr), 0);
	CHECK_EQ_U(ibv_dealloc_pd(pd2), 0);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void test_stags(void)
{
	enum { N = 10000 };
	static struct ibv_mr *mrs[N];
	static uint32_t st[N];
	unsigned keyhist[256] = { 0 }, distinct_keys = 0;

	for (int i = 0; i < N; i++) {
		mrs[i] = ibv_reg_mr(pd, mem, 64, IBV_ACCESS_LOCAL_WRITE);
		REQUIRE(mrs[i]);
		st[i] = mrs[i]->rkey;
		keyhist[st[i] & 0xff]++;
	}
	qsort(st, N, sizeof(st[0]), cmp_u32);
	for (int i = 1; i < N; i++)
		CHECK(st[i] != st[i - 1]);
	CHECK(st[0] >= 0x100);
	for (int k = 0; k < 256; k++)
		distinct_keys += keyhist[k] != 0;
	CHECK(distinct_keys > 200); /* 10000 random bytes hit nearly all 256 */
	/* a freed slot comes back with a different STag */
	uint32_t old = mrs[0]->rkey;

	CHECK_EQ_U(ibv_dereg_mr(mrs[0]), 0);
	mrs[0] = ibv_reg_mr(pd, mem, 64, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(mrs[0]);
	CHECK(mrs[0]->rkey != old);
	for (int i = 0; i < N; i++)
		CHECK_EQ_U(ibv_dereg_mr(mrs[i]), 0);
}

static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static void test_cq(void)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq, *ecq;
	struct ibv_wc wc[8], w = { .status = IBV_WC_SUCCESS, .opcode = IBV_WC_RECV };
	void *cctx;
	int tag;

	REQUIRE(ch);
	cq = ibv_create_cq(ctx, 5, &tag, ch, 0);
	REQUIRE(cq);
	CHECK(cq->cqe >= 5 && cq->channel == ch && cq->cq_context == &tag && cq->context == ctx);
	CHECK(ibv_create_cq(ctx, 0, NULL, NULL, 0) == NULL);
	CHECK_EQ_U(ibv_destroy_comp_channel(ch), EBUSY);
	CHECK_EQ_U(ibv_poll_cq(cq, 8, wc), 0);
	for (int i = 0; i < 3; i++) {
		w.wr_id = (uint64_t)i;
		CHECK_EQ_U(xs_cq_push(cq, &w, false), 0);
	}
	CHECK(!readable(ch->fd)); /* not armed */
	CHECK_EQ_U(ibv_poll_cq(cq, 2, wc), 2);
	CHECK(wc[0].wr_id == 0 && wc[1].wr_id == 1);
	CHECK_EQ_U(ibv_poll_cq(cq, 8, wc), 1);
	CHECK_EQ_U(wc[0].wr_id, 2);
	/* resize keeps what is pending, in order; never below it */
	for (int i = 0; i < 6; i++) {
		w.wr_id = (uint64_t)(10 + i);
		CHECK_EQ_U(xs_cq_push(cq, &w, false), 0);
		if (i == 1)
			CHECK_EQ_U(ibv_poll_cq(cq, 1, wc), 1); /* the ring's head moves */
	}
	CHECK_EQ_U(ibv_resize_cq(cq, 4), EINVAL);
	CHECK_EQ_U(ibv_resize_cq(cq, 0), EINVAL);
	CHECK_EQ_U(ibv_resize_cq(cq, XS_MAX_CQE + 1), EINVAL);
	CHECK_EQ_U(ibv_resize_cq(cq, 100), 0);
	CHECK(cq->cqe >= 100);
	for (int i = 0; i < 20; i++)
		CHECK_EQ_U(xs_cq_push(cq, &w, false), 0);
	CHECK_EQ_U(ibv_poll_cq(cq, 5, wc), 5);
	for (int i = 0; i < 5; i++)
		CHECK_EQ_U(wc[i].wr_id, 11 + i);
	while (ibv_poll_cq(cq, 8, wc) > 0)
		;
	CHECK_EQ_U(ibv_resize_cq(cq, 5), 0);
	CHECK_EQ_U(cq->cqe, 8);
	/* armed: the next completion fires once */
	CHECK_EQ_U(ibv_req_notify_cq(cq, 0), 0);
	xs_cq_push(cq, &w, false);
	CHECK(readable(ch->fd));
	struct ibv_cq *got = NULL;

	CHECK_EQ_U(ibv_get_cq_event(ch, &got, &cctx), 0);
	CHECK(got == cq && cctx == &tag);
	ibv_ack_cq_events(cq, 1);
	CHECK_EQ_U(cq->comp_events_completed, 1);
	xs_cq_push(cq, &w, false);
	CHECK(!readable(ch->fd));
	/* solicited only: plain completions do not fire, solicited and errors do */
	CHECK_EQ_U(ibv_req_notify_cq(cq, 1), 0);
	xs_cq_push(cq, &w, false);
	CHECK(!readable(ch->fd));
	xs_cq_push(cq, &w, true);
	CHECK(readable(ch->fd));
	CHECK_EQ_U(ibv_get_cq_event(ch, &got, &cctx), 0);
	ibv_req_notify_cq(cq, 1);
	struct ibv_wc ew = w;

	ew.status = IBV_WC_WR_FLUSH_ERR;
	xs_cq_push(cq, &ew, false);
	CHECK(readable(ch->fd));
	CHECK_EQ_U(ibv_get_cq_event(ch, &got, &cctx), 0);
	ibv_ack_cq_events(cq, 2);
	/* non-blocking channel: EAGAIN */
	fcntl(ch->fd, F_SETFL, O_NONBLOCK);
	errno = 0;
	CHECK(ibv_get_cq_event(ch, &got, &cctx) < 0 && errno == EAGAIN);
	while (ibv_poll_cq(cq, 8, wc) > 0)
		;
	/* overflow: dropped, CQ_ERR on the async fd */
	ecq = ibv_create_cq(ctx, 2, NULL, NULL, 0);
	REQUIRE(ecq);
	for (int i = 0; i < ecq->cqe; i++)
		CHECK_EQ_U(xs_cq_push(ecq, &w, false), 0);
	CHECK(xs_cq_push(ecq, &w, false) < 0);
	CHECK(readable(ctx->async_fd));
	struct ibv_async_event ae;

	CHECK_EQ_U(ibv_get_async_event(ctx, &ae), 0);
	CHECK(ae.event_type == IBV_EVENT_CQ_ERR && ae.element.cq == ecq);
	ibv_ack_async_event(&ae);
	CHECK_EQ_U(ibv_destroy_cq(ecq), 0);
	/* an event whose CQ was destroyed before it was read is skipped */
	ibv_req_notify_cq(cq, 0);
	xs_cq_push(cq, &w, false);
	CHECK_EQ_U(ibv_destroy_cq(cq), 0);
	CHECK(ibv_get_cq_event(ch, &got, &cctx) < 0 && errno == EAGAIN);
	CHECK_EQ_U(ibv_destroy_comp_channel(ch), 0);
}

static int modify_state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = { .qp_state = s };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

static struct ibv_qp *make_qp(struct ibv_cq *cq, unsigned rsge)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 8, .max_recv_wr = 4, .max_send_sge = 2, .max_recv_sge = rsge },
		.qp_type = IBV_QPT_RC,
	};

	return ibv_create_qp(pd, &ia);
}

static void test_qp_states(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 8, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_UD,
	};
	struct ibv_mr *mr = ibv_reg_mr(pd, mem, 256, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge sge = { .addr = (uintptr_t)mem, .length = 64, .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 42, .sg_list = &sge, .num_sge = 1 }, *rbad = NULL;
	struct ibv_send_wr swr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1,
				   .opcode = IBV_WR_SEND }, *sbad = NULL;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	struct ibv_wc wc[4];
	struct ibv_qp *qp, *qp2;

	REQUIRE(cq && mr);
	errno = 0;
	CHECK(ibv_create_qp(pd, &ia) == NULL && errno == EOPNOTSUPP);
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_sge = XS_MAX_SGE + 1;
	CHECK(ibv_create_qp(pd, &ia) == NULL && errno == EINVAL);
	ia.cap.max_send_sge = 1;
	ia.cap.max_inline_data = XS_MAX_INLINE + 1;
	CHECK(ibv_create_qp(pd, &ia) == NULL && errno == EINVAL);
	ia.cap.max_inline_data = 16;
	qp = ibv_create_qp(pd, &ia);
	REQUIRE(qp);
	CHECK(ia.cap.max_inline_data >= 16);
	qp2 = make_qp(cq, 1);
	REQUIRE(qp2);
	CHECK(qp->qp_num != 0 && qp->qp_num != qp2->qp_num);
	CHECK_EQ_U(qp->state, IBV_QPS_RESET);
	CHECK(qp->pd == pd && qp->send_cq == cq && qp->context == ctx);
	CHECK_EQ_U(ibv_destroy_cq(cq), EBUSY);

	/* RESET: posting fails */
	CHECK_EQ_U(ibv_post_send(qp, &swr, &sbad), EINVAL);
	CHECK(sbad == &swr);
	CHECK_EQ_U(ibv_post_recv(qp, &rwr, &rbad), EINVAL);
	/* invalid transitions */
	CHECK_EQ_U(modify_state(qp, IBV_QPS_RTR), EINVAL);
	CHECK_EQ_U(modify_state(qp, IBV_QPS_RTS), EINVAL);
	CHECK_EQ_U(modify_state(qp, IBV_QPS_INIT), 0);
	CHECK_EQ_U(qp->state, IBV_QPS_INIT);
	CHECK_EQ_U(modify_state(qp, IBV_QPS_RTS), EINVAL);
	qa.qp_state = IBV_QPS_RTR;
	qa.cur_qp_state = IBV_QPS_RESET;
	CHECK_EQ_U(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_CUR_STATE), EINVAL);
	/* INIT: receives may be posted (inline ibv_post_recv -> context ops) */
	CHECK_EQ_U(ibv_post_recv(qp, &rwr, &rbad), 0);
	struct ibv_sge bad_sge = sge;

	bad_sge.lkey ^= 1;
	rwr.sg_list = &bad_sge;
	CHECK_EQ_U(ibv_post_recv(qp, &rwr, &rbad), EINVAL);
	rwr.sg_list = &sge;
	CHECK_EQ_U(ibv_post_send(qp, &swr, &sbad), EINVAL); /* not RTS */
	qa.qp_state = IBV_QPS_RTR;
	qa.max_dest_rd_atomic = 4;
	CHECK_EQ_U(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_MAX_DEST_RD_ATOMIC), 0);
	qa.qp_state = IBV_QPS_RTS;
	qa.max_rd_atomic = 3;
	CHECK_EQ_U(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_MAX_QP_RD_ATOMIC), 0);
	uint16_t ird, ord;

	xs_qp_read_limits(qp, &ird, &ord);
	CHECK(ird == 4 && ord == 3);
	CHECK_EQ_U(ibv_query_qp(qp, &qa, IBV_QP_STATE, &qia), 0);
	CHECK(qa.qp_state == IBV_QPS_RTS && qia.send_cq == cq && qia.qp_type == IBV_QPT_RC);
	CHECK(qa.max_rd_atomic == 3 && qa.max_dest_rd_atomic == 4);
	CHECK_EQ_U(modify_state(qp, IBV_QPS_INIT), EINVAL);
	CHECK_EQ_U(ibv_post_send(qp, &swr, &sbad), ENOTCONN); /* RTS without a connection */
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 0);
	/* ERR flushes the posted receive; later posts flush at once */
	CHECK_EQ_U(modify_state(qp, IBV_QPS_ERR), 0);
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 1);
	CHECK(wc[0].wr_id == 42 && wc[0].status == IBV_WC_WR_FLUSH_ERR &&
	      wc[0].opcode == IBV_WC_RECV && wc[0].qp_num == qp->qp_num);
	rwr.wr_id = 43;
	CHECK_EQ_U(ibv_post_recv(qp, &rwr, &rbad), 0);
	CHECK_EQ_U(ibv_post_send(qp, &swr, &sbad), 0);
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 2);
	CHECK(wc[0].wr_id == 43 && wc[0].status == IBV_WC_WR_FLUSH_ERR);
	CHECK(wc[1].wr_id == 7 && wc[1].status == IBV_WC_WR_FLUSH_ERR && wc[1].opcode == IBV_WC_SEND);
	/* to RESET drops without completions; then a fresh start */
	CHECK_EQ_U(modify_state(qp, IBV_QPS_RESET), 0);
	CHECK_EQ_U(modify_state(qp, IBV_QPS_INIT), 0);
	CHECK_EQ_U(ibv_post_recv(qp, &rwr, &rbad), 0);
	CHECK_EQ_U(modify_state(qp, IBV_QPS_RESET), 0);
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 0);
	/* queue depth: max_recv_wr */
	CHECK_EQ_U(modify_state(qp2, IBV_QPS_INIT), 0);
	for (int i = 0; i < 4; i++)
		CHECK_EQ_U(ibv_post_recv(qp2, &rwr, &rbad), 0);
	CHECK_EQ_U(ibv_post_recv(qp2, &rwr, &rbad), ENOMEM);

	CHECK_EQ_U(ibv_destroy_qp(qp), 0);
	CHECK_EQ_U(ibv_destroy_qp(qp2), 0);
	CHECK_EQ_U(ibv_destroy_cq(cq), 0);
	CHECK_EQ_U(ibv_dereg_mr(mr), 0);
}

/* The data path against the fake engine. */
/* The extended post API: a batch built with ibv_wr_* goes out as one
 * post; a mistake anywhere refuses the whole batch. */
static void test_qpx(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	static uint8_t buf[256];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp_init_attr_ex ax = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 3, .max_recv_wr = 2, .max_send_sge = 2, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE,
	};
	struct xs_conn c = { .rx_lock = PTHREAD_MUTEX_INITIALIZER };
	struct mpa_agreed ag = { .rev = 2, .ird = 1, .ord = 1 };
	struct ibv_wc wc[4];
	struct ibv_qp *plain, *qp;
	struct ibv_qp_ex *qx;

	REQUIRE(cq && mr);
	/* ops xsock has not (memory windows) are refused at creation; the
	 * RFC 7306 ones are accepted (refused at post time, see below) */
	ax.send_ops_flags |= IBV_QP_EX_WITH_BIND_MW;
	errno = 0;
	CHECK(ibv_create_qp_ex(ctx, &ax) == NULL && errno == EOPNOTSUPP);
	ax.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
	qp = ibv_create_qp_ex(ctx, &ax);
	REQUIRE(qp);
	plain = make_qp(cq, 1);
	REQUIRE(plain);
	CHECK(ibv_qp_to_qp_ex(plain) == NULL);
	qx = ibv_qp_to_qp_ex(qp);
	REQUIRE(qx && &qx->qp_base == qp);
	CHECK_EQ_U(modify_state(qp, IBV_QPS_INIT), 0);
	CHECK_EQ_U(xs_qp_bind_conn(qp, &c, &ag), 0);

	memcpy(buf, "hello", 5);
	ibv_wr_start(qx);
	qx->wr_id = 7;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 5);
	qx->wr_id = 8;
	ibv_wr_rdma_write(qx, 0x77, 0x1000);
	static char inl[] = "inl";

	ibv_wr_set_inline_data(qx, inl, 3);
	CHECK_EQ_U(ibv_wr_complete(qx), 0);
	CHECK(c.nsend == 1 && c.ntagged == 1 && c.last_stag == 0x77 && c.last_to == 0x1000 &&
	      c.len == 3);
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 2);
	CHECK(wc[0].wr_id == 7 && wc[0].opcode == IBV_WC_SEND && wc[1].wr_id == 8 &&
	      wc[1].opcode == IBV_WC_RDMA_WRITE && wc[1].status == IBV_WC_SUCCESS);

	/* refused as a whole: an op the QP was not created for, too many WRs,
	 * inline data past the limit, an SGE list longer than max_send_sge */
	static char big[XS_MAX_INLINE + 1];
	struct ibv_sge three[3] = { { (uintptr_t)buf, 1, mr->lkey }, { (uintptr_t)buf, 1, mr->lkey },
				    { (uintptr_t)buf, 1, mr->lkey } };

	ibv_wr_start(qx);
	ibv_wr_send(qx);
	ibv_wr_rdma_read(qx, 1, 0);
	CHECK_EQ_U(ibv_wr_complete(qx), EOPNOTSUPP);
	ibv_wr_start(qx);
	for (int i = 0; i < 4; i++)
		ibv_wr_send(qx);
	CHECK_EQ_U(ibv_wr_complete(qx), ENOMEM);
	ibv_wr_start(qx);
	ibv_wr_send(qx);
	ibv_wr_set_inline_data(qx, big, sizeof(big));
	CHECK_EQ_U(ibv_wr_complete(qx), EINVAL);
	ibv_wr_start(qx);
	ibv_wr_send(qx);
	ibv_wr_set_sge_list(qx, 3, three);
	CHECK_EQ_U(ibv_wr_complete(qx), EINVAL);
	ibv_wr_start(qx);
	ibv_wr_send(qx);
	ibv_wr_abort(qx);
	CHECK(c.nsend == 1 && c.ntagged == 1); /* none of those went out */
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 0);

	CHECK_EQ_U(ibv_destroy_qp(qp), 0);
	CHECK_EQ_U(ibv_destroy_qp(plain), 0);
	CHECK_EQ_U(ibv_dereg_mr(mr), 0);
	CHECK_EQ_U(ibv_destroy_cq(cq), 0);
}

static void test_qp_conn(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_qp *qp = make_qp(cq, 2);
	static uint8_t buf[4096];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	struct xs_conn c = { .rx_lock = PTHREAD_MUTEX_INITIALIZER };
	struct mpa_agreed ag = { .rev = 2, .ird = 2, .ord = 1 };
	struct ibv_sge sg2[2] = {
		{ .addr = (uintptr_t)buf, .length = 4, .lkey = mr->lkey },
		{ .addr = (uintptr_t)buf + 100, .length = 8, .lkey = mr->lkey },
	};
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = sg2, .num_sge = 2 }, *rbad;
	struct ibv_send_wr swr = { .wr_id = 2, .sg_list = sg2, .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED }, *sbad;
	struct ibv_wc wc[4];
	struct xs_err e;

	REQUIRE(cq && qp && mr);
	CHECK_EQ_U(modify_state(qp, IBV_QPS_INIT), 0);
	CHECK_EQ_U(ibv_post_recv(qp, &rwr, &rbad), 0); /* before the connection */
	CHECK_EQ_U(xs_qp_bind_conn(qp, &c, &ag), 0);
	CHECK_EQ_U(qp->state, IBV_QPS_RTS);
	CHECK(c.ops && c.qp);

	/* Send with SE and a signaled completion */
	memcpy(buf, "ping", 4);
	CHECK_EQ_U(ibv_post_send(qp, &swr, &sbad), 0);
	CHECK(c.nsend == 1 && c.last_op == RDMAP_OP_SEND_SE && c.len == 4 &&
	      memcmp(c.data, "ping", 4) == 0);
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 1);
	CHECK(wc[0].wr_id == 2 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_SEND);
	/* immediate data (RFC 7306) is not agreed on this connection */
	swr.opcode = IBV_WR_SEND_WITH_IMM;
	CHECK_EQ_U(ibv_post_send(qp, &swr, &sbad), EOPNOTSUPP);
	CHECK(sbad == &swr);
	/* inline: no lkey needed, size checked */
	char tmp[8] = "inline!";
	struct ibv_sge isg = { .addr = (uintptr_t)tmp, .length = 8, .lkey = 0 };

	swr.opcode = IBV_WR_RDMA_WRITE;
	swr.sg_list = &isg;
	swr.send_flags = IBV_SEND_INLINE;
	swr.wr.rdma.rkey = 0x1234;
	swr.wr.rdma.remote_addr = 0x5000;
	CHECK_EQ_U(ibv_post_send(qp, &swr, &sbad), 0);
	CHECK(c.ntagged == 1 && c.last_stag == 0x1234 && c.last_to == 0x5000 && c.len == 8);
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 0); /* unsignaled */

	/* a two-SGE receive gets a 12-octet Send scattered */
	CHECK_EQ_U(stub_untagged(&c, RDMAP_OP_SEND, 0, 0, "abcdEFGHIJKL", 12, &e), 0);
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 1);
	CHECK(wc[0].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_RECV &&
	      wc[0].byte_len == 12);
	CHECK(memcmp(buf, "abcd", 4) == 0 && memcmp(buf + 100, "EFGHIJKL", 8) == 0);
	/* a Send with no receive posted is the engine's DDP error */
	CHECK(stub_untagged(&c, RDMAP_OP_SEND, 0, 0, "x", 1, &e) < 0);
	c.msn[0]--;

	/* Send with Invalidate of one of our MRs */
	struct ibv_mr *victim = ibv_reg_mr(pd, buf + 2048, 64, IBV_ACCESS_LOCAL_WRITE |
					   IBV_ACCESS_REMOTE_WRITE);
	uint8_t *dst;

	rwr.num_sge = 1;
	rwr.wr_id = 3;
	CHECK_EQ_U(ibv_post_recv(qp, &rwr, &rbad), 0);
	CHECK_EQ_U(stub_untagged(&c, RDMAP_OP_SEND_INV, 0, victim->rkey, "zz", 2, &e), 0);
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 1);
	CHECK(wc[0].wr_id == 3 && (wc[0].wc_flags & IBV_WC_WITH_INV) &&
	      wc[0].invalidated_rkey == victim->rkey);
	CHECK(xs_mr_resolve(pd, victim->rkey, (uintptr_t)buf + 2048, 1, XS_ACCESS_REMOTE_WRITE,
			    &dst, &e) < 0);

	/* RDMA Write from the peer */
	CHECK_EQ_U(stub_tagged(&c, RDMAP_OP_WRITE, mr->rkey, (uintptr_t)buf + 200, "WR", 2, &e), 0);
	CHECK(memcmp(buf + 200, "WR", 2) == 0);
	CHECK(stub_tagged(&c, RDMAP_OP_WRITE, mr->rkey, (uintptr_t)buf + 4095, "WR", 2, &e) < 0);
	CHECK(e.layer == XS_LAYER_DDP && e.etype == 1 && e.ecode == 1);

	/* RDMA Read: request out, response into the sink, completion */
	struct ibv_sge rsg = { .addr = (uintptr_t)buf + 300, .length = 5, .lkey = mr->lkey };

	swr.opcode = IBV_WR_RDMA_READ;
	swr.sg_list = &rsg;
	swr.wr_id = 4;
	swr.send_flags = IBV_SEND_SIGNALED;
	swr.wr.rdma.rkey = 0xabcd01;
	swr.wr.rdma.remote_addr = 0x9000;
	CHECK_EQ_U(ibv_post_send(qp, &swr, &sbad), 0);
	CHECK(c.nreadreq == 1 && c.last_rr.sink_stag == mr->lkey &&
	      c.last_rr.sink_to == (uintptr_t)buf + 300 && c.last_rr.size == 5 &&
	      c.last_rr.src_stag == 0xabcd01 && c.last_rr.src_to == 0x9000);
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 0);
	CHECK(stub_tagged(&c, RDMAP_OP_READ_RESP, mr->rkey, (uintptr_t)buf + 301, "hello", 5, &e) < 0);
	CHECK(stub_tagged(&c, RDMAP_OP_READ_RESP, mr->rkey ^ 1, (uintptr_t)buf + 300, "hello", 5, &e) < 0);
	CHECK(e.layer == XS_LAYER_DDP && e.etype == 1 && e.ecode == 0);
	CHECK_EQ_U(stub_tagged(&c, RDMAP_OP_READ_RESP, mr->rkey, (uintptr_t)buf + 300, "hello", 5, &e), 0);
	CHECK(memcmp(buf + 300, "hello", 5) == 0);
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 1);
	CHECK(wc[0].wr_id == 4 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_RDMA_READ &&
	      wc[0].byte_len == 5);
	/* no Read outstanding: a Read Response is an invalid STag */
	CHECK(stub_tagged(&c, RDMAP_OP_READ_RESP, mr->rkey, (uintptr_t)buf + 300, "hello", 5, &e) < 0);

	/* the peer reads from us */
	struct rdmap_read_req rr = { .sink_stag = 0x777, .sink_to = 0x10, .size = 16,
				     .src_stag = mr->rkey, .src_to = (uintptr_t)buf + 8 };
	uint8_t rrb[RDMAP_READ_REQ_LEN];

	rdmap_read_req_encode(&rr, rrb);
	for (int i = 0; i < 3; i++) /* more than IRD: the buffers are re-posted */
		CHECK_EQ_U(stub_untagged(&c, RDMAP_OP_READ_REQ, 1, 0, rrb, sizeof(rrb), &e), 0);
	CHECK(c.nreadresp == 3 && c.resp_sink == 0x777 && c.resp_to == 0x10 && c.resp_len == 16 &&
	      c.resp_src == buf + 8);

	/* a local protection error completes the WR and fails the QP */
	struct ibv_recv_wr r5 = { .wr_id = 5, .sg_list = sg2, .num_sge = 1 };

	CHECK_EQ_U(ibv_post_recv(qp, &r5, &rbad), 0);
	struct ibv_sge badsg = { .addr = (uintptr_t)buf, .length = 4, .lkey = mr->lkey ^ 0x80 };

	swr.opcode = IBV_WR_SEND;
	swr.sg_list = &badsg;
	swr.wr_id = 6;
	swr.send_flags = 0;
	CHECK_EQ_U(ibv_post_send(qp, &swr, &sbad), 0);
	CHECK_EQ_U(qp->state, IBV_QPS_ERR);
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 2);
	CHECK(wc[0].wr_id == 6 && wc[0].status == IBV_WC_LOC_PROT_ERR);
	CHECK(wc[1].wr_id == 5 && wc[1].status == IBV_WC_WR_FLUSH_ERR);
	/* the engine's failed upcall afterwards is harmless */
	struct xs_err closed = { XS_LAYER_LLP, 0, 0x01 };

	stub_fail(&c, false, &closed);
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 0);
	CHECK_EQ_U(ibv_destroy_qp(qp), 0);
	CHECK(c.disconnected == 1 && c.puts == 1);
	CHECK_EQ_U(ibv_dereg_mr(victim), 0);

	/* a bad Read Request: Terminate with the Read Request header, QP fails */
	struct xs_conn c2 = { .rx_lock = PTHREAD_MUTEX_INITIALIZER };

	qp = make_qp(cq, 1);
	REQUIRE(qp);
	CHECK_EQ_U(xs_qp_bind_conn(qp, &c2, &ag), 0);
	rr.src_stag = 0x12345; /* not ours */
	rdmap_read_req_encode(&rr, rrb);
	CHECK_EQ_U(stub_untagged(&c2, RDMAP_OP_READ_REQ, 1, 0, rrb, sizeof(rrb), &e), 0);
	CHECK(c2.nterm == 1 && c2.nreadresp == 0);
	CHECK(c2.last_term.cause.layer == XS_LAYER_RDMAP && c2.last_term.cause.etype == 1 &&
	      c2.last_term.cause.ecode == 0);
	CHECK(c2.last_term.r && c2.last_term.rdmap_hdr_len == RDMAP_READ_REQ_LEN &&
	      memcmp(c2.last_term.rdmap_hdr, rrb, RDMAP_READ_REQ_LEN) == 0);
	CHECK(c2.last_term.d && c2.last_term.ddp_hdr_len == DDP_UNTAGGED_HDR_LEN);
	CHECK_EQ_U(qp->state, IBV_QPS_ERR);
	CHECK_EQ_U(c2.disconnected, 1); /* FIN after the Terminate */
	/* its QP_FATAL is left unread: destroying the QP drops it (the next
	 * event read below must not name this freed QP) */
	CHECK_EQ_U(ibv_destroy_qp(qp), 0);

	/* the peer's Terminate for our Read: REM_ACCESS_ERR on that Read */
	struct xs_conn c3 = { .rx_lock = PTHREAD_MUTEX_INITIALIZER };
	struct rdmap_term t = { .cause = { XS_LAYER_RDMAP, 1, 0x00 } };
	uint8_t tb[RDMAP_TERM_MAX_LEN];
	ssize_t tl;

	qp = make_qp(cq, 1);
	REQUIRE(qp);
	CHECK_EQ_U(xs_qp_bind_conn(qp, &c3, &ag), 0);
	swr.opcode = IBV_WR_RDMA_READ;
	swr.sg_list = &rsg;
	swr.wr_id = 8;
	CHECK_EQ_U(ibv_post_send(qp, &swr, &sbad), 0);
	swr.wr_id = 9; /* beyond ORD 1 this would wait: post nothing more */
	tl = rdmap_term_encode(&t, tb, sizeof(tb));
	REQUIRE(tl > 0);
	CHECK_EQ_U(stub_untagged(&c3, RDMAP_OP_TERMINATE, 2, 0, tb, (uint32_t)tl, &e), 0);
	struct xs_err tc = t.cause;

	stub_fail(&c3, false, &tc);
	CHECK_EQ_U(qp->state, IBV_QPS_ERR);
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 1);
	CHECK(wc[0].wr_id == 8 && wc[0].status == IBV_WC_REM_ACCESS_ERR);
	struct ibv_async_event ae;

	CHECK_EQ_U(ibv_get_async_event(ctx, &ae), 0);
	CHECK(ae.event_type == IBV_EVENT_QP_FATAL && ae.element.qp == qp);
	ibv_ack_async_event(&ae);
	CHECK_EQ_U(qp->events_completed, 1);
	CHECK_EQ_U(ibv_destroy_qp(qp), 0);

	CHECK_EQ_U(ibv_destroy_cq(cq), 0);
	CHECK_EQ_U(ibv_dereg_mr(mr), 0);
}

/* A chain of Writes and Sends leaves corked (one flush, one sendmsg in the
 * engine); its completions come after the flush, in WR order, and a failed
 * flush completes every WR of the chain with a flush error. */
static void test_qp_cork(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_qp *qp = make_qp(cq, 2);
	static uint8_t buf[256];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	struct xs_conn c = { .rx_lock = PTHREAD_MUTEX_INITIALIZER };
	struct mpa_agreed ag = { .rev = 2, .ird = 2, .ord = 2 };
	uint32_t word = 0x11223344;
	struct ibv_sge dsg = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	struct ibv_sge msg = { .addr = (uintptr_t)&word, .length = 4 };
	struct ibv_send_wr send = { .wr_id = 11, .sg_list = &msg, .num_sge = 1, .opcode = IBV_WR_SEND,
				    .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED };
	struct ibv_send_wr write = { .wr_id = 10, .next = &send, .sg_list = &dsg, .num_sge = 1,
				     .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	struct ibv_wc wc[4];

	REQUIRE(cq && qp && mr);
	write.wr.rdma.rkey = 0x99;
	write.wr.rdma.remote_addr = 0x1000;
	CHECK_EQ_U(modify_state(qp, IBV_QPS_INIT), 0);
	CHECK_EQ_U(xs_qp_bind_conn(qp, &c, &ag), 0);
	CHECK_EQ_U(ibv_post_send(qp, &write, &bad), 0);
	CHECK(c.ncork == 1 && c.nflush == 1 && !c.corked && c.ntagged == 1 && c.nsend == 1);
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 2);
	CHECK(wc[0].wr_id == 10 && wc[0].status == IBV_WC_SUCCESS && wc[0].byte_len == 64);
	CHECK(wc[1].wr_id == 11 && wc[1].status == IBV_WC_SUCCESS && wc[1].opcode == IBV_WC_SEND);
	/* one WR alone, or a chain holding a Read, is not corked */
	send.next = NULL;
	CHECK_EQ_U(ibv_post_send(qp, &send, &bad), 0);
	CHECK_EQ_U(c.ncork, 1);
	struct ibv_send_wr rd = { .wr_id = 12, .sg_list = &dsg, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ };
	send.next = &rd;
	CHECK_EQ_U(ibv_post_send(qp, &send, &bad), 0);
	CHECK_EQ_U(c.ncork, 1);
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 2); /* the two Sends; the Read is outstanding */
	/* a bad WR after a good one in a corked chain: the good one still
	 * goes out (one SGE too many is refused only when its turn comes);
	 * its completion waits behind the outstanding Read (WR order) */
	send.next = &write;
	write.next = NULL;
	write.num_sge = 3;
	CHECK_EQ_U(ibv_post_send(qp, &send, &bad), EINVAL);
	CHECK(bad == &write && c.ncork == 2 && c.nflush == 2);
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 0);
	write.num_sge = 1;
	/* the flush fails: both WRs flush, the QP is in error; the Read and
	 * the Send waiting behind it flush first */
	write.opcode = IBV_WR_RDMA_WRITE;
	c.fail_flush = 1;
	CHECK_EQ_U(ibv_post_send(qp, &send, &bad), 0);
	CHECK_EQ_U(qp->state, IBV_QPS_ERR);
	int n = ibv_poll_cq(cq, 4, wc);
	CHECK(n == 4 && wc[0].wr_id == 12 && wc[0].opcode == IBV_WC_RDMA_READ &&
	      wc[1].wr_id == 11 && wc[2].wr_id == 11 && wc[3].wr_id == 10);
	for (int i = 0; i < n; i++)
		CHECK(wc[i].status == IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ_U(ibv_destroy_qp(qp), 0);
	CHECK_EQ_U(ibv_destroy_cq(cq), 0);
	CHECK_EQ_U(ibv_dereg_mr(mr), 0);
}

/* An invalid setting keeps its default (it is not taken for 0, which
 * means "never" for the timeouts); a valid one is taken. */
static void test_config(void)
{
	const struct xs_config *cfg;

	setenv("XSOCK_TX_TIMEOUT_MS", "abc", 1);
	setenv("XSOCK_LINGER_MS", "-1", 1);
	setenv("XSOCK_RNR_MS", "70000", 1);
	setenv("XSOCK_CLASSIFY_MS", "0", 1);
	setenv("XSOCK_ZC_MIN", "1024", 1);
	cfg = xs_config();
	CHECK_EQ_U(cfg->tx_timeout_ms, 30000);
	CHECK_EQ_U(cfg->linger_ms, 1000);
	CHECK_EQ_U(cfg->rnr_ms, 1000);
	CHECK_EQ_U(cfg->classify_ms, 0);
	CHECK_EQ_U(cfg->zc_min, 1024);
	/* the defaults xsock-run(1) and libiwarp(7) document, as numbers: a
	 * macro compared with itself would follow any change of the code */
	CHECK_EQ_U(cfg->fin_delay_ms, 200);
	CHECK_EQ_U(cfg->settle_ms, 100);
	CHECK_EQ_U(cfg->event_spin_us, 40);
	CHECK_EQ_U(cfg->mpa_rev, 2);
	/* the table's (xsock-stat, xsock.conf) and the code's are the same */
	CHECK_EQ_U(strtoul(xs_setting_rows[XS_SET_FIN_DELAY_MS].dflt, NULL, 10), 200);
	CHECK_EQ_U(strtoul(xs_setting_rows[XS_SET_MPA_SETTLE_MS].dflt, NULL, 10), 100);
	CHECK_EQ_U(XS_FIN_DELAY_MS, 200);
	CHECK_EQ_U(XS_SETTLE_MS, 100);
	/* libxsock's view: this process's table, which an offer made after
	 * its first use does not replace; another release's size gets none */
	static struct xs_settings other = XS_SETTINGS_INIT;
	CHECK(xsock_priv_settings(NULL, sizeof(struct xs_settings)) == xs_settings());
	CHECK(xsock_priv_settings(&other, sizeof(struct xs_settings)) == xs_settings());
	CHECK(xsock_priv_settings(NULL, sizeof(struct xs_settings) + 1) == NULL);
	CHECK_EQ_U(xs_settings_num(xs_settings(), XS_SET_RNR_MS), 1000);
}

int main(void)
{
	xs_test_seed(1);
	test_config(); /* first: the configuration is read once */
	test_device();
	pd = ibv_alloc_pd(ctx);
	REQUIRE(pd);
	test_mr();
	test_stags();
	test_cq();
	test_qp_states();
	test_qp_conn();
	test_qpx();
	test_qp_cork();
	CHECK_EQ_U(ibv_dealloc_pd(pd), 0);
	CHECK_EQ_U(ibv_close_device(ctx), 0);
	return xs_test_result();
}
