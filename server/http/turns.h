#ifndef UNCLOG_TURNS_H
#define UNCLOG_TURNS_H

/* The loop's time, shared by client: the policy, as pure code (no loop, no
 * clock; the caller measures and says when a pass begins).
 *
 * In each pass of the loop (server/base/pass.h) each client (its bucket of
 * TURNS_BUCKETS: nothing is allocated per client) may spend
 * SHARE_NS of the loop's time on its requests: parsing them and what their
 * route does at once (a cached file is answered then), and the callbacks
 * of its pool jobs (a response's head, a cache entry). A request whose
 * client has spent its share waits for the next pass, when the waiting
 * requests go first, oldest first, each client again up to its share.
 *
 * Why: with 64 connections a client can have 64 requests ready in one poll.
 * Answered in that pass, they make it as long as all of them take, and
 * every other client's request waits that long for each step it takes on the
 * loop (a read, then one per pool job), while the flood's connections stay
 * in step, poll after poll. With a share, a pass holds at most a share of
 * each client's work, and a request of a client that has spent nothing
 * this pass runs in the poll that brings it.
 *
 * The requests that waited have a bound for all clients together,
 * TURNS_CLIENTS shares of a pass, so that the waiting of many clients (many
 * addresses) cannot make a pass long either; beyond it they wait on, in
 * order of arrival. A request the poll brings does not count against that
 * bound: it goes whenever its client has spent less than its share, so a
 * client that has spent nothing this pass is served in the poll, however
 * much others have waiting. The request that crosses the share still goes
 * (each pass makes progress); a lone client loses nothing but a return to
 * the poll after each share of work. And the first waiting request of a
 * pass whose client has time left goes even when the pass's bound is spent
 * (by work that ran before the waiting ones: timers, write callbacks that
 * resume pipelined requests): the waiting always progress, a request a
 * turn at least. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/base/fairq.h"

#define TURNS_BUCKETS 1024 /* a power of two */
#define TURNS_CLIENTS 4    /* a pass's bound for everyone, in shares */

struct turns_counters {
    uint64_t at_once;  /* requests that went in the pass that brought them */
    uint64_t deferred; /* requests that waited for a later pass */
    uint64_t passes;   /* passes that began with requests waiting (/stats "turns") */
};

/* What a bucket's clients spent of a pass. */
struct turns_spent {
    uint64_t pass;    /* used_ns counts in this pass only */
    uint64_t used_ns; /* what the bucket's clients spent in that pass */
};

struct turns {
    uint64_t share_ns;    /* each client's time per pass; 0: no bound, all goes at once */
    uint64_t pass;        /* the current pass's number */
    uint64_t used_ns;     /* what every client spent in this pass */
    uint64_t waited_pass; /* the last turn in which a waiting request went */
    struct turns_spent spent[TURNS_BUCKETS];
    struct fairq queue; /* the requests that wait (a connection's node), by client */
    struct fairq_bucket bucket[TURNS_BUCKETS];
    struct turns_counters counters;
};

/* An empty policy giving each client SHARE_NS per pass (0: off). */
void turns_init(struct turns *t, uint64_t share_ns);

/* Changes the share, from the next request on. */
void turns_set_share(struct turns *t, uint64_t share_ns);

/* A new pass begins: every client's time is its own again. */
void turns_new_pass(struct turns *t);

/* Whether a request of CLIENT may run in this pass: its client has spent
 * less than its share and, for a request that WAITED, the pass less than
 * its bound or no waiting request has gone in this pass yet. Counts it as
 * gone at once (WAITED false) or after waiting (true) when it may, as
 * deferred when it may not and had not waited. */
bool turns_admit(struct turns *t, uint64_t client, bool waited);

/* CLIENT's work took NS of the loop's time in this pass. */
void turns_charge(struct turns *t, uint64_t client, uint64_t ns);

/* What CLIENT has spent in this pass. */
uint64_t turns_used(const struct turns *t, uint64_t client);

/* Requests waiting now. */
static inline size_t turns_waiting(const struct turns *t)
{
    return t->queue.queued;
}

/* NODE, a request of CLIENT not admitted, waits for a later pass, after
 * its client's other waiting requests. */
void turns_wait(struct turns *t, struct fairq_node *node, uint64_t client);

/* The next waiting request that may run in this pass (turns_admit of a
 * request that waited), removed; NULL when none may. Clients take turns
 * request by request, each while it has time left. Costs a pass over the
 * clients that wait at most, not over their requests. */
struct fairq_node *turns_next_waiting(struct turns *t);

/* NODE, waiting, will not run (its connection closes): leaves its queue.
 * Does nothing when it is not waiting. */
void turns_remove(struct turns *t, struct fairq_node *node);

#endif
