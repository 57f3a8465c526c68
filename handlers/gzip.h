#ifndef UNCLOG_GZIP_H
#define UNCLOG_GZIP_H

#include "server/conn.h"

/* POST /gzip: the body, collected up to gzip_max_body (413 beyond, refused
 * from Content-Length before any of it is read), is deflated on the pool in
 * slices of gzip_partition input bytes, one job per slice, and streamed back
 * as application/gzip. */
int gzip_on_headers(struct conn *c, const struct request *req);
int gzip_on_body(struct conn *c, const char *at, size_t len);
int gzip_on_request(struct conn *c, const struct request *req);

#endif
