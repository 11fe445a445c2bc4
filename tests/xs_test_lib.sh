# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Shell helpers for the tests that run unmodified rdma-core tools under
# xsock-run.  Sourced; needs XS_TOP_BUILDDIR.
XS_RUN=${XS_TOP_BUILDDIR:-.}/tools/xsock-run

# A TCP port nobody listens on, outside the ephemeral range (free-port.py).
xs_free_port() {
    python3 "${XS_TOP_SRCDIR:-.}/scripts/free-port.py"
}

# Wait (bounded, 10 s) until something listens on TCP port $1.
xs_wait_listen() {
    hex=$(printf '%04X' "$1")
    i=0
    while ! grep -q ":$hex [0-9A-F:]* 0A " /proc/net/tcp /proc/net/tcp6 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 200 ] && return 1
        sleep 0.05
    done
    return 0
}

# xs_tree PID: the PID's descendants, parents first (/proc, no procps)
xs_tree() {
    for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
        echo "$c"; xs_tree "$c"
    done
}
# xs_alive PID: the process is there and not a zombie
xs_alive() {
    [ -r /proc/"$1"/stat ] && ! sed 's/.*) //' /proc/"$1"/stat 2>/dev/null | grep -q '^Z'
}

# Kill a background job if it is still there (bounded cleanup), and its
# children: a job started through a shell function (`run timeout 60 prog &`)
# is a subshell whose `timeout` would otherwise outlive it.  The rest of its
# tree (a daemon's per-connection children, which rsyncd's are: one wrote
# its log into a scratch directory after the test had removed it) goes too,
# within 2 s.
xs_reap() {
    for p in "$@"; do
        tree=$(xs_tree "$p")
        LD_PRELOAD= pkill -P "$p" 2>/dev/null # (procps hangs with libasan preloaded)
        kill "$p" 2>/dev/null && sleep 0.2 && kill -9 "$p" 2>/dev/null
        wait "$p" 2>/dev/null
        [ -n "$tree" ] || continue
        kill $tree 2>/dev/null
        i=0
        for k in $tree; do
            while xs_alive "$k" && [ $i -lt 40 ]; do sleep 0.05; i=$((i + 1)); done
            xs_alive "$k" && kill -9 "$k" 2>/dev/null
        done
    done
    return 0
}

# xs_hang_wait PID SECS: wait up to SECS for the job PID to end.  If it is
# still there, print where every thread of its tree is (gdb's backtraces;
# a hang in CI otherwise leaves only a timeout's exit status), reap it and
# return 1.
xs_hang_wait() {
    hw_i=0
    while xs_alive "$1" && [ $hw_i -lt $(($2 * 10)) ]; do sleep 0.1; hw_i=$((hw_i + 1)); done
    xs_alive "$1" || return 0
    echo "HANG: still running $2 s later:"
    for hw_p in $(xs_tree "$1"); do
        echo "-- pid $hw_p: $(tr '\0' ' ' </proc/"$hw_p"/cmdline 2>/dev/null)"
        command -v gdb >/dev/null 2>&1 &&
            LD_PRELOAD= timeout 60 gdb -nx -batch -p "$hw_p" -ex 'thread apply all bt' 2>/dev/null |
            grep -E '^(Thread |#)'
    done
    xs_reap "$1"
    return 1
}

# In a sanitizer build libiwarp needs the ASan runtime loaded first.
xs_lib=${XS_TOP_BUILDDIR:-.}/verbs/.libs/libiwarp.so.0
if command -v ldd >/dev/null 2>&1 && ldd "$xs_lib" 2>/dev/null | grep -q libasan; then
    # "libasan.so.8 => path", or just "path" once preloaded (a script that
    # sources this again after an exec, as test-prog-iser's unshare)
    LD_PRELOAD=$(ldd "$xs_lib" | awk '/libasan/ { print ($2 == "=>") ? $3 : $1; exit }')
    export LD_PRELOAD
    # the tools themselves are not ours: their leaks are not checked here
    ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
    export ASAN_OPTIONS
fi

# The end of a failed program's output: its sanitizer report whole when it
# has one (tail would keep only the shadow-byte legend), else the last lines.
xs_tail() {
    if grep -q 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|ThreadSanitizer\|runtime error:' "$1"; then
        sed -n '/ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|WARNING: ThreadSanitizer\|runtime error:/,/^SUMMARY/p' "$1" | head -60
    else
        tail -5 "$1"
    fi
}

# Skip (77) unless this test can capture and decode: tcpdump, tshark, root.
xs_need_capture() {
    command -v tcpdump >/dev/null 2>&1 || { echo "SKIP: no tcpdump"; exit 77; }
    command -v tshark >/dev/null 2>&1 || { echo "SKIP: no tshark"; exit 77; }
    [ "$(id -u)" = 0 ] || { echo "SKIP: capturing needs root"; exit 77; }
}

# Captures on lo for the tshark tests: xs_capture_start PCAP LOG PORT [FILTER] starts
# tcpdump (bounded wait until it listens; sets xs_tdpid), xs_capture_stop LOG
# ends it once everything sent before it is in the file, and fails (returns
# 1) if the kernel dropped packets.
xs_tdpid=
xs_tdpcap=
xs_tdport=
xs_capture_start() {
    xs_tdpcap=$1 xs_tdport=$3
    tcpdump -i lo -U --immediate-mode -B 65536 -s 0 -w "$1" "tcp port $3${4:+ and ($4)}" 2>"$2" &
    xs_tdpid=$!
    i=0
    while ! grep -q "listening on" "$2" 2>/dev/null; do
        i=$((i + 1)); [ $i -gt 100 ] && { echo "FAIL: tcpdump did not start"; cat "$2"; return 1; }
        sleep 0.1
    done
    return 0
}
xs_capture_stop() {
    # tcpdump may lag far behind on a loaded machine, and packets still in
    # the kernel's ring when it gets SIGINT are lost without a count (a
    # 0.4 s stall once lost a whole capture while a QEMU guest ran): send a
    # marker after the test's traffic, a connect from a port of our own to
    # the captured port (which the kernel answers with RST when nothing
    # listens there any more), and stop once the marker is in the file: the
    # capture is in order, so everything before it is there too (at most
    # 20 s, then as before)
    sport=$(python3 -c 'import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); sys.stdout.flush()
s.settimeout(1); s.connect_ex(("127.0.0.1", int(sys.argv[1])))' "$xs_tdport" 2>/dev/null)
    i=0
    while [ -n "$sport" ] && [ $i -lt 100 ] &&
        [ "$(tcpdump -nn -r "$xs_tdpcap" "tcp and port $sport" 2>/dev/null | wc -l)" = 0 ]; do
        sleep 0.2; i=$((i + 1))
    done
    kill -INT "$xs_tdpid"; wait "$xs_tdpid" 2>/dev/null; xs_tdpid=
    # 1 if the kernel dropped packets (tcpdump behind on a loaded machine;
    # once 1131 of 2630 that matched a test's port while another test's
    # traffic used it): the caller's checks of the capture decide
    if grep -q "dropped by kernel" "$1" && ! grep -q "^0 packets dropped by kernel" "$1"; then
        echo "note: the capture dropped packets: $(grep -h 'dropped by kernel' "$1")"; return 1
    fi
    return 0
}

# A scratch directory and a server slot for the tests that run programs:
# xs_scratch sets tmp (removed at exit, with the server $srv and a capture
# still running), xs_capture_ok sets capture=1 when tcpdump and root are
# there (else a note saying what the test checks without: $1).
xs_scratch() {
    tmp=$(mktemp -d)
    srv=
    trap xs_scratch_cleanup EXIT INT TERM
}
xs_scratch_cleanup() {
    [ -n "$xs_tdpid" ] && kill "$xs_tdpid" 2>/dev/null
    [ -n "$srv" ] && xs_reap "$srv"
    rm -rf "$tmp"
}
xs_capture_ok() {
    capture=0
    if command -v tcpdump >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        capture=1
    else
        echo "note: no capture (needs root and tcpdump); $1 only"
    fi
}

# ---- the program tests' kit (unmodified Debian programs over libxsock) ----
# plain_run CMD: libxsock preloaded, no socket in IWARP_MODE (fall-through);
# iwarp_run CMD: `xsock-run --iwarp` (every TCP socket in IWARP_MODE).  A
# mixed case runs the server with iwarp_run and the client with plain
# commands (the mixed listener).  Failures set fail=1.
socklib=${XS_TOP_BUILDDIR:-.}/libxsock/.libs/libxsock.so.0
fail=0
# Every connection the stack carries says so when it ends, in
# XSOCK_STAT_LOG (xsock-run(1)): $tmp/stack.log once xs_scratch has run.
plain_run() {
    LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD }$socklib" XSOCK_IWARP= XSOCK_RULES= XSOCK_CONFIG= \
        XSOCK_STAT_LOG="${tmp:+$tmp/stack.log}" "$@"
}
iwarp_run() {
    XSOCK_RULES= XSOCK_CONFIG= XSOCK_STAT_LOG="${tmp:+$tmp/stack.log}" "$XS_RUN" --iwarp "$@"
}
# the same over the RoCE v2 transport
roce_run() {
    XSOCK_RULES= XSOCK_CONFIG= XSOCK_STAT_LOG="${tmp:+$tmp/stack.log}" "$XS_RUN" --iwarp --roce "$@"
}

# stack_mark NAME PORT / stack_check NAME MODE(iwarp|roce|plain): what the
# stack says it carried between the two (its XSOCK_STAT_LOG lines), without
# root or a capture.  iwarp: a connection on PORT over iWARP that moved
# octets both ways; roce: a RoCE connection that did; plain: no iWARP
# connection on PORT and no RoCE one.  Failures set fail=1.
stack_mark() {
    touch "$tmp/stack.log"
    echo "$2 $(wc -l <"$tmp/stack.log")" >"$tmp/$1.stackmark"
}
stack_check() {
    read -r sport sline <"$tmp/$1.stackmark"
    tail -n +"$((sline + 1))" "$tmp/stack.log" >"$tmp/$1.stack"
    iw=$(grep '"transport": "iwarp"' "$tmp/$1.stack" | grep -c ":$sport\"")
    iwx=$(grep '"transport": "iwarp"' "$tmp/$1.stack" | grep ":$sport\"" |
        grep -vc '"tx_octets": 0,\|"rx_octets": 0,')
    ro=$(grep -c '"transport": "roce"' "$tmp/$1.stack")
    rox=$(grep '"transport": "roce"' "$tmp/$1.stack" | grep -vc '"tx_octets": 0,\|"rx_octets": 0,')
    echo "$1: the stack carried: $iw iWARP connections on port $sport ($iwx with data both ways), $ro RoCE ($rox)"
    case $2 in
    iwarp) [ "$iwx" -ge 1 ] || { echo "FAIL $1: no connection over iWARP in the stack's log"; fail=1; } ;;
    roce) [ "$rox" -ge 1 ] || { echo "FAIL $1: no connection over RoCE in the stack's log"; fail=1; } ;;
    plain) [ "$iw" = 0 ] && [ "$ro" = 0 ] || { echo "FAIL $1: a plain case went over the stack"; fail=1; } ;;
    esac
}

# tshark as the decode checks run it: heuristic dissectors (MPA's) before
# the port table, else a free port that another protocol registered
# (9092 Kafka, 5432 PostgreSQL...) hides the whole session from iwarp_mpa
# (CI: 0 FPDUs decoded of 276 packets); rpcordma's heuristic claims iWARP
xs_tshark() {
    tshark -n -o tcp.try_heuristic_first:TRUE --disable-protocol rpcordma "$@"
}
# A capture filter for the MPA handshake only: SYNs and RSTs (the marker
# of xs_capture_stop) and the segments whose payload starts with "MPA "
# (the flags first: a payload load past a SYN's end rejects the whole filter)
xs_mpa_keys_filter="tcp[tcpflags] & (tcp-syn|tcp-rst) != 0 or tcp[((tcp[12] & 0xf0) >> 2):4] = 0x4d504120"

# capture_begin NAME PORT / capture_end NAME MODE(iwarp|roce|plain): the
# stack's account (stack_check) and, with
# capture=1 (xs_capture_ok), the segments on PORT whose payload starts with
# "MPA " (the Request/Reply keys: a full capture of a loopback transfer at
# full speed drops packets) and the SYNs and RSTs (xs_capture_stop's marker
# is one: without them every capture waited its full 20 s for it); MODE iwarp needs a Request and a Reply, plain
# none.
capture_begin() {
    stack_mark "$1" "$2"
    [ $capture = 1 ] || return 0
    # (the port apart: it was given with the filter appended, and the
    # marker's connect to "PORT and ..." never happened)
    xs_capture_start "$tmp/$1.pcap" "$tmp/$1.tcpdump" "$2" "$xs_mpa_keys_filter" ||
        exit 99
}
capture_end() {
    stack_check "$1" "$2"
    [ $capture = 1 ] || return 0
    # a loaded machine may drop packets during a full-speed run: the
    # handshake checks below still decide (a dropped Request fails them)
    xs_capture_stop "$tmp/$1.tcpdump" >"$tmp/$1.drops" || echo "note $1: $(grep 'dropped by kernel' "$tmp/$1.tcpdump")"
    req=$(tcpdump -r "$tmp/$1.pcap" -A 2>/dev/null | grep -c "MPA ID Req Frame")
    rep=$(tcpdump -r "$tmp/$1.pcap" -A 2>/dev/null | grep -c "MPA ID Rep Frame")
    echo "$1: capture: MPA Request keys $req, Reply keys $rep"
    if [ "$2" = iwarp ] && { [ "$req" -lt 1 ] || [ "$rep" -lt 1 ]; }; then
        echo "FAIL $1: no MPA handshake on the wire"; fail=1
    fi
    if [ "$2" != iwarp ] && [ "$req" -ne 0 ]; then
        echo "FAIL $1: MPA on the wire from a plain client"; fail=1
    fi
}
# stop_server NAME: the server ($srv) must still be running (then it is ended)
stop_server() {
    if ! kill -0 "$srv" 2>/dev/null; then
        echo "FAIL $1: server died"; cat "$tmp/$1.srv"; fail=1
    fi
    xs_reap "$srv"; srv=
}
