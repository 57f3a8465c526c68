#include "handlers/observe/metrics.h"

#include <inttypes.h>
#include <string.h>

#include "server/base/snapshot.h"
#include "server/base/util.h"

/* Histogram bounds: every power of two of microseconds from 2^0 (1 µs) to
 * 2^LE_POW_MAX (about 67 s). The counts there are exact: loghist.h has a
 * bucket boundary at each power of two, and values are whole microseconds
 * (truncated), so "below 2^n µs" is "at most 2^n µs" but for a duration of
 * exactly 2^n µs. */
#define LE_POW_MAX 26

#define LABELS_MAX 512

static const char *const type_names[] = {
    [SNAP_GAUGE] = "gauge",         [SNAP_COUNTER] = "counter", [SNAP_FLAG] = "gauge",
    [SNAP_HISTOGRAM] = "histogram", [SNAP_INFO] = "gauge",
};

/* V, counted in UNIT, in the base unit (seconds, a ratio), exactly. */
static void put_number(struct buf *o, uint64_t v, enum snap_unit unit)
{
    if (unit == SNAP_US)
        buf_printf(o, "%" PRIu64 ".%06" PRIu64, v / 1000000, v % 1000000);
    else if (unit == SNAP_MS || unit == SNAP_PERMILLE)
        buf_printf(o, "%" PRIu64 ".%03" PRIu64, v / 1000, v % 1000);
    else
        buf_printf(o, "%" PRIu64, v);
}

/* NAME="VALUE", after SEP, with backslash, double quote and newline escaped. */
static void put_label(struct buf *o, const char **sep, const char *name, const char *value)
{
    buf_printf(o, "%s%s=\"", *sep, name);
    for (const char *p = value; *p != '\0'; p++) {
        if (*p == '\\' || *p == '"')
            buf_printf(o, "\\%c", *p);
        else if (*p == '\n')
            buf_printf(o, "\\n");
        else
            buf_printf(o, "%c", *p);
    }
    buf_printf(o, "\"");
    *sep = ",";
}

/* The labels of E's series, "" or like route="/gzip",code="2xx": those of
 * the objects it is in, outermost first, then its own. */
static void put_labels(struct buf *o, const struct snapshot *s, const struct snap_entry *e)
{
    const struct snap_entry *outer[SNAP_DEPTH];
    unsigned n = 0;
    for (size_t p = e->parent; p != SNAP_TOP; p = s->entry[p].parent) {
        if (s->entry[p].label != NULL)
            outer[n++] = &s->entry[p];
    }
    const char *sep = "";
    while (n > 0) {
        n--;
        put_label(o, &sep, outer[n]->label, outer[n]->name);
    }
    const struct snap_def *def = e->def;
    if (def->labels != NULL) {
        buf_printf(o, "%s%s", sep, def->labels);
        sep = ",";
    }
    if (def->name_label != NULL && e->name != NULL)
        put_label(o, &sep, def->name_label, e->name);
    if (def->kind == SNAP_INFO && def->text_label != NULL)
        put_label(o, &sep, def->text_label, e->text);
}

/* One series of histogram NAME, in seconds, from T (in microseconds): its
 * cumulative _bucket counts at each power of two and +Inf, _sum, _count. */
static void put_histogram(struct buf *o, const char *name, const char *labels,
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
        put_number(o, le, SNAP_US);
        buf_printf(o, "\"} %" PRIu64 "\n", below);
    }
    buf_printf(o, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, labels, sep, t->count);
    const char *open = *labels ? "{" : "", *close = *labels ? "}" : "";
    buf_printf(o, "%s_sum%s%s%s ", name, open, labels, close);
    put_number(o, t->sum, SNAP_US);
    buf_printf(o, "\n%s_count%s%s%s %" PRIu64 "\n", name, open, labels, close, t->count);
}

static void put_series(struct buf *o, const struct snapshot *s, const struct snap_entry *e)
{
    char labels[LABELS_MAX];
    struct buf lb;
    buf_init_fixed(&lb, labels, sizeof labels);
    put_labels(&lb, s, e);
    if (lb.failed) {
        o->failed = true;
        return;
    }
    const struct snap_def *def = e->def;
    if (def->kind == SNAP_HISTOGRAM) {
        put_histogram(o, def->metric, labels, e->hist);
        return;
    }
    buf_printf(o, "%s%s%s%s ", def->metric, *labels ? "{" : "", labels, *labels ? "}" : "");
    if (def->kind == SNAP_INFO)
        buf_printf(o, "1"); /* the text is a label */
    else if (def->kind == SNAP_FLAG)
        buf_printf(o, "%d", e->value != 0);
    else
        put_number(o, e->value, def->unit);
    buf_printf(o, "\n");
}

static bool in_family(const struct snap_entry *e, const char *metric)
{
    return e->type == SNAP_FIGURE && e->def->metric != NULL && strcmp(e->def->metric, metric) == 0;
}

/* The snapshot as Prometheus text: a family's HELP and TYPE where its first
 * figure is, then every series of it, all together as the format wants. */
void metrics_render(struct buf *o, const struct snapshot *s, bool full)
{
    for (size_t i = 0; i < s->len; i++) {
        const struct snap_entry *e = &s->entry[i];
        if (e->type != SNAP_FIGURE || e->def->metric == NULL || (e->def->private && !full))
            continue;
        const char *metric = e->def->metric;
        bool written = false;
        for (size_t j = 0; j < i && !written; j++)
            written = in_family(&s->entry[j], metric);
        if (written)
            continue;
        buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", metric, e->def->help, metric,
                   type_names[e->def->kind]);
        for (size_t j = i; j < s->len; j++) {
            if (in_family(&s->entry[j], metric))
                put_series(o, s, &s->entry[j]);
        }
    }
}
