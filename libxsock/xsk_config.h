/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Which sockets of an unmodified program become IWARP sockets: the rules
 * of xsock.conf(5), from XSOCK_RULES, the file XSOCK_CONFIG (default
 * /etc/xsock.conf) and XSOCK_IWARP=all; and libxsock's view of the XSOCK_*
 * settings.  Self-contained (libc only) so that the unit test can compile
 * it in. */
#ifndef XSK_CONFIG_H
#define XSK_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "verbs/xs_settings.h"

enum xsk_role {
	XSK_ROLE_LISTEN = 1, /* listen(): the bound local address */
	XSK_ROLE_CONNECT = 2, /* connect(): the destination */
	XSK_ROLE_BOTH = 3,
};

#define XSK_PROG_MAX 128

/* One rule: "iwarp|tcp PROGRAM-GLOB listen|connect|both ADDR[/PREFIX]:PORTS". */
struct xsk_rule {
	bool iwarp;
	char prog[XSK_PROG_MAX]; /* fnmatch(3) glob; with a '/' it names the executable path */
	int roles; /* enum xsk_role bits */
	int family; /* AF_UNSPEC (any address), AF_INET or AF_INET6 */
	uint8_t addr[16]; /* network order */
	int prefix; /* bits of addr that must match */
	uint16_t port_lo, port_hi;
};

/* Parse one line.  1: a rule in *r; 0: blank or comment; -1: error, *err
 * names what is wrong (a static string). */
int xsk_rule_parse(const char *line, struct xsk_rule *r, const char **err);

/* Does the rule apply to this program (name = short name, exe = path of
 * the executable, may be NULL), role and address (port in sa)? */
bool xsk_rule_match(const struct xsk_rule *r, const char *name, const char *exe, int role,
		    const struct sockaddr *sa);

/* Load XSOCK_RULES, then XSOCK_CONFIG or /etc/xsock.conf (missing file =
 * no rules, unless XSOCK_CONFIG names it), with XSOCK_IWARP=all as the
 * default for sockets no rule matches.  Errors go to stderr once, with the
 * source and line; the rule is ignored.  Call once. */
void xsk_config_load(void);

/* False when no socket of this program can become IWARP (socket() then
 * leaves every socket alone). */
bool xsk_config_may_iwarp(void);

/* The decision for a socket at listen()/connect(): first matching rule,
 * else the default. */
bool xsk_config_decide(int role, const struct sockaddr *sa);
/* XSOCK_DEBUG is set: say in one line on stderr why a call failed. */
bool xsk_debug(void);

/* ---- the XSOCK_* settings (xsk_settings.c; the table is verbs/xs_settings.h) */

/* A setting's value, parsed on its first read in this process (libiwarp's
 * table when libiwarp is in the process): BOOL 0/1, UINT, ENUM word index;
 * STR never NULL.  Any thread, no lock held. */
unsigned long xsk_setting_num(enum xs_set id);
const char *xsk_setting_str(enum xs_set id);
/* xsk_real.c has just loaded libiwarp (get: its xsock_priv_settings, NULL
 * if absent): libiwarp takes the table libxsock began, if it has none. */
void xsk_settings_share(struct xs_settings *(*get)(struct xs_settings *, size_t));

#endif
