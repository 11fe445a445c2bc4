/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The RoCE personality of the device: xsock_roce0, its port 1 and RoCE v2
 * GID table (xs_roce_dev.h), read from the host's interfaces.  The objects
 * (PD, MR, CQ, QP, SRQ) are xsock0's; verbs_device.c asks here for what
 * differs. */
#include "config.h"

#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "verbs/verbs_priv.h"
#include "verbs/xs_roce_dev.h"

struct ibv_device xs_roce_device = {
	.node_type = IBV_NODE_CA,
	.transport_type = IBV_TRANSPORT_IB,
	.name = XS_ROCE_DEVICE_NAME,
	.dev_name = "uverbs_xsock_roce0",
	/* not in sysfs, as xsock0's */
	.dev_path = "/sys/class/infiniband_verbs/uverbs_xsock_roce0",
	.ibdev_path = "/sys/class/infiniband/xsock_roce0",
};

bool xs_ctx_is_roce(const struct ibv_context *ctx)
{
	return ctx && ctx->device == &xs_roce_device;
}

int xs_roce_mtu_from_netdev(unsigned netdev_mtu)
{
	/* RXE_MAX_HDR_LENGTH: the Ethernet, IP, UDP and IB headers */
	unsigned m = netdev_mtu > 80 ? netdev_mtu - 80 : 0;

	if (m >= 4096)
		return IBV_MTU_4096;
	if (m >= 2048)
		return IBV_MTU_2048;
	if (m >= 1024)
		return IBV_MTU_1024;
	if (m >= 512)
		return IBV_MTU_512;
	return IBV_MTU_256; /* rxe_set_mtu: a netdev too small still gets 256 */
}

void xs_roce_gid_to_addr(const union ibv_gid *gid, struct sockaddr_storage *ss)
{
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };

	memset(ss, 0, sizeof(*ss));
	if (memcmp(gid->raw, v4mapped, sizeof(v4mapped)) == 0) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, gid->raw + 12, 4);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, gid->raw, 16);
	}
}

/* ---- the GID table: a snapshot of the host's addresses ---------------------- */

#define XS_ROCE_REFRESH_NS 1000000000ull /* a tap made after start shows within 1 s */
#define XS_ROCE_MTU_DEFAULT 1500u /* no interface MTU could be read */

struct xs_roce_gid {
	union ibv_gid gid;
	unsigned ifindex;
};

/* Leaf lock: held only to copy in or out (the scan runs outside it). */
static pthread_mutex_t xs_roce_mu = PTHREAD_MUTEX_INITIALIZER;
static struct xs_roce_gid xs_roce_tab[XS_ROCE_GID_MAX];
static unsigned xs_roce_n, xs_roce_mtu = XS_ROCE_MTU_DEFAULT;
static uint64_t xs_roce_at; /* CLOCK_MONOTONIC ns of the snapshot, 0: none yet */

static uint64_t roce_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 1;
}

/* getifaddrs names an IPv4 address by its label: "eth0" or "eth0:1". */
static bool roce_if_match(const char *label, const char *ifname)
{
	size_t n = strlen(ifname);

	return strncmp(label, ifname, n) == 0 && (label[n] == '\0' || label[n] == ':');
}

/* The interface's MTU, or 0 when it cannot be read. */
static unsigned roce_if_mtu(int fd, const char *ifname)
{
	struct ifreq ifr;

	if (fd < 0 || strlen(ifname) >= sizeof(ifr.ifr_name))
		return 0;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, ifname);
	if (ioctl(fd, SIOCGIFMTU, &ifr) < 0 || ifr.ifr_mtu <= 0)
		return 0;
	return (unsigned)ifr.ifr_mtu;
}

/* One interface's addresses of family fam that are up, appended to tab. */
static bool roce_scan_if(const struct ifaddrs *all, const struct if_nameindex *ni, int fam,
			 struct xs_roce_gid *tab, unsigned *n, bool *lo)
{
	bool any = false;

	for (const struct ifaddrs *i = all; i; i = i->ifa_next) {
		const struct sockaddr_in *sin = (const void *)i->ifa_addr;
		const struct sockaddr_in6 *sin6 = (const void *)i->ifa_addr;
		struct xs_roce_gid *g = &tab[*n];

		if (!i->ifa_addr || i->ifa_addr->sa_family != fam || !(i->ifa_flags & IFF_UP) ||
		    !roce_if_match(i->ifa_name, ni->if_name))
			continue;
		any = true;
		*lo = *lo || (i->ifa_flags & IFF_LOOPBACK);
		if (*n == XS_ROCE_GID_MAX)
			continue; /* the table is full: later addresses have no slot */
		memset(g, 0, sizeof(*g));
		if (fam == AF_INET) {
			g->gid.raw[10] = 0xff;
			g->gid.raw[11] = 0xff;
			memcpy(g->gid.raw + 12, &sin->sin_addr, 4);
		} else {
			memcpy(g->gid.raw, &sin6->sin6_addr, 16);
		}
		g->ifindex = ni->if_index;
		(*n)++;
	}
	return any;
}

/* The host's addresses in table order, and the netdev MTU of the port:
 * 0, or -errno (nothing changed then). */
static int roce_scan(struct xs_roce_gid *tab, unsigned *n, unsigned *mtu)
{
	struct ifaddrs *all;
	struct if_nameindex *ni;
	unsigned min_mtu = 0, lo_mtu = 0;
	int fd;

	if (getifaddrs(&all) < 0)
		return -errno;
	ni = if_nameindex();
	if (!ni) {
		int e = errno;

		freeifaddrs(all);
		return -e;
	}
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0); /* for SIOCGIFMTU only */
	*n = 0;
	for (const struct if_nameindex *k = ni; k->if_index; k++) {
		bool lo = false, v4, v6;
		unsigned m;

		v4 = roce_scan_if(all, k, AF_INET, tab, n, &lo);
		v6 = roce_scan_if(all, k, AF_INET6, tab, n, &lo);
		if (!v4 && !v6)
			continue;
		m = roce_if_mtu(fd, k->if_name);
		/* One device stands for every interface, and a QP's path is
		 * not known when the port is queried: the smallest MTU of the
		 * interfaces that carry addresses is one that fits any of
		 * them (rxe has one netdev and takes its MTU).  lo (65536)
		 * counts only on a host that has nothing else. */
		if (!m)
			continue;
		if (lo)
			lo_mtu = lo_mtu && lo_mtu < m ? lo_mtu : m;
		else
			min_mtu = min_mtu && min_mtu < m ? min_mtu : m;
	}
	*mtu = min_mtu ? min_mtu : lo_mtu ? lo_mtu : XS_ROCE_MTU_DEFAULT;
	if (fd >= 0)
		close(fd);
	if_freenameindex(ni);
	freeifaddrs(all);
	return 0;
}

/* Make the snapshot current (at most XS_ROCE_REFRESH_NS old).  A failed
 * scan keeps the last one (or the empty table). */
void xs_roce_refresh(void)
{
	uint64_t now = roce_now(), at;
	struct xs_roce_gid *tab;
	unsigned n = 0, mtu = XS_ROCE_MTU_DEFAULT;

	pthread_mutex_lock(&xs_roce_mu);
	at = xs_roce_at;
	pthread_mutex_unlock(&xs_roce_mu);
	if (at && now - at < XS_ROCE_REFRESH_NS)
		return;
	tab = malloc(sizeof(xs_roce_tab));
	if (!tab)
		return;
	if (roce_scan(tab, &n, &mtu) == 0) {
		pthread_mutex_lock(&xs_roce_mu);
		memcpy(xs_roce_tab, tab, n * sizeof(*tab));
		xs_roce_n = n;
		xs_roce_mtu = mtu;
		xs_roce_at = now;
		pthread_mutex_unlock(&xs_roce_mu);
	}
	free(tab);
}

void xs_roce_fill_port_attr(struct ibv_port_attr *a)
{
	unsigned n, mtu;

	xs_roce_refresh();
	pthread_mutex_lock(&xs_roce_mu);
	n = xs_roce_n;
	mtu = xs_roce_mtu;
	pthread_mutex_unlock(&xs_roce_mu);
	/* rxe's port (rxe_param.h, rxe_verbs.c:rxe_query_port); width and
	 * speed are xsock0's: no link has a speed to report */
	memset(a, 0, sizeof(*a));
	a->state = IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = (enum ibv_mtu)xs_roce_mtu_from_netdev(mtu);
	a->gid_tbl_len = (int)n;
	a->port_cap_flags = IBV_PORT_CM_SUP;
	a->max_msg_sz = XS_ROCE_MAX_MSG;
	a->pkey_tbl_len = 1;
	a->max_vl_num = 1;
	a->lid = 0;
	a->active_width = 2; /* 4X */
	a->active_speed = 16;
	a->phys_state = 5; /* LinkUp */
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
}

static void roce_entry(const struct xs_roce_gid *g, uint32_t idx, struct ibv_gid_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->gid = g->gid;
	e->gid_index = idx;
	e->port_num = XS_PORT_NUM;
	e->gid_type = IBV_GID_TYPE_ROCE_V2; /* no RoCE v1 (raw Ethertype) here */
	e->ndev_ifindex = g->ifindex;
}

int xs_roce_gid_entry(uint32_t idx, struct ibv_gid_entry *e)
{
	struct xs_roce_gid g;
	bool have;

	if (idx >= XS_ROCE_GID_MAX)
		return EINVAL;
	xs_roce_refresh();
	pthread_mutex_lock(&xs_roce_mu);
	have = idx < xs_roce_n;
	if (have)
		g = xs_roce_tab[idx];
	pthread_mutex_unlock(&xs_roce_mu);
	if (!have)
		return ENODATA; /* the kernel's answer for an empty slot */
	roce_entry(&g, idx, e);
	return 0;
}

ssize_t xs_roce_gid_table(struct ibv_gid_entry *entries, size_t max_entries, size_t entry_size)
{
	unsigned n;

	xs_roce_refresh();
	pthread_mutex_lock(&xs_roce_mu);
	n = xs_roce_n;
	if (n > max_entries || (n && !entries)) {
		pthread_mutex_unlock(&xs_roce_mu);
		return -EINVAL; /* rdma-core: more entries than room */
	}
	for (unsigned i = 0; i < n; i++) {
		void *e = (uint8_t *)entries + i * entry_size;

		memset(e, 0, entry_size);
		roce_entry(&xs_roce_tab[i], i, e);
	}
	pthread_mutex_unlock(&xs_roce_mu);
	return (ssize_t)n;
}

int xs_roce_gid_addr(unsigned idx, struct sockaddr_storage *ss)
{
	struct ibv_gid_entry e;

	if (!ss || xs_roce_gid_entry(idx, &e) != 0)
		return -EINVAL;
	xs_roce_gid_to_addr(&e.gid, ss);
	if (ss->ss_family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		/* a link-local address is usable only with its interface */
		if (IN6_IS_ADDR_LINKLOCAL(&sin6->sin6_addr))
			sin6->sin6_scope_id = e.ndev_ifindex;
	}
	return 0;
}
