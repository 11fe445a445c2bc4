/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A malicious peer: a raw MPA initiator (this file's own framing on a plain
 * TCP socket) against an xsock responder (rdma_cm listener, RC QP, memory
 * regions between guard pages), one bad input per case.
 *
 * Before the connection is up (the MPA exchange): a wrong key, a bad
 * revision, private data over the limit or beyond the frame, silence.  The
 * responder closes the TCP connection without an event (after
 * XSOCK_MPA_TIMEOUT_MS for the incomplete ones).
 *
 * Established, twice (issue 29): first with the default framing (the
 * XSOCK_MPA_* defaults, a peer asking for nothing: no CRC, no Markers),
 * then this program again with Markers forced (XSOCK_MPA_MARKERS=1, the
 * peer asking for CRC: both on both ways); the bad-CRC and bad-Marker
 * cases only then.  For each case the peer must
 * receive a Terminate with the RFC 5040/5041/5044 layer, type and code, then
 * FIN; the responder's QP must be in ERR with every posted receive flushed
 * (IBV_WC_WR_FLUSH_ERR), DISCONNECTED must arrive, and not one octet of the
 * registered memory or its guard pages may change.  Every wait is bounded. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ddp/ddp.h"
#include "iwarp/rdmap.h"
#include "mpa/mpa.h"
#include "tests/test-cm-util.h"

#define PAGE 4096
#define RECV_LEN 256
#define RECVS 4

/* ---- the responder: xsock through its public API ------------------------- */

struct srv {
	struct rdma_cm_id *id;
	struct ibv_pd *pd2;
	struct ibv_cq *cq;
	uint8_t *area; /* guard | mr_w | guard | mr_r | guard | mr_o | guard */
	uint8_t *copy; /* what area must still hold */
	struct ibv_mr *mr_w, *mr_r, *mr_o, *mr_recv;
	uint8_t recv_buf[RECVS * RECV_LEN];
	int posted;
};

#define AREA_LEN (7 * PAGE)

static struct rdma_event_channel *lch;
static struct rdma_cm_id *lid;
static uint16_t lport;
static bool framed; /* this run: CRC and Markers (else the default framing) */

/* Take the CONNECT_REQUEST, build the QP and regions, accept. */
static bool srv_accept(struct srv *s, int recvs)
{
	struct rdma_cm_event *ev = cm_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 3000, "request");
	struct ibv_qp_init_attr a;
	struct rdma_conn_param cp;

	if (!ev)
		return false;
	memset(s, 0, sizeof(*s));
	s->id = ev->id;
	rdma_ack_cm_event(ev);
	s->cq = ibv_create_cq(s->id->verbs, 64, NULL, NULL, 0);
	REQUIRE(s->cq);
	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = s->cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = 8;
	a.cap.max_recv_wr = 16;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	REQUIRE(rdma_create_qp(s->id, NULL, &a) == 0);
	s->pd2 = ibv_alloc_pd(s->id->verbs);
	REQUIRE(s->pd2);
	s->area = mmap(NULL, AREA_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(s->area != MAP_FAILED);
	for (size_t i = 0; i < AREA_LEN; i++)
		s->area[i] = (uint8_t)(i * 7 + 3);
	s->copy = malloc(AREA_LEN);
	REQUIRE(s->copy);
	memcpy(s->copy, s->area, AREA_LEN);
	s->mr_w = ibv_reg_mr(s->id->pd, s->area + 1 * PAGE, PAGE,
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	s->mr_r = ibv_reg_mr(s->id->pd, s->area + 3 * PAGE, PAGE, IBV_ACCESS_REMOTE_READ);
	s->mr_o = ibv_reg_mr(s->pd2, s->area + 5 * PAGE, PAGE,
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	s->mr_recv = ibv_reg_mr(s->id->pd, s->recv_buf, sizeof(s->recv_buf), IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(s->mr_w && s->mr_r && s->mr_o && s->mr_recv);
	for (int i = 0; i < recvs; i++) {
		struct ibv_sge sge = { (uintptr_t)(s->recv_buf + i * RECV_LEN), RECV_LEN,
				       s->mr_recv->lkey };
		struct ibv_recv_wr wr = { .wr_id = 100 + (uint64_t)i, .sg_list = &sge, .num_sge = 1 };
		struct ibv_recv_wr *bad;

		REQUIRE(ibv_post_recv(s->id->qp, &wr, &bad) == 0);
	}
	s->posted = recvs;
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	REQUIRE(rdma_accept(s->id, &cp) == 0);
	ev = cm_expect(lch, RDMA_CM_EVENT_ESTABLISHED, 3000, "established");
	if (ev)
		rdma_ack_cm_event(ev);
	return ev != NULL;
}

/* After the attack: DISCONNECTED, QP in ERR, every receive flushed in
 * order, memory untouched. */
static void srv_check_and_free(struct srv *s, const char *what)
{
	struct rdma_cm_event *ev = cm_expect(lch, RDMA_CM_EVENT_DISCONNECTED, 3000, what);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	int flushed = 0;

	if (ev)
		rdma_ack_cm_event(ev);
	if (ibv_query_qp(s->id->qp, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state != IBV_QPS_ERR) {
		fprintf(stderr, "%s: QP state %d, not ERR\n", what, qa.qp_state);
		xs_test_failures++;
	}
	for (int tries = 0; tries < 200 && flushed < s->posted; tries++) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(s->cq, 1, &wc);

		if (n == 0) {
			usleep(5000);
			continue;
		}
		if (wc.status != IBV_WC_WR_FLUSH_ERR || wc.wr_id != 100 + (uint64_t)flushed) {
			fprintf(stderr, "%s: completion wr_id %llu status %s\n", what,
				(unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
			xs_test_failures++;
		}
		flushed++;
	}
	if (flushed != s->posted) {
		fprintf(stderr, "%s: %d of %d receives flushed\n", what, flushed, s->posted);
		xs_test_failures++;
	}
	if (memcmp(s->area, s->copy, AREA_LEN) != 0) {
		size_t i = 0;
		while (s->area[i] == s->copy[i])
			i++;
		fprintf(stderr, "%s: memory changed at area offset %zu\n", what, i);
		xs_test_failures++;
	}
	ibv_dereg_mr(s->mr_w);
	ibv_dereg_mr(s->mr_r);
	ibv_dereg_mr(s->mr_o);
	ibv_dereg_mr(s->mr_recv);
	rdma_destroy_qp(s->id);
	ibv_destroy_cq(s->cq);
	ibv_dealloc_pd(s->pd2);
	rdma_destroy_id(s->id);
	munmap(s->area, AREA_LEN);
	free(s->copy);
}

/* ---- the peer: raw TCP and this file's framing ------------------------------ */

struct peer {
	int fd;
	uint8_t *batch; /* when set, FPDUs collect here until peer_flush */
	size_t batch_len;
	struct mpa_tx tx;
	struct mpa_agreed ag;
	uint32_t msn[3];
};

static int peer_connect(void)
{
	struct sockaddr_in a = cm_sin("127.0.0.1", lport);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	REQUIRE(fd >= 0);
	REQUIRE(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	return fd;
}

static void put_all(int fd, const void *buf, size_t len)
{
	REQUIRE(send(fd, buf, len, MSG_NOSIGNAL) == (ssize_t)len);
}

/* Read until EOF (bounded: 3 s of silence).  Returns the octets read. */
static size_t read_to_eof(int fd, uint8_t *buf, size_t cap, bool *eof)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t have = 0;

	*eof = false;
	while (poll(&p, 1, 3000) == 1) {
		uint8_t scratch[4096];
		ssize_t n = recv(fd, have < cap ? buf + have : scratch,
				 have < cap ? cap - have : sizeof(scratch), 0);
		if (n <= 0) {
			*eof = true;
			break;
		}
		if (have < cap)
			have += (size_t)n;
	}
	return have;
}

/* MPA Request (rev 2, CRC when framed, Markers wanted on what we
 * receive: no), Reply. */
static bool peer_establish(struct peer *p, struct srv *s, int recvs)
{
	struct mpa_prefs pr;
	struct mpa_frame req, rep;
	struct xs_err err;
	uint8_t buf[600];
	size_t have = 0, need = 0;

	memset(p, 0, sizeof(*p));
	p->fd = peer_connect();
	mpa_prefs_default(&pr);
	pr.crc = framed;
	pr.ird = 1;
	pr.ord = 1;
	mpa_request_build(&pr, &req);
	ssize_t n = mpa_frame_encode(&req, buf, sizeof(buf));
	REQUIRE(n > 0);
	put_all(p->fd, buf, (size_t)n);
	if (!srv_accept(s, recvs))
		return false;
	for (;;) {
		int rc = mpa_frame_decode(buf, have, MPA_REPLY, &rep, &need, &err);
		if (rc == 0)
			break;
		REQUIRE(rc == -EAGAIN && need <= sizeof(buf));
		struct pollfd pf = { .fd = p->fd, .events = POLLIN };
		REQUIRE(poll(&pf, 1, 3000) == 1);
		ssize_t got = recv(p->fd, buf + have, need - have, 0);
		REQUIRE(got > 0);
		have += (size_t)got;
	}
	REQUIRE(mpa_initiator_complete(&pr, &req, &rep, &p->ag, &err) == 0);
	/* the responder's Reply: CRC and Markers as this run claims */
	CHECK(p->ag.crc == framed);
	CHECK(p->ag.markers_tx == framed);
	CHECK(!p->ag.markers_rx);
	mpa_tx_init(&p->tx, p->ag.markers_tx, p->ag.crc);
	p->msn[0] = p->msn[1] = p->msn[2] = 1;
	return true;
}

/* Frame one ULPDU; corrupt(buf, len) may damage the flat frame first. */
static void peer_fpdu(struct peer *p, const uint8_t *ulp, size_t len,
		      void (*corrupt)(uint8_t *, size_t))
{
	struct mpa_txframe *f = malloc(sizeof(*f));
	struct iovec v = { (void *)(uintptr_t)ulp, len };
	uint8_t *flat;
	size_t off = 0;

	REQUIRE(f);
	REQUIRE(mpa_tx_frame(&p->tx, &v, 1, f) == 0);
	flat = malloc(f->wire_len);
	REQUIRE(flat);
	for (int i = 0; i < f->iovcnt; i++) {
		memcpy(flat + off, f->iov[i].iov_base, f->iov[i].iov_len);
		off += f->iov[i].iov_len;
	}
	REQUIRE(off == f->wire_len);
	if (corrupt)
		corrupt(flat, off);
	if (p->batch) {
		p->batch = realloc(p->batch, p->batch_len + off);
		REQUIRE(p->batch);
		memcpy(p->batch + p->batch_len, flat, off);
		p->batch_len += off;
	} else {
		put_all(p->fd, flat, off);
	}
	free(flat);
	free(f);
}

/* Collect FPDUs, then send them with one write (one TCP segment on lo). */
static void peer_batch(struct peer *p)
{
	p->batch = malloc(1);
	p->batch_len = 0;
	REQUIRE(p->batch);
}

static void peer_flush(struct peer *p)
{
	put_all(p->fd, p->batch, p->batch_len);
	free(p->batch);
	p->batch = NULL;
}

/* A DDP segment: header h (+ RDMAP control in rsvdulp) and payload. */
static void peer_segment(struct peer *p, const struct ddp_hdr *h, const void *payload, size_t len,
			 void (*corrupt)(uint8_t *, size_t))
{
	uint8_t *ulp = malloc(DDP_MAX_HDR_LEN + len);
	size_t hl;

	REQUIRE(ulp);
	hl = ddp_hdr_encode(h, ulp);
	if (len)
		memcpy(ulp + hl, payload, len);
	peer_fpdu(p, ulp, hl + len, corrupt);
	free(ulp);
}

static struct ddp_hdr tagged(enum rdmap_opcode op, uint32_t stag, uint64_t to)
{
	struct ddp_hdr h = { .tagged = true, .last = true, .dv = DDP_VERSION,
			     .rsvdulp = rdmap_ctrl_encode(op), .stag = stag, .to = to };
	return h;
}

static struct ddp_hdr untagged(struct peer *p, enum rdmap_opcode op, uint32_t qn)
{
	struct ddp_hdr h = { .last = true, .dv = DDP_VERSION, .rsvdulp = rdmap_ctrl_encode(op),
			     .qn = qn, .msn = p->msn[qn]++ };
	return h;
}

/* The responder's output after the attack: its Terminate's triple, FIN. */
static bool peer_expect_term(struct peer *p, uint8_t layer, uint8_t etype, uint8_t ecode,
			     const char *what)
{
	static uint8_t in[1 << 17];
	static uint8_t ulp[1 << 16];
	bool eof, found = false;
	size_t n = read_to_eof(p->fd, in, sizeof(in), &eof), pos = 0, ul = 0;
	struct mpa_rx rx;
	struct xs_err err;

	mpa_rx_init(&rx, p->ag.markers_rx, p->ag.crc, 0);
	while (pos < n) {
		struct mpa_rx_event ev;
		size_t used = 0;
		int rc = mpa_rx_step(&rx, in + pos, n - pos, &used, &ev, &err);

		if (rc < 0) {
			fprintf(stderr, "%s: the responder's stream does not deframe\n", what);
			xs_test_failures++;
			return false;
		}
		pos += used;
		if (rc == MPA_RX_EV_DATA) {
			memcpy(ulp + ev.ulpdu_off, ev.data, ev.len);
			ul = ev.ulpdu_off + ev.len;
		} else if (rc == MPA_RX_EV_FPDU_END) {
			struct ddp_hdr h;
			struct rdmap_term t;

			if (ddp_hdr_decode(ulp, ul, &h, &err) == 0 && !h.tagged &&
			    h.qn == RDMAP_QN_TERMINATE) {
				size_t hl = ddp_hdr_len(false);
				CHECK(rdmap_term_decode(ulp + hl, ul - hl, &t, &err) == 0);
				if (t.cause.layer != layer || t.cause.etype != etype ||
				    t.cause.ecode != ecode) {
					fprintf(stderr,
						"%s: Terminate %u/%u/0x%02x, wanted %u/%u/0x%02x\n",
						what, t.cause.layer, t.cause.etype, t.cause.ecode,
						layer, etype, ecode);
					xs_test_failures++;
				}
				found = true;
			}
			ul = 0;
		}
	}
	if (!found) {
		fprintf(stderr, "%s: no Terminate (%zu octets, eof %d)\n", what, n, eof);
		xs_test_failures++;
	}
	if (!eof) {
		fprintf(stderr, "%s: no FIN after the Terminate\n", what);
		xs_test_failures++;
	}
	return found;
}

/* ---- cases before the connection exists ------------------------------------ */

static void expect_closed_no_event(int fd, const char *what)
{
	uint8_t buf[600];
	bool eof;
	size_t n = read_to_eof(fd, buf, sizeof(buf), &eof);

	if (!eof) {
		fprintf(stderr, "%s: the responder did not close\n", what);
		xs_test_failures++;
	}
	/* a Reply may precede the close only as a reject */
	if (n >= MPA_RR_HDR_LEN) {
		struct mpa_frame f;
		struct xs_err err;
		size_t need;
		if (mpa_frame_decode(buf, n, MPA_REPLY, &f, &need, &err) == 0 && !f.reject) {
			fprintf(stderr, "%s: accepted\n", what);
			xs_test_failures++;
		}
	}
	if (cm_readable(lch, 0)) {
		fprintf(stderr, "%s: the application saw an event\n", what);
		xs_test_failures++;
	}
	close(fd);
}

static void test_handshake_attacks(void)
{
	struct mpa_prefs pr;
	struct mpa_frame req;
	uint8_t buf[600];
	ssize_t n;
	int fd;

	mpa_prefs_default(&pr);
	mpa_request_build(&pr, &req);
	n = mpa_frame_encode(&req, buf, sizeof(buf));
	REQUIRE(n > 0);

	/* wrong key */
	fd = peer_connect();
	buf[3] ^= 0x20;
	put_all(fd, buf, (size_t)n);
	buf[3] ^= 0x20;
	expect_closed_no_event(fd, "wrong MPA key");

	/* revision 3 */
	fd = peer_connect();
	buf[17] = 3;
	put_all(fd, buf, (size_t)n);
	buf[17] = 2;
	expect_closed_no_event(fd, "MPA revision 3");

	/* private data length over the 512 limit */
	fd = peer_connect();
	buf[18] = 0x02;
	buf[19] = 0x01; /* 513 */
	put_all(fd, buf, (size_t)n);
	expect_closed_no_event(fd, "private data 513");

	/* private data announced but cut short: the deadline closes it */
	fd = peer_connect();
	buf[18] = 0x00;
	buf[19] = 100;
	put_all(fd, buf, (size_t)n);
	expect_closed_no_event(fd, "private data beyond the frame");

	/* nothing at all */
	fd = peer_connect();
	expect_closed_no_event(fd, "silent peer");
}

/* ---- cases on an established stream ------------------------------------------ */

static void flip_crc(uint8_t *f, size_t len)
{
	f[len - 1] ^= 0x01;
}

/* The Marker at stream offset 512 (positions count from the first FPDU's
 * first octet, and this is the first FPDU): its FPDUPTR off by 4. */
static void bad_marker(uint8_t *f, size_t len)
{
	REQUIRE(len > 512 + 4);
	f[512 + 3] ^= 0x04;
}

enum attack {
	A_BAD_CRC,
	A_BAD_MARKER,
	A_DDP_VERSION_UNTAGGED,
	A_DDP_VERSION_TAGGED,
	A_RDMAP_VERSION,
	A_UNKNOWN_OPCODE,
	A_WRITE_UNKNOWN_STAG,
	A_WRITE_WRONG_KEY,
	A_WRITE_OOB,
	A_WRITE_TO_WRAP,
	A_WRITE_NO_RIGHT,
	A_WRITE_OTHER_PD,
	A_READ_NO_RIGHT,
	A_READ_BEYOND_IRD,
	A_READ_RESP_UNASKED,
	A_SEND_NO_RECV,
	A_MSN_RANGE,
	A_MO_BEYOND,
	A_SEND_TOO_LONG,
	A_COUNT
};

static const struct {
	const char *name;
	uint8_t layer, etype, ecode;
	int recvs;
} attacks[A_COUNT] = {
	[A_BAD_CRC] = { "bad CRC", XS_LAYER_LLP, MPA_ETYPE, MPA_ECODE_CRC, RECVS },
	[A_BAD_MARKER] = { "Marker with a wrong FPDUPTR", XS_LAYER_LLP, MPA_ETYPE, MPA_ECODE_MARKER,
			   RECVS },
	[A_DDP_VERSION_UNTAGGED] = { "DDP version 2 (untagged)", XS_LAYER_DDP, DDP_ETYPE_UNTAGGED,
				     DDP_ECODE_U_VERSION, RECVS },
	[A_DDP_VERSION_TAGGED] = { "DDP version 2 (tagged)", XS_LAYER_DDP, DDP_ETYPE_TAGGED,
				   DDP_ECODE_T_VERSION, RECVS },
	[A_RDMAP_VERSION] = { "RDMAP version 2", XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP,
			      RDMAP_ECODE_VERSION, RECVS },
	[A_UNKNOWN_OPCODE] = { "opcode 0xc", XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP,
			       RDMAP_ECODE_UNEXPECTED_OP, RECVS },
	[A_WRITE_UNKNOWN_STAG] = { "Write to an unknown STag", XS_LAYER_DDP, DDP_ETYPE_TAGGED,
				   DDP_ECODE_T_INVALID_STAG, RECVS },
	[A_WRITE_WRONG_KEY] = { "Write with a wrong key", XS_LAYER_DDP, DDP_ETYPE_TAGGED,
				DDP_ECODE_T_INVALID_STAG, RECVS },
	[A_WRITE_OOB] = { "Write out of bounds", XS_LAYER_DDP, DDP_ETYPE_TAGGED,
			  DDP_ECODE_T_BASE_BOUNDS, RECVS },
	[A_WRITE_TO_WRAP] = { "Write with a wrapping TO", XS_LAYER_DDP, DDP_ETYPE_TAGGED,
			      DDP_ECODE_T_TO_WRAP, RECVS },
	[A_WRITE_NO_RIGHT] = { "Write without the remote-write right", XS_LAYER_RDMAP,
			       RDMAP_ETYPE_REMOTE_PROT, RDMAP_ECODE_ACCESS, RECVS },
	[A_WRITE_OTHER_PD] = { "Write to another PD's region", XS_LAYER_DDP, DDP_ETYPE_TAGGED,
			       DDP_ECODE_T_STAG_NOT_ASSOC, RECVS },
	[A_READ_NO_RIGHT] = { "Read without the remote-read right", XS_LAYER_RDMAP,
			      RDMAP_ETYPE_REMOTE_PROT, RDMAP_ECODE_ACCESS, RECVS },
	[A_READ_BEYOND_IRD] = { "Read Requests beyond IRD", XS_LAYER_DDP, DDP_ETYPE_UNTAGGED,
				DDP_ECODE_U_NO_BUFFER, RECVS },
	[A_READ_RESP_UNASKED] = { "Read Response without a request", XS_LAYER_RDMAP,
				  RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNEXPECTED_OP, RECVS },
	[A_SEND_NO_RECV] = { "Send with no posted receive", XS_LAYER_DDP, DDP_ETYPE_UNTAGGED,
			     DDP_ECODE_U_NO_BUFFER, 0 },
	[A_MSN_RANGE] = { "Send with an MSN out of range", XS_LAYER_DDP, DDP_ETYPE_UNTAGGED,
			  DDP_ECODE_U_MSN_RANGE, RECVS },
	[A_MO_BEYOND] = { "Send with an MO beyond the buffer", XS_LAYER_DDP, DDP_ETYPE_UNTAGGED,
			  DDP_ECODE_U_INVALID_MO, RECVS },
	[A_SEND_TOO_LONG] = { "Send longer than the receive", XS_LAYER_DDP, DDP_ETYPE_UNTAGGED,
			      DDP_ECODE_U_TOO_LONG, RECVS },
};

static void run_attack(enum attack a)
{
	static uint8_t payload[2000];
	struct peer p;
	struct srv s;
	struct ddp_hdr h;
	const char *what = attacks[a].name;

	memset(payload, 0xee, sizeof(payload));
	if (!peer_establish(&p, &s, attacks[a].recvs)) {
		fprintf(stderr, "%s: not established\n", what);
		xs_test_failures++;
		return;
	}
	switch (a) {
	case A_BAD_CRC:
		h = untagged(&p, RDMAP_OP_SEND, RDMAP_QN_SEND);
		peer_segment(&p, &h, payload, 100, flip_crc);
		break;
	case A_BAD_MARKER:
		/* a Write the region takes: only the Marker is wrong */
		h = tagged(RDMAP_OP_WRITE, s.mr_w->rkey, (uintptr_t)s.mr_w->addr);
		/* the octets before the Marker may be placed: they are the
		 * peer's to write, so the region holds them already */
		memset(s.area + PAGE, 0xee, PAGE);
		memset(s.copy + PAGE, 0xee, PAGE);
		peer_segment(&p, &h, payload, 1000, bad_marker);
		break;
	case A_DDP_VERSION_UNTAGGED:
		h = untagged(&p, RDMAP_OP_SEND, RDMAP_QN_SEND);
		h.dv = 2;
		peer_segment(&p, &h, payload, 16, NULL);
		break;
	case A_DDP_VERSION_TAGGED:
		h = tagged(RDMAP_OP_WRITE, s.mr_w->rkey, (uintptr_t)s.mr_w->addr);
		h.dv = 2;
		peer_segment(&p, &h, payload, 16, NULL);
		break;
	case A_RDMAP_VERSION:
		h = untagged(&p, RDMAP_OP_SEND, RDMAP_QN_SEND);
		h.rsvdulp = (uint8_t)(2u << RDMAP_RV_SHIFT | RDMAP_OP_SEND);
		peer_segment(&p, &h, payload, 16, NULL);
		break;
	case A_UNKNOWN_OPCODE:
		h = untagged(&p, RDMAP_OP_SEND, RDMAP_QN_SEND);
		h.rsvdulp = (uint8_t)(RDMAP_VERSION << RDMAP_RV_SHIFT | 0xc);
		peer_segment(&p, &h, payload, 16, NULL);
		break;
	case A_WRITE_UNKNOWN_STAG:
		h = tagged(RDMAP_OP_WRITE, 0x7fff0000u | (s.mr_w->rkey & 0xff),
			   (uintptr_t)s.mr_w->addr);
		peer_segment(&p, &h, payload, 64, NULL);
		break;
	case A_WRITE_WRONG_KEY:
		h = tagged(RDMAP_OP_WRITE, s.mr_w->rkey ^ 0x5a, (uintptr_t)s.mr_w->addr);
		peer_segment(&p, &h, payload, 64, NULL);
		break;
	case A_WRITE_OOB:
		/* straddles the end of the region into the guard page */
		h = tagged(RDMAP_OP_WRITE, s.mr_w->rkey, (uintptr_t)s.mr_w->addr + PAGE - 32);
		peer_segment(&p, &h, payload, 64, NULL);
		break;
	case A_WRITE_TO_WRAP:
		h = tagged(RDMAP_OP_WRITE, s.mr_w->rkey, UINT64_MAX - 15);
		peer_segment(&p, &h, payload, 64, NULL);
		break;
	case A_WRITE_NO_RIGHT:
		h = tagged(RDMAP_OP_WRITE, s.mr_r->rkey, (uintptr_t)s.mr_r->addr);
		peer_segment(&p, &h, payload, 64, NULL);
		break;
	case A_WRITE_OTHER_PD:
		h = tagged(RDMAP_OP_WRITE, s.mr_o->rkey, (uintptr_t)s.mr_o->addr);
		peer_segment(&p, &h, payload, 64, NULL);
		break;
	case A_READ_NO_RIGHT:
	case A_READ_BEYOND_IRD: {
		/* IRD is 1: eight requests in one burst cannot all be queued */
		int count = a == A_READ_NO_RIGHT ? 1 : 8;
		struct ibv_mr *src = a == A_READ_NO_RIGHT ? s.mr_w : s.mr_r;

		peer_batch(&p);
		for (int i = 0; i < count; i++) {
			struct rdmap_read_req rr = { .sink_stag = 0x1234, .sink_to = 0,
						     .size = PAGE, .src_stag = src->rkey,
						     .src_to = (uintptr_t)src->addr };
			uint8_t body[RDMAP_READ_REQ_LEN];

			rdmap_read_req_encode(&rr, body);
			h = untagged(&p, RDMAP_OP_READ_REQ, RDMAP_QN_READ_REQ);
			peer_segment(&p, &h, body, sizeof(body), NULL);
		}
		peer_flush(&p);
		break;
	}
	case A_READ_RESP_UNASKED:
		h = tagged(RDMAP_OP_READ_RESP, s.mr_w->rkey, (uintptr_t)s.mr_w->addr);
		peer_segment(&p, &h, payload, 64, NULL);
		break;
	case A_SEND_NO_RECV:
		h = untagged(&p, RDMAP_OP_SEND, RDMAP_QN_SEND);
		peer_segment(&p, &h, payload, 16, NULL);
		break;
	case A_MSN_RANGE:
		h = untagged(&p, RDMAP_OP_SEND, RDMAP_QN_SEND);
		h.msn = 0; /* behind the window: already delivered */
		peer_segment(&p, &h, payload, 16, NULL);
		break;
	case A_MO_BEYOND:
		h = untagged(&p, RDMAP_OP_SEND, RDMAP_QN_SEND);
		h.mo = RECV_LEN + 64;
		peer_segment(&p, &h, payload, 16, NULL);
		break;
	case A_SEND_TOO_LONG:
		h = untagged(&p, RDMAP_OP_SEND, RDMAP_QN_SEND);
		peer_segment(&p, &h, payload, RECV_LEN + 1, NULL);
		break;
	case A_COUNT:
		break;
	}
	peer_expect_term(&p, attacks[a].layer, attacks[a].etype, attacks[a].ecode, what);
	close(p.fd);
	srv_check_and_free(&s, what);
}

/* The peer's own Terminate: no Terminate back (RFC 5040 5.?: never answer
 * one), the QP goes to ERR and flushes. */
static void test_peer_terminate(void)
{
	struct peer p;
	struct srv s;
	struct rdmap_term t = { 0 };
	uint8_t body[RDMAP_TERM_MAX_LEN];
	struct ddp_hdr h;
	bool eof;
	uint8_t in[4096];

	if (!peer_establish(&p, &s, RECVS))
		return;
	xs_err_set(&t.cause, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_UNSPECIFIED);
	ssize_t n = rdmap_term_encode(&t, body, sizeof(body));
	REQUIRE(n > 0);
	h = untagged(&p, RDMAP_OP_TERMINATE, RDMAP_QN_TERMINATE);
	peer_segment(&p, &h, body, (size_t)n, NULL);
	shutdown(p.fd, SHUT_WR);
	size_t got = read_to_eof(p.fd, in, sizeof(in), &eof);
	CHECK(eof);
	CHECK(got == 0); /* nothing back, just FIN */
	close(p.fd);
	srv_check_and_free(&s, "peer's Terminate");
}

/* Half an FPDU, then FIN: the QP fails and flushes, no hang. */
static void test_fin_mid_frame(void)
{
	struct peer p;
	struct srv s;
	bool eof;
	uint8_t in[4096];
	uint8_t frag[40];

	if (!peer_establish(&p, &s, RECVS))
		return;
	/* ULPDU_LENGTH 200 announced, 38 octets follow */
	memset(frag, 0xab, sizeof(frag));
	frag[0] = 0;
	frag[1] = 200;
	put_all(p.fd, frag, sizeof(frag));
	shutdown(p.fd, SHUT_WR);
	read_to_eof(p.fd, in, sizeof(in), &eof);
	CHECK(eof);
	close(p.fd);
	srv_check_and_free(&s, "FIN in the middle of an FPDU");
}

/* The attacks of this run: without CRC and Markers there is no CRC or
 * Marker to get wrong (the receiver does not look at the CRC field). */
static void run_attacks(void)
{
	for (int i = 0; i < A_COUNT; i++) {
		if (!framed && (i == A_BAD_CRC || i == A_BAD_MARKER))
			continue;
		run_attack((enum attack)i);
	}
}

int main(int argc, char **argv)
{
	static const char *const markers[] = { "XSOCK_MPA_MARKERS", "1", NULL };
	int mode = xs_test_mode(argc, argv), rc;

	/* before the library reads its configuration */
	setenv("XSOCK_MPA_TIMEOUT_MS", "400", 1);
	if (mode == 0) { /* the default framing first */
		unsetenv("XSOCK_MPA_MARKERS");
		unsetenv("XSOCK_MPA_CRC");
	}
	framed = mode == 1;
	printf("== %s\n", framed ? "XSOCK_MPA_MARKERS=1, CRC" : "default framing");
	lport = cm_listen(&lch, &lid);

	test_handshake_attacks();
	run_attacks();
	test_peer_terminate();
	test_fin_mid_frame();

	CHECK(rdma_destroy_id(lid) == 0);
	rdma_destroy_event_channel(lch);
	rc = xs_test_result();
	if (mode == 0)
		rc = xs_test_both(rc, xs_test_rerun(argv[0], 1, markers));
	return rc;
}
