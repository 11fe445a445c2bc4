/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* xsock-stat(1): the live counters of processes that use xsock, read from
 * their statistics files (verbs/xs_stat_shm.h) without stopping them.
 *   xsock-stat                     the processes (stale files removed)
 *   xsock-stat -p PID              one table: totals, one row per connection
 *   xsock-stat -p PID --watch [S]  the same every S seconds, with rates
 *   -j / --json                    JSON instead of tables
 * Both show libxsock's connects that went plain TCP (the stack's
 * passthrough sockets, in VMA's words), and the messages on the stack's
 * local channels dropped (local_bad, local_noqp), when the file has them. */
#include "config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "verbs/xs_stat_shm.h"

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* A process's file, mapped read-only. */
struct sfile {
	const struct xs_stat_file *f;
	const struct xs_stat_plain *plain; /* NULL: a file without them */
	size_t size;
	char path[300];
};

/* A consistent copy: totals (closed + live) and the live slots. */
struct snap {
	struct xs_stat_hdr hdr;
	struct xs_stat_counters total;
	unsigned n;
	bool has_plain;
	struct xs_stat_plain plain; /* went[], and last[] newest first (nlast kept) */
	struct xs_stat_conn *conn; /* n of them */
	unsigned *idx; /* their slot numbers */
	double t; /* CLOCK_MONOTONIC seconds */
};

static bool json;

static void path_of(char *buf, size_t len, unsigned uid, int pid)
{
	snprintf(buf, len, "%s/%s%u-%d", XS_STAT_DIR, XS_STAT_PREFIX, uid, pid);
}

/* 0, or -1 with a message (silent: for the listing). */
static int sfile_open(struct sfile *s, const char *path, bool silent)
{
	struct stat st;
	void *m;
	int fd;

	snprintf(s->path, sizeof(s->path), "%s", path);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK); /* a FIFO: no wait */
	if (fd < 0 || fstat(fd, &st) < 0) {
		if (!silent)
			fprintf(stderr, "xsock-stat: %s: %s\n", path, strerror(errno));
		goto fail;
	}
	/* ours alone: /dev/shm is open to all, and another user may have
	 * made a file under our name (verbs/xs_stat.c never opens one) */
	if (!S_ISREG(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 022)) {
		if (!silent)
			fprintf(stderr, "xsock-stat: %s: not this user's own file\n", path);
		goto fail;
	}
	if ((size_t)st.st_size < sizeof(struct xs_stat_hdr)) {
		if (!silent)
			fprintf(stderr, "xsock-stat: %s: not a statistics file\n", path);
		goto fail;
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -1;
	s->f = m;
	s->size = (size_t)st.st_size;
	const struct xs_stat_hdr *h = &s->f->hdr;
	if (LOAD(h->magic) != XS_STAT_MAGIC || h->version != XS_STAT_VERSION ||
	    h->hdr_size != sizeof(struct xs_stat_hdr) || h->slot_size != sizeof(struct xs_stat_conn) ||
	    h->hdr_size + (size_t)h->nslots * h->slot_size > s->size) {
		if (!silent)
			fprintf(stderr, "xsock-stat: %s: unknown layout (version %u)\n", path,
				h->version);
		munmap((void *)s->f, s->size);
		return -1;
	}
	/* the plain TCP section: in the file's last octets, after the slots
	 * (plain_off 0: an older release's file, all the same version) */
	size_t po = h->plain_off, ps = h->plain_size;
	s->plain = NULL;
	if (po && po % 8 == 0 && ps >= sizeof(struct xs_stat_plain) &&
	    po >= h->hdr_size + (size_t)h->nslots * h->slot_size && po + ps <= s->size)
		s->plain = (const struct xs_stat_plain *)((const char *)s->f + po);
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	return -1;
}

static void sfile_close(struct sfile *s)
{
	munmap((void *)s->f, s->size);
}

static bool pid_alive(int pid)
{
	return kill(pid, 0) == 0 || errno == EPERM;
}

/* Is the file, of process pid by its name and mapped (h), left over?  Yes
 * once the pid is gone, or after an execve of a program that never
 * connected (the file, complete, is no longer mapped there).  No while it
 * is being made: magic not yet set, or a fork child's copy still saying
 * the parent's pid.  Unknown (maps not readable): no. */
static bool file_stale(int pid, const char *path, const struct xs_stat_hdr *h)
{
	char maps[64], line[512];
	bool found = false;
	FILE *m;

	if (!pid_alive(pid))
		return true;
	if (!h || LOAD(h->pid) != pid)
		return false;
	snprintf(maps, sizeof(maps), "/proc/%d/maps", pid);
	m = fopen(maps, "re");
	if (!m)
		return false;
	while (!found && fgets(line, sizeof(line), m)) {
		char *p = strstr(line, path);
		found = p && (p[strlen(path)] == '\n' || p[strlen(path)] == ' ');
	}
	fclose(m);
	return !found;
}

static void dir_copy(struct xs_stat_dir *o, const struct xs_stat_dir *d)
{
	o->octets = LOAD(d->octets);
	o->fpdus = LOAD(d->fpdus);
	o->sends = LOAD(d->sends);
	o->writes = LOAD(d->writes);
	o->reads = LOAD(d->reads);
	o->read_resps = LOAD(d->read_resps);
	o->atomics = LOAD(d->atomics);
	o->terms = LOAD(d->terms);
}

static void cnt_copy(struct xs_stat_counters *o, const struct xs_stat_counters *c)
{
	dir_copy(&o->tx, &c->tx);
	dir_copy(&o->rx, &c->rx);
	o->crc_errors = LOAD(c->crc_errors);
	o->flushed = LOAD(c->flushed);
	o->zc_writes = LOAD(c->zc_writes);
	o->zc_copied = LOAD(c->zc_copied);
	o->term_tx = LOAD(c->term_tx);
	o->term_rx = LOAD(c->term_rx);
}

static void dir_sum(struct xs_stat_dir *o, const struct xs_stat_dir *d)
{
	o->octets += d->octets;
	o->fpdus += d->fpdus;
	o->sends += d->sends;
	o->writes += d->writes;
	o->reads += d->reads;
	o->read_resps += d->read_resps;
	o->atomics += d->atomics;
	o->terms += d->terms;
}

/* One slot, if it holds one connection all through the copy. */
static bool slot_copy(const struct xs_stat_conn *s, struct xs_stat_conn *o)
{
	uint32_t gen = __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE);

	if ((gen & 1) || !LOAD(s->in_use))
		return false;
	memcpy(o, s, offsetof(struct xs_stat_conn, c));
	o->state = LOAD(s->state);
	o->status = LOAD(s->status);
	cnt_copy(&o->c, &s->c);
	XS_STAT_READ_FENCE();
	return __atomic_load_n(&s->gen, __ATOMIC_RELAXED) == gen;
}

/* The plain TCP counts, and the last destinations newest first. */
static void plain_copy(const struct xs_stat_plain *p, struct xs_stat_plain *o)
{
	memset(o, 0, sizeof(*o));
	for (int i = 0; i < XS_STAT_PLAIN_WHYS; i++)
		o->went[i] = LOAD(p->went[i]);
	for (int tries = 0; tries < 1000; tries++) {
		uint32_t seq = __atomic_load_n(&p->seq, __ATOMIC_ACQUIRE);
		uint32_t n = LOAD(p->nlast);

		if (seq & 1)
			continue;
		o->nlast = n;
		for (uint32_t i = 0; i < n && i < XS_STAT_PLAIN_LAST; i++) {
			const struct xs_stat_plain_dest *d = &p->last[(n - 1 - i) % XS_STAT_PLAIN_LAST];

			o->last[i].when_ns = LOAD(d->when_ns);
			o->last[i].why = LOAD(d->why);
			memcpy(&o->last[i].peer, &d->peer, sizeof(d->peer));
		}
		XS_STAT_READ_FENCE();
		if (__atomic_load_n(&p->seq, __ATOMIC_RELAXED) == seq)
			return;
	}
	o->nlast = 0; /* (a writer that never stops: the counts only) */
}

static uint64_t plain_total(const struct xs_stat_plain *p)
{
	uint64_t n = 0;

	for (int i = 0; i < XS_STAT_PLAIN_WHYS; i++)
		n += p->went[i];
	return n;
}

static const char *why_name(uint32_t why)
{
	/* enum xs_stat_plain_why */
	static const char *const n[XS_STAT_PLAIN_NWHY] = { "octets", "closed", "silent",
							   "remembered", "other" };

	return why < XS_STAT_PLAIN_NWHY ? n[why] : "?";
}

static int snap_take(const struct sfile *sf, struct snap *sn)
{
	const struct xs_stat_hdr *h = &sf->f->hdr;

	for (int tries = 0; tries < 1000; tries++) {
		uint32_t seq = __atomic_load_n(&h->seq, __ATOMIC_ACQUIRE);
		unsigned hi = __atomic_load_n(&h->hiwater, __ATOMIC_ACQUIRE);

		if (seq & 1)
			continue;
		if (hi > h->nslots)
			hi = h->nslots;
		memcpy(&sn->hdr, h, offsetof(struct xs_stat_hdr, opened));
		sn->hdr.argv0[XS_STAT_ARGV0 - 1] = 0;
		sn->hdr.opened = LOAD(h->opened);
		sn->hdr.closed_conns = LOAD(h->closed_conns);
		sn->hdr.has_local = LOAD(h->has_local);
		sn->hdr.local_bad = LOAD(h->local_bad);
		sn->hdr.local_noqp = LOAD(h->local_noqp);
		cnt_copy(&sn->total, &h->closed);
		free(sn->conn);
		free(sn->idx);
		sn->conn = calloc(hi ? hi : 1, sizeof(*sn->conn));
		sn->idx = calloc(hi ? hi : 1, sizeof(*sn->idx));
		if (!sn->conn || !sn->idx)
			return -1;
		sn->n = 0;
		for (unsigned i = 0; i < hi; i++) {
			if (!slot_copy(&sf->f->slot[i], &sn->conn[sn->n]))
				continue;
			sn->idx[sn->n++] = i;
		}
		XS_STAT_READ_FENCE();
		if (__atomic_load_n(&h->seq, __ATOMIC_RELAXED) != seq)
			continue;
		for (unsigned i = 0; i < sn->n; i++) {
			dir_sum(&sn->total.tx, &sn->conn[i].c.tx);
			dir_sum(&sn->total.rx, &sn->conn[i].c.rx);
			sn->total.crc_errors += sn->conn[i].c.crc_errors;
			sn->total.flushed += sn->conn[i].c.flushed;
			sn->total.zc_writes += sn->conn[i].c.zc_writes;
			sn->total.zc_copied += sn->conn[i].c.zc_copied;
			if (sn->conn[i].c.term_tx)
				sn->total.term_tx = sn->conn[i].c.term_tx;
			if (sn->conn[i].c.term_rx)
				sn->total.term_rx = sn->conn[i].c.term_rx;
		}
		sn->has_plain = sf->plain != NULL;
		if (sf->plain)
			plain_copy(sf->plain, &sn->plain);
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		sn->t = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
		return 0;
	}
	return -1;
}

static const char *state_name(uint32_t st)
{
	switch (st) {
	case XS_STAT_ESTABLISHED:
		return "ESTABLISHED";
	case XS_STAT_LINGER:
		return "LINGER";
	case XS_STAT_CLOSED:
		return "CLOSED";
	default:
		return "?";
	}
}

static const char *rtr_name(uint8_t rtr)
{
	/* enum mpa_rtr: none, then Write, Read, Send (mpa/mpa.h) */
	static const char *const n[] = { "none", "write", "read", "send" };

	return rtr < 4 ? n[rtr] : "?";
}

static void addr_str(char *buf, size_t len, const struct xs_stat_addr *a)
{
	char ip[INET6_ADDRSTRLEN];

	if (a->family != AF_INET && a->family != AF_INET6) {
		snprintf(buf, len, "-");
		return;
	}
	inet_ntop(a->family, a->addr, ip, sizeof(ip));
	snprintf(buf, len, a->family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip, a->port);
}

static void term_str(char *buf, size_t len, uint32_t t)
{
	if (!t)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%u/%u/0x%02x", (t >> 16) & 0xff, (t >> 8) & 0xff, t & 0xff);
}

/* The previous snapshot's counters of the same connection (slot + gen). */
static const struct xs_stat_conn *prev_of(const struct snap *p, unsigned idx, uint32_t gen)
{
	if (!p)
		return NULL;
	for (unsigned i = 0; i < p->n; i++)
		if (p->idx[i] == idx && p->conn[i].gen == gen)
			return &p->conn[i];
	return NULL;
}

static double rate(uint64_t now, uint64_t before, double dt)
{
	return dt > 0 && now >= before ? (double)(now - before) / dt : 0;
}

/* ---- JSON ------------------------------------------------------------------ */

static void json_dir(const char *name, const struct xs_stat_dir *d, uint32_t term)
{
	printf("\"%s\": {\"octets\": %" PRIu64 ", \"fpdus\": %" PRIu64 ", \"sends\": %" PRIu64
	       ", \"writes\": %" PRIu64 ", \"reads\": %" PRIu64 ", \"read_resps\": %" PRIu64
	       ", \"atomics\": %" PRIu64 ", \"terminates\": %" PRIu64,
	       name, d->octets, d->fpdus, d->sends, d->writes, d->reads, d->read_resps, d->atomics,
	       d->terms);
	if (term)
		printf(", \"last_terminate\": {\"layer\": %u, \"etype\": %u, \"ecode\": %u}",
		       (term >> 16) & 0xff, (term >> 8) & 0xff, term & 0xff);
	printf("}");
}

static void json_counters(const struct xs_stat_counters *c)
{
	json_dir("tx", &c->tx, c->term_tx);
	printf(", ");
	json_dir("rx", &c->rx, c->term_rx);
	printf(", \"crc_errors\": %" PRIu64 ", \"flushed\": %" PRIu64, c->crc_errors, c->flushed);
	printf(", \"zc_writes\": %" PRIu64 ", \"zc_copied\": %" PRIu64, c->zc_writes, c->zc_copied);
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

/* "plain": {"connects": N, "octets": N, ..., "last": [...]}, or null
 * for a file without them. */
static void json_plain(const struct snap *sn)
{
	const struct xs_stat_plain *p = &sn->plain;
	char peer[64];

	if (!sn->has_plain) {
		printf("\"plain\": null");
		return;
	}
	printf("\"plain\": {\"connects\": %" PRIu64, plain_total(p));
	for (uint32_t w = 0; w < XS_STAT_PLAIN_NWHY; w++)
		printf(", \"%s\": %" PRIu64, why_name(w), p->went[w]);
	printf(", \"last\": [");
	for (uint32_t i = 0; i < p->nlast && i < XS_STAT_PLAIN_LAST; i++) {
		addr_str(peer, sizeof(peer), &p->last[i].peer);
		printf("%s{\"peer\": \"%s\", \"why\": \"%s\", \"when_ns\": %" PRIu64 "}",
		       i ? ", " : "", peer, why_name(p->last[i].why), p->last[i].when_ns);
	}
	printf("]}");
}

/* "local": {"local_bad": N, "local_noqp": N}, or null for a file
 * without them. */
static void json_local(const struct snap *sn)
{
	if (!sn->hdr.has_local) {
		printf("\"local\": null");
		return;
	}
	printf("\"local\": {\"local_bad\": %" PRIu64 ", \"local_noqp\": %" PRIu64 "}",
	       sn->hdr.local_bad, sn->hdr.local_noqp);
}

static void json_snap(const struct snap *sn, const struct snap *prev)
{
	char loc[64], peer[64];
	double dt = prev ? sn->t - prev->t : 0;

	printf("{\"pid\": %d, \"argv0\": ", sn->hdr.pid);
	json_str(sn->hdr.argv0);
	printf(", \"created_ns\": %" PRIu64 ", \"opened\": %" PRIu64 ", \"closed\": %" PRIu64
	       ", \"totals\": {",
	       sn->hdr.created_ns, sn->hdr.opened, sn->hdr.closed_conns);
	json_counters(&sn->total);
	printf("}, ");
	json_plain(sn);
	printf(", ");
	json_local(sn);
	printf(", \"connections\": [");
	for (unsigned i = 0; i < sn->n; i++) {
		const struct xs_stat_conn *c = &sn->conn[i], *p = prev_of(prev, sn->idx[i], c->gen);

		addr_str(loc, sizeof(loc), &c->local);
		addr_str(peer, sizeof(peer), &c->peer);
		printf("%s{\"slot\": %u, \"state\": \"%s\", \"status\": %d, \"local\": \"%s\", "
		       "\"peer\": \"%s\", \"initiator\": %s, \"opened_ns\": %" PRIu64 ", ",
		       i ? ", " : "", sn->idx[i], state_name(c->state), c->status, loc, peer,
		       c->initiator ? "true" : "false", c->opened_ns);
		printf("\"mpa\": {\"rev\": %u, \"crc\": %s, \"markers_tx\": %s, \"markers_rx\": %s, "
		       "\"p2p\": %s, \"rtr\": \"%s\", \"rdmap_ext\": %s, \"ird\": %u, \"ord\": %u}, ",
		       c->mpa_rev, c->crc ? "true" : "false", c->markers_tx ? "true" : "false",
		       c->markers_rx ? "true" : "false", c->p2p ? "true" : "false", rtr_name(c->rtr),
		       c->rdmap_ext ? "true" : "false", c->ird, c->ord);
		json_counters(&c->c);
		if (p)
			printf(", \"rate\": {\"tx_octets_s\": %.0f, \"rx_octets_s\": %.0f, "
			       "\"tx_fpdus_s\": %.0f, \"rx_fpdus_s\": %.0f}",
			       rate(c->c.tx.octets, p->c.tx.octets, dt),
			       rate(c->c.rx.octets, p->c.rx.octets, dt),
			       rate(c->c.tx.fpdus, p->c.tx.fpdus, dt),
			       rate(c->c.rx.fpdus, p->c.rx.fpdus, dt));
		printf("}");
	}
	printf("]}\n");
}

/* ---- tables ------------------------------------------------------------------ */

static void table_row(const char *name, const struct xs_stat_counters *c)
{
	char tt[24], tr[24];

	term_str(tt, sizeof(tt), c->term_tx);
	term_str(tr, sizeof(tr), c->term_rx);
	printf("%-6s %14" PRIu64 " %14" PRIu64 " %10" PRIu64 " %10" PRIu64 " %9" PRIu64 "/%-9" PRIu64
	       " %8" PRIu64 "/%-8" PRIu64 " %7" PRIu64 "/%-7" PRIu64 " %7" PRIu64 "/%-7" PRIu64
	       " %3" PRIu64 "/%-3" PRIu64 " %-12s %-12s %5" PRIu64 " %7" PRIu64 "\n",
	       name, c->tx.octets, c->rx.octets, c->tx.fpdus, c->rx.fpdus, c->tx.sends, c->rx.sends,
	       c->tx.writes, c->rx.writes, c->tx.reads, c->rx.reads, c->tx.read_resps,
	       c->rx.read_resps, c->tx.terms, c->rx.terms, tt, tr, c->crc_errors, c->flushed);
}

/* The connects that went plain TCP: kernel sockets, not in the table. */
static void table_plain(const struct snap *sn)
{
	const struct xs_stat_plain *p = &sn->plain;
	char peer[64];
	struct timespec now;

	if (!sn->has_plain)
		return;
	printf("plain TCP: %" PRIu64 " connects went plain (", plain_total(p));
	for (uint32_t w = 0; w < XS_STAT_PLAIN_NWHY; w++)
		printf("%s%s %" PRIu64, w ? ", " : "", why_name(w), p->went[w]);
	printf(")\n");
	clock_gettime(CLOCK_REALTIME, &now);
	uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	for (uint32_t i = 0; i < p->nlast && i < XS_STAT_PLAIN_LAST; i++) {
		const struct xs_stat_plain_dest *d = &p->last[i];
		double ago = now_ns > d->when_ns ? (double)(now_ns - d->when_ns) / 1e9 : 0;

		addr_str(peer, sizeof(peer), &d->peer);
		printf("plain  -> %-24s %-10s %.1f s ago\n", peer, why_name(d->why), ago);
	}
}

static void table_snap(const struct snap *sn, const struct snap *prev)
{
	char loc[64], peer[64], slot[16];
	double dt = prev ? sn->t - prev->t : 0;

	printf("pid %d (%s): %u connections open, %" PRIu64 " opened, %" PRIu64 " closed\n",
	       sn->hdr.pid, sn->hdr.argv0, sn->n, sn->hdr.opened, sn->hdr.closed_conns);
	table_plain(sn);
	if (sn->hdr.has_local)
		printf("local messages dropped: local_bad %" PRIu64 " (malformed, truncated, "
		       "unknown version), local_noqp %" PRIu64 " (for no QP or comm ID of its own)\n",
		       sn->hdr.local_bad, sn->hdr.local_noqp);
	printf("%-6s %14s %14s %10s %10s %19s %17s %15s %15s %7s %-12s %-12s %5s %7s\n", "conn",
	       "octets tx", "octets rx", "fpdus tx", "fpdus rx", "sends tx/rx", "writes tx/rx",
	       "reads tx/rx", "rresp tx/rx", "term", "term tx", "term rx", "crc", "flushed");
	table_row("total", &sn->total);
	for (unsigned i = 0; i < sn->n; i++) {
		snprintf(slot, sizeof(slot), "#%u", sn->idx[i]);
		table_row(slot, &sn->conn[i].c);
	}
	for (unsigned i = 0; i < sn->n; i++) {
		const struct xs_stat_conn *c = &sn->conn[i], *p = prev_of(prev, sn->idx[i], c->gen);

		addr_str(loc, sizeof(loc), &c->local);
		addr_str(peer, sizeof(peer), &c->peer);
		printf("#%-5u %-11s %s %s -> %s  MPA rev %u crc %s markers %s/%s p2p %s rtr %s "
		       "ext %s ird/ord %u/%u",
		       sn->idx[i], state_name(c->state), c->initiator ? "out" : "in", loc, peer,
		       c->mpa_rev, c->crc ? "on" : "off", c->markers_tx ? "on" : "off",
		       c->markers_rx ? "on" : "off", c->p2p ? "on" : "off", rtr_name(c->rtr),
		       c->rdmap_ext ? "on" : "off", c->ird, c->ord);
		if (c->state == XS_STAT_CLOSED)
			printf(" status %d", c->status);
		if (p)
			printf("  tx %.1f MB/s %.0f FPDU/s  rx %.1f MB/s %.0f FPDU/s",
			       rate(c->c.tx.octets, p->c.tx.octets, dt) / 1e6,
			       rate(c->c.tx.fpdus, p->c.tx.fpdus, dt),
			       rate(c->c.rx.octets, p->c.rx.octets, dt) / 1e6,
			       rate(c->c.rx.fpdus, p->c.rx.fpdus, dt));
		printf("\n");
	}
}

/* ---- the listing -------------------------------------------------------------- */

static int list_all(void)
{
	char prefix[64], path[300];
	struct dirent *e;
	bool first = true;
	DIR *d = opendir(XS_STAT_DIR);

	snprintf(prefix, sizeof(prefix), "%s%u-", XS_STAT_PREFIX, (unsigned)getuid());
	if (!d) {
		fprintf(stderr, "xsock-stat: %s: %s\n", XS_STAT_DIR, strerror(errno));
		return 1;
	}
	if (json)
		printf("[");
	else
		printf("%8s %6s %6s %14s %14s  %s\n", "pid", "conns", "plain", "octets tx",
		       "octets rx", "argv0");
	while ((e = readdir(d))) {
		struct sfile sf;
		struct snap sn = { 0 };
		char *end;

		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		long pid = strtol(e->d_name + strlen(prefix), &end, 10);
		if (*end || pid <= 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", XS_STAT_DIR, e->d_name);
		if (!pid_alive((int)pid)) {
			unlink(path); /* its process ended without its exit handlers */
			continue;
		}
		if (sfile_open(&sf, path, true) < 0)
			continue; /* being made, or another layout */
		if (file_stale((int)pid, path, &sf.f->hdr)) {
			sfile_close(&sf);
			unlink(path); /* its process called execve */
			continue;
		}
		if (snap_take(&sf, &sn) == 0) {
			if (json) {
				printf("%s{\"pid\": %d, \"argv0\": ", first ? "" : ", ", sn.hdr.pid);
				json_str(sn.hdr.argv0);
				printf(", \"connections\": %u", sn.n);
				if (sn.has_plain)
					printf(", \"plain\": %" PRIu64, plain_total(&sn.plain));
				else
					printf(", \"plain\": null");
				printf(", \"tx_octets\": %" PRIu64 ", \"rx_octets\": %" PRIu64 "}",
				       sn.total.tx.octets, sn.total.rx.octets);
			} else {
				char plain[24] = "-";
				if (sn.has_plain)
					snprintf(plain, sizeof(plain), "%" PRIu64, plain_total(&sn.plain));
				printf("%8d %6u %6s %14" PRIu64 " %14" PRIu64 "  %s\n", sn.hdr.pid, sn.n,
				       plain, sn.total.tx.octets, sn.total.rx.octets, sn.hdr.argv0);
			}
			first = false;
		}
		free(sn.conn);
		free(sn.idx);
		sfile_close(&sf);
	}
	closedir(d);
	if (json)
		printf("]\n");
	return 0;
}

static int show_pid(int pid, double watch)
{
	struct snap a = { 0 }, b = { 0 }, *cur = &a, *prev = NULL;
	char path[300];
	struct sfile sf;

	path_of(path, sizeof(path), (unsigned)getuid(), pid);
	if (!pid_alive(pid) && access(path, F_OK) < 0) {
		fprintf(stderr, "xsock-stat: no process %d\n", pid);
		return 1;
	}
	if (access(path, F_OK) < 0) {
		fprintf(stderr, "xsock-stat: process %d has no counters (no connection yet, "
				"XSOCK_STAT=0, or another user's)\n", pid);
		return 1;
	}
	if (sfile_open(&sf, path, false) < 0)
		return 1;
	if (file_stale(pid, path, &sf.f->hdr)) {
		sfile_close(&sf);
		unlink(path);
		fprintf(stderr, "xsock-stat: process %d is gone (its file removed)\n", pid);
		return 1;
	}
	for (;;) {
		if (snap_take(&sf, cur) < 0) {
			fprintf(stderr, "xsock-stat: %s: no consistent copy\n", path);
			sfile_close(&sf);
			return 1;
		}
		if (json)
			json_snap(cur, prev);
		else
			table_snap(cur, prev);
		fflush(stdout);
		if (watch <= 0 || file_stale(pid, path, &sf.f->hdr))
			break;
		struct timespec ts = { (time_t)watch, (long)((watch - (double)(time_t)watch) * 1e9) };
		nanosleep(&ts, NULL);
		if (!json)
			printf("\n");
		prev = cur;
		cur = cur == &a ? &b : &a;
	}
	free(a.conn);
	free(a.idx);
	free(b.conn);
	free(b.idx);
	sfile_close(&sf);
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: xsock-stat [-j] [-p PID [-w [SECONDS]]]\n"
		     "  (no -p)             list the processes using xsock\n"
		     "  -p, --pid PID       the counters of process PID\n"
		     "  -w, --watch [SECS]  refresh every SECS seconds (default 1), with rates\n"
		     "  -j, --json          JSON output\n"
		     "  -h, --help          this text;  -V, --version\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' }, { "watch", optional_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'j' },	 { "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },	 { NULL, 0, NULL, 0 },
	};
	double watch = 0;
	int pid = 0, o;
	char *end;

	while ((o = getopt_long(argc, argv, "p:w::jhV", opts, NULL)) != -1) {
		switch (o) {
		case 'p':
			pid = (int)strtol(optarg, &end, 10);
			if (*end || pid <= 0) {
				fprintf(stderr, "xsock-stat: bad pid %s\n", optarg);
				return 2;
			}
			break;
		case 'w':
			watch = 1;
			/* --watch 2 as well as --watch=2 */
			if (!optarg && optind < argc && argv[optind][0] >= '0' && argv[optind][0] <= '9')
				optarg = argv[optind++];
			if (optarg) {
				watch = strtod(optarg, &end);
				if (*end || watch < 0.01) {
					fprintf(stderr, "xsock-stat: bad interval %s\n", optarg);
					return 2;
				}
			}
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("xsock-stat (xsock) %s\n", PACKAGE_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc || (watch > 0 && !pid)) {
		usage(stderr);
		return 2;
	}
	return pid ? show_pid(pid, watch) : list_all();
}
