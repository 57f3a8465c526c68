#ifndef UNCLOG_GZIP_H
#define UNCLOG_GZIP_H

#include <stdint.h>

#include "server/conn.h"
#include "server/module.h"

/* POST /gzip: the body, collected up to gzip_max_body (413 beyond, refused
 * from Content-Length before any of it is read), is deflated on the pool in
 * slices of gzip_partition input bytes, one job per slice, and streamed back
 * as application/gzip. */
extern const struct module gzip_module;

/* A source that gzips SIZE bytes of FD, reading and deflating PARTITION
 * bytes per threadpool job (CONFIG_WHOLE: one job), and closes FD after the
 * last read. Takes FD. Returns NULL when out of memory (FD is then closed). */
struct pump_source *gzip_file_source(int fd, uint64_t size, size_t partition);

#endif
