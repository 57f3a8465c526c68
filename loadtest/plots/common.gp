# Shared by every plot of loadtest/unclogbench/plots.py, loaded first:
#   gnuplot -e "out='X.svg'; height=640; ..." loadtest/plots/NAME.gp
# (run in the results directory, with GNUPLOT_LIB=loadtest/plots so that
# `load` finds this file). Sets the SVG terminal, the output and the style.
set terminal svg size 900,height dynamic font "Helvetica,16" background "white"
set output out
set border 3
set tics nomirror
set grid ytics lc rgb "#dddddd"
set key below
set datafile missing "NaN"
