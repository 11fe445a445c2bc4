/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The RoCEv2 ICRC as rxe computes it (Linux 6.1 rxe_icrc.c:72-175):
 * CRC-32 (reflected, 0xEDB88320) over 8 octets of 0xFF (the masked LRH),
 * the IP header with TOS, TTL and checksum all ones (IPv6: traffic class,
 * flow label and hop limit all ones), the UDP header with its checksum all
 * ones, the BTH with octet 4 (FECN, BECN, resv6) all ones, then the rest
 * of the headers, the payload and the pad.  rxe chains crc32_le without
 * pre/post inversion from 0xdebb20e3 (0xFFFFFFFF run over the 8 octets)
 * and stores the complement: that is the zlib-style CRC-32 of the whole
 * string, which ISA-L's crc32_gzip_refl computes and chains (seed 0 at the
 * start, the previous result after).  rxe stores that u32 in host order
 * (*icrcp = ~icrc, rxe_icrc.c:174) on little-endian machines: the wire
 * has it least-significant octet first. */
#include "config.h"

#include <isa-l/crc.h>
#include <string.h>

#include "roce/roce.h"
#include "util/xs_be.h"

#define ROCE_PSEUDO_MAX                                                                  \
	(ROCE_LRH_MASK_LEN + ROCE_IPV6_HDR_LEN + ROCE_UDP_HDR_LEN + ROCE_BTH_LEN)

/* The masked IP header; returns its length.  ulen: UDP length (header,
 * BTH .. ICRC). */
static size_t roce_icrc_ip(const struct roce_ip *ip, uint16_t ulen, uint8_t *b)
{
	if (ip->v6) {
		b[0] = 0x6f; /* version 6, traffic class high nibble masked */
		memset(b + 1, 0xff, 3); /* traffic class low nibble, flow label */
		xs_put_be16(b + 4, ulen); /* payload length */
		b[6] = 17; /* next header: UDP */
		b[7] = 0xff; /* hop limit */
		memcpy(b + 8, ip->src, 16);
		memcpy(b + 24, ip->dst, 16);
		return ROCE_IPV6_HDR_LEN;
	}
	b[0] = 0x45; /* version 4, IHL 5 */
	b[1] = 0xff; /* TOS */
	xs_put_be16(b + 2, (uint16_t)(ROCE_IPV4_HDR_LEN + ulen));
	xs_put_be16(b + 4, ip->ip_id);
	xs_put_be16(b + 6, 0x4000); /* DF, offset 0 */
	b[8] = 0xff; /* TTL */
	b[9] = 17; /* protocol: UDP */
	b[10] = 0xff; /* header checksum */
	b[11] = 0xff;
	memcpy(b + 12, ip->src, 4);
	memcpy(b + 16, ip->dst, 4);
	return ROCE_IPV4_HDR_LEN;
}

uint32_t roce_icrc_start(const struct roce_ip *ip, const uint8_t bth[ROCE_BTH_LEN], size_t len)
{
	uint8_t b[ROCE_PSEUDO_MAX];
	/* the IP/UDP length fields are 16 bits (len <= ROCE_MAX_PKT_LEN) */
	uint16_t ulen = (uint16_t)(ROCE_UDP_HDR_LEN + len + ROCE_ICRC_LEN);
	size_t n = ROCE_LRH_MASK_LEN;

	memset(b, 0xff, ROCE_LRH_MASK_LEN);
	n += roce_icrc_ip(ip, ulen, b + n);
	xs_put_be16(b + n, ip->sport);
	xs_put_be16(b + n + 2, ip->dport);
	xs_put_be16(b + n + 4, ulen);
	xs_put_be16(b + n + 6, 0xffff); /* UDP checksum */
	n += ROCE_UDP_HDR_LEN;
	memcpy(b + n, bth, ROCE_BTH_LEN);
	b[n + 4] = 0xff; /* bth->qpn |= cpu_to_be32(~BTH_QPN_MASK), rxe_icrc.c:121 */
	n += ROCE_BTH_LEN;
	return crc32_gzip_refl(0, b, n);
}

uint32_t roce_icrc_add(uint32_t crc, const void *p, size_t n)
{
	if (n == 0)
		return crc;
	return crc32_gzip_refl(crc, p, n);
}

uint32_t roce_icrc(const struct roce_ip *ip, const uint8_t *pkt, size_t len)
{
	/* no RoCE packet is shorter than a BTH: roce_pkt_parse refuses those
	 * before it gets here */
	if (len < ROCE_BTH_LEN)
		return 0;
	return roce_icrc_add(roce_icrc_start(ip, pkt, len), pkt + ROCE_BTH_LEN,
			     len - ROCE_BTH_LEN);
}

void roce_icrc_put(uint32_t icrc, uint8_t b[ROCE_ICRC_LEN])
{
	xs_put_le32(b, icrc);
}

uint32_t roce_icrc_get(const uint8_t b[ROCE_ICRC_LEN])
{
	return xs_get_le32(b);
}
