#ifndef UNCLOG_SHARE_H
#define UNCLOG_SHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/base/fairq.h"

/* The send share: the policy that decides which response's write the loop
 * hands the kernel next, as pure code (no loop, no clock).
 *
 * The loop writes a pass at a time (server/base/pass.h). A pass hands the
 * kernel writes until TURN_BYTES have gone (the write that crosses the bound
 * still goes, so a pass always makes progress). While nothing waits and the
 * pass has room, a write goes at once: a lone client, or a server with room
 * to spare, never waits. Once a pass is full, writes wait in their
 * client's bucket (a fair queue, server/base/fairq.h, of SHARE_BUCKETS
 * buckets: nothing is allocated per client), and the next passes serve the
 * buckets by deficit round robin by bytes: each visit adds SHARE_QUANTUM
 * to a client's deficit, and a client may go into debt by at most one
 * write, which it pays back before it writes again. A client with many connections thus gets the
 * same bytes as a client with one while both wait (max-min: a client that
 * wants less than its share gets all it wants, the others share the rest),
 * and a queue that empties leaves only its debt, forgotten once no client
 * waits. Within a client, writes go in the order they came. */

#define SHARE_BUCKETS 1024
#define SHARE_QUANTUM ((size_t)64 << 10)

/* A write waiting for its turn; embedded in its owner (a pump slot). */
struct share_item {
    struct fairq_node node; /* node.queued: it waits */
    uint64_t client;
    size_t bytes;
};

struct share_counters {
    uint64_t at_once;     /* writes that went as they came */
    uint64_t deferred;    /* writes that waited for a later pass */
    uint64_t passes;      /* passes that served waiting writes (/stats "turns") */
    uint64_t contended;   /* writes granted while two clients or more waited */
    uint64_t lag_max;     /* most bytes one waiting client got beyond another since both waited */
    uint64_t clients_max; /* most clients with writes waiting at once */
};

struct share {
    struct fairq queue; /* the writes that wait, by client */
    struct fairq_bucket bucket[SHARE_BUCKETS];
    uint64_t served[SHARE_BUCKETS]; /* bytes granted since the bucket began to wait (see lag) */
    size_t pass_bytes, pass_used;
    struct share_counters counters;
};

/* An empty share whose passes hand the kernel PASS_BYTES (at least 1). */
void share_init(struct share *s, size_t pass_bytes);

/* Changes the bytes of a pass, from the next write on. */
void share_set_pass_bytes(struct share *s, size_t pass_bytes);

/* ITEM (its client and bytes set) wants to be written: returns true if it may
 * go now, false if it waits (share_next hands it out later). */
bool share_admit(struct share *s, struct share_item *item);

/* A new pass begins: the loop passed once more. */
void share_new_pass(struct share *s);

/* The next waiting write this pass may hand the kernel, removed from its
 * queue; NULL when the pass is full or nothing waits. */
struct share_item *share_next(struct share *s);

/* Whether any write waits. */
bool share_waiting(const struct share *s);

/* ITEM, waiting, will not be written (its response stops): leaves its
 * queue. Does nothing when it is not waiting. */
void share_remove(struct share *s, struct share_item *item);

#endif
