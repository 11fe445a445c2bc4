/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Replays inputs through a harness's LLVMFuzzerTestOneInput without
 * libFuzzer: a plain program for `make check` (and its ASan build) and for
 * reproducing a crash under gdb.
 *
 *   replay-NAME [FILE|DIR]...
 * With no arguments it replays $XS_TOP_SRCDIR/tests/fuzz/corpus/NAME and
 * tests/fuzz/crashes/NAME (NAME compiled in as FUZZ_NAME; XS_TOP_SRCDIR
 * defaults to "."); a missing directory is skipped.  Exit 0 when every input
 * ran (a finding aborts), 99 on an unreadable file, 77 if there was nothing
 * to run. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/fuzz/fuzz.h"

#ifndef FUZZ_NAME
#error "FUZZ_NAME must name the harness"
#endif

static unsigned runs;

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;

	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 4096;
			uint8_t *nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(f);
				return -1;
			}
			buf = nb;
		}
		size_t n = fread(buf + len, 1, cap - len, f);
		if (n == 0)
			break;
		len += n;
	}
	fclose(f);
	/* an exact-size copy, as libFuzzer hands it over */
	uint8_t *in = malloc(len ? len : 1);
	if (!in) {
		free(buf);
		return -1;
	}
	memcpy(in, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(in, len);
	free(in);
	runs++;
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Files of a directory in name order (deterministic output). */
static int run_path(const char *path, int must_exist)
{
	struct stat st;

	if (stat(path, &st) != 0) {
		if (!must_exist)
			return 0;
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return run_file(path);

	DIR *d = opendir(path);
	if (!d)
		return -1;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	int rc = 0;

	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			char **nn = realloc(names, cap * sizeof(*names));
			if (!nn) {
				rc = -1;
				break;
			}
			names = nn;
		}
		names[n] = strdup(e->d_name);
		if (!names[n]) {
			rc = -1;
			break;
		}
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; i < n; i++) {
		if (rc == 0) {
			size_t l = strlen(path) + strlen(names[i]) + 2;
			char *p = malloc(l);
			if (!p) {
				rc = -1;
			} else {
				snprintf(p, l, "%s/%s", path, names[i]);
				if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && strcmp(names[i], "README") != 0)
					rc = run_file(p);
				free(p);
			}
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	int rc = 0;

	if (argc > 1) {
		for (int i = 1; i < argc && rc == 0; i++)
			rc = run_path(argv[i], 1);
	} else {
		const char *top = getenv("XS_TOP_SRCDIR");
		char p[4096];

		if (!top)
			top = ".";
		snprintf(p, sizeof(p), "%s/tests/fuzz/corpus/%s", top, FUZZ_NAME);
		rc = run_path(p, 0);
		if (rc == 0) {
			snprintf(p, sizeof(p), "%s/tests/fuzz/crashes/%s", top, FUZZ_NAME);
			rc = run_path(p, 0);
		}
	}
	if (rc != 0)
		return 99;
	printf("%s: %u inputs replayed\n", FUZZ_NAME, runs);
	return runs ? 0 : 77;
}
