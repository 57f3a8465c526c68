#include "server/pool/sched.h"

#include <string.h>

#include "server/base/util.h"

void sched_init(struct sched *s, enum sched_mode mode, unsigned threads, unsigned bulk_max)
{
    memset(s, 0, sizeof *s);
    fairq_init(&s->fifo, s->fifo_bucket, 1);
    fairq_init(&s->shorts.queue, s->shorts.bucket, SCHED_BUCKETS);
    fairq_init(&s->bulks.queue, s->bulks.bucket, SCHED_BUCKETS);
    s->mode = mode;
    s->threads = threads > 0 ? threads : 1;
    sched_set_bulk_max(s, bulk_max);
    sched_set_cpu_max(s, 0);
}

/* A cap on the threads one class may hold: N, or at most all but one of
 * them (0: that most). */
static unsigned thread_cap(const struct sched *s, unsigned n)
{
    unsigned most = s->threads > 1 ? s->threads - 1 : 1;
    return n == 0 || n > most ? most : n;
}

void sched_set_bulk_max(struct sched *s, unsigned bulk_max)
{
    s->bulk_max = thread_cap(s, bulk_max);
}

void sched_set_cpu_max(struct sched *s, unsigned cpu_max)
{
    s->cpu_max = thread_cap(s, cpu_max);
}

void sched_set_ahead(struct sched *s, unsigned ahead)
{
    s->ahead = ahead;
}

/* ---- buckets: round robin by bytes between clients ---------------------------- */

static struct sched_item *item_of(struct fairq_node *node)
{
    return node == NULL ? NULL : container_of(node, struct sched_item, node);
}

/* A bucket that starts holding work goes last in the ring, at the tag of
 * the last start unless its own is further on: what it started before
 * counts, time away does not. */
static void fair_append(struct sched_fair *fq, struct sched_item *item)
{
    if (fairq_push(&fq->queue, &item->node, item->client)) {
        uint32_t b = item->node.bucket;
        if (fq->tag[b] < fq->vtime)
            fq->tag[b] = fq->vtime;
    }
}

/* The bucket whose turn it is: the smallest tag; of equal ones, the one
 * that has held work the longest (the first in the ring). */
static uint32_t fair_first_bucket(const struct sched_fair *fq)
{
    int32_t best = fairq_first(&fq->queue);
    for (int32_t b = fairq_next(&fq->queue, (uint32_t)best); b != FAIRQ_NONE;
         b = fairq_next(&fq->queue, (uint32_t)b)) {
        if (fq->tag[b] < fq->tag[best])
            best = b;
    }
    return (uint32_t)best;
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
static struct short_pick short_pick(const struct sched *s, uint32_t b)
{
    struct short_pick pick = {0};
    struct sched_item *oldest = NULL;
    for (struct fairq_node *n = fairq_oldest(&s->shorts.queue, b); n != NULL; n = n->next) {
        struct sched_item *it = item_of(n);
        if (!cpu_allows(s, it))
            continue;
        if (oldest == NULL)
            oldest = pick.item = it;
        else if (it->remaining < pick.item->remaining)
            pick.item = it;
    }
    if (pick.item != oldest && s->shorts.started[b] - oldest->age >= SCHED_SHORT_AGE) {
        pick.item = oldest;
        pick.aged = true;
    }
    return pick;
}

/* The next short job that may start, in bucket *BP: the bucket whose turn
 * it is; while the CPU bound holds, the first in turn (smallest tag, then
 * longest waiting) that has a job it allows. */
static struct short_pick short_next(const struct sched *s, uint32_t *bp)
{
    const struct sched_fair *fq = &s->shorts;
    uint32_t turn = fair_first_bucket(fq);
    struct short_pick pick = short_pick(s, turn), p;
    *bp = turn;
    if (pick.item != NULL || s->running_cpu < s->cpu_max)
        return pick;
    for (int32_t b = fairq_first(&fq->queue); b != FAIRQ_NONE;
         b = fairq_next(&fq->queue, (uint32_t)b)) {
        p = short_pick(s, (uint32_t)b);
        if (p.item != NULL && (pick.item == NULL || fq->tag[b] < fq->tag[*bp])) {
            pick = p;
            *bp = (uint32_t)b;
        }
    }
    return pick;
}

/* Takes ITEM, of bucket B in class FQ: the bucket's tag moves on by its charge. */
static struct sched_item *fair_take(struct sched_fair *fq, uint32_t b, struct sched_item *item)
{
    fq->vtime = fq->tag[b];
    fq->tag[b] += item->cost + SCHED_JOB_CHARGE;
    return item;
}

/* A short job of bucket B starts although its tag is not the smallest:
 * the buckets before it in turn have only CPU-bound work, held by cpu_max.
 * They save no credit while held (their tags come up to B's), or the first
 * of their work that may start would go ahead of everyone's for as long as
 * they were held. */
static void lift_held(struct sched_fair *fq, uint32_t b)
{
    for (int32_t g = fairq_first(&fq->queue); g != FAIRQ_NONE;
         g = fairq_next(&fq->queue, (uint32_t)g)) {
        if (fq->tag[g] < fq->tag[b])
            fq->tag[g] = fq->tag[b];
    }
}

/* ---- the policy ------------------------------------------------------------------ */

static void enqueue(struct sched *s, struct sched_item *item)
{
    item->bulk = item->remaining > SCHED_SHORT_BYTES;
    if (s->mode == SCHED_MODE_FIFO)
        fairq_push(&s->fifo, &item->node, item->client);
    else
        fair_append(item->bulk ? &s->bulks : &s->shorts, item);
    if (item->bulk)
        s->waiting_bulk++;
    else
        s->waiting_short++;
    s->waiting_cpu += item->cpu && !item->bulk;
}

void sched_push(struct sched *s, struct sched_item *item)
{
    uint64_t started = s->shorts.started[fairq_bucket_of(item->client, SCHED_BUCKETS)];
    item->seq = s->seq++;
    item->age = started;
    item->others = s->counters.short_started - started;
    enqueue(s, item);
}

void sched_remove(struct sched *s, struct sched_item *item)
{
    if (!item->node.queued)
        return;
    if (s->mode == SCHED_MODE_FIFO)
        fairq_remove(&s->fifo, &item->node);
    else
        fairq_remove(item->bulk ? &s->bulks.queue : &s->shorts.queue, &item->node);
    if (item->bulk)
        s->waiting_bulk--;
    else
        s->waiting_short--;
    s->waiting_cpu -= item->cpu && !item->bulk;
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
    uint64_t *started = &s->shorts.started[fairq_bucket_of(item->client, SCHED_BUCKETS)];
    uint64_t others = s->counters.short_started - *started - item->others;
    if (others > s->counters.short_others_max)
        s->counters.short_others_max = others;
    s->counters.short_started++;
    (*started)++;
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
    if (s->mode == SCHED_MODE_FIFO) {
        if (s->running >= s->threads)
            return NULL;
        struct sched_item *head = item_of(fairq_oldest(&s->fifo, 0));
        return head != NULL ? start(s, head, false, s->waiting_short > 0) : NULL;
    }
    if (s->running >= s->threads + s->ahead)
        return NULL;
    /* The reserve: with more than one thread, bulk never takes the last.
     * Only short work starts ahead of the threads. */
    bool bulk_may =
        s->bulks.queue.active > 0 && s->running_bulk < s->bulk_max && s->running < s->threads;
    uint32_t b = 0;
    struct short_pick pick = {0};
    if (s->shorts.queue.active > 0)
        pick = short_next(s, &b);
    if (pick.item != NULL && !(bulk_may && s->streak >= SCHED_SHORT_STREAK)) {
        if (bulk_may)
            s->streak++;
        s->counters.short_aged += pick.aged;
        s->counters.cpu_passed += s->waiting_cpu > 0 && s->running_cpu >= s->cpu_max;
        if (s->running_cpu >= s->cpu_max)
            lift_held(&s->shorts, b);
        return start(s, fair_take(&s->shorts, b, pick.item), false, false);
    }
    if (!bulk_may)
        return NULL;
    b = fair_first_bucket(&s->bulks);
    struct sched_item *oldest = item_of(fairq_oldest(&s->bulks.queue, b));
    return start(s, fair_take(&s->bulks, b, oldest), pick.item != NULL, false);
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
    const struct fairq *queues[] = {&s->fifo, &s->shorts.queue, &s->bulks.queue};
    for (size_t i = 0; i < sizeof queues / sizeof *queues; i++) {
        int32_t b = fairq_first(queues[i]);
        if (b != FAIRQ_NONE)
            return item_of(fairq_oldest(queues[i], (uint32_t)b));
    }
    return NULL;
}

void sched_set_mode(struct sched *s, enum sched_mode mode)
{
    /* Gather everything that waits into one list in arrival order (an
     * insertion sort: switching is rare, and what waits is a few items per
     * connection), then queue it again under the new mode. */
    struct fairq_node *all = NULL;
    struct sched_item *it;
    while ((it = any_waiting(s)) != NULL) {
        sched_remove(s, it);
        struct fairq_node **at = &all;
        while (*at != NULL && item_of(*at)->seq < it->seq)
            at = &(*at)->next;
        it->node.next = *at;
        *at = &it->node;
    }
    s->mode = mode;
    s->streak = 0;
    while (all != NULL) {
        it = item_of(all);
        all = all->next;
        enqueue(s, it);
    }
}
