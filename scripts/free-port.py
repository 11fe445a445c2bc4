#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Print a TCP port for a test server to listen on.

The port comes from below the kernel's ephemeral range, so no client's
connect() can be handed it between our check and the server's bind (a
port the kernel picks with bind(0) is an ephemeral one, and under a
parallel test run another test's client took it: rsyncd failed with
EADDRINUSE).  A reservation file stops two tests that run at once from
choosing the same port; reservations older than ten minutes are stale.
"""
import os
import random
import socket
import stat
import time

RESERVE_S = 600


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def bindable(port):
    for fam, addr, kind in ((socket.AF_INET, "0.0.0.0", socket.SOCK_STREAM),
                            (socket.AF_INET, "0.0.0.0", socket.SOCK_DGRAM)):
        s = socket.socket(fam, kind)
        try:
            s.bind((addr, port))
        except OSError:
            return False
        finally:
            s.close()
    return True


def reserve(port, d):
    path = os.path.join(d, str(port))
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.close(fd)
        return True
    except FileExistsError:
        try:
            if time.time() - os.stat(path).st_mtime > RESERVE_S:
                os.utime(path)
                return True
        except OSError:
            pass
        return False


def reserve_dir():
    """This user's reservation folder, refused unless it is this user's own:
    its name is predictable, and another user could make it first (or a
    symbolic link by its name) to choose or hide our reservations."""
    d = os.path.join(os.environ.get("TMPDIR", "/tmp"), "xsock-ports-%d" % os.getuid())
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(d)
    if (not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid()
            or st.st_mode & 0o022):
        raise SystemExit("free-port: %s is not this user's own folder "
                         "(someone else made it, or others may write it)" % d)
    return d


def main():
    hi = min(ephemeral_low(), 65536) - 1
    lo = max(1024, hi - 16383)
    d = reserve_dir()
    rng = random.SystemRandom()
    for _ in range(1000):
        port = rng.randint(lo, hi)
        if bindable(port) and reserve(port, d):
            print(port)
            return
    raise SystemExit("free-port: no free port in %d-%d" % (lo, hi))


main()
