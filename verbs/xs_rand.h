/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Unpredictable numbers for STags, CM tags and transaction IDs: OpenSSL's
 * CSPRNG, drawn 256 octets at a time into a per-thread pool (one
 * RAND_bytes per STag was 3% of a connection's CPU). */
#ifndef XS_RAND_H
#define XS_RAND_H

#include <stddef.h>

/* Fill p with n octets (any thread, no lock). A fork empties the forking
 * thread's pool in the child, so parent and child never hand out the same
 * numbers.  Returns 0, or -1 if OpenSSL's generator failed (p unchanged). */
int xs_rand_bytes(void *p, size_t n);

#endif
