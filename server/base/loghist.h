#ifndef UNCLOG_LOGHIST_H
#define UNCLOG_LOGHIST_H

/* Log-scale histograms of durations over a sliding window, in fixed memory:
 * nothing is allocated per value. A value lands in one of four buckets per
 * power of two (so a percentile is exact to within 19 %); the window is
 * HIST_SLOTS slots of HIST_SLOT_MS each, the oldest dropped as time moves. */

#include <stdint.h>

#define HIST_BUCKETS 128 /* 4 per octave: values up to 2^32 */
#define HIST_SLOTS   4
#define HIST_SLOT_MS 250 /* the window: the last 0.75 to 1 s */

struct hist_slot {
    uint64_t start_ms; /* the slot's first millisecond; values older are gone */
    uint64_t count, max;
    uint32_t bucket[HIST_BUCKETS];
};

struct hist {
    struct hist_slot slot[HIST_SLOTS];
};

/* What the window holds now: percentiles are bucket upper bounds. */
struct hist_summary {
    uint64_t count, p50, p99, max;
};

/* The same buckets counted since the start, with their sum: what a
 * Prometheus histogram exports (cumulative at each power of two). */
struct hist_total {
    uint64_t count, sum;
    uint64_t bucket[HIST_BUCKETS];
};

/* Adds VALUE (e.g. microseconds) seen at NOW_MS (a monotonic clock). */
void hist_add(struct hist *h, uint64_t now_ms, uint64_t value);

void hist_total_add(struct hist_total *t, uint64_t value);

/* Summarises the values of the window ending at NOW_MS. */
void hist_summary(const struct hist *h, uint64_t now_ms, struct hist_summary *out);

/* Adds FROM's slots still in the window at NOW_MS into INTO: a slot of the
 * same period is added to, an older one replaced. Slots are keyed by
 * period of one monotonic clock, so windows of two processes that read the
 * same clock (CLOCK_MONOTONIC, libuv's uv_now) merge as one window. */
void hist_merge(struct hist *into, const struct hist *from, uint64_t now_ms);

/* Adds FROM's counts, sum and buckets into INTO. */
void hist_total_merge(struct hist_total *into, const struct hist_total *from);

/* The bucket of VALUE and the largest value that bucket holds. */
unsigned hist_bucket(uint64_t value);
uint64_t hist_bucket_max(unsigned bucket);

#endif
