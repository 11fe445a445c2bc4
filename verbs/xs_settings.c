/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The one parser of the XSOCK_* settings (the table is verbs/xs_settings.h),
 * compiled into libiwarp and libxsock alike: which library's table a
 * process uses is their business (verbs/xs_config.c, libxsock/xsk_settings.c). */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "verbs/xs_settings.h"

const struct xs_setting_row xs_setting_rows[XS_SET_COUNT] = {
#define XS_SET_ROW_(name, kind, dflt, lo, hi, words, flags, doc) \
	[XS_SET_##name] = { "XSOCK_" #name, XS_KIND_##kind, dflt, lo, hi, words, flags, doc },
	XS_SETTINGS(XS_SET_ROW_)
#undef XS_SET_ROW_
};

static int parse_bool(const char *v, unsigned long *num)
{
	static const char *const yes[] = { "1", "yes", "on", "true" }, *const no[] = { "0", "no", "off", "false" };

	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(v, yes[i]) || !strcasecmp(v, no[i])) {
			*num = !strcasecmp(v, yes[i]);
			return 0;
		}
	}
	return -1;
}

static int parse_uint(const struct xs_setting_row *r, const char *v, unsigned long *num)
{
	bool hex = (r->flags & XS_HEX) && v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
	const char *digits = hex ? v + 2 : v;
	unsigned long n;
	char *end;

	/* digits only: no sign, no blank, no octal */
	if (!(hex ? isxdigit((unsigned char)*digits) : isdigit((unsigned char)*digits)))
		return -1;
	errno = 0;
	n = strtoul(digits, &end, hex ? 16 : 10);
	if (errno || *end || n < r->lo || n > r->hi)
		return -1;
	*num = n;
	return 0;
}

static int parse_enum(const struct xs_setting_row *r, const char *v, unsigned long *num)
{
	size_t len = strlen(v);
	unsigned long i = 0;

	for (const char *w = r->words; w; i++) {
		const char *bar = strchr(w, '|');
		size_t wl = bar ? (size_t)(bar - w) : strlen(w);

		if (wl == len && !strncmp(w, v, len)) {
			*num = i;
			return 0;
		}
		w = bar ? bar + 1 : NULL;
	}
	return -1;
}

int xs_setting_parse(const struct xs_setting_row *r, const char *text, unsigned long *num)
{
	if (r->kind == XS_KIND_UINT && !*text) { /* no default */
		*num = XS_SET_NONE;
		return 0;
	}
	switch (r->kind) {
	case XS_KIND_BOOL:
		return parse_bool(text, num);
	case XS_KIND_UINT:
		return parse_uint(r, text, num);
	case XS_KIND_ENUM:
		return parse_enum(r, text, num);
	case XS_KIND_STR:
		*num = 0;
		return 0;
	}
	return -1;
}

/* Called with t->mu held, once per row. */
static void parse_row(struct xs_settings *t, enum xs_set id)
{
	const struct xs_setting_row *r = &xs_setting_rows[id];
	/* none in a set-user-ID or file-capability program (libxsock there
	 * only by /etc/ld.so.preload): its invoker's XSOCK_STAT_LOG would be
	 * a file it appends to, XSOCK_EXEC_FD state it adopts */
	const char *v = secure_getenv(r->name);

	if (!v || !*v)
		v = r->dflt;
	if (xs_setting_parse(r, v, &t->num[id]) < 0) {
		if (r->kind == XS_KIND_UINT)
			fprintf(stderr, "xsock: %s=%s invalid (%lu..%lu), %s kept\n", r->name, v, r->lo, r->hi,
				*r->dflt ? r->dflt : "unset");
		else
			fprintf(stderr, "xsock: %s=%s invalid (%s), %s kept\n", r->name, v,
				r->kind == XS_KIND_BOOL ? "0 or 1" : r->words, r->dflt);
		v = r->dflt;
		xs_setting_parse(r, v, &t->num[id]);
	}
	t->str[id] = v;
}

static void ensure_parsed(struct xs_settings *t, enum xs_set id)
{
	if (__atomic_load_n(&t->done[id], __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&t->mu);
	if (!t->done[id]) {
		parse_row(t, id);
		__atomic_store_n(&t->done[id], true, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&t->mu);
}

unsigned long xs_settings_num(struct xs_settings *t, enum xs_set id)
{
	ensure_parsed(t, id);
	return t->num[id];
}

const char *xs_settings_str(struct xs_settings *t, enum xs_set id)
{
	ensure_parsed(t, id);
	return t->str[id];
}
