#include "handlers/observe/metrics.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/pool/gateway.h"
#include "server/server.h"
#include "server/base/util.h"

/* Histogram bounds: every power of two of microseconds from 2^0 (1 µs) to
 * 2^LE_POW_MAX (about 67 s). The counts there are exact: hist.h has a
 * bucket boundary at each power of two, and values are whole microseconds
 * (truncated), so "below 2^n µs" is "at most 2^n µs" but for a duration of
 * exactly 2^n µs. */
#define LE_POW_MAX 26

#define LABELS_MAX 256

/* S as a label value (backslash, double quote and newline escaped) in DST. */
static const char *escape(char *dst, size_t len, const char *s)
{
    size_t n = 0;
    for (; *s != '\0' && n + 3 < len; s++) {
        if (*s == '\\' || *s == '"' || *s == '\n')
            dst[n++] = '\\';
        dst[n++] = *s == '\n' ? 'n' : *s;
    }
    dst[n] = '\0';
    return dst;
}

/* The HELP and TYPE lines of a family; its samples follow, all together. */
__attribute__((format(printf, 4, 5))) static void family(struct buf *o, const char *name,
                                                         const char *type, const char *help, ...)
{
    va_list ap;
    buf_printf(o, "# HELP %s ", name);
    va_start(ap, help);
    buf_vprintf(o, help, ap);
    va_end(ap);
    buf_printf(o, "\n# TYPE %s %s\n", name, type);
}

/* "NAME{LABELS} ": LABELS is "" or pairs like route="/gzip",code="2xx". */
static void put_series(struct buf *o, const char *name, const char *suffix, const char *labels)
{
    buf_printf(o, "%s%s%s%s%s ", name, suffix, *labels ? "{" : "", labels, *labels ? "}" : "");
}

static void sample(struct buf *o, const char *name, const char *labels, uint64_t value)
{
    put_series(o, name, "", labels);
    buf_printf(o, "%" PRIu64 "\n", value);
}

/* Microseconds as seconds, exactly (no float in between). */
static void put_seconds(struct buf *o, uint64_t us)
{
    buf_printf(o, "%" PRIu64 ".%06" PRIu64, us / 1000000, us % 1000000);
}

/* A family of one sample without labels: a counter or a gauge. */
static void metric(struct buf *o, const char *name, const char *type, const char *help,
                   uint64_t value)
{
    family(o, name, type, "%s", help);
    sample(o, name, "", value);
}

/* One series of histogram NAME, in seconds, from T (in microseconds): its
 * cumulative _bucket counts at each power of two and +Inf, _sum, _count. */
static void histogram(struct buf *o, const char *name, const char *labels,
                      const struct hist_total *t)
{
    const char *sep = *labels ? "," : "";
    uint64_t below = 0;
    unsigned b = 0;
    for (unsigned p = 0; p <= LE_POW_MAX; p++) {
        uint64_t le = (uint64_t)1 << p;
        while (b < HIST_BUCKETS && hist_bucket_max(b) < le)
            below += t->bucket[b++];
        buf_printf(o, "%s_bucket{%s%sle=\"", name, labels, sep);
        put_seconds(o, le);
        buf_printf(o, "\"} %" PRIu64 "\n", below);
    }
    buf_printf(o, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, labels, sep, t->count);
    put_series(o, name, "_sum", labels);
    put_seconds(o, t->sum);
    buf_printf(o, "\n");
    put_series(o, name, "_count", labels);
    buf_printf(o, "%" PRIu64 "\n", t->count);
}

/* Responses per route and status class. A route whose label an earlier
 * one has (a second route of one path, a second fallback) is never chosen
 * by server_route, so it has nothing to count and no series of its own:
 * two series of one name and labels would make the exposition invalid. */
static void responses(struct buf *o, const struct server *srv)
{
    family(o, "unclog_http_responses_total", "counter",
           "Responses completed, by route (its path; static for the files' fallback; none for a "
           "request refused before routing) and status class.");
    for (unsigned i = 0; i < srv->nroute_rows; i++) {
        const struct route_row *row = &srv->route_rows[i];
        bool seen = false;
        for (unsigned j = 0; j < i && !seen; j++)
            seen = strcmp(srv->route_rows[j].label, row->label) == 0;
        if (seen)
            continue;
        char route[128], labels[LABELS_MAX];
        escape(route, sizeof route, row->label);
        for (unsigned cls = 0; cls < 5; cls++) {
            snprintf(labels, sizeof labels, "route=\"%s\",code=\"%uxx\"", route, cls + 1);
            sample(o, "unclog_http_responses_total", labels, row->by_class[cls]);
        }
    }
}

static void jobs(struct buf *o, const struct server *srv)
{
    static const struct {
        const char *name, *type, *help;
        size_t offset; /* of a uint64_t or a struct hist_total in gateway_class_stats */
    } fams[] = {
        {"unclog_jobs_submitted_total", "counter", "Threadpool jobs submitted, by class.",
         offsetof(struct gateway_class_stats, submitted)},
        {"unclog_jobs_completed_total", "counter", "Threadpool jobs completed, by class.",
         offsetof(struct gateway_class_stats, completed)},
        {"unclog_jobs_cancelled_total", "counter",
         "Threadpool jobs cancelled before they started, by class.",
         offsetof(struct gateway_class_stats, cancelled)},
        {"unclog_job_cost_bytes_total", "counter",
         "Cost in bytes of completed threadpool jobs, by class, as the scheduler weighs them: "
         "the bytes a job reads or deflates.",
         offsetof(struct gateway_class_stats, cost_total)},
        {"unclog_job_queue_wait_seconds", "histogram",
         "Time completed threadpool jobs waited for a thread, by class.",
         offsetof(struct gateway_class_stats, queued_total)},
        {"unclog_job_run_seconds", "histogram",
         "Time completed threadpool jobs ran on their thread, by class.",
         offsetof(struct gateway_class_stats, running_total)},
    };
    for (size_t f = 0; f < ARRAY_SIZE(fams); f++) {
        family(o, fams[f].name, fams[f].type, "%s", fams[f].help);
        for (int i = 0; i < GATEWAY_NCLASSES; i++) {
            const char *s = (const char *)&srv->gateway.stats[i] + fams[f].offset;
            char labels[LABELS_MAX];
            snprintf(labels, sizeof labels, "class=\"%s\"", gateway_class_name(i));
            if (strcmp(fams[f].type, "histogram") == 0)
                histogram(o, fams[f].name, labels, (const struct hist_total *)s);
            else
                sample(o, fams[f].name, labels, *(const uint64_t *)s);
        }
    }
}

/* A size setting in bytes, 0 for whole and auto. */
static uint64_t size_or_zero(size_t size)
{
    return size == CONFIG_WHOLE || size == CONFIG_AUTO_SIZE ? 0 : size;
}

/* gzip_partition, the gzip module's key, as it spells it. */
static size_t gzip_partition_of(const struct config *cfg)
{
    char text[32];
    size_t size = 0;
    if (config_get(cfg, "gzip_partition", text, sizeof text) == 0)
        (void)config_parse_size(text, true, &size);
    return size;
}

static void settings(struct buf *o, const struct server *srv)
{
    const struct config *cfg = srv->cfg;
    family(o, "unclog_setting_info", "gauge",
           "A setting that can change while the server runs, with its value as the config file "
           "spells it; always 1.");
    const struct config_key *k;
    for (size_t i = 0; (k = config_key_at(cfg, i)) != NULL; i++) {
        char value[128], escaped[128], labels[LABELS_MAX];
        if (k->when != CONFIG_LIVE || config_get(cfg, k->name, value, sizeof value) != 0)
            continue;
        snprintf(labels, sizeof labels, "key=\"%s\",value=\"%s\"", k->name,
                 escape(escaped, sizeof escaped, value));
        sample(o, "unclog_setting_info", labels, 1);
    }
    metric(o, "unclog_threads", "gauge", "Threadpool threads (the threads setting).", cfg->threads);
    metric(o, "unclog_partition_bytes", "gauge",
           "Bytes per threadpool read of a file (partition); 0 when it is whole (one read per "
           "file) or auto (pieces of unclog_partition_min_bytes while short work waits, else "
           "unclog_partition_max_bytes).",
           size_or_zero(cfg->partition));
    metric(o, "unclog_partition_min_bytes", "gauge",
           "partition = auto: the piece size while short work waits (partition_min).",
           cfg->partition_min);
    metric(o, "unclog_partition_max_bytes", "gauge",
           "partition = auto: the piece size while no short work waits (partition_max).",
           cfg->partition_max);
    metric(o, "unclog_gzip_partition_bytes", "gauge",
           "Input bytes deflated per threadpool job by /gzip (gzip_partition); 0 when it is whole.",
           size_or_zero(gzip_partition_of(cfg)));
}

static void scheduler(struct buf *o, const struct server *srv)
{
    const struct sched *sc = &srv->gateway.sched;
    metric(o, "unclog_scheduler_jobs_running", "gauge", "Threadpool jobs running now.",
           sc->running);
    family(o, "unclog_scheduler_jobs_waiting", "gauge",
           "Threadpool jobs waiting for a thread now: short (their response has at most %" PRIu64
           " bytes left) or bulk.",
           SCHED_SHORT_BYTES);
    sample(o, "unclog_scheduler_jobs_waiting", "kind=\"short\"", sc->waiting_short);
    sample(o, "unclog_scheduler_jobs_waiting", "kind=\"bulk\"", sc->waiting_bulk);
    family(o, "unclog_scheduler_jobs_started_total", "counter",
           "Threadpool jobs started, short or bulk.");
    sample(o, "unclog_scheduler_jobs_started_total", "kind=\"short\"", sc->counters.short_started);
    sample(o, "unclog_scheduler_jobs_started_total", "kind=\"bulk\"", sc->counters.bulk_started);
    metric(o, "unclog_scheduler_bulk_over_short_total", "counter",
           "Bulk jobs started while short work waited, not by the no-starvation bound "
           "(0 under the fair scheduler).",
           sc->counters.bulk_over_short);
    metric(o, "unclog_scheduler_streak_breaks_total", "counter",
           "Bulk jobs started by the no-starvation bound, after a streak of short ones.",
           sc->counters.streak_breaks);
}

static void memory(struct buf *o, const struct budget *b)
{
    metric(o, "unclog_buffer_memory_budget_bytes", "gauge",
           "Request and response buffer memory this worker may hold (max_buffer_memory).", b->max);
    metric(o, "unclog_buffer_memory_held_bytes", "gauge", "Buffer memory held now.", b->held);
    metric(o, "unclog_buffer_memory_peak_bytes", "gauge", "Most buffer memory held at once.",
           b->peak);
    metric(o, "unclog_buffer_memory_waiters", "gauge", "Responses waiting now for buffer memory.",
           b->waiting);
    metric(o, "unclog_buffer_memory_waits_total", "counter",
           "Responses that had to wait for buffer memory.", b->waits);
    family(o, "unclog_buffer_memory_wait_seconds_total", "counter",
           "Time responses spent waiting for buffer memory.");
    put_series(o, "unclog_buffer_memory_wait_seconds_total", "", "");
    put_seconds(o, b->waited_ms * 1000);
    buf_printf(o, "\n");
}

static int metrics_on_request(struct conn *c, const struct request *req)
{
    const struct server *srv = conn_server(c);
    struct buf o;
    buf_init_growing(&o);
    family(&o, "unclog_build_info", "gauge", "The server's version; always 1.");
    sample(&o, "unclog_build_info", "version=\"" UNCLOG_VERSION "\"", 1);
    metric(&o, "unclog_worker", "gauge",
           "The worker process that answered: 1..N with workers > 1, 0 alone. Every other figure "
           "is that worker's own.",
           srv->worker);
    family(&o, "unclog_uptime_seconds", "gauge", "Time since this worker started.");
    put_series(&o, "unclog_uptime_seconds", "", "");
    put_seconds(&o, (uv_now(srv->loop) - srv->started_ms) * 1000);
    buf_printf(&o, "\n");

    responses(&o, srv);
    metric(&o, "unclog_http_response_body_bytes_total", "counter",
           "Response body bytes handed to the kernel, counted as each piece goes (heads not "
           "included).",
           srv->bytes_sent);
    family(&o, "unclog_http_request_duration_seconds", "histogram",
           "Time from a request's first byte to its response's last byte handed to the kernel, by "
           "response body size: small (at most %d bytes) or large.",
           SERVER_SMALL_MAX);
    histogram(&o, "unclog_http_request_duration_seconds", "size=\"small\"",
              &srv->latency_total[SERVER_SMALL]);
    histogram(&o, "unclog_http_request_duration_seconds", "size=\"large\"",
              &srv->latency_total[SERVER_LARGE]);

    metric(&o, "unclog_connections_active", "gauge", "Connections open now.", srv->active);
    metric(&o, "unclog_connections_max", "gauge",
           "Connections served at once (max_connections); beyond, a new one is refused.",
           srv->cfg->max_connections);
    metric(&o, "unclog_connections_accepted_total", "counter", "Connections accepted.",
           srv->accepted);
    metric(&o, "unclog_connections_refused_total", "counter",
           "Connections refused with 503 because max_connections were open.", srv->refused);

    jobs(&o, srv);
    scheduler(&o, srv);
    memory(&o, &srv->budget);
    settings(&o, srv);

    if (o.failed) {
        free(o.data);
        return 500;
    }
    conn_head_start(c, 200);
    conn_head_add(c, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                     "Cache-Control: no-store\r\n");
    conn_send_body(c, o.data, o.len);
    free(o.data);
    return 0;
}

static const struct route metrics_routes[] = {
    {.path = "/metrics",
     .methods = ROUTE_METHOD(HTTP_GET) | ROUTE_METHOD(HTTP_HEAD),
     .allow = "GET, HEAD",
     .on_request = metrics_on_request,
     .instrument = true},
    {0},
};

const struct module metrics_module = {.name = "metrics", .routes = metrics_routes};
