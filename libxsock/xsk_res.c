/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The IWARP socket object and its resources: the per-process settings
 * (XSOCK_IWARP_RBUF, XSOCK_LINGER_MS), the inner epoll fd and eventfds,
 * the CM channel, the rings and the PD/CQ/QP/MRs of a connection, posting
 * receives and 4-octet messages, our connection data, and the hooks of
 * the layers above (xsk_proto.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libxsock/xsk_config.h"
#include "libxsock/xsk_proto_int.h"
#include "util/xs_be.h"
#include "verbs/xs_priv_abi.h"

/* ---- objects ------------------------------------------------------------------ */

/* How long a close lingers for unsent data (XSOCK_LINGER_MS, as libiwarp
 * reads it); the settings table parses it once per process. */
int xsk_linger_ms(void)
{
	return (int)xsk_setting_num(XS_SET_LINGER_MS);
}

struct xsk *xsk_new(int family)
{
	struct xsk *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	pthread_mutex_init(&s->mu, NULL);
	s->family = family;
	s->owner_pid = getpid();
	s->epfd = -1;
	s->plain_fd = -1;
	s->probe_fd = -1;
	s->ready_fd = -1;
	s->wake_fd = -1;
	s->rxw_fd = -1;
	s->rbuf_size = (uint32_t)xsk_setting_num(XS_SET_IWARP_RBUF) & ~1u; /* XSOCK_IWARP_RBUF */
	s->sbuf_size = XSK_SBUF;
	s->rq_size = XSK_RQ_FIRST;
	s->rcvlowat = 1;
	return s;
}

static int set_nonblock(int fd)
{
	int fl = xsk_real.fcntl(fd, F_GETFL);

	if (fl < 0 || xsk_real.fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static int ep_add(struct xsk *s, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	if (xsk_real.epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	return 0;
}

int xsk_make_fds(struct xsk *s)
{
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->epfd < 0)
		return -errno;
	s->ready_fd = xsk_fd_keep(xsock_fd_high(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)));
	if (s->ready_fd < 0)
		return -errno;
	s->wake_fd = xsk_fd_keep(xsock_fd_high(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)));
	if (s->wake_fd < 0)
		return -errno;
	return ep_add(s, s->ready_fd);
}

int xsk_make_channel(struct xsk *s, const struct xsk_stack *st)
{
	int rc;

	s->ch = st->create_event_channel();
	if (!s->ch)
		return -(errno ? errno : ENOMEM);
	rc = set_nonblock(s->ch->fd);
	if (!rc)
		rc = ep_add(s, s->ch->fd);
	return rc;
}

/* ---- posting ------------------------------------------------------------------ */

/* The address (TO) of p in the receive memory as the MR knows it: its own
 * address, except after an exec hand-over, where the memory is registered
 * at the old process's addresses (the peer holds them). */
uint64_t xsk_mem_to(const struct xsk *s, const void *p)
{
	return s->mem_iova + (uint64_t)((const uint8_t *)p - s->mem);
}

int xsk_post_recv(struct xsk *s, unsigned i)
{
	return xsk_post_recvs(s, i, 1);
}

/* Receives i .. i + n - 1, chained in posts of up to 64 (one QP lock each:
 * a connection's setup posted its 416 one call at a time). */
int xsk_post_recvs(struct xsk *s, unsigned i, unsigned n)
{
	struct ibv_sge sge[64];
	struct ibv_recv_wr wr[64], *bad;

	while (n) {
		unsigned k = n < 64 ? n : 64;

		for (unsigned j = 0; j < k; j++) {
			sge[j] = (struct ibv_sge){ .addr = xsk_mem_to(s, &s->rmsgbuf[i + j]),
						   .length = 4, .lkey = s->rmr->lkey };
			wr[j] = (struct ibv_recv_wr){ .wr_id = WR_RECV | (i + j), .sg_list = &sge[j],
						      .num_sge = 1,
						      .next = j + 1 < k ? &wr[j + 1] : NULL };
		}
		int rc = ibv_post_recv(s->id->qp, wr, &bad);
		if (rc)
			return -rc;
		i += k;
		n -= k;
	}
	return 0;
}

/* A 4-octet Send carrying msg, in the peer's byte order; with msg_imm a
 * zero-length RDMA Write with immediate (no address, R_Key 0), as
 * rsockets' rs_post_msg on InfiniBand/RoCE. */
int xsk_post_msg(struct xsk *s, uint32_t msg)
{
	uint32_t m = s->swap ? rs_swap32(msg) : msg;
	struct ibv_sge sge = { .addr = (uintptr_t)&m, .length = sizeof(m) };
	struct ibv_send_wr wr = { .opcode = IBV_WR_SEND, .sg_list = &sge, .num_sge = 1,
				  .send_flags = IBV_SEND_INLINE };
	struct ibv_send_wr *bad;

	if (s->msg_imm)
		xsk_wr_imm(&wr, msg);
	return -ibv_post_send(s->id->qp, &wr, &bad);
}

void xsk_wr_write_imm(struct ibv_send_wr *wr, uint32_t msg)
{
	wr->next = NULL;
	wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	xs_put_be32((uint8_t *)&wr->imm_data, msg); /* the wire's order, as verbs keeps it */
}

void xsk_wr_imm(struct ibv_send_wr *wr, uint32_t msg)
{
	xsk_wr_write_imm(wr, msg);
	wr->sg_list = NULL;
	wr->num_sge = 0;
	wr->send_flags &= ~(unsigned)IBV_SEND_INLINE;
	wr->wr.rdma.remote_addr = 0;
	wr->wr.rdma.rkey = 0;
}

/* ---- resources ----------------------------------------------------------------- */

/* The memory the stack places data in or sends from: anonymous pages,
 * faulted in only where data lands (a ring cleared with memset cost every
 * connection 768 KiB of page faults and stores, most of a short
 * connection's setup).  Over a kernel stack it is MAP_SHARED, which fork
 * never copies: the kernel keeps placing into the pages it pinned at
 * registration, and those must stay the owner's (a private page written
 * after a fork was copied for the writer on older kernels, the old page
 * left to the kernel and the child: the reason for rdma-core's
 * ibv_fork_init).
 *
 * A closed connection's rings (deregistered, its QP destroyed, so nothing
 * places into them any more) wait in a pool of XSK_RING_POOL for the
 * next connection of the process: an mmap and a munmap, with the TLB
 * shootdown of a threaded process, were 5% of a short connection's CPU.
 * A reused ring holds the earlier connection's bytes of this same
 * process; nothing reads a ring past what the new peer placed, and the
 * receive memory allows no RDMA Read.  A forked child empties its pool
 * (xsk_ring_pool_fork_child): a MAP_SHARED ring is the parent's too. */
#define XSK_RING_POOL 8

static struct {
	void *p;
	size_t len;
} ring_pool[XSK_RING_POOL];
static unsigned ring_pooled;
static pthread_mutex_t ring_pool_mu = PTHREAD_MUTEX_INITIALIZER;

/* NULL on failure */
static void *ring_alloc(const struct xsk_stack *st, size_t len)
{
	int share = st->kernel ? MAP_SHARED : MAP_PRIVATE;
	void *p = NULL;

	pthread_mutex_lock(&ring_pool_mu);
	for (unsigned i = ring_pooled; i-- > 0;) {
		if (ring_pool[i].len == len) {
			p = ring_pool[i].p;
			ring_pool[i] = ring_pool[--ring_pooled];
			break;
		}
	}
	pthread_mutex_unlock(&ring_pool_mu);
	if (p)
		return p;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, share | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void xsk_ring_free(void *p, size_t len)
{
	if (!p)
		return;
	pthread_mutex_lock(&ring_pool_mu);
	if (ring_pooled < XSK_RING_POOL) {
		ring_pool[ring_pooled].p = p;
		ring_pool[ring_pooled++].len = len;
		p = NULL;
	}
	pthread_mutex_unlock(&ring_pool_mu);
	if (p)
		munmap(p, len);
}

/* In the child of a fork (one thread; the lock may have been held by a
 * thread that is not there): its copies of the pooled rings go. */
void xsk_ring_pool_fork_child(void)
{
	pthread_mutex_init(&ring_pool_mu, NULL);
	for (unsigned i = 0; i < ring_pooled; i++)
		munmap(ring_pool[i].p, ring_pool[i].len);
	ring_pooled = 0;
}

int xsk_setup_qp(struct xsk *s, const struct xsk_stack *st, const struct xsk_adopt_mr *ad)
{
	struct ibv_context *ctx = s->id->verbs;
	uint32_t sgl_off, msg_off;
	int rc;

	if (!ctx)
		return -ENODEV;
	/* rsockets sets RS_OPT_MSG_SEND on iWARP devices only (rs_create_ep) */
	s->msg_imm = ctx->device && ctx->device->transport_type != IBV_TRANSPORT_IWARP;
	s->pd = st->alloc_pd(ctx);
	if (!s->pd)
		return -(errno ? errno : ENOMEM);
	s->cch = st->create_comp_channel(ctx);
	if (!s->cch)
		return -(errno ? errno : ENOMEM);
	rc = set_nonblock(s->cch->fd);
	if (!rc)
		rc = ep_add(s, s->cch->fd);
	if (rc)
		return rc;
	s->nrecv = s->rq_size + XSK_RECV_EXTRA; /* posted now; up to XSK_NRECV_MAX later */
	s->cq = st->create_cq(ctx, (int)(XSK_NRECV_MAX + XSK_SQ * 2 + 16), s, s->cch, 0);
	if (!s->cq)
		return -(errno ? errno : ENOMEM);
	sgl_off = s->rbuf_size;
	msg_off = sgl_off + RS_SGL_SIZE * RS_SGE_LEN;
	s->mem_len = msg_off + XSK_NRECV_MAX * 4u;
	s->mem = ring_alloc(st, s->mem_len);
	if (!s->mem)
		return -ENOMEM;
	s->rbuf = s->mem;
	s->target_sgl = (volatile struct rs_sge_h *)(void *)(s->mem + sgl_off);
	s->rmsgbuf = (uint32_t *)(void *)(s->mem + msg_off);
	s->mem_iova = ad ? ad->iova : (uintptr_t)s->mem;
	if (ad)
		s->rmr = st->reg_mr_stag(s->pd, s->mem, s->mem_len, ad->iova,
					 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, ad->rkey);
	else
		s->rmr = st->reg_mr(s->pd, s->mem, s->mem_len,
				    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!s->rmr)
		return -(errno ? errno : ENOMEM);
	s->sbuf = ring_alloc(st, s->sbuf_size);
	if (!s->sbuf)
		return -ENOMEM;
	s->smr = st->reg_mr(s->pd, s->sbuf, s->sbuf_size, IBV_ACCESS_LOCAL_WRITE);
	if (!s->smr)
		return -(errno ? errno : ENOMEM);
	s->rmsg_cap = XSK_NRECV_MAX + 1;
	s->rmsg = calloc(s->rmsg_cap, sizeof(*s->rmsg));
	if (!s->rmsg)
		return -ENOMEM;

	struct ibv_qp_init_attr qa = {
		.send_cq = s->cq,
		.recv_cq = s->cq,
		.cap = { .max_send_wr = XSK_SQ, .max_recv_wr = XSK_NRECV_MAX, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 64 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
	};
	if (st->create_qp(s->id, s->pd, &qa))
		return -(errno ? errno : ENOMEM);
	rc = xsk_post_recvs(s, 0, s->nrecv);
	if (rc)
		return rc;
	rc = ibv_req_notify_cq(s->cq, 0);
	if (rc)
		return -rc;
	s->cq_armed = true;
	if (ad)
		return 0; /* the ring goes on where the old process left it */

	/* receive ring: the whole ring goes out in the connection data, so
	 * no SGL message follows the connection; the halves are advertised
	 * again, first half first, as each is consumed.  (rsockets sends its
	 * second half in an SGL message at once; holding it back instead made
	 * the update land mid-stream, where a siw peer that closes right
	 * after its last send finds it unread and resets the connection.) */
	s->rbuf_offset = 0;
	s->rbuf_free_offset = 0;
	s->rbuf_bytes_avail = 0;
	s->rseq_no = 0;
	s->rseq_comp = s->rq_size / 2;
	s->remote_sge = 1; /* entry 0 is the data buffer of our connection data */
	return 0;
}

void xsk_local_conn(struct xsk *s, uint8_t out[RS_CONN_DATA_LEN])
{
	struct rs_conn c = {
		.version = RS_VERSION,
		.flags = rs_host_is_be() ? RS_CONN_FLAG_NET : 0,
		.credits = s->rq_size,
		.target_sgl = { .addr = xsk_mem_to(s, (const void *)s->target_sgl), .key = s->rmr->rkey,
				.length = RS_SGL_SIZE },
		.data_buf = { .addr = xsk_mem_to(s, s->rbuf), .key = s->rmr->rkey,
			      .length = s->rbuf_size },
	};
	rs_conn_encode(&c, out);
}

/* ---- the layers above ------------------------------------------------------------ */

const struct xsk_ext_hooks *_Atomic xsk_ext_up;
const struct xsk_relay_hooks *_Atomic xsk_relay_up;

void xsk_proto_set_ext(const struct xsk_ext_hooks *h)
{
	atomic_store(&xsk_ext_up, h);
}

void xsk_proto_set_relay(const struct xsk_relay_hooks *h)
{
	atomic_store(&xsk_relay_up, h);
}
