# Sourced by scripts/bench.sh and scripts/bench-sockets.sh.
# med CASE COLUMN FIELD: the median of FIELD over the runs of CASE/COLUMN in
# the results file $res (lines "case column value p99"); nan when none.
med() {
    awk -v c="$1" -v k="$2" -v f="$3" '$1 == c && $2 == k { print $f }' "$res" | sort -g |
        awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else print a[int((NR + 1) / 2)] }'
}
