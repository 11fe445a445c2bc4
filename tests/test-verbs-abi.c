/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* libiwarp.so as a verbs application sees it: exported entry points plus
 * the static inline calls of <infiniband/verbs.h> (ibv_query_port,
 * ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq, ibv_query_device_ex) that
 * jump through the context we hand out. */
#include "config.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <string.h>

#include "tests/xs_test.h"

int main(void)
{
	static char buf[4096];
	struct ibv_device **l;
	struct ibv_context *ctx;
	struct ibv_port_attr pa;
	struct ibv_device_attr_ex dax;
	struct ibv_comp_channel *ch;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq, *ecq;
	struct ibv_qp *qp;
	struct ibv_wc wc[4];
	void *cctx;
	int n;

	l = ibv_get_device_list(&n);
	REQUIRE(l && n == 2 && l[2] == NULL); /* xsock0, then xsock_roce0 */
	CHECK(strcmp(ibv_get_device_name(l[0]), "xsock0") == 0);
	ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	REQUIRE(ctx);
	CHECK_EQ_U(ibv_query_port(ctx, 1, &pa), 0);
	CHECK_EQ_U(pa.state, IBV_PORT_ACTIVE);
	CHECK_EQ_U(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
	CHECK_EQ_U(ibv_query_device_ex(ctx, NULL, &dax), 0);
	CHECK(strcmp(dax.orig_attr.fw_ver, "xsock " PACKAGE_VERSION) == 0);

	ch = ibv_create_comp_channel(ctx);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, ch, 0);
	REQUIRE(ch && pd && cq);
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	REQUIRE(mr);
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	qp = ibv_create_qp(pd, &ia);
	REQUIRE(qp);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT };

	CHECK_EQ_U(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 11, .sg_list = &sge, .num_sge = 1 }, *bad;

	CHECK_EQ_U(ibv_post_recv(qp, &rwr, &bad), 0);
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 0);
	CHECK_EQ_U(ibv_req_notify_cq(cq, 0), 0);
	a.qp_state = IBV_QPS_ERR;
	CHECK_EQ_U(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };

	CHECK_EQ_U(poll(&p, 1, 1000), 1);
	CHECK_EQ_U(ibv_get_cq_event(ch, &ecq, &cctx), 0);
	CHECK(ecq == cq);
	ibv_ack_cq_events(cq, 1);
	CHECK_EQ_U(ibv_poll_cq(cq, 4, wc), 1);
	CHECK(wc[0].wr_id == 11 && wc[0].status == IBV_WC_WR_FLUSH_ERR);

	CHECK_EQ_U(ibv_destroy_qp(qp), 0);
	CHECK_EQ_U(ibv_dereg_mr(mr), 0);
	CHECK_EQ_U(ibv_destroy_cq(cq), 0);
	CHECK_EQ_U(ibv_destroy_comp_channel(ch), 0);
	CHECK_EQ_U(ibv_dealloc_pd(pd), 0);
	CHECK_EQ_U(ibv_close_device(ctx), 0);
	return xs_test_result();
}
