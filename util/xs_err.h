/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The error triple every layer reports: what a Terminate message carries
 * (RFC 5040 section 4.8: Layer, Error Type, Error Code).  Each layer's wire
 * header defines its own EType/ECode values; iwarp/rdmap_errors.c has the
 * complete table with names. */
#ifndef XS_ERR_H
#define XS_ERR_H

#include <stdint.h>

enum xs_layer {
	XS_LAYER_RDMAP = 0,
	XS_LAYER_DDP = 1,
	XS_LAYER_LLP = 2, /* MPA (and TCP) */
};

struct xs_err {
	uint8_t layer;
	uint8_t etype;
	uint8_t ecode;
};

static inline void xs_err_set(struct xs_err *e, uint8_t layer, uint8_t etype, uint8_t ecode)
{
	if (e) {
		e->layer = layer;
		e->etype = etype;
		e->ecode = ecode;
	}
}

#endif
