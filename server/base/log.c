#include "server/base/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/base/util.h"

static enum log_level max_level = LOG_INFO;
static const char *const level_names[] = {"error", "warn", "info", "debug"};
static char process_name[32];

void log_set_name(const char *name)
{
    snprintf(process_name, sizeof process_name, "%s%s", name ? name : "", name ? ": " : "");
}

void log_set_level(enum log_level level)
{
    max_level = level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    if (level > max_level)
        return;
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);

    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One fprintf per line so concurrent writers do not interleave mid-line. */
    fprintf(stderr, "%s %s %s%s\n", stamp, level_names[level], process_name, line);
}

#define ACCESS_LOG_CHUNK  (64 * 1024)
#define ACCESS_LOG_CHUNKS 16 /* in flight: 1 MiB at most waits for a reader */

/* Lines for one uv_write; freed by its callback. */
struct access_log_chunk {
    uv_write_t req;
    struct access_log *log;
    size_t len;
    unsigned lines;
    char data[ACCESS_LOG_CHUNK];
};

static int open_stream(struct access_log *log, uv_loop_t *loop)
{
    int rc;
    switch (uv_guess_handle(STDOUT_FILENO)) {
    case UV_TTY:
        rc = uv_tty_init(loop, &log->handle.tty, STDOUT_FILENO, 0);
        break;
    case UV_NAMED_PIPE:
        rc = uv_pipe_init(loop, &log->handle.pipe, 0);
        if (rc == 0 && (rc = uv_pipe_open(&log->handle.pipe, STDOUT_FILENO)) < 0)
            uv_close((uv_handle_t *)&log->handle.pipe, NULL);
        break;
    default:
        log->file = stdout; /* a file: stdio, fully buffered */
        setvbuf(stdout, NULL, _IOFBF, ACCESS_LOG_CHUNK);
        return 0;
    }
    if (rc < 0)
        return rc;
    log->stream = (uv_stream_t *)&log->handle;
    return 0;
}

int access_log_open(struct access_log *log, uv_loop_t *loop, const char *path)
{
    memset(log, 0, sizeof *log);
    if (strcmp(path, "off") == 0)
        return 0;
    if (strcmp(path, "-") == 0)
        return open_stream(log, loop);
    log->file = fopen(path, "ae");
    if (log->file == NULL)
        return -errno;
    /* Fully buffered: one write(2) per few hundred lines, flushed every second. */
    setvbuf(log->file, NULL, _IOFBF, 64 * 1024);
    return 0;
}

/* A chunk's end: written whole (status 0), or not, then lost. Every write
 * callback runs before the stream's close callback, UV_ECANCELED for the
 * chunks the close took out of the queue. */
static void access_log_on_write(uv_write_t *req, int status)
{
    struct access_log_chunk *chunk = (struct access_log_chunk *)req;
    chunk->log->in_flight--;
    if (status < 0)
        chunk->log->dropped += chunk->lines;
    free(chunk);
}

/* The last write callback has run: what was lost is known. */
static void access_log_on_close(uv_handle_t *handle)
{
    struct access_log *log = container_of(handle, struct access_log, handle);
    if (log->dropped > 0)
        log_warn("access log: %llu lines lost (standard output not read)", log->dropped);
}

static void flush_chunk(struct access_log *log)
{
    struct access_log_chunk *chunk = log->chunk;
    if (chunk == NULL || chunk->len == 0)
        return;
    log->chunk = NULL;
    uv_buf_t buf = uv_buf_init(chunk->data, (unsigned)chunk->len);
    if (uv_write(&chunk->req, log->stream, &buf, 1, access_log_on_write) < 0) {
        log->dropped += chunk->lines;
        free(chunk);
        return;
    }
    log->in_flight++;
}

/* Appends a formatted line to the current chunk, starting a new one when
 * it is full; drops the line when too much already waits for the reader. */
static void stream_line(struct access_log *log, const char *line, size_t len)
{
    if (log->chunk != NULL && log->chunk->len + len > ACCESS_LOG_CHUNK)
        flush_chunk(log);
    if (log->chunk == NULL && log->in_flight < ACCESS_LOG_CHUNKS) {
        log->chunk = malloc(sizeof *log->chunk);
        if (log->chunk != NULL) {
            log->chunk->log = log;
            log->chunk->len = 0;
            log->chunk->lines = 0;
        }
    }
    if (log->chunk == NULL || len > ACCESS_LOG_CHUNK) {
        log->dropped++;
        return;
    }
    memcpy(log->chunk->data + log->chunk->len, line, len);
    log->chunk->len += len;
    log->chunk->lines++;
}

void access_log_write(struct access_log *log, const char *peer, long time, const char *method,
                      const char *target, int http_minor, int status, unsigned long long bytes)
{
    if (log->file == NULL && log->stream == NULL)
        return;
    char stamp[40];
    time_t t = time;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(stamp, sizeof stamp, "%d/%b/%Y:%H:%M:%S +0000", &tm);
    /* The target is the client's: escape what could forge a line or a field. */
    char safe[2048];
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)target; *p != '\0'; p++) {
        if (n + 5 >= sizeof safe) {
            memcpy(safe + n, "...", 4);
            n += 3;
            break;
        }
        if (*p < 0x20 || *p >= 0x7f || *p == '"' || *p == '\\')
            n += (size_t)snprintf(safe + n, 5, "\\x%02x", *p);
        else
            safe[n++] = (char)*p;
    }
    safe[n] = '\0';
    char line[2400];
    int len = snprintf(line, sizeof line, "%s - - [%s] \"%s %s HTTP/1.%d\" %d %llu\n", peer, stamp,
                       method, safe, http_minor, status, bytes);
    if (len < 0 || (size_t)len >= sizeof line)
        return;
    if (log->stream != NULL)
        stream_line(log, line, (size_t)len);
    else
        fwrite(line, 1, (size_t)len, log->file);
}

void access_log_flush(struct access_log *log)
{
    if (log->stream != NULL)
        flush_chunk(log);
    else if (log->file != NULL)
        fflush(log->file);
}

void access_log_close(struct access_log *log)
{
    if (log->stream != NULL) {
        /* uv_write tries to write at once; what a stalled reader leaves in
         * the queue is cancelled by the close, and counted, with the lines
         * dropped before, once the close callback runs. A chunk handed
         * over whose callback has not run yet may well be written. */
        flush_chunk(log);
        free(log->chunk);
        log->chunk = NULL;
        uv_close((uv_handle_t *)log->stream, access_log_on_close);
        log->stream = NULL;
    } else if (log->file == stdout) {
        fflush(stdout);
    } else if (log->file != NULL) {
        fclose(log->file);
    }
    log->file = NULL;
}
