# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# lib.sh: small helpers shared by the interop scripts (sourced, bash).
# shellcheck shell=bash
# matrix.sh, soak.sh and compare.sh source it.

# free_port: an unused TCP port on the host, outside the ephemeral range
free_port() { python3 "$(dirname "${BASH_SOURCE[0]}")/../../scripts/free-port.py"; }

# mpa_tshark ARGS: tshark with MPA's heuristic tried before the port
# table (a port another protocol registered hides the session from
# iwarp_mpa otherwise) and rpcordma's heuristic, which claims iWARP, off
mpa_tshark() { tshark -n -o tcp.try_heuristic_first:TRUE --disable-protocol rpcordma "$@"; }

# listening PORT: bounded (10 s) wait for a host listener on PORT
listening() {
    local hex
    hex=$(printf '%04X' "$1")
    for _ in $(seq 200); do
        grep -q ":$hex [0-9A-F:]* 0A " /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# stats: numbers on stdin (one a line, empty lines ignored) -> "MEDIAN MAX"
# ("- -" when there are none); the median of an even count is the mean of
# the middle two
stats() {
    grep -E '^[0-9.]+$' | sort -g | awk '{ v[NR] = $1 }
        END { if (NR == 0) { print "- -"; exit }
              m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
              printf "%.2f %.2f\n", m, v[NR] }'
}

# now_s: seconds since the epoch with centiseconds; elapsed T0: now - T0
now_s() { date +%s.%N | cut -c1-13; }
elapsed() { awk -v a="$1" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }'; }

# perftest_result SIZE FILE -> the result line of a perftest run for SIZE
# bytes (the first line whose first field is SIZE and second a count)
perftest_result() { awk -v s="$1" '$1 == s && $2 ~ /^[0-9]+$/ && NF >= 4 { print; exit }' "$2"; }

# no_xsock_env: unset every XSOCK_* variable inherited from the caller (the
# runs are to use libiwarp's defaults); sets xs_unset to the names it
# unset (call it directly, not in $(...))
no_xsock_env() {
    local v
    xs_unset=""
    for v in $(compgen -e | grep '^XSOCK_'); do xs_unset+="${xs_unset:+ }$v"; unset "$v"; done
}

# guest_trap: at exit, kill the host processes listed in hostpids and stop
# the guest $name through guest.sh ($g) (set both before the guest starts)
guest_trap() {
    hostpids=()
    trap guest_cleanup EXIT
    trap 'exit 130' INT TERM
}
guest_cleanup() {
    local p
    for p in "${hostpids[@]}"; do kill "$p" 2>/dev/null; done
    "$g" stop --name "$name"
    rm -rf "${XS_INTEROP_CACHE:-/var/cache/xsock-interop}/run/$name"
}
