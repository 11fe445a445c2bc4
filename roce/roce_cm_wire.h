/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* IB CM MAD constants on the wire (IBTA vol 1 ch. 12 and 13; Linux
 * include/rdma/ib_mad.h, ib_cm.h, ibta_vol1_c12.h, core/cma.c). */
#ifndef ROCE_CM_WIRE_H
#define ROCE_CM_WIRE_H

#define ROCE_MAD_LEN 256
#define ROCE_MAD_HDR_LEN 24
#define ROCE_GSI_QPN 1
#define ROCE_GSI_QKEY 0x80010000u /* IB_QP1_QKEY */
#define ROCE_MAD_BASE_VERSION 1
#define ROCE_MAD_CLASS_CM 0x07
#define ROCE_MAD_CLASS_VERSION_CM 2
#define ROCE_MAD_METHOD_SEND 0x03

enum roce_cm_attr {
	ROCE_CM_ATTR_REQ = 0x0010,
	ROCE_CM_ATTR_MRA = 0x0011,
	ROCE_CM_ATTR_REJ = 0x0012,
	ROCE_CM_ATTR_REP = 0x0013,
	ROCE_CM_ATTR_RTU = 0x0014,
	ROCE_CM_ATTR_DREQ = 0x0015,
	ROCE_CM_ATTR_DREP = 0x0016,
};

/* private data octets of each message */
#define ROCE_CM_REQ_PDATA 92
#define ROCE_CM_MRA_PDATA 222
#define ROCE_CM_REJ_PDATA 148
#define ROCE_CM_REJ_ARI 72
#define ROCE_CM_REP_PDATA 196
#define ROCE_CM_RTU_PDATA 224
#define ROCE_CM_DREQ_PDATA 220
#define ROCE_CM_DREP_PDATA 224

/* MRA message_mraed / REJ message_rejected */
#define ROCE_CM_MSG_REQ 0
#define ROCE_CM_MSG_REP 1
#define ROCE_CM_MSG_LAP 2 /* MRA */
#define ROCE_CM_MSG_OTHER 2 /* REJ: no message */

#define ROCE_CM_TST_RC 0 /* REQ transport service type */

/* REJ reasons (ib_cm.h enum ib_cm_rej_reason) */
enum roce_cm_rej_reason {
	ROCE_CM_REJ_NO_QP = 1,
	ROCE_CM_REJ_NO_RESOURCES = 3,
	ROCE_CM_REJ_TIMEOUT = 4,
	ROCE_CM_REJ_UNSUPPORTED = 5,
	ROCE_CM_REJ_INVALID_COMM_ID = 6,
	ROCE_CM_REJ_INVALID_COMM_INSTANCE = 7,
	ROCE_CM_REJ_INVALID_SERVICE_ID = 8,
	ROCE_CM_REJ_INVALID_TRANSPORT_TYPE = 9,
	ROCE_CM_REJ_STALE_CONN = 10,
	ROCE_CM_REJ_INVALID_GID = 12,
	ROCE_CM_REJ_INVALID_MTU = 26,
	ROCE_CM_REJ_INSUFFICIENT_RESP_RESOURCES = 27,
	ROCE_CM_REJ_CONSUMER_DEFINED = 28,
	ROCE_CM_REJ_INVALID_RNR_RETRY = 29,
	ROCE_CM_REJ_DUPLICATE_LOCAL_COMM_ID = 30,
	ROCE_CM_REJ_INVALID_CLASS_VERSION = 31,
};

/* rdma_cm's private-data header (cma.c) */
#define ROCE_CMA_HDR_LEN 36
#define ROCE_CMA_VERSION 0x00
/* service IDs: RDMA_IB_IP_PS_TCP | port (cma.c: cma_get_service_id) */
#define ROCE_CM_SID_PS_TCP 0x0000000001060000ull
#define ROCE_CM_SID_PS_MASK 0xffffffffffff0000ull

#endif
