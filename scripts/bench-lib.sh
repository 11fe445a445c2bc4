# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Sourced by scripts/bench.sh, scripts/bench-sockets.sh and
# scripts/bench-programs.sh.
# med_in FILE KEY1 KEY2 FIELD: the median of FIELD over the lines of FILE
# whose first two fields are KEY1 KEY2 (empty and nan values skipped: a run
# that measured nothing); nan when none.
med_in() {
    awk -v c="$2" -v k="$3" -v f="$4" '$1 == c && $2 == k && $f != "" && $f != "nan" { print $f }' \
        "$1" | sort -g |
        awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else print a[int((NR + 1) / 2)] }'
}
# med CASE COLUMN FIELD: the same over the results file $res (lines "case
# column value p99" in bench.sh and bench-sockets.sh, "program row value
# srv_cpu cli_cpu" in bench-programs.sh)
med() { med_in "$res" "$@"; }
