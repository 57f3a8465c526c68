#include "server/pool/budget.h"

#include "server/base/snapshot.h"

static void queue_init(struct budget_queue *q)
{
    q->head = NULL;
    q->tail = &q->head;
}

void budget_init(struct budget *b, size_t max)
{
    *b = (struct budget){.max = max};
    queue_init(&b->small);
    queue_init(&b->big);
}

static bool is_small(size_t bytes)
{
    return bytes <= BUDGET_SMALL;
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

/* Grants the head of each queue while it fits, the small lane first. A
 * granted callback may take, give or queue again: the loop looks anew. */
static void grant(struct budget *b)
{
    for (;;) {
        struct budget_queue *q = b->small.head != NULL && fits(b, b->small.head->bytes) ? &b->small
                                 : b->big.head != NULL && fits(b, b->big.head->bytes)   ? &b->big
                                                                                        : NULL;
        if (q == NULL)
            return;
        struct budget_waiter *w = pop(q);
        b->waiting--;
        w->queued = false;
        hold(b, w->bytes);
        w->granted(w);
    }
}

bool budget_take(struct budget *b, struct budget_waiter *w, size_t bytes,
                 void (*granted)(struct budget_waiter *w))
{
    struct budget_queue *q = is_small(bytes) ? &b->small : &b->big;
    if (q->head == NULL && fits(b, bytes)) {
        hold(b, bytes);
        return true;
    }
    *w = (struct budget_waiter){.bytes = bytes, .granted = granted, .queued = true};
    *q->tail = w;
    q->tail = &w->next;
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
    struct budget_queue *q = is_small(w->bytes) ? &b->small : &b->big;
    struct budget_waiter **p = &q->head;
    while (*p != w)
        p = &(*p)->next;
    *p = w->next;
    if (*p == NULL)
        q->tail = p;
    w->queued = false;
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
    .help = "Request and response buffer memory this worker may hold (max_buffer_memory)."};
static const struct snap_def budget_held = {
    .key = "held", .metric = "unclog_buffer_memory_held_bytes", .help = "Buffer memory held now."};
static const struct snap_def budget_peak = {.key = "peak",
                                            .metric = "unclog_buffer_memory_peak_bytes",
                                            .help = "Most buffer memory held at once."};
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
