#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Debian's rsync daemon and client over libxsock (issue 12): a tree of 40
# random files (up to ~1 MB, in subdirectories) downloaded from a module
# and uploaded to a writable one, `diff -r` clean, with
#   iwarp  both ends under `xsock-run --iwarp`,
#   mixed  the daemon under it, a plain client (the mixed listener),
#   plain  both plain (libxsock preloaded, no IWARP socket): the ratio;
#   roce   both ends under `xsock-run --iwarp --roce` (a RoCE connection is
#          its maker's: the daemon relays it to its child and on).
# The daemon forks a child per connection, and each receiving side forks
# a receiver that reads the socket while its parent, the generator,
# writes it: the connection is relayed through its owner (xsock(7) FORK).
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
command -v rsync >/dev/null 2>&1 || { echo "SKIP: rsync not installed"; exit 77; }

xs_scratch
xs_capture_ok transfers
mkdir -p "$tmp/src/d1/d2" "$tmp/src/d3" "$tmp/up"
i=0
while [ $i -lt 40 ]; do
    case $((i % 4)) in 0) d=src ;; 1) d=src/d1 ;; 2) d=src/d1/d2 ;; 3) d=src/d3 ;; esac
    # sizes 0 .. ~1 MB, a few large ones
    n=$(( (i * 7919 % 97) * (i % 5 == 0 ? 10500 : 1300) ))
    head -c "$n" /dev/urandom >"$tmp/$d/f$i"
    i=$((i + 1))
done
total=$(du -sb "$tmp/src" | cut -f1)
cat >"$tmp/rsyncd.conf" <<EOF
pid file = $tmp/rsyncd.pid
log file = $tmp/rsyncd.log
use chroot = no
uid = $(id -u)
gid = $(id -g)
[mod]
path = $tmp/src
read only = yes
[up]
path = $tmp/up
read only = no
EOF

now_ms() { date +%s%3N; }

# rsync_case NAME SERVER-RUN CLIENT-RUN MODE(iwarp|plain for the capture)
rsync_case() {
    name=rsync-$1; port=$(xs_free_port)
    rm -rf "$tmp/dst" "$tmp/up"/* "$tmp/rsyncd.pid"
    capture_begin "$name" "$port"
    $2 timeout 80 rsync --daemon --no-detach --config="$tmp/rsyncd.conf" \
        --address=127.0.0.1 --port="$port" >"$tmp/$name.srv" 2>&1 &
    srv=$!
    xs_wait_listen "$port" || { echo "FAIL $name: daemon did not listen"; fail=1; }
    t0=$(now_ms)
    if ! $3 timeout 60 rsync -a "rsync://127.0.0.1:$port/mod/" "$tmp/dst/" >"$tmp/$name.cli" 2>&1; then
        echo "FAIL $name: download failed"; cat "$tmp/$name.cli"; fail=1
    fi
    t1=$(now_ms)
    if ! $3 timeout 60 rsync -a "$tmp/src/" "rsync://127.0.0.1:$port/up/" >>"$tmp/$name.cli" 2>&1; then
        echo "FAIL $name: upload failed"; cat "$tmp/$name.cli"; fail=1
    fi
    t2=$(now_ms)
    stop_server "$name"
    if diff -r "$tmp/src" "$tmp/dst" >/dev/null && diff -r "$tmp/src" "$tmp/up" >/dev/null; then
        down=$(awk -v b="$total" -v t=$((t1 - t0)) 'BEGIN { printf "%.1f", b / 1e6 / (t > 0 ? t : 1) * 1000 }')
        up=$(awk -v b="$total" -v t=$((t2 - t1)) 'BEGIN { printf "%.1f", b / 1e6 / (t > 0 ? t : 1) * 1000 }')
        echo "$name: 40 files ($total B) down $down MB/s, up $up MB/s, diff -r clean"
        eval "down_$1=$down up_$1=$up"
    else
        echo "FAIL $name: trees differ"; cat "$tmp/$name.cli" "$tmp/rsyncd.log"; fail=1
    fi
    capture_end "$name" "$4"
}

down_iwarp=0 up_iwarp=0 down_plain=0 up_plain=0
rsync_case iwarp iwarp_run iwarp_run iwarp
rsync_case mixed iwarp_run plain_run plain
rsync_case plain plain_run plain_run plain
down_roce=0 up_roce=0
rsync_case roce roce_run roce_run roce
awk -v a="$down_iwarp" -v b="$down_plain" -v c="$up_iwarp" -v d="$up_plain" 'BEGIN {
    printf "rsync xsock/plain: download %.2fx, upload %.2fx\n", (b > 0 ? a / b : 0), (d > 0 ? c / d : 0) }'
awk -v a="$down_roce" -v b="$down_plain" -v c="$up_roce" -v d="$up_plain" 'BEGIN {
    printf "rsync roce/plain: download %.2fx, upload %.2fx\n", (b > 0 ? a / b : 0), (d > 0 ? c / d : 0) }'
exit $fail
