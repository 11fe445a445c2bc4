/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Faults under the verbs API over loopback (issue 6): what the peer's
 * transport does to us, and what the application does to its own
 * connections.  The peer is a raw MPA initiator in this process (the wire
 * libraries, no verbs) or a child process using verbs.
 *
 *   rst        the peer resets its TCP connection (SO_LINGER 0) while we
 *              have Reads, receives and a blocked big Write outstanding
 *   fin        the peer sends half of an FPDU, then FIN
 *   stall      the peer reads nothing while we keep posting 1 MiB Writes:
 *              the bytes the library holds stay bounded (no copy, no queue:
 *              post_send waits for the socket), RSS stays flat, and after
 *              XSOCK_TX_TIMEOUT_MS the connection is given up
 *   destroy    the application destroys QP and id with Reads and receives
 *              outstanding and no disconnect
 *   exit       a child process connects and exits with its connection open
 *
 * In each: every outstanding WR completes with an error status (a Write the
 * socket took may complete with success) within 1 s of the fault becoming
 * visible, the QP is in ERR, the CM reports DISCONNECTED, no thread stays
 * blocked, and the process's fds are the same at the end as at the start
 * (memory: the ASan+LSan build). */
#include "config.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "tests/test-verbs-util.h"

#define TX_TIMEOUT_MS 700
#define MIB (1u << 20)
#define NWRITE_MAX 256 /* 256 MiB: far beyond any socket buffer */

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	REQUIRE(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, res = 0;

	REQUIRE(f);
	if (fscanf(f, "%ld %ld", &pages, &res) != 2)
		res = 0;
	fclose(f);
	return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* ---- a raw peer and the verbs endpoint it talks to ---------------------------- */

struct rig {
	struct raw r;
	struct ep s;
	uint8_t *src;
	struct ibv_mr *mr;
};

#define NRECV_S 50
#define NREAD_S 4

/* Connected raw peer + server endpoint with NRECV_S receives posted,
 * NREAD_S Reads outstanding (the raw peer never answers) and a 1 MiB
 * source buffer. */
static bool rig_up(struct rig *g)
{
	struct mpa_prefs p;
	struct mpa_frame req;

	memset(g, 0, sizeof(*g));
	raw_connect(&g->r, &p, &req);
	if (!server_accept(&g->s, NWRITE_MAX + 8, NRECV_S) || !raw_established(&g->r, &p, &req))
		return false;
	g->src = calloc(1, MIB);
	REQUIRE(g->src);
	g->mr = ibv_reg_mr(g->s.id->pd, g->src, MIB, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(g->mr);
	struct ibv_sge rsg = { .addr = (uintptr_t)g->src, .length = 4096, .lkey = g->mr->lkey };
	for (int i = 0; i < NREAD_S; i++)
		CHECK(post1(g->s.id->qp, 10 + (unsigned)i, IBV_WR_RDMA_READ, &rsg, 1, 0x4400, 0,
			    0) == 0);
	return true;
}

static void rig_down(struct rig *g)
{
	if (g->mr)
		CHECK(ibv_dereg_mr(g->mr) == 0);
	free(g->src);
	free_ep(&g->s);
	if (g->r.fd >= 0)
		raw_close(&g->r);
}

/* A thread posting 1 MiB RDMA Writes, one per call, until one fails to
 * post, the QP is in ERR, or NWRITE_MAX. */
struct writer {
	struct rig *g;
	int posted; /* WRs accepted by ibv_post_send */
	int rc;
	double last_ms; /* when the last post_send returned */
	bool done;
	pthread_mutex_t mu;
};

static void *write_loop(void *arg)
{
	struct writer *w = arg;
	struct ibv_sge sg = { .addr = (uintptr_t)w->g->src, .length = MIB, .lkey = w->g->mr->lkey };
	int rc = 0, i;

	for (i = 0; i < NWRITE_MAX; i++) {
		rc = post1(w->g->s.id->qp, 100 + (unsigned)i, IBV_WR_RDMA_WRITE, &sg, 1, 0x4400, 0,
			   0);
		pthread_mutex_lock(&w->mu);
		w->last_ms = cm_now_ms();
		if (rc == 0)
			w->posted++;
		pthread_mutex_unlock(&w->mu);
		if (rc || qp_state(w->g->s.id->qp) == IBV_QPS_ERR)
			break;
	}
	pthread_mutex_lock(&w->mu);
	w->rc = rc;
	w->done = true;
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static void writer_start(struct writer *w, struct rig *g, pthread_t *t)
{
	memset(w, 0, sizeof(*w));
	w->g = g;
	pthread_mutex_init(&w->mu, NULL);
	REQUIRE(pthread_create(t, NULL, write_loop, w) == 0);
}

/* Join within ms; a thread still blocked then is a hang (exit at once:
 * nothing can be cleaned up under it). */
static void writer_join(struct writer *w, pthread_t t, int ms, const char *what)
{
	struct timespec dl;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += ms / 1000;
	dl.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	if (pthread_timedjoin_np(t, NULL, &dl) != 0) {
		fprintf(stderr, "%s: post_send still blocked after %d ms\n", what, ms);
		_exit(XS_TEST_FAIL);
	}
	pthread_mutex_destroy(&w->mu);
}

/* Wait until the writer made no progress for quiet_ms (it is blocked on
 * the socket); returns its count then. */
static int writer_stalled(struct writer *w, int quiet_ms, int max_ms)
{
	double end = cm_now_ms() + max_ms;

	for (;;) {
		pthread_mutex_lock(&w->mu);
		double last = w->last_ms;
		int n = w->posted;
		bool done = w->done;
		pthread_mutex_unlock(&w->mu);
		if (done || (last > 0 && cm_now_ms() - last > quiet_ms) || cm_now_ms() > end)
			return n;
		usleep(10000);
	}
}

/* Everything the server had outstanding completes within ms: nreads Reads
 * and nwrites Writes (a Write the socket took may be SUCCESS, the rest
 * flushed), every receive flushed; DISCONNECTED; QP in ERR. */
static void check_all_done(struct rig *g, int nwrites, int ms, const char *what)
{
	int ok, fl, other;
	double t0 = cm_now_ms();

	count_done(g->s.scq, NREAD_S + nwrites, ms, &ok, &fl, &other);
	printf("%s: %d Reads + %d Writes: %d ok, %d flushed, %d other; ", what, NREAD_S, nwrites,
	       ok, fl, other);
	CHECK(ok + fl == NREAD_S + nwrites && other == 0 && fl >= NREAD_S);
	count_done(g->s.rcq, NRECV_S, ms, &ok, &fl, &other);
	printf("%d receives flushed in %.0f ms\n", fl, cm_now_ms() - t0);
	CHECK(ok == 0 && fl == NRECV_S && other == 0);
	CHECK(cm_now_ms() - t0 < ms);
	struct rdma_cm_event *ev = cm_expect(lch, RDMA_CM_EVENT_DISCONNECTED, ms, what);
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK(wait_state(g->s.id->qp, IBV_QPS_ERR, ms));
	CHECK(cq_empty(g->s.scq) && cq_empty(g->s.rcq));
	int na, nb;
	drain_async(g->s.id->qp, &na, NULL, &nb);
	CHECK(na <= 1);
}

/* ---- the cases ------------------------------------------------------------------ */

static void test_rst(void)
{
	struct rig g;
	struct writer w;
	pthread_t t;

	if (!rig_up(&g)) {
		xs_test_failures++;
		rig_down(&g);
		return;
	}
	writer_start(&w, &g, &t);
	int n = writer_stalled(&w, 150, 3000); /* the socket is full */
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	REQUIRE(setsockopt(g.r.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
	raw_close(&g.r); /* RST */
	g.r.fd = -1;
	double t0 = cm_now_ms();
	writer_join(&w, t, 1000, "rst");
	printf("rst: writer blocked after %d MiB, returned %.0f ms after the RST\n", n,
	       cm_now_ms() - t0);
	check_all_done(&g, w.posted, 1000, "rst");
	rig_down(&g);
}

static void test_fin_mid_message(void)
{
	struct rig g;

	if (!rig_up(&g)) {
		xs_test_failures++;
		rig_down(&g);
		return;
	}
	/* a 200-octet Send: frame it, send its first 40 octets, then FIN */
	uint8_t payload[200];
	memset(payload, 0x42, sizeof(payload));
	struct ddp_hdr h = { .last = true, .dv = DDP_VERSION, .qn = RDMAP_QN_SEND, .msn = 1,
			     .rsvdulp = rdmap_ctrl_encode(RDMAP_OP_SEND) };
	uint8_t hb[DDP_MAX_HDR_LEN];
	struct iovec ulp[2] = { { hb, ddp_hdr_encode(&h, hb) }, { payload, sizeof(payload) } };
	REQUIRE(mpa_tx_frame(&g.r.tx.mpa, ulp, 2, &g.r.tx.frame) == 0);
	uint8_t wire[512];
	size_t wl = 0;
	for (int i = 0; i < g.r.tx.frame.iovcnt; i++) {
		REQUIRE(wl + g.r.tx.frame.iov[i].iov_len <= sizeof(wire));
		memcpy(wire + wl, g.r.tx.frame.iov[i].iov_base, g.r.tx.frame.iov[i].iov_len);
		wl += g.r.tx.frame.iov[i].iov_len;
	}
	REQUIRE(write(g.r.fd, wire, 40) == 40);
	usleep(20000);
	REQUIRE(shutdown(g.r.fd, SHUT_WR) == 0);
	check_all_done(&g, 0, 1000, "fin mid-FPDU");
	CHECK(raw_until_eof(&g.r)); /* and we closed our side too */
	printf("fin mid-FPDU: Terminate to the peer: %s\n", g.r.got_term ? "yes" : "no");
	rig_down(&g);
}

static void test_stall(void)
{
	struct rig g;
	struct writer w;
	pthread_t t;

	if (!rig_up(&g)) {
		xs_test_failures++;
		rig_down(&g);
		return;
	}
	int rcvbuf = 0;
	socklen_t sl = sizeof(int);
	getsockopt(g.r.fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &sl);
	long rss0 = rss_kib();
	double t0 = cm_now_ms();
	writer_start(&w, &g, &t);
	int n = writer_stalled(&w, 200, 5000);
	double tstall = cm_now_ms();
	long rss1 = rss_kib();
	int inq = 0;
	ioctl(g.r.fd, FIONREAD, &inq);
	/* a while later nothing more went anywhere */
	usleep(200000);
	pthread_mutex_lock(&w.mu);
	int n2 = w.posted;
	bool done = w.done;
	pthread_mutex_unlock(&w.mu);
	long rss2 = rss_kib();
	printf("stall: post_send blocked after %d x 1 MiB in %.0f ms; the peer's socket holds "
	       "%d KiB (rcvbuf %d KiB); RSS %ld -> %ld -> %ld KiB\n",
	       n, tstall - t0, inq / 1024, rcvbuf / 1024, rss0, rss1, rss2);
	CHECK(!done && n2 == n && n < 64);
	CHECK(rss2 - rss0 < 16 * 1024); /* no copies of the 1 MiB Writes */
	/* the tx timeout gives the connection up */
	pthread_mutex_lock(&w.mu);
	double tblock = w.last_ms; /* the blocked post_send began then */
	pthread_mutex_unlock(&w.mu);
	writer_join(&w, t, TX_TIMEOUT_MS + 1500, "stall");
	double tend = cm_now_ms();
	printf("stall: the blocked post_send returned after %.0f ms (XSOCK_TX_TIMEOUT_MS=%d)\n",
	       tend - tblock, TX_TIMEOUT_MS);
	CHECK(tend - tblock >= TX_TIMEOUT_MS - 50);
	/* the blocked WR flushed, the rest too */
	check_all_done(&g, w.posted, 1000, "stall");
	CHECK(raw_until_eof(&g.r));
	rig_down(&g);
}

static void test_destroy_outstanding(void)
{
	struct rig g;

	if (!rig_up(&g)) {
		xs_test_failures++;
		rig_down(&g);
		return;
	}
	/* no disconnect: QP and id go with 4 Reads and 50 receives posted */
	double t0 = cm_now_ms();
	CHECK(ibv_dereg_mr(g.mr) == 0);
	g.mr = NULL;
	free_ep(&g.s);
	double t1 = cm_now_ms();
	printf("destroy: QP, CQs and id destroyed with WRs outstanding in %.0f ms\n", t1 - t0);
	CHECK(t1 - t0 < 1000);
	CHECK(raw_until_eof(&g.r)); /* the peer sees the connection end */
	printf("destroy: the peer saw the close %.0f ms later\n", cm_now_ms() - t1);
	CHECK(cm_now_ms() - t1 < 1000);
	rig_down(&g);
}

/* The child: connect through verbs, post receives and a Read, say ready
 * on fd 3, wait for a byte, exit with everything open. */
static int child_main(uint16_t port)
{
	struct ep c;
	struct rdma_conn_param cp = conn_param();

	memset(&c, 0, sizeof(c));
	struct rdma_cm_id *id = cm_resolved_id(&c.ch, NULL, port);
	make_qp(&c, id, 16, FILL_C);
	REQUIRE(post_recvs(&c, 8, 1) == 0);
	REQUIRE(rdma_connect(id, &cp) == 0);
	struct rdma_cm_event *ev = cm_expect(c.ch, RDMA_CM_EVENT_ESTABLISHED, 3000, "child");
	REQUIRE(ev);
	rdma_ack_cm_event(ev);
	char b = 'r';
	REQUIRE(write(3, &b, 1) == 1);
	struct pollfd pf = { .fd = 3, .events = POLLIN };
	poll(&pf, 1, 5000);
	exit(0); /* connection, QP, MRs all still open */
}

static void test_exit(void)
{
	int sv[2], status = 0;
	char port[16], b;

	snprintf(port, sizeof(port), "%u", lport);
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		/* a fresh process (no engine thread copied half-way) */
		if (sv[1] == 3 ? fcntl(3, F_SETFD, 0) < 0 : dup2(sv[1], 3) < 0)
			_exit(99);
		execl("/proc/self/exe", "test-verbs-faults", "child", port, (char *)NULL);
		_exit(99);
	}
	close(sv[1]);
	struct ep s;
	bool up = server_accept(&s, 16, 8);
	struct pollfd pf = { .fd = sv[0], .events = POLLIN };
	CHECK(up && poll(&pf, 1, 5000) == 1 && read(sv[0], &b, 1) == 1);
	struct ibv_sge rs = { .addr = (uintptr_t)(s.mem + GUARD), .length = 64,
			      .lkey = s.mr[T_RW]->lkey };
	close(sv[0]); /* the child's poll returns: it exits */
	REQUIRE(waitpid(pid, &status, 0) == pid);
	double t0 = cm_now_ms();
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	struct rdma_cm_event *ev = cm_expect(lch, RDMA_CM_EVENT_DISCONNECTED, 1000, "exit");
	if (ev)
		rdma_ack_cm_event(ev);
	int ok, fl, other;
	count_done(s.rcq, 8, 1000, &ok, &fl, &other);
	printf("exit: DISCONNECTED and %d receives flushed %.0f ms after the child's exit\n", fl,
	       cm_now_ms() - t0);
	CHECK(ok == 0 && fl == 8 && other == 0 && cm_now_ms() - t0 < 1000);
	/* a WR posted now flushes at once */
	CHECK(post1(s.id->qp, 7, IBV_WR_RDMA_READ, &rs, 1, 0x4400, 0, 0) == 0);
	count_done(s.scq, 1, 1000, &ok, &fl, &other);
	CHECK(fl == 1);
	int na, nb;
	drain_async(s.id->qp, &na, NULL, &nb);
	free_ep(&s);
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "child") == 0)
		return child_main((uint16_t)atoi(argv[2]));
	signal(SIGPIPE, SIG_IGN);
	char ms[16];
	snprintf(ms, sizeof(ms), "%d", TX_TIMEOUT_MS);
	setenv("XSOCK_TX_TIMEOUT_MS", ms, 1); /* read once, at first use */

	int fd0 = count_fds();
	verbs_test_listen();
	int fd1 = count_fds();

	static const struct {
		const char *name;
		void (*fn)(void);
	} tests[] = { { "rst", test_rst }, { "fin", test_fin_mid_message }, { "stall", test_stall },
		      { "destroy", test_destroy_outstanding }, { "exit", test_exit } };
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		double t0 = cm_now_ms();
		tests[i].fn();
		printf("-- %s: %.0f ms\n", tests[i].name, cm_now_ms() - t0);
	}

	/* connections leave nothing open behind (the engine may take a
	 * moment to close what it was polling) */
	double end = cm_now_ms() + 1000;
	int fd2;
	while ((fd2 = count_fds()) != fd1 && cm_now_ms() < end)
		usleep(10000);
	printf("fds: %d at start, %d with the listener, %d at the end\n", fd0, fd1, fd2);
	CHECK(fd2 == fd1);
	CHECK(rdma_destroy_id(lid) == 0);
	rdma_destroy_event_channel(lch);
	return xs_test_result();
}
