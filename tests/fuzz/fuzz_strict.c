/* libFuzzer target: the strict request checks (server/http/strict.c).
 *
 * The line-discipline scan must give the same verdict however the stream is
 * split into reads: the input is scanned whole and in pieces whose sizes come
 * from the input itself, with body and request-target marks ('\x01', '\x02')
 * at the same places. So must the chunk-size line split (what llhttp is
 * given, and whether the extensions are refused) and the Connection close
 * scan. The target check must return NULL or a path starting with '/'
 * inside the target. */
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

/* P as a chunk-size line and what follows, in pieces of at most STEP
 * bytes: what llhttp is given goes to OUT (LEN bytes at most). Returns -1
 * when the extensions are refused, else the bytes given. */
static long chunk_split(const char *p, size_t len, size_t step, char *out)
{
    struct strict_chunk s = {0};
    strict_chunk_line(&s);
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t piece = len - i < step ? len - i : step, take, skip;
        if (strict_chunk_scan(&s, p + i, piece, &take, &skip) < 0)
            return -1;
        if ((take == 0) == (skip == 0) || take + skip > piece)
            abort();
        memcpy(out + n, p + i, take);
        n += take;
        i += take + skip;
    }
    return (long)n;
}

static bool close_scan(const char *p, size_t len, size_t step)
{
    struct strict_close s = {0};
    for (size_t i = 0; i < len; i += step)
        strict_close_scan(&s, p + i, len - i < step ? len - i : step);
    strict_close_end(&s);
    return s.seen;
}

static void check_chunk_and_close(const char *p, size_t len, size_t step)
{
    char *whole = malloc(len + 1), *split = malloc(len + 1);
    long n = chunk_split(p, len, len ? len : 1, whole);
    if (n != chunk_split(p, len, step, split) || (n > 0 && memcmp(whole, split, (size_t)n) != 0))
        abort();
    if (n != chunk_split(p, len, 1, split) || (n > 0 && memcmp(whole, split, (size_t)n) != 0))
        abort();
    free(whole);
    free(split);
    if (close_scan(p, len, len ? len : 1) != close_scan(p, len, step))
        abort();
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
        const char *authority;
        size_t authority_len;
        const char *path = strict_target_path(text, absolute, &authority, &authority_len);
        bool inside = path >= text && path < text + len + 1;
        if (path != NULL && (path[0] != '/' || (!inside && strcmp(path, "/") != 0)))
            abort();
    }
    (void)strict_token(text, len);
    (void)strict_target_chars(text, len);
    (void)strict_host_chars(text, len);
    (void)strict_chunked(text);
    check_chunk_and_close(text, len, step);
    free(text);
    return 0;
}
