/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The selection rules of xsock.conf(5): the parser accepts the documented
 * forms and refuses the rest with a message, the matcher honours program,
 * role, address prefix and port range, the first matching rule wins, and
 * XSOCK_IWARP=all is the default when none matches.  The XSOCK_* settings
 * table (verbs/xs_settings.h): each kind's valid values, range edges and
 * invalid values, an invalid value keeping the default with exactly one
 * line on stderr, and libxsock's own table handed to libiwarp.
 * xsk_config.c, xsk_settings.c and xs_settings.c are compiled into this
 * program (their symbols are hidden in the libraries). */
#include "config.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libxsock/xsk_config.h"
#include "verbs/xs_settings.h"
#include "tests/xs_test.h"

static struct sockaddr_storage sa4(const char *ip, int port)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;

	memset(&ss, 0, sizeof(ss));
	in->sin_family = AF_INET;
	in->sin_port = htons((uint16_t)port);
	REQUIRE(inet_pton(AF_INET, ip, &in->sin_addr) == 1);
	return ss;
}

static struct sockaddr_storage sa6(const char *ip, int port)
{
	struct sockaddr_storage ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

	memset(&ss, 0, sizeof(ss));
	in6->sin6_family = AF_INET6;
	in6->sin6_port = htons((uint16_t)port);
	REQUIRE(inet_pton(AF_INET6, ip, &in6->sin6_addr) == 1);
	return ss;
}

static int parse(const char *line, struct xsk_rule *r)
{
	const char *err = NULL;
	int rc = xsk_rule_parse(line, r, &err);

	if (rc < 0)
		CHECK(err && *err);
	return rc;
}

static bool m(const struct xsk_rule *r, const char *prog, int role, struct sockaddr_storage ss)
{
	return xsk_rule_match(r, prog, "/usr/bin/prog", role, (struct sockaddr *)&ss);
}

static void test_parse(void)
{
	struct xsk_rule r;
	static const char *const bad[] = {
		"iwarp * both",				/* 3 fields */
		"iwarp * both *:1 extra",		/* 5 fields */
		"rdma * both *:1",			/* action */
		"iwarp * accept *:1",			/* role */
		"iwarp * both 10.0.0.1",		/* no port */
		"iwarp * both 10.0.0.1:70000",		/* port range */
		"iwarp * both 10.0.0.1:9-8",		/* reversed range */
		"iwarp * both 10.0.0.1:x",		/* port */
		"iwarp * both 10.0.0.1/33:1",		/* prefix */
		"iwarp * both */8:1",			/* prefix on * */
		"iwarp * both 10.0.0.300:1",		/* address */
		"iwarp * both [::1:1",			/* bracket */
		"iwarp * both ::1:1",			/* IPv6 needs brackets */
	};

	CHECK(parse("", &r) == 0);
	CHECK(parse("   # a comment", &r) == 0);
	CHECK(parse("\t\n", &r) == 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i], &r) != -1)
			fprintf(stderr, "accepted: %s\n", bad[i]);
		CHECK(parse(bad[i], &r) == -1);
	}

	REQUIRE(parse("iwarp  iperf*  listen  127.0.0.0/8:5201-5210  # trailing", &r) == 1);
	CHECK(r.iwarp);
	CHECK(!strcmp(r.prog, "iperf*"));
	CHECK(r.roles == XSK_ROLE_LISTEN);
	CHECK(r.family == AF_INET && r.prefix == 8);
	CHECK(r.port_lo == 5201 && r.port_hi == 5210);

	REQUIRE(parse("tcp * connect [fe80::]/10:*", &r) == 1);
	CHECK(!r.iwarp && r.roles == XSK_ROLE_CONNECT && r.family == AF_INET6 && r.prefix == 10);
	CHECK(r.port_lo == 0 && r.port_hi == 65535);

	REQUIRE(parse("iwarp * both *", &r) == 1);
	CHECK(r.family == AF_UNSPEC && r.roles == XSK_ROLE_BOTH && r.port_hi == 65535);
	REQUIRE(parse("iwarp * both *:80", &r) == 1);
	CHECK(r.family == AF_UNSPEC && r.port_lo == 80 && r.port_hi == 80);
	REQUIRE(parse("iwarp * both [::1]:7", &r) == 1);
	CHECK(r.family == AF_INET6 && r.prefix == 128);
}

static void test_match(void)
{
	struct xsk_rule r;

	REQUIRE(parse("iwarp iperf* listen 127.0.0.0/8:5201-5210", &r) == 1);
	CHECK(m(&r, "iperf3", XSK_ROLE_LISTEN, sa4("127.0.0.1", 5201)));
	CHECK(m(&r, "iperf3", XSK_ROLE_LISTEN, sa4("127.9.9.9", 5210)));
	CHECK(!m(&r, "iperf3", XSK_ROLE_LISTEN, sa4("127.0.0.1", 5211)));
	CHECK(!m(&r, "iperf3", XSK_ROLE_LISTEN, sa4("128.0.0.1", 5201)));
	CHECK(!m(&r, "iperf3", XSK_ROLE_CONNECT, sa4("127.0.0.1", 5201)));
	CHECK(!m(&r, "curl", XSK_ROLE_LISTEN, sa4("127.0.0.1", 5201)));
	/* an IPv4-mapped IPv6 address is the IPv4 address */
	CHECK(m(&r, "iperf3", XSK_ROLE_LISTEN, sa6("::ffff:127.0.0.1", 5201)));
	CHECK(!m(&r, "iperf3", XSK_ROLE_LISTEN, sa6("::1", 5201)));

	REQUIRE(parse("iwarp * both [fe80::]/10:*", &r) == 1);
	CHECK(m(&r, "x", XSK_ROLE_CONNECT, sa6("fe80::1", 1)));
	CHECK(m(&r, "x", XSK_ROLE_LISTEN, sa6("febf::1", 65535)));
	CHECK(!m(&r, "x", XSK_ROLE_CONNECT, sa6("fec0::1", 1)));
	CHECK(!m(&r, "x", XSK_ROLE_CONNECT, sa4("10.0.0.1", 1)));

	REQUIRE(parse("iwarp 10.0.0.0/0:1", &r) == -1);
	REQUIRE(parse("iwarp * connect 0.0.0.0/0:443", &r) == 1);
	CHECK(m(&r, "x", XSK_ROLE_CONNECT, sa4("192.0.2.1", 443)));
	CHECK(!m(&r, "x", XSK_ROLE_CONNECT, sa6("2001:db8::1", 443)));

	/* a '/' in the program field matches the executable's path */
	REQUIRE(parse("iwarp /usr/bin/* both *", &r) == 1);
	CHECK(m(&r, "anything", XSK_ROLE_CONNECT, sa4("10.0.0.1", 1)));
	REQUIRE(parse("iwarp /opt/* both *", &r) == 1);
	CHECK(!m(&r, "anything", XSK_ROLE_CONNECT, sa4("10.0.0.1", 1)));
}

/* The loaded configuration: XSOCK_RULES first, then the file, first match
 * wins, XSOCK_IWARP=all the default.  A bad line is reported and skipped. */
static void test_load(void)
{
	char path[] = "/tmp/xsock-conf-XXXXXX";
	int fd = mkstemp(path);
	static const char conf[] = "# test configuration\n"
				   "tcp * connect 127.0.0.1:7001\n"
				   "this line is wrong\n"
				   "iwarp * both 127.0.0.1:7000-7002\n"
				   "iwarp nosuchprogram both *\n";
	struct sockaddr_storage a;

	REQUIRE(fd >= 0);
	REQUIRE(write(fd, conf, sizeof(conf) - 1) == (ssize_t)(sizeof(conf) - 1));
	close(fd);
	setenv("XSOCK_CONFIG", path, 1);
	setenv("XSOCK_RULES", "tcp * listen *:7002; iwarp * connect 10.1.0.0/16:*", 1);
	setenv("XSOCK_IWARP", "all", 1);
	xsk_config_load();
	unlink(path);

	CHECK(xsk_config_may_iwarp());
	a = sa4("127.0.0.1", 7000);
	CHECK(xsk_config_decide(XSK_ROLE_LISTEN, (struct sockaddr *)&a));
	a = sa4("127.0.0.1", 7001);
	CHECK(!xsk_config_decide(XSK_ROLE_CONNECT, (struct sockaddr *)&a)); /* file rule 1 */
	CHECK(xsk_config_decide(XSK_ROLE_LISTEN, (struct sockaddr *)&a));
	a = sa4("127.0.0.1", 7002);
	CHECK(!xsk_config_decide(XSK_ROLE_LISTEN, (struct sockaddr *)&a)); /* env first */
	CHECK(xsk_config_decide(XSK_ROLE_CONNECT, (struct sockaddr *)&a));
	a = sa4("10.1.2.3", 9);
	CHECK(xsk_config_decide(XSK_ROLE_CONNECT, (struct sockaddr *)&a));
	a = sa4("192.0.2.1", 9);
	CHECK(xsk_config_decide(XSK_ROLE_CONNECT, (struct sockaddr *)&a)); /* default: all */
}

/* ---- the settings table ---------------------------------------------------- */

#define BAD (XS_SET_NONE - 1) /* a case that must be refused */

static int try_parse(enum xs_set id, const char *text, unsigned long *num)
{
	return xs_setting_parse(&xs_setting_rows[id], text, num);
}

static void test_settings_parse(void)
{
	unsigned long v;

	/* every default is valid, within its range, and documented */
	for (int i = 0; i < XS_SET_COUNT; i++) {
		const struct xs_setting_row *r = &xs_setting_rows[i];

		CHECK(!strncmp(r->name, "XSOCK_", 6));
		CHECK(r->doc && *r->doc);
		CHECK(try_parse((enum xs_set)i, r->dflt, &v) == 0);
		if (r->kind == XS_KIND_UINT && *r->dflt)
			CHECK(v >= r->lo && v <= r->hi);
		CHECK((r->kind == XS_KIND_ENUM) == (r->words != NULL));
	}
	/* each kind: valid values, range edges, invalid values (BAD) */
	static const struct {
		enum xs_set id;
		const char *text;
		unsigned long want;
	} cases[] = {
		/* BOOL */
		{ XS_SET_MPA_CRC, "1", 1 },
		{ XS_SET_MPA_CRC, "yes", 1 },
		{ XS_SET_MPA_CRC, "ON", 1 },
		{ XS_SET_MPA_CRC, "True", 1 },
		{ XS_SET_MPA_CRC, "0", 0 },
		{ XS_SET_MPA_CRC, "off", 0 },
		{ XS_SET_MPA_CRC, "No", 0 },
		{ XS_SET_MPA_CRC, "false", 0 },
		{ XS_SET_MPA_CRC, "2", BAD },
		{ XS_SET_MPA_CRC, "10", BAD },
		{ XS_SET_MPA_CRC, "enable", BAD },
		/* UINT: the edges of 0..60000 and 1..3600000 */
		{ XS_SET_RNR_MS, "0", 0 },
		{ XS_SET_RNR_MS, "60000", 60000 },
		{ XS_SET_RNR_MS, "060000", 60000 }, /* decimal */
		{ XS_SET_RNR_MS, "60001", BAD },
		{ XS_SET_RNR_MS, "-1", BAD },
		{ XS_SET_RNR_MS, "+5", BAD },
		{ XS_SET_RNR_MS, " 5", BAD },
		{ XS_SET_RNR_MS, "5ms", BAD },
		{ XS_SET_RNR_MS, "0x10", BAD },
		{ XS_SET_RNR_MS, "99999999999999999999999", BAD },
		{ XS_SET_MPA_TIMEOUT_MS, "0", BAD },
		{ XS_SET_MPA_TIMEOUT_MS, "1", 1 },
		{ XS_SET_MPA_TIMEOUT_MS, "3600000", 3600000 },
		{ XS_SET_MPA_TIMEOUT_MS, "3600001", BAD },
		{ XS_SET_MPA_REV, "1", 1 },
		{ XS_SET_MPA_REV, "3", BAD },
		/* UINT with 0x: XSOCK_IWARP_RBUF, 8192..64 MiB */
		{ XS_SET_IWARP_RBUF, "8192", 8192 },
		{ XS_SET_IWARP_RBUF, "0x2000", 8192 },
		{ XS_SET_IWARP_RBUF, "0X4000000", 67108864 },
		{ XS_SET_IWARP_RBUF, "0x1fff", BAD },
		{ XS_SET_IWARP_RBUF, "67108865", BAD },
		{ XS_SET_IWARP_RBUF, "0x", BAD },
		{ XS_SET_IWARP_RBUF, "0x-2000", BAD },
		/* UINT without default: unset is no value */
		{ XS_SET_EXEC_FD, "", XS_SET_NONE },
		{ XS_SET_EXEC_FD, "2147483647", 2147483647 },
		{ XS_SET_EXEC_FD, "2147483648", BAD },
		/* ENUM: whole words, case as written; the value is the word's index */
		{ XS_SET_ZC, "auto", 0 },
		{ XS_SET_ZC, "always", 1 },
		{ XS_SET_ZC, "0", 3 },
		{ XS_SET_ZC, "Always", BAD },
		{ XS_SET_ZC, "al", BAD },
		{ XS_SET_ZC, "alwaysx", BAD },
		{ XS_SET_ZC, "auto|always", BAD },
		{ XS_SET_MPA_P2P, "send", 3 },
		{ XS_SET_IWARP, "all", 1 },
		{ XS_SET_IWARP, "yes", BAD },
		/* STR: anything */
		{ XS_SET_RULES, "iwarp * both *:1", 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = try_parse(cases[i].id, cases[i].text, &v);

		if (cases[i].want == BAD) {
			CHECK(rc < 0);
		} else {
			CHECK(rc == 0);
			CHECK_EQ_U(v, cases[i].want);
		}
	}
}

/* stderr into a file while fn runs; the number of lines written */
static int stderr_lines(void (*fn)(void *), void *arg, char *text, size_t cap)
{
	char path[] = "/tmp/xsock-err-XXXXXX";
	int fd = mkstemp(path), save = dup(2), lines = 0;
	ssize_t n;

	REQUIRE(fd >= 0 && save >= 0);
	unlink(path);
	fflush(stderr);
	dup2(fd, 2);
	fn(arg);
	fflush(stderr);
	dup2(save, 2);
	close(save);
	n = pread(fd, text, cap - 1, 0);
	close(fd);
	text[n > 0 ? n : 0] = '\0';
	for (char *p = text; *p; p++)
		lines += *p == '\n';
	return lines;
}

static void read_twice(void *arg)
{
	struct xs_settings *t = arg;

	for (int round = 0; round < 2; round++)
		for (int i = 0; i < XS_SET_COUNT; i++)
			(void)xs_settings_num(t, (enum xs_set)i);
}

/* From the environment into a table: valid values taken, each invalid one
 * keeps its default and says so in exactly one line, read twice. */
static void test_settings_env(void)
{
	static struct xs_settings t = XS_SETTINGS_INIT;
	char err[2048];

	setenv("XSOCK_MPA_MARKERS", "yes", 1); /* valid */
	setenv("XSOCK_MPA_CRC", "2", 1); /* BOOL invalid */
	setenv("XSOCK_RNR_MS", "60000", 1); /* UINT upper edge */
	setenv("XSOCK_LINGER_MS", "60001", 1); /* UINT beyond it */
	setenv("XSOCK_CONNECT_DELAY_MS", "", 1); /* empty: unset */
	setenv("XSOCK_ZC", "sometimes", 1); /* ENUM invalid */
	setenv("XSOCK_MPA_P2P", "read", 1);
	setenv("XSOCK_IWARP_LIB", "librdmacm.so.1", 1);
	unsetenv("XSOCK_SOCK_LIB");
	unsetenv("XSOCK_EXEC_FD");
	CHECK_EQ_U(stderr_lines(read_twice, &t, err, sizeof(err)), 3);
	CHECK(strstr(err, "xsock: XSOCK_MPA_CRC=2 invalid (0 or 1), 0 kept\n") != NULL);
	CHECK(strstr(err, "xsock: XSOCK_LINGER_MS=60001 invalid (0..60000), 1000 kept\n") != NULL);
	CHECK(strstr(err, "xsock: XSOCK_ZC=sometimes invalid (auto|always|off|0), auto kept\n") != NULL);
	CHECK_EQ_U(xs_settings_num(&t, XS_SET_MPA_MARKERS), 1);
	CHECK_EQ_U(xs_settings_num(&t, XS_SET_MPA_CRC), 0);
	CHECK_EQ_U(xs_settings_num(&t, XS_SET_RNR_MS), 60000);
	CHECK_EQ_U(xs_settings_num(&t, XS_SET_LINGER_MS), 1000);
	CHECK_EQ_U(xs_settings_num(&t, XS_SET_CONNECT_DELAY_MS), 0);
	CHECK_EQ_U(xs_settings_num(&t, XS_SET_ZC), 0);
	CHECK_EQ_U(xs_settings_num(&t, XS_SET_MPA_P2P), 2);
	CHECK_EQ_U(xs_settings_num(&t, XS_SET_EXEC_FD), XS_SET_NONE);
	CHECK(!strcmp(xs_settings_str(&t, XS_SET_IWARP_LIB), "librdmacm.so.1"));
	CHECK(!strcmp(xs_settings_str(&t, XS_SET_SOCK_LIB), "libxsock.so.0"));
	CHECK(!strcmp(xs_settings_str(&t, XS_SET_RULES), xs_settings_str(&t, XS_SET_RULES)));
	/* parsed once: a later change of the environment is not seen */
	setenv("XSOCK_RNR_MS", "5", 1);
	CHECK_EQ_U(xs_settings_num(&t, XS_SET_RNR_MS), 60000);
}

static struct xs_settings *offered;
static size_t offered_size;

static struct xs_settings *fake_priv_settings(struct xs_settings *offer, size_t size)
{
	offered = offer;
	offered_size = size;
	return offer;
}

/* No libiwarp in this process: libxsock parses into its own table (the
 * one test_load read XSOCK_IWARP from) and hands it to a libiwarp loaded
 * later: a fake, then the built library, which takes it as its own. */
static void test_settings_share(void)
{
	const char *top = getenv("XS_TOP_BUILDDIR");
	__typeof__(fake_priv_settings) *priv;
	char lib[4096];
	void *h;

	CHECK_EQ_U(xsk_setting_num(XS_SET_IWARP), 1); /* test_load's "all" */
	xsk_settings_share(NULL);
	CHECK(offered == NULL);
	xsk_settings_share(fake_priv_settings);
	REQUIRE(offered != NULL);
	CHECK_EQ_U(offered_size, sizeof(struct xs_settings));
	CHECK_EQ_U(xs_settings_num(offered, XS_SET_IWARP), 1);
	if (!top)
		return; /* not under make check */
	snprintf(lib, sizeof(lib), "%s/verbs/.libs/libiwarp.so.0", top);
	h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	REQUIRE(h != NULL);
	*(void **)&priv = dlsym(h, "xsock_priv_settings");
	REQUIRE(priv != NULL);
	xsk_settings_share(priv);
	CHECK(priv(NULL, sizeof(struct xs_settings)) == offered); /* libiwarp's table is ours */
	CHECK(priv(NULL, 1) == NULL);
}

int main(void)
{
	test_parse();
	test_match();
	test_load();
	test_settings_parse();
	test_settings_env();
	test_settings_share();
	return xs_test_failures ? XS_TEST_FAIL : XS_TEST_PASS;
}
