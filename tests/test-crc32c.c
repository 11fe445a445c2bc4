/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* CRC32c through ISA-L: the check value, incremental use, and an FPDU whose
 * CRC was computed by Linux siw (vector init-rev2-crc1, first Send). */
#include "config.h"

#include "tests/xs_test.h"
#include "util/xs_be.h"
#include "util/xs_crc.h"

int main(void)
{
	CHECK_EQ_U(xs_crc32c("123456789", 9), 0xE3069283u);
	CHECK_EQ_U(xs_crc32c("", 0), 0x00000000u);

	/* Incremental over every split point equals one-shot. */
	const char *s = "The quick brown fox jumps over the lazy dog";
	size_t n = strlen(s);
	uint32_t whole = xs_crc32c(s, n);
	for (size_t cut = 0; cut <= n; cut++) {
		uint32_t st = xs_crc32c_update(XS_CRC32C_INIT, s, cut);
		st = xs_crc32c_update(st, s + cut, n - cut);
		CHECK_EQ_U(xs_crc32c_final(st), whole);
	}

	/* siw Send FPDU with CRC on: the CRC covers ULPDU_LENGTH, ULPDU and pad,
	 * and is sent least-significant byte first. */
	uint8_t f[64];
	size_t len = xs_hex("00 22 41 43 00 00 00 00 00 00 00 00 00 00 00 01"
			    "00 00 00 00 00 00 55 87 ce 6d 93 70 e0 03 ac 00"
			    "00 00 00 40 43 fd ef d7",
			    f, sizeof f);
	CHECK_EQ_U(len, 40);
	CHECK_EQ_U(xs_crc32c(f, len - 4), xs_get_le32(f + len - 4));
	/* A flipped payload bit changes it. */
	f[20] ^= 1;
	CHECK(xs_crc32c(f, len - 4) != xs_get_le32(f + len - 4));
	return xs_test_result();
}
