/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The software devices: "xsock0" (an iWARP RNIC) and its RoCE personality
 * "xsock_roce0" (verbs_roce_dev.c has its port and GID table), their
 * contexts and the queries, string and rate helpers, async events, and the
 * verbs they do not have (AH, multicast, XRC): those fail with
 * EOPNOTSUPP. */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netpacket/packet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "verbs/verbs_priv.h"
#include "verbs/xs_roce_dev.h"
#include "util/xs_errno.h"

/* the header turns these into inline wrappers; we define the real symbols */
#undef ibv_query_port

static struct ibv_device xs_device = {
	.node_type = IBV_NODE_RNIC,
	.transport_type = IBV_TRANSPORT_IWARP,
	.name = XS_DEVICE_NAME,
	.dev_name = "uverbs_xsock0",
	/* not in sysfs: ibv_read_sysfs_file on these paths says ENOENT */
	.dev_path = "/sys/class/infiniband_verbs/uverbs_xsock0",
	.ibdev_path = "/sys/class/infiniband/xsock0",
};

/* Identity from the MAC of the interface that carries the default route
 * (else the first non-loopback interface with a MAC), as siw derives its
 * GID from its netdev's MAC: the GID is the MAC padded with zeros, the GUID
 * its EUI-64.  A host with no such interface (only lo: a bare network
 * namespace) gets a locally administered MAC hashed from the hostname, so
 * the GID is never all zeros (test suites skip such a port). */
static pthread_once_t xs_ident_once = PTHREAD_ONCE_INIT;
static union ibv_gid xs_gid;
static __be64 xs_guid;

/* The interface of the IPv4 default route, or "" (/proc/net/route). */
static void xs_default_iface(char name[IF_NAMESIZE])
{
	char line[256], ifn[IF_NAMESIZE + 1];
	unsigned long dst;
	FILE *f = fopen("/proc/net/route", "re");

	name[0] = '\0';
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%16s %lx", ifn, &dst) == 2 && dst == 0 &&
		    strlen(ifn) < IF_NAMESIZE) {
			strcpy(name, ifn);
			break;
		}
	}
	fclose(f);
}

static bool xs_mac_of(const char *want, uint8_t mac[6])
{
	struct ifaddrs *ifa = NULL, *i;
	bool have = false;

	if (getifaddrs(&ifa) < 0)
		return false;
	for (i = ifa; i && !have; i = i->ifa_next) {
		const struct sockaddr_ll *ll = (const void *)i->ifa_addr;

		if (!ll || ll->sll_family != AF_PACKET || (i->ifa_flags & IFF_LOOPBACK) ||
		    !(i->ifa_flags & IFF_UP) ||
		    ll->sll_halen != 6 || (want && strcmp(i->ifa_name, want) != 0))
			continue;
		memcpy(mac, ll->sll_addr, 6);
		have = (mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5]) != 0;
	}
	freeifaddrs(ifa);
	return have;
}

static void xs_ident_load(void)
{
	char dflt[IF_NAMESIZE];
	uint8_t mac[6];

	xs_default_iface(dflt);
	if (!(dflt[0] && xs_mac_of(dflt, mac)) && !xs_mac_of(NULL, mac)) {
		char host[256] = "xsock";
		uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

		gethostname(host, sizeof(host) - 1);
		for (const char *p = host; *p; p++)
			h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
		for (int k = 0; k < 6; k++)
			mac[k] = (uint8_t)(h >> (8 * k));
		mac[0] = (uint8_t)((mac[0] & 0xfe) | 0x02); /* unicast, locally administered */
	}
	uint8_t g[8] = { mac[0] ^ 2, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5] };

	memcpy(xs_gid.raw, mac, 6);
	memcpy(&xs_guid, g, 8);
}

static void xs_ident(void)
{
	pthread_once(&xs_ident_once, xs_ident_load);
}

/* xsock_roce0's GUID is xsock0's with ff:ff for ff:fe in the middle (the
 * old MAC-48 marker): the same identity, another GUID, and one no other
 * interface's EUI-64 can be. */
static __be64 xs_guid_of(const struct ibv_device *dev)
{
	uint8_t g[8];
	__be64 out;

	xs_ident();
	memcpy(g, &xs_guid, 8);
	if (dev == &xs_roce_device)
		g[4] |= 1;
	memcpy(&out, g, 8);
	return out;
}

static bool xs_is_device(const struct ibv_device *dev)
{
	return dev == &xs_device || dev == &xs_roce_device;
}

/* ---- device list ---------------------------------------------------------- */

XS_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct ibv_device **l = calloc(3, sizeof(*l));

	if (!l) {
		errno = ENOMEM;
		return NULL;
	}
	/* xsock0 first: programs that take the first device keep iWARP */
	l[0] = &xs_device;
	l[1] = &xs_roce_device;
	if (num_devices)
		*num_devices = 2;
	return l;
}

XS_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

XS_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device ? device->name : NULL;
}

XS_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	return xs_guid_of(device);
}

XS_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return device == &xs_device ? 0 : device == &xs_roce_device ? 1 : -1;
}

XS_EXPORT int ibv_fork_init(void)
{
	return 0; /* no pinned pages: nothing to protect across fork */
}

/* rdma-core semantics: the file's contents without the trailing newline,
 * its length, or -1 with errno. */
XS_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char path[512];
	ssize_t n;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, size);
	close(fd);
	if (n < 0)
		return -1;
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	if ((size_t)n < size)
		buf[n] = '\0';
	else if (size)
		buf[size - 1] = '\0';
	return (int)n;
}

/* ---- context -------------------------------------------------------------- */

static int xs_query_port_op(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr,
			    size_t attr_len);
static int xs_query_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *attr, size_t attr_size);

XS_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct xs_context *x;
	struct ibv_context *c;

	if (!xs_is_device(device)) {
		errno = ENODEV;
		return NULL;
	}
	if (device == &xs_roce_device)
		xs_roce_refresh(); /* the GID table as at open */
	x = calloc(1, sizeof(*x));
	if (!x) {
		errno = ENOMEM;
		return NULL;
	}
	c = &x->vctx.context;
	c->device = device;
	c->cmd_fd = xs_fd_keep(eventfd(0, EFD_CLOEXEC));
	c->async_fd = xs_fd_keep(eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE));
	if (c->cmd_fd < 0 || c->async_fd < 0) {
		int e = errno;

		if (c->cmd_fd >= 0)
			xs_fd_close(c->cmd_fd);
		if (c->async_fd >= 0)
			xs_fd_close(c->async_fd);
		free(x);
		errno = e;
		return NULL;
	}
	c->num_comp_vectors = 1;
	pthread_mutex_init(&c->mutex, NULL);
	c->abi_compat = __VERBS_ABI_IS_EXTENDED;
	c->ops.poll_cq = xs_poll_cq;
	c->ops.req_notify_cq = xs_req_notify_cq;
	c->ops.post_send = xs_post_send;
	c->ops.post_recv = xs_post_recv;
	c->ops.post_srq_recv = xs_post_srq_recv;
	x->vctx.sz = sizeof(struct verbs_context);
	x->vctx.query_port = xs_query_port_op;
	x->vctx.query_device_ex = xs_query_device_ex;
	x->vctx.create_qp_ex = xs_create_qp_ex;
	x->vctx.create_srq_ex = xs_create_srq_ex;
	x->vctx.get_srq_num = xs_get_srq_num;
	pthread_mutex_init(&x->ev_lock, NULL);
	return c;
}

XS_EXPORT int ibv_close_device(struct ibv_context *context)
{
	struct xs_context *x = to_xs_context(context);

	xs_fd_close(context->cmd_fd);
	xs_fd_close(context->async_fd);
	pthread_mutex_destroy(&context->mutex);
	pthread_mutex_destroy(&x->ev_lock);
	free(x->evq);
	free(x);
	return 0;
}

static pthread_once_t xs_default_once = PTHREAD_ONCE_INIT;
static struct ibv_context *xs_default_ctx;

/* XSOCK_TRANSPORT chooses the device (0 iwarp, 1 roce). */
static void xs_default_open(void)
{
	bool roce = xs_settings_num(xs_settings(), XS_SET_TRANSPORT) == 1;

	xs_default_ctx = ibv_open_device(roce ? &xs_roce_device : &xs_device);
}

/* Opened once, never closed: CM ids of the whole process share it. */
struct ibv_context *xs_default_context(void)
{
	pthread_once(&xs_default_once, xs_default_open);
	if (!xs_default_ctx)
		errno = ENOMEM;
	return xs_default_ctx;
}

/* ---- queries -------------------------------------------------------------- */

static void xs_fill_device_attr(const struct ibv_context *ctx, struct ibv_device_attr *a)
{
	bool roce = xs_ctx_is_roce(ctx);

	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", XS_FW_VER);
	a->node_guid = xs_guid_of(ctx->device);
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = XS_MAX_MR_SIZE;
	a->page_size_cap = 4096;
	a->max_qp = XS_MAX_QP;
	a->max_qp_wr = XS_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_SRQ_RESIZE;
	a->max_sge = XS_MAX_SGE;
	a->max_sge_rd = 1; /* RDMA Read sinks: one SGE */
	a->max_cq = XS_MAX_QP * 2;
	a->max_cqe = XS_MAX_CQE;
	a->max_mr = 1 << 24; /* XS_MR_MAX in verbs_mr.c */
	a->max_pd = XS_MAX_QP;
	a->max_srq = XS_MAX_SRQ;
	a->max_srq_wr = XS_MAX_SRQ_WR;
	a->max_srq_sge = XS_MAX_SRQ_SGE;
	/* rdma-core: rd_atom = Read Requests a QP can have incoming
	 * (responder resources, our IRD), init_rd_atom = it can issue (ORD) */
	a->max_qp_rd_atom = XS_MAX_IRD;
	a->max_qp_init_rd_atom = XS_MAX_ORD;
	a->max_res_rd_atom = XS_MAX_IRD * XS_MAX_QP;
	/* RFC 7306 atomics: the device carries them out atomically with
	 * respect to the CPUs of this host (IBV_ATOMIC_HCA, not GLOB: another
	 * process's atomics on shared memory are not serialized with ours).
	 * It cannot know its peers: a connection that did not agree on
	 * RFC 7306 (siw) refuses atomic WRs with EOPNOTSUPP when posted. */
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_pkeys = 1;
	a->phys_port_cnt = 1;
	a->vendor_id = roce ? XS_ROCE_VENDOR_ID : XS_VENDOR_ID;
	a->vendor_part_id = roce ? XS_ROCE_VENDOR_PART_ID : XS_VENDOR_PART_ID;
	a->hw_ver = 1;
}

XS_EXPORT int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr)
{
	if (!context || !attr)
		return EINVAL;
	xs_fill_device_attr(context, attr);
	return 0;
}

static int xs_query_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *attr, size_t attr_size)
{
	if (attr_size < sizeof(attr->orig_attr))
		return EINVAL;
	if (in && in->comp_mask)
		return EINVAL; /* rdma-core: no input fields are defined */
	memset(attr, 0, attr_size);
	xs_fill_device_attr(ctx, &attr->orig_attr);
	/* the extended fields a caller's (older) struct has room for */
	if (attr_size >= offsetof(struct ibv_device_attr_ex, phys_port_cnt_ex) +
				 sizeof(attr->phys_port_cnt_ex))
		attr->phys_port_cnt_ex = 1;
	if (attr_size >= offsetof(struct ibv_device_attr_ex, max_dm_size))
		attr->max_dm_size = 0;
	return 0;
}

/* MTU: TCP carries any size; we report 4096 as the maximum and 1024 as
 * active, what an RNIC on a 1500-byte Ethernet link says (verbs apps only
 * use it for UD sizing or path_mtu, which iWARP ignores). */
static void xs_fill_port_attr(struct ibv_port_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->state = IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = IBV_MTU_1024;
	a->gid_tbl_len = 1;
	a->port_cap_flags = IBV_PORT_CM_SUP;
	a->max_msg_sz = UINT32_MAX;
	a->pkey_tbl_len = 1;
	a->max_vl_num = 1;
	a->active_width = 2; /* 4X */
	a->active_speed = 16; /* FDR10-ish: informational only */
	a->phys_state = 5; /* LinkUp */
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
}

static int xs_query_port_op(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr,
			    size_t attr_len)
{
	struct ibv_port_attr a;

	if (port != XS_PORT_NUM)
		return EINVAL;
	if (xs_ctx_is_roce(ctx))
		xs_roce_fill_port_attr(&a);
	else
		xs_fill_port_attr(&a);
	memset(attr, 0, attr_len);
	memcpy(attr, &a, attr_len < sizeof(a) ? attr_len : sizeof(a));
	return 0;
}

/* The exported symbol serves binaries built before the inline wrapper: they
 * pass the older, shorter struct that ends before flags. */
XS_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num,
			     struct _compat_ibv_port_attr *port_attr)
{
	return xs_query_port_op(context, port_num, (struct ibv_port_attr *)port_attr,
				offsetof(struct ibv_port_attr, flags));
}

/* ibv_query_gid_ex(3): 0 or an errno; entry_size is the caller's
 * sizeof(struct ibv_gid_entry).  xsock0's one entry is type IB, as the
 * kernel reports an iWARP device's GIDs (no RoCE GID table, no netdev
 * index); xsock_roce0's table is RoCE v2 (ENODATA: an empty slot). */
static int xs_gid_entry(const struct ibv_context *ctx, uint32_t port_num, uint32_t gid_index,
			struct ibv_gid_entry *e)
{
	if (port_num != XS_PORT_NUM)
		return EINVAL;
	if (xs_ctx_is_roce(ctx))
		return xs_roce_gid_entry(gid_index, e);
	if (gid_index != 0)
		return EINVAL;
	xs_ident();
	memset(e, 0, sizeof(*e));
	e->gid = xs_gid;
	e->gid_index = 0;
	e->port_num = XS_PORT_NUM;
	e->gid_type = IBV_GID_TYPE_IB;
	e->ndev_ifindex = 0;
	return 0;
}

/* rdma-core's: an empty slot reads as the zero GID */
XS_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index,
			    union ibv_gid *gid)
{
	struct ibv_gid_entry e;
	int rc = EINVAL;

	if (context && gid && index >= 0)
		rc = xs_gid_entry(context, port_num, (uint32_t)index, &e);
	if (rc == ENODATA) {
		memset(gid, 0, sizeof(*gid));
		return 0;
	}
	if (rc) {
		errno = rc;
		return -1;
	}
	*gid = e.gid;
	return 0;
}

XS_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
				uint32_t gid_index, struct ibv_gid_entry *entry, uint32_t flags,
				size_t entry_size)
{
	struct ibv_gid_entry e;
	int rc;

	if (!context || !entry || flags || entry_size < sizeof(e))
		return EINVAL;
	rc = xs_gid_entry(context, port_num, gid_index, &e);
	if (rc)
		return rc;
	memset(entry, 0, entry_size);
	memcpy(entry, &e, sizeof(e));
	return 0;
}

/* ibv_query_gid_table(3): the number of entries, or -errno. */
XS_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
				       size_t max_entries, uint32_t flags, size_t entry_size)
{
	if (!context || flags || entry_size < sizeof(struct ibv_gid_entry))
		return -EINVAL;
	if (xs_ctx_is_roce(context))
		return xs_roce_gid_table(entries, max_entries, entry_size);
	if (max_entries < 1 || !entries)
		return -EINVAL; /* rdma-core: the table has more entries than room */
	memset(entries, 0, entry_size);
	xs_gid_entry(context, XS_PORT_NUM, 0, entries);
	return 1;
}

XS_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index,
			     __be16 *pkey)
{
	if (port_num != XS_PORT_NUM || index != 0) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(0xffff);
	return 0;
}

/* rdma-core's: IB and RoCE v1 read as one sysfs type, as does an empty
 * slot */
XS_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
				 enum xs_gid_type_sysfs *type)
{
	struct ibv_gid_entry e;
	int rc = EINVAL;

	if (context && type)
		rc = xs_gid_entry(context, port_num, index, &e);
	if (rc && rc != ENODATA) {
		errno = rc;
		return -1;
	}
	*type = !rc && e.gid_type == IBV_GID_TYPE_ROCE_V2 ? XS_GID_TYPE_SYSFS_ROCE_V2 :
							     XS_GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}

/* ---- async events ---------------------------------------------------------- */

void xs_async_event(struct ibv_context *ctx, const struct ibv_async_event *ev)
{
	struct xs_context *x = to_xs_context(ctx);
	uint64_t one = 1;
	bool ok = true;

	pthread_mutex_lock(&x->ev_lock);
	if (x->ev_count == x->ev_cap) {
		unsigned ncap = x->ev_cap ? x->ev_cap * 2 : 16;
		struct ibv_async_event *n = malloc(ncap * sizeof(*n));

		if (n) {
			for (unsigned i = 0; i < x->ev_count; i++)
				n[i] = x->evq[(x->ev_head + i) % x->ev_cap];
			free(x->evq);
			x->evq = n;
			x->ev_head = 0;
			x->ev_cap = ncap;
		} else {
			ok = false;
		}
	}
	if (ok) {
		x->evq[(x->ev_head + x->ev_count) % x->ev_cap] = *ev;
		x->ev_count++;
	}
	pthread_mutex_unlock(&x->ev_lock);
	if (ok && write(ctx->async_fd, &one, sizeof(one)) != sizeof(one))
		xs_log("async event lost: %s\n", xs_strerror(errno));
}

static bool event_names(const struct ibv_async_event *ev, const void *obj)
{
	switch (ev->event_type) {
	case IBV_EVENT_CQ_ERR:
		return ev->element.cq == obj;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return ev->element.qp == obj;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		return ev->element.srq == obj;
	default:
		return false;
	}
}

void xs_async_forget(struct ibv_context *ctx, const void *obj)
{
	struct xs_context *x = to_xs_context(ctx);
	unsigned kept = 0;

	pthread_mutex_lock(&x->ev_lock);
	for (unsigned i = 0; i < x->ev_count; i++) {
		const struct ibv_async_event *ev = &x->evq[(x->ev_head + i) % x->ev_cap];

		if (!event_names(ev, obj))
			x->evq[(x->ev_head + kept++) % x->ev_cap] = *ev;
	}
	/* async_fd stays readable for the dropped ones: get_async_event reads
	 * the counter and finds the FIFO empty (EAGAIN, or waits) */
	x->ev_count = kept;
	pthread_mutex_unlock(&x->ev_lock);
}

/* Blocks on async_fd (or EAGAIN if the app made it non-blocking). */
XS_EXPORT int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	struct xs_context *x = to_xs_context(context);
	uint64_t v;

	for (;;) {
		if (read(context->async_fd, &v, sizeof(v)) != sizeof(v))
			return -1;
		pthread_mutex_lock(&x->ev_lock);
		if (x->ev_count) {
			*event = x->evq[x->ev_head];
			x->ev_head = (x->ev_head + 1) % x->ev_cap;
			x->ev_count--;
			pthread_mutex_unlock(&x->ev_lock);
			return 0;
		}
		pthread_mutex_unlock(&x->ev_lock);
	}
}

XS_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR: {
		struct ibv_cq *cq = event->element.cq;

		pthread_mutex_lock(&cq->mutex);
		cq->async_events_completed++;
		pthread_cond_broadcast(&cq->cond);
		pthread_mutex_unlock(&cq->mutex);
		break;
	}
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED: {
		struct ibv_qp *qp = event->element.qp;

		pthread_mutex_lock(&qp->mutex);
		qp->events_completed++;
		pthread_cond_broadcast(&qp->cond);
		pthread_mutex_unlock(&qp->mutex);
		break;
	}
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED: {
		struct ibv_srq *srq = event->element.srq;

		pthread_mutex_lock(&srq->mutex);
		srq->events_completed++;
		pthread_cond_broadcast(&srq->cond);
		pthread_mutex_unlock(&srq->mutex);
		break;
	}
	default:
		break;
	}
}

/* ---- strings ---------------------------------------------------------------- */

/* The name at i of a table indexed by an enum, "unknown" past its end or
 * in a hole. */
static const char *xs_name_of(const char *const *names, size_t n, unsigned i)
{
	return i < n && names[i] ? names[i] : "unknown";
}

XS_EXPORT const char *ibv_node_type_str(enum ibv_node_type node_type)
{
	static const char *const s[] = {
		[IBV_NODE_CA] = "InfiniBand channel adapter",
		[IBV_NODE_SWITCH] = "InfiniBand switch",
		[IBV_NODE_ROUTER] = "InfiniBand router",
		[IBV_NODE_RNIC] = "iWARP NIC",
		[IBV_NODE_USNIC] = "usNIC",
		[IBV_NODE_USNIC_UDP] = "usNIC UDP",
		[IBV_NODE_UNSPECIFIED] = "unspecified",
	};

	return xs_name_of(s, sizeof(s) / sizeof(s[0]), (unsigned)node_type);
}

XS_EXPORT const char *ibv_port_state_str(enum ibv_port_state port_state)
{
	static const char *const s[] = {
		[IBV_PORT_NOP] = "no state change (NOP)",
		[IBV_PORT_DOWN] = "down",
		[IBV_PORT_INIT] = "init",
		[IBV_PORT_ARMED] = "armed",
		[IBV_PORT_ACTIVE] = "active",
		[IBV_PORT_ACTIVE_DEFER] = "active defer",
	};

	return xs_name_of(s, sizeof(s) / sizeof(s[0]), (unsigned)port_state);
}

XS_EXPORT const char *ibv_event_type_str(enum ibv_event_type event)
{
	static const char *const s[] = {
		[IBV_EVENT_CQ_ERR] = "CQ error",
		[IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
		[IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
		[IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
		[IBV_EVENT_COMM_EST] = "communication established",
		[IBV_EVENT_SQ_DRAINED] = "send queue drained",
		[IBV_EVENT_PATH_MIG] = "path migrated",
		[IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
		[IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
		[IBV_EVENT_PORT_ACTIVE] = "port active",
		[IBV_EVENT_PORT_ERR] = "port error",
		[IBV_EVENT_LID_CHANGE] = "LID change",
		[IBV_EVENT_PKEY_CHANGE] = "P_Key change",
		[IBV_EVENT_SM_CHANGE] = "SM change",
		[IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
		[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
		[IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
		[IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
		[IBV_EVENT_GID_CHANGE] = "GID table change",
		[IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};

	return xs_name_of(s, sizeof(s) / sizeof(s[0]), (unsigned)event);
}

XS_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	static const char *const s[] = {
		[IBV_WC_SUCCESS] = "success",
		[IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error",
		[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[IBV_WC_MW_BIND_ERR] = "memory management operation error",
		[IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error",
		[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error",
		[IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "aborted error",
		[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "TM error",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};

	return xs_name_of(s, sizeof(s) / sizeof(s[0]), (unsigned)status);
}

/* ---- rates ---------------------------------------------------------------- */

static const struct {
	enum ibv_rate rate;
	int mult;
	int mbps;
} xs_rates[] = {
	{ IBV_RATE_2_5_GBPS, 1, 2500 },	    { IBV_RATE_5_GBPS, 2, 5000 },
	{ IBV_RATE_10_GBPS, 4, 10000 },	    { IBV_RATE_20_GBPS, 8, 20000 },
	{ IBV_RATE_30_GBPS, 12, 30000 },    { IBV_RATE_40_GBPS, 16, 40000 },
	{ IBV_RATE_60_GBPS, 24, 60000 },    { IBV_RATE_80_GBPS, 32, 80000 },
	{ IBV_RATE_120_GBPS, 48, 120000 },  { IBV_RATE_14_GBPS, 5, 14062 },
	{ IBV_RATE_56_GBPS, 22, 56250 },    { IBV_RATE_112_GBPS, 45, 112500 },
	{ IBV_RATE_168_GBPS, 67, 168750 },  { IBV_RATE_25_GBPS, 10, 25781 },
	{ IBV_RATE_100_GBPS, 40, 103125 },  { IBV_RATE_200_GBPS, 80, 206250 },
	{ IBV_RATE_300_GBPS, 120, 309375 }, { IBV_RATE_28_GBPS, 11, 28125 },
	{ IBV_RATE_50_GBPS, 20, 53125 },    { IBV_RATE_400_GBPS, 160, 425000 },
	{ IBV_RATE_600_GBPS, 240, 637500 },
};
#define XS_NRATES (sizeof(xs_rates) / sizeof(xs_rates[0]))

XS_EXPORT int ibv_rate_to_mult(enum ibv_rate rate)
{
	for (size_t i = 0; i < XS_NRATES; i++)
		if (xs_rates[i].rate == rate)
			return xs_rates[i].mult;
	return -1;
}

XS_EXPORT enum ibv_rate mult_to_ibv_rate(int mult)
{
	for (size_t i = 0; i < XS_NRATES; i++)
		if (xs_rates[i].mult == mult)
			return xs_rates[i].rate;
	return IBV_RATE_MAX;
}

XS_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate)
{
	for (size_t i = 0; i < XS_NRATES; i++)
		if (xs_rates[i].rate == rate)
			return xs_rates[i].mbps;
	return -1;
}

XS_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (size_t i = 0; i < XS_NRATES; i++)
		if (xs_rates[i].mbps == mbps)
			return xs_rates[i].rate;
	return IBV_RATE_MAX;
}

/* ---- not supported by this device ------------------------------------------ */

XS_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	errno = EOPNOTSUPP; /* address handles are for UD; iWARP is RC only */
	return NULL;
}

XS_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	return EOPNOTSUPP;
}

/* rdma-core's is plain arithmetic on the WC, the same on siw: without a
 * GRH it fills the fields and answers 0.  A GRH (never in an iWARP WC)
 * needs the GID table lookups of RoCE: refused. */
XS_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc,
				  struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->grh.flow_label = be32toh(grh->version_tclass_flow) & 0xfffff;
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (wc->wc_flags & IBV_WC_GRH) {
		ah_attr->is_global = 1;
		errno = EOPNOTSUPP;
		return -1;
	}
	return 0;
}

XS_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
					       struct ibv_grh *grh, uint8_t port_num)
{
	errno = EOPNOTSUPP;
	return NULL;
}

XS_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return EOPNOTSUPP;
}

XS_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return EOPNOTSUPP;
}


