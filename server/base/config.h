#ifndef UNCLOG_CONFIG_H
#define UNCLOG_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A partition of CONFIG_WHOLE means one threadpool job for the whole file or body. */
#define CONFIG_WHOLE SIZE_MAX
/* partition = auto: pieces between partition_min and partition_max. */
#define CONFIG_AUTO_SIZE (SIZE_MAX - 1)

/* workers = auto: one per online CPU, resolved when the server starts. */
#define CONFIG_AUTO 0u

#define CONFIG_ERR_MAX 512

/* Read when no -c FILE is given and it exists in the working directory. */
#define CONFIG_DEFAULT_FILE "conf/unclog.conf"

/* emulate_disk: each pool read of a file takes at least latency_ms plus
 * its bytes at bytes_per_s (0: no rate). All 0: off. */
struct disk_emulation {
    unsigned latency_ms;
    size_t bytes_per_s;
};

/* The parsed configuration. Read-only while the server runs, except that a
 * reload (SIGHUP) replaces it whole, on the loop thread, between callbacks. */
struct config {
    char listen[128];
    char root[PATH_MAX];
    unsigned threads;
    unsigned workers;     /* processes; CONFIG_AUTO: one per CPU */
    size_t partition;     /* or CONFIG_WHOLE, or CONFIG_AUTO_SIZE */
    size_t partition_min; /* auto: pieces while short work waits */
    size_t partition_max; /* auto: pieces while none does */
    unsigned scheduler;   /* enum sched_mode: fifo, fair */
    unsigned bulk_nice;   /* a pool thread's nice value during bulk pieces; 0: off */
    struct disk_emulation emulate_disk;
    bool admin; /* /settings answers loopback clients */
    size_t gzip_partition;
    size_t gzip_max_body;
    char access_log[PATH_MAX];
    unsigned log_level; /* enum log_level: error, warn, info, debug */
    /* HTTP semantics of static files */
    bool listing;            /* HTML index of directories without index.html */
    bool gzip_files;         /* compress compressible files on the fly */
    bool gzip_static;        /* send FILE.gz when it exists and gzip is accepted */
    size_t gzip_min_size;    /* smaller files are sent as they are */
    char gzip_types[512];    /* media types compressed, space-separated; text/ matches any text */
    char cache_control[256]; /* Cache-Control of file responses, or "off" */
    bool file_cache;         /* keep small files' bodies in memory */
    size_t file_cache_max_file; /* largest file kept */
    size_t file_cache_size;     /* all bodies kept */
    /* Limits and timeouts (milliseconds) per connection */
    unsigned max_connections;   /* beyond it new connections get 503 */
    size_t max_url;             /* request-target bytes: 414 beyond */
    size_t max_header_size;     /* header block bytes: 431 beyond */
    unsigned max_headers;       /* header lines: 431 beyond */
    size_t max_body;            /* request body bytes: 413 beyond */
    unsigned header_timeout;    /* from a request's first byte to the end of its head */
    unsigned body_timeout;      /* silence allowed while reading a body */
    unsigned keepalive_timeout; /* idle time between requests */
    unsigned send_timeout;      /* time a client may read none of its response */
    size_t send_buffer;         /* SO_SNDBUF of each connection; 0: the kernel's own */
    size_t max_buffer_memory;   /* the budget of server/pool/budget.h, per worker */
};

/* What the command line asked for besides settings. */
enum config_action { CONFIG_RUN, CONFIG_HELP, CONFIG_VERSION };

/* Fills CFG with every key's default. */
void config_defaults(struct config *cfg);

/* Parses "123", "64k", "16m" (binary units); with ALLOW_WHOLE also "whole".
 * Returns 0, or -EINVAL for anything else, zero included, and -ERANGE on overflow. */
int config_parse_size(const char *text, bool allow_whole, size_t *out);

/* Sets KEY (config-file spelling, e.g. "gzip_partition") from TEXT.
 * Returns 0, or -1 with a message (no location) in ERR. */
int config_set(struct config *cfg, const char *key, const char *text, char err[CONFIG_ERR_MAX]);

/* Writes KEY's value in CFG, in config-file spelling, to BUF. Returns 0,
 * or -1 for an unknown key. */
int config_get(const struct config *cfg, const char *key, char *buf, size_t len);

/* Reads a `key = value` file. Returns 0, or -1 with "PATH:LINE: message"
 * (or "PATH: reason" when it cannot be read) in ERR. */
int config_load_file(struct config *cfg, const char *path, char err[CONFIG_ERR_MAX]);

/* Finds the config file named on the command line (-c FILE, --config FILE,
 * --config=FILE). Returns it, or NULL when none is named. */
const char *config_cli_file(int argc, char **argv);

/* Applies every command-line flag (--key VALUE, --key=VALUE, a positional
 * DIR as root) over CFG, skipping -c. Returns 0 with *ACTION set, or -1 with a
 * message in ERR. */
int config_apply_cli(struct config *cfg, int argc, char **argv, enum config_action *action,
                     char err[CONFIG_ERR_MAX]);

/* The whole configuration as startup reads it: defaults, then the file
 * (-c FILE, else CONFIG_DEFAULT_FILE when it exists), then the flags over it.
 * Returns 0 with *ACTION set, or -1 with "FILE:LINE: message" or
 * "unclog: message" in ERR. */
int config_load(struct config *cfg, int argc, char **argv, enum config_action *action,
                char err[CONFIG_ERR_MAX]);

/* For a reload: every key that only a restart can change (listen, root,
 * threads, workers) gets CUR's value back in NEXT; the names of those that
 * differed go to CHANGED (LEN bytes, space-separated, "" when none). */
void config_keep_restart_keys(struct config *next, const struct config *cur, char *changed,
                              size_t len);

/* Writes the --help text, generated from the key table, to OUT. */
void config_usage(FILE *out, const char *argv0);

/* Formats a size the way a config file would spell it ("64k", "whole"). */
void config_format_size(size_t size, char *buf, size_t len);

#endif
