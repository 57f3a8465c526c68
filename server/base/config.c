#include "server/base/config.h"
#include "server/base/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* KEY_CHOICE: one of the words of the key's ARG ("a|b|c"), stored as its
 * index (unsigned). */
enum key_type {
    KEY_STRING,
    KEY_UINT,
    KEY_UINT_AUTO,
    KEY_SIZE,
    KEY_PARTITION,
    KEY_PARTITION_AUTO,
    KEY_BOOL,
    KEY_MS,
    KEY_CHOICE,
    KEY_DISK /* struct disk_emulation: "off" or "LATENCY[,BANDWIDTH]" */
};

/* One row per key: the file spelling, the flag is the same with '-' for '_'. */
struct key {
    const char *name;
    enum key_type type;
    size_t offset;
    size_t field_size; /* sizeof the field: a string's array size */
    unsigned long long min, max;
    const char *fallback; /* default, in config-file spelling */
    const char *arg;      /* placeholder in --help */
    const char *help;
};

#define FIELD(f) offsetof(struct config, f), sizeof(((struct config *)0)->f)

static const struct key keys[] = {
    {"listen", KEY_STRING, FIELD(listen), 0, 0, "127.0.0.1:8080", "ADDR:PORT",
     "address to listen on; port 0 picks a free one"},
    {"root", KEY_STRING, FIELD(root), 0, 0, "static", "DIR", "directory served"},
    {"threads", KEY_UINT, FIELD(threads), 1, 1024, "4", "N", "libuv threadpool size per worker"},
    {"workers", KEY_UINT_AUTO, FIELD(workers), 1, 1024, "1", "N|auto",
     "server processes sharing the port; auto: one per online CPU"},
    {"partition", KEY_PARTITION_AUTO, FIELD(partition), 1, GIB, "auto", "SIZE|whole|auto",
     "bytes per threadpool read of a file; auto: partition_max while no short work waits, "
     "partition_min when some does"},
    {"partition_min", KEY_SIZE, FIELD(partition_min), 1, GIB, "64k", "SIZE",
     "piece size of partition = auto while short work waits"},
    {"partition_max", KEY_SIZE, FIELD(partition_max), 1, GIB, "1m", "SIZE",
     "piece size of partition = auto while no short work waits"},
    {"bulk_nice", KEY_UINT, FIELD(bulk_nice), 0, 19, "0", "N",
     "nice value, 0 to 19, of a pool thread while it runs a bulk piece; 0: off. Needs root or "
     "LimitNICE=20, to set threads back for short work"},
    {"scheduler", KEY_CHOICE, FIELD(scheduler), 0, 0, "fair", "fifo|fair",
     "order of threadpool jobs: fifo (arrival) or fair (short work first, bulk shared)"},
    {"gzip_partition", KEY_PARTITION, FIELD(gzip_partition), 1, GIB, "64k", "SIZE|whole",
     "input bytes deflated per threadpool job"},
    {"emulate_disk", KEY_DISK, FIELD(emulate_disk), 0, 60000, "off", "LATENCY[,RATE]|off",
     "every pool read of a file takes at least LATENCY plus its bytes at RATE per second, "
     "e.g. 8ms,120m: what a slow disk does to the pool, on a warm page cache"},
    {"admin", KEY_BOOL, FIELD(admin), 0, 0, "off", "on|off",
     "GET and POST /settings change live settings, from loopback clients only"},
    {"gzip_max_body", KEY_SIZE, FIELD(gzip_max_body), 1, GIB, "16m", "SIZE",
     "largest POST /gzip body (413 beyond)"},
    {"access_log", KEY_STRING, FIELD(access_log), 0, 0, "-", "PATH|-|off",
     "Common Log Format access log"},
    {"log_level", KEY_CHOICE, FIELD(log_level), 0, 0, "info", "error|warn|info|debug",
     "most verbose lines on stderr (debug: every refused request and timeout)"},
    {"listing", KEY_BOOL, FIELD(listing), 0, 0, "off", "on|off",
     "HTML listing of directories without index.html"},
    {"gzip_files", KEY_BOOL, FIELD(gzip_files), 0, 0, "on", "on|off",
     "gzip compressible files on the fly when the client accepts it"},
    {"gzip_static", KEY_BOOL, FIELD(gzip_static), 0, 0, "on", "on|off",
     "send FILE.gz instead of FILE when it exists"},
    {"gzip_min_size", KEY_SIZE, FIELD(gzip_min_size), 1, GIB, "1k", "SIZE",
     "smallest file compressed on the fly"},
    {"gzip_types", KEY_STRING, FIELD(gzip_types), 0, 0,
     "text/* application/json application/javascript application/xml image/svg+xml "
     "application/wasm",
     "'TYPE ...'", "media types compressed on the fly (text/* matches any text/...)"},
    {"cache_control", KEY_STRING, FIELD(cache_control), 0, 0, "off", "VALUE|off",
     "Cache-Control header of file responses"},
    {"file_cache", KEY_BOOL, FIELD(file_cache), 0, 0, "on", "on|off",
     "keep small files in memory (kept fresh with inotify)"},
    {"file_cache_max_file", KEY_SIZE, FIELD(file_cache_max_file), 1, GIB, "64k", "SIZE",
     "largest file the cache keeps"},
    {"file_cache_size", KEY_SIZE, FIELD(file_cache_size), 1, GIB, "32m", "SIZE",
     "memory for all cached files"},
    /* Limits and timeouts: what one client may cost. */
    {"max_connections", KEY_UINT, FIELD(max_connections), 1, 1000000, "4096", "N",
     "connections served at once; more are answered 503 and closed"},
    {"max_url", KEY_SIZE, FIELD(max_url), 256, 1ULL << 20, "8k", "SIZE",
     "longest request-target (414 beyond)"},
    {"max_header_size", KEY_SIZE, FIELD(max_header_size), 1024, 1ULL << 20, "16k", "SIZE",
     "largest request header block (431 beyond)"},
    {"max_headers", KEY_UINT, FIELD(max_headers), 1, 10000, "100", "N",
     "most header lines in a request (431 beyond)"},
    {"max_body", KEY_SIZE, FIELD(max_body), 1, GIB, "16m", "SIZE",
     "largest request body on any route (413, before reading it)"},
    {"header_timeout", KEY_MS, FIELD(header_timeout), 1, 3600000, "10s", "TIME",
     "time to send a request head, from its first byte (408 beyond)"},
    {"body_timeout", KEY_MS, FIELD(body_timeout), 1, 3600000, "10s", "TIME",
     "longest silence while a request body is read (408 beyond)"},
    {"keepalive_timeout", KEY_MS, FIELD(keepalive_timeout), 1, 3600000, "5s", "TIME",
     "idle time allowed between requests on a connection"},
    {"send_buffer", KEY_SIZE, FIELD(send_buffer), 4096, 64 * MIB, "256k", "SIZE|off",
     "socket send buffer per connection (SO_SNDBUF): bounds the bytes one write hands the "
     "kernel, so one big piece cannot hold the loop"},
    {"max_buffer_memory", KEY_SIZE, FIELD(max_buffer_memory), 1, 1ULL << 40, "256m", "SIZE",
     "request and response buffers held at once per worker: beyond it work waits its turn"},
    {"send_timeout", KEY_MS, FIELD(send_timeout), 1, 3600000, "30s", "TIME",
     "longest time a client may take no bytes of its response"},
};

#define NKEYS (sizeof keys / sizeof keys[0])

/* The keys a reload (SIGHUP) cannot change: the socket, the directory whose
 * realpath bounds every request, and the sizes of the pool and of the set of
 * processes, all fixed when the server starts. */
static const char *const restart_keys[] = {"listen", "root", "threads", "workers"};

static bool needs_restart(const struct key *k)
{
    for (size_t i = 0; i < sizeof restart_keys / sizeof restart_keys[0]; i++) {
        if (strcmp(k->name, restart_keys[i]) == 0)
            return true;
    }
    return false;
}

static void fail(char err[CONFIG_ERR_MAX], const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void fail(char err[CONFIG_ERR_MAX], const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, CONFIG_ERR_MAX, fmt, ap);
    va_end(ap);
}

static const struct key *find_key(const char *name, size_t len)
{
    for (size_t i = 0; i < NKEYS; i++) {
        if (strlen(keys[i].name) == len && strncmp(keys[i].name, name, len) == 0)
            return &keys[i];
    }
    return NULL;
}

int config_parse_size(const char *text, bool allow_whole, size_t *out)
{
    if (allow_whole && strcmp(text, "whole") == 0) {
        *out = CONFIG_WHOLE;
        return 0;
    }
    if (!isdigit((unsigned char)text[0]))
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long long n = strtoull(text, &end, 10);
    if (errno == ERANGE)
        return -ERANGE;
    unsigned shift = 0;
    if (*end == 'k' || *end == 'K')
        shift = 10;
    else if (*end == 'm' || *end == 'M')
        shift = 20;
    if (shift != 0)
        end++;
    if (*end != '\0' || n == 0)
        return -EINVAL;
    if (n > (SIZE_MAX >> 1) >> shift)
        return -ERANGE;
    *out = (size_t)n << shift;
    return 0;
}

void config_format_size(size_t size, char *buf, size_t len)
{
    if (size == CONFIG_WHOLE)
        snprintf(buf, len, "whole");
    else if (size == CONFIG_AUTO_SIZE)
        snprintf(buf, len, "auto");
    else if (size >= MIB && size % MIB == 0)
        snprintf(buf, len, "%zum", size >> 20);
    else if (size >= 1024 && size % 1024 == 0)
        snprintf(buf, len, "%zuk", size >> 10);
    else
        snprintf(buf, len, "%zu", size);
}

/* Parses "250ms", "250" (milliseconds too) or "10s" into *MS. */
static int parse_ms(const char *text, size_t *ms)
{
    if (!isdigit((unsigned char)text[0]))
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long long n = strtoull(text, &end, 10);
    unsigned long long scale = strcmp(end, "s") == 0 ? 1000 : 1;
    if (errno == ERANGE || n > 1000000000)
        return -ERANGE;
    if (*end != '\0' && strcmp(end, "ms") != 0 && strcmp(end, "s") != 0)
        return -EINVAL;
    *ms = (size_t)(n * scale);
    return 0;
}

/* "off", or "LATENCY[,RATE]": a time (ms or s) and a size per second. */
static int set_disk(const struct key *k, struct disk_emulation *d, const char *text,
                    char err[CONFIG_ERR_MAX])
{
    if (strcmp(text, "off") == 0) {
        *d = (struct disk_emulation){0};
        return 0;
    }
    char latency[32];
    const char *comma = strchr(text, ',');
    size_t len = comma ? (size_t)(comma - text) : strlen(text);
    size_t ms = 0, rate = 0;
    int rc = len < sizeof latency ? 0 : -EINVAL;
    if (rc == 0) {
        memcpy(latency, text, len);
        latency[len] = '\0';
        rc = parse_ms(latency, &ms);
    }
    if (rc == 0 && (ms > k->max || (comma == NULL && ms == 0)))
        rc = -ERANGE;
    if (rc == 0 && comma != NULL)
        rc = config_parse_size(comma + 1, false, &rate);
    if (rc != 0) {
        fail(err, "%s: '%s' is not off or LATENCY[,RATE] (a time up to %llus, a size per second)",
             k->name, text, k->max / 1000);
        return -1;
    }
    *d = (struct disk_emulation){.latency_ms = (unsigned)ms, .bytes_per_s = rate};
    return 0;
}

static int set_key(struct config *cfg, const struct key *k, const char *text,
                   char err[CONFIG_ERR_MAX])
{
    char *field = (char *)cfg + k->offset;
    size_t size;
    int rc;

    switch (k->type) {
    case KEY_STRING:
        if (text[0] == '\0' || strlen(text) >= k->field_size) {
            fail(err, "%s: value must be 1 to %zu characters", k->name, k->field_size - 1);
            return -1;
        }
        memcpy(field, text, strlen(text) + 1);
        return 0;
    case KEY_UINT_AUTO:
        if (strcmp(text, "auto") == 0) {
            *(unsigned *)(void *)field = CONFIG_AUTO;
            return 0;
        }
        /* fall through */
    case KEY_UINT: {
        char *end;
        errno = 0;
        unsigned long long n = isdigit((unsigned char)text[0]) ? strtoull(text, &end, 10) : 0;
        if (!isdigit((unsigned char)text[0]) || *end != '\0' || errno != 0 || n < k->min ||
            n > k->max) {
            fail(err, "%s: '%s' is not a whole number from %llu to %llu%s", k->name, text, k->min,
                 k->max, k->type == KEY_UINT_AUTO ? ", or auto" : "");
            return -1;
        }
        *(unsigned *)(void *)field = (unsigned)n;
        return 0;
    }
    case KEY_BOOL:
        if (strcmp(text, "on") != 0 && strcmp(text, "off") != 0) {
            fail(err, "%s: '%s' is neither on nor off", k->name, text);
            return -1;
        }
        *(bool *)(void *)field = strcmp(text, "on") == 0;
        return 0;
    case KEY_CHOICE: {
        unsigned index = 0;
        size_t len = strlen(text);
        for (const char *w = k->arg; *w != '\0'; index++) {
            size_t wlen = strcspn(w, "|");
            if (wlen == len && len > 0 && strncmp(w, text, len) == 0) {
                *(unsigned *)(void *)field = index;
                return 0;
            }
            w += wlen + (w[wlen] == '|');
        }
        fail(err, "%s: '%s' is not one of %s", k->name, text, k->arg);
        return -1;
    }
    case KEY_MS:
        rc = parse_ms(text, &size);
        if (rc == 0 && (size < k->min || size > k->max))
            rc = -ERANGE;
        if (rc != 0) {
            fail(err, "%s: '%s' is not a time from %llums to %llus (ms, or s for seconds)", k->name,
                 text, k->min, k->max / 1000);
            return -1;
        }
        *(unsigned *)(void *)field = (unsigned)size;
        return 0;
    case KEY_SIZE:
    case KEY_PARTITION:
    case KEY_PARTITION_AUTO:
        if (k->type == KEY_PARTITION_AUTO && strcmp(text, "auto") == 0) {
            *(size_t *)(void *)field = CONFIG_AUTO_SIZE;
            return 0;
        }
        /* A size key whose placeholder offers "off" stores 0 for it. */
        if (k->type == KEY_SIZE && strcmp(text, "off") == 0 && strstr(k->arg, "|off") != NULL) {
            *(size_t *)(void *)field = 0;
            return 0;
        }
        rc = config_parse_size(text, k->type != KEY_SIZE, &size);
        if (rc == 0 && size != CONFIG_WHOLE && (size < k->min || size > k->max))
            rc = -ERANGE;
        if (rc != 0) {
            fail(err, "%s: '%s' is not a size from %llu to %llum (k and m suffixes%s)", k->name,
                 text, k->min, k->max >> 20,
                 k->type == KEY_PARTITION        ? ", or whole"
                 : k->type == KEY_PARTITION_AUTO ? ", whole or auto"
                                                 : "");
            return -1;
        }
        *(size_t *)(void *)field = size;
        return 0;
    case KEY_DISK:
        return set_disk(k, (struct disk_emulation *)(void *)field, text, err);
    }
    abort();
}

int config_get(const struct config *cfg, const char *key, char *buf, size_t len)
{
    const struct key *k = find_key(key, strlen(key));
    if (k == NULL)
        return -1;
    const char *field = (const char *)cfg + k->offset;
    bool is_unsigned = k->type == KEY_UINT || k->type == KEY_UINT_AUTO || k->type == KEY_MS ||
                       k->type == KEY_CHOICE;
    unsigned u = is_unsigned ? *(const unsigned *)(const void *)field : 0;
    switch (k->type) {
    case KEY_STRING:
        snprintf(buf, len, "%s", field);
        break;
    case KEY_UINT_AUTO:
    case KEY_UINT:
        if (k->type == KEY_UINT_AUTO && u == CONFIG_AUTO)
            snprintf(buf, len, "auto");
        else
            snprintf(buf, len, "%u", u);
        break;
    case KEY_SIZE:
    case KEY_PARTITION:
    case KEY_PARTITION_AUTO:
        if (*(const size_t *)(const void *)field == 0)
            snprintf(buf, len, "off");
        else
            config_format_size(*(const size_t *)(const void *)field, buf, len);
        break;
    case KEY_BOOL:
        snprintf(buf, len, "%s", *(const bool *)field ? "on" : "off");
        break;
    case KEY_MS:
        snprintf(buf, len, "%ums", u);
        break;
    case KEY_CHOICE: {
        const char *w = k->arg;
        for (unsigned i = 0; i < u && strchr(w, '|') != NULL; i++)
            w = strchr(w, '|') + 1;
        snprintf(buf, len, "%.*s", (int)strcspn(w, "|"), w);
        break;
    }
    case KEY_DISK: {
        const struct disk_emulation *d = (const struct disk_emulation *)(const void *)field;
        char rate[32] = "";
        if (d->bytes_per_s > 0)
            config_format_size(d->bytes_per_s, rate, sizeof rate);
        if (d->latency_ms == 0 && d->bytes_per_s == 0)
            snprintf(buf, len, "off");
        else
            snprintf(buf, len, "%ums%s%s", d->latency_ms, rate[0] ? "," : "", rate);
        break;
    }
    }
    return 0;
}

void config_defaults(struct config *cfg)
{
    char err[CONFIG_ERR_MAX];
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < NKEYS; i++) {
        if (set_key(cfg, &keys[i], keys[i].fallback, err) != 0)
            abort(); /* a bad default is a bug in the table */
    }
}

int config_set(struct config *cfg, const char *key, const char *text, char err[CONFIG_ERR_MAX])
{
    const struct key *k = find_key(key, strlen(key));
    if (k == NULL) {
        fail(err, "unknown key '%s'", key);
        return -1;
    }
    return set_key(cfg, k, text, err);
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1]))
        *--end = '\0';
    return s;
}

int config_load_file(struct config *cfg, const char *path, char err[CONFIG_ERR_MAX])
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        fail(err, "%s: %s", path, strerror(errno));
        return -1;
    }
    char line[4096];
    char msg[CONFIG_ERR_MAX];
    int lineno = 0;
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f) != NULL) {
        lineno++;
        if (strchr(line, '\n') == NULL && !feof(f)) {
            fail(err, "%s:%d: line too long", path, lineno);
            rc = -1;
            break;
        }
        char *hash = strchr(line, '#');
        if (hash != NULL)
            *hash = '\0';
        char *s = trim(line);
        if (*s == '\0')
            continue;
        char *eq = strchr(s, '=');
        if (eq == NULL) {
            fail(err, "%s:%d: expected 'key = value'", path, lineno);
            rc = -1;
            break;
        }
        *eq = '\0';
        if (config_set(cfg, trim(s), trim(eq + 1), msg) != 0) {
            fail(err, "%s:%d: %s", path, lineno, msg);
            rc = -1;
        }
    }
    if (rc == 0 && ferror(f)) {
        fail(err, "%s: read error", path);
        rc = -1;
    }
    fclose(f);
    return rc;
}

static bool is_config_flag(const char *arg)
{
    return strcmp(arg, "-c") == 0 || strcmp(arg, "--config") == 0;
}

const char *config_cli_file(int argc, char **argv)
{
    const char *file = NULL;
    for (int i = 1; i < argc; i++) {
        if (is_config_flag(argv[i]) && i + 1 < argc)
            file = argv[++i];
        else if (strncmp(argv[i], "--config=", 9) == 0)
            file = argv[i] + 9;
    }
    return file;
}

/* Maps "--gzip-partition" to its table row; LEN excludes any "=value". */
static const struct key *find_flag(const char *flag, size_t len)
{
    char name[64];
    if (len >= sizeof name)
        return NULL;
    for (size_t i = 0; i < len; i++)
        name[i] = flag[i] == '-' ? '_' : flag[i];
    return find_key(name, len);
}

int config_apply_cli(struct config *cfg, int argc, char **argv, enum config_action *action,
                     char err[CONFIG_ERR_MAX])
{
    char msg[CONFIG_ERR_MAX];
    bool have_dir = false;
    *action = CONFIG_RUN;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            *action = CONFIG_HELP;
            return 0;
        }
        if (strcmp(arg, "-V") == 0 || strcmp(arg, "--version") == 0) {
            *action = CONFIG_VERSION;
            return 0;
        }
        if (is_config_flag(arg)) {
            if (++i == argc) {
                fail(err, "%s needs a file", arg);
                return -1;
            }
            continue;
        }
        if (strncmp(arg, "--config=", 9) == 0)
            continue;
        if (arg[0] != '-' || arg[1] == '\0') {
            if (have_dir) {
                fail(err, "more than one directory given: '%s'", arg);
                return -1;
            }
            have_dir = true;
            if (config_set(cfg, "root", arg, msg) != 0) {
                fail(err, "%s", msg);
                return -1;
            }
            continue;
        }
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        const struct key *k = strncmp(arg, "--", 2) == 0 ? find_flag(arg + 2, len - 2) : NULL;
        if (k == NULL) {
            fail(err, "unknown option '%.*s' (see --help)", (int)len, arg);
            return -1;
        }
        const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (value == NULL) {
            fail(err, "%s needs a value", arg);
            return -1;
        }
        if (set_key(cfg, k, value, msg) != 0) {
            fail(err, "--%s", msg);
            return -1;
        }
    }
    return 0;
}

void config_usage(FILE *out, const char *argv0)
{
    fprintf(
        out,
        "usage: %s [OPTIONS] [DIR]\n"
        "Serves DIR (or the configured root) over HTTP/1.1, reading files through the\n"
        "libuv threadpool in partitions.\n\n"
        "  -c, --config FILE          configuration file (default conf/unclog.conf if present)\n",
        argv0);
    for (size_t i = 0; i < NKEYS; i++) {
        char flag[64];
        snprintf(flag, sizeof flag, "--%s %s", keys[i].name, keys[i].arg);
        for (char *p = flag + 2; *p != ' '; p++) {
            if (*p == '_')
                *p = '-';
        }
        fprintf(out, "      %-28s %s (default %s%s)\n", flag, keys[i].help, keys[i].fallback,
                needs_restart(&keys[i]) ? "; a reload keeps it" : "");
    }
    fprintf(out, "  -h, --help                 this text\n"
                 "  -V, --version              print the version\n");
}

int config_load(struct config *cfg, int argc, char **argv, enum config_action *action,
                char err[CONFIG_ERR_MAX])
{
    char msg[CONFIG_ERR_MAX];
    config_defaults(cfg);
    const char *file = config_cli_file(argc, argv);
    if (file == NULL && access(CONFIG_DEFAULT_FILE, R_OK) == 0)
        file = CONFIG_DEFAULT_FILE;
    if (file != NULL && config_load_file(cfg, file, err) != 0)
        return -1;
    if (config_apply_cli(cfg, argc, argv, action, msg) != 0) {
        fail(err, "unclog: %s", msg);
        return -1;
    }
    return 0;
}

/* Whether key K has the same value in A and B. */
static bool same_value(const struct key *k, const struct config *a, const struct config *b)
{
    const char *fa = (const char *)a + k->offset, *fb = (const char *)b + k->offset;
    if (k->type == KEY_STRING)
        return strcmp(fa, fb) == 0;
    return memcmp(fa, fb, k->field_size) == 0;
}

void config_keep_restart_keys(struct config *next, const struct config *cur, char *changed,
                              size_t len)
{
    size_t used = 0;
    changed[0] = '\0';
    for (size_t i = 0; i < NKEYS; i++) {
        const struct key *k = &keys[i];
        if (!needs_restart(k) || same_value(k, next, cur))
            continue;
        memcpy((char *)next + k->offset, (const char *)cur + k->offset, k->field_size);
        int n = snprintf(changed + used, len - used, "%s%s", used ? " " : "", k->name);
        if (n > 0 && (size_t)n < len - used)
            used += (size_t)n;
    }
}
