/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The fork gate (xsock(7) FORK): a fork waits, a bounded while, until no
 * other thread is inside the stack, so the child's copy of the stack, and
 * of the allocator the stack calls, is never caught half-way through a
 * call of another thread's.  glibc's fork takes malloc's locks, but a
 * sanitizer's allocator does not lock itself around fork (gcc 12's
 * libasan): a child forked while another thread was inside it waited on
 * its first free for ever (tests/test-xsock-fork-signal under ASan).
 *
 * "Inside the stack" is xsk_sig_depth > 0 (xsk_priv.h): a thread holding
 * one of libxsock's locks or in the held part of an interposed call, not
 * in its waits.  Each thread that enters the stack registers its depth
 * word once, in a record of its own (mmap'ed, and the list under a spin
 * lock with every signal blocked: the first entry may be in a signal
 * handler); a pthread key's destructor drops the record at thread exit.
 * A thread in fork prepare itself is not waited for (two threads forking
 * at once).  The wait gives up after XSK_GATE_MAX_MS (a thread blocked
 * in the kernel inside the stack would hold every fork up), with one line
 * under XSOCK_DEBUG, and the fork goes on as it did without the gate. */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>

#include "libxsock/xsk_config.h"
#include "libxsock/xsk_priv.h"

#define XSK_GATE_MAX_MS 200

struct gate_thr {
	volatile unsigned *depth; /* the thread's xsk_sig_depth */
	volatile bool *forking;
	struct gate_thr *next;
};

static atomic_flag gate_lock = ATOMIC_FLAG_INIT;
static struct gate_thr *gate_list;
static pthread_key_t gate_key;
static bool gate_key_ok;

__thread volatile bool xsk_gate_known __attribute__((tls_model("initial-exec")));
static __thread volatile bool tl_forking __attribute__((tls_model("initial-exec")));
static __thread struct gate_thr *tl_rec __attribute__((tls_model("initial-exec")));

static void gate_lock_all(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, old);
	while (atomic_flag_test_and_set_explicit(&gate_lock, memory_order_acquire))
		sched_yield();
}

static void gate_unlock_all(const sigset_t *old)
{
	atomic_flag_clear_explicit(&gate_lock, memory_order_release);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

static void gate_unlink(struct gate_thr *r)
{
	struct gate_thr **pp = &gate_list;

	while (*pp && *pp != r)
		pp = &(*pp)->next;
	if (*pp)
		*pp = r->next;
}

/* The key's destructor: the exiting thread's record goes. */
static void gate_thread_gone(void *p)
{
	struct gate_thr *r = p;
	sigset_t old;

	gate_lock_all(&old);
	gate_unlink(r);
	gate_unlock_all(&old);
	if (tl_rec == r)
		tl_rec = NULL;
	munmap(r, sizeof(*r));
}

__attribute__((constructor)) static void xsk_gate_ctor(void)
{
	gate_key_ok = pthread_key_create(&gate_key, gate_thread_gone) == 0;
}

void xsk_gate_register(void)
{
	struct gate_thr *r;
	sigset_t old;

	xsk_gate_known = true; /* once, whatever happens below */
	if (!gate_key_ok)
		return; /* no way to learn of its exit: not gated */
	r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r == MAP_FAILED)
		return;
	r->depth = &xsk_sig_depth;
	r->forking = &tl_forking;
	gate_lock_all(&old);
	r->next = gate_list;
	gate_list = r;
	gate_unlock_all(&old);
	tl_rec = r;
	pthread_setspecific(gate_key, r); /* a first-level key: no allocation */
}

static int64_t gate_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether another thread, not forking itself, is inside the stack. */
static bool gate_busy(void)
{
	bool busy = false;
	sigset_t old;

	gate_lock_all(&old);
	for (struct gate_thr *r = gate_list; r && !busy; r = r->next)
		busy = r != tl_rec && __atomic_load_n(r->depth, __ATOMIC_RELAXED) > 0 &&
		       !__atomic_load_n(r->forking, __ATOMIC_RELAXED);
	gate_unlock_all(&old);
	return busy;
}

void xsk_gate_fork_wait(void)
{
	int64_t t0 = gate_now_ms();

	__atomic_store_n(&tl_forking, true, __ATOMIC_RELAXED);
	while (gate_busy()) {
		if (gate_now_ms() - t0 >= XSK_GATE_MAX_MS) {
			if (xsk_debug())
				fprintf(stderr,
					"libxsock: fork: a thread stayed inside the stack %d ms; "
					"forking without waiting for it\n",
					XSK_GATE_MAX_MS);
			return;
		}
		sched_yield();
	}
}

void xsk_gate_fork_parent(void)
{
	__atomic_store_n(&tl_forking, false, __ATOMIC_RELAXED);
}

/* The child is this thread alone: the other threads' records go (their
 * threads are not in the child, their depth words are frozen). */
void xsk_gate_fork_child(void)
{
	struct gate_thr *r = gate_list;

	__atomic_store_n(&tl_forking, false, __ATOMIC_RELAXED);
	atomic_flag_clear(&gate_lock);
	gate_list = NULL;
	while (r) {
		struct gate_thr *next = r->next;
		if (r == tl_rec) {
			r->next = NULL;
			gate_list = r;
		} else {
			munmap(r, sizeof(*r));
		}
		r = next;
	}
}
