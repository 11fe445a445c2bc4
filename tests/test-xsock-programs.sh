#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Unmodified Debian programs over libxsock, both ends under
# `xsock-run --iwarp` (every TCP socket in IWARP_MODE) and again with the
# library preloaded but no IWARP socket (fall-through):
#   curl fetching a 2 MiB file from `python3 -m http.server` (sha256 checked),
#   iperf3 client and server for 2 s (the receiver must report a transfer),
#   sockperf ping-pong for 2 s (messages must come back).
# With tcpdump and root, the forced runs must show the MPA Request and Reply
# on the port, the plain runs no MPA at all (the capture keeps only segments
# that start with "MPA ").  A missing program is a failure
# (scripts/install-deps.sh installs them all).
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
py=/usr/bin/python3 # Debian's, dynamically linked (a pyenv build may not be)

xs_scratch
xs_capture_ok transfers
fail=0

http_case() {
    name=http-$1; run=${1}_run; port=$(xs_free_port)
    rm -f "$tmp/got.bin"
    capture_begin "$name" "$port"
    $run timeout 60 "$py" -m http.server "$port" --bind 127.0.0.1 --directory "$tmp/www" \
        >"$tmp/$name.srv" 2>&1 &
    srv=$!
    xs_wait_listen "$port" || { echo "FAIL $name: server did not listen"; fail=1; }
    url=http://127.0.0.1:$port/f.bin
    if [ "$http_client" = curl ]; then
        $run timeout 60 curl -sS --max-time 50 -o "$tmp/got.bin" "$url" 2>"$tmp/$name.cli"
    else
        $run timeout 60 "$py" -c "$pyget" "$url" "$tmp/got.bin" 2>"$tmp/$name.cli"
    fi
    if [ $? != 0 ]; then
        echo "FAIL $name: $http_client failed"; cat "$tmp/$name.cli"; fail=1
    fi
    stop_server "$name"
    got=$(sha256sum <"$tmp/got.bin" 2>/dev/null | cut -d' ' -f1)
    if [ "$got" = "$want" ]; then
        echo "$name: $http_client fetched 2 MiB, sha256 ok"
    else
        echo "FAIL $name: sha256 $got != $want"; cat "$tmp/$name.srv"; fail=1
    fi
    capture_end "$name" "$1"
}

iperf_case() {
    name=iperf3-$1; run=${1}_run; port=$(xs_free_port)
    capture_begin "$name" "$port"
    $run timeout 60 iperf3 -s -1 -B 127.0.0.1 -p "$port" >"$tmp/$name.srv" 2>&1 &
    srv=$!
    xs_wait_listen "$port" || { echo "FAIL $name: server did not listen"; fail=1; }
    if ! $run timeout 60 iperf3 -c 127.0.0.1 -p "$port" -t 2 >"$tmp/$name.cli" 2>&1; then
        echo "FAIL $name: client failed"; cat "$tmp/$name.cli"; fail=1
    fi
    wait "$srv"; rc=$?; srv=
    [ "$rc" = 0 ] || { echo "FAIL $name: server exit $rc"; cat "$tmp/$name.srv"; fail=1; }
    line=$(grep ' receiver$' "$tmp/$name.cli" | tail -1)
    # "[  5]   0.00-2.00   sec  3.33 GBytes  14.3 Gbits/sec   receiver"
    if echo "$line" | awk '{ exit !($5 + 0 > 0 && ($6 == "MBytes" || $6 == "GBytes")) }'; then
        echo "$name: $(echo "$line" | awk '{ print $5, $6, $7, $8 }')"
    else
        echo "FAIL $name: no transfer reported"; cat "$tmp/$name.cli"; fail=1
    fi
    capture_end "$name" "$1"
}

sockperf_case() {
    name=sockperf-$1; run=${1}_run; port=$(xs_free_port)
    capture_begin "$name" "$port"
    $run timeout 60 sockperf server --tcp -i 127.0.0.1 -p "$port" >"$tmp/$name.srv" 2>&1 &
    srv=$!
    xs_wait_listen "$port" || { echo "FAIL $name: server did not listen"; fail=1; }
    if ! $run timeout 60 sockperf ping-pong --tcp -i 127.0.0.1 -p "$port" -t 2 \
        >"$tmp/$name.cli" 2>&1; then
        echo "FAIL $name: client failed"; cat "$tmp/$name.cli"; fail=1
    fi
    stop_server "$name"
    n=$(sed -n 's/.*ReceivedMessages=\([0-9]*\).*/\1/p' "$tmp/$name.cli" | tail -1)
    lat=$(sed -n 's/.*Summary: Latency is \([0-9.]*\).*/\1/p' "$tmp/$name.cli" | tail -1)
    if [ -n "$n" ] && [ "$n" -gt 0 ] && [ -n "$lat" ]; then
        echo "$name: $n round trips, average latency $lat us"
    else
        echo "FAIL $name: no round trips"; cat "$tmp/$name.cli"; fail=1
    fi
    capture_end "$name" "$1"
}

# Debian's curl hangs in setlocale() at start-up whenever libasan is
# preloaded (with or without xsock), so a sanitizer build fetches with
# Python's urllib instead; the plain build uses curl.
http_client=curl
pyget='import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=50) as r, open(sys.argv[2], "wb") as f:
    f.write(r.read())'
case "${LD_PRELOAD:-}" in
*libasan*) http_client="python3 urllib" ;;
esac
if [ -x "$py" ] && command -v curl >/dev/null 2>&1; then
    mkdir "$tmp/www"
    head -c 2097152 /dev/urandom >"$tmp/www/f.bin"
    want=$(sha256sum <"$tmp/www/f.bin" | cut -d' ' -f1)
    http_case iwarp
    http_case plain
else
    echo "FAIL: $py or curl missing (scripts/install-deps.sh installs it)"; fail=1
fi
if command -v iperf3 >/dev/null 2>&1; then
    iperf_case iwarp
    iperf_case plain
else
    echo "FAIL: iperf3 missing (scripts/install-deps.sh installs it)"; fail=1
fi
if command -v sockperf >/dev/null 2>&1; then
    sockperf_case iwarp
    sockperf_case plain
else
    echo "FAIL: sockperf missing (scripts/install-deps.sh installs it)"; fail=1
fi
exit $fail
