/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Exec hand-over (xsock(7) EXEC): an IWARP socket inherited across
 * execve(2) goes on in the new program when that program runs with
 * libxsock too (inetd, sshd -R, socket activation).
 *
 * The socket's fd number holds libxsock's inner epoll fd and its
 * connection lives in this process's memory, so execve alone would leave
 * the new program an epoll fd.  Before the real execve, for every socket
 * named by an fd without close-on-exec:
 *   - libiwarp stops the connection at an FPDU boundary both ways and
 *     gives a duplicate of its TCP socket that survives the execve plus
 *     the stream's numbers (xsock_priv_export);
 *   - its rsockets state (ring positions, credits, sequence numbers, the
 *     peer's SGL), the receive memory (unread data, the target SGL the
 *     peer writes, under the STag and TO it knows) and the send ring go
 *     into a memfd, whose number the new program finds in XSOCK_EXEC_FD;
 *   - the fd number itself becomes a Unix socket whose peer is gone with
 *     unread data: read/recv fail with ECONNRESET and write with EPIPE, so
 *     a program started without libxsock fails on first use instead of
 *     hanging or reading MPA framing as data.
 * The new program's libxsock (its constructor, before main) rebuilds each
 * socket under the same fd numbers on the inherited TCP socket, with its
 * ring registered under the same STag and TO, and the stream goes on.
 * If the execve fails, everything is put back.  Listening sockets are
 * not carried (the sentinel, and one line with XSOCK_DEBUG=1). */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libxsock/xsk_config.h"
#include "libxsock/xsk_exec_wire.h"
#include "libxsock/xsk_intercept.h"
#include "libxsock/xsk_priv.h"
#include "verbs/xs_priv_abi.h"
#include "util/xs_errno.h"

#define XSK_EXEC_ENV "XSOCK_EXEC_FD"
#define XSK_EXEC_TIMEOUT_MS 2000 /* to reach an FPDU boundary */

extern char **environ;

/* One socket being carried. */
struct carried {
	struct xsk *s;
	int nfds;
	int fds[XSK_EXEC_FDS];
	int saved_epfd; /* the inner epoll fd, kept to undo */
	int tcpfd;
	bool exported;
};

struct plan {
	struct carried c[XSK_EXEC_MAX];
	int n;
	int memfd;
	char env[32];
};

static void collect(int fd, struct xsk *s, void *arg)
{
	struct plan *p = arg;
	int fl = xsk_real.fcntl(fd, F_GETFD);
	int i;

	if (fl < 0 || (fl & FD_CLOEXEC))
		return;
	for (i = 0; i < p->n; i++)
		if (p->c[i].s == s)
			break;
	if (i == p->n) {
		if (p->n == XSK_EXEC_MAX)
			return;
		p->c[p->n++] = (struct carried){ .s = s, .saved_epfd = -1, .tcpfd = -1 };
	}
	if (p->c[i].nfds < XSK_EXEC_FDS)
		p->c[i].fds[p->c[i].nfds++] = fd;
}

/* A Unix socket whose peer closed with unread data: recv gives
 * ECONNRESET once, then end of file; send gives EPIPE. */
static int sentinel(void)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	if (xsk_real.write(sv[0], "x", 1) != 1) {
		xsk_real.close(sv[0]);
		xsk_real.close(sv[1]);
		return -1;
	}
	xsk_real.close(sv[1]);
	return sv[0];
}

static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = xsk_real.write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Stop the connection and write its entry (xsk_exec_wire.h); s->mu not
 * held.  0 or -errno. */
static int carry(const struct xsk_stack *st, struct carried *c, int memfd)
{
	struct xsk *s = c->s;
	struct xsk_exec_ent e = { .nfds = c->nfds, .tcpfd = -1 };
	uint8_t ent[XSK_EXEC_ENT_LEN], *rmsg = NULL;
	int rc = 0;

	xsk_mutex_lock(&s->mu);
	if (s->state != XSK_CONNECTED || !s->id || !s->rmr || s->ext || s->foreign) {
		rc = s->state == XSK_LISTENING ? -EOPNOTSUPP : -ENOTCONN;
		goto out;
	}
	xsk_progress(s); /* completions into the stream state */
	rc = st->export(s->id, e.wire, XSK_EXEC_TIMEOUT_MS);
	if (rc < 0)
		goto out;
	c->tcpfd = rc;
	c->exported = true;
	rc = 0;
	xsk_progress(s); /* what completed on the way to the boundary */
	memcpy(e.fds, c->fds, sizeof(e.fds));
	e.tcpfd = c->tcpfd;
	e.rkey = s->rmr->rkey;
	e.iova = s->mem_iova;
	e.mem_len = (uint32_t)s->mem_len;
	e.sbuf_size = s->sbuf_size;
	e.rmsg_cap = s->rmsg_cap;
	e.sock = *s;
	xsk_exec_ent_encode(&e, ent);
	rmsg = malloc(4 * (size_t)s->rmsg_cap);
	if (!rmsg) {
		rc = -ENOMEM;
		goto out;
	}
	xsk_exec_rmsg_encode(s->rmsg, s->rmsg_cap, rmsg);
	if (write_all(memfd, ent, sizeof(ent)) || write_all(memfd, s->mem, s->mem_len) ||
	    write_all(memfd, s->sbuf, s->sbuf_size) ||
	    write_all(memfd, rmsg, 4 * (size_t)s->rmsg_cap))
		rc = -EIO;
out:
	xsk_mutex_unlock(&s->mu);
	free(rmsg);
	return rc;
}

static void undo(const struct xsk_stack *st, struct plan *p)
{
	for (int i = 0; i < p->n; i++) {
		struct carried *c = &p->c[i];
		if (c->saved_epfd >= 0) {
			int fl = c->s->cloexec ? O_CLOEXEC : 0;
			for (int k = 0; k < c->nfds; k++)
				xsk_real.dup3(c->saved_epfd, c->fds[k], fl);
			xsk_real.close(c->saved_epfd);
			c->saved_epfd = -1;
		}
		if (c->exported) {
			xsk_mutex_lock(&c->s->mu);
			st->export_undo(c->s->id);
			xsk_mutex_unlock(&c->s->mu);
			c->exported = false;
		}
		if (c->tcpfd >= 0)
			xsk_real.close(c->tcpfd);
		c->tcpfd = -1;
	}
	if (p->memfd >= 0)
		xsk_real.close(p->memfd);
	p->memfd = -1;
}

/* c's fd numbers become the relay's kernel socket (xsk_relay_take), which
 * the execve keeps; the table lock and c->s->mu not held. */
static void relay_out(const struct carried *c)
{
	for (int k = 0; k < c->nfds; k++) {
		struct xsk *s = xsk_tab_has(c->fds[k]) ? xsk_fd_get(c->fds[k]) : NULL;

		if (s && !xsk_relay_take(c->fds[k], s, true, true))
			xsk_fd_put(s);
	}
}

/* Before the execve: 0 (p->env set when there is something to carry). */
static void prepare(struct plan *p)
{
	const struct xsk_stack *st;

	memset(p, 0, sizeof(*p));
	p->memfd = -1;
	xsk_tab_each(collect, p);
	if (!p->n)
		return; /* (no stack loaded into every exec of a shell) */
	st = xsk_stack();
	/* A socket goes to the new program when this process owns it, or
	 * when it is the new program's stdin, stdout or stderr (inetd's
	 * child dup2s the connection there without using it).  Any other
	 * inherited copy stays with the process that uses it: the child
	 * of system(3) or popen(3) must not take its parent's connections. */
	for (int i = 0; i < p->n;) {
		struct carried *c = &p->c[i];
		bool stdio = false;
		int mode = 0;

		for (int k = 0; k < c->nfds; k++)
			stdio |= c->fds[k] <= 2;
		if (xsk_maker_only(c->s)) {
			/* a connection its maker alone drives (a kernel stack's,
			 * RoCE's) has no hand-over: the new program's stdio gets
			 * the relay's kernel socket (sshd's re-exec, socat's
			 * EXEC), served by the maker; the maker's own copy and
			 * any other stay as they are */
			if (stdio && c->s->owner_pid != getpid())
				relay_out(c);
			p->c[i] = p->c[--p->n];
			continue;
		}
		xsk_mutex_lock(&c->s->mu);
		if (c->s->state != XSK_CONNECTED && c->s->state != XSK_LISTENING)
			mode = 2; /* fresh (still the TCP socket) or closed: as it is */
		else if (c->s->state == XSK_LISTENING)
			mode = stdio ? 0 : 2;
		else if (c->s->foreign)
			mode = 2;
		else if (st && st->fork_mode && c->s->id)
			mode = st->fork_mode(c->s->id);
		xsk_mutex_unlock(&c->s->mu);
		if (mode == 2 || (mode == 1 && !stdio))
			p->c[i] = p->c[--p->n];
		else
			i++;
	}
	if (!p->n)
		return;
	/* (no memfd without a hand-over: it would reach the new program) */
	p->memfd = st && st->export ? memfd_create("xsock-exec", 0) : -1;
	if (!st || !st->export || p->memfd < 0) {
		for (int i = 0; i < p->n; i++)
			p->c[i].s = NULL;
		p->n = 0;
		if (xsk_debug())
			fprintf(stderr, "libxsock: execve: IWARP sockets not carried (%s)\n",
				!st || !st->export ? "libiwarp has no hand-over" : xs_strerror(errno));
		return;
	}
	uint8_t hdr[XSK_EXEC_HDR_LEN];
	uint32_t count = 0;
	xsk_exec_hdr_encode(hdr, 0); /* the count once known */
	if (write_all(p->memfd, hdr, sizeof(hdr)))
		goto fail;
	for (int i = 0; i < p->n; i++) {
		struct carried *c = &p->c[i];
		int rc = carry(st, c, p->memfd);
		int sfd;

		if (rc && rc != -EOPNOTSUPP && rc != -ENOTCONN && rc != -EPIPE && rc != -EBUSY)
			goto fail;
		if (rc) {
			/* a listener or a dead connection: the new program gets
			 * the sentinel only */
			if (xsk_debug())
				fprintf(stderr, "libxsock: execve: fd %d not carried: %s\n", c->fds[0],
					rc == -EOPNOTSUPP ? "a listening IWARP socket" : xs_strerror(-rc));
		} else {
			count++;
		}
		c->saved_epfd = xsk_real.fcntl(c->fds[0], F_DUPFD_CLOEXEC, 3);
		sfd = sentinel();
		if (c->saved_epfd < 0 || sfd < 0) {
			if (sfd >= 0)
				xsk_real.close(sfd);
			goto fail;
		}
		for (int k = 0; k < c->nfds; k++)
			xsk_real.dup2(sfd, c->fds[k]); /* no close-on-exec */
		xsk_real.close(sfd);
	}
	xsk_exec_hdr_encode(hdr, count);
	if (pwrite(p->memfd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr))
		goto fail;
	snprintf(p->env, sizeof(p->env), XSK_EXEC_ENV "=%d", p->memfd);
	return;
fail:
	if (xsk_debug())
		fprintf(stderr, "libxsock: execve: IWARP sockets not carried: %s\n", xs_strerror(errno));
	undo(st, p);
	p->n = 0;
}

/* envp with our variables set (replacing inherited ones, a NULL one
 * left out); malloc'd.  keep_stack: the new program gets IWARP sockets
 * (a hand-over, or relayed ones), which work only with libxsock there.
 * An envp with neither LD_PRELOAD nor any XSOCK_* variable is a clean
 * environment (systemd-socket-activate --inetd, sudo's env_reset), not a
 * choice against the stack: it gets ours.  LD_PRELOAD removed alone
 * (env -u LD_PRELOAD) is honoured. */
static char **with_env(char *const envp[], const char *var, const char *raddr, bool keep_stack)
{
	static const char *const ours[] = { XSK_EXEC_ENV "=", XSK_RADDR_ENV "=" };
	size_t n = 0, k = 0, add = 0;
	char **out;

	while (envp && envp[n]) {
		if (!strncmp(envp[n], "LD_PRELOAD=", 11) || !strncmp(envp[n], "XSOCK_", 6))
			keep_stack = false;
		n++;
	}
	for (size_t i = 0; keep_stack && environ && environ[i]; i++)
		add++;
	out = malloc((n + add + 3) * sizeof(*out));
	if (!out)
		return NULL;
	for (size_t i = 0; i < n + add; i++) {
		char *e = i < n ? envp[i] : environ[i - n];
		bool mine = false;
		for (size_t j = 0; j < sizeof(ours) / sizeof(ours[0]); j++)
			mine |= !strncmp(e, ours[j], strlen(ours[j]));
		if (!mine && (i < n || !strncmp(e, "LD_PRELOAD=", 11) || !strncmp(e, "XSOCK_", 6)))
			out[k++] = e;
	}
	if (var)
		out[k++] = (char *)var;
	if (raddr)
		out[k++] = (char *)raddr;
	out[k] = NULL;
	return out;
}

/* The execve family: prepare, call the real one with the variable, undo
 * if it returns. */
typedef int (*exec_fn)(const char *, char *const[], char *const[]);

static int exec_common(exec_fn real, const char *path, char *const argv[], char *const envp[])
{
	struct plan *p = malloc(sizeof(*p));
	char **env, *raddr;
	int rc, e;

	if (!p)
		return real(path, argv, envp);
	prepare(p);
	raddr = xsk_raddr_exec_env(); /* after prepare: its relayed stdio too */
	env = with_env(envp, p->n && p->env[0] ? p->env : NULL, raddr, (p->n && p->env[0]) || raddr);
	rc = real(path, argv, env ? env : (char **)envp);
	e = errno;
	free(raddr);
	if (p->n) {
		const struct xsk_stack *st = xsk_stack();
		undo(st, p);
	}
	free(env);
	free(p);
	errno = e;
	return rc;
}

static exec_fn real_fn(exec_fn *slot, const char *name)
{
	if (!*slot)
		*(void **)slot = dlsym(RTLD_NEXT, name);
	return *slot;
}

XSK_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	static exec_fn r;
	return exec_common(real_fn(&r, "execve"), path, argv, envp);
}

XSK_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	static exec_fn r;
	return exec_common(real_fn(&r, "execvpe"), file, argv, envp);
}

XSK_EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

XSK_EXPORT int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

static int fexecve_real(const char *fdstr, char *const argv[], char *const envp[])
{
	static int (*r)(int, char *const[], char *const[]);
	if (!r)
		*(void **)&r = dlsym(RTLD_NEXT, "fexecve");
	return r(atoi(fdstr), argv, envp);
}

XSK_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	char fdstr[16];
	snprintf(fdstr, sizeof(fdstr), "%d", fd);
	return exec_common(fexecve_real, fdstr, argv, envp);
}

/* execl, execlp, execle: the arguments as a malloc'd array (and for
 * execle the environment after the NULL). */
static char **argv_from(const char *arg0, va_list ap, char ***envp)
{
	size_t n = 1;
	va_list c;
	char **argv;

	va_copy(c, ap);
	while (va_arg(c, char *))
		n++;
	va_end(c);
	argv = malloc((n + 1) * sizeof(*argv));
	if (!argv)
		return NULL;
	argv[0] = (char *)arg0;
	for (size_t i = 1; i <= n; i++)
		argv[i] = va_arg(ap, char *);
	if (envp)
		*envp = va_arg(ap, char **);
	return argv;
}

static int execl_common(int which, const char *path, const char *arg, va_list ap)
{
	char **envp = environ;
	char **argv = argv_from(arg, ap, which == 2 ? &envp : NULL);
	int rc, e;

	if (!argv) {
		errno = ENOMEM;
		return -1;
	}
	rc = which == 1 ? execvpe(path, argv, envp) : execve(path, argv, envp);
	e = errno;
	free(argv);
	errno = e;
	return rc;
}

XSK_EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	int rc = execl_common(0, path, arg, ap);
	va_end(ap);
	return rc;
}

XSK_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	int rc = execl_common(1, file, arg, ap);
	va_end(ap);
	return rc;
}

XSK_EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	int rc = execl_common(2, path, arg, ap);
	va_end(ap);
	return rc;
}

/* ---- the new program ------------------------------------------------------------ */

static int read_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = xsk_real.read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The stream numbers of the old process's socket (its pointers, fds and
 * locks are not used). */
static void stream_numbers(struct xsk *s, const struct xsk *o)
{
	s->state = XSK_CONNECTED;
	s->nonblock = o->nonblock;
	s->cloexec = false;
	s->err = o->err;
	s->local = o->local;
	s->peer = o->peer;
	s->have_local = o->have_local;
	xsk_opts_copy(s, o);
	s->rbuf_size = o->rbuf_size;
	s->rbuf_offset = o->rbuf_offset;
	s->rbuf_free_offset = o->rbuf_free_offset;
	s->rbuf_bytes_avail = o->rbuf_bytes_avail;
	s->rbytes = o->rbytes;
	s->rmsg_head = o->rmsg_head;
	s->rmsg_count = o->rmsg_count;
	s->rq_size = o->rq_size;
	s->rseq_no = o->rseq_no;
	s->rseq_comp = o->rseq_comp;
	s->remote_sgl = o->remote_sgl;
	s->remote_sge = o->remote_sge;
	s->swap = o->swap;
	memcpy(s->tsgl, o->tsgl, sizeof(s->tsgl));
	s->target_sge = o->target_sge;
	s->tsge_wait = o->tsge_wait;
	s->sseq_no = o->sseq_no;
	s->sseq_comp = o->sseq_comp;
	s->sbuf_size = o->sbuf_size;
	s->sbuf_head = o->sbuf_head;
	s->sbuf_tail = o->sbuf_tail;
	s->sbuf_used = o->sbuf_used;
	s->shut_rd = o->shut_rd;
	s->shut_wr = o->shut_wr;
	s->peer_shut_wr = o->peer_shut_wr;
	s->peer_gone = o->peer_gone;
	s->peer_ctrl = o->peer_ctrl;
	s->disc_sent = o->disc_sent;
	s->sgl_seen = o->sgl_seen;
}

/* The memfd's next entry with its rings and message lengths, decoded
 * (xsk_exec_wire.h): 0, -ENOMEM, or -EBADMSG with *why (e->tcpfd -1 if
 * the entry itself did not decode: no number of it is to be closed). */
static int read_ent(int memfd, struct xsk_exec_ent *e, uint8_t **mem, uint8_t **sbuf,
		    struct xsk_rmsg **rmsg, const char **why)
{
	uint8_t *buf = malloc(XSK_EXEC_ENT_LEN);
	size_t rlen;
	int rc = -ENOMEM;

	e->tcpfd = -1;
	if (!buf)
		return -ENOMEM;
	*why = "truncated entry";
	if (read_all(memfd, buf, XSK_EXEC_ENT_LEN) ||
	    (*why = xsk_exec_ent_decode(buf, XSK_EXEC_ENT_LEN, e))) {
		e->tcpfd = -1;
		free(buf);
		return -EBADMSG;
	}
	free(buf);
	rlen = 4 * (size_t)e->rmsg_cap;
	buf = malloc(rlen);
	*mem = malloc(e->mem_len);
	*sbuf = malloc(e->sbuf_size);
	*rmsg = calloc(e->rmsg_cap, sizeof(**rmsg));
	if (!buf || !*mem || !*sbuf || !*rmsg)
		goto out;
	rc = -EBADMSG;
	*why = "truncated rings";
	if (read_all(memfd, *mem, e->mem_len) || read_all(memfd, *sbuf, e->sbuf_size) ||
	    read_all(memfd, buf, rlen))
		goto out;
	*why = xsk_exec_rmsg_decode(buf, rlen, e->rmsg_cap, *rmsg);
	rc = *why ? -EBADMSG : 0;
out:
	free(buf);
	return rc;
}

/* One socket from the memfd: 0, -EIO when the memfd is not a hand-over
 * (the rest is not read), or the socket's own error. */
static int adopt_one(int memfd)
{
	struct xsk_exec_ent *e = malloc(sizeof(*e));
	uint8_t *mem = NULL, *sbuf = NULL;
	struct xsk_rmsg *rmsg = NULL;
	struct xsk *s = NULL;
	const char *why = NULL;
	int rc;

	if (!e)
		return -ENOMEM;
	e->fds[0] = -1;
	rc = read_ent(memfd, e, &mem, &sbuf, &rmsg, &why);
	if (rc == -EBADMSG) {
		xsk_local_drop("exec hand-over entry", why);
		rc = -EIO;
		goto out;
	}
	if (rc)
		goto out;
	s = xsk_new(e->sock.family);
	if (!s) {
		rc = -ENOMEM;
		goto out;
	}
	stream_numbers(s, &e->sock);
	s->mem_len = e->mem_len; /* checked against the layout xsk_setup_qp makes */
	rc = xsk_adopt_conn(s, e->tcpfd, e->wire, e->rkey, e->iova, mem, sbuf, rmsg, e->rmsg_cap);
	e->tcpfd = -1; /* the connection owns it (or closed it) */
	if (rc)
		goto out;
	/* the fd numbers: the sentinel goes, the inner epoll fd comes */
	for (int k = 0; k < e->nfds; k++) {
		rc = xsk_real.dup3(s->epfd, e->fds[k], 0) < 0 ? -errno : xsk_tab_adopt(e->fds[k], s);
		if (rc < 0) {
			/* the table names s under the numbers before k: their
			 * detach drops its references, the last one frees s */
			for (int j = 0; j < k; j++)
				xsk_tab_detach(e->fds[j]);
			if (k)
				s = NULL;
			goto out;
		}
	}
	xsk_real.close(s->epfd);
	s->epfd = e->fds[0];
	s->epfd_app = true;
	if (s->nonblock) {
		int fl = xsk_real.fcntl(s->epfd, F_GETFL);
		if (fl >= 0)
			xsk_real.fcntl(s->epfd, F_SETFL, fl | O_NONBLOCK);
	}
	xsk_mutex_lock(&s->mu);
	xsk_progress(s);
	xsk_mutex_unlock(&s->mu);
	s = NULL;
	rc = 0;
out:
	if (rc && e->tcpfd >= 0)
		xsk_real.close(e->tcpfd);
	if (rc && !why && xsk_debug())
		fprintf(stderr, "libxsock: exec hand-over: fd %d not taken over: %s\n", e->fds[0],
			xs_strerror(-rc));
	if (s)
		xsk_free(s); /* the fd numbers keep the sentinel: a clear failure */
	free(mem);
	free(sbuf);
	free(rmsg);
	free(e);
	return rc;
}

__attribute__((constructor)) static void xsk_exec_adopt(void)
{
	unsigned long fd = xsk_setting_num(XS_SET_EXEC_FD);
	uint8_t hdr[XSK_EXEC_HDR_LEN];
	const char *why;
	uint32_t count;
	ssize_t n;

	if (fd == XS_SET_NONE)
		return; /* unset (or invalid, said) */
	unsetenv(XSK_EXEC_ENV); /* not for our own children */
	xsk_real_init();
	n = pread((int)fd, hdr, sizeof(hdr), 0);
	why = n < 0 ? "unreadable" : xsk_exec_hdr_decode(hdr, (size_t)n, &count);
	if (why) {
		xsk_local_drop("exec hand-over", why);
		xsk_real.close((int)fd);
		return;
	}
	lseek((int)fd, sizeof(hdr), SEEK_SET);
	for (uint32_t i = 0; i < count; i++)
		if (adopt_one((int)fd) == -EIO)
			break;
	xsk_real.close((int)fd);
	/* an inetd service's stdio is the connection (git upload-pack's
	 * fflush(stdout)) */
	for (int k = 0; k <= 2; k++)
		xsk_stdio_std(k);
}
