#include "handlers/observe/stats.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "handlers/observe/settings.h"
#include "server/pool/gateway.h"
#include "server/server.h"
#include "server/base/util.h"

static void put_size(struct buf *o, const char *key, size_t size)
{
    if (size == CONFIG_WHOLE || size == CONFIG_AUTO_SIZE)
        buf_printf(o, "\"%s\":\"%s\",", key, size == CONFIG_WHOLE ? "whole" : "auto");
    else
        buf_printf(o, "\"%s\":%zu,", key, size);
}

static int stats_on_request(struct conn *c, const struct request *req)
{
    const struct server *srv = conn_server(c);
    struct buf o;
    buf_init_growing(&o);
    buf_printf(&o, "{\"version\":\"" UNCLOG_VERSION "\",\"worker\":%u,\"pid\":%ld,\"threads\":%u,",
               srv->worker, (long)getpid(), srv->cfg->threads);
    put_size(&o, "partition", srv->cfg->partition);
    put_size(&o, "partition_min", srv->cfg->partition_min);
    put_size(&o, "partition_max", srv->cfg->partition_max);
    char gzip_partition[32];
    size_t gzip_size = 0;
    if (config_get(srv->cfg, "gzip_partition", gzip_partition, sizeof gzip_partition) == 0)
        (void)config_parse_size(gzip_partition, true, &gzip_size);
    put_size(&o, "gzip_partition", gzip_size);
    char disk[64];
    config_get(srv->cfg, "emulate_disk", disk, sizeof disk);
    buf_printf(&o, "\"emulate_disk\":\"%s\",\"admin\":%s,\"bytes_sent\":%" PRIu64 ",", disk,
               settings_admin(srv) ? "true" : "false", srv->bytes_sent);
    /* Request latency by response size over the recent window (about 1 s):
     * small responses are what a flood makes wait. */
    buf_printf(&o, "\"latency\":{\"small_max_bytes\":%d", SERVER_SMALL_MAX);
    for (int i = 0; i < SERVER_SIZES; i++) {
        struct hist_summary h;
        hist_summary(&srv->latency[i], uv_now(srv->loop), &h);
        buf_printf(&o,
                   ",\"%s\":{\"requests\":%" PRIu64 ",\"p50_us\":%" PRIu64 ",\"p99_us\":%" PRIu64
                   ",\"max_us\":%" PRIu64 "}",
                   i == SERVER_SMALL ? "small" : "large", h.count, h.p50, h.p99, h.max);
    }
    buf_printf(&o, "},\"settings_changed_ms\":");
    settings_changes_json(srv, &o);
    buf_printf(&o, ",");
    buf_printf(&o, "\"uptime_ms\":%" PRIu64 ",", uv_now(srv->loop) - srv->started_ms);
    buf_printf(&o,
               "\"connections\":{\"active\":%" PRIu64 ",\"accepted\":%" PRIu64
               ",\"refused\":%" PRIu64 "},",
               srv->active, srv->accepted, srv->refused);
    /* Buffers held against max_buffer_memory, and responses that waited for it. */
    const struct budget *b = &srv->budget;
    buf_printf(&o,
               "\"memory\":{\"budget\":%zu,\"held\":%zu,\"peak\":%zu,\"waiting\":%zu,"
               "\"waits\":%" PRIu64 ",\"waited_ms_total\":%" PRIu64 "},",
               b->max, b->held, b->peak, b->waiting, b->waits, b->waited_ms);
    for (size_t i = 0; srv->modules[i] != NULL; i++) {
        if (srv->modules[i]->stats != NULL)
            srv->modules[i]->stats(srv, srv->module_state[i], &o);
    }
    const struct sched *sc = &srv->gateway.sched;
    buf_printf(&o,
               "\"scheduler\":{\"mode\":\"%s\",\"bulk_max\":%u,\"bulk_cpu_permille\":%" PRIu64
               ",\"running\":%u,\"running_bulk\":%u,"
               "\"waiting_short\":%zu,\"waiting_bulk\":%zu,\"short_started\":%" PRIu64
               ",\"bulk_started\":%" PRIu64 ",\"bulk_over_short\":%" PRIu64
               ",\"streak_breaks\":%" PRIu64 "},",
               sc->mode == SCHED_MODE_FAIR ? "fair" : "fifo", sc->bulk_max,
               srv->gateway.bulk_cpu_permille, sc->running, sc->running_bulk, sc->waiting_short,
               sc->waiting_bulk, sc->counters.short_started, sc->counters.bulk_started,
               sc->counters.bulk_over_short, sc->counters.streak_breaks);
    buf_printf(&o, "\"requests\":%" PRIu64 ",\"jobs\":{", srv->requests);
    uint64_t now = uv_now(srv->loop);
    for (int i = 0; i < GATEWAY_NCLASSES; i++) {
        const struct gateway_class_stats *s = &srv->gateway.stats[i];
        struct hist_summary q, r;
        hist_summary(&s->queued, now, &q);
        hist_summary(&s->running, now, &r);
        buf_printf(&o,
                   "%s\"%s\":{\"submitted\":%" PRIu64 ",\"completed\":%" PRIu64
                   ",\"cancelled\":%" PRIu64 ",\"in_flight\":%" PRIu64 ",\"cost_bytes\":%" PRIu64
                   ",\"queued_us_total\":%" PRIu64 ",\"queued_us_max\":%" PRIu64
                   ",\"running_us_total\":%" PRIu64 ",\"running_us_max\":%" PRIu64,
                   i ? "," : "", gateway_class_name(i), s->submitted, s->completed, s->cancelled,
                   s->submitted - s->completed - s->cancelled, s->cost_total, s->queued_us_total,
                   s->queued_us_max, s->running_us_total, s->running_us_max);
        /* The recent window (about 1 s): what a dashboard shows. */
        buf_printf(&o,
                   ",\"recent\":{\"jobs\":%" PRIu64 ",\"queued_us_p50\":%" PRIu64
                   ",\"queued_us_p99\":%" PRIu64 ",\"queued_us_max\":%" PRIu64
                   ",\"running_us_p50\":%" PRIu64 ",\"running_us_p99\":%" PRIu64
                   ",\"running_us_max\":%" PRIu64 "}}",
                   q.count, q.p50, q.p99, q.max, r.p50, r.p99, r.max);
    }
    buf_printf(&o, "}}\n");
    conn_head_start(c, 200);
    conn_head_add(c, "Content-Type: application/json\r\nCache-Control: no-store\r\n");
    if (o.failed) {
        free(o.data);
        return 500;
    }
    conn_send_body(c, o.data, o.len);
    free(o.data);
    return 0;
}

static const struct route stats_routes[] = {
    {.path = "/stats",
     .methods = ROUTE_METHOD(HTTP_GET) | ROUTE_METHOD(HTTP_HEAD),
     .allow = "GET, HEAD",
     .on_request = stats_on_request,
     .instrument = true},
    {0},
};

const struct module stats_module = {.name = "stats", .routes = stats_routes};
