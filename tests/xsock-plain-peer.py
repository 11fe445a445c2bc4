#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The plain servers and the client of tests/test-xsock-plain.sh.
#
#   xsock-plain-peer.py server KIND PORT[,PORT...] LOG
#       a plain TCP server on 127.0.0.1:PORT (each); per connection it logs the
#       first 16 octets it got (hex) to LOG, answers "PONG\n" to a line
#       that holds PING, and to anything else as KIND says:
#         echo    echoes it (a server that waits for the client to speak)
#         greet   sends "220 ready\r\n" first, then ignores it (SMTP, SSH)
#         error   "ERR\r\n" and closes (an HTTP 400)
#         silent  nothing (waits for a whole request of its own protocol)
#         close   closes a connection that begins with anything but PING
#                 at once (a server that hangs up on a protocol it does
#                 not know)
#   xsock-plain-peer.py client PORT WAIT N
#       N connections in a row, each: connect (WAIT: block, or non-blocking
#       then select, poll, epoll, epollet, epollpre (registered before the
#       connect), epollpreet (the same, EPOLLET), readnow (a blocking send
#       and recv at once), writenow (a non-blocking send and recv at once:
#       EAGAIN while it connects, as a kernel socket's, then poll)),
#       "PING i\n", wait for "PONG"; prints one line per connection with
#       the socket's IWARP_MODE after the exchange and the connect's
#       duration (writenow: and what the early calls gave).  Exit 0 when
#       every one got its PONG.
#   xsock-plain-peer.py stay PORT,PORT,... READY [WAIT]
#       one connection (WAIT as above: block, or poll) to each port in
#       turn, each "PING" and its
#       "PONG" (kept open); then writes its pid and "ready" (or
#       "failed") to READY and sleeps until READY is gone (at most 60 s),
#       so that xsock-stat sees a live process whose connects went plain.
import errno
import os
import select
import socket
import sys
import threading
import time

SOL_IWARP, IWARP_MODE = 0x69774152, 1


def serve(kind, ports, log):
    lsts = []
    for port in ports:
        lst = socket.socket()
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lst.bind(("127.0.0.1", port))
        lst.listen(64)
        lsts.append(lst)
    lock = threading.Lock()

    def conn(c):
        first = b""
        try:
            if kind == "greet":
                c.sendall(b"220 ready\r\n")
            while True:
                d = c.recv(65536)
                if not d:
                    break
                if not first:
                    first = d[:16]
                    with lock, open(log, "a") as f:
                        f.write(first.hex() + "\n")
                if b"PING" in d:
                    c.sendall(b"PONG\n")
                elif kind == "close":
                    break
                elif kind == "echo":
                    c.sendall(d)
                elif kind == "error":
                    c.sendall(b"ERR\r\n")
                    break
        except OSError:
            pass
        c.close()

    def accepter(lst):
        while True:
            c, _ = lst.accept()
            threading.Thread(target=conn, args=(c,), daemon=True).start()

    for lst in lsts[1:]:
        threading.Thread(target=accepter, args=(lst,), daemon=True).start()
    accepter(lsts[0])


def wait_connected(s, how):
    fd = s.fileno()
    if how == "writenow":
        how = "poll"
    if how == "select":
        _, w, _ = select.select([], [fd], [], 10)
        ok = bool(w)
    elif how == "poll":
        p = select.poll()
        p.register(fd, select.POLLOUT)
        ok = bool(p.poll(10000))
    elif how in ("epoll", "epollet"):
        ep = select.epoll()
        ep.register(fd, select.EPOLLOUT | (select.EPOLLET if how == "epollet" else 0))
        ok = bool(ep.poll(10))
        ep.close()
    else:
        return
    if not ok:
        raise OSError(errno.ETIMEDOUT, "no writability")


def ping_pong(s, msg):
    """Send msg, read until the server's PONG (or its end); what came."""
    s.sendall(msg)
    got = b""
    while b"PONG" not in got:
        d = s.recv(100)
        if not d:
            break
        got += d
    return got


def client(port, how, n):
    ok = 0
    for i in range(n):
        t0 = time.monotonic()
        s = socket.socket()
        ep = None
        if how != "block":
            s.setblocking(False)
        if how in ("epollpre", "epollpreet"):
            ep = select.epoll()
            ep.register(s.fileno(), select.EPOLLOUT | select.EPOLLIN |
                        (select.EPOLLET if how == "epollpreet" else 0))
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        early, sent, got = "", False, b""
        if how == "writenow":
            try:
                sent = s.send(b"PING %d\n" % i) > 0
                early = " early send %d" % sent
            except BlockingIOError:
                early = " early send EAGAIN"
            try:
                got = s.recv(100)
                early += " recv %d" % len(got)
            except BlockingIOError:
                early += " recv EAGAIN"
        if ep:
            if not ep.poll(10):
                print("conn %d: the epoll set saw nothing" % i)
                continue
        else:
            wait_connected(s, how)
        dt = (time.monotonic() - t0) * 1000
        err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        s.setblocking(True)
        s.settimeout(10)
        # "readnow" waited for nothing: its first send is the wait
        if b"PONG" not in got:
            got += ping_pong(s, b"" if sent else b"PING %d\n" % i)
        # (after the exchange: a probe that is not decided yet reads 1)
        mode = s.getsockopt(SOL_IWARP, IWARP_MODE)
        if ep:
            ep.close()
        s.close()
        good = err == 0 and b"PONG" in got
        ok += good
        print("conn %d: %s iwarp_mode %d%s connect %.2f ms" %
              (i, "ok" if good else "FAILED (SO_ERROR %d)" % err, mode, early, dt))
    return 0 if ok == n else 1


def stay(ports, ready, how):
    socks, ok = [], True
    for port in ports:
        s = socket.socket()
        try:
            if how == "block":
                s.connect(("127.0.0.1", port))
            else:
                s.setblocking(False)
                try:
                    s.connect(("127.0.0.1", port))
                except BlockingIOError:
                    pass
                wait_connected(s, how)
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise OSError(err, os.strerror(err))
            s.settimeout(10)
            ok = ok and b"PONG" in ping_pong(s, b"PING\n")
        except OSError as e:
            print("port %d: %s" % (port, e))
            ok = False
        socks.append(s)
    with open(ready + ".tmp", "w") as f:
        f.write("%d %s\n" % (os.getpid(), "ready" if ok else "failed"))
    os.rename(ready + ".tmp", ready)
    t0 = time.monotonic()
    while os.path.exists(ready) and time.monotonic() - t0 < 60:
        time.sleep(0.05)
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve(sys.argv[2], [int(p) for p in sys.argv[3].split(",")], sys.argv[4])
    elif sys.argv[1] == "stay":
        sys.exit(stay([int(p) for p in sys.argv[2].split(",")], sys.argv[3],
                      sys.argv[4] if len(sys.argv) > 4 else "block"))
    else:
        sys.exit(client(int(sys.argv[2]), sys.argv[3], int(sys.argv[4])))
