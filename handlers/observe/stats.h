#ifndef UNCLOG_STATS_H
#define UNCLOG_STATS_H

#include "server/http/conn.h"

#include "server/module.h"

/* GET /stats: the server's snapshot (server_snapshot) as one JSON object:
 * its identity and settings, requests, responses and latency, connections,
 * memory, each module's members, the scheduler and the jobs per class.
 * GET /metrics: the same snapshot in Prometheus text (metrics.h).
 * GET /stats/history: what the dashboard draws, over time (history.h). */
extern const struct module stats_module;

struct buf;
struct snapshot;

/* Writes snapshot S, complete, to OUT in one output's format. */
typedef void (*stats_render_fn)(struct buf *out, const struct snapshot *s);

/* Answers C with a snapshot of its server rendered by RENDER, as TYPE (a
 * Content-Type) not to be cached: what /stats and /metrics share. Returns
 * 0, or 500 when the snapshot or its rendering could not be had. */
int stats_answer(struct conn *c, stats_render_fn render, const char *type);

#endif
