#ifndef UNCLOG_STATS_H
#define UNCLOG_STATS_H

#include "server/conn.h"

/* GET /stats: the effective settings, connection and request counts, and
 * the gateway's per-class threadpool counters, as JSON. */
int stats_on_request(struct conn *c, const struct request *req);

#endif
