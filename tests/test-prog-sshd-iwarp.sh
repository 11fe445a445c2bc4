#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Debian's OpenSSH with both ends under `xsock-run --iwarp` (issue 12, 29,
# 30): `ssh host cmd`, then scp of a 4 MB file up and down, checksummed.
# sshd's re-exec takes the connection over (xsock(7) EXEC), the monitor
# exchanges the version banners, then forks its pre-authentication child,
# which installs a seccomp sandbox: at its setrlimit(RLIMIT_NOFILE, 0)
# libxsock turns the child's copy into its relay socket and the monitor's
# thread, waiting for a client since the fork, drives the connection; after
# authentication the post-authentication child claims it with what the
# first child left unread (xsock(7) FORK).  Every session must be iWARP
# (the stack's log; MPA keys on the wire with tcpdump), with no seccomp
# kill and no byte lost (the checksums, sshd's MAC checks).
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
. "${XS_TOP_SRCDIR:-.}/tests/xs_sshd_lib.sh"

name=sshd-iwarp; port=$(xs_free_port)
head -c 4000000 /dev/urandom >"$tmp/big"
sum=$(sha256sum <"$tmp/big")
kills() { dmesg 2>/dev/null | grep -c 'comm="sshd".*syscall='; }
kills0=$(kills)
capture_begin "$name" "$port"
sshd_start "$name" iwarp_run "$port"
t0=$(now_ms)
out=$(XSOCK_DEBUG=1 iwarp_run timeout 30 ssh -p "$port" $ssh_o root@127.0.0.1 'echo "$((6 * 7)) $(id -un)"' 2>"$tmp/$name.cli")
rc=$?
t1=$(now_ms)
[ "$rc" = 0 ] && [ "$out" = "42 root" ] ||
    { echo "FAIL $name: ssh cmd gave '$out' (exit $rc)"; cat "$tmp/$name.cli"; fail=1; }
iwarp_run timeout 60 scp -q -P "$port" $ssh_o "$tmp/big" "root@127.0.0.1:$tmp/big.up" 2>>"$tmp/$name.cli" ||
    { echo "FAIL $name: scp upload"; cat "$tmp/$name.cli"; fail=1; }
t2=$(now_ms)
iwarp_run timeout 60 scp -q -P "$port" $ssh_o "root@127.0.0.1:$tmp/big.up" "$tmp/big.down" 2>>"$tmp/$name.cli" ||
    { echo "FAIL $name: scp download"; cat "$tmp/$name.cli"; fail=1; }
t3=$(now_ms)
stop_server "$name"
capture_end "$name" iwarp
if [ "$(kills)" != "$kills0" ]; then
    echo "FAIL $name: a seccomp kill"; dmesg | tail -3; fail=1
fi
logins=$(grep -c "Accepted publickey for root from 127.0.0.1 port [1-9]" "$tmp/$name.srv")
[ "$logins" = 3 ] || { echo "FAIL $name: sshd logged $logins logins, not 3"; cat "$tmp/$name.srv"; fail=1; }
if grep -E "Device or resource busy|Corrupted MAC|Bad packet length|setsockopt|getsockopt" "$tmp/$name.srv"; then
    echo "FAIL $name: sshd's errors above"; fail=1
fi
# every session (3) over iWARP, from the stack's log
[ "$iwx" -ge 3 ] || { echo "FAIL $name: $iwx sessions with data over iWARP, not 3"; fail=1; }
if [ "$(sha256sum <"$tmp/big.up" 2>/dev/null)" = "$sum" ] &&
    [ "$(sha256sum <"$tmp/big.down" 2>/dev/null)" = "$sum" ]; then
    echo "$name: ssh cmd in $((t1 - t0)) ms; scp 4 MB up in $((t2 - t1)) ms, down in $((t3 - t2)) ms, sha256 equal"
else
    echo "FAIL $name: checksums differ"; fail=1
fi
exit $fail
