#ifndef UNCLOG_DEFLATE_H
#define UNCLOG_DEFLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/http/conn.h"

/* Sources (server/pool/source.h) that gzip their input on the pool, one piece
 * of it per threadpool job: a request body as it arrives (POST /gzip) or a
 * file (the files handler's gzip on the fly). Each holds a zlib state
 * (server/pool/zstates.h) while it deflates, and the budget holds its
 * memory. */
struct deflate_source;

/* A source for the body of C's request REQ, deflated as it arrives in
 * slices of SLICE bytes (the first; PARTITION(C) says each next one's size,
 * which a live change moves), BODY_MAX bytes at the most. It commits its
 * status late and reserves its memory late (struct pump_source). Feed it
 * with deflate_body_add and deflate_body_end; hand it to the response with
 * conn_send_source(deflate_pump_source(D)), which then owns it. Returns
 * NULL when out of memory. */
struct deflate_source *deflate_body_source(struct conn *c, const struct request *req, size_t slice,
                                           uint64_t body_max, size_t (*partition)(struct conn *c));
/* D as the pump sees it. */
struct pump_source *deflate_pump_source(struct deflate_source *d);
/* LEN more bytes of the body at AT (the connection's body window kept them
 * within D's buffer). */
void deflate_body_add(struct deflate_source *d, const char *at, size_t len);
/* The body is in: its last slice goes to the pool. */
void deflate_body_end(struct deflate_source *d);

/* A source that gzips SIZE bytes of FD, one piece of the file per
 * threadpool job (read and deflated; the pump cuts the pieces as for any
 * file read), and closes FD after the last read. Takes FD. Returns NULL when
 * out of memory (FD is then closed). */
struct pump_source *deflate_file_source(int fd, uint64_t size);

/* Whether an Accept-Encoding value ACCEPT (NULL: no such header) allows
 * gzip (RFC 9110 12.5.3): gzip or x-gzip, else *, with a weight above 0. */
bool gzip_accepted(const char *accept);

#endif
