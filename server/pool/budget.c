#include "server/pool/budget.h"

#include "server/base/snapshot.h"
#include "server/base/util.h"

void budget_init(struct budget *b, size_t max)
{
    *b = (struct budget){.max = max};
    fairq_init(&b->small.queue, b->small.bucket, BUDGET_BUCKETS);
    fairq_init(&b->big.queue, b->big.bucket, BUDGET_BUCKETS);
}

static bool is_small(size_t bytes)
{
    return bytes <= BUDGET_SMALL;
}

static struct budget_lane *lane_of(struct budget *b, size_t bytes)
{
    return is_small(bytes) ? &b->small : &b->big;
}

static uint32_t bucket_of(uint64_t client)
{
    return fairq_bucket_of(client, BUDGET_BUCKETS);
}

static struct budget_waiter *waiter_of(struct fairq_node *node)
{
    return node == NULL ? NULL : container_of(node, struct budget_waiter, node);
}

/* The budget over the clients holding or waiting: each one's fair share. */
static size_t share_of(const struct budget *b)
{
    return b->max / (b->clients ? b->clients : 1);
}

/* Bucket I holds or waits: it counts among the clients sharing. */
static bool counted(const struct budget *b, uint32_t i)
{
    return b->bucket_held[i] > 0 || b->bucket_waiting[i] > 0;
}

/* Bucket I's holding or waiting changes by HELD and WAITING (either may
 * be negative): the count of clients follows. */
static void change(struct budget *b, uint32_t i, long long held, int waiting)
{
    bool was = counted(b, i);
    b->bucket_held[i] += (size_t)held;
    b->bucket_waiting[i] += (size_t)waiting;
    b->clients += (size_t)((long long)counted(b, i) - was);
}

/* Whether bucket I, taking BYTES more, stays within its share: it holds
 * nothing yet (a first reservation larger than a share must not starve),
 * or what it holds and BYTES fit in the share. */
static bool within_share(const struct budget *b, uint32_t i, size_t bytes)
{
    size_t share = share_of(b), held = b->bucket_held[i];
    return held == 0 || (held <= share && bytes <= share - held);
}

/* Whether bucket I may take BYTES more: always while no other client
 * waits, else within its share. */
static bool fair(const struct budget *b, uint32_t i, size_t bytes)
{
    return b->waiting == b->bucket_waiting[i] || within_share(b, i, bytes);
}

/* Whether a client waits whose next reservation is within its share:
 * someone others give way to. A waiter past its share is given nothing
 * by others (it waits for memory set free by progress), so that clients
 * all at their share do not hand memory round and round. */
static bool needy(const struct budget *b)
{
    const struct budget_lane *lanes[2] = {&b->small, &b->big};
    for (int l = 0; l < 2; l++) {
        const struct fairq *q = &lanes[l]->queue;
        for (int32_t i = fairq_first(q); i != FAIRQ_NONE; i = fairq_next(q, (uint32_t)i)) {
            const struct budget_waiter *w = waiter_of(fairq_oldest(q, (uint32_t)i));
            if (within_share(b, (uint32_t)i, w->bytes))
                return true;
        }
    }
    return false;
}

size_t budget_give_above(const struct budget *b)
{
    return b->waiting > 0 && needy(b) ? share_of(b) : SIZE_MAX;
}

bool budget_gives_way(const struct budget *b, uint64_t client)
{
    uint32_t i = bucket_of(client);
    if (b->waiting == 0 || b->bucket_held[i] <= share_of(b))
        return false;
    return budget_gives(b, budget_give_above(b), client);
}

/* Whether BYTES fit now, beside what is held and kept: within the budget,
 * or its reserve for the small lane; anything when nothing is. */
static bool fits(const struct budget *b, size_t bytes)
{
    size_t limit = b->max + (is_small(bytes) ? b->max / 8 : 0);
    size_t used = b->held + b->kept;
    return used == 0 || (bytes <= limit && used <= limit - bytes);
}

/* What is kept gives way: the owner frees it all. */
static void reclaim(struct budget *b)
{
    if (b->kept > 0 && b->reclaim != NULL)
        b->kept -= b->reclaim(b->reclaim_arg);
}

static void hold(struct budget *b, uint64_t client, size_t bytes)
{
    change(b, bucket_of(client), (long long)bytes, 0);
    b->held += bytes;
    if (b->held > b->peak)
        b->peak = b->held;
}

/* The waiter whose turn it is in LANE: the first in the ring whose client
 * is within its share (fair), the turn moving on to it (the buckets before
 * it go last); if none is, the turn's own, unless FAIR_ONLY. The turn stays
 * on its bucket until it is granted, so that nobody passes it but for the
 * fair share. */
static struct budget_waiter *lane_next(struct budget *b, struct budget_lane *lane, bool fair_only)
{
    struct fairq *q = &lane->queue;
    for (int32_t i = fairq_first(q); i != FAIRQ_NONE; i = fairq_next(q, (uint32_t)i)) {
        struct budget_waiter *w = waiter_of(fairq_oldest(q, (uint32_t)i));
        if (fair(b, (uint32_t)i, w->bytes)) {
            while (fairq_first(q) != i)
                fairq_rotate(q);
            return w;
        }
    }
    int32_t turn = fairq_first(q);
    return fair_only || turn == FAIRQ_NONE ? NULL : waiter_of(fairq_oldest(q, (uint32_t)turn));
}

/* The lane whose next waiter goes now: the small lane's, else the big
 * lane's, if it fits. A waiter within its share goes before any that is
 * not, so the others are looked at only when no lane has one. */
static struct budget_lane *lane_ready(struct budget *b)
{
    struct budget_lane *lanes[2] = {&b->small, &b->big};
    for (int fair_only = 1; fair_only >= 0; fair_only--) {
        bool seen = false;
        for (int i = 0; i < 2; i++) {
            struct budget_waiter *w = lane_next(b, lanes[i], fair_only);
            if (w != NULL && fits(b, w->bytes))
                return lanes[i];
            seen |= w != NULL;
        }
        if (seen)
            return NULL;
    }
    return NULL;
}

/* Grants the waiter whose turn it is in each lane while it fits, the small
 * lane first; each grant passes the turn to the next bucket. A granted
 * callback may take, give or queue again: the loop looks anew. */
static void grant(struct budget *b)
{
    for (;;) {
        struct budget_lane *lane = lane_ready(b);
        if (lane == NULL)
            return;
        struct budget_waiter *w = waiter_of(fairq_serve(&lane->queue));
        b->waiting--;
        change(b, bucket_of(w->client), 0, -1);
        hold(b, w->client, w->bytes);
        w->granted(w);
    }
}

bool budget_take(struct budget *b, struct budget_waiter *w, size_t bytes,
                 void (*granted)(struct budget_waiter *w))
{
    struct budget_lane *lane = lane_of(b, bytes);
    bool now = lane->queue.queued == 0 && fits(b, bytes) && fair(b, bucket_of(w->client), bytes);
    if (!now && b->kept > 0) {
        /* Nothing is kept while anyone waits, nor in anyone's way. */
        reclaim(b);
        now = lane->queue.queued == 0 && fits(b, bytes) && fair(b, bucket_of(w->client), bytes);
    }
    if (now) {
        hold(b, w->client, bytes);
        return true;
    }
    w->bytes = bytes;
    w->granted = granted;
    fairq_push(&lane->queue, &w->node, w->client);
    b->waiting++;
    change(b, bucket_of(w->client), 0, 1);
    b->waits++;
    return false;
}

bool budget_try(struct budget *b, uint64_t client, size_t bytes)
{
    /* Strictly within the budget: the lone big reservation and the small
     * lane's reserve are for what a response needs, not for extras. */
    if (b->waiting > 0 || bytes > b->max)
        return false;
    if (b->held + b->kept > b->max - bytes)
        reclaim(b);
    if (b->held + b->kept > b->max - bytes)
        return false;
    hold(b, client, bytes);
    return true;
}

bool budget_keep(struct budget *b, size_t bytes)
{
    if (b->reclaim == NULL || b->waiting > 0 || bytes > b->max ||
        b->held + b->kept > b->max - bytes)
        return false;
    b->kept += bytes;
    return true;
}

void budget_unkeep(struct budget *b, size_t bytes)
{
    b->kept -= bytes;
    grant(b);
}

void budget_give(struct budget *b, uint64_t client, size_t bytes)
{
    change(b, bucket_of(client), -(long long)bytes, 0);
    b->held -= bytes;
    grant(b);
}

size_t budget_held_in(const struct budget *b, uint32_t bucket)
{
    return b->bucket_held[fairq_bucket_fold(bucket, BUDGET_BUCKETS)];
}

void budget_cancel(struct budget *b, struct budget_waiter *w)
{
    if (!w->node.queued)
        return;
    fairq_remove(&lane_of(b, w->bytes)->queue, &w->node);
    b->waiting--;
    change(b, bucket_of(w->client), 0, -1);
    /* Whoever waited behind W may fit now. */
    grant(b);
}

void budget_set_max(struct budget *b, size_t max)
{
    b->max = max;
    if (b->held + b->kept > max)
        reclaim(b);
    grant(b);
}

static const struct snap_def budget_max = {
    .key = "budget",
    .metric = "unclog_buffer_memory_budget_bytes",
    .help = "Request and response buffer memory this worker may hold (max_buffer_memory).",
    .merge = SNAP_SAME};
static const struct snap_def budget_held = {
    .key = "held", .metric = "unclog_buffer_memory_held_bytes", .help = "Buffer memory held now."};
static const struct snap_def budget_peak = {.key = "peak",
                                            .metric = "unclog_buffer_memory_peak_bytes",
                                            .help = "Most buffer memory held at once.",
                                            .merge = SNAP_MAX};
static const struct snap_def budget_kept = {
    .key = "kept",
    .metric = "unclog_buffer_memory_kept_bytes",
    .help = "Buffer memory no response holds, kept for reuse (idle zlib states): counted in the "
            "budget, given up as soon as a response needs it."};
static const struct snap_def budget_waiting = {.key = "waiting",
                                               .metric = "unclog_buffer_memory_waiters",
                                               .help = "Responses waiting now for buffer memory."};
static const struct snap_def budget_waits = {.key = "waits",
                                             .metric = "unclog_buffer_memory_waits_total",
                                             .kind = SNAP_COUNTER,
                                             .help =
                                                 "Responses that had to wait for buffer memory."};
static const struct snap_def budget_waited = {
    .key = "waited_ms_total",
    .metric = "unclog_buffer_memory_wait_seconds_total",
    .kind = SNAP_COUNTER,
    .unit = SNAP_MS,
    .help = "Time responses spent waiting for buffer memory."};

static const struct snap_def budget_given = {
    .key = "given_back",
    .metric = "unclog_buffer_memory_given_back_total",
    .kind = SNAP_COUNTER,
    .help = "Filled response slots given back to the budget before they were sent, while another "
            "client waited: their file bytes are read again when their client catches up."};
static const struct snap_def budget_given_bytes = {
    .key = "given_back_bytes",
    .metric = "unclog_buffer_memory_given_back_bytes_total",
    .kind = SNAP_COUNTER,
    .help = "Bytes of the budget given back so."};
static const struct snap_def budget_reread = {
    .key = "reread_bytes",
    .metric = "unclog_buffer_memory_reread_bytes_total",
    .kind = SNAP_COUNTER,
    .help = "File bytes read again after their slot was given back."};

static const struct snap_def budget_withdrawn = {
    .key = "fills_withdrawn",
    .metric = "unclog_buffer_memory_fills_withdrawn_total",
    .kind = SNAP_COUNTER,
    .help = "Fills of stalled responses taken back from the pool's queue before they started, "
            "so that their slots could be given back: they read nothing."};

void budget_stats(const struct budget *b, struct snapshot *s)
{
    snap_open(s, "memory", NULL);
    snap_add(s, &budget_max, b->max);
    snap_add(s, &budget_held, b->held);
    snap_add(s, &budget_peak, b->peak);
    snap_add(s, &budget_kept, b->kept);
    snap_add(s, &budget_waiting, b->waiting);
    snap_add(s, &budget_waits, b->waits);
    snap_add(s, &budget_waited, b->waited_ms);
    snap_add(s, &budget_given, b->given_back);
    snap_add(s, &budget_given_bytes, b->given_back_bytes);
    snap_add(s, &budget_reread, b->reread_bytes);
    snap_add(s, &budget_withdrawn, b->fills_withdrawn);
    snap_close(s);
}
