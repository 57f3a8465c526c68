#include "server/http/turns.h"

#include <string.h>

void turns_init(struct turns *t, uint64_t share_ns)
{
    memset(t, 0, sizeof *t);
    t->turn = 1; /* a zeroed bucket belongs to no turn */
    t->share_ns = share_ns;
    t->head = t->tail = -1;
    for (int i = 0; i < TURNS_BUCKETS; i++)
        t->bucket[i].next = -1;
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

static unsigned bucket_of(uint64_t flow)
{
    /* The flow is already a hash (client_of): its low bits spread. */
    return (unsigned)((flow ^ (flow >> 32)) & (TURNS_BUCKETS - 1));
}

uint64_t turns_used(const struct turns *t, uint64_t flow)
{
    unsigned b = bucket_of(flow);
    return t->bucket[b].turn == t->turn ? t->bucket[b].used_ns : 0;
}

/* Whether the turn's bound holds the waiting requests back: spent, and one
 * of them has gone in this turn already. */
static bool bound_spent(const struct turns *t)
{
    return t->used_ns >= TURNS_CLIENTS * t->share_ns && t->waited_turn == t->turn;
}

bool turns_admit(struct turns *t, uint64_t flow, bool waited)
{
    bool now =
        t->share_ns == 0 || (turns_used(t, flow) < t->share_ns && (!waited || !bound_spent(t)));
    if (now && waited)
        t->waited_turn = t->turn;
    if (now && !waited)
        t->counters.at_once++;
    else if (!now && !waited)
        t->counters.deferred++;
    return now;
}

void turns_charge(struct turns *t, uint64_t flow, uint64_t ns)
{
    unsigned b = bucket_of(flow);
    if (t->bucket[b].turn != t->turn) {
        t->bucket[b].turn = t->turn;
        t->bucket[b].used_ns = 0;
    }
    t->bucket[b].used_ns += ns;
    t->used_ns += ns;
}

/* B has a request waiting now: it joins the ring, last. */
static void ring_join(struct turns *t, int b)
{
    t->bucket[b].next = -1;
    if (t->tail >= 0)
        t->bucket[t->tail].next = b;
    else
        t->head = b;
    t->tail = b;
    t->active++;
}

/* The ring's first bucket leaves it (nothing waits in it) or goes last. */
static void ring_pop(struct turns *t, bool rejoin)
{
    int b = t->head;
    t->head = t->bucket[b].next;
    if (t->head < 0)
        t->tail = -1;
    t->active--;
    if (rejoin)
        ring_join(t, b);
    else
        t->bucket[b].next = -1;
}

void turns_wait(struct turns *t, struct turns_item *item)
{
    struct turns_bucket *b = &t->bucket[bucket_of(item->flow)];
    item->next = NULL;
    item->queued = true;
    if (b->tail != NULL) {
        b->tail->next = item;
    } else {
        b->head = item;
        ring_join(t, (int)(b - t->bucket));
    }
    b->tail = item;
    t->waiting++;
}

struct turns_item *turns_next_waiting(struct turns *t)
{
    for (unsigned seen = 0; seen < t->active; seen++) {
        struct turns_bucket *b = &t->bucket[t->head];
        if (!turns_admit(t, b->head->flow, true)) {
            if (t->share_ns != 0 && bound_spent(t))
                return NULL;   /* the turn's bound: nobody else either */
            ring_pop(t, true); /* its client's time is spent: the next one */
            continue;
        }
        struct turns_item *item = b->head;
        b->head = item->next;
        if (b->head == NULL)
            b->tail = NULL;
        ring_pop(t, b->head != NULL); /* the next client goes next */
        item->next = NULL;
        item->queued = false;
        t->waiting--;
        return item;
    }
    return NULL;
}

void turns_remove(struct turns *t, struct turns_item *item)
{
    if (!item->queued)
        return;
    int i = (int)bucket_of(item->flow);
    struct turns_bucket *b = &t->bucket[i];
    struct turns_item **p = &b->head, *prev = NULL;
    while (*p != NULL && *p != item) {
        prev = *p;
        p = &(*p)->next;
    }
    if (*p == NULL)
        return;
    *p = item->next;
    if (b->tail == item)
        b->tail = prev;
    item->next = NULL;
    item->queued = false;
    t->waiting--;
    if (b->head != NULL)
        return;
    /* Nothing waits in B any more: out of the ring. */
    int prev_b = -1;
    for (int j = t->head; j >= 0 && j != i; j = t->bucket[j].next)
        prev_b = j;
    if (prev_b >= 0)
        t->bucket[prev_b].next = b->next;
    else
        t->head = b->next;
    if (t->tail == i)
        t->tail = prev_b;
    b->next = -1;
    t->active--;
}
