/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The RoCEv2 opcodes we take: exactly rxe's RC and UD ones (Linux 6.1
 * drivers/infiniband/sw/rxe/rxe_opcode.c:107-380 RC, 909-938 UD; rxe's UC
 * and RD entries are left out), with rxe's header sets, order and lengths.
 * Header order in a packet: BTH, then RETH/AETH/DETH/AtomicETH, then
 * ImmDt/IETH/AtomicAckETH (IBTA 9.2; rxe_opcode.c's .offset).
 * ROCE_F_PAYLOAD where rxe has RXE_PAYLOAD_MASK: the ACK, the Atomic ACK,
 * the Read Request and the atomics carry none.  ROCE_F_READ and
 * ROCE_F_ATOMIC name the operation on both sides (the Read Responses and
 * the Atomic ACK have them too, with ROCE_F_RESP); rxe marks responses
 * with RXE_ACK_MASK only. */
#include "config.h"

#include "roce/roce.h"

#define B ROCE_BTH_LEN
#define REQ_SEND (ROCE_F_REQ | ROCE_F_SEND | ROCE_F_PAYLOAD)
#define REQ_WRITE (ROCE_F_REQ | ROCE_F_WRITE | ROCE_F_PAYLOAD)
#define RESP_READ (ROCE_F_RESP | ROCE_F_READ | ROCE_F_PAYLOAD)
#define ONLY (ROCE_F_FIRST | ROCE_F_LAST)

const struct roce_op_info roce_ops[256] = {
	[ROCE_RC_SEND_FIRST] = { "RC Send First", REQ_SEND | ROCE_F_FIRST, B },
	[ROCE_RC_SEND_MIDDLE] = { "RC Send Middle", REQ_SEND | ROCE_F_MIDDLE, B },
	[ROCE_RC_SEND_LAST] = { "RC Send Last", REQ_SEND | ROCE_F_LAST, B },
	[ROCE_RC_SEND_LAST_IMM] = { "RC Send Last with Immediate",
				    REQ_SEND | ROCE_F_LAST | ROCE_F_IMMDT, B + ROCE_IMMDT_LEN },
	[ROCE_RC_SEND_ONLY] = { "RC Send Only", REQ_SEND | ONLY, B },
	[ROCE_RC_SEND_ONLY_IMM] = { "RC Send Only with Immediate",
				    REQ_SEND | ONLY | ROCE_F_IMMDT, B + ROCE_IMMDT_LEN },
	[ROCE_RC_WRITE_FIRST] = { "RC RDMA Write First", REQ_WRITE | ROCE_F_FIRST | ROCE_F_RETH,
				  B + ROCE_RETH_LEN },
	[ROCE_RC_WRITE_MIDDLE] = { "RC RDMA Write Middle", REQ_WRITE | ROCE_F_MIDDLE, B },
	[ROCE_RC_WRITE_LAST] = { "RC RDMA Write Last", REQ_WRITE | ROCE_F_LAST, B },
	[ROCE_RC_WRITE_LAST_IMM] = { "RC RDMA Write Last with Immediate",
				     REQ_WRITE | ROCE_F_LAST | ROCE_F_IMMDT, B + ROCE_IMMDT_LEN },
	[ROCE_RC_WRITE_ONLY] = { "RC RDMA Write Only", REQ_WRITE | ONLY | ROCE_F_RETH,
				 B + ROCE_RETH_LEN },
	[ROCE_RC_WRITE_ONLY_IMM] = { "RC RDMA Write Only with Immediate",
				     REQ_WRITE | ONLY | ROCE_F_RETH | ROCE_F_IMMDT,
				     B + ROCE_RETH_LEN + ROCE_IMMDT_LEN },
	[ROCE_RC_READ_REQ] = { "RC RDMA Read Request", ROCE_F_REQ | ROCE_F_READ | ONLY | ROCE_F_RETH,
			       B + ROCE_RETH_LEN },
	[ROCE_RC_READ_RESP_FIRST] = { "RC RDMA Read Response First",
				      RESP_READ | ROCE_F_FIRST | ROCE_F_AETH, B + ROCE_AETH_LEN },
	[ROCE_RC_READ_RESP_MIDDLE] = { "RC RDMA Read Response Middle", RESP_READ | ROCE_F_MIDDLE,
				       B },
	[ROCE_RC_READ_RESP_LAST] = { "RC RDMA Read Response Last",
				     RESP_READ | ROCE_F_LAST | ROCE_F_AETH, B + ROCE_AETH_LEN },
	[ROCE_RC_READ_RESP_ONLY] = { "RC RDMA Read Response Only", RESP_READ | ONLY | ROCE_F_AETH,
				     B + ROCE_AETH_LEN },
	[ROCE_RC_ACK] = { "RC Acknowledge", ROCE_F_RESP | ONLY | ROCE_F_AETH, B + ROCE_AETH_LEN },
	[ROCE_RC_ATOMIC_ACK] = { "RC Atomic Acknowledge",
				 ROCE_F_RESP | ROCE_F_ATOMIC | ONLY | ROCE_F_AETH | ROCE_F_ATMACK,
				 B + ROCE_AETH_LEN + ROCE_ATMACK_LEN },
	[ROCE_RC_CMP_SWAP] = { "RC CmpSwap", ROCE_F_REQ | ROCE_F_ATOMIC | ONLY | ROCE_F_ATMETH,
			       B + ROCE_ATMETH_LEN },
	[ROCE_RC_FETCH_ADD] = { "RC FetchAdd", ROCE_F_REQ | ROCE_F_ATOMIC | ONLY | ROCE_F_ATMETH,
				B + ROCE_ATMETH_LEN },
	[ROCE_RC_SEND_LAST_INV] = { "RC Send Last with Invalidate",
				    REQ_SEND | ROCE_F_LAST | ROCE_F_IETH, B + ROCE_IETH_LEN },
	[ROCE_RC_SEND_ONLY_INV] = { "RC Send Only with Invalidate", REQ_SEND | ONLY | ROCE_F_IETH,
				    B + ROCE_IETH_LEN },
	[ROCE_UD_SEND_ONLY] = { "UD Send Only", REQ_SEND | ONLY | ROCE_F_UD | ROCE_F_DETH,
				B + ROCE_DETH_LEN },
	[ROCE_UD_SEND_ONLY_IMM] = { "UD Send Only with Immediate",
				    REQ_SEND | ONLY | ROCE_F_UD | ROCE_F_DETH | ROCE_F_IMMDT,
				    B + ROCE_DETH_LEN + ROCE_IMMDT_LEN },
};

_Static_assert(B + ROCE_ATMETH_LEN == ROCE_MAX_HDR_LEN, "the atomics have the longest headers");

/* {FIRST, MIDDLE, LAST, ONLY} of each kind of message */
static const uint8_t roce_msg_ops[ROCE_MSG_KINDS][4] = {
	[ROCE_MSG_SEND] = { ROCE_RC_SEND_FIRST, ROCE_RC_SEND_MIDDLE, ROCE_RC_SEND_LAST,
			    ROCE_RC_SEND_ONLY },
	[ROCE_MSG_SEND_IMM] = { ROCE_RC_SEND_FIRST, ROCE_RC_SEND_MIDDLE, ROCE_RC_SEND_LAST_IMM,
				ROCE_RC_SEND_ONLY_IMM },
	[ROCE_MSG_SEND_INV] = { ROCE_RC_SEND_FIRST, ROCE_RC_SEND_MIDDLE, ROCE_RC_SEND_LAST_INV,
				ROCE_RC_SEND_ONLY_INV },
	[ROCE_MSG_WRITE] = { ROCE_RC_WRITE_FIRST, ROCE_RC_WRITE_MIDDLE, ROCE_RC_WRITE_LAST,
			     ROCE_RC_WRITE_ONLY },
	[ROCE_MSG_WRITE_IMM] = { ROCE_RC_WRITE_FIRST, ROCE_RC_WRITE_MIDDLE,
				 ROCE_RC_WRITE_LAST_IMM, ROCE_RC_WRITE_ONLY_IMM },
	[ROCE_MSG_READ_RESP] = { ROCE_RC_READ_RESP_FIRST, ROCE_RC_READ_RESP_MIDDLE,
				 ROCE_RC_READ_RESP_LAST, ROCE_RC_READ_RESP_ONLY },
};

uint8_t roce_msg_opcode(enum roce_msg_kind k, bool first, bool last)
{
	return roce_msg_ops[k][first && last ? 3 : first ? 0 : last ? 2 : 1];
}
