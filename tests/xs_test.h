/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Minimal test helpers: automake exit codes (0 pass, 1 fail, 77 skip,
 * 99 hard error), failure messages with file:line, and a seeded PRNG whose
 * seed is printed on failure so any property-test failure can be replayed
 * (XS_TEST_SEED=<n> ./tests/test-...). */
#ifndef XS_TEST_H
#define XS_TEST_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define XS_TEST_PASS 0
#define XS_TEST_FAIL 1
#define XS_TEST_SKIP 77
#define XS_TEST_ERROR 99

static uint64_t xs_test_seed_value;
static int xs_test_failures;

static inline void xs_test_report_seed(void)
{
	fprintf(stderr, "  (seed %" PRIu64 "; rerun with XS_TEST_SEED=%" PRIu64 ")\n",
		xs_test_seed_value, xs_test_seed_value);
}

#define CHECK(cond)                                                                  \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			xs_test_report_seed();                                       \
			xs_test_failures++;                                          \
		}                                                                    \
	} while (0)

/* Stop the test at the first failure (for loops that would cascade). */
#define REQUIRE(cond)                                                                \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond); \
			xs_test_report_seed();                                       \
			exit(XS_TEST_FAIL);                                          \
		}                                                                    \
	} while (0)

#define CHECK_EQ_U(a, b)                                                             \
	do {                                                                         \
		unsigned long long xs_a_ = (unsigned long long)(a);                  \
		unsigned long long xs_b_ = (unsigned long long)(b);                  \
		if (xs_a_ != xs_b_) {                                                \
			fprintf(stderr, "%s:%d: CHECK failed: %s == %s (0x%llx != 0x%llx)\n", \
				__FILE__, __LINE__, #a, #b, xs_a_, xs_b_);           \
			xs_test_report_seed();                                       \
			xs_test_failures++;                                          \
		}                                                                    \
	} while (0)

/* splitmix64: small, fast, good enough to drive property tests. */
static uint64_t xs_test_rng_state;

static inline uint64_t xs_rand64(void)
{
	uint64_t z = (xs_test_rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, n) (n > 0). */
static inline uint64_t xs_rand_below(uint64_t n)
{
	return xs_rand64() % n;
}

static inline void xs_rand_fill(void *buf, size_t len)
{
	uint8_t *p = buf;
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)xs_rand64();
}

/* Seed from XS_TEST_SEED or the given default; printed so a run is replayable. */
static inline void xs_test_seed(uint64_t dflt)
{
	const char *env = getenv("XS_TEST_SEED");
	xs_test_seed_value = env ? strtoull(env, NULL, 0) : dflt;
	xs_test_rng_state = xs_test_seed_value;
	printf("seed %" PRIu64 "\n", xs_test_seed_value);
}

static inline int xs_test_result(void)
{
	if (xs_test_failures) {
		fprintf(stderr, "%d check(s) failed\n", xs_test_failures);
		return XS_TEST_FAIL;
	}
	return XS_TEST_PASS;
}

/* One program run under several settings, the defaults first (issue 29):
 * the library reads each XSOCK_* setting once and keeps it, so a later
 * mode is this program again (execv of /proc/self/exe), its environment
 * set before it starts, argv[1] "--xs-mode=N".  This run's mode (0: the
 * first one, the defaults): */
static inline int xs_test_mode(int argc, char **argv)
{
	if (argc > 1 && strncmp(argv[1], "--xs-mode=", 10) == 0)
		return atoi(argv[1] + 10);
	return 0;
}

/* Run mode `mode` of this program with env ({name, value}..., NULL; a
 * NULL value unsets) over this environment; its exit status.  Call it at
 * the end of this run: the environment is changed here, before the fork
 * (the child of a threaded process only execs), and this process's
 * library read its settings long ago. */
static inline int xs_test_rerun(const char *argv0, int mode, const char *const *env)
{
	char arg[32];
	int st;
	pid_t pid;

	snprintf(arg, sizeof(arg), "--xs-mode=%d", mode);
	for (; env[0]; env += 2) {
		if (env[1])
			setenv(env[0], env[1], 1);
		else
			unsetenv(env[0]);
	}
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return XS_TEST_ERROR;
	if (pid == 0) {
		execl("/proc/self/exe", argv0, arg, (char *)NULL);
		_exit(XS_TEST_ERROR);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return XS_TEST_ERROR;
	return WEXITSTATUS(st);
}

/* Two runs' exit statuses as one: any error or failure wins, then a pass. */
static inline int xs_test_both(int a, int b)
{
	if (a == XS_TEST_ERROR || b == XS_TEST_ERROR)
		return XS_TEST_ERROR;
	if (a == XS_TEST_FAIL || b == XS_TEST_FAIL || (a != XS_TEST_PASS && a != XS_TEST_SKIP) ||
	    (b != XS_TEST_PASS && b != XS_TEST_SKIP))
		return XS_TEST_FAIL;
	return a == XS_TEST_SKIP && b == XS_TEST_SKIP ? XS_TEST_SKIP : XS_TEST_PASS;
}

/* Parse a hex string ("00 22 41 ..." spaces allowed) into buf; returns length. */
static inline size_t xs_hex(const char *hex, uint8_t *buf, size_t cap)
{
	size_t n = 0;
	while (*hex) {
		while (*hex == ' ' || *hex == '\n' || *hex == ':')
			hex++;
		if (!hex[0] || !hex[1])
			break;
		unsigned v;
		if (sscanf(hex, "%2x", &v) != 1 || n >= cap)
			abort();
		buf[n++] = (uint8_t)v;
		hex += 2;
	}
	return n;
}

#endif
