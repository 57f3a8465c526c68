#ifndef UNCLOG_CONFIG_H
#define UNCLOG_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "server/base/util.h"

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

/* client_prefix: how many leading bits of an address make one client, for
 * IPv4 (0 to 32) and IPv6 (0 to 128). */
struct config_prefix {
    unsigned v4, v6;
};

/* CONFIG_ADDRS: address prefixes whose clients may do something. The empty
 * list is spelled "loopback" (from when loopback clients always could; a key may
 * name its empty list otherwise: its one choice, as proxy_protocol_from's
 * "off"). */
#define CONFIG_ADDRS_MAX 8
struct config_addrs {
    unsigned n;
    struct addr_prefix prefix[CONFIG_ADDRS_MAX];
};

/* How a running server takes a new value of a key. */
enum config_when {
    CONFIG_RESTART, /* only at startup: a reload keeps the running value */
    CONFIG_RELOAD,  /* a reload (SIGHUP) applies it to new work */
    CONFIG_LIVE,    /* a reload, and POST /settings, apply it at once */
};

/* CONFIG_CHOICE: the words a key takes and what each stores (unsigned). */
struct config_choice {
    const char *name;
    unsigned value;
};

enum config_type {
    CONFIG_STRING,
    CONFIG_UINT,
    CONFIG_UINT_AUTO,      /* or "auto": CONFIG_AUTO */
    CONFIG_SIZE,           /* with "|off" in its arg, also "off": 0 */
    CONFIG_PARTITION,      /* a size, or "whole": CONFIG_WHOLE */
    CONFIG_PARTITION_AUTO, /* ... or "auto": CONFIG_AUTO_SIZE */
    CONFIG_BOOL,
    CONFIG_PREFIX, /* struct config_prefix: "V4,V6", two prefix lengths */
    CONFIG_MS,
    CONFIG_CHOICE,
    CONFIG_DISK, /* struct disk_emulation: "off" or "LATENCY[,RATE]" */
    CONFIG_ADDR, /* an address to listen on (config_parse_addr), kept as its text; or one
                  * of its choices' words ("unix:" stands for unix:/PATH) */
    CONFIG_ADDRS /* struct config_addrs: "loopback", or "PREFIX[,PREFIX...]" */
};

/* One key: the file spelling (the flag is the same with '-' for '_'), where
 * its value lives in its table's block, its range, default and help. */
struct config_key {
    const char *name;
    enum config_type type;
    size_t offset;     /* in the block of its table */
    size_t field_size; /* sizeof the field: a string's array size */
    unsigned long long min, max;
    const char *fallback; /* default, in config-file spelling */
    const char *arg;      /* placeholder in --help */
    const char *help;
    enum config_when when;
    /* CONFIG_CHOICE: ends with {NULL, 0}; CONFIG_ADDRS: the word for no prefix;
     * CONFIG_ADDR: the words it takes besides an address */
    const struct config_choice *choices;
};

/* A row of a table: FIELD(struct s, f) gives the offset and size of f. */
#define CONFIG_FIELD(type, f) offsetof(type, f), sizeof(((type *)0)->f)

/* The commonest rows, for a key named as its FIELD in BLOCK (the struct
 * its table fills): on|off, and a size in bytes from MIN to MAX. */
#define CONFIG_ONOFF(block, field, fallback, help, when)                                           \
    {                                                                                              \
#field, CONFIG_BOOL, CONFIG_FIELD(block, field), 0, 0, fallback, "on|off", help, when,     \
            NULL                                                                                   \
    }
#define CONFIG_BYTES(block, field, min, max, fallback, help, when)                                 \
    {                                                                                              \
#field, CONFIG_SIZE, CONFIG_FIELD(block, field), min, max, fallback, "SIZE", help, when,   \
            NULL                                                                                   \
    }

struct snap_def; /* server/base/snapshot.h */

/* The keys one part of the program owns, and the block they fill: the
 * core's table fills struct config itself (block_size 0); a module's table
 * fills a struct of its own, kept inside struct config (config_block). */
struct config_table {
    const char *name;
    const struct config_key *keys;
    size_t nkeys;
    size_t block_size;
    /* The keys shown as figures of /stats and /metrics: one figure each,
     * whose key is the key's name; NULL-terminated, or NULL for none. The
     * value and its type come from the key's row (snap_add_settings). */
    const struct snap_def *const *figures;
};

/* A module's table: its keys (an array) fill a BLOCK_TYPE of its own. */
#define CONFIG_TABLE(label, key_array, block_type)                                                 \
    {                                                                                              \
        .name = (label), .keys = (key_array), .nkeys = sizeof(key_array) / sizeof((key_array)[0]), \
        .block_size = sizeof(block_type)                                                           \
    }

/* The same, with the keys shown as figures (struct config_table's figures). */
#define CONFIG_TABLE_FIGURES(label, key_array, block_type, figure_list)                            \
    {                                                                                              \
        .name = (label), .keys = (key_array), .nkeys = sizeof(key_array) / sizeof((key_array)[0]), \
        .block_size = sizeof(block_type), .figures = (figure_list)                                 \
    }

#define CONFIG_TABLES_MAX 8
/* Bytes for all modules' blocks together: struct config stays a value that
 * a plain assignment copies, whole. */
#define CONFIG_BLOCKS_SIZE 2048
/* Keys of every table together (for per-key bookkeeping such as when a
 * live key last changed). */
#define CONFIG_KEYS_MAX 64

/* The parsed configuration: the core's keys, and each module's block. Read-only
 * while the server runs, except that a reload or POST /settings replaces
 * it whole, on the loop thread, between callbacks. */
struct config {
    /* The tables it was made from, core first, NULL-terminated (static). */
    const struct config_table *const *tables;
    size_t block_offset[CONFIG_TABLES_MAX]; /* each module table's block in blocks[] */
    char file[PATH_MAX];                    /* the file config_load read, as named; "" when none */
    char listen[128];
    char admin_listen[128]; /* auto, off, an ADDR:PORT or unix:/PATH (server/listener.c) */
    char root[PATH_MAX];
    unsigned threads;
    unsigned workers;     /* processes; CONFIG_AUTO: one per CPU */
    size_t partition;     /* or CONFIG_WHOLE, or CONFIG_AUTO_SIZE */
    size_t partition_min; /* auto: pieces while short work waits */
    size_t partition_max; /* auto: pieces while none does */
    unsigned scheduler;   /* enum sched_mode */
    unsigned bulk_nice;   /* a pool thread's nice value during bulk pieces; 0: off */
    struct disk_emulation emulate_disk;
    char access_log[PATH_MAX];
    unsigned log_level; /* enum log_level */
    /* Limits and timeouts (milliseconds) per connection */
    unsigned max_connections; /* beyond it new connections get 503 */
    size_t max_url;           /* request-target bytes: 414 beyond */
    size_t max_header_size;   /* header block bytes: 431 beyond */
    unsigned max_headers;     /* header lines: 431 beyond */
    size_t max_body;          /* request body bytes: 413 beyond */
    unsigned header_timeout;  /* from a request's first byte to the end of its head */
    unsigned body_timeout;    /* silence allowed while reading a body */
    unsigned body_max_time;   /* time allowed for a whole body, from the end of its head */
    size_t min_rate;          /* bytes/s a body or response moves below which it is slow; 0: off */
    unsigned keepalive_timeout; /* idle time between requests */
    unsigned send_timeout;      /* time a client may read none of its response */
    size_t send_buffer;         /* SO_SNDBUF of each connection; 0: the kernel's own */
    size_t send_lowat;          /* TCP_NOTSENT_LOWAT of each connection; 0: the kernel's own */
    size_t send_turn;           /* bytes the loop writes per pass before clients take turns */
    bool loop_reads;            /* open and read page-cached files on the loop */
    unsigned sendfile;          /* 1 (auto): plain file ranges move by sendfile(2); 0: off */
    unsigned turn_share;        /* µs of a loop turn a client may take before its requests wait */
    size_t max_buffer_memory;   /* the budget of server/pool/budget.h, per worker */
    /* The leading bits of an address that make one client. */
    struct config_prefix client_prefix;
    /* The load balancers whose connections begin with a PROXY header. */
    struct config_addrs proxy_protocol_from;
    _Alignas(max_align_t) unsigned char blocks[CONFIG_BLOCKS_SIZE];
};

/* The block of CFG that TABLE's keys fill (a module's own struct), or NULL
 * when CFG was not made with TABLE. */
const void *config_block(const struct config *cfg, const struct config_table *table);

/* Every key of CFG's tables in order, core first: the Ith (0-based) or
 * NULL past the last. */
const struct config_key *config_key_at(const struct config *cfg, size_t i);

/* The key named NAME (config-file spelling), or NULL. */
const struct config_key *config_find(const struct config *cfg, const char *name);

/* The key of CFG whose name is nearest NAME by edit distance, if one is
 * near enough to be a typo of it (partiton: partition), else NULL. */
const char *config_near_key(const struct config *cfg, const char *name);

/* What the command line asked for besides settings. --routes, --job-classes
 * and --keys print what the man page (man/mkman.sh) and the reference
 * (docs/reference.md, checked by 59_docs.t) are generated from or checked
 * against. */
enum config_action {
    CONFIG_RUN,
    CONFIG_HELP,
    CONFIG_VERSION,
    CONFIG_ROUTES,
    CONFIG_JOB_CLASSES,
    CONFIG_KEYS
};

/* Fills CFG with every key's default, from TABLES (core first, then each
 * module's; NULL-terminated; kept, so static). Aborts if the tables break
 * their limits (CONFIG_TABLES_MAX, CONFIG_BLOCKS_SIZE, CONFIG_KEYS_MAX): a
 * bug, not an input. */
void config_defaults(struct config *cfg, const struct config_table *const *tables);

/* Parses "123", "64k", "16m" (binary units); with ALLOW_WHOLE also "whole".
 * Returns 0, or -EINVAL for anything else, zero included, and -ERANGE on overflow. */
int config_parse_size(const char *text, bool allow_whole, size_t *out);

/* Parses a listening address: "IPV4:PORT", "[IPV6]:PORT" or
 * "localhost:PORT", which is 127.0.0.1 (no resolver is asked, so it means
 * the same on every machine); PORT is 0 to 65535. No other host name.
 * Returns 0 with ADDR filled, or -EINVAL. */
int config_parse_addr(const char *text, struct sockaddr_storage *addr);

/* Sets KEY (config-file spelling, e.g. "gzip_partition") from TEXT.
 * Returns 0, or -1 with a message (no location) in ERR. */
int config_set(struct config *cfg, const char *key, const char *text, char err[CONFIG_ERR_MAX]);

/* The same for a running server's live change (POST /settings): a key that
 * is not CONFIG_LIVE is refused with a message that says how it changes. */
int config_set_live(struct config *cfg, const char *key, const char *text,
                    char err[CONFIG_ERR_MAX]);

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
 * DIR as root) over CFG, skipping -c. A flag that is last, or followed by an
 * option (--anything, -c, -h, -V), has no value: that is an error, so a value
 * that starts with '-' is written --key=VALUE. Returns 0 with *ACTION set, or
 * -1 with a message in ERR. */
int config_apply_cli(struct config *cfg, int argc, char **argv, enum config_action *action,
                     char err[CONFIG_ERR_MAX]);

/* The whole configuration as startup reads it: defaults, then the file
 * (-c FILE, else CONFIG_DEFAULT_FILE when it exists; its name goes to
 * CFG->file), then the flags over it.
 * Returns 0 with *ACTION set, or -1 with "FILE:LINE: message" or
 * "unclog: message" in ERR. */
int config_load(struct config *cfg, const struct config_table *const *tables, int argc, char **argv,
                enum config_action *action, char err[CONFIG_ERR_MAX]);

/* For a reload: every CONFIG_RESTART key gets CUR's value back in NEXT; the names of those that
 * differed go to CHANGED (LEN bytes, space-separated, "" when none). */
void config_keep_restart_keys(struct config *next, const struct config *cur, char *changed,
                              size_t len);

/* --keys: every key of CFG's tables, one a line, "NAME\tDEFAULT\tWHEN" with
 * WHEN live, reload or restart. */
void config_print_keys(const struct config *cfg, FILE *out);

/* Writes the --help text, generated from CFG's tables, to OUT. */
void config_usage(const struct config *cfg, FILE *out, const char *argv0);

/* KEY's value as a number, into OUT: an unsigned, a size (CONFIG_WHOLE
 * and CONFIG_AUTO_SIZE as they are), a choice's value, a switch's 0 or 1.
 * Returns 0, or -1 for a key that has no such value (text, an address, a
 * list, emulate_disk) or does not exist. */
int config_number(const struct config *cfg, const char *key, uint64_t *out);

/* Formats a size the way a config file would spell it ("64k", "whole"). */
void config_format_size(size_t size, char *buf, size_t len);

#endif
