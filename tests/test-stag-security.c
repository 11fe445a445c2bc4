/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* STag security (RFC 5042): what a peer that guesses STags can reach.
 *
 * STags are 32 random bits from OpenSSL's CSPRNG: of 20000 registrations
 * (half freed at once), those alive together are distinct, and every bit is
 * set in 45..55% of them.  Then, against 16
 * live MRs with remote rights, 10^6 uniformly random STags and 10^6 STags
 * "near" a known one (every single-bit flip, every other low byte, +-4096)
 * are resolved as a remote Write and a remote Read would be: a guess is
 * accepted only if it is exactly a live STag (for the random ones the
 * expected count is 16 * 10^6 / 2^32 = 0.004, reported, not judged), and
 * none of the near ones is.  Deregistration and invalidation revoke at
 * once. */
#include "config.h"

#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#include "tests/xs_test.h"
#include "verbs/verbs_priv.h"

#define LIVE 16
#define GUESSES 1000000

static struct ibv_mr *live[LIVE];

static bool is_live(uint32_t stag)
{
	for (int i = 0; i < LIVE; i++)
		if (live[i]->rkey == stag)
			return true;
	return false;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void test_entropy(struct ibv_pd *pd, uint8_t *mem)
{
	enum { N = 20000 };
	static uint32_t stag[N];
	static struct ibv_mr *keep[N];
	unsigned ones[32] = { 0 };

	for (int i = 0; i < N; i++) {
		struct ibv_mr *mr = ibv_reg_mr(pd, mem, 64, IBV_ACCESS_LOCAL_WRITE);

		REQUIRE(mr);
		stag[i] = mr->rkey;
		CHECK(mr->rkey >= 256 && mr->lkey == mr->rkey);
		/* drop every other one at once so the table also reuses slots */
		if (i % 2)
			CHECK(ibv_dereg_mr(mr) == 0);
		else
			keep[i] = mr;
		for (int b = 0; b < 32; b++)
			ones[b] += (stag[i] >> b) & 1;
	}
	for (int i = 0; i < N; i += 2)
		CHECK(ibv_dereg_mr(keep[i]) == 0);
	for (int b = 0; b < 32; b++) {
		if (ones[b] < N * 45 / 100 || ones[b] > N * 55 / 100) {
			fprintf(stderr, "STag bit %d set in %u of %d\n", b, ones[b], N);
			xs_test_failures++;
		}
	}
	/* MRs alive together never share an STag; over all N, a value freed by
	 * a deregistration may come again (uniform 32 bits: expected
	 * N^2/2^33 = 0.05 repeats, so more than 3 is a fault, not chance) */
	static uint32_t kept[N / 2];
	unsigned repeats = 0;

	for (int i = 0; i < N; i += 2)
		kept[i / 2] = stag[i];
	qsort(kept, N / 2, sizeof(kept[0]), cmp_u32);
	for (int i = 1; i < N / 2; i++)
		CHECK(kept[i] != kept[i - 1]);
	qsort(stag, N, sizeof(stag[0]), cmp_u32);
	for (int i = 1; i < N; i++)
		repeats += stag[i] == stag[i - 1];
	CHECK(repeats <= 3);
}

static int resolve_any(struct ibv_pd *pd, uint32_t stag, uint64_t to)
{
	uint8_t *dst = NULL;
	struct xs_err err;

	if (xs_mr_resolve(pd, stag, to, 8, XS_ACCESS_REMOTE_WRITE, &dst, &err) == 0)
		return 1;
	if (xs_mr_resolve(pd, stag, to, 8, XS_ACCESS_REMOTE_READ, &dst, &err) == 0)
		return 1;
	return 0;
}

int main(void)
{
	struct ibv_context *ctx = xs_default_context();
	struct ibv_pd *pd;
	static uint8_t mem[LIVE][4096];
	unsigned accepted = 0, lucky = 0, near_accepted = 0;
	uint32_t *guess;

	REQUIRE(ctx);
	pd = ibv_alloc_pd(ctx);
	REQUIRE(pd);
	test_entropy(pd, mem[0]);
	for (int i = 0; i < LIVE; i++) {
		live[i] = ibv_reg_mr(pd, mem[i], sizeof(mem[i]),
				     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					     IBV_ACCESS_REMOTE_READ);
		REQUIRE(live[i]);
	}

	/* uniformly random STags, each at a TO inside some live MR (the
	 * attacker is even granted the addresses) */
	guess = malloc(GUESSES * sizeof(*guess));
	REQUIRE(guess);
	REQUIRE(RAND_bytes((unsigned char *)guess, GUESSES * sizeof(*guess)) == 1);
	for (int i = 0; i < GUESSES; i++) {
		uint64_t to = (uintptr_t)mem[i % LIVE];
		int ok = resolve_any(pd, guess[i], to);

		accepted += (unsigned)ok;
		if (is_live(guess[i]))
			lucky++;
		else if (ok) {
			fprintf(stderr, "random STag 0x%08x accepted\n", guess[i]);
			xs_test_failures++;
		}
	}
	free(guess);
	CHECK(accepted == lucky);

	/* near a known STag: single-bit flips, every other low byte, +-4096 */
	for (int i = 0; i < LIVE; i++) {
		uint32_t k = live[i]->rkey;
		uint64_t to = (uintptr_t)mem[i];
		unsigned n = 0;

		for (int b = 0; b < 32; b++, n++)
			near_accepted += (unsigned)(!is_live(k ^ (1u << b)) && resolve_any(pd, k ^ (1u << b), to));
		for (uint32_t lo = 0; lo < 256; lo++, n++) {
			uint32_t g = (k & ~0xffu) | lo;
			if (g != k && !is_live(g))
				near_accepted += (unsigned)resolve_any(pd, g, to);
		}
		for (int d = -4096; d <= 4096; d++, n++) {
			uint32_t g = k + (uint32_t)d;
			if (d && !is_live(g))
				near_accepted += (unsigned)resolve_any(pd, g, to);
		}
		(void)n;
	}
	CHECK_EQ_U(near_accepted, 0);
	printf("%d random STags: %u accepted, all exact live STags (expected %.4f); "
	       "%d near-miss STags: %u accepted\n",
	       GUESSES, accepted, (double)LIVE * GUESSES / 4294967296.0,
	       LIVE * (32 + 255 + 8192), near_accepted);

	/* revocation: invalidate, then deregister */
	uint32_t k0 = live[0]->rkey, k1 = live[1]->rkey;
	struct xs_err err;
	CHECK(resolve_any(pd, k0, (uintptr_t)mem[0]) == 1);
	CHECK(xs_mr_invalidate(pd, k0, &err) == 0);
	CHECK(resolve_any(pd, k0, (uintptr_t)mem[0]) == 0);
	CHECK(ibv_dereg_mr(live[1]) == 0);
	live[1] = NULL;
	CHECK(resolve_any(pd, k1, (uintptr_t)mem[1]) == 0);

	for (int i = 0; i < LIVE; i++)
		if (live[i])
			CHECK(ibv_dereg_mr(live[i]) == 0);
	ibv_dealloc_pd(pd);
	return xs_test_result();
}
