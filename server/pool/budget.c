#include "server/pool/budget.h"

#include "server/base/snapshot.h"

static void queue_init(struct budget_queue *q)
{
    q->head = NULL;
    q->tail = &q->head;
}

static void lane_init(struct budget_lane *lane)
{
    for (size_t i = 0; i < BUDGET_FLOWS; i++)
        queue_init(&lane->flows[i]);
}

void budget_init(struct budget *b, size_t max)
{
    *b = (struct budget){.max = max};
    lane_init(&b->small);
    lane_init(&b->big);
}

static bool is_small(size_t bytes)
{
    return bytes <= BUDGET_SMALL;
}

static struct budget_lane *lane_of(struct budget *b, size_t bytes)
{
    return is_small(bytes) ? &b->small : &b->big;
}

static size_t bucket_of(uint64_t flow)
{
    uint64_t h = flow * 0x9e3779b97f4a7c15ull; /* Fibonacci hashing */
    return (h >> 32) % BUDGET_FLOWS;
}

static struct budget_queue *bucket(struct budget_lane *lane, uint64_t flow)
{
    return &lane->flows[bucket_of(flow)];
}

/* Whether bucket I may take BYTES more: always while no other client
 * waits, or while it holds nothing; else within its share, the budget over
 * the clients holding or waiting (I among them). */
static bool fair(const struct budget *b, size_t i, size_t bytes)
{
    if (b->waiting == b->flow_waiting[i] || b->flow_held[i] == 0)
        return true;
    size_t clients = 0;
    for (size_t j = 0; j < BUDGET_FLOWS; j++)
        clients += b->flow_held[j] > 0 || b->flow_waiting[j] > 0;
    size_t share = b->max / clients;
    return b->flow_held[i] <= share && bytes <= share - b->flow_held[i];
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

static void hold(struct budget *b, uint64_t flow, size_t bytes)
{
    b->flow_held[bucket_of(flow)] += bytes;
    b->held += bytes;
    if (b->held > b->peak)
        b->peak = b->held;
}

static struct budget_waiter *pop(struct budget_queue *q)
{
    struct budget_waiter *w = q->head;
    q->head = w->next;
    if (q->head == NULL)
        q->tail = &q->head;
    return w;
}

/* The waiter whose turn it is in LANE: the first from the turn on whose
 * client is within its share (fair), the turn moving on to it; if none is,
 * the turn's own, unless FAIR_ONLY. The turn stays on its bucket until it
 * is granted, so that nobody passes it but for the fair share. */
static struct budget_waiter *lane_next(struct budget *b, struct budget_lane *lane, bool fair_only)
{
    if (lane->waiting == 0)
        return NULL;
    while (lane->flows[lane->turn].head == NULL)
        lane->turn = (lane->turn + 1) % BUDGET_FLOWS;
    for (size_t k = 0; k < BUDGET_FLOWS; k++) {
        size_t i = (lane->turn + k) % BUDGET_FLOWS;
        struct budget_waiter *w = lane->flows[i].head;
        if (w != NULL && fair(b, i, w->bytes)) {
            lane->turn = (unsigned)i;
            return w;
        }
    }
    return fair_only ? NULL : lane->flows[lane->turn].head;
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
        struct budget_waiter *w = pop(&lane->flows[lane->turn]);
        lane->turn = (lane->turn + 1) % BUDGET_FLOWS;
        lane->waiting--;
        b->waiting--;
        b->flow_waiting[bucket_of(w->flow)]--;
        w->queued = false;
        hold(b, w->flow, w->bytes);
        w->granted(w);
    }
}

bool budget_take(struct budget *b, struct budget_waiter *w, size_t bytes,
                 void (*granted)(struct budget_waiter *w))
{
    struct budget_lane *lane = lane_of(b, bytes);
    bool now = lane->waiting == 0 && fits(b, bytes) && fair(b, bucket_of(w->flow), bytes);
    if (!now && b->kept > 0) {
        /* Nothing is kept while anyone waits, nor in anyone's way. */
        reclaim(b);
        now = lane->waiting == 0 && fits(b, bytes) && fair(b, bucket_of(w->flow), bytes);
    }
    if (now) {
        hold(b, w->flow, bytes);
        return true;
    }
    w->next = NULL;
    w->bytes = bytes;
    w->granted = granted;
    w->queued = true;
    struct budget_queue *q = bucket(lane, w->flow);
    *q->tail = w;
    q->tail = &w->next;
    lane->waiting++;
    b->waiting++;
    b->flow_waiting[bucket_of(w->flow)]++;
    b->waits++;
    return false;
}

bool budget_try(struct budget *b, uint64_t flow, size_t bytes)
{
    /* Strictly within the budget: the lone big reservation and the small
     * lane's reserve are for what a response needs, not for extras. */
    if (b->waiting > 0 || bytes > b->max)
        return false;
    if (b->held + b->kept > b->max - bytes)
        reclaim(b);
    if (b->held + b->kept > b->max - bytes)
        return false;
    hold(b, flow, bytes);
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

void budget_give(struct budget *b, uint64_t flow, size_t bytes)
{
    b->flow_held[bucket_of(flow)] -= bytes;
    b->held -= bytes;
    grant(b);
}

void budget_cancel(struct budget *b, struct budget_waiter *w)
{
    if (!w->queued)
        return;
    struct budget_lane *lane = lane_of(b, w->bytes);
    struct budget_queue *q = bucket(lane, w->flow);
    struct budget_waiter **p = &q->head;
    while (*p != w)
        p = &(*p)->next;
    *p = w->next;
    if (*p == NULL)
        q->tail = p;
    w->queued = false;
    lane->waiting--;
    b->waiting--;
    b->flow_waiting[bucket_of(w->flow)]--;
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
    snap_close(s);
}
