/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* XSOCK_TRANSPORT=roce through the built library: the CM's device is
 * xsock_roce0 (rdma_get_devices), and the calls that give an id its device
 * (rdma_bind_addr, rdma_resolve_addr, rdma_listen of an unbound id) refuse
 * it with EPROTONOSUPPORT, as rdma_cm over RoCE is not there yet; the verbs
 * device list is unchanged by the setting. */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "tests/xs_test.h"

int main(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct ibv_device **l;
	struct ibv_context **devs;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	int n = -1;

	xs_test_seed(1);
	setenv("XSOCK_TRANSPORT", "roce", 1); /* before the library's first read */
	devs = rdma_get_devices(&n);
	REQUIRE(devs);
	CHECK_EQ_U(n, 1);
	REQUIRE(devs[0]);
	CHECK(devs[1] == NULL);
	CHECK(strcmp(ibv_get_device_name(devs[0]->device), "xsock_roce0") == 0);
	CHECK_EQ_U(devs[0]->device->transport_type, IBV_TRANSPORT_IB);
	rdma_free_devices(devs);
	l = ibv_get_device_list(&n);
	REQUIRE(l);
	CHECK_EQ_U(n, 2);
	CHECK(strcmp(ibv_get_device_name(l[0]), "xsock0") == 0);
	ibv_free_device_list(l);

	ch = rdma_create_event_channel();
	REQUIRE(ch);
	REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	errno = 0;
	CHECK(rdma_bind_addr(id, (struct sockaddr *)&sin) == -1 && errno == EPROTONOSUPPORT);
	errno = 0;
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 1000) == -1 &&
	      errno == EPROTONOSUPPORT);
	errno = 0;
	CHECK(rdma_listen(id, 1) == -1 && errno == EPROTONOSUPPORT);
	CHECK_EQ_U(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
	return xs_test_result();
}
