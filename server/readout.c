/* What the server shows of itself: its figures in a snapshot, gathered
 * from each component in the order /stats lists them. /stats and /metrics
 * render the same snapshot (server/base/snapshot.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/base/snapshot.h"
#include "server/workers/control.h"
#include "server/base/util.h"
#include "server/server.h"
#include "server/module.h"
#include "server/server_internal.h"
#include "server/workers/figures.h"

/* ---- identity ---------------------------------------------------------- */

static const struct snap_def version_def = {.key = "version",
                                            .metric = "unclog_build_info",
                                            .kind = SNAP_INFO,
                                            .text_label = "version",
                                            .help = "The server's version; always 1."};
static const struct snap_def worker_def = {
    .key = "worker",
    .metric = "unclog_worker",
    .help = "The worker process that answered: 1..N with workers > 1, 0 alone. The other figures "
            "are the whole server's, every worker's merged (unclog_worker_* per worker).",
    .merge = SNAP_OWN};
/* /stats' alone: it names the process, it measures nothing; Prometheus
 * names its target by address (and unclog_worker tells workers apart). */
static const struct snap_def pid_def = {.key = "pid", .merge = SNAP_OWN, .private = true};
static const struct snap_def uptime_def = {
    .key = "uptime_ms",
    .metric = "unclog_uptime_seconds",
    .unit = SNAP_MS,
    .help = "Time since the server started (with workers > 1, its oldest running worker).",
    .merge = SNAP_MAX};

/* ---- settings ---------------------------------------------------------- */

static const struct snap_def setting_changed_def = {
    .metric = "unclog_setting_changed_uptime_seconds",
    .unit = SNAP_MS,
    .name_label = "key",
    .help = "The uptime at which a live setting last changed (POST /settings or a reload); "
            "only settings that changed.",
    .merge = SNAP_MAX};
static const struct snap_def setting_def = {
    .metric = "unclog_setting_info",
    .kind = SNAP_INFO,
    .name_label = "key",
    .text_label = "value",
    .help = "A setting that can change while the server runs, with its value as the config file "
            "spells it; always 1."};

/* The live settings, as the config file spells them, and when each last
 * changed: the one place /stats and /metrics read the list of live keys. */
static void live_settings_stats(const struct server *srv, struct snapshot *s)
{
    const struct config_key *k;
    snap_open(s, "settings_changed_ms", NULL);
    for (size_t i = 0; (k = config_key_at(srv->cfg, i)) != NULL; i++) {
        if (srv->live_changed[i])
            snap_add_named(s, &setting_changed_def, k->name, srv->live_changed_ms[i]);
    }
    snap_close(s);
    snap_open(s, "settings", NULL);
    for (size_t i = 0; (k = config_key_at(srv->cfg, i)) != NULL; i++) {
        char value[SNAP_TEXT_MAX];
        if (k->when != CONFIG_LIVE)
            continue;
        config_get(srv->cfg, k->name, value, sizeof value);
        snap_add_text(s, &setting_def, k->name, value);
    }
    snap_close(s);
}

/* ---- requests and responses -------------------------------------------- */

static const struct snap_def bytes_sent_def = {
    .key = "bytes_sent",
    .metric = "unclog_http_response_body_bytes_total",
    .kind = SNAP_COUNTER,
    .help = "Response body bytes handed to the kernel, counted as each piece goes (heads not "
            "included)."};
static const struct snap_def small_max_def = {
    .key = "small_max_bytes",
    .metric = "unclog_http_small_response_max_bytes",
    .help = "The largest response body counted as small by unclog_http_request_duration_seconds.",
    .merge = SNAP_SAME};
static const struct snap_def duration_def = {
    .metric = "unclog_http_request_duration_seconds",
    .kind = SNAP_HISTOGRAM,
    .unit = SNAP_US,
    .help = "Time from a request's first byte to its response's last byte handed to the kernel, by "
            "response body size: small (at most unclog_http_small_response_max_bytes) or large. "
            "Not /stats, /metrics and /settings themselves."};
/* The recent window (about 1 s): /stats' alone, as the jobs' (gateway.c).
 * /stats has no cumulative latency: duration_def is /metrics' alone. */
static const struct snap_def latency_recent[] = {
    {.key = "requests"}, {.key = "p50_us"}, {.key = "p99_us"}, {.key = "max_us"}};
/* /stats' alone: in /metrics, the sum of unclog_http_responses_total. */
static const struct snap_def requests_def = {.key = "requests", .merge = SNAP_TOTAL};
static const struct snap_def responses_def = {
    .metric = "unclog_http_responses_total",
    .kind = SNAP_COUNTER,
    .name_label = "code",
    .help = "Responses completed, by route (its path; static for the files' fallback; none for a "
            "request refused before routing) and status class."};
static const char *const status_classes[5] = {"1xx", "2xx", "3xx", "4xx", "5xx"};

static void latency_stats(const struct server *srv, struct snapshot *s)
{
    static const char *const sizes[SERVER_SIZES] = {"small", "large"};
    snap_open(s, "latency", NULL);
    snap_add(s, &small_max_def, SERVER_SMALL_MAX);
    static const enum snap_stat recent[] = {SNAP_STAT_COUNT, SNAP_STAT_P50, SNAP_STAT_P99,
                                            SNAP_STAT_MAX};
    for (int i = 0; i < SERVER_SIZES; i++) {
        struct hist_summary sum;
        hist_summary(&srv->latency[i], uv_now(srv->loop), &sum);
        snap_open(s, sizes[i], "size");
        for (size_t k = 0; k < ARRAY_SIZE(recent); k++)
            snap_add_window(s, &latency_recent[k], &srv->latency[i], &sum, recent[k]);
        snap_add_hist(s, &duration_def, &srv->latency_total[i]);
        snap_close(s);
    }
    snap_close(s);
}

/* Responses per route and status class. A route whose label an earlier one
 * has (a second route of one path, a second fallback) is never chosen by
 * server_route, so it has nothing to count and no member of its own. */
static void responses_stats(const struct server *srv, struct snapshot *s)
{
    snap_add(s, &requests_def, srv->requests);
    snap_open(s, "responses", NULL);
    for (unsigned i = 0; i < srv->nroute_rows; i++) {
        const struct route_row *row = &srv->route_rows[i];
        bool seen = false;
        for (unsigned j = 0; j < i && !seen; j++)
            seen = strcmp(srv->route_rows[j].label, row->label) == 0;
        if (seen)
            continue;
        snap_open(s, row->label, "route");
        for (unsigned cls = 0; cls < 5; cls++)
            snap_add_named(s, &responses_def, status_classes[cls], row->by_class[cls]);
        snap_close(s);
    }
    snap_close(s);
}

/* ---- connections ------------------------------------------------------- */

static const struct snap_def conn_active = {
    .key = "active", .metric = "unclog_connections_active", .help = "Connections open now."};
static const struct snap_def conn_accepted = {.key = "accepted",
                                              .metric = "unclog_connections_accepted_total",
                                              .kind = SNAP_COUNTER,
                                              .help = "Connections accepted."};
static const struct snap_def conn_max = {
    .key = "max",
    .metric = "unclog_connections_max",
    .help = "Connections served at once (max_connections); at the limit the client holding the "
            "most gives way.",
    .merge = SNAP_SAME};

static const struct snap_def proxy_clients_def = {
    .key = "clients",
    .metric = "unclog_proxy_headers_clients_total",
    .kind = SNAP_COUNTER,
    .help = "PROXY headers from a balancer under proxy_protocol_from that named a client."};
static const struct snap_def proxy_local_def = {
    .key = "local",
    .metric = "unclog_proxy_headers_local_total",
    .kind = SNAP_COUNTER,
    .help = "PROXY headers that named the balancer itself (LOCAL: health checks; UNKNOWN)."};
static const struct snap_def proxy_refused_def = {
    .metric = "unclog_proxy_refused_total",
    .kind = SNAP_COUNTER,
    .name_label = "reason",
    .help = "Connections closed for the PROXY protocol: malformed (a balancer's connection not "
            "beginning with a valid header), truncated (cut short or timed out within it), "
            "unlisted (a header from a peer not under proxy_protocol_from)."};

/* The PROXY protocol's headers and refusals (conn_env.proxy). */
static void proxy_stats(const struct server *srv, struct snapshot *s)
{
    snap_open(s, "proxy_protocol", NULL);
    snap_add(s, &proxy_clients_def, srv->conn_env.proxy.clients);
    snap_add(s, &proxy_local_def, srv->conn_env.proxy.local);
    snap_open(s, "refused", NULL);
    snap_add_named(s, &proxy_refused_def, "malformed", srv->conn_env.proxy.malformed);
    snap_add_named(s, &proxy_refused_def, "truncated", srv->conn_env.proxy.truncated);
    snap_add_named(s, &proxy_refused_def, "unlisted", srv->conn_env.proxy.unlisted);
    snap_close(s);
    snap_close(s);
}

static void connections_stats(const struct server *srv, const struct clients_peer *peers,
                              unsigned npeers, struct snapshot *s)
{
    snap_open(s, "connections", NULL);
    snap_add(s, &conn_active, srv->active + srv->admin_active);
    snap_add(s, &conn_accepted, srv->accepted);
    snap_add(s, &conn_max, srv->cfg->max_connections);
    clients_stats(&srv->clients, uv_now(srv->loop), peers, npeers, s);
    proxy_stats(srv, s);
    snap_close(s);
}

/* The server's figures, its top clients ranked with those of NPEERS other
 * workers (PEERS). */
static void snapshot(const struct server *srv, const struct clients_peer *peers, unsigned npeers,
                     struct snapshot *s)
{
    snap_add_text(s, &version_def, NULL, UNCLOG_VERSION);
    snap_add(s, &worker_def, srv->worker);
    snap_add(s, &pid_def, (uint64_t)getpid());
    snap_add_settings(s, srv->cfg, &server_config_table); /* keys.c's figures */
    live_settings_stats(srv, s);
    snap_add(s, &bytes_sent_def, srv->bytes_sent);
    writer_stats(&srv->writer_counts, s);
    latency_stats(srv, s);
    snap_add(s, &uptime_def, uv_now(srv->loop) - srv->started_ms);
    connections_stats(srv, peers, npeers, s);
    budget_stats(&srv->budget, s);
    zstates_stats(&srv->zstates, s);
    for (size_t i = 0; srv->modules[i] != NULL; i++) {
        if (srv->modules[i]->config != NULL)
            snap_add_settings(s, srv->cfg, srv->modules[i]->config);
        if (srv->modules[i]->stats != NULL)
            srv->modules[i]->stats(srv, srv->module_state[i], s);
    }
    responses_stats(srv, s);
    gateway_stats(&srv->gateway, s);
    sender_stats(&srv->sender, s);
    conn_turns_stats(&srv->turns, s);
}

void server__snapshot_own(const void *arg, struct snapshot *s)
{
    snapshot(arg, NULL, 0, s);
}

void server_snapshot(const struct server *srv, struct snapshot *s)
{
    if (srv->figures == NULL) {
        snapshot(srv, NULL, 0, s);
        return;
    }
    unsigned npeers;
    struct clients_peer *peers = figures_peers(srv->figures, &npeers);
    snapshot(srv, peers, npeers, s);
    free(peers);
    figures_merge(srv->figures, s);
}

static void server_on_refreshed(struct figures_wait *wait)
{
    struct server_refresh *refresh = container_of(wait, struct server_refresh, wait);
    refresh->done(refresh);
}

bool server_refresh(struct server *srv, struct server_refresh *refresh, server_refresh_fn done)
{
    if (srv->figures == NULL)
        return false;
    refresh->done = done;
    return figures_refresh(srv->figures, &refresh->wait, server_on_refreshed,
                           uv_now(srv->loop) + SERVER_REFRESH_WAIT_MS);
}

/* ---- history ----------------------------------------------------------- */

/* With workers, OUT's figures are the whole server's: read from the merged
 * snapshot (unchanged if it cannot be taken). */
static void whole_sample(const struct server *srv, struct history_sample *out)
{
    struct snapshot s;
    snap_init(&s);
    server_snapshot(srv, &s);
    for (size_t i = 0; snap_complete(&s) && i < s.len; i++) {
        const struct snap_entry *e = &s.entry[i];
        if (e->type != SNAP_FIGURE)
            continue;
        if (e->def == &bytes_sent_def)
            out->bytes_sent = e->value;
        bool small = e->parent != SNAP_TOP && strcmp(s.entry[e->parent].name, "small") == 0;
        if (small && e->def == &latency_recent[0])
            out->requests = e->value;
        else if (small && e->def == &latency_recent[1])
            out->p50_us = e->value;
        else if (small && e->def == &latency_recent[2])
            out->p99_us = e->value;
    }
    snap_free(&s);
}

/* The figures of the dashboard's chart: small requests' latency in the
 * recent window, the bytes sent, at the server's uptime. */
void server_sample(const struct server *srv, struct history_sample *out)
{
    uint64_t now = uv_now(srv->loop);
    struct hist_summary h;
    hist_summary(&srv->latency[SERVER_SMALL], now, &h);
    *out = (struct history_sample){.t_ms = now - srv->started_ms,
                                   .requests = h.count,
                                   .p50_us = h.p50,
                                   .p99_us = h.p99,
                                   .bytes_sent = srv->bytes_sent};
    if (srv->figures != NULL)
        whole_sample(srv, out);
}

const struct history *server_history(struct server *srv)
{
    if (srv->control != NULL) /* the whole server's, copied here */
        control_history_read(srv->control, &srv->history);
    return &srv->history;
}
