#include "handlers/observe/history.h"

#include <ctype.h>
#include <inttypes.h>
#include <string.h>

#include "server/base/timeline.h"
#include "server/base/util.h"

/* The value of since= in TARGET's query into *SINCE (0 without one).
 * Returns false when it is not a decimal number of milliseconds. */
static bool parse_since(const char *target, uint64_t *since)
{
    *since = 0;
    const char *q = strchr(target, '?');
    while (q != NULL) {
        q++;
        if (strncmp(q, "since=", 6) == 0) {
            const char *p = q + 6;
            uint64_t v = 0;
            size_t digits = 0;
            for (; isdigit((unsigned char)*p) && digits < 19; p++, digits++)
                v = v * 10 + (uint64_t)(*p - '0');
            if (digits == 0 || (*p != '\0' && *p != '&'))
                return false;
            *since = v;
        }
        q = strchr(q, '&');
    }
    return true;
}

/* One of the samples' columns, oldest first, from the sample at FIRST on:
 * "NAME":[v,...]. OFFSET is the member's place in struct history_sample. */
static void put_column(struct buf *o, const struct history *h, size_t first, const char *name,
                       size_t offset)
{
    buf_printf(o, "\"%s\":[", name);
    for (size_t i = first; i < history_samples(h); i++) {
        const char *s = (const char *)history_sample_at(h, i);
        uint64_t v;
        memcpy(&v, s + offset, sizeof v);
        buf_printf(o, "%s%" PRIu64, i > first ? "," : "", v);
    }
    buf_printf(o, "]");
}

/* Keys and values are the configuration's own spellings: nothing to escape. */
static void put_markers(struct buf *o, const struct history *h, uint64_t since)
{
    const char *sep = "";
    buf_printf(o, "\"markers\":[");
    for (size_t i = 0; i < history_markers(h); i++) {
        const struct history_marker *m = history_marker_at(h, i);
        if (m->t_ms <= since)
            continue;
        buf_printf(o, "%s{\"t_ms\":%" PRIu64 ",\"key\":\"%s\",\"value\":\"%s\"}", sep, m->t_ms,
                   m->key, m->value);
        sep = ",";
    }
    buf_printf(o, "]");
}

static void render(struct buf *o, struct server *srv, uint64_t since)
{
    static const struct {
        const char *name;
        size_t offset;
    } columns[] = {
        {"t_ms", offsetof(struct history_sample, t_ms)},
        {"requests", offsetof(struct history_sample, requests)},
        {"p50_us", offsetof(struct history_sample, p50_us)},
        {"p99_us", offsetof(struct history_sample, p99_us)},
        {"bytes_sent", offsetof(struct history_sample, bytes_sent)},
    };
    const struct history *h = server_history(srv);
    size_t first = 0;
    while (first < history_samples(h) && history_sample_at(h, first)->t_ms <= since)
        first++;
    buf_printf(o, "{\"period_ms\":%d,\"capacity\":%d,\"samples\":{", HISTORY_PERIOD_MS,
               HISTORY_SAMPLES);
    for (size_t k = 0; k < ARRAY_SIZE(columns); k++) {
        buf_printf(o, "%s", k > 0 ? "," : "");
        put_column(o, h, first, columns[k].name, columns[k].offset);
    }
    buf_printf(o, "},");
    put_markers(o, h, since);
    buf_printf(o, "}\n");
}

bool history_render(struct buf *out, struct server *srv, const char *target)
{
    uint64_t since;
    if (!parse_since(target, &since))
        return false;
    render(out, srv, since);
    return true;
}
