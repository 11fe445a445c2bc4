#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""pcap2vec.py: RoCE v2 packets of a capture as vector lines, and an ICRC
check independent of the project's C code (Python's zlib.crc32).

  pcap2vec.py vec PCAP [--max N]     one line per RoCE packet (stdout)
  pcap2vec.py check FILE.hex...      recompute every line's ICRC
  pcap2vec.py checkpcap PCAP...      the same on the captured IP datagrams

A line: v4 SRCIP DSTIP SPORT DPORT IPID FRAG HEX
  IPID  the IPv4 Identification (hex), FRAG the flags + fragment offset word
  (hex, 4000 = DF): the ICRC covers both, so they are kept; the rest of the
  IPv4 header either is masked (TOS, TTL, checksum) or follows (version 4,
  IHL 5, total length 28 + payload, protocol 17).  HEX is the UDP payload:
  BTH .. ICRC.  Lines starting with # are comments.

The ICRC rule (rxe_icrc.c): zlib.crc32 (CRC-32, reflected polynomial
0xEDB88320, register seeded ~0, result inverted) over 8 bytes 0xff (the
masked LRH; rxe starts from 0xdebb20e3, the register after them), the IPv4
header with TOS, TTL and header checksum all ones, the UDP header with its
checksum all ones, the BTH with byte 4 (reserved) all ones, then every byte
after the BTH up to the ICRC (extension headers, payload, pad).  rxe stores
~crc in CPU order on little-endian x86, i.e. the ICRC's 4 bytes are the CRC
little-endian (struct.pack('<I', zlib.crc32(...))).
Exit 1 if any ICRC is wrong or a line cannot be parsed.
"""
import socket
import struct
import sys
import zlib

ROCE_PORT = 4791


def icrc_of(ip20, udp8, roce):
    ip = bytearray(ip20)
    ip[1] = 0xff
    ip[8] = 0xff
    ip[10:12] = b"\xff\xff"
    udp = bytearray(udp8)
    udp[6:8] = b"\xff\xff"
    bth = bytearray(roce[:12])
    bth[4] = 0xff
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(bth) + roce[12:-4]))


def packets(path):
    """-> (ip20, udp8, payload) of each IPv4 UDP datagram to/from port 4791"""
    with open(path, "rb") as f:
        d = f.read()
    if len(d) < 24:
        raise ValueError("%s: not a pcap file" % path)
    magic = struct.unpack("<I", d[:4])[0]
    if magic in (0xa1b2c3d4, 0xa1b23c4d):
        e = "<"
    elif magic in (0xd4c3b2a1, 0x4d3cb2a1):
        e = ">"
    else:
        raise ValueError("%s: not a pcap file (pcapng? use tcpdump -w)" % path)
    link = struct.unpack(e + "I", d[20:24])[0]
    off = 24
    while off + 16 <= len(d):
        incl = struct.unpack(e + "I", d[off + 8:off + 12])[0]
        fr = d[off + 16:off + 16 + incl]
        off += 16 + incl
        if link == 1:             # Ethernet
            if len(fr) < 14 or fr[12:14] != b"\x08\x00":
                continue
            ipd = fr[14:]
        elif link == 113:         # Linux cooked (tcpdump -i any)
            if len(fr) < 16 or fr[14:16] != b"\x08\x00":
                continue
            ipd = fr[16:]
        elif link in (101, 228):  # raw IP
            ipd = fr
        else:
            raise ValueError("%s: link type %d not handled" % (path, link))
        if len(ipd) < 28 or ipd[0] != 0x45 or ipd[9] != 17:
            continue
        tot = struct.unpack("!H", ipd[2:4])[0]
        ipd = ipd[:tot]
        udp = ipd[20:28]
        sport, dport = struct.unpack("!HH", udp[:4])
        if ROCE_PORT not in (sport, dport) or len(ipd) < 28 + 16:
            continue
        yield ipd[:20], udp, ipd[28:]


def line_of(ip20, udp8, roce):
    ident, frag = struct.unpack("!HH", ip20[4:8])
    sport, dport = struct.unpack("!HH", udp8[:4])
    return "v4 %s %s %d %d %04x %04x %s" % (socket.inet_ntoa(ip20[12:16]), socket.inet_ntoa(ip20[16:20]),
                                          sport, dport, ident, frag, roce.hex())


def parse_line(ln):
    """-> (ip20, udp8, roce) rebuilt from a vector line (TOS, TTL and the
    checksums are zero: the ICRC masks them)"""
    f = ln.split()
    if len(f) != 8 or f[0] != "v4":
        raise ValueError("want 8 fields 'v4 SRC DST SPORT DPORT IPID FRAG HEX'")
    roce = bytes.fromhex(f[7])
    ulen = 8 + len(roce)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, int(f[5], 16), int(f[6], 16), 0, 17, 0,
                     socket.inet_aton(f[1]), socket.inet_aton(f[2]))
    udp = struct.pack("!HHHH", int(f[3]), int(f[4]), ulen, 0)
    return ip, udp, roce


def main(argv):
    if len(argv) < 2 or argv[0] not in ("vec", "check", "checkpcap"):
        print(__doc__, file=sys.stderr)
        return 2
    bad = n = 0
    try:
        if argv[0] == "vec":
            mx = int(argv[3]) if len(argv) > 3 and argv[2] == "--max" else None
            for ip, udp, roce in packets(argv[1]):
                if mx is not None and n >= mx:
                    break
                if icrc_of(ip, udp, roce) != roce[-4:]:
                    print("pcap2vec: bad ICRC: %s" % line_of(ip, udp, roce)[:80], file=sys.stderr)
                    bad += 1
                print(line_of(ip, udp, roce))
                n += 1
        elif argv[0] == "checkpcap":
            for p in argv[1:]:
                for ip, udp, roce in packets(p):
                    n += 1
                    if icrc_of(ip, udp, roce) != roce[-4:]:
                        bad += 1
                        print("%s: bad ICRC: %s" % (p, line_of(ip, udp, roce)[:90]))
        else:
            for p in argv[1:]:
                with open(p) as f:
                    for i, ln in enumerate(f, 1):
                        if not ln.strip() or ln.startswith("#"):
                            continue
                        try:
                            ip, udp, roce = parse_line(ln)
                        except ValueError as e:
                            print("%s:%d: %s" % (p, i, e))
                            bad += 1
                            continue
                        n += 1
                        if icrc_of(ip, udp, roce) != roce[-4:]:
                            bad += 1
                            print("%s:%d: bad ICRC (have %s, computed %s)" %
                                  (p, i, roce[-4:].hex(), icrc_of(ip, udp, roce).hex()))
    except (OSError, ValueError) as e:
        print("pcap2vec: %s" % e, file=sys.stderr)
        return 1
    print("pcap2vec: %d packets, %d bad" % (n, bad), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
