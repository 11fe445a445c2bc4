#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Debian's OpenSSH server and clients over libxsock (issue 12): `ssh host
# cmd` and scp of 30 MB both ways, checksummed, with
#   mixed  sshd under `xsock-run --iwarp`, plain ssh/scp (the mixed
#          listener hands sshd a kernel TCP socket: it re-executes itself,
#          forks its privilege-separated children, all as without xsock),
#   plain  both plain (libxsock preloaded, no IWARP socket): the ratio,
#   iwarp  both ends under it: sshd's re-exec takes the connection over
#          (xsock(7) EXEC, and its closefrom(6) passes over the stack's
#          descriptors), the monitor exchanges the version banners over
#          IWARP; its pre-authentication child runs in a seccomp sandbox
#          that kills a process on eventfd2 or io_uring_setup, so the stack
#          cannot run there (xsock(7) BUGS): checked to fail cleanly (the
#          child gets EBUSY, the client exits, no hang, no SIGSYS);
#   roce   both ends under `xsock-run --iwarp --roce`: the connection
#          stays the listening sshd's, which relays it to the re-executed
#          sshd and its children (kernel sockets there): all of it works.
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
[ -x /usr/sbin/sshd ] && command -v ssh >/dev/null 2>&1 && command -v scp >/dev/null 2>&1 ||
    { echo "SKIP: openssh-server/openssh-client not installed"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: sshd needs root (privilege separation)"; exit 77; }

xs_scratch
xs_capture_ok "the sessions"
mkdir -p /run/sshd
chmod 755 "$tmp"
ssh-keygen -q -t ed25519 -N '' -f "$tmp/hostkey" || exit 99
ssh-keygen -q -t ed25519 -N '' -f "$tmp/id" || exit 99
cp "$tmp/id.pub" "$tmp/authorized_keys"
head -c 30000000 /dev/urandom >"$tmp/big"
sum=$(md5sum <"$tmp/big")
sftp=$(ls /usr/lib/openssh/sftp-server 2>/dev/null || echo internal-sftp)
ssh_o="-i $tmp/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR"

now_ms() { date +%s%3N; }

# sshd_start NAME RUN PORT
sshd_start() {
    cat >"$tmp/sshd_config" <<EOF
Port $3
ListenAddress 127.0.0.1
HostKey $tmp/hostkey
AuthorizedKeysFile $tmp/authorized_keys
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PidFile $tmp/sshd.pid
Subsystem sftp $sftp
EOF
    $2 timeout 120 /usr/sbin/sshd -D -e -f "$tmp/sshd_config" >"$tmp/$1.srv" 2>&1 &
    srv=$!
    xs_wait_listen "$3" || { echo "FAIL $1: sshd did not listen"; cat "$tmp/$1.srv"; fail=1; }
}

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

# both ends IWARP: the known limit fails cleanly and at once
name=sshd-iwarp; port=$(xs_free_port)
kills() { dmesg 2>/dev/null | grep -c 'comm="sshd".*syscall='; }
kills0=$(kills)
capture_begin "$name" "$port"
sshd_start "$name" iwarp_run "$port"
t0=$(now_ms)
XSOCK_DEBUG=1 iwarp_run timeout 30 ssh -p "$port" $ssh_o root@127.0.0.1 true >"$tmp/$name.cli" 2>&1
rc=$?
t1=$(now_ms)
stop_server "$name"
capture_end "$name" iwarp
if [ "$rc" = 124 ]; then
    echo "FAIL $name: the client hung"; fail=1
elif grep -q "Remote protocol version 2.0" "$tmp/$name.srv" 2>/dev/null || grep -q "SSH2_MSG_KEXINIT\|Device or resource busy" "$tmp/$name.srv"; then
    echo "$name: banners exchanged over IWARP; the sandboxed child's copy fails cleanly in $((t1 - t0)) ms (client exit $rc): $(grep -o 'ssh_dispatch_run_fatal.*' "$tmp/$name.srv" | head -1)"
    [ "$(kills)" = "$kills0" ] || { echo "FAIL $name: a seccomp kill"; dmesg | tail -3; fail=1; }
else
    echo "FAIL $name: unexpected"; cat "$tmp/$name.srv" "$tmp/$name.cli"; fail=1
fi
exit $fail
