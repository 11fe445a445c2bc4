/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The process's statistics file for xsock-stat(1): /dev/shm/xsock-UID-PID,
 * mode 0600, made on the first connection, the first of libxsock's
 * connects that went plain TCP or the first local message dropped
 * (unless XSOCK_STAT=0), removed at exit (a process that ends without
 * exit handlers leaves it: the next process to make its file, or
 * xsock-stat, removes it once the pid is gone).  Slots are given out
 * and taken back here, under stat_mu; the counters in them are written by
 * the hooks of xs_stat.h without any lock.  After fork the child gets a
 * file of its own mapped where the parent's was, so the slots of the
 * connections it inherited stay valid and count in the child's file. */
#include "config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include "verbs/xs_internal.h"
#include "util/xs_errno.h"

#define PLAIN_OFF (sizeof(struct xs_stat_hdr) + XS_STAT_SLOTS * sizeof(struct xs_stat_conn))
#define STAT_SIZE (PLAIN_OFF + sizeof(struct xs_stat_plain))

_Static_assert((int)XSOCK_PLAIN_OCTETS == XS_STAT_PLAIN_OCTETS &&
		       (int)XSOCK_PLAIN_CLOSED == XS_STAT_PLAIN_CLOSED &&
		       (int)XSOCK_PLAIN_SILENT == XS_STAT_PLAIN_SILENT &&
		       (int)XSOCK_PLAIN_REMEMBERED == XS_STAT_PLAIN_REMEMBERED &&
		       (int)XSOCK_PLAIN_OTHER == XS_STAT_PLAIN_OTHER &&
		       XS_STAT_PLAIN_NWHY <= XS_STAT_PLAIN_WHYS,
	       "the private call's reasons are the file's");

static pthread_mutex_t stat_mu = PTHREAD_MUTEX_INITIALIZER;
static struct xs_stat_file *stat_map; /* NULL until the first connection */
static bool stat_failed; /* the file could not be made: no more tries */
static char stat_path[64];
/* private: the connection each slot counts for (xs_stat_flushed), and the
 * last one looked up (the WRs of one QP flush together) */
static const struct xs_conn *stat_owner[XS_STAT_SLOTS];
static bool stat_logged[XS_STAT_SLOTS]; /* its XSOCK_STAT_LOG line is written */
static unsigned stat_last;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool stat_gone; /* unlinked already (xsock_priv_sandbox) */

static void stat_unlink(void)
{
	if (stat_map && !stat_gone)
		unlink(stat_path);
}

/* A system-call sandbox starts (libxsock's xsk_sandbox.c, before it is
 * on): the file goes now, its mapping stays, so that exit makes no call
 * such a sandbox kills the process on (OpenSSH's allows no unlink). */
XS_EXPORT void xsock_priv_sandbox(void)
{
	pthread_mutex_lock(&stat_mu);
	if (stat_map && !stat_gone)
		unlink(stat_path);
	stat_gone = true;
	pthread_mutex_unlock(&stat_mu);
}

/* A new file at stat_path holding len octets of init (NULL: zeros), mapped
 * at addr (NULL: anywhere).  The mapping, or NULL. */
static void *stat_file(const void *init, size_t len, void *addr)
{
	void *m;
	int fd;

	snprintf(stat_path, sizeof(stat_path), XS_STAT_DIR "/" XS_STAT_PREFIX "%u-%d",
		 (unsigned)getuid(), (int)getpid());
	/* never a file already there: the name is predictable and /dev/shm
	 * open to all, so another user could have made it for our pid (and
	 * read or write our counters through it); an earlier process of
	 * this pid that skipped its exit handlers left only a stale one */
	unlink(stat_path);
	fd = open(stat_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return NULL;
	if (ftruncate(fd, (off_t)STAT_SIZE) < 0 || (init && write(fd, init, len) != (ssize_t)len)) {
		close(fd);
		unlink(stat_path);
		return NULL;
	}
	m = mmap(addr, STAT_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | (addr ? MAP_FIXED : 0), fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		unlink(stat_path);
		return NULL;
	}
	return m;
}

static struct xs_stat_plain *plain_of(struct xs_stat_file *f)
{
	return (struct xs_stat_plain *)((char *)f + PLAIN_OFF);
}

static void stat_hdr_init(struct xs_stat_hdr *h)
{
	h->pid = (int32_t)getpid();
	h->uid = (uint32_t)getuid();
	h->created_ns = now_ns();
	__atomic_store_n(&h->magic, XS_STAT_MAGIC, __ATOMIC_RELEASE);
}

/* The child: the same slots in a file of its own, at the same address.
 * stat_mu is not taken around fork: xs_fork.c's prepare waits for the
 * engine, which may be waiting for stat_mu (xs_eng_conn_free); a slot
 * given out or taken back at that very moment may be off by one in the
 * child. */
void xs_stat_fork_child(void)
{
	struct xs_stat_plain plain;

	pthread_mutex_init(&stat_mu, NULL);
	if (!stat_map)
		return;
	/* the plain TCP sockets it inherited: the parent's counts too */
	memcpy(&plain, plain_of(stat_map), sizeof(plain));
	size_t used = sizeof(struct xs_stat_hdr) + stat_map->hdr.hiwater * sizeof(struct xs_stat_conn);
	if (!stat_file(stat_map, used, stat_map)) {
		/* keep counting into a private copy rather than the parent's file */
		mmap(stat_map, STAT_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
		     -1, 0);
		stat_failed = true;
		return;
	}
	memcpy(plain_of(stat_map), &plain, sizeof(plain));
	stat_hdr_init(&stat_map->hdr);
}

/* The files of this user's processes that ended without exit handlers (a
 * fork child's _exit, a signal): removed when another process makes its
 * file, so that they do not pile up between xsock-stat runs (which remove
 * them too, and those of a process that called execve).  stat_mu held. */
static void stat_sweep(void)
{
	char prefix[32], path[sizeof(XS_STAT_DIR) + 256 + 2];
	struct dirent *e;
	DIR *d = opendir(XS_STAT_DIR);

	if (!d)
		return;
	snprintf(prefix, sizeof(prefix), XS_STAT_PREFIX "%u-", (unsigned)getuid());
	while ((e = readdir(d))) {
		char *end;
		long pid;

		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		pid = strtol(e->d_name + strlen(prefix), &end, 10);
		if (*end || pid <= 0 || pid == (long)getpid())
			continue;
		if (kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
			snprintf(path, sizeof(path), "%s/%s", XS_STAT_DIR, e->d_name);
			unlink(path);
		}
	}
	closedir(d);
}

/* stat_mu held: the file, made on first use. */
static bool stat_ready(void)
{
	struct xs_stat_hdr *h;

	if (stat_map || stat_failed)
		return stat_map && !stat_failed;
	stat_sweep();
	stat_map = stat_file(NULL, 0, NULL);
	if (!stat_map) {
		stat_failed = true;
		xs_log("xsock-stat: no statistics file %s: %s", stat_path, xs_strerror(errno));
		return false;
	}
	h = &stat_map->hdr;
	h->version = XS_STAT_VERSION;
	h->hdr_size = sizeof(struct xs_stat_hdr);
	h->slot_size = sizeof(struct xs_stat_conn);
	h->nslots = XS_STAT_SLOTS;
	h->plain_off = (uint32_t)PLAIN_OFF;
	h->plain_size = sizeof(struct xs_stat_plain);
	h->has_local = 1;
	snprintf(h->argv0, sizeof(h->argv0), "%s", program_invocation_name);
	stat_hdr_init(h);
	atexit(stat_unlink); /* (fork: xs_stat_fork_child) */
	return true;
}

/* A slot being filled or freed: readers skip it while gen is odd. */
static void slot_gen_bump(struct xs_stat_conn *s)
{
	/* acq_rel read-modify-write: the slot's writes before it stay
	 * before, those after it stay after (a seqlock's writer side, with
	 * no fence, which GCC's ThreadSanitizer cannot model) */
	__atomic_fetch_add(&s->gen, 1, __ATOMIC_ACQ_REL);
}

struct xs_stat_conn *xs_stat_conn_open(const struct xs_conn *owner, int fd,
				       const struct mpa_agreed *a, bool initiator)
{
	struct sockaddr_storage ss;
	struct xs_stat_conn *s;
	socklen_t len;
	unsigned i;

	if (!xs_config()->stat)
		return NULL;
	pthread_mutex_lock(&stat_mu);
	if (!stat_ready())
		goto none;
	for (i = 0; i < XS_STAT_SLOTS && stat_owner[i]; i++)
		;
	if (i == XS_STAT_SLOTS)
		goto none;
	stat_owner[i] = owner;
	stat_logged[i] = false;
	s = &stat_map->slot[i];
	slot_gen_bump(s);
	uint32_t gen = s->gen;
	memset(s, 0, sizeof(*s));
	s->gen = gen;
	s->state = XS_STAT_ESTABLISHED;
	s->opened_ns = now_ns();
	len = sizeof(ss);
	memset(&ss, 0, sizeof(ss));
	if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
		xs_stat_addr_of(&s->local, &ss);
	len = sizeof(ss);
	memset(&ss, 0, sizeof(ss));
	if (getpeername(fd, (struct sockaddr *)&ss, &len) == 0)
		xs_stat_addr_of(&s->peer, &ss);
	s->mpa_rev = a->rev;
	s->crc = a->crc;
	s->markers_tx = a->markers_tx;
	s->markers_rx = a->markers_rx;
	s->p2p = a->p2p;
	s->rtr = (uint8_t)a->rtr;
	s->rdmap_ext = a->rdmap_ext;
	s->initiator = initiator;
	s->ird = a->ird;
	s->ord = a->ord;
	s->in_use = 1;
	slot_gen_bump(s);
	if (i >= stat_map->hdr.hiwater)
		__atomic_store_n(&stat_map->hdr.hiwater, i + 1, __ATOMIC_RELEASE);
	XS_STAT_ADD(&stat_map->hdr, opened, 1);
	pthread_mutex_unlock(&stat_mu);
	return s;
none:
	pthread_mutex_unlock(&stat_mu);
	return NULL;
}

static void dir_add(struct xs_stat_dir *to, const struct xs_stat_dir *d)
{
	XS_STAT_ADD(to, octets, d->octets);
	XS_STAT_ADD(to, fpdus, d->fpdus);
	XS_STAT_ADD(to, sends, d->sends);
	XS_STAT_ADD(to, writes, d->writes);
	XS_STAT_ADD(to, reads, d->reads);
	XS_STAT_ADD(to, read_resps, d->read_resps);
	XS_STAT_ADD(to, atomics, d->atomics);
	XS_STAT_ADD(to, terms, d->terms);
}

void xs_stat_conn_ended(struct xs_stat_conn *s)
{
	size_t i;

	if (!s)
		return;
	pthread_mutex_lock(&stat_mu);
	i = (size_t)(s - stat_map->slot);
	if (stat_logged[i]) {
		pthread_mutex_unlock(&stat_mu);
		return;
	}
	stat_logged[i] = true;
	pthread_mutex_unlock(&stat_mu);
	/* the tx and rx owners may still be counting: read as xsock-stat does */
	xs_stat_log(&(struct xs_stat_log_conn){
		.transport = "iwarp", .local = &s->local, .peer = &s->peer, .initiator = s->initiator,
		.tx_octets = __atomic_load_n(&s->c.tx.octets, __ATOMIC_RELAXED),
		.rx_octets = __atomic_load_n(&s->c.rx.octets, __ATOMIC_RELAXED),
		.tx_msgs = __atomic_load_n(&s->c.tx.fpdus, __ATOMIC_RELAXED),
		.rx_msgs = __atomic_load_n(&s->c.rx.fpdus, __ATOMIC_RELAXED) });
}

void xs_stat_conn_carry_out(const struct xs_stat_conn *s, struct xs_stat_carry *out)
{
	*out = (struct xs_stat_carry){ 0 };
	if (!s)
		return;
	out->tx_octets = __atomic_load_n(&s->c.tx.octets, __ATOMIC_RELAXED);
	out->rx_octets = __atomic_load_n(&s->c.rx.octets, __ATOMIC_RELAXED);
	out->tx_msgs = __atomic_load_n(&s->c.tx.fpdus, __ATOMIC_RELAXED);
	out->rx_msgs = __atomic_load_n(&s->c.rx.fpdus, __ATOMIC_RELAXED);
}

void xs_stat_conn_carry_in(struct xs_stat_conn *s, const struct xs_stat_carry *in)
{
	if (!s)
		return;
	XS_STAT_ADD(&s->c.tx, octets, in->tx_octets);
	XS_STAT_ADD(&s->c.rx, octets, in->rx_octets);
	XS_STAT_ADD(&s->c.tx, fpdus, in->tx_msgs);
	XS_STAT_ADD(&s->c.rx, fpdus, in->rx_msgs);
}

void xs_stat_conn_close(struct xs_stat_conn *s)
{
	struct xs_stat_hdr *h;

	if (!s)
		return;
	xs_stat_conn_ended(s);
	pthread_mutex_lock(&stat_mu);
	h = &stat_map->hdr;
	__atomic_fetch_add(&h->seq, 1, __ATOMIC_ACQ_REL); /* as slot_gen_bump */
	dir_add(&h->closed.tx, &s->c.tx);
	dir_add(&h->closed.rx, &s->c.rx);
	XS_STAT_ADD(&h->closed, crc_errors, s->c.crc_errors);
	XS_STAT_ADD(&h->closed, flushed, s->c.flushed);
	XS_STAT_ADD(&h->closed, zc_writes, s->c.zc_writes);
	XS_STAT_ADD(&h->closed, zc_copied, s->c.zc_copied);
	if (s->c.term_tx)
		XS_STAT_SET(&h->closed, term_tx, s->c.term_tx);
	if (s->c.term_rx)
		XS_STAT_SET(&h->closed, term_rx, s->c.term_rx);
	XS_STAT_ADD(h, closed_conns, 1);
	slot_gen_bump(s);
	__atomic_store_n(&s->in_use, 0, __ATOMIC_RELAXED);
	slot_gen_bump(s);
	__atomic_store_n(&h->seq, h->seq + 1, __ATOMIC_RELEASE);
	stat_owner[s - stat_map->slot] = NULL;
	pthread_mutex_unlock(&stat_mu);
}

void xs_stat_flushed(const struct xs_conn *owner)
{
	pthread_mutex_lock(&stat_mu);
	if (stat_map && !stat_failed) {
		unsigned n = stat_map->hdr.hiwater, i = stat_last;

		if (i >= n || stat_owner[i] != owner)
			for (i = 0; i < n && stat_owner[i] != owner; i++)
				;
		if (i < n) {
			stat_last = i;
			XS_STAT_ADD(&stat_map->slot[i].c, flushed, 1);
		}
	}
	pthread_mutex_unlock(&stat_mu);
}


/* libxsock's connect that went plain TCP (xs_priv_abi.h): a kernel socket
 * the stack never sees, counted here so that xsock-stat shows it. */
XS_EXPORT void xsock_priv_plain(int why, const struct sockaddr *peer, socklen_t len)
{
	struct sockaddr_storage ss = { 0 };
	struct xs_stat_plain *p;
	struct xs_stat_plain_dest *d;

	if (!xs_config()->stat)
		return;
	if (why < 0 || why >= XS_STAT_PLAIN_NWHY)
		why = XS_STAT_PLAIN_OTHER;
	if (peer && len <= sizeof(ss))
		memcpy(&ss, peer, len);
	pthread_mutex_lock(&stat_mu);
	if (!stat_ready())
		goto out;
	p = plain_of(stat_map);
	XS_STAT_ADD(p, went[why], 1);
	__atomic_fetch_add(&p->seq, 1, __ATOMIC_ACQ_REL); /* as slot_gen_bump */
	d = &p->last[p->nlast % XS_STAT_PLAIN_LAST];
	memset(&d->peer, 0, sizeof(d->peer));
	xs_stat_addr_of(&d->peer, &ss);
	d->when_ns = now_ns();
	d->why = (uint32_t)why;
	XS_STAT_ADD(p, nlast, 1);
	__atomic_fetch_add(&p->seq, 1, __ATOMIC_ACQ_REL);
out:
	pthread_mutex_unlock(&stat_mu);
}

void xs_stat_local_drop(enum xsock_local_why why)
{
	struct xs_stat_hdr *h;

	if (!xs_config()->stat)
		return;
	pthread_mutex_lock(&stat_mu);
	if (stat_ready()) {
		h = &stat_map->hdr;
		if (why == XSOCK_LOCAL_NOQP)
			XS_STAT_ADD(h, local_noqp, 1);
		else
			XS_STAT_ADD(h, local_bad, 1);
	}
	pthread_mutex_unlock(&stat_mu);
}

/* libxsock's drops (its exec hand-over, XSOCK_RELAY_ADDR): counted here,
 * in the one file of the process. */
XS_EXPORT void xsock_priv_local_drop(int why)
{
	xs_stat_local_drop(why == XSOCK_LOCAL_NOQP ? XSOCK_LOCAL_NOQP : XSOCK_LOCAL_BAD);
}
