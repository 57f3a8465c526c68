#include "server/pool/share.h"

#include <string.h>

void share_init(struct share *s, size_t turn_bytes)
{
    memset(s, 0, sizeof *s);
    s->head = s->tail = -1;
    for (int i = 0; i < SHARE_BUCKETS; i++)
        s->buckets[i].next = -1;
    share_set_turn(s, turn_bytes);
}

void share_set_turn(struct share *s, size_t turn_bytes)
{
    s->turn_bytes = turn_bytes ? turn_bytes : 1;
}

bool share_waiting(const struct share *s)
{
    return s->active > 0;
}

static struct share_bucket *bucket_of(struct share *s, uint64_t flow)
{
    /* The flow is already a hash (client_of): its low bits spread. */
    return &s->buckets[(flow ^ (flow >> 32)) % SHARE_BUCKETS];
}

/* The least a waiting client has been granted since it began to wait. */
static uint64_t least_served(const struct share *s, const struct share_bucket *except)
{
    uint64_t least = UINT64_MAX;
    for (int i = s->head; i >= 0; i = s->buckets[i].next) {
        const struct share_bucket *b = &s->buckets[i];
        if (b != except && b->served < least)
            least = b->served;
    }
    return least;
}

/* B begins to wait: it joins the ring last, level with the least served of
 * those already waiting, with its debt if it has one from this epoch. */
static void activate(struct share *s, struct share_bucket *b)
{
    if (b->epoch != s->epoch || b->credit > 0)
        b->credit = 0;
    b->epoch = s->epoch;
    uint64_t least = least_served(s, NULL);
    b->served = least == UINT64_MAX ? 0 : least;
    b->visited = false;
    b->next = -1;
    int i = (int)(b - s->buckets);
    if (s->tail >= 0)
        s->buckets[s->tail].next = i;
    else
        s->head = i;
    s->tail = i;
    if (++s->active > s->counters.clients_max)
        s->counters.clients_max = s->active;
}

/* B has nothing left waiting: it leaves the ring, keeping only its debt.
 * Once no client waits, every debt is forgotten (a new epoch). */
static void deactivate(struct share *s, struct share_bucket *b)
{
    int i = (int)(b - s->buckets), prev = -1;
    for (int j = s->head; j >= 0 && j != i; j = s->buckets[j].next)
        prev = j;
    if (prev >= 0)
        s->buckets[prev].next = b->next;
    else
        s->head = b->next;
    if (s->tail == i)
        s->tail = prev;
    b->next = -1;
    b->visited = false;
    if (b->credit > 0)
        b->credit = 0;
    if (--s->active == 0)
        s->epoch++;
}

bool share_admit(struct share *s, struct share_item *item)
{
    if (s->active == 0 && s->turn_used < s->turn_bytes) {
        s->turn_used += item->bytes;
        s->counters.at_once++;
        return true;
    }
    struct share_bucket *b = bucket_of(s, item->flow);
    item->next = NULL;
    item->queued = true;
    if (b->tail != NULL) {
        b->tail->next = item;
    } else {
        b->head = item; /* it had nothing waiting: it joins the ring */
        activate(s, b);
    }
    b->tail = item;
    s->counters.deferred++;
    return false;
}

void share_turn(struct share *s)
{
    s->turn_used = 0;
    if (s->active > 0)
        s->counters.turns++;
}

/* The ring's first bucket goes last; it gets a quantum at its next visit. */
static void rotate(struct share *s)
{
    struct share_bucket *b = &s->buckets[s->head];
    b->visited = false;
    if (s->head == s->tail)
        return;
    s->head = b->next;
    b->next = -1;
    s->buckets[s->tail].next = (int)(b - s->buckets);
    s->tail = (int)(b - s->buckets);
}

/* A whole pass found every waiting client in debt: give each the quanta
 * all but the last of which a round-by-round pass would give before the
 * first of them may write, at once. */
static void skip_rounds(struct share *s)
{
    uint64_t least = UINT64_MAX;
    for (int i = s->head; i >= 0; i = s->buckets[i].next) {
        int64_t owed = 1 - s->buckets[i].credit; /* > 0: credit <= 0 */
        uint64_t rounds = ((uint64_t)owed + SHARE_QUANTUM - 1) / SHARE_QUANTUM;
        if (rounds < least)
            least = rounds;
    }
    for (int i = s->head; i >= 0; i = s->buckets[i].next)
        s->buckets[i].credit += (int64_t)((least - 1) * SHARE_QUANTUM);
}

/* Hands out B's first write and records how far ahead that puts B. */
static struct share_item *grant(struct share *s, struct share_bucket *b)
{
    struct share_item *item = b->head;
    b->head = item->next;
    if (b->head == NULL)
        b->tail = NULL;
    item->next = NULL;
    item->queued = false;
    b->credit -= (int64_t)item->bytes;
    b->served += item->bytes;
    s->turn_used += item->bytes;
    if (s->active > 1) {
        s->counters.contended++;
        uint64_t least = least_served(s, b);
        if (b->served > least && b->served - least > s->counters.lag_max)
            s->counters.lag_max = b->served - least;
    }
    if (b->head == NULL)
        deactivate(s, b);
    return item;
}

struct share_item *share_next(struct share *s)
{
    if (s->active == 0 || s->turn_used >= s->turn_bytes)
        return NULL;
    for (unsigned passed = 0;; passed++) {
        if (passed == s->active) {
            skip_rounds(s);
            passed = 0;
        }
        struct share_bucket *b = &s->buckets[s->head];
        if (!b->visited) {
            b->credit += (int64_t)SHARE_QUANTUM;
            b->visited = true;
        }
        if (b->credit > 0)
            return grant(s, b);
        rotate(s);
    }
}

void share_remove(struct share *s, struct share_item *item)
{
    if (!item->queued)
        return;
    struct share_bucket *b = bucket_of(s, item->flow);
    struct share_item **p = &b->head, *prev = NULL;
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
    if (b->head == NULL)
        deactivate(s, b);
}
