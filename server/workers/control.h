#ifndef UNCLOG_CONTROL_H
#define UNCLOG_CONTROL_H

/* workers > 1: the control plane the workers share, so that a live setting
 * reaches every worker.
 *
 * One anonymous shared mapping, made by main() before the master forks:
 * the server's epoch (the master's start on CLOCK_MONOTONIC, which is also
 * libuv's uv_now clock), a generation, the text of every live setting as
 * the config file spells it and when each last changed, and one slot per
 * worker (its life, the generation it has applied, an eventfd another
 * worker writes to wake it, and its figures: server/workers/figures.h). The
 * settings are written and read whole under a process-shared mutex, robust
 * since a worker can die holding it; nothing on the request path takes it.
 * A slot's life and applied generation are atomics (its worker writes them,
 * and the master sets the life of a worker it reaped to 0), so anyone may
 * read them unlocked. This file knows no libuv: the worker's side is in
 * server/reload.c, its figures' in server/workers/figures.c. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "server/base/config.h"
#include "server/base/timeline.h"

#define CONTROL_VALUE_MAX 64 /* a live value's text, NUL included */

struct control;

/* The shared settings as one worker copies them, under the mutex. Indexed
 * like config_key_at; only the live keys' entries mean anything. */
struct control_view {
    uint64_t generation;
    char value[CONFIG_KEYS_MAX][CONTROL_VALUE_MAX];
    bool changed[CONFIG_KEYS_MAX];        /* changed since the start */
    uint64_t changed_ms[CONFIG_KEYS_MAX]; /* when: server uptime, ms */
};

/* Maps the region for NWORKERS workers (indexes 1..NWORKERS), before any
 * fork: the epoch is now, the generation 1, the live settings CFG's, and
 * each slot gets its eventfd. Returns it (the caller owns it: control_free),
 * or NULL after logging why. */
struct control *control_create(unsigned nworkers, const struct config *cfg);

/* Unmaps CTL and closes its eventfds (the master, once every worker has
 * stopped). */
void control_free(struct control *ctl);

/* The server's epoch: CLOCK_MONOTONIC ms at control_create. */
uint64_t control_epoch_ms(const struct control *ctl);

/* How many worker slots CTL has. */
unsigned control_workers(const struct control *ctl);

/* The eventfd of worker INDEX: readable when another worker has news. */
int control_fd(const struct control *ctl, unsigned index);

/* Worker INDEX joins: copies the shared settings to *OUT and gives its
 * slot a new life (never 0, never given in the slot before), both under the
 * mutex, so that a change published later wakes it. Returns the life. It
 * then applies *OUT and says so with control_applied before it serves. */
uint64_t control_join(struct control *ctl, unsigned index, struct control_view *out);

/* The master has reaped worker INDEX: its slot's life is 0 until a new
 * worker joins it. */
void control_worker_gone(struct control *ctl, unsigned index);

/* The one rule of whether a worker runs: the life of the worker running in
 * slot INDEX (from its control_join to its reap), or 0 when none does.
 * Lock-free. A reader that holds something a worker wrote, with the life it
 * wrote it in, knows that worker still runs when the two are equal. */
uint64_t control_life(const struct control *ctl, unsigned index);

/* Copies the shared settings to *OUT, under the mutex. */
void control_read(struct control *ctl, struct control_view *out);

/* Publishes what a worker now runs, NEXT, at uptime NOW_MS: each live key
 * whose value differs from the shared one is written (with BASE not NULL,
 * only those that NEXT also changes from BASE, the configuration the worker
 * ran before: a POST publishes the keys it changed, never a value another
 * worker changed meanwhile) and recorded as changed at NOW_MS; if any
 * was, the generation moves by one. Then copies the result to *OUT, all
 * under the mutex. Returns whether the generation moved. */
bool control_publish(struct control *ctl, const struct config *next, const struct config *base,
                     uint64_t now_ms, struct control_view *out);

/* The dashboard's history, one for the whole server so that a worker
 * started again shows it too. Appends S, a worker's sample of the whole
 * server, unless another worker's is already in for that period (taken
 * less than half a period before); under the mutex. A change that
 * control_publish records is also the history's marker. */
void control_history_sample(struct control *ctl, const struct history_sample *s);

/* Copies the shared history to *OUT, under the mutex. */
void control_history_read(struct control *ctl, struct history *out);

/* Wakes every worker slot but INDEX's (its eventfd). */
void control_wake_others(struct control *ctl, unsigned index);

/* Empties worker INDEX's eventfd (non-blocking). */
void control_drain(struct control *ctl, unsigned index);

/* Worker INDEX has applied GENERATION. */
void control_applied(struct control *ctl, unsigned index, uint64_t generation);

/* Worker INDEX's slot: -1 when no worker runs in it, else 1 when it has
 * applied GENERATION (or a later one), 0 when not yet. Lock-free. */
int control_worker_state(const struct control *ctl, unsigned index, uint64_t generation);

#endif
