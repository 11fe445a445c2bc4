/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A hostile local peer (issue 31 item 3): datagrams that are malformed,
 * truncated, too long, of another version, or for a QP or comm ID the
 * process does not have, sent to the abstract names of a RoCE process
 * (XSOCK_TRANSPORT=roce) as any process of the host could:
 *   - to a listener's @xsock-rcm-sid4-<sid>: an empty datagram, an unknown
 *     first octet, a MAD forward one octet short, one with an IPv4
 *     address longer than 4 octets, one whose MAD does not decode, a stray
 *     with no payload, a datagram longer than any, and an RTU for a comm ID
 *     nobody has;
 *   - to a connected QP's @xsock-rqp-127.0.0.1-<qpn>: a header cut short,
 *     version 1, segment size 0, a packet shorter than a BTH, a packet
 *     for another QP, and a well-formed forward of a packet whose ICRC
 *     fails (the RC engine's own check drops it);
 * each is dropped (no crash, no hang: the connection then carries a Send
 * as before, and the listener accepts), and counted in the process's
 * statistics file, exactly: local_bad 11, local_noqp 2, which
 * tools/xsock-stat shows (-p, --json). */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/un.h>

#include "roce/roce_cm.h"
#include "tests/test-cm-util.h"
#include "util/xs_be.h"
#include "verbs/xs_local_wire.h"

#define WANT_BAD 11
#define WANT_NOQP 2

static int hostile = -1; /* the sender: an unbound datagram socket */

/* An abstract name's address: '\0' then the name. */
static socklen_t abstract(struct sockaddr_un *un, const char *name)
{
	memset(un, 0, sizeof(*un));
	un->sun_family = AF_UNIX;
	snprintf(un->sun_path + 1, sizeof(un->sun_path) - 1, "%s", name);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
}

/* Is the abstract name bound by a socket of this process?  (Another
 * process's QP may have the same number on 127.0.0.1: its name is then
 * not ours, and nothing is sent to it.)  /proc/net/unix gives the name's
 * inode, /proc/self/fd the inodes of our sockets. */
static bool name_is_ours(const char *name)
{
	char line[512], want[128], link[64], path[300];
	unsigned long inode = 0;
	bool ours = false;
	struct dirent *e;
	FILE *f = fopen("/proc/net/unix", "re");
	DIR *d;

	snprintf(want, sizeof(want), "@%s", name);
	if (!f)
		return false;
	while (!inode && fgets(line, sizeof(line), f)) {
		char p[256] = "";
		unsigned long ino;

		if (sscanf(line, "%*s %*s %*s %*s %*s %*s %lu %255s", &ino, p) == 2 &&
		    !strcmp(p, want))
			inode = ino;
	}
	fclose(f);
	d = opendir("/proc/self/fd");
	if (!inode || !d) {
		if (d)
			closedir(d);
		return false;
	}
	snprintf(want, sizeof(want), "socket:[%lu]", inode);
	while (!ours && (e = readdir(d))) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = 0;
			ours = !strcmp(link, want);
		}
	}
	closedir(d);
	return ours;
}

static void send_to(const char *name, const void *b, size_t len)
{
	struct sockaddr_un un;
	socklen_t ul = abstract(&un, name);

	CHECK(sendto(hostile, b, len, 0, (struct sockaddr *)&un, ul) == (ssize_t)len);
}

/* A CM forward of mad from 127.0.0.1 to 127.0.0.1 into b: its length. */
static size_t cm_fwd(uint8_t *b, const uint8_t *mad)
{
	struct xs_local_cm m = { .kind = XS_LOCAL_CM_MAD, .family = AF_INET,
				 .local = { 127, 0, 0, 1 }, .peer = { 127, 0, 0, 1 },
				 .data = mad, .len = ROCE_MAD_LEN };

	return xs_local_cm_encode(&m, b, XS_LOCAL_CM_MAD_LEN);
}

/* 8 datagrams to the listener's name: 7 malformed, 1 for no comm ID. */
static void to_listener(uint16_t port)
{
	static uint8_t b[XS_LOCAL_CM_MAX + 100];
	uint8_t mad[ROCE_MAD_LEN] = { 0 };
	struct roce_cm_msg m;
	char name[64];
	size_t n;

	snprintf(name, sizeof(name), "xsock-rcm-sid4-%016llx",
		 (unsigned long long)roce_cm_service_id(port));
	REQUIRE(name_is_ours(name)); /* (our listener has it, or rdma_listen failed) */
	send_to(name, b, 0); /* empty */
	b[0] = 9;
	send_to(name, b, 1); /* an unknown family */
	n = cm_fwd(b, mad);
	send_to(name, b, n - 1); /* one octet short */
	b[1 + 4] = 1;
	send_to(name, b, n); /* an IPv4 address of more than 4 octets */
	b[1 + 4] = 0;
	send_to(name, b, n); /* a MAD of zeros: it does not decode */
	b[0] = XS_LOCAL_STRAY | 4;
	send_to(name, b, XS_LOCAL_STRAY_HDR); /* a stray without a payload */
	send_to(name, b, sizeof(b)); /* longer than any */
	roce_cm_hdr_init(&m, ROCE_CM_ATTR_RTU, 0x77);
	m.u.rtu.local_comm_id = 0x0badc0de;
	m.u.rtu.remote_comm_id = 0x0001ffff; /* tag 1: not this process's */
	roce_cm_encode(&m, mad);
	send_to(name, b, cm_fwd(b, mad)); /* well-formed, for no comm ID of ours */
}

/* 6 datagrams to the QP's name: 4 malformed, 1 for another QP, 1 that
 * passes the format (its packet then fails the engine's ICRC check).
 * False: the name is not this process's, nothing sent. */
static bool to_qp(uint32_t qpn)
{
	uint8_t b[XS_LOCAL_FWD_HDR + 64] = { 0 };
	char name[64];

	snprintf(name, sizeof(name), "xsock-rqp-127.0.0.1-%06x", qpn);
	if (!name_is_ours(name)) {
		/* another process's QP has our number on 127.0.0.1 */
		printf("note: %s is not this process's: its checks are not made\n", name);
		return false;
	}
	xs_local_fwd_hdr(b, 32);
	send_to(name, b, 3); /* a header cut short */
	xs_put_be16(b + 2, 1);
	send_to(name, b, sizeof(b)); /* version 1 */
	xs_local_fwd_hdr(b, 0);
	send_to(name, b, sizeof(b)); /* segment size 0 */
	xs_local_fwd_hdr(b, 32);
	send_to(name, b, XS_LOCAL_FWD_HDR + 32 + ROCE_BTH_LEN - 1); /* a packet < BTH */
	b[XS_LOCAL_FWD_HDR] = ROCE_RC_SEND_ONLY;
	xs_put_be32(b + XS_LOCAL_FWD_HDR + 4, qpn ^ 1);
	xs_put_be32(b + XS_LOCAL_FWD_HDR + 32 + 4, qpn);
	send_to(name, b, sizeof(b)); /* its first packet for another QP */
	xs_put_be32(b + XS_LOCAL_FWD_HDR + 4, qpn);
	send_to(name, b, sizeof(b)); /* well-formed; ICRCs wrong */
	return true;
}

/* The process's local drops as its file has them (0, 0: no file yet). */
static void local_counts(uint64_t *bad, uint64_t *noqp)
{
	const struct xs_stat_file *f = cm_stat_map();

	*bad = *noqp = 0;
	if (!f)
		return;
	CHECK_EQ_U(f->hdr.has_local, 1);
	*bad = __atomic_load_n(&f->hdr.local_bad, __ATOMIC_RELAXED);
	*noqp = __atomic_load_n(&f->hdr.local_noqp, __ATOMIC_RELAXED);
	munmap((void *)f, sizeof(struct xs_stat_hdr) + XS_STAT_SLOTS * sizeof(struct xs_stat_conn));
}

/* xsock-stat's output for this process (with args) holds want. */
static void check_tool(const char *args, const char *want)
{
	const char *top = getenv("XS_TOP_BUILDDIR");
	static char out[1 << 16];
	char cmd[512];
	size_t got;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "%s/tools/xsock-stat -p %d %s", top ? top : ".", getpid(), args);
	p = popen(cmd, "r");
	REQUIRE(p);
	got = fread(out, 1, sizeof(out) - 1, p);
	out[got] = 0;
	CHECK(pclose(p) == 0);
	if (!strstr(out, want)) {
		fprintf(stderr, "xsock-stat %s lacks %s:\n%s\n", args, want, out);
		xs_test_failures++;
	}
}

int main(void)
{
	struct rdma_event_channel *lch, *cch;
	struct rdma_cm_id *lid, *cid, *sid;
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1 };
	struct rdma_cm_event *ev;
	struct ibv_cq *ccq, *scq;
	struct ibv_mr *cmr, *smr;
	struct ibv_wc wc;
	char cbuf[64] = "after the hostile datagrams", sbuf[64] = { 0 }, want[128];
	uint64_t bad = 0, noqp = 0, want_bad = WANT_BAD, want_noqp = WANT_NOQP;
	uint16_t port;

	xs_test_seed(1);
	setenv("XSOCK_TRANSPORT", "roce", 1); /* before the library's first read */
	hostile = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	REQUIRE(hostile >= 0);

	port = cm_listen(&lch, &lid);
	to_listener(port);

	/* a connection in this process, after them */
	cid = cm_resolved_id(&cch, NULL, port);
	ccq = cm_rc_qp(cid, 16, 8);
	REQUIRE(rdma_connect(cid, &cp) == 0);
	ev = cm_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000, "request");
	REQUIRE(ev);
	sid = ev->id;
	rdma_ack_cm_event(ev);
	scq = cm_rc_qp(sid, 16, 8);
	smr = ibv_reg_mr(sid->pd, sbuf, sizeof(sbuf), IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(smr);
	{
		struct ibv_sge s = { .addr = (uintptr_t)sbuf, .length = sizeof(sbuf),
				     .lkey = smr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &s, .num_sge = 1 }, *badwr;

		REQUIRE(ibv_post_recv(sid->qp, &wr, &badwr) == 0);
	}
	REQUIRE(rdma_accept(sid, &cp) == 0);
	cm_expect_ack(lch, RDMA_CM_EVENT_ESTABLISHED, 5000, "server established");
	cm_expect_ack(cch, RDMA_CM_EVENT_ESTABLISHED, 5000, "client established");

	if (!to_qp(sid->qp->qp_num)) {
		want_bad -= 4;
		want_noqp -= 1;
	}

	/* the connection carries a Send as before */
	cmr = ibv_reg_mr(cid->pd, cbuf, sizeof(cbuf), IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(cmr);
	{
		struct ibv_sge s = { .addr = (uintptr_t)cbuf, .length = 28, .lkey = cmr->lkey };
		struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &s, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
				   *badwr;

		REQUIRE(ibv_post_send(cid->qp, &wr, &badwr) == 0);
	}
	CHECK(cm_poll_one(ccq, &wc, 5000) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 2);
	CHECK(cm_poll_one(scq, &wc, 5000) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1 &&
	      wc.byte_len == 28 && !strcmp(sbuf, "after the hostile datagrams"));

	/* every datagram counted, once: the engines drain the names */
	for (int i = 0; i < 500 && (bad < want_bad || noqp < want_noqp); i++) {
		usleep(10000);
		local_counts(&bad, &noqp);
	}
	usleep(50000); /* none counted twice */
	local_counts(&bad, &noqp);
	CHECK_EQ_U(bad, want_bad);
	CHECK_EQ_U(noqp, want_noqp);
	snprintf(want, sizeof(want), "\"local\": {\"local_bad\": %llu, \"local_noqp\": %llu}",
		 (unsigned long long)want_bad, (unsigned long long)want_noqp);
	check_tool("--json", want);
	snprintf(want, sizeof(want), "local messages dropped: local_bad %llu ",
		 (unsigned long long)want_bad);
	check_tool("", want);

	CHECK_EQ_U(rdma_disconnect(cid), 0);
	cm_expect_ack(cch, RDMA_CM_EVENT_DISCONNECTED, 5000, "client disconnected");
	cm_expect_ack(lch, RDMA_CM_EVENT_DISCONNECTED, 5000, "server disconnected");
	rdma_destroy_qp(cid);
	rdma_destroy_qp(sid);
	ibv_dereg_mr(cmr);
	ibv_dereg_mr(smr);
	ibv_destroy_cq(ccq);
	ibv_destroy_cq(scq);
	rdma_destroy_id(cid);
	rdma_destroy_id(sid);
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(lch);
	close(hostile);
	return xs_test_result();
}
