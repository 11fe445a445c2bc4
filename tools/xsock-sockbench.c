/* xsock-sockbench: a plain sockets benchmark on 127.0.0.1 (no xsock API),
 * run as raw TCP, under the libxsock preload without IWARP sockets, and
 * under `xsock-run --iwarp` by scripts/bench-sockets.sh.
 *
 *   xsock-sockbench lat [-s SIZE] [-n ITERS] [-w WARMUP]
 *       ping-pong of SIZE (default 64) bytes with blocking read/write;
 *       prints the median and p99 one-way latency (RTT / 2)
 *   xsock-sockbench bw [-s SIZE] [-t MIB]
 *       one direction, SIZE-byte writes (default 65536), MIB MiB (default
 *       256); the receiver sums every byte and checks the sum
 *
 * Both ends are threads of this process (a listener on an ephemeral port).
 * Output: a human line and "RESULT MODE lat_us=.. p99_us=.." or
 * "RESULT MODE size=.. bw_MBps=..".  Exit 0, 1 on any failure. */
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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct {
	size_t size;
	long iters, warm, mib;
} opt = { 0, 20000, 1000, 256 };

static int lfd = -1;
static int server_rc;

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

	(void)arg;
	server_rc = 1;
	if (fd < 0 || !buf)
		goto out;
	nodelay(fd);
	for (long i = 0; i < opt.warm + opt.iters; i++)
		if (read_full(fd, buf, opt.size) || write_full(fd, buf, opt.size))
			goto out;
	server_rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

static void *bw_server(void *arg)
{
	size_t total = (size_t)opt.mib << 20, got = 0, bufsz = opt.size > 65536 ? opt.size : 65536;
	uint8_t *buf = malloc(bufsz);
	uint64_t sum = 0, want = 0;
	int fd = accept(lfd, NULL, NULL);

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
		for (ssize_t i = 0; i < r; i++)
			sum += buf[i];
		got += (size_t)r;
	}
	/* the sender repeats one buffer whose byte i is (uint8_t)(i * 7 + 1) */
	for (size_t i = 0; i < opt.size; i++)
		want += (uint8_t)(i * 7 + 1);
	want *= total / opt.size;
	if (sum != want) {
		fprintf(stderr, "bw: data check failed (sum %llu, expected %llu)\n",
			(unsigned long long)sum, (unsigned long long)want);
		goto out;
	}
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

static int lat_client(int fd)
{
	uint8_t *buf = calloc(1, opt.size);
	double *rtt = malloc((size_t)opt.iters * sizeof(*rtt));
	int rc = 1;

	if (!buf || !rtt)
		goto out;
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
	qsort(rtt, (size_t)opt.iters, sizeof(*rtt), cmp_d);
	double med = rtt[opt.iters / 2] / 2, p99 = rtt[opt.iters * 99 / 100] / 2;
	printf("lat: %zu B ping-pong, %ld round trips: one-way median %.2f us, p99 %.2f us\n",
	       opt.size, opt.iters, med, p99);
	printf("RESULT lat lat_us=%.3f p99_us=%.3f\n", med, p99);
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
	for (size_t i = 0; i < opt.size; i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	double t0 = now_us();
	for (size_t sent = 0; sent < total; sent += opt.size)
		if (write_full(fd, buf, opt.size))
			goto out;
	if (read_full(fd, &ack, 1))
		goto out;
	double us = now_us() - t0;
	double mbps = (double)total / us;
	printf("bw: %zu B writes, %ld MiB in %.3f s: %.1f MB/s\n", opt.size, opt.mib, us / 1e6, mbps);
	printf("RESULT bw size=%zu bw_MBps=%.1f\n", opt.size, mbps);
	rc = 0;
out:
	free(buf);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: xsock-sockbench lat [-s SIZE] [-n ITERS] [-w WARMUP]\n"
		   "       xsock-sockbench bw [-s SIZE] [-t MIB]\n");
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
	while ((c = getopt(argc, argv, "s:n:w:t:h")) != -1) {
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
out:
	if (fd >= 0)
		close(fd);
	if (lfd >= 0)
		close(lfd);
	return rc;
}
