#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Soak: many GiB through xsock on loopback, every octet checked with SHA-256.
# Not part of `make check` (it runs for minutes).
#
#   scripts/soak.sh [BUILDDIR]
#
# 1. verbs: tests/xsock-soak moves $SOAK_GIB GiB (default 10) with RDMA
#    Write and RDMA Read of random sizes (1 octet to 4 MiB), both
#    directions, a SHA-256 (OpenSSL EVP) of each source and sink range;
#    reports mismatches and RSS after warm-up and at the end.
# 2. IWARP sockets: socat under `xsock-run --iwarp` on both ends carries
#    $SOAK_SOCK_GIB GiB (default 10) of AES-CTR keystream in each
#    direction; sha256sum of what was sent and what arrived, and the
#    receiving socat's RSS sampled every second (first and last sample).
# Exit 0 only if both parts pass.  BUILDDIR defaults to build/.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
bdir=$(cd "${1:-$top/build}" && pwd) || exit 2
gib=${SOAK_GIB:-10}
sgib=${SOAK_SOCK_GIB:-10}
fail=0

[ -x "$bdir/tests/xsock-soak" ] || make -C "$bdir" -s tests/xsock-soak || exit 2
XS_TOP_BUILDDIR=$bdir
. "$top/tests/xs_test_lib.sh"

echo "== verbs: $gib GiB of RDMA Write/Read =="
timeout 3600 "$bdir/tests/xsock-soak" "$gib" || fail=1

echo "== IWARP sockets: $sgib GiB each way through socat =="
if ! command -v socat >/dev/null 2>&1 || ! command -v openssl >/dev/null 2>&1; then
    echo "skipped: needs socat and openssl (scripts/install-deps.sh)"
    exit $fail
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
bytes=$(awk "BEGIN { printf \"%d\", $sgib * 1073741824 }")

# the keystream: reproducible, fast, not compressible
gen() {
    openssl enc -aes-128-ctr -nosalt -pass "pass:xsock-soak-$1" -in /dev/zero 2>/dev/null |
        head -c "$bytes"
}

# VmRSS (KiB) of process $1 each second into $2 until it exits.
rss_watch() {
    while [ -r "/proc/$1/status" ]; do
        awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null >>"$2"
        sleep 1
    done
}

# one direction: $1 name; the listener receives ($2 = recv) or sends ($2 = send)
sock_case() {
    name=$1 mode=$2
    port=$(xs_free_port)
    want=$(gen "$name" | sha256sum | cut -d' ' -f1)
    t0=$(date +%s.%N)
    if [ "$mode" = recv ]; then
        "$XS_RUN" --iwarp timeout 1800 socat -b 1048576 -u TCP-LISTEN:"$port",bind=127.0.0.1,reuseaddr \
            STDOUT 2>"$tmp/$name.srv" | sha256sum >"$tmp/$name.got" &
        xs_wait_listen "$port" || { echo "FAIL $name: no listener"; fail=1; return; }
        rpid=$(pgrep -n -f "TCP-LISTEN:$port" || true)
        [ -n "$rpid" ] && rss_watch "$rpid" "$tmp/$name.rss" &
        gen "$name" | "$XS_RUN" --iwarp timeout 1800 socat -b 1048576 -u STDIN TCP:127.0.0.1:"$port" \
            2>"$tmp/$name.cli" || { echo "FAIL $name: sender failed"; cat "$tmp/$name.cli"; fail=1; }
    else
        gen "$name" | "$XS_RUN" --iwarp timeout 1800 socat -b 1048576 -u STDIN \
            TCP-LISTEN:"$port",bind=127.0.0.1,reuseaddr 2>"$tmp/$name.srv" &
        xs_wait_listen "$port" || { echo "FAIL $name: no listener"; fail=1; return; }
        "$XS_RUN" --iwarp timeout 1800 socat -b 1048576 -u TCP:127.0.0.1:"$port" STDOUT \
            2>"$tmp/$name.cli" | sha256sum >"$tmp/$name.got" &
        sleep 0.5
        rpid=$(pgrep -n -f "TCP:127.0.0.1:$port" || true)
        [ -n "$rpid" ] && rss_watch "$rpid" "$tmp/$name.rss" &
    fi
    wait
    t1=$(date +%s.%N)
    got=$(cut -d' ' -f1 "$tmp/$name.got")
    rss=$(awk 'NR == 1 {f = $1} {l = $1} END {printf "%s -> %s KiB (%d samples)", f, l, NR}' \
        "$tmp/$name.rss" 2>/dev/null)
    mbs=$(awk "BEGIN { printf \"%.0f\", $bytes / 1e6 / ($t1 - $t0) }")
    if [ "$got" = "$want" ]; then
        echo "$name: $sgib GiB, sha256 ok, $mbs MB/s, receiver RSS $rss"
    else
        echo "FAIL $name: sha256 $got != $want (receiver RSS $rss)"
        sed -n 1,5p "$tmp/$name.srv" "$tmp/$name.cli"
        fail=1
    fi
}

sock_case to-listener recv
sock_case from-listener send
[ $fail = 0 ] && echo "soak: PASS" || echo "soak: FAIL"
exit $fail
