#ifndef UNCLOG_WHOLE_H
#define UNCLOG_WHOLE_H

/* Whole-server figures with workers > 1: each worker publishes its own
 * figures in its slot of a region every worker can read (an anonymous
 * shared mapping made before the fork), and the worker that answers
 * /stats or /metrics merges every slot into its own fresh snapshot, by
 * each figure's rule (snap_merge_of): totals summed over every worker
 * that ever ran in a slot, quantities of now summed or maxed over the
 * running ones, recent windows merged bucket by bucket, settings kept.
 *
 * A slot is written by its worker alone, into the one of its two
 * publications readers are not pointed at, then flipped: a reader copies
 * the current one under its sequence number and never waits, and a worker
 * killed while writing leaves the last whole publication in place. A
 * worker started again in a slot first carries its predecessor's last
 * totals into a part of its own publications that readers add in, so no
 * total goes backwards. Nothing of this exists with workers = 1.
 *
 * A worker that wants exact figures now (server_refresh) moves the
 * region's ask count and wakes the others through their control eventfds;
 * each publishes at once, its publication naming the ask it answers, and
 * the asker merges once every running worker's does (or the wait is over). */

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define WHOLE_PUBLISH_MS 250

struct server;
struct server_refresh;
struct snapshot;
struct whole_region;

/* A worker's own hold on the region (srv->whole). */
struct whole {
    struct whole_region *region;      /* main()'s, shared */
    unsigned worker;                  /* its slot: 1..N */
    uint64_t started_ms;              /* this process's start (uv_now) */
    uv_timer_t timer;                 /* publishes every WHOLE_PUBLISH_MS */
    uv_timer_t wait;                  /* runs while refreshes wait for the others */
    bool timer_open;                  /* whole_start initialised both */
    struct server_refresh *refreshes; /* waiting (their callers own them) */
    uint64_t answered;                /* the last ask a publication of ours answered */
    struct whole_carry *carry;        /* owned: the predecessors' totals */
    bool failed_logged;
};

/* In the master, before the first fork: a region of WORKERS slots. Returns
 * it, or NULL after logging (the workers then answer for themselves). */
struct whole_region *whole_create(unsigned workers);

/* In the master, after the last worker ended. */
void whole_destroy(struct whole_region *r);

/* In worker WORKER (1..N), before it serves: sets srv->whole up on R and
 * carries the slot's last totals (its predecessor's). Returns 0, or a
 * negative UV_E* code with srv->whole left NULL. */
int whole_attach(struct server *srv, struct whole_region *r, unsigned worker);

/* The top clients of every other running worker, for clients_stats: an
 * array (owned by the caller) of *N, or NULL with *N = 0 when there is none
 * or no memory (the answering worker's own top then). */
struct clients_peer *whole_peers(const struct server *srv, unsigned *n);

/* Merges every other slot (and every slot's carried totals) into S, the
 * answering worker's own complete snapshot, and appends the per-worker
 * figures ("workers", "by_worker"). On an allocation failure S fails. */
void whole_merge(const struct server *srv, struct snapshot *s);

#endif
