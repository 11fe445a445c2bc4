/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* xsock-bench: raw TCP against xsock verbs on loopback, and the cost of a
 * thread hand-off.  Each mode runs a client and a server in two processes
 * (fork) on 127.0.0.1 and prints one human line plus one "RESULT" line that
 * scripts/bench.sh parses.  Every mode checks its data; a failed check
 * makes the exit status 1.  See xsock-bench(1). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <liburing.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define MSG_LEN 64
#define WR_SLOTS 4 /* destination slots an RDMA Write cycles through */
#define LAT_RECVS 16 /* receives kept posted in the latency test */
#define MAGIC_DONE 0x58534b44u /* "XSKD": the final Send of the bandwidth test */

static struct {
	size_t size; /* bytes per write / message */
	uint64_t total; /* bandwidth: bytes in all */
	unsigned iters, warmup; /* latency / hand-off */
	unsigned depth; /* RDMA Write: WRs between signaled ones * 2 */
	bool events; /* completion channel instead of busy polling */
	bool spin; /* raw TCP latency: nonblocking busy recv */
	unsigned timeout; /* seconds before the whole run is abandoned */
} opt = {
	.size = 65536,
	.total = 256ull << 20,
	.iters = 20000,
	.warmup = 1000,
	.depth = 16,
	.timeout = 120,
};

static const char *prog = "xsock-bench";

static _Noreturn void die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(errno));
	exit(1);
}

static void fail(const char *what)
{
	fprintf(stderr, "%s: %s\n", prog, what);
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *xmalloc(size_t n)
{
	void *p = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);

	if (!p)
		fail("out of memory");
	return p;
}

/* The pattern a bandwidth sender writes (deterministic from the seed). */
static void fill_pattern(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed;

	for (size_t i = 0; i + 8 <= len; i += 8) {
		x += 0x9e3779b97f4a7c15ull;
		uint64_t z = x;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		memcpy(buf + i, &z, 8);
	}
}

/* A checksum both ends compute over the destination region. */
static uint64_t checksum(const uint8_t *buf, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, buf + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Median and p99 of one-way latency (RTT / 2), in microseconds. */
static void report_lat(const char *mode, uint64_t *rtt, unsigned n)
{
	qsort(rtt, n, sizeof(*rtt), cmp_u64);
	double med = rtt[n / 2] / 2000.0;
	double p99 = rtt[(size_t)n * 99 / 100] / 2000.0;

	printf("%s: %u round trips of %d B: one-way median %.2f us, p99 %.2f us\n", mode, n,
	       MSG_LEN, med, p99);
	printf("RESULT %s lat_us=%.3f p99_us=%.3f\n", mode, med, p99);
}

static void report_bw(const char *mode, uint64_t bytes, uint64_t ns)
{
	double mbps = (double)bytes * 1e3 / (double)ns;

	printf("%s: %" PRIu64 " MiB in %zu B writes in %.3f s: %.1f MB/s\n", mode, bytes >> 20,
	       opt.size, (double)ns / 1e9, mbps);
	printf("RESULT %s size=%zu bw_MBps=%.1f\n", mode, opt.size, mbps);
}

/* ---- fork a server, hand the client its port ----------------------------- */

static pid_t server_pid;

static void fork_server(int (*server)(int port_fd), uint16_t *port)
{
	int p[2];

	if (pipe(p) < 0)
		die("pipe");
	fflush(NULL);
	server_pid = fork();
	if (server_pid < 0)
		die("fork");
	if (server_pid == 0) {
		close(p[0]);
		alarm(opt.timeout);
		_exit(server(p[1]));
	}
	close(p[1]);
	struct pollfd pf = { .fd = p[0], .events = POLLIN };
	if (poll(&pf, 1, 10000) != 1 || read(p[0], port, sizeof(*port)) != sizeof(*port))
		fail("the server did not start");
	close(p[0]);
}

static int reap_server(void)
{
	int st;

	if (waitpid(server_pid, &st, 0) < 0)
		die("waitpid");
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	fprintf(stderr, "%s: server killed by signal %d\n", prog, WTERMSIG(st));
	return 1;
}

static void tell_port(int port_fd, uint16_t port)
{
	if (write(port_fd, &port, sizeof(port)) != sizeof(port))
		die("write port");
	close(port_fd);
}

/* ---- raw TCP --------------------------------------------------------------- */

static int tcp_listen(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 1) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0)
		die("tcp listen");
	*port = ntohs(a.sin_port);
	return fd;
}

static void tcp_nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* TCP_NODELAY for the ping-pong only: with it, a 64 KiB write on loopback
 * (MSS 65483) leaves as a full segment plus a 53-octet runt, which halves
 * raw TCP's bandwidth; Nagle coalesces the runt (xsock sizes its FPDUs to
 * the MSS instead). */
static int tcp_connect(uint16_t port, bool nodelay)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("tcp connect");
	if (nodelay)
		tcp_nodelay(fd);
	return fd;
}

static int tcp_accept(int lfd, bool nodelay)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		die("accept");
	close(lfd);
	if (nodelay)
		tcp_nodelay(fd);
	return fd;
}

static void write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			die("send");
		}
		p += w;
		n -= (size_t)w;
	}
}

static void read_all(int fd, uint8_t *p, size_t n, int flags)
{
	while (n) {
		ssize_t r = recv(fd, p, n, flags);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			fail(r == 0 ? "peer closed" : "recv failed");
		p += r;
		n -= (size_t)r;
	}
}

/* Server: read every byte (into one buffer of the write size), check the
 * trailer (the byte count), answer one octet. */
static int tcp_bw_server(int port_fd)
{
	uint16_t port;
	int lfd = tcp_listen(&port);

	tell_port(port_fd, port);
	int fd = tcp_accept(lfd, false);
	uint8_t *buf = xmalloc(opt.size);
	uint64_t got = 0, want = opt.total + 8, trailer = 0;

	while (got < want) {
		size_t n = opt.size;
		if (n > want - got)
			n = (size_t)(want - got);
		ssize_t r = recv(fd, buf, n, 0);
		if (r <= 0)
			fail("tcp bw server: recv");
		/* the trailer's octets may arrive in pieces */
		uint64_t end = got + (uint64_t)r;
		for (uint64_t at = got > opt.total ? got : opt.total; at < end; at++)
			((uint8_t *)&trailer)[at - opt.total] = buf[at - got];
		got = end;
	}
	uint8_t ok = trailer == opt.total;
	tcp_nodelay(fd); /* the answer leaves at once */
	write_all(fd, &ok, 1);
	close(fd);
	free(buf);
	return ok ? 0 : 1;
}

static int tcp_bw(void)
{
	uint16_t port;

	fork_server(tcp_bw_server, &port);
	int fd = tcp_connect(port, false);
	uint8_t *buf = xmalloc(opt.size);
	uint64_t trailer = opt.total;
	uint8_t ok = 0;

	fill_pattern(buf, opt.size, 1);
	uint64_t t0 = now_ns();
	for (uint64_t sent = 0; sent < opt.total; sent += opt.size)
		write_all(fd, buf, opt.size);
	write_all(fd, (const uint8_t *)&trailer, sizeof(trailer));
	tcp_nodelay(fd); /* push the trailer */
	read_all(fd, &ok, 1, 0);
	uint64_t t1 = now_ns();
	close(fd);
	free(buf);
	int rc = reap_server();
	if (!ok || rc)
		fail("tcp bw: the server saw the wrong byte count");
	report_bw("tcp-bw", opt.total, t1 - t0);
	return 0;
}

static int tcp_lat_server(int port_fd)
{
	uint16_t port;
	int lfd = tcp_listen(&port);

	tell_port(port_fd, port);
	int fd = tcp_accept(lfd, true);
	uint8_t msg[MSG_LEN];
	int flags = opt.spin ? MSG_DONTWAIT : 0;

	for (unsigned i = 0; i < opt.iters + opt.warmup; i++) {
		read_all(fd, msg, sizeof(msg), flags);
		write_all(fd, msg, sizeof(msg));
	}
	close(fd);
	return 0;
}

static int tcp_lat(void)
{
	uint16_t port;

	fork_server(tcp_lat_server, &port);
	int fd = tcp_connect(port, true);
	uint64_t *rtt = calloc(opt.iters, sizeof(*rtt));
	uint8_t msg[MSG_LEN] = { 0 }, back[MSG_LEN];
	int flags = opt.spin ? MSG_DONTWAIT : 0;

	if (!rtt)
		fail("out of memory");
	for (unsigned i = 0; i < opt.iters + opt.warmup; i++) {
		memcpy(msg, &i, sizeof(i));
		uint64_t t0 = now_ns();
		write_all(fd, msg, sizeof(msg));
		read_all(fd, back, sizeof(back), flags);
		uint64_t t1 = now_ns();
		if (memcmp(msg, back, sizeof(msg)))
			fail("tcp lat: echo differs");
		if (i >= opt.warmup)
			rtt[i - opt.warmup] = t1 - t0;
	}
	close(fd);
	if (reap_server())
		fail("tcp lat: server failed");
	report_lat(opt.spin ? "tcp-lat-spin" : "tcp-lat", rtt, opt.iters);
	free(rtt);
	return 0;
}

/* ---- xsock verbs ------------------------------------------------------------ */

/* What the server hands the client in the Reply's private data. */
struct bw_target {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

struct vconn {
	struct rdma_event_channel *ec;
	struct rdma_cm_id *listen_id, *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *scq, *rcq;
	struct ibv_mr *msg_mr; /* LAT_RECVS + 1 message buffers */
	struct ibv_mr *data_mr; /* the bandwidth buffer's, or NULL */
	uint8_t *msgs;
	uint64_t deadline;
};

static struct rdma_cm_event *cm_wait(struct vconn *v, enum rdma_cm_event_type type)
{
	struct pollfd p = { .fd = v->ec->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&p, 1, 10000) != 1)
		fail("no CM event within 10 s");
	if (rdma_get_cm_event(v->ec, &ev))
		die("rdma_get_cm_event");
	if (ev->event != type) {
		fprintf(stderr, "%s: CM event %s (status %d), wanted %s\n", prog,
			rdma_event_str(ev->event), ev->status, rdma_event_str(type));
		exit(1);
	}
	return ev;
}

/* PD, CQs (the receive CQ on a channel), QP and message buffers on id. */
static void v_setup(struct vconn *v, struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qa;

	v->id = id;
	v->pd = ibv_alloc_pd(id->verbs);
	v->ch = ibv_create_comp_channel(id->verbs);
	if (!v->pd || !v->ch)
		die("pd/channel");
	v->scq = ibv_create_cq(id->verbs, (int)opt.depth * 2 + 64, NULL, NULL, 0);
	v->rcq = ibv_create_cq(id->verbs, 64, NULL, v->ch, 0);
	if (!v->scq || !v->rcq)
		die("ibv_create_cq");
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = v->scq;
	qa.recv_cq = v->rcq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = opt.depth * 2 + 16;
	qa.cap.max_recv_wr = LAT_RECVS + 2;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, v->pd, &qa))
		die("rdma_create_qp");
	v->msgs = xmalloc((LAT_RECVS + 1) * MSG_LEN);
	memset(v->msgs, 0, (LAT_RECVS + 1) * MSG_LEN);
	v->msg_mr = ibv_reg_mr(v->pd, v->msgs, (LAT_RECVS + 1) * MSG_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!v->msg_mr)
		die("ibv_reg_mr");
	v->deadline = now_ns() + (uint64_t)opt.timeout * 1000000000ull;
}

static void v_post_recv(struct vconn *v, unsigned slot)
{
	struct ibv_sge s = { .addr = (uintptr_t)(v->msgs + slot * MSG_LEN), .length = MSG_LEN,
			     .lkey = v->msg_mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &s, .num_sge = 1 }, *bad;

	if (ibv_post_recv(v->id->qp, &wr, &bad))
		fail("ibv_post_recv");
}

/* Send MSG_LEN octets from message slot LAT_RECVS. */
static void v_post_send(struct vconn *v, bool signaled)
{
	struct ibv_sge s = { .addr = (uintptr_t)(v->msgs + LAT_RECVS * MSG_LEN), .length = MSG_LEN,
			     .lkey = v->msg_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = signaled ? IBV_SEND_SIGNALED : 0 };
	struct ibv_send_wr *bad;

	if (ibv_post_send(v->id->qp, &wr, &bad))
		fail("ibv_post_send");
}

/* Reap send completions (checked) until none is left. */
static void v_reap_send(struct vconn *v)
{
	struct ibv_wc wc[16];
	int n;

	while ((n = ibv_poll_cq(v->scq, 16, wc)) > 0)
		for (int i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "%s: send completion: %s\n", prog,
					ibv_wc_status_str(wc[i].status));
				exit(1);
			}
	if (n < 0)
		fail("ibv_poll_cq");
}

/* The next receive completion: busy poll, or through the channel. */
static void v_wait_recv(struct vconn *v, struct ibv_wc *wc, bool events)
{
	unsigned spins = 0;

	for (;;) {
		int n = ibv_poll_cq(v->rcq, 1, wc);
		if (n < 0)
			fail("ibv_poll_cq");
		if (n == 1)
			break;
		if (events) {
			struct ibv_cq *cq;
			void *ctx;

			if (ibv_req_notify_cq(v->rcq, 0))
				fail("ibv_req_notify_cq");
			/* a completion that came before the arm raises no event */
			n = ibv_poll_cq(v->rcq, 1, wc);
			if (n == 1)
				break;
			/* blocks like rping does (alarm(2) bounds the run) */
			if (ibv_get_cq_event(v->ch, &cq, &ctx))
				die("ibv_get_cq_event");
			ibv_ack_cq_events(cq, 1);
		} else if (++spins == 1u << 20) {
			spins = 0;
			if (now_ns() > v->deadline)
				fail("no receive completion before the timeout");
		}
	}
	if (wc->status != IBV_WC_SUCCESS || wc->opcode != IBV_WC_RECV) {
		fprintf(stderr, "%s: receive completion: %s\n", prog, ibv_wc_status_str(wc->status));
		exit(1);
	}
}

static void v_teardown(struct vconn *v, bool initiator)
{
	struct rdma_cm_event *ev;

	if (initiator && rdma_disconnect(v->id))
		die("rdma_disconnect");
	ev = cm_wait(v, RDMA_CM_EVENT_DISCONNECTED);
	rdma_ack_cm_event(ev);
	rdma_destroy_qp(v->id);
	ibv_dereg_mr(v->msg_mr);
	if (v->data_mr) /* before its PD: a PD with MRs is EBUSY */
		ibv_dereg_mr(v->data_mr);
	free(v->msgs);
	ibv_destroy_cq(v->scq);
	ibv_destroy_cq(v->rcq);
	ibv_destroy_comp_channel(v->ch);
	ibv_dealloc_pd(v->pd);
	rdma_destroy_id(v->id);
	if (v->listen_id)
		rdma_destroy_id(v->listen_id);
	rdma_destroy_event_channel(v->ec);
}

/* Server: listen on an ephemeral port, tell it, set up the QP of the first
 * request, let before_accept post receives (and fill pdata), accept. */
static void v_serve(struct vconn *v, int port_fd, const void *pdata, uint8_t plen,
		    void (*before_accept)(struct vconn *, void *), void *arg)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp;

	v->ec = rdma_create_event_channel();
	if (!v->ec || rdma_create_id(v->ec, &v->listen_id, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	if (rdma_bind_addr(v->listen_id, (struct sockaddr *)&a) || rdma_listen(v->listen_id, 1))
		die("rdma_listen");
	tell_port(port_fd, ntohs(rdma_get_src_port(v->listen_id)));
	ev = cm_wait(v, RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_cm_id *id = ev->id;
	rdma_ack_cm_event(ev);
	v_setup(v, id);
	if (before_accept)
		before_accept(v, arg);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = pdata;
	cp.private_data_len = plen;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	if (rdma_accept(id, &cp))
		die("rdma_accept");
	ev = cm_wait(v, RDMA_CM_EVENT_ESTABLISHED);
	rdma_ack_cm_event(ev);
}

/* Client: connect; *pdata gets the Reply's private data. */
static void v_connect(struct vconn *v, uint16_t port, void *pdata, size_t plen,
		      void (*before_connect)(struct vconn *, void *), void *arg)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct rdma_conn_param cp;

	v->ec = rdma_create_event_channel();
	if (!v->ec || rdma_create_id(v->ec, &id, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 2000))
		die("rdma_resolve_addr");
	rdma_ack_cm_event(cm_wait(v, RDMA_CM_EVENT_ADDR_RESOLVED));
	if (rdma_resolve_route(id, 2000))
		die("rdma_resolve_route");
	rdma_ack_cm_event(cm_wait(v, RDMA_CM_EVENT_ROUTE_RESOLVED));
	v_setup(v, id);
	if (before_connect)
		before_connect(v, arg);
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	if (rdma_connect(id, &cp))
		die("rdma_connect");
	ev = cm_wait(v, RDMA_CM_EVENT_ESTABLISHED);
	if (pdata) {
		if (ev->param.conn.private_data_len < plen)
			fail("the server's private data is missing");
		memcpy(pdata, ev->param.conn.private_data, plen);
	}
	rdma_ack_cm_event(ev);
}

/* The final Send of the bandwidth test and the two answers. */
struct bw_done {
	uint32_t magic;
	uint32_t what; /* 0 done (client), 1 ack, 2 verdict */
	uint64_t sum;
	uint64_t bytes;
};

/* Send one message from the send slot, signaled, and wait for its completion
 * (the slot may be rewritten afterwards). */
static void v_send_msg(struct vconn *v, const void *msg, size_t len)
{
	struct ibv_wc wc;
	int n;

	memcpy(v->msgs + LAT_RECVS * MSG_LEN, msg, len);
	v_post_send(v, true);
	while ((n = ibv_poll_cq(v->scq, 1, &wc)) == 0)
		if (now_ns() > v->deadline)
			fail("no send completion before the timeout");
	if (n < 0 || wc.status != IBV_WC_SUCCESS)
		fail("send completion failed");
}

struct bw_side {
	uint8_t *buf;
	size_t len;
	struct ibv_mr *mr;
	struct bw_target t;
};

static void bw_server_prep(struct vconn *v, void *arg)
{
	struct bw_side *b = arg;

	b->mr = ibv_reg_mr(v->pd, b->buf, b->len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!b->mr)
		die("ibv_reg_mr");
	b->t.addr = (uintptr_t)b->buf;
	b->t.rkey = b->mr->rkey;
	b->t.len = (uint32_t)b->len;
	v_post_recv(v, 0);
	v_post_recv(v, 1);
}

/* Server: expose WR_SLOTS * size octets for RDMA Write; on the client's
 * final Send answer at once (the client's clock stops), then compare the
 * region's checksum with the one the Send carries and answer the verdict. */
static int rdma_bw_server(int port_fd)
{
	struct vconn v = { 0 };
	struct bw_side b = { .len = opt.size * WR_SLOTS };
	struct bw_done d, r;
	struct ibv_wc wc;

	b.buf = xmalloc(b.len);
	memset(b.buf, 0, b.len);
	v_serve(&v, port_fd, &b.t, sizeof(b.t), bw_server_prep, &b);
	v_wait_recv(&v, &wc, true);
	memcpy(&d, v.msgs + wc.wr_id * MSG_LEN, sizeof(d));
	if (d.magic != MAGIC_DONE || d.what != 0)
		fail("rdma bw server: unexpected message");
	r = (struct bw_done){ .magic = MAGIC_DONE, .what = 1 };
	v_send_msg(&v, &r, sizeof(r));
	r.what = 2;
	r.sum = checksum(b.buf, b.len);
	r.bytes = d.bytes;
	v_send_msg(&v, &r, sizeof(r));
	v.data_mr = b.mr;
	v_teardown(&v, false);
	free(b.buf);
	return r.sum == d.sum ? 0 : 1;
}

static void post_two_recvs(struct vconn *v, void *arg)
{
	v_post_recv(v, 0);
	v_post_recv(v, 1);
}

static int rdma_bw(void)
{
	struct vconn v = { 0 };
	struct bw_target t;
	struct bw_done d, r;
	struct ibv_wc wc;
	uint16_t port;
	size_t len = opt.size * WR_SLOTS;
	uint64_t n = opt.total / opt.size;
	unsigned inflight = 0;

	if (opt.size > UINT32_MAX / WR_SLOTS || n == 0)
		fail("bad size/total");
	fork_server(rdma_bw_server, &port);
	uint8_t *src = xmalloc(len);
	fill_pattern(src, len, 7);
	v_connect(&v, port, &t, sizeof(t), post_two_recvs, NULL);
	if (t.len != len)
		fail("rdma bw: the server's region has the wrong size");
	struct ibv_mr *mr = ibv_reg_mr(v.pd, src, len, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		die("ibv_reg_mr");

	uint64_t t0 = now_ns();
	for (uint64_t i = 0; i < n; i++) {
		size_t off = (size_t)(i % WR_SLOTS) * opt.size;
		bool sig = (i + 1) % opt.depth == 0 || i + 1 == n;
		struct ibv_sge s = { .addr = (uintptr_t)src + off, .length = (uint32_t)opt.size,
				     .lkey = mr->lkey };
		struct ibv_send_wr wr = { .wr_id = i, .sg_list = &s, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = sig ? IBV_SEND_SIGNALED : 0 };
		struct ibv_send_wr *bad;

		wr.wr.rdma.remote_addr = t.addr + off;
		wr.wr.rdma.rkey = t.rkey;
		/* keep at most 2 * depth WRs in the send queue */
		while (inflight >= 2 * opt.depth) {
			int k = ibv_poll_cq(v.scq, 1, &wc);
			if (k < 0 || (k == 1 && wc.status != IBV_WC_SUCCESS))
				fail("rdma write completion failed");
			if (k == 1)
				inflight -= opt.depth;
			else if (now_ns() > v.deadline)
				fail("no write completion before the timeout");
		}
		if (ibv_post_send(v.id->qp, &wr, &bad))
			fail("ibv_post_send (write)");
		inflight++;
	}
	/* the last Write was signaled: drain every completion */
	while (inflight) {
		int k = ibv_poll_cq(v.scq, 1, &wc);
		if (k < 0 || (k == 1 && wc.status != IBV_WC_SUCCESS))
			fail("rdma write completion failed");
		if (k == 1)
			inflight = wc.wr_id + 1 == n ? 0 : inflight - opt.depth;
		else if (now_ns() > v.deadline)
			fail("no write completion before the timeout");
	}
	d = (struct bw_done){ .magic = MAGIC_DONE, .what = 0, .sum = checksum(src, len),
			      .bytes = n * opt.size };
	v_send_msg(&v, &d, sizeof(d));
	v_wait_recv(&v, &wc, true);
	uint64_t t1 = now_ns();
	memcpy(&r, v.msgs + wc.wr_id * MSG_LEN, sizeof(r));
	if (r.magic != MAGIC_DONE || r.what != 1)
		fail("rdma bw: no acknowledgement");
	v_wait_recv(&v, &wc, true);
	memcpy(&r, v.msgs + wc.wr_id * MSG_LEN, sizeof(r));
	v.data_mr = mr;
	v_teardown(&v, true);
	free(src);
	int rc = reap_server();
	if (r.magic != MAGIC_DONE || r.what != 2 || r.sum != d.sum || rc) {
		fprintf(stderr, "%s: rdma bw: data check FAILED (sum %016" PRIx64 " vs %016" PRIx64
			")\n", prog, r.sum, d.sum);
		exit(1);
	}
	report_bw("rdma-bw", n * opt.size, t1 - t0);
	printf("rdma-bw: data check ok (%zu octets, checksum %016" PRIx64 ")\n", len, d.sum);
	return 0;
}

static void post_lat_recvs(struct vconn *v, void *arg)
{
	for (unsigned i = 0; i < LAT_RECVS; i++)
		v_post_recv(v, i);
}

/* Server: echo every message back (Send), reposting its receive. */
static int rdma_lat_server(int port_fd)
{
	struct vconn v = { 0 };
	struct ibv_wc wc;

	v_serve(&v, port_fd, NULL, 0, post_lat_recvs, NULL);
	for (unsigned i = 0; i < opt.iters + opt.warmup; i++) {
		v_wait_recv(&v, &wc, opt.events);
		memcpy(v.msgs + LAT_RECVS * MSG_LEN, v.msgs + wc.wr_id * MSG_LEN, MSG_LEN);
		v_post_send(&v, i % 8 == 7);
		v_post_recv(&v, (unsigned)wc.wr_id);
		v_reap_send(&v);
	}
	v_teardown(&v, false);
	return 0;
}

static int rdma_lat(void)
{
	struct vconn v = { 0 };
	struct ibv_wc wc;
	uint16_t port;
	uint64_t *rtt = calloc(opt.iters, sizeof(*rtt));
	const char *mode = opt.events ? "rdma-lat-event" : "rdma-lat-poll";

	if (!rtt)
		fail("out of memory");
	fork_server(rdma_lat_server, &port);
	v_connect(&v, port, NULL, 0, post_lat_recvs, NULL);
	uint8_t *out = v.msgs + LAT_RECVS * MSG_LEN;
	for (unsigned i = 0; i < opt.iters + opt.warmup; i++) {
		memset(out, (int)(i & 0xff), MSG_LEN);
		memcpy(out, &i, sizeof(i));
		uint64_t t0 = now_ns();
		v_post_send(&v, i % 8 == 7);
		v_wait_recv(&v, &wc, opt.events);
		uint64_t t1 = now_ns();
		if (wc.byte_len != MSG_LEN || memcmp(v.msgs + wc.wr_id * MSG_LEN, out, MSG_LEN))
			fail("rdma lat: echo differs");
		v_post_recv(&v, (unsigned)wc.wr_id);
		v_reap_send(&v);
		if (i >= opt.warmup)
			rtt[i - opt.warmup] = t1 - t0;
	}
	v_teardown(&v, true);
	if (reap_server())
		fail("rdma lat: server failed");
	report_lat(mode, rtt, opt.iters);
	free(rtt);
	return 0;
}

/* ---- thread hand-off ------------------------------------------------------- */

enum ho_kind { HO_INLINE, HO_SPIN, HO_FUTEX, HO_EVENTFD, HO_CONDVAR, HO_URING, HO_N };
static const char *const ho_names[HO_N] = { "inline", "spin", "futex", "eventfd", "condvar",
					    "io_uring" };

struct ho {
	enum ho_kind kind;
	unsigned n;
	_Atomic uint32_t turn; /* spin / futex: 0 = ping's, 1 = pong's */
	int efd[2]; /* eventfd: to pong, to ping */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct io_uring ring;
	volatile uint64_t work;
};

static long futex(_Atomic uint32_t *addr, int op, uint32_t val)
{
	return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

/* The "work" handed over: a trivial increment, so the figure is the
 * hand-off alone. */
__attribute__((noinline)) static void ho_work(struct ho *h)
{
	h->work++;
}

static void ho_wait_turn(struct ho *h, uint32_t mine)
{
	uint32_t t;

	switch (h->kind) {
	case HO_SPIN:
		while (atomic_load_explicit(&h->turn, memory_order_acquire) != mine)
			;
		break;
	case HO_FUTEX:
		while ((t = atomic_load_explicit(&h->turn, memory_order_acquire)) != mine)
			futex(&h->turn, FUTEX_WAIT_PRIVATE, t);
		break;
	case HO_CONDVAR:
		pthread_mutex_lock(&h->mu);
		while (atomic_load_explicit(&h->turn, memory_order_relaxed) != mine)
			pthread_cond_wait(&h->cv, &h->mu);
		pthread_mutex_unlock(&h->mu);
		break;
	default:
		break;
	}
}

static void ho_give_turn(struct ho *h, uint32_t theirs)
{
	switch (h->kind) {
	case HO_SPIN:
		atomic_store_explicit(&h->turn, theirs, memory_order_release);
		break;
	case HO_FUTEX:
		atomic_store_explicit(&h->turn, theirs, memory_order_release);
		futex(&h->turn, FUTEX_WAKE_PRIVATE, 1);
		break;
	case HO_CONDVAR:
		pthread_mutex_lock(&h->mu);
		atomic_store_explicit(&h->turn, theirs, memory_order_relaxed);
		pthread_cond_signal(&h->cv);
		pthread_mutex_unlock(&h->mu);
		break;
	default:
		break;
	}
}

static void efd_put(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) != sizeof(one))
		die("eventfd write");
}

static void efd_get(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) != sizeof(v))
		die("eventfd read");
}

/* The other thread: waits like the engine does (for io_uring, a read of an
 * eventfd completing in io_uring_submit_and_wait), does the work, answers. */
static void *ho_pong(void *arg)
{
	struct ho *h = arg;
	uint64_t buf;

	for (unsigned i = 0; i < h->n; i++) {
		if (h->kind == HO_EVENTFD) {
			efd_get(h->efd[0]);
		} else if (h->kind == HO_URING) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&h->ring);
			struct io_uring_cqe *cqe;

			io_uring_prep_read(sqe, h->efd[0], &buf, sizeof(buf), 0);
			io_uring_submit_and_wait(&h->ring, 1);
			if (io_uring_peek_cqe(&h->ring, &cqe) || cqe->res != sizeof(buf))
				fail("io_uring eventfd read");
			io_uring_cqe_seen(&h->ring, cqe);
		} else {
			ho_wait_turn(h, 1);
		}
		ho_work(h);
		if (h->kind == HO_EVENTFD || h->kind == HO_URING)
			efd_put(h->efd[1]);
		else
			ho_give_turn(h, 0);
	}
	return NULL;
}

static void handoff_one(enum ho_kind kind)
{
	struct ho h = { .kind = kind, .n = opt.iters + opt.warmup };
	uint64_t *rtt = calloc(opt.iters, sizeof(*rtt));
	pthread_t th;

	if (!rtt)
		fail("out of memory");
	pthread_mutex_init(&h.mu, NULL);
	pthread_cond_init(&h.cv, NULL);
	h.efd[0] = eventfd(0, EFD_CLOEXEC);
	h.efd[1] = eventfd(0, EFD_CLOEXEC);
	if (h.efd[0] < 0 || h.efd[1] < 0)
		die("eventfd");
	if (kind == HO_URING && io_uring_queue_init(8, &h.ring, 0) < 0)
		fail("io_uring_queue_init");
	if (kind != HO_INLINE && pthread_create(&th, NULL, ho_pong, &h))
		fail("pthread_create");
	for (unsigned i = 0; i < h.n; i++) {
		uint64_t t0 = now_ns();

		if (kind == HO_INLINE) {
			ho_work(&h);
			ho_work(&h);
		} else if (kind == HO_EVENTFD || kind == HO_URING) {
			efd_put(h.efd[0]);
			efd_get(h.efd[1]);
		} else {
			ho_give_turn(&h, 1);
			ho_wait_turn(&h, 0);
		}
		uint64_t t1 = now_ns();
		if (i >= opt.warmup)
			rtt[i - opt.warmup] = t1 - t0;
	}
	if (kind != HO_INLINE)
		pthread_join(th, NULL);
	uint64_t want = kind == HO_INLINE ? 2ull * h.n : h.n;
	if (h.work != want)
		fail("hand-off: work lost");
	if (kind == HO_URING)
		io_uring_queue_exit(&h.ring);
	close(h.efd[0]);
	close(h.efd[1]);
	pthread_mutex_destroy(&h.mu);
	pthread_cond_destroy(&h.cv);

	/* one hand-off = half a round trip (inline: one call) */
	char mode[32];
	snprintf(mode, sizeof(mode), "handoff-%s", ho_names[kind]);
	qsort(rtt, opt.iters, sizeof(*rtt), cmp_u64);
	double med = rtt[opt.iters / 2] / 2000.0, p99 = rtt[(size_t)opt.iters * 99 / 100] / 2000.0;
	printf("%s: one hand-off median %.3f us, p99 %.3f us\n", mode, med, p99);
	printf("RESULT %s lat_us=%.3f p99_us=%.3f\n", mode, med, p99);
	free(rtt);
}

static int handoff(void)
{
	for (int k = 0; k < HO_N; k++)
		handoff_one((enum ho_kind)k);
	return 0;
}

/* ---- main -------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s MODE [options]\n"
		"modes: tcp-bw tcp-lat rdma-bw rdma-lat handoff\n"
		"  -s, --size N       bytes per write (bandwidth; default 65536)\n"
		"  -t, --total MIB    MiB to move (bandwidth; default 256)\n"
		"  -n, --iters N      round trips measured (latency, handoff; default 20000)\n"
		"  -w, --warmup N     round trips before measuring (default 1000)\n"
		"  -d, --depth N      RDMA Writes per signaled one (default 16)\n"
		"  -e, --events       rdma-lat: wait on the completion channel\n"
		"  -S, --spin         tcp-lat: busy-poll nonblocking recv\n"
		"  -T, --timeout SEC  give up after SEC seconds (default 120)\n",
		prog);
}

static unsigned long long num(const char *s, unsigned long long min, unsigned long long max)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || v < min || v > max) {
		fprintf(stderr, "%s: bad number '%s' (%llu..%llu)\n", prog, s, min, max);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "size", required_argument, NULL, 's' },   { "total", required_argument, NULL, 't' },
		{ "iters", required_argument, NULL, 'n' },  { "warmup", required_argument, NULL, 'w' },
		{ "depth", required_argument, NULL, 'd' },  { "events", no_argument, NULL, 'e' },
		{ "spin", no_argument, NULL, 'S' },         { "timeout", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "s:t:n:w:d:eST:h", lo, NULL)) != -1) {
		switch (c) {
		case 's':
			opt.size = (size_t)num(optarg, 64, 64u << 20);
			break;
		case 't':
			opt.total = num(optarg, 1, 1u << 20) << 20;
			break;
		case 'n':
			opt.iters = (unsigned)num(optarg, 1, 100000000);
			break;
		case 'w':
			opt.warmup = (unsigned)num(optarg, 0, 100000000);
			break;
		case 'd':
			opt.depth = (unsigned)num(optarg, 1, 1024);
			break;
		case 'e':
			opt.events = true;
			break;
		case 'S':
			opt.spin = true;
			break;
		case 'T':
			opt.timeout = (unsigned)num(optarg, 1, 86400);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return 2;
	}
	if (opt.size % 8)
		fail("the size must be a multiple of 8");
	signal(SIGPIPE, SIG_IGN);
	alarm(opt.timeout);
	const char *mode = argv[optind];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "tcp-bw"))
		return tcp_bw();
	if (!strcmp(mode, "tcp-lat"))
		return tcp_lat();
	if (!strcmp(mode, "rdma-bw"))
		return rdma_bw();
	if (!strcmp(mode, "rdma-lat"))
		return rdma_lat();
	if (!strcmp(mode, "handoff"))
		return handoff();
	usage(stderr);
	return 2;
}
