/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Shared bits of the libFuzzer harnesses (tests/fuzz/fuzz-*.c).  Each
 * harness defines LLVMFuzzerTestOneInput; built with clang
 * -fsanitize=fuzzer by scripts/fuzz.sh, and with replay_main.c (plain gcc,
 * `make check`) to replay the corpus and the saved crash inputs. */
#ifndef XS_FUZZ_H
#define XS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A violated invariant is a finding: abort so libFuzzer saves the input. */
#define FUZZ_ASSERT(cond)                                                            \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "%s:%d: FUZZ_ASSERT failed: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                     \
		}                                                                    \
	} while (0)

/* Input cursor: bytes past the end read as zero. */
struct fuzz_in {
	const uint8_t *p;
	size_t len, off;
};

static inline uint8_t fuzz_u8(struct fuzz_in *in)
{
	return in->off < in->len ? in->p[in->off++] : 0;
}

static inline uint16_t fuzz_u16(struct fuzz_in *in)
{
	uint16_t hi = fuzz_u8(in);

	return (uint16_t)(hi << 8 | fuzz_u8(in));
}

static inline uint32_t fuzz_u32(struct fuzz_in *in)
{
	uint32_t hi = fuzz_u16(in);

	return hi << 16 | fuzz_u16(in);
}

static inline size_t fuzz_left(const struct fuzz_in *in)
{
	return in->len - in->off;
}

#endif
