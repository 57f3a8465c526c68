#ifndef UNCLOG_SENDER_H
#define UNCLOG_SENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/base/pass.h"
#include "server/http/share.h"

struct snapshot;

/* The sender: the loop's response writes, shared by client
 * (server/http/share.h), http's one write scheduler. Every write of a
 * response takes its turn here: a streamed body's slots (writer.c) and an
 * answer from memory alike. It owns the share, whose passes the loop's
 * pass service (server/base/pass.h) begins; a write that waits wakes the
 * service, so that the loop does not block while it waits. Owned by the
 * server, one per loop. */
struct sender {
    struct share share;
    struct pass_sub sub; /* subscribed to the pass service */
    struct pass *pass;
    uint64_t whole_at_once; /* answers the kernel took whole as they were dispatched */
};

/* A write that takes its turn through the sender: embedded in its owner
 * (a writer's slot, its answer from memory), which GO hands to the socket
 * when its turn comes. */
struct sender_wait {
    struct share_item item; /* item.node.queued: it waits */
    void (*go)(struct sender_wait *t);
};

/* Loop thread: T, BYTES of CLIENT, wants to be written. Returns true when
 * it goes now (the caller writes it); else it waits, and T->go runs at its
 * turn. */
bool sender_admit(struct sender *snd, struct sender_wait *t, uint64_t client, size_t bytes);

/* T, waiting, will not be written (its owner stops): it leaves the queue.
 * Nothing when it does not wait. */
void sender_drop(struct sender *snd, struct sender_wait *t);

/* An answer from memory went whole to the kernel as it was dispatched. */
void sender_count_whole(struct sender *snd);

/* Prepares SND, subscribed to PASS, its passes handing the kernel
 * PASS_BYTES. */
void sender_init(struct sender *snd, struct pass *pass, size_t pass_bytes);

/* Changes the bytes of a pass (send_turn), from the next write on. */
void sender_set_pass_bytes(struct sender *snd, size_t pass_bytes);

/* Adds SND's counters to S, as the object "send". */
void sender_stats(const struct sender *snd, struct snapshot *s);

#endif
