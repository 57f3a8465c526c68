#ifndef UNCLOG_METRICS_H
#define UNCLOG_METRICS_H

#include "server/module.h"

/* GET /metrics: the counters of /stats in the Prometheus text exposition
 * format 0.0.4 (responses by route and status class, connections, jobs per
 * class, the memory budget, the scheduler, the settings), with cumulative
 * histograms of request latency and of job queue and run times. */
extern const struct module metrics_module;

#endif
