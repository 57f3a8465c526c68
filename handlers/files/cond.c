#include "handlers/files/cond.h"

#include <string.h>

#include "server/base/http_date.h"
#include "server/base/util.h"

/* V in lower-case hex at P; returns the end. */
static char *hex(char *p, uint64_t v)
{
    char digits[16];
    int n = 0;
    do
        digits[n++] = "0123456789abcdef"[v & 15];
    while ((v >>= 4) != 0);
    while (n > 0)
        *p++ = digits[--n];
    return p;
}

/* "ino-size-mtime_ns" in hex (at most 2 + 3 * 16 + 2 bytes, and the
 * suffix): by hand, as it is made for every response. */
void etag_make(uint64_t ino, uint64_t size, int64_t mtime_ns, const char *suffix,
               char out[ETAG_LEN])
{
    char *p = out;
    *p++ = '"';
    p = hex(p, ino);
    *p++ = '-';
    p = hex(p, size);
    *p++ = '-';
    p = hex(p, (uint64_t)mtime_ns);
    size_t room = (size_t)(out + ETAG_LEN - 2 - p), len = strlen(suffix);
    len = len < room ? len : room;
    memcpy(p, suffix, len);
    p += len;
    *p++ = '"';
    *p = '\0';
}

/* Compares the opaque tag at P (quotes included, LEN bytes) with ETAG's. */
static bool same_tag(const char *p, size_t len, const char *etag)
{
    if (strncmp(etag, "W/", 2) == 0)
        etag += 2;
    return strlen(etag) == len && memcmp(p, etag, len) == 0;
}

bool etag_list_match(const char *list, const char *etag, bool strong)
{
    const char *p = skip_space(list);
    if (*p == '*')
        return *skip_space(p + 1) == '\0';
    bool ours_weak = strncmp(etag, "W/", 2) == 0;
    for (;;) {
        /* Empty list elements are allowed (RFC 9110 5.6.1.2). */
        while (*p == ',' || *p == ' ' || *p == '\t')
            p++;
        if (*p == '\0')
            break;
        bool weak = strncmp(p, "W/", 2) == 0;
        if (weak)
            p += 2;
        if (*p != '"')
            return false;
        const char *end = strchr(p + 1, '"');
        if (end == NULL)
            return false;
        size_t len = (size_t)(end - p + 1);
        if (same_tag(p, len, etag) && (!strong || (!weak && !ours_weak)))
            return true;
        p = skip_space(end + 1);
        if (*p != ',' && *p != '\0')
            return false;
    }
    return false;
}

int cond_check(const char *if_match, const char *if_unmodified_since, const char *if_none_match,
               const char *if_modified_since, bool get_or_head, const char *etag, time_t mtime)
{
    time_t since;
    if (if_match != NULL) {
        if (!etag_list_match(if_match, etag, true))
            return 412;
    } else if (if_unmodified_since != NULL && http_date_parse(if_unmodified_since, &since)) {
        if (mtime > since)
            return 412;
    }
    /* If-None-Match takes precedence: If-Modified-Since is then ignored. */
    if (if_none_match != NULL) {
        if (etag_list_match(if_none_match, etag, false))
            return get_or_head ? 304 : 412;
    } else if (get_or_head && if_modified_since != NULL &&
               http_date_parse(if_modified_since, &since)) {
        if (mtime <= since)
            return 304;
    }
    return 0;
}

bool cond_if_range(const char *if_range, const char *etag, time_t mtime)
{
    const char *p = skip_space(if_range);
    if (*p == '"')
        return strncmp(etag, "W/", 2) != 0 && etag_list_match(p, etag, true) &&
               strchr(strchr(p + 1, '"') + 1, '"') == NULL;
    time_t date;
    return http_date_parse(p, &date) && date == mtime;
}
