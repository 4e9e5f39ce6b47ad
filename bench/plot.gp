# bench/plot.gp — lateness plots for one run (bench/run.sh calls it).
#   gnuplot -e "raw='DIR'; out='DIR'" bench/plot.gp
# Reads raw/lat-<tag>.cdf ("lateness_ms fraction", sorted) and raw/lat-<tag>.series
# ("t_s lateness_ms") for tag = lat1k, lat5k, latbig, whlat1k, amqplat1k, tlatbig, bpage, bucket
# (figures 2, 4, 7, 8, 11, 13; the bucket's series counts from its first due time); writes out/latency-cdf.png,
# out/latency-tail.png and out/lateness-time.png. Missing runs are left out.
if (!exists("raw") || !exists("out")) { print "usage: gnuplot -e \"raw='DIR'; out='DIR'\" bench/plot.gp"; exit }
if (!exists("bigN")) bigN = "the backlog"

have(f) = system(sprintf("test -s '%s' && echo 1 || echo 0", f)) + 0
tags = "lat1k lat5k latbig whlat1k amqplat1k tlatbig bpage bucket"
label(t) = (t eq "lat1k") ? "1,000 jobs/s, 1,000 pending" : \
           (t eq "lat5k") ? "5,000 jobs/s, 1,000 pending" : \
           (t eq "whlat1k") ? "1,000 jobs/s, webhook route" : \
           (t eq "amqplat1k") ? "1,000 jobs/s, amqp route" : \
           (t eq "tlatbig") ? "1,000 jobs/s, far backlog pending (fig. 11)" : \
           (t eq "bpage") ? "1,000 jobs/s while a bucket pages in (fig. 13)" : \
           (t eq "bucket") ? "the jobs of the bucket (fig. 13)" : sprintf("1,000 jobs/s, %s pending", bigN)

set terminal pngcairo size 1000,620 font "sans,10"
set grid
set key bottom right

# --- CDF, log x
set output out."/latency-cdf.png"
set title "hourglass delivery lateness (consumer's or receiver's receipt - runAt): CDF"
set xlabel "lateness, ms (log scale)"
set ylabel "fraction of jobs delivered within x"
set logscale x
set yrange [0:1]
cmd = ""
do for [t in tags] {
    f = raw."/lat-".t.".cdf"
    if (have(f)) { cmd = cmd.(strlen(cmd) ? ", " : "").sprintf("'%s' using ($1 < 0.01 ? 0.01 : $1):2 with lines lw 2 title '%s'", f, label(t)) }
}
if (strlen(cmd)) { eval "plot ".cmd } else { print "no lateness samples" }

# --- tail: fraction later than x, log y
set output out."/latency-tail.png"
set title "hourglass delivery lateness: tail (fraction of jobs later than x)"
set ylabel "fraction later than x (log scale)"
set key top right
unset yrange
set yrange [*:1]
set logscale y
set format y "%g"
cmd = ""
do for [t in tags] {
    f = raw."/lat-".t.".cdf"
    if (have(f)) { cmd = cmd.(strlen(cmd) ? ", " : "").sprintf("'%s' using ($1 < 0.01 ? 0.01 : $1):(1 - $2 > 0 ? 1 - $2 : NaN) with lines lw 2 title '%s'", f, label(t)) }
}
if (strlen(cmd)) { eval "plot ".cmd }

# --- lateness over time (stalls and periodic effects show up here)
set output out."/lateness-time.png"
set title "hourglass delivery lateness over the run (each point a job, x = its receipt)"
set xlabel "seconds since the producers started"
set ylabel "lateness, ms (log scale)"
unset logscale x
set logscale y
set format y "%g"
set yrange [*:*]
set key top left
cmd = ""
do for [t in tags] {
    f = raw."/lat-".t.".series"
    if (have(f)) { cmd = cmd.(strlen(cmd) ? ", " : "").sprintf("'%s' using 1:($2 < 0.01 ? 0.01 : $2) with points pt 7 ps 0.25 title '%s'", f, label(t)) }
}
if (strlen(cmd)) { eval "plot ".cmd }
