#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The mixed listener with unmodified Debian programs: one socat server under
# `xsock-run --iwarp` (its listener in IWARP_MODE; a child per connection
# runs sha256sum over what the client sends and answers the digest) serves
# on one port, in turn: a socat client under `xsock-run --iwarp`, a plain
# socat client (no preload at all), the two at once, and a plain client
# that sends nothing and closes (the digest of no octets).  Each answer
# must be the digest of what that client sent.  When tcpdump can capture
# (root), the capture must hold exactly one MPA Request key per iWARP
# client (not checked when the kernel dropped captured packets).  Skips
# (77) only without socat.
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
command -v socat >/dev/null 2>&1 || { echo "SKIP: no socat (scripts/install-deps.sh)"; exit 77; }
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }

xs_scratch
xs_capture_ok answers

head -c 262144 /dev/urandom >"$tmp/a.bin"
head -c 100000 /dev/urandom >"$tmp/b.bin"
fail=0
port=$(xs_free_port)
if [ $capture = 1 ]; then
    xs_capture_start "$tmp/mixed.pcap" "$tmp/tcpdump.log" "$port" || exit 99
fi
"$XS_RUN" --iwarp timeout 120 socat TCP-LISTEN:"$port",bind=127.0.0.1,reuseaddr,fork \
    SYSTEM:sha256sum 2>"$tmp/srv.err" &
srv=$!
xs_wait_listen "$port" || { echo "FAIL: server did not listen"; cat "$tmp/srv.err"; exit 1; }

# client NAME MODE(iwarp|plain) FILE: the answer must be FILE's digest
client() {
    want=$(sha256sum <"$3" | cut -d' ' -f1)
    if [ "$2" = iwarp ]; then
        "$XS_RUN" --iwarp timeout 60 socat -t 30 - TCP:127.0.0.1:"$port" <"$3" >"$tmp/$1.out" 2>"$tmp/$1.err"
    else
        env -u LD_PRELOAD timeout 60 socat -t 30 - TCP:127.0.0.1:"$port" <"$3" >"$tmp/$1.out" 2>"$tmp/$1.err"
    fi
    got=$(cut -d' ' -f1 "$tmp/$1.out")
    if [ "$got" = "$want" ]; then
        echo "$1 ($2): digest ok"
    else
        echo "FAIL $1 ($2): answer '$got', want $want"; cat "$tmp/$1.err"; fail=1
        return 1
    fi
}

client iwarp-1 iwarp "$tmp/a.bin"
client plain-1 plain "$tmp/b.bin"
client plain-2 plain "$tmp/a.bin"
client iwarp-2 iwarp "$tmp/b.bin"
# the two at once (a failure inside a background job is its exit status)
client both-iwarp iwarp "$tmp/a.bin" & c1=$!
client both-plain plain "$tmp/a.bin" & c2=$!
wait $c1 || fail=1
wait $c2 || fail=1
# a client that says nothing and closes: the server reads end of file
client silent plain /dev/null

xs_reap "$srv"; srv=
if [ $capture = 1 ]; then
    # a loaded machine may drop packets: then the count proves nothing
    if xs_capture_stop "$tmp/tcpdump.log" >"$tmp/stop.out"; then
        req=$(tcpdump -r "$tmp/mixed.pcap" -A 2>/dev/null | grep -c "MPA ID Req Frame")
        echo "capture: MPA Request keys $req (3 iWARP clients)"
        [ "$req" = 3 ] || { echo "FAIL: expected 3 MPA Requests on the wire"; fail=1; }
    else
        echo "note: the capture dropped packets; MPA Requests not counted"
    fi
fi
exit $fail
