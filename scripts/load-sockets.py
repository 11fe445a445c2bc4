#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Echo load through IWARP sockets (scripts/load.sh runs both ends under
`xsock-run --iwarp`, so every TCP socket here is a libxsock IWARP socket).

  load-sockets.py server PORT
  load-sockets.py client PORT CONNS SECONDS

The server echoes what each connection sends.  The client opens CONNS
connections, then keeps one 22-octet message (connection index, sequence
number) going on each for SECONDS, comparing every echo; it prints
"sockets load: ..." and exits 0 only without errors.  Both print VmRSS.
"""
import selectors, socket, sys, time, resource
def rss():
    for l in open('/proc/self/status'):
        if l.startswith('VmRSS'): return int(l.split()[1])
mode, port = sys.argv[1], int(sys.argv[2])
sel = selectors.PollSelector()
if mode == 'server':
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(('127.0.0.1', port)); ls.listen(1024); ls.setblocking(False)
    sel.register(ls, selectors.EVENT_READ, None)
    n = 0
    while True:
        for key, ev in sel.select(1.0):
            if key.data is None:
                try:
                    c, _ = ls.accept()
                except BlockingIOError:
                    continue
                c.setblocking(False); sel.register(c, selectors.EVENT_READ, 1); n += 1
                if n % 250 == 0: print('server', n, 'conns rss', rss(), flush=True)
            else:
                s = key.fileobj
                try:
                    d = s.recv(65536)
                except BlockingIOError:
                    continue
                if not d:
                    sel.unregister(s); s.close(); continue
                try:
                    s.sendall(d)
                except OSError:
                    sel.unregister(s); s.close()
else:
    N, secs = int(sys.argv[3]), float(sys.argv[4])
    r0 = rss(); conns = []
    for i in range(N):
        s = socket.create_connection(('127.0.0.1', port)); conns.append(s)
    r1 = rss()
    print('client: %d connected, rss %d -> %d KiB' % (N, r0, r1), flush=True)
    for i, s in enumerate(conns):
        s.setblocking(False); sel.register(s, selectors.EVENT_READ, i)
    seq = [0]*N; buf = [b'']*N; echoes = errors = 0
    def msg(i): return b'%08d:%012d\n' % (i, seq[i])
    for i, s in enumerate(conns): s.sendall(msg(i))
    t0 = time.time()
    while time.time() - t0 < secs:
        for key, ev in sel.select(1.0):
            i = key.data; s = key.fileobj
            try: d = s.recv(65536)
            except BlockingIOError: continue
            if not d: errors += 1; sel.unregister(s); continue
            buf[i] += d
            want = msg(i)
            if len(buf[i]) >= len(want):
                if buf[i][:len(want)] != want: errors += 1
                buf[i] = buf[i][len(want):]; echoes += 1; seq[i] += 1
                s.sendall(msg(i))
    print('sockets load: %d connections, %.0f s, %d echoes (%.0f/s), %d errors, rss %d KiB' % (N, secs, echoes, echoes/secs, errors, rss()), flush=True)
    for s in conns: s.close()
    sys.exit(1 if errors else 0)
