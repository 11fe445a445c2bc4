/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The selection rules of xsock.conf(5): the parser accepts the documented
 * forms and refuses the rest with a message, the matcher honours program,
 * role, address prefix and port range, the first matching rule wins, and
 * XSOCK_IWARP=all is the default when none matches.  xsk_config.c is
 * compiled into this program (its symbols are hidden in libxsock). */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libxsock/xsk_config.h"
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

int main(void)
{
	test_parse();
	test_match();
	test_load();
	return xs_test_failures ? XS_TEST_FAIL : XS_TEST_PASS;
}
