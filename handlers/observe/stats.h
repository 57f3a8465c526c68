#ifndef UNCLOG_STATS_H
#define UNCLOG_STATS_H

#include "server/http/conn.h"

#include "server/module.h"

/* GET /stats: the server's snapshot (server_snapshot) as one JSON object:
 * its identity and settings, requests, responses and latency, connections,
 * memory, each module's members, the scheduler and the jobs per class.
 * GET /metrics: the same snapshot in Prometheus text (metrics.h).
 * GET /stats/history: what the dashboard draws, over time (history.h).
 * They answer on the admin door, and on the public listener only the
 * viewers stats_view lets in (403 otherwise): the figures name the
 * server's other clients. */
extern const struct module stats_module;

/* The module's keys (stats_module.config fills it). */
struct stats_config {
    struct config_addrs from; /* stats_from: who may look on the public listener */
    unsigned detail;          /* stats_detail: what they see (enum stats_view) */
};

/* What a client may see of the server's figures. */
enum stats_view {
    STATS_REFUSED, /* nothing: 403 */
    STATS_PRIVATE, /* the figures, but no client's address and no pid (snap_def's private) */
    STATS_FULL,    /* everything */
};

/* What C's client may see: everything on the admin door (conn_admin, the
 * only door /settings has); on the public listener, from an address under
 * stats_from, what stats_detail says (private by default); from anywhere
 * else (loopback too: a reverse proxy on this machine is loopback for
 * whoever it serves), nothing. */
enum stats_view stats_view(struct conn *c);

/* Answers C 403, naming the key that lets a client in. Returns 0. */
int stats_refuse(struct conn *c);

struct buf;
struct snapshot;

/* Writes snapshot S, complete, to OUT in one output's format; without FULL,
 * leaves out the figures that name a process or a client (private). */
typedef void (*stats_render_fn)(struct buf *out, const struct snapshot *s, bool full);

/* Answers C with a snapshot of its server rendered by RENDER, as TYPE (a
 * Content-Type) not to be cached, or 403 when C's client may not see it
 * (stats_view): what /stats and /metrics share. With workers the answer
 * waits (SERVER_REFRESH_WAIT_MS at most) for the others to publish their
 * figures, so that its totals are exact. Returns 0, or 500 when the
 * snapshot or its rendering could not be had. */
int stats_answer(struct conn *c, stats_render_fn render, const char *type);

#endif
