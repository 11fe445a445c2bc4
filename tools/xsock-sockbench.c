/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* xsock-sockbench: a plain sockets benchmark on 127.0.0.1 (no xsock API),
 * run as raw TCP, under the libxsock preload without IWARP sockets, and
 * under `xsock-run --iwarp` by scripts/bench-sockets.sh.
 *
 *   xsock-sockbench lat [-s SIZE] [-n ITERS] [-w WARMUP]
 *       ping-pong of SIZE (default 64) bytes with blocking read/write;
 *       prints the median, p90, p99 and p99.9 one-way latency (RTT / 2)
 *   xsock-sockbench bw [-s SIZE] [-t MIB] [-c sample|full]
 *       one direction, SIZE-byte writes (default 65536), MIB MiB (default
 *       256).  Every write starts with its 8-octet sequence number, the rest
 *       is a fixed pattern.  -c sample (default): the receiver checks every
 *       sequence number and every octet of one read in 16 (a byte loop over
 *       everything capped raw TCP near 840 MB/s, below what the stack
 *       carries); -c full: every octet of every read (a separate checked run)
 *
 * Both ends are threads of this process (a listener on an ephemeral port).
 * Output: human lines and "RESULT MODE lat_us=.. p99_us=.. p50_us=..
 * p90_us=.. p999_us=.. cpu_..." or "RESULT MODE size=.. bw_MBps=.. cpu_...":
 * cpu_srv_s / cpu_cli_s are the user+sys seconds of the receiving
 * (echoing) and the sending thread, cpu_all_s the whole process's (with the
 * stack's own threads), over the measured transfer.  Exit 0, 1 on any
 * failure. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct {
	size_t size;
	long iters, warm, mib;
	int full;
} opt = { 0, 20000, 1000, 256, 0 };

static int lfd = -1;
static int server_rc;
static double server_cpu; /* user+sys s of the server thread's transfer */
static uint8_t *pat;      /* the sender's buffer, without its stamp */

/* user+sys seconds of this thread (RUSAGE_THREAD) or process (RUSAGE_SELF) */
static double cpu_s(int who)
{
	struct rusage ru;

	if (getrusage(who, &ru))
		return 0;
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
	       ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int read_full(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (uint8_t *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = write(fd, (const uint8_t *)buf + done, n - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

static void nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void *lat_server(void *arg)
{
	uint8_t *buf = malloc(opt.size);
	int fd = accept(lfd, NULL, NULL);

	double c0 = cpu_s(RUSAGE_THREAD);

	(void)arg;
	server_rc = 1;
	if (fd < 0 || !buf)
		goto out;
	nodelay(fd);
	for (long i = 0; i < opt.warm + opt.iters; i++)
		if (read_full(fd, buf, opt.size) || write_full(fd, buf, opt.size))
			goto out;
	server_cpu = cpu_s(RUSAGE_THREAD) - c0;
	server_rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

/* Check n received octets at stream offset off: a write of opt.size
 * octets is its sequence number (little-endian, in its first 8 octets, or
 * all of a shorter write) then pat.  With whole = 0 only the sequence
 * numbers are looked at. */
static int check_range(const uint8_t *p, size_t n, uint64_t off, int whole)
{
	size_t stamp = opt.size < 8 ? opt.size : 8;

	while (n) {
		size_t j = off % opt.size, m = opt.size - j, k = j;
		uint64_t seq = off / opt.size;

		if (m > n)
			m = n;
		for (; k < stamp && k < j + m; k++)
			if (p[k - j] != (uint8_t)(seq >> (8 * k)))
				return -1;
		if (whole && j + m > k && memcmp(p + (k - j), pat + k, j + m - k))
			return -1;
		p += m;
		off += m;
		n -= m;
	}
	return 0;
}

static void *bw_server(void *arg)
{
	size_t total = (size_t)opt.mib << 20, got = 0, bufsz = opt.size > 65536 ? opt.size : 65536;
	uint8_t *buf = malloc(bufsz);
	unsigned long reads = 0;
	int fd = accept(lfd, NULL, NULL);
	double c0 = cpu_s(RUSAGE_THREAD);

	(void)arg;
	server_rc = 1;
	if (fd < 0 || !buf)
		goto out;
	while (got < total) {
		ssize_t r = read(fd, buf, bufsz);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			goto out;
		/* sequence numbers always (a lost, repeated or misplaced write
		 * shows there), all octets of one read in 16 (or all) */
		if (check_range(buf, (size_t)r, got, opt.full || reads++ % 16 == 0)) {
			fprintf(stderr, "bw: data check failed in the %zu octets at offset %zu\n",
				(size_t)r, got);
			goto out;
		}
		got += (size_t)r;
	}
	server_cpu = cpu_s(RUSAGE_THREAD) - c0;
	if (write_full(fd, "k", 1) == 0)
		server_rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* the client's and the process's CPU over the measured part */
static double cli_c0, all_c0, cli_cpu;

static void cpu_begin(void)
{
	cli_c0 = cpu_s(RUSAGE_THREAD);
	all_c0 = cpu_s(RUSAGE_SELF);
}

static void cpu_end(void)
{
	cli_cpu = cpu_s(RUSAGE_THREAD) - cli_c0;
}

static int lat_client(int fd)
{
	uint8_t *buf = calloc(1, opt.size);
	double *rtt = malloc((size_t)opt.iters * sizeof(*rtt));
	int rc = 1;

	if (!buf || !rtt)
		goto out;
	cpu_begin();
	for (long i = 0; i < opt.warm + opt.iters; i++) {
		double t0 = now_us();
		memset(buf, (int)(i & 0xff), opt.size);
		if (write_full(fd, buf, opt.size) || read_full(fd, buf, opt.size))
			goto out;
		if (buf[0] != (uint8_t)(i & 0xff) || buf[opt.size - 1] != (uint8_t)(i & 0xff)) {
			fprintf(stderr, "lat: echo %ld differs\n", i);
			goto out;
		}
		if (i >= opt.warm)
			rtt[i - opt.warm] = now_us() - t0;
	}
	cpu_end();
	qsort(rtt, (size_t)opt.iters, sizeof(*rtt), cmp_d);
	double med = rtt[opt.iters / 2] / 2, p99 = rtt[opt.iters * 99 / 100] / 2;
	double p90 = rtt[opt.iters * 90 / 100] / 2, p999 = rtt[opt.iters * 999 / 1000] / 2;
	printf("lat: %zu B ping-pong, %ld round trips: one-way median %.2f us, p90 %.2f us, "
	       "p99 %.2f us, p99.9 %.2f us\n", opt.size, opt.iters, med, p90, p99, p999);
	printf("RESULT lat lat_us=%.3f p99_us=%.3f p50_us=%.3f p90_us=%.3f p999_us=%.3f",
	       med, p99, med, p90, p999);
	rc = 0;
out:
	free(buf);
	free(rtt);
	return rc;
}

static int bw_client(int fd)
{
	uint8_t *buf = malloc(opt.size);
	size_t total = (size_t)opt.mib << 20;
	char ack;
	int rc = 1;

	if (!buf)
		return 1;
	memcpy(buf, pat, opt.size);
	cpu_begin();
	double t0 = now_us();
	uint64_t seq = 0;
	for (size_t sent = 0; sent < total; sent += opt.size, seq++) {
		/* the stamp: little-endian whatever the host */
		for (size_t k = 0; k < 8 && k < opt.size; k++)
			buf[k] = (uint8_t)(seq >> (8 * k));
		if (write_full(fd, buf, opt.size))
			goto out;
	}
	if (read_full(fd, &ack, 1))
		goto out;
	double us = now_us() - t0;
	cpu_end();
	double mbps = (double)total / us;
	printf("bw: %zu B writes, %ld MiB in %.3f s: %.1f MB/s (%s check)\n", opt.size, opt.mib,
	       us / 1e6, mbps, opt.full ? "full" : "sampled");
	printf("RESULT bw size=%zu bw_MBps=%.1f", opt.size, mbps);
	rc = 0;
out:
	free(buf);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: xsock-sockbench lat [-s SIZE] [-n ITERS] [-w WARMUP]\n"
		   "       xsock-sockbench bw [-s SIZE] [-t MIB] [-c sample|full]\n");
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	pthread_t th;
	int lat, fd = -1, c, rc = 1;

	if (argc < 2 || (strcmp(argv[1], "lat") && strcmp(argv[1], "bw"))) {
		usage(stderr);
		return 2;
	}
	lat = !strcmp(argv[1], "lat");
	optind = 2;
	while ((c = getopt(argc, argv, "s:n:w:t:c:h")) != -1) {
		switch (c) {
		case 's':
			opt.size = strtoul(optarg, NULL, 0);
			break;
		case 'n':
			opt.iters = strtol(optarg, NULL, 0);
			break;
		case 'w':
			opt.warm = strtol(optarg, NULL, 0);
			break;
		case 't':
			opt.mib = strtol(optarg, NULL, 0);
			break;
		case 'c':
			if (strcmp(optarg, "full") && strcmp(optarg, "sample")) {
				usage(stderr);
				return 2;
			}
			opt.full = !strcmp(optarg, "full");
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!opt.size)
		opt.size = lat ? 64 : 65536;
	if (opt.size > (64u << 20) || opt.iters < 1 || opt.warm < 0 || opt.mib < 1 ||
	    (!lat && ((size_t)opt.mib << 20) % opt.size)) {
		fprintf(stderr, "xsock-sockbench: bad sizes (bw: MIB MiB must be a multiple of SIZE)\n");
		return 2;
	}
	pat = malloc(opt.size);
	if (!pat) {
		perror("xsock-sockbench: malloc");
		return 1;
	}
	for (size_t i = 0; i < opt.size; i++)
		pat[i] = (uint8_t)(i * 7 + 1);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &al) < 0) {
		perror("xsock-sockbench: listen");
		goto out;
	}
	if (pthread_create(&th, NULL, lat ? lat_server : bw_server, NULL)) {
		perror("xsock-sockbench: pthread_create");
		goto out;
	}
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("xsock-sockbench: connect");
		/* unblock the server's accept */
		shutdown(lfd, SHUT_RDWR);
		pthread_join(th, NULL);
		goto out;
	}
	nodelay(fd);
	rc = lat ? lat_client(fd) : bw_client(fd);
	close(fd);
	fd = -1;
	pthread_join(th, NULL);
	rc |= server_rc;
	if (!rc) {
		/* the RESULT line's end: CPU of each side and of the process */
		double all = cpu_s(RUSAGE_SELF) - all_c0;
		double n = lat ? (double)(opt.warm + opt.iters) : (double)((size_t)opt.mib << 20) / 1e9;

		printf(" cpu_srv_s=%.3f cpu_cli_s=%.3f cpu_all_s=%.3f\n", server_cpu, cli_cpu, all);
		printf("cpu (user+sys): server %.3f s, client %.3f s, process %.3f s: %.2f %s\n",
		       server_cpu, cli_cpu, all, lat ? all / n * 1e6 : all / n,
		       lat ? "us per round trip" : "s per GB");
	} else {
		printf("\n");
	}
out:
	free(pat);
	if (fd >= 0)
		close(fd);
	if (lfd >= 0)
		close(lfd);
	return rc;
}
