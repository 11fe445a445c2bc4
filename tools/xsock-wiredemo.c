/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* xsock-wiredemo: the protocol core doing real work over a real loopback TCP
 * connection.  An initiator and a responder (two threads) exchange MPA
 * Request/Reply (RFC 5044/6581), then the initiator sends Sends, an RDMA
 * Write and an RDMA Read Request; the responder answers with a Read Response.
 * Every byte is checked on arrival.  Finally the initiator writes to an STag
 * that does not exist and the responder answers with a Terminate, which the
 * initiator decodes.  Each FPDU leaves in one writev() with TCP_NODELAY, so a
 * capture has one FPDU per TCP segment (what tshark's MPA dissector expects).
 *
 * Exit status 0 only if the whole exchange happened as described. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "iwarp/iw_stream.h"
#include "util/xs_be.h"
#include "util/xs_iov.h"

struct demo_opts {
	bool crc, markers, terminate;
	bool paced; /* one FPDU per TCP segment even under backpressure */
	uint8_t rev;
	unsigned port;
	unsigned mss; /* 0: the socket's TCP_MAXSEG */
	size_t size; /* RDMA Write / Read size */
	unsigned sends;
	bool quiet;
};

static struct demo_opts opt = { .rev = 2, .size = 1 << 20, .sends = 8, .terminate = true };

/* In the Reply's private data: Write target STag(4) TO(8), Read source STag(4) TO(8) */
#define DEMO_REGION_INFO_LEN 24

struct demo_region {
	uint32_t stag;
	uint8_t *base;
	uint32_t len;
	bool remote_write;
	bool remote_read;
};

struct demo_ep {
	const char *name;
	int fd;
	struct mpa_agreed agreed;
	struct iw_tx tx;
	struct iw_rx rx;
	struct ddp_queue q[3];
	struct demo_region regions[2];
	int nregions;
	/* progress */
	unsigned sends_ok;
	bool write_checked;
	bool read_done;
	bool term_seen;
	struct rdmap_term term;
	uint8_t rrq_buf[8][RDMAP_READ_REQ_LEN];
	uint8_t term_buf[RDMAP_TERM_MAX_LEN];
	uint8_t *send_bufs[64];
	size_t send_len[64];
	uint64_t fpdus_tx;
	uint64_t bytes_tx;
	uint64_t fpdus_end_on_marker; /* see wait_acked */
	int failed;
};

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static uint8_t pattern(size_t i, unsigned salt)
{
	return (uint8_t)(i * 131 + salt * 17 + (i >> 9));
}

static void fill(uint8_t *p, size_t n, unsigned salt)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pattern(i, salt);
}

static bool check(const uint8_t *p, size_t n, unsigned salt)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pattern(i, salt))
			return false;
	return true;
}

static uint32_t new_stag(void)
{
	uint8_t r[4];

	/* STag keys come from the CSPRNG so a peer cannot guess them */
	if (RAND_bytes(r, sizeof(r)) != 1)
		die("RAND_bytes");
	return xs_get_be32(r) | 1; /* never 0 */
}

/* TCP coalesces writes that queue up behind a closed window, so FPDUs and
 * segments drift apart.  A capture meant for a dissector that assumes one
 * FPDU per segment waits until each FPDU is acknowledged (bounded: 5 s). */
static int wait_acked(int fd)
{
	for (int i = 0; i < 100000; i++) {
		int queued = 0;
		if (ioctl(fd, SIOCOUTQ, &queued) < 0)
			return -errno;
		if (queued == 0)
			return 0;
		usleep(50);
	}
	return -ETIMEDOUT;
}

static int write_all(void *ctx, const struct iovec *iov, int cnt, size_t len)
{
	struct demo_ep *ep = ctx;
	struct iovec v[MPA_TX_MAX_IOV];
	size_t left = len;

	memcpy(v, iov, (size_t)cnt * sizeof(*v));
	struct iovec *p = v;
	while (left > 0) {
		ssize_t n = writev(ep->fd, p, cnt);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		left -= (size_t)n;
		xs_iov_advance(&p, &cnt, (size_t)n);
	}
	ep->fpdus_tx++;
	ep->bytes_tx += len;
	/* Wireshark 4.0's MPA dissector counts one Marker too many in an FPDU
	 * that ends exactly where the next Marker is due, and then does not
	 * decode it; report such FPDUs so a capture test can avoid them. */
	if (ep->tx.mpa.markers && ep->tx.mpa.pos % MPA_MARKER_INTERVAL == 0)
		ep->fpdus_end_on_marker++;
	if (opt.paced)
		return wait_acked(ep->fd);
	return 0;
}

static int read_exact(int fd, uint8_t *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = read(fd, buf, len);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read one MPA Request/Reply: exactly its bytes, never the FPDU behind it. */
static int read_frame(int fd, enum mpa_frame_type type, uint8_t *buf, size_t cap,
		      struct mpa_frame *f)
{
	size_t have = 0, need = MPA_RR_HDR_LEN;
	struct xs_err err;

	for (;;) {
		if (need > cap)
			return -EMSGSIZE;
		int rc = read_exact(fd, buf + have, need - have);
		if (rc < 0)
			return rc;
		have = need;
		rc = mpa_frame_decode(buf, have, type, f, &need, &err);
		if (rc == 0)
			return 0;
		if (rc != -EAGAIN) {
			fprintf(stderr, "bad MPA frame: LLP/%u/0x%02x\n", err.etype, err.ecode);
			return rc;
		}
	}
}

static int demo_resolve(void *ctx, uint32_t stag, uint64_t to, uint32_t len, uint8_t **dst,
			struct xs_err *err)
{
	struct demo_ep *ep = ctx;

	for (int i = 0; i < ep->nregions; i++) {
		struct demo_region *r = &ep->regions[i];
		if (r->stag != stag)
			continue;
		/* rx.op was checked before placement was asked for */
		bool want_write = ep->rx.op == RDMAP_OP_WRITE;
		if (want_write && !r->remote_write) {
			xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_PROT, RDMAP_ECODE_ACCESS);
			return -EACCES;
		}
		uint64_t base = (uint64_t)(uintptr_t)r->base;
		if (to < base || to - base > r->len || len > r->len - (to - base)) {
			xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_BASE_BOUNDS);
			return -ERANGE;
		}
		*dst = r->base + (to - base);
		return 0;
	}
	xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_INVALID_STAG);
	return -ENOENT;
}

static void demo_deliver(void *ctx, enum rdmap_opcode op, uint32_t qn, const struct ddp_delivery *d);
static void demo_tagged_last(void *ctx, enum rdmap_opcode op, const struct ddp_hdr *h);

static const struct iw_rx_ops demo_ops = {
	.deliver = demo_deliver,
	.tagged_last = demo_tagged_last,
};

static void ep_start(struct demo_ep *ep)
{
	int mss = 0;
	socklen_t sl = sizeof(mss);

	if (opt.mss)
		mss = (int)opt.mss;
	else if (getsockopt(ep->fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &sl) < 0 || mss <= 0)
		mss = 1460;
	size_t mulpdu = mpa_mulpdu((size_t)mss, ep->agreed.markers_tx);
	if (iw_tx_init(&ep->tx, ep->agreed.markers_tx, ep->agreed.crc, mulpdu, write_all, ep) < 0)
		die("iw_tx_init");
	iw_rx_init(&ep->rx, ep->agreed.markers_rx, ep->agreed.crc, 0, demo_resolve, ep, &demo_ops,
		   ep);
	for (uint32_t qn = 0; qn < 3; qn++) {
		if (ddp_queue_init(&ep->q[qn], qn, 64, 1) < 0 || ddp_rx_add_queue(&ep->rx.ddp, &ep->q[qn]) < 0)
			die("ddp_queue_init");
	}
	for (int i = 0; i < 8; i++)
		ddp_queue_post(&ep->q[RDMAP_QN_READ_REQ], ep->rrq_buf[i], RDMAP_READ_REQ_LEN, NULL);
	ddp_queue_post(&ep->q[RDMAP_QN_TERMINATE], ep->term_buf, sizeof(ep->term_buf), NULL);
	if (!opt.quiet)
		printf("%s: MPA rev %u%s, CRC %s, markers tx %s rx %s, IRD %u ORD %u, MSS %d -> MULPDU %zu\n",
		       ep->name, ep->agreed.rev, ep->agreed.enhanced ? " (RFC 6581)" : "",
		       ep->agreed.crc ? "on" : "off", ep->agreed.markers_tx ? "on" : "off",
		       ep->agreed.markers_rx ? "on" : "off", ep->agreed.ird, ep->agreed.ord, mss, mulpdu);
}

static void ep_stop(struct demo_ep *ep)
{
	for (int i = 0; i < 3; i++)
		ddp_queue_destroy(&ep->q[i]);
}

static void demo_deliver(void *ctx, enum rdmap_opcode op, uint32_t qn, const struct ddp_delivery *d)
{
	struct demo_ep *ep = ctx;
	struct xs_err err;

	if (qn == RDMAP_QN_SEND) {
		unsigned idx = d->msn - 1;
		if (idx < opt.sends) {
			if (d->msg_len == ep->send_len[idx] && check(d->addr, d->msg_len, idx))
				ep->sends_ok++;
			else
				ep->failed = 1;
		} else if (idx == opt.sends) {
			/* "write done" marker Send: the Write before it must be in place */
			ep->write_checked = check(ep->regions[0].base, opt.size, 1000);
			if (!ep->write_checked)
				ep->failed = 1;
		}
		if (!opt.quiet)
			printf("%s: %s MSN %u, %u bytes%s\n", ep->name, rdmap_ops[op].name, d->msn,
			       d->msg_len, ep->failed ? " MISMATCH" : " ok");
	} else if (qn == RDMAP_QN_READ_REQ) {
		struct rdmap_read_req rr;
		if (rdmap_read_req_decode(d->addr, d->msg_len, &rr, &err) < 0) {
			ep->failed = 1;
			return;
		}
		ddp_queue_post(&ep->q[RDMAP_QN_READ_REQ], d->addr, RDMAP_READ_REQ_LEN, NULL);
		uint8_t *src;
		/* serve the read from the region the peer was told about */
		struct demo_region *r = &ep->regions[1];
		uint64_t base = (uint64_t)(uintptr_t)r->base;
		if (rr.src_stag != r->stag || rr.src_to < base || rr.size > r->len - (rr.src_to - base)) {
			ep->failed = 1;
			return;
		}
		src = r->base + (rr.src_to - base);
		struct iovec iov = { src, rr.size };
		if (!opt.quiet)
			printf("%s: Read Request %u bytes -> Read Response to STag 0x%08x\n", ep->name,
			       rr.size, rr.sink_stag);
		if (iw_tx_tagged(&ep->tx, RDMAP_OP_READ_RESP, rr.sink_stag, rr.sink_to, &iov, 1) < 0)
			ep->failed = 1;
	} else if (qn == RDMAP_QN_TERMINATE) {
		char s[160];
		if (rdmap_term_decode(d->addr, d->msg_len, &ep->term, &err) < 0) {
			ep->failed = 1;
			return;
		}
		ep->term_seen = true;
		printf("%s: received Terminate: %s%s\n", ep->name, xs_err_str(&ep->term.cause, s, sizeof(s)),
		       ep->term.d ? " (with the offending DDP header)" : "");
	}
}

static void demo_tagged_last(void *ctx, enum rdmap_opcode op, const struct ddp_hdr *h)
{
	struct demo_ep *ep = ctx;

	if (op == RDMAP_OP_READ_RESP) {
		ep->read_done = check(ep->regions[0].base, opt.size, 2000);
		if (!ep->read_done)
			ep->failed = 1;
		if (!opt.quiet)
			printf("%s: Read Response complete, %zu bytes %s\n", ep->name, opt.size,
			       ep->read_done ? "ok" : "MISMATCH");
	}
}

/* Receive until EOF or the stream dies; on a protocol error send a Terminate. */
static int ep_pump(struct demo_ep *ep, bool (*done)(struct demo_ep *))
{
	static __thread uint8_t buf[256 * 1024];
	struct xs_err err;

	while (!done || !done(ep)) {
		ssize_t n = read(ep->fd, buf, sizeof(buf));
		if (n == 0)
			return 0;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		int rc = iw_rx_input(&ep->rx, buf, (size_t)n, &err);
		if (rc < 0) {
			char s[160];
			struct rdmap_term t = { .cause = err };
			/* quote the offending DDP header when we have it */
			if (ep->rx.hdr_got == ep->rx.hdr_len && ep->rx.hdr_len) {
				t.d = true;
				memcpy(t.ddp_hdr, ep->rx.hdr, ep->rx.hdr_len);
				t.ddp_hdr_len = ep->rx.hdr_len;
			}
			printf("%s: protocol error %s -> sending Terminate\n", ep->name,
			       xs_err_str(&err, s, sizeof(s)));
			iw_tx_terminate(&ep->tx, &t);
			shutdown(ep->fd, SHUT_WR);
			return rc;
		}
	}
	return 0;
}

static void *responder(void *arg)
{
	struct demo_ep *ep = arg;
	uint8_t fbuf[MPA_RR_HDR_LEN + MPA_PD_MAX], out[MPA_RR_HDR_LEN + MPA_PD_MAX];
	uint8_t info[DEMO_REGION_INFO_LEN];
	struct mpa_frame req, rep;
	struct mpa_prefs prefs;
	struct xs_err err;

	/* region 0: the RDMA Write target; region 1: the RDMA Read source */
	for (int i = 0; i < 2; i++) {
		ep->regions[i].base = malloc(opt.size);
		ep->regions[i].len = (uint32_t)opt.size;
		ep->regions[i].stag = new_stag();
		if (!ep->regions[i].base)
			die("malloc");
	}
	memset(ep->regions[0].base, 0, opt.size);
	ep->regions[0].remote_write = true;
	fill(ep->regions[1].base, opt.size, 2000);
	ep->regions[1].remote_read = true;
	ep->nregions = 2;

	if (read_frame(ep->fd, MPA_REQUEST, fbuf, sizeof(fbuf), &req) < 0)
		die("read MPA Request");
	mpa_prefs_default(&prefs);
	prefs.rev = opt.rev;
	prefs.markers_rx = opt.markers;
	prefs.ird = prefs.ord = 8;
	/* tell the peer where to write and where to read from */
	xs_put_be32(info, ep->regions[0].stag);
	xs_put_be64(info + 4, (uint64_t)(uintptr_t)ep->regions[0].base);
	xs_put_be32(info + 12, ep->regions[1].stag);
	xs_put_be64(info + 16, (uint64_t)(uintptr_t)ep->regions[1].base);
	prefs.pdata = info;
	prefs.pdata_len = sizeof(info);
	if (mpa_respond(&prefs, &req, &rep, &ep->agreed, &err) < 0)
		die("mpa_respond: rejected");
	ssize_t n = mpa_frame_encode(&rep, out, sizeof(out));
	if (n < 0 || write(ep->fd, out, (size_t)n) != n)
		die("write MPA Reply");
	ep_start(ep);
	for (unsigned i = 0; i <= opt.sends; i++) {
		ep->send_len[i] = 64 * 1024;
		ep->send_bufs[i] = malloc(ep->send_len[i]);
		ddp_queue_post(&ep->q[RDMAP_QN_SEND], ep->send_bufs[i], (uint32_t)ep->send_len[i], NULL);
	}
	for (unsigned i = 0; i < opt.sends; i++)
		ep->send_len[i] = 1 + (i * 7919) % (60 * 1024);
	ep_pump(ep, NULL);
	printf("%s: %llu FPDUs, %llu bytes sent, %llu FPDUs received, %llu end on a marker\n",
	       ep->name, (unsigned long long)ep->fpdus_tx, (unsigned long long)ep->bytes_tx,
	       (unsigned long long)ep->rx.fpdus, (unsigned long long)ep->fpdus_end_on_marker);
	for (unsigned i = 0; i <= opt.sends; i++)
		free(ep->send_bufs[i]);
	for (int i = 0; i < 2; i++)
		free(ep->regions[i].base);
	ep_stop(ep);
	return NULL;
}

static bool read_finished(struct demo_ep *ep)
{
	return ep->read_done || ep->failed;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int initiator(struct demo_ep *ep)
{
	uint8_t fbuf[MPA_RR_HDR_LEN + MPA_PD_MAX], out[MPA_RR_HDR_LEN + MPA_PD_MAX];
	struct mpa_frame req, rep;
	struct mpa_prefs prefs;
	struct xs_err err;
	int rc;

	ep->regions[0].base = calloc(1, opt.size);
	ep->regions[0].len = (uint32_t)opt.size;
	ep->regions[0].stag = new_stag();
	ep->nregions = 1;
	if (!ep->regions[0].base)
		die("calloc");

	mpa_prefs_default(&prefs);
	prefs.rev = opt.rev;
	prefs.crc = opt.crc;
	prefs.markers_rx = opt.markers;
	prefs.ird = prefs.ord = 8;
	mpa_request_build(&prefs, &req);
	ssize_t n = mpa_frame_encode(&req, out, sizeof(out));
	if (n < 0 || write(ep->fd, out, (size_t)n) != n)
		die("write MPA Request");
	if (read_frame(ep->fd, MPA_REPLY, fbuf, sizeof(fbuf), &rep) < 0)
		die("read MPA Reply");
	rc = mpa_initiator_complete(&prefs, &req, &rep, &ep->agreed, &err);
	if (rc < 0) {
		fprintf(stderr, "MPA negotiation failed: %d (LLP/%u/0x%02x)\n", rc, err.etype, err.ecode);
		return 1;
	}
	if (rep.pdata_len != DEMO_REGION_INFO_LEN) {
		fprintf(stderr, "unexpected private data length %u\n", rep.pdata_len);
		return 1;
	}
	uint32_t w_stag = xs_get_be32(rep.pdata);
	uint64_t w_to = xs_get_be64(rep.pdata + 4);
	uint32_t r_stag = xs_get_be32(rep.pdata + 12);
	uint64_t r_to = xs_get_be64(rep.pdata + 16);
	ep_start(ep);

	double t0 = now_s();
	uint8_t *msg = malloc(64 * 1024);
	uint8_t *wbuf = malloc(opt.size);
	if (!msg || !wbuf)
		die("malloc");
	for (unsigned i = 0; i < opt.sends; i++) {
		size_t len = 1 + (i * 7919) % (60 * 1024);
		fill(msg, len, i);
		struct iovec iov = { msg, len };
		enum rdmap_opcode op = (i % 2) ? RDMAP_OP_SEND_SE : RDMAP_OP_SEND;
		if (iw_tx_send(&ep->tx, op, 0, &iov, 1) < 0)
			die("send");
	}
	fill(wbuf, opt.size, 1000);
	struct iovec wv = { wbuf, opt.size };
	if (iw_tx_tagged(&ep->tx, RDMAP_OP_WRITE, w_stag, w_to, &wv, 1) < 0)
		die("rdma write");
	struct iovec dv = { (void *)"write done", 10 };
	if (iw_tx_send(&ep->tx, RDMAP_OP_SEND, 0, &dv, 1) < 0)
		die("send");
	/* RDMA Read of the peer's source region into our sink region */
	struct rdmap_read_req rr = {
		.sink_stag = ep->regions[0].stag,
		.sink_to = (uint64_t)(uintptr_t)ep->regions[0].base,
		.size = (uint32_t)opt.size,
		.src_stag = r_stag,
		.src_to = r_to,
	};
	if (iw_tx_read_req(&ep->tx, &rr) < 0)
		die("read request");
	rc = ep_pump(ep, read_finished);
	double t1 = now_s();
	if (rc < 0 || !ep->read_done) {
		fprintf(stderr, "RDMA Read did not complete (%d)\n", rc);
		return 1;
	}
	if (opt.terminate) {
		/* a Write to an STag the peer never registered: it must answer
		 * with a Terminate (DDP tagged buffer error, invalid STag) */
		struct iovec bv = { wbuf, 64 };
		if (iw_tx_tagged(&ep->tx, RDMAP_OP_WRITE, w_stag ^ 0x5a5a5a00, w_to, &bv, 1) < 0)
			die("rdma write");
		ep_pump(ep, NULL);
	}
	shutdown(ep->fd, SHUT_WR);
	free(msg);
	free(wbuf);
	double secs = t1 - t0;
	printf("%s: %llu FPDUs, %llu bytes sent, %llu FPDUs received, %llu end on a marker; exchange took %.3f ms\n",
	       ep->name, (unsigned long long)ep->fpdus_tx, (unsigned long long)ep->bytes_tx,
	       (unsigned long long)ep->rx.fpdus, (unsigned long long)ep->fpdus_end_on_marker,
	       secs * 1e3);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: xsock-wiredemo [--crc] [--markers] [--rev 1|2] [--port N] [--size BYTES]\n"
			"                      [--sends N] [--no-terminate] [--paced] [--mss N] [--quiet]\n"
			"  --paced  wait for each FPDU to be acknowledged before the next, so that a\n"
			"           capture holds exactly one FPDU per TCP segment\n"
			"  --mss N  size FPDUs for this MSS instead of the socket's\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "crc", no_argument, NULL, 'c' },       { "markers", no_argument, NULL, 'm' },
		{ "rev", required_argument, NULL, 'r' }, { "port", required_argument, NULL, 'p' },
		{ "size", required_argument, NULL, 's' }, { "sends", required_argument, NULL, 'n' },
		{ "no-terminate", no_argument, NULL, 't' }, { "quiet", no_argument, NULL, 'q' },
		{ "paced", no_argument, NULL, 'P' }, { "mss", required_argument, NULL, 'M' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'c': opt.crc = true; break;
		case 'm': opt.markers = true; break;
		case 'r': opt.rev = (uint8_t)atoi(optarg); break;
		case 'p': opt.port = (unsigned)atoi(optarg); break;
		case 's': opt.size = strtoul(optarg, NULL, 0); break;
		case 'n': opt.sends = (unsigned)atoi(optarg); break;
		case 't': opt.terminate = false; break;
		case 'q': opt.quiet = true; break;
		case 'P': opt.paced = true; break;
		case 'M': opt.mss = (unsigned)atoi(optarg); break;
		default: usage();
		}
	}
	if ((opt.rev != 1 && opt.rev != 2) || opt.size == 0 || opt.size > (1u << 30) || opt.sends > 60)
		usage();

	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 1) < 0)
		die("listen");
	socklen_t sl = sizeof(sa);
	getsockname(lfd, (struct sockaddr *)&sa, &sl);
	if (!opt.quiet)
		printf("responder listening on 127.0.0.1:%u\n", ntohs(sa.sin_port));

	static struct demo_ep resp = { .name = "responder" }, init = { .name = "initiator" };
	init.fd = socket(AF_INET, SOCK_STREAM, 0);
	if (init.fd < 0 || connect(init.fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect");
	resp.fd = accept(lfd, NULL, NULL);
	if (resp.fd < 0)
		die("accept");
	close(lfd);
	setsockopt(init.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(resp.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

	pthread_t th;
	if (pthread_create(&th, NULL, responder, &resp) != 0)
		die("pthread_create");
	int rc = initiator(&init);
	pthread_join(th, NULL);
	close(init.fd);
	close(resp.fd);
	free(init.regions[0].base);
	ep_stop(&init);

	bool ok = rc == 0 && !init.failed && !resp.failed && resp.sends_ok == opt.sends &&
		  resp.write_checked && init.read_done;
	if (opt.terminate)
		ok = ok && init.term_seen && init.term.cause.layer == XS_LAYER_DDP &&
		     init.term.cause.etype == DDP_ETYPE_TAGGED &&
		     init.term.cause.ecode == DDP_ECODE_T_INVALID_STAG;
	printf("%s: %u/%u Sends verified, RDMA Write %zu bytes %s, RDMA Read %zu bytes %s%s\n",
	       ok ? "PASS" : "FAIL", resp.sends_ok, opt.sends, opt.size,
	       resp.write_checked ? "verified" : "NOT verified", opt.size,
	       init.read_done ? "verified" : "NOT verified",
	       opt.terminate ? (init.term_seen ? ", Terminate received" : ", NO Terminate") : "");
	return ok ? 0 : 1;
}
