/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* An errno's text without the locale: strerror goes through gettext, which
 * holds glibc's locale lock, and a thread of the stack holding it when the
 * application forks leaves the child's next setlocale waiting forever (a
 * postgres backend hung so in InitPostgres).  strerrordesc_np (glibc 2.32)
 * returns the English text and takes no lock. */
#ifndef XS_ERRNO_H
#define XS_ERRNO_H

#include <string.h>

static inline const char *xs_strerror(int e)
{
	const char *d = strerrordesc_np(e);

	return d ? d : "unknown error";
}

#endif
