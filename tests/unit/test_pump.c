/* The piece rule (pump_piece): fixed sizes, whole, auto with and without
 * short work waiting, the end of a file, the one-GiB bound. */
#include "server/pool/pump.h"
#include "tests/tap.h"

#define K ((size_t)1 << 10)
#define M ((size_t)1 << 20)
#define G ((uint64_t)1 << 30)

static const struct {
    size_t size, min, max; /* the partition */
    bool short_waiting;
    uint64_t remaining;
    size_t want;
    const char *desc;
} cases[] = {
    {4 * K, 0, 0, false, 16 * M, 4 * K, "4k: 4k"},
    {4 * K, 0, 0, true, 16 * M, 4 * K, "4k: 4k whether short work waits or not"},
    {4 * K, 0, 0, false, 100, 100, "4k: no more than is left"},
    {4 * K, 0, 0, false, 0, 1, "nothing left: at least 1"},
    {CONFIG_WHOLE, 0, 0, false, 16 * M + 7, 16 * M + 7, "whole: all that is left"},
    {CONFIG_WHOLE, 0, 0, true, 16 * M + 7, 16 * M + 7, "whole: whether short work waits or not"},
    {CONFIG_WHOLE, 0, 0, false, 5 * G, (size_t)G, "whole of 5 GiB: one GiB at a time"},
    {2 * (size_t)G, 0, 0, false, 5 * G, (size_t)G, "a size over a GiB: one GiB"},
    {CONFIG_AUTO_SIZE, 64 * K, M, false, 16 * M, M, "auto, no short work waits: max"},
    {CONFIG_AUTO_SIZE, 64 * K, M, true, 16 * M, 64 * K, "auto, short work waits: min"},
    {CONFIG_AUTO_SIZE, 64 * K, M, false, 100 * K, 100 * K, "auto near the end: what is left"},
    {CONFIG_AUTO_SIZE, 64 * K, M, true, 10 * K, 10 * K, "auto, short work, less than min left"},
    {CONFIG_AUTO_SIZE, M, 64 * K, false, 16 * M, M, "auto with min over max: min"},
    {CONFIG_AUTO_SIZE, M, 64 * K, true, 16 * M, M, "auto with min over max, short work: min"},
};

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct pump_partition p = {.size = cases[i].size, .min = cases[i].min, .max = cases[i].max};
        is_int(pump_piece(&p, cases[i].short_waiting, cases[i].remaining), cases[i].want,
               cases[i].desc);
    }
    return tap_done();
}
