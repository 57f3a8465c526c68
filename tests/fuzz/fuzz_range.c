/* libFuzzer target: Range and conditional-header parsing (handlers/files/range.c,
 * handlers/files/cond.c, server/base/http_date.c).
 *
 * Input: eight bytes of representation size, then the header value. The
 * ranges returned must lie inside the representation, in number at most
 * RANGE_MAX; a date that parses must format and parse back to itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "handlers/files/cond.h"
#include "server/base/http_date.h"
#include "handlers/files/range.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_range(const char *header, uint64_t size)
{
    struct range ranges[RANGE_MAX];
    int count = -1;
    enum range_result r = range_parse(header, size, ranges, &count);
    if (r != RANGE_OK)
        return;
    if (count < 1 || count > RANGE_MAX)
        abort();
    for (int i = 0; i < count; i++) {
        if (ranges[i].first > ranges[i].last || ranges[i].last >= size)
            abort();
    }
}

static void fuzz_cond(const char *value)
{
    static const char etag[] = "\"1a2b-3c-4d5e\"";
    time_t mtime = 1700000000, t;
    (void)etag_list_match(value, etag, true);
    (void)etag_list_match(value, etag, false);
    (void)cond_check(value, NULL, NULL, NULL, true, etag, mtime);
    (void)cond_check(NULL, value, NULL, NULL, true, etag, mtime);
    (void)cond_check(NULL, NULL, value, NULL, false, etag, mtime);
    (void)cond_check(NULL, NULL, NULL, value, true, etag, mtime);
    (void)cond_if_range(value, etag, mtime);
    if (http_date_parse(value, &t)) {
        char text[HTTP_DATE_LEN];
        time_t back;
        http_date_format(t, text);
        if (!http_date_parse(text, &back) || back != t)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    uint64_t length;
    memcpy(&length, data, 8);
    if (data[0] & 1)
        length %= 1u << 20; /* small files too, not only huge ones */
    char *value = malloc(size - 7);
    memcpy(value, data + 8, size - 8);
    value[size - 8] = '\0';
    fuzz_range(value, length);
    fuzz_cond(value);
    free(value);
    return 0;
}
