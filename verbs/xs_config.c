/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Per-process MPA options from the environment (documented in xsock-run(1)),
 * read once, and a debug log. */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* A number 0..max from the environment: unset or invalid keeps dflt (an
 * invalid value is ignored, not taken for 0, and said so). */
static unsigned env_uint(const char *name, long max, unsigned dflt)
{
	const char *v = getenv(name);
	char *end;
	long ms;

	if (!v || !*v)
		return dflt;
	ms = strtol(v, &end, 10);
	if (*end || ms < 0 || ms > max) {
		fprintf(stderr, "xsock: %s=%s ignored (0..%ld), %u used\n", name, v, max, dflt);
		return dflt;
	}
	return (unsigned)ms;
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
	xs_cfg.tx_timeout_ms = env_uint("XSOCK_TX_TIMEOUT_MS", 3600000, 30000);
	/* Linux siw (6.1) as initiator fails the connection (EPROTO) when
	 * FPDU octets already follow the MPA Reply it reads, and nothing on
	 * the wire says when it has read it (docs/interop.md).  A responder
	 * whose peer is not another xsock (no MPA_FLAG_EXT_REQ) sends its
	 * first FPDU only after the initiator's first octets or this long
	 * after the Reply (rdma_accept returns then). */
	xs_cfg.settle_ms = env_uint("XSOCK_MPA_SETTLE_MS", 10000, XS_SETTLE_MS);
	/* A peer that listens again only just after telling us it is ready
	 * (perftest -R over a slow guest) resets an early connect. */
	xs_cfg.connect_delay_ms = env_uint("XSOCK_CONNECT_DELAY_MS", 10000, 0);
	/* A mixed listener (libxsock's IWARP_MODE listeners) waits this long
	 * for a client's first octets: a server-speaks-first protocol sends
	 * nothing, so silence means plain TCP. */
	xs_cfg.classify_ms = env_uint("XSOCK_CLASSIFY_MS", 60000, 200);
	/* xs_engine.c, "delayed FIN and lingering close" */
	xs_cfg.fin_delay_ms = env_uint("XSOCK_FIN_DELAY_MS", 10000, XS_FIN_DELAY_MS);
	xs_cfg.linger_ms = env_uint("XSOCK_LINGER_MS", 60000, 1000);
	/* xs_engine.c, RNR: the sender completes a Send once TCP has it, so
	 * it may run ahead of the receives its peer posts */
	xs_cfg.rnr_ms = env_uint("XSOCK_RNR_MS", 60000, 1000);
	/* RFC 7306: agreed only when the peer (another xsock) answers it */
	xs_cfg.rdmap_ext = env_bool("XSOCK_RDMAP_EXT", true);
	xs_cfg.stat = env_bool("XSOCK_STAT", true);
	xs_cfg.zc_min = env_uint("XSOCK_ZC_MIN", 1L << 30, XS_ZC_MIN);
	v = getenv("XSOCK_ZC");
	if (v && strcmp(v, "always") == 0)
		xs_cfg.zc_always = true;
	else if (v && (strcmp(v, "off") == 0 || strcmp(v, "0") == 0))
		xs_cfg.zc_min = 0;
	else if (v && *v && strcmp(v, "auto") != 0)
		fprintf(stderr, "xsock: XSOCK_ZC=%s ignored (auto, always or off)\n", v);
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

void xs_sleep_ms(unsigned ms)
{
	struct timespec ts = { (time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L };

	while (ms && nanosleep(&ts, &ts) < 0)
		;
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
