#include "handlers/stats.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "server/gateway.h"
#include "server/server.h"

struct out {
    char buf[4096];
    size_t len;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->buf + o->len, sizeof o->buf - o->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n < sizeof o->buf - o->len ? (size_t)n : sizeof o->buf - o->len - 1;
}

static void put_size(struct out *o, const char *key, size_t size)
{
    if (size == CONFIG_WHOLE)
        put(o, "\"%s\":\"whole\",", key);
    else
        put(o, "\"%s\":%zu,", key, size);
}

int stats_on_request(struct conn *c, const struct request *req)
{
    const struct server *srv = conn_server(c);
    struct out o = {.len = 0};
    put(&o, "{\"version\":\"" UNCLOG_VERSION "\",\"worker\":%u,\"pid\":%ld,\"threads\":%u,",
        srv->worker, (long)getpid(), srv->cfg->threads);
    put_size(&o, "partition", srv->cfg->partition);
    put_size(&o, "gzip_partition", srv->cfg->gzip_partition);
    put(&o, "\"uptime_ms\":%" PRIu64 ",", uv_now(srv->loop) - srv->started_ms);
    put(&o,
        "\"connections\":{\"active\":%" PRIu64 ",\"accepted\":%" PRIu64 ",\"refused\":%" PRIu64
        "},",
        srv->active, srv->accepted, srv->refused);
    const struct cache *fc = &srv->cache;
    put(&o,
        "\"file_cache\":{\"enabled\":%s,\"entries\":%zu,\"bytes\":%zu,\"hits\":%" PRIu64
        ",\"misses\":%" PRIu64 "},",
        fc->enabled ? "true" : "false", fc->count, fc->bytes, fc->hits, fc->misses);
    put(&o, "\"requests\":%" PRIu64 ",\"jobs\":{", srv->requests);
    for (int i = 0; i < GATEWAY_NCLASSES; i++) {
        const struct gateway_class_stats *s = gateway_stats(i);
        put(&o,
            "%s\"%s\":{\"submitted\":%" PRIu64 ",\"completed\":%" PRIu64 ",\"cancelled\":%" PRIu64
            ",\"in_flight\":%" PRIu64 ",\"queued_us_total\":%" PRIu64 ",\"queued_us_max\":%" PRIu64
            ",\"running_us_total\":%" PRIu64 ",\"running_us_max\":%" PRIu64 "}",
            i ? "," : "", gateway_class_name(i), s->submitted, s->completed, s->cancelled,
            s->submitted - s->completed - s->cancelled, s->queued_us_total, s->queued_us_max,
            s->running_us_total, s->running_us_max);
    }
    put(&o, "}}\n");
    conn_head_start(c, 200);
    conn_head_add(c, "Content-Type: application/json\r\nCache-Control: no-store\r\n");
    conn_send_body(c, o.buf, o.len);
    return 0;
}
