/* Protection domains and memory regions.  Every MR gets an STag =
 * (index << 8) | key: index is its slot in a process-wide table (slot 0 is
 * never used, so STag 0..255 never resolve), key 8 bits from OpenSSL's
 * CSPRNG, never equal to the key the slot had before so a stale STag stops
 * resolving as soon as the MR is deregistered.  lkey = rkey = STag.
 *
 * Remote access resolves under the table's read lock only: the engine copies
 * into the application's buffer after the lock is dropped.  Deregistering an
 * MR while a remote operation on it is in flight is the application's error
 * (as with hardware): the copy then lands in memory the application still
 * owns; we never free anything the engine reads. */
#include "config.h"

#include <errno.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#include "verbs/verbs_priv.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define XS_MR_INDEX_MAX (1u << 24)
#define XS_MR_CHUNK 1024

static pthread_rwlock_t mr_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct xs_mr **mr_slot; /* [mr_cap] */
static uint8_t *mr_lastkey; /* [mr_cap]: key the slot had last */
static uint32_t *mr_free; /* stack of free indices */
static uint32_t mr_cap, mr_nfree;

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

XS_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	return 0;
}

/* ---- the STag table ------------------------------------------------------- */

static int mr_grow(void)
{
	uint32_t ncap = mr_cap + XS_MR_CHUNK;
	struct xs_mr **s;
	uint8_t *k;
	uint32_t *f;

	if (ncap > XS_MR_INDEX_MAX)
		return -ENOMEM;
	s = realloc(mr_slot, ncap * sizeof(*s));
	if (!s)
		return -ENOMEM;
	mr_slot = s;
	k = realloc(mr_lastkey, ncap);
	if (!k)
		return -ENOMEM;
	mr_lastkey = k;
	f = realloc(mr_free, ncap * sizeof(*f));
	if (!f)
		return -ENOMEM;
	mr_free = f;
	memset(&mr_slot[mr_cap], 0, XS_MR_CHUNK * sizeof(*s));
	memset(&mr_lastkey[mr_cap], 0, XS_MR_CHUNK);
	/* push high indices first so low ones are handed out first */
	for (uint32_t i = ncap; i-- > mr_cap;)
		if (i != 0)
			mr_free[mr_nfree++] = i;
	mr_cap = ncap;
	return 0;
}

/* Caller holds the read or write lock. */
static struct xs_mr *mr_lookup(uint32_t stag)
{
	uint32_t idx = stag >> 8;
	struct xs_mr *m;

	if (idx == 0 || idx >= mr_cap)
		return NULL;
	m = mr_slot[idx];
	if (!m || m->mr.rkey != stag)
		return NULL;
	return m;
}

#define XS_ACCESS_ALL                                                                        \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |         \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |             \
	 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING)

XS_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					  uint64_t iova, unsigned int access)
{
	struct xs_mr *m;
	uint8_t key;
	uint32_t idx;

	if (!pd || !length || length > XS_MAX_MR_SIZE || (access & ~(unsigned)XS_ACCESS_ALL) ||
	    (access & IBV_ACCESS_REMOTE_ATOMIC) || (access & IBV_ACCESS_ZERO_BASED)) {
		errno = EINVAL;
		return NULL;
	}
	/* verbs: remote write (and atomics) need local write */
	if ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
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
	if (RAND_bytes(&key, 1) != 1) {
		free(m);
		errno = EAGAIN;
		return NULL;
	}
	pthread_rwlock_wrlock(&mr_lock);
	if (!mr_nfree && mr_grow() < 0) {
		pthread_rwlock_unlock(&mr_lock);
		free(m);
		errno = ENOMEM;
		return NULL;
	}
	idx = mr_free[--mr_nfree];
	if (key == mr_lastkey[idx])
		key++; /* a reused slot never brings back an old STag */
	mr_lastkey[idx] = key;
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = length;
	m->mr.handle = idx;
	m->mr.lkey = m->mr.rkey = idx << 8 | key;
	m->iova = iova;
	m->access = access;
	m->valid = true;
	mr_slot[idx] = m;
	pthread_rwlock_unlock(&mr_lock);
	return &m->mr;
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
	uint32_t idx;

	if (!mr)
		return EINVAL;
	idx = mr->lkey >> 8;
	pthread_rwlock_wrlock(&mr_lock);
	if (idx == 0 || idx >= mr_cap || mr_slot[idx] != m) {
		pthread_rwlock_unlock(&mr_lock);
		return EINVAL;
	}
	mr_slot[idx] = NULL;
	mr_free[mr_nfree++] = idx;
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
	bool rd = kind == XS_ACCESS_REMOTE_READ; /* RDMAP codes for a Read source */
	unsigned need = kind == XS_ACCESS_REMOTE_WRITE	? IBV_ACCESS_REMOTE_WRITE
			: kind == XS_ACCESS_REMOTE_READ ? IBV_ACCESS_REMOTE_READ
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

uint8_t *xs_mr_local(struct ibv_pd *pd, uint32_t lkey, uint64_t addr, uint64_t len,
		     bool need_write)
{
	struct xs_mr *m;
	uint8_t *p = NULL;

	pthread_rwlock_rdlock(&mr_lock);
	m = mr_lookup(lkey);
	if (m && m->valid && m->mr.pd == pd && (!need_write || (m->access & IBV_ACCESS_LOCAL_WRITE)) &&
	    mr_in_bounds(m, addr, len))
		p = (uint8_t *)m->mr.addr + (addr - m->iova);
	pthread_rwlock_unlock(&mr_lock);
	return p;
}
