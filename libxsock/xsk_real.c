/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The real entry points: libc's (dlsym RTLD_NEXT, once) and the stack's
 * (dlsym in the stack's own handle, so that a real librdmacm that the
 * program links never answers our calls).  The stack is libiwarp, or
 * rdma-core's librdmacm.so.1 over a kernel device (XSOCK_IWARP_LIB): the
 * xsock_priv_* calls are libiwarp's only and optional. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libxsock/xsk_config.h"
#include "libxsock/xsk_intercept.h"
#include "libxsock/xsk_priv.h"

struct xsk_libc xsk_real;

#define RESOLVE(name)                                                         \
	do {                                                                  \
		*(void **)&xsk_real.name = dlsym(RTLD_NEXT, #name);           \
		if (!xsk_real.name) {                                         \
			fprintf(stderr, "libxsock: libc has no %s\n", #name); \
			abort();                                              \
		}                                                             \
	} while (0)

static void real_init_once(void)
{
	RESOLVE(socket);
	RESOLVE(bind);
	RESOLVE(listen);
	RESOLVE(connect);
	RESOLVE(accept);
	RESOLVE(accept4);
	RESOLVE(close);
	RESOLVE(read);
	RESOLVE(write);
	RESOLVE(readv);
	RESOLVE(writev);
	RESOLVE(send);
	RESOLVE(recv);
	RESOLVE(sendto);
	RESOLVE(recvfrom);
	RESOLVE(sendmsg);
	RESOLVE(recvmsg);
	RESOLVE(shutdown);
	RESOLVE(setsockopt);
	RESOLVE(getsockopt);
	RESOLVE(getpeername);
	RESOLVE(getsockname);
	RESOLVE(poll);
	RESOLVE(ppoll);
	RESOLVE(select);
	RESOLVE(pselect);
	RESOLVE(epoll_ctl);
	RESOLVE(epoll_wait);
	RESOLVE(epoll_pwait);
	RESOLVE(fcntl);
	RESOLVE(ioctl);
	RESOLVE(dup);
	RESOLVE(dup2);
	RESOLVE(dup3);
	RESOLVE(fork);
}

static pthread_once_t real_once = PTHREAD_ONCE_INIT;

void xsk_real_init(void)
{
	pthread_once(&real_once, real_init_once);
}

__attribute__((constructor)) static void xsk_real_ctor(void)
{
	xsk_real_init();
}

/* ---- the stack --------------------------------------------------------------- */

static struct xsk_stack stack;
static int stack_err;
static pthread_once_t stack_once = PTHREAD_ONCE_INIT;
/* xsk_stack_on_load: the layer above's hook, and whether it is due */
static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static void (*on_load)(void);
static bool loaded;

#define SYM(field, name)                                         \
	do {                                                     \
		*(void **)&stack.field = dlsym(h, name);         \
		if (!stack.field) {                              \
			fprintf(stderr, "libxsock: %s has no %s\n", \
				lib, name);                      \
			stack_err = ENOSYS;                      \
			return;                                  \
		}                                                \
	} while (0)

static void stack_init_once(void)
{
	const char *lib = xsk_setting_str(XS_SET_IWARP_LIB);
	void *h;
	Dl_info info;
	void (*fn)(void);

	h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		fprintf(stderr, "libxsock: cannot load %s: %s\n", lib, dlerror());
		stack_err = ENOSYS;
		return;
	}
	/* one settings table per process, even with XSOCK_STACK_PRIV=0 */
	__typeof__(xsock_priv_settings) *settings;
	*(void **)&settings = dlsym(h, "xsock_priv_settings");
	xsk_settings_share(settings);
	SYM(create_event_channel, "rdma_create_event_channel");
	SYM(destroy_event_channel, "rdma_destroy_event_channel");
	SYM(create_id, "rdma_create_id");
	SYM(destroy_id, "rdma_destroy_id");
	SYM(bind_addr, "rdma_bind_addr");
	SYM(resolve_addr, "rdma_resolve_addr");
	SYM(resolve_route, "rdma_resolve_route");
	SYM(create_qp, "rdma_create_qp");
	SYM(destroy_qp, "rdma_destroy_qp");
	SYM(connect, "rdma_connect");
	SYM(listen, "rdma_listen");
	SYM(accept, "rdma_accept");
	SYM(reject, "rdma_reject");
	SYM(disconnect, "rdma_disconnect");
	SYM(get_cm_event, "rdma_get_cm_event");
	SYM(ack_cm_event, "rdma_ack_cm_event");
	SYM(migrate_id, "rdma_migrate_id");
	SYM(alloc_pd, "ibv_alloc_pd");
	SYM(dealloc_pd, "ibv_dealloc_pd");
	SYM(reg_mr, "ibv_reg_mr");
	SYM(dereg_mr, "ibv_dereg_mr");
	SYM(create_comp_channel, "ibv_create_comp_channel");
	SYM(destroy_comp_channel, "ibv_destroy_comp_channel");
	SYM(create_cq, "ibv_create_cq");
	SYM(destroy_cq, "ibv_destroy_cq");
	SYM(get_cq_event, "ibv_get_cq_event");
	SYM(ack_cq_events, "ibv_ack_cq_events");
	SYM(query_qp, "ibv_query_qp");
	SYM(set_option, "rdma_set_option");
	/* the standard calls only, as over rdma-core (tests/test-xsock-nopriv.sh
	 * runs libiwarp so) */
	if (!xsk_setting_num(XS_SET_STACK_PRIV)) {
		stack.kernel = true;
		goto done;
	}
	/* libiwarp's private node (verbs/xs_priv_abi.h): each call optional */
#define PRIV(name) (*(void **)&stack.name = dlsym(h, "xsock_priv_" #name))
	PRIV(claim);
	PRIV(fd_keep);
	PRIV(listen_socket);
	PRIV(cm_no_redial);
	PRIV(fd_drop);
	PRIV(fd_next_kept);
	PRIV(exit_wait);
	PRIV(sandbox);
	PRIV(fork_mode);
	PRIV(release);
	PRIV(tcp);
	PRIV(listen_mixed);
	PRIV(rx_wait);
	PRIV(cm_pending);
	PRIV(comp_pending);
	PRIV(comp_take);
	PRIV(cq_arm);
	PRIV(poll_cq);
	PRIV(post_send_caller);
	PRIV(export);
	PRIV(export_undo);
	PRIV(adopt);
	PRIV(adopt_start);
	PRIV(reg_mr_stag);
	PRIV(plain);
	PRIV(local_drop);
	/* our exit close runs before the stack's exit handling, whichever
	 * the loader runs first (xsock_priv_set_exit_close) */
	__typeof__(xsock_priv_set_exit_close) *set_exit_close;
	*(void **)&set_exit_close = dlsym(h, "xsock_priv_set_exit_close");
	if (set_exit_close)
		set_exit_close(xsk_exit_close);
	__typeof__(xsock_priv_fork_init) *fork_init;
	*(void **)&fork_init = dlsym(h, "xsock_priv_fork_init");
	if (fork_init)
		fork_init(); /* the stack's fork handlers first */
	else
		stack.kernel = true; /* rdma-core: shared kernel objects at fork */
done:
	if (stack.kernel && xsk_debug())
		fprintf(stderr, "libxsock: %s: standard verbs and rdma_cm calls only (xsock(7) KERNEL STACK)\n",
			lib);
	if (dladdr(*(void **)&stack.create_id, &info) && info.dli_fbase)
		stack.base = info.dli_fbase;
	xsk_mutex_lock(&load_mu);
	loaded = true;
	fn = on_load;
	xsk_mutex_unlock(&load_mu);
	if (fn)
		fn();
}

void xsk_stack_on_load(void (*fn)(void))
{
	bool now;

	xsk_mutex_lock(&load_mu);
	now = loaded;
	if (!now)
		on_load = fn;
	xsk_mutex_unlock(&load_mu);
	if (now)
		fn();
}

const struct xsk_stack *xsk_stack(void)
{
	pthread_once(&stack_once, stack_init_once);
	if (stack_err) {
		errno = stack_err;
		return NULL;
	}
	return &stack;
}

bool xsk_from_stack(const void *ret)
{
	Dl_info info;

	if (!xsk_stack() || !stack.base)
		return false;
	return dladdr(ret, &info) && info.dli_fbase == stack.base;
}

int xsk_fd_keep(int fd)
{
	const struct xsk_stack *st = xsk_stack();

	return st && st->fd_keep ? st->fd_keep(fd) : fd;
}

int xsk_fd_close(int fd)
{
	const struct xsk_stack *st = xsk_stack();

	if (st && st->fd_drop)
		st->fd_drop(fd);
	return xsk_real.close(fd);
}

void xsk_local_drop(const char *what, const char *why)
{
	const struct xsk_stack *st;

	if (xsk_debug())
		fprintf(stderr, "libxsock: %s dropped: %s\n", what, why);
	xsk_real_init(); /* (a constructor's drop may come first) */
	st = xsk_stack();
	if (st && st->local_drop)
		st->local_drop(XSOCK_LOCAL_BAD);
}
