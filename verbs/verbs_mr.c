/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Protection domains and memory regions.  Every MR gets an STag of 32
 * random bits from OpenSSL's CSPRNG (never below 256, never one that is
 * live), found through a process-wide hash table.  An "index + 8-bit key"
 * layout would let a peer that knows one STag reach its neighbours in 256
 * guesses; with the whole STag random a peer that knows nothing hits one of
 * N live MRs with probability N / 2^32 per guess, and every wrong guess
 * costs it the connection (Terminate).  A deregistered STag stops resolving
 * at once.  lkey = rkey = STag.
 *
 * Remote access resolves under the table's read lock only: the engine copies
 * into the application's buffer after the lock is dropped.  Deregistering an
 * MR while a remote operation on it is in flight is the application's error
 * (as with hardware): the copy then lands in memory the application still
 * owns; we never free anything the engine reads. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs/verbs_priv.h"
#include "verbs/xs_priv_abi.h"
#include "verbs/xs_rand.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

static pthread_rwlock_t mr_lock = PTHREAD_RWLOCK_INITIALIZER;
/* open addressing, linear probing; NULL empty, MR_TOMB a removed entry */
static struct xs_mr **mr_tab;
static uint32_t mr_tab_cap, mr_tab_used, mr_live; /* used: live + tombstones */
#define MR_TOMB ((struct xs_mr *)1)
#define XS_MR_MAX (1u << 24)

/* ---- PD ------------------------------------------------------------------- */

XS_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct xs_pd *p = calloc(1, sizeof(*p));

	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->pd.context = context;
	return &p->pd;
}

/* A PD with MRs on it is busy (EBUSY, as the kernel says): freeing it
 * left the MRs pointing at freed memory. */
XS_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	unsigned busy;

	if (!pd)
		return EINVAL;
	pthread_rwlock_rdlock(&mr_lock);
	busy = ((struct xs_pd *)pd)->mrs;
	pthread_rwlock_unlock(&mr_lock);
	if (busy)
		return EBUSY;
	free(pd);
	return 0;
}

/* ---- the STag table ------------------------------------------------------- */

static uint32_t mr_hash(uint32_t stag)
{
	return stag * 2654435761u; /* the STag is random already: spread only */
}

/* Caller holds the read or write lock. */
static struct xs_mr *mr_lookup(uint32_t stag)
{
	if (!mr_tab_cap || stag < 256)
		return NULL;
	for (uint32_t i = mr_hash(stag) & (mr_tab_cap - 1);; i = (i + 1) & (mr_tab_cap - 1)) {
		struct xs_mr *m = mr_tab[i];

		if (!m)
			return NULL;
		if (m != MR_TOMB && m->mr.rkey == stag)
			return m;
	}
}

static void mr_place(struct xs_mr **tab, uint32_t cap, struct xs_mr *m)
{
	uint32_t i = mr_hash(m->mr.rkey) & (cap - 1);

	while (tab[i] && tab[i] != MR_TOMB)
		i = (i + 1) & (cap - 1);
	tab[i] = m;
}

/* Write lock held.  Keep at most half the slots used (tombstones count). */
static int mr_insert(struct xs_mr *m)
{
	if ((mr_tab_used + 1) * 2 > mr_tab_cap) {
		uint32_t ncap = 64;

		while (ncap < (mr_live + 1) * 4)
			ncap *= 2;
		struct xs_mr **t = calloc(ncap, sizeof(*t));
		if (!t)
			return -ENOMEM;
		for (uint32_t i = 0; i < mr_tab_cap; i++)
			if (mr_tab[i] && mr_tab[i] != MR_TOMB)
				mr_place(t, ncap, mr_tab[i]);
		free(mr_tab);
		mr_tab = t;
		mr_tab_cap = ncap;
		mr_tab_used = mr_live;
	}
	uint32_t i = mr_hash(m->mr.rkey) & (mr_tab_cap - 1);
	while (mr_tab[i] && mr_tab[i] != MR_TOMB)
		i = (i + 1) & (mr_tab_cap - 1);
	if (!mr_tab[i])
		mr_tab_used++;
	mr_tab[i] = m;
	mr_live++;
	return 0;
}

/* Write lock held. */
static bool mr_remove(struct xs_mr *m)
{
	if (!mr_tab_cap)
		return false;
	for (uint32_t i = mr_hash(m->mr.rkey) & (mr_tab_cap - 1);; i = (i + 1) & (mr_tab_cap - 1)) {
		if (!mr_tab[i])
			return false;
		if (mr_tab[i] == m) {
			mr_tab[i] = MR_TOMB;
			mr_live--;
			return true;
		}
	}
}

#define XS_ACCESS_ALL                                                                        \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |         \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |             \
	 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING)

/* want: the STag to use (0: a random one) */
static struct ibv_mr *mr_reg(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
			     unsigned int access, uint32_t want)
{
	struct xs_mr *m;
	uint32_t stag = want;

	/* REMOTE_ATOMIC: the target of an RFC 7306 Atomic from a peer that
	 * agreed on it (needs LOCAL_WRITE as REMOTE_WRITE does) */
	if (!pd || !length || length > XS_MAX_MR_SIZE || (access & ~(unsigned)XS_ACCESS_ALL) ||
	    (access & IBV_ACCESS_ZERO_BASED)) {
		errno = EINVAL;
		return NULL;
	}
	/* verbs (the kernel's ib_check_mr_access): remote write and atomics need
	 * local write.  Remote atomic is accepted as iWARP RNICs do (libfabric
	 * asks for it with every FI_REMOTE_WRITE MR); atomic_cap is NONE, so no
	 * atomic ever reaches the MR. */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE)) {
		errno = EINVAL;
		return NULL;
	}
	if (!addr || iova > UINT64_MAX - (length - 1) ||
	    (uintptr_t)addr > UINTPTR_MAX - (length - 1)) {
		errno = EINVAL;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_rwlock_wrlock(&mr_lock);
	if (mr_live >= XS_MR_MAX) {
		pthread_rwlock_unlock(&mr_lock);
		free(m);
		errno = ENOMEM;
		return NULL;
	}
	if (want && (want < 256 || mr_lookup(want))) {
		pthread_rwlock_unlock(&mr_lock);
		free(m);
		errno = EEXIST;
		return NULL;
	}
	while (!want && (stag < 256 || mr_lookup(stag))) {
		if (xs_rand_bytes(&stag, sizeof(stag))) {
			pthread_rwlock_unlock(&mr_lock);
			free(m);
			errno = EAGAIN;
			return NULL;
		}
	}
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = length;
	m->mr.handle = stag;
	m->mr.lkey = m->mr.rkey = stag;
	m->iova = iova;
	m->access = access;
	m->valid = true;
	if (mr_insert(m) < 0) {
		pthread_rwlock_unlock(&mr_lock);
		free(m);
		errno = ENOMEM;
		return NULL;
	}
	((struct xs_pd *)pd)->mrs++;
	pthread_rwlock_unlock(&mr_lock);
	return &m->mr;
}

XS_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					  uint64_t iova, unsigned int access)
{
	return mr_reg(pd, addr, length, iova, access, 0);
}

struct ibv_mr *xs_mr_reg_stag(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
			      unsigned access, uint32_t stag)
{
	if (!stag) {
		errno = EINVAL;
		return NULL;
	}
	return mr_reg(pd, addr, length, iova, access, stag);
}

XS_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

XS_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					 uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned)access);
}

XS_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct xs_mr *m = (struct xs_mr *)mr;

	if (!mr)
		return EINVAL;
	pthread_rwlock_wrlock(&mr_lock);
	if (mr_lookup(mr->lkey) != m || !mr_remove(m)) {
		pthread_rwlock_unlock(&mr_lock);
		return EINVAL;
	}
	((struct xs_pd *)mr->pd)->mrs--;
	pthread_rwlock_unlock(&mr_lock);
	free(m);
	return 0;
}

/* [to, to + len) inside [iova, iova + length), without overflow. */
static bool mr_in_bounds(const struct xs_mr *m, uint64_t to, uint64_t len)
{
	return to >= m->iova && len <= m->mr.length && to - m->iova <= m->mr.length - len;
}

int xs_mr_resolve(struct ibv_pd *pd, uint32_t stag, uint64_t to, uint64_t len,
		  enum xs_access_kind kind, uint8_t **dst, struct xs_err *err)
{
	/* RDMAP codes for a Read source and an Atomic target (untagged
	 * requests); DDP tagged codes for placement */
	bool rd = kind == XS_ACCESS_REMOTE_READ || kind == XS_ACCESS_REMOTE_ATOMIC;
	unsigned need = kind == XS_ACCESS_REMOTE_WRITE	  ? IBV_ACCESS_REMOTE_WRITE
			: kind == XS_ACCESS_REMOTE_READ	  ? IBV_ACCESS_REMOTE_READ
			: kind == XS_ACCESS_REMOTE_ATOMIC ? IBV_ACCESS_REMOTE_ATOMIC
							  : IBV_ACCESS_LOCAL_WRITE;
	struct xs_mr *m;
	int rc = 0;

	pthread_rwlock_rdlock(&mr_lock);
	m = mr_lookup(stag);
	if (!m || !m->valid) {
		if (rd)
			xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_PROT, RDMAP_ECODE_INVALID_STAG);
		else
			xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_INVALID_STAG);
		rc = -EPROTO;
	} else if (m->mr.pd != pd) {
		if (rd)
			xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_PROT,
				   RDMAP_ECODE_STAG_NOT_ASSOC);
		else
			xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_STAG_NOT_ASSOC);
		rc = -EPROTO;
	} else if (!(m->access & need)) {
		xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_PROT, RDMAP_ECODE_ACCESS);
		rc = -EPROTO;
	} else if (rd && len && to > UINT64_MAX - (len - 1)) {
		/* a Read source whose [to, to + len) runs past 2^64: RDMAP's
		 * TO wrap (tagged placement never gets here: DDP checks it) */
		xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_PROT, RDMAP_ECODE_TO_WRAP);
		rc = -EPROTO;
	} else if (!mr_in_bounds(m, to, len)) {
		if (rd)
			xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_PROT, RDMAP_ECODE_BASE_BOUNDS);
		else
			xs_err_set(err, XS_LAYER_DDP, DDP_ETYPE_TAGGED, DDP_ECODE_T_BASE_BOUNDS);
		rc = -EPROTO;
	} else {
		*dst = (uint8_t *)m->mr.addr + (to - m->iova);
	}
	pthread_rwlock_unlock(&mr_lock);
	return rc;
}

/* Send with Invalidate may invalidate any MR of the QP's PD.  An unknown
 * STag "cannot be invalidated" as a Remote Operation Error (RDMAP/2/0x09),
 * an MR of another PD as a Remote Protection Error (RDMAP/1/0x09): RFC 5040
 * 4.8 lists the code under both types, and siw picks them the same way.
 * Invalidating an already invalid MR of the PD succeeds.  The MR stays
 * registered: local and remote use fail until it is deregistered. */
int xs_mr_invalidate(struct ibv_pd *pd, uint32_t stag, struct xs_err *err)
{
	struct xs_mr *m;
	int rc = 0;

	pthread_rwlock_wrlock(&mr_lock);
	m = mr_lookup(stag);
	if (!m) {
		xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_OP, RDMAP_ECODE_STAG_CANNOT_INV);
		rc = -EINVAL;
	} else if (m->mr.pd != pd) {
		xs_err_set(err, XS_LAYER_RDMAP, RDMAP_ETYPE_REMOTE_PROT, RDMAP_ECODE_STAG_CANNOT_INV);
		rc = -EINVAL;
	} else {
		m->valid = false;
	}
	pthread_rwlock_unlock(&mr_lock);
	return rc;
}

__thread bool xs_mr_caller_ok;

uint8_t *xs_mr_local(struct ibv_pd *pd, uint32_t lkey, uint64_t addr, uint64_t len,
		     bool need_write)
{
	struct xs_mr *m;
	uint8_t *p = NULL;

	if (lkey == XSOCK_LKEY_CALLER)
		return xs_mr_caller_ok && !need_write ? (uint8_t *)(uintptr_t)addr : NULL;
	pthread_rwlock_rdlock(&mr_lock);
	m = mr_lookup(lkey);
	if (m && m->valid && m->mr.pd == pd && (!need_write || (m->access & IBV_ACCESS_LOCAL_WRITE)) &&
	    mr_in_bounds(m, addr, len))
		p = (uint8_t *)m->mr.addr + (addr - m->iova);
	pthread_rwlock_unlock(&mr_lock);
	return p;
}
