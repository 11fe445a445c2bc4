/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* libiwarp's settings: the process's XSOCK_* table (verbs/xs_settings.h),
 * shared with libxsock, and struct xs_config made from it once; a debug
 * log. */
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

/* The process's settings table (verbs/xs_settings.h): ours, or the one
 * libxsock parsed before it loaded us (xsock_priv_settings). */
static struct xs_settings xs_own_settings = XS_SETTINGS_INIT;
static struct xs_settings *xs_table;
static pthread_mutex_t xs_table_mu = PTHREAD_MUTEX_INITIALIZER;

static struct xs_settings *settings_take(struct xs_settings *offer)
{
	struct xs_settings *t;

	pthread_mutex_lock(&xs_table_mu);
	t = xs_table;
	if (!t) {
		t = offer ? offer : &xs_own_settings;
		__atomic_store_n(&xs_table, t, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&xs_table_mu);
	return t;
}

struct xs_settings *xs_settings(void)
{
	struct xs_settings *t = __atomic_load_n(&xs_table, __ATOMIC_ACQUIRE);

	return t ? t : settings_take(NULL);
}

XS_EXPORT struct xs_settings *xsock_priv_settings(struct xs_settings *offer, size_t size)
{
	if (size != sizeof(struct xs_settings))
		return NULL; /* not this release's table */
	return settings_take(offer);
}

static void xs_config_load(void)
{
	static const uint8_t p2p_rtr[] = { 0, MPA_RTR_WRITE, MPA_RTR_READ, MPA_RTR_SEND, 0 };
	struct xs_settings *t = xs_settings();
	unsigned long zc = xs_settings_num(t, XS_SET_ZC);

#define XS_NUM(name) xs_settings_num(t, XS_SET_##name)
	xs_cfg.mpa_rev = (uint8_t)XS_NUM(MPA_REV);
	xs_cfg.crc = XS_NUM(MPA_CRC);
	xs_cfg.markers = XS_NUM(MPA_MARKERS);
	xs_cfg.debug = XS_NUM(DEBUG);
	xs_cfg.mpa_timeout_ms = (unsigned)XS_NUM(MPA_TIMEOUT_MS);
	/* A peer that takes no octet for this long (its TCP window stays
	 * shut) is treated as a broken connection by a blocked sender. */
	xs_cfg.tx_timeout_ms = (unsigned)XS_NUM(TX_TIMEOUT_MS);
	/* Linux siw (6.1) as initiator fails the connection (EPROTO) when
	 * FPDU octets already follow the MPA Reply it reads, and nothing on
	 * the wire says when it has read it (docs/interop.md).  A responder
	 * whose peer is not another xsock (no MPA_FLAG_EXT_REQ) sends its
	 * first FPDU only after the initiator's first octets or this long
	 * after the Reply (rdma_accept returns then). */
	xs_cfg.settle_ms = (unsigned)XS_NUM(MPA_SETTLE_MS);
	/* A peer that listens again only just after telling us it is ready
	 * (perftest -R over a slow guest) resets an early connect. */
	xs_cfg.connect_delay_ms = (unsigned)XS_NUM(CONNECT_DELAY_MS);
	/* A mixed listener (libxsock's IWARP_MODE listeners) waits this long
	 * for a client's first octets: a server-speaks-first protocol sends
	 * nothing, so silence means plain TCP. */
	xs_cfg.classify_ms = (unsigned)XS_NUM(CLASSIFY_MS);
	/* xs_close.c: delayed FIN and lingering close */
	xs_cfg.fin_delay_ms = (unsigned)XS_NUM(FIN_DELAY_MS);
	xs_cfg.linger_ms = (unsigned)XS_NUM(LINGER_MS);
	/* xs_rx.c, RNR: the sender completes a Send once TCP has it, so
	 * it may run ahead of the receives its peer posts */
	xs_cfg.rnr_ms = (unsigned)XS_NUM(RNR_MS);
	/* RFC 7306: agreed only when the peer (another xsock) answers it */
	xs_cfg.rdmap_ext = XS_NUM(RDMAP_EXT);
	/* xs_roce_resp.c: 0 to measure what placement ahead of a gap buys */
	xs_cfg.roce_ooo = XS_NUM(ROCE_OOO);
	xs_cfg.stat = XS_NUM(STAT);
	/* XSOCK_ZC: auto, always, off or 0 (the same as XSOCK_ZC_MIN=0) */
	xs_cfg.zc_min = zc >= 2 ? 0 : (unsigned)XS_NUM(ZC_MIN);
	xs_cfg.zc_always = zc == 1;
	xs_cfg.p2p_rtr = p2p_rtr[XS_NUM(MPA_P2P)];
	xs_cfg.event_spin_us = (unsigned)XS_NUM(EVENT_SPIN_US);
#undef XS_NUM
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
