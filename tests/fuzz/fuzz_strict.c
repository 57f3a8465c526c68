/* libFuzzer target: the strict request checks (server/http/strict.c).
 *
 * The line-discipline scan must give the same verdict however the stream is
 * split into reads: the input is scanned whole and in pieces whose sizes come
 * from the input itself, with body and request-target marks ('\x01', '\x02')
 * at the same places. The target check must return NULL or a path starting
 * with '/' inside the target. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/http/strict.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Scans P in pieces of at most STEP bytes (0: all at once), marks applied. */
static int scan(const char *p, size_t len, size_t step)
{
    struct strict_lines s;
    strict_lines_init(&s);
    size_t i = 0;
    while (i < len) {
        if (p[i] == '\x01' || p[i] == '\x02') {
            if (p[i] == '\x01')
                strict_lines_body(&s, true);
            else
                strict_lines_target(&s);
            i++;
            continue;
        }
        size_t n = strcspn(p + i, "\x01\x02");
        if (i + n > len)
            n = len - i;
        if (step != 0 && n > step)
            n = step;
        if (strict_lines_scan(&s, p + i, n) < 0)
            return -1;
        i += n;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = data[0] % 7 + 1;
    char *text = malloc(size);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    size_t len = strlen(text);
    if (scan(text, len, 0) != scan(text, len, step) || scan(text, len, 0) != scan(text, len, 1))
        abort();
    for (int absolute = 0; absolute < 2; absolute++) {
        const char *path = strict_target_path(text, absolute);
        bool inside = path >= text && path < text + len + 1;
        if (path != NULL && (path[0] != '/' || (!inside && strcmp(path, "/") != 0)))
            abort();
    }
    (void)strict_token(text, len);
    (void)strict_target_chars(text, len);
    (void)strict_host_chars(text, len);
    (void)strict_chunked(text);
    free(text);
    return 0;
}
