#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# PNG plots of the benchmark scripts' data files, with gnuplot (gnuplot-nox):
#   scripts/bench-plot.sh sockets DIR
#       DIR/sockets-bw.dat  -> DIR/sockets-bw.png  (MB/s against write size)
#       DIR/sockets-lat.dat -> DIR/sockets-lat.png (64 B latency percentiles)
#   scripts/bench-plot.sh programs DIR
#       DIR/programs.dat    -> DIR/programs.png    (each row / tcp, per program)
# Called by scripts/bench-sockets.sh --plot and scripts/bench-programs.sh
# --plot; the data files' formats are written there.  Exit 1 without gnuplot.
set -eu
[ $# = 2 ] || { echo "usage: bench-plot.sh sockets|programs DIR" >&2; exit 2; }
kind=$1 dir=$2
command -v gnuplot >/dev/null 2>&1 || {
    echo "bench-plot.sh: no gnuplot (scripts/install-deps.sh installs gnuplot-nox)" >&2
    exit 1
}
# pngcairo draws antialiased text; the plain png terminal (libgd) otherwise
term="pngcairo size 900,560 font 'sans,10'"
gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo || term="png size 900,560"

case $kind in
sockets)
    gnuplot <<EOF
set terminal $term
set output '$dir/sockets-bw.png'
set title 'xsock-sockbench on loopback: one stream, bandwidth against write size'
set xlabel 'octets per write()'
set ylabel 'MB/s (median of interleaved runs)'
set logscale x 4
set logscale y 10
set format x '%.0b%B'
set key top left
set grid
plot '$dir/sockets-bw.dat' using 1:2 with linespoints lw 2 pt 7 title 'plain TCP', \
     '' using 1:3 with linespoints lw 2 pt 5 title 'xsock (iWARP, no CRC)', \
     '' using 1:4 with linespoints lw 2 pt 9 title 'xsock + MPA CRC32c'
EOF
    gnuplot <<EOF
set terminal $term
set output '$dir/sockets-lat.png'
set title 'xsock-sockbench on loopback: 64 B ping-pong, one-way latency percentiles'
set ylabel 'microseconds, log scale (median of interleaved runs)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
# log: the tails (p99.9) are 10-100 times the medians on a busy machine
set logscale y 10
set yrange [1:*]
set key top left
set grid ytics
plot '$dir/sockets-lat.dat' using 2:xtic(1) title 'plain TCP', \
     '' using 3 title 'xsock (iWARP, no CRC)', \
     '' using 4 title 'xsock + MPA CRC32c'
EOF
    echo "bench-plot.sh: wrote $dir/sockets-bw.png $dir/sockets-lat.png"
    ;;
programs)
    # programs.dat: "program row ratio" lines; one cluster per program
    awk '!/^#/ { p[$1] = 1; r[$2] = 1; v[$1, $2] = $3; if (!($1 in o)) { o[$1] = ++np; n[np] = $1 }
        if (!($2 in q)) { q[$2] = ++nr; m[nr] = $2 } }
        END { printf "program"; for (j = 1; j <= nr; j++) printf " %s", m[j]; print ""
            for (i = 1; i <= np; i++) { printf "%s", n[i]
                for (j = 1; j <= nr; j++) printf " %s", ((n[i], m[j]) in v) ? v[n[i], m[j]] : "NaN"; print "" } }' \
        "$dir/programs.dat" >"$dir/programs.tab"
    ncol=$(head -1 "$dir/programs.tab" | awk '{ print NF }')
    gnuplot <<EOF
set terminal $term
set output '$dir/programs.png'
set title 'Real programs on loopback: each row against plain TCP of the same run'
set ylabel 'median / median of tcp (higher is better)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set yrange [0:*]
set xtics rotate by -30
set key top right
set grid ytics
plot for [c=2:$ncol] '$dir/programs.tab' using c:xtic(1) title columnheader(c)
EOF
    echo "bench-plot.sh: wrote $dir/programs.png"
    ;;
*) echo "usage: bench-plot.sh sockets|programs DIR" >&2; exit 2 ;;
esac
