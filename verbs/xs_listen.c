/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Listeners: the listening socket (a spare one of a listener just closed
 * on the same address when there is one, xs_spare.c), its close, and the
 * engine thread's accept loop, which starts each connection's MPA Request
 * (or a mixed listener's classification, xs_handshake.c). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/xs_clock.h"
#include "verbs/xs_engine_priv.h"
#include "verbs/xs_internal.h"

/* A bind refused because of a kept listening socket just dropped: the
 * closed listener's own descriptor goes with the engine's next passes
 * (run_commands), a little later.  Bounded: about a second. */
static int bind_again(int fd, const struct sockaddr *addr, socklen_t len)
{
	for (int i = 0; i < 100; i++) {
		if (bind(fd, addr, len) == 0)
			return 0;
		if (errno != EADDRINUSE)
			return -1;
		xs_eng_wake();
		xs_sleep_ms(10);
	}
	return -1;
}

struct xs_listener *xs_listen(const struct sockaddr *addr, socklen_t len, int backlog,
			      int v6only, xs_accept_fn cb, xs_plain_fn plain, void *ctx)
{
	int rc = xs_eng_get();

	if (rc < 0) {
		errno = -rc;
		return NULL;
	}
	struct xs_listener *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	/* the socket of a listener on this address closed just before: its
	 * queued connections are this one's (xs_spare.c) */
	l->fd = xs_spare_take(addr, len);
	if (l->fd >= 0) {
		int fl = fcntl(l->fd, F_GETFL);
		if (fl < 0 || fcntl(l->fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
		    listen(l->fd, backlog > 0 ? backlog : 128) < 0)
			goto fail_fd;
		goto listening;
	}
	l->fd = xs_fd_keep(socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	int one = 1;
	if (l->fd < 0)
		goto fail;
	setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* a dual-stack server (redis, nginx) listens on 0.0.0.0 and on [::]
	 * with IPV6_V6ONLY: without it the second bind fails */
	if (addr->sa_family == AF_INET6 && v6only >= 0 &&
	    setsockopt(l->fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only)) < 0)
		goto fail_fd;
	if (bind(l->fd, addr, len) < 0 &&
	    (errno != EADDRINUSE || !xs_spare_drop_port(addr) || bind_again(l->fd, addr, len) < 0))
		goto fail_fd; /* (a kept socket on the port, another address: not ours to keep) */
	if (listen(l->fd, backlog > 0 ? backlog : 128) < 0)
		goto fail_fd;
listening:
	l->cb = cb;
	l->plain = plain;
	l->ctx = ctx;
	l->refs = 1;
	pthread_mutex_init(&l->mu, NULL);
	pthread_mutex_lock(&xs_eng.reg_mu);
	l->all_next = xs_eng.listeners;
	if (xs_eng.listeners)
		xs_eng.listeners->all_prev = l;
	xs_eng.listeners = l;
	pthread_mutex_unlock(&xs_eng.reg_mu);
	pthread_mutex_lock(&xs_eng.mu);
	l->cmd_next = xs_eng.lcmds;
	xs_eng.lcmds = l;
	l->cmd_queued = true;
	pthread_mutex_unlock(&xs_eng.mu);
	xs_eng_wake();
	return l;
fail_fd:
	rc = errno;
	xs_fd_close(l->fd);
	errno = rc;
fail:
	rc = errno;
	free(l);
	errno = rc;
	return NULL;
}

int xs_listener_addr(const struct xs_listener *l, struct sockaddr_storage *addr)
{
	socklen_t sl = sizeof(*addr);

	return getsockname(l->fd, (struct sockaddr *)addr, &sl) < 0 ? -errno : 0;
}

void xs_listener_close(struct xs_listener *l)
{
	/* no callback starts after this and none is running when it returns
	 * (unless called from within one, on the engine thread) */
	if (!xs_eng_on_thread)
		pthread_mutex_lock(&l->mu);
	l->closing = true;
	if (!xs_eng_on_thread)
		pthread_mutex_unlock(&l->mu);
	/* a forked child's copy (a pre-fork server's worker, a postgres
	 * backend) with no engine of its own started: nothing of it is armed
	 * here and its socket is shared (no shutdown), so its own reference
	 * goes now, without a thread and a ring made only for this close */
	pthread_mutex_lock(&xs_eng.mu);
	bool engine_less = l->forked && !xs_eng.started && !l->poll_armed;
	pthread_mutex_unlock(&xs_eng.mu);
	if (engine_less) {
		xs_eng_listener_unref(l);
		return;
	}
	/* the engine closes and frees it once no connection refers to it */
	xs_eng_get();
	/* a listener that took a connection keeps its socket a while for a
	 * listen on the same address (xs_spare.c); not a mixed one (libxsock's
	 * sockets: a closed TCP listener frees its port at once) */
	bool spare = !l->forked && !l->plain && atomic_load(&l->accepted) &&
		     xs_spare_keep(l->fd);
	pthread_mutex_lock(&xs_eng.mu);
	l->spared = spare;
	l->close_cmd = true;
	if (!l->forked && !spare)
		shutdown(l->fd, SHUT_RDWR);
	if (!l->cmd_queued) {
		l->cmd_next = xs_eng.lcmds;
		xs_eng.lcmds = l;
		l->cmd_queued = true;
	}
	pthread_mutex_unlock(&xs_eng.mu);
	xs_eng_wake();
}

void xs_listen_accept(struct xs_listener *l)
{
	while (!l->closing) { /* a spared socket's backlog is the next listener's */
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			break;
		unsigned cls_ms = l->plain ? xs_config()->classify_ms : 0;
		int one = 1;
		if (!cls_ms) /* a mixed listener's plain connection keeps TCP's defaults */
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct xs_conn *c = xs_eng_conn_new(fd);
		if (!c) {
			xs_fd_close(fd);
			continue;
		}
		atomic_store(&l->accepted, true);
		pthread_mutex_lock(&xs_eng.mu);
		l->refs++;
		pthread_mutex_unlock(&xs_eng.mu);
		c->listener = l;
		c->state = CONN_WAIT_REQUEST;
		c->hs_need = MPA_RR_HDR_LEN;
		if (cls_ms) {
			c->cls_pending = true;
			c->cls_deadline_ms = xs_now_ms() + cls_ms;
		}
		xs_eng_arm(c); /* the Request (or the first octets) read when it arrives */
		if (cls_ms)
			xs_hs_cls_arm();
	}
	if (!l->closing)
		xs_eng_listener_arm(l);
}
