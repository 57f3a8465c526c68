/* Range header parsing (RFC 9110 14.1 and 14.2). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "handlers/files/range.h"
#include "tests/tap.h"

#define SIZE  10000                         /* the representation most cases are asked against */
#define BIG   "99999999999999999999999"     /* 23 digits, past UINT64_MAX */
#define ZEROS "000000000000000000000000000" /* leading zeros do not overflow */

/* One case: a header against SIZE_ bytes, the result, and for RANGE_OK the
 * ranges in the order asked (at most 4 listed here). */
struct range_case {
    const char *header;
    uint64_t size;
    enum range_result result;
    int count;
    struct range want[4];
};

static const struct range_case cases[] = {
    /* the three forms of a single range */
    {"bytes=0-499", SIZE, RANGE_OK, 1, {{0, 499}}},
    {"bytes=500-999", SIZE, RANGE_OK, 1, {{500, 999}}},
    {"bytes=9500-", SIZE, RANGE_OK, 1, {{9500, 9999}}},
    {"bytes=-500", SIZE, RANGE_OK, 1, {{9500, 9999}}},
    {"bytes=0-0", SIZE, RANGE_OK, 1, {{0, 0}}},
    {"bytes=-1", SIZE, RANGE_OK, 1, {{9999, 9999}}},
    {"bytes=9999-9999", SIZE, RANGE_OK, 1, {{9999, 9999}}},
    {"bytes=0-", SIZE, RANGE_OK, 1, {{0, 9999}}},
    {"bytes=0-9999", SIZE, RANGE_OK, 1, {{0, 9999}}},
    /* last-pos past the end, or a suffix longer than the file: clamped (14.1.2) */
    {"bytes=9000-20000", SIZE, RANGE_OK, 1, {{9000, 9999}}},
    {"bytes=-10000", SIZE, RANGE_OK, 1, {{0, 9999}}},
    {"bytes=-20000", SIZE, RANGE_OK, 1, {{0, 9999}}},
    {"bytes=-5", 3, RANGE_OK, 1, {{0, 2}}},
    {"bytes=0-0", 1, RANGE_OK, 1, {{0, 0}}},
    {"bytes=-1", 1, RANGE_OK, 1, {{0, 0}}},
    /* the unit is case-insensitive (14.1) */
    {"BYTES=0-1", SIZE, RANGE_OK, 1, {{0, 1}}},
    {"Bytes=0-1", SIZE, RANGE_OK, 1, {{0, 1}}},
    /* overflowing numbers: a first-pos that large is past any end, a
     * last-pos or suffix that large is the whole file */
    {"bytes=" BIG "-", SIZE, RANGE_UNSATISFIABLE, 0, {{0, 0}}},
    {"bytes=18446744073709551616-", SIZE, RANGE_UNSATISFIABLE, 0, {{0, 0}}},
    {"bytes=18446744073709551615-18446744073709551615", SIZE, RANGE_UNSATISFIABLE, 0, {{0, 0}}},
    {"bytes=" BIG "-" BIG, SIZE, RANGE_UNSATISFIABLE, 0, {{0, 0}}},
    {"bytes=0-" BIG, SIZE, RANGE_OK, 1, {{0, 9999}}},
    {"bytes=-" BIG, SIZE, RANGE_OK, 1, {{0, 9999}}},
    {"bytes=-18446744073709551615", SIZE, RANGE_OK, 1, {{0, 9999}}},
    {"bytes=" ZEROS "1-" ZEROS "2", SIZE, RANGE_OK, 1, {{1, 2}}},
    /* a huge representation */
    {"bytes=-1", UINT64_MAX, RANGE_OK, 1, {{UINT64_MAX - 1, UINT64_MAX - 1}}},
    {"bytes=18446744073709551613-", UINT64_MAX, RANGE_OK, 1, {{UINT64_MAX - 2, UINT64_MAX - 1}}},
    /* unsatisfiable: nothing starts before the end, or a zero suffix (14.1.1) */
    {"bytes=10000-", SIZE, RANGE_UNSATISFIABLE, 0, {{0, 0}}},
    {"bytes=10000-10000", SIZE, RANGE_UNSATISFIABLE, 0, {{0, 0}}},
    {"bytes=20000-30000", SIZE, RANGE_UNSATISFIABLE, 0, {{0, 0}}},
    {"bytes=-0", SIZE, RANGE_UNSATISFIABLE, 0, {{0, 0}}},
    {"bytes=-000", SIZE, RANGE_UNSATISFIABLE, 0, {{0, 0}}},
    {"bytes=10000-,20000-,-0", SIZE, RANGE_UNSATISFIABLE, 0, {{0, 0}}},
    /* an empty file: no int-range and no zero suffix is satisfiable; a
     * non-zero suffix is (RFC 9110 14.1.1), but no 206 can carry zero bytes,
     * so the whole (empty) file is sent, as nginx does */
    {"bytes=0-", 0, RANGE_UNSATISFIABLE, 0, {{0, 0}}},
    {"bytes=0-0", 0, RANGE_UNSATISFIABLE, 0, {{0, 0}}},
    {"bytes=-0", 0, RANGE_UNSATISFIABLE, 0, {{0, 0}}},
    {"bytes=-5", 0, RANGE_IGNORE, 0, {{0, 0}}},
    /* unsatisfiable ranges are dropped from a set that has a satisfiable one */
    {"bytes=20000-,0-0", SIZE, RANGE_OK, 1, {{0, 0}}},
    {"bytes=-0,5-9", SIZE, RANGE_OK, 1, {{5, 9}}},
    /* invalid: the whole header is ignored (14.2) */
    {"bytes=5-3", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=1-0", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=0-5,5-3", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=" BIG "-0", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"items=0-5", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"byte=0-5", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytesx=0-5", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes 0-5", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes0-5", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=,", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes= , ,", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"=0-5", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"0-5", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=-", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=--5", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=-5-", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=-5-6", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=5", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=+5-6", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=-+5", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=0x10-0x20", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=1-2-3", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=0-5x", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=0-5;q=1", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=a-b", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=0-5,abc", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=0-5 6-7", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=0 - 5", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=1.5-2", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=\xff-\xfe", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    /* a malformed element spoils the set even when it is unsatisfiable too */
    {"bytes=20000-,5-3", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    /* optional whitespace and empty elements around commas (RFC 9110 5.6.1) */
    {"bytes=0-1, 5-6", SIZE, RANGE_OK, 2, {{0, 1}, {5, 6}}},
    {"bytes=0-1 ,\t5-6 ", SIZE, RANGE_OK, 2, {{0, 1}, {5, 6}}},
    {"bytes=0-1,,5-6", SIZE, RANGE_OK, 2, {{0, 1}, {5, 6}}},
    {"bytes=,0-1", SIZE, RANGE_OK, 1, {{0, 1}}},
    {"bytes=0-1,", SIZE, RANGE_OK, 1, {{0, 1}}},
    {"bytes=, , 0-1 , ,", SIZE, RANGE_OK, 1, {{0, 1}}},
    {" bytes=0-1", SIZE, RANGE_OK, 1, {{0, 1}}},
    /* several ranges, kept in the order asked (14.6) */
    {"bytes=0-9,20-29", SIZE, RANGE_OK, 2, {{0, 9}, {20, 29}}},
    {"bytes=20-29,0-9", SIZE, RANGE_OK, 2, {{20, 29}, {0, 9}}},
    {"bytes=0-9,10-19", SIZE, RANGE_OK, 2, {{0, 9}, {10, 19}}},
    {"bytes=0-0,-1", SIZE, RANGE_OK, 2, {{0, 0}, {9999, 9999}}},
    {"bytes=0-0,2-2,4-4,6-", SIZE, RANGE_OK, 4, {{0, 0}, {2, 2}, {4, 4}, {6, 9999}}},
    /* overlapping ranges: the whole file, by design */
    {"bytes=0-10,5-15", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=0-10,10-20", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=5-15,0-10", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=0-0,0-0", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=0-,100-200", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=-10,9995-9996", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=-10,-5", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    {"bytes=0-100,50-60,200-300", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    /* a suffix longer than the file overlaps everything */
    {"bytes=-20000,0-0", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
    /* clamped ends overlap too */
    {"bytes=9000-20000,9500-30000", SIZE, RANGE_IGNORE, 0, {{0, 0}}},
};

/* Ranges are written into an array of exactly RANGE_MAX, on the heap so
 * that ASan sees a write past it. */
static void check_case(const struct range_case *k)
{
    struct range *r = malloc(RANGE_MAX * sizeof *r);
    int count = -1;
    char desc[200];
    snprintf(desc, sizeof desc, "\"%.100s\" of %llu bytes -> %s", k->header,
             (unsigned long long)k->size,
             k->result == RANGE_OK       ? "OK"
             : k->result == RANGE_IGNORE ? "IGNORE"
                                         : "UNSATISFIABLE");
    enum range_result got = range_parse(k->header, k->size, r, &count);
    is_int(got, k->result, desc);
    if (got == RANGE_OK && k->result == RANGE_OK) {
        is_int(count, k->count, "  count");
        for (int i = 0; i < k->count && i < count; i++) {
            char d[64];
            snprintf(d, sizeof d, "  range %d", i);
            ok(r[i].first == k->want[i].first && r[i].last == k->want[i].last, d);
            if (r[i].first != k->want[i].first || r[i].last != k->want[i].last)
                printf("#   got %llu-%llu, want %llu-%llu\n", (unsigned long long)r[i].first,
                       (unsigned long long)r[i].last, (unsigned long long)k->want[i].first,
                       (unsigned long long)k->want[i].last);
        }
    }
    free(r);
}

/* "bytes=" followed by N ranges of one byte, every other byte from FIRST. */
static char *many_ranges(int n, uint64_t first)
{
    size_t cap = 16 + (size_t)n * 48;
    char *s = malloc(cap);
    size_t len = (size_t)snprintf(s, cap, "bytes=");
    for (int i = 0; i < n; i++) {
        uint64_t at = first + 2 * (uint64_t)i;
        len += (size_t)snprintf(s + len, cap - len, "%s%llu-%llu", i ? "," : "",
                                (unsigned long long)at, (unsigned long long)at);
    }
    return s;
}

static void test_many(void)
{
    struct range *r = malloc(RANGE_MAX * sizeof *r);
    int count = -1;

    char *h = many_ranges(RANGE_MAX, 0);
    is_int(range_parse(h, SIZE, r, &count), RANGE_OK, "RANGE_MAX disjoint ranges: OK");
    is_int(count, RANGE_MAX, "  all of them");
    ok(r[RANGE_MAX - 1].first == 2 * (RANGE_MAX - 1), "  the last one in place");
    free(h);

    h = many_ranges(RANGE_MAX + 1, 0);
    is_int(range_parse(h, SIZE, r, &count), RANGE_IGNORE, "RANGE_MAX + 1 ranges: whole file");
    free(h);

    h = many_ranges(1000, 0);
    is_int(range_parse(h, SIZE, r, &count), RANGE_IGNORE, "1000 ranges: whole file");
    free(h);

    h = many_ranges(1000, SIZE);
    is_int(range_parse(h, SIZE, r, &count), RANGE_UNSATISFIABLE,
           "1000 ranges all past the end: unsatisfiable");
    free(h);

    /* 1000 ranges of one byte, some overlapping */
    size_t cap = 16 + 1000 * 8;
    h = malloc(cap);
    size_t len = (size_t)snprintf(h, cap, "bytes=");
    for (int i = 0; i < 1000; i++)
        len += (size_t)snprintf(h + len, cap - len, "%s%d-%d", i ? "," : "", i % 7, i % 7);
    is_int(range_parse(h, SIZE, r, &count), RANGE_IGNORE, "1000 overlapping ranges: whole file");
    free(h);

    /* 100000 empty elements, then one range */
    cap = 100000 + 32;
    h = malloc(cap);
    memcpy(h, "bytes=", 6);
    memset(h + 6, ',', 100000);
    strcpy(h + 6 + 100000, "0-1");
    is_int(range_parse(h, SIZE, r, &count), RANGE_OK, "100000 empty elements then 0-1: OK");
    is_int(count, 1, "  one range");
    free(h);

    /* a 1 MB number */
    cap = 1000000 + 32;
    h = malloc(cap);
    memcpy(h, "bytes=0-", 8);
    memset(h + 8, '9', 1000000);
    h[8 + 1000000] = '\0';
    is_int(range_parse(h, SIZE, r, &count), RANGE_OK, "a million-digit last-pos: whole file");
    ok(count == 1 && r[0].first == 0 && r[0].last == SIZE - 1, "  0-9999");
    free(h);
    free(r);
}

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i]);
    test_many();
    return tap_done();
}
