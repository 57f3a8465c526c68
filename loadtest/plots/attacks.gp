# MODE-attacks.svg: the victim alone and attacked, per server, one panel per
# attack (MODE-attacks.dat: one block per attack, gnuplot's index; columns
# "label" alone attacked). A line joins each server's two points: the longer
# the line, the more the other client's attack costs the victim. The p99
# panels are log scale (milliseconds to seconds); the bulk panels are MB/s.
# Parameters: out, dat, titles (one quoted title per block), bulk (the
# numbers of the blocks in MB/s, from 1, separated by spaces), heading
# (optional: the figure's title). cluster-attacks.svg (plots.py,
# plot_cluster_attacks) draws the cluster's attacks with it: its rows are
# "one attacker host" and "spread over 4 hosts", the victim alone on both.
height = 450 * ((words(titles) + 1) / 2)
if (!exists("heading")) heading = "The victim alone and while another client attacks"
load "common.gp"
set multiplot layout (words(titles) + 1) / 2, 2 title heading
set xtics rotate by -30 font ",14"
# A margin above and below, so that no point sits on the frame.
set offsets 0.5, 0.5, graph 0.08, graph 0.08
set key outside bottom center horizontal font ",14"
do for [i=1:words(titles)] {
    set title word(titles, i)
    if (strstrt(" " . bulk . " ", sprintf(" %d ", i)) > 0) {
        unset logscale y
        set yrange [0:*]
        set ylabel "victim MB/s (more is better)"
    } else {
        set logscale y
        set yrange [*:*]
        set ylabel "victim p99 ms (log; lower is better)"
    }
    plot dat index (i - 1) using 0:2:(0):($3 - $2) with vectors nohead lw 2 lc rgb "#bbbbbb" notitle, \
         dat index (i - 1) using 0:2:xtic(1) with points pt 6 ps 1.6 lw 2 lc rgb "#4477aa" title "alone", \
         dat index (i - 1) using 0:3 with points pt 7 ps 1.6 lc rgb "#ee6677" title "attacked"
}
unset multiplot
