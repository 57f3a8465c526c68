/* struct buf: the hand formatter agrees with snprintf, fixed buffers fail
 * cleanly when full, growing ones grow. */
#include "server/base/util.h"
#include "tests/tap.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#define SAME(...)                                                                                  \
    do {                                                                                           \
        char expect_[256], array_[256];                                                            \
        snprintf(expect_, sizeof expect_, __VA_ARGS__);                                            \
        struct buf b_;                                                                             \
        buf_init_fixed(&b_, array_, sizeof array_);                                                \
        buf_printf(&b_, "<");                                                                      \
        buf_printf(&b_, __VA_ARGS__);                                                              \
        memmove(array_, array_ + 1, b_.len); /* drop the "<" */                                    \
        is_str(array_, expect_, #__VA_ARGS__);                                                     \
        ok(!b_.failed && b_.len == strlen(expect_) + 1, "  length");                               \
    } while (0)

static void test_same_as_snprintf(void)
{
    SAME("HTTP/1.1 %d %s\r\nDate: %s\r\n", 200, "OK", "Thu, 03 Dec 2026 13:00:00 GMT");
    SAME("plain line\r\n");
    SAME("%d %d %d", 0, -1, INT_MIN);
    SAME("%u %u", 0u, UINT_MAX);
    SAME("%lld %lld %lld", 0LL, LLONG_MAX, LLONG_MIN);
    SAME("%llu-%llu/%llu", 0ULL, 12345678901234ULL, ULLONG_MAX);
    SAME("%zu", SIZE_MAX);
    SAME("100%% %c%c", 'o', 'k');
    SAME("%s%s%s", "", "a", "");
    {
        char array[32];
        struct buf b;
        buf_init_fixed(&b, array, sizeof array);
        const char *volatile none = NULL; /* unknown to the compiler */
        buf_printf(&b, "[%s]", none);
        is_str(array, "[(null)]", "a NULL string shows as glibc shows it");
    }
    /* Conversions it does not do by hand go to vsnprintf. */
    SAME("%04x %.1f %s", 0xbeef, 2.5, "tail");
    SAME("%5d|%-3s|", 42, "x");
    SAME("%ld %s", 7L, "after an unhandled one");
}

static void test_full(void)
{
    char array[16];
    struct buf b;
    buf_init_fixed(&b, array, sizeof array);
    buf_printf(&b, "%s", "0123456789");
    buf_printf(&b, "%d", 12345); /* 15 bytes + NUL: fits exactly */
    ok(!b.failed && b.len == 15, "a fixed buffer fills to the last byte");
    buf_printf(&b, "%c", 'x');
    ok(b.failed, "one more byte fails it");
    is_str(array, "012345678912345", "what fitted is kept whole");

    buf_init_fixed(&b, array, sizeof array);
    buf_printf(&b, "abc");
    buf_printf(&b, "%s and more than fits", "this");
    ok(b.failed && b.len == 3, "a line that does not fit is not written in part");
    is_str(array, "abc", "  the text before it stays");
}

static void test_growing(void)
{
    struct buf b;
    buf_init_growing(&b);
    for (int i = 0; i < 1000; i++)
        buf_printf(&b, "%d,", i);
    ok(!b.failed, "a growing buffer grows");
    ok(b.len > 3000 && strncmp(b.data, "0,1,2,", 6) == 0 && strstr(b.data, ",999,") != NULL,
       "  and keeps everything in order");
    free(b.data);
}

int main(void)
{
    test_same_as_snprintf();
    test_full();
    test_growing();
    return tap_done();
}
