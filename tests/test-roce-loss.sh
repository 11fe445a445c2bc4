#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The RoCE RC engine on a lossy wire: two network namespaces whose taps
# tools/xsock-impair joins, dropping 2% of the frames each way (200 us
# delay), xsock_roce0 at both ends, connected without the CM.  Debian's
# unmodified ibv_rc_pingpong --chk (Sends of 1 B .. 64 KiB, data checked)
# and perftest without -R (Send, Write, Read, Atomic, Write latency) must
# complete: NAK-sequence and timeout go-back-N, duplicate Sends and Writes
# re-ACKed, Reads resent from their first missing response.  Then the
# wire also reorders (xsock-impair --reorder 10:3, 1% loss): Writes placed
# ahead of a gap (XSOCK_ROCE_OOO, counted in the server's XSOCK_DEBUG line
# at QP destroy), with it on and off.  Root only
# (namespaces, taps).  An argument runs only the cells it matches (grep -E).
set -u
only=${1:-.}
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
bld=${XS_TOP_BUILDDIR:-.}
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
for p in ibv_rc_pingpong ib_send_bw; do
    command -v $p >/dev/null 2>&1 ||
        { echo "FAIL: $p missing (scripts/install-deps.sh installs it)"; exit 1; }
done
ns_a=xsrl-a$$ ns_b=xsrl-b$$ tap_a=xsrla$$ tap_b=xsrlb$$
tmp=$(mktemp -d /tmp/xsock-roce-loss.XXXXXX)
imp=
cleanup() {
    [ -n "$imp" ] && kill "$imp" 2>/dev/null && wait "$imp" 2>/dev/null
    ip netns del "$ns_a" 2>/dev/null
    ip netns del "$ns_b" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
# the machine's limits skip (one SKIP line each), anything else fails
[ -c /dev/net/tun ] || { echo "SKIP: no /dev/net/tun (tap devices)"; exit 77; }
{ ip netns add "$ns_a" && ip netns add "$ns_b"; } ||
    { echo "SKIP: cannot create network namespaces (ip netns add)"; exit 77; }
{
    ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up &&
        ip -n "$ns_a" tuntap add dev "$tap_a" mode tap &&
        ip -n "$ns_b" tuntap add dev "$tap_b" mode tap
} || { echo "FAIL: cannot make the taps in the namespaces"; exit 1; }
"$bld/tools/xsock-impair" "$ns_a" "$tap_a" "$ns_b" "$tap_b" 200 20000 >"$tmp/impair" 2>&1 &
imp=$!
ip -n "$ns_a" addr add 10.78.0.1/24 dev "$tap_a" && ip -n "$ns_b" addr add 10.78.0.2/24 dev "$tap_b" &&
    ip -n "$ns_a" link set "$tap_a" up && ip -n "$ns_b" link set "$tap_b" up ||
    { echo "FAIL: addresses"; exit 1; }
sleep 0.5

# the GID index of ::ffff:ADDR on xsock_roce0, inside namespace NS
gid_of() {
    ip netns exec "$1" "$XS_RUN" ibv_devinfo -v -d xsock_roce0 2>/dev/null |
        sed -n "s/.*GID\[ *\([0-9]*\)\]:[[:space:]]*::ffff:$2,.*/\1/p" | head -1
}
ga=$(gid_of "$ns_a" 10.78.0.1) gb=$(gid_of "$ns_b" 10.78.0.2)
[ -n "$ga" ] && [ -n "$gb" ] || { echo "FAIL: no GID for 10.78.0.x"; exit 1; }
fail=0

# name, server args, client args (perftest: -x GID; pingpong: -g GID)
cell() {
    name=$1 srv=$2 cli=$3
    echo "$name" | grep -Eq -- "$only" || return 0
    t0=$(date +%s)
    # (the server's log lines say, if it hangs, whether it was resending)
    ip netns exec "$ns_a" env XSOCK_DEBUG=1 timeout 120 "$XS_RUN" $srv >"$tmp/s" 2>&1 &
    spid=$!
    sleep 0.5
    ip netns exec "$ns_b" timeout 120 "$XS_RUN" $cli 10.78.0.1 >"$tmp/c" 2>&1
    crc=$?
    # the server ends within its linger (1 s) of the client
    xs_hang_wait $spid 30 >"$tmp/hang"
    wait $spid
    src=$?
    if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
        echo "FAIL $name: client rc $crc, server rc $src"
        echo "-- client"; tail -25 "$tmp/c"
        echo "-- server"; tail -25 "$tmp/s"
        cat "$tmp/hang"
        fail=1
    else
        echo "ok $name ($(($(date +%s) - t0)) s): $(grep -E 'iters in|^ *[0-9]+ +[0-9]+ ' "$tmp/c" | tail -1)"
    fi
}

for s in 1 1025 65536; do
    n=200
    [ $s = 65536 ] && n=30
    cell "pingpong --chk -s $s" "ibv_rc_pingpong -d xsock_roce0 -g $ga --chk -s $s -n $n" \
        "ibv_rc_pingpong -d xsock_roce0 -g $gb --chk -s $s -n $n"
done
for t in "ib_send_bw -s 65536 -n 200" "ib_write_bw -s 65536 -n 200" "ib_read_bw -s 65536 -n 100" \
    "ib_read_bw -s 3000 -n 300" "ib_atomic_bw -n 300" "ib_write_lat -s 2048 -n 300"; do
    cell "$t" "$t -d xsock_roce0 -x $ga" "$t -d xsock_roce0 -x $gb"
done
kill "$imp" 2>/dev/null && wait "$imp" 2>/dev/null
imp=
echo "wire: $(tail -2 "$tmp/impair" | tr '\n' ' ')"

# the reordering wire: the same taps, a new impairer
"$bld/tools/xsock-impair" --reorder 10:3 "$ns_a" "$tap_a" "$ns_b" "$tap_b" 200 10000 \
    >"$tmp/impair" 2>&1 &
imp=$!
sleep 0.3
for ooo in 1 0; do
    export XSOCK_ROCE_OOO=$ooo XSOCK_DEBUG=1
    cell "reorder ooo=$ooo ib_write_bw" "ib_write_bw -s 65536 -n 300 -d xsock_roce0 -x $ga" \
        "ib_write_bw -s 65536 -n 300 -d xsock_roce0 -x $gb"
    ahead=$(sed -n 's/.* \([0-9]*\) Write packets placed ahead of a gap/\1/p' "$tmp/s" |
        awk '{ n += $1 } END { print n + 0 }')
    if echo "reorder ooo=$ooo ib_write_bw" | grep -Eq -- "$only"; then
        echo "   placed ahead: $ahead"
        if [ "$ooo" = 1 ] && [ "$ahead" -eq 0 ]; then
            echo "FAIL reorder: nothing placed ahead with XSOCK_ROCE_OOO=1"
            fail=1
        elif [ "$ooo" = 0 ] && [ "$ahead" -ne 0 ]; then
            echo "FAIL reorder: $ahead placed ahead with XSOCK_ROCE_OOO=0"
            fail=1
        fi
    fi
    cell "reorder ooo=$ooo pingpong --chk" \
        "ibv_rc_pingpong -d xsock_roce0 -g $ga --chk -s 65536 -n 30" \
        "ibv_rc_pingpong -d xsock_roce0 -g $gb --chk -s 65536 -n 30"
done
unset XSOCK_ROCE_OOO XSOCK_DEBUG
kill "$imp" 2>/dev/null && wait "$imp" 2>/dev/null
imp=
echo "wire: $(tail -2 "$tmp/impair" | tr '\n' ' ')"
exit $fail
