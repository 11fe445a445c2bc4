/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* RoCEv2 transport headers (IBTA Vol. 1 9.2-9.5): encode/decode field by
 * field.  Reserved bits go out as 0 and are ignored on decode (rxe does
 * the same: rxe_hdr.h reads fields through masks). */
#include "config.h"

#include "roce/roce.h"
#include "util/xs_be.h"

void roce_bth_encode(const struct roce_bth *h, uint8_t b[ROCE_BTH_LEN])
{
	uint8_t b1 = (uint8_t)((h->pad << ROCE_BTH_PAD_SHIFT) & ROCE_BTH_PAD_MASK);

	b1 |= h->tver & ROCE_BTH_TVER_MASK;
	if (h->se)
		b1 |= ROCE_BTH_SE;
	if (h->mig)
		b1 |= ROCE_BTH_MIG;
	b[0] = h->opcode;
	b[1] = b1;
	xs_put_be16(b + 2, h->pkey);
	xs_put_be32(b + 4, h->dqpn & ROCE_QPN_MASK);
	if (h->fecn)
		b[4] |= ROCE_BTH_FECN;
	if (h->becn)
		b[4] |= ROCE_BTH_BECN;
	xs_put_be32(b + 8, h->psn & ROCE_PSN_MASK);
	if (h->ackreq)
		b[8] |= ROCE_BTH_ACKREQ;
}

void roce_bth_decode(const uint8_t b[ROCE_BTH_LEN], struct roce_bth *h)
{
	h->opcode = b[0];
	h->se = (b[1] & ROCE_BTH_SE) != 0;
	h->mig = (b[1] & ROCE_BTH_MIG) != 0;
	h->pad = (uint8_t)((b[1] & ROCE_BTH_PAD_MASK) >> ROCE_BTH_PAD_SHIFT);
	h->tver = b[1] & ROCE_BTH_TVER_MASK;
	h->pkey = xs_get_be16(b + 2);
	h->fecn = (b[4] & ROCE_BTH_FECN) != 0;
	h->becn = (b[4] & ROCE_BTH_BECN) != 0;
	h->dqpn = xs_get_be32(b + 4) & ROCE_QPN_MASK;
	h->ackreq = (b[8] & ROCE_BTH_ACKREQ) != 0;
	h->psn = xs_get_be32(b + 8) & ROCE_PSN_MASK;
}

void roce_reth_encode(const struct roce_reth *h, uint8_t b[ROCE_RETH_LEN])
{
	xs_put_be64(b, h->va);
	xs_put_be32(b + 8, h->rkey);
	xs_put_be32(b + 12, h->dma_len);
}

void roce_reth_decode(const uint8_t b[ROCE_RETH_LEN], struct roce_reth *h)
{
	h->va = xs_get_be64(b);
	h->rkey = xs_get_be32(b + 8);
	h->dma_len = xs_get_be32(b + 12);
}

void roce_aeth_encode(const struct roce_aeth *h, uint8_t b[ROCE_AETH_LEN])
{
	xs_put_be32(b, h->msn & ROCE_MSN_MASK);
	b[0] = h->syndrome;
}

void roce_aeth_decode(const uint8_t b[ROCE_AETH_LEN], struct roce_aeth *h)
{
	h->syndrome = b[0];
	h->msn = xs_get_be32(b) & ROCE_MSN_MASK;
}

void roce_atmeth_encode(const struct roce_atmeth *h, uint8_t b[ROCE_ATMETH_LEN])
{
	xs_put_be64(b, h->va);
	xs_put_be32(b + 8, h->rkey);
	xs_put_be64(b + 12, h->swap_add);
	xs_put_be64(b + 20, h->cmp);
}

void roce_atmeth_decode(const uint8_t b[ROCE_ATMETH_LEN], struct roce_atmeth *h)
{
	h->va = xs_get_be64(b);
	h->rkey = xs_get_be32(b + 8);
	h->swap_add = xs_get_be64(b + 12);
	h->cmp = xs_get_be64(b + 20);
}

void roce_deth_encode(const struct roce_deth *h, uint8_t b[ROCE_DETH_LEN])
{
	xs_put_be32(b, h->qkey);
	xs_put_be32(b + 4, h->src_qp & ROCE_QPN_MASK); /* octet 4 reserved */
}

void roce_deth_decode(const uint8_t b[ROCE_DETH_LEN], struct roce_deth *h)
{
	h->qkey = xs_get_be32(b);
	h->src_qp = xs_get_be32(b + 4) & ROCE_QPN_MASK;
}

void roce_atmack_encode(uint64_t orig, uint8_t b[ROCE_ATMACK_LEN])
{
	xs_put_be64(b, orig);
}

uint64_t roce_atmack_decode(const uint8_t b[ROCE_ATMACK_LEN])
{
	return xs_get_be64(b);
}
