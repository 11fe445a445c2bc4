/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Helpers shared by the connection manager tests (test-cm-*.c). */
#ifndef TEST_CM_UTIL_H
#define TEST_CM_UTIL_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <rdma/rdma_cma.h>

#include "tests/xs_test.h"
#include "verbs/xs_stat_shm.h"

/* One completion of cq within ms (polled each millisecond): true with *wc
 * filled; false on timeout or a poll error. */
static inline bool cm_poll_one(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	for (int i = 0; i < ms; i++) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n == 1)
			return true;
		if (n < 0)
			return false;
		usleep(1000);
	}
	return false;
}

/* Is the channel's fd readable within ms? */
static inline bool cm_readable(struct rdma_event_channel *ch, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* The next event of the channel within ms (NULL on timeout), checked to be
 * of the expected type. */
static inline struct rdma_cm_event *cm_expect(struct rdma_event_channel *ch,
					      enum rdma_cm_event_type type, int ms,
					      const char *what)
{
	struct rdma_cm_event *ev = NULL;

	if (!cm_readable(ch, ms)) {
		fprintf(stderr, "%s: no event within %d ms (wanted %s)\n", what, ms,
			rdma_event_str(type));
		xs_test_failures++;
		return NULL;
	}
	if (rdma_get_cm_event(ch, &ev)) {
		fprintf(stderr, "%s: rdma_get_cm_event: %s\n", what, strerror(errno));
		xs_test_failures++;
		return NULL;
	}
	if (ev->event != type) {
		fprintf(stderr, "%s: got %s status %d, wanted %s\n", what,
			rdma_event_str(ev->event), ev->status, rdma_event_str(type));
		xs_test_failures++;
	}
	return ev;
}

/* cm_expect, and the event acknowledged at once (its contents unused). */
static inline void cm_expect_ack(struct rdma_event_channel *ch, enum rdma_cm_event_type type,
				 int ms, const char *what)
{
	struct rdma_cm_event *ev = cm_expect(ch, type, ms, what);

	if (ev)
		rdma_ack_cm_event(ev);
}

static inline struct sockaddr_in cm_sin(const char *ip, uint16_t port)
{
	struct sockaddr_in s;

	memset(&s, 0, sizeof(s));
	s.sin_family = AF_INET;
	s.sin_port = htons(port);
	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}

/* A listener on 127.0.0.1 with a kernel-chosen port on its own channel. */
static inline uint16_t cm_listen(struct rdma_event_channel **ch, struct rdma_cm_id **id)
{
	struct sockaddr_in a = cm_sin("127.0.0.1", 0);
	uint16_t port;

	*ch = rdma_create_event_channel();
	REQUIRE(*ch);
	REQUIRE(rdma_create_id(*ch, id, NULL, RDMA_PS_TCP) == 0);
	REQUIRE(rdma_bind_addr(*id, (struct sockaddr *)&a) == 0);
	REQUIRE(rdma_listen(*id, 16) == 0);
	port = ntohs(rdma_get_src_port(*id));
	REQUIRE(port != 0);
	return port;
}

/* A new id on a new channel with its address and route to 127.0.0.1:port
 * resolved (ready for a QP and rdma_connect). */
static inline struct rdma_cm_id *cm_resolved_id(struct rdma_event_channel **ch, void *ctx,
						uint16_t port)
{
	struct sockaddr_in dst = cm_sin("127.0.0.1", port);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	*ch = rdma_create_event_channel();
	REQUIRE(*ch);
	REQUIRE(rdma_create_id(*ch, &id, ctx, RDMA_PS_TCP) == 0);
	REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0);
	ev = cm_expect(*ch, RDMA_CM_EVENT_ADDR_RESOLVED, 2000, "addr resolved");
	REQUIRE(ev);
	rdma_ack_cm_event(ev);
	REQUIRE(rdma_resolve_route(id, 2000) == 0);
	ev = cm_expect(*ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 2000, "route resolved");
	REQUIRE(ev);
	rdma_ack_cm_event(ev);
	return id;
}

/* A CQ of cqe entries and an RC QP on id that uses it for both queues:
 * wr send and wr receive WRs of one SGE each, on the CM's PD. */
static inline struct ibv_cq *cm_rc_qp(struct rdma_cm_id *id, int cqe, uint32_t wr)
{
	struct ibv_qp_init_attr a;
	struct ibv_cq *cq;

	REQUIRE(id->verbs);
	cq = ibv_create_cq(id->verbs, cqe, NULL, NULL, 0);
	REQUIRE(cq);
	memset(&a, 0, sizeof(a));
	a.send_cq = cq;
	a.recv_cq = cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = wr;
	a.cap.max_recv_wr = wr;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	REQUIRE(rdma_create_qp(id, NULL, &a) == 0); /* NULL pd: the CM's */
	return cq;
}

/* CLOCK_MONOTONIC in milliseconds (the raw-peer tests time the wire). */
static inline double cm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Read exactly n bytes from a TCP socket within 5 s. */
static inline bool cm_recv_full(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 5000) != 1)
			return false;
		ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
		if (r <= 0)
			return false;
		got += (size_t)r;
	}
	return true;
}

/* Up to n completions within ms (polling). */
static inline int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n, int ms)
{
	double end = cm_now_ms() + ms;
	int got = 0;

	while (got < n) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		if (r < 0)
			return -1;
		got += r;
		if (got < n) {
			if (cm_now_ms() > end)
				break;
			usleep(500);
		}
	}
	return got;
}

/* This process's statistics file (verbs/xs_stat_shm.h), read-only; NULL
 * when there is none (XSOCK_STAT=0, /dev/shm not writable). */
static inline const struct xs_stat_file *cm_stat_map(void)
{
	size_t len = sizeof(struct xs_stat_hdr) + XS_STAT_SLOTS * sizeof(struct xs_stat_conn);
	char path[128];
	void *m;
	int fd;

	snprintf(path, sizeof(path), "%s/%s%u-%d", XS_STAT_DIR, XS_STAT_PREFIX, (unsigned)getuid(),
		 (int)getpid());
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	return m == MAP_FAILED ? NULL : m;
}

/* A copy of this process's live connection of that role (false: none). */
static inline bool cm_stat_slot(bool initiator, struct xs_stat_conn *o)
{
	const struct xs_stat_file *f = cm_stat_map();
	bool found = false;

	if (!f)
		return false;
	for (unsigned i = 0; i < __atomic_load_n(&f->hdr.hiwater, __ATOMIC_ACQUIRE); i++) {
		const struct xs_stat_conn *s = &f->slot[i];

		if (__atomic_load_n(&s->in_use, __ATOMIC_ACQUIRE) && s->initiator == initiator) {
			memcpy(o, s, sizeof(*o));
			found = true;
		}
	}
	munmap((void *)f, sizeof(struct xs_stat_hdr) + XS_STAT_SLOTS * sizeof(struct xs_stat_conn));
	return found;
}

#endif
