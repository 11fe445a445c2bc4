#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Debian's rsocket programs (rdmacm-utils) over libiwarp's rsocket calls
# (verbs/cm_rsocket.c: libxsock's IWARP sockets), both ends under xsock-run:
#   rstream   one connection per run (custom sizes: its default two-phase
#             run reconnects, see libiwarp(7) RSOCKETS), data verified
#             (-T v): nonblocking (default), blocking with the server bound
#             (-b), async (rpoll), and an rsocket server against a plain
#             socket client under xsock-run --iwarp (the same wire)
#             and the same over RoCE v2 (--roce: rsockets' IB form)
#   riostream must fail in riomap with ENOMEM (no iomap: libiwarp(7))
#   rcopy     a 3 MiB random file, compared; and to a destination the
#             server cannot map (a FIFO): the server hangs up mid-transfer
#             and the client must report it (rsockets: ECONNRESET, exit
#             200), not die of SIGPIPE (141)
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
for p in rstream riostream rcopy; do
    command -v $p >/dev/null 2>&1 || { echo "SKIP: $p (rdmacm-utils) not installed"; exit 77; }
done
xs_scratch
fail=0

# pair NAME SRVPRE CLIPRE PROG SRVARGS -- CLIARGS: server, then client; both
# must succeed; sets $tmp/NAME.srv and $tmp/NAME.cli
pair() {
    name=$1 spre=$2 cpre=$3 prog=$4; shift 4
    sargs=
    while [ "$1" != -- ]; do sargs="$sargs $1"; shift; done
    shift
    port=$(xs_free_port)
    # shellcheck disable=SC2086
    timeout 40 $spre "$prog" -p "$port" $sargs >"$tmp/$name.srv" 2>&1 &
    srv=$!
    if [ -n "${nowait:-}" ]; then
        # over RoCE no TCP port listens: the client's REQ is sent again
        # for 1.5 s while nobody listens (libiwarp(7) ROCE)
        sleep 0.3
    elif ! xs_wait_listen "$port"; then
        echo "FAIL $name: server did not listen"; xs_tail "$tmp/$name.srv"; xs_reap $srv; srv=; fail=1; return 1
    fi
    # shellcheck disable=SC2086
    timeout 30 $cpre "$prog" -s 127.0.0.1 -p "$port" "$@" >"$tmp/$name.cli" 2>&1
    crc=$?
    wait $srv; src=$?; srv=
    if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
        echo "FAIL $name: client rc $crc, server rc $src"
        echo "-- client:"; xs_tail "$tmp/$name.cli"; echo "-- server:"; xs_tail "$tmp/$name.srv"; fail=1
        return 1
    fi
    return 0
}

# rstream NAME SRVPRE CLIPRE SRVARGS -- CLIARGS: the result line on both sides
rstream_case() {
    name=$1
    pair "$@" || return
    for f in "$tmp/$name.cli" "$tmp/$name.srv"; do
        if ! grep -q '^custom ' "$f"; then
            echo "FAIL $name: no result line in $(basename "$f")"; cat "$f"; fail=1; return
        fi
    done
    echo "ok rstream $name: $(grep '^custom ' "$tmp/$name.cli" | awk '{print $2 " B x " $3 ": " $7 " Gb/s, " $8 " us/xfer"}')"
}

x="$XS_RUN"
rstream_case nonblocking "$x" "$x" rstream -S 65536 -C 200 -T v -- -S 65536 -C 200 -T v
rstream_case blocking-bound "$x" "$x" rstream -b 127.0.0.1 -S 1000000 -C 20 -T b -T v -- -S 1000000 -C 20 -T b -T v
rstream_case async "$x" "$x" rstream -S 4096 -C 1000 -T a -T v -- -S 4096 -C 1000 -T a -T v
# over RoCE v2 (xsock_roce0, the IB CM): rsockets' InfiniBand form (Writes
# with immediate), rsocket calls and plain sockets under --iwarp
nowait=1
rstream_case roce "$x --roce" "$x --roce" rstream -S 65536 -C 200 -T v -- -S 65536 -C 200 -T v
rstream_case roce-plain "$x --roce" "$x --iwarp --roce" rstream -S 1048576 -C 10 -T b -T v -- \
    -S 1048576 -C 10 -T s -T b -T v
nowait=
rstream_case cross-iwarp "$x" "$x --iwarp" rstream -S 65536 -C 100 -T b -T v -- -S 65536 -C 100 -T s -T b -T v

# riostream: riomap is refused (ENOMEM, as librdmacm with no iomap entry)
port=$(xs_free_port)
timeout 20 "$x" riostream -p "$port" -S 4096 -C 10 >"$tmp/rio.srv" 2>&1 &
srv=$!
if xs_wait_listen "$port"; then
    timeout 20 "$x" riostream -s 127.0.0.1 -p "$port" -S 4096 -C 10 >"$tmp/rio.cli" 2>&1
    wait $srv; srv=
    if grep -q "riomap: Cannot allocate memory" "$tmp/rio.cli"; then
        echo "ok riostream: riomap refused with ENOMEM (no iomap support)"
    else
        echo "FAIL riostream: not the documented riomap ENOMEM"; cat "$tmp/rio.cli"; fail=1
    fi
else
    echo "FAIL riostream: server did not listen"; xs_reap $srv; srv=; fail=1
fi

# rcopy NAME DEST: an rcopy server, then a client copying $tmp/src to
# DEST; $crc is the client's status, $tmp/NAME.cli and .srv the output
rcopy_run() {
    port=$(xs_free_port)
    (cd "$tmp" && exec timeout 40 "$x" rcopy -p "$port") >"$tmp/$1.srv" 2>&1 &
    srv=$!
    if ! xs_wait_listen "$port"; then
        echo "FAIL $1: server did not listen"; fail=1; xs_reap $srv; srv=; return 1
    fi
    timeout 30 "$x" rcopy "$tmp/src" "127.0.0.1:$2" -p "$port" >"$tmp/$1.cli" 2>&1
    crc=$?
    return 0
}

# rcopy: a random file, compared
head -c 3145728 /dev/urandom >"$tmp/src"
if rcopy_run rcopy "$tmp/dst"; then
    i=0
    while ! grep -q "closing...done" "$tmp/rcopy.srv" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    if [ $crc -eq 0 ] && cmp -s "$tmp/src" "$tmp/dst"; then
        echo "ok rcopy 3 MiB: $(grep 'Gb/sec' "$tmp/rcopy.cli")"
    else
        echo "FAIL rcopy: rc $crc or the copy differs"; xs_tail "$tmp/rcopy.cli"; xs_tail "$tmp/rcopy.srv"; fail=1
    fi
    xs_reap $srv; srv=
fi

# rcopy to a FIFO: "error mapping file" on the server, which closes; the
# client's sends fail as rsockets' do (ECONNRESET, no SIGPIPE)
mkfifo "$tmp/fifo"
if rcopy_run rcopy-fifo "$tmp/fifo"; then
    # rcopy exits with its negative return (200, 184: an errno); 124 is
    # timeout's, 129-159 a signal's
    if [ $crc -ne 0 ] && [ $crc -ne 124 ] && { [ $crc -lt 129 ] || [ $crc -gt 159 ]; }; then
        echo "ok rcopy to a FIFO: the client reports the server's hang-up (rc $crc)"
    else
        echo "FAIL rcopy to a FIFO: client rc $crc (141: SIGPIPE; 124: hung)"
        xs_tail "$tmp/rcopy-fifo.cli"; xs_tail "$tmp/rcopy-fifo.srv"; fail=1
    fi
    xs_reap $srv; srv=
fi

# rdma-core's librspreload.so is not checked: python3's sockets carry
# SOCK_CLOEXEC, which rsocket() refuses as librdmacm does (kernel sockets
# then), and socat's relay loop stalls after accepting (libiwarp(7)).
exit $fail
