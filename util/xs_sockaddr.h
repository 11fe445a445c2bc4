/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Small helpers over struct sockaddr for AF_INET and AF_INET6. */
#ifndef XS_SOCKADDR_H
#define XS_SOCKADDR_H

#include <netinet/in.h>
#include <sys/socket.h>

/* The port in network order (0 for another family). */
static inline in_port_t xs_sa_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_port;
	if (sa->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)sa)->sin6_port;
	return 0;
}

/* Set the port (network order; nothing for another family). */
static inline void xs_sa_set_port(struct sockaddr *sa, in_port_t port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = port;
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = port;
}

#endif
