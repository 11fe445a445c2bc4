#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# make-vectors.sh: capture rdma_rxe's RoCE v2 packets in the interop guest
# and write them as tests/vectors/roce/NAME.hex (README.md says how each was
# made).  Root; boots its own guest (guest.sh start --rxe), captures on the
# host tap, the host end is tests/interop/roce-peer.py; every packet's ICRC
# is checked by pcap2vec.py (exit 1 on a bad one).
#
#   tests/vectors/roce/make-vectors.sh [--only REGEX] [--keep DIR]
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../../.." && pwd)
g=$top/tests/interop/guest.sh
peer=$top/tests/interop/roce-peer.py
only="" keep=""
while [ $# -gt 0 ]; do
    case $1 in
        --only) only=${2:?}; shift ;;
        --keep) keep=${2:?}; shift ;;
        *) echo "make-vectors: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
[ "$(id -u)" = 0 ] || { echo "make-vectors: needs root" >&2; exit 2; }
work=$(mktemp -d /tmp/xsock-roce-vec.XXXXXX)
name=vec-$$
cleanup() {
    "$g" stop --name "$name"
    rm -rf "${XS_INTEROP_CACHE:-/var/cache/xsock-interop}/run/$name"
    [ -n "$keep" ] && cp "$work"/*.pcap "$keep"/ 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$g" start --name "$name" --rxe --lifetime 900 || exit 1
tap=$("$g" tapname --name "$name")
gidx=$("$g" exec --name "$name" -- xs-rxe gid) || exit 1
"$g" exec --name "$name" -- uname -r > "$work/kver" || exit 1

# put NAME: the vector file, with its licence and origin as comments
put() {
    { echo "# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause"
      echo "# $1: rdma_rxe (Linux $(cat "$work/kver")) <-> roce-peer.py, see README.md"
      cat "$work/$1.hex"; } > "$here/$1.hex"
}

# vector NAME PEER-ARGS GUEST-CMD: one capture; an empty PEER-ARGS runs no
# host peer
vector() {
    local n=$1 pa=$2 gc=$3 td pp rc=0
    if [ -n "$only" ] && ! echo "$n" | grep -qE "$only"; then return 0; fi
    tcpdump -i "$tap" -U --immediate-mode -B 65536 -s 0 -w "$work/$n.pcap" udp port 4791 > "$work/$n.td" 2>&1 &
    td=$!
    for _ in $(seq 100); do grep -q listening "$work/$n.td" && break; sleep 0.1; done
    if [ -n "$pa" ]; then
        # shellcheck disable=SC2086
        timeout 60 python3 "$peer" $pa > "$work/$n.peer" 2>&1 &
        pp=$!
        sleep 0.5
    fi
    "$g" exec --name "$name" --timeout 60 -- sh -c "${gc//@G/$gidx}" > "$work/$n.guest" 2>&1 || rc=$?
    if [ -n "$pa" ]; then wait "$pp" || rc="$rc/peer $?"; fi
    sleep 0.5
    kill -INT "$td"; wait "$td"
    python3 "$here/pcap2vec.py" vec "$work/$n.pcap" > "$work/$n.hex" 2> "$work/$n.chk" || rc="$rc/icrc"
    echo "make-vectors: $n: rc $rc, $(cat "$work/$n.chk")"
    [ -n "$keep" ] && cp "$work/$n.peer" "$work/$n.guest" "$keep/" 2>/dev/null
    case $rc in 0|0/peer\ 0) put "$n" ;; *) cat "$work/$n.guest" "$work/$n.peer" 2>/dev/null | tail -n 20 ;; esac
}

# vector_srv NAME PEER-ARGS GUEST-SERVER-CMD: the guest runs a perftest
# server (it fails at its last handshake: roce-peer.py stops after its
# packets, by design); roce-peer.py perftest is the client
vector_srv() {
    local n=$1 pa=$2 gc=$3 td job rc=0
    if [ -n "$only" ] && ! echo "$n" | grep -qE "$only"; then return 0; fi
    tcpdump -i "$tap" -U --immediate-mode -B 65536 -s 0 -w "$work/$n.pcap" udp port 4791 > "$work/$n.td" 2>&1 &
    td=$!
    for _ in $(seq 100); do grep -qs listening "$work/$n.td" && break; sleep 0.1; done
    job=$("$g" bg --name "$name" -- sh -c "timeout 40 ${gc//@G/$gidx}")
    "$g" exec --name "$name" -- xs-wait-port 18515 20 > /dev/null || rc=listen
    sleep 0.3
    # shellcheck disable=SC2086
    timeout 60 python3 "$peer" $pa > "$work/$n.peer" 2>&1 || rc="$rc/peer $?"
    "$g" wait --name "$name" --timeout 60 "$job" > "$work/$n.guest" 2>&1
    sleep 0.5
    kill -INT "$td"; wait "$td"
    python3 "$here/pcap2vec.py" vec "$work/$n.pcap" > "$work/$n.hex" 2> "$work/$n.chk" || rc="$rc/icrc"
    echo "make-vectors: $n: rc $rc, $(cat "$work/$n.chk")"
    [ -n "$keep" ] && cp "$work/$n.peer" "$work/$n.guest" "$keep/" 2>/dev/null
    if [ "$rc" = 0 ]; then put "$n"; else tail -n 20 "$work/$n.peer"; fi
}

pp="ibv_rc_pingpong -g @G -d rxe0"
for s in 1 64 1024 1025 4096; do
    n=2; [ $s -gt 1024 ] && n=1
    vector "rc-send-$s" "pingpong --size $s --iters $n" "$pp -s $s -n $n 10.0.3.1"
done
vector rc-nak-seq-dup "pingpong --size 64 --iters 2 --extras seq,dup" "$pp -s 64 -n 2 10.0.3.1"
# the client fails by design (its QP goes to the error state)
for e in write read atomic; do
    vector "rc-nak-$e" "pingpong --size 64 --iters 1 --extras $e" "$pp -s 64 -n 1 10.0.3.1; true"
done
# rxe's retransmissions: a server that answers the TCP exchange but never
# ACKs (rc_pingpong's timeout 14 is 67 ms; 3 retries then give up)
vector rc-retransmit "pingpong --size 64 --iters 1 --no-ack" "timeout 4 $pp -s 64 -n 1 10.0.3.1; true"
# the RDMA CM's connect: a CM REQ MAD in a UD Send Only to QP1 (nobody
# answers on the host: rxe repeats it)
vector cm-req "" "timeout 8 rping -c -a 10.0.3.1 -C 1; true"
# rxe as responder to Reads, atomics, Writes (perftest servers grant the
# remote access ibv_rc_pingpong does not)
vector_srv rc-read "perftest --ops read:64,read:3000,readdup,readbadkey" \
    "ib_read_bw -d rxe0 -x @G -F -m 1024 -n 5"
vector_srv rc-atomic "perftest --ops fetchadd,cmpswap,fetchadd" "ib_atomic_bw -d rxe0 -x @G -F -m 1024 -n 5"
vector_srv rc-write-rnr "perftest --ops write:64,write:2500,sendrnr" "ib_write_bw -d rxe0 -x @G -F -m 1024 -n 5"
