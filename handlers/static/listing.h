#ifndef UNCLOG_LISTING_H
#define UNCLOG_LISTING_H

#include <stdbool.h>
#include <stddef.h>

/* Builds an HTML index of directory DIR (a filesystem path), shown as
 * URL_PATH (decoded, with its trailing '/'): entries sorted by name,
 * directories marked with '/', sizes and modification dates, names
 * HTML-escaped and links percent-encoded; hidden names (path_hidden) only
 * with DOTFILES. Blocking: runs on the pool.
 * Returns a malloc'd page and its length, or NULL with errno set. */
char *listing_build(const char *dir, const char *url_path, bool dotfiles, size_t *len);

#endif
