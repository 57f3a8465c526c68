#include "server/base/config.h"
#include "server/base/log.h"
#include "server/base/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <uv.h>

/* A key with the table it belongs to: where its field is. */
struct key_ref {
    const struct config_table *table;
    const struct config_key *key;
};

static char *block_of(struct config *cfg, const struct config_table *t)
{
    for (size_t i = 0; cfg->tables[i] != NULL; i++) {
        if (cfg->tables[i] == t)
            return t->block_size == 0 ? (char *)cfg : (char *)cfg->blocks + cfg->block_offset[i];
    }
    return NULL;
}

const void *config_block(const struct config *cfg, const struct config_table *table)
{
    return block_of((struct config *)cfg, table);
}

static void *field_of(const struct config *cfg, struct key_ref r)
{
    return block_of((struct config *)cfg, r.table) + r.key->offset;
}

static struct key_ref ref_at(const struct config *cfg, size_t index)
{
    for (size_t i = 0; cfg->tables[i] != NULL; i++) {
        if (index < cfg->tables[i]->nkeys)
            return (struct key_ref){cfg->tables[i], &cfg->tables[i]->keys[index]};
        index -= cfg->tables[i]->nkeys;
    }
    return (struct key_ref){NULL, NULL};
}

const struct config_key *config_key_at(const struct config *cfg, size_t i)
{
    return ref_at(cfg, i).key;
}

static struct key_ref find_ref(const struct config *cfg, const char *name, size_t len)
{
    for (size_t i = 0;; i++) {
        struct key_ref r = ref_at(cfg, i);
        if (r.key == NULL || (strlen(r.key->name) == len && strncmp(r.key->name, name, len) == 0))
            return r;
    }
}

const struct config_key *config_find(const struct config *cfg, const char *name)
{
    return find_ref(cfg, name, strlen(name)).key;
}

/* The edit distance (Levenshtein) between A and B, or more than MAX. */
static size_t distance(const char *a, const char *b, size_t max)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t row[64];
    if (la >= ARRAY_SIZE(row) || lb >= ARRAY_SIZE(row))
        return max + 1;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *config_near_key(const struct config *cfg, const char *name)
{
    /* A typo of a third of the name or more is another word. */
    size_t max = strlen(name) / 3 < 2 ? strlen(name) / 3 : 2;
    const char *near = NULL;
    for (size_t i = 0;; i++) {
        const struct config_key *k = ref_at(cfg, i).key;
        if (k == NULL)
            return near;
        size_t d = distance(name, k->name, max);
        if (d <= max) {
            near = k->name;
            max = d == 0 ? 0 : d - 1; /* only a nearer one replaces it */
        }
    }
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

/* The word K's empty list is spelled with: its one choice, else "loopback". */
static const char *addrs_none(const struct config_key *k)
{
    return k->choices != NULL ? k->choices[0].name : "loopback";
}

/* NONE (no prefix), or up to CONFIG_ADDRS_MAX address prefixes separated
 * by commas (spaces around each allowed): "192.0.2.0/24,2001:db8::7". */
static int set_addrs(struct config_addrs *a, const char *text, const char *none,
                     char err[CONFIG_ERR_MAX])
{
    struct config_addrs out = {0};
    if (strcmp(text, none) == 0) {
        *a = out;
        return 0;
    }
    for (const char *p = text;; p++) {
        size_t len = strcspn(p, ",");
        const char *item = skip_space(p), *end = p + len;
        while (end > item && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        if (out.n == CONFIG_ADDRS_MAX) {
            fail(err, "'%s': at most %d prefixes", text, CONFIG_ADDRS_MAX);
            return -1;
        }
        if (addr_prefix_parse(item, (size_t)(end - item), &out.prefix[out.n++]) != 0) {
            fail(err,
                 "'%.*s' is not an address or ADDRESS/LENGTH (no bits set past the length), "
                 "nor %s",
                 (int)(end - item), item, none);
            return -1;
        }
        p += len;
        if (*p == '\0')
            break;
    }
    *a = out;
    return 0;
}

static void get_addrs(const struct config_addrs *a, const char *none, char *buf, size_t len)
{
    struct buf b;
    buf_init_fixed(&b, buf, len);
    buf_printf(&b, "%s", a->n == 0 ? none : "");
    for (unsigned i = 0; i < a->n; i++) {
        char text[64];
        addr_prefix_format(&a->prefix[i], text, sizeof text);
        buf_printf(&b, "%s%s", i > 0 ? "," : "", text);
    }
}

/* "V4,V6": two prefix lengths, IPv4's (0 to 32) then IPv6's (0 to 128). */
static int set_prefix(const struct config_key *k, struct config_prefix *p, const char *text,
                      char err[CONFIG_ERR_MAX])
{
    char *end = NULL;
    unsigned long v4 = 33, v6 = 129;
    if (isdigit((unsigned char)text[0]))
        v4 = strtoul(text, &end, 10);
    if (end != NULL && *end == ',' && isdigit((unsigned char)end[1]))
        v6 = strtoul(end + 1, &end, 10);
    if (end == NULL || *end != '\0' || v4 > 32 || v6 > 128) {
        fail(err, "'%s' is not V4,V6 (prefix lengths: 0 to 32 for IPv4, 0 to 128 for IPv6)", text);
        return -1;
    }
    *p = (struct config_prefix){.v4 = (unsigned)v4, .v6 = (unsigned)v6};
    return 0;
}

/* "off", or "LATENCY[,RATE]": a time (ms or s) and a size per second. */
static int set_disk(const struct config_key *k, struct disk_emulation *d, const char *text,
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
        fail(err, "'%s' is not off or LATENCY[,RATE] (a time up to %llus, a size per second)", text,
             k->max / 1000);
        return -1;
    }
    *d = (struct disk_emulation){.latency_ms = (unsigned)ms, .bytes_per_s = rate};
    return 0;
}

int config_parse_addr(const char *text, struct sockaddr_storage *addr)
{
    char host[64];
    const char *colon = strrchr(text, ':');
    if (colon == NULL)
        return -EINVAL;
    size_t digits = strspn(colon + 1, "0123456789");
    if (digits == 0 || digits > 5 || colon[1 + digits] != '\0')
        return -EINVAL;
    int port = atoi(colon + 1);
    size_t len = (size_t)(colon - text);
    /* An IPv6 address has colons of its own: only in brackets. */
    bool bracketed = len >= 2 && text[0] == '[' && colon[-1] == ']';
    if (bracketed) {
        text++;
        len -= 2;
    }
    if (port > 65535 || len == 0 || len >= sizeof host)
        return -EINVAL;
    memcpy(host, text, len);
    host[len] = '\0';
    memset(addr, 0, sizeof *addr);
    if (bracketed)
        return uv_ip6_addr(host, port, (struct sockaddr_in6 *)addr) == 0 ? 0 : -EINVAL;
    if (strcasecmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    return uv_ip4_addr(host, port, (struct sockaddr_in *)addr) == 0 ? 0 : -EINVAL;
}

/* Sets FIELD, the field of key K, from TEXT; a message without the key's
 * name in ERR when TEXT is not a value of K. */
static int set_field(char *field, const struct config_key *k, const char *text,
                     char err[CONFIG_ERR_MAX])
{
    size_t size;
    int rc;

    switch (k->type) {
    case CONFIG_STRING:
        if (text[0] == '\0' || strlen(text) >= k->field_size) {
            fail(err, "value must be 1 to %zu characters", k->field_size - 1);
            return -1;
        }
        memcpy(field, text, strlen(text) + 1);
        return 0;
    case CONFIG_UINT_AUTO:
        if (strcmp(text, "auto") == 0) {
            *(unsigned *)(void *)field = CONFIG_AUTO;
            return 0;
        }
        /* fall through */
    case CONFIG_UINT: {
        char *end;
        errno = 0;
        unsigned long long n = isdigit((unsigned char)text[0]) ? strtoull(text, &end, 10) : 0;
        if (!isdigit((unsigned char)text[0]) || *end != '\0' || errno != 0 || n < k->min ||
            n > k->max) {
            fail(err, "'%s' is not a whole number from %llu to %llu%s", text, k->min, k->max,
                 k->type == CONFIG_UINT_AUTO ? ", or auto" : "");
            return -1;
        }
        *(unsigned *)(void *)field = (unsigned)n;
        return 0;
    }
    case CONFIG_BOOL:
        /* The spellings other servers' files use too. */
        if (strcmp(text, "on") == 0 || strcmp(text, "yes") == 0 || strcmp(text, "true") == 0) {
            *(bool *)(void *)field = true;
            return 0;
        }
        if (strcmp(text, "off") == 0 || strcmp(text, "no") == 0 || strcmp(text, "false") == 0) {
            *(bool *)(void *)field = false;
            return 0;
        }
        fail(err, "'%s' is neither on nor off (nor yes/no, true/false)", text);
        return -1;
    case CONFIG_PREFIX:
        return set_prefix(k, (struct config_prefix *)(void *)field, text, err);
    case CONFIG_ADDRS:
        return set_addrs((struct config_addrs *)(void *)field, text, addrs_none(k), err);
    case CONFIG_CHOICE:
        for (const struct config_choice *ch = k->choices; ch->name != NULL; ch++) {
            if (strcmp(ch->name, text) == 0) {
                *(unsigned *)(void *)field = ch->value;
                return 0;
            }
        }
        fail(err, "'%s' is not one of %s", text, k->arg);
        return -1;
    case CONFIG_MS:
        rc = parse_ms(text, &size);
        if (rc == 0 && (size < k->min || size > k->max))
            rc = -ERANGE;
        if (rc != 0) {
            fail(err, "'%s' is not a time from %llums to %llus (ms, or s for seconds)", text,
                 k->min, k->max / 1000);
            return -1;
        }
        *(unsigned *)(void *)field = (unsigned)size;
        return 0;
    case CONFIG_SIZE:
    case CONFIG_PARTITION:
    case CONFIG_PARTITION_AUTO:
        if (k->type == CONFIG_PARTITION_AUTO && strcmp(text, "auto") == 0) {
            *(size_t *)(void *)field = CONFIG_AUTO_SIZE;
            return 0;
        }
        /* A size key whose placeholder offers "off" stores 0 for it. */
        if (k->type == CONFIG_SIZE && strcmp(text, "off") == 0 && strstr(k->arg, "|off") != NULL) {
            *(size_t *)(void *)field = 0;
            return 0;
        }
        rc = config_parse_size(text, k->type != CONFIG_SIZE, &size);
        if (rc == 0 && size != CONFIG_WHOLE && (size < k->min || size > k->max))
            rc = -ERANGE;
        if (rc != 0) {
            fail(err, "'%s' is not a size from %llu to %llum (k and m suffixes%s)", text, k->min,
                 k->max >> 20,
                 k->type == CONFIG_PARTITION        ? ", or whole"
                 : k->type == CONFIG_PARTITION_AUTO ? ", whole or auto"
                                                    : "");
            return -1;
        }
        *(size_t *)(void *)field = size;
        return 0;
    case CONFIG_DISK:
        return set_disk(k, (struct disk_emulation *)(void *)field, text, err);
    case CONFIG_ADDR: {
        struct sockaddr_storage addr;
        if (strlen(text) >= k->field_size || config_parse_addr(text, &addr) != 0) {
            fail(err,
                 "'%s' is not ADDR:PORT, [ADDR6]:PORT or localhost:PORT (IP addresses, no host "
                 "names; localhost is 127.0.0.1; port 0 to 65535)",
                 text);
            return -1;
        }
        memcpy(field, text, strlen(text) + 1);
        return 0;
    }
    }
    abort();
}

int config_number(const struct config *cfg, const char *key, uint64_t *out)
{
    struct key_ref r = find_ref(cfg, key, strlen(key));
    if (r.key == NULL)
        return -1;
    const void *field = field_of(cfg, r);
    switch (r.key->type) {
    case CONFIG_UINT:
    case CONFIG_UINT_AUTO:
    case CONFIG_MS:
    case CONFIG_CHOICE:
        *out = *(const unsigned *)field;
        return 0;
    case CONFIG_SIZE:
    case CONFIG_PARTITION:
    case CONFIG_PARTITION_AUTO:
        *out = *(const size_t *)field;
        return 0;
    case CONFIG_BOOL:
        *out = *(const bool *)field;
        return 0;
    case CONFIG_STRING:
    case CONFIG_ADDR:
    case CONFIG_PREFIX:
    case CONFIG_ADDRS:
    case CONFIG_DISK:
        return -1;
    }
    abort();
}

int config_get(const struct config *cfg, const char *key, char *buf, size_t len)
{
    struct key_ref r = find_ref(cfg, key, strlen(key));
    if (r.key == NULL)
        return -1;
    const struct config_key *k = r.key;
    const char *field = field_of(cfg, r);
    bool is_unsigned = k->type == CONFIG_UINT || k->type == CONFIG_UINT_AUTO ||
                       k->type == CONFIG_MS || k->type == CONFIG_CHOICE;
    unsigned u = is_unsigned ? *(const unsigned *)(const void *)field : 0;
    switch (k->type) {
    case CONFIG_STRING:
    case CONFIG_ADDR:
        snprintf(buf, len, "%s", field);
        break;
    case CONFIG_UINT_AUTO:
    case CONFIG_UINT:
        if (k->type == CONFIG_UINT_AUTO && u == CONFIG_AUTO)
            snprintf(buf, len, "auto");
        else
            snprintf(buf, len, "%u", u);
        break;
    case CONFIG_SIZE:
    case CONFIG_PARTITION:
    case CONFIG_PARTITION_AUTO:
        if (*(const size_t *)(const void *)field == 0)
            snprintf(buf, len, "off");
        else
            config_format_size(*(const size_t *)(const void *)field, buf, len);
        break;
    case CONFIG_BOOL:
        snprintf(buf, len, "%s", *(const bool *)field ? "on" : "off");
        break;
    case CONFIG_PREFIX: {
        const struct config_prefix *p = (const struct config_prefix *)(const void *)field;
        snprintf(buf, len, "%u,%u", p->v4, p->v6);
        break;
    }
    case CONFIG_ADDRS:
        get_addrs((const struct config_addrs *)(const void *)field, addrs_none(k), buf, len);
        break;
    case CONFIG_MS:
        snprintf(buf, len, "%ums", u);
        break;
    case CONFIG_CHOICE: {
        const struct config_choice *ch = k->choices;
        while (ch->name != NULL && ch->value != u)
            ch++;
        snprintf(buf, len, "%s", ch->name != NULL ? ch->name : "?");
        break;
    }
    case CONFIG_DISK: {
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

void config_defaults(struct config *cfg, const struct config_table *const *tables)
{
    char err[CONFIG_ERR_MAX];
    memset(cfg, 0, sizeof *cfg);
    cfg->tables = tables;
    size_t used = 0, nkeys = 0;
    for (size_t i = 0; tables[i] != NULL; i++) {
        size_t align = _Alignof(max_align_t);
        if (i >= CONFIG_TABLES_MAX || tables[i]->block_size > CONFIG_BLOCKS_SIZE - used)
            abort(); /* the tables outgrew struct config: raise the limits */
        cfg->block_offset[i] = used;
        used += (tables[i]->block_size + align - 1) / align * align;
        nkeys += tables[i]->nkeys;
    }
    if (nkeys > CONFIG_KEYS_MAX)
        abort();
    for (size_t i = 0;; i++) {
        struct key_ref r = ref_at(cfg, i);
        if (r.key == NULL)
            break;
        if (set_field(field_of(cfg, r), r.key, r.key->fallback, err) != 0)
            abort(); /* a bad default is a bug in the table */
    }
}

int config_set(struct config *cfg, const char *key, const char *text, char err[CONFIG_ERR_MAX])
{
    char msg[CONFIG_ERR_MAX];
    struct key_ref r = find_ref(cfg, key, strlen(key));
    if (r.key == NULL) {
        const char *near = config_near_key(cfg, key);
        if (near != NULL)
            fail(err, "unknown key '%s' (did you mean '%s'?)", key, near);
        else
            fail(err, "unknown key '%s'", key);
        return -1;
    }
    if (set_field(field_of(cfg, r), r.key, text, msg) != 0) {
        fail(err, "%s: %s", r.key->name, msg);
        return -1;
    }
    return 0;
}

int config_set_live(struct config *cfg, const char *key, const char *text, char err[CONFIG_ERR_MAX])
{
    const struct config_key *k = config_find(cfg, key);
    if (k != NULL && k->when != CONFIG_LIVE) {
        fail(err, "%.64s: %s", key,
             k->when == CONFIG_RELOAD ? "not live: it changes with a reload (SIGHUP)"
                                      : "not live: it changes with a restart");
        return -1;
    }
    return config_set(cfg, key, text, err);
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

/* The index of key NAME in CFG's tables, or -1. */
static long key_index(const struct config *cfg, const char *name)
{
    const struct config_key *k;
    for (size_t i = 0; (k = ref_at(cfg, i).key) != NULL; i++) {
        if (strcmp(k->name, name) == 0)
            return (long)i;
    }
    return -1;
}

/* Warns of KEY set again at LINE of PATH: the last line wins, which a
 * reader of the file may not expect. FIRST holds each key's first line. */
static void note_line(const struct config *cfg, int *first, const char *path, int line,
                      const char *key)
{
    long i = key_index(cfg, key);
    if (i < 0 || first == NULL)
        return;
    if (first[i] != 0)
        log_warn("%s:%d: %s set again (first at %s:%d); the last one wins", path, line, key, path,
                 first[i]);
    else
        first[i] = line;
}

int config_load_file(struct config *cfg, const char *path, char err[CONFIG_ERR_MAX])
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        fail(err, "%s: %s", path, strerror(errno));
        return -1;
    }
    size_t nkeys = 0;
    while (ref_at(cfg, nkeys).key != NULL)
        nkeys++;
    int *first = calloc(nkeys ? nkeys : 1, sizeof *first); /* no warnings without it */
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
        char *key = trim(s);
        if (config_set(cfg, key, trim(eq + 1), msg) != 0) {
            fail(err, "%s:%d: %s", path, lineno, msg);
            rc = -1;
        } else {
            note_line(cfg, first, path, lineno, key);
        }
    }
    free(first);
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

/* Whether ARG is an option rather than the value of the flag before it:
 * anything that starts with "--", or one of the short options. So a flag
 * left without its value ("--root --listing on") is refused instead of
 * taking the next option as its value; a value that really starts with
 * "-" is written after '=' ("--root=-dir"). A lone "-" (the access log's
 * standard output) is a value. */
static bool is_option(const char *arg)
{
    static const char *const shorts[] = {"-c", "-h", "-V"};
    if (strncmp(arg, "--", 2) == 0)
        return true;
    for (size_t i = 0; i < ARRAY_SIZE(shorts); i++) {
        if (strcmp(arg, shorts[i]) == 0)
            return true;
    }
    return false;
}

/* The value that follows the flag at ARGV[I], or NULL when the flag is
 * last or an option follows it. */
static const char *next_value(int argc, char **argv, int i)
{
    return i + 1 < argc && !is_option(argv[i + 1]) ? argv[i + 1] : NULL;
}

/* Puts in ERR why FLAG (LEN bytes, as typed, at ARGV[I]) has no WHAT: it is
 * last, or an option follows it. */
static void fail_no_value(char err[CONFIG_ERR_MAX], const char *flag, int len, const char *what,
                          int argc, char **argv, int i)
{
    if (i + 1 == argc)
        fail(err, "%.*s: needs a %s", len, flag, what);
    else if (strcmp(what, "value") == 0)
        fail(err,
             "%.*s: needs a value, not the option %s (a value that starts with - goes after "
             "'=': %.*s=VALUE)",
             len, flag, argv[i + 1], len, flag);
    else
        fail(err, "%.*s: needs a %s, not the option %s", len, flag, what, argv[i + 1]);
}

const char *config_cli_file(int argc, char **argv)
{
    const char *file = NULL;
    for (int i = 1; i < argc; i++) {
        if (is_config_flag(argv[i]) && next_value(argc, argv, i) != NULL)
            file = argv[++i];
        else if (strncmp(argv[i], "--config=", 9) == 0)
            file = argv[i] + 9;
    }
    return file;
}

/* Maps "--gzip-partition" to its table row; LEN excludes any "=value". */
static struct key_ref find_flag(const struct config *cfg, const char *flag, size_t len)
{
    char name[64];
    if (len >= sizeof name)
        return (struct key_ref){NULL, NULL};
    for (size_t i = 0; i < len; i++)
        name[i] = flag[i] == '-' ? '_' : flag[i];
    return find_ref(cfg, name, len);
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
        if (strcmp(arg, "--routes") == 0 || strcmp(arg, "--job-classes") == 0) {
            *action = arg[2] == 'r' ? CONFIG_ROUTES : CONFIG_JOB_CLASSES;
            return 0;
        }
        if (strcmp(arg, "--keys") == 0) {
            *action = CONFIG_KEYS;
            return 0;
        }
        if (is_config_flag(arg)) {
            if (next_value(argc, argv, i) == NULL) {
                fail_no_value(err, arg, (int)strlen(arg), "file", argc, argv, i);
                return -1;
            }
            i++;
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
                fail(err, "%s (the directory to serve)", msg);
                return -1;
            }
            continue;
        }
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        struct key_ref r = strncmp(arg, "--", 2) == 0 ? find_flag(cfg, arg + 2, len - 2)
                                                      : (struct key_ref){NULL, NULL};
        if (r.key == NULL) {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(len > 2 ? len - 2 : 0), arg + 2);
            for (char *c = name; *c != '\0'; c++)
                *c = *c == '-' ? '_' : *c;
            const char *near = len > 2 ? config_near_key(cfg, name) : NULL;
            char flag[64];
            snprintf(flag, sizeof flag, "%s", near ? near : "");
            for (char *c = flag; *c != '\0'; c++)
                *c = *c == '_' ? '-' : *c;
            if (near != NULL)
                fail(err, "unknown option '%.*s' (did you mean --%s?)", (int)len, arg, flag);
            else
                fail(err, "unknown option '%.*s' (see --help)", (int)len, arg);
            return -1;
        }
        /* Errors name the flag as it was typed: --gzip-partition, or
         * --gzip_partition, which is accepted too. */
        const char *value = eq ? eq + 1 : next_value(argc, argv, i);
        if (value == NULL) {
            fail_no_value(err, arg, (int)len, "value", argc, argv, i);
            return -1;
        }
        if (eq == NULL)
            i++;
        if (set_field(field_of(cfg, r), r.key, value, msg) != 0) {
            fail(err, "%.*s: %s", (int)len, arg, msg);
            return -1;
        }
    }
    return 0;
}

/* What --help (and so the man page) says of how a running server takes a
 * new value. */
static const char *when_text(enum config_when when)
{
    switch (when) {
    case CONFIG_RESTART:
        return "; restart only: a reload keeps it";
    case CONFIG_RELOAD:
        return "";
    case CONFIG_LIVE:
        return "; live: POST /settings";
    }
    abort();
}

void config_print_keys(const struct config *cfg, FILE *out)
{
    static const char *const when[] = {
        [CONFIG_RESTART] = "restart", [CONFIG_RELOAD] = "reload", [CONFIG_LIVE] = "live"};
    const struct config_key *k;
    for (size_t i = 0; (k = config_key_at(cfg, i)) != NULL; i++)
        fprintf(out, "%s\t%s\t%s\n", k->name, k->fallback, when[k->when]);
}

/* The head line of a key's --help entry: "      --gzip-partition SIZE|whole". */
static void key_spec(const struct config_key *k, char *buf, size_t len)
{
    snprintf(buf, len, "      --%s %s", k->name, k->arg);
    for (char *p = buf + 8; *p != ' ' && *p != '\0'; p++) {
        if (*p == '_')
            *p = '-';
    }
}

#define USAGE_WIDTH  80 /* a terminal's columns: no line of --help is wider */
#define USAGE_INDENT 10 /* where a description's lines start */

/* Writes TEXT to OUT in lines of at most USAGE_WIDTH columns, the first
 * indented by FIRST, the others by REST, broken at spaces (a word longer
 * than a line stands alone on its own). */
static void wrap(FILE *out, const char *text, int first, int rest)
{
    int indent = first;
    while (*text != '\0') {
        int len = (int)strlen(text), cut = len, room = USAGE_WIDTH - indent;
        if (len > room) {
            cut = room;
            while (cut > 0 && text[cut] != ' ')
                cut--;
            if (cut == 0)
                cut = (int)strcspn(text, " ");
        }
        fprintf(out, "%*s%.*s\n", indent, "", cut, text);
        text += cut;
        while (*text == ' ')
            text++;
        indent = rest;
    }
}

/* One entry: HEAD on its line, then the description wrapped below it. */
static void entry(FILE *out, const char *head, const char *text)
{
    fprintf(out, "%s\n", head);
    wrap(out, text, USAGE_INDENT, USAGE_INDENT);
}

void config_usage(const struct config *cfg, FILE *out, const char *argv0)
{
    static const char *const last[][2] = {
        {"      --routes", "print every route (its path, then its methods), one a line, and exit"},
        {"      --job-classes", "print the threadpool's job classes, one a line, and exit"},
        {"      --keys", "print every configuration key, its default and when a change applies "
                         "(live, reload or restart), tab-separated, one a line, and exit"},
        {"  -h, --help", "print this text and exit"},
        {"  -V, --version", "print the version (with libuv's and zlib's) and exit"},
    };
    const struct config_key *k;
    char spec[128], text[2048];
    fprintf(out,
            "usage: %s [OPTIONS] [DIR]\n"
            "Serves DIR (or the configured root) over HTTP/1.1, reading files through the\n"
            "libuv threadpool in partitions. Every option with a value is also a key of\n"
            "the configuration file: --gzip-partition 64k is gzip_partition = 64k, or\n"
            "--gzip-partition=64k: the form for a value that starts with -.\n\n",
            argv0);
    entry(out, "  -c, --config FILE", "configuration file (default conf/unclog.conf if present)");
    for (size_t i = 0; (k = config_key_at(cfg, i)) != NULL; i++) {
        key_spec(k, spec, sizeof spec);
        snprintf(text, sizeof text, "%s (default %s%s)", k->help, k->fallback, when_text(k->when));
        entry(out, spec, text);
    }
    for (size_t i = 0; i < ARRAY_SIZE(last); i++)
        entry(out, last[i][0], last[i][1]);
    fputs("\nSignals:\n", out);
    wrap(out,
         "SIGTERM, SIGINT: stop gracefully (responses in progress get up to 5 s; a "
         "second signal closes everything at once).",
         2, 5);
    wrap(out,
         "SIGHUP: reload the configuration file (options still override it) and reopen "
         "the access log.",
         2, 5);
    fputs("\nExit status:\n", out);
    wrap(out, "0: stopped cleanly after a signal, or printed what was asked.", 2, 5);
    wrap(out,
         "1: could not start or run for a reason outside the configuration (the address "
         "in use, the root missing or not a directory, the log not writable).",
         2, 5);
    wrap(out, "2: a bad configuration file, key, value or option.", 2, 5);
}

int config_load(struct config *cfg, const struct config_table *const *tables, int argc, char **argv,
                enum config_action *action, char err[CONFIG_ERR_MAX])
{
    char msg[CONFIG_ERR_MAX];
    config_defaults(cfg, tables);
    const char *file = config_cli_file(argc, argv);
    if (file == NULL && access(CONFIG_DEFAULT_FILE, R_OK) == 0)
        file = CONFIG_DEFAULT_FILE;
    if (file != NULL && config_load_file(cfg, file, err) != 0)
        return -1;
    snprintf(cfg->file, sizeof cfg->file, "%s", file != NULL ? file : "");
    if (config_apply_cli(cfg, argc, argv, action, msg) != 0) {
        fail(err, "unclog: %s", msg);
        return -1;
    }
    return 0;
}

/* Whether key R has the same value in A and B. */
static bool same_value(struct key_ref r, const struct config *a, const struct config *b)
{
    const char *fa = field_of(a, r), *fb = field_of(b, r);
    if (r.key->type == CONFIG_STRING || r.key->type == CONFIG_ADDR)
        return strcmp(fa, fb) == 0;
    return memcmp(fa, fb, r.key->field_size) == 0;
}

void config_keep_restart_keys(struct config *next, const struct config *cur, char *changed,
                              size_t len)
{
    size_t used = 0;
    changed[0] = '\0';
    for (size_t i = 0;; i++) {
        struct key_ref r = ref_at(next, i);
        if (r.key == NULL)
            break;
        if (r.key->when != CONFIG_RESTART || same_value(r, next, cur))
            continue;
        memcpy(field_of(next, r), field_of(cur, r), r.key->field_size);
        int n = snprintf(changed + used, len - used, "%s%s", used ? " " : "", r.key->name);
        if (n > 0 && (size_t)n < len - used)
            used += (size_t)n;
    }
}
