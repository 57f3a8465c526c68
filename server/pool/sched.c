#include "server/pool/sched.h"

#include <string.h>

void sched_init(struct sched *s, enum sched_mode mode, unsigned threads, unsigned bulk_max)
{
    memset(s, 0, sizeof *s);
    s->mode = mode;
    s->threads = threads > 0 ? threads : 1;
    sched_set_bulk_max(s, bulk_max);
    sched_set_cpu_max(s, 0);
}

/* A share of the threads: N, or at most all but one of them (0: that most). */
static unsigned share(const struct sched *s, unsigned n)
{
    unsigned most = s->threads > 1 ? s->threads - 1 : 1;
    return n == 0 || n > most ? most : n;
}

void sched_set_bulk_max(struct sched *s, unsigned bulk_max)
{
    s->bulk_max = share(s, bulk_max);
}

void sched_set_cpu_max(struct sched *s, unsigned cpu_max)
{
    s->cpu_max = share(s, cpu_max);
}

/* ---- queues ------------------------------------------------------------------ */

static void queue_append(struct sched_queue *q, struct sched_item *item)
{
    item->next = NULL;
    item->prev = q->tail;
    if (q->tail != NULL)
        q->tail->next = item;
    else
        q->head = item;
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

/* ---- buckets: round robin by bytes between clients ---------------------------- */

static struct sched_flow *bucket(struct sched_fair *fq, uint64_t flow_id)
{
    uint64_t h = flow_id * 0x9e3779b97f4a7c15ull; /* Fibonacci hashing */
    return &fq->flows[(h >> 32) % SCHED_FLOWS];
}

/* A bucket that starts holding work goes last in the active list, at the
 * tag of the last start unless its own is further on: what it started
 * before counts, time away does not. */
static void fair_join(struct sched_fair *fq, struct sched_flow *f)
{
    if (f->tag < fq->vtime)
        f->tag = fq->vtime;
    if (fq->active == NULL) {
        f->next = f->prev = f;
        fq->active = f;
        return;
    }
    f->next = fq->active;
    f->prev = fq->active->prev;
    f->prev->next = f;
    fq->active->prev = f;
}

static void fair_leave(struct sched_fair *fq, struct sched_flow *f)
{
    if (f->next == f) {
        fq->active = NULL;
    } else {
        f->prev->next = f->next;
        f->next->prev = f->prev;
        if (fq->active == f)
            fq->active = f->next;
    }
    f->next = f->prev = NULL;
}

static void fair_append(struct sched_fair *fq, struct sched_item *item)
{
    struct sched_flow *f = bucket(fq, item->flow_id);
    if (f->queue.head == NULL)
        fair_join(fq, f);
    item->flow = f;
    queue_append(&f->queue, item);
}

static void fair_unlink(struct sched_fair *fq, struct sched_item *item)
{
    struct sched_flow *f = item->flow;
    queue_unlink(&f->queue, item);
    item->flow = NULL;
    if (f->queue.head == NULL)
        fair_leave(fq, f);
}

/* The bucket whose turn it is: the smallest tag; of equal ones, the one
 * that has held work the longest. */
static struct sched_flow *fair_turn(const struct sched_fair *fq)
{
    struct sched_flow *best = fq->active;
    for (struct sched_flow *f = best->next; f != fq->active; f = f->next) {
        if (f->tag < best->tag)
            best = f;
    }
    return best;
}

/* Whether ITEM, a short job, may start now: not when it is CPU-bound and
 * cpu_max of those run. */
static bool cpu_allows(const struct sched *s, const struct sched_item *item)
{
    return !item->cpu || s->running_cpu < s->cpu_max;
}

/* What a bucket's next short job would be. */
struct short_pick {
    struct sched_item *item; /* NULL: none of its jobs may start now */
    bool aged;               /* the aging bound chose it */
};

/* A client's next short job among those that may start: the fewest
 * remaining bytes (the first of equals), unless its oldest has seen
 * SCHED_SHORT_AGE of the bucket's jobs start since it arrived. */
static struct short_pick short_pick(const struct sched *s, const struct sched_flow *f)
{
    struct short_pick pick = {0};
    struct sched_item *oldest = NULL;
    for (struct sched_item *it = f->queue.head; it != NULL; it = it->next) {
        if (!cpu_allows(s, it))
            continue;
        if (oldest == NULL)
            oldest = pick.item = it;
        else if (it->remaining < pick.item->remaining)
            pick.item = it;
    }
    if (pick.item != oldest && f->started - oldest->age >= SCHED_SHORT_AGE) {
        pick.item = oldest;
        pick.aged = true;
    }
    return pick;
}

/* The next short job that may start, in *F's bucket: the bucket whose turn
 * it is; while the CPU bound holds, the first in turn (smallest tag, then
 * longest waiting) that has a job it allows. */
static struct short_pick short_next(const struct sched *s, struct sched_flow **fp)
{
    struct sched_flow *turn = fair_turn(&s->shorts);
    struct short_pick pick = short_pick(s, turn), p;
    *fp = turn;
    if (pick.item != NULL || s->running_cpu < s->cpu_max)
        return pick;
    struct sched_flow *f = s->shorts.active;
    do {
        p = short_pick(s, f);
        if (p.item != NULL && (pick.item == NULL || f->tag < (*fp)->tag)) {
            pick = p;
            *fp = f;
        }
        f = f->next;
    } while (f != s->shorts.active);
    return pick;
}

/* Takes ITEM, of bucket F in class FQ: the bucket's tag moves on by its cost. */
static struct sched_item *fair_take(struct sched_fair *fq, struct sched_flow *f,
                                    struct sched_item *item)
{
    fq->vtime = f->tag;
    f->tag += item->cost > SCHED_MIN_CHARGE ? item->cost : SCHED_MIN_CHARGE;
    return item;
}

/* A short job of bucket F starts although its tag is not the smallest:
 * the buckets before it in turn have only CPU-bound work, held by cpu_max.
 * They save no credit while held (their tags come up to F's), or the first
 * of their work that may start would go ahead of everyone's for as long as
 * they were held. */
static void lift_held(struct sched_fair *fq, const struct sched_flow *f)
{
    struct sched_flow *g = fq->active;
    do {
        if (g->tag < f->tag)
            g->tag = f->tag;
        g = g->next;
    } while (g != fq->active);
}

/* ---- the policy ------------------------------------------------------------------ */

static void enqueue(struct sched *s, struct sched_item *item)
{
    item->bulk = item->remaining > SCHED_SHORT_BYTES;
    item->flow = NULL;
    if (s->mode == SCHED_MODE_FIFO)
        queue_append(&s->queue, item);
    else
        fair_append(item->bulk ? &s->bulks : &s->shorts, item);
    if (item->bulk)
        s->waiting_bulk++;
    else
        s->waiting_short++;
    s->waiting_cpu += item->cpu && !item->bulk;
    item->queued = true;
}

void sched_push(struct sched *s, struct sched_item *item)
{
    const struct sched_flow *f = bucket(&s->shorts, item->flow_id);
    item->seq = s->seq++;
    item->age = f->started;
    item->others = s->counters.short_started - f->started;
    enqueue(s, item);
}

void sched_remove(struct sched *s, struct sched_item *item)
{
    if (!item->queued)
        return;
    if (item->flow != NULL)
        fair_unlink(item->bulk ? &s->bulks : &s->shorts, item);
    else
        queue_unlink(&s->queue, item);
    if (item->bulk)
        s->waiting_bulk--;
    else
        s->waiting_short--;
    s->waiting_cpu -= item->cpu && !item->bulk;
    item->queued = false;
}

bool sched_short_waiting(const struct sched *s, bool cpu)
{
    if (!cpu && s->mode == SCHED_MODE_FAIR && s->running_cpu >= s->cpu_max)
        return s->waiting_short > s->waiting_cpu;
    return s->waiting_short > 0;
}

/* Counts a short start, with the short jobs of other buckets that started
 * while it waited. */
static void count_short(struct sched *s, const struct sched_item *item)
{
    struct sched_flow *f = bucket(&s->shorts, item->flow_id);
    uint64_t others = s->counters.short_started - f->started - item->others;
    if (others > s->counters.short_others_max)
        s->counters.short_others_max = others;
    s->counters.short_started++;
    f->started++;
}

/* Takes ITEM out of its queue and counts it as started. FORCED: a bulk job
 * the no-starvation bound starts while short work waits. OVER_SHORT: a bulk
 * job started while short work that could have started waited. */
static struct sched_item *start(struct sched *s, struct sched_item *item, bool forced,
                                bool over_short)
{
    sched_remove(s, item);
    s->running++;
    if (item->bulk) {
        s->running_bulk++;
        s->counters.bulk_started++;
        if (forced)
            s->counters.streak_breaks++;
        else if (over_short)
            s->counters.bulk_over_short++;
        s->streak = 0;
    } else {
        s->running_cpu += item->cpu;
        count_short(s, item);
    }
    return item;
}

struct sched_item *sched_next(struct sched *s)
{
    if (s->running >= s->threads)
        return NULL;
    if (s->mode == SCHED_MODE_FIFO) {
        struct sched_item *head = s->queue.head;
        return head != NULL ? start(s, head, false, s->waiting_short > 0) : NULL;
    }
    /* The reserve: with more than one thread, bulk never takes the last. */
    bool bulk_may = s->bulks.active != NULL && s->running_bulk < s->bulk_max;
    struct sched_flow *f = NULL;
    struct short_pick pick = {0};
    if (s->shorts.active != NULL)
        pick = short_next(s, &f);
    if (pick.item != NULL && !(bulk_may && s->streak >= SCHED_SHORT_STREAK)) {
        if (bulk_may)
            s->streak++;
        s->counters.short_aged += pick.aged;
        s->counters.cpu_passed += s->waiting_cpu > 0 && s->running_cpu >= s->cpu_max;
        if (s->running_cpu >= s->cpu_max)
            lift_held(&s->shorts, f);
        return start(s, fair_take(&s->shorts, f, pick.item), false, false);
    }
    if (!bulk_may)
        return NULL;
    f = fair_turn(&s->bulks);
    return start(s, fair_take(&s->bulks, f, f->queue.head), pick.item != NULL, false);
}

void sched_done(struct sched *s, const struct sched_item *item)
{
    s->running--;
    if (item->bulk)
        s->running_bulk--;
    else
        s->running_cpu -= item->cpu;
}

/* Any item that waits, or NULL. */
static struct sched_item *any_waiting(const struct sched *s)
{
    if (s->queue.head != NULL)
        return s->queue.head;
    if (s->shorts.active != NULL)
        return s->shorts.active->queue.head;
    return s->bulks.active != NULL ? s->bulks.active->queue.head : NULL;
}

void sched_set_mode(struct sched *s, enum sched_mode mode)
{
    /* Gather everything that waits into one list in arrival order (an
     * insertion sort: switching is rare, and what waits is a few items per
     * connection), then queue it again under the new mode. */
    struct sched_item *all = NULL, *it;
    while ((it = any_waiting(s)) != NULL) {
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
        it = all;
        all = it->next;
        enqueue(s, it);
    }
}
