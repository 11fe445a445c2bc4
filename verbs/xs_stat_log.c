/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* XSOCK_STAT_LOG (xs_stat.h): one JSON line per ended connection, iWARP's
 * (xs_stat.c) and RoCE's (xs_roce_conn.c), appended to the file named.
 * Kept apart from the statistics file so that the RoCE engine, built
 * without it (libxsroce), logs too. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "verbs/xs_internal.h"
#include "util/xs_errno.h"

void xs_stat_addr_of(struct xs_stat_addr *out, const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)ss;
		out->port = ntohs(s->sin_port);
		memcpy(out->addr, &s->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)ss;
		out->port = ntohs(s->sin6_port);
		memcpy(out->addr, &s->sin6_addr, 16);
	} else {
		return;
	}
	out->family = ss->ss_family;
}

/* ---- XSOCK_STAT_LOG ------------------------------------------------------------ */

static void log_addr(char *buf, size_t len, const struct xs_stat_addr *a)
{
	char ip[INET6_ADDRSTRLEN];

	if (!a || (a->family != AF_INET && a->family != AF_INET6) ||
	    !inet_ntop(a->family, a->addr, ip, sizeof(ip))) {
		snprintf(buf, len, "-");
		return;
	}
	snprintf(buf, len, a->family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip, a->port);
}

/* The file, or -errno.  Never through a symbolic link another user put
 * by its name in /tmp (only /dev's and /proc's links are followed:
 * /dev/stderr), nor into a file or FIFO of another user's (O_NONBLOCK: a
 * FIFO with no reader is no wait at a connection's end). */
static int log_open(const char *path)
{
	bool sys = !strncmp(path, "/dev/", 5) || !strncmp(path, "/proc/", 6);
	struct stat st;
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK | (sys ? 0 : O_NOFOLLOW),
		      0600);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || (!sys && st.st_uid != geteuid())) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

void xs_stat_log(const struct xs_stat_log_conn *c)
{
	const char *path = xs_settings_str(xs_settings(), XS_SET_STAT_LOG);
	char line[512], loc[64], peer[64];
	int fd, n;

	if (!*path)
		return;
	log_addr(loc, sizeof(loc), c->local);
	log_addr(peer, sizeof(peer), c->peer);
	n = snprintf(line, sizeof(line),
		     "{\"pid\": %d, \"argv0\": \"%.64s\", \"transport\": \"%s\", \"local\": \"%s\", "
		     "\"peer\": \"%s\", \"initiator\": %s, \"tx_octets\": %llu, \"rx_octets\": %llu, "
		     "\"tx_msgs\": %llu, \"rx_msgs\": %llu}\n",
		     (int)getpid(), program_invocation_short_name, c->transport, loc, peer,
		     c->initiator ? "true" : "false", (unsigned long long)c->tx_octets,
		     (unsigned long long)c->rx_octets, (unsigned long long)c->tx_msgs,
		     (unsigned long long)c->rx_msgs);
	if (n <= 0 || (size_t)n >= sizeof(line))
		return;
	fd = log_open(path);
	if (fd < 0) {
		xs_log("XSOCK_STAT_LOG %s: %s", path,
		       fd == -EPERM ? "another user's file" : xs_strerror(-fd));
		return;
	}
	if (write(fd, line, (size_t)n) != n)
		xs_log("XSOCK_STAT_LOG %s: short write", path);
	close(fd);
}
