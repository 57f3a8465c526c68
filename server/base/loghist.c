#include "server/base/loghist.h"

#include <stdbool.h>
#include <string.h>

unsigned hist_bucket(uint64_t value)
{
    if (value < 4)
        return (unsigned)value; /* 0..3 exactly */
    unsigned log = 63 - (unsigned)__builtin_clzll(value);
    unsigned sub = (unsigned)(value >> (log - 2)) & 3; /* the two bits after the top one */
    unsigned b = log * 4 + sub - 4;
    return b < HIST_BUCKETS ? b : HIST_BUCKETS - 1;
}

uint64_t hist_bucket_max(unsigned bucket)
{
    if (bucket < 4)
        return bucket;
    unsigned log = (bucket + 4) / 4, sub = (bucket + 4) % 4;
    if (log >= 63)
        return UINT64_MAX;
    return ((uint64_t)(4 + sub + 1) << (log - 2)) - 1;
}

/* The slot for NOW_MS, emptied first when it last served an older period. */
static struct hist_slot *slot_for(struct hist *h, uint64_t now_ms)
{
    uint64_t period = now_ms / HIST_SLOT_MS;
    struct hist_slot *s = &h->slot[period % HIST_SLOTS];
    if (s->start_ms != period * HIST_SLOT_MS || s->count == 0) {
        memset(s, 0, sizeof *s);
        s->start_ms = period * HIST_SLOT_MS;
    }
    return s;
}

void hist_add(struct hist *h, uint64_t now_ms, uint64_t value)
{
    struct hist_slot *s = slot_for(h, now_ms);
    s->bucket[hist_bucket(value)]++;
    s->count++;
    if (value > s->max)
        s->max = value;
}

void hist_total_add(struct hist_total *t, uint64_t value)
{
    t->bucket[hist_bucket(value)]++;
    t->count++;
    t->sum += value;
}

static bool in_window(const struct hist_slot *s, uint64_t now_ms)
{
    return s->count > 0 && s->start_ms + (uint64_t)HIST_SLOTS * HIST_SLOT_MS > now_ms &&
           s->start_ms <= now_ms;
}

void hist_summary(const struct hist *h, uint64_t now_ms, struct hist_summary *out)
{
    *out = (struct hist_summary){0};
    uint64_t merged[HIST_BUCKETS] = {0};
    for (unsigned i = 0; i < HIST_SLOTS; i++) {
        const struct hist_slot *s = &h->slot[i];
        if (!in_window(s, now_ms))
            continue;
        out->count += s->count;
        if (s->max > out->max)
            out->max = s->max;
        for (unsigned b = 0; b < HIST_BUCKETS; b++)
            merged[b] += s->bucket[b];
    }
    uint64_t seen = 0, p50 = (out->count + 1) / 2, p99 = out->count - out->count / 100;
    for (unsigned b = 0; b < HIST_BUCKETS && seen < out->count; b++) {
        seen += merged[b];
        if (out->p50 == 0 && seen >= p50 && p50 > 0)
            out->p50 = hist_bucket_max(b);
        if (seen >= p99 && p99 > 0) {
            out->p99 = hist_bucket_max(b);
            break;
        }
    }
    /* A bucket's bound may pass the largest value seen. */
    if (out->p50 > out->max)
        out->p50 = out->max;
    if (out->p99 > out->max)
        out->p99 = out->max;
}

void hist_merge(struct hist *into, const struct hist *from, uint64_t now_ms)
{
    for (unsigned i = 0; i < HIST_SLOTS; i++) {
        const struct hist_slot *f = &from->slot[i];
        if (!in_window(f, now_ms))
            continue;
        struct hist_slot *t = &into->slot[(f->start_ms / HIST_SLOT_MS) % HIST_SLOTS];
        if (t->start_ms != f->start_ms || t->count == 0) {
            *t = *f;
            continue;
        }
        t->count += f->count;
        if (f->max > t->max)
            t->max = f->max;
        for (unsigned b = 0; b < HIST_BUCKETS; b++)
            t->bucket[b] += f->bucket[b];
    }
}

void hist_total_merge(struct hist_total *into, const struct hist_total *from)
{
    into->count += from->count;
    into->sum += from->sum;
    for (unsigned b = 0; b < HIST_BUCKETS; b++)
        into->bucket[b] += from->bucket[b];
}
