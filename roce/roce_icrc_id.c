/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Checking the ICRC of an IPv4 packet whose Identification is unknown.
 * The ICRC covers the IPv4 ID (roce.h); rxe sends hashed IDs, and a UDP
 * socket does not see the IP header of what it receives.  A CRC is affine
 * in the bits of a message of a given length, so over the 2^16 possible
 * IDs the ICRC is icrc(ID 0) XOR M.id, M a 32x16 matrix over GF(2) that
 * depends only on the length: the ID that makes the ICRC right, if any, is
 * the solution of one small linear system.  A packet passes iff such an ID
 * exists; a random corruption then escapes with probability 2^-16 instead
 * of 2^-32 (the Ethernet FCS still covers each link). */
#include "config.h"

#include <string.h>

#include "roce/roce.h"

/* M for one length, in echelon form: vec[j] has bit piv[j] set and every
 * earlier pivot bit clear; comb[j] says which ID bits sum to it. */
static void basis_make(struct roce_icrc_idc *s, const struct roce_ip *ip, const uint8_t *pkt,
		       size_t len, uint32_t c0)
{
	struct roce_ip t = *ip;

	s->len = (uint32_t)len;
	s->n = 0;
	for (unsigned i = 0; i < 16; i++) {
		uint32_t v;
		uint16_t c = (uint16_t)(1u << i);

		t.ip_id = (uint16_t)(1u << i);
		v = roce_icrc(&t, pkt, len) ^ c0; /* the linear part: content cancels */
		s->col[i] = v;
		for (unsigned j = 0; j < s->n; j++)
			if (v & s->piv[j]) {
				v ^= s->vec[j];
				c ^= s->comb[j];
			}
		if (!v)
			continue; /* not independent (does not happen for CRC-32) */
		s->piv[s->n] = v & -v;
		s->vec[s->n] = v;
		s->comb[s->n] = c;
		s->n++;
	}
}

bool roce_icrc_find_id(struct roce_icrc_idcache *cache, struct roce_ip *ip, const uint8_t *pkt,
		       size_t len, uint32_t want)
{
	struct roce_icrc_idc *s = &cache->slot[len % ROCE_ICRC_IDC_SLOTS];
	uint32_t c0, d;
	uint16_t id = 0;

	ip->ip_id = 0;
	c0 = roce_icrc(ip, pkt, len);
	if (c0 == want)
		return true; /* ID 0: an unconnected UDP socket with DF (xsock) */
	if (ip->v6)
		return false;
	if (s->len != len || !s->n)
		basis_make(s, ip, pkt, len, c0);
	d = c0 ^ want;
	for (unsigned j = 0; j < s->n; j++)
		if (d & s->piv[j]) {
			d ^= s->vec[j];
			id ^= s->comb[j];
		}
	if (d)
		return false;
	ip->ip_id = id;
	return true;
}

uint32_t roce_icrc_with_id(struct roce_icrc_idcache *cache, const struct roce_ip *ip,
			   const uint8_t *pkt, size_t len, uint32_t icrc0, uint16_t id)
{
	struct roce_icrc_idc *s = &cache->slot[len % ROCE_ICRC_IDC_SLOTS];
	uint32_t crc = icrc0;

	if (ip->v6 || !id)
		return icrc0;
	if (s->len != len || !s->n) {
		struct roce_ip t = *ip;

		t.ip_id = 0;
		basis_make(s, &t, pkt, len, icrc0);
	}
	for (unsigned i = 0; i < 16; i++)
		if (id & (1u << i))
			crc ^= s->col[i];
	return crc;
}
