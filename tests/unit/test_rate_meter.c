/* A connection's rate (rate_meter): slow when neither the last whole
 * window nor the one running moved min_rate's worth, and only after a
 * whole window. */
#include "../../server/http/rate_meter.c"

#include "tests/tap.h"

int main(void)
{
    const uint64_t w = RATE_METER_WINDOW_MS, rate = 1000, floor = rate * w / 1000;
    struct rate_meter m;
    rate_meter_start(&m, 10 * w + 500);
    ok(!rate_meter_slow(&m, rate, 11 * w + 999), "no whole window yet: not slow");
    ok(rate_meter_slow(&m, rate, 12 * w), "a whole window with nothing moved: slow");
    ok(!rate_meter_slow(&m, 0, 12 * w), "min_rate 0: never");
    rate_meter_add(&m, floor, 12 * w + 10);
    ok(!rate_meter_slow(&m, rate, 12 * w + 20), "a window's worth in the one running: not");
    ok(!rate_meter_slow(&m, rate, 13 * w + 20), "nor in the one before");
    ok(rate_meter_slow(&m, rate, 14 * w), "two windows on: slow again");
    rate_meter_add(&m, floor - 1, 14 * w + 1);
    ok(rate_meter_slow(&m, rate, 14 * w + 2), "a byte short of the floor: slow");
    rate_meter_add(&m, 1, 14 * w + 3);
    ok(!rate_meter_slow(&m, rate, 14 * w + 4), "the floor: not");
    return tap_done();
}
