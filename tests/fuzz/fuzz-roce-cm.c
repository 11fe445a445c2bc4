/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Fuzz roce_cm_decode, roce_cm_encode and roce_cma_hdr_decode/encode.
 *
 * Input: any octets.  The input as given goes to roce_cm_decode (only
 * ROCE_MAD_LEN octets may decode); then its first ROCE_MAD_LEN octets, or
 * all of it followed by zeros, as a MAD of the right length (so every
 * input reaches the fields).  Its first ROCE_CMA_HDR_LEN octets (zeros
 * after a shorter input) go to roce_cma_hdr_decode.
 * Checks beyond "no crash, no sanitizer report":
 *   - a length other than ROCE_MAD_LEN gives ROCE_CM_ERR_LEN, every error
 *     has a name;
 *   - on ROCE_CM_OK: the header octets (but the reserved 18..19) and the
 *     private data re-encode unchanged; encode -> decode gives ROCE_CM_OK
 *     and the same message (both zeroed whole first, so memcmp compares
 *     fields), and encode again the same octets; the attribute has a name;
 *   - a cma_hdr that decodes re-encodes to the input octets but the
 *     reserved low nibble of octet 1. */
#include "config.h"

#include <string.h>

#include "roce/roce_cm.h"
#include "tests/fuzz/fuzz.h"

/* where each message's private data starts in the MAD, and its length */
static void pdata_span(uint16_t attr, size_t *off, size_t *len)
{
	switch (attr) {
	case ROCE_CM_ATTR_REQ:
		*off = 140;
		*len = ROCE_CM_REQ_PDATA;
		break;
	case ROCE_CM_ATTR_MRA:
		*off = 10;
		*len = ROCE_CM_MRA_PDATA;
		break;
	case ROCE_CM_ATTR_REJ:
		*off = 12;
		*len = ROCE_CM_REJ_ARI + ROCE_CM_REJ_PDATA;
		break;
	case ROCE_CM_ATTR_REP:
		*off = 36;
		*len = ROCE_CM_REP_PDATA;
		break;
	case ROCE_CM_ATTR_DREQ:
		*off = 12;
		*len = ROCE_CM_DREQ_PDATA;
		break;
	default: /* RTU, DREP */
		*off = 8;
		*len = ROCE_CM_RTU_PDATA;
		break;
	}
	*off += ROCE_MAD_HDR_LEN;
}

static void check_mad(const uint8_t *mad)
{
	struct roce_cm_msg m, d;
	uint8_t a[ROCE_MAD_LEN], b[ROCE_MAD_LEN];
	enum roce_cm_err e = roce_cm_decode(mad, ROCE_MAD_LEN, &m);
	size_t off, len;

	FUZZ_ASSERT(e != ROCE_CM_ERR_LEN && strcmp(roce_cm_err_str(e), "?") != 0);
	if (e != ROCE_CM_OK)
		return;
	FUZZ_ASSERT(strcmp(roce_cm_attr_str(m.hdr.attr_id), "?") != 0);
	roce_cm_encode(&m, a);
	FUZZ_ASSERT(memcmp(a, mad, 18) == 0 && memcmp(a + 20, mad + 20, 4) == 0);
	pdata_span(m.hdr.attr_id, &off, &len);
	FUZZ_ASSERT(off + len == ROCE_MAD_LEN && memcmp(a + off, mad + off, len) == 0);

	FUZZ_ASSERT(roce_cm_decode(a, sizeof(a), &d) == ROCE_CM_OK);
	FUZZ_ASSERT(memcmp(&m, &d, sizeof(m)) == 0);
	roce_cm_encode(&d, b);
	FUZZ_ASSERT(memcmp(a, b, sizeof(a)) == 0);
}

static void check_cma(const uint8_t *c)
{
	struct roce_cma_hdr h;
	uint8_t b[ROCE_CMA_HDR_LEN];

	if (roce_cma_hdr_decode(c, &h) != 0) {
		FUZZ_ASSERT(c[0] != ROCE_CMA_VERSION || (c[1] >> 4 != 4 && c[1] >> 4 != 6));
		return;
	}
	FUZZ_ASSERT(h.version == ROCE_CMA_VERSION && (h.ip_version == 4 || h.ip_version == 6));
	roce_cma_hdr_encode(&h, b);
	FUZZ_ASSERT(b[0] == c[0] && b[1] == (c[1] & 0xf0));
	FUZZ_ASSERT(memcmp(b + 2, c + 2, sizeof(b) - 2) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct roce_cm_msg m;
	uint8_t *mad = calloc(1, ROCE_MAD_LEN);
	enum roce_cm_err e = roce_cm_decode(data, size, &m);

	FUZZ_ASSERT(mad);
	FUZZ_ASSERT((e == ROCE_CM_ERR_LEN) == (size != ROCE_MAD_LEN));
	if (size)
		memcpy(mad, data, size < ROCE_MAD_LEN ? size : ROCE_MAD_LEN);
	check_mad(mad);
	check_cma(mad);
	free(mad);
	return 0;
}
