#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# libFuzzer runs of the wire-protocol harnesses in tests/fuzz/.
#
#   scripts/fuzz.sh [--merge] [--build-only] [--gen-corpus] [HARNESS...]
#
# Builds every harness (or those named: fuzz-mpa-frame fuzz-mpa-rx
# fuzz-ddp-place fuzz-rdmap-rx fuzz-roce-pkt fuzz-roce-cm fuzz-local-msg fuzz-roced)
# with clang -fsanitize=fuzzer,address,undefined
# into $FUZZ_BUILD (default build-fuzz/), then runs each for $FUZZ_SECONDS
# (default 60) on a copy of its seed corpus tests/fuzz/corpus/NAME, and
# prints libFuzzer's final line (executions, coverage, exec/s).
#   --merge       write the minimized corpus (seeds + what the run found)
#                 back to tests/fuzz/corpus/NAME
#   --build-only  build, do not run
#   --gen-corpus  rebuild the seed corpora with tests/fuzz/gen-corpus.c
#                 (replaces the files in tests/fuzz/corpus/)
# Environment: FUZZ_SECONDS, FUZZ_BUILD, FUZZ_JOBS (harnesses run at once,
# default 1), CC (default clang), FUZZ_CONFIG_H (a config.h to use),
# FUZZ_ARGS (extra libFuzzer flags).
# A crash, timeout, leak or OOM is copied to tests/fuzz/crashes/NAME/ (which
# `make check` replays from then on) and makes the exit status 1.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
all="fuzz-mpa-frame fuzz-mpa-rx fuzz-ddp-place fuzz-rdmap-rx fuzz-roce-pkt fuzz-roce-cm fuzz-local-msg fuzz-roced"
seconds=${FUZZ_SECONDS:-60}
bdir=${FUZZ_BUILD:-$top/build-fuzz}
jobs=${FUZZ_JOBS:-1}
cc=${CC:-clang}
merge=0 build_only=0 gen=0 names=""

for a in "$@"; do
    case "$a" in
    --merge) merge=1 ;;
    --build-only) build_only=1 ;;
    --gen-corpus) gen=1 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    fuzz-*) names="$names $a" ;;
    *) echo "fuzz.sh: unknown argument $a" >&2; exit 2 ;;
    esac
done
[ -n "$names" ] || names=$all

if ! command -v "$cc" >/dev/null 2>&1; then
    echo "fuzz.sh: $cc not found (libFuzzer needs clang)" >&2
    exit 77
fi
mkdir -p "$bdir"
bdir=$(cd "$bdir" && pwd)

# config.h: the sources include it.  Use a configured build's, or write a
# minimal one (nothing in the protocol code depends on its contents).
cfgdir=$bdir/cfg
mkdir -p "$cfgdir"
if [ -n "${FUZZ_CONFIG_H:-}" ]; then
    cp "$FUZZ_CONFIG_H" "$cfgdir/config.h"
elif [ -f "$top/config.h" ]; then
    cp "$top/config.h" "$cfgdir/config.h"
else
    ver=$(sed -n 's/^AC_INIT(\[xsock\], \[\([^]]*\)\].*/\1/p' "$top/configure.ac")
    cat >"$cfgdir/config.h" <<CFG
/* minimal config.h for scripts/fuzz.sh */
#define PACKAGE "xsock"
#define PACKAGE_NAME "xsock"
#define PACKAGE_VERSION "$ver"
#define VERSION "$ver"
#ifndef _GNU_SOURCE
# define _GNU_SOURCE 1
#endif
CFG
fi

# Probe: can this clang link libFuzzer?
probe=$bdir/probe
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe.c"
if ! "$cc" -fsanitize=fuzzer "$probe.c" -o "$probe" >/dev/null 2>&1; then
    echo "fuzz.sh: $cc cannot build libFuzzer targets" >&2
    exit 77
fi

libsrc="util/xs_crc.c mpa/mpa_frame.c mpa/mpa_negotiate.c mpa/mpa_tx.c mpa/mpa_rx.c
ddp/ddp_hdr.c ddp/ddp_seg.c ddp/ddp_place.c
iwarp/rdmap_hdr.c iwarp/rdmap_ext.c iwarp/rdmap_term.c iwarp/rdmap_errors.c iwarp/iw_tx.c iwarp/iw_rx.c
roce/roce_hdr.c roce/roce_opcode.c roce/roce_icrc.c roce/roce_pkt.c roce/roce_cm.c
verbs/xs_local_wire.c libxsock/xsk_exec_wire.c libxsock/xsk_raddr_wire.c
roced/roced_wire.c roced/roced_route.c"
san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cflags="-std=gnu11 -g -O1 -Wall -Wextra -Wno-unused-parameter -I$top -I$cfgdir"

# Library objects once (instrumented for coverage), then one link per harness.
objdir=$bdir/obj
mkdir -p "$objdir"
objs=""
for s in $libsrc; do
    o=$objdir/$(echo "$s" | tr / _).o
    # The transmit side and the CRC only build the harnesses' inputs and
    # their differential checks: comparison tracing there cost a quarter
    # of the run time and guides nothing on the receive path (their edge
    # coverage stays).
    cmp=""
    case "$s" in
    util/xs_crc.c|roce/roce_icrc.c|mpa/mpa_tx.c|ddp/ddp_seg.c|iwarp/iw_tx.c)
        cmp=-fno-sanitize-coverage=trace-cmp ;;
    esac
    if [ ! -f "$o" ] || [ "$top/$s" -nt "$o" ] || [ "$0" -nt "$o" ]; then
        "$cc" $cflags -fsanitize=fuzzer-no-link $san $cmp -c "$top/$s" -o "$o"
    fi
    objs="$objs $o"
done
for n in $names; do
    [ -f "$top/tests/fuzz/$n.c" ] || { echo "fuzz.sh: no harness $n" >&2; exit 2; }
    echo "== build $n"
    # the harness's own checking loops need no comparison tracing (it
    # halved the executions per second); the library code keeps it
    "$cc" $cflags -fsanitize=fuzzer $san -fno-sanitize-coverage=trace-cmp \
        "$top/tests/fuzz/$n.c" $objs -lisal -o "$bdir/$n"
done

if [ "$gen" = 1 ]; then
    echo "== gen-corpus"
    "$cc" $cflags $san "$top/tests/fuzz/gen-corpus.c" $objs -lisal -o "$bdir/gen-corpus"
    "$bdir/gen-corpus" "$top/tests/fuzz/corpus"
fi
[ "$build_only" = 1 ] && exit 0

# Run one harness; writes $bdir/NAME.log and $bdir/NAME.status.
run_one() {
    n=$1
    work=$bdir/corpus/$n
    art=$bdir/artifacts/$n
    rm -rf "$work" "$art"
    mkdir -p "$work" "$art"
    if [ -d "$top/tests/fuzz/corpus/$n" ]; then
        cp "$top/tests/fuzz/corpus/$n"/* "$work"/ 2>/dev/null || true
    fi
    st=0
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$bdir/$n" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=5 \
        -print_final_stats=1 -artifact_prefix="$art/" ${FUZZ_ARGS:-} "$work" \
        >"$bdir/$n.log" 2>&1 || st=$?
    echo "$st" >"$bdir/$n.status"
}

running=0
for n in $names; do
    echo "== run $n (${seconds}s)"
    if [ "$jobs" -gt 1 ]; then
        run_one "$n" &
        running=$((running + 1))
        if [ "$running" -ge "$jobs" ]; then
            wait
            running=0
        fi
    else
        run_one "$n"
    fi
done
wait

fail=0
for n in $names; do
    st=$(cat "$bdir/$n.status")
    stats=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$bdir/$n.log" | tail -1 || true)
    [ -n "$stats" ] || stats=$(grep -E '^#[0-9]+' "$bdir/$n.log" | tail -1 || true)
    execs=$(grep -E '^stat::number_of_executed_units' "$bdir/$n.log" | awk '{print $2}' || true)
    echo "$n: exit $st, executions ${execs:-?}"
    echo "  $stats"
    found=$(ls "$bdir/artifacts/$n" 2>/dev/null || true)
    if [ "$st" != 0 ] || [ -n "$found" ]; then
        fail=1
        mkdir -p "$top/tests/fuzz/crashes/$n"
        for f in $found; do
            cp "$bdir/artifacts/$n/$f" "$top/tests/fuzz/crashes/$n/$f"
            echo "  FINDING: tests/fuzz/crashes/$n/$f"
        done
        echo "  log: $bdir/$n.log"
        grep -E 'ERROR: |FUZZ_ASSERT|runtime error|SUMMARY' "$bdir/$n.log" | head -5 | sed 's/^/  /'
    fi
    if [ "$merge" = 1 ]; then
        new=$bdir/merged/$n
        rm -rf "$new"
        mkdir -p "$new" "$top/tests/fuzz/corpus/$n"
        "$bdir/$n" -merge=1 -rss_limit_mb=2048 -timeout=5 "$new" \
            "$top/tests/fuzz/corpus/$n" "$bdir/corpus/$n" >"$bdir/$n.merge.log" 2>&1
        rm -f "$top/tests/fuzz/corpus/$n"/*
        cp "$new"/* "$top/tests/fuzz/corpus/$n"/
        echo "  merged corpus: $(ls "$new" | wc -l) files -> tests/fuzz/corpus/$n"
    fi
done
exit $fail
