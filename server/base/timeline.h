#ifndef UNCLOG_TIMELINE_H
#define UNCLOG_TIMELINE_H

/* What the dashboard plots, kept in fixed memory: a ring of samples taken
 * every HISTORY_PERIOD_MS (the page's own poll) over the last
 * HISTORY_SAMPLES periods, and a ring of the last HISTORY_MARKERS setting
 * changes. Nothing is allocated; the oldest entry gives way to the newest. */

#include <stddef.h>
#include <stdint.h>

#define HISTORY_PERIOD_MS 500
#define HISTORY_SAMPLES   240 /* 120 s at 500 ms: twice the chart's 60 s */
#define HISTORY_MARKERS   64
#define HISTORY_KEY_MAX   32 /* longer than any configuration key's name */
#define HISTORY_VALUE_MAX 64 /* as config_get spells a live value */

/* One sample of the figures the chart draws. */
struct history_sample {
    uint64_t t_ms;     /* the server's uptime when it was taken */
    uint64_t requests; /* small requests in the recent window; 0: no p50, p99 */
    uint64_t p50_us, p99_us;
    uint64_t bytes_sent; /* the counter: a rate is the delta of two samples */
};

/* A live setting changed to VALUE at T_MS (uptime). */
struct history_marker {
    uint64_t t_ms;
    char key[HISTORY_KEY_MAX];
    char value[HISTORY_VALUE_MAX];
};

struct history {
    struct history_sample sample[HISTORY_SAMPLES];
    struct history_marker marker[HISTORY_MARKERS];
    uint64_t nsamples, nmarkers; /* ever added: the next goes at n % size */
};

/* Appends S, dropping the oldest sample when the ring is full. */
void history_add_sample(struct history *h, const struct history_sample *s);

/* Appends a marker: KEY changed to VALUE at T_MS. Texts too long for the
 * marker are cut. Drops the oldest marker when the ring is full. */
void history_add_marker(struct history *h, uint64_t t_ms, const char *key, const char *value);

/* How many samples (markers) the ring holds now. */
size_t history_samples(const struct history *h);
size_t history_markers(const struct history *h);

/* The sample (marker) at I, oldest first: I < history_samples(H)
 * (history_markers(H)). */
const struct history_sample *history_sample_at(const struct history *h, size_t i);
const struct history_marker *history_marker_at(const struct history *h, size_t i);

#endif
