#ifndef UNCLOG_LOG_H
#define UNCLOG_LOG_H

#include <stdbool.h>
#include <stdio.h>
#include <uv.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Sets the most verbose level that is printed (LOG_INFO by default). */
void log_set_level(enum log_level level);

/* Names this process in every line after it ("worker 2"); NULL for none. */
void log_set_name(const char *name);

/* Prints one line to stderr: UTC time, level, [name: ]message. */
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/* The access log: Common Log Format lines, buffered, flushed once a second.
 * A file is written with stdio. Standard output, when it is a pipe or a
 * terminal, is written through libuv without ever blocking the loop: lines
 * wait in chunks, at most ACCESS_LOG_CHUNKS of them in flight, and lines
 * beyond that are dropped and counted (a reader that stopped reading must
 * not stop the server). */
struct access_log_chunk;

struct access_log {
    FILE *file;          /* owned unless it is stdout; NULL when off or a stream */
    uv_stream_t *stream; /* &pipe or &tty when stdout is one; NULL otherwise */
    union {
        uv_pipe_t pipe;
        uv_tty_t tty;
    } handle;
    struct access_log_chunk *chunk; /* lines being gathered; owned */
    unsigned in_flight;             /* chunks handed to uv_write */
    /* Lines lost to a stalled reader: dropped while the queue was full, or
     * in a chunk whose write failed or was cancelled by the close. */
    unsigned long long dropped;
};

/* Opens PATH for appending, "-" for stdout, "off" for nothing; a stream
 * handle, if any, is initialised on LOOP. Returns 0 or a negative errno. */
int access_log_open(struct access_log *log, uv_loop_t *loop, const char *path);

/* Appends one CLF line. TIME is seconds since the epoch. */
void access_log_write(struct access_log *log, const char *peer, long time, const char *method,
                      const char *target, int http_minor, int status, unsigned long long bytes);

void access_log_flush(struct access_log *log);

/* Flushes and closes (the stream handle too: call it before the loop's
 * last run, and keep LOG until then); safe to call twice. A stream whose
 * reader lost lines says how many, once its close callback has run. */
void access_log_close(struct access_log *log);

#endif
