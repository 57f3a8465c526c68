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
