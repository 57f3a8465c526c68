/* The configuration's engine: the keys' tables and their fields, a
 * config file, the command line, a reload's restart-only keys. Each
 * type's values are config_value.c's, --help and --keys config_help.c's. */
#include "server/base/config.h"
#include "server/base/config_internal.h"
#include "server/base/log.h"
#include "server/base/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    config__get_field(field_of(cfg, r), r.key, buf, len);
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
        if (config__set_field(field_of(cfg, r), r.key, r.key->fallback, err) != 0)
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
            config__fail(err, "unknown key '%s' (did you mean '%s'?)", key, near);
        else
            config__fail(err, "unknown key '%s'", key);
        return -1;
    }
    if (config__set_field(field_of(cfg, r), r.key, text, msg) != 0) {
        config__fail(err, "%s: %s", r.key->name, msg);
        return -1;
    }
    return 0;
}

int config_set_live(struct config *cfg, const char *key, const char *text, char err[CONFIG_ERR_MAX])
{
    const struct config_key *k = config_find(cfg, key);
    if (k != NULL && k->when != CONFIG_LIVE) {
        config__fail(err, "%.64s: %s", key,
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
        config__fail(err, "%s: %s", path, strerror(errno));
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
            config__fail(err, "%s:%d: line too long", path, lineno);
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
            config__fail(err, "%s:%d: expected 'key = value'", path, lineno);
            rc = -1;
            break;
        }
        *eq = '\0';
        char *key = trim(s);
        if (config_set(cfg, key, trim(eq + 1), msg) != 0) {
            config__fail(err, "%s:%d: %s", path, lineno, msg);
            rc = -1;
        } else {
            note_line(cfg, first, path, lineno, key);
        }
    }
    free(first);
    if (rc == 0 && ferror(f)) {
        config__fail(err, "%s: read error", path);
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
        config__fail(err, "%.*s: needs a %s", len, flag, what);
    else if (strcmp(what, "value") == 0)
        config__fail(
            err,
            "%.*s: needs a value, not the option %s (a value that starts with - goes after "
            "'=': %.*s=VALUE)",
            len, flag, argv[i + 1], len, flag);
    else
        config__fail(err, "%.*s: needs a %s, not the option %s", len, flag, what, argv[i + 1]);
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
                config__fail(err, "more than one directory given: '%s'", arg);
                return -1;
            }
            have_dir = true;
            if (config_set(cfg, "root", arg, msg) != 0) {
                config__fail(err, "%s (the directory to serve)", msg);
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
                config__fail(err, "unknown option '%.*s' (did you mean --%s?)", (int)len, arg,
                             flag);
            else
                config__fail(err, "unknown option '%.*s' (see --help)", (int)len, arg);
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
        if (config__set_field(field_of(cfg, r), r.key, value, msg) != 0) {
            config__fail(err, "%.*s: %s", (int)len, arg, msg);
            return -1;
        }
    }
    return 0;
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
        config__fail(err, "unclog: %s", msg);
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
