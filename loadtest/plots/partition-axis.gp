# The x axis of the partition sweeps, loaded after common.gp: partition bytes
# on a log scale, one labelled tic per partition ("whole" one step right of
# 16m). Parameters: xrange ("LOW:HIGH") and xtics ('"4k" 4096, "64k" 65536').
set logscale x 2
eval "set xrange [" . xrange . "]"
eval "set xtics (" . xtics . ") font \",13\""
set xlabel "partition (bytes per threadpool read)"
