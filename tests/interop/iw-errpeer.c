/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* iw-errpeer: a small rdma-core verbs peer for the interop error paths.
 *
 *   iw-errpeer [--roce] --server [-a ADDR] -p PORT
 *   iw-errpeer [--roce] --client -a ADDR -p PORT
 *
 * The client opens one connection per case and per attacker (client, then
 * server).  The attacker does one forbidden thing; the victim must answer
 * with a Terminate and both QPs must flush and disconnect within a bounded
 * time.  Cases:
 *   write-badstag   RDMA Write to an STag the victim never advertised
 *   write-oob       RDMA Write past the end of the victim's buffer
 *   write-noaccess  RDMA Write to a buffer registered without REMOTE_WRITE
 *   read-badstag    RDMA Read Request naming an unknown STag
 *   send-norecv     a Send while the victim has no receive posted
 * The setup exchange is rdma_cm private data (the victim's buffer), nothing
 * else.  Each side prints one line per case:
 *   case NAME attacker|victim: wc STATUS... flushed N disconnect ok
 * and exits 0 when every connection ended within its bounds.
 * Built on the host against rdma-core; runs under siw or under xsock-run.
 *
 * --roce (both ends; RoCE/IB CM, e.g. rxe): a QP in error does not end the
 * connection there (no Terminate, no TCP close), so the attacker waits for
 * its WR's completion and disconnects (DREQ); the victim waits for that.
 * The RNR retry count is 1 both ways, so send-norecv fails in about a
 * second.  The line also gives the QP state when the peer's DREQ (victim)
 * or the WR's completion (attacker) came: " qp error|rts|...".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { CASE_WRITE_BADSTAG, CASE_WRITE_OOB, CASE_WRITE_NOACCESS, CASE_READ_BADSTAG, CASE_SEND_NORECV,
       CASE_COUNT };
static const char *const case_name[CASE_COUNT] = {
	[CASE_WRITE_BADSTAG] = "write-badstag",
	[CASE_WRITE_OOB] = "write-oob",
	[CASE_WRITE_NOACCESS] = "write-noaccess",
	[CASE_READ_BADSTAG] = "read-badstag",
	[CASE_SEND_NORECV] = "send-norecv",
};

#define BUF_LEN 4096u
#define WAIT_MS 15000
#define ROCE_RNR_RETRY 1

static int roce;

/* connect/accept private data, big-endian on the wire */
struct pdata {
	uint8_t version, cas, client_attacks, pad;
	uint32_t rkey; /* a buffer with remote read+write */
	uint32_t ro_rkey; /* a buffer with remote read only */
	uint32_t len;
	uint64_t addr, ro_addr;
} __attribute__((packed));

struct side {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr, *ro_mr;
	char *buf, *ro_buf;
};

static struct rdma_event_channel *ch;

static int wait_event(enum rdma_cm_event_type want, struct rdma_cm_event **out, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&p, 1, ms) <= 0) {
		fprintf(stderr, "iw-errpeer: no %s within %d ms\n", rdma_event_str(want), ms);
		return -1;
	}
	if (rdma_get_cm_event(ch, &ev))
		return -1;
	if (ev->event != want) {
		fprintf(stderr, "iw-errpeer: %s (status %d), wanted %s\n", rdma_event_str(ev->event), ev->status,
			rdma_event_str(want));
		rdma_ack_cm_event(ev);
		return -1;
	}
	if (out)
		*out = ev;
	else
		rdma_ack_cm_event(ev);
	return 0;
}

/* RoCE: bounded retries, so that a lost packet is resent but an RNR fails fast */
static void conn_param_roce(struct rdma_conn_param *cp)
{
	if (!roce)
		return;
	cp->retry_count = 6;
	cp->rnr_retry_count = ROCE_RNR_RETRY;
}

static const char *qp_state_str(struct ibv_qp *qp)
{
	static const char *const name[] = {
		[IBV_QPS_RESET] = "reset", [IBV_QPS_INIT] = "init", [IBV_QPS_RTR] = "rtr",
		[IBV_QPS_RTS] = "rts",	   [IBV_QPS_SQD] = "sqd",   [IBV_QPS_SQE] = "sqe",
		[IBV_QPS_ERR] = "error",
	};
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return "unknown(query failed)";
	return (unsigned)a.qp_state < sizeof(name) / sizeof(name[0]) && name[a.qp_state] ? name[a.qp_state]
											 : "unknown";
}

/* RoCE attacker: the completion of its WR (wr_id 2), within WAIT_MS; its
 * status into note */
static int wait_op_wc(struct side *s, char *note, size_t n)
{
	struct ibv_wc wc;

	for (int t = 0; t < WAIT_MS / 10; t++) {
		int k = ibv_poll_cq(s->cq, 1, &wc);

		if (k < 0)
			break;
		if (k == 0) {
			usleep(10000);
			continue;
		}
		if (wc.wr_id != 2)
			continue; /* a flushed receive: counted by drain once it is over */
		snprintf(note, n, " wc op:%s qp %s", ibv_wc_status_str(wc.status), qp_state_str(s->id->qp));
		return 0;
	}
	snprintf(note, n, " wc op:NONE");
	return -1;
}

static int side_setup(struct side *s, struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qa = { 0 };

	s->id = id;
	s->pd = ibv_alloc_pd(id->verbs);
	s->cq = s->pd ? ibv_create_cq(id->verbs, 16, NULL, NULL, 0) : NULL;
	s->buf = calloc(1, BUF_LEN);
	s->ro_buf = calloc(1, BUF_LEN);
	if (!s->cq || !s->buf || !s->ro_buf)
		return -1;
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_LEN,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	s->ro_mr = ibv_reg_mr(s->pd, s->ro_buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!s->mr || !s->ro_mr)
		return -1;
	qa.send_cq = qa.recv_cq = s->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 8;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	return rdma_create_qp(id, s->pd, &qa);
}

static void side_free(struct side *s)
{
	if (s->id && s->id->qp)
		rdma_destroy_qp(s->id);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->ro_mr)
		ibv_dereg_mr(s->ro_mr);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	free(s->buf);
	free(s->ro_buf);
	if (s->id)
		rdma_destroy_id(s->id);
	memset(s, 0, sizeof(*s));
}

static void pdata_fill(struct pdata *p, const struct side *s, int cas, int client_attacks)
{
	memset(p, 0, sizeof(*p));
	p->version = 1;
	p->cas = (uint8_t)cas;
	p->client_attacks = (uint8_t)client_attacks;
	p->rkey = htonl(s->mr->rkey);
	p->ro_rkey = htonl(s->ro_mr->rkey);
	p->len = htonl(BUF_LEN);
	p->addr = htobe64((uint64_t)(uintptr_t)s->buf);
	p->ro_addr = htobe64((uint64_t)(uintptr_t)s->ro_buf);
}

static int post_recv(struct side *s)
{
	struct ibv_sge sge = { (uint64_t)(uintptr_t)s->buf, 64, s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(s->id->qp, &wr, &bad);
}

static int attack(struct side *s, int cas, const struct pdata *peer)
{
	struct ibv_sge sge = { (uint64_t)(uintptr_t)s->buf, 64, s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	uint64_t addr = be64toh(peer->addr);
	uint32_t rkey = ntohl(peer->rkey);

	switch (cas) {
	case CASE_WRITE_BADSTAG:
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.wr.rdma.rkey = rkey ^ 0x5a5a5a00u; /* same key byte, another index */
		wr.wr.rdma.remote_addr = addr;
		break;
	case CASE_WRITE_OOB:
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.wr.rdma.rkey = rkey;
		wr.wr.rdma.remote_addr = addr + ntohl(peer->len) - 16; /* 48 bytes past the end */
		break;
	case CASE_WRITE_NOACCESS:
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.wr.rdma.rkey = ntohl(peer->ro_rkey);
		wr.wr.rdma.remote_addr = be64toh(peer->ro_addr);
		break;
	case CASE_READ_BADSTAG:
		wr.opcode = IBV_WR_RDMA_READ;
		wr.wr.rdma.rkey = rkey ^ 0x5a5a5a00u;
		wr.wr.rdma.remote_addr = addr;
		break;
	default:
		wr.opcode = IBV_WR_SEND;
		break;
	}
	return ibv_post_send(s->id->qp, &wr, &bad);
}

/* Collect completions until the connection is gone: the attacker's WC (any
 * status) and the flushed receives. */
static void drain(struct side *s, char *note, size_t n)
{
	struct ibv_wc wc[8];
	size_t used = 0;
	int k, i, flushed = 0;

	note[0] = 0;
	for (i = 0; i < 50; i++) {
		k = ibv_poll_cq(s->cq, 8, wc);
		for (int j = 0; j < k; j++) {
			if (wc[j].status == IBV_WC_WR_FLUSH_ERR) {
				flushed++;
				continue;
			}
			used += (size_t)snprintf(note + used, used < n ? n - used : 0, " wc %s:%s",
						 wc[j].wr_id == 1 ? "recv" : "op", ibv_wc_status_str(wc[j].status));
		}
		if (k <= 0)
			usleep(10000);
	}
	snprintf(note + used, used < n ? n - used : 0, " flushed %d", flushed);
}

/* One case on an established connection; the event for the connection end
 * is DISCONNECTED (both sides). */
static int run_case(struct side *s, int cas, int i_attack, const struct pdata *peer, const char *who)
{
	char note[256], pre[96] = "";
	int rc = 0;

	if (roce) {
		if (i_attack) {
			if (attack(s, cas, peer)) {
				fprintf(stderr, "iw-errpeer: post failed\n");
				rc = -1;
			} else if (wait_op_wc(s, pre, sizeof(pre))) {
				rc = -1;
			}
			/* DREQ; the DREP (or its timeout) is DISCONNECTED */
			rdma_disconnect(s->id);
			if (wait_event(RDMA_CM_EVENT_DISCONNECTED, NULL, WAIT_MS))
				rc = -1;
		} else {
			if (wait_event(RDMA_CM_EVENT_DISCONNECTED, NULL, WAIT_MS))
				rc = -1;
			snprintf(pre, sizeof(pre), " qp %s", qp_state_str(s->id->qp));
			rdma_disconnect(s->id); /* the DREP */
		}
		drain(s, note, sizeof(note));
		printf("case %s %s %s:%s%s disconnect %s\n", case_name[cas], who, i_attack ? "attacker" : "victim",
		       pre, note, rc ? "MISSING" : "ok");
		fflush(stdout);
		return rc;
	}
	if (i_attack) {
		usleep(200000); /* past siw's accept window (docs/interop.md) */
		if (attack(s, cas, peer)) {
			fprintf(stderr, "iw-errpeer: post failed\n");
			rc = -1;
		}
	}
	if (wait_event(RDMA_CM_EVENT_DISCONNECTED, NULL, WAIT_MS))
		rc = -1;
	rdma_disconnect(s->id);
	drain(s, note, sizeof(note));
	printf("case %s %s %s:%s disconnect %s\n", case_name[cas], who, i_attack ? "attacker" : "victim", note,
	       rc ? "MISSING" : "ok");
	fflush(stdout);
	return rc;
}

static int client(const char *addr, const char *port)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *ai;
	int fails = 0;

	if (rdma_getaddrinfo(addr, port, &hints, &ai)) {
		perror("rdma_getaddrinfo");
		return 1;
	}
	for (int attacker = 1; attacker >= 0; attacker--) {
		for (int cas = 0; cas < CASE_COUNT; cas++) {
			struct side s = { 0 };
			struct rdma_cm_id *id;
			struct rdma_cm_event *ev = NULL;
			struct pdata mine, peer;
			struct rdma_conn_param cp = { .private_data = &mine, .private_data_len = sizeof(mine),
						      .initiator_depth = 1, .responder_resources = 1 };
			int ok = 0;

			conn_param_roce(&cp);

			if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
				return 1;
			s.id = id;
			if (rdma_resolve_addr(id, NULL, ai->ai_dst_addr, 5000) ||
			    wait_event(RDMA_CM_EVENT_ADDR_RESOLVED, NULL, 6000) || rdma_resolve_route(id, 5000) ||
			    wait_event(RDMA_CM_EVENT_ROUTE_RESOLVED, NULL, 6000) || side_setup(&s, id))
				goto next;
			if (!(cas == CASE_SEND_NORECV && !attacker))
				post_recv(&s);
			pdata_fill(&mine, &s, cas, attacker);
			if (rdma_connect(id, &cp) || wait_event(RDMA_CM_EVENT_ESTABLISHED, &ev, WAIT_MS))
				goto next;
			if (ev->param.conn.private_data_len < sizeof(peer)) {
				fprintf(stderr, "iw-errpeer: short private data from the server\n");
				rdma_ack_cm_event(ev);
				goto next;
			}
			memcpy(&peer, ev->param.conn.private_data, sizeof(peer));
			rdma_ack_cm_event(ev);
			ok = run_case(&s, cas, attacker, &peer, "client") == 0;
next:
			if (!ok) {
				printf("case %s client FAILED\n", case_name[cas]);
				fails++;
			}
			side_free(&s);
		}
	}
	rdma_freeaddrinfo(ai);
	return fails ? 1 : 0;
}

static int server(const char *addr, const char *port)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP }, *ai;
	struct rdma_cm_id *lid;
	int fails = 0;

	if (rdma_getaddrinfo(addr, port, &hints, &ai)) {
		perror("rdma_getaddrinfo");
		return 1;
	}
	if (rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) || rdma_bind_addr(lid, ai->ai_src_addr) ||
	    rdma_listen(lid, 4)) {
		perror("listen");
		return 1;
	}
	rdma_freeaddrinfo(ai);
	for (int n = 0; n < 2 * CASE_COUNT; n++) {
		struct rdma_cm_event *ev;
		struct side s = { 0 };
		struct pdata mine, peer;
		struct rdma_conn_param cp = { .private_data = &mine, .private_data_len = sizeof(mine),
					      .initiator_depth = 1, .responder_resources = 1 };
		int ok = 0, cas = 0;

		conn_param_roce(&cp);

		if (wait_event(RDMA_CM_EVENT_CONNECT_REQUEST, &ev, 60000)) {
			fails++;
			break;
		}
		if (ev->param.conn.private_data_len < sizeof(peer)) {
			rdma_ack_cm_event(ev);
			fprintf(stderr, "iw-errpeer: short private data from the client\n");
			fails++;
			break;
		}
		memcpy(&peer, ev->param.conn.private_data, sizeof(peer));
		struct rdma_cm_id *id = ev->id;
		rdma_ack_cm_event(ev);
		cas = peer.cas < CASE_COUNT ? peer.cas : CASE_SEND_NORECV;
		if (side_setup(&s, id))
			goto next;
		if (!(cas == CASE_SEND_NORECV && peer.client_attacks))
			post_recv(&s);
		pdata_fill(&mine, &s, cas, peer.client_attacks);
		if (rdma_accept(id, &cp) || wait_event(RDMA_CM_EVENT_ESTABLISHED, NULL, WAIT_MS))
			goto next;
		ok = run_case(&s, cas, !peer.client_attacks, &peer, "server") == 0;
next:
		if (!ok) {
			printf("case %s server FAILED\n", case_name[cas]);
			fails++;
		}
		side_free(&s);
	}
	rdma_destroy_id(lid);
	return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *addr = NULL, *port = "7174";
	int srv = -1, rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--roce"))
			roce = 1;
		else if (!strcmp(argv[i], "--server"))
			srv = 1;
		else if (!strcmp(argv[i], "--client"))
			srv = 0;
		else if (!strcmp(argv[i], "-a") && i + 1 < argc)
			addr = argv[++i];
		else if (!strcmp(argv[i], "-p") && i + 1 < argc)
			port = argv[++i];
		else
			srv = -1, i = argc;
	}
	if (srv < 0 || (!srv && !addr)) {
		fprintf(stderr, "usage: iw-errpeer [--roce] --server [-a ADDR] -p PORT | [--roce] --client -a ADDR -p PORT\n");
		return 2;
	}
	ch = rdma_create_event_channel();
	if (!ch) {
		perror("rdma_create_event_channel");
		return 1;
	}
	rc = srv ? server(addr ? addr : "0.0.0.0", port) : client(addr, port);
	rdma_destroy_event_channel(ch);
	return rc;
}
