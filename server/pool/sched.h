#ifndef UNCLOG_SCHED_H
#define UNCLOG_SCHED_H

/* The gateway's scheduling policy as pure code: the queues of jobs waiting
 * for a pool thread, and the choice of the next one to start. No libuv, no
 * clock, no allocation: the gateway calls it on the loop thread, and unit
 * tests drive it directly.
 *
 * fifo: one queue in arrival order; any job may take any thread (libuv's own
 * behaviour, kept to show the problem).
 * fair:
 *   - short work first: a job is short when what its response still has to
 *     produce, this job included, is at most SCHED_SHORT_BYTES. Short jobs
 *     start in order of those remaining bytes (SRPT), ties in arrival order.
 *   - a reserve: bulk jobs never hold more than bulk_max threads (at most
 *     threads - 1), so short work never waits for a bulk piece to finish.
 *   - no starvation: while bulk work waits and a bulk thread is free, at most
 *     SCHED_SHORT_STREAK short jobs start in a row before a bulk one does.
 *   - bulk shares by bytes across flows (clients): deficit round robin with
 *     a quantum of SCHED_QUANTUM bytes over SCHED_FLOWS buckets, a client
 *     hashed to one (stochastic fair queueing: two clients may share a
 *     bucket, and no client's jobs ever allocate). A client with ten
 *     connections gets no more of the pool than a client with one. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SCHED_SHORT_BYTES  ((uint64_t)256 * 1024)
#define SCHED_SHORT_STREAK 16
#define SCHED_QUANTUM      ((uint64_t)1024 * 1024)
#define SCHED_FLOWS        64

enum sched_mode { SCHED_MODE_FIFO, SCHED_MODE_FAIR };

struct sched_flow;
struct sched_item;

/* A doubly linked queue of items. */
struct sched_queue {
    struct sched_item *head, *tail;
};

/* Embedded in a gateway job: what the policy knows of it. */
struct sched_item {
    struct sched_item *next, *prev; /* in its queue */
    struct sched_flow *flow;        /* a queued bulk item's bucket, else NULL */
    uint64_t cost;                  /* bytes the job reads or deflates */
    uint64_t remaining;             /* bytes its response has yet to produce, job included */
    uint64_t flow_id;               /* who asked (a client): bulk shares are per flow */
    uint64_t seq;                   /* arrival order */
    bool bulk;                      /* decided at push */
    bool queued;
};

/* A bucket of bulk work; in the ring while it holds items. */
struct sched_flow {
    struct sched_flow *next, *prev;
    struct sched_queue queue;
    uint64_t deficit; /* bytes it may still start in this round */
};

/* What the scheduler did: for /stats, and for tests of its invariants. */
struct sched_counters {
    uint64_t short_started, bulk_started;
    uint64_t bulk_over_short; /* bulk started while short work waited, not by the streak bound */
    uint64_t streak_breaks;   /* bulk started by the no-starvation bound */
};

struct sched {
    enum sched_mode mode;
    unsigned threads;               /* the pool's size */
    unsigned bulk_max;              /* fair: the most threads bulk work holds */
    unsigned running, running_bulk; /* started and not yet done */
    struct sched_queue queue;       /* fifo: all work; fair: short work, by remaining */
    struct sched_flow *ring;        /* fair: buckets holding bulk work; the cursor */
    size_t waiting_short, waiting_bulk;
    unsigned streak; /* short jobs started in a row while bulk could have */
    uint64_t seq;
    struct sched_counters counters;
    struct sched_flow flows[SCHED_FLOWS];
};

/* THREADS: the pool's size. BULK_MAX: the most threads bulk work may hold
 * under fair, at least 1 and at most threads - 1 when threads > 1 (0: that
 * maximum). */
void sched_init(struct sched *s, enum sched_mode mode, unsigned threads, unsigned bulk_max);

/* Sets the most threads bulk work may hold (clamped as at init). */
void sched_set_bulk_max(struct sched *s, unsigned bulk_max);

/* Switches the policy; what waits is queued again in arrival order. */
void sched_set_mode(struct sched *s, enum sched_mode mode);

/* Queues ITEM (cost, remaining and flow_id set by the caller). */
void sched_push(struct sched *s, struct sched_item *item);

/* Takes a queued ITEM out, unstarted (a cancel). */
void sched_remove(struct sched *s, struct sched_item *item);

/* The next item to start now, out of its queue and counted as running; NULL
 * when none may start (nothing waits, or no thread may take what does). */
struct sched_item *sched_next(struct sched *s);

/* A started ITEM has finished. */
void sched_done(struct sched *s, const struct sched_item *item);

/* Whether short work waits (partition = auto shrinks pieces then). */
bool sched_short_waiting(const struct sched *s);

#endif
