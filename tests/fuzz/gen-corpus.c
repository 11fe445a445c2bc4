/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Writes the seed corpora in tests/fuzz/corpus/ from real frames: the siw
 * vectors of tests/test-mpa-frame.c and tests/test-iw-stream.c, the ICRC
 * known answers of tests/test-roce.c, rdma_rxe's CM MADs, and streams,
 * packets and local messages the project's own encoders produce (iw_tx over a capture buffer, as
 * tests/test-iw-stream.c does).  Built and run by `scripts/fuzz.sh
 * --gen-corpus`; the output is committed, so this only runs when the input
 * formats of the harnesses change.
 *
 *   gen-corpus OUTDIR      (creates and fills one OUTDIR/NAME per harness) */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include "iwarp/iw_stream.h"
#include "libxsock/xsk_exec_wire.h"
#include "libxsock/xsk_raddr_wire.h"
#include "roce/roce.h"
#include "roce/roce_cm.h"
#include "roced/roced_wire.h"
#include "tests/vectors/siw-init-rev2-stream.h"
#include "util/xs_be.h"
#include "verbs/xs_local_wire.h"

static const char *outdir;
static unsigned nfiles;

static void die(const char *what)
{
	fprintf(stderr, "gen-corpus: %s: %s\n", what, strerror(errno));
	exit(1);
}

static size_t hex(const char *h, uint8_t *buf, size_t cap)
{
	size_t n = 0;

	while (*h) {
		while (*h == ' ')
			h++;
		if (!h[0] || !h[1])
			break;
		unsigned v;
		if (sscanf(h, "%2x", &v) != 1 || n >= cap)
			abort();
		buf[n++] = (uint8_t)v;
		h += 2;
	}
	return n;
}

static void put(const char *harness, const char *name, const uint8_t *a, size_t alen,
		const uint8_t *b, size_t blen)
{
	char p[1024];

	snprintf(p, sizeof(p), "%s/%s", outdir, harness);
	if (mkdir(p, 0755) != 0 && errno != EEXIST)
		die(p);
	snprintf(p, sizeof(p), "%s/%s/%s", outdir, harness, name);
	FILE *f = fopen(p, "wb");
	if (!f)
		die(p);
	if ((alen && fwrite(a, 1, alen, f) != alen) || (blen && fwrite(b, 1, blen, f) != blen))
		die(p);
	if (fclose(f) != 0)
		die(p);
	nfiles++;
}

/* ---- MPA Request/Reply frames -------------------------------------------- */

/* tests/test-mpa-frame.c: the frames siw sent and received */
static const struct {
	const char *name, *hex;
} rr_vecs[] = {
	{ "init-rev2-crc0-req", "4d504120494420526571204672616d651002000400010001" },
	{ "init-rev2-crc0-rep", "4d504120494420526570204672616d651002000400010001" },
	{ "init-rev2-crc1-req", "4d504120494420526571204672616d655002000400010001" },
	{ "init-rev2-crc1-rep", "4d504120494420526570204672616d655002000400010001" },
	{ "init-rev1-crc0-req", "4d504120494420526571204672616d6500010000" },
	{ "init-rev1-crc1-req", "4d504120494420526571204672616d6540010000" },
	{ "init-rev1-crc1-rep", "4d504120494420526570204672616d6540010000" },
	{ "init-rev2-p2p-req", "4d504120494420526571204672616d65100200048001c001" },
	{ "init-rev2-p2p-rep", "4d504120494420526570204672616d651002000480018001" },
	{ "init-rev2-gso-req", "4d504120494420526571204672616d651802000400010001" },
	{ "init-rev2-rejected-rep", "4d504120494420526570204672616d653002000400010001" },
	{ "resp-rev2-markers-req", "4d504120494420526571204672616d659002000400010001" },
	{ "resp-rev2-markers-rep", "4d504120494420526570204672616d653002000400000000" },
	{ "resp-rev2-pdata8-req", "4d504120494420526571204672616d651002000c000100010102030405060708" },
	{ "resp-rev2-pdata8-rep", "4d504120494420526570204672616d651002000400010001" },
	{ "resp-rev2-ird16-ord16-req", "4d504120494420526571204672616d651002000400100010" },
	{ "resp-rev2-ird16-ord16-rep", "4d504120494420526570204672616d651002000400100010" },
	{ "resp-rev2-crc-strict-rep", "4d504120494420526570204672616d653002000400000000" },
	{ "resp-rev2-noenh-req", "4d504120494420526571204672616d6500020000" },
	{ "resp-rev2-p2p-read-req", "4d504120494420526571204672616d651002000480014001" },
};

static void gen_mpa_frame(void)
{
	static const uint8_t sels[] = { 0x00, 0x21, 0xe6 };

	for (size_t i = 0; i < sizeof(rr_vecs) / sizeof(rr_vecs[0]); i++) {
		uint8_t f[600];
		size_t n = hex(rr_vecs[i].hex, f, sizeof(f));

		for (size_t s = 0; s < sizeof(sels); s++) {
			char name[128];
			snprintf(name, sizeof(name), "%s-sel%02x", rr_vecs[i].name, sels[s]);
			put("fuzz-mpa-frame", name, &sels[s], 1, f, n);
		}
	}
	/* frames our encoder builds: P2P with every RTR, private data, rev 1 */
	for (unsigned v = 0; v < 6; v++) {
		struct mpa_prefs p;
		struct mpa_frame req;
		uint8_t pd[40], f[600], sel = (uint8_t)(v * 0x2b);

		memset(pd, 'a' + (int)v, sizeof(pd));
		mpa_prefs_default(&p);
		p.rev = v == 5 ? 1 : 2;
		p.p2p = v & 1;
		p.rtr_mask = (uint8_t)(v & MPA_RTR_ALL);
		p.crc = v & 2;
		p.markers_rx = v == 4;
		p.ird = (uint16_t)(v * 3);
		p.ord = (uint16_t)(16 - v);
		p.pdata = pd;
		p.pdata_len = (uint16_t)(v * 8);
		mpa_request_build(&p, &req);
		ssize_t n = mpa_frame_encode(&req, f, sizeof(f));
		char name[64];
		snprintf(name, sizeof(name), "built-req-%u", v);
		put("fuzz-mpa-frame", name, &sel, 1, f, (size_t)n);

		struct mpa_frame rep;
		struct mpa_agreed a;
		struct xs_err e;
		mpa_respond(&p, &req, &rep, &a, &e);
		n = mpa_frame_encode(&rep, f, sizeof(f));
		snprintf(name, sizeof(name), "built-rep-%u", v);
		put("fuzz-mpa-frame", name, &sel, 1, f, (size_t)n);
	}
}

/* ---- FPDU streams from iw_tx ---------------------------------------------- */

struct capture {
	uint8_t buf[16384];
	size_t len;
};

static int capture_write(void *ctx, const struct iovec *iov, int cnt, size_t len)
{
	struct capture *c = ctx;

	if (c->len + len > sizeof(c->buf))
		return -ENOSPC;
	for (int i = 0; i < cnt; i++) {
		memcpy(c->buf + c->len, iov[i].iov_base, iov[i].iov_len);
		c->len += iov[i].iov_len;
	}
	return 0;
}

/* A mixed stream: Sends (one segmented), a Write to each region the
 * fuzz-rdmap-rx owner registers, a Read Request, a Terminate. */
static void stream_mix(struct capture *c, bool markers, bool crc, size_t mulpdu, unsigned kind)
{
	struct iw_tx tx;
	uint8_t pay[600];

	for (size_t i = 0; i < sizeof(pay); i++)
		pay[i] = (uint8_t)('A' + i % 26);
	c->len = 0;
	if (iw_tx_init(&tx, markers, crc, mulpdu, capture_write, c) != 0)
		abort();
	struct iovec v16 = { pay, 16 }, v64 = { pay, 64 }, v1 = { pay, 1 }, v0 = { pay, 0 };
	struct rdmap_read_req rr = { .sink_stag = 0x0a0b0c0d, .sink_to = 0x10000, .size = 64,
				     .src_stag = 0xe003ac00, .src_to = 0x5587ce6d9370 };
	struct rdmap_term t = { .cause = { XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_INVALID_STAG },
				.m = true, .d = true, .ddp_seg_len = 0x2e, .ddp_hdr_len = 14 };
	uint8_t th[14] = { 0xc1, 0x40, 0, 0, 0xbe, 0xef, 0, 0, 0, 0, 0, 1, 0, 0 };
	memcpy(t.ddp_hdr, th, sizeof(th));

	switch (kind) {
	case 0: /* Sends of 16, 64 (segmented when mulpdu is small), 1, 0 */
		iw_tx_send(&tx, RDMAP_OP_SEND, 0, &v16, 1);
		iw_tx_send(&tx, RDMAP_OP_SEND_SE, 0, &v64, 1);
		iw_tx_send(&tx, RDMAP_OP_SEND_INV, 0x1234, &v1, 1);
		iw_tx_send(&tx, RDMAP_OP_SEND_SE_INV, 0x1234, &v0, 1);
		break;
	case 1: /* Writes and a Read Response */
		iw_tx_tagged(&tx, RDMAP_OP_WRITE, 0x0a0b0c0d, 0x10000, &v64, 1);
		iw_tx_tagged(&tx, RDMAP_OP_READ_RESP, 0x77, 0x100000, &v16, 1);
		iw_tx_tagged(&tx, RDMAP_OP_WRITE, 0x77, 0x100010, &v0, 1);
		break;
	case 2: /* Read Request, Terminate (with D and R) */
		iw_tx_read_req(&tx, &rr);
		t.r = true;
		rdmap_read_req_encode(&rr, t.rdmap_hdr);
		t.rdmap_hdr_len = RDMAP_READ_REQ_LEN;
		iw_tx_terminate(&tx, &t);
		break;
	default: { /* a long Send crossing several Markers, then a Write */
		struct iovec vl = { pay, sizeof(pay) };
		iw_tx_send(&tx, RDMAP_OP_SEND, 0, &vl, 1);
		iw_tx_tagged(&tx, RDMAP_OP_WRITE, 0x0a0b0c0d, 0x10020, &v16, 1);
		break;
	}
	}
}

static void gen_mpa_rx(void)
{
	static struct capture c;
	char name[128];

	for (unsigned kind = 0; kind < 4; kind++)
		for (unsigned m = 0; m < 2; m++)
			for (unsigned crc = 0; crc < 2; crc++) {
				size_t mulpdu = kind == 0 ? 40 : mpa_mulpdu(1460, m);
				stream_mix(&c, m, crc, mulpdu, kind);
				/* chunking: whole, one octet, pattern, direct */
				uint8_t cfg[8] = { (uint8_t)(m | crc << 1 | (kind & 3) << 2 | (kind == 3) << 4),
						   0, 0, 0, 0, 0, 7, 13 };
				snprintf(name, sizeof(name), "iwtx-k%u-m%u-c%u", kind, m, crc);
				put("fuzz-mpa-rx", name, cfg, 8, c.buf, c.len);
				if (m && kind == 3) {
					/* resync: the stream from inside the first FPDU on,
					 * at its real stream position (start = 4 * 75) */
					cfg[3] = 0;
					cfg[4] = 75;
					snprintf(name, sizeof(name), "resync-k%u-c%u", kind, crc);
					put("fuzz-mpa-rx", name, cfg, 8, c.buf + 300, c.len - 300);
				}
			}
	uint8_t w[512];
	size_t n = hex(siw_crc1, w, sizeof(w));
	uint8_t cfg1[8] = { 0x02, 0, 0, 0, 0, 0, 3, 5 };
	put("fuzz-mpa-rx", "siw-crc1", cfg1, 8, w, n);
	n = hex(siw_crc0, w, sizeof(w));
	uint8_t cfg0[8] = { 0x04, 0, 0, 0, 0, 0, 3, 5 };
	put("fuzz-mpa-rx", "siw-crc0", cfg0, 8, w, n);
}

static void gen_rdmap_rx(void)
{
	static struct capture c;
	char name[128];

	/* raw streams (modes 0 and 1) as iw_tx writes them */
	for (unsigned kind = 0; kind < 4; kind++)
		for (unsigned m = 0; m < 2; m++)
			for (unsigned crc = 0; crc < 2; crc++) {
				stream_mix(&c, m, crc, kind == 0 ? 60 : mpa_mulpdu(1460, m), kind);
				uint8_t cfg[4] = { (uint8_t)(crc | m << 2 | (kind & 3) << 3), 9, 4, 0 };
				snprintf(name, sizeof(name), "iwtx-k%u-m%u-c%u", kind, m, crc);
				put("fuzz-rdmap-rx", name, cfg, 4, c.buf, c.len);
			}
	uint8_t w[512];
	size_t n = hex(siw_crc1, w, sizeof(w));
	uint8_t cfg1[4] = { 0x01, 0, 4, 0 };
	put("fuzz-rdmap-rx", "siw-crc1", cfg1, 4, w, n);
	n = hex(siw_crc0, w, sizeof(w));
	uint8_t cfg0[4] = { 0x18, 5, 4, 0 };
	put("fuzz-rdmap-rx", "siw-crc0", cfg0, 4, w, n);

	/* modes 2 and 3: the same messages as length-prefixed ULPDUs: take
	 * the CRC-off, marker-free streams apart (ULPDU_LENGTH, ULPDU, pad,
	 * 4 octets of CRC) */
	for (unsigned kind = 0; kind < 4; kind++) {
		stream_mix(&c, false, false, kind == 0 ? 60 : 1200, kind);
		uint8_t out[16384];
		size_t o = 0, i = 0;
		while (i + 2 <= c.len) {
			size_t u = (size_t)c.buf[i] << 8 | c.buf[i + 1];
			memcpy(out + o, c.buf + i, 2 + u);
			o += 2 + u;
			i += 2 + u + mpa_pad_len(u) + MPA_CRC_LEN;
		}
		for (unsigned m = 0; m < 2; m++) {
			uint8_t cfg[4] = { (uint8_t)(2 + (kind & 1) | m << 2 | (kind >> 1) << 4), 6, 4, 0 };
			snprintf(name, sizeof(name), "ulpdus-k%u-m%u", kind, m);
			put("fuzz-rdmap-rx", name, cfg, 4, out, o);
		}
	}
}

/* ---- DDP segment records ---------------------------------------------------- */

struct rec {
	uint8_t b[8192];
	size_t n;
};

static void rec_seg(struct rec *r, const struct ddp_hdr *h, const uint8_t *p, uint16_t len, bool place)
{
	r->b[r->n++] = place ? 4 : 0;
	r->n += ddp_hdr_encode(h, r->b + r->n);
	r->b[r->n++] = (uint8_t)(len >> 8);
	r->b[r->n++] = (uint8_t)len;
	memcpy(r->b + r->n, p, len);
	r->n += len;
}

/* a message split by ddp_seg into mulpdu-sized segments, optionally in
 * reverse order */
static void rec_msg(struct rec *r, const struct ddp_hdr *tmpl, size_t len, size_t mulpdu, bool rev)
{
	struct ddp_segmenter s;
	struct ddp_hdr hs[64];
	size_t offs[64], lens[64], k = 0;
	uint8_t pay[1024];

	for (size_t i = 0; i < sizeof(pay); i++)
		pay[i] = (uint8_t)i;
	if (ddp_seg_init(&s, tmpl, len, mulpdu) != 0)
		abort();
	while (k < 64 && ddp_seg_next(&s, &hs[k], &offs[k], &lens[k]))
		k++;
	for (size_t j = 0; j < k; j++) {
		size_t i = rev ? k - 1 - j : j;
		rec_seg(r, &hs[i], pay + offs[i], (uint16_t)lens[i], (i & 1) != 0);
	}
}

static void gen_ddp_place(void)
{
	static struct rec r;
	/* c0 = 0x3f: 3 buffers on each queue (sizes 64/28/0, 28/0/300, 0/300/64);
	 * c1/c2: region sizes 256 / 400; c3: queue depths; MSN start 1 */
	const uint8_t cfg[8] = { 0x3f, 0xff, 100, 0xff, 0, 0, 0, 1 };
	struct ddp_hdr u = { .dv = DDP_VERSION, .rsvdulp = 0x43, .qn = 0, .msn = 1 };
	struct ddp_hdr t = { .tagged = true, .dv = DDP_VERSION, .rsvdulp = 0x40, .stag = 0x100 };

	for (unsigned v = 0; v < 6; v++) {
		r.n = 0;
		memcpy(r.b, cfg, 8);
		r.n = 8;
		switch (v) {
		case 0: /* Sends on QN 0 in order, then deliver */
			rec_msg(&r, &u, 64, 18 + 20, false);
			u.msn = 2;
			rec_msg(&r, &u, 28, 18 + 28, false);
			r.b[r.n++] = 1; /* deliver QN 0 */
			break;
		case 1: /* out of order: MSN 2 before MSN 1, segments reversed */
			u.msn = 2;
			rec_msg(&r, &u, 20, 18 + 7, true);
			u.msn = 1;
			rec_msg(&r, &u, 64, 18 + 9, true);
			r.b[r.n++] = 1;
			break;
		case 2: /* Read Request sized messages on QN 1, Terminate on QN 2 */
			u.qn = 1;
			u.msn = 1;
			u.rsvdulp = 0x41;
			rec_msg(&r, &u, 28, 100, false);
			r.b[r.n++] = 1 | 1 << 2;
			u.qn = 2;
			u.rsvdulp = 0x47;
			rec_msg(&r, &u, 0, 100, false);
			r.b[r.n++] = 1 | 2 << 2;
			break;
		case 3: /* Writes to each region, segmented */
			rec_msg(&r, &t, 200, 14 + 50, false);
			t.stag = 0x200;
			t.to = 0x10000 + 16;
			rec_msg(&r, &t, 100, 14 + 33, true);
			t.stag = 0x300;
			t.to = UINT64_MAX - 511;
			rec_msg(&r, &t, 511, 14 + 200, false);
			break;
		case 4: /* partial message, flush, repost, send again */
			u.qn = 0;
			u.msn = 1;
			u.rsvdulp = 0x43;
			u.mo = 8;
			rec_seg(&r, &u, (const uint8_t *)"abcdefgh", 8, false);
			u.mo = 0;
			r.b[r.n++] = 2; /* flush QN 0 */
			r.b[r.n++] = 3; /* post on QN 0 ... */
			r.b[r.n++] = 40; /* ... 120 octets */
			u.msn = 2;
			rec_msg(&r, &u, 64, 64, false);
			r.b[r.n++] = 1;
			break;
		default: /* duplicates and overlaps */
			u.qn = 0;
			u.msn = 1;
			rec_msg(&r, &u, 64, 18 + 16, false);
			rec_msg(&r, &u, 64, 18 + 24, true);
			r.b[r.n++] = 1;
			break;
		}
		char name[32];
		snprintf(name, sizeof(name), "segs-%u", v);
		put("fuzz-ddp-place", name, r.b, r.n, NULL, 0);
	}
}

/* ---- RoCEv2 packets ------------------------------------------------------ */

/* tests/test-roce.c's ICRC known answers (config: fix the ICRC, as the
 * harness's addresses are not theirs), then every opcode built by
 * roce_pkt_build with the harness's addresses and a real ICRC. */
static const char *const roce_kat[] = {
	"0430ffff000000118000012368656c6c6f0000003143a6a1",
	"0ba0ffff8000abcd80fffffe00007f001234567800001a2b00000006deadbeef6162636465660000a2ea6419",
	"1100ffff40000022000001241f0000050286de17",
};

static void gen_roce_pkt(void)
{
	char name[64];

	for (size_t i = 0; i < sizeof(roce_kat) / sizeof(roce_kat[0]); i++) {
		uint8_t cfg[8] = { (uint8_t)(2 | (i == 1)), 0xff, 0xff, 0x12, 0x34, 0xc0, 0xa5, 10 };
		uint8_t b[128];
		size_t n = hex(roce_kat[i], b, sizeof(b));

		snprintf(name, sizeof(name), "kat-%zu", i);
		put("fuzz-roce-pkt", name, cfg, sizeof(cfg), b, n);
	}
	for (unsigned op = 0; op < 256; op++) {
		if (!roce_ops[op].name)
			continue;
		for (uint32_t paylen = 0; paylen <= 5; paylen += 5) {
			bool v6 = (op + paylen) & 1;
			uint8_t cfg[8] = { v6, 0xff, 0xff, 0x00, (uint8_t)op, 0xc0, (uint8_t)op, 0x20 };
			struct roce_ip ip = { .v6 = v6, .ip_id = op, .sport = (uint16_t)(0xc000 | op),
					      .dport = ROCE_UDP_PORT };
			struct roce_pkt p = { .bth = { .opcode = (uint8_t)op, .pkey = 0xffff,
						       .dqpn = 0x11, .ackreq = true, .psn = op } };
			uint8_t pay[5] = "hello", b[ROCE_MAX_HDR_LEN + 5 + 3 + 4];

			for (int i = 0; i < 16; i++) {
				ip.src[i] = (uint8_t)(cfg[7] + i);
				ip.dst[i] = (uint8_t)((cfg[7] ^ 0xff) - i);
			}
			p.reth = (struct roce_reth){ 0x7f0000001000ull, 0x1234, paylen };
			p.aeth = (struct roce_aeth){ ROCE_AETH_CREDIT_INVALID, 3 };
			p.atm = (struct roce_atmeth){ 0x7f0000002000ull, 0x5678, 1, 0 };
			p.deth = (struct roce_deth){ ROCE_GSI_QKEY, 1 };
			if (paylen && !(roce_ops[op].flags & ROCE_F_PAYLOAD))
				continue;
			size_t n = roce_pkt_build(&p, pay, paylen, &ip, b);
			if (!n)
				abort();
			snprintf(name, sizeof(name), "op-%02x-%u", op, paylen);
			put("fuzz-roce-pkt", name, cfg, sizeof(cfg), b, n);
		}
	}
}

/* ---- IB CM MADs ---------------------------------------------------------- */

/* rdma_rxe's REQ and REJ (tests/vectors/roce/cm-req.hex: the MADs without
 * their trailing zeros), then one of each message roce_cm_encode makes. */
static const char *const roce_cm_rxe[] = {
	"010702030000000000000002bc14c9f80010000000000000f8c914bc000000000000000001061c06"
	"505400fffe78730200000000000000000000110100000001000000a0921689a7ffff37f0ffffffff"
	"00000000000000000000ffff0a00030200000000000000000000ffff0a0003011262f00000400098"
	"00000000000000000000000000000000000000000000000000000000000000000000000000000000"
	"0000000000408cb70000000000000000000000000a0003020000000000000000000000000a000301",
	"010702030000000000000002bc14c9f80012000000000000f8c914bc0000000080100004505400ff"
	"fe787302",
};

static void gen_roce_cm(void)
{
	static const char *const names[] = { "req", "mra", "rej", "rep", "rtu", "dreq", "drep" };
	uint8_t mad[ROCE_MAD_LEN];
	char name[64];

	for (size_t i = 0; i < sizeof(roce_cm_rxe) / sizeof(roce_cm_rxe[0]); i++) {
		memset(mad, 0, sizeof(mad));
		hex(roce_cm_rxe[i], mad, sizeof(mad));
		snprintf(name, sizeof(name), "rxe-%zu", i);
		put("fuzz-roce-cm", name, mad, sizeof(mad), NULL, 0);
	}
	for (uint16_t attr = ROCE_CM_ATTR_REQ; attr <= ROCE_CM_ATTR_DREP; attr++) {
		struct roce_cm_msg m;
		struct roce_cma_hdr c = { .version = ROCE_CMA_VERSION, .ip_version = 6,
					  .src_port = 0xc123 };

		roce_cm_hdr_init(&m, attr, 0x0000000100000000ull | attr);
		switch (attr) {
		case ROCE_CM_ATTR_REQ:
			m.u.req.local_comm_id = 0x11223344;
			m.u.req.service_id = roce_cm_service_id(7174);
			m.u.req.local_qpn = 0x12;
			m.u.req.starting_psn = 0xabcdef;
			m.u.req.path_mtu = 5;
			m.u.req.retry_count = 7;
			m.u.req.rnr_retry_count = 7;
			m.u.req.max_cm_retries = 15;
			m.u.req.pkey = 0xffff;
			m.u.req.primary.local_lid = m.u.req.primary.remote_lid = 0xffff;
			m.u.req.primary.flow_label = roce_cm_flow_label(0xc123, 7174);
			m.u.req.primary.hop_limit = 64;
			m.u.req.primary.local_ack_timeout = 19;
			for (int i = 0; i < 16; i++) {
				c.src_addr[i] = m.u.req.primary.local_gid[i] = (uint8_t)(0xfe - i);
				c.dst_addr[i] = m.u.req.primary.remote_gid[i] = (uint8_t)(0x20 + i);
			}
			roce_cma_hdr_encode(&c, m.u.req.pdata);
			break;
		case ROCE_CM_ATTR_MRA:
			m.u.mra.local_comm_id = 0x55667788;
			m.u.mra.remote_comm_id = 0x11223344;
			m.u.mra.message_mraed = ROCE_CM_MSG_REP;
			m.u.mra.service_timeout = 20;
			break;
		case ROCE_CM_ATTR_REJ:
			m.u.rej.local_comm_id = 0x55667788;
			m.u.rej.remote_comm_id = 0x11223344;
			m.u.rej.message_rejected = ROCE_CM_MSG_REQ;
			m.u.rej.reason = ROCE_CM_REJ_INVALID_SERVICE_ID;
			break;
		case ROCE_CM_ATTR_REP:
			m.u.rep.local_comm_id = 0x55667788;
			m.u.rep.remote_comm_id = 0x11223344;
			m.u.rep.local_qpn = 0x13;
			m.u.rep.starting_psn = 0x123456;
			m.u.rep.responder_resources = m.u.rep.initiator_depth = 1;
			m.u.rep.rnr_retry_count = 7;
			m.u.rep.local_ca_guid = 0x505400fffe787301ull;
			break;
		case ROCE_CM_ATTR_RTU:
			m.u.rtu.local_comm_id = 0x11223344;
			m.u.rtu.remote_comm_id = 0x55667788;
			break;
		case ROCE_CM_ATTR_DREQ:
			m.u.dreq.local_comm_id = 0x11223344;
			m.u.dreq.remote_comm_id = 0x55667788;
			m.u.dreq.remote_qpn = 0x13;
			break;
		default:
			m.u.drep.local_comm_id = 0x55667788;
			m.u.drep.remote_comm_id = 0x11223344;
			break;
		}
		roce_cm_encode(&m, mad);
		snprintf(name, sizeof(name), "enc-%s", names[attr - ROCE_CM_ATTR_REQ]);
		put("fuzz-roce-cm", name, mad, sizeof(mad), NULL, 0);
	}
}

/* ---- local messages -------------------------------------------------------- */

/* fuzz-local-msg: octet 0 the decoder (0 forward, 1 CM, 2 exec header,
 * 3 exec entry, 4 XSOCK_RELAY_ADDR), then what the encoders write, and a
 * few refusals of each kind. */
static void put_local(const char *name, uint8_t kind, const uint8_t *b, size_t len)
{
	put("fuzz-local-msg", name, &kind, 1, b, len);
}

/* An RC packet for QP qpn with a payload of paylen octets: its length. */
static size_t local_pkt(uint8_t *b, uint8_t op, uint32_t qpn, uint32_t paylen)
{
	static const uint8_t pay[64] = "local message payload";
	struct roce_ip ip = { .sport = 0xc011, .dport = ROCE_UDP_PORT,
			      .src = { 127, 0, 0, 1 }, .dst = { 127, 0, 0, 1 } };
	struct roce_pkt p = { .bth = { .opcode = op, .pkey = 0xffff, .dqpn = qpn, .psn = 7 } };
	size_t n = roce_pkt_build(&p, pay, paylen, &ip, b);

	if (!n)
		abort();
	return n;
}

static void gen_local_fwd(void)
{
	/* QPN 0x000011, then the datagram */
	uint8_t b[3 + XS_LOCAL_FWD_HDR + 4 * 128] = { 0x00, 0x00, 0x11 }, *d = b + 3;
	size_t seg, n;

	seg = local_pkt(d + XS_LOCAL_FWD_HDR, ROCE_RC_SEND_ONLY, 0x11, 21);
	xs_local_fwd_hdr(d, seg);
	put_local("fwd-one", 0, b, 3 + XS_LOCAL_FWD_HDR + seg);
	/* a GRO run: three packets of one size, the last shorter */
	n = 0;
	for (int i = 0; i < 3; i++)
		n += local_pkt(d + XS_LOCAL_FWD_HDR + n, ROCE_RC_SEND_MIDDLE, 0x11, 64);
	seg = n / 3;
	n += local_pkt(d + XS_LOCAL_FWD_HDR + n, ROCE_RC_SEND_LAST, 0x11, 16);
	xs_local_fwd_hdr(d, seg);
	put_local("fwd-run", 0, b, 3 + XS_LOCAL_FWD_HDR + n);
	/* refusals: another version, segment size 0, no packet, a short
	 * packet, another QP */
	xs_put_be16(d + 2, 1);
	put_local("fwd-version", 0, b, 3 + XS_LOCAL_FWD_HDR + n);
	xs_put_be16(d, 0);
	xs_put_be16(d + 2, 0);
	put_local("fwd-seg0", 0, b, 3 + XS_LOCAL_FWD_HDR + n);
	xs_local_fwd_hdr(d, seg);
	put_local("fwd-empty", 0, b, 3 + XS_LOCAL_FWD_HDR);
	put_local("fwd-short", 0, b, 3 + XS_LOCAL_FWD_HDR + ROCE_BTH_LEN - 1);
	b[2] = 0x12;
	put_local("fwd-noqp", 0, b, 3 + XS_LOCAL_FWD_HDR + n);
}

static void gen_local_cm(void)
{
	uint8_t mad[ROCE_MAD_LEN], pkt[ROCE_MAX_HDR_LEN + 64 + 3 + ROCE_ICRC_LEN];
	uint8_t b[XS_LOCAL_STRAY_MAX];
	struct roce_cm_msg m;
	struct xs_local_cm c = { .kind = XS_LOCAL_CM_MAD, .family = AF_INET,
				 .local = { 127, 0, 0, 1 }, .peer = { 127, 0, 0, 1 },
				 .data = mad, .len = ROCE_MAD_LEN };
	size_t n;

	roce_cm_hdr_init(&m, ROCE_CM_ATTR_RTU, 0x0000000100000000ull | ROCE_CM_ATTR_RTU);
	m.u.rtu.local_comm_id = 0x11223344;
	m.u.rtu.remote_comm_id = 0x55667788;
	roce_cm_encode(&m, mad);
	n = xs_local_cm_encode(&c, b, sizeof(b));
	put_local("cm-mad4", 1, b, n);
	c.family = AF_INET6;
	memset(c.local, 0, 16);
	memset(c.peer, 0, 16);
	c.local[15] = c.peer[15] = 1;
	n = xs_local_cm_encode(&c, b, sizeof(b));
	put_local("cm-mad6", 1, b, n);
	c.kind = XS_LOCAL_CM_STRAY;
	c.port = 0xc011;
	c.data = pkt;
	c.len = local_pkt(pkt, ROCE_RC_SEND_ONLY, 0x11, 64);
	n = xs_local_cm_encode(&c, b, sizeof(b));
	put_local("cm-stray6", 1, b, n);
	c.family = AF_INET;
	memset(c.local, 0, 16);
	memcpy(c.local, (const uint8_t[]){ 127, 0, 0, 1 }, 4);
	memcpy(c.peer, c.local, 16);
	n = xs_local_cm_encode(&c, b, sizeof(b));
	put_local("cm-stray4", 1, b, n);
	/* refusals: an IPv4 address with octets after its 4, another family,
	 * a stray with no payload, a MAD cut short */
	b[1 + 4] = 1;
	put_local("cm-addr", 1, b, n);
	b[0] = 0x80 | 5;
	put_local("cm-family", 1, b, n);
	b[0] = 0x80 | 4;
	put_local("cm-stray-empty", 1, b, XS_LOCAL_STRAY_HDR);
	c.kind = XS_LOCAL_CM_MAD;
	c.data = mad;
	c.len = ROCE_MAD_LEN;
	n = xs_local_cm_encode(&c, b, sizeof(b));
	put_local("cm-mad-short", 1, b, n - 1);
}

static void gen_local_exec(void)
{
	uint8_t hdr[XSK_EXEC_HDR_LEN], *b;
	struct xsk_exec_ent *e = calloc(1, sizeof(*e));
	struct xsk *o;
	struct xsk_rmsg *r;
	uint32_t nrecv = 384 + 32; /* libxsock's default credits and extra receives */

	if (!e)
		abort();
	xsk_exec_hdr_encode(hdr, 1);
	put_local("exec-hdr", 2, hdr, sizeof(hdr));
	xsk_exec_hdr_encode(hdr, XSK_EXEC_MAX + 1);
	put_local("exec-hdr-count", 2, hdr, sizeof(hdr));
	xsk_exec_hdr_encode(hdr, 1);
	hdr[7] ^= 1; /* "XSKEXEC3" */
	put_local("exec-hdr-magic", 2, hdr, sizeof(hdr));
	/* one connected socket as libxsock's defaults make it (xsk_res.c) */
	o = &e->sock;
	o->family = AF_INET;
	o->rbuf_size = 1u << 16;
	o->rbuf_offset = 100;
	o->rbuf_free_offset = o->rbuf_size / 2;
	o->rbuf_bytes_avail = o->rbuf_size / 2;
	o->rq_size = 384;
	o->rmsg_cap = nrecv + 1;
	o->rmsg_head = 3;
	o->rmsg_count = 2;
	o->rbytes = 300;
	o->sbuf_size = 256u * 1024;
	o->sbuf_head = o->sbuf_tail = 4096;
	o->target_sge = 1;
	o->remote_sge = 1;
	e->nfds = 2;
	e->fds[0] = 0;
	e->fds[1] = 1;
	e->tcpfd = 5;
	for (int i = 0; i < XSOCK_WIRE_LEN; i++)
		e->wire[i] = (uint8_t)i;
	e->rkey = 0x1234;
	e->iova = 0x7f0000001000ull;
	e->mem_len = o->rbuf_size + RS_SGL_SIZE * RS_SGE_LEN + nrecv * 4;
	e->sbuf_size = o->sbuf_size;
	e->rmsg_cap = o->rmsg_cap;
	b = malloc(XSK_EXEC_ENT_LEN + 4 * (size_t)e->rmsg_cap);
	r = calloc(e->rmsg_cap, sizeof(*r));
	if (!b || !r)
		abort();
	r[3].len = 100;
	r[4].len = 200;
	xsk_exec_ent_encode(e, b);
	xsk_exec_rmsg_encode(r, e->rmsg_cap, b + XSK_EXEC_ENT_LEN);
	put_local("exec-ent", 3, b, XSK_EXEC_ENT_LEN + 4 * (size_t)e->rmsg_cap);
	put_local("exec-ent-short", 3, b, XSK_EXEC_ENT_LEN - 1);
	o->rbuf_offset = o->rbuf_size; /* a read position past its ring */
	xsk_exec_ent_encode(e, b);
	put_local("exec-ent-rbuf", 3, b, XSK_EXEC_ENT_LEN);
	free(r);
	free(b);
	free(e);
}

static void gen_local_raddr(void)
{
	struct xsk_raddr_ent e = { .ino = 123456, .dev = 8 };
	struct sockaddr_in *l4 = (struct sockaddr_in *)&e.local, *p4 = (struct sockaddr_in *)&e.peer;
	struct sockaddr_in6 *l6, *p6;
	char s[2 * XSK_RADDR_ENT_MAX + 1];
	size_t n;

	l4->sin_family = p4->sin_family = AF_INET;
	l4->sin_port = htons(7174);
	p4->sin_port = htons(40000);
	l4->sin_addr.s_addr = p4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	n = xsk_raddr_encode(&e, s);
	put_local("raddr-4", 4, (const uint8_t *)s, n);
	memset(&e, 0, sizeof(e));
	e.ino = 18446744073709551615ull;
	e.dev = 0;
	l6 = (struct sockaddr_in6 *)&e.local;
	p6 = (struct sockaddr_in6 *)&e.peer;
	l6->sin6_family = p6->sin6_family = AF_INET6;
	l6->sin6_port = htons(22);
	p6->sin6_port = htons(50000);
	l6->sin6_addr = p6->sin6_addr = in6addr_loopback;
	n += xsk_raddr_encode(&e, s + n);
	put_local("raddr-4-6", 4, (const uint8_t *)s, n);
	s[0] = '0'; /* a leading zero */
	put_local("raddr-zero", 4, (const uint8_t *)s, n);
	s[0] = '1';
	s[n - 1] = ';';
	put_local("raddr-sep", 4, (const uint8_t *)s, n);
}

static void gen_local_msg(void)
{
	gen_local_fwd();
	gen_local_cm();
	gen_local_exec();
	gen_local_raddr();
}

/* ---- xsock-roced ------------------------------------------------------------ */

/* fuzz-roced: octet 0 the part (0 a message, 1 a datagram through the
 * rules), then what the encoders write and a MAD of each origin. */
static void gen_roced(void)
{
	struct roced_msg ms[] = {
		{ .kind = ROCED_CLAIM, .seq = 1 },
		{ .kind = ROCED_PEER, .seq = 2, .family = AF_INET, .local = { 127, 0, 0, 1 },
		  .peer = { 127, 0, 0, 1 }, .peer_qpn = 0x1234 },
		{ .kind = ROCED_CM_OPEN, .seq = 3 },
		{ .kind = ROCED_LISTEN, .seq = 4, .family = AF_INET6, .service_id = 0x1061d30 },
		{ .kind = ROCED_REPLY, .aux = ROCED_CLAIM, .seq = 1, .value = 0x1234 },
		{ .kind = ROCED_PKTS, .aux = 4791 },
		{ .kind = ROCED_DIRECT },
	};
	uint8_t b[1 + 64 + 300];
	char name[32];

	for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
		size_t n = roced_encode(&ms[i], b + 1, 64);

		b[0] = 0;
		if (ms[i].kind == ROCED_PKTS) { /* a body: a forward's header and a BTH */
			memset(b + 1 + n, 0, 16);
			n += 16;
		}
		snprintf(name, sizeof(name), "msg-%zu", i);
		put("fuzz-roced", name, b, 1 + n, NULL, 0);
	}
	/* a DREQ datagram, by UDP from the network, from the CM, from a
	 * local address */
	uint8_t *d = b + 6, *mad = d + ROCE_BTH_LEN + ROCE_DETH_LEN;
	memset(b, 0, sizeof(b));
	xs_put_be32(d + 4, 1);
	xs_put_be16(mad + 16, ROCE_CM_ATTR_DREQ);
	xs_put_be32(mad + 24, 0x00020001);
	xs_put_be32(mad + 28, 0x00010001);
	for (uint8_t how = 0; how < 3; how++) {
		b[0] = 1;
		b[1] = how == 2 ? 2 : how;
		b[2] = 10, b[5] = 2;
		snprintf(name, sizeof(name), "mad-%u", how);
		put("fuzz-roced", name, b, 6 + ROCE_BTH_LEN + ROCE_DETH_LEN + ROCE_MAD_LEN + 4, NULL, 0);
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen-corpus OUTDIR\n");
		return 2;
	}
	outdir = argv[1];
	if (mkdir(outdir, 0755) != 0 && errno != EEXIST)
		die(outdir);
	gen_roced();
	gen_mpa_frame();
	gen_mpa_rx();
	gen_ddp_place();
	gen_rdmap_rx();
	gen_roce_pkt();
	gen_roce_cm();
	gen_local_msg();
	printf("gen-corpus: %u files in %s\n", nfiles, outdir);
	return 0;
}
