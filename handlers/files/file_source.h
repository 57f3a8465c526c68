#ifndef UNCLOG_FILE_SOURCE_H
#define UNCLOG_FILE_SOURCE_H

#include "server/pool/source.h"

/* A source that reads [OFFSET, OFFSET+LEN) of FD, closing FD after the last
 * piece (on the worker thread), or as it is released. Takes ownership of
 * FD. It names its range (pump_source_file), so that the writer may move
 * it with sendfile(2) instead. Returns NULL when
 * out of memory (FD is then closed). */
struct pump_source *file_range_source(int fd, unsigned long long offset, unsigned long long len);

#endif
