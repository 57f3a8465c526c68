#ifndef UNCLOG_FILES_REPLY_H
#define UNCLOG_FILES_REPLY_H

#include <stdbool.h>
#include <sys/stat.h>

#include "handlers/files/files_config.h"
#include "server/http/conn.h"

/* A file to send: open (FD), or its whole body in memory (BODY). */
struct file {
    struct stat st;
    int fd;           /* -1 when BODY holds the file, or once the response took it */
    const char *body; /* st.st_size bytes, or NULL */
    int gz_fd;        /* FILE.gz, or -1 */
    struct stat gz_st;
};

/* Answers C's request for the file F, of media TYPE, under the module's
 * keys CFG: preconditions, then 304, 412, 416, 206 or 200 (RFC 9110
 * 13.2.2). Takes the fds it sends; the caller closes what is left. */
void reply_file(struct conn *c, const struct files_config *cfg, struct file *f, const char *type);

/* Is media TYPE (parameters ignored) listed in TYPES? A "text/STAR" entry matches any text. */
bool reply_compressible(const char *type, const char *types);

#endif
