#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Zero-copy send's automatic mode (the default, XSOCK_ZC=auto) to a peer
# whose address is not ours: tests/test-verbs-zc serve and connect in two
# network namespaces joined by a veth pair.  The requester's first large
# write tries SENDMSG_ZC, the kernel reports that it copied (the peer is
# a socket of this host after all), and the connection sends with copies
# from then on: test-verbs-zc connect checks its counters for exactly one
# zero-copy write, one copied.  Root only (namespaces).
set -u
bld=${XS_TOP_BUILDDIR:-.}
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
command -v ip >/dev/null 2>&1 || { echo "SKIP: needs ip(8)"; exit 77; }
ns_a=xszc-a$$ ns_b=xszc-b$$ if_a=xszca$$ if_b=xszcb$$
tmp=$(mktemp -d /tmp/xsock-zc-veth.XXXXXX)
srv=
cleanup() {
    [ -n "$srv" ] && kill "$srv" 2>/dev/null
    [ -n "$srv" ] && wait "$srv" 2>/dev/null
    ip netns del "$ns_a" 2>/dev/null
    ip netns del "$ns_b" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 99' INT TERM
{
    ip netns add "$ns_a" && ip netns add "$ns_b" &&
        ip link add "$if_a" netns "$ns_a" type veth peer name "$if_b" netns "$ns_b" &&
        ip -n "$ns_a" addr add 10.79.0.1/24 dev "$if_a" &&
        ip -n "$ns_b" addr add 10.79.0.2/24 dev "$if_b" &&
        ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up &&
        ip -n "$ns_a" link set "$if_a" up && ip -n "$ns_b" link set "$if_b" up
} || { echo "SKIP: cannot make namespaces and a veth pair"; exit 77; }

# the defaults, whatever the caller's environment says
unset XSOCK_ZC XSOCK_ZC_MIN
# (fresh namespaces: any port is free)
ip netns exec "$ns_a" "$bld/tests/test-verbs-zc" serve 10.79.0.1 7471 >"$tmp/serve" 2>&1 &
srv=$!
i=0
until grep -q listening "$tmp/serve"; do
    i=$((i + 1))
    if [ $i -gt 200 ] || ! kill -0 "$srv" 2>/dev/null; then
        echo "FAIL: the server did not listen"; cat "$tmp/serve"; exit 1
    fi
    sleep 0.05
done
timeout 60 ip netns exec "$ns_b" "$bld/tests/test-verbs-zc" connect 10.79.0.1 7471
rc=$?
wait "$srv"
src=$?
srv=
sed 's/^/server: /' "$tmp/serve"
[ $rc = 77 ] && exit 77
[ $rc = 0 ] && [ $src = 0 ] || { echo "FAIL: connect $rc, serve $src"; exit 1; }
echo "PASS: automatic zero-copy across a veth pair fell back after one copied write"
