# MODE-latency-over-time.svg: every GET probe request's latency against its
# scheduled send time during the warm flood, one line per series file.
# Parameters: out, series (CSV files: sched_s,latency_ms,outcome,status),
# partitions (one per file, for the titles), interval (ms between requests).
height = 540
load "common.gp"
set datafile separator ","
set title "GET 1 KiB latency, one request every " . interval . " ms, during the flood"
set xlabel "scheduled send time (s)"
set ylabel "latency (ms)"
set logscale y
plot for [i=1:words(series)] word(series, i) using 1:(strcol(3) eq "ok" ? $2 : NaN) \
     with lines lw 1.5 title "partition = " . word(partitions, i)
