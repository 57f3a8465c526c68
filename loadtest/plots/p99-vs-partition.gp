# MODE-p99-vs-partition.svg: probe p99 against the partition (MODE-sweep.dat),
# and each peer's warm GET p99 as a flat line (peers have no partition).
# Parameters: out, dat, xrange, xtics; peer_values (numbers) and peer_titles
# (one quoted title each), blank when there are no peers. gnuplot 5.4 runs
# an empty `for` once: the i <= n guards make that pass draw nothing and add
# no key entry.
height = 860
load "common.gp"
load "partition-axis.gp"
# Fourteen entries or so: two columns below, so that the plot keeps its height.
set key below horizontal maxcols 2 width -12 font ",12" spacing 1.1
palette = "#e69f00 #cc79a7 #0072b2 #8c564b #17becf"
n = words(peer_values)
set title "Small-request p99 latency under a 10-connection 16 MiB flood"
set ylabel "probe p99 latency (ms, log; lower is better)"
set logscale y
plot dat using 1:3 with linespoints lw 3 pt 7 ps 1.2 title "GET 1 KiB, flood (warm cache)", \
     dat using 1:4 with linespoints lw 3 pt 5 ps 1.2 title "POST /gzip 1 KiB, flood (warm)", \
     dat using 1:5 with linespoints lw 3 pt 9 ps 1.2 lc rgb "#e51e10" \
         title "GET 1 KiB, flood (cold cache)", \
     dat using 1:2 with linespoints lw 2 pt 13 ps 1.0 lc rgb "#888888" \
         title "GET 1 KiB, no flood", \
     for [i=1:n] (i <= n ? word(peer_values, i) + 0 : NaN) with lines lw 1.5 \
         lc rgb word(palette, (i - 1) % words(palette) + 1) \
         title (i <= n ? word(peer_titles, i) . ": GET p99, flood" : "")
