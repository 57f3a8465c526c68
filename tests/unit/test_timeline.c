/* The dashboard's history: rings of samples and markers in fixed memory,
 * oldest first, bounded, the oldest giving way. */
#include <stdint.h>

#include "server/base/timeline.h"
#include "tests/tap.h"

static void test_samples(void)
{
    static struct history h;
    is_int(history_samples(&h), 0, "empty: no sample");
    for (uint64_t i = 1; i <= 3; i++)
        history_add_sample(&h, &(struct history_sample){.t_ms = i * 500, .bytes_sent = i});
    is_int(history_samples(&h), 3, "three samples held");
    is_int(history_sample_at(&h, 0)->t_ms, 500, "the oldest first");
    is_int(history_sample_at(&h, 2)->bytes_sent, 3, "the newest last, whole");

    const uint64_t total = 3 * HISTORY_SAMPLES + 7;
    for (uint64_t i = 4; i <= total; i++)
        history_add_sample(&h, &(struct history_sample){.t_ms = i * 500, .bytes_sent = i});
    is_int(history_samples(&h), HISTORY_SAMPLES, "a full ring holds HISTORY_SAMPLES");
    uint64_t out_of_order = 0;
    for (size_t i = 0; i < HISTORY_SAMPLES; i++) {
        const struct history_sample *s = history_sample_at(&h, i);
        out_of_order += s->t_ms != (total - HISTORY_SAMPLES + 1 + i) * 500;
    }
    is_int(out_of_order, 0, "after wrapping: the last HISTORY_SAMPLES, oldest first");
}

static void test_markers(void)
{
    static struct history h;
    is_int(history_markers(&h), 0, "empty: no marker");
    history_add_marker(&h, 1200, "partition", "64k");
    history_add_marker(&h, 1200, "scheduler", "fifo");
    is_int(history_markers(&h), 2, "two markers");
    is_str(history_marker_at(&h, 0)->key, "partition", "the first change first");
    is_str(history_marker_at(&h, 1)->value, "fifo", "with its value");

    char longer[2 * HISTORY_VALUE_MAX];
    memset(longer, 'v', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    history_add_marker(&h, 1300, "emulate_disk", longer);
    is_int(strlen(history_marker_at(&h, 2)->value), HISTORY_VALUE_MAX - 1,
           "a value too long is cut, NUL-terminated");

    for (uint64_t i = 0; i < 2 * HISTORY_MARKERS; i++)
        history_add_marker(&h, 2000 + i, "partition", "4k");
    is_int(history_markers(&h), HISTORY_MARKERS, "a full ring holds HISTORY_MARKERS");
    is_int(history_marker_at(&h, 0)->t_ms, 2000 + HISTORY_MARKERS, "the oldest kept first");
    is_int(history_marker_at(&h, HISTORY_MARKERS - 1)->t_ms, 2000 + 2 * HISTORY_MARKERS - 1,
           "the newest last");
}

int main(void)
{
    test_samples();
    test_markers();
    return tap_done();
}
