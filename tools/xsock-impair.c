/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* xsock-impair: a delaying, lossy wire between two network namespaces, for
 * kernels without sch_netem (bench-programs.sh --netem).
 *
 *   xsock-impair [--reorder PCT[:N]] NS_A TAP_A NS_B TAP_B DELAY_US LOSS_PPM
 *
 * Opens the persistent tap device TAP_A inside namespace NS_A and TAP_B
 * inside NS_B (ip tuntap add ... mode tap, made by the caller), then
 * forwards every Ethernet frame from one to the other DELAY_US later,
 * dropping each with probability LOSS_PPM / 1e6: what
 * `tc qdisc add ... netem delay 1ms loss 0.1%` on both ends would do.
 * --reorder holds PCT percent of the frames back (one at a time per
 * direction) and sends each after the next N (default 3) frames, or when
 * nothing followed it within DELAY_US + 1 ms: a reordering wire.
 * Without IFF_VNET_HDR a tap carries frames of at most its MTU (the
 * kernel segments for it), so the loss hits TCP segments as on a wire.
 * Runs until SIGTERM or SIGINT; prints what it forwarded and dropped. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define FRAME_MAX 9216
#define QUEUE_LEN 16384 /* frames in flight per direction */

struct frame {
	uint64_t due_ns;
	uint16_t len;
	uint8_t data[FRAME_MAX];
};

struct dir {
	int in, out;
	struct frame *q;
	unsigned head, tail; /* q[head..tail) waits, FIFO: one delay for all */
	unsigned long fwd, lost, full, reordered;
	struct frame held; /* --reorder: the frame held back, if held_left */
	unsigned held_left; /* frames still to pass it */
};

static uint32_t reorder_ppm; /* --reorder PCT, in ppm */
static unsigned reorder_n = 3;

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: the loss draw needs speed, not strength */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rng_ppm(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32) % 1000000u;
}

/* The tap device name inside the namespace ns (its /var/run/netns entry). */
static int open_tap(const char *ns, const char *name)
{
	char path[256];
	struct ifreq ifr;
	int nsfd, fd;

	snprintf(path, sizeof(path), "/var/run/netns/%s", ns);
	nsfd = open(path, O_RDONLY | O_CLOEXEC);
	if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) < 0) {
		fprintf(stderr, "xsock-impair: namespace %s: %s\n", ns, strerror(errno));
		exit(2);
	}
	close(nsfd);
	fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (fd < 0 || ioctl(fd, TUNSETIFF, &ifr) < 0) {
		fprintf(stderr, "xsock-impair: tap %s in %s: %s\n", name, ns, strerror(errno));
		exit(2);
	}
	return fd;
}

/* The held frame goes to the end of the queue (or is lost, if full). */
static void release_held(struct dir *d, uint64_t delay_ns)
{
	d->held_left = 0;
	if (d->tail - d->head == QUEUE_LEN) {
		d->full++;
		return;
	}
	d->q[d->tail % QUEUE_LEN] = d->held;
	d->q[d->tail % QUEUE_LEN].due_ns = now_ns() + delay_ns;
	d->tail++;
	d->reordered++;
}

static void take(struct dir *d, uint64_t delay_ns, uint32_t loss_ppm)
{
	for (;;) {
		struct frame *f = &d->q[d->tail % QUEUE_LEN];
		ssize_t n;

		if (d->tail - d->head == QUEUE_LEN) { /* a full wire drops, as a queue would */
			uint8_t junk[FRAME_MAX];

			if (read(d->in, junk, sizeof(junk)) <= 0)
				return;
			d->full++;
			continue;
		}
		n = read(d->in, f->data, sizeof(f->data));
		if (n <= 0)
			return;
		if (loss_ppm && rng_ppm() < loss_ppm) {
			d->lost++;
			continue;
		}
		f->len = (uint16_t)n;
		f->due_ns = now_ns() + delay_ns;
		if (!d->held_left && reorder_ppm && rng_ppm() < reorder_ppm) {
			d->held = *f; /* due_ns: when it goes anyway */
			d->held.due_ns += 1000000u;
			d->held_left = reorder_n;
			continue;
		}
		d->tail++;
		if (d->held_left && --d->held_left == 0)
			release_held(d, delay_ns);
	}
}

/* Frames due now go out; returns ns until the next one is due (or -1). */
static int64_t give(struct dir *d, uint64_t delay_ns)
{
	uint64_t now = now_ns();

	if (d->held_left && d->held.due_ns <= now)
		release_held(d, delay_ns); /* nothing came to pass it */

	while (d->head != d->tail) {
		struct frame *f = &d->q[d->head % QUEUE_LEN];

		if (f->due_ns > now)
			return (int64_t)(f->due_ns - now);
		if (write(d->out, f->data, f->len) < 0 && errno == EAGAIN)
			return 20000; /* the tap's queue is full: shortly again */
		d->head++;
		d->fwd++;
	}
	return d->held_left ? (int64_t)(d->held.due_ns - now) : -1;
}

int main(int argc, char **argv)
{
	struct dir d[2];
	uint64_t delay_ns;
	uint32_t loss_ppm;
	int a, b;

	if (argc > 2 && !strcmp(argv[1], "--reorder")) {
		char *end;
		double pct = strtod(argv[2], &end);

		if (*end == ':') {
			unsigned long n = strtoul(end + 1, &end, 10);

			reorder_n = (unsigned)n;
			if (n < 1 || n > 1000)
				*end = 'x';
		}
		if (*end || end == argv[2] || !(pct >= 0 && pct <= 100)) {
			fprintf(stderr, "xsock-impair: --reorder %s: PCT[:N], 0..100, N 1..1000\n",
				argv[2]);
			return 2;
		}
		reorder_ppm = (uint32_t)(pct * 10000.0);
		argc -= 2;
		argv += 2;
	}
	if (argc != 7) {
		fprintf(stderr, "usage: xsock-impair [--reorder PCT[:N]] NS_A TAP_A NS_B TAP_B "
				"DELAY_US LOSS_PPM\n");
		return 2;
	}
	a = open_tap(argv[1], argv[2]);
	b = open_tap(argv[3], argv[4]);
	delay_ns = strtoull(argv[5], NULL, 10) * 1000u;
	loss_ppm = (uint32_t)strtoul(argv[6], NULL, 10);
	rng_state ^= now_ns();
	memset(d, 0, sizeof(d));
	d[0].in = a;
	d[0].out = b;
	d[1].in = b;
	d[1].out = a;
	for (int i = 0; i < 2; i++) {
		d[i].q = malloc(sizeof(struct frame) * QUEUE_LEN);
		if (!d[i].q) {
			fprintf(stderr, "xsock-impair: out of memory\n");
			return 1;
		}
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	while (!stop) {
		struct pollfd p[2] = { { .fd = a, .events = POLLIN }, { .fd = b, .events = POLLIN } };
		int64_t w0 = give(&d[0], delay_ns), w1 = give(&d[1], delay_ns), w = w0;
		struct timespec ts;

		if (w < 0 || (w1 >= 0 && w1 < w))
			w = w1;
		if (w < 0)
			w = 100000000; /* idle: look again in 100 ms (signals end it sooner) */
		ts.tv_sec = w / 1000000000;
		ts.tv_nsec = w % 1000000000;
		if (ppoll(p, 2, &ts, NULL) < 0 && errno != EINTR)
			break;
		if (p[0].revents & POLLIN)
			take(&d[0], delay_ns, loss_ppm);
		if (p[1].revents & POLLIN)
			take(&d[1], delay_ns, loss_ppm);
	}
	printf("xsock-impair: %s->%s %lu forwarded, %lu lost, %lu over-full, %lu reordered; "
	       "%s->%s %lu forwarded, %lu lost, %lu over-full, %lu reordered\n",
	       argv[2], argv[4], d[0].fwd, d[0].lost, d[0].full, d[0].reordered, argv[4], argv[2],
	       d[1].fwd, d[1].lost, d[1].full, d[1].reordered);
	free(d[0].q);
	free(d[1].q);
	close(a);
	close(b);
	return 0;
}
