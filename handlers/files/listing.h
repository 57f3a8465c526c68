#ifndef UNCLOG_LISTING_H
#define UNCLOG_LISTING_H

#include <stdbool.h>
#include <stddef.h>
#include <zlib.h>

/* Builds an HTML index of directory DIR (a filesystem path), shown as
 * URL_PATH (decoded, with its trailing '/'): directories first, then
 * files, each group sorted by name; directories marked with '/'; sizes
 * readable ("8.0 KiB", the byte count in a title) and modification dates;
 * names HTML-escaped and links percent-encoded. With HIDE_ROOT, the
 * resolved root, hidden names (path_hidden) are left out, and so are
 * symlinks that lead to one under HIDE_ROOT (as the files handler refuses
 * them); NULL lists every name (dotfiles on). Blocking: runs on the pool.
 * Returns a malloc'd page and its length, or NULL with errno set. */
char *listing_build(const char *dir, const char *url_path, const char *hide_root, size_t *len);

/* Gzips the LEN bytes of PAGE in one go (the listing is whole in memory)
 * on Z, a deflate state set up with a gzip wrapper and not used since its
 * init or reset (the caller's, and left at the stream's end). Blocking:
 * runs on the pool. Returns a malloc'd body and its length GZ_LEN, or NULL
 * with errno set; PAGE stays the caller's. */
char *listing_gzip(z_stream *z, const char *page, size_t len, size_t *gz_len);

#endif
