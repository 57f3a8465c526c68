#include "server/pool/zstates.h"

#include <stdlib.h>

#include "server/base/snapshot.h"
#include "server/pool/budget.h"
#include "server/base/util.h"

size_t zstate_memory(const struct zparams *p)
{
    int window_bits = p->window_bits > 15 ? p->window_bits - 16 : p->window_bits;
    return ((size_t)1 << (window_bits + 2)) + ((size_t)1 << (p->mem_level + 9)) + 8 * KIB;
}

static bool same(const struct zparams *a, const struct zparams *b)
{
    return a->level == b->level && a->window_bits == b->window_bits && a->mem_level == b->mem_level;
}

static void unlink_idle(struct zstates *zs, struct zstate *s)
{
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        zs->head = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    else
        zs->tail = s->prev;
    s->next = s->prev = NULL;
    zs->idle--;
}

static void destroy(struct zstates *zs, struct zstate *s)
{
    if (s->ready) {
        deflateEnd(&s->z);
        zs->freed++;
    }
    free(s);
}

/* Frees every idle state; returns the bytes they kept. */
static size_t free_idle(struct zstates *zs)
{
    size_t bytes = 0;
    while (zs->head != NULL) {
        struct zstate *s = zs->head;
        unlink_idle(zs, s);
        bytes += zstate_memory(&s->params);
        destroy(zs, s);
    }
    return bytes;
}

/* The budget needs the room: the budget's reclaim. */
static size_t reclaim(void *arg)
{
    return free_idle(arg);
}

void zstates_init(struct zstates *zs, struct budget *budget, size_t idle_max)
{
    *zs = (struct zstates){.budget = budget, .idle_max = idle_max};
    if (budget != NULL) {
        budget->reclaim = reclaim;
        budget->reclaim_arg = zs;
    }
}

void zstates_fini(struct zstates *zs)
{
    size_t bytes = free_idle(zs);
    if (zs->budget != NULL) {
        budget_unkeep(zs->budget, bytes);
        zs->budget->reclaim = NULL;
    }
}

struct zstate *zstates_take(struct zstates *zs, const struct zparams *p)
{
    for (struct zstate *s = zs->head; s != NULL; s = s->next) {
        if (!same(&s->params, p))
            continue;
        unlink_idle(zs, s);
        if (zs->budget != NULL)
            budget_unkeep(zs->budget, zstate_memory(p));
        s->allocated = s->used = false;
        return s;
    }
    struct zstate *s = calloc(1, sizeof *s);
    if (s != NULL)
        s->params = *p;
    return s;
}

int zstate_begin(struct zstate *s)
{
    s->used = true;
    if (s->ready)
        return Z_OK;
    int rc = deflateInit2(&s->z, s->params.level, Z_DEFLATED, s->params.window_bits,
                          s->params.mem_level, Z_DEFAULT_STRATEGY);
    s->ready = rc == Z_OK;
    s->allocated = s->ready;
    return rc;
}

void zstates_give(struct zstates *zs, struct zstate *s)
{
    if (s->used) {
        zs->streams++;
        zs->allocs += s->allocated;
        zs->reused += !s->allocated && s->ready;
    }
    if (!s->ready) {
        free(s);
        return;
    }
    /* deflateReset leaves the pointers in and out as they were: a state
     * given back mid-stream (its client gone, its body refused) still
     * points into buffers that are about to be freed. */
    s->z.next_in = Z_NULL;
    s->z.avail_in = 0;
    s->z.next_out = Z_NULL;
    s->z.avail_out = 0;
    if ((s->used && deflateReset(&s->z) != Z_OK) || zs->idle_max == 0) {
        destroy(zs, s);
        return;
    }
    size_t bytes = zstate_memory(&s->params);
    /* Full: the state waiting longest gives way. */
    if (zs->idle == zs->idle_max) {
        struct zstate *old = zs->tail;
        unlink_idle(zs, old);
        if (zs->budget != NULL)
            budget_unkeep(zs->budget, zstate_memory(&old->params));
        destroy(zs, old);
    }
    if (zs->budget != NULL && !budget_keep(zs->budget, bytes)) {
        destroy(zs, s); /* the budget is short: someone waits, or it is full */
        return;
    }
    s->prev = NULL;
    s->next = zs->head;
    if (zs->head != NULL)
        zs->head->prev = s;
    else
        zs->tail = s;
    zs->head = s;
    zs->idle++;
}

static const struct snap_def streams_def = {
    .key = "streams",
    .metric = "unclog_zlib_streams_total",
    .kind = SNAP_COUNTER,
    .help = "Deflate streams run to their end or cut short (/gzip bodies, files gzipped on the "
            "fly, gzipped listings), counted as each ends."};
static const struct snap_def reused_def = {
    .key = "reused",
    .metric = "unclog_zlib_states_reused_total",
    .kind = SNAP_COUNTER,
    .help = "Deflate streams that ran on a zlib state an earlier stream had used, reset."};
static const struct snap_def allocs_def = {.key = "allocs",
                                           .metric = "unclog_zlib_state_allocs_total",
                                           .kind = SNAP_COUNTER,
                                           .help = "zlib deflate states allocated (deflateInit2)."};
static const struct snap_def freed_def = {
    .key = "freed",
    .metric = "unclog_zlib_states_freed_total",
    .kind = SNAP_COUNTER,
    .help = "zlib deflate states freed: more idle than the threads, the budget short, a failed "
            "reset."};
static const struct snap_def idle_def = {
    .key = "idle",
    .metric = "unclog_zlib_states_idle",
    .help = "zlib deflate states waiting for the next stream (their memory is the budget's "
            "kept)."};

void zstates_stats(const struct zstates *zs, struct snapshot *s)
{
    snap_open(s, "zlib", NULL);
    snap_add(s, &streams_def, zs->streams);
    snap_add(s, &reused_def, zs->reused);
    snap_add(s, &allocs_def, zs->allocs);
    snap_add(s, &freed_def, zs->freed);
    snap_add(s, &idle_def, zs->idle);
    snap_close(s);
}
