/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Connection manager without QPs: event channel semantics, ids, bind/listen
 * on a real port, address/route resolution, the passive side against a raw
 * MPA initiator (request private data and IRD/ORD, rdma_reject's Reply,
 * garbage requests, silent or cut-off requests timing out), migrate_id, sync mode, rdma_getaddrinfo and
 * rdma_event_str. */
#include "config.h"

#include <fcntl.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mpa/mpa.h"
#include "tests/test-cm-util.h"

static int ctx_tag;

static int tcp_connect(uint16_t port)
{
	struct sockaddr_in a = cm_sin("127.0.0.1", port);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	REQUIRE(fd >= 0);
	REQUIRE(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	return fd;
}

/* Send an MPA rev 2 Request with IRD/ORD and private data. */
static void send_request(int fd, uint16_t ird, uint16_t ord, const char *pd)
{
	struct mpa_prefs p;
	struct mpa_frame f;
	uint8_t buf[600];
	ssize_t n;

	mpa_prefs_default(&p);
	p.ird = ird;
	p.ord = ord;
	p.pdata = (const uint8_t *)pd;
	p.pdata_len = (uint16_t)strlen(pd);
	mpa_request_build(&p, &f);
	n = mpa_frame_encode(&f, buf, sizeof(buf));
	REQUIRE(n > 0);
	REQUIRE(write(fd, buf, (size_t)n) == n);
}

/* Read one Reply (with a 2 s limit). */
static int read_reply(int fd, uint8_t *buf, size_t cap, struct mpa_frame *f)
{
	size_t have = 0, need = 0;
	struct xs_err err;
	struct pollfd p = { .fd = fd, .events = POLLIN };

	for (;;) {
		int rc = mpa_frame_decode(buf, have, MPA_REPLY, f, &need, &err);

		if (rc != -EAGAIN)
			return rc;
		if (need > cap || poll(&p, 1, 2000) != 1)
			return -ETIMEDOUT;
		ssize_t n = read(fd, buf + have, need - have);
		if (n <= 0)
			return -ECONNRESET;
		have += (size_t)n;
	}
}

/* Is the socket closed by the peer within 2 s? */
static bool sock_eof(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char b[64];

	for (;;) {
		if (poll(&p, 1, 2000) != 1)
			return false;
		ssize_t n = read(fd, b, sizeof(b));
		if (n <= 0)
			return true;
	}
}

static void test_channel(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	REQUIRE(ch);
	CHECK(ch->fd >= 0);
	CHECK(fcntl(ch->fd, F_GETFD) & FD_CLOEXEC);
	CHECK(!cm_readable(ch, 0));
	CHECK(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) == 0);
	errno = 0;
	CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EAGAIN);

	errno = 0;
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP) == -1 && errno == EOPNOTSUPP);
	CHECK(rdma_create_id(ch, &id, &ctx_tag, RDMA_PS_TCP) == 0);
	CHECK(id->verbs == NULL);
	CHECK(id->context == &ctx_tag);
	CHECK(id->channel == ch);
	CHECK(id->ps == RDMA_PS_TCP);
	CHECK(rdma_destroy_id(id) == 0);
	rdma_destroy_event_channel(ch);
}

static void test_resolve(uint16_t port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in dst = cm_sin("127.0.0.1", port);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	REQUIRE(ch);
	REQUIRE(rdma_create_id(ch, &id, &ctx_tag, RDMA_PS_TCP) == 0);
	errno = 0;
	CHECK(rdma_resolve_route(id, 100) == -1 && errno == EINVAL);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0);
	CHECK(id->verbs != NULL);
	CHECK(id->port_num == 1);
	ev = cm_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 1000, "resolve_addr");
	if (ev) {
		CHECK(ev->id == id);
		CHECK(ev->status == 0);
		CHECK(rdma_ack_cm_event(ev) == 0);
	}
	CHECK(!cm_readable(ch, 0));
	CHECK(id->route.addr.src_addr.sa_family == AF_INET);
	CHECK(id->route.addr.src_sin.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
	CHECK(rdma_get_dst_port(id) == htons(port));
	CHECK(rdma_resolve_route(id, 2000) == 0);
	ev = cm_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 1000, "resolve_route");
	if (ev)
		rdma_ack_cm_event(ev);

	/* IPv6 loopback */
	struct rdma_cm_id *id6;
	struct sockaddr_in6 d6 = { .sin6_family = AF_INET6, .sin6_port = htons(port),
				   .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	REQUIRE(rdma_create_id(ch, &id6, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(id6, NULL, (struct sockaddr *)&d6, 2000) == 0);
	ev = cm_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 1000, "resolve_addr v6");
	if (ev) {
		/* no IPv6 on the host: ADDR_ERROR is acceptable too */
		if (ev->event == RDMA_CM_EVENT_ADDR_RESOLVED)
			CHECK(id6->route.addr.src_addr.sa_family == AF_INET6);
		rdma_ack_cm_event(ev);
	}
	CHECK(rdma_destroy_id(id6) == 0);

	/* pending events of a destroyed id vanish */
	CHECK(rdma_resolve_route(id, 2000) == -1); /* wrong state */
	CHECK(rdma_destroy_id(id) == 0);
	CHECK(!cm_readable(ch, 50));
	rdma_destroy_event_channel(ch);
}

static void test_migrate_and_sync(void)
{
	struct rdma_event_channel *a = rdma_create_event_channel();
	struct rdma_event_channel *b = rdma_create_event_channel();
	struct sockaddr_in dst = cm_sin("127.0.0.1", 9);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	REQUIRE(a && b);
	REQUIRE(rdma_create_id(a, &id, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0);
	CHECK(cm_readable(a, 0));
	CHECK(rdma_migrate_id(id, b) == 0);
	CHECK(id->channel == b);
	CHECK(!cm_readable(a, 0));
	ev = cm_expect(b, RDMA_CM_EVENT_ADDR_RESOLVED, 100, "migrated event");
	if (ev)
		rdma_ack_cm_event(ev);
	/* to sync mode and back */
	CHECK(rdma_migrate_id(id, NULL) == 0);
	CHECK(id->channel != NULL && id->channel != a && id->channel != b);
	CHECK(rdma_resolve_route(id, 100) == 0); /* sync: returns when done */
	CHECK(id->event && id->event->event == RDMA_CM_EVENT_ROUTE_RESOLVED);
	CHECK(rdma_destroy_id(id) == 0);

	/* sync mode from the start */
	REQUIRE(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) == 0);
	CHECK(id->channel != NULL);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0);
	CHECK(id->event && id->event->event == RDMA_CM_EVENT_ADDR_RESOLVED);
	CHECK(rdma_resolve_route(id, 2000) == 0);
	CHECK(rdma_destroy_id(id) == 0);
	rdma_destroy_event_channel(a);
	rdma_destroy_event_channel(b);
}

static void test_listen(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in any0 = cm_sin("127.0.0.1", 0);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *lid;
	struct mpa_frame rep;
	uint8_t buf[600];
	uint16_t port;
	int fd;

	REQUIRE(ch);
	REQUIRE(rdma_create_id(ch, &lid, &ctx_tag, RDMA_PS_TCP) == 0);
	CHECK(rdma_bind_addr(lid, (struct sockaddr *)&any0) == 0);
	CHECK(lid->verbs != NULL);
	CHECK(rdma_listen(lid, 8) == 0);
	port = ntohs(rdma_get_src_port(lid));
	CHECK(port != 0);
	CHECK(lid->route.addr.src_sin.sin_addr.s_addr == htonl(INADDR_LOOPBACK));

	/* garbage instead of an MPA Request: closed, no event */
	fd = tcp_connect(port);
	char junk[20];
	memset(junk, 'x', sizeof(junk));
	CHECK(write(fd, junk, sizeof(junk)) == (ssize_t)sizeof(junk));
	CHECK(sock_eof(fd));
	CHECK(!cm_readable(ch, 200));
	close(fd);

	/* silence, or half a Request: closed after XSOCK_MPA_TIMEOUT_MS
	 * (400 ms here), no event */
	for (int half = 0; half < 2; half++) {
		struct timespec t0, t1;

		fd = tcp_connect(port);
		if (half)
			CHECK(write(fd, MPA_KEY_REQ, 10) == 10);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		CHECK(sock_eof(fd));
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
			    (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
		CHECK(ms >= 250); /* not before the deadline */
		CHECK(!cm_readable(ch, 0));
		close(fd);
	}

	/* a real Request: CONNECT_REQUEST with its data, then rdma_reject */
	fd = tcp_connect(port);
	send_request(fd, 3, 5, "hello from raw");
	ev = cm_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 2000, "request");
	if (ev) {
		struct rdma_cm_id *child = ev->id;

		CHECK(ev->listen_id == lid);
		CHECK(child != lid);
		CHECK(child->context == &ctx_tag);
		CHECK(child->verbs == lid->verbs);
		CHECK(child->channel == ch);
		CHECK(ev->param.conn.private_data_len == strlen("hello from raw"));
		CHECK(ev->param.conn.private_data &&
		      memcmp(ev->param.conn.private_data, "hello from raw", 14) == 0);
		CHECK_EQ_U(ev->param.conn.responder_resources, 5); /* peer ORD */
		CHECK_EQ_U(ev->param.conn.initiator_depth, 3); /* peer IRD */
		CHECK(ntohs(rdma_get_src_port(child)) == port);
		CHECK(rdma_get_dst_port(child) != 0);
		rdma_ack_cm_event(ev);
		errno = 0;
		CHECK(rdma_accept(child, NULL) == -1 && errno == EINVAL); /* no QP */
		CHECK(rdma_reject(child, "nope", 4) == 0);
		CHECK(read_reply(fd, buf, sizeof(buf), &rep) == 0);
		CHECK(rep.reject);
		CHECK(rep.pdata_len == 4 && memcmp(rep.pdata, "nope", 4) == 0);
		CHECK(rdma_destroy_id(child) == 0);
	}
	close(fd);

	/* a request nobody takes: destroying the listener refuses it */
	fd = tcp_connect(port);
	send_request(fd, 1, 1, "");
	CHECK(cm_readable(ch, 2000));
	CHECK(rdma_destroy_id(lid) == 0);
	CHECK(!cm_readable(ch, 0));
	int rc = read_reply(fd, buf, sizeof(buf), &rep);
	CHECK(rc == -ECONNRESET || (rc == 0 && rep.reject));
	close(fd);
	rdma_destroy_event_channel(ch);
}

static void test_getaddrinfo(void)
{
	struct rdma_addrinfo hints, *res;

	CHECK(rdma_getaddrinfo("127.0.0.1", "7471", NULL, &res) == 0);
	if (res) {
		CHECK(res->ai_family == AF_INET);
		CHECK(res->ai_port_space == RDMA_PS_TCP);
		CHECK(res->ai_qp_type == IBV_QPT_RC);
		CHECK(res->ai_dst_addr && res->ai_dst_len == sizeof(struct sockaddr_in));
		CHECK(res->ai_src_addr == NULL);
		if (res->ai_dst_addr)
			CHECK(((struct sockaddr_in *)res->ai_dst_addr)->sin_port == htons(7471));
		rdma_freeaddrinfo(res);
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_TCP;
	res = NULL;
	CHECK(rdma_getaddrinfo("::1", "18515", &hints, &res) == 0);
	if (res) {
		CHECK(res->ai_family == AF_INET6);
		CHECK(res->ai_src_addr && res->ai_src_len == sizeof(struct sockaddr_in6));
		CHECK(res->ai_dst_addr == NULL);
		if (res->ai_src_addr)
			CHECK(((struct sockaddr_in6 *)res->ai_src_addr)->sin6_port == htons(18515));
		rdma_freeaddrinfo(res);
	}
	hints.ai_family = AF_INET;
	res = NULL;
	CHECK(rdma_getaddrinfo(NULL, "7000", &hints, &res) == 0);
	if (res) {
		CHECK(res->ai_src_addr &&
		      ((struct sockaddr_in *)res->ai_src_addr)->sin_addr.s_addr == htonl(INADDR_ANY));
		rdma_freeaddrinfo(res);
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_NUMERICHOST;
	CHECK(rdma_getaddrinfo("not-an-ip", "1", &hints, &res) != 0);
	hints.ai_port_space = RDMA_PS_UDP;
	CHECK(rdma_getaddrinfo("127.0.0.1", "1", &hints, &res) != 0);
}

static void test_misc(void)
{
	struct rdma_cm_id *id;
	int n = -1, v = 1;
	struct ibv_context **devs = rdma_get_devices(&n);

	CHECK(devs && n == 1 && devs[0] && !devs[1]);
	rdma_free_devices(devs);
	CHECK(strcmp(rdma_event_str(RDMA_CM_EVENT_ADDR_RESOLVED), "RDMA_CM_EVENT_ADDR_RESOLVED") == 0);
	CHECK(strcmp(rdma_event_str(RDMA_CM_EVENT_CONNECT_REQUEST), "RDMA_CM_EVENT_CONNECT_REQUEST") == 0);
	CHECK(strcmp(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED), "RDMA_CM_EVENT_ESTABLISHED") == 0);
	CHECK(strcmp(rdma_event_str(RDMA_CM_EVENT_DISCONNECTED), "RDMA_CM_EVENT_DISCONNECTED") == 0);
	CHECK(strcmp(rdma_event_str(RDMA_CM_EVENT_TIMEWAIT_EXIT), "RDMA_CM_EVENT_TIMEWAIT_EXIT") == 0);
	CHECK(strcmp(rdma_event_str((enum rdma_cm_event_type)99), "UNKNOWN EVENT") == 0);

	REQUIRE(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v, sizeof(v)) == 0);
	errno = 0;
	CHECK(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &v, sizeof(v)) == -1 &&
	      errno == ENOSYS);
	CHECK(rdma_notify(id, IBV_EVENT_COMM_EST) == 0);
	CHECK(rdma_destroy_id(id) == 0);
}

int main(void)
{
	/* before the library reads its configuration */
	setenv("XSOCK_MPA_TIMEOUT_MS", "400", 1);
	/* a free port nobody listens on, for resolution only */
	test_channel();
	test_resolve(9);
	test_migrate_and_sync();
	test_listen();
	test_getaddrinfo();
	test_misc();
	return xs_test_result();
}
