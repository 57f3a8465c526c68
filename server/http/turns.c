#include "server/http/turns.h"

#include <string.h>

void turns_init(struct turns *t, uint64_t share_ns)
{
    memset(t, 0, sizeof *t);
    t->turn = 1; /* a zeroed bucket belongs to no turn */
    t->share_ns = share_ns;
    fairq_init(&t->queue, t->bucket, TURNS_BUCKETS);
}

void turns_set_share(struct turns *t, uint64_t share_ns)
{
    t->share_ns = share_ns;
}

void turns_next(struct turns *t)
{
    t->turn++;
    t->used_ns = 0;
}

/* What bucket B's clients spent in this turn. */
static uint64_t used(const struct turns *t, uint32_t b)
{
    return t->spent[b].turn == t->turn ? t->spent[b].used_ns : 0;
}

uint64_t turns_used(const struct turns *t, uint64_t client)
{
    return used(t, fairq_bucket_of(client, TURNS_BUCKETS));
}

/* Whether the turn's bound holds the waiting requests back: spent, and one
 * of them has gone in this turn already. */
static bool bound_spent(const struct turns *t)
{
    return t->used_ns >= TURNS_CLIENTS * t->share_ns && t->waited_turn == t->turn;
}

/* turns_admit for a request of bucket B. */
static bool admit(struct turns *t, uint32_t b, bool waited)
{
    bool now = t->share_ns == 0 || (used(t, b) < t->share_ns && (!waited || !bound_spent(t)));
    if (now && waited)
        t->waited_turn = t->turn;
    if (now && !waited)
        t->counters.at_once++;
    else if (!now && !waited)
        t->counters.deferred++;
    return now;
}

bool turns_admit(struct turns *t, uint64_t client, bool waited)
{
    return admit(t, fairq_bucket_of(client, TURNS_BUCKETS), waited);
}

void turns_charge(struct turns *t, uint64_t client, uint64_t ns)
{
    struct turns_spent *sp = &t->spent[fairq_bucket_of(client, TURNS_BUCKETS)];
    if (sp->turn != t->turn) {
        sp->turn = t->turn;
        sp->used_ns = 0;
    }
    sp->used_ns += ns;
    t->used_ns += ns;
}

void turns_wait(struct turns *t, struct fairq_node *node, uint64_t client)
{
    fairq_push(&t->queue, node, client);
}

struct fairq_node *turns_next_waiting(struct turns *t)
{
    for (uint32_t seen = 0; seen < t->queue.active; seen++) {
        if (!admit(t, (uint32_t)fairq_first(&t->queue), true)) {
            if (t->share_ns != 0 && bound_spent(t))
                return NULL;         /* the turn's bound: nobody else either */
            fairq_rotate(&t->queue); /* its client's time is spent: the next one */
            continue;
        }
        return fairq_serve(&t->queue); /* the next client goes next */
    }
    return NULL;
}

void turns_remove(struct turns *t, struct fairq_node *node)
{
    fairq_remove(&t->queue, node);
}
