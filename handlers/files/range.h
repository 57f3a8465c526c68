#ifndef UNCLOG_RANGE_H
#define UNCLOG_RANGE_H

#include <stdbool.h>
#include <stdint.h>

/* Byte ranges (RFC 9110 14). Pure: no I/O, no allocation. */

#define RANGE_MAX 16 /* more ranges than this and the whole file is sent */

struct range {
    uint64_t first, last; /* inclusive, within the representation */
};

enum range_result {
    RANGE_IGNORE,        /* no usable Range header: send the whole file (200) */
    RANGE_OK,            /* *COUNT satisfiable ranges, in the order asked */
    RANGE_UNSATISFIABLE, /* 416 with Content-Range: bytes * / SIZE */
};

/* Parses a Range header value against a representation of SIZE bytes.
 * Malformed values (bad syntax, "5-3", another unit) are ignored, as RFC
 * 9110 allows; ranges that start past the end are dropped, and if none is
 * left the set is unsatisfiable. Overlapping ranges, or more than RANGE_MAX,
 * make the server send the whole file (a client asking for that many pieces
 * is cheaper served in one). */
enum range_result range_parse(const char *header, uint64_t size, struct range *ranges, int *count);

#endif
