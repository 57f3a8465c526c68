#ifndef UNCLOG_METRICS_H
#define UNCLOG_METRICS_H

struct buf;
struct snapshot;

/* Writes snapshot S, complete, to OUT in the Prometheus text exposition
 * format 0.0.4: counters, gauges, info samples and cumulative histograms
 * (request latency, job queue and run times), in base units. What GET
 * /metrics answers (the stats module's route). */
void metrics_render(struct buf *o, const struct snapshot *s);

#endif
