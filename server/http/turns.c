#include "server/http/turns.h"

#include <string.h>

void turns_init(struct turns *t, uint64_t share_ns)
{
    memset(t, 0, sizeof *t);
    t->turn = 1; /* a zeroed bucket belongs to no turn */
    t->share_ns = share_ns;
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

bool turns_admit(struct turns *t, uint64_t flow, bool waited)
{
    bool now = t->share_ns == 0 || (turns_used(t, flow) < t->share_ns &&
                                    (!waited || t->used_ns < TURNS_CLIENTS * t->share_ns));
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
