/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Selection rules for unmodified programs (xsock.conf(5)): which TCP
 * sockets become IWARP sockets, by program, role, address and port.  The
 * rules are read once, at the library's initialisation, and never change
 * afterwards, so matching needs no lock.
 *
 * Order: XSOCK_RULES (what xsock-run's --iwarp-port/--iwarp-addr write),
 * then the file; the first rule that matches decides; XSOCK_IWARP=all makes
 * "iwarp" the answer when none matches (else "tcp"). */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libxsock/xsk_config.h"
#include "util/xs_errno.h"

#define XSK_CONF_DEFAULT "/etc/xsock.conf"
#define XSK_LINE_MAX 512

static struct xsk_rule *rules;
static size_t nrules;
static bool default_iwarp;
static bool may_iwarp;
static char exe_path[4096];

/* ---- parsing ------------------------------------------------------------- */

static const char *next_tok(const char **p, char *out, size_t cap)
{
	const char *s = *p;
	size_t n = 0;

	while (*s && isspace((unsigned char)*s))
		s++;
	if (!*s || *s == '#')
		return NULL;
	while (*s && !isspace((unsigned char)*s) && *s != '#') {
		if (n + 1 >= cap)
			return NULL;
		out[n++] = *s++;
	}
	out[n] = '\0';
	*p = s;
	return out;
}

static bool parse_uint(const char *s, const char *end, unsigned long max, unsigned long *v)
{
	unsigned long x = 0;

	if (s == end)
		return false;
	for (; s < end; s++) {
		if (*s < '0' || *s > '9')
			return false;
		x = x * 10 + (unsigned long)(*s - '0');
		if (x > max)
			return false;
	}
	*v = x;
	return true;
}

static int parse_ports(const char *s, struct xsk_rule *r, const char **err)
{
	unsigned long lo, hi;
	const char *dash = strchr(s, '-');
	const char *end = s + strlen(s);

	if (!strcmp(s, "*")) {
		r->port_lo = 0;
		r->port_hi = 65535;
		return 0;
	}
	if (!parse_uint(s, dash ? dash : end, 65535, &lo) ||
	    (dash && !parse_uint(dash + 1, end, 65535, &hi))) {
		*err = "bad port (N, N-M or *)";
		return -1;
	}
	if (!dash)
		hi = lo;
	if (hi < lo) {
		*err = "bad port range (N-M with N <= M)";
		return -1;
	}
	r->port_lo = (uint16_t)lo;
	r->port_hi = (uint16_t)hi;
	return 0;
}

/* ADDR[/PREFIX]:PORTS, ADDR = '*', a.b.c.d or [v6]; a lone '*' is "*:*". */
static int parse_where(const char *tok, struct xsk_rule *r, const char **err)
{
	char host[64];
	const char *colon, *hend, *p;
	unsigned long pfx;
	int maxp;

	if (!strcmp(tok, "*")) {
		r->family = AF_UNSPEC;
		r->port_lo = 0;
		r->port_hi = 65535;
		return 0;
	}
	if (tok[0] == '[') {
		hend = strchr(tok, ']');
		if (!hend) {
			*err = "missing ']' after an IPv6 address";
			return -1;
		}
		p = hend + 1;
		if ((size_t)(hend - tok - 1) >= sizeof(host)) {
			*err = "address too long";
			return -1;
		}
		memcpy(host, tok + 1, (size_t)(hend - tok - 1));
		host[hend - tok - 1] = '\0';
		colon = strchr(p, ':');
	} else {
		colon = strrchr(tok, ':');
		hend = colon ? colon : tok + strlen(tok);
		p = strchr(tok, '/');
		if (p && p > hend)
			p = NULL;
		size_t hl = (size_t)((p ? p : hend) - tok);
		if (hl >= sizeof(host)) {
			*err = "address too long";
			return -1;
		}
		memcpy(host, tok, hl);
		host[hl] = '\0';
		p = p ? p : hend;
	}
	if (!colon) {
		*err = "missing ':PORT' (use ADDR:* for every port)";
		return -1;
	}
	if (!strcmp(host, "*")) {
		r->family = AF_UNSPEC;
		maxp = 0;
	} else if (inet_pton(AF_INET, host, r->addr) == 1) {
		r->family = AF_INET;
		maxp = 32;
	} else if (tok[0] == '[' && inet_pton(AF_INET6, host, r->addr) == 1) {
		r->family = AF_INET6;
		maxp = 128;
	} else {
		*err = "bad address (*, a.b.c.d or [IPv6] in brackets)";
		return -1;
	}
	r->prefix = maxp;
	if (*p == '/') {
		if (r->family == AF_UNSPEC || !parse_uint(p + 1, colon, (unsigned long)maxp, &pfx)) {
			*err = "bad prefix length";
			return -1;
		}
		r->prefix = (int)pfx;
	} else if (p != colon) {
		*err = "bad address";
		return -1;
	}
	return parse_ports(colon + 1, r, err);
}

int xsk_rule_parse(const char *line, struct xsk_rule *r, const char **err)
{
	char tok[4][XSK_PROG_MAX], extra[8];
	const char *p = line;
	int n = 0;

	memset(r, 0, sizeof(*r));
	while (n < 4 && next_tok(&p, tok[n], sizeof(tok[n])))
		n++;
	if (n == 0) {
		while (*p && isspace((unsigned char)*p))
			p++;
		if (*p && *p != '#') {
			*err = "field too long";
			return -1;
		}
		return 0;
	}
	if (n < 4) {
		*err = "need 4 fields: iwarp|tcp PROGRAM listen|connect|both ADDR[/PREFIX]:PORTS";
		return -1;
	}
	if (next_tok(&p, extra, sizeof(extra)) || (*p && *p != '#' && !isspace((unsigned char)*p))) {
		*err = "more than 4 fields";
		return -1;
	}
	if (!strcmp(tok[0], "iwarp")) {
		r->iwarp = true;
	} else if (!strcmp(tok[0], "tcp")) {
		r->iwarp = false;
	} else {
		*err = "first field must be iwarp or tcp";
		return -1;
	}
	memcpy(r->prog, tok[1], sizeof(r->prog));
	if (!strcmp(tok[2], "listen")) {
		r->roles = XSK_ROLE_LISTEN;
	} else if (!strcmp(tok[2], "connect")) {
		r->roles = XSK_ROLE_CONNECT;
	} else if (!strcmp(tok[2], "both")) {
		r->roles = XSK_ROLE_BOTH;
	} else {
		*err = "third field must be listen, connect or both";
		return -1;
	}
	return parse_where(tok[3], r, err) < 0 ? -1 : 1;
}

/* ---- matching ------------------------------------------------------------ */

static bool prefix_eq(const uint8_t *a, const uint8_t *b, int bits)
{
	int whole = bits / 8, rest = bits % 8;

	if (memcmp(a, b, (size_t)whole))
		return false;
	if (!rest)
		return true;
	uint8_t m = (uint8_t)(0xffu << (8 - rest));
	return (a[whole] & m) == (b[whole] & m);
}

static bool prog_match(const struct xsk_rule *r, const char *name, const char *exe)
{
	if (strchr(r->prog, '/'))
		return exe && fnmatch(r->prog, exe, 0) == 0;
	return name && fnmatch(r->prog, name, 0) == 0;
}

bool xsk_rule_match(const struct xsk_rule *r, const char *name, const char *exe, int role,
		    const struct sockaddr *sa)
{
	uint8_t a[16];
	int fam;
	uint16_t port;

	if (!(r->roles & role) || !prog_match(r, name, exe))
		return false;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
		fam = AF_INET;
		memcpy(a, &in->sin_addr, 4);
		port = ntohs(in->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
		port = ntohs(in6->sin6_port);
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			fam = AF_INET;
			memcpy(a, in6->sin6_addr.s6_addr + 12, 4);
		} else {
			fam = AF_INET6;
			memcpy(a, in6->sin6_addr.s6_addr, 16);
		}
	} else {
		return false;
	}
	if (port < r->port_lo || port > r->port_hi)
		return false;
	if (r->family == AF_UNSPEC)
		return true;
	return r->family == fam && prefix_eq(a, r->addr, r->prefix);
}

/* ---- loading ------------------------------------------------------------- */

static void add_line(const char *src, int lineno, const char *line)
{
	struct xsk_rule r;
	const char *err = NULL;
	int rc = xsk_rule_parse(line, &r, &err);

	if (rc < 0) {
		fprintf(stderr, "xsock: %s:%d: %s; rule ignored\n", src, lineno, err);
		return;
	}
	if (rc == 0)
		return;
	struct xsk_rule *n = realloc(rules, (nrules + 1) * sizeof(*rules));
	if (!n) {
		fprintf(stderr, "xsock: %s:%d: out of memory; rule ignored\n", src, lineno);
		return;
	}
	rules = n;
	rules[nrules++] = r;
}

/* Rules separated by ';' or newlines. */
static void load_string(const char *src, const char *s)
{
	char line[XSK_LINE_MAX];
	int lineno = 0;

	while (*s) {
		size_t n = strcspn(s, ";\n");
		lineno++;
		if (n >= sizeof(line)) {
			fprintf(stderr, "xsock: %s:%d: rule too long; rule ignored\n", src, lineno);
		} else {
			memcpy(line, s, n);
			line[n] = '\0';
			add_line(src, lineno, line);
		}
		s += n;
		if (*s)
			s++;
	}
}

static void load_file(const char *path, bool must_exist)
{
	char line[XSK_LINE_MAX];
	int lineno = 0;
	FILE *f = fopen(path, "re");

	if (!f) {
		if (must_exist || errno != ENOENT)
			fprintf(stderr, "xsock: %s: %s; no rules from it\n", path, xs_strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		size_t l = strlen(line);
		if (l && line[l - 1] != '\n' && !feof(f)) {
			int c;
			fprintf(stderr, "xsock: %s:%d: line too long; rule ignored\n", path, lineno);
			while ((c = fgetc(f)) != EOF && c != '\n')
				;
			continue;
		}
		add_line(path, lineno, line);
	}
	fclose(f);
}

void xsk_config_load(void)
{
	const char *env = xsk_setting_str(XS_SET_RULES);
	const char *file = xsk_setting_str(XS_SET_CONFIG);
	ssize_t n = readlink("/proc/self/exe", exe_path, sizeof(exe_path) - 1);

	exe_path[n > 0 ? n : 0] = '\0';
	default_iwarp = xsk_setting_num(XS_SET_IWARP) != 0; /* all or 1 */
	if (*env)
		load_string("XSOCK_RULES", env);
	if (*file)
		load_file(file, true);
	else
		load_file(XSK_CONF_DEFAULT, false);
	may_iwarp = default_iwarp;
	for (size_t i = 0; i < nrules && !may_iwarp; i++)
		may_iwarp = rules[i].iwarp && prog_match(&rules[i], program_invocation_short_name,
							 exe_path[0] ? exe_path : NULL);
}

bool xsk_config_may_iwarp(void)
{
	return may_iwarp;
}

bool xsk_config_decide(int role, const struct sockaddr *sa)
{
	for (size_t i = 0; i < nrules; i++)
		if (xsk_rule_match(&rules[i], program_invocation_short_name,
				   exe_path[0] ? exe_path : NULL, role, sa))
			return rules[i].iwarp;
	return default_iwarp;
}

/* XSOCK_DEBUG=1: one line on stderr where libxsock refuses or gives up. */
bool xsk_debug(void)
{
	return xsk_setting_num(XS_SET_DEBUG);
}
