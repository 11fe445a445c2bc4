#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# guest.sh: boot and drive the interop guest (Debian's kernel + our siw.ko in
# QEMU, TCG) built by guest-prepare.sh.
#
#   guest.sh start [--name N] [--siw K=V]... [--fwd HPORT:GPORT]... [--share DIR]
#                  [--tap] [--rxe] [--lifetime S] [--boot-timeout S]
#                                                        boot; prints READY
#   guest.sh exec  [--name N] [--timeout S] -- CMD...    run CMD in the guest
#   guest.sh bg    [--name N] -- CMD...                  start CMD, print a job id
#   guest.sh wait  [--name N] [--timeout S] JOB          wait for a bg job
#   guest.sh stop  [--name N]                            power off (qemu killed
#                                                        after 20 s)
#   guest.sh tapname [--name N]                          the host tap (--tap)
#   guest.sh capture [--name N] start FILE | stop        record eth0's frames
#                                                        into FILE (pcap)
#   guest.sh run   [start options] [--timeout S] -- CMD...  start, exec, stop
#
# The guest is 10.0.2.15 with siw0 on eth0; the host's 127.0.0.1 is 10.0.2.2
# from inside.  --fwd forwards host 127.0.0.1:HPORT to the guest's GPORT.
# --share DIR is mounted at /host (the jobs' working directory).  --siw sets
# siw module parameters at load; they can be changed later through
# /sys/module/siw/parameters.  The guest powers itself off after --lifetime
# seconds (default 1800) even if nobody stops it.
# --tap gives the guest a second NIC without NAT: eth1 10.0.3.2/24 on a host
# tap device (guest.sh tapname --name N prints it) with 10.0.3.1/24.  RoCE
# needs it: rxe's ICRC covers the IP header (Identification, flags) and
# slirp rewrites that header, so rxe drops what the host sends through eth0.
# QEMU creates the tap itself (not persistent), so it goes away with QEMU
# even when QEMU is killed; start also removes stale xs-tap-* devices no
# QEMU holds.  One --tap guest at a time (they would share 10.0.3.1).
# --rxe (implies --tap) loads rdma_rxe and adds rxe0 on eth1 (xs-rxe up in
# the guest; xs-rxe gid prints the RoCE v2 GID index of 10.0.3.2).
# capture: QEMU itself writes every frame between the guest's eth0 and slirp
# (a filter-dump on its netdev, added and removed through QMP), both
# directions, one write per frame: nothing is lost however slow the guest is
# (tcpdump in the TCG guest fell behind and its kernel ring dropped 387 of
# 9647 packets of an rstream cell, and tshark then saw a malformed frame
# where the stream had a hole), and the guest spends no CPU on it.
# Exit status: exec/wait/run: the command's; 124 timeout; 125 guest failure;
# 2 usage.  Env: XS_INTEROP_CACHE (default /var/cache/xsock-interop).
set -euo pipefail

cache=${XS_INTEROP_CACHE:-/var/cache/xsock-interop}
me=guest.sh
name=default siw=() fwd=() share="" tap=0 rxe=0 lifetime=1800 boot_timeout=120 timeout=600 cmd=()

usage() { echo "$me: $*" >&2; echo "usage: see the header of $0" >&2; exit 2; }
fail() { echo "$me: ERROR: $*" >&2; exit 125; }
q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
now() { date +%s; }

parse() {
    while [ $# -gt 0 ]; do
        case $1 in
            --name) name=${2:?}; shift ;;
            --siw) siw+=("${2:?}"); shift ;;
            --fwd) [[ ${2:-} =~ ^[0-9]+:[0-9]+$ ]] || usage "--fwd HPORT:GPORT"; fwd+=("$2"); shift ;;
            --share) share=$(cd "${2:?}" && pwd) || usage "no directory $2"; shift ;;
            --tap) tap=1 ;;
            --rxe) tap=1; rxe=1 ;;
            --lifetime) lifetime=${2:?}; shift ;;
            --boot-timeout) boot_timeout=${2:?}; shift ;;
            --timeout) timeout=${2:?}; shift ;;
            --) shift; cmd=("$@"); return 0 ;;
            -*) usage "unknown option $1" ;;
            *) cmd=("$@"); return 0 ;;
        esac
        shift
    done
}

rundir() { [[ $name =~ ^[A-Za-z0-9_.-]+$ ]] || usage "bad name $name"; run=$cache/run/$name; }
# tapname: the host tap of this instance (IFNAMSIZ: 15 characters at most)
tapname() {
    if [ ${#name} -le 8 ]; then echo "xs-tap-$name"
    else echo "xs-tap-$(printf '%s' "$name" | sha256sum | cut -c1-8)"; fi
}
# tap_sweep: remove xs-tap-* devices nobody holds (a QEMU that was killed
# before guest.sh could stop it leaves none, but a persistent one made by
# hand or by an older run would keep 10.0.3.1); fail if a held one has it
tap_sweep() {
    local t
    for t in $(ip -o link show 2>/dev/null | awk -F': ' '{ print $2 }' | sed 's/@.*//' | grep '^xs-tap-'); do
        if ip link show "$t" | grep -q 'NO-CARRIER'; then
            ip link delete "$t" 2>/dev/null && echo "$me: removed stale tap $t" >&2
        elif ip -4 -o addr show dev "$t" | grep -q ' 10\.0\.3\.1/'; then
            fail "tap $t of another guest holds 10.0.3.1 (one --tap guest at a time)"
        fi
    done
    return 0
}
alive() { # our qemu for this instance still running?
    local pid
    pid=$(cat "$run/qemu.pid" 2>/dev/null) || return 1
    tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "-name xs-interop-$name "
}
kill_qemu() {
    local pid i
    alive || return 0
    pid=$(cat "$run/qemu.pid")
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 30); do alive || return 0; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    for i in $(seq 30); do alive || return 0; sleep 0.1; done
    echo "$me: WARNING: qemu $pid survived SIGKILL" >&2
}
console_tail() {
    [ -s "$run/state/failed" ] && echo "$me: guest: $(cat "$run/state/failed")" >&2
    [ -s "$run/qemu.err" ] && sed 's/^/qemu: /' "$run/qemu.err" >&2
    [ -s "$run/console.log" ] && tail -n 20 "$run/console.log" | sed 's/^/  console| /' >&2
    return 0
}

do_start() {
    rundir
    [ -r "$cache/vmlinuz" ] && [ -r "$cache/initramfs.cpio.gz" ] ||
        fail "no guest in $cache: run tests/interop/guest-prepare.sh"
    command -v qemu-system-x86_64 > /dev/null || fail "qemu-system-x86_64 missing: run guest-prepare.sh"
    alive && fail "guest '$name' already runs (guest.sh stop --name $name)"
    if [ $tap = 1 ]; then
        command -v ip > /dev/null || fail "--tap needs ip (iproute2)"
        [ -c /dev/net/tun ] || fail "--tap needs /dev/net/tun"
        tap_sweep
    fi
    rm -rf "$run"; mkdir -p "$run/state" "$run/job"
    local hostfwd="" f
    for f in "${fwd[@]}"; do hostfwd+=",hostfwd=tcp:127.0.0.1:${f%%:*}-10.0.2.15:${f#*:}"; done
    { echo "SIW_PARAMS=$(q "${siw[*]}")"; echo "LIFETIME=$lifetime"
      echo "SHARE=$([ -n "$share" ] && echo 1 || echo 0)"; echo "TAP=$tap"; echo "RXE=$rxe"; } > "$run/env"
    local accel=(-accel tcg,thread=multi,tb-size=256 -cpu max)
    if [ -w /dev/kvm ] && grep -qE '\b(vmx|svm)\b' /proc/cpuinfo; then accel=(-accel kvm -cpu host); fi
    local args=(-name "xs-interop-$name" -machine pc "${accel[@]}" -m 1024 -smp 2
        -nodefaults -no-user-config -display none -vga none -no-reboot
        -kernel "$cache/vmlinuz" -initrd "$cache/initramfs.cpio.gz"
        -append "console=ttyS0 loglevel=4 panic=-1 random.trust_cpu=on rdinit=/init"
        -serial "file:$run/console.log" -qmp "unix:$run/qmp,server=on,wait=off"
        -netdev "user,id=n0,net=10.0.2.0/24,host=10.0.2.2$hostfwd" -device virtio-net-pci,netdev=n0
        -fsdev "local,id=ctl,path=$run,security_model=none" -device virtio-9p-pci,fsdev=ctl,mount_tag=xsctl)
    [ -n "$share" ] && args+=(-fsdev "local,id=hs,path=$share,security_model=none"
                              -device virtio-9p-pci,fsdev=hs,mount_tag=host)
    local tn=""
    if [ $tap = 1 ]; then
        tn=$(tapname)
        echo "$tn" > "$run/tap"
        # eth1 in the guest; the guest finds it by this MAC
        args+=(-netdev "tap,id=n1,ifname=$tn,script=no,downscript=no"
               -device "virtio-net-pci,netdev=n1,mac=52:54:00:78:73:02")
    fi
    args+=(-daemonize -pidfile "$run/qemu.pid")
    local t0 t1
    t0=$(date +%s.%N)
    timeout 60 qemu-system-x86_64 "${args[@]}" < /dev/null > "$run/qemu.err" 2>&1 ||
        { console_tail; fail "qemu did not start"; }
    if [ $tap = 1 ]; then
        # no IPv6 on the host's end: no router solicitations in the captures
        sysctl -qw "net.ipv6.conf.$tn.disable_ipv6=1" 2>/dev/null || true
        { ip addr add 10.0.3.1/24 dev "$tn" && ip link set "$tn" up; } ||
            { kill_qemu; fail "cannot configure tap $tn"; }
    fi
    local deadline=$(( $(now) + boot_timeout ))
    while [ ! -e "$run/state/ready" ]; do
        if [ -e "$run/state/failed" ] || ! alive || [ "$(now)" -ge "$deadline" ]; then
            console_tail; kill_qemu; fail "guest '$name' not ready (boot timeout ${boot_timeout}s)"
        fi
        sleep 0.1
    done
    t1=$(date +%s.%N)
    echo "READY name=$name boot=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')s guest-uptime=$(cat "$run/state/ready")s"
}

submit() { # submit -> sets job (path prefix)
    rundir
    alive && [ -e "$run/state/ready" ] || fail "guest '$name' is not running"
    [ ${#cmd[@]} -gt 0 ] || usage "missing -- CMD"
    job=$run/job/j$(date +%s%N)$$
    { printf 'exec'; local a; for a in "${cmd[@]}"; do printf ' %s' "$(q "$a")"; done; echo; } > "$job.tmp"
    mv "$job.tmp" "$job.cmd"
}
collect() { # collect JOBPATH : wait (bounded), print output, return rc
    local j=$1 deadline=$(( $(now) + timeout ))
    while [ ! -e "$j.rc" ]; do
        alive || { cat "$j.out" "$j.err" 2>/dev/null >&2; fail "guest died during the job"; }
        if [ "$(now)" -ge "$deadline" ]; then
            cat "$j.out" 2>/dev/null; cat "$j.err" 2>/dev/null >&2
            echo "$me: job timed out after ${timeout}s" >&2; return 124
        fi
        sleep 0.1
    done
    cat "$j.out" 2>/dev/null || true
    cat "$j.err" >&2 2>/dev/null || true
    return "$(cat "$j.rc")"
}

qmp() { # qmp COMMAND [JSON-ARGUMENTS] -> 0 when QEMU returned, else its error
    python3 - "$run/qmp" "$@" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
f = s.makefile("rwb")
def call(cmd, args=None):
    msg = {"execute": cmd}
    if args is not None:
        msg["arguments"] = args
    f.write(json.dumps(msg).encode() + b"\n"); f.flush()
    while True:  # skip asynchronous events
        r = json.loads(f.readline())
        if "return" in r:
            return
        if "error" in r:
            sys.exit("qmp %s: %s" % (cmd, r["error"].get("desc", r["error"])))
json.loads(f.readline())  # the greeting
call("qmp_capabilities")
call(sys.argv[2], json.loads(sys.argv[3]) if len(sys.argv) > 3 else None)
PY
}
do_capture() { # do_capture start FILE | stop
    rundir
    alive || fail "guest '$name' is not running"
    case ${cmd[0]:-} in
        start) [ ${#cmd[@]} = 2 ] || usage "capture start FILE"
               local f; f=$(cd "$(dirname "${cmd[1]}")" && pwd)/$(basename "${cmd[1]}")
               rm -f "$f"
               qmp object-del '{"id": "xs-capture"}' 2> /dev/null || true
               qmp object-add "{\"qom-type\": \"filter-dump\", \"id\": \"xs-capture\",
                                \"netdev\": \"n0\", \"file\": \"$f\", \"maxlen\": 262144}" ||
                   fail "cannot start the capture" ;;
        stop) qmp object-del '{"id": "xs-capture"}' || fail "no capture to stop" ;;
        *) usage "capture start FILE | stop" ;;
    esac
}

do_stop() {
    rundir
    [ -d "$run" ] || return 0
    if alive; then
        touch "$run/poweroff"
        local deadline=$(( $(now) + 20 ))
        while alive && [ "$(now)" -lt "$deadline" ]; do sleep 0.1; done
        kill_qemu
    fi
    # QEMU's tap goes with QEMU; one made persistent by hand would stay
    local tn; tn=$(cat "$run/tap" 2>/dev/null) || return 0
    ip link delete "$tn" 2>/dev/null || true
    return 0
}

[ $# -ge 1 ] || usage "missing command"
sub=$1; shift
case $sub in
    start) parse "$@"; do_start ;;
    exec) parse "$@"; submit; collect "$job" ;;
    bg) parse "$@"; submit; basename "$job" ;;
    wait) parse "$@"; rundir; [ ${#cmd[@]} = 1 ] || usage "wait JOB"; collect "$run/job/${cmd[0]}" ;;
    stop) parse "$@"; do_stop ;;
    tapname) parse "$@"; rundir; cat "$run/tap" 2>/dev/null || tapname ;;
    capture) parse "$@"; do_capture ;;
    run) parse "$@"; [ ${#cmd[@]} -gt 0 ] || usage "missing -- CMD"
         [ "$name" = default ] && name=run-$$
         trap 'do_stop' EXIT; trap 'exit 130' INT TERM
         do_start >&2
         rc=0; submit; collect "$job" || rc=$?
         do_stop; trap - EXIT INT TERM; rm -rf "$run"; exit $rc ;;
    -h|--help) sed -n '2,35p' "$0" ;;
    *) usage "unknown command $sub" ;;
esac
