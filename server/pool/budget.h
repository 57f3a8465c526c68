#ifndef UNCLOG_BUDGET_H
#define UNCLOG_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/base/fairq.h"

/* The memory budget for request and response buffers (max_buffer_memory):
 * pump slots, `whole` pieces, /gzip input slices and zlib's state. What
 * does not fit waits, in turn (below), until a response gives its
 * memory back; nothing is refused. A response reserves at once what it
 * needs to make progress (its source's buffers and one slot), so that a
 * holder never waits for more and every wait ends.
 *
 * Small reservations (BUDGET_SMALL or less: a small file, a 64k slice)
 * have a lane of their own, with a reserve of max/8 beyond the budget, so
 * that a few clients stalling big downloads cannot make a small page wait
 * behind them. Within a lane, waiters queue by client (a fair queue,
 * server/base/fairq.h, of BUDGET_BUCKETS, first come first served in each)
 * and the lane grants round robin across the buckets in the order they
 * began to wait, one waiter per turn: a client with many stalled responses
 * cannot keep another's waiting for more than one grant of its own. The
 * waiter whose turn it is (the first in the ring) waits until it fits (no
 * other passes it), so every wait ends.
 *
 * While another client waits, no client takes beyond its fair share: the
 * budget over the clients holding or waiting (buckets, as above). A take
 * that would pass it waits, and the turn passes such a waiter by, unless
 * the client holds nothing yet (a first reservation larger than a share
 * must not starve) or every waiter is past its share (someone must go).
 * Memory no response holds may be *kept* for reuse (idle zlib states,
 * server/pool/zstates.h): it counts against the budget like what is held,
 * but stands in nobody's way. A reservation that would otherwise wait or
 * be refused first has the owner give it all up (`reclaim`), and nothing
 * is kept while anyone waits.
 *
 * Pure: no libuv, no clock; one per server, on its loop. */

#define BUDGET_SMALL   ((size_t)128 << 10)
#define BUDGET_BUCKETS 1024 /* a power of two */

struct budget_waiter {
    struct fairq_node node; /* in its lane; node.queued: it waits */
    size_t bytes;
    uint64_t client; /* who waits, set by the caller before budget_take */
    /* Runs from budget_give or budget_set_max once BYTES are taken for it. */
    void (*granted)(struct budget_waiter *w);
};

/* One lane: its waiters by client, the ring's first bucket the one whose
 * turn it is. */
struct budget_lane {
    struct fairq queue;
    struct fairq_bucket bucket[BUDGET_BUCKETS];
};

struct budget {
    size_t max, held, peak;
    struct budget_lane small, big; /* each round robin across clients */
    size_t waiting;                /* in the lanes now */
    size_t clients;                /* buckets holding or waiting: the share's divisor */
    /* by bucket of clients: what each holds and how many of it wait */
    size_t bucket_held[BUDGET_BUCKETS];
    size_t bucket_waiting[BUDGET_BUCKETS];
    uint64_t waits;     /* reservations that had to wait */
    uint64_t waited_ms; /* their time in the queue (the caller adds it) */
    size_t kept;        /* kept for reuse by no response (budget_keep) */
    /* Frees everything kept and returns its bytes: called when a
     * reservation would otherwise wait or be refused. NULL: nothing is
     * ever kept. */
    size_t (*reclaim)(void *arg);
    void *reclaim_arg;
    /* Given back under pressure (server/pool/pump.c's give_way): the
     * slots, their bytes, and the file bytes read again since; the fills
     * taken back from the pool's queue so (gateway_withdraw). */
    uint64_t given_back, given_back_bytes, reread_bytes, fills_withdrawn;
};

void budget_init(struct budget *b, size_t max);

/* Takes BYTES for W now if they fit and nobody in their lane waits, and
 * returns true; otherwise queues W in its client's bucket (W->client, set
 * by the caller), returns false and calls W->granted later. A reservation
 * larger than the whole budget is taken when nothing else is held, so it
 * runs alone rather than never. */
bool budget_take(struct budget *b, struct budget_waiter *w, size_t bytes,
                 void (*granted)(struct budget_waiter *w));

/* Takes BYTES for CLIENT only if they fit within the budget now and
 * nobody waits (an extra that helps but is not needed, like a second
 * slot). Never queues. */
bool budget_try(struct budget *b, uint64_t client, size_t bytes);

/* Gives BYTES that CLIENT held back, then grants the waiters that now
 * fit. */
void budget_give(struct budget *b, uint64_t client, size_t bytes);

/* Whether a response of CLIENT should give way: another client waits
 * whose next reservation is within its fair share (the budget over the
 * clients holding or waiting; a client holding nothing is always within),
 * and CLIENT's bucket holds beyond its share. False while nobody waits:
 * the budget is work-conserving; false too while every waiter is past its
 * share: memory is not handed round among clients all at their share. */
bool budget_gives_way(const struct budget *b, uint64_t client);

/* What a client's bucket may hold and not give way now (budget_gives_way):
 * the fair share, or SIZE_MAX when nobody needs anything given. Worked out
 * once for a walk over many responses. */
size_t budget_give_above(const struct budget *b);

static inline bool budget_gives(const struct budget *b, size_t above, uint64_t client)
{
    return b->bucket_held[fairq_bucket_of(client, BUDGET_BUCKETS)] > above;
}

/* What the clients in bucket BUCKET of a table of BUDGET_BUCKETS or more
 * (fairq_bucket_of's rule) hold of the budget: their bucket's holding here
 * (fairq_bucket_fold), shared by every client in it, since they are one
 * client to the budget. The one ledger of buffer memory by client,
 * whichever call took it (a take, a try, a grant): the top clients'
 * memory_held is read from it (server/http/clients.h). */
size_t budget_held_in(const struct budget *b, uint32_t bucket);

/* Takes a queued W out of its queue; nothing was taken for it. */
void budget_cancel(struct budget *b, struct budget_waiter *w);

/* Counts BYTES that no response holds as kept for reuse, if they fit
 * within the budget now and nobody waits; false otherwise (the caller then
 * frees them). Needs a reclaim callback. */
bool budget_keep(struct budget *b, size_t bytes);

/* BYTES kept are in use again or freed: no longer counted as kept. */
void budget_unkeep(struct budget *b, size_t bytes);

/* A reload: the new MAX applies to what comes and to who waits. */
void budget_set_max(struct budget *b, size_t max);

struct snapshot;

/* Appends the budget's figures to S ("memory": the budget, what is held
 * now and at most, who waits and waited, for how long). */
void budget_stats(const struct budget *b, struct snapshot *s);

#endif
