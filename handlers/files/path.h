#ifndef UNCLOG_PATH_H
#define UNCLOG_PATH_H

#include <stdbool.h>
#include <stddef.h>

/* Turns the path of a request-target (up to '?' or '#') into a path
 * relative to the root, in OUT (SIZE bytes): percent-decoded, then empty and
 * "." segments dropped and ".." applied. The root itself is "". *DIR says
 * whether the target named a directory (ends in '/').
 * Returns 0; -EINVAL for a bad %-escape or a NUL byte; -EACCES when ".."
 * would climb above the root; -ENAMETOOLONG when OUT is too small. */
int path_resolve(const char *target, char *out, size_t size, bool *dir);

/* Whether RELATIVE, a path as path_resolve gives it, is hidden: one of its
 * segments starts with '.' (".env", ".git/config", "a/.htaccess"). The first
 * segment ".well-known" (RFC 8615) is not hidden itself. */
bool path_hidden(const char *relative);

/* The part of REAL, a resolved absolute path (realpath: no symlink, "." or
 * ".."), under ROOT, ROOT_LEN bytes, itself resolved: "" for the root,
 * "a/b" for ROOT/a/b; NULL when REAL is not under ROOT ("/srv/wwwx" is not
 * under "/srv/www"). Points into REAL. */
const char *path_beneath(const char *real, const char *root, size_t root_len);

/* Percent-encodes PATH for a Location header or a link into OUT.
 * Returns false when OUT is too small. */
bool path_encode(const char *path, char *out, size_t size);

#endif
