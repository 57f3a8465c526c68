/* Log-scale histograms over a sliding window: buckets, percentiles, expiry. */
#include <stdint.h>

#include "server/base/loghist.h"
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

/* Two processes' windows merged are one window of all their values: the
 * p50 of the merge is the busier process's, not an average. */
static void test_merge(void)
{
    static struct hist a, b, both, merged;
    for (int i = 0; i < 40; i++) {
        hist_add(&a, 10000 + i, 100);
        hist_add(&both, 10000 + i, 100);
    }
    hist_add(&b, 9000, 50000);     /* out of the window at 10700: not merged */
    for (int i = 0; i < 61; i++) { /* 60 in A's period (added to it), one later */
        hist_add(&b, i < 60 ? 10050 : 10600, 9000);
        hist_add(&both, i < 60 ? 10050 : 10600, 9000);
    }
    hist_add(&merged, 9100, 70000); /* a stale slot of the target: replaced */
    hist_merge(&merged, &a, 10700);
    hist_merge(&merged, &b, 10700);
    struct hist_summary m, w;
    hist_summary(&merged, 10700, &m);
    hist_summary(&both, 10700, &w);
    is_int(m.count, 101, "merged: 101 values, none from outside the window");
    ok(m.p50 == w.p50 && m.p50 > 8000, "p50 as one window of both: the slow majority's");
    is_int(m.p99, w.p99, "p99 as one window of both");
    is_int(m.max, 9000, "max of both");
    struct hist_total ta = {0}, tb = {0};
    hist_total_add(&ta, 3);
    hist_total_add(&tb, 3);
    hist_total_add(&tb, 1000);
    hist_total_merge(&ta, &tb);
    ok(ta.count == 3 && ta.sum == 1006 && ta.bucket[3] == 2 && ta.bucket[hist_bucket(1000)] == 1,
       "totals merge: counts, sum and buckets added");
}

int main(void)
{
    test_buckets();
    test_summary();
    test_merge();
    return tap_done();
}
