#include "handlers/files/range.h"

#include "server/base/util.h"
#include <string.h>
#include <strings.h>

/* Reads decimal digits at *P. Returns false when there are none; values
 * past UINT64_MAX saturate (any such position is past any file's end). */
static bool number(const char **p, uint64_t *out)
{
    const char *s = *p;
    uint64_t n = 0;
    if (*s < '0' || *s > '9')
        return false;
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned digit = (unsigned)(*s - '0');
        n = n > (UINT64_MAX - digit) / 10 ? UINT64_MAX : n * 10 + digit;
    }
    *p = s;
    *out = n;
    return true;
}

/* Parses one range-spec at *P. Returns false if malformed (or a suffix
 * range of an empty file); sets *KEEP to whether it is satisfiable. */
static bool one_range(const char **p, uint64_t size, struct range *r, bool *keep)
{
    const char *s = *p;
    uint64_t first, last;
    if (*s == '-') { /* suffix: the last N bytes */
        s++;
        if (!number(&s, &last))
            return false;
        /* The only satisfiable range of an empty file, yet no 206 can
         * carry zero bytes: the caller sends the (empty) whole. */
        if (size == 0 && last > 0)
            return false;
        *keep = last > 0 && size > 0;
        r->first = last >= size ? 0 : size - last;
        r->last = size - 1;
    } else {
        if (!number(&s, &first) || *s++ != '-')
            return false;
        bool open = !number(&s, &last);
        if (!open && last < first)
            return false;
        *keep = first < size;
        r->first = first;
        r->last = open || last >= size ? size - 1 : last;
    }
    *p = s;
    return true;
}

enum range_result range_parse(const char *header, uint64_t size, struct range *ranges, int *count)
{
    const char *p = skip_space(header);
    if (strncasecmp(p, "bytes", 5) != 0)
        return RANGE_IGNORE;
    p = skip_space(p + 5);
    if (*p++ != '=')
        return RANGE_IGNORE;
    int n = 0, seen = 0;
    bool too_many = false;
    for (;;) {
        p = skip_space(p);
        if (*p == ',') { /* empty list elements are allowed (RFC 9110 5.6.1) */
            p++;
            continue;
        }
        if (*p == '\0')
            break;
        struct range r;
        bool keep;
        if (!one_range(&p, size, &r, &keep))
            return RANGE_IGNORE;
        seen++;
        if (keep && n < RANGE_MAX)
            ranges[n++] = r;
        else if (keep)
            too_many = true;
        p = skip_space(p);
        if (*p != ',' && *p != '\0')
            return RANGE_IGNORE;
    }
    if (seen == 0)
        return RANGE_IGNORE;
    if (n == 0)
        return RANGE_UNSATISFIABLE;
    if (too_many)
        return RANGE_IGNORE;
    for (int i = 0; i < n; i++) {
        for (int j = i + 1; j < n; j++) {
            if (ranges[i].first <= ranges[j].last && ranges[j].first <= ranges[i].last)
                return RANGE_IGNORE;
        }
    }
    *count = n;
    return RANGE_OK;
}
