#include "server/base/timeline.h"

#include <stdio.h>

void history_add_sample(struct history *h, const struct history_sample *s)
{
    h->sample[h->nsamples++ % HISTORY_SAMPLES] = *s;
}

void history_add_marker(struct history *h, uint64_t t_ms, const char *key, const char *value)
{
    struct history_marker *m = &h->marker[h->nmarkers++ % HISTORY_MARKERS];
    m->t_ms = t_ms;
    snprintf(m->key, sizeof m->key, "%s", key);
    snprintf(m->value, sizeof m->value, "%s", value);
}

size_t history_samples(const struct history *h)
{
    return h->nsamples < HISTORY_SAMPLES ? (size_t)h->nsamples : HISTORY_SAMPLES;
}

size_t history_markers(const struct history *h)
{
    return h->nmarkers < HISTORY_MARKERS ? (size_t)h->nmarkers : HISTORY_MARKERS;
}

/* The oldest entry is N - HELD (mod SIZE) of a ring that took N entries. */
const struct history_sample *history_sample_at(const struct history *h, size_t i)
{
    return &h->sample[(h->nsamples - history_samples(h) + i) % HISTORY_SAMPLES];
}

const struct history_marker *history_marker_at(const struct history *h, size_t i)
{
    return &h->marker[(h->nmarkers - history_markers(h) + i) % HISTORY_MARKERS];
}
