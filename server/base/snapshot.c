#include "server/base/snapshot.h"

#include <stdlib.h>
#include <string.h>

#include "server/base/config.h"

void snap_init(struct snapshot *s)
{
    *s = (struct snapshot){.open = SNAP_TOP};
}

void snap_free(struct snapshot *s)
{
    free(s->entry);
    free(s->merged);
    snap_init(s);
}

/* A new entry of TYPE in the object open now, or NULL (S has failed). */
static struct snap_entry *push(struct snapshot *s, enum snap_type type, const char *name)
{
    if (s->failed)
        return NULL;
    if (s->len == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        struct snap_entry *grown = realloc(s->entry, cap * sizeof *grown);
        if (grown == NULL) {
            s->failed = true;
            return NULL;
        }
        s->entry = grown;
        s->cap = cap;
    }
    struct snap_entry *e = &s->entry[s->len++];
    *e = (struct snap_entry){.type = type, .parent = s->open, .name = name};
    return e;
}

void snap_open(struct snapshot *s, const char *name, const char *label)
{
    if (s->depth == SNAP_DEPTH) {
        s->failed = true;
        return;
    }
    struct snap_entry *e = push(s, SNAP_OPEN, name);
    if (e == NULL)
        return;
    e->label = label;
    s->open = s->len - 1;
    s->depth++;
}

void snap_close(struct snapshot *s)
{
    if (s->open == SNAP_TOP) {
        s->failed = true;
        return;
    }
    size_t parent = s->entry[s->open].parent;
    if (push(s, SNAP_CLOSE, NULL) == NULL)
        return;
    s->open = parent;
    s->depth--;
}

static struct snap_entry *figure(struct snapshot *s, const struct snap_def *def, const char *name)
{
    struct snap_entry *e = push(s, SNAP_FIGURE, name);
    if (e != NULL)
        e->def = def;
    return e;
}

static void copy_text(struct snapshot *s, struct snap_entry *e, const char *text)
{
    size_t len = strlen(text);
    if (len >= sizeof e->text) {
        s->failed = true; /* a text cut short would say something false */
        return;
    }
    memcpy(e->text, text, len + 1);
}

void snap_add(struct snapshot *s, const struct snap_def *def, uint64_t value)
{
    snap_add_named(s, def, def->key, value);
}

void snap_add_named(struct snapshot *s, const struct snap_def *def, const char *name,
                    uint64_t value)
{
    struct snap_entry *e = figure(s, def, name);
    if (e != NULL)
        e->value = value;
}

void snap_add_size(struct snapshot *s, const struct snap_def *def, size_t size)
{
    snap_add(s, def, size == CONFIG_WHOLE || size == CONFIG_AUTO_SIZE ? 0 : size);
}

void snap_add_settings(struct snapshot *s, const struct config *cfg,
                       const struct config_table *table)
{
    for (size_t i = 0; table->figures != NULL && table->figures[i] != NULL; i++) {
        const struct snap_def *def = table->figures[i];
        const struct config_key *k = config_find(cfg, def->key);
        uint64_t value;
        if (k == NULL)
            abort(); /* a figure for a key its table lacks: a bug */
        if (config_number(cfg, def->key, &value) != 0) {
            char text[SNAP_TEXT_MAX];
            config_get(cfg, def->key, text, sizeof text);
            snap_add_text(s, def, NULL, text);
        } else if (k->type == CONFIG_SIZE || k->type == CONFIG_PARTITION ||
                   k->type == CONFIG_PARTITION_AUTO) {
            snap_add_size(s, def, (size_t)value);
        } else {
            snap_add(s, def, value);
        }
    }
}

void snap_add_text(struct snapshot *s, const struct snap_def *def, const char *name,
                   const char *text)
{
    struct snap_entry *e = figure(s, def, name != NULL ? name : def->key);
    if (e != NULL)
        copy_text(s, e, text);
}

void snap_add_hist(struct snapshot *s, const struct snap_def *def, const struct hist_total *t)
{
    struct snap_entry *e = figure(s, def, def->key);
    if (e != NULL)
        e->hist = t;
}

bool snap_complete(const struct snapshot *s)
{
    return !s->failed && s->open == SNAP_TOP;
}

uint64_t snap_stat(const struct hist_summary *sum, enum snap_stat stat)
{
    switch (stat) {
    case SNAP_STAT_COUNT:
        return sum->count;
    case SNAP_STAT_P50:
        return sum->p50;
    case SNAP_STAT_P99:
        return sum->p99;
    default:
        return sum->max;
    }
}

void snap_add_window(struct snapshot *s, const struct snap_def *def, const struct hist *h,
                     const struct hist_summary *sum, enum snap_stat stat)
{
    struct snap_entry *e = figure(s, def, def->key);
    if (e == NULL)
        return;
    e->window = h;
    e->stat = stat;
    e->value = snap_stat(sum, stat);
}

enum snap_merge snap_merge_of(const struct snap_def *def)
{
    if (def->merge != SNAP_BY_KIND)
        return def->merge;
    switch (def->kind) {
    case SNAP_COUNTER:
    case SNAP_HISTOGRAM:
        return SNAP_TOTAL;
    case SNAP_GAUGE:
        return SNAP_SUM;
    case SNAP_FLAG:
        return SNAP_MAX;
    default:
        return SNAP_SAME;
    }
}

/* FNV-1a, 64 bits, over LEN bytes of P, continuing from H. */
static uint64_t mix(uint64_t h, const void *p, size_t len)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t mix_text(uint64_t h, const char *text)
{
    return text != NULL ? mix(h, text, strlen(text) + 1) : mix(h, "", 1);
}

void snap_keys(const struct snapshot *s, uint64_t *keys)
{
    for (size_t i = 0; i < s->len; i++) {
        const struct snap_entry *e = &s->entry[i];
        uint64_t h = e->parent == SNAP_TOP ? 0xcbf29ce484222325ull : keys[e->parent];
        h = mix(h, &e->type, sizeof e->type);
        h = mix_text(h, e->name);
        h = mix_text(h, e->label);
        /* A definition is static: the same address in every process
         * forked from one master. */
        h = mix(h, &e->def, sizeof e->def);
        keys[i] = h;
    }
}
