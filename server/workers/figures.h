#ifndef UNCLOG_FIGURES_H
#define UNCLOG_FIGURES_H

/* Whole-server figures with workers > 1: each worker publishes its own
 * figures in its slot of the region the workers share (control.h), and
 * the worker that answers /stats or /metrics merges every slot into its
 * own fresh snapshot, by each figure's rule (snap_merge_of): totals summed
 * over every worker that ever ran in a slot, quantities of now summed or
 * maxed over the running ones, recent windows merged bucket by bucket,
 * settings kept. Which workers run is control_life's to say.
 *
 * A slot's figures are written by its worker alone, into the one of its
 * two publications readers are not pointed at, then flipped: a reader
 * copies the current one under its sequence number and never waits, and a
 * worker killed while writing leaves the last whole publication in place.
 * A worker started again in a slot first carries its predecessor's last
 * totals into a part of its own publications that readers add in, so no
 * total goes backwards. Nothing of this exists with workers = 1.
 *
 * A worker that wants exact figures now (figures_refresh) moves the
 * region's ask count and wakes the others through their control eventfds;
 * each publishes at once, its publication naming the ask it answers, and
 * the asker merges once every running worker's does (or the wait is over).
 *
 * This room knows nothing of the server that holds it: what it reads of
 * its worker comes through a struct figures_env. */

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define FIGURES_PUBLISH_MS 250

struct clients;
struct clients_peer;
struct control;
struct figures;
struct snapshot;

/* What the figures read of the worker that holds them. */
struct figures_env {
    uv_loop_t *loop;
    struct control *control;       /* the region */
    unsigned worker;               /* its slot: 1..N */
    uint64_t life;                 /* control_join's */
    const uint64_t *requests;      /* requests it has answered */
    const struct clients *clients; /* who holds its connections: its top is published */
    /* Takes this worker's own figures (not merged) into S. */
    void (*own)(const void *arg, struct snapshot *s);
    const void *arg;
};

/* A wait for the other workers' figures; the caller embeds it and keeps it
 * until DONE has run. */
struct figures_wait;
typedef void (*figures_wait_fn)(struct figures_wait *wait);
struct figures_wait {
    struct figures_wait *next; /* the figures' list of waits */
    uint64_t asked;            /* the ask the others' publications must answer */
    uint64_t deadline_ms;      /* uv_now: when DONE runs anyway */
    figures_wait_fn done;
};

/* In worker ENV->worker, before it serves: its hold on the region, with
 * the slot's last totals (its predecessor's) carried. Returns it (the
 * caller owns it: figures_free), or NULL when out of memory. */
struct figures *figures_attach(const struct figures_env *env);

/* Publishes now and then every FIGURES_PUBLISH_MS. Returns 0 or a negative
 * UV_E* code (figures_close then closes what it opened). */
int figures_start(struct figures *f);

/* At the stop: closes its timers if it started. */
void figures_close(struct figures *f);

/* After the loop ran dry. */
void figures_free(struct figures *f);

/* The control eventfd woke this worker: publishes now if another worker
 * asked for figures since the last publication that answered. */
void figures_answer(struct figures *f);

/* Asks every other running worker to publish now; WAIT->done runs later on
 * the loop, once every running worker has, or at DEADLINE_MS (uv_now).
 * Returns false when nothing is to be waited for (DONE never runs). */
bool figures_refresh(struct figures *f, struct figures_wait *wait, figures_wait_fn done,
                     uint64_t deadline_ms);

/* The top clients of every other running worker, for clients_stats: an
 * array (owned by the caller) of *N, or NULL with *N = 0 when there is none
 * or no memory (the answering worker's own top then). */
struct clients_peer *figures_peers(const struct figures *f, unsigned *n);

/* Merges every other slot (and every slot's carried totals) into S, the
 * answering worker's own complete snapshot, and appends the per-worker
 * figures ("workers", "by_worker"). On an allocation failure S fails. */
void figures_merge(struct figures *f, struct snapshot *s);

#endif
