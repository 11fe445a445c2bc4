/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The rsockets connection data (xsk_wire.h): 40 octets, big-endian, sent
 * as MPA private data after the RFC 6581 header.  Pure code over bytes. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "libxsock/xsk_wire.h"
#include "util/xs_be.h"

/* ---- connection data ---------------------------------------------------------- */

static void put_sge(uint8_t *p, const struct rs_sge_h *s)
{
	xs_put_be64(p, s->addr);
	xs_put_be32(p + 8, s->key);
	xs_put_be32(p + 12, s->length);
}

static void get_sge(const uint8_t *p, struct rs_sge_h *s)
{
	s->addr = xs_get_be64(p);
	s->key = xs_get_be32(p + 8);
	s->length = xs_get_be32(p + 12);
}

void rs_conn_encode(const struct rs_conn *c, uint8_t out[RS_CONN_DATA_LEN])
{
	memset(out, 0, RS_CONN_DATA_LEN);
	out[0] = c->version;
	out[1] = c->flags;
	xs_put_be16(out + 2, c->credits);
	out[7] = c->target_iomap_size;
	put_sge(out + 8, &c->target_sgl);
	put_sge(out + 24, &c->data_buf);
}

int rs_conn_decode(const uint8_t *in, size_t len, struct rs_conn *c)
{
	if (!in || len < RS_CONN_DATA_LEN)
		return -EPROTO;
	c->version = in[0];
	c->flags = in[1];
	c->credits = xs_get_be16(in + 2);
	c->target_iomap_size = in[7];
	get_sge(in + 8, &c->target_sgl);
	get_sge(in + 24, &c->data_buf);
	if (c->version != RS_VERSION || !c->credits || !c->target_sgl.length ||
	    !c->data_buf.length)
		return -EPROTO;
	return 0;
}
