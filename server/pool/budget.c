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

static struct budget_queue *bucket(struct budget_lane *lane, uint64_t flow)
{
    uint64_t h = flow * 0x9e3779b97f4a7c15ull; /* Fibonacci hashing */
    return &lane->flows[(h >> 32) % BUDGET_FLOWS];
}

/* Whether BYTES fit now: within the budget, or its reserve for the small
 * lane; anything when nothing is held. */
static bool fits(const struct budget *b, size_t bytes)
{
    size_t limit = b->max + (is_small(bytes) ? b->max / 8 : 0);
    return b->held == 0 || (bytes <= limit && b->held <= limit - bytes);
}

static void hold(struct budget *b, size_t bytes)
{
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

/* The waiter whose turn it is in LANE, if it fits now. The turn stays on
 * its bucket until it is granted, so that nobody passes it. */
static struct budget_waiter *lane_ready(struct budget *b, struct budget_lane *lane)
{
    if (lane->waiting == 0)
        return NULL;
    while (lane->flows[lane->turn].head == NULL)
        lane->turn = (lane->turn + 1) % BUDGET_FLOWS;
    struct budget_waiter *w = lane->flows[lane->turn].head;
    return fits(b, w->bytes) ? w : NULL;
}

/* Grants the waiter whose turn it is in each lane while it fits, the small
 * lane first; each grant passes the turn to the next bucket. A granted
 * callback may take, give or queue again: the loop looks anew. */
static void grant(struct budget *b)
{
    for (;;) {
        struct budget_lane *lane = lane_ready(b, &b->small) ? &b->small
                                   : lane_ready(b, &b->big) ? &b->big
                                                            : NULL;
        if (lane == NULL)
            return;
        struct budget_waiter *w = pop(&lane->flows[lane->turn]);
        lane->turn = (lane->turn + 1) % BUDGET_FLOWS;
        lane->waiting--;
        b->waiting--;
        w->queued = false;
        hold(b, w->bytes);
        w->granted(w);
    }
}

bool budget_take(struct budget *b, struct budget_waiter *w, size_t bytes,
                 void (*granted)(struct budget_waiter *w))
{
    struct budget_lane *lane = lane_of(b, bytes);
    if (lane->waiting == 0 && fits(b, bytes)) {
        hold(b, bytes);
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
    b->waits++;
    return false;
}

bool budget_try(struct budget *b, size_t bytes)
{
    /* Strictly within the budget: the lone big reservation and the small
     * lane's reserve are for what a response needs, not for extras. */
    if (b->waiting > 0 || bytes > b->max || b->held > b->max - bytes)
        return false;
    hold(b, bytes);
    return true;
}

void budget_give(struct budget *b, size_t bytes)
{
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
    /* Whoever waited behind W may fit now. */
    grant(b);
}

void budget_set_max(struct budget *b, size_t max)
{
    b->max = max;
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
    snap_add(s, &budget_waiting, b->waiting);
    snap_add(s, &budget_waits, b->waits);
    snap_add(s, &budget_waited, b->waited_ms);
    snap_close(s);
}
