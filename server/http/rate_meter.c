/* A connection's rate in two rolling windows (rate_meter.h). */
#include "server/http/rate_meter.h"

/* The windows rolled to the one running at NOW_MS: the one counted becomes
 * the one before when it was the previous one, else both are over. */
static void roll(struct rate_meter *m, uint64_t now_ms)
{
    uint64_t window = now_ms / RATE_METER_WINDOW_MS;
    if (window > m->window) {
        m->moved[1] = m->window + 1 == window ? m->moved[0] : 0;
        m->moved[0] = 0;
        m->window = window;
    }
}

void rate_meter_start(struct rate_meter *m, uint64_t now_ms)
{
    uint64_t window = now_ms / RATE_METER_WINDOW_MS;
    *m = (struct rate_meter){.window = window, .since = window};
}

void rate_meter_add(struct rate_meter *m, uint64_t bytes, uint64_t now_ms)
{
    roll(m, now_ms);
    m->moved[0] += bytes;
}

bool rate_meter_slow(struct rate_meter *m, uint64_t min_rate, uint64_t now_ms)
{
    roll(m, now_ms);
    uint64_t floor = min_rate * RATE_METER_WINDOW_MS / 1000;
    /* The window the measure began in is only part of one. */
    return min_rate > 0 && m->window >= m->since + 2 && m->moved[1] < floor && m->moved[0] < floor;
}
