#ifndef UNCLOG_METRICS_H
#define UNCLOG_METRICS_H

#include "server/module.h"

/* GET /metrics: the server's snapshot (server_snapshot), the same figures
 * as /stats, in the Prometheus text exposition format 0.0.4: counters,
 * gauges, info samples and cumulative histograms (request latency, job
 * queue and run times), in base units. */
extern const struct module metrics_module;

#endif
