# MODE-frontier.svg: one point per configuration, warm flood: the flood's
# MB/s against the worse of the two probes' p99 (MODE-frontier.dat:
# mb_s p99_ms group label; group 0 unclog fifo, 1 unclog fair, 2 peers).
# Fixed pieces and the peers lie on one frontier; fair lies off it, to the
# lower right. Parameters: out, dat.
height = 700
load "common.gp"
set title "Throughput against small-request latency (warm flood)"
set xlabel "flood MB/s (more is better)"
set ylabel "probe p99 ms (worse of GET and gzip; log; lower is better)"
set logscale y
set xrange [0:*]
# The axes fit the points (a log axis would otherwise grow to whole decades
# beyond them), with a margin for their labels.
set autoscale yfix
set offsets graph 0, graph 0.08, graph 0.12, graph 0.08
set key below horizontal maxcols 3
set label 1 "better ↘" at graph 0.98, graph 0.05 right font ",18" tc rgb "#228833"
plot dat using 1:($3 == 0 ? $2 : 1/0) with points pt 7 ps 1.5 lc rgb "#4477aa" title "unclog fifo (partition sweep)", \
     dat using 1:($3 == 1 ? $2 : 1/0) with points pt 9 ps 2.0 lc rgb "#ee6677" title "unclog fair", \
     dat using 1:($3 == 2 ? $2 : 1/0) with points pt 5 ps 1.5 lc rgb "#228833" title "peers (nginx, Node.js)", \
     dat using 1:2:4 with labels offset 0.8,0.6 left font ",11" notitle
