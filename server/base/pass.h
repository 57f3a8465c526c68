#ifndef UNCLOG_PASS_H
#define UNCLOG_PASS_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

/* The loop's passes, one service per loop. A *pass* is one iteration of the
 * libuv loop: the poll, and every callback until the next poll. Whatever
 * must happen once a pass subscribes here instead of keeping handles of its
 * own: the turns of the loop's time (server/http/turns.h), the send share
 * (server/http/share.h), loop reads (handlers/files/loop_reads.h); and what
 * is read at most once a pass asks pass_new (the file cache's change
 * queue). The service owns the loop's one check, idle and prepare handle
 * for this, and the clock rule.
 *
 * What it guarantees, in this order within a loop iteration:
 *
 *   idle phase     run, of each subscriber whose waiting says yes, in the
 *                  order they subscribed; the idle handle is active exactly
 *                  while some subscriber has work waiting (it is started by
 *                  pass_wake, stopped once no waiting says yes after the
 *                  run callbacks): the poll then does not block.
 *   prepare phase  the pass ends: end of every subscriber, in order.
 *   poll           (I/O callbacks: the pass's work)
 *   check phase    a pass begins: begin of every subscriber, in order.
 *
 * The clock rule: a pass also ends when the loop's clock has moved since
 * the rule last looked (pass_now, pass_new): after a poll that fills its
 * batch of events (1,024), libuv 1.44 polls again at once, in the same poll
 * phase, with no prepare phase between, and updates the clock after each
 * poll; going through a full batch takes longer than the clock's
 * millisecond. The end callbacks then run from pass_now, before it
 * returns. So a pass as the subscribers see it ends at the prepare phase or
 * when the clock moved, whichever comes first; begin runs once a loop
 * iteration, in the check phase.
 *
 * Loop thread only. Each callback is called with the subscriber it was
 * given; a subscriber may call pass_wake and pass_now from any of them. */

struct pass_sub {
    /* A pass begins (check phase, after each poll). NULL: nothing. */
    void (*begin)(struct pass_sub *sub);
    /* Work waits: runs it (idle phase, before the prepare). NULL: the
     * waiting work runs elsewhere (begin), the idle only keeps the poll
     * from blocking. */
    void (*run)(struct pass_sub *sub);
    /* Whether work of the subscriber waits. NULL: never. */
    bool (*waiting)(const struct pass_sub *sub);
    /* The pass ends (prepare phase, or the clock moved). NULL: nothing. */
    void (*end)(struct pass_sub *sub);
    struct pass_sub *next; /* the service's */
};

struct pass {
    uv_check_t check;
    uv_idle_t idle;
    uv_prepare_t prepare;
    struct pass_sub *subs; /* in the order they subscribed */
    uint64_t ended;        /* passes ended: at the prepare, or when the clock moved */
    uint64_t clock_ms;     /* the loop's clock as the clock rule last saw it */
    bool closing;
};

/* Prepares P on LOOP. Its handles run for what keeps the loop alive (the
 * connections): they do not keep it alive themselves. */
void pass_init(struct pass *p, uv_loop_t *loop);

/* SUB (its callbacks set) is called from the next pass on, after those
 * that subscribed before it. */
void pass_subscribe(struct pass *p, struct pass_sub *sub);

/* SUB is called no more. Nothing if it is not subscribed. */
void pass_unsubscribe(struct pass *p, struct pass_sub *sub);

/* A subscriber's work waits (its waiting says yes now): the idle phase
 * runs it, and the loop does not block in the poll until none waits. */
void pass_wake(struct pass *p);

/* The number of passes ended so far, after the clock rule: when the
 * clock has moved since it last looked, the pass ends here (end callbacks
 * run). */
uint64_t pass_now(struct pass *p);

/* Whether a pass began since the last call that passed *SEEN (the first
 * call: true); *SEEN is set to the current pass. What is read once a pass
 * (the file cache's change events) is read when it returns true. Start
 * *SEEN at UINT64_MAX. Always true once P is closing. */
bool pass_new(struct pass *p, uint64_t *seen);

/* Closes P's handles, once. No callback runs after it. */
void pass_close(struct pass *p);

#endif
