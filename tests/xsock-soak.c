/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Soak through the verbs API (scripts/soak.sh; not a `make check` test).
 *
 *   xsock-soak [GIB [SEED]]
 *
 * Two endpoints in this process connected over loopback through the CM.
 * Until GIB GiB (default 10) have moved: pick a direction (A to B or B to
 * A), an operation (RDMA Write by the source side, or RDMA Read by the sink
 * side) and a random size (1 octet to 4 MiB) at a random offset; fill the
 * source range with fresh pseudo-random octets, take its SHA-256 (OpenSSL
 * EVP), move it, and compare the SHA-256 of the sink range.  A Write is
 * known to be placed when the small Send posted after it (same QP, so
 * placed in order) completes at the target.  Prints progress, mismatches
 * (must be 0) and RSS after warm-up and at the end.  Exit 0 only without
 * mismatches or errors. */
#include "config.h"

#include <openssl/evp.h>
#include <stdlib.h>

#include "tests/test-verbs-util.h"

#define BUF (4u << 20)
#define SEND_LEN 8

struct side {
	struct ep e;
	uint8_t *src, *dst, *msg;
	struct ibv_mr *smr, *dmr, *mmr;
};

static void side_mem(struct side *s)
{
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	s->src = malloc(BUF);
	s->dst = malloc(BUF);
	s->msg = calloc(1, 4096);
	REQUIRE(s->src && s->dst && s->msg);
	s->smr = ibv_reg_mr(s->e.id->pd, s->src, BUF, rw);
	s->dmr = ibv_reg_mr(s->e.id->pd, s->dst, BUF, rw);
	s->mmr = ibv_reg_mr(s->e.id->pd, s->msg, 4096, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(s->smr && s->dmr && s->mmr);
}

static void side_free(struct side *s)
{
	CHECK(ibv_dereg_mr(s->smr) == 0);
	CHECK(ibv_dereg_mr(s->dmr) == 0);
	CHECK(ibv_dereg_mr(s->mmr) == 0);
	free(s->src);
	free(s->dst);
	free(s->msg);
}

/* One receive for the "Write done" Send, into msg + 2048. */
static void post_msg_recv(struct side *s)
{
	struct ibv_sge sg = { .addr = (uintptr_t)(s->msg + 2048), .length = 2048,
			      .lkey = s->mmr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sg, .num_sge = 1 }, *bad;

	REQUIRE(ibv_post_recv(s->e.id->qp, &wr, &bad) == 0);
}

static void sha256(const uint8_t *p, size_t n, uint8_t out[32])
{
	unsigned len = 32;

	REQUIRE(EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) == 1 && len == 32);
}

/* One completion from cq within 10 s, SUCCESS. */
static bool one_wc(struct ibv_cq *cq, const char *what)
{
	struct ibv_wc wc;

	if (poll_n(cq, &wc, 1, 10000) != 1) {
		fprintf(stderr, "soak: no %s completion within 10 s\n", what);
		return false;
	}
	if (wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "soak: %s completion %s\n", what, ibv_wc_status_str(wc.status));
		return false;
	}
	return true;
}

static void fill(uint8_t *p, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t v = xs_rand64();
		memcpy(p + i, &v, 8);
	}
	for (; i < n; i++)
		p[i] = (uint8_t)xs_rand64();
}

/* Move len octets from a->src + off to b->dst + off; true if placed. */
static bool move(struct side *a, struct side *b, bool read, uint32_t off, uint32_t len)
{
	struct ibv_sge sg;

	if (read) {
		/* b reads a's source into its sink */
		sg = (struct ibv_sge){ .addr = (uintptr_t)(b->dst + off), .length = len,
				       .lkey = b->dmr->lkey };
		if (post1(b->e.id->qp, 2, IBV_WR_RDMA_READ, &sg, 1, a->smr->rkey,
			  (uintptr_t)(a->src + off), 0))
			return false;
		return one_wc(b->e.scq, "Read");
	}
	sg = (struct ibv_sge){ .addr = (uintptr_t)(a->src + off), .length = len,
			       .lkey = a->smr->lkey };
	if (post1(a->e.id->qp, 3, IBV_WR_RDMA_WRITE, &sg, 1, b->dmr->rkey,
		  (uintptr_t)(b->dst + off), 0) ||
	    !one_wc(a->e.scq, "Write"))
		return false;
	sg = (struct ibv_sge){ .addr = (uintptr_t)a->msg, .length = SEND_LEN, .lkey = a->mmr->lkey };
	if (post1(a->e.id->qp, 4, IBV_WR_SEND, &sg, 1, 0, 0, 0) || !one_wc(a->e.scq, "Send") ||
	    !one_wc(b->e.rcq, "receive"))
		return false;
	post_msg_recv(b);
	return true;
}

int main(int argc, char **argv)
{
	double gib = argc > 1 ? atof(argv[1]) : 10.0;
	struct side A, B;
	uint64_t target = (uint64_t)(gib * (double)(1ull << 30)), moved = 0, ops = 0;
	uint64_t mism = 0, nread = 0, nwrite = 0, ab = 0;
	long rss_warm = 0, rss_max = 0;
	uint64_t next_report = 1ull << 30;

	xs_test_seed(argc > 2 ? strtoull(argv[2], NULL, 0) : 0x50a4);
	signal(SIGPIPE, SIG_IGN);
	memset(&A, 0, sizeof(A));
	memset(&B, 0, sizeof(B));
	verbs_test_listen();
	if (!pair_up(&A.e, &B.e, 16, 0, 0)) {
		fprintf(stderr, "soak: connection failed\n");
		return 1;
	}
	side_mem(&A);
	side_mem(&B);
	post_msg_recv(&A);
	post_msg_recv(&B);
	double t0 = cm_now_ms();
	while (moved < target && !xs_test_failures) {
		bool a2b = xs_rand64() & 1, read = xs_rand64() & 1;
		struct side *s = a2b ? &A : &B, *d = a2b ? &B : &A;
		uint32_t len = 1 + (uint32_t)xs_rand_below(BUF);
		uint32_t off = (uint32_t)xs_rand_below(BUF - len + 1);
		uint8_t want[32], got[32];

		fill(s->src + off, len);
		sha256(s->src + off, len, want);
		/* the sink range is stale: make sure old octets cannot pass */
		d->dst[off] = (uint8_t)~s->src[off];
		if (!move(s, d, read, off, len)) {
			xs_test_failures++;
			break;
		}
		sha256(d->dst + off, len, got);
		if (memcmp(want, got, 32) != 0) {
			mism++;
			fprintf(stderr, "soak: MISMATCH op %llu: %s %s len %u off %u\n",
				(unsigned long long)ops, a2b ? "A->B" : "B->A", read ? "Read" : "Write",
				len, off);
		}
		moved += len;
		ops++;
		nread += read;
		nwrite += !read;
		ab += a2b;
		if (ops == 1 || ops == 64) /* warm: buffers touched, CM done */
			rss_warm = tv_rss_kib();
		long r = tv_rss_kib();
		if (r > rss_max)
			rss_max = r;
		if (moved >= next_report) {
			double s_el = (cm_now_ms() - t0) / 1e3;
			printf("soak: %.1f GiB, %llu ops, %.0f MB/s, RSS %ld KiB\n",
			       (double)moved / (1ull << 30), (unsigned long long)ops,
			       (double)moved / 1e6 / s_el, r);
			fflush(stdout);
			next_report += 1ull << 30;
		}
	}
	double el = (cm_now_ms() - t0) / 1e3;
	long rss_end = tv_rss_kib();
	printf("soak: verbs: %.2f GiB in %llu ops (%llu Writes, %llu Reads; %llu A->B, %llu B->A) "
	       "in %.1f s (%.0f MB/s incl. SHA-256 and fill), %llu mismatches, "
	       "RSS after warm-up %ld KiB, max %ld KiB, end %ld KiB\n",
	       (double)moved / (1ull << 30), (unsigned long long)ops, (unsigned long long)nwrite,
	       (unsigned long long)nread, (unsigned long long)ab, (unsigned long long)(ops - ab), el,
	       (double)moved / 1e6 / el, (unsigned long long)mism, rss_warm, rss_max, rss_end);
	CHECK(mism == 0);
	CHECK(rss_end - rss_warm < 8 * 1024);
	CHECK(rdma_disconnect(A.e.id) == 0);
	side_free(&A);
	side_free(&B);
	free_ep(&A.e);
	free_ep(&B.e);
	CHECK(rdma_destroy_id(lid) == 0);
	rdma_destroy_event_channel(lch);
	return xs_test_result();
}
