#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# tests/test-roced.sh's other user: each attack on another user's RoCE
# traffic through the host's local channels, as an unprivileged process
# can try it (roced/README.md).  Prints one line per attack, "refused: ..."
# or "ACCEPTED: ...", and exits 1 if any was accepted.
#
#   roced-attack.py udp QPN N     N forged RC packets for QP QPN by UDP to
#                                 127.0.0.1:4791 (the daemon drops them)
#   roced-attack.py peer QPN N    a QP of ours that names QPN as its peer,
#                                 then N packets for it through the daemon
#   roced-attack.py mad N         N MADs with another CM's comm ID
#   roced-attack.py listen SID    listen on another user's service ID
#   roced-attack.py bind          bind UDP 4791 (plain, SO_REUSEADDR,
#                                 SO_REUSEPORT, both)
#   roced-attack.py garbage       a malformed message (the connection ends)
#   roced-attack.py squat SECS    hold @xsock-roced for SECS seconds
import socket
import struct
import sys
import time

NAME = b"\0xsock-roced"
LO = socket.inet_aton("127.0.0.1") + bytes(12)


def hdr(kind, aux=0, seq=0):
    return struct.pack(">BBHI", kind, 1, aux, seq)


def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(NAME)
    return s


def call(s, msg):
    s.send(msg)
    r = s.recv(64)
    kind, ver, aux, seq, err, value = struct.unpack(">BBHIII", r[:16])
    return err, value


def rc_packet(qpn, psn):
    # RC SEND_ONLY, pkey 0xffff, the QPN, AckReq, the PSN, 16 octets, ICRC
    bth = struct.pack(">BBHI I", 0x04, 0, 0xFFFF, qpn & 0xFFFFFF, 0x80000000 | psn)
    return bth + b"X" * 16 + bytes(4)


def mad_dgram(local_comm_id, remote_comm_id):
    bth = struct.pack(">BBHII", 0x64, 0, 0xFFFF, 1, 0)
    deth = struct.pack(">II", 0x80010000, 1)
    mad = bytearray(256)
    mad[0:4] = bytes([1, 7, 2, 3])  # base version, CM class, version 2, Send
    struct.pack_into(">H", mad, 16, 0x0015)  # DREQ
    struct.pack_into(">II", mad, 24, local_comm_id, remote_comm_id)
    return bth + deth + bytes(mad) + bytes(4)


bad = 0


def say(ok, what):
    global bad
    print(("refused: " if ok else "ACCEPTED: ") + what, flush=True)
    if not ok:
        bad = 1


def main():
    mode = sys.argv[1]
    if mode == "udp":
        qpn, n = int(sys.argv[2]), int(sys.argv[3])
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for i in range(n):
            u.sendto(rc_packet(qpn, i), ("127.0.0.1", 4791))
        print("sent: %d forged packets for QP %d by UDP" % (n, qpn), flush=True)
    elif mode == "peer":
        qpn, n = int(sys.argv[2]), int(sys.argv[3])
        s = conn()
        err, mine = call(s, hdr(1))
        peer = hdr(2) + bytes([4, 0, 0, 0]) + LO + LO + struct.pack(">HHI", 0, 0, qpn)
        err, local = call(s, peer)
        print("claimed QP %d, named QP %d as its peer (local %d)" % (mine, qpn, local), flush=True)
        for i in range(n):
            p = rc_packet(qpn, i)
            s.send(hdr(5) + struct.pack(">HH", len(p), 0) + p)
        print("sent: %d packets for QP %d through the daemon" % (n, qpn), flush=True)
        time.sleep(0.2)
        s.settimeout(0.5)
        try:
            got = s.recv(70000)
            say(False, "the daemon handed QP %d's side something: %d octets" % (qpn, len(got)))
        except socket.timeout:
            say(True, "nothing came back on the posing QP")
    elif mode == "mad":
        n = int(sys.argv[2])
        s = conn()
        err, tag = call(s, hdr(3))
        other = (tag ^ 0x5A5A) or 1
        for i in range(n):
            d = mad_dgram(other << 16 | i, other << 16 | (i + 1))
            body = bytes([0x80 | 4]) + LO + LO + struct.pack(">H", 0) + d
            s.send(hdr(6) + body)
        print("sent: %d MADs posing as CM tag %d (ours %d)" % (n, other, tag), flush=True)
    elif mode == "listen":
        sid = int(sys.argv[2], 0)
        s = conn()
        err, _ = call(s, hdr(4) + bytes([4]) + bytes(7) + struct.pack(">Q", sid))
        say(err != 0, "listen on service 0x%x: errno %d" % (sid, err))
    elif mode == "bind":
        for name, opts in (("plain", []), ("SO_REUSEADDR", [socket.SO_REUSEADDR]),
                           ("SO_REUSEPORT", [socket.SO_REUSEPORT]),
                           ("both", [socket.SO_REUSEADDR, socket.SO_REUSEPORT])):
            for addr in ("0.0.0.0", "127.0.0.1"):
                u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                for o in opts:
                    u.setsockopt(socket.SOL_SOCKET, o, 1)
                try:
                    u.bind((addr, 4791))
                    say(False, "bound UDP %s:4791 (%s)" % (addr, name))
                except OSError as e:
                    say(True, "bind UDP %s:4791 (%s): %s" % (addr, name, e.strerror))
                u.close()
    elif mode == "garbage":
        s = conn()
        s.send(b"\x63\x01\x00\x00\x00\x00\x00\x00junk")
        s.settimeout(2)
        try:
            got = s.recv(100)
            say(got == b"", "a malformed message: the daemon closed the connection")
        except socket.timeout:
            say(False, "a malformed message: the connection stayed")
    elif mode == "squat":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.bind(NAME)
        s.listen(16)
        print("squatting on @xsock-roced", flush=True)
        time.sleep(float(sys.argv[2]))
    else:
        sys.exit("usage: see the top of this file")
    sys.exit(bad)


main()
