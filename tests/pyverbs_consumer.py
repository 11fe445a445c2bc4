# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""An unmodified rdma-core consumer in Python (pyverbs, Debian's
python3-pyverbs) against xsock0: the device's identity through every query
call, objects and QP transitions, then an RC connection through pyverbs'
synchronous rdma_cm (CMID, another process) with a Send echoed back, data
checked.  Run under xsock-run; prints one line per check, exits non-zero on
the first failure."""
import os
import sys

import pyverbs.enums as e
import pyverbs.cm_enums as ce
from pyverbs.cmid import CMID, AddrInfo
from pyverbs.cq import CQ
from pyverbs.device import Context, get_device_list
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr

ok = 0


def check(cond, what):
    global ok
    if not cond:
        print("FAIL", what, flush=True)
        sys.exit(1)
    ok += 1
    print("ok", what, flush=True)


def identity():
    names = [d.name.decode() for d in get_device_list()]
    check("xsock0" in names, "device list has xsock0: %s" % names)
    with Context(name="xsock0") as ctx:
        attr = ctx.query_device()
        ex = ctx.query_device_ex()
        check(attr.phys_port_cnt == 1 and ex.orig_attr.phys_port_cnt == 1 and
              ex.phys_port_cnt_ex == 1, "query_device/_ex agree on one port")
        check(attr.vendor_id == ex.orig_attr.vendor_id and attr.vendor_id != 0,
              "vendor_id 0x%x in both" % attr.vendor_id)
        port = ctx.query_port(1)
        check(port.state == e.IBV_PORT_ACTIVE and
              port.link_layer == e.IBV_LINK_LAYER_ETHERNET,
              "port 1 active, Ethernet")
        gid = ctx.query_gid(1, 0)
        check(str(gid).replace(":", "").strip("0") != "", "GID %s is not zero" % gid)
        gex = ctx.query_gid_ex(1, 0)
        check(gex.gid_str() == str(gid), "query_gid_ex agrees: %s" % gex.gid_str())
        table = ctx.query_gid_table(4)
        check(len(table) >= 1 and table[0].gid_str() == str(gid),
              "query_gid_table agrees (%d entries)" % len(table))
        check(ctx.query_pkey(1, 0) == 0xffff, "pkey 0xffff")
        with PD(ctx) as pd, CQ(ctx, 16) as cq:
            mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
                    e.IBV_ACCESS_REMOTE_READ)
            check(mr.lkey != 0 and mr.rkey != 0, "MR registered")
            cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
            qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
            qa = QPAttr(qp_state=e.IBV_QPS_INIT)
            qa.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE
            qp.to_init(qa)
            got, _ = qp.query(e.IBV_QP_STATE)
            check(got.qp_state == e.IBV_QPS_INIT, "query_qp after INIT says INIT")
            qp.close()
            mr.close()


SIZE = 4096
PAYLOAD = bytes((i * 7 + 3) & 0xff for i in range(SIZE))


def init_attr():
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    return QPInitAttr(qp_type=e.IBV_QPT_RC, cap=cap, sq_sig_all=1)


def server(port, wfd):
    ai = AddrInfo(src="127.0.0.1", src_service=str(port), port_space=ce.RDMA_PS_TCP,
                  flags=ce.RAI_PASSIVE)
    lid = CMID(creator=ai, qp_init_attr=init_attr())
    lid.listen()
    os.write(wfd, b"L")
    cid = lid.get_request()
    mr = cid.reg_msgs(SIZE)
    cid.post_recv(mr, SIZE)
    cid.accept()
    wc = cid.get_recv_comp()
    data = mr.read(SIZE, 0)
    if wc.status != e.IBV_WC_SUCCESS or wc.byte_len != SIZE or data != PAYLOAD:
        os._exit(2)
    # echo it back, then wait for the client's goodbye
    cid.post_recv(mr, SIZE)
    cid.post_send(mr, 0, SIZE)
    cid.get_send_comp()
    cid.get_recv_comp()
    cid.disconnect()
    os._exit(0)


def client(port):
    ai = AddrInfo(dst="127.0.0.1", dst_service=str(port), port_space=ce.RDMA_PS_TCP)
    cid = CMID(creator=ai, qp_init_attr=init_attr())
    cid.connect()
    smr = cid.reg_msgs(SIZE)
    smr.write(PAYLOAD, SIZE)
    rmr = cid.reg_msgs(SIZE)  # the echo lands apart: it may come at once
    cid.post_recv(rmr, SIZE)
    cid.post_send(smr, 0, SIZE)
    wc = cid.get_send_comp()
    check(wc.status == e.IBV_WC_SUCCESS, "CMID Send completes")
    wc = cid.get_recv_comp()
    check(wc.status == e.IBV_WC_SUCCESS and wc.byte_len == SIZE and
          rmr.read(SIZE, 0) == PAYLOAD,
          "CMID echo received, data checked (status %d, %d bytes)" % (wc.status, wc.byte_len))
    cid.post_send(smr, 0, 1)
    cid.get_send_comp()
    return cid


def main():
    port = int(sys.argv[1])
    identity()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            server(port, w)
        except Exception as ex:  # pyverbs raises on any failed call
            print("server:", ex, flush=True)
            os._exit(3)
    os.close(w)
    check(os.read(r, 1) == b"L", "server listening")
    client(port)
    _, st = os.waitpid(pid, 0)
    check(os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0,
          "server saw the data intact (status %d)" % st)
    print("%d checks passed" % ok, flush=True)


if __name__ == "__main__":
    main()
