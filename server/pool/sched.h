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
 *     produce, this job included, is at most SCHED_SHORT_BYTES; the rest is
 *     bulk.
 *   - a reserve: bulk jobs never hold more than bulk_max threads (at most
 *     threads - 1), so short work never waits for a bulk piece to finish.
 *   - CPU-bound short work (a deflate: `cpu`) holds at most cpu_max threads
 *     (the CPUs the server may run on, fewer than the threads): more would
 *     not deflate faster, only take the CPU from the loop and from other
 *     clients' reads. While that many run, the next start goes to the first
 *     short job in turn that is not CPU-bound, and the one after a deflate
 *     ends to the deflate in turn. A client passed over so, holding only
 *     deflates, saves no credit: its tag comes up to the tag of the start
 *     that passed it, or its next job that may start would go ahead of
 *     everyone's for as long as it had been held.
 *   - no starvation: while bulk work waits and a bulk thread is free, at most
 *     SCHED_SHORT_STREAK short jobs start in a row before a bulk one does.
 *   - every class shares by client: within short work and within bulk
 *     work, each client's jobs wait in a bucket of their own (a fair queue,
 *     server/base/fairq.h, of SCHED_BUCKETS: two clients may share a
 *     bucket, and no client's jobs ever allocate). The next start goes
 *     to the bucket that has been charged least: round robin at the grain
 *     of one job (start-time fair queueing). Each start charges its bucket
 *     the job's cost plus SCHED_JOB_CHARGE: what a job holds a thread for
 *     is mostly its system calls until it moves many bytes
 *     (docs/results.md has the figures), so a client of 8 KiB files does
 *     not start ten jobs for another's one of 96 KiB. The bucket with the
 *     smallest tag (its charges) starts next (ties: the one waiting
 *     longest). A bucket that starts holding work begins at the tag of the
 *     last start (vtime), never below: no credit is saved while away. So a
 *     client whose work had all started, and who took no more than its
 *     share, starts its next job before any other client starts two; and
 *     clients that all keep work queued are charged alike, within one job
 *     each. A client with ten connections gets no more of the pool than a
 *     client with one.
 *   - within a client: short jobs by fewest remaining bytes (SRPT, ties in
 *     arrival order), except that its oldest short job goes next once
 *     SCHED_SHORT_AGE of its jobs started since it arrived (the aging
 *     bound); bulk jobs in arrival order. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/base/fairq.h"

#define SCHED_SHORT_BYTES  ((uint64_t)256 * 1024)
#define SCHED_SHORT_STREAK 16
#define SCHED_SHORT_AGE    16
#define SCHED_JOB_CHARGE   ((uint64_t)64 * 1024)
#define SCHED_BUCKETS      1024

enum sched_mode { SCHED_MODE_FIFO, SCHED_MODE_FAIR };

/* Embedded in a gateway job: what the policy knows of it. */
struct sched_item {
    struct fairq_node node; /* in its queue; node.queued: it waits */
    uint64_t cost;          /* bytes the job reads or deflates */
    uint64_t remaining;     /* bytes its response has yet to produce, job included */
    uint64_t client;        /* who asked: shares are per client */
    uint64_t seq;           /* arrival order */
    uint64_t age;           /* its short bucket's starts when it arrived */
    uint64_t others;        /* short starts of other buckets when it arrived */
    bool cpu;               /* CPU-bound (a deflate), set by the caller */
    bool bulk;              /* decided at push */
};

/* One class's buckets under fair (short work, or bulk): the work of the
 * clients of each bucket in arrival order, the buckets holding work in
 * the ring, longest waiting first. */
struct sched_fair {
    struct fairq queue;
    struct fairq_bucket bucket[SCHED_BUCKETS];
    uint64_t tag[SCHED_BUCKETS];     /* bytes it started, counted from vtime when it came back */
    uint64_t started[SCHED_BUCKETS]; /* jobs of its class started from it */
    uint64_t vtime;                  /* the tag of the last start */
};

/* What the scheduler did: for /stats, and for tests of its invariants. */
struct sched_counters {
    uint64_t short_started, bulk_started;
    uint64_t bulk_over_short;  /* bulk started while short work waited, not by the streak bound */
    uint64_t streak_breaks;    /* bulk started by the no-starvation bound */
    uint64_t short_aged;       /* short jobs the aging bound started before a smaller one */
    uint64_t short_others_max; /* the most short jobs of other clients started while one waited */
    uint64_t cpu_passed;       /* short jobs started while the CPU bound held a deflate back */
};

struct sched {
    enum sched_mode mode;
    unsigned threads;               /* the pool's size */
    unsigned ahead;                 /* fair: short jobs started beyond them (see sched_set_ahead) */
    unsigned bulk_max;              /* fair: the most threads bulk work holds */
    unsigned cpu_max;               /* fair: the most threads CPU-bound short work holds */
    unsigned running, running_bulk; /* started and not yet done */
    unsigned running_cpu;           /* CPU-bound short jobs started and not yet done */
    struct fairq fifo;              /* fifo: all work, in one bucket */
    struct fairq_bucket fifo_bucket[1];
    struct sched_fair shorts, bulks; /* fair: short and bulk work, by client */
    size_t waiting_short, waiting_bulk;
    size_t waiting_cpu; /* CPU-bound short jobs queued */
    unsigned streak;    /* short jobs started in a row while bulk could have */
    uint64_t seq;
    struct sched_counters counters;
};

/* THREADS: the pool's size. BULK_MAX: the most threads bulk work may hold
 * under fair, at least 1 and at most threads - 1 when threads > 1 (0: that
 * maximum). */
void sched_init(struct sched *s, enum sched_mode mode, unsigned threads, unsigned bulk_max);

/* Sets the most threads bulk work may hold (clamped as at init). */
void sched_set_bulk_max(struct sched *s, unsigned bulk_max);

/* Sets the most threads CPU-bound short work may hold under fair (clamped
 * as bulk_max; 0: that maximum, the default). */
void sched_set_cpu_max(struct sched *s, unsigned cpu_max);

/* Under fair, lets up to AHEAD short jobs start beyond the threads (0 by
 * default): they wait, in the order the policy chose, in the pool's own
 * queue, so a thread that finishes takes the next at once instead of idling
 * until the loop's next pass hands it one. A bulk job starts only while a
 * thread is free (fifo: every job): none is ever committed ahead of short
 * work that comes after it. The caps on CPU-bound work count them as
 * holding a thread. */
void sched_set_ahead(struct sched *s, unsigned ahead);
/* Switches the policy; what waits is queued again in arrival order. */
void sched_set_mode(struct sched *s, enum sched_mode mode);

/* Queues ITEM (cost, remaining and client set by the caller). */
void sched_push(struct sched *s, struct sched_item *item);

/* Takes a queued ITEM out, unstarted (a cancel). */
void sched_remove(struct sched *s, struct sched_item *item);

/* The next item to start now, out of its queue and counted as running; NULL
 * when none may start (nothing waits, or no thread may take what does). */
struct sched_item *sched_next(struct sched *s);

/* A started ITEM has finished. */
void sched_done(struct sched *s, const struct sched_item *item);

/* Whether short work waits that a piece's thread could go to once the
 * piece ends (partition = auto shrinks pieces then). For a CPU-bound piece
 * (CPU) any; for a read, not the deflates cpu_max holds: a read ending
 * frees a thread, not a place under the CPU bound. */
bool sched_short_waiting(const struct sched *s, bool cpu);

#endif
