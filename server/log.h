#ifndef UNCLOG_LOG_H
#define UNCLOG_LOG_H

#include <stdbool.h>
#include <stdio.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Sets the most verbose level that is printed (LOG_INFO by default). */
void log_set_level(enum log_level level);

/* Prints one line to stderr: UTC time, level, message. */
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/* The access log: Common Log Format lines, buffered; flushed by
 * access_log_flush() (the server calls it once a second and at exit). */
struct access_log {
    FILE *file; /* owned unless it is stdout; NULL when logging is off */
};

/* Opens PATH for appending, "-" for stdout, "off" for nothing.
 * Returns 0 or a negative errno. */
int access_log_open(struct access_log *log, const char *path);

/* Appends one CLF line. TIME is seconds since the epoch. */
void access_log_write(struct access_log *log, const char *peer, long time, const char *method,
                      const char *target, int http_minor, int status, unsigned long long bytes);

void access_log_flush(struct access_log *log);

/* Flushes and closes; safe to call twice. */
void access_log_close(struct access_log *log);

#endif
