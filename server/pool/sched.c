#include "server/pool/sched.h"

#include <string.h>

void sched_init(struct sched *s, enum sched_mode mode, unsigned threads, unsigned bulk_max)
{
    memset(s, 0, sizeof *s);
    s->mode = mode;
    s->threads = threads > 0 ? threads : 1;
    sched_set_bulk_max(s, bulk_max);
}

void sched_set_bulk_max(struct sched *s, unsigned bulk_max)
{
    unsigned most = s->threads > 1 ? s->threads - 1 : 1;
    s->bulk_max = bulk_max == 0 || bulk_max > most ? most : bulk_max;
}

/* ---- queues ------------------------------------------------------------------ */

static void queue_insert_before(struct sched_queue *q, struct sched_item *at,
                                struct sched_item *item)
{
    item->next = at;
    item->prev = at != NULL ? at->prev : q->tail;
    if (item->prev != NULL)
        item->prev->next = item;
    else
        q->head = item;
    if (at != NULL)
        at->prev = item;
    else
        q->tail = item;
}

static void queue_unlink(struct sched_queue *q, struct sched_item *item)
{
    if (item->prev != NULL)
        item->prev->next = item->next;
    else
        q->head = item->next;
    if (item->next != NULL)
        item->next->prev = item->prev;
    else
        q->tail = item->prev;
}

/* ---- buckets of bulk work ----------------------------------------------------- */

static struct sched_flow *bucket(struct sched *s, uint64_t flow_id)
{
    uint64_t h = flow_id * 0x9e3779b97f4a7c15ull; /* Fibonacci hashing */
    return &s->flows[(h >> 32) % SCHED_FLOWS];
}

/* A bucket that starts holding work joins the ring just behind the cursor,
 * so that it waits one round like everyone else. */
static void ring_join(struct sched *s, struct sched_flow *f)
{
    f->deficit = 0;
    if (s->ring == NULL) {
        f->next = f->prev = f;
        s->ring = f;
        f->deficit = SCHED_QUANTUM; /* alone: its round begins */
        return;
    }
    f->next = s->ring;
    f->prev = s->ring->prev;
    f->prev->next = f;
    s->ring->prev = f;
}

static void ring_leave(struct sched *s, struct sched_flow *f)
{
    if (f->next == f) {
        s->ring = NULL;
    } else {
        f->prev->next = f->next;
        f->next->prev = f->prev;
        if (s->ring == f) {
            s->ring = f->next;
            s->ring->deficit += SCHED_QUANTUM; /* its round begins */
        }
    }
    f->next = f->prev = NULL;
    f->deficit = 0;
}

static void flow_append(struct sched *s, struct sched_flow *f, struct sched_item *item)
{
    if (f->queue.head == NULL)
        ring_join(s, f);
    item->flow = f;
    queue_insert_before(&f->queue, NULL, item);
}

static void flow_unlink(struct sched *s, struct sched_item *item)
{
    struct sched_flow *f = item->flow;
    queue_unlink(&f->queue, item);
    item->flow = NULL;
    if (f->queue.head == NULL)
        ring_leave(s, f);
}

/* Deficit round robin: the bucket under the cursor starts its head job if
 * its deficit pays for it; else the cursor moves on and the next bucket's
 * deficit grows by a quantum. Deficits only grow until one pays, so this
 * ends. Returns the job to start, paid for and still queued. */
static struct sched_item *drr_pick(struct sched *s)
{
    while (s->ring->deficit < s->ring->queue.head->cost) {
        s->ring = s->ring->next;
        s->ring->deficit += SCHED_QUANTUM;
    }
    s->ring->deficit -= s->ring->queue.head->cost;
    return s->ring->queue.head;
}

/* ---- the policy ------------------------------------------------------------------ */

static void enqueue(struct sched *s, struct sched_item *item)
{
    item->bulk = item->remaining > SCHED_SHORT_BYTES;
    item->flow = NULL;
    if (s->mode == SCHED_MODE_FIFO) {
        queue_insert_before(&s->queue, NULL, item);
    } else if (!item->bulk) {
        /* Fewest remaining bytes first; equal ones in arrival order. */
        struct sched_item *at = s->queue.head;
        while (at != NULL && at->remaining <= item->remaining)
            at = at->next;
        queue_insert_before(&s->queue, at, item);
    } else {
        flow_append(s, bucket(s, item->flow_id), item);
    }
    if (item->bulk)
        s->waiting_bulk++;
    else
        s->waiting_short++;
    item->queued = true;
}

void sched_push(struct sched *s, struct sched_item *item)
{
    item->seq = s->seq++;
    enqueue(s, item);
}

void sched_remove(struct sched *s, struct sched_item *item)
{
    if (!item->queued)
        return;
    if (item->flow != NULL)
        flow_unlink(s, item);
    else
        queue_unlink(&s->queue, item);
    if (item->bulk)
        s->waiting_bulk--;
    else
        s->waiting_short--;
    item->queued = false;
}

bool sched_short_waiting(const struct sched *s)
{
    return s->waiting_short > 0;
}

/* Takes ITEM out of its queue and counts it as started. FORCED: a bulk job
 * the no-starvation bound starts while short work waits. */
static struct sched_item *start(struct sched *s, struct sched_item *item, bool forced)
{
    sched_remove(s, item);
    s->running++;
    if (item->bulk) {
        s->running_bulk++;
        s->counters.bulk_started++;
        if (forced)
            s->counters.streak_breaks++;
        else if (s->waiting_short > 0)
            s->counters.bulk_over_short++;
        s->streak = 0;
    } else {
        s->counters.short_started++;
    }
    return item;
}

struct sched_item *sched_next(struct sched *s)
{
    if (s->running >= s->threads)
        return NULL;
    if (s->mode == SCHED_MODE_FIFO)
        return s->queue.head != NULL ? start(s, s->queue.head, false) : NULL;
    /* The reserve: with more than one thread, bulk never takes the last. */
    bool bulk_may = s->ring != NULL && s->running_bulk < s->bulk_max;
    if (s->queue.head != NULL && !(bulk_may && s->streak >= SCHED_SHORT_STREAK)) {
        if (bulk_may)
            s->streak++;
        return start(s, s->queue.head, false);
    }
    return bulk_may ? start(s, drr_pick(s), s->queue.head != NULL) : NULL;
}

void sched_done(struct sched *s, const struct sched_item *item)
{
    s->running--;
    if (item->bulk)
        s->running_bulk--;
}

void sched_set_mode(struct sched *s, enum sched_mode mode)
{
    /* Gather everything that waits into one list in arrival order (an
     * insertion sort: switching is rare, and what waits is a few items per
     * connection), then queue it again under the new mode. */
    struct sched_item *all = NULL;
    for (;;) {
        struct sched_item *it = s->queue.head != NULL ? s->queue.head
                                : s->ring             ? s->ring->queue.head
                                                      : NULL;
        if (it == NULL)
            break;
        sched_remove(s, it);
        struct sched_item **at = &all;
        while (*at != NULL && (*at)->seq < it->seq)
            at = &(*at)->next;
        it->next = *at;
        *at = it;
    }
    s->mode = mode;
    s->streak = 0;
    while (all != NULL) {
        struct sched_item *it = all;
        all = it->next;
        enqueue(s, it);
    }
}
