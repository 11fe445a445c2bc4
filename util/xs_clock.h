/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The monotonic clock in the units the stack's deadlines use. */
#ifndef XS_CLOCK_H
#define XS_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t xs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t xs_now_ms(void)
{
	return xs_now_ns() / 1000000u;
}

#endif
