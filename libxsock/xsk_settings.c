/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* libxsock's XSOCK_* settings (verbs/xs_settings.h): the process's table is
 * libiwarp's when libiwarp is in the process (xsock_priv_settings), else
 * our own, handed to libiwarp when xsk_real.c loads it later; so each
 * setting is parsed, and an invalid one said, once per process, also over
 * the kernel's librdmacm (no libiwarp at all). */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>

#include "libxsock/xsk_config.h"
#include "verbs/xs_priv_abi.h"

static struct xs_settings own = XS_SETTINGS_INIT;
static struct xs_settings *table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_choose(void)
{
	__typeof__(xsock_priv_settings) *get;

	*(void **)&get = dlsym(RTLD_DEFAULT, "xsock_priv_settings");
	table = get ? get(NULL, sizeof(struct xs_settings)) : NULL;
	if (!table)
		table = &own;
}

static struct xs_settings *xsk_settings(void)
{
	pthread_once(&table_once, table_choose);
	return table;
}

unsigned long xsk_setting_num(enum xs_set id)
{
	return xs_settings_num(xsk_settings(), id);
}

const char *xsk_setting_str(enum xs_set id)
{
	return xs_settings_str(xsk_settings(), id);
}

void xsk_settings_share(struct xs_settings *(*get)(struct xs_settings *, size_t))
{
	/* libiwarp keeps a table it already uses; then there are two */
	if (get && xsk_settings() == &own)
		get(&own, sizeof(own));
}
