#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""roce-peer.py: a minimal RoCE v2 RC peer in Python (stdlib only) for the
interop guest's rdma_rxe, used to make packet vectors (tests/vectors/roce/).

  roce-peer.py pingpong [--bind 10.0.3.1] [--port 18515] [--iters N]
                        [--size S] [--mtu 1024] [--extras seq,dup,write,read,atomic]
                        [--timeout S]

It is the server half of rdma-core's ibv_rc_pingpong: it answers the
client's TCP exchange ("LID:QPN:PSN:GID", 52 bytes with the NUL, then
"done"), then for each iteration receives the client's Send (ACKing it),
and sends one back (segmented at --mtu, AckReq on the last packet), waiting
for rxe's ACK.  Packets leave through a raw socket with IP_HDRINCL: the IP
header (Identification included) is ours, so the ICRC we compute over it is
the one rxe checks.  rxe's packets arrive on a UDP socket on BIND:4791.
--extras, before the last iteration: seq (a Send PSN ahead: NAK PSN
sequence error), dup (an old Send again: rxe re-ACKs), and as the last
thing, which breaks the QP: write / read / atomic (rc_pingpong's QP grants
no remote access: NAK invalid request).  --no-ack: answer the TCP
exchange, then only listen (--watch seconds) to rxe retransmitting its
first Send.

  roce-peer.py perftest [--server 10.0.3.2] [--port 18515] [--ops LIST]

The client half of a perftest program without -R (ib_read_bw, ib_atomic_bw
as the server in the guest): perftest's TCP exchange (versions, page and
cache line size, MTU, the QP keys, two more handshakes), then LIST, comma
separated: read:N (a Read Request of N bytes at the server's buffer: rxe's
Read Responses), readdup (the last read again, same PSN: rxe replays it),
fetchadd, cmpswap (an Atomic ACK each), write:N (an RDMA Write: rxe's
ACK), sendrnr (a Send with no receive posted: RNR NAK; last), readbadkey (a wrong R_Key: NAK
remote access error; the QP breaks, so last).  Exit 0 when every step saw the
answer it expected; prints what it sent and got.
"""
import argparse
import socket
import struct
import sys
import time
import zlib

ROCE_PORT = 4791
OP = {"SEND_FIRST": 0x00, "SEND_MIDDLE": 0x01, "SEND_LAST": 0x02, "SEND_ONLY": 0x04,
      "WRITE_ONLY": 0x0a, "READ_REQ": 0x0c, "READ_RESP_FIRST": 0x0d, "READ_RESP_MIDDLE": 0x0e,
      "READ_RESP_LAST": 0x0f, "READ_RESP_ONLY": 0x10, "ACK": 0x11, "ATOMIC_ACK": 0x12,
      "CMP_SWAP": 0x13, "FETCH_ADD": 0x14}
OPNAME = {v: k for k, v in OP.items()}


def icrc(ip_udp, roce):
    """ICRC of a RoCE v2 packet (rxe_icrc.c): CRC-32 over 8 bytes of 0xff (the
    masked LRH), the IPv4 header with TOS, TTL and checksum all ones, the UDP
    header with its checksum all ones, the BTH with its reserved byte (byte
    4) all ones, then the rest of the packet up to the ICRC; zlib's crc32
    (seed ~0, result inverted) is exactly that; stored little-endian."""
    ip = bytearray(ip_udp[:20])
    ip[1] = 0xff
    ip[8] = 0xff
    ip[10:12] = b"\xff\xff"
    udp = bytearray(ip_udp[20:28])
    udp[6:8] = b"\xff\xff"
    bth = bytearray(roce[:12])
    bth[4] = 0xff
    c = zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(bth) + roce[12:-4])
    return struct.pack("<I", c)


def ip_csum(h):
    s = sum(struct.unpack("!10H", h))
    s = (s & 0xffff) + (s >> 16)
    s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff


class Peer:
    def __init__(self, local, remote, timeout):
        self.local, self.remote, self.timeout = local, remote, timeout
        self.ipid = 0x1234
        self.tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.tx.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
        self.rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.rx.bind((local, ROCE_PORT))
        self.rx.settimeout(timeout)
        self.log = []

    def close(self):
        self.tx.close()
        self.rx.close()

    def send(self, bth_and_rest):
        """bth_and_rest: the packet from the BTH up to the payload's pad; the
        ICRC is appended here."""
        roce = bth_and_rest + b"\0\0\0\0"
        ulen = 8 + len(roce)
        self.ipid = (self.ipid + 1) & 0xffff or 1  # nonzero: the kernel keeps it
        sport = 0xc000 | 0x0123
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, self.ipid, 0x4000, 64,
                         socket.IPPROTO_UDP, 0, socket.inet_aton(self.local),
                         socket.inet_aton(self.remote))
        ip = ip[:10] + struct.pack("!H", ip_csum(ip)) + ip[12:]
        udp = struct.pack("!HHHH", sport, ROCE_PORT, ulen, 0)
        roce = roce[:-4] + icrc(ip + udp, roce)
        self.tx.sendto(ip + udp + roce, (self.remote, 0))
        self.log.append("sent %s psn %06x len %d" % (OPNAME.get(roce[0], hex(roce[0])),
                                                    struct.unpack("!I", roce[8:12])[0] & 0xffffff,
                                                    len(roce)))

    def recv(self):
        """-> (opcode, ackreq, psn, packet) of the next packet from rxe"""
        pkt, _ = self.rx.recvfrom(65536)
        if len(pkt) < 16:
            raise RuntimeError("short packet from rxe (%d bytes)" % len(pkt))
        op = pkt[0]
        psn = struct.unpack("!I", pkt[8:12])[0] & 0xffffff
        ackreq = pkt[8] >> 7
        self.log.append("got  %s psn %06x len %d%s" % (OPNAME.get(op, hex(op)), psn, len(pkt),
                                                      " ackreq" if ackreq else ""))
        return op, ackreq, psn, pkt


def bth(op, dqp, psn, ackreq=0, se=0, pad=0):
    return struct.pack("!BBHII", op, (se << 7) | (pad << 4), 0xffff, dqp & 0xffffff,
                       (ackreq << 31) | (psn & 0xffffff))


def aeth(syndrome, msn):
    return struct.pack("!I", (syndrome << 24) | (msn & 0xffffff))


def padded(data):
    pad = (-len(data)) % 4
    return data + b"\0" * pad, pad


def send_message(p, dqp, psn, size, mtu, fill=0x7b):
    """Send SIZE bytes as one message from PSN; -> the next PSN"""
    data = bytes([fill]) * size
    chunks = [data[i:i + mtu] for i in range(0, max(size, 1), mtu)] or [b""]
    if size == 0:
        chunks = [b""]
    for i, c in enumerate(chunks):
        last = i == len(chunks) - 1
        if len(chunks) == 1:
            op = OP["SEND_ONLY"]
        elif i == 0:
            op = OP["SEND_FIRST"]
        elif last:
            op = OP["SEND_LAST"]
        else:
            op = OP["SEND_MIDDLE"]
        body, pad = padded(c)
        p.send(bth(op, dqp, psn, ackreq=int(last), pad=pad) + body)
        psn = (psn + 1) & 0xffffff
    return psn


def expect(p, want, what, deadline):
    """receive until an opcode in WANT; -> its packet (rxe's retransmissions
    of what we already ACKed are skipped)"""
    while time.monotonic() < deadline:
        op, _, _, pkt = p.recv()
        if op in want:
            return pkt
    raise RuntimeError("timed out waiting for %s" % what)


def pingpong(a):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((a.bind, a.port))
    ls.listen(1)
    ls.settimeout(a.timeout)
    print("roce-peer: listening on %s:%d" % (a.bind, a.port), flush=True)
    c, (raddr, _) = ls.accept()
    ls.close()
    c.settimeout(a.timeout)
    msg = b""
    while len(msg) < 52:
        m = c.recv(52 - len(msg))
        if not m:
            raise RuntimeError("client closed during the exchange")
        msg += m
    lid, qpn, psn, gid = msg.rstrip(b"\0").decode().split(":")
    rqpn, rpsn = int(qpn, 16), int(psn, 16)
    my_qpn, my_psn = 0x000111, 0x0abcde
    my_gid = bytes(10) + b"\xff\xff" + socket.inet_aton(a.bind)
    c.sendall(("%04x:%06x:%06x:%s" % (0, my_qpn, my_psn, my_gid.hex())).encode() + b"\0")
    done = c.recv(5)
    c.close()
    print("roce-peer: client qpn %06x psn %06x gid %s (%r)" % (rqpn, rpsn, gid, done), flush=True)
    p = Peer(a.bind, raddr, a.timeout)
    extras = [e for e in a.extras.split(",") if e]
    epsn = rpsn       # the PSN we expect from the client next
    msn = 0           # messages we completed as responder
    spsn = my_psn     # our next PSN
    deadline = time.monotonic() + a.timeout
    try:
        if a.no_ack:
            # rxe's retransmissions of its first Send, for --watch seconds
            end = time.monotonic() + a.watch
            p.rx.settimeout(0.2)
            while time.monotonic() < end:
                try:
                    p.recv()
                except socket.timeout:
                    pass
            return 0
        for it in range(a.iters):
            # the client's Send: packets until the one with AckReq
            while True:
                op, ackreq, psn, _ = p.recv()
                if op not in (0, 1, 2, 3, 4, 5):
                    continue
                if psn != epsn:
                    continue          # a retransmission
                epsn = (epsn + 1) & 0xffffff
                if op in (2, 3, 4, 5):
                    msn += 1
                    p.send(bth(OP["ACK"], rqpn, psn) + aeth(0x1f, msn))
                    break
            if it == a.iters - 1 and extras:
                for e in extras:
                    run_extra(p, e, rqpn, spsn, a, deadline)
            spsn = send_message(p, rqpn, spsn, a.size, a.mtu)
            pkt = expect(p, (OP["ACK"],), "rxe's ACK", deadline)
            syn = pkt[12]
            if syn >> 5 != 0:
                raise RuntimeError("rxe answered with AETH syndrome %02x" % syn)
        return 0
    finally:
        for line in p.log:
            print("roce-peer: " + line)
        p.close()


def run_extra(p, e, rqpn, spsn, a, deadline):
    """one extra exchange (see the module's help); raises if rxe does not
    answer as expected"""
    if e == "seq":
        # a Send 3 PSNs ahead: one NAK "PSN sequence error" (AETH 0x60)
        p.send(bth(OP["SEND_ONLY"], rqpn, spsn + 3, ackreq=1) + b"\x7b" * 4)
        pkt = expect(p, (OP["ACK"],), "NAK-seq", deadline)
        if pkt[12] != 0x60:
            raise RuntimeError("expected NAK-seq (0x60), got AETH %02x" % pkt[12])
    elif e == "dup":
        # the previous Send again (PSN - 1): rxe ACKs the duplicate
        p.send(bth(OP["SEND_ONLY"], rqpn, spsn - 1, ackreq=1) + b"\x7b" * 4)
        pkt = expect(p, (OP["ACK"],), "the duplicate's ACK", deadline)
        if pkt[12] >> 5 != 0:
            raise RuntimeError("expected an ACK, got AETH %02x" % pkt[12])
    elif e in ("write", "read", "atomic"):
        # no remote access on rc_pingpong's QP: NAK invalid request (0x61)
        if e == "write":
            body = bth(OP["WRITE_ONLY"], rqpn, spsn, ackreq=1) + \
                struct.pack("!QII", 0x1000, 0x1234, 4) + b"\x7b" * 4
        elif e == "read":
            body = bth(OP["READ_REQ"], rqpn, spsn, ackreq=1) + struct.pack("!QII", 0x1000, 0x1234, 64)
        else:
            body = bth(OP["FETCH_ADD"], rqpn, spsn, ackreq=1) + \
                struct.pack("!QIQQ", 0x1000, 0x1234, 1, 0)
        p.send(body)
        pkt = expect(p, (OP["ACK"],), "a NAK", deadline)
        if pkt[12] >> 5 != 3:
            raise RuntimeError("expected a NAK, got AETH %02x" % pkt[12])
        raise StopIteration("QP broken by design")
    else:
        raise RuntimeError("unknown extra %s" % e)


def pt_xchg(c, data, size):
    """perftest's ctx_xchg_data as the client: write ours, read theirs"""
    c.sendall(data.ljust(size, b"\0")[:size])
    got = b""
    while len(got) < size:
        m = c.recv(size - len(got))
        if not m:
            raise RuntimeError("perftest server closed the exchange")
        got += m
    return got


def pt_keys(qpn, psn, rkey, vaddr, gid):
    """perftest's KEY_PRINT_FMT_GID message, 108 bytes with the NUL"""
    m = "%04x:%04x:%06x:%06x:%08x:%016x:" % (0, 1, qpn, psn, rkey, vaddr)
    m += ":".join("%02x" % b for b in gid) + ":%08x:" % 0
    return m.encode() + b"\0"


def perftest(a):
    """the client half of perftest (ib_read_bw, ib_atomic_bw, ... without
    -R) up to the point where the server's QP is ready, then --ops"""
    c = socket.create_connection((a.server, a.port), timeout=a.timeout)
    my_qpn, my_psn = 0x000222, 0x0bcdef
    my_gid = bytes(10) + b"\xff\xff" + socket.inet_aton(a.bind)
    rv = pt_xchg(c, b"6.06", 16)                     # exchange_versions
    pt_xchg(c, struct.pack("!i", 4096), 4)           # check_sys_data: page size
    pt_xchg(c, struct.pack("!i", 64), 4)             # cache line
    pt_xchg(c, b"3", 2)                              # check_mtu: IBV_MTU_1024
    mine = pt_keys(my_qpn, my_psn, 0, 0, my_gid)
    f = pt_xchg(c, mine, 108).rstrip(b"\0").decode().split(":")
    rqpn, rkey, vaddr = int(f[2], 16), int(f[4], 16), int(f[5], 16)
    print("roce-peer: perftest %s: server qpn %06x rkey %08x vaddr %016x" %
          (rv.rstrip(b"\0").decode(), rqpn, rkey, vaddr), flush=True)
    pt_xchg(c, mine, 108)                            # the two handshakes after
    pt_xchg(c, mine, 108)                            # the server's RTR
    p = Peer(a.bind, a.server, a.timeout)
    deadline = time.monotonic() + a.timeout
    psn = my_psn
    last_read = (64, psn)
    try:
        for op in [o for o in a.ops.split(",") if o]:
            kind, _, arg = op.partition(":")
            if kind in ("read", "readdup", "readbadkey"):
                n = int(arg or 64)
                k = rkey ^ 0x5a5a00 if kind == "readbadkey" else rkey
                rpsn = psn
                if kind == "readdup":
                    n, rpsn = last_read       # the last Read again, its PSN
                p.send(bth(OP["READ_REQ"], rqpn, rpsn, ackreq=1) + struct.pack("!QII", vaddr, k, n))
                npk = max(1, (n + a.mtu - 1) // a.mtu)
                if kind == "readbadkey":
                    pkt = expect(p, (OP["ACK"],), "a NAK", deadline)
                    if pkt[12] != 0x62:
                        raise RuntimeError("expected NAK remote access (0x62), got AETH %02x" % pkt[12])
                    return 0          # the QP is in error now
                for _ in range(npk):
                    expect(p, (OP["READ_RESP_FIRST"], OP["READ_RESP_MIDDLE"], OP["READ_RESP_LAST"],
                               OP["READ_RESP_ONLY"]), "a Read Response", deadline)
                if kind == "read":
                    last_read = (n, psn)
                    psn = (psn + npk) & 0xffffff
            elif kind == "write":
                # RDMA Write First/Middle/Last (or Only) into the server's
                # buffer, AckReq on the last: rxe's ACK
                n = int(arg or 64)
                data = b"\x5a" * n
                chunks = [data[i:i + a.mtu] for i in range(0, n, a.mtu)]
                for i, ch in enumerate(chunks):
                    last = i == len(chunks) - 1
                    body, pad = padded(ch)
                    if len(chunks) == 1:
                        hdr = bth(OP["WRITE_ONLY"], rqpn, psn, 1, pad=pad) + struct.pack("!QII", vaddr, rkey, n)
                    elif i == 0:
                        hdr = bth(0x06, rqpn, psn, pad=pad) + struct.pack("!QII", vaddr, rkey, n)
                    else:
                        hdr = bth(0x08 if last else 0x07, rqpn, psn, int(last), pad=pad)
                    p.send(hdr + body)
                    psn = (psn + 1) & 0xffffff
                pkt = expect(p, (OP["ACK"],), "rxe's ACK of the Write", deadline)
                if pkt[12] >> 5 != 0:
                    raise RuntimeError("expected an ACK, got AETH %02x" % pkt[12])
            elif kind == "sendrnr":
                # a Send while the server has no receive posted (perftest's
                # read/atomic servers post none): RNR NAK (AETH 001ttttt)
                p.send(bth(OP["SEND_ONLY"], rqpn, psn, 1) + b"\x5a" * 4)
                pkt = expect(p, (OP["ACK"],), "an RNR NAK", deadline)
                if pkt[12] >> 5 != 1:
                    raise RuntimeError("expected an RNR NAK, got AETH %02x" % pkt[12])
                return 0
            elif kind in ("fetchadd", "cmpswap"):
                if kind == "fetchadd":
                    body = bth(OP["FETCH_ADD"], rqpn, psn, ackreq=1) + struct.pack("!QIQQ", vaddr, rkey, 1, 0)
                else:
                    body = bth(OP["CMP_SWAP"], rqpn, psn, ackreq=1) + struct.pack("!QIQQ", vaddr, rkey, 1, 2)
                p.send(body)
                expect(p, (OP["ATOMIC_ACK"],), "an Atomic ACK", deadline)
                psn = (psn + 1) & 0xffffff
            else:
                raise RuntimeError("unknown op %s" % kind)
        return 0
    finally:
        for line in p.log:
            print("roce-peer: " + line)
        p.close()
        c.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("pingpong")
    pp.add_argument("--bind", default="10.0.3.1")
    pp.add_argument("--port", type=int, default=18515)
    pp.add_argument("--iters", type=int, default=2)
    pp.add_argument("--size", type=int, default=64)
    pp.add_argument("--mtu", type=int, default=1024)
    pp.add_argument("--extras", default="")
    pp.add_argument("--timeout", type=float, default=30)
    pp.add_argument("--no-ack", action="store_true")
    pp.add_argument("--watch", type=float, default=2)
    pt = sub.add_parser("perftest")
    pt.add_argument("--bind", default="10.0.3.1")
    pt.add_argument("--server", default="10.0.3.2")
    pt.add_argument("--port", type=int, default=18515)
    pt.add_argument("--mtu", type=int, default=1024)
    pt.add_argument("--ops", default="read:64")
    pt.add_argument("--timeout", type=float, default=30)
    a = ap.parse_args()
    try:
        return pingpong(a) if a.cmd == "pingpong" else perftest(a)
    except StopIteration as e:
        print("roce-peer: %s" % e)
        return 0
    except (OSError, RuntimeError, ValueError) as e:
        print("roce-peer: ERROR: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
