#include "server/http/share.h"

#include <string.h>

#include "server/base/util.h"

void share_init(struct share *s, size_t pass_bytes)
{
    memset(s, 0, sizeof *s);
    fairq_init(&s->queue, s->bucket, SHARE_BUCKETS);
    share_set_pass_bytes(s, pass_bytes);
}

void share_set_pass_bytes(struct share *s, size_t pass_bytes)
{
    s->pass_bytes = pass_bytes ? pass_bytes : 1;
}

bool share_waiting(const struct share *s)
{
    return s->queue.active > 0;
}

/* The least a waiting client has been granted since it began to wait. */
static uint64_t least_served(const struct share *s, int32_t except)
{
    uint64_t least = UINT64_MAX;
    for (int32_t b = fairq_first(&s->queue); b != FAIRQ_NONE; b = fairq_next(&s->queue, b)) {
        if (b != except && s->served[b] < least)
            least = s->served[b];
    }
    return least;
}

bool share_admit(struct share *s, struct share_item *item)
{
    if (s->queue.active == 0 && s->pass_used < s->pass_bytes) {
        s->pass_used += item->bytes;
        s->counters.at_once++;
        return true;
    }
    /* A client that begins to wait is level with the least served of
     * those already waiting. */
    uint64_t least = least_served(s, FAIRQ_NONE);
    if (fairq_push(&s->queue, &item->node, item->client)) {
        s->served[item->node.bucket] = least == UINT64_MAX ? 0 : least;
        if (s->queue.active > s->counters.clients_max)
            s->counters.clients_max = s->queue.active;
    }
    s->counters.deferred++;
    return false;
}

void share_new_pass(struct share *s)
{
    s->pass_used = 0;
    if (s->queue.active > 0)
        s->counters.passes++;
}

struct share_item *share_next(struct share *s)
{
    if (s->queue.active == 0 || s->pass_used >= s->pass_bytes)
        return NULL;
    uint32_t b = fairq_drr_next(&s->queue, SHARE_QUANTUM);
    struct share_item *item = container_of(fairq_oldest(&s->queue, b), struct share_item, node);
    fairq_charge(&s->queue, b, item->bytes);
    s->served[b] += item->bytes;
    s->pass_used += item->bytes;
    /* How far ahead that puts B. */
    if (s->queue.active > 1) {
        s->counters.contended++;
        uint64_t least = least_served(s, (int32_t)b);
        if (s->served[b] > least && s->served[b] - least > s->counters.lag_max)
            s->counters.lag_max = s->served[b] - least;
    }
    fairq_remove(&s->queue, &item->node);
    return item;
}

void share_remove(struct share *s, struct share_item *item)
{
    fairq_remove(&s->queue, &item->node);
}
