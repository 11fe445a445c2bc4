/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Prints the XSOCK_* settings table (verbs/xs_settings.h) for
 * tests/test-man.sh: --tsv, one row a line (name, kind, default, lo, hi,
 * internal), or --help, the ENVIRONMENT lines `xsock-run --help` must
 * show word for word; --env, each row's value as this process reads it
 * (NAME=value, for tests/test-local-channels.sh). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "verbs/xs_settings.h"

static const char *const kinds[] = { "bool", "uint", "enum", "str" };

static void print_help(const struct xs_setting_row *r)
{
	char values[64];

	if (r->kind == XS_KIND_BOOL)
		snprintf(values, sizeof(values), "0|1");
	else if (r->kind == XS_KIND_UINT)
		snprintf(values, sizeof(values), "%lu..%lu", r->lo, r->hi);
	else if (r->kind == XS_KIND_ENUM)
		snprintf(values, sizeof(values), "%s", r->words);
	else
		snprintf(values, sizeof(values), "TEXT");
	printf("  %s=%s", r->name, values);
	if (*r->dflt)
		printf(" (default %s)", r->dflt);
	printf("\n      %s\n", r->doc);
}

int main(int argc, char **argv)
{
	bool help = argc > 1 && !strcmp(argv[1], "--help");
	bool env = argc > 1 && !strcmp(argv[1], "--env");

	if (argc != 2 || (!help && !env && strcmp(argv[1], "--tsv"))) {
		fprintf(stderr, "usage: xsock-settings-dump --tsv|--help|--env\n");
		return 2;
	}
	if (env) {
		static struct xs_settings t = XS_SETTINGS_INIT;

		for (int i = 0; i < XS_SET_COUNT; i++)
			printf("%s=%s\n", xs_setting_rows[i].name, xs_settings_str(&t, (enum xs_set)i));
		return 0;
	}
	for (int i = 0; i < XS_SET_COUNT; i++) {
		const struct xs_setting_row *r = &xs_setting_rows[i];

		if (!help)
			printf("%s\t%s\t%s\t%lu\t%lu\t%d\n", r->name, kinds[r->kind], r->dflt, r->lo, r->hi,
			       !!(r->flags & XS_INTERNAL));
		else if (!(r->flags & XS_INTERNAL))
			print_help(r);
	}
	return 0;
}
