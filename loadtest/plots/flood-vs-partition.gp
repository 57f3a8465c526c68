# MODE-flood-vs-partition.svg: the flood's MB/s against the partition, warm
# and cold (MODE-sweep.dat). Parameters: out, dat, xrange, xtics.
height = 640
load "common.gp"
load "partition-axis.gp"
set title "Flood throughput (10 connections x 16 MiB files)"
set ylabel "flood MB/s"
set yrange [0:*]
plot dat using 1:7 with linespoints lw 3 pt 7 ps 1.2 title "warm page cache", \
     dat using 1:8 with linespoints lw 3 pt 5 ps 1.2 title "cold (evicted)"
