/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A whole RoCEv2 packet (the UDP payload: BTH .. ICRC): the checks of a
 * received one, each rejection with its own code, and the building of one
 * to send. */
#include "config.h"

#include <string.h>

#include "roce/roce.h"
#include "util/xs_be.h"

static const char *const roce_perr_names[ROCE_E_COUNT] = {
	[ROCE_OK] = "ok",
	[ROCE_E_SHORT] = "shorter than BTH + ICRC",
	[ROCE_E_TVER] = "BTH TVer not 0",
	[ROCE_E_OPCODE] = "opcode not supported",
	[ROCE_E_HDRLEN] = "headers longer than the packet",
	[ROCE_E_PAD] = "pad longer than the payload, or payload where the opcode has none",
	[ROCE_E_PKEY] = "P_Key mismatch",
	[ROCE_E_ICRC] = "ICRC mismatch",
};

const char *roce_perr_str(enum roce_perr e)
{
	if ((unsigned)e >= ROCE_E_COUNT)
		return "unknown RoCE packet error";
	return roce_perr_names[e];
}

/* IBTA 10.9.3 as rxe's pkey_match (rxe_verbs.h:16-21): the low 15 bits
 * equal and not 0, and at least one side a full member (bit 15). */
static bool roce_pkey_match(uint16_t a, uint16_t b)
{
	return (a & 0x7fff) != 0 && (a & 0x7fff) == (b & 0x7fff) && ((a | b) & 0x8000) != 0;
}

/* The extension headers after the BTH, in wire order (roce_opcode.c);
 * returns the octets read. */
static size_t roce_ext_decode(uint32_t f, const uint8_t *b, struct roce_pkt *p)
{
	size_t n = 0;

	if (f & ROCE_F_RETH) {
		roce_reth_decode(b + n, &p->reth);
		n += ROCE_RETH_LEN;
	}
	if (f & ROCE_F_AETH) {
		roce_aeth_decode(b + n, &p->aeth);
		n += ROCE_AETH_LEN;
	}
	if (f & ROCE_F_DETH) {
		roce_deth_decode(b + n, &p->deth);
		n += ROCE_DETH_LEN;
	}
	if (f & ROCE_F_ATMETH) {
		roce_atmeth_decode(b + n, &p->atm);
		n += ROCE_ATMETH_LEN;
	}
	if (f & ROCE_F_IMMDT) {
		memcpy(&p->imm, b + n, ROCE_IMMDT_LEN); /* kept in wire order, as verbs' */
		n += ROCE_IMMDT_LEN;
	}
	if (f & ROCE_F_IETH) {
		p->ieth = xs_get_be32(b + n);
		n += ROCE_IETH_LEN;
	}
	if (f & ROCE_F_ATMACK) {
		p->atm_orig = roce_atmack_decode(b + n);
		n += ROCE_ATMACK_LEN;
	}
	return n;
}

/* The same headers from *p; returns the octets written. */
static size_t roce_ext_encode(uint32_t f, const struct roce_pkt *p, uint8_t *b)
{
	size_t n = 0;

	if (f & ROCE_F_RETH) {
		roce_reth_encode(&p->reth, b + n);
		n += ROCE_RETH_LEN;
	}
	if (f & ROCE_F_AETH) {
		roce_aeth_encode(&p->aeth, b + n);
		n += ROCE_AETH_LEN;
	}
	if (f & ROCE_F_DETH) {
		roce_deth_encode(&p->deth, b + n);
		n += ROCE_DETH_LEN;
	}
	if (f & ROCE_F_ATMETH) {
		roce_atmeth_encode(&p->atm, b + n);
		n += ROCE_ATMETH_LEN;
	}
	if (f & ROCE_F_IMMDT) {
		memcpy(b + n, &p->imm, ROCE_IMMDT_LEN);
		n += ROCE_IMMDT_LEN;
	}
	if (f & ROCE_F_IETH) {
		xs_put_be32(b + n, p->ieth);
		n += ROCE_IETH_LEN;
	}
	if (f & ROCE_F_ATMACK) {
		roce_atmack_encode(p->atm_orig, b + n);
		n += ROCE_ATMACK_LEN;
	}
	return n;
}

enum roce_perr roce_pkt_parse(const uint8_t *buf, size_t len, const struct roce_ip *ip,
			      uint16_t pkey, struct roce_pkt *p)
{
	*p = (struct roce_pkt){ 0 };
	if (len < ROCE_BTH_LEN + ROCE_ICRC_LEN)
		return ROCE_E_SHORT;
	roce_bth_decode(buf, &p->bth);
	if (p->bth.tver != 0)
		return ROCE_E_TVER;

	const struct roce_op_info *op = &roce_ops[p->bth.opcode];

	if (!op->name)
		return ROCE_E_OPCODE;
	if (len < (size_t)op->hdr_len + ROCE_ICRC_LEN)
		return ROCE_E_HDRLEN;

	/* payload and pad: what is left between the headers and the ICRC */
	size_t body = len - op->hdr_len - ROCE_ICRC_LEN;

	if (p->bth.pad > body || (!(op->flags & ROCE_F_PAYLOAD) && body != 0))
		return ROCE_E_PAD;
	if (!roce_pkey_match(p->bth.pkey, pkey))
		return ROCE_E_PKEY;
	if (ip && roce_icrc(ip, buf, len - ROCE_ICRC_LEN) != roce_icrc_get(buf + len - ROCE_ICRC_LEN))
		return ROCE_E_ICRC;

	roce_ext_decode(op->flags, buf + ROCE_BTH_LEN, p);
	p->payload = buf + op->hdr_len;
	p->paylen = (uint32_t)(body - p->bth.pad);
	return ROCE_OK;
}

size_t roce_pkt_encode_hdrs(const struct roce_pkt *p, uint8_t *hdr)
{
	const struct roce_op_info *op = &roce_ops[p->bth.opcode];

	if (!op->name)
		return 0;
	roce_bth_encode(&p->bth, hdr);
	roce_ext_encode(op->flags, p, hdr + ROCE_BTH_LEN);
	return op->hdr_len;
}

/* Can p's opcode carry paylen octets in a packet of at most
 * ROCE_MAX_PKT_LEN? */
static bool pkt_fits(const struct roce_pkt *p, uint32_t paylen)
{
	const struct roce_op_info *op = &roce_ops[p->bth.opcode];

	if (!op->name || (paylen && !(op->flags & ROCE_F_PAYLOAD)))
		return false;
	return (size_t)op->hdr_len + paylen + roce_pad(paylen) + ROCE_ICRC_LEN <= ROCE_MAX_PKT_LEN;
}

size_t roce_pkt_finish(struct roce_pkt *p, uint32_t paylen, const struct roce_ip *ip,
		       uint8_t *out)
{
	uint8_t hl = roce_ops[p->bth.opcode].hdr_len;
	size_t len;

	if (!pkt_fits(p, paylen))
		return 0;
	p->bth.pad = roce_pad(paylen);
	len = (size_t)hl + paylen + p->bth.pad;
	roce_pkt_encode_hdrs(p, out);
	memset(out + hl + paylen, 0, p->bth.pad);
	p->payload = out + hl;
	p->paylen = paylen;
	roce_icrc_put(ip ? roce_icrc(ip, out, len) : 0, out + len);
	return len + ROCE_ICRC_LEN;
}

size_t roce_pkt_build(struct roce_pkt *p, const void *payload, uint32_t paylen,
		      const struct roce_ip *ip, uint8_t *out)
{
	if (!pkt_fits(p, paylen))
		return 0;
	if (paylen) /* first: the payload may overlap where the headers go */
		memmove(out + roce_ops[p->bth.opcode].hdr_len, payload, paylen);
	return roce_pkt_finish(p, paylen, ip, out);
}
