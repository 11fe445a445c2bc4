#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# xsock-roced (roced/README.md), the host's RoCE v2 rendezvous, with two
# users at once: root and nobody, in a network namespace of the test's own
# (its UDP 4791 and its @xsock-roced are that namespace's, so that the
# tests beside it keep theirs), each program unmodified under libiwarp.
#   1. root's ibv_rc_pingpong pair, nobody's pair and a pair across the
#      two users (root's server, nobody's client) at once, each 500
#      4 KiB exchanges checked (--chk), and an rping pair of each user:
#      all through the daemon, each pingpong pair then on the socketpair
#      the daemon gave its two QPs (each process says so with
#      XSOCK_DEBUG=1);
#   2. while root's pair runs, nobody tries each attack
#      (tests/roced-attack.py): forged packets for root's QP by UDP, a QP
#      of its own posing as the peer of root's QP, MADs with another CM's
#      comm ID, a listen on root's rping service, binding UDP 4791 in each
#      way, a malformed message; each is refused, the daemon counts every
#      dropped datagram by its rule, and root's pair still passes;
#   3. before any daemon, nobody holds @xsock-roced: root's programs
#      refuse it (its owner is not root) and bind UDP 4791 themselves;
#   4. two more network namespaces over a veth pair, a daemon in each
#      (two hosts): root's pingpong server in one and nobody's client in
#      the other, then an rping the same way (the CM's MADs by UDP from
#      daemon to daemon), every packet by UDP through both daemons, whose
#      ICRCs rxe would check (the daemons' port 4791 as the source).
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
b=${XS_TOP_BUILDDIR:-.}
roced=$b/roced/xsock-roced
atk=${XS_TOP_SRCDIR:-.}/tests/roced-attack.py
[ -x "$roced" ] || { echo "FAIL: $roced missing"; exit 99; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (a network namespace of its own, a second user)"; exit 77; }
for t in unshare setpriv ibv_rc_pingpong rping; do
    command -v $t >/dev/null 2>&1 || { echo "FAIL: $t missing (scripts/install-deps.sh installs it)"; exit 99; }
done
# Debian's python3 (another in PATH may be in a directory of root's)
py=/usr/bin/python3
[ -x $py ] || { echo "FAIL: $py missing"; exit 99; }
# the namespace: this script again inside it
if [ -z "${XS_ROCED_IN_NS:-}" ]; then
    XS_ROCED_IN_NS=1 exec unshare -n sh "$0" "$@"
fi
ip link set lo up
xs_scratch
chmod 711 "$tmp"
# nobody reads the libraries from here (a build tree in CI's 0700 clone
# is not readable to it)
mkdir "$tmp/lib"
cp "$b/verbs/.libs/libiwarp.so.0" "$tmp/lib/"
chmod 755 "$tmp/lib"; chmod 644 "$tmp/lib/libiwarp.so.0"
cp "$atk" "$tmp/attack.py"; chmod 644 "$tmp/attack.py"
touch "$tmp/n.log"; chmod 666 "$tmp/n.log"
asan=
case ${LD_PRELOAD:-} in *libasan*) asan="$LD_PRELOAD " ;; esac
root_run() { LD_PRELOAD="$asan$tmp/lib/libiwarp.so.0" XSOCK_TRANSPORT=roce XSOCK_DEBUG=1 "$@"; }
nob_run() {
    setpriv --reuid=nobody --regid=nogroup --clear-groups \
        env LD_PRELOAD="$asan$tmp/lib/libiwarp.so.0" XSOCK_TRANSPORT=roce XSOCK_DEBUG=1 "$@"
}
nob() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }

daemon_start() {
    "$roced" -v 2>>"$tmp/roced.log" &
    dpid=$!
    i=0
    until grep -q "listening on" "$tmp/roced.log" 2>/dev/null; do
        i=$((i + 1)); [ $i -gt 100 ] && { echo "FAIL: xsock-roced did not start"; cat "$tmp/roced.log"; exit 1; }
        sleep 0.05
    done
}

# pair NAME PORT N SERVER-RUNNER CLIENT-RUNNER: an ibv_rc_pingpong pair
# in the background; pair_wait NAME checks it
pair() {
    $4 timeout 60 ibv_rc_pingpong -d xsock_roce0 -g 0 --chk -s 4096 -n "$3" -p "$2" \
        >"$tmp/$1.srv" 2>&1 &
    eval "srv_$1=\$!"
    sleep 0.4
    $5 timeout 60 ibv_rc_pingpong -d xsock_roce0 -g 0 --chk -s 4096 -n "$3" -p "$2" 127.0.0.1 \
        >"$tmp/$1.cli" 2>&1 &
    eval "cli_$1=\$!"
}
pair_wait() {
    eval "wait \$cli_$1"; c=$?
    eval "wait \$srv_$1"; s=$?
    if [ $c = 0 ] && [ $s = 0 ] && grep -q "through xsock-roced" "$tmp/$1.cli" &&
        grep -q "through xsock-roced" "$tmp/$1.srv" && grep -q "a direct channel" "$tmp/$1.cli" &&
        grep -q "a direct channel" "$tmp/$1.srv"; then
        echo "ok $1: $(grep -h 'iters in' "$tmp/$1.cli"), both ends through xsock-roced, then on the direct channel it gave them"
    else
        echo "FAIL $1: client rc $c, server rc $s"; tail -3 "$tmp/$1.cli" "$tmp/$1.srv"; fail=1
    fi
}

# ---- 1. two users at once -------------------------------------------------
daemon_start
pair root 18515 500 root_run root_run
pair nobody 18516 500 nob_run nob_run
pair cross 18517 500 root_run nob_run
pair_wait root
pair_wait nobody
pair_wait cross
for who in root nob; do
    ${who}_run timeout 60 rping -s -a 127.0.0.1 -p 7471 -C 200 -S 1024 >"$tmp/rp-$who.srv" 2>&1 &
    rs=$!
    sleep 0.4
    if ${who}_run timeout 60 rping -c -a 127.0.0.1 -p 7471 -C 200 -S 1024 >"$tmp/rp-$who.cli" 2>&1 &&
        wait $rs && grep -q "through xsock-roced" "$tmp/rp-$who.cli"; then
        echo "ok rping of $who: 200 pings through xsock-roced"
    else
        echo "FAIL rping of $who"; tail -3 "$tmp/rp-$who.cli" "$tmp/rp-$who.srv"; fail=1
        xs_reap $rs
    fi
done

# ---- 2. nobody's attacks on root's pair -----------------------------------
# the victim runs about 8 s (sized by the first pair's pace: the attacks
# take 1 or 2 s, and a loaded machine is 5 times slower)
us=$(sed -n 's/.*= \([0-9]*\)\.[0-9]* usec\/iter.*/\1/p' "$tmp/root.cli" | head -1)
[ "${us:-0}" -gt 0 ] 2>/dev/null || us=100
vn=$((8000000 / us))
[ $vn -lt 2000 ] && vn=2000
[ $vn -gt 200000 ] && vn=200000
pair victim 18518 $vn root_run root_run
# root's server QP, once the client has connected it
i=0
while ! q=$(sed -n 's/.*roce: QP \([0-9]*\) -> .*/\1/p' "$tmp/victim.srv" | head -1) || [ -z "$q" ]; do
    i=$((i + 1)); [ $i -gt 200 ] && break; sleep 0.05
done
# (the listener of an rping of root's, for the listen attack)
root_run timeout 60 rping -s -a 127.0.0.1 -p 7472 -C 1 -S 100 >"$tmp/rp-l.srv" 2>&1 &
rl=$!
sleep 0.3
mark=$(wc -l <"$tmp/roced.log")
if [ -z "$q" ]; then
    echo "FAIL: root's pingpong QP not seen"; fail=1
else
    for a in "udp $q 300" "peer $q 300" "mad 50" "listen 0x01061d30" "bind" "garbage"; do
        # shellcheck disable=SC2086
        nob $py "$tmp/attack.py" $a >>"$tmp/attack.out" 2>&1 || fail=1
    done
    sed 's/^/  nobody: /' "$tmp/attack.out"
    kill -0 "$cli_victim" 2>/dev/null ||
        { echo "FAIL: root's pair ended before nobody's attacks did"; fail=1; }
    grep -q "^ACCEPTED" "$tmp/attack.out" && { echo "FAIL: an attack was accepted"; fail=1; }
fi
pair_wait victim
xs_reap $rl
kill "$dpid"; wait "$dpid"
tail -n +"$((mark + 1))" "$tmp/roced.log" >"$tmp/roced.attack"
# every forged datagram dropped, each by its rule
for want in "300 a packet by UDP: a local sender's datagram by UDP" \
    "300 packets of pid [0-9]*: not from the QP's peer" \
    "50 a MAD of pid [0-9]*: a MAD with another CM's comm ID" \
    "1 pid [0-9]* uid 65534: unknown version, kind or family: connection closed"; do
    n=${want%% *} what=${want#* }
    got=$(grep -c "xsock-roced: $what" "$tmp/roced.attack")
    if [ "$got" = "$n" ]; then
        echo "ok: xsock-roced dropped $got: $what"
    else
        echo "FAIL: xsock-roced dropped $got, not $n: $what"; fail=1
        sed 's/pid [0-9]*/pid N/' "$tmp/roced.attack" | sort | uniq -c
    fi
done
grep "stopped" "$tmp/roced.log"

# ---- 3. a squatter on the name --------------------------------------------
nob $py "$tmp/attack.py" squat 20 >"$tmp/squat.out" 2>&1 &
sq=$!
i=0
until grep -q squatting "$tmp/squat.out" 2>/dev/null; do
    i=$((i + 1)); [ $i -gt 100 ] && break; sleep 0.05
done
if timeout 10 "$roced" 2>"$tmp/roced2.log"; then
    echo "FAIL: a second xsock-roced started beside the squatter"; fail=1
else
    echo "ok: xsock-roced refuses to start: $(cat "$tmp/roced2.log")"
fi
pair squat 18519 200 root_run root_run
wait "$cli_squat"; c=$?
wait "$srv_squat"; s=$?
if [ $c = 0 ] && [ $s = 0 ] && grep -q "is another user's, not root's: not used" "$tmp/squat.cli" &&
    ! grep -q "through xsock-roced" "$tmp/squat.cli"; then
    echo "ok: root's pair refused nobody's @xsock-roced and bound UDP 4791 itself"
else
    echo "FAIL: root's pair beside a squatter: client rc $c, server rc $s"; tail -3 "$tmp/squat.cli"; fail=1
fi
xs_reap $sq

# ---- 4. two hosts: network namespaces over veth -----------------------------
na=xsrd$$a nb=xsrd$$b
ns_cleanup() { ip netns del "$na" 2>/dev/null; ip netns del "$nb" 2>/dev/null; xs_scratch_cleanup; }
trap ns_cleanup EXIT INT TERM
ip netns add "$na" && ip netns add "$nb" &&
    ip link add "v$na" type veth peer name "v$nb" &&
    ip link set "v$na" netns "$na" && ip link set "v$nb" netns "$nb" &&
    ip -n "$na" addr add 10.79.0.1/24 dev "v$na" && ip -n "$nb" addr add 10.79.0.2/24 dev "v$nb" &&
    ip -n "$na" link set "v$na" up && ip -n "$nb" link set "v$nb" up &&
    ip -n "$na" link set lo up && ip -n "$nb" link set lo up ||
    { echo "FAIL: no veth pair between two network namespaces"; exit 1; }
: >"$tmp/roced-a.log"; : >"$tmp/roced-b.log"
ip netns exec "$na" "$roced" -v 2>"$tmp/roced-a.log" &
da=$!
ip netns exec "$nb" "$roced" -v 2>"$tmp/roced-b.log" &
db=$!
sleep 0.5
# the GID of each side's veth address
gid_of() {
    ip netns exec "$1" env LD_PRELOAD="$asan$tmp/lib/libiwarp.so.0" ibv_devinfo -d xsock_roce0 -v 2>/dev/null |
        sed -n "s/.*GID\[ *\([0-9]*\)\]:.*$2.*/\1/p" | head -1
}
ga=$(gid_of "$na" 10.79.0.1) gb=$(gid_of "$nb" 10.79.0.2)
ip netns exec "$na" env LD_PRELOAD="$asan$tmp/lib/libiwarp.so.0" XSOCK_DEBUG=1 timeout 60 \
    ibv_rc_pingpong -d xsock_roce0 -g "${ga:-0}" --chk -s 4096 -n 500 -p 18520 >"$tmp/far.srv" 2>&1 &
fs=$!
sleep 0.4
ip netns exec "$nb" setpriv --reuid=nobody --regid=nogroup --clear-groups \
    env LD_PRELOAD="$asan$tmp/lib/libiwarp.so.0" XSOCK_DEBUG=1 timeout 60 \
    ibv_rc_pingpong -d xsock_roce0 -g "${gb:-0}" --chk -s 4096 -n 500 -p 18520 10.79.0.1 >"$tmp/far.cli" 2>&1
c=$?
wait $fs; s=$?
if [ $c = 0 ] && [ $s = 0 ] && grep -q "through xsock-roced" "$tmp/far.cli" &&
    grep -q "sport 4791" "$tmp/far.cli" && ! grep -q "a direct channel" "$tmp/far.cli"; then
    echo "ok two hosts: $(grep -h 'iters in' "$tmp/far.cli"), root's server, nobody's client, by UDP through both daemons"
else
    echo "FAIL two hosts: client rc $c, server rc $s (GIDs ${ga:-?} ${gb:-?})"; tail -3 "$tmp/far.cli" "$tmp/far.srv"; fail=1
fi
ip netns exec "$na" env LD_PRELOAD="$asan$tmp/lib/libiwarp.so.0" XSOCK_TRANSPORT=roce timeout 60 \
    rping -s -a 10.79.0.1 -p 7473 -C 100 -S 1024 >"$tmp/far-rp.srv" 2>&1 &
fs=$!
sleep 0.4
if ip netns exec "$nb" setpriv --reuid=nobody --regid=nogroup --clear-groups \
    env LD_PRELOAD="$asan$tmp/lib/libiwarp.so.0" XSOCK_TRANSPORT=roce XSOCK_DEBUG=1 timeout 60 \
    rping -c -a 10.79.0.1 -p 7473 -C 100 -S 1024 >"$tmp/far-rp.cli" 2>&1 && wait $fs &&
    grep -q "through xsock-roced" "$tmp/far-rp.cli"; then
    echo "ok two hosts: 100 rpings, the CM's MADs by UDP between the daemons"
else
    echo "FAIL two hosts: rping"; tail -3 "$tmp/far-rp.cli" "$tmp/far-rp.srv"; fail=1
    xs_reap $fs
fi
kill $da $db 2>/dev/null; wait $da $db 2>/dev/null
for s in a b; do
    echo "daemon $s: $(grep stopped "$tmp/roced-$s.log")"
done
exit $fail
