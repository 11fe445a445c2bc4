/* Helpers shared by the connection manager tests (test-cm-*.c). */
#ifndef TEST_CM_UTIL_H
#define TEST_CM_UTIL_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <rdma/rdma_cma.h>

#include "tests/xs_test.h"

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

static inline struct sockaddr_in cm_sin(const char *ip, uint16_t port)
{
	struct sockaddr_in s;

	memset(&s, 0, sizeof(s));
	s.sin_family = AF_INET;
	s.sin_port = htons(port);
	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}

#endif
