/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The RoCE responder alone (xr_resp_request on a bare connection, a fake
 * QP whose one MR is a buffer here, its ACKs read from a UDP socket):
 * out-of-order placement of RDMA Write MIDDLE/LAST packets ahead of a gap
 * (XSOCK_ROCE_OOO), one NAK-sequence per gap, epsn jumping over what was
 * placed, cumulative MSN, idempotent resends, the checks that leave a
 * packet to the in-order path; then random loss, reordering and
 * duplication with a go-back-N requester, data checked; and the same with
 * XSOCK_ROCE_OOO=0 (a child process: settings are read once). */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/xs_test.h"
#include "verbs/xs_internal.h"
#include "verbs/xs_roce_priv.h"

#define MTU 1024u
#define VA0 0x10000u
#define RKEY 0x42u
#define MEM (64u * MTU)

static uint8_t mem[MEM];
static unsigned failed_calls, delivered;

static int fake_resolve(void *qp, enum rdmap_opcode op, uint32_t stag, uint64_t to,
			uint32_t len, uint8_t **dst, struct xs_err *err)
{
	(void)qp;
	(void)op;
	if (stag != RKEY || to < VA0 || to - VA0 > MEM || len > MEM - (to - VA0)) {
		xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, 0);
		return -1;
	}
	*dst = mem + (to - VA0);
	return 0;
}

static void fake_deliver(void *qp, enum rdmap_opcode op, uint32_t qn, const struct ddp_delivery *d)
{
	(void)qp;
	(void)op;
	(void)qn;
	(void)d;
	delivered++;
}

static void fake_failed(void *qp, bool local, const struct xs_err *err)
{
	(void)qp;
	(void)local;
	(void)err;
	failed_calls++;
}

static const struct xs_conn_ops ops = {
	.resolve = fake_resolve, .deliver = fake_deliver, .failed = fake_failed
};

struct rig {
	struct xs_roce_conn *x;
	int ack_fd; /* where the responder's ACKs and NAKs go */
};

static void rig_open(struct rig *r, uint32_t epsn)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	struct xs_roce_conn *x = calloc(1, sizeof(*x));

	REQUIRE(x);
	r->ack_fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	REQUIRE(r->ack_fd >= 0 && bind(r->ack_fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	REQUIRE(getsockname(r->ack_fd, (struct sockaddr *)&a, &al) == 0);
	memcpy(&x->to, &a, sizeof(a));
	x->to_len = sizeof(a);
	x->tx_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	REQUIRE(x->tx_fd >= 0);
	x->rx_fd = -1;
	x->path.mtu = MTU;
	x->path.qpn = 17;
	x->path.dest_qpn = 18;
	x->epsn = epsn;
	x->cur_kind = -1;
	x->up = &ops;
	atomic_store(&x->attached, true);
	r->x = x;
	failed_calls = 0;
	delivered = 0;
}

static void rig_close(struct rig *r)
{
	close(r->x->tx_fd);
	close(r->ack_fd);
	free(r->x);
}

/* The ACKs and NAKs sent so far: how many NAK-sequence (the last one's
 * PSN in *nak_psn), the last ACK's PSN in *ack_psn (if any). */
static unsigned read_acks(struct rig *r, unsigned *naks, uint32_t *nak_psn, uint32_t *ack_psn)
{
	uint8_t buf[256];
	ssize_t n;
	unsigned all = 0;

	*naks = 0;
	while ((n = recv(r->ack_fd, buf, sizeof(buf), 0)) > 0) {
		struct roce_pkt p;

		REQUIRE(roce_pkt_parse(buf, (size_t)n, NULL, ROCE_PKEY_DEFAULT, &p) == ROCE_OK);
		REQUIRE(p.bth.opcode == ROCE_RC_ACK);
		all++;
		if ((p.aeth.syndrome & 0xe0) == ROCE_AETH_NAK && (p.aeth.syndrome & 0x1f) == 0) {
			(*naks)++;
			*nak_psn = p.bth.psn;
		} else if ((p.aeth.syndrome & 0xe0) == 0) {
			*ack_psn = p.bth.psn;
		}
	}
	return all;
}

static uint8_t pattern(uint32_t msg, uint32_t off)
{
	return (uint8_t)(msg * 131u + off * 7u + (off >> 8));
}

/* Packet i of a Write of len octets that starts at psn0 (its payload is
 * made in pay, MTU octets). */
static void write_pkt(struct roce_pkt *p, uint8_t *pay, uint32_t msg, uint32_t psn0, uint32_t len,
		      uint32_t i, bool ackreq)
{
	uint32_t n = len ? (len + MTU - 1) / MTU : 1;
	bool first = i == 0, last = i == n - 1;

	memset(p, 0, sizeof(*p));
	p->bth.opcode = first && last ? ROCE_RC_WRITE_ONLY :
			first	      ? ROCE_RC_WRITE_FIRST :
			last	      ? ROCE_RC_WRITE_LAST :
					ROCE_RC_WRITE_MIDDLE;
	p->bth.psn = roce_psn_add(psn0, i);
	p->bth.ackreq = ackreq || last;
	if (first)
		p->reth = (struct roce_reth){ .va = VA0, .rkey = RKEY, .dma_len = len };
	p->paylen = last ? len - i * MTU : MTU;
	for (uint32_t o = 0; o < p->paylen; o++)
		pay[o] = pattern(msg, i * MTU + o);
	p->payload = pay;
}

static void deliver(struct xs_roce_conn *x, uint32_t msg, uint32_t psn0, uint32_t len, uint32_t i)
{
	uint8_t pay[MTU];
	struct roce_pkt p;

	write_pkt(&p, pay, msg, psn0, len, i, false);
	xr_resp_request(x, &p);
	xr_resp_flush_ack(x);
}

static bool data_ok(uint32_t msg, uint32_t len)
{
	for (uint32_t o = 0; o < len; o++)
		if (mem[o] != pattern(msg, o))
			return false;
	return true;
}

/* One Write of 8 packets, the second lost, the rest arriving, then the
 * requester's go-back-N from the lost one. */
static void test_gap(bool on)
{
	const uint32_t psn0 = ROCE_PSN_MASK - 2, len = 8 * MTU - 100; /* PSNs wrap */
	struct rig r;
	unsigned naks;
	uint32_t nak_psn = 0, ack_psn = 0;

	memset(mem, 0, sizeof(mem));
	rig_open(&r, psn0);
	deliver(r.x, 1, psn0, len, 0);
	for (uint32_t i = 2; i < 8; i++)
		deliver(r.x, 1, psn0, len, i);
	deliver(r.x, 1, psn0, len, 4); /* a resend while the gap is open */
	read_acks(&r, &naks, &nak_psn, &ack_psn);
	CHECK_EQ_U(naks, 1);
	CHECK_EQ_U(nak_psn, roce_psn_add(psn0, 1));
	CHECK_EQ_U(r.x->epsn, roce_psn_add(psn0, 1));
	CHECK_EQ_U(r.x->msn, 0);
	CHECK_EQ_U(r.x->ooo_placed, on ? 6 : 0);
	/* go-back-N: everything from the lost PSN again */
	for (uint32_t i = 1; i < 8; i++)
		deliver(r.x, 1, psn0, len, i);
	read_acks(&r, &naks, &nak_psn, &ack_psn);
	CHECK_EQ_U(naks, 0);
	CHECK_EQ_U(ack_psn, roce_psn_add(psn0, 7));
	CHECK_EQ_U(r.x->epsn, roce_psn_add(psn0, 8));
	CHECK_EQ_U(r.x->msn, 1);
	CHECK_EQ_U(r.x->cur_kind, -1);
	CHECK_EQ_U(r.x->ooo_placed, on ? 6 : 0);
	CHECK(data_ok(1, len));
	CHECK_EQ_U(failed_calls, 0);
	/* the next Write starts cleanly at the new epsn */
	deliver(r.x, 2, roce_psn_add(psn0, 8), 2 * MTU, 0);
	deliver(r.x, 2, roce_psn_add(psn0, 8), 2 * MTU, 1);
	CHECK_EQ_U(r.x->msn, 2);
	CHECK(data_ok(2, 2 * MTU));
	CHECK_EQ_U(failed_calls, 0);
	rig_close(&r);
}

/* Packets ahead that in-order placement would refuse are not placed ahead
 * (the in-order path judges them when their turn comes). */
static void test_refused(void)
{
	const uint32_t psn0 = 1000, len = 6 * MTU;
	uint8_t pay[MTU];
	struct roce_pkt p;
	struct rig r;

	rig_open(&r, psn0);
	deliver(r.x, 3, psn0, len, 0);
	write_pkt(&p, pay, 3, psn0, len, 2, false); /* a MIDDLE one octet short */
	p.paylen = MTU - 1;
	xr_resp_request(r.x, &p);
	write_pkt(&p, pay, 3, psn0, len, 3, false); /* a LAST where a MIDDLE belongs */
	p.bth.opcode = ROCE_RC_WRITE_LAST;
	xr_resp_request(r.x, &p);
	write_pkt(&p, pay, 3, psn0, len, 5, false); /* a LAST too long */
	p.paylen = MTU + 1;
	xr_resp_request(r.x, &p);
	write_pkt(&p, pay, 3, psn0, len, 5, false); /* with immediate data: waits */
	p.bth.opcode = ROCE_RC_WRITE_LAST_IMM;
	xr_resp_request(r.x, &p);
	write_pkt(&p, pay, 3, psn0, len, 4, false); /* a FIRST ahead: another message */
	p.bth.opcode = ROCE_RC_WRITE_FIRST;
	xr_resp_request(r.x, &p);
	write_pkt(&p, pay, 3, psn0 + 6, MTU, 0, false); /* past the Write's end */
	p.bth.opcode = ROCE_RC_WRITE_MIDDLE;
	xr_resp_request(r.x, &p);
	write_pkt(&p, pay, 3, psn0, len, 200, false); /* beyond the window */
	p.bth.opcode = ROCE_RC_WRITE_MIDDLE;
	xr_resp_request(r.x, &p);
	CHECK_EQ_U(r.x->ooo_placed, 0);
	CHECK_EQ_U(failed_calls, 0);
	CHECK_EQ_U(r.x->epsn, psn0 + 1);
	rig_close(&r);

	/* the MR check: a Write whose RETH exceeds the MR places its first
	 * packets in order, but the one ahead outside the MR is not placed */
	rig_open(&r, psn0);
	write_pkt(&p, pay, 4, psn0, 3 * MTU, 0, false);
	p.reth.va = VA0 + MEM - 2 * MTU;
	xr_resp_request(r.x, &p);
	write_pkt(&p, pay, 4, psn0, 3 * MTU, 2, false);
	xr_resp_request(r.x, &p);
	CHECK_EQ_U(r.x->ooo_placed, 0);
	CHECK_EQ_U(failed_calls, 0);
	rig_close(&r);
}

/* Writes of random sizes through a wire that drops, duplicates and
 * reorders, the requester going back to epsn each round as rxe's does. */
static void test_random(bool on)
{
	struct rig r;
	uint32_t psn = (uint32_t)xs_rand_below(ROCE_PSN_MASK + 1u), msgs = 300;
	uint64_t sent = 0, needed = 0;

	rig_open(&r, psn);
	for (uint32_t m = 0; m < msgs && !failed_calls; m++) {
		uint32_t len = (uint32_t)xs_rand_below(MEM / 2), n = len ? (len + MTU - 1) / MTU : 1;
		unsigned rounds = 0;

		memset(mem, 0, sizeof(mem));
		needed += n;
		while (roce_psn_diff(r.x->epsn, psn) < (int32_t)n && rounds++ < 1000) {
			uint32_t from = (uint32_t)roce_psn_diff(r.x->epsn, psn), order[64], k = 0;

			for (uint32_t i = from; i < n; i++)
				order[k++] = i;
			for (uint32_t i = 0; i + 1 < k; i++) { /* swap neighbours: reordering */
				if (xs_rand_below(4) == 0) {
					uint32_t t = order[i];

					order[i] = order[i + 1];
					order[i + 1] = t;
				}
			}
			for (uint32_t i = 0; i < k; i++) {
				uint64_t die = xs_rand_below(100);

				if (die < 10) /* lost */
					continue;
				deliver(r.x, m, psn, len, order[i]);
				sent++;
				if (die < 15) /* and duplicated */
					deliver(r.x, m, psn, len, order[i]);
			}
		}
		CHECK_EQ_U(r.x->msn, m + 1);
		CHECK(data_ok(m, len));
		psn = roce_psn_add(psn, n);
	}
	CHECK_EQ_U(failed_calls, 0);
	CHECK_EQ_U(r.x->epsn, psn);
	if (on)
		CHECK(r.x->ooo_placed > 0);
	else
		CHECK_EQ_U(r.x->ooo_placed, 0);
	fprintf(stderr, "OOO %s: %llu packets sent for %llu, %llu placed ahead\n", on ? "on" : "off",
		(unsigned long long)sent, (unsigned long long)needed,
		(unsigned long long)r.x->ooo_placed);
	rig_close(&r);
}

static void run(bool on)
{
	test_gap(on);
	if (on)
		test_refused();
	test_random(on);
}

int main(void)
{
	pid_t pid;
	int st = 0;

	xs_test_seed(4791);
	unsetenv("XSOCK_ROCE_OOO");
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		setenv("XSOCK_ROCE_OOO", "0", 1);
		run(false);
		_exit(xs_test_result());
	}
	run(true);
	REQUIRE(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == XS_TEST_PASS);
	return xs_test_result();
}
