/* Log-scale histograms over a sliding window: buckets, percentiles, expiry. */
#include <stdint.h>

#include "server/base/hist.h"
#include "tests/tap.h"

static void test_buckets(void)
{
    uint64_t bad = 0;
    for (uint64_t v = 0; v < 100000; v++) {
        unsigned b = hist_bucket(v);
        bad += !(v <= hist_bucket_max(b) && (b == 0 || v > hist_bucket_max(b - 1)));
    }
    is_int(bad, 0, "every value 0..99999 lies in its bucket, above the one before");
    is_int(hist_bucket_max(hist_bucket(1000)), 1023, "1000 is in [896, 1023]");
    ok(hist_bucket(UINT64_MAX) == HIST_BUCKETS - 1, "huge values go to the last bucket");
}

static void test_summary(void)
{
    static struct hist h;
    struct hist_summary s;
    hist_summary(&h, 10000, &s);
    is_int(s.count, 0, "empty: nothing counted");
    for (int i = 0; i < 99; i++)
        hist_add(&h, 10000, 100);
    hist_add(&h, 10100, 5000);
    hist_summary(&h, 10200, &s);
    is_int(s.count, 100, "100 values in the window");
    ok(s.p50 >= 100 && s.p50 <= 111, "p50 within a bucket of 100");
    ok(s.p99 >= 100 && s.p99 <= 111, "p99 is still the 99th value");
    is_int(s.max, 5000, "max is exact");
    hist_add(&h, 10300, 5000);
    hist_summary(&h, 10300, &s);
    ok(s.p99 > 4000 && s.p99 <= 5000, "two slow values of 101: p99 moves up, capped at max");
    hist_summary(&h, 10000 + HIST_SLOTS * HIST_SLOT_MS + 600, &s);
    is_int(s.count, 0, "a window later, everything has expired");
    hist_add(&h, 20000, 7);
    hist_summary(&h, 20000, &s);
    is_int(s.count, 1, "a reused slot starts empty");
    is_int(s.max, 7, "and holds only the new value");
}

int main(void)
{
    test_buckets();
    test_summary();
    return tap_done();
}
