/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* What each destination turned out to be: an iWARP peer (an xsock, siw,
 * rsockets) or a plain TCP server, remembered for XSOCK_PLAIN_TTL_S so that
 * only the first connection to a plain server pays for the MPA try, and a
 * connection to a known iWARP server never falls back (xsk_conn.c).
 *
 * The table is the user's, shared by all of the user's processes (a
 * client that runs once per request, as curl or a health check, learns
 * from the ones before it): /dev/shm/xsock-peers-UID, mode 0600, used only
 * if this user owns it and nobody else may write it, else one of the
 * process's own.  Its lock is a process-shared robust mutex that is only
 * ever tried: a fork from a signal handler that interrupted a lookup, or a
 * process killed holding it, never makes anyone wait; a busy table is an
 * unknown destination and a lesson skipped. */
#include "config.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libxsock/xsk_intercept.h"

#define XSK_PEER_SLOTS 256
#define XSK_PEER_MAGIC 0x78737031u /* "xsp1": this layout */

struct peer_slot {
	struct sockaddr_in6 addr; /* v4 as v4-mapped; family 0: empty */
	int32_t kind; /* enum xsk_peer_kind */
	int64_t until_ms; /* CLOCK_MONOTONIC (one clock for the whole host) */
};

struct peer_table {
	uint32_t magic;
	pthread_mutex_t mu;
	struct peer_slot slot[XSK_PEER_SLOTS];
};

static struct peer_table own_table;
static _Atomic(struct peer_table *) table;

static void table_init(struct peer_table *t, bool shared)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	if (shared) {
		pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
		pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	}
	pthread_mutex_init(&t->mu, &a);
	pthread_mutexattr_destroy(&a);
	atomic_thread_fence(memory_order_release);
	t->magic = XSK_PEER_MAGIC;
}

/* The user's file mapped, or NULL: it must be ours, a regular file, and
 * writable by us alone. */
static struct peer_table *map_file(int fd)
{
	struct stat st;
	struct peer_table *t;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077) || st.st_size != (off_t)sizeof(*t))
		return NULL;
	t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return t == MAP_FAILED ? NULL : t;
}

/* Open the user's table, making it whole before anyone can see it (a new
 * file is filled in unnamed, then linked under its name). */
static struct peer_table *open_shared(void)
{
	char path[64], proc[64];
	struct peer_table *t = NULL;
	int fd;

	snprintf(path, sizeof(path), "/dev/shm/xsock-peers-%u", (unsigned)geteuid());
	for (int tries = 0; tries < 2 && !t; tries++) {
		fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			t = map_file(fd);
			xsk_real.close(fd);
			if (t && t->magic != XSK_PEER_MAGIC) {
				munmap(t, sizeof(*t)); /* another layout, or being made */
				return NULL;
			}
			break;
		}
		if (errno != ENOENT)
			return NULL;
		fd = open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (fd < 0)
			return NULL;
		if (ftruncate(fd, sizeof(*t)) == 0 && (t = map_file(fd)) != NULL) {
			table_init(t, true);
			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
			if (linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0) {
				munmap(t, sizeof(*t)); /* another process made it first */
				t = NULL;
			}
		}
		xsk_real.close(fd);
	}
	return t;
}

static struct peer_table *peer_table(void)
{
	struct peer_table *t = atomic_load(&table), *none = NULL;

	if (t)
		return t;
	t = open_shared();
	if (!t) {
		t = &own_table;
		if (!own_table.magic)
			table_init(&own_table, false);
	}
	if (!atomic_compare_exchange_strong(&table, &none, t)) {
		if (t != &own_table)
			munmap(t, sizeof(*t)); /* another thread was first */
		t = none;
	}
	return t;
}

static bool table_trylock(struct peer_table *t)
{
	int rc = pthread_mutex_trylock(&t->mu);

	if (rc == EOWNERDEAD) /* its holder died: the slots are whole anyway */
		rc = pthread_mutex_consistent(&t->mu);
	return rc == 0;
}

/* sa as the table's key: false if it is neither IPv4 nor IPv6. */
static bool peer_key(const struct sockaddr *sa, struct sockaddr_in6 *k)
{
	memset(k, 0, sizeof(*k));
	k->sin6_family = AF_INET6;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		k->sin6_port = in->sin_port;
		k->sin6_addr.s6_addr[10] = 0xff;
		k->sin6_addr.s6_addr[11] = 0xff;
		memcpy(&k->sin6_addr.s6_addr[12], &in->sin_addr, 4);
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		k->sin6_port = in6->sin6_port;
		k->sin6_addr = in6->sin6_addr;
		return true;
	}
	return false;
}

static bool same(const struct sockaddr_in6 *a, const struct sockaddr_in6 *b)
{
	return a->sin6_port == b->sin6_port &&
	       memcmp(&a->sin6_addr, &b->sin6_addr, sizeof(a->sin6_addr)) == 0;
}

enum xsk_peer_kind xsk_peer_lookup(const struct sockaddr *sa)
{
	struct sockaddr_in6 k;
	struct peer_table *t;
	enum xsk_peer_kind kind = XSK_PEER_UNKNOWN;
	int64_t now = xsk_now_ms();

	if (!peer_key(sa, &k) || !(t = peer_table()) || !table_trylock(t))
		return XSK_PEER_UNKNOWN;
	for (int i = 0; i < XSK_PEER_SLOTS; i++) {
		const struct peer_slot *p = &t->slot[i];
		if (p->addr.sin6_family && same(&p->addr, &k) && p->until_ms > now) {
			if (p->kind == XSK_PEER_IWARP || p->kind == XSK_PEER_PLAIN)
				kind = (enum xsk_peer_kind)p->kind;
			break;
		}
	}
	pthread_mutex_unlock(&t->mu);
	return kind;
}

void xsk_peer_learn(const struct sockaddr *sa, enum xsk_peer_kind kind, int64_t ttl_ms)
{
	struct sockaddr_in6 k;
	struct peer_table *t;
	int slot = 0;

	if (!peer_key(sa, &k) || !(t = peer_table()) || !table_trylock(t))
		return;
	for (int i = 0; i < XSK_PEER_SLOTS; i++) {
		if (t->slot[i].addr.sin6_family && same(&t->slot[i].addr, &k)) {
			slot = i;
			break;
		}
		if (t->slot[i].until_ms < t->slot[slot].until_ms)
			slot = i; /* the oldest (or an empty one) */
	}
	t->slot[slot].addr = k;
	t->slot[slot].kind = (int32_t)kind;
	t->slot[slot].until_ms = kind == XSK_PEER_UNKNOWN ? 0 : xsk_now_ms() + ttl_ms;
	pthread_mutex_unlock(&t->mu);
}
