/* Per-process MPA options from the environment (documented in xsock-run(1)),
 * read once, and a debug log. */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verbs/xs_internal.h"

static struct xs_config xs_cfg;
static pthread_once_t xs_cfg_once = PTHREAD_ONCE_INIT;

static bool env_bool(const char *name, bool dflt)
{
	const char *v = getenv(name);

	if (!v || !*v)
		return dflt;
	return strcmp(v, "0") != 0 && strcasecmp(v, "off") != 0 && strcasecmp(v, "no") != 0 &&
	       strcasecmp(v, "false") != 0;
}

static void xs_config_load(void)
{
	const char *v;

	xs_cfg.mpa_rev = 2;
	v = getenv("XSOCK_MPA_REV");
	if (v && (strcmp(v, "1") == 0 || strcmp(v, "2") == 0))
		xs_cfg.mpa_rev = (uint8_t)atoi(v);
	else if (v && *v)
		fprintf(stderr, "xsock: XSOCK_MPA_REV=%s ignored (1 or 2)\n", v);
	xs_cfg.crc = env_bool("XSOCK_MPA_CRC", false);
	xs_cfg.markers = env_bool("XSOCK_MPA_MARKERS", false);
	xs_cfg.debug = env_bool("XSOCK_DEBUG", false);
	xs_cfg.mpa_timeout_ms = 10000;
	v = getenv("XSOCK_MPA_TIMEOUT_MS");
	if (v && *v) {
		char *end;
		unsigned long ms = strtoul(v, &end, 10);
		if (*end || ms == 0 || ms > 3600000)
			fprintf(stderr, "xsock: XSOCK_MPA_TIMEOUT_MS=%s ignored (1..3600000)\n", v);
		else
			xs_cfg.mpa_timeout_ms = (unsigned)ms;
	}
	/* A peer that takes no octet for this long (its TCP window stays
	 * shut) is treated as a broken connection by a blocked sender. */
	xs_cfg.tx_timeout_ms = 30000;
	v = getenv("XSOCK_TX_TIMEOUT_MS");
	if (v && *v) {
		char *end;
		unsigned long ms = strtoul(v, &end, 10);
		if (*end || ms > 3600000)
			fprintf(stderr, "xsock: XSOCK_TX_TIMEOUT_MS=%s ignored (0..3600000)\n", v);
		else
			xs_cfg.tx_timeout_ms = (unsigned)ms;
	}
	/* Linux siw (6.1) moves the socket to the QP only after sending its
	 * Reply: an FPDU arriving in between is not read until more data
	 * comes (docs/interop.md); a short pause here avoids that window. */
	v = getenv("XSOCK_MPA_SETTLE_MS");
	if (v && *v) {
		long ms = strtol(v, NULL, 10);
		if (ms >= 0 && ms <= 10000)
			xs_cfg.settle_ms = (unsigned)ms;
		else
			fprintf(stderr, "xsock: XSOCK_MPA_SETTLE_MS=%s ignored (0..10000)\n", v);
	}
	xs_cfg.p2p_rtr = 0;
	v = getenv("XSOCK_MPA_P2P");
	if (v && *v) {
		if (strcmp(v, "write") == 0)
			xs_cfg.p2p_rtr = MPA_RTR_WRITE;
		else if (strcmp(v, "read") == 0)
			xs_cfg.p2p_rtr = MPA_RTR_READ;
		else if (strcmp(v, "send") == 0)
			xs_cfg.p2p_rtr = MPA_RTR_SEND;
		else if (strcmp(v, "0") != 0 && strcmp(v, "off") != 0)
			fprintf(stderr, "xsock: XSOCK_MPA_P2P=%s ignored (write, read, send or off)\n", v);
	}
}

const struct xs_config *xs_config(void)
{
	pthread_once(&xs_cfg_once, xs_config_load);
	return &xs_cfg;
}

void xs_log(const char *fmt, ...)
{
	va_list ap;

	if (!xs_config()->debug)
		return;
	va_start(ap, fmt);
	fputs("xsock: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}
