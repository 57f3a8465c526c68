#ifndef UNCLOG_BYTERANGES_H
#define UNCLOG_BYTERANGES_H

#include <stdint.h>

#include "handlers/files/range.h"
#include "server/pool/source.h"

#define BYTERANGES_BOUNDARY_LEN 24

/* A multipart/byteranges body (RFC 9110 14.6) for COUNT ranges of a file
 * of SIZE bytes and media TYPE: each part's head, then its bytes read from
 * FD in the pieces the pump cuts (heads count in them); FD is closed after
 * the last read.
 * Sets *LENGTH to the body's exact length and BOUNDARY to the separator for
 * the Content-Type. Takes FD. Returns NULL when out of memory (FD closed). */
struct pump_source *byteranges_source(int fd, uint64_t size, const struct range *ranges, int count,
                                      const char *type, uint64_t *length,
                                      char boundary[BYTERANGES_BOUNDARY_LEN]);

#endif
