#include "server/http/turns.h"

#include <string.h>

void turns_init(struct turns *t, uint64_t share_ns)
{
    memset(t, 0, sizeof *t);
    t->pass = 1; /* a zeroed bucket belongs to no turn */
    t->share_ns = share_ns;
    fairq_init(&t->queue, t->bucket, TURNS_BUCKETS);
}

void turns_set_share(struct turns *t, uint64_t share_ns)
{
    t->share_ns = share_ns;
}

void turns_new_pass(struct turns *t)
{
    t->pass++;
    t->used_ns = 0;
}

/* What bucket B's clients spent in this pass. */
static uint64_t used(const struct turns *t, uint32_t b)
{
    return t->spent[b].pass == t->pass ? t->spent[b].used_ns : 0;
}

uint64_t turns_used(const struct turns *t, uint64_t client)
{
    return used(t, fairq_bucket_of(client, TURNS_BUCKETS));
}

/* Whether the pass's bound holds the waiting requests back: spent, and one
 * of them has gone in this pass already. */
static bool bound_spent(const struct turns *t)
{
    return t->used_ns >= TURNS_CLIENTS * t->share_ns && t->waited_pass == t->pass;
}

/* turns_admit for a request of bucket B. */
static bool admit(struct turns *t, uint32_t b, bool waited)
{
    bool now = t->share_ns == 0 || (used(t, b) < t->share_ns && (!waited || !bound_spent(t)));
    if (now && waited)
        t->waited_pass = t->pass;
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
    if (sp->pass != t->pass) {
        sp->pass = t->pass;
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
                return NULL;         /* the pass's bound: nobody else either */
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
