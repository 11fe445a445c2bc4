/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* xsock-rdma-demo: an ordinary sockets program extended with libxsock's
 * calls.  The server registers a buffer and sends its descriptor over the
 * socket; the client RDMA-Writes a buffer into it (one-sided: the server
 * calls nothing meanwhile), then sends the SHA-256 of what it wrote; the
 * server hashes its buffer, compares and answers.
 *
 *   xsock-rdma-demo [-s SIZE]                 both ends (the client is run
 *                                             as a child process)
 *   xsock-rdma-demo -l PORT [-s SIZE]         server on 0.0.0.0:PORT
 *   xsock-rdma-demo -c HOST -p PORT [-s SIZE] client
 *
 * Beyond a plain TCP program it takes one setsockopt (IWARP_MODE) and the
 * xsock_* calls; see xsock-rdma-demo(1). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libxsock/xsock.h"

#define MSG_LEN (4 + SHA256_DIGEST_LENGTH)

static int die(const char *what)
{
	fprintf(stderr, "xsock-rdma-demo: %s: %s\n", what, strerror(errno));
	return 1;
}

static int full(int fd, void *buf, size_t n, int wr)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = wr ? write(fd, (char *)buf + done, n - done)
			       : read(fd, (char *)buf + done, n - done);
		if (r <= 0) {
			if (r == 0)
				errno = ECONNRESET;
			return -1;
		}
		done += (size_t)r;
	}
	return 0;
}

static int iwarp_socket(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), on = 1;

	if (fd >= 0 && setsockopt(fd, SOL_IWARP, IWARP_MODE, &on, sizeof(on)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void hex(const unsigned char *d, char *out)
{
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

/* The server's part on a connected socket. */
static int serve(int fd, size_t size)
{
	unsigned char *buf = calloc(1, size), msg[MSG_LEN], md[SHA256_DIGEST_LENGTH];
	uint8_t wire[XSOCK_RDESC_LEN];
	struct xsock_mr *mr;
	struct xsock_rdesc d;
	char hx[2 * SHA256_DIGEST_LENGTH + 1];
	int ok;

	if (!buf)
		return die("calloc");
	if (xsock_reg(fd, buf, size, XSOCK_ACCESS_REMOTE_WRITE, &mr) < 0)
		return die("xsock_reg");
	if (xsock_mr_desc(mr, &d) < 0)
		return die("xsock_mr_desc");
	xsock_rdesc_encode(&d, wire);
	if (full(fd, wire, sizeof(wire), 1) < 0)
		return die("sending the descriptor");
	/* the client's Write lands without any call here; its message follows */
	if (full(fd, msg, sizeof(msg), 0) < 0 || memcmp(msg, "done", 4))
		return die("reading the client's message");
	SHA256(buf, size, md);
	ok = memcmp(md, msg + 4, sizeof(md)) == 0;
	hex(md, hx);
	printf("server: %zu bytes placed by RDMA Write, sha256 %s: %s\n", size, hx,
	       ok ? "match" : "MISMATCH");
	char answer[2] = { ok ? 'O' : 'N', ok ? 'K' : 'O' };
	if (full(fd, answer, 2, 1) < 0)
		return die("answering");
	xsock_dereg(mr);
	free(buf);
	return ok ? 0 : 1;
}

/* The client's part on a connected socket. */
static int client(int fd, size_t size)
{
	unsigned char *buf = malloc(size), msg[MSG_LEN];
	uint8_t wire[XSOCK_RDESC_LEN];
	struct xsock_mr *mr;
	struct xsock_rdesc d;
	struct xsock_comp c;
	struct timespec t0, t1;
	char answer[2];

	if (!buf)
		return die("malloc");
	for (size_t i = 0; i < size; i++)
		buf[i] = (unsigned char)(i * 2654435761u >> 13);
	if (xsock_reg(fd, buf, size, 0, &mr) < 0)
		return die("xsock_reg");
	if (full(fd, wire, sizeof(wire), 0) < 0)
		return die("reading the descriptor");
	xsock_rdesc_decode(wire, &d);
	if (d.len < size) {
		fprintf(stderr, "xsock-rdma-demo: the server offers only %u bytes\n", d.len);
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (xsock_rdma_write(fd, mr, 0, size, &d, 0, 1, 0) < 0)
		return die("xsock_rdma_write");
	if (xsock_wait_comp(fd, &c, 1, 30000) != 1)
		return die("xsock_wait_comp");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (c.status) {
		fprintf(stderr, "xsock-rdma-demo: RDMA Write failed: %s\n", strerror(c.status));
		return 1;
	}
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("client: RDMA Write of %zu bytes to stag 0x%08x done in %.3f ms (%.0f MB/s)\n",
	       c.len, d.stag, s * 1e3, s > 0 ? (double)c.len / s / 1e6 : 0.0);
	memcpy(msg, "done", 4);
	SHA256(buf, size, msg + 4);
	if (full(fd, msg, sizeof(msg), 1) < 0 || full(fd, answer, 2, 0) < 0)
		return die("exchanging the checksum");
	printf("client: server says %.2s\n", answer);
	xsock_dereg(mr);
	free(buf);
	return memcmp(answer, "OK", 2) != 0;
}

static int listen_on(int port, int *pport)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(port ? INADDR_ANY : INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int on = 1, l = iwarp_socket();

	if (l < 0)
		return -1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0) {
		close(l);
		return -1;
	}
	*pport = ntohs(a.sin_port);
	return l;
}

static int connect_to(const char *host, int port)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
	char ps[16];
	int fd;

	snprintf(ps, sizeof(ps), "%d", port);
	if (getaddrinfo(host, ps, &hints, &ai)) {
		errno = EHOSTUNREACH;
		return -1;
	}
	fd = iwarp_socket();
	if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd;
}

static int usage(void)
{
	fprintf(stderr, "usage: xsock-rdma-demo [-s SIZE]\n"
			"       xsock-rdma-demo -l PORT [-s SIZE]\n"
			"       xsock-rdma-demo -c HOST -p PORT [-s SIZE]\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *host = NULL;
	size_t size = 16u << 20;
	int port = -1, lport = -1, opt, rc;

	while ((opt = getopt(argc, argv, "l:c:p:s:")) != -1) {
		switch (opt) {
		case 'l':
			lport = atoi(optarg);
			break;
		case 'c':
			host = optarg;
			break;
		case 'p':
			port = atoi(optarg);
			break;
		case 's':
			size = strtoul(optarg, NULL, 0);
			break;
		default:
			return usage();
		}
	}
	if (!size || size > UINT32_MAX || (host && port <= 0) || (host && lport >= 0))
		return usage();
	if (host) {
		int fd = connect_to(host, port);
		if (fd < 0)
			return die("connect");
		rc = client(fd, size);
		close(fd);
		return rc;
	}
	int l = listen_on(lport > 0 ? lport : 0, &port);
	if (l < 0)
		return die("listen");
	pid_t pid = 0;
	if (lport < 0) { /* both ends: the client in a child process */
		fflush(stdout);
		pid = fork();
		if (pid < 0)
			return die("fork");
		if (pid == 0) { /* a fresh program: the stack does not survive fork */
			char ps[16], ss[32];
			snprintf(ps, sizeof(ps), "%d", port);
			snprintf(ss, sizeof(ss), "%zu", size);
			execl("/proc/self/exe", argv[0], "-c", "127.0.0.1", "-p", ps, "-s", ss,
			      (char *)NULL);
			_exit(die("exec"));
		}
	}
	int fd = accept(l, NULL, NULL);
	if (fd < 0)
		return die("accept");
	close(l);
	rc = serve(fd, size);
	close(fd);
	if (pid > 0) {
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			rc = 1;
	}
	return rc;
}
