#ifndef UNCLOG_RATE_METER_H
#define UNCLOG_RATE_METER_H

/* A connection's rate: the bytes it moved (body in, response out) in two
 * windows of RATE_METER_WINDOW_MS, the one running and the one before,
 * rolled as it is added to or read, so that no timer runs per connection.
 * What min_rate is checked against (a connection below it is slow, and
 * gives way early: server/http/clients.h). Pure: the caller says the time. */

#include <stdbool.h>
#include <stdint.h>

#define RATE_METER_WINDOW_MS 4000

struct rate_meter {
    uint64_t window;   /* the window moved[0] counts, as now_ms / RATE_METER_WINDOW_MS */
    uint64_t since;    /* the window the measure began in */
    uint64_t moved[2]; /* [0] that window, [1] the one before */
};

/* Starts M's measure at NOW_MS (the connection began a body or response). */
void rate_meter_start(struct rate_meter *m, uint64_t now_ms);

/* BYTES moved at NOW_MS. */
void rate_meter_add(struct rate_meter *m, uint64_t bytes, uint64_t now_ms);

/* Whether M's connection moves below MIN_RATE bytes per second at NOW_MS:
 * a whole window has passed since its start, and neither the window before
 * nor the one running has moved MIN_RATE's worth of a window. MIN_RATE 0:
 * never. */
bool rate_meter_slow(struct rate_meter *m, uint64_t min_rate, uint64_t now_ms);

#endif
