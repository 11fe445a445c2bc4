/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* epoll_ctl and epoll_wait over sets that hold IWARP sockets: the
 * registrations (struct xsk_epreg, in a list per set and one per socket,
 * under the table lock), the kernel's set watching each socket's inner
 * epoll fd, and the events computed by libxsock (EPOLLONESHOT here,
 * EPOLLET's edges in xsk_epoll_et.c). */
#include "config.h"

#include <stdlib.h>

#include "libxsock/xsk_intercept.h"
#include "libxsock/xsk_sock.h"

void xsk_ep_unwatch(struct xsk *s)
{
	xsk_tab_lock();
	for (struct xsk_epreg *r = *xsk_regs(s); r; r = r->next_of_sock)
		xsk_real.epoll_ctl(r->epfd, EPOLL_CTL_DEL, r->fd, NULL);
	xsk_tab_unlock();
}

void xsk_ep_readd(struct xsk *s)
{
	xsk_tab_lock();
	for (struct xsk_epreg *r = *xsk_regs(s); r; r = r->next_of_sock) {
		struct epoll_event ev = { .events = xsk_ep_kernel_events(r->events), .data = r->data };
		xsk_real.epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->fd, &ev);
		r->look = true;
	}
	xsk_tab_unlock();
}

int xsk_ep_take_fd(struct xsk *s, int fd, struct xsk_ep_moved **out)
{
	struct xsk_epreg **pp, *r;
	int n = 0, i = 0;

	*out = NULL;
	xsk_tab_lock();
	for (r = *xsk_regs(s); r; r = r->next_of_sock)
		n += r->fd == fd;
	if (n)
		*out = malloc((size_t)n * sizeof(**out));
	pp = xsk_regs(s);
	while (*out && (r = *pp)) {
		if (r->fd != fd) {
			pp = &r->next_of_sock;
			continue;
		}
		/* a fired EPOLLONESHOT stays disarmed: no event but a hang-up
		 * or an error until the application's EPOLL_CTL_MOD */
		(*out)[i].epfd = r->epfd;
		(*out)[i].ev.events = r->disabled ? EPOLLONESHOT : r->events;
		(*out)[i].ev.data = r->data;
		i++;
		REAL(epoll_ctl)(r->epfd, EPOLL_CTL_DEL, fd, NULL);
		xsk_ep_in_regs_add(s, -((r->events & EPOLLIN) != 0));
		xsk_ep_set_unlink_locked(r);
		*pp = r->next_of_sock;
		free(r);
	}
	xsk_tab_unlock();
	return i;
}

void xsk_ep_give_fd(int fd, struct xsk_ep_moved *v, int n)
{
	for (int i = 0; i < n; i++)
		REAL(epoll_ctl)(v[i].epfd, EPOLL_CTL_ADD, fd, &v[i].ev);
	free(v);
}

static struct xsk_epreg *reg_find_locked(struct xsk_epset *ep, int fd)
{
	for (struct xsk_epreg *r = ep ? ep->regs : NULL; r; r = r->next_in_set)
		if (r->fd == fd)
			return r;
	return NULL;
}

XSK_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct xsk *s = xsk_tab_has(fd) ? xsk_fd_get(fd) : NULL;
	struct epoll_event kev;
	struct xsk_epreg *r;
	struct xsk_epset *ep;
	int rc;

	if (!s)
		return REAL(epoll_ctl)(epfd, op, fd, ev);
	if ((unsigned)epfd >= (unsigned)xsk_tab_n || ((op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD) && !ev)) {
		xsk_fd_put(s);
		return (int)xsk_fail(EINVAL);
	}
	bool fresh = xsk_state(s) == XSK_FRESH;
	if (ev) {
		kev = *ev;
		if (!fresh)
			kev.events = xsk_ep_kernel_events(ev->events);
	}
	rc = REAL(epoll_ctl)(epfd, op, fd, ev ? &kev : NULL);
	if (rc < 0) {
		xsk_fd_put(s);
		return rc;
	}
	xsk_tab_lock();
	ep = xsk_tab_epset(epfd);
	r = reg_find_locked(ep, fd);
	switch (op) {
	case EPOLL_CTL_ADD:
		if (!ep) {
			ep = calloc(1, sizeof(*ep));
			if (!ep)
				break;
			xsk_tab_set_epset(epfd, ep);
		}
		r = calloc(1, sizeof(*r));
		if (!r)
			break;
		r->epfd = epfd;
		r->fd = fd;
		r->s = s;
		r->events = ev->events;
		r->data = ev->data;
		r->look = true;
		xsk_ep_in_regs_add(s, (ev->events & EPOLLIN) != 0);
		r->next_in_set = ep->regs;
		ep->regs = r;
		r->next_of_sock = *xsk_regs(s);
		*xsk_regs(s) = r;
		break;
	case EPOLL_CTL_MOD:
		if (r) {
			xsk_ep_in_regs_add(s, ((ev->events & EPOLLIN) != 0) - ((r->events & EPOLLIN) != 0));
			r->events = ev->events;
			r->data = ev->data;
			r->look = true;
			r->disabled = false;
			r->et_events = 0; /* re-armed: what is ready now is an edge */
		}
		break;
	case EPOLL_CTL_DEL:
		if (r) {
			struct xsk_epreg **pp = xsk_regs(s);
			xsk_ep_in_regs_add(s, -((r->events & EPOLLIN) != 0));
			xsk_ep_set_unlink_locked(r);
			while (*pp && *pp != r)
				pp = &(*pp)->next_of_sock;
			if (*pp)
				*pp = r->next_of_sock;
			free(r);
		}
		break;
	default:
		break;
	}
	bool unwatch = xsk_ep_in_regs(s) <= 0 && xsk_rx_watched(s);
	xsk_tab_unlock();
	if (unwatch) { /* no set waits for its input any more */
		xsk_lock(s);
		if (xsk_ep_in_regs(s) <= 0)
			xsk_rx_unwatch(s);
		xsk_unlock(s);
	}
	xsk_fd_put(s);
	return rc;
}

struct ep_snap {
	struct xsk *s;
	int fd;
	uint32_t events; /* 0: EPOLLONESHOT fired (its reports are dropped) */
	epoll_data_t data;
	bool look; /* look once without a kernel report (r->look) */
	bool done; /* reported by this call */
	bool gone; /* its probe went plain: the kernel's socket (xsk_plain.c) */
};

static uint32_t to_epoll(short rev)
{
	uint32_t e = 0;

	if (rev & POLLIN)
		e |= EPOLLIN | EPOLLRDNORM;
	if (rev & POLLOUT)
		e |= EPOLLOUT | EPOLLWRNORM;
	if (rev & POLLERR)
		e |= EPOLLERR;
	if (rev & POLLHUP)
		e |= EPOLLHUP;
	if (rev & POLLRDHUP)
		e |= EPOLLRDHUP;
	return e;
}

/* The events of one snapshot entry now, after progress; 0 if none is
 * to be reported (EPOLLET: no new edge).  reported: the kernel saw its
 * inner epoll fd readable, so its TCP socket is likely readable too. */
static uint32_t ep_look(int epfd, struct ep_snap *e, bool reported)
{
	struct xsk *s = e->s;

	if (xsk_probing(s) && xsk_plain_step(e->fd, s))
		e->gone = true; /* its registration is the kernel's now */
	if (e->gone)
		return 0;
	uint32_t want = e->events | EPOLLERR | EPOLLHUP;
	short ask = (short)(e->events & EPOLLIN ? 0x7fff : 0x7fff & ~POLLIN);
	uint32_t got = to_epoll(xsk_poll_one(s, ask, true, reported)) & want;
	if (got && (e->events & (EPOLLET | EPOLLONESHOT))) {
		xsk_tab_lock();
		struct xsk_epreg *r = reg_find_locked(xsk_tab_epset(epfd), e->fd);
		if (r && r->s == s && (e->events & EPOLLET) && !xsk_epoll_edge(r, s, got))
			got = 0;
		if (r && r->s == s && got && (e->events & EPOLLONESHOT)) {
			/* its inner fd must not wake the kernel's wait until
			 * the application re-arms it (EPOLL_CTL_MOD) */
			struct epoll_event off = { .events = 0, .data = r->data };
			xsk_real.epoll_ctl(epfd, EPOLL_CTL_MOD, e->fd, &off);
			r->disabled = true;
		}
		xsk_tab_unlock();
	}
	if (got && (e->events & EPOLLONESHOT))
		e->events = 0;
	return got;
}

/* Registrations looked at by every wait: writability has no fd the
 * kernel could report, and an EPOLLET registration's edge may be a new
 * message into a socket that was readable already (xsk_epoll_edge). */
static bool ep_look_always(uint32_t events)
{
	return (events & (EPOLLOUT | EPOLLET)) != 0;
}

/* epoll_wait over a set with IWARP sockets.  The kernel's set holds each
 * one's inner epoll fd, which is readable when the socket has news
 * (channel events, buffered input, or octets on a watched connection's
 * TCP socket): only those are looked at, plus the ones whose readiness
 * the kernel cannot see (ep_look_always) and new registrations, so a
 * level-triggered wait for input costs what is ready, not the set's size. */
static int ep_wait_emul_held(int epfd, struct epoll_event *evs, int max, int timeout,
			     const sigset_t *mask)
{
	int64_t deadline = timeout < 0 ? -1 : xsk_now_ms() + timeout;
	struct ep_snap *snap = NULL;
	int nsnap = 0, ret;

	if (max <= 0)
		return (int)xsk_fail(EINVAL);
	xsk_tab_lock();
	struct xsk_epset *ep = xsk_tab_epset(epfd);
	for (struct xsk_epreg *r = ep ? ep->regs : NULL; r; r = r->next_in_set)
		nsnap++;
	snap = calloc((size_t)(nsnap ? nsnap : 1), sizeof(*snap));
	nsnap = 0;
	for (struct xsk_epreg *r = ep ? ep->regs : NULL; snap && r; r = r->next_in_set) {
		if (!xsk_tab_hold_locked(r->s))
			continue; /* being closed */
		snap[nsnap++] = (struct ep_snap){
			.s = r->s, .fd = r->fd, .events = r->disabled ? 0 : r->events, .data = r->data,
			.look = r->look
		};
		r->look = false;
	}
	xsk_tab_unlock();
	if (!snap)
		return (int)xsk_fail(ENOMEM);
	for (;;) {
		int n = 0;
		int64_t probe_end = -1; /* the nearest probe's deadline */
		bool due = false;

		/* probes: each looked at, whatever the kernel reports */
		for (int i = 0; i < nsnap; i++) {
			struct ep_snap *e = &snap[i];
			if (e->gone || !xsk_probing(e->s))
				continue;
			if (xsk_plain_step(e->fd, e->s)) {
				e->gone = true;
				continue;
			}
			if (xsk_probe_fd(e->s) >= 0 &&
			    (probe_end < 0 || xsk_probe_deadline(e->s) < probe_end))
				probe_end = xsk_probe_deadline(e->s);
		}
		for (int i = 0; i < nsnap && n < max; i++) {
			struct ep_snap *e = &snap[i];
			if (!e->events || e->done || e->gone || xsk_state(e->s) == XSK_FRESH ||
			    !(e->look || ep_look_always(e->events)))
				continue;
			uint32_t got = ep_look(epfd, e, false);
			if (!got)
				continue;
			e->done = true;
			evs[n].events = got;
			evs[n].data = e->data;
			n++;
		}
		for (int i = 0; i < nsnap; i++) {
			snap[i].look = false;
			due = due || (!snap[i].gone && xsk_plain_due(snap[i].s));
		}
		int t = n ? 0 : xsk_remaining(deadline);
		/* a probe's end decides without news (its silence), or came
		 * with a look above (no wake-up left) */
		int kt = due ? 0 : t;
		if (probe_end >= 0 && (kt < 0 || xsk_remaining(probe_end) < kt))
			kt = xsk_remaining(probe_end);
		unsigned held = xsk_sig_open();
		int k = n < max ? xsk_real.epoll_pwait(epfd, evs + n, max - n, kt, mask) : 0;
		int err = errno;
		xsk_sig_close(held);
		errno = err;
		if (k < 0) {
			ret = n ? n : -1;
			break;
		}
		/* a report for an IWARP socket means "look at it" */
		int j = n;
		for (int i = n; i < n + k; i++) {
			bool ours = false;
			uint32_t got = 0;
			for (int q = 0; q < nsnap; q++) {
				struct ep_snap *e = &snap[q];
				if (e->gone || xsk_state(e->s) == XSK_FRESH ||
				    e->data.u64 != evs[i].data.u64)
					continue;
				ours = true;
				if (e->events && !e->done && !got && (got = ep_look(epfd, e, true)))
					e->done = true;
			}
			if (!ours)
				evs[j++] = evs[i];
			else if (got)
				evs[j++] = (struct epoll_event){ .events = got, .data = evs[i].data };
		}
		n = j;
		if (n > 0 || t == 0) {
			ret = n;
			break;
		}
	}
	int e = errno;
	for (int i = 0; i < nsnap; i++)
		xsk_fd_put(snap[i].s);
	free(snap);
	errno = e;
	return ret;
}

/* Signals held off but in the kernel's wait (xsk_priv.h, xsk_sig_hold). */
static int ep_wait_emul(int epfd, struct epoll_event *evs, int max, int timeout,
			const sigset_t *mask)
{
	int rc, e;

	xsk_sig_hold();
	rc = ep_wait_emul_held(epfd, evs, max, timeout, mask);
	e = errno;
	xsk_sig_release();
	errno = e;
	return rc;
}

XSK_EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
	if (!xsk_tab_epset(epfd))
		return REAL(epoll_wait)(epfd, evs, max, timeout);
	return ep_wait_emul(epfd, evs, max, timeout, NULL);
}

XSK_EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max, int timeout,
			   const sigset_t *mask)
{
	if (!xsk_tab_epset(epfd))
		return REAL(epoll_pwait)(epfd, evs, max, timeout, mask);
	return ep_wait_emul(epfd, evs, max, timeout, mask);
}

