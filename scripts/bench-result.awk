# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The "RESULT name key=value ..." lines of xsock-bench / xsock-sockbench as
# "CASE COLUMN value p99" (value: bw_MBps or lat_us; p99 "-" if absent).
# Used by scripts/bench.sh and scripts/bench-sockets.sh: awk -v c=CASE -v k=COLUMN.
/^RESULT / {
    v = ""; p = "-"
    for (i = 3; i <= NF; i++) {
        split($i, kv, "=")
        if (kv[1] == "bw_MBps" || kv[1] == "lat_us") v = kv[2]
        if (kv[1] == "p99_us") p = kv[2]
    }
    print c, k, v, p
}
