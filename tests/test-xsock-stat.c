/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* xsock-stat: the counters of a known exchange over a loopback RC
 * connection with the default settings, exactly, read from this process's
 * statistics file (verbs/xs_stat_shm.h) and through tools/xsock-stat
 * --json: N Sends of S octets, M RDMA Writes of W octets and K RDMA Reads
 * of R octets, then a Write to an invalid STag (the responder's Terminate
 * DDP/1/0x00, both QPs flushed).  The file is removed at exit, and by
 * xsock-stat once a process that skipped its exit handlers is gone. */
#include "config.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "tests/test-cm-util.h"
#include "verbs/xs_stat_shm.h"

#define N 5
#define S 100
#define M 3
#define W 200
#define K 2
#define R 300
#define G 3 /* receives the responder posts beyond the N Sends: flushed */
#define F 2 /* receives the initiator posts: flushed */
#define BUF 4096

struct side {
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char buf[BUF];
};

static struct rdma_event_channel *lch, *cch;
static struct rdma_cm_id *lid;

static void stat_path(char *buf, size_t len, int pid)
{
	snprintf(buf, len, "%s/%s%u-%d", XS_STAT_DIR, XS_STAT_PREFIX, (unsigned)getuid(), pid);
}

static void post_recvs(struct side *x, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)x->buf, .length = S, .lkey = x->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 100 + (uint64_t)i, .sg_list = &sge, .num_sge = 1 };
		struct ibv_recv_wr *bad;

		REQUIRE(ibv_post_recv(x->id->qp, &wr, &bad) == 0);
	}
}

static void side_mr(struct side *x)
{
	x->mr = ibv_reg_mr(x->id->pd, x->buf, sizeof(x->buf),
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	REQUIRE(x->mr);
}

/* A connected pair in this process: c initiator, s responder. */
static void pair_up(struct side *c, struct side *s, int s_recvs, int c_recvs)
{
	struct rdma_conn_param cp = { .responder_resources = 4, .initiator_depth = 4 };
	struct rdma_cm_event *ev;
	uint16_t port = cm_listen(&lch, &lid);

	c->id = cm_resolved_id(&cch, NULL, port);
	c->cq = cm_rc_qp(c->id, 64, 32);
	side_mr(c);
	post_recvs(c, c_recvs);
	REQUIRE(rdma_connect(c->id, &cp) == 0);
	ev = cm_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 3000, "request");
	REQUIRE(ev);
	s->id = ev->id;
	rdma_ack_cm_event(ev);
	s->cq = cm_rc_qp(s->id, 64, 32);
	side_mr(s);
	post_recvs(s, s_recvs);
	REQUIRE(rdma_accept(s->id, &cp) == 0);
	cm_expect_ack(s->id->channel, RDMA_CM_EVENT_ESTABLISHED, 3000, "server established");
	cm_expect_ack(cch, RDMA_CM_EVENT_ESTABLISHED, 3000, "client established");
}

static void post(struct side *c, enum ibv_wr_opcode op, uint32_t len, uint32_t rkey, uint64_t raddr)
{
	struct ibv_sge sge = { .addr = (uintptr_t)c->buf, .length = len, .lkey = c->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = op, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.rdma.rkey = rkey;
	wr.wr.rdma.remote_addr = raddr;
	REQUIRE(ibv_post_send(c->id->qp, &wr, &bad) == 0);
}

/* A child: one connection and one Send, its file there, then exit (clean)
 * or _exit (no exit handlers: the file stays). */
static void child(bool clean)
{
	struct side c, s;
	struct ibv_wc wc[2];
	char path[128];

	memset(&c, 0, sizeof(c));
	memset(&s, 0, sizeof(s));
	pair_up(&c, &s, 1, 0);
	post(&c, IBV_WR_SEND, S, 0, 0);
	REQUIRE(poll_n(c.cq, wc, 1, 3000) == 1 && poll_n(s.cq, wc, 1, 3000) == 1);
	stat_path(path, sizeof(path), getpid());
	if (access(path, F_OK) != 0)
		_exit(3);
	if (clean)
		exit(0);
	_exit(0);
}

static void test_files_removed(void)
{
	char path[128], cmd[512];
	const char *top = getenv("XS_TOP_BUILDDIR");
	int st;

	for (int clean = 1; clean >= 0; clean--) {
		pid_t pid = fork();

		REQUIRE(pid >= 0);
		if (pid == 0)
			child(clean);
		REQUIRE(waitpid(pid, &st, 0) == pid);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		stat_path(path, sizeof(path), pid);
		if (clean) {
			CHECK(access(path, F_OK) != 0); /* removed at exit */
			continue;
		}
		CHECK(access(path, F_OK) == 0); /* _exit: left behind */
		snprintf(cmd, sizeof(cmd), "%s/tools/xsock-stat >/dev/null", top ? top : ".");
		CHECK(system(cmd) == 0);
		CHECK(access(path, F_OK) != 0); /* the listing removed it */
	}
	/* a file left by _exit goes when the next process makes its own */
	pid_t gone = fork();

	REQUIRE(gone >= 0);
	if (gone == 0)
		child(false);
	REQUIRE(waitpid(gone, &st, 0) == gone);
	stat_path(path, sizeof(path), gone);
	CHECK(access(path, F_OK) == 0);
	pid_t next = fork();

	REQUIRE(next >= 0);
	if (next == 0)
		child(true);
	REQUIRE(waitpid(next, &st, 0) == next);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(access(path, F_OK) != 0);
}

static const struct xs_stat_file *stat_map(void)
{
	char path[128];
	void *m;
	int fd;

	stat_path(path, sizeof(path), getpid());
	fd = open(path, O_RDONLY);
	REQUIRE(fd >= 0);
	m = mmap(NULL, sizeof(struct xs_stat_hdr) + XS_STAT_SLOTS * sizeof(struct xs_stat_conn),
		 PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	REQUIRE(m != MAP_FAILED);
	return m;
}

/* This process's live connection of that role (a copy; zeros if none). */
static struct xs_stat_conn slot_of(const struct xs_stat_file *f, bool initiator)
{
	struct xs_stat_conn o;

	memset(&o, 0, sizeof(o));
	for (unsigned i = 0; i < __atomic_load_n(&f->hdr.hiwater, __ATOMIC_ACQUIRE); i++) {
		const struct xs_stat_conn *s = &f->slot[i];
		if (__atomic_load_n(&s->in_use, __ATOMIC_ACQUIRE) && s->initiator == initiator)
			memcpy(&o, s, sizeof(o));
	}
	return o;
}

/* octets of one FPDU of a DDP header and payload: MPA length field, pad,
 * CRC field (zero without CRC); no Markers */
#define FPDU(hdr, payload) ((uint64_t)((2 + (hdr) + (payload) + 3) / 4 * 4 + 4))

static bool dir_is(const struct xs_stat_dir *d, uint64_t sends, uint64_t writes, uint64_t reads,
		   uint64_t rresps, uint64_t fpdus, uint64_t octets)
{
	return d->sends == sends && d->writes == writes && d->reads == reads &&
	       d->read_resps == rresps && d->fpdus == fpdus && d->octets == octets &&
	       d->terms == 0 && d->atomics == 0;
}

static void check_dir(const char *who, const struct xs_stat_dir *d, uint64_t sends,
		      uint64_t writes, uint64_t reads, uint64_t rresps, uint64_t fpdus,
		      uint64_t octets)
{
	if (dir_is(d, sends, writes, reads, rresps, fpdus, octets))
		return;
	fprintf(stderr, "%s: sends %" PRIu64 " writes %" PRIu64 " reads %" PRIu64
		" rresps %" PRIu64 " fpdus %" PRIu64 " octets %" PRIu64 " terms %" PRIu64 "\n",
		who, d->sends, d->writes, d->reads, d->read_resps, d->fpdus, d->octets, d->terms);
	xs_test_failures++;
}

static bool wait_until(bool (*cond)(const struct xs_stat_file *), const struct xs_stat_file *f)
{
	for (int i = 0; i < 3000; i++) {
		if (cond(f))
			return true;
		usleep(1000);
	}
	return false;
}

/* what the initiator sends, and its responder sends back */
static const uint64_t c_tx_octets = N * FPDU(18, S) + M * FPDU(14, W) + K * FPDU(18, 28);
static const uint64_t s_tx_octets = K * FPDU(14, R);

static bool exchange_done(const struct xs_stat_file *f)
{
	struct xs_stat_conn c = slot_of(f, true), s = slot_of(f, false);

	return dir_is(&c.c.tx, N, M, K, 0, N + M + K, c_tx_octets) &&
	       dir_is(&c.c.rx, 0, 0, 0, K, K, s_tx_octets) &&
	       dir_is(&s.c.tx, 0, 0, 0, K, K, s_tx_octets) &&
	       dir_is(&s.c.rx, N, M, K, 0, N + M + K, c_tx_octets);
}

static bool terminated(const struct xs_stat_file *f)
{
	struct xs_stat_conn c = slot_of(f, true), s = slot_of(f, false);

	return s.c.tx.terms == 1 && c.c.rx.terms == 1 && c.c.flushed == F && s.c.flushed == G &&
	       c.state == XS_STAT_CLOSED && s.state == XS_STAT_CLOSED;
}

static bool all_closed(const struct xs_stat_file *f)
{
	return __atomic_load_n(&f->hdr.closed_conns, __ATOMIC_ACQUIRE) == 2 &&
	       __atomic_load_n(&f->hdr.seq, __ATOMIC_ACQUIRE) % 2 == 0;
}

/* The tool's JSON for this process holds each of the strings. */
static void check_tool(const char *const *want, int n)
{
	const char *top = getenv("XS_TOP_BUILDDIR");
	static char out[1 << 16];
	char cmd[512];
	size_t got;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "%s/tools/xsock-stat -p %d --json", top ? top : ".", getpid());
	p = popen(cmd, "r");
	REQUIRE(p);
	got = fread(out, 1, sizeof(out) - 1, p);
	out[got] = 0;
	CHECK(pclose(p) == 0);
	for (int i = 0; i < n; i++)
		if (!strstr(out, want[i])) {
			fprintf(stderr, "xsock-stat --json lacks %s:\n%s\n", want[i], out);
			xs_test_failures++;
		}
	snprintf(cmd, sizeof(cmd), "%s/tools/xsock-stat -p %d >/dev/null", top ? top : ".", getpid());
	CHECK(system(cmd) == 0);
}

/* A child of fork counts in a file of its own, which starts with the
 * connections it inherited; xsock-stat removes it once the child is gone
 * (_exit: no exit handlers). */
static void test_fork_child(void)
{
	char path[128], cmd[512];
	const char *top = getenv("XS_TOP_BUILDDIR");
	int st;
	pid_t pid = fork();

	REQUIRE(pid >= 0);
	if (pid == 0) {
		const struct xs_stat_file *f = stat_map();
		bool ok = f->hdr.pid == getpid() && slot_of(f, true).in_use && slot_of(f, false).in_use &&
			  slot_of(f, true).c.tx.sends == N;
		_exit(ok ? 0 : 1);
	}
	REQUIRE(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	stat_path(path, sizeof(path), pid);
	CHECK(access(path, F_OK) == 0);
	snprintf(cmd, sizeof(cmd), "%s/tools/xsock-stat --json >/dev/null", top ? top : ".");
	CHECK(system(cmd) == 0);
	CHECK(access(path, F_OK) != 0);
}

static void test_exchange(void)
{
	struct ibv_wc wc[N + M + K + 1];
	struct side c, s;
	const struct xs_stat_file *f;
	char pidstr[32];

	memset(&c, 0, sizeof(c));
	memset(&s, 0, sizeof(s));
	pair_up(&c, &s, N + G, F);
	f = stat_map();
	CHECK_EQ_U(f->hdr.magic, XS_STAT_MAGIC);
	CHECK_EQ_U(f->hdr.version, XS_STAT_VERSION);
	CHECK_EQ_U(f->hdr.pid, getpid());

	/* the Writes first: the Sends behind them arrive after them */
	for (int i = 0; i < M; i++)
		post(&c, IBV_WR_RDMA_WRITE, W, s.mr->rkey, (uintptr_t)s.buf);
	for (int i = 0; i < N; i++)
		post(&c, IBV_WR_SEND, S, 0, 0);
	for (int i = 0; i < K; i++)
		post(&c, IBV_WR_RDMA_READ, R, s.mr->rkey, (uintptr_t)s.buf + 1024);
	CHECK(poll_n(c.cq, wc, N + M + K, 3000) == N + M + K);
	CHECK(poll_n(s.cq, wc, N, 3000) == N);
	for (int i = 0; i < N; i++)
		CHECK(wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len == S);

	CHECK(wait_until(exchange_done, f));
	struct xs_stat_conn cs = slot_of(f, true), ss = slot_of(f, false);
	check_dir("initiator tx", &cs.c.tx, N, M, K, 0, N + M + K, c_tx_octets);
	check_dir("initiator rx", &cs.c.rx, 0, 0, 0, K, K, s_tx_octets);
	check_dir("responder tx", &ss.c.tx, 0, 0, 0, K, K, s_tx_octets);
	check_dir("responder rx", &ss.c.rx, N, M, K, 0, N + M + K, c_tx_octets);
	CHECK_EQ_U(cs.state, XS_STAT_ESTABLISHED);
	CHECK_EQ_U(ss.state, XS_STAT_ESTABLISHED);
	/* the default MPA options: rev 2, no CRC, no Markers, no P2P; RFC 7306 */
	CHECK(cs.mpa_rev == 2 && !cs.crc && !cs.markers_tx && !cs.markers_rx && !cs.p2p);
	CHECK(ss.mpa_rev == 2 && !ss.crc && !ss.markers_tx && !ss.markers_rx && !ss.p2p);
	CHECK(cs.rdmap_ext && ss.rdmap_ext);
	CHECK_EQ_U(cs.ord, 4);
	CHECK_EQ_U(ss.ird, 4);
	CHECK(cs.local.family == AF_INET && cs.peer.family == AF_INET);
	CHECK_EQ_U(cs.peer.port, ss.local.port);
	CHECK_EQ_U(cs.local.port, ss.peer.port);
	CHECK_EQ_U(cs.local.port, ntohs(rdma_get_src_port(c.id)));
	CHECK_EQ_U(cs.c.crc_errors + ss.c.crc_errors + cs.c.flushed + ss.c.flushed, 0);
	snprintf(pidstr, sizeof(pidstr), "\"pid\": %d", getpid());
	const char *want1[] = { pidstr, "\"state\": \"ESTABLISHED\"", "\"sends\": 5, \"writes\": 3, \"reads\": 2",
				"\"rev\": 2, \"crc\": false, \"markers_tx\": false" };
	check_tool(want1, 4);

	/* a Write to an STag the responder does not have: its Terminate */
	post(&c, IBV_WR_RDMA_WRITE, 8, s.mr->rkey ^ 0x5a, (uintptr_t)s.buf);
	CHECK(wait_until(terminated, f));
	cs = slot_of(f, true);
	ss = slot_of(f, false);
	CHECK_EQ_U(ss.c.tx.terms, 1);
	CHECK_EQ_U(cs.c.rx.terms, 1);
	CHECK_EQ_U(ss.c.term_tx, 1u << 24 | 1u << 16 | 1u << 8 | 0); /* DDP/1/0x00 */
	CHECK_EQ_U(cs.c.term_rx, ss.c.term_tx);
	CHECK_EQ_U(cs.c.tx.terms + ss.c.rx.terms + cs.c.term_tx + ss.c.term_rx, 0);
	CHECK_EQ_U(cs.c.tx.writes, M + 1);
	CHECK_EQ_U(ss.c.rx.writes, M); /* not placed */
	CHECK_EQ_U(cs.c.flushed, F);
	CHECK_EQ_U(ss.c.flushed, G);
	CHECK_EQ_U(cs.state, XS_STAT_CLOSED);
	CHECK_EQ_U(ss.state, XS_STAT_CLOSED);
	CHECK(ss.status < 0);
	const char *want2[] = { "\"terminates\": 1, \"last_terminate\": {\"layer\": 1, \"etype\": 1, \"ecode\": 0}",
				"\"state\": \"CLOSED\"", "\"flushed\": 2", "\"flushed\": 3" };
	check_tool(want2, 4);
	test_fork_child(); /* after it: a fork leaves shared connections unclaimed */

	/* the connections gone: their counters in the process's closed totals */
	rdma_destroy_qp(c.id);
	rdma_destroy_qp(s.id);
	CHECK(rdma_destroy_id(c.id) == 0);
	CHECK(rdma_destroy_id(s.id) == 0);
	CHECK(wait_until(all_closed, f));
	CHECK_EQ_U(f->hdr.opened, 2);
	CHECK_EQ_U(f->hdr.closed.tx.sends, N);
	CHECK_EQ_U(f->hdr.closed.rx.sends, N);
	CHECK_EQ_U(f->hdr.closed.tx.writes, M + 1);
	CHECK_EQ_U(f->hdr.closed.tx.read_resps, K);
	CHECK_EQ_U(f->hdr.closed.tx.terms, 1);
	CHECK_EQ_U(f->hdr.closed.flushed, F + G);
	CHECK_EQ_U(slot_of(f, true).in_use + slot_of(f, false).in_use, 0);
	ibv_dereg_mr(c.mr);
	ibv_dereg_mr(s.mr);
	ibv_destroy_cq(c.cq);
	ibv_destroy_cq(s.cq);
}

int main(void)
{
	/* the default settings, whatever the environment says */
	static const char *const env[] = { "XSOCK_MPA_REV", "XSOCK_MPA_CRC", "XSOCK_MPA_MARKERS",
					   "XSOCK_MPA_P2P", "XSOCK_STAT" };
	for (unsigned i = 0; i < sizeof(env) / sizeof(env[0]); i++)
		unsetenv(env[i]);
	/* the stack has no other place for its files (verbs/xs_stat.c), and
	 * Debian's /dev/shm is a tmpfs everyone may write to */
	if (access(XS_STAT_DIR, W_OK) != 0) {
		printf("FAIL: %s not writable: xsock-stat has no statistics files\n", XS_STAT_DIR);
		return XS_TEST_FAIL;
	}
	test_files_removed(); /* before this process uses the stack: no fork handling */
	test_exchange();
	return xs_test_failures ? XS_TEST_FAIL : XS_TEST_PASS;
}
