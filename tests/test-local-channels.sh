#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The stack's files under predictable names are never another user's
# (docs/architecture.md, "Local channels and who can reach them").  As
# root the other user is nobody; as anyone else, the same user's file with
# a mode that lets others write it stands in for one:
#   - a statistics file made first under a process's name
#     (/dev/shm/xsock-UID-PID) is never opened by that process: it makes
#     its own (tests/test-xsock-stat passes), the planted one stays empty;
#   - xsock-stat refuses such a file, a symbolic link or a FIFO (without
#     waiting) by that name;
#   - scripts/free-port.py refuses a reservation folder that is a link
#     or is not the user's own, and makes its own with mode 0700;
#   - XSOCK_STAT_LOG in a folder all may write (/tmp) is never followed
#     through another user's link, nor appended to another user's file or
#     FIFO (nor waits on one);
#   - a set-user-ID program reads no XSOCK_* setting (its invoker's
#     XSOCK_STAT_LOG would be a file it appends to, XSOCK_EXEC_FD state it
#     adopts): as root, a set-user-ID root copy of tests/
#     xsock-settings-dump run by nobody shows the defaults;
#   - a program under libxsock given an XSOCK_EXEC_FD memfd that is no
#     hand-over and a malformed XSOCK_RELAY_ADDR (issue 31 item 3) runs,
#     says what it dropped (XSOCK_DEBUG=1), and xsock-stat counts both as
#     local_bad (tests/test-local-msg does the RoCE names' datagrams).
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
command -v python3 >/dev/null 2>&1 || { echo "FAIL: no python3 (scripts/install-deps.sh)"; exit 1; }
stat_test=${XS_TOP_BUILDDIR:-.}/tests/test-xsock-stat
xstat=${XS_TOP_BUILDDIR:-.}/tools/xsock-stat
dump=${XS_TOP_BUILDDIR:-.}/tests/xsock-settings-dump
for p in "$stat_test" "$xstat" "$dump"; do
    [ -x "$p" ] || { echo "FAIL: $p missing"; exit 99; }
done

xs_scratch
fail=0
uid=$(id -u)
shm=$(mktemp -d /dev/shm/xsock-test.XXXXXX)
trap 'xs_scratch_cleanup; rm -rf "$shm"' EXIT INT TERM

# other CMD: CMD run as the other user (umask 0: what it makes, all may write)
if [ "$uid" = 0 ]; then
    other() { setpriv --reuid=nobody --regid=nogroup --clear-groups sh -c "umask 0; $1"; }
else
    other() { sh -c "umask 0; $1"; }
fi

# 1. A statistics file planted for the next process's pid ($$ of the
# shell that execs it).
plant=
[ "$uid" = 0 ] && plant='setpriv --reuid=nobody --regid=nogroup --clear-groups'
PLANT=$plant SHM=$shm sh -c 'f=/dev/shm/xsock-$(id -u)-$$
    $PLANT sh -c "umask 0; : >$f" && ln "$f" "$SHM/planted" && exec "$1"' sh "$stat_test" \
    >"$tmp/stat.out" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
    echo "FAIL: test-xsock-stat beside a planted statistics file: rc $rc"
    xs_tail "$tmp/stat.out"
    fail=1
fi
if [ ! -e "$shm/planted" ] || [ -s "$shm/planted" ]; then
    echo "FAIL: the planted statistics file was opened (size $(stat -c %s "$shm/planted" 2>&1))"
    fail=1
else
    echo "ok: a planted statistics file stays untouched, the process made its own"
fi

# 2. xsock-stat of a live process of ours whose name another user took.
sleep 30 &
live=$!
f=/dev/shm/xsock-$uid-$live
# refused PLANT WANT WHAT KIND [GREP-FLAG]: another user makes $f with
# PLANT; xsock-stat must fail and say WANT (no wait on a FIFO); -i only
# where the message is strerror's, whose case is libc's ("Too many levels
# of symbolic links")
refused() {
    other "$1"
    if timeout 10 "$xstat" -p "$live" >"$tmp/xs.out" 2>&1 || ! grep -q ${5:-} -- "$2" "$tmp/xs.out"; then
        echo "FAIL: xsock-stat $3:"
        cat "$tmp/xs.out"
        fail=1
    else
        echo "ok: xsock-stat refuses a planted ${4}"
    fi
    rm -f "$f"
}
refused "head -c 8192 /dev/zero >$f" "not this user's own file" "read a planted file" file
refused "ln -s /etc/passwd $f" "symbolic link" "followed a planted link" link -i
refused "mkfifo $f" "not this user's own file" "opened a planted FIFO (or waited on it)" \
    "FIFO without waiting"
kill "$live" 2>/dev/null
wait "$live" 2>/dev/null

# 3. free-port.py's reservation folder.
fp=${XS_TOP_SRCDIR:-.}/scripts/free-port.py
mkdir "$tmp/fp" "$tmp/elsewhere"
d=$tmp/fp/xsock-ports-$uid
if ! TMPDIR=$tmp/fp python3 "$fp" >/dev/null || [ "$(stat -c %a "$d")" != 700 ]; then
    echo "FAIL: free-port.py made no folder of mode 0700: $(ls -ld "$d" 2>&1)"
    fail=1
fi
rm -rf "$d"
ln -s "$tmp/elsewhere" "$d"
if TMPDIR=$tmp/fp python3 "$fp" >/dev/null 2>"$tmp/fp.err" || [ -n "$(ls "$tmp/elsewhere")" ]; then
    echo "FAIL: free-port.py reserved through a link"
    fail=1
fi
rm -f "$d"
mkdir "$d"
if [ "$uid" = 0 ]; then chown nobody "$d"; else chmod 0777 "$d"; fi
if TMPDIR=$tmp/fp python3 "$fp" >/dev/null 2>"$tmp/fp.err" || ! grep -q "own folder" "$tmp/fp.err"; then
    echo "FAIL: free-port.py used another user's folder"
    fail=1
else
    echo "ok: free-port.py keeps to a folder of its own"
fi

# 4. XSOCK_STAT_LOG where another user made a link, or a file, first.
mkdir -m 1777 "$tmp/pub"
chmod 711 "$tmp"
: >"$tmp/victim"
other "ln -s $tmp/victim $tmp/pub/link; : >$tmp/pub/file; mkfifo $tmp/pub/fifo"
names=link
[ "$uid" = 0 ] && names="link file fifo" # else they are the user's own
for name in $names; do
    XSOCK_STAT_LOG=$tmp/pub/$name timeout 60 "$stat_test" >"$tmp/log.out" 2>&1 ||
        { echo "FAIL: test-xsock-stat with XSOCK_STAT_LOG=$name"; xs_tail "$tmp/log.out"; fail=1; }
done
if [ -s "$tmp/victim" ] || { [ "$uid" = 0 ] && [ -s "$tmp/pub/file" ]; }; then
    echo "FAIL: XSOCK_STAT_LOG went through another user's link or file"
    fail=1
fi
XSOCK_STAT_LOG=$tmp/pub/own "$stat_test" >"$tmp/log.out" 2>&1
if [ ! -s "$tmp/pub/own" ]; then
    echo "FAIL: XSOCK_STAT_LOG of a new file: nothing written"
    fail=1
else
    echo "ok: XSOCK_STAT_LOG keeps to the user's own file"
fi

# 5. The settings of a set-user-ID program.
if [ "$uid" = 0 ]; then
    mkdir -m 755 "$tmp/suid"
    cp "$dump" "$tmp/suid/dump"
    chmod 4755 "$tmp/suid/dump"
    setpriv --reuid=nobody --regid=nogroup --clear-groups \
        env XSOCK_STAT_LOG=/etc/xsock-test XSOCK_EXEC_FD=7 "$tmp/suid/dump" --env >"$tmp/suid.out"
    XSOCK_STAT_LOG=/etc/xsock-test XSOCK_EXEC_FD=7 "$dump" --env >"$tmp/plain.out"
    if ! grep -qx "XSOCK_STAT_LOG=/etc/xsock-test" "$tmp/plain.out" ||
        ! grep -qx "XSOCK_EXEC_FD=7" "$tmp/plain.out"; then
        echo "FAIL: the settings are not read from the environment"
        fail=1
    elif ! grep -qx "XSOCK_STAT_LOG=" "$tmp/suid.out" || grep -q "XSOCK_EXEC_FD=7" "$tmp/suid.out"; then
        echo "FAIL: a set-user-ID program read its invoker's settings:"
        grep -E "STAT_LOG|EXEC_FD" "$tmp/suid.out"
        fail=1
    else
        echo "ok: a set-user-ID program reads no XSOCK_* setting"
    fi
else
    echo "note: not root: no set-user-ID check (root's run makes it)"
fi

# 6. What libxsock reads as a program starts, malformed.
head -c 4096 /dev/urandom >"$tmp/junk"
LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD }$socklib" XSOCK_DEBUG=1 XSOCK_EXEC_FD=7 \
    XSOCK_RELAY_ADDR='12.34.zz,' sleep 30 7<"$tmp/junk" 2>"$tmp/ctor.err" &
live=$!
i=0
while [ ! -e "/dev/shm/xsock-$uid-$live" ] && [ $i -lt 50 ]; do
    sleep 0.1
    i=$((i + 1))
done
"$xstat" -p "$live" --json >"$tmp/ctor.json" 2>&1
kill "$live" 2>/dev/null
wait "$live" 2>/dev/null
if ! grep -q '"local": {"local_bad": 2, "local_noqp": 0}' "$tmp/ctor.json" ||
    ! grep -q "exec hand-over dropped: not from this libxsock" "$tmp/ctor.err" ||
    ! grep -q "XSOCK_RELAY_ADDR entry dropped: malformed address" "$tmp/ctor.err"; then
    echo "FAIL: a malformed exec hand-over and XSOCK_RELAY_ADDR not dropped and counted:"
    cat "$tmp/ctor.err" "$tmp/ctor.json"
    fail=1
else
    echo "ok: a malformed exec hand-over and XSOCK_RELAY_ADDR are dropped and counted"
fi

exit $fail
