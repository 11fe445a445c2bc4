/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* sendfile(2) to an IWARP socket (libxsock/xsk_sendfile.c), each case run
 * on a kernel TCP pair and on an IWARP pair: an offset pointer and NULL
 * (the file position), a count beyond the file and beyond MAX_RW_COUNT,
 * count 0, a nonblocking socket whose peer does not read (partial counts,
 * then EAGAIN, the offset moved by what was sent), and the errors, which
 * must be the kernel's.  The peer checks every byte against the file. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/xs_test.h"
#include "tests/xs_test_sock.h"

#define FSIZE (24u << 20) /* more than a loopback TCP socket buffers */

static uint8_t *fdata;
static char fpath[] = "/tmp/xs-sendfile-XXXXXX";

struct pair {
	int tx, rx;
};

static struct pair mkpair(int iwarp)
{
	struct sockaddr_in a;
	struct pair p;
	int l = xs_sock_listen(iwarp, &a);

	REQUIRE(l >= 0);
	p.tx = xs_sock_connect(iwarp, &a);
	REQUIRE(p.tx >= 0);
	p.rx = accept(l, NULL, NULL);
	REQUIRE(p.rx >= 0);
	close(l);
	return p;
}

struct reader {
	int fd;
	size_t want, from; /* file[from .. from + want) expected */
	int ok;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	size_t n = r->want < 65536 ? 65536 : r->want;
	uint8_t *buf = malloc(n);

	r->ok = buf && xs_read_full(r->fd, buf, r->want) == 0 &&
		memcmp(buf, fdata + r->from, r->want) == 0;
	free(buf);
	return NULL;
}

/* A blocking sendfile with a peer reading want bytes: its return. */
static ssize_t sf_read(struct pair *p, int in, off_t *off, size_t count, size_t from, size_t want,
		       int *ok)
{
	struct reader r = { p->rx, want, from, 0 };
	pthread_t t;
	ssize_t n;

	REQUIRE(pthread_create(&t, NULL, reader_main, &r) == 0);
	n = sendfile(p->tx, in, off, count);
	if (n != (ssize_t)want)
		shutdown(p->tx, SHUT_WR); /* end the reader */
	pthread_join(t, NULL);
	*ok = r.ok;
	return n;
}

static void data_cases(int iwarp, int in)
{
	struct pair p = mkpair(iwarp);
	const char *m = iwarp ? "iwarp" : "kernel";
	off_t off;
	int ok;

	/* an offset: the file position stays */
	REQUIRE(lseek(in, 12345, SEEK_SET) == 12345);
	off = 1000;
	CHECK_EQ_U(sf_read(&p, in, &off, 300000, 1000, 300000, &ok), 300000);
	CHECK(ok);
	CHECK_EQ_U(off, 301000);
	CHECK_EQ_U(lseek(in, 0, SEEK_CUR), 12345);

	/* NULL: from the file position, which moves */
	REQUIRE(lseek(in, 5000, SEEK_SET) == 5000);
	CHECK_EQ_U(sf_read(&p, in, NULL, 70001, 5000, 70001, &ok), 70001);
	CHECK(ok);
	CHECK_EQ_U(lseek(in, 0, SEEK_CUR), 75001);

	/* count 0 */
	off = 77;
	CHECK_EQ_U(sendfile(p.tx, in, &off, 0), 0);
	CHECK_EQ_U(off, 77);
	CHECK_EQ_U(sendfile(p.tx, in, NULL, 0), 0);
	CHECK_EQ_U(lseek(in, 0, SEEK_CUR), 75001);

	/* a count beyond the file and beyond MAX_RW_COUNT: to the end */
	off = FSIZE - 100000;
	CHECK_EQ_U(sf_read(&p, in, &off, (size_t)1 << 40, FSIZE - 100000, 100000, &ok), 100000);
	CHECK(ok);
	CHECK_EQ_U(off, FSIZE);
	CHECK_EQ_U(sendfile(p.tx, in, &off, 4096), 0); /* at the end */
	off = FSIZE - 3;
	CHECK_EQ_U(sf_read(&p, in, &off, 0x7fffffffu, FSIZE - 3, 3, &ok), 3);
	CHECK(ok);
	fprintf(stderr, "%s: offset, NULL, count 0, clamp: ok\n", m);

	/* nonblocking, the peer reads nothing: partial counts, then EAGAIN */
	REQUIRE(fcntl(p.tx, F_SETFL, fcntl(p.tx, F_GETFL) | O_NONBLOCK) == 0);
	size_t total = 0, calls = 0, partial = 0;
	ssize_t n;
	off = 0;
	while ((n = sendfile(p.tx, in, &off, 1u << 20)) > 0) {
		total += (size_t)n;
		calls++;
		partial += n < (1 << 20);
		CHECK_EQ_U(off, total);
		REQUIRE(total < FSIZE);
	}
	CHECK(n < 0 && errno == EAGAIN);
	CHECK_EQ_U(off, total);
	CHECK(partial >= 1 || total == 0);
	fprintf(stderr, "%s: nonblocking: %zu bytes in %zu calls (%zu partial), then EAGAIN\n", m,
		total, calls, partial);
	/* nothing lost, nothing twice: the peer gets exactly file[0 .. total) */
	uint8_t *got = malloc(total + 1);
	REQUIRE(got);
	CHECK(xs_read_full(p.rx, got, total) == 0);
	CHECK(memcmp(got, fdata, total) == 0);
	free(got);
	REQUIRE(fcntl(p.rx, F_SETFL, fcntl(p.rx, F_GETFL) | O_NONBLOCK) == 0);
	uint8_t b;
	CHECK(read(p.rx, &b, 1) < 0 && errno == EAGAIN);

	/* the peer gone: EPIPE (SIGPIPE ignored) or ECONNRESET */
	close(p.rx);
	usleep(100000);
	off = 0;
	for (int i = 0; i < 100 && (n = sendfile(p.tx, in, &off, 65536)) >= 0; i++)
		usleep(10000);
	CHECK(n < 0 && (errno == EPIPE || errno == ECONNRESET));
	fprintf(stderr, "%s: peer gone: %s\n", m, n < 0 ? strerror(errno) : "no error");
	close(p.tx);
}

struct errcase {
	const char *what;
	int in;
	off_t *off;
	size_t count;
};

/* The errors: the same return and errno as the kernel's for a TCP socket. */
static void error_cases(int file)
{
	struct pair k = mkpair(0), w = mkpair(1);
	int pfd[2], sp[2], wr, dir;
	off_t neg = -1, zero = 0;
	char dpath[] = "/tmp";

	REQUIRE(pipe(pfd) == 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
	REQUIRE(write(pfd[1], "x", 1) == 1 && write(sp[1], "y", 1) == 1);
	wr = open(fpath, O_WRONLY);
	dir = open(dpath, O_RDONLY | O_DIRECTORY);
	REQUIRE(wr >= 0 && dir >= 0);
	struct errcase cs[] = {
		{ "in not open", 9999, NULL, 10 },
		{ "in write-only", wr, NULL, 10 },
		{ "in write-only, offset", wr, &zero, 10 },
		{ "in write-only, negative offset", wr, &neg, 10 },
		{ "in a pipe", pfd[0], NULL, 10 },
		{ "in a pipe, offset", pfd[0], &zero, 10 },
		{ "in a pipe's write end, offset", pfd[1], &zero, 10 },
		{ "in a socket", sp[0], NULL, 10 },
		{ "in a socket, offset", sp[0], &zero, 10 },
		{ "in an IWARP socket", w.rx, NULL, 10 },
		{ "in a directory", dir, NULL, 10 },
		{ "negative offset", file, &neg, 10 },
		{ "count beyond ssize_t", file, &zero, (size_t)-1 },
		{ "offset + count wraps", file, &(off_t){ INT64_MAX - 5 }, 10 },
		{ "offset pointer into nothing", file, (off_t *)8, 10 },
		{ "count 0, in a pipe", pfd[0], NULL, 0 },
	};
	for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
		off_t save = cs[i].off && cs[i].off != (off_t *)8 ? *cs[i].off : 0;
		errno = 0;
		ssize_t rk = sendfile(k.tx, cs[i].in, cs[i].off, cs[i].count);
		int ek = errno;
		if (cs[i].off && cs[i].off != (off_t *)8)
			*cs[i].off = save;
		errno = 0;
		ssize_t rw = sendfile(w.tx, cs[i].in, cs[i].off, cs[i].count);
		int ew = errno;
		if (cs[i].off && cs[i].off != (off_t *)8)
			*cs[i].off = save;
		fprintf(stderr, "%-32s kernel %zd %-8s iwarp %zd %s\n", cs[i].what, rk,
			rk < 0 ? strerrorname_np(ek) : "", rw, rw < 0 ? strerrorname_np(ew) : "");
		CHECK(rk < 0); /* each case is an error for the kernel */
		CHECK_EQ_U(rw, rk);
		CHECK_EQ_U(ew, ek);
	}
	close(pfd[0]);
	close(pfd[1]);
	close(sp[0]);
	close(sp[1]);
	close(wr);
	close(dir);
	close(k.tx);
	close(k.rx);
	close(w.tx);
	close(w.rx);
}

int main(void)
{
	int fd, in;

	signal(SIGPIPE, SIG_IGN);
	xs_test_seed(0x5e4df11e);
	fdata = malloc(FSIZE);
	REQUIRE(fdata);
	xs_rand_fill(fdata, FSIZE);
	fd = mkstemp(fpath);
	REQUIRE(fd >= 0);
	REQUIRE(write(fd, fdata, FSIZE) == (ssize_t)FSIZE);
	close(fd);
	in = open(fpath, O_RDONLY);
	REQUIRE(in >= 0);
	data_cases(0, in);
	data_cases(1, in);
	error_cases(in);
	close(in);
	unlink(fpath);
	free(fdata);
	return xs_test_result();
}
