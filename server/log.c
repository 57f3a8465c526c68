#include "server/log.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

static enum log_level max_level = LOG_INFO;
static const char *const level_names[] = {"error", "warn", "info", "debug"};

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
    fprintf(stderr, "%s %s %s\n", stamp, level_names[level], line);
}

int access_log_open(struct access_log *log, const char *path)
{
    log->file = NULL;
    if (strcmp(path, "off") == 0)
        return 0;
    if (strcmp(path, "-") == 0) {
        log->file = stdout;
        return 0;
    }
    log->file = fopen(path, "ae");
    if (log->file == NULL)
        return -errno;
    /* Fully buffered: one write(2) per few hundred lines, flushed every second. */
    setvbuf(log->file, NULL, _IOFBF, 64 * 1024);
    return 0;
}

void access_log_write(struct access_log *log, const char *peer, long time, const char *method,
                      const char *target, int http_minor, int status, unsigned long long bytes)
{
    if (log->file == NULL)
        return;
    char stamp[40];
    time_t t = time;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(stamp, sizeof stamp, "%d/%b/%Y:%H:%M:%S +0000", &tm);
    fprintf(log->file, "%s - - [%s] \"%s %s HTTP/1.%d\" %d %llu\n", peer, stamp, method, target,
            http_minor, status, bytes);
}

void access_log_flush(struct access_log *log)
{
    if (log->file != NULL)
        fflush(log->file);
}

void access_log_close(struct access_log *log)
{
    if (log->file == NULL)
        return;
    if (log->file == stdout)
        fflush(stdout);
    else
        fclose(log->file);
    log->file = NULL;
}
