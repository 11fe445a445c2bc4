/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The service thread: one per process, started with the first listener
 * (xsk_svc_add), it runs xsk_progress on listeners whose CM channel has
 * events, so connection requests are accepted while the application is
 * not in accept().  svc_mu guards the list and its epoll set; svc_main
 * takes svc_mu, then s->mu. */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <sys/epoll.h>

#include "libxsock/xsk_proto_int.h"

/* ---- the service thread ----------------------------------------------------------- */

static pthread_mutex_t svc_mu = PTHREAD_MUTEX_INITIALIZER;
static int svc_ep = -1;
static struct xsk *svc_list;
static bool svc_running; /* the thread reached its loop (fork waits for that) */

static void *svc_main(void *arg)
{
	struct epoll_event ev[16];

	xsk_mutex_lock(&svc_mu);
	svc_running = true;
	xsk_mutex_unlock(&svc_mu);
	for (;;) {
		int n = xsk_real.epoll_wait(svc_ep, ev, 16, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		xsk_mutex_lock(&svc_mu);
		for (int i = 0; i < n; i++) {
			struct xsk *s;
			for (s = svc_list; s && s != ev[i].data.ptr; s = s->svc_next)
				;
			if (!s)
				continue; /* removed meanwhile */
			xsk_mutex_lock(&s->mu);
			xsk_progress(s);
			xsk_mutex_unlock(&s->mu);
		}
		xsk_mutex_unlock(&svc_mu);
	}
	return arg;
}

int xsk_svc_add(struct xsk *s)
{
	int rc = 0;

	xsk_mutex_lock(&svc_mu);
	if (svc_ep < 0) {
		pthread_t t;
		svc_ep = xsk_fd_keep(epoll_create1(EPOLL_CLOEXEC));
		if (svc_ep < 0 || xsk_thread_start(&t, svc_main, NULL)) {
			rc = -EAGAIN;
			if (svc_ep >= 0)
				xsk_fd_close(svc_ep);
			svc_ep = -1;
			goto out;
		}
		pthread_detach(t);
	}
	xsk_mutex_lock(&s->mu);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = s };
	if (s->ch && !s->in_svc && xsk_real.epoll_ctl(svc_ep, EPOLL_CTL_ADD, s->ch->fd, &ev) == 0) {
		s->in_svc = true;
		s->svc_next = svc_list;
		svc_list = s;
	}
	xsk_mutex_unlock(&s->mu);
out:
	xsk_mutex_unlock(&svc_mu);
	return rc;
}

void xsk_svc_del(struct xsk *s)
{
	/* only a listener is ever in the list, and only its owner frees it;
	 * the service thread itself frees the children it could not accept
	 * (child_accept), under svc_mu: it must not take it again (nginx
	 * under wrk's 64 connections over RoCE hung here) */
	if (!s->in_svc)
		return;
	xsk_mutex_lock(&svc_mu);
	if (s->in_svc) {
		struct xsk **pp = &svc_list;
		while (*pp && *pp != s)
			pp = &(*pp)->svc_next;
		if (*pp)
			*pp = s->svc_next;
		xsk_real.epoll_ctl(svc_ep, EPOLL_CTL_DEL, s->ch->fd, NULL);
		s->in_svc = false;
	}
	xsk_mutex_unlock(&svc_mu);
}

void xsk_svc_accept_wait(struct xsk *s, bool on)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = s };

	if (on ? atomic_fetch_add(&s->accept_waiters, 1) != 0
	       : atomic_fetch_sub(&s->accept_waiters, 1) != 1)
		return;
	if (on)
		ev.events = 0;
	/* svc_mu is not taken (the service thread holds it while it accepts
	 * on any listener); an fd xsk_svc_del took off says ENOENT */
	if (atomic_load(&s->in_svc) && svc_ep >= 0)
		xsk_real.epoll_ctl(svc_ep, EPOLL_CTL_MOD, s->ch->fd, &ev);
}

void xsk_svc_fork_prepare(void)
{
	/* a thread still starting may be inside the allocator (a sanitizer's
	 * is not fork-safe): wait until it runs its loop */
	xsk_mutex_lock(&svc_mu);
	while (svc_ep >= 0 && !svc_running) {
		xsk_mutex_unlock(&svc_mu);
		sched_yield();
		xsk_mutex_lock(&svc_mu);
	}
}

void xsk_svc_fork_parent(void)
{
	xsk_mutex_unlock(&svc_mu);
}

/* The child has no service thread and must not wait on the parent's epoll
 * instance: listeners rejoin a new one when the child accepts on them. */
void xsk_svc_fork_child(void)
{
	pthread_mutex_init(&svc_mu, NULL);
	svc_running = false;
	if (svc_ep >= 0)
		xsk_fd_close(svc_ep);
	svc_ep = -1;
	while (svc_list) {
		struct xsk *s = svc_list;
		svc_list = s->svc_next;
		s->svc_next = NULL;
		s->in_svc = false;
	}
}
