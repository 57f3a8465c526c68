#ifndef UNCLOG_STATS_H
#define UNCLOG_STATS_H

#include "server/http/conn.h"

#include "server/module.h"

/* GET /stats: the effective settings, connection and request counts, each
 * module's members (its stats hook) and the gateway's per-class threadpool
 * counters, as JSON. */
extern const struct module stats_module;

#endif
