#ifndef UNCLOG_GZIP_H
#define UNCLOG_GZIP_H

#include <stddef.h>

#include "server/http/conn.h"
#include "server/module.h"

/* POST /gzip: the body is deflated as it arrives, on the pool, in slices of
 * gzip_partition input bytes, one job per slice, and streamed back chunked
 * as application/gzip. Reading the body pauses while a slice is on the pool
 * or the response's slots are full, so a connection holds one slice of
 * input, at most two of output and zlib's state, whatever the body's size.
 * The route's body limit is gzip_max_body, in place of max_body: the core
 * answers 413 beyond it, from a Content-Length before any of the body is
 * read. The 200 waits until the response's first slot is full or the
 * body is in: a chunked body that grows past the limit before then gets 413
 * (a bad chunk 400, silence 408); one that does so later is cut with a
 * reset. */
extern const struct module gzip_module;

/* The module's keys (gzip_module.config fills it). */
struct gzip_config {
    size_t gzip_partition; /* input bytes per deflate job, or CONFIG_WHOLE */
    size_t gzip_max_body;  /* largest POST /gzip body: 413 beyond */
};

#endif
