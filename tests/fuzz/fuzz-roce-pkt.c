/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Fuzz roce_pkt_parse, then roce_pkt_encode_hdrs and roce_pkt_build on
 * what it accepts.
 *
 * Input: 8 config octets, then the packet (one UDP payload: BTH .. ICRC),
 * handed over as a heap block of exactly its size.
 *   c[0] bit 0 IPv6; bit 1 the harness writes the right ICRC into the last
 *        4 octets first (so random headers get past it); bit 2 parse with
 *        ip NULL (ICRC not checked); bit 3 the P_Key expected is c[1..2],
 *        else the packet's own (octets 2-3)
 *   c[1..2] P_Key; c[3..4] IPv4 ID; c[5..6] UDP source port; c[7] seeds
 *   the addresses (src octet i = c[7] + i, dst octet i = c[7] ^ 0xff - i)
 * Checks beyond "no crash, no sanitizer report":
 *   - the error is the first of roce_pkt_parse's checks that fails, in its
 *     documented order (computed here independently; ICRC with roce_icrc);
 *   - on ROCE_OK: roce_pkt_encode_hdrs gives hdr_len octets equal to the
 *     packet's headers except the reserved bits decode ignores (BTH octet 4
 *     bits 5-0 resv6, BTH octet 8 bits 6-0 resv7, DETH octet 4 resv8);
 *     payload starts at hdr_len and hdr_len + paylen + pad + ICRC = len;
 *   - roce_pkt_build from the parsed fields (into a block of exactly the
 *     size it should need) gives a packet that parses ROCE_OK with the same
 *     fields and payload; when the input had the canonical pad (roce_pad),
 *     zero pad octets and zero reserved bits, the octets are the input's
 *     (the ICRC too, when it was checked). */
#include "config.h"

#include <string.h>

#include "roce/roce.h"
#include "tests/fuzz/fuzz.h"

#define CFG_LEN 8

static bool pkey_ok(uint16_t a, uint16_t b)
{
	return (a & 0x7fff) != 0 && (a & 0x7fff) == (b & 0x7fff) && ((a | b) & 0x8000) != 0;
}

/* the first check that fails, in roce_pkt_parse's order */
static enum roce_perr expect(const uint8_t *b, size_t len, const struct roce_ip *ip,
			     uint16_t pkey)
{
	if (len < ROCE_BTH_LEN + ROCE_ICRC_LEN)
		return ROCE_E_SHORT;
	if (b[1] & ROCE_BTH_TVER_MASK)
		return ROCE_E_TVER;

	const struct roce_op_info *o = &roce_ops[b[0]];

	if (!o->name)
		return ROCE_E_OPCODE;
	if (len < (size_t)o->hdr_len + ROCE_ICRC_LEN)
		return ROCE_E_HDRLEN;

	size_t body = len - o->hdr_len - ROCE_ICRC_LEN;
	unsigned pad = (b[1] & ROCE_BTH_PAD_MASK) >> ROCE_BTH_PAD_SHIFT;

	if (pad > body || (body && !(o->flags & ROCE_F_PAYLOAD)))
		return ROCE_E_PAD;
	if (!pkey_ok((uint16_t)(b[2] << 8 | b[3]), pkey))
		return ROCE_E_PKEY;
	if (ip && roce_icrc(ip, b, len - ROCE_ICRC_LEN) != roce_icrc_get(b + len - ROCE_ICRC_LEN))
		return ROCE_E_ICRC;
	return ROCE_OK;
}

static void same_fields(const struct roce_pkt *a, const struct roce_pkt *b, uint32_t f)
{
	FUZZ_ASSERT(a->bth.opcode == b->bth.opcode && a->bth.se == b->bth.se);
	FUZZ_ASSERT(a->bth.mig == b->bth.mig && a->bth.tver == b->bth.tver);
	FUZZ_ASSERT(a->bth.pkey == b->bth.pkey && a->bth.fecn == b->bth.fecn);
	FUZZ_ASSERT(a->bth.becn == b->bth.becn && a->bth.dqpn == b->bth.dqpn);
	FUZZ_ASSERT(a->bth.ackreq == b->bth.ackreq && a->bth.psn == b->bth.psn);
	if (f & ROCE_F_RETH)
		FUZZ_ASSERT(a->reth.va == b->reth.va && a->reth.rkey == b->reth.rkey &&
			    a->reth.dma_len == b->reth.dma_len);
	if (f & ROCE_F_AETH)
		FUZZ_ASSERT(a->aeth.syndrome == b->aeth.syndrome && a->aeth.msn == b->aeth.msn);
	if (f & ROCE_F_IMMDT)
		FUZZ_ASSERT(a->imm == b->imm);
	if (f & ROCE_F_IETH)
		FUZZ_ASSERT(a->ieth == b->ieth);
	if (f & ROCE_F_ATMETH)
		FUZZ_ASSERT(a->atm.va == b->atm.va && a->atm.rkey == b->atm.rkey &&
			    a->atm.swap_add == b->atm.swap_add && a->atm.cmp == b->atm.cmp);
	if (f & ROCE_F_ATMACK)
		FUZZ_ASSERT(a->atm_orig == b->atm_orig);
	if (f & ROCE_F_DETH)
		FUZZ_ASSERT(a->deth.qkey == b->deth.qkey && a->deth.src_qp == b->deth.src_qp);
	FUZZ_ASSERT(a->paylen == b->paylen && memcmp(a->payload, b->payload, a->paylen) == 0);
}

/* The reserved bits of the headers decode ignores (and encode zeroes);
 * returns whether any is set in b. */
static bool reserved_set(const uint8_t *b, uint32_t f, uint8_t *mask, size_t hdr_len)
{
	memset(mask, 0xff, hdr_len);
	mask[4] = (uint8_t)~0x3f; /* resv6 */
	mask[8] = (uint8_t)~0x7f; /* resv7 */
	if (f & ROCE_F_DETH)
		mask[ROCE_BTH_LEN + 4] = 0; /* DETH comes first after the BTH */
	for (size_t i = 0; i < hdr_len; i++)
		if (b[i] & (uint8_t)~mask[i])
			return true;
	return false;
}

static void check_ok(const uint8_t *b, size_t len, const struct roce_ip *ip, uint16_t pkey,
		     const struct roce_pkt *p)
{
	const struct roce_op_info *o = &roce_ops[p->bth.opcode];
	uint8_t hdr[ROCE_MAX_HDR_LEN], mask[ROCE_MAX_HDR_LEN];

	FUZZ_ASSERT(o->name && p->bth.tver == 0 && p->bth.pad <= 3);
	FUZZ_ASSERT(p->payload == b + o->hdr_len);
	FUZZ_ASSERT((size_t)o->hdr_len + p->paylen + p->bth.pad + ROCE_ICRC_LEN == len);
	FUZZ_ASSERT(p->paylen == 0 || (o->flags & ROCE_F_PAYLOAD));

	FUZZ_ASSERT(roce_pkt_encode_hdrs(p, hdr) == o->hdr_len);
	bool resv = reserved_set(b, o->flags, mask, o->hdr_len);
	for (size_t i = 0; i < o->hdr_len; i++)
		FUZZ_ASSERT(hdr[i] == (b[i] & mask[i]));

	/* build it again from the fields */
	struct roce_pkt q = *p, r;
	uint8_t pad = roce_pad(p->paylen);
	size_t want = (size_t)o->hdr_len + p->paylen + pad + ROCE_ICRC_LEN;
	uint8_t *out = malloc(want);

	FUZZ_ASSERT(out);
	size_t n = roce_pkt_build(&q, p->payload, p->paylen, ip, out);
	if (want > ROCE_MAX_PKT_LEN) {
		FUZZ_ASSERT(n == 0);
		free(out);
		return;
	}
	FUZZ_ASSERT(n == want && q.bth.pad == pad);
	FUZZ_ASSERT(q.payload == out + o->hdr_len && q.paylen == p->paylen);
	for (size_t i = 0; i < pad; i++)
		FUZZ_ASSERT(out[o->hdr_len + p->paylen + i] == 0);
	FUZZ_ASSERT(roce_pkt_parse(out, n, ip, pkey, &r) == ROCE_OK);
	FUZZ_ASSERT(r.bth.pad == pad);
	same_fields(p, &r, o->flags);

	/* a canonical input comes back octet for octet */
	bool canon = !resv && p->bth.pad == pad;
	for (size_t i = 0; canon && i < pad; i++)
		canon = b[o->hdr_len + p->paylen + i] == 0;
	if (canon)
		FUZZ_ASSERT(memcmp(out, b, ip ? n : n - ROCE_ICRC_LEN) == 0);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size, 0 };
	uint8_t c0 = fuzz_u8(&in);
	uint16_t cfg_pkey = fuzz_u16(&in);
	struct roce_ip ip = { .v6 = c0 & 1, .dport = ROCE_UDP_PORT };

	ip.ip_id = fuzz_u16(&in);
	ip.sport = fuzz_u16(&in);
	uint8_t a = fuzz_u8(&in);
	for (int i = 0; i < 16; i++) {
		ip.src[i] = (uint8_t)(a + i);
		ip.dst[i] = (uint8_t)((a ^ 0xff) - i);
	}

	size_t len = size > CFG_LEN ? size - CFG_LEN : 0;
	uint8_t *b = malloc(len ? len : 1);

	FUZZ_ASSERT(b);
	if (len)
		memcpy(b, data + CFG_LEN, len);
	const struct roce_ip *ipp = (c0 & 4) ? NULL : &ip;
	uint16_t pkey = cfg_pkey;

	if (!(c0 & 8) && len >= 4)
		pkey = (uint16_t)(b[2] << 8 | b[3]);
	if ((c0 & 2) && len >= ROCE_BTH_LEN + ROCE_ICRC_LEN)
		roce_icrc_put(roce_icrc(&ip, b, len - ROCE_ICRC_LEN), b + len - ROCE_ICRC_LEN);

	struct roce_pkt p;
	enum roce_perr e = roce_pkt_parse(b, len, ipp, pkey, &p);

	FUZZ_ASSERT((unsigned)e < ROCE_E_COUNT && roce_perr_str(e)[0]);
	FUZZ_ASSERT(e == expect(b, len, ipp, pkey));
	if (e != ROCE_E_SHORT)
		FUZZ_ASSERT(p.bth.opcode == b[0]);
	if (e == ROCE_OK)
		check_ok(b, len, ipp, pkey, &p);
	free(b);
	return 0;
}
