/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The TCP identity of relayed copies (xsock(7) FORK).  A process's copy of
 * a connection another process drives becomes the relay channel's Unix
 * socket (xsk_relay_take), yet the program still asks that descriptor for
 * its addresses (sshd's log line and its rules by address, rsync's "hosts
 * allow", tcpd) and sets TCP and IP options on it (sshd: TCP_NODELAY,
 * IP_TOS).  This table maps the Unix socket, by its inode, to the
 * connection's addresses: a fork inherits it, an execve carries the
 * entries the new program keeps open in XSOCK_RELAY_ADDR, and
 * xsk_sockopt.c answers from it. */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libxsock/xsk_config.h"
#include "libxsock/xsk_intercept.h"
#include "libxsock/xsk_priv.h"
#include "libxsock/xsk_raddr_wire.h"

#define XSK_RADDR_MAX 64 /* relayed sockets one process knows; the oldest goes */
#define XSK_RADDR_EXEC_FDS 4096 /* descriptors an execve's export looks through */

struct raddr {
	dev_t dev;
	ino_t ino;
	struct sockaddr_storage local, peer;
};

static struct raddr raddr_tab[XSK_RADDR_MAX];
static _Atomic int raddr_n; /* entries in use: 0 keeps the calls off fstat */
static unsigned raddr_next; /* the slot a full table gives up */
static pthread_mutex_t raddr_mu = PTHREAD_MUTEX_INITIALIZER;

static bool sock_id(int fd, dev_t *dev, ino_t *ino)
{
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
		return false;
	*dev = st.st_dev;
	*ino = st.st_ino;
	return true;
}

/* raddr_mu held. */
static void put_locked(dev_t dev, ino_t ino, const struct sockaddr_storage *local,
		       const struct sockaddr_storage *peer)
{
	int n = atomic_load(&raddr_n), i;

	for (i = 0; i < n; i++)
		if (raddr_tab[i].dev == dev && raddr_tab[i].ino == ino)
			break;
	if (i == n && n == XSK_RADDR_MAX)
		i = (int)(raddr_next++ % XSK_RADDR_MAX);
	raddr_tab[i].dev = dev;
	raddr_tab[i].ino = ino;
	raddr_tab[i].local = *local;
	raddr_tab[i].peer = *peer;
	if (i == n)
		atomic_store(&raddr_n, n + 1);
}

void xsk_raddr_note(int fd, const struct sockaddr_storage *local,
		    const struct sockaddr_storage *peer)
{
	dev_t dev;
	ino_t ino;

	if (!sock_id(fd, &dev, &ino))
		return;
	xsk_mutex_lock(&raddr_mu);
	put_locked(dev, ino, local, peer);
	xsk_mutex_unlock(&raddr_mu);
}

bool xsk_raddr_find(int fd, struct sockaddr_storage *local, struct sockaddr_storage *peer)
{
	bool found = false;
	dev_t dev;
	ino_t ino;

	if (!atomic_load_explicit(&raddr_n, memory_order_relaxed) || !sock_id(fd, &dev, &ino))
		return false;
	xsk_mutex_lock(&raddr_mu);
	for (int i = 0; i < atomic_load(&raddr_n) && !found; i++) {
		if (raddr_tab[i].dev != dev || raddr_tab[i].ino != ino)
			continue;
		if (local)
			*local = raddr_tab[i].local;
		if (peer)
			*peer = raddr_tab[i].peer;
		found = true;
	}
	xsk_mutex_unlock(&raddr_mu);
	return found;
}

/* ---- execve: one entry per socket (xsk_raddr_wire.h) ---------------------- */

char *xsk_raddr_exec_env(void)
{
	char *env, *p;
	int n, kept = 0;

	if (!atomic_load(&raddr_n))
		return NULL;
	env = malloc(sizeof(XSK_RADDR_ENV) + 1 + XSK_RADDR_MAX * XSK_RADDR_ENT_MAX + 1);
	if (!env)
		return NULL;
	p = env + sprintf(env, "%s=", XSK_RADDR_ENV);
	xsk_mutex_lock(&raddr_mu);
	n = atomic_load(&raddr_n);
	bool done[XSK_RADDR_MAX] = { false };
	/* only the sockets the new program gets (no close-on-exec) */
	for (int fd = 0; fd < XSK_RADDR_EXEC_FDS && kept < n; fd++) {
		int fl = xsk_real.fcntl(fd, F_GETFD);
		dev_t dev;
		ino_t ino;

		if (fl < 0 || (fl & FD_CLOEXEC) || !sock_id(fd, &dev, &ino))
			continue;
		for (int i = 0; i < n; i++) {
			if (done[i] || raddr_tab[i].dev != dev || raddr_tab[i].ino != ino)
				continue;
			p += xsk_raddr_encode(&(struct xsk_raddr_ent){ .ino = (uint64_t)ino,
								      .dev = (uint64_t)dev,
								      .local = raddr_tab[i].local,
								      .peer = raddr_tab[i].peer },
					      p);
			done[i] = true;
			kept++;
		}
	}
	xsk_mutex_unlock(&raddr_mu);
	if (!kept) {
		free(env);
		return NULL;
	}
	return env;
}

__attribute__((constructor)) static void xsk_raddr_adopt(void)
{
	const char *v = xsk_setting_str(XS_SET_RELAY_ADDR), *why = NULL;
	char *copy;

	if (!v || !*v)
		return;
	copy = strdup(v);
	unsetenv(XSK_RADDR_ENV); /* the next execve says what it carries */
	if (!copy)
		return;
	xsk_mutex_lock(&raddr_mu);
	for (size_t off = 0, len = strlen(copy), used; off < len && !why; off += used) {
		struct xsk_raddr_ent e;

		why = xsk_raddr_decode(copy + off, len - off, &e, &used);
		if (!why)
			put_locked((dev_t)e.dev, (ino_t)e.ino, &e.local, &e.peer);
	}
	xsk_mutex_unlock(&raddr_mu);
	free(copy);
	/* the entries before it are kept: each stands alone */
	if (why)
		xsk_local_drop(XSK_RADDR_ENV " entry", why);
}

/* fork: the child's table is whole (xsk_fork.c's handlers). */
void xsk_raddr_fork_prepare(void)
{
	xsk_mutex_lock(&raddr_mu);
}

void xsk_raddr_fork_done(void)
{
	xsk_mutex_unlock(&raddr_mu);
}
