/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* xsock-roced's messages and rules as pure code (roced/roced_wire.h,
 * roced/roced_route.h): every message round-trips and each malformed one
 * is refused with its reason; the tables give out unique QPNs and tags;
 * and each attack a process of another user could try through the daemon
 * is refused by the rule that names it: a datagram from anyone but the
 * QP's registered peer, a UDP datagram posing as a local peer, a process
 * posing as the peer of a QP that did not name it, a MAD with another
 * CM's comm ID, a MAD by UDP from a local address, a second listener on a
 * service, a connection taking a second role. */
#include "config.h"

#include <errno.h>
#include <sys/socket.h>

#include "roce/roce.h"
#include "roce/roce_cm_wire.h"
#include "roced/roced_route.h"
#include "roced/roced_wire.h"
#include "tests/xs_test.h"
#include "util/xs_be.h"

static void test_wire_round_trip(void)
{
	struct roced_msg m = { .kind = ROCED_PEER, .seq = 77, .family = AF_INET, .peer_port = 49153,
			       .peer_qpn = 0x123456 },
			 d;
	uint8_t b[64];

	m.local[0] = 10, m.local[3] = 1, m.peer[0] = 10, m.peer[3] = 2;
	m.local[9] = 0xaa; /* past an IPv4 address: goes as zero */
	size_t n = roced_encode(&m, b, sizeof(b));
	CHECK_EQ_U(n, ROCED_PEER_LEN);
	CHECK_EQ_U(roced_decode(b, n, &d), ROCED_OK);
	CHECK_EQ_U(d.kind, ROCED_PEER);
	CHECK_EQ_U(d.seq, 77);
	CHECK_EQ_U(d.family, AF_INET);
	CHECK_EQ_U(d.peer_port, 49153);
	CHECK_EQ_U(d.peer_qpn, 0x123456);
	CHECK(d.local[0] == 10 && d.local[3] == 1 && d.local[9] == 0 && d.peer[3] == 2);
	/* each malformed variant, its reason */
	CHECK_EQ_U(roced_decode(b, n - 1, &d), ROCED_SHORT);
	b[n] = 0;
	CHECK_EQ_U(roced_decode(b, n + 1, &d), ROCED_LONG);
	b[1] = 2;
	CHECK_EQ_U(roced_decode(b, n, &d), ROCED_KIND);
	b[1] = ROCED_VERSION;
	b[2] = 1; /* aux on a PEER */
	CHECK_EQ_U(roced_decode(b, n, &d), ROCED_PAD);
	b[2] = 0;
	b[ROCED_HDR_LEN] = 5; /* family */
	CHECK_EQ_U(roced_decode(b, n, &d), ROCED_KIND);
	b[ROCED_HDR_LEN] = 4;
	b[ROCED_HDR_LEN + 2] = 1; /* padding */
	CHECK_EQ_U(roced_decode(b, n, &d), ROCED_PAD);
	b[ROCED_HDR_LEN + 2] = 0;
	b[ROCED_HDR_LEN + 4 + 5] = 1; /* an IPv4 address's 6th octet */
	CHECK_EQ_U(roced_decode(b, n, &d), ROCED_ADDR);
	b[ROCED_HDR_LEN + 4 + 5] = 0;
	xs_put_be32(b + ROCED_HDR_LEN + 40, 1); /* QPN 1 is the CM's */
	CHECK_EQ_U(roced_decode(b, n, &d), ROCED_VALUE);
	xs_put_be32(b + ROCED_HDR_LEN + 40, 0x1000000);
	CHECK_EQ_U(roced_decode(b, n, &d), ROCED_VALUE);
	b[0] = 99;
	CHECK_EQ_U(roced_decode(b, n, &d), ROCED_KIND);
	CHECK_EQ_U(roced_decode(b, 3, &d), ROCED_SHORT);

	/* LISTEN, REPLY, CLAIM; PKTS keeps its body and aux */
	struct roced_msg l = { .kind = ROCED_LISTEN, .family = AF_INET6,
			       .service_id = 0x0106000000004e21ull };
	n = roced_encode(&l, b, sizeof(b));
	CHECK_EQ_U(n, ROCED_LISTEN_LEN);
	CHECK_EQ_U(roced_decode(b, n, &d), ROCED_OK);
	CHECK_EQ_U(d.service_id, l.service_id);
	CHECK_EQ_U(d.family, AF_INET6);
	struct roced_msg r = { .kind = ROCED_REPLY, .aux = ROCED_CLAIM, .seq = 5, .value = 0xabcdef };
	n = roced_encode(&r, b, sizeof(b));
	CHECK_EQ_U(roced_decode(b, n, &d), ROCED_OK);
	CHECK(d.aux == ROCED_CLAIM && d.seq == 5 && d.value == 0xabcdef && !d.err);
	xs_put_be32(b + ROCED_HDR_LEN, 5000); /* errno out of range */
	CHECK_EQ_U(roced_decode(b, n, &d), ROCED_VALUE);
	xs_put_be32(b + ROCED_HDR_LEN, 0);
	xs_put_be16(b + 2, ROCED_REPLY); /* a reply to a reply */
	CHECK_EQ_U(roced_decode(b, n, &d), ROCED_VALUE);
	struct roced_msg c = { .kind = ROCED_CLAIM };
	n = roced_encode(&c, b, sizeof(b));
	CHECK_EQ_U(n, ROCED_HDR_LEN);
	CHECK_EQ_U(roced_decode(b, n + 1, &d), ROCED_LONG);
	struct roced_msg p = { .kind = ROCED_PKTS, .aux = 4791 };
	n = roced_encode(&p, b, sizeof(b));
	memset(b + n, 0xee, 20);
	CHECK_EQ_U(roced_decode(b, n + 20, &d), ROCED_OK);
	CHECK(d.aux == 4791 && d.body == b + ROCED_HDR_LEN && d.body_len == 20);
	/* what cannot be encoded */
	struct roced_msg bad = { .kind = ROCED_PEER, .family = AF_UNIX };
	CHECK_EQ_U(roced_encode(&bad, b, sizeof(b)), 0);
	CHECK_EQ_U(roced_encode(&c, b, 4), 0);
}

/* A random byte string never crashes the decoder, and what decodes
 * re-encodes to the same octets (bodies apart). */
static void test_wire_random(void)
{
	uint8_t b[96], e[96];
	struct roced_msg d;

	for (int i = 0; i < 20000; i++) {
		size_t n = (size_t)xs_rand_below(sizeof(b));

		xs_rand_fill(b, n);
		if (n > 1 && xs_rand_below(2))
			b[1] = ROCED_VERSION;
		if (n > 0 && xs_rand_below(2))
			b[0] = (uint8_t)(1 + xs_rand_below(7));
		if (roced_decode(b, n, &d) != ROCED_OK)
			continue;
		size_t m = roced_encode(&d, e, sizeof(e));
		REQUIRE(m && m <= n);
		CHECK(!memcmp(b, e, m));
		CHECK(m == n || d.kind == ROCED_PKTS || d.kind == ROCED_MAD);
	}
}

static struct roced_addr v4(uint8_t last)
{
	struct roced_addr a = { .family = AF_INET };

	a.a[0] = 10, a.a[3] = last;
	return a;
}

static struct roced_addr loop4(void)
{
	struct roced_addr a = { .family = AF_INET };

	a.a[0] = 127, a.a[3] = 1;
	return a;
}

static void test_claims(void)
{
	static struct roced_tab t;
	static struct roced_client c[300];

	roced_tab_init(&t, 0xfffff0); /* wraps past 0xffffff: 0 and 1 skipped */
	for (int i = 0; i < 300; i++) {
		int q = roced_claim(&t, &c[i]);

		REQUIRE(q >= 2 && q <= 0xffffff);
		CHECK(roced_qp_of(&t, (uint32_t)q) == &c[i]);
		for (int j = 0; j < i; j++)
			CHECK(c[j].qpn != (uint32_t)q);
	}
	/* a role once: no second QPN, no CM or listener on a QP's connection */
	CHECK_EQ_U(roced_claim(&t, &c[0]), -EBUSY);
	CHECK_EQ_U(roced_cm_open(&t, &c[0]), -EBUSY);
	CHECK_EQ_U(roced_listen(&t, &c[0], AF_INET, 1), -EBUSY);
	uint32_t q0 = c[0].qpn;
	roced_forget(&t, &c[0]);
	CHECK(!roced_qp_of(&t, q0));
	CHECK(roced_qp_of(&t, c[1].qpn) == &c[1]);

	static struct roced_client cm[3], l[3];
	int t1 = roced_cm_open(&t, &cm[0]), t2 = roced_cm_open(&t, &cm[1]);
	CHECK(t1 > 0 && t2 > 0 && t1 != t2);
	CHECK_EQ_U(roced_listen(&t, &l[0], AF_INET, 0x4e21), 0);
	CHECK_EQ_U(roced_listen(&t, &l[1], AF_INET, 0x4e21), -EADDRINUSE);
	CHECK_EQ_U(roced_listen(&t, &l[1], AF_INET6, 0x4e21), 0); /* another family */
	roced_forget(&t, &l[0]);
	CHECK_EQ_U(roced_listen(&t, &l[2], AF_INET, 0x4e21), 0); /* free again */
}

static void test_packets(void)
{
	static struct roced_tab t;
	struct roced_client a = { .pid = 1 }, b = { .pid = 2 }, r = { .pid = 3 }, x = { .pid = 4 },
			    *to;
	struct roced_addr lo = loop4(), peer = v4(2), me = v4(1);

	roced_tab_init(&t, 100);
	roced_claim(&t, &a);
	roced_claim(&t, &b);
	roced_claim(&t, &r);
	roced_claim(&t, &x);
	/* before a peer: nothing comes, nothing goes */
	CHECK_EQ_U(roced_route_udp_pkt(&t, r.qpn, &peer, 49152, &to), ROCED_DROP_NOQP);
	CHECK_EQ_U(roced_route_pkts(&t, &r, &to), ROCED_DROP_NOQP);
	CHECK_EQ_U(roced_route_udp_pkt(&t, 999, &peer, 49152, &to), ROCED_DROP_NOQP);

	/* r: a remote peer at 10.0.0.2 port 49152 */
	roced_set_peer(&r, &me, &peer, 49152, 0x777, false);
	to = NULL;
	CHECK_EQ_U(roced_route_udp_pkt(&t, r.qpn, &peer, 49152, &to), ROCED_TO_CLIENT);
	CHECK(to == &r);
	CHECK_EQ_U(roced_route_udp_pkt(&t, r.qpn, &peer, 49153, &to), ROCED_DROP_SOURCE);
	struct roced_addr other = v4(3);
	CHECK_EQ_U(roced_route_udp_pkt(&t, r.qpn, &other, 49152, &to), ROCED_DROP_SOURCE);
	/* a local process forging the peer's packets by UDP comes from a local
	 * address: not the peer's */
	CHECK_EQ_U(roced_route_udp_pkt(&t, r.qpn, &lo, 49152, &to), ROCED_DROP_SOURCE);
	CHECK_EQ_U(roced_route_pkts(&t, &r, &to), ROCED_TO_UDP);

	/* a and b: each other's local peers */
	roced_set_peer(&a, &lo, &lo, 0, b.qpn, true);
	CHECK_EQ_U(roced_route_pkts(&t, &a, &to), ROCED_DROP_NOQP); /* b named nobody yet */
	roced_set_peer(&b, &lo, &lo, 0, a.qpn, true);
	to = NULL;
	CHECK_EQ_U(roced_route_pkts(&t, &a, &to), ROCED_TO_CLIENT);
	CHECK(to == &b);
	CHECK_EQ_U(roced_route_pkts(&t, &b, &to), ROCED_TO_CLIENT);
	CHECK(to == &a);
	/* a and b get a direct channel; r (a remote peer) and x (unnamed) not */
	CHECK(roced_pair_of(&t, &a) == &b && roced_pair_of(&t, &b) == &a);
	CHECK(!roced_pair_of(&t, &r));
	/* by UDP, a local peer's packets are anyone's */
	CHECK_EQ_U(roced_route_udp_pkt(&t, b.qpn, &lo, 0, &to), ROCED_DROP_LOCAL);
	/* x names b as its peer: b did not name x */
	roced_set_peer(&x, &lo, &lo, 0, b.qpn, true);
	CHECK_EQ_U(roced_route_pkts(&t, &x, &to), ROCED_DROP_SOURCE);
	CHECK(!roced_pair_of(&t, &x));
	/* ... nor on another address b's peer is not */
	roced_set_peer(&x, &me, &lo, 0, b.qpn, true);
	CHECK_EQ_U(roced_route_pkts(&t, &x, &to), ROCED_DROP_SOURCE);
	/* a connection that is no QP sends no packets */
	struct roced_client cm = { 0 };
	roced_cm_open(&t, &cm);
	CHECK_EQ_U(roced_route_pkts(&t, &cm, &to), ROCED_DROP_ROLE);
	/* b goes: a's packets reach nobody */
	roced_forget(&t, &b);
	CHECK_EQ_U(roced_route_pkts(&t, &a, &to), ROCED_DROP_NOQP);
}

/* A MAD datagram: BTH, DETH, the MAD (attr, local and remote comm ID, a
 * REQ's service ID), ICRC. */
static size_t mad(uint8_t *d, uint16_t attr, uint32_t lcid, uint32_t rcid, uint64_t sid)
{
	uint8_t *m = d + ROCE_BTH_LEN + ROCE_DETH_LEN;

	memset(d, 0, ROCE_BTH_LEN + ROCE_DETH_LEN + ROCE_MAD_LEN + ROCE_ICRC_LEN);
	xs_put_be32(d + 4, 1);
	xs_put_be16(m + 16, attr);
	xs_put_be32(m + 24, lcid);
	if (attr == ROCE_CM_ATTR_REQ)
		xs_put_be64(m + 32, sid);
	else
		xs_put_be32(m + 28, rcid);
	return ROCE_BTH_LEN + ROCE_DETH_LEN + ROCE_MAD_LEN + ROCE_ICRC_LEN;
}

static void test_mads(void)
{
	static struct roced_tab t;
	struct roced_client c1 = { 0 }, c2 = { 0 }, l = { 0 }, q = { 0 }, *to;
	uint8_t d[400];
	size_t n;

	roced_tab_init(&t, 7);
	int t1 = roced_cm_open(&t, &c1), t2 = roced_cm_open(&t, &c2);
	roced_listen(&t, &l, AF_INET, 0x4e21);
	roced_claim(&t, &q);
	uint32_t id1 = (uint32_t)t1 << 16 | 5, id2 = (uint32_t)t2 << 16 | 9;

	/* c1's REQ to a local listener, by the daemon */
	n = mad(d, ROCE_CM_ATTR_REQ, id1, 0, 0x4e21);
	to = NULL;
	CHECK_EQ_U(roced_route_mad(&t, &c1, false, true, AF_INET, d, n, &to), ROCED_TO_CLIENT);
	CHECK(to == &l);
	CHECK_EQ_U(roced_route_mad(&t, &c1, false, true, AF_INET6, d, n, &to), ROCED_DROP_NOCM);
	CHECK_EQ_U(roced_route_mad(&t, &c1, false, false, AF_INET, d, n, &to), ROCED_TO_UDP);
	/* c2's REP to c1 */
	n = mad(d, ROCE_CM_ATTR_REP, id2, id1, 0);
	CHECK_EQ_U(roced_route_mad(&t, &c2, false, true, AF_INET, d, n, &to), ROCED_TO_CLIENT);
	CHECK(to == &c1);
	/* c2 posing as c1 (c1's comm ID as its own): refused */
	n = mad(d, ROCE_CM_ATTR_DREQ, id1, id2, 0);
	CHECK_EQ_U(roced_route_mad(&t, &c2, false, true, AF_INET, d, n, &to), ROCED_DROP_COMMID);
	/* a REJ that knows no comm ID of its own goes */
	n = mad(d, ROCE_CM_ATTR_REJ, 0, id1, 0);
	CHECK_EQ_U(roced_route_mad(&t, &c2, false, true, AF_INET, d, n, &to), ROCED_TO_CLIENT);
	/* a QP's or a listener's connection sends no MAD */
	n = mad(d, ROCE_CM_ATTR_RTU, id1, id2, 0);
	CHECK_EQ_U(roced_route_mad(&t, &q, false, true, AF_INET, d, n, &to), ROCED_DROP_ROLE);
	CHECK_EQ_U(roced_route_mad(&t, &l, false, true, AF_INET, d, n, &to), ROCED_DROP_ROLE);
	/* by UDP: from the network, routed; from this host, dropped */
	n = mad(d, ROCE_CM_ATTR_DREQ, 0x999 << 16, id1, 0);
	CHECK_EQ_U(roced_route_mad(&t, NULL, false, false, AF_INET, d, n, &to), ROCED_TO_CLIENT);
	CHECK(to == &c1);
	CHECK_EQ_U(roced_route_mad(&t, NULL, true, false, AF_INET, d, n, &to), ROCED_DROP_LOCAL);
	/* unknown tag, no comm ID, too short */
	n = mad(d, ROCE_CM_ATTR_DREQ, 0x999 << 16, 0x4444u << 16, 0);
	CHECK_EQ_U(roced_route_mad(&t, NULL, false, false, AF_INET, d, n, &to), ROCED_DROP_NOCM);
	n = mad(d, ROCE_CM_ATTR_REJ, 0x999 << 16, 0, 0);
	CHECK_EQ_U(roced_route_mad(&t, NULL, false, false, AF_INET, d, n, &to), ROCED_DROP_NOCM);
	CHECK_EQ_U(roced_route_mad(&t, NULL, false, false, AF_INET, d, n - 1, &to), ROCED_DROP_MAD);
	/* c1 gone: its tag is nobody's */
	roced_forget(&t, &c1);
	n = mad(d, ROCE_CM_ATTR_DREQ, 0x999 << 16, id1, 0);
	CHECK_EQ_U(roced_route_mad(&t, NULL, false, false, AF_INET, d, n, &to), ROCED_DROP_NOCM);
}

int main(void)
{
	xs_test_seed(11);
	test_wire_round_trip();
	test_wire_random();
	test_claims();
	test_packets();
	test_mads();
	return xs_test_result();
}
