#ifndef UNCLOG_METRICS_H
#define UNCLOG_METRICS_H

#include <stdbool.h>

struct buf;
struct snapshot;

/* Writes snapshot S, complete, to OUT in the Prometheus text exposition
 * format 0.0.4: counters, gauges, info samples and cumulative histograms
 * (request latency, job queue and run times), in base units. What GET
 * /metrics answers (the stats module's route). Without FULL, the figures
 * that name a process or a client (snap_def's private) are left out. */
void metrics_render(struct buf *o, const struct snapshot *s, bool full);

#endif
