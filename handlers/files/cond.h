#ifndef UNCLOG_COND_H
#define UNCLOG_COND_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* Validators and conditional requests (RFC 9110 8.8 and 13). Pure. */

#define ETAG_LEN 64

/* Formats a strong ETag from a file's inode, size and mtime (ns), with
 * SUFFIX (e.g. "-gz") inside the quotes for another representation. */
void etag_make(uint64_t ino, uint64_t size, int64_t mtime_ns, const char *suffix,
               char out[ETAG_LEN]);

/* Whether a list of entity-tags (If-Match, If-None-Match) or "*" matches
 * ETAG; STRONG selects the strong comparison (weak tags never match). A
 * malformed list matches nothing. */
bool etag_list_match(const char *list, const char *etag, bool strong);

/* The preconditions of RFC 9110 13.2.2, steps 1 to 4, for a representation
 * with ETAG last modified at MTIME. Absent headers are NULL; GET_OR_HEAD
 * says whether a failed If-None-Match/If-Modified-Since means 304.
 * Returns 0 to go on, 304 or 412. */
int cond_check(const char *if_match, const char *if_unmodified_since, const char *if_none_match,
               const char *if_modified_since, bool get_or_head, const char *etag, time_t mtime);

/* If-Range: true when its validator (a strong ETag, or a date equal to
 * MTIME) still matches, so the Range applies; false to send everything. */
bool cond_if_range(const char *if_range, const char *etag, time_t mtime);

#endif
