/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* fork from a signal handler (xsock(7) FORK; issue 30, "fork from
 * anywhere"), as the postgres postmaster does: the main thread serves an
 * IWARP_MODE listener in a select()+accept() loop (each connection read,
 * answered, closed: connections accepted and torn down all the time) while
 * a client process connects and closes in a loop; a second thread sends
 * the main thread SIGUSR1 in a tight loop and forks now and then itself
 * (the ordinary case: another thread is in the stack).  The handler forks;
 * the child closes its copy of the listener (as a postgres backend does)
 * and _exits; the main loop reaps the children outside the handler.
 *
 * A fork whose handler interrupted libxsock while it held a lock (the
 * listener's s->mu in xsk_progress, the fd table's, ...) used to deadlock
 * in libxsock's fork handlers.  A watchdog thread reports where the test
 * stood and aborts (SIGKILLing the children) if nothing moves for
 * WATCHDOG_S seconds, or if a child does not exit: the test fails, it does
 * not hang.  Every accepted connection must be an IWARP socket
 * (getsockopt(SOL_IWARP, IWARP_MODE)). */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/xs_test.h"
#include "tests/xs_test_sock.h"

#define NFORK 300 /* forks in the handler */
#define NFORK_THREAD 30 /* forks by the second thread, outside a handler */
#define MIN_ACC 40 /* connections accepted (and torn down), at least */
#define MAX_S 60 /* the run's bound */
#define WATCHDOG_S 20 /* nothing moved for this long: a deadlock */
#define MAXPID (NFORK + NFORK_THREAD + 8)

static int lfd = -1;
static pthread_t main_thr;
static _Atomic bool stop;
static _Atomic unsigned forks, fork_fail, accepted, reaped, sigs;
static _Atomic pid_t pids[MAXPID];
static _Atomic unsigned npids;
static const char *volatile stage = "start";

static void note_pid(pid_t p)
{
	unsigned i = atomic_fetch_add(&npids, 1);

	if (i < MAXPID)
		atomic_store(&pids[i], p);
}

/* The child: its copy of the listener closed (postgres' backends close
 * the postmaster's ports), then _exit. */
static void child_work(void)
{
	close(lfd);
	_exit(0);
}

static void on_usr1(int sig)
{
	int e = errno;
	pid_t p;

	(void)sig;
	atomic_fetch_add(&sigs, 1);
	if (atomic_load(&forks) >= NFORK || atomic_load(&stop)) {
		errno = e;
		return;
	}
	p = fork();
	if (p == 0)
		child_work();
	if (p > 0) {
		note_pid(p);
		atomic_fetch_add(&forks, 1);
	} else {
		atomic_fetch_add(&fork_fail, 1);
	}
	errno = e;
}

static void say(const char *m)
{
	if (write(2, m, strlen(m)) < 0)
		_exit(1);
}

static void report(const char *why)
{
	char b[256];

	snprintf(b, sizeof(b),
		 "test-xsock-fork-signal: %s in %s: forks %u (failed %u), signals %u, "
		 "accepted %u, reaped %u\n",
		 why, stage, atomic_load(&forks), atomic_load(&fork_fail), atomic_load(&sigs),
		 atomic_load(&accepted), atomic_load(&reaped));
	say(b);
}

/* A child reaped: its slot cleared, so what is left are the live ones. */
static void forget_pid(pid_t p)
{
	unsigned n = atomic_load(&npids);

	for (unsigned i = 0; i < n && i < MAXPID; i++)
		if (atomic_load(&pids[i]) == p)
			atomic_store(&pids[i], 0);
}

/* Where each child that did not exit stands: its threads' stacks (gdb,
 * when the machine has it), so a CI log says which lock it waits on. */
static void show_stuck(void)
{
	unsigned n = atomic_load(&npids), shown = 0;

	for (unsigned i = 0; i < n && i < MAXPID && shown < 3; i++) {
		pid_t p = atomic_load(&pids[i]);
		char cmd[160];
		if (p <= 0)
			continue;
		shown++;
		fprintf(stderr, "test-xsock-fork-signal: child %d did not exit:\n", (int)p);
		snprintf(cmd, sizeof(cmd),
			 "gdb -p %d -batch -nx -ex 'thread apply all bt' 2>/dev/null | grep '^#\\|^Thread' >&2",
			 (int)p);
		if (system(cmd) != 0)
			fprintf(stderr, "  (no gdb backtrace)\n");
	}
}

static void kill_children(void)
{
	unsigned n = atomic_load(&npids);

	for (unsigned i = 0; i < n && i < MAXPID; i++) {
		pid_t p = atomic_load(&pids[i]);
		if (p > 0)
			kill(p, SIGKILL);
	}
}

static void block_usr1(void)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
}

/* Nothing moved for WATCHDOG_S seconds: a fork (or its child) is stuck. */
static void *watchdog(void *arg)
{
	unsigned last = 0, idle = 0;

	(void)arg;
	block_usr1();
	while (!atomic_load(&stop)) {
		unsigned now = atomic_load(&forks) + atomic_load(&accepted) + atomic_load(&reaped);
		sleep(1);
		if (now != last) {
			last = now;
			idle = 0;
		} else if (++idle >= WATCHDOG_S) {
			report("DEADLOCK (no progress for 20 s)");
			kill_children();
			abort();
		}
	}
	return NULL;
}

/* Signals at the main thread in a tight loop; a fork of its own now and
 * then, while the main thread is in the stack. */
static void *kicker(void *arg)
{
	unsigned own = 0, round = 0;
	struct timespec ts = { 0, 2000 * 1000 };

	(void)arg;
	block_usr1();
	while (!atomic_load(&stop)) {
		pthread_kill(main_thr, SIGUSR1);
		nanosleep(&ts, NULL);
		if (own < NFORK_THREAD && ++round % 20 == 0) {
			pid_t p = fork();
			if (p == 0)
				child_work();
			if (p > 0) {
				note_pid(p);
				own++;
			}
		}
	}
	return NULL;
}

/* The client process: connect, one octet each way, close; until the
 * listener is gone or it is killed. */
static int client(const struct sockaddr_in *addr)
{
	for (unsigned n = 0;; n++) {
		int fd = xs_sock_connect(1, addr), on = 0;
		socklen_t ol = sizeof(on);
		char c = 'x';
		if (fd < 0)
			return n > 0 ? 0 : 1;
		if (getsockopt(fd, SOL_IWARP, IWARP_MODE, &on, &ol) < 0 || on != 1) {
			fprintf(stderr, "client: connection %u is not an IWARP socket\n", n);
			return 1;
		}
		if (xs_write_full(fd, &c, 1) < 0 || xs_read_full(fd, &c, 1) < 0 || c != 'y') {
			close(fd);
			continue; /* the server went away */
		}
		close(fd);
	}
}

static int client_st = -1;

/* The children that ended (the client's status kept for the end). */
static void reap(pid_t client_pid, int *bad)
{
	int st;
	pid_t p;

	while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
		if (p == client_pid) {
			client_st = st;
			continue;
		}
		atomic_fetch_add(&reaped, 1);
		forget_pid(p);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			if (!*bad)
				fprintf(stderr, "child %d: %s %d\n", (int)p,
					WIFEXITED(st) ? "exit" : "signal",
					WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			(*bad)++;
		}
	}
}

/* One connection: its octet read, answered, the socket closed. */
static int serve(int fd)
{
	int on = 0;
	socklen_t ol = sizeof(on);
	char c;

	if (getsockopt(fd, SOL_IWARP, IWARP_MODE, &on, &ol) < 0 || on != 1) {
		fprintf(stderr, "accepted connection is not an IWARP socket\n");
		return -1;
	}
	fcntl(fd, F_SETFL, 0);
	if (xs_read_full(fd, &c, 1) == 0 && c == 'x') {
		c = 'y';
		xs_write_full(fd, &c, 1);
	}
	close(fd);
	return 0;
}

/* Under TSan, run again with libxsock ahead of libtsan in the lookup
 * order.  Linked after it, libxsock's signal trampoline is reached only
 * through TSan's handler, which queues a signal libxsock released and
 * delivers it at its next interceptor, inside one of libxsock's critical
 * sections; preloaded, TSan delivers into the trampoline, which holds the
 * handler as it holds the kernel's.  report_signal_unsafe=0: the children
 * live out their lives in the handler that forked them, and the stack's
 * fork handlers allocate (the parent's relay threads, the child's frees):
 * a fork from a handler is safe on the terms of glibc's own fork in a
 * threaded process, which takes malloc's locks (xsock(7) FORK). */
static void tsan_reexec(char **argv)
{
#ifdef __SANITIZE_THREAD__
	const char *pre = getenv("LD_PRELOAD"), *opt = getenv("TSAN_OPTIONS");
	void *sym = dlsym(RTLD_DEFAULT, "xsock_reg");
	char lp[4096], to[1024];
	Dl_info info;

	if (getenv("XS_TSAN_REEXEC") || !sym || !dladdr(sym, &info) || !info.dli_fname)
		return;
	snprintf(lp, sizeof(lp), "%s%s%s", info.dli_fname, pre ? " " : "", pre ? pre : "");
	snprintf(to, sizeof(to), "%s%sreport_signal_unsafe=0", opt ? opt : "", opt ? " " : "");
	setenv("LD_PRELOAD", lp, 1);
	setenv("TSAN_OPTIONS", to, 1);
	setenv("XS_TSAN_REEXEC", "1", 1);
	execv("/proc/self/exe", argv);
	perror("test-xsock-fork-signal: execv"); /* then as it is */
#else
	(void)argv;
#endif
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr;
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_RESTART };
	pthread_t wd, kt;
	pid_t cpid;
	int bad = 0, notiw = 0, cst = 0;
	time_t t0;

	(void)argc;
	tsan_reexec(argv);
	lfd = xs_sock_listen(1, &addr);
	REQUIRE(lfd >= 0);
	cpid = fork();
	REQUIRE(cpid >= 0);
	if (cpid == 0) {
		close(lfd);
		_exit(client(&addr));
	}
	REQUIRE(fcntl(lfd, F_SETFL, O_NONBLOCK) == 0);
	sigemptyset(&sa.sa_mask);
	REQUIRE(sigaction(SIGUSR1, &sa, NULL) == 0);
	main_thr = pthread_self();
	REQUIRE(pthread_create(&wd, NULL, watchdog, NULL) == 0);
	REQUIRE(pthread_create(&kt, NULL, kicker, NULL) == 0);

	stage = "the accept loop";
	t0 = time(NULL);
	while ((atomic_load(&forks) < NFORK || atomic_load(&accepted) < MIN_ACC) &&
	       time(NULL) - t0 < MAX_S) {
		fd_set r;
		struct timeval tv = { 0, 100 * 1000 };
		FD_ZERO(&r);
		FD_SET(lfd, &r);
		if (select(lfd + 1, &r, NULL, NULL, &tv) > 0) {
			int fd;
			while ((fd = accept(lfd, NULL, NULL)) >= 0) {
				atomic_fetch_add(&accepted, 1);
				notiw += serve(fd) < 0;
			}
		}
		reap(cpid, &bad);
	}
	atomic_store(&stop, true);
	stage = "joining the threads";
	pthread_join(kt, NULL);
	pthread_join(wd, NULL);

	/* the children must all end: a stuck one fails the test */
	stage = "reaping the children";
	for (int i = 0; i < 100 && atomic_load(&reaped) < atomic_load(&npids); i++) {
		reap(cpid, &bad);
		usleep(100 * 1000);
	}
	if (atomic_load(&reaped) < atomic_load(&npids)) {
		report("a child did not exit (deadlocked after fork?)");
		show_stuck();
		kill_children();
		xs_test_failures++;
	}
	close(lfd);
	if (client_st < 0) {
		kill(cpid, SIGTERM);
		waitpid(cpid, &cst, 0);
	} else {
		cst = client_st;
	}
	report("done");
	CHECK(atomic_load(&forks) >= NFORK / 3); /* else too slow a machine, not stuck */
	CHECK(atomic_load(&accepted) >= MIN_ACC);
	CHECK(notiw == 0);
	CHECK(bad == 0);
	CHECK(WIFSIGNALED(cst) || (WIFEXITED(cst) && WEXITSTATUS(cst) == 0));
	return xs_test_result();
}
