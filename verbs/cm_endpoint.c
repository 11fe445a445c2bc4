/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* librdmacm's address and endpoint calls: rdma_getaddrinfo and
 * rdma_freeaddrinfo (over getaddrinfo; RC over TCP only), rdma_create_ep
 * and rdma_destroy_ep (an id on its own channel, bound or resolved, with a
 * QP when given attributes), rdma_get_request.  Application threads; built
 * on the public rdma_* calls and the channel of an id in sync mode. */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_verbs.h> /* rdma_destroy_srq */

#include "verbs/cm_priv.h"

/* ---- rdma_getaddrinfo ----------------------------------------------------- */

XS_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	struct rdma_addrinfo *n;

	for (; res; res = n) {
		n = res->ai_next;
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
	}
}

static struct sockaddr *sa_dup(const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr *d = malloc(len);

	if (d)
		memcpy(d, sa, len);
	return d;
}

/* Copy of a hint's address, as librdmacm's ucma_copy_addr. */
static int rai_copy_addr(struct sockaddr **dst, socklen_t *dst_len, const struct sockaddr *src,
			 socklen_t len)
{
	*dst = sa_dup(src, len);
	if (!*dst)
		return cm_err(ENOMEM);
	*dst_len = len;
	return 0;
}

/* Like librdmacm: with node or service, one rdma_addrinfo from the first
 * address getaddrinfo gives; with neither, the hints' addresses as they are
 * (libfabric's verbs provider passes its src/dest addresses that way).  A
 * source address in the hints is kept when the lookup gave none.  Returns 0,
 * or getaddrinfo's EAI_* code (gai_strerror-able), or -1 with errno for our
 * own failures. */
XS_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
			       const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct addrinfo h, *ai = NULL;
	struct rdma_addrinfo *r;
	int rc = 0;

	if (!res || (!node && !service && !hints))
		return cm_err(EINVAL);
	if (hints && hints->ai_port_space && hints->ai_port_space != RDMA_PS_TCP)
		return cm_err(EOPNOTSUPP);
	if (hints && hints->ai_qp_type && hints->ai_qp_type != IBV_QPT_RC)
		return cm_err(EOPNOTSUPP);
	memset(&h, 0, sizeof(h));
	h.ai_socktype = SOCK_STREAM;
	h.ai_protocol = IPPROTO_TCP;
	if (hints) {
		h.ai_family = hints->ai_family;
		if (hints->ai_flags & RAI_PASSIVE)
			h.ai_flags |= AI_PASSIVE;
		if (hints->ai_flags & RAI_NUMERICHOST)
			h.ai_flags |= AI_NUMERICHOST;
	}
	if (h.ai_family != AF_UNSPEC && h.ai_family != AF_INET && h.ai_family != AF_INET6)
		return cm_err(EAFNOSUPPORT);
	r = calloc(1, sizeof(*r));
	if (!r)
		return cm_err(ENOMEM);
	r->ai_qp_type = IBV_QPT_RC;
	r->ai_port_space = RDMA_PS_TCP;
	if (node || service) {
		rc = getaddrinfo(node, service, &h, &ai);
		if (rc) {
			free(r);
			return rc;
		}
		r->ai_family = ai->ai_family;
		if (h.ai_flags & AI_PASSIVE) {
			r->ai_flags = RAI_PASSIVE;
			rc = rai_copy_addr(&r->ai_src_addr, &r->ai_src_len, ai->ai_addr, ai->ai_addrlen);
			if (!rc && ai->ai_canonname &&
			    !(r->ai_src_canonname = strdup(ai->ai_canonname)))
				rc = cm_err(ENOMEM);
		} else {
			rc = rai_copy_addr(&r->ai_dst_addr, &r->ai_dst_len, ai->ai_addr, ai->ai_addrlen);
			if (!rc && ai->ai_canonname &&
			    !(r->ai_dst_canonname = strdup(ai->ai_canonname)))
				rc = cm_err(ENOMEM);
		}
		freeaddrinfo(ai);
	} else {
		r->ai_flags = hints->ai_flags;
		r->ai_family = hints->ai_family;
		if (hints->ai_dst_addr && hints->ai_dst_len)
			rc = rai_copy_addr(&r->ai_dst_addr, &r->ai_dst_len, hints->ai_dst_addr,
					   hints->ai_dst_len);
	}
	if (!rc && !r->ai_src_len && hints && hints->ai_src_addr && hints->ai_src_len)
		rc = rai_copy_addr(&r->ai_src_addr, &r->ai_src_len, hints->ai_src_addr,
				   hints->ai_src_len);
	if (rc) {
		rdma_freeaddrinfo(r);
		return rc;
	}
	*res = r;
	return 0;
}

/* ---- synchronous endpoint helpers ----------------------------------------- */

/* As librdmacm, the QP type is the address's, whatever the caller's
 * attributes said (rdma_client leaves it 0); an address not from
 * rdma_getaddrinfo may have none: RC, the only type here. */
static enum ibv_qp_type ep_qp_type(const struct rdma_addrinfo *res)
{
	return res->ai_qp_type ? (enum ibv_qp_type)res->ai_qp_type : IBV_QPT_RC;
}

XS_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cid;
	struct cm_id *c;
	int rc;

	if (!id || !res)
		return cm_err(EINVAL);
	rc = rdma_create_id(NULL, &cid, NULL, res->ai_port_space ? (enum rdma_port_space)res->ai_port_space :
								   RDMA_PS_TCP);
	if (rc)
		return rc;
	c = cm_of(cid);
	if (res->ai_flags & RAI_PASSIVE) {
		rc = rdma_bind_addr(cid, res->ai_src_addr);
		if (rc)
			goto fail;
		if (qp_init_attr) {
			/* kept for the ids rdma_get_request hands out */
			c->ep_qp = true;
			c->ep_pd = pd;
			c->ep_attr = *qp_init_attr;
			c->ep_attr.qp_type = ep_qp_type(res);
		}
	} else {
		rc = rdma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr, 2000);
		if (!rc)
			rc = rdma_resolve_route(cid, 2000);
		if (rc)
			goto fail;
		if (qp_init_attr) {
			qp_init_attr->qp_type = ep_qp_type(res);
			rc = rdma_create_qp(cid, pd, qp_init_attr);
			if (rc)
				goto fail;
		}
	}
	*id = cid;
	return 0;
fail:
	{
		int e = errno;

		rdma_destroy_id(cid);
		errno = e;
		return -1;
	}
}

XS_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id);
}

/* Sync listeners only (as in librdmacm): the next connect request as a new
 * id, with a QP if rdma_create_ep was given QP attributes. */
XS_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct cm_id *l = cm_of(listen);
	struct cm_event *e;
	struct rdma_cm_id *child;

	if (!listen || !id)
		return cm_err(EINVAL);
	if (!l->sync)
		return cm_err(EINVAL);
	for (;;) {
		e = cm_chan_pop(l->chan, false);
		if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		cm_ev_free(e);
	}
	child = e->ev.id;
	if (l->ep_qp) {
		struct ibv_qp_init_attr a = l->ep_attr;

		if (rdma_create_qp(child, l->ep_pd, &a)) {
			int err = errno;

			free(e);
			rdma_reject(child, NULL, 0);
			rdma_destroy_id(child);
			errno = err;
			return -1;
		}
	}
	/* the child's event: its private data stays readable there */
	child->event = &e->ev;
	*id = child;
	return 0;
}
