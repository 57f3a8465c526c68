#ifndef UNCLOG_HISTORY_ROUTE_H
#define UNCLOG_HISTORY_ROUTE_H

#include <stdbool.h>

#include "server/module.h"

/* The body of GET /stats/history[?since=MS] (a route of the stats module)
 * into OUT: what the dashboard plots over the last two minutes
 * (server_history: a sample every 500 ms) and the last setting changes of
 * SRV, as one JSON object of compact arrays; with since= in TARGET's
 * query, only what was recorded after uptime MS. Returns false, writing
 * nothing, when since= is not a number of milliseconds. */
bool history_render(struct buf *out, struct server *srv, const char *target);

#endif
