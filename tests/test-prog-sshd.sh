#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Debian's OpenSSH server and clients over libxsock (issue 12): `ssh host
# cmd` and scp of 30 MB both ways, checksummed, with
#   mixed  sshd under `xsock-run --iwarp`, plain ssh/scp (the mixed
#          listener hands sshd a kernel TCP socket: it re-executes itself,
#          forks its privilege-separated children, all as without xsock),
#   plain  both plain (libxsock preloaded, no IWARP socket): the ratio,
#   roce   both ends under `xsock-run --iwarp --roce`: the connection
#          stays the listening sshd's, which relays it to the re-executed
#          sshd and its children (kernel sockets there): all of it works.
# Both ends under `xsock-run --iwarp` is tests/test-prog-sshd-iwarp.sh.
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
. "${XS_TOP_SRCDIR:-.}/tests/xs_sshd_lib.sh"
head -c 30000000 /dev/urandom >"$tmp/big"
sum=$(md5sum <"$tmp/big")

# ssh_case NAME SERVER-RUN CLIENT-RUN MODE(iwarp|plain for the capture)
ssh_case() {
    name=sshd-$1; port=$(xs_free_port)
    rm -f "$tmp/big.up" "$tmp/big.down"
    capture_begin "$name" "$port"
    sshd_start "$name" "$2" "$port"
    out=$($3 timeout 30 ssh -p "$port" $ssh_o root@127.0.0.1 'echo "$((6 * 7)) $(id -un)"' 2>"$tmp/$name.cli")
    [ "$out" = "42 root" ] || { echo "FAIL $name: ssh cmd gave '$out'"; cat "$tmp/$name.cli"; fail=1; }
    t0=$(now_ms)
    $3 timeout 60 scp -q -P "$port" $ssh_o "$tmp/big" "root@127.0.0.1:$tmp/big.up" 2>>"$tmp/$name.cli" ||
        { echo "FAIL $name: scp upload"; cat "$tmp/$name.cli"; fail=1; }
    t1=$(now_ms)
    $3 timeout 60 scp -q -P "$port" $ssh_o "root@127.0.0.1:$tmp/big.up" "$tmp/big.down" 2>>"$tmp/$name.cli" ||
        { echo "FAIL $name: scp download"; cat "$tmp/$name.cli"; fail=1; }
    t2=$(now_ms)
    stop_server "$name"
    # the client's address as sshd's re-executed child sees it (over RoCE
    # a relayed socket: xsock(7) FORK), for its log and its rules by address
    grep -q "Accepted publickey for root from 127.0.0.1 port [1-9]" "$tmp/$name.srv" ||
        { echo "FAIL $name: sshd did not log the client's address"; grep Accepted "$tmp/$name.srv"; fail=1; }
    if grep -E "setsockopt|getsockopt" "$tmp/$name.srv"; then
        echo "FAIL $name: sshd's socket options failed"; fail=1
    fi
    if [ "$(md5sum <"$tmp/big.up" 2>/dev/null)" = "$sum" ] && [ "$(md5sum <"$tmp/big.down" 2>/dev/null)" = "$sum" ]; then
        up=$(awk -v t=$((t1 - t0)) 'BEGIN { printf "%.1f", 30 / (t > 0 ? t : 1) * 1000 }')
        down=$(awk -v t=$((t2 - t1)) 'BEGIN { printf "%.1f", 30 / (t > 0 ? t : 1) * 1000 }')
        echo "$name: ssh cmd ok; scp 30 MB up $up MB/s, down $down MB/s, checksums equal"
        eval "up_$1=$up down_$1=$down"
    else
        echo "FAIL $name: checksums differ"; fail=1
    fi
    capture_end "$name" "$4"
}

up_mixed=0 down_mixed=0 up_plain=0 down_plain=0
ssh_case mixed iwarp_run plain_run plain
ssh_case plain plain_run plain_run plain
# both ends over RoCE v2: a RoCE connection is its maker's (the listening
# sshd's), so sshd's re-exec and its sandboxed child get a relayed kernel
# socket (xsock(7) KERNEL STACK, claims at fork) and the whole session works
up_roce=0 down_roce=0
ssh_case roce roce_run roce_run roce
awk -v a="$up_mixed" -v b="$up_plain" -v c="$down_mixed" -v d="$down_plain" -v e="$up_roce" -v f="$down_roce" 'BEGIN {
    printf "scp mixed/plain: upload %.2fx, download %.2fx; roce/plain: upload %.2fx, download %.2fx\n",
        (b > 0 ? a / b : 0), (d > 0 ? c / d : 0), (b > 0 ? e / b : 0), (d > 0 ? f / d : 0) }'

exit $fail
