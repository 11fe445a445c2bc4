#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Debian's iperf3 over libxsock (issue 12): one stream, -P 4 and reverse
# (-R), 2 s each, with
#   iwarp  both ends under `xsock-run --iwarp`,
#   mixed  the server under it, a plain client (the mixed listener),
#   plain  both plain (libxsock preloaded, no IWARP socket): the ratios;
#   roce   both ends under `xsock-run --iwarp --roce` (RoCE v2).
# The receiver must report a transfer.
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
command -v iperf3 >/dev/null 2>&1 || { echo "SKIP: iperf3 not installed"; exit 77; }

xs_scratch
xs_capture_ok transfers

# iperf_case NAME SERVER-RUN CLIENT-RUN MODE FLAGS...: sets mbs (receiver MB/s)
iperf_case() {
    name=iperf3-$1; srun=$2; crun=$3; mode=$4; shift 4
    port=$(xs_free_port); mbs=0
    capture_begin "$name" "$port"
    $srun timeout 60 iperf3 -s -1 -B 127.0.0.1 -p "$port" >"$tmp/$name.srv" 2>&1 &
    srv=$!
    xs_wait_listen "$port" || { echo "FAIL $name: server did not listen"; fail=1; }
    if ! $crun timeout 60 iperf3 -c 127.0.0.1 -p "$port" -t 2 -f m "$@" >"$tmp/$name.cli" 2>&1; then
        echo "FAIL $name: client failed"; cat "$tmp/$name.cli"; fail=1
    fi
    wait "$srv"; rc=$?; srv=
    [ "$rc" = 0 ] || { echo "FAIL $name: server exit $rc"; cat "$tmp/$name.srv"; fail=1; }
    # "[SUM]   0.00-2.00   sec  3.33 GBytes  14300 Mbits/sec   receiver"
    line=$(grep ' receiver$' "$tmp/$name.cli" | tail -1)
    mbs=$(echo "$line" | awk '{ for (i = 1; i < NF; i++) if ($(i + 1) == "Mbits/sec") { printf "%.0f", $i / 8; exit } }')
    if [ -n "$mbs" ] && [ "$mbs" -gt 0 ]; then
        echo "$name: $mbs MB/s"
    else
        echo "FAIL $name: no transfer reported"; cat "$tmp/$name.cli"; fail=1; mbs=0
    fi
    capture_end "$name" "$mode"
}

for k in 1 P4 R; do
    case $k in 1) f= ;; P4) f="-P 4" ;; R) f=-R ;; esac
    # shellcheck disable=SC2086
    iperf_case "iwarp-$k" iwarp_run iwarp_run iwarp $f; a=$mbs
    # shellcheck disable=SC2086
    iperf_case "mixed-$k" iwarp_run plain_run plain $f; m=$mbs
    # shellcheck disable=SC2086
    iperf_case "plain-$k" plain_run plain_run plain $f; p=$mbs
    # shellcheck disable=SC2086
    iperf_case "roce-$k" roce_run roce_run roce $f; r=$mbs
    awk -v a="$a" -v m="$m" -v p="$p" -v r="$r" -v k="$k" 'BEGIN {
        printf "iperf3 %s xsock/plain: %.2fx (%d/%d MB/s), mixed %.2fx, roce %.2fx (%d MB/s)\n", k,
            (p > 0 ? a / p : 0), a, p, (p > 0 ? m / p : 0), (p > 0 ? r / p : 0), r }'
done
exit $fail
