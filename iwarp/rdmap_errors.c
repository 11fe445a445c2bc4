/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Every Terminate error triple the RFCs define, with the RFCs' wording:
 * RDMAP (RFC 5040 4.8, Layer 0), DDP (RFC 5041 7.2, Layer 1), LLP/MPA
 * (RFC 5044 8, Layer 2, codes 0x05-0x07 added by RFC 6581 7). */
#include "config.h"

#include <stdio.h>

#include "iwarp/rdmap.h"
#include "mpa/mpa_wire.h"

#define RDMAP_RFC "RFC 5040 4.8"
#define DDP_RFC "RFC 5041 7.2"
#define MPA_RFC "RFC 5044 8"
#define MPA_ENH_RFC "RFC 6581 7"

#define ROW(l, t, c, n, r) { .layer = (l), .etype = (t), .ecode = (c), .name = (n), .rfc = (r) }
#define RD(t, c, n) ROW(XS_LAYER_RDMAP, RDMAP_ETYPE_##t, RDMAP_ECODE_##c, n, RDMAP_RFC)
#define DD(t, c, n) ROW(XS_LAYER_DDP, DDP_ETYPE_##t, DDP_ECODE_##c, n, DDP_RFC)

const struct xs_err_desc xs_err_table[] = {
	RD(CATASTROPHIC, CATASTROPHIC, "local catastrophic error"),

	RD(REMOTE_PROT, INVALID_STAG, "invalid STag"),
	RD(REMOTE_PROT, BASE_BOUNDS, "base or bounds violation"),
	RD(REMOTE_PROT, ACCESS, "access rights violation"),
	RD(REMOTE_PROT, STAG_NOT_ASSOC, "STag not associated with RDMAP stream"),
	RD(REMOTE_PROT, TO_WRAP, "TO wrap error"),
	RD(REMOTE_PROT, STAG_CANNOT_INV, "STag cannot be invalidated"),
	RD(REMOTE_PROT, UNSPECIFIED, "unspecified error"),

	RD(REMOTE_OP, VERSION, "invalid RDMAP version"),
	RD(REMOTE_OP, UNEXPECTED_OP, "unexpected OpCode"),
	RD(REMOTE_OP, STREAM_CATASTROPHIC, "catastrophic error, localized to RDMAP stream"),
	RD(REMOTE_OP, GLOBAL_CATASTROPHIC, "catastrophic error, global"),
	RD(REMOTE_OP, STAG_CANNOT_INV, "STag cannot be invalidated"),
	RD(REMOTE_OP, UNSPECIFIED, "unspecified error"),

	DD(CATASTROPHIC, CATASTROPHIC, "local catastrophic error"),

	DD(TAGGED, T_INVALID_STAG, "invalid STag"),
	DD(TAGGED, T_BASE_BOUNDS, "base or bounds violation"),
	DD(TAGGED, T_STAG_NOT_ASSOC, "STag not associated with DDP stream"),
	DD(TAGGED, T_TO_WRAP, "TO wrap"),
	DD(TAGGED, T_VERSION, "invalid DDP version"),

	DD(UNTAGGED, U_INVALID_QN, "invalid QN"),
	DD(UNTAGGED, U_NO_BUFFER, "invalid MSN - no buffer available"),
	DD(UNTAGGED, U_MSN_RANGE, "invalid MSN - MSN range is not valid"),
	DD(UNTAGGED, U_INVALID_MO, "invalid MO"),
	DD(UNTAGGED, U_TOO_LONG, "DDP message too long for available buffer"),
	DD(UNTAGGED, U_VERSION, "invalid DDP version"),
	/* DDP_ETYPE_RSVD defines no codes. */

	ROW(XS_LAYER_LLP, MPA_ETYPE, MPA_ECODE_TCP_CLOSED, "TCP connection closed, terminated or lost",
	    MPA_RFC),
	ROW(XS_LAYER_LLP, MPA_ETYPE, MPA_ECODE_CRC, "MPA CRC error", MPA_RFC),
	ROW(XS_LAYER_LLP, MPA_ETYPE, MPA_ECODE_MARKER, "MPA Marker and ULPDU Length field mismatch",
	    MPA_RFC),
	ROW(XS_LAYER_LLP, MPA_ETYPE, MPA_ECODE_BAD_RR,
	    "invalid MPA Request frame or MPA Response frame", MPA_RFC),
	ROW(XS_LAYER_LLP, MPA_ETYPE, MPA_ECODE_LOCAL_CATASTROPHIC, "local catastrophic error",
	    MPA_ENH_RFC),
	ROW(XS_LAYER_LLP, MPA_ETYPE, MPA_ECODE_INSUFFICIENT_IRD, "insufficient IRD resources",
	    MPA_ENH_RFC),
	ROW(XS_LAYER_LLP, MPA_ETYPE, MPA_ECODE_NO_MATCHING_RTR, "no matching RTR option",
	    MPA_ENH_RFC),
};

const size_t xs_err_table_len = sizeof(xs_err_table) / sizeof(xs_err_table[0]);

const struct xs_err_desc *xs_err_lookup(const struct xs_err *e)
{
	for (size_t i = 0; i < xs_err_table_len; i++) {
		const struct xs_err_desc *d = &xs_err_table[i];
		if (d->layer == e->layer && d->etype == e->etype && d->ecode == e->ecode)
			return d;
	}
	return NULL;
}

const char *xs_layer_name(uint8_t layer)
{
	switch (layer) {
	case XS_LAYER_RDMAP:
		return "RDMAP";
	case XS_LAYER_DDP:
		return "DDP";
	case XS_LAYER_LLP:
		return "LLP";
	default:
		return "unknown layer";
	}
}

const char *xs_etype_name(uint8_t layer, uint8_t etype)
{
	switch (layer) {
	case XS_LAYER_RDMAP:
		switch (etype) {
		case RDMAP_ETYPE_CATASTROPHIC:
			return "local catastrophic error";
		case RDMAP_ETYPE_REMOTE_PROT:
			return "remote protection error";
		case RDMAP_ETYPE_REMOTE_OP:
			return "remote operation error";
		}
		break;
	case XS_LAYER_DDP:
		switch (etype) {
		case DDP_ETYPE_CATASTROPHIC:
			return "local catastrophic error";
		case DDP_ETYPE_TAGGED:
			return "tagged buffer error";
		case DDP_ETYPE_UNTAGGED:
			return "untagged buffer error";
		case DDP_ETYPE_RSVD:
			return "reserved for use by the ULP";
		}
		break;
	case XS_LAYER_LLP:
		if (etype == MPA_ETYPE)
			return "MPA";
		break;
	}
	return "unknown error type";
}

const char *xs_err_str(const struct xs_err *e, char *buf, size_t cap)
{
	if (!buf || !cap)
		return "";
	const struct xs_err_desc *d = xs_err_lookup(e);
	snprintf(buf, cap, "%s/%s/0x%02x: %s", xs_layer_name(e->layer),
		 xs_etype_name(e->layer, e->etype), e->ecode, d ? d->name : "unknown code");
	return buf;
}
