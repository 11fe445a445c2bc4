/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Fuzz xsock-roced's messages and rules (roced/roced_wire.c,
 * roced/roced_route.c): what any process may send the daemon, and what
 * any host may send its UDP 4791.
 *
 * Input: octet 0 picks the part (its value mod 2), the rest is the input,
 * handed over in a heap block of exactly its size:
 *   0  a message: it decodes or is refused; one that decodes re-encodes
 *      to the input's octets (a PKTS or MAD: its header);
 *   1  octet 1 the sender (bit 0: a process's CM, else UDP; bit 1: the
 *      source is local; bit 2: the destination is local), octets 2..5 a
 *      source address, the rest a datagram, through the rules of a
 *      table of two local QPs that name each other, a QP with a remote
 *      peer (10.0.0.2), a CM and a listener: a datagram for a QP is only
 *      ever handed to the QP whose remote peer's address sent it; a MAD
 *      from the CM only goes out with its own tag (or as a REJ without
 *      one); nothing by UDP from a local address reaches anyone. */
#include "config.h"

#include <string.h>
#include <sys/socket.h>

#include "roce/roce.h"
#include "roce/roce_cm.h"
#include "roced/roced_route.h"
#include "roced/roced_wire.h"
#include "tests/fuzz/fuzz.h"
#include "util/xs_be.h"

static void one_message(const uint8_t *d, size_t len)
{
	uint8_t *b = malloc(len ? len : 1), out[64];
	struct roced_msg m;

	FUZZ_ASSERT(b);
	memcpy(b, d, len);
	if (roced_decode(b, len, &m) == ROCED_OK) {
		size_t n = roced_encode(&m, out, sizeof(out));

		FUZZ_ASSERT(n && n <= len && !memcmp(out, b, n));
		FUZZ_ASSERT(n == len || m.kind == ROCED_PKTS || m.kind == ROCED_MAD);
		if (m.kind == ROCED_PKTS || m.kind == ROCED_MAD)
			FUZZ_ASSERT(m.body == b + ROCED_HDR_LEN && m.body_len == len - ROCED_HDR_LEN);
	}
	free(b);
}

static struct roced_tab tab;
static struct roced_client qa, qb, qr, cm, ls;
static bool ready;

static struct roced_addr v4(uint8_t a, uint8_t b, uint8_t c, uint8_t e)
{
	struct roced_addr x = { .family = AF_INET, .a = { a, b, c, e } };

	return x;
}

static void table(void)
{
	struct roced_addr lo = v4(127, 0, 0, 1), me = v4(10, 0, 0, 1), far = v4(10, 0, 0, 2);

	roced_tab_init(&tab, 1000);
	roced_claim(&tab, &qa);
	roced_claim(&tab, &qb);
	roced_claim(&tab, &qr);
	roced_set_peer(&qa, &lo, &lo, 0, qb.qpn, true);
	roced_set_peer(&qb, &lo, &lo, 0, qa.qpn, true);
	roced_set_peer(&qr, &me, &far, 0, 0x777, false);
	roced_cm_open(&tab, &cm);
	roced_listen(&tab, &ls, AF_INET, 0x1061d30);
	ready = true;
}

static void one_datagram(const uint8_t *d, size_t len)
{
	struct roced_client *to = NULL;
	struct roced_addr src;
	uint8_t *b;

	if (len < 6)
		return;
	if (!ready)
		table();
	uint8_t how = d[0];
	src = v4(d[1], d[2], d[3], d[4]);
	d += 5;
	len -= 5;
	b = malloc(len ? len : 1);
	FUZZ_ASSERT(b);
	memcpy(b, d, len);
	if (len >= ROCE_BTH_LEN) {
		uint32_t qpn = xs_get_be32(b + 4) & ROCE_QPN_MASK;

		if (qpn != 1 && roced_route_udp_pkt(&tab, qpn, &src, 4791, &to) == ROCED_TO_CLIENT)
			FUZZ_ASSERT(to == &qr && qpn == qr.qpn && !memcmp(src.a, qr.peer.a, 4));
	}
	to = NULL;
	enum roced_verdict v = roced_route_mad(&tab, (how & 1) ? &cm : NULL, how & 2, how & 4,
					       AF_INET, b, len, &to);
	if (v == ROCED_TO_CLIENT)
		FUZZ_ASSERT(to == &cm || to == &ls);
	if (!(how & 1) && (how & 2))
		FUZZ_ASSERT(v != ROCED_TO_CLIENT);
	if ((how & 1) && (v == ROCED_TO_CLIENT || v == ROCED_TO_UDP)) {
		struct roce_cm_route rt;

		roce_cm_route(b + ROCE_BTH_LEN + ROCE_DETH_LEN, &rt);
		FUZZ_ASSERT(rt.local_comm_id >> 16 == cm.tag ||
			    (rt.attr == ROCE_CM_ATTR_REJ && !rt.local_comm_id));
	}
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t len)
{
	if (!len)
		return 0;
	if (d[0] % 2 == 0)
		one_message(d + 1, len - 1);
	else
		one_datagram(d + 1, len - 1);
	return 0;
}
