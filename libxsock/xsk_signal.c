/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Signals and blocking calls on IWARP sockets (xsock(7) SIGNALS).
 *
 * The kernel restarts a socket call interrupted by a handler installed
 * with SA_RESTART, unless the socket has a timeout (SO_RCVTIMEO or
 * SO_SNDTIMEO); poll, select and epoll_wait always fail with EINTR.  A
 * blocking call on an IWARP socket waits in ppoll(2), which is never
 * restarted, so libxsock must know whether the handler that interrupted
 * it had SA_RESTART.
 *
 * sigaction (and signal, bsd_signal, sysv_signal, siginterrupt, sigset,
 * which glibc implements with an internal sigaction nobody can interpose)
 * installs the application's handler as given, except that the kernel
 * sees a trampoline: it counts, per thread, handler runs with and without
 * SA_RESTART, then calls the application's handler (sa_handler or
 * sa_sigaction per its SA_SIGINFO) with the same arguments.  Flags
 * (SA_RESETHAND, SA_NODEFER, SA_ONSTACK ...) and sa_mask reach the kernel
 * unchanged, plus SA_SIGINFO for the trampoline; oldact reports what the
 * application set.  SIG_DFL and SIG_IGN pass through.
 *
 * A blocking call takes a snapshot of its thread's counts when it starts
 * and waits with every signal blocked except in ppoll itself (the pselect
 * pattern), so a handler that runs at any moment of the call is seen.
 *
 * Inside the stack (xsk_priv.h, xsk_sig_hold: a thread holding one of
 * libxsock's locks) the trampoline runs no handler: it keeps the
 * signal's siginfo (XSK_SIG_KEPT of them per thread, further ones by
 * number only, a standard signal once as the kernel's pending set does)
 * and returns; the thread's last unlock raises them again on itself
 * (rt_tgsigqueueinfo with the siginfo, or tgkill where the kernel
 * refuses a positive si_code from a thread other than the main one), so
 * the handler runs there, with the mask and restart rules the kernel
 * gives it.  A handler that forks or calls back into libxsock then never
 * meets a lock of its own thread's: fork from a signal handler is as
 * safe as fork from another thread (xsock(7) FORK).  A blocking call
 * waits holding no lock, so its handlers run at once as before.
 *
 * Async-signal safety: the trampoline reads a table entry published with
 * one atomic store and touches only initial-exec thread-local counters;
 * sigaction changes the table with every signal blocked and a spin lock
 * (it is async-signal-safe itself, as POSIX requires).  Programs that
 * never install a handler pay nothing: the waits use plain ppoll. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "libxsock/xsk_priv.h"

typedef void (*xsk_handler_fn)(int);
typedef void (*xsk_action_fn)(int, siginfo_t *, void *);

/* The application's disposition of one signal.  Entries are rewritten
 * round-robin, so a trampoline still reading the previous one is safe. */
struct sig_ent {
	xsk_handler_fn handler; /* sa_handler or (SA_SIGINFO) sa_sigaction */
	int flags;
	sigset_t mask;
};
#define XSK_SIG_SLOTS 4

static struct sig_ent ents[NSIG][XSK_SIG_SLOTS];
static _Atomic unsigned cur[NSIG]; /* the slot in force */
static atomic_flag wlock = ATOMIC_FLAG_INIT;
static _Atomic bool any_handler; /* an application handler went through us */
static sigset_t sigintr; /* siginterrupt(sig, 1) (signal() without SA_RESTART) */

static __thread volatile unsigned tl_restart __attribute__((tls_model("initial-exec")));
static __thread volatile unsigned tl_intr __attribute__((tls_model("initial-exec")));

/* Held off inside the stack (xsk_priv.h): the depth, and the signals kept
 * for the thread's last unlock.  Small: initial-exec TLS is scarce when
 * libxsock is dlopen'ed (verbs/cm_rsocket.c). */
#define XSK_SIG_KEPT 2
__thread volatile unsigned xsk_sig_depth __attribute__((tls_model("initial-exec")));
__thread volatile unsigned xsk_sig_npend __attribute__((tls_model("initial-exec")));
static __thread siginfo_t tl_kept[XSK_SIG_KEPT] __attribute__((tls_model("initial-exec")));
static __thread volatile unsigned tl_nkept __attribute__((tls_model("initial-exec")));
static __thread volatile uint64_t tl_bare __attribute__((tls_model("initial-exec"))); /* bit sig-1 */
static __thread unsigned tl_fork_depth __attribute__((tls_model("initial-exec")));

static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);
static pthread_once_t sig_once = PTHREAD_ONCE_INIT;

static void sig_init_once(void)
{
	*(void **)&real_sigaction = dlsym(RTLD_NEXT, "sigaction");
	if (!real_sigaction) {
		fprintf(stderr, "libxsock: libc has no sigaction\n");
		abort();
	}
}

static _Atomic bool sig_ready; /* the constructor below ran */

__attribute__((constructor)) static void xsk_sig_ctor(void)
{
	pthread_once(&sig_once, sig_init_once);
	atomic_store(&sig_ready, true);
}

/* A handler that may wait for the thread's last unlock: not a fault the
 * kernel raised (returning would fault again at once), not SA_RESETHAND
 * (the kernel already reset it: raised again, the default would act). */
static bool may_keep(int sig, const siginfo_t *info, int flags)
{
	if (flags & SA_RESETHAND)
		return false;
	switch (sig) {
	case SIGSEGV:
	case SIGBUS:
	case SIGILL:
	case SIGFPE:
	case SIGTRAP:
	case SIGSYS:
		return !info || info->si_code <= 0; /* sent, not a fault */
	default:
		return true;
	}
}

/* In the trampoline, the thread inside the stack: keep sig for later. */
static void keep(int sig, const siginfo_t *info)
{
	uint64_t bit = 1ull << (sig - 1);
	unsigned n = tl_nkept;

	if (sig < SIGRTMIN) {
		/* a standard signal is pending once, as the kernel's */
		if (tl_bare & bit)
			return;
		for (unsigned i = 0; i < n; i++)
			if (tl_kept[i].si_signo == sig)
				return;
	}
	if (info && n < XSK_SIG_KEPT) {
		tl_kept[n] = *info;
		tl_nkept = n + 1;
	} else {
		tl_bare |= bit;
	}
	xsk_sig_npend = xsk_sig_npend + 1;
}

static void raise_kept(const siginfo_t *info, int sig, pid_t pid, pid_t tid)
{
	if (info) {
		siginfo_t si = *info;
		if (syscall(SYS_rt_tgsigqueueinfo, pid, tid, sig, &si) == 0)
			return;
	}
	syscall(SYS_tgkill, pid, tid, sig);
}

void xsk_sig_flush(void)
{
	int e = errno;
	sigset_t all, old;
	pid_t pid = getpid(), tid = (pid_t)syscall(SYS_gettid);

	/* raised with every signal blocked, taken from the kept ones first
	 * (a handler then running here may keep more); delivered when the
	 * mask comes back */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	while (xsk_sig_npend) {
		xsk_sig_npend = 0;
		unsigned n = tl_nkept;
		uint64_t bare = tl_bare;
		siginfo_t kept[XSK_SIG_KEPT];
		for (unsigned i = 0; i < n; i++)
			kept[i] = tl_kept[i];
		tl_nkept = 0;
		tl_bare = 0;
		for (unsigned i = 0; i < n; i++)
			raise_kept(&kept[i], kept[i].si_signo, pid, tid);
		for (int sig = 1; bare && sig < NSIG && sig <= 64; sig++)
			if (bare & (1ull << (sig - 1)))
				raise_kept(NULL, sig, pid, tid);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
}

void xsk_sig_fork_prepare(void)
{
	tl_fork_depth = xsk_sig_depth;
	xsk_sig_hold();
}

void xsk_sig_fork_parent(void)
{
	xsk_sig_release();
}

void xsk_sig_fork_child(void)
{
	tl_nkept = 0;
	tl_bare = 0;
	xsk_sig_npend = 0;
	xsk_sig_depth_set(tl_fork_depth);
}

int xsk_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

static void trampoline(int sig, siginfo_t *info, void *ctx)
{
	if (sig <= 0 || sig >= NSIG)
		return;
	const struct sig_ent *e =
		&ents[sig][atomic_load_explicit(&cur[sig], memory_order_acquire) % XSK_SIG_SLOTS];
	xsk_handler_fn h = e->handler;
	int flags = e->flags;

	if (xsk_sig_depth && h != SIG_DFL && h != SIG_IGN && may_keep(sig, info, flags)) {
		keep(sig, info); /* run at the thread's last unlock */
		return;
	}
	if (flags & SA_RESTART)
		tl_restart++;
	else
		tl_intr++;
	if (h == SIG_DFL || h == SIG_IGN)
		return; /* changed under us: the new disposition holds from now on */
	if (flags & SA_SIGINFO)
		((xsk_action_fn)(void (*)(void))h)(sig, info, ctx);
	else
		h(sig);
}

static void lock_all(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, old);
	while (atomic_flag_test_and_set_explicit(&wlock, memory_order_acquire))
		sched_yield();
}

static void unlock_all(const sigset_t *old)
{
	atomic_flag_clear_explicit(&wlock, memory_order_release);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

static bool is_handler(const struct sigaction *act)
{
	return act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN;
}

static int sigaction_held(int sig, const struct sigaction *act, struct sigaction *oldact);

/* Before libxsock's constructors only a sanitizer's runtime starting (its
 * own fault handlers): libc's, with nothing kept, found without
 * pthread_once (one thread runs yet). */
XSK_EXPORT XSK_UNINSTRUMENTED int sigaction(int sig, const struct sigaction *act,
					     struct sigaction *oldact)
{
	if (!atomic_load(&sig_ready)) {
		if (!real_sigaction)
			*(void **)&real_sigaction = dlsym(RTLD_NEXT, "sigaction");
		return real_sigaction(sig, act, oldact);
	}
	return sigaction_held(sig, act, oldact);
}

static int sigaction_held(int sig, const struct sigaction *act, struct sigaction *oldact)
{
	struct sigaction k, kold;
	sigset_t omask;
	unsigned prev, next;
	int rc, e;

	pthread_once(&sig_once, sig_init_once);
	if (sig <= 0 || sig >= NSIG || sig == SIGKILL || sig == SIGSTOP)
		return real_sigaction(sig, act, oldact);
	lock_all(&omask);
	prev = atomic_load_explicit(&cur[sig], memory_order_relaxed) % XSK_SIG_SLOTS;
	next = prev;
	if (act && act->sa_sigaction == trampoline) {
		/* our own handler, read by someone who bypassed us (a raw
		 * system call): it stays in force as it was */
		k = *act;
		k.sa_flags |= SA_SIGINFO;
		act = &k;
	} else if (act && is_handler(act)) {
		next = (prev + 1) % XSK_SIG_SLOTS;
		ents[sig][next] = (struct sig_ent){
			.handler = (act->sa_flags & SA_SIGINFO) ?
					   (xsk_handler_fn)(void (*)(void))act->sa_sigaction :
					   act->sa_handler,
			.flags = act->sa_flags,
			.mask = act->sa_mask,
		};
		atomic_store_explicit(&cur[sig], next, memory_order_release);
		k = *act;
		k.sa_sigaction = trampoline;
		k.sa_flags |= SA_SIGINFO;
		act = &k;
		atomic_store_explicit(&any_handler, true, memory_order_relaxed);
	}
	rc = real_sigaction(sig, act, &kold);
	e = errno;
	if (rc < 0 && next != prev)
		atomic_store_explicit(&cur[sig], prev, memory_order_release);
	if (rc == 0 && oldact) {
		*oldact = kold;
		if (kold.sa_sigaction == trampoline) {
			const struct sig_ent *o = &ents[sig][prev];
			oldact->sa_flags = o->flags;
			oldact->sa_mask = o->mask;
			if (o->flags & SA_SIGINFO)
				oldact->sa_sigaction = (xsk_action_fn)(void (*)(void))o->handler;
			else
				oldact->sa_handler = o->handler;
		}
	}
	unlock_all(&omask);
	errno = e;
	return rc;
}

/* glibc exports the same function under this name too. */
XSK_EXPORT int __sigaction(int sig, const struct sigaction *act, struct sigaction *oldact);
XSK_EXPORT XSK_UNINSTRUMENTED int __sigaction(int sig, const struct sigaction *act,
					       struct sigaction *oldact)
{
	return sigaction(sig, act, oldact);
}

static sighandler_t install(int sig, sighandler_t h, int flags, bool self_mask)
{
	struct sigaction a = { .sa_handler = h, .sa_flags = flags }, old;

	if (h == SIG_ERR || sig <= 0 || sig >= NSIG) {
		errno = EINVAL;
		return SIG_ERR;
	}
	sigemptyset(&a.sa_mask);
	if (self_mask)
		sigaddset(&a.sa_mask, sig);
	if (sigaction(sig, &a, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

/* BSD semantics, as glibc's signal(): SA_RESTART unless siginterrupt()
 * said otherwise, the signal blocked in its handler. */
XSK_EXPORT sighandler_t signal(int sig, sighandler_t h)
{
	int flags = sig > 0 && sig < NSIG && sigismember(&sigintr, sig) == 1 ? 0 : SA_RESTART;

	return install(sig, h, flags, true);
}

XSK_EXPORT sighandler_t bsd_signal(int sig, sighandler_t h);
XSK_EXPORT sighandler_t bsd_signal(int sig, sighandler_t h)
{
	return signal(sig, h);
}

/* System V semantics: one-shot, not blocked in its handler, no restart. */
XSK_EXPORT sighandler_t sysv_signal(int sig, sighandler_t h);
XSK_EXPORT sighandler_t sysv_signal(int sig, sighandler_t h)
{
	return install(sig, h, SA_RESETHAND | SA_NODEFER, false);
}

XSK_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t h);
XSK_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t h)
{
	return sysv_signal(sig, h);
}

XSK_EXPORT int siginterrupt(int sig, int flag)
{
	struct sigaction a;

	if (sig <= 0 || sig >= NSIG || sigaction(sig, NULL, &a) < 0) {
		errno = EINVAL;
		return -1;
	}
	if (flag) {
		sigaddset(&sigintr, sig);
		a.sa_flags &= ~SA_RESTART;
	} else {
		sigdelset(&sigintr, sig);
		a.sa_flags |= SA_RESTART;
	}
	return sigaction(sig, &a, NULL);
}

/* System V sigset(3): SIG_HOLD blocks; a disposition unblocks. */
XSK_EXPORT sighandler_t sigset(int sig, sighandler_t h)
{
	struct sigaction a = { .sa_handler = h }, old;
	sigset_t one, prev;

	if (sig <= 0 || sig >= NSIG || h == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	sigemptyset(&one);
	sigaddset(&one, sig);
	if (h == SIG_HOLD) {
		if (sigaction(sig, NULL, &old) < 0 || pthread_sigmask(SIG_BLOCK, &one, &prev))
			return SIG_ERR;
		return sigismember(&prev, sig) == 1 ? SIG_HOLD : old.sa_handler;
	}
	sigemptyset(&a.sa_mask);
	if (sigaction(sig, &a, &old) < 0 || pthread_sigmask(SIG_UNBLOCK, &one, &prev))
		return SIG_ERR;
	return sigismember(&prev, sig) == 1 ? SIG_HOLD : old.sa_handler;
}

/* ---- waiting ------------------------------------------------------------------ */

void xsk_sig_snap(struct xsk_sigsnap *snap)
{
	snap->restart = tl_restart;
	snap->intr = tl_intr;
}

static int sig_seen(const struct xsk_sigsnap *snap)
{
	if (tl_intr != snap->intr)
		return -EINTR;
	if (tl_restart != snap->restart)
		return -XSK_ERESTART;
	return 0;
}

int xsk_sig_poll(struct pollfd *p, nfds_t n, int timeout_ms, struct xsk_sigsnap *snap)
{
	struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000 };
	const struct timespec *tp = timeout_ms < 0 ? NULL : &ts;
	sigset_t all, old;
	int rc, e;
	unsigned held = xsk_sig_open(); /* the held-back signals interrupt it */

	if (!atomic_load_explicit(&any_handler, memory_order_relaxed)) {
		/* no handler of the application's is known: the kernel's
		 * EINTR is all there is to go on */
		rc = xsk_real.ppoll(p, n, tp, NULL);
		rc = rc < 0 ? -errno : 0;
		xsk_sig_close(held);
		return rc;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = sig_seen(snap);
	if (!rc && xsk_real.ppoll(p, n, tp, &old) < 0) {
		e = errno;
		rc = e == EINTR ? sig_seen(snap) : -e;
		if (!rc)
			rc = -EINTR; /* a handler libxsock did not install */
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	xsk_sig_close(held);
	return rc;
}
