#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# An unmodified program over libxsock: Debian's socat copies a 3 MB file
# from a client to a server, both under `xsock-run --iwarp` (every TCP
# socket in IWARP_MODE), then again without --iwarp (fall-through).  The
# received file's SHA-256 must match.  When tcpdump can capture (root),
# the forced run must show the MPA Request/Reply keys on the port and the
# plain run must not.  Skips (77) only without socat.
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
command -v socat >/dev/null 2>&1 || { echo "SKIP: no socat (scripts/install-deps.sh)"; exit 77; }
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }

xs_scratch
xs_capture_ok transfers

head -c 3145728 /dev/urandom >"$tmp/in.bin"
want=$(sha256sum <"$tmp/in.bin" | cut -d' ' -f1)
fail=0

# the plain run preloads libxsock too, without IWARP_MODE: fall-through
socklib=${XS_TOP_BUILDDIR:-.}/libxsock/.libs/libxsock.so.0
plain_run() {
    LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD }$socklib" XSOCK_IWARP= "$@"
}
iwarp_run() {
    "$XS_RUN" --iwarp "$@"
}

run_case() {
    name=$1; run=$2
    port=$(xs_free_port)
    rm -f "$tmp/out.bin"
    if [ $capture = 1 ]; then
        # the handshake only: a full capture of 3 MiB at loopback speed
        # drops packets on a loaded machine (CI: 22 under ASan)
        xs_capture_start "$tmp/$name.pcap" "$tmp/$name.tcpdump" "$port" "$xs_mpa_keys_filter" || exit 99
    fi
    $run timeout 60 socat -u TCP-LISTEN:"$port",bind=127.0.0.1,reuseaddr \
        OPEN:"$tmp/out.bin",creat,trunc 2>"$tmp/$name.srv" &
    srv=$!
    xs_wait_listen "$port" || { echo "FAIL $name: server did not listen"; cat "$tmp/$name.srv"; fail=1; }
    if ! $run timeout 60 socat -u OPEN:"$tmp/in.bin" TCP:127.0.0.1:"$port" 2>"$tmp/$name.cli"; then
        echo "FAIL $name: client failed"; cat "$tmp/$name.cli"; fail=1
    fi
    wait "$srv"; rc=$?; srv=
    [ "$rc" = 0 ] || { echo "FAIL $name: server exit $rc"; cat "$tmp/$name.srv"; fail=1; }
    got=$(sha256sum <"$tmp/out.bin" 2>/dev/null | cut -d' ' -f1)
    if [ "$got" = "$want" ]; then
        echo "$name: 3 MiB transferred, sha256 ok"
    else
        echo "FAIL $name: sha256 $got != $want"; fail=1
    fi
    if [ $capture = 1 ]; then
        # drops are the instrument's: the key counts below decide
        xs_capture_stop "$tmp/$name.tcpdump"
        req=$(tcpdump -r "$tmp/$name.pcap" -A 2>/dev/null | grep -c "MPA ID Req Frame")
        rep=$(tcpdump -r "$tmp/$name.pcap" -A 2>/dev/null | grep -c "MPA ID Rep Frame")
        pkts=$(tcpdump -r "$tmp/$name.pcap" 2>/dev/null | wc -l)
        echo "$name: capture: $pkts packets, MPA Request keys $req, Reply keys $rep"
        CAP_REQ=$req
        CAP_REP=$rep
    fi
}

run_case iwarp iwarp_run
if [ $capture = 1 ] && { [ "$CAP_REQ" -lt 1 ] || [ "$CAP_REP" -lt 1 ]; }; then
    echo "FAIL iwarp: no MPA handshake on the wire"; fail=1
fi
run_case plain plain_run
if [ $capture = 1 ] && [ "$CAP_REQ" -ne 0 ]; then
    echo "FAIL plain: MPA on the wire without --iwarp"; fail=1
fi
exit $fail
