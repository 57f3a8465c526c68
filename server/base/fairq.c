/* The fair queue: buckets of clients, a FIFO in each, the ring of those
 * that wait, round robin and deficit round robin over it. */
#include "server/base/fairq.h"

uint32_t fairq_bucket_of(uint64_t id, uint32_t buckets)
{
    uint64_t h = id * 0x9e3779b97f4a7c15ull; /* Fibonacci hashing */
    return (uint32_t)(h >> 32) & (buckets - 1);
}

uint32_t fairq_bucket_fold(uint32_t i, uint32_t buckets)
{
    return i & (buckets - 1); /* fairq_bucket_of keeps the low bits of the same word */
}

void fairq_init(struct fairq *q, struct fairq_bucket *bucket, uint32_t buckets)
{
    *q = (struct fairq){
        .bucket = bucket, .buckets = buckets, .head = FAIRQ_NONE, .tail = FAIRQ_NONE};
    for (uint32_t i = 0; i < buckets; i++)
        bucket[i] = (struct fairq_bucket){.next = FAIRQ_NONE, .prev = FAIRQ_NONE};
}

/* ---- the ring ----------------------------------------------------------- */

static void ring_append(struct fairq *q, uint32_t i)
{
    struct fairq_bucket *b = &q->bucket[i];
    b->next = FAIRQ_NONE;
    b->prev = q->tail;
    if (q->tail != FAIRQ_NONE)
        q->bucket[q->tail].next = (int32_t)i;
    else
        q->head = (int32_t)i;
    q->tail = (int32_t)i;
}

static void ring_unlink(struct fairq *q, uint32_t i)
{
    struct fairq_bucket *b = &q->bucket[i];
    if (b->prev != FAIRQ_NONE)
        q->bucket[b->prev].next = b->next;
    else
        q->head = b->next;
    if (b->next != FAIRQ_NONE)
        q->bucket[b->next].prev = b->prev;
    else
        q->tail = b->prev;
    b->next = b->prev = FAIRQ_NONE;
}

/* Bucket I begins to wait: last in the ring, with its debt if it has one
 * from this busy period, never a credit. */
static void join(struct fairq *q, uint32_t i)
{
    struct fairq_bucket *b = &q->bucket[i];
    if (b->epoch != q->epoch || b->deficit > 0)
        b->deficit = 0;
    b->epoch = q->epoch;
    b->visited = false;
    ring_append(q, i);
    q->active++;
}

/* Bucket I has nothing left waiting: out of the ring, keeping only its
 * debt; once nobody waits, every debt is forgotten (a new busy period). */
static void leave(struct fairq *q, uint32_t i)
{
    struct fairq_bucket *b = &q->bucket[i];
    ring_unlink(q, i);
    b->visited = false;
    if (b->deficit > 0)
        b->deficit = 0;
    if (--q->active == 0)
        q->epoch++;
}

void fairq_rotate(struct fairq *q)
{
    uint32_t i = (uint32_t)q->head;
    q->bucket[i].visited = false;
    if (q->head == q->tail)
        return;
    ring_unlink(q, i);
    ring_append(q, i);
}

/* ---- the buckets ---------------------------------------------------------- */

bool fairq_push(struct fairq *q, struct fairq_node *node, uint64_t id)
{
    uint32_t i = fairq_bucket_of(id, q->buckets);
    struct fairq_bucket *b = &q->bucket[i];
    node->bucket = i;
    node->queued = true;
    node->next = NULL;
    node->prev = b->tail;
    q->queued++;
    if (b->tail != NULL) {
        b->tail->next = node;
        b->tail = node;
        return false;
    }
    b->head = b->tail = node;
    join(q, i);
    return true;
}

void fairq_remove(struct fairq *q, struct fairq_node *node)
{
    if (!node->queued)
        return;
    struct fairq_bucket *b = &q->bucket[node->bucket];
    if (node->prev != NULL)
        node->prev->next = node->next;
    else
        b->head = node->next;
    if (node->next != NULL)
        node->next->prev = node->prev;
    else
        b->tail = node->prev;
    node->next = node->prev = NULL;
    node->queued = false;
    q->queued--;
    if (b->head == NULL)
        leave(q, node->bucket);
}

struct fairq_node *fairq_serve(struct fairq *q)
{
    if (q->head == FAIRQ_NONE)
        return NULL;
    uint32_t i = (uint32_t)q->head;
    struct fairq_node *node = q->bucket[i].head;
    fairq_remove(q, node);
    if (q->head == (int32_t)i) /* it still waits: last */
        fairq_rotate(q);
    return node;
}

/* ---- deficit round robin --------------------------------------------------- */

/* A whole pass found every bucket in debt: gives each, at once, the quanta
 * all but the last of which a pass a round would give before the first of
 * them may take. */
static void skip_rounds(struct fairq *q, uint64_t quantum)
{
    uint64_t least = UINT64_MAX;
    for (int32_t i = q->head; i != FAIRQ_NONE; i = q->bucket[i].next) {
        int64_t owed = 1 - q->bucket[i].deficit; /* > 0: deficit <= 0 */
        uint64_t rounds = ((uint64_t)owed + quantum - 1) / quantum;
        if (rounds < least)
            least = rounds;
    }
    for (int32_t i = q->head; i != FAIRQ_NONE; i = q->bucket[i].next)
        q->bucket[i].deficit += (int64_t)((least - 1) * quantum);
}

uint32_t fairq_drr_next(struct fairq *q, uint64_t quantum)
{
    for (uint32_t passed = 0;; passed++) {
        if (passed == q->active) {
            skip_rounds(q, quantum);
            passed = 0;
        }
        struct fairq_bucket *b = &q->bucket[q->head];
        if (!b->visited) {
            b->deficit += (int64_t)quantum;
            b->visited = true;
        }
        if (b->deficit > 0)
            return (uint32_t)q->head;
        fairq_rotate(q);
    }
}
