/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* A per-thread pool in front of OpenSSL's RAND_bytes (xs_rand.h). */
#include "config.h"

#include <pthread.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "verbs/xs_rand.h"

#define XS_RAND_POOL 256

static __thread unsigned char rand_pool[XS_RAND_POOL];
static __thread size_t rand_left; /* unused octets at the pool's end */
static pthread_once_t rand_once = PTHREAD_ONCE_INIT;

/* the child's copy of the forking thread's pool is the parent's too */
static void rand_forked(void)
{
	OPENSSL_cleanse(rand_pool, sizeof(rand_pool));
	rand_left = 0;
}

static void rand_init(void)
{
	(void)pthread_atfork(NULL, NULL, rand_forked);
}

int xs_rand_bytes(void *p, size_t n)
{
	unsigned char *out = p;

	pthread_once(&rand_once, rand_init);
	if (n > XS_RAND_POOL)
		return RAND_bytes(out, (int)n) == 1 ? 0 : -1;
	if (rand_left < n) {
		if (RAND_bytes(rand_pool, XS_RAND_POOL) != 1)
			return -1;
		rand_left = XS_RAND_POOL;
	}
	/* each octet is handed out once, then wiped */
	memcpy(out, rand_pool + XS_RAND_POOL - rand_left, n);
	OPENSSL_cleanse(rand_pool + XS_RAND_POOL - rand_left, n);
	rand_left -= n;
	return 0;
}
