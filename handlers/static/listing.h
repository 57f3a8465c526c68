#ifndef UNCLOG_LISTING_H
#define UNCLOG_LISTING_H

#include <stddef.h>

/* Builds an HTML index of directory DIR (a filesystem path), shown as
 * URL_PATH (decoded, with its trailing '/'): entries sorted by name,
 * directories marked with '/', sizes and modification dates, names
 * HTML-escaped and links percent-encoded. Blocking: runs on the pool.
 * Returns a malloc'd page and its length, or NULL with errno set. */
char *listing_build(const char *dir, const char *url_path, size_t *len);

#endif
