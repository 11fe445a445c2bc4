/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The RoCE personality of the device (verbs/verbs_roce_dev.c): both
 * devices listed with their types, xsock_roce0's port, its RoCE v2 GID
 * table against the host's addresses (getifaddrs), the empty slots, the
 * MTU rule (rxe's), the refresh in a network namespace of its own, GIDs as
 * addresses, XSOCK_TRANSPORT choosing the CM's device, and PD/MR/CQ/QP/SRQ
 * on a xsock_roce0 context (the verbs objects compiled in over the fake
 * engine, as tests/test-verbs-objects). */
#include "config.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/xs_conn_stub.h"
#include "tests/xs_test.h"
#include "verbs/verbs_priv.h"
#include "verbs/xs_roce_dev.h"

static struct ibv_context *ctx, *ictx; /* xsock_roce0, xsock0 */

/* XSOCK_TRANSPORT in a child (the settings are read once a process):
 * whether the CM's default context is xsock_roce0. */
static int default_is_roce(const char *transport)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		if (transport)
			setenv("XSOCK_TRANSPORT", transport, 1);
		else
			unsetenv("XSOCK_TRANSPORT");
		_exit(xs_default_context() ? xs_ctx_is_roce(xs_default_context()) : 2);
	}
	REQUIRE(pid > 0);
	REQUIRE(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void test_list(void)
{
	struct ibv_device **l;
	uint64_t g0, g1, x;
	int n = -1;

	l = ibv_get_device_list(&n);
	REQUIRE(l);
	CHECK_EQ_U(n, 2);
	REQUIRE(l[0] && l[1]);
	CHECK(l[2] == NULL);
	CHECK(strcmp(ibv_get_device_name(l[0]), "xsock0") == 0); /* first, as before */
	CHECK_EQ_U(l[0]->node_type, IBV_NODE_RNIC);
	CHECK_EQ_U(l[0]->transport_type, IBV_TRANSPORT_IWARP);
	CHECK(strcmp(ibv_get_device_name(l[1]), "xsock_roce0") == 0);
	CHECK_EQ_U(l[1]->node_type, IBV_NODE_CA);
	CHECK_EQ_U(l[1]->transport_type, IBV_TRANSPORT_IB);
	CHECK(strcmp(l[1]->dev_name, "uverbs_xsock_roce0") == 0);
	CHECK(strcmp(l[1]->ibdev_path, "/sys/class/infiniband/xsock_roce0") == 0);
	CHECK_EQ_U(ibv_get_device_index(l[0]), 0);
	CHECK_EQ_U(ibv_get_device_index(l[1]), 1);
	/* one identity, two GUIDs one bit apart */
	g0 = be64toh(ibv_get_device_guid(l[0]));
	g1 = be64toh(ibv_get_device_guid(l[1]));
	x = g0 ^ g1;
	CHECK(x != 0 && (x & (x - 1)) == 0);
	ictx = ibv_open_device(l[0]);
	ctx = ibv_open_device(l[1]);
	ibv_free_device_list(l);
	REQUIRE(ctx && ictx);
	CHECK(ctx->device != ictx->device);
	CHECK(xs_ctx_is_roce(ctx));
	CHECK(!xs_ctx_is_roce(ictx));
	CHECK(!xs_ctx_is_roce(NULL));

	/* the CM's device: xsock0 unless XSOCK_TRANSPORT=roce */
	CHECK_EQ_U(default_is_roce(NULL), 0);
	CHECK_EQ_U(default_is_roce("iwarp"), 0);
	CHECK_EQ_U(default_is_roce("roce"), 1);
	CHECK_EQ_U(default_is_roce("rocev2"), 0); /* invalid: the default, said once */
}

static void test_device(void)
{
	struct ibv_device_attr da, ia;
	struct ibv_device_attr_ex dax;
	__be16 pkey;

	CHECK_EQ_U(ibv_query_device(ctx, &da), 0);
	CHECK_EQ_U(ibv_query_device(ictx, &ia), 0);
	CHECK_EQ_U(da.atomic_cap, IBV_ATOMIC_HCA);
	CHECK_EQ_U(da.max_qp_rd_atom, XS_MAX_IRD);
	CHECK_EQ_U(da.max_qp_init_rd_atom, XS_MAX_ORD);
	CHECK_EQ_U(da.max_qp_rd_atom, ia.max_qp_rd_atom);
	CHECK_EQ_U(da.max_qp_init_rd_atom, ia.max_qp_init_rd_atom);
	CHECK_EQ_U(da.vendor_id, XS_ROCE_VENDOR_ID);
	CHECK_EQ_U(da.vendor_part_id, XS_ROCE_VENDOR_PART_ID);
	CHECK_EQ_U(ia.vendor_id, XS_VENDOR_ID);
	CHECK_EQ_U(da.node_guid, ibv_get_device_guid(ctx->device));
	CHECK_EQ_U(ia.node_guid, ibv_get_device_guid(ictx->device));
	CHECK(da.node_guid != ia.node_guid);
	CHECK_EQ_U(da.phys_port_cnt, 1);
	CHECK_EQ_U(da.max_pkeys, 1);
	memset(&dax, 0xaa, sizeof(dax));
	CHECK_EQ_U(ibv_query_device_ex(ctx, NULL, &dax), 0);
	CHECK_EQ_U(dax.orig_attr.vendor_id, XS_ROCE_VENDOR_ID);
	CHECK_EQ_U(dax.orig_attr.node_guid, da.node_guid);
	CHECK_EQ_U(dax.phys_port_cnt_ex, 1);
	CHECK_EQ_U(ibv_query_pkey(ctx, 1, 0, &pkey), 0);
	CHECK_EQ_U(be16toh(pkey), 0xffff);
	CHECK(ibv_query_pkey(ctx, 1, 1, &pkey) < 0);
	CHECK(ibv_query_pkey(ctx, 2, 0, &pkey) < 0);
}

static bool mtu_valid(enum ibv_mtu m)
{
	return m >= IBV_MTU_256 && m <= IBV_MTU_4096;
}

static void test_port(void)
{
	struct ibv_port_attr pa, ipa;

	memset(&pa, 0xaa, sizeof(pa));
	CHECK_EQ_U(ibv_query_port(ctx, 1, &pa), 0);
	CHECK_EQ_U(pa.state, IBV_PORT_ACTIVE);
	CHECK_EQ_U(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
	CHECK_EQ_U(pa.max_mtu, IBV_MTU_4096);
	CHECK(mtu_valid(pa.active_mtu));
	CHECK(pa.gid_tbl_len >= 0 && pa.gid_tbl_len <= XS_ROCE_GID_MAX);
	CHECK_EQ_U(pa.pkey_tbl_len, 1);
	CHECK_EQ_U(pa.port_cap_flags, IBV_PORT_CM_SUP);
	CHECK_EQ_U(pa.lid, 0);
	CHECK_EQ_U(pa.max_msg_sz, 1u << 31);
	CHECK_EQ_U(pa.phys_state, 5);
	CHECK(pa.active_width != 0 && pa.active_speed != 0);
	CHECK_EQ_U(pa.flags, 0);
	CHECK(ibv_query_port(ctx, 2, &pa) != 0);
	CHECK(ibv_query_port(ctx, 0, &pa) != 0);
	/* xsock0's stays as it was */
	CHECK_EQ_U(ibv_query_port(ictx, 1, &ipa), 0);
	CHECK_EQ_U(ipa.gid_tbl_len, 1);
	CHECK_EQ_U(ipa.active_mtu, IBV_MTU_1024);
}

/* The GIDs getifaddrs says the table must have, in table order. */
struct want {
	union ibv_gid gid[XS_ROCE_GID_MAX];
	unsigned ifindex[XS_ROCE_GID_MAX];
	unsigned n;
	int lo_idx; /* ::ffff:127.0.0.1, or -1 */
	unsigned lo_if;
};

/* One interface's up addresses of family fam (IPv4 by label: "eth0:1"). */
static void want_if(struct want *w, struct ifaddrs *all, struct if_nameindex *k, int fam)
{
	size_t len = strlen(k->if_name);

	for (struct ifaddrs *i = all; i; i = i->ifa_next) {
		struct sockaddr_in *sin = (void *)i->ifa_addr;
		struct sockaddr_in6 *sin6 = (void *)i->ifa_addr;
		union ibv_gid *g = &w->gid[w->n];

		if (!i->ifa_addr || i->ifa_addr->sa_family != fam || !(i->ifa_flags & IFF_UP) ||
		    strncmp(i->ifa_name, k->if_name, len) ||
		    (i->ifa_name[len] && i->ifa_name[len] != ':') || w->n == XS_ROCE_GID_MAX)
			continue;
		memset(g, 0, sizeof(*g));
		if (fam == AF_INET) {
			g->raw[10] = g->raw[11] = 0xff;
			memcpy(g->raw + 12, &sin->sin_addr, 4);
			if (sin->sin_addr.s_addr == htonl(INADDR_LOOPBACK) && w->lo_idx < 0) {
				w->lo_idx = (int)w->n;
				w->lo_if = k->if_index;
			}
		} else {
			memcpy(g->raw, &sin6->sin6_addr, 16);
		}
		w->ifindex[w->n++] = k->if_index;
	}
}

static void want_load(struct want *w)
{
	struct ifaddrs *all;
	struct if_nameindex *ni;

	memset(w, 0, sizeof(*w));
	w->lo_idx = -1;
	REQUIRE(getifaddrs(&all) == 0);
	ni = if_nameindex();
	REQUIRE(ni);
	for (struct if_nameindex *k = ni; k->if_index; k++)
		for (int f = 0; f < 2; f++)
			want_if(w, all, k, f ? AF_INET6 : AF_INET);
	if_freenameindex(ni);
	freeifaddrs(all);
}

static struct ibv_gid_entry tab[XS_ROCE_GID_MAX + 1];

static void test_gids(void)
{
	static struct want w;
	struct ibv_port_attr pa;
	struct ibv_gid_entry e;
	struct sockaddr_storage ss;
	enum xs_gid_type_sysfs gt;
	union ibv_gid gid;
	unsigned n;
	ssize_t got;

	/* the table may be up to a second old: a host whose addresses change
	 * meanwhile (another test's tap) gets two more readings */
	for (int tries = 0;; tries++) {
		want_load(&w);
		CHECK_EQ_U(ibv_query_port(ctx, 1, &pa), 0);
		n = (unsigned)pa.gid_tbl_len;
		if (n == w.n && ibv_query_gid_table(ctx, tab, XS_ROCE_GID_MAX, 0) == (ssize_t)n) {
			unsigned i = 0;

			while (i < n && memcmp(&tab[i].gid, &w.gid[i], sizeof(gid)) == 0)
				i++;
			if (i == n)
				break;
		}
		if (tries == 2) {
			CHECK_EQ_U(n, w.n);
			CHECK(!"the GID table is the host's addresses");
			return;
		}
		usleep(1100 * 1000);
	}
	for (unsigned i = 0; i < n; i++) {
		CHECK_EQ_U(ibv_query_gid(ctx, 1, (int)i, &gid), 0);
		CHECK(memcmp(&gid, &w.gid[i], sizeof(gid)) == 0);
		gt = 7;
		CHECK_EQ_U(ibv_query_gid_type(ctx, 1, i, &gt), 0);
		CHECK_EQ_U(gt, XS_GID_TYPE_SYSFS_ROCE_V2);
		memset(&e, 0xaa, sizeof(e));
		CHECK_EQ_U(ibv_query_gid_ex(ctx, 1, i, &e, 0), 0);
		CHECK(memcmp(&e.gid, &w.gid[i], sizeof(gid)) == 0);
		CHECK_EQ_U(e.gid_index, i);
		CHECK_EQ_U(e.port_num, 1);
		CHECK_EQ_U(e.gid_type, IBV_GID_TYPE_ROCE_V2);
		CHECK_EQ_U(e.ndev_ifindex, w.ifindex[i]);
		CHECK_EQ_U(xs_roce_gid_addr(i, &ss), 0);
	}
	/* 127.0.0.1 as ::ffff:127.0.0.1 on lo (unless lo is down here) */
	if (w.lo_idx >= 0) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
		char txt[INET6_ADDRSTRLEN];

		CHECK_EQ_U(ibv_query_gid(ctx, 1, w.lo_idx, &gid), 0);
		CHECK(inet_ntop(AF_INET6, gid.raw, txt, sizeof(txt)) != NULL);
		CHECK(strcmp(txt, "::ffff:127.0.0.1") == 0);
		CHECK_EQ_U(ibv_query_gid_ex(ctx, 1, (uint32_t)w.lo_idx, &e, 0), 0);
		CHECK_EQ_U(e.ndev_ifindex, w.lo_if);
		memset(&ss, 0xaa, sizeof(ss));
		CHECK_EQ_U(xs_roce_gid_addr((unsigned)w.lo_idx, &ss), 0);
		CHECK_EQ_U(sin->sin_family, AF_INET);
		CHECK_EQ_U(sin->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
		CHECK_EQ_U(sin->sin_port, 0);
	} else {
		printf("no 127.0.0.1 on an up interface: its GID not checked\n");
	}
	/* the whole table at once; too little room is EINVAL */
	memset(tab, 0xaa, sizeof(tab));
	got = ibv_query_gid_table(ctx, tab, XS_ROCE_GID_MAX + 1, 0);
	CHECK_EQ_U(got, n);
	for (unsigned i = 0; i < n && got == (ssize_t)n; i++) {
		CHECK(memcmp(&tab[i].gid, &w.gid[i], sizeof(gid)) == 0);
		CHECK_EQ_U(tab[i].gid_index, i);
		CHECK_EQ_U(tab[i].gid_type, IBV_GID_TYPE_ROCE_V2);
		CHECK_EQ_U(tab[i].ndev_ifindex, w.ifindex[i]);
	}
	if (n)
		CHECK_EQ_U(ibv_query_gid_table(ctx, tab, n - 1, 0), -EINVAL);
	/* an empty slot: the zero GID, ENODATA, rdma-core's type for it */
	if (n < XS_ROCE_GID_MAX) {
		memset(&gid, 0xaa, sizeof(gid));
		CHECK_EQ_U(ibv_query_gid(ctx, 1, (int)n, &gid), 0);
		CHECK(gid.global.subnet_prefix == 0 && gid.global.interface_id == 0);
		CHECK_EQ_U(ibv_query_gid_ex(ctx, 1, n, &e, 0), ENODATA);
		gt = 7;
		CHECK_EQ_U(ibv_query_gid_type(ctx, 1, n, &gt), 0);
		CHECK_EQ_U(gt, XS_GID_TYPE_SYSFS_IB_ROCE_V1);
		CHECK_EQ_U(xs_roce_gid_addr(n, &ss), -EINVAL);
	}
	/* past the table, another port */
	errno = 0;
	CHECK(ibv_query_gid(ctx, 1, XS_ROCE_GID_MAX, &gid) < 0 && errno == EINVAL);
	CHECK(ibv_query_gid(ctx, 1, -1, &gid) < 0);
	CHECK(ibv_query_gid(ctx, 2, 0, &gid) < 0);
	CHECK_EQ_U(ibv_query_gid_ex(ctx, 1, XS_ROCE_GID_MAX, &e, 0), EINVAL);
	CHECK_EQ_U(ibv_query_gid_ex(ctx, 2, 0, &e, 0), EINVAL);
	CHECK(ibv_query_gid_type(ctx, 1, XS_ROCE_GID_MAX, &gt) < 0);
	CHECK_EQ_U(xs_roce_gid_addr(XS_ROCE_GID_MAX, &ss), -EINVAL);
	CHECK_EQ_U(xs_roce_gid_addr(0, NULL), -EINVAL);
	/* xsock0 keeps its one IB GID */
	gt = 7;
	CHECK_EQ_U(ibv_query_gid_type(ictx, 1, 0, &gt), 0);
	CHECK_EQ_U(gt, XS_GID_TYPE_SYSFS_IB_ROCE_V1);
	CHECK_EQ_U(ibv_query_gid_ex(ictx, 1, 0, &e, 0), 0);
	CHECK_EQ_U(e.gid_type, IBV_GID_TYPE_IB);
	CHECK_EQ_U(ibv_query_gid_table(ictx, tab, 4, 0), 1);
	CHECK(ibv_query_gid(ictx, 1, 1, &gid) < 0);
}

static void test_mtu(void)
{
	static const struct {
		unsigned netdev;
		int ib;
	} t[] = {
		{ 1500, IBV_MTU_1024 }, { 9000, IBV_MTU_4096 }, { 1280, IBV_MTU_1024 },
		{ 576, IBV_MTU_256 },	{ 0, IBV_MTU_256 },	{ 80, IBV_MTU_256 },
		{ 335, IBV_MTU_256 },	{ 591, IBV_MTU_256 },	{ 592, IBV_MTU_512 },
		{ 1103, IBV_MTU_512 },	{ 1104, IBV_MTU_1024 }, { 2127, IBV_MTU_1024 },
		{ 2128, IBV_MTU_2048 }, { 4175, IBV_MTU_2048 }, { 4176, IBV_MTU_4096 },
		{ 65536, IBV_MTU_4096 }, { 4294967295u, IBV_MTU_4096 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int got = xs_roce_mtu_from_netdev(t[i].netdev);

		if (got != t[i].ib)
			fprintf(stderr, "netdev MTU %u: %d, want %d\n", t[i].netdev, got, t[i].ib);
		CHECK_EQ_U(got, t[i].ib);
	}
}

static void test_gid_to_addr(void)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	union ibv_gid g;
	char txt[INET6_ADDRSTRLEN];

	REQUIRE(inet_pton(AF_INET6, "::ffff:10.0.3.2", g.raw) == 1);
	memset(&ss, 0xaa, sizeof(ss));
	xs_roce_gid_to_addr(&g, &ss);
	CHECK_EQ_U(sin->sin_family, AF_INET);
	CHECK(inet_ntop(AF_INET, &sin->sin_addr, txt, sizeof(txt)) && !strcmp(txt, "10.0.3.2"));
	CHECK_EQ_U(sin->sin_port, 0);
	REQUIRE(inet_pton(AF_INET6, "fe80::1:2", g.raw) == 1);
	memset(&ss, 0xaa, sizeof(ss));
	xs_roce_gid_to_addr(&g, &ss);
	CHECK_EQ_U(sin6->sin6_family, AF_INET6);
	CHECK(memcmp(&sin6->sin6_addr, g.raw, 16) == 0);
	CHECK_EQ_U(sin6->sin6_port, 0);
	CHECK_EQ_U(sin6->sin6_scope_id, 0);
	CHECK_EQ_U(sin6->sin6_flowinfo, 0);
	/* ::ffff:0:0/96 only: ::1 and an IPv4-compatible ::a.b.c.d stay IPv6 */
	REQUIRE(inet_pton(AF_INET6, "::1", g.raw) == 1);
	xs_roce_gid_to_addr(&g, &ss);
	CHECK_EQ_U(ss.ss_family, AF_INET6);
	REQUIRE(inet_pton(AF_INET6, "::10.0.3.2", g.raw) == 1);
	xs_roce_gid_to_addr(&g, &ss);
	CHECK_EQ_U(ss.ss_family, AF_INET6);
}

/* In a network namespace of its own (a child: unshare, as a user
 * namespace's root where that is allowed): no address until lo comes up,
 * then 127.0.0.1 within a second (the snapshot's age), and lo's MTU once
 * it is the only interface.  0 pass, 1 fail, 77 no namespace. */
static int refresh_child(void)
{
	struct ibv_port_attr pa;
	struct ifreq ifr = { .ifr_name = "lo" };
	union ibv_gid gid, lo4 = { .raw = { [10] = 0xff, [11] = 0xff, 127, 0, 0, 1 } };
	int fd, found = 0;

	if (unshare(CLONE_NEWNET) < 0 && unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
		return XS_TEST_SKIP;
	usleep(1100 * 1000); /* the parent's snapshot ages out */
	if (ibv_query_port(ctx, 1, &pa) || pa.gid_tbl_len != 0 || pa.active_mtu != IBV_MTU_1024)
		return XS_TEST_FAIL; /* nothing up: no GID, a 1500-octet guess */
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		return XS_TEST_SKIP;
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		return XS_TEST_SKIP;
	close(fd);
	usleep(1100 * 1000);
	if (ibv_query_port(ctx, 1, &pa) || pa.gid_tbl_len < 1 || pa.active_mtu != IBV_MTU_4096)
		return XS_TEST_FAIL;
	for (int i = 0; i < pa.gid_tbl_len; i++)
		found |= ibv_query_gid(ctx, 1, i, &gid) == 0 && !memcmp(&gid, &lo4, sizeof(gid));
	return found ? XS_TEST_PASS : XS_TEST_FAIL;
}

static void test_refresh(void)
{
	pid_t pid = fork();
	int st;

	if (pid == 0)
		_exit(refresh_child());
	REQUIRE(pid > 0);
	REQUIRE(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
	if (WEXITSTATUS(st) == XS_TEST_SKIP)
		printf("no network namespace here: the refresh not checked\n");
	else
		CHECK_EQ_U(WEXITSTATUS(st), XS_TEST_PASS);
}

/* The objects are xsock0's code: they work on a xsock_roce0 context, and
 * a QP's device tells which it is. */
static void test_objects(void)
{
	static uint8_t buf[4096];
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, ch, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq;
	struct ibv_mr *mr;
	struct ibv_qp *qp, *iqp;
	struct ibv_pd *ipd = ibv_alloc_pd(ictx);
	struct ibv_cq *icq = ibv_create_cq(ictx, 4, NULL, NULL, 0);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	int cmd_fd, async_fd;

	REQUIRE(ch && pd && cq && ipd && icq);
	CHECK(pd->context == ctx && cq->context == ctx);
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	REQUIRE(mr);
	srq = ibv_create_srq(pd, &sa);
	REQUIRE(srq);
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	qp = ibv_create_qp(pd, &ia);
	REQUIRE(qp);
	CHECK(qp->context == ctx);
	CHECK(xs_ctx_is_roce(qp->context));
	CHECK_EQ_U(qp->qp_type, IBV_QPT_RC);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };

	CHECK_EQ_U(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	CHECK_EQ_U(ibv_query_qp(qp, &qa, IBV_QP_STATE, &qia), 0);
	CHECK_EQ_U(qa.qp_state, IBV_QPS_INIT);
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;

	CHECK_EQ_U(ibv_post_recv(qp, &rwr, &bad), 0);
	CHECK_EQ_U(ibv_post_srq_recv(srq, &rwr, &bad), 0);
	ia.send_cq = ia.recv_cq = icq;
	iqp = ibv_create_qp(ipd, &ia);
	REQUIRE(iqp);
	CHECK(!xs_ctx_is_roce(iqp->context));
	CHECK_EQ_U(ibv_destroy_qp(iqp), 0);
	CHECK_EQ_U(ibv_destroy_qp(qp), 0);
	CHECK_EQ_U(ibv_destroy_srq(srq), 0);
	CHECK_EQ_U(ibv_dereg_mr(mr), 0);
	CHECK_EQ_U(ibv_destroy_cq(cq), 0);
	CHECK_EQ_U(ibv_destroy_cq(icq), 0);
	CHECK_EQ_U(ibv_destroy_comp_channel(ch), 0);
	CHECK_EQ_U(ibv_dealloc_pd(pd), 0);
	CHECK_EQ_U(ibv_dealloc_pd(ipd), 0);
	/* both contexts let go of their descriptors */
	cmd_fd = ctx->cmd_fd;
	async_fd = ctx->async_fd;
	CHECK_EQ_U(ibv_close_device(ctx), 0);
	CHECK(fcntl(cmd_fd, F_GETFD) < 0 && fcntl(async_fd, F_GETFD) < 0);
	CHECK_EQ_U(ibv_close_device(ictx), 0);
}

int main(void)
{
	xs_test_seed(1);
	test_mtu();
	test_gid_to_addr();
	test_list();
	test_device();
	test_port();
	test_gids();
	test_refresh();
	test_objects();
	return xs_test_result();
}
