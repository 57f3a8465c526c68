#ifndef UNCLOG_FAIRQ_H
#define UNCLOG_FAIRQ_H

/* The fair queue: the one way every shared resource of the server (the
 * pool, the loop's writes, the loop's time, the buffer budget) keeps its
 * waiters apart by client. Pure: no libuv, no clock, no allocation.
 *
 * A *client* is its id, client_of's keyed hash of its address (so nobody
 * without the key can choose who shares its bucket). The id picks one of
 * a fixed number of *buckets* (fairq_bucket_of, the same rule for every
 * table): clients in one bucket are one client to the queue, and nothing
 * is allocated per client. A bucket holds its waiting nodes first come
 * first served (a node is embedded in what waits: a job, a write, a
 * connection, a reservation). The buckets holding nodes form the *ring*,
 * in the order they began to wait: a bucket joins it last when its first
 * node comes, leaves it when its last goes, and goes last when the owner
 * rotates it. Who is served next is the owner's rule; the queue offers
 * one round robin (fairq_serve: one node per bucket per round) and one by
 * bytes (fairq_drr_next: deficit round robin, each visit adding a quantum
 * to the bucket's *deficit*, a debt of one node at most kept while the
 * bucket waits again in the same busy period, forgotten once the ring has
 * emptied). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAIRQ_NONE (-1)

/* Embedded in what waits. */
struct fairq_node {
    struct fairq_node *next, *prev; /* in its bucket, oldest first */
    uint32_t bucket;                /* its bucket while queued */
    bool queued;
};

struct fairq_bucket {
    struct fairq_node *head, *tail; /* its waiting nodes, oldest first */
    int32_t next, prev;             /* in the ring while it holds nodes; FAIRQ_NONE at the ends */
    bool visited;                   /* deficit round robin: had its quantum at this visit */
    int64_t deficit;                /* bytes it may still take in this round; < 0: its debt */
    uint64_t epoch;                 /* the deficit counts only in this busy period */
};

struct fairq {
    struct fairq_bucket *bucket; /* the owner's array of BUCKETS */
    uint32_t buckets;            /* a power of two */
    int32_t head, tail;          /* the ring, in turn order */
    uint32_t active;             /* buckets in the ring */
    size_t queued;               /* nodes waiting */
    uint64_t epoch;              /* grows each time the ring empties */
};

/* The bucket of client ID among BUCKETS (a power of two): multiplicative
 * (Fibonacci) hashing of the keyed id, its high bits. The one rule every
 * table that shares by client uses. */
uint32_t fairq_bucket_of(uint64_t id, uint32_t buckets);

/* The bucket among BUCKETS of the clients in bucket I of a table of more
 * (both powers of two): fairq_bucket_of(id, BUCKETS) for every id whose
 * bucket there is I. A table of fewer buckets merges whole ones of a
 * larger table, so one table can read another's figures by bucket. */
uint32_t fairq_bucket_fold(uint32_t i, uint32_t buckets);

/* An empty queue over BUCKET[BUCKETS] (a power of two), owned by the caller. */
void fairq_init(struct fairq *q, struct fairq_bucket *bucket, uint32_t buckets);

/* NODE of client ID waits, last in its bucket. Returns true when the
 * bucket had nothing waiting: it joined the ring, last. */
bool fairq_push(struct fairq *q, struct fairq_node *node, uint64_t id);

/* NODE, queued, leaves its bucket; a bucket left empty leaves the ring.
 * Does nothing when NODE is not queued. */
void fairq_remove(struct fairq *q, struct fairq_node *node);

/* The ring's first bucket, or FAIRQ_NONE when nothing waits. */
static inline int32_t fairq_first(const struct fairq *q)
{
    return q->head;
}

/* The bucket after B in the ring, or FAIRQ_NONE after the last. */
static inline int32_t fairq_next(const struct fairq *q, uint32_t b)
{
    return q->bucket[b].next;
}

/* Bucket B's oldest waiting node, or NULL. */
static inline struct fairq_node *fairq_oldest(const struct fairq *q, uint32_t b)
{
    return q->bucket[b].head;
}

/* The ring's first bucket goes last (it is unvisited again). */
void fairq_rotate(struct fairq *q);

/* Round robin: the ring's first bucket gives its oldest node, and goes
 * last, or out of the ring when that was its last. NULL when nothing
 * waits. */
struct fairq_node *fairq_serve(struct fairq *q);

/* Deficit round robin: the bucket whose turn it is, the ring's first
 * once its deficit is positive. Each visit adds QUANTUM; a bucket without
 * credit goes last. When a whole pass finds every bucket in debt, the
 * quanta the following rounds would give before the first of them may
 * take are given at once. Something must wait. The caller takes from the
 * bucket's oldest and charges it (fairq_charge). */
uint32_t fairq_drr_next(struct fairq *q, uint64_t quantum);

/* Bucket B took BYTES: its deficit goes down by them. */
static inline void fairq_charge(struct fairq *q, uint32_t b, uint64_t bytes)
{
    q->bucket[b].deficit -= (int64_t)bytes;
}

#endif
