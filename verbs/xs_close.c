/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Closing: the owner's disconnect and release, the delayed FIN, the
 * lingering close, and the engine's late tick that times them (and looks
 * at the other timed lists: RNR, redials, kicks, spare listeners).
 *
 * A TCP socket closed with unread octets in its receive queue answers with
 * a RST, and the peer's kernel then drops what it had not yet delivered to
 * its application: the tail of a stream the peer's ULP already counted as
 * sent (seen with siw and rsockets: a credit update arriving just as one
 * side closed).  The kernel's TCP avoids that by finishing the close
 * itself; here the engine does: a connection whose owner closes before
 * the peer's FIN goes to CONN_LINGER, sends its FIN, reads and drops what
 * still arrives and closes at the peer's FIN or after XSOCK_LINGER_MS.
 * Process exit waits for these (bounded, xs_engine_exit_wait). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/xs_clock.h"
#include "verbs/xs_engine_priv.h"
#include "verbs/xs_internal.h"
#include "verbs/xs_roce.h"
#include "verbs/xs_priv_abi.h"

/* The late list (a delayed FIN, a lingering close) is looked at this often. */
#define XS_LATE_TICK_MS 10

static unsigned fin_delay(const struct xs_conn *c)
{
	return xs_eng_peer_is_xsock(c) ? 0 : xs_config()->fin_delay_ms;
}

void xs_close_late_arm(void)
{
	xs_eng_timeout_arm(&xs_eng.late_armed, &xs_eng.late_ts, XS_LATE_TICK_MS * 1000u * 1000u,
			   TAG_LATE);
}

static void late_add(struct xs_conn *c)
{
	if (c->on_late_list)
		return;
	xs_eng_ref(c);
	c->on_late_list = true;
	c->late_next = xs_eng.late;
	xs_eng.late = c;
	pthread_mutex_lock(&xs_eng.mu);
	xs_eng.late_count++;
	xs_eng.late_pid = getpid();
	pthread_mutex_unlock(&xs_eng.mu);
	xs_close_late_arm();
}

/* Our FIN, now or (XSOCK_FIN_DELAY_MS) a little later from the engine.
 * Linux siw fails its own last Send with LOC_QP_OP_ERR when the peer's
 * FIN arrives before that Send's completion, even though the Send is on
 * the wire (docs/interop.md); a peer whose completion lags its transmit
 * (siw under emulation) needs the pause.  The peer's own FIN still ends
 * the connection at once (xs_rx_fail); an xsock peer gets the FIN at once. */
void xs_close_fin(struct xs_conn *c)
{
	unsigned delay = fin_delay(c);

	if (!delay) {
		xs_eng_shut(c, SHUT_WR);
	} else if (!xs_eng_on_thread) {
		xs_eng_command(c, CMD_FIN);
	} else if (!c->fin_due_ms) {
		c->fin_due_ms = xs_now_ms() + delay;
		late_add(c);
	}
}

static void linger_end(struct xs_conn *c)
{
	c->state = CONN_CLOSED;
	xs_eng_shut(c, SHUT_RDWR);
	if (!c->engine_ref_dropped) {
		c->engine_ref_dropped = true;
		xs_eng_unref(c); /* the late list's reference keeps c for now */
	}
}

/* The owner let go of an established connection (CMD_CLOSE): linger
 * rather than close, unless lingering is off or another process may
 * hold the socket.  Returns false when the caller closes as before. */
bool xs_close_linger_start(struct xs_conn *c, unsigned flags)
{
	unsigned linger = xs_config()->linger_ms;
	bool fin_now = false;

	if (!linger || c->state != CONN_ESTABLISHED ||
	    atomic_load_explicit(&c->fork_mode, memory_order_acquire) != XS_FORK_MINE)
		return false;
	pthread_mutex_lock(&c->tx_mu);
	if (!c->fin_sent) {
		c->fin_sent = true;
		fin_now = true;
	}
	pthread_mutex_unlock(&c->tx_mu);
	if (fin_now || (flags & CMD_FIN))
		xs_close_fin(c);
	c->state = CONN_LINGER;
	xs_stat_state(c->stat, XS_STAT_LINGER, 0);
	xs_stat_conn_ended(c->stat);
	c->linger_end_ms = xs_now_ms() + fin_delay(c) + linger;
	late_add(c);
	xs_eng_arm(c); /* a parked connection has no poll armed */
	return true;
}

/* Input on a lingering connection: drop it; the peer's FIN or an error ends it. */
void xs_close_linger_input(struct xs_conn *c)
{
	for (;;) {
		ssize_t n = recv(c->fd, c->rbuf, XS_RBUF, MSG_DONTWAIT);

		if (n > 0 || (n < 0 && errno == EINTR))
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			xs_eng_arm(c);
			return;
		}
		linger_end(c); /* its shutdown sends a FIN still due */
		return;
	}
}

void xs_close_late_scan(void)
{
	uint64_t now = xs_now_ms();
	struct xs_conn **pp = &xs_eng.late;

	xs_eng.late_armed = false;
	while (*pp) {
		struct xs_conn *c = *pp;

		/* a closed connection's shutdown(SHUT_RDWR) sent the FIN */
		if (c->fin_due_ms && (now >= c->fin_due_ms || c->state == CONN_CLOSED)) {
			c->fin_due_ms = 0;
			if (c->state != CONN_CLOSED)
				xs_eng_shut(c, SHUT_WR);
		}
		if (c->state == CONN_LINGER && now >= c->linger_end_ms)
			linger_end(c);
		if (c->fin_due_ms || c->state == CONN_LINGER) {
			pp = &c->late_next;
			continue;
		}
		*pp = c->late_next;
		c->on_late_list = false;
		pthread_mutex_lock(&xs_eng.mu);
		if (--xs_eng.late_count == 0)
			pthread_cond_broadcast(&xs_eng.late_cv);
		pthread_mutex_unlock(&xs_eng.mu);
		xs_eng_unref(c); /* the list's */
	}
	xs_rx_rnr_scan(now);
	xs_connect_redial_scan(now);
	xs_tx_kick_scan(now);
	if (xs_eng.late || xs_eng.rnr || xs_eng.redial || xs_eng.kick || xs_spare_expire(now))
		xs_close_late_arm();
}

void xs_conn_disconnect(struct xs_conn *c)
{
	pthread_mutex_lock(&c->tx_mu);
	c->disconnect_asked = true;
	bool now = !c->tx_busy && !c->fin_sent && !c->rr_count;
	if (now)
		c->fin_sent = true;
	pthread_mutex_unlock(&c->tx_mu);
	if (now)
		xs_close_fin(c);
	else
		xs_eng_command(c, CMD_TX);
}

void xs_conn_put(struct xs_conn *c)
{
	/* after this no upcall runs: the engine makes them under rx_mu */
	if (!xs_eng_on_thread)
		pthread_mutex_lock(&c->rx_mu);
	c->owner_gone = true;
	c->ops = NULL;
	c->qp = NULL;
	c->closed_cb = NULL;
	if (!xs_eng_on_thread)
		xs_rx_unlock(c);
	pthread_mutex_lock(&c->tx_mu);
	c->dead = true;
	pthread_cond_broadcast(&c->tx_cv);
	pthread_mutex_unlock(&c->tx_mu);
	/* a forked child's copy of a connection another process may use (a
	 * listener's queued request closed with it, a pre-fork server's
	 * worker) with no engine of its own started: the close is the
	 * engine's CMD_CLOSE without a shutdown, here, without a thread and a
	 * ring made only for it */
	pthread_mutex_lock(&xs_eng.mu);
	bool engine_less = !xs_eng.started && !c->poll_armed && !c->cmd_flags &&
			   atomic_load(&c->fork_mode) != XS_FORK_MINE;
	pthread_mutex_unlock(&xs_eng.mu);
	if (engine_less) {
		c->state = CONN_CLOSED;
		if (!c->engine_ref_dropped) {
			c->engine_ref_dropped = true;
			xs_eng_unref(c);
		}
	} else {
		xs_eng_command(c, CMD_CLOSE);
	}
	xs_eng_unref(c); /* the owner's reference */
}

/* Process exit: give lingering connections and delayed FINs their time
 * (the engine thread dies with the process, and the kernel would reset a
 * socket closed with unread input).  Bounded by the settings.  From
 * exit_destructor for exit(); libxsock calls it for _exit (xs_priv_abi.h). */
static void xs_engine_exit_wait(void)
{
	const struct xs_config *cfg = xs_config();

	if (!xs_eng.started || (!cfg->fin_delay_ms && !cfg->linger_ms))
		return;
	struct timespec ts =
		xs_abstime_ns(((uint64_t)cfg->fin_delay_ms + cfg->linger_ms + 100) * 1000000u);
	pthread_mutex_lock(&xs_eng.mu);
	/* the disconnects and closes just asked for are commands the engine
	 * may not have run yet: two whole passes from now have run them */
	unsigned target = xs_eng.passes + 2;
	while ((int)(target - xs_eng.passes) > 0) {
		pthread_mutex_unlock(&xs_eng.mu);
		xs_eng_wake();
		pthread_mutex_lock(&xs_eng.mu);
		if ((int)(target - xs_eng.passes) > 0 &&
		    pthread_cond_timedwait(&xs_eng.late_cv, &xs_eng.mu, &ts) == ETIMEDOUT)
			break;
	}
	while (xs_eng.late_count && xs_eng.late_pid == getpid())
		if (pthread_cond_timedwait(&xs_eng.late_cv, &xs_eng.mu, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&xs_eng.mu);
}

static _Atomic(void (*)(void)) xs_exit_close_fn;

XS_EXPORT void xsock_priv_set_exit_close(void (*fn)(void))
{
	atomic_store(&xs_exit_close_fn, fn);
}

void xs_run_exit_close(void)
{
	void (*fn)(void) = atomic_exchange(&xs_exit_close_fn, NULL);

	if (fn)
		fn();
}

XS_EXPORT void xsock_priv_exit_wait(void)
{
	xs_engine_exit_wait();
	xs_roce_exit_wait();
}

/* The library's one destructor for exit(): libxsock's sockets closed
 * first, then both engines' waits.  As two destructors (this wait here,
 * the close and RoCE's wait in xs_roce_cm.c) their order was the link's:
 * the iWARP wait ran before the close had queued its CMD_CLOSE, and the
 * process could end before the engine ran it (1 exit in 10 of a client
 * with its connection open: no FIN after a linger, no XSOCK_STAT_LOG
 * line; CI's test-xsock-exec.sh "chain").  Not for _exit, whose callers
 * rely on stdio not being flushed: libxsock closes its sockets itself
 * there, then calls xsock_priv_exit_wait. */
__attribute__((destructor)) static void exit_destructor(void)
{
	xs_run_exit_close();
	xsock_priv_exit_wait();
}
