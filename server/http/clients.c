/* Who holds the connections: clients by masked address, their counts in
 * fixed buckets, the idle list of each, and who gives way at the limit. */
#include "server/http/clients.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/base/snapshot.h"

/* ---- a client is an address ------------------------------------------- */

/* Keeps the first BITS bits of the LEN bytes at P. */
static void mask(uint8_t *p, unsigned len, unsigned bits)
{
    for (unsigned i = 0; i<len; i++, bits = bits> 8 ? bits - 8 : 0) {
        if (bits < 8)
            p[i] &= (uint8_t)(0xff00u >> bits);
    }
}

uint64_t client_of(const struct sockaddr *sa, unsigned v4_bits, unsigned v6_bits,
                   struct client_addr *out)
{
    static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    struct client_addr a = {0};
    unsigned len = 0;
    if (sa->sa_family == AF_INET) {
        memcpy(a.bytes, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        a.family = AF_INET;
    } else if (sa->sa_family == AF_INET6) {
        const uint8_t *b = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
        bool mapped = memcmp(b, v4_mapped, sizeof v4_mapped) == 0;
        memcpy(a.bytes, mapped ? b + 12 : b, mapped ? 4 : 16);
        a.family = mapped ? AF_INET : AF_INET6;
    }
    if (a.family == AF_INET) {
        len = 4;
        a.bits = (uint8_t)(v4_bits < 32 ? v4_bits : 32);
    } else if (a.family == AF_INET6) {
        len = 16;
        a.bits = (uint8_t)(v6_bits < 128 ? v6_bits : 128);
    }
    mask(a.bytes, len, a.bits);
    /* FNV-1a of what tells clients apart (the family, the prefix, the
     * bytes), then MurmurHash3's finaliser: neighbouring addresses differ
     * only in their last byte, which FNV alone spreads in a pattern. */
    uint64_t h = 14695981039346656037ull;
    const uint8_t head[2] = {a.family, a.bits};
    for (unsigned i = 0; i < 2 + len; i++)
        h = (h ^ (i < 2 ? head[i] : a.bytes[i - 2])) * 1099511628211ull;
    h = (h ^ (h >> 33)) * 0xff51afd7ed558ccdull;
    h = (h ^ (h >> 33)) * 0xc4ceb9fe1a85ec53ull;
    if (out != NULL)
        *out = a;
    return h ^ (h >> 33);
}

void client_format(const struct client_addr *a, char *buf, size_t len)
{
    char text[INET6_ADDRSTRLEN] = "-";
    unsigned full = a->family == AF_INET ? 32 : 128;
    if (a->family == 0 || inet_ntop(a->family, a->bytes, text, sizeof text) == NULL) {
        snprintf(buf, len, "-");
        return;
    }
    if (a->bits < full)
        snprintf(buf, len, "%s/%u", text, a->bits);
    else
        snprintf(buf, len, "%s", text);
}

/* ---- the table ----------------------------------------------------------- */

static uint32_t bucket_of(uint64_t id)
{
    uint64_t h = id * 0x9e3779b97f4a7c15ull; /* Fibonacci hashing, as the scheduler's */
    return (uint32_t)(h >> 32) & (CLIENTS_BUCKETS - 1);
}

void clients_join(struct clients *t, struct client_link *l, uint64_t id,
                  const struct client_addr *addr)
{
    uint32_t b = bucket_of(id);
    struct client_bucket *cb = &t->bucket[b];
    *l = (struct client_link){.bucket = b, .counted = true};
    if (t->conns[b]++ == 0)
        cb->refused = cb->evicted = 0; /* a new holder: its own counts */
    cb->addr = *addr;
    t->giver_valid = false;
}

void clients_set_idle(struct clients *t, struct client_link *l, bool idle)
{
    struct client_bucket *cb = &t->bucket[l->bucket];
    if (idle == l->idle)
        return;
    l->idle = idle;
    t->giver_valid = false;
    if (idle) {
        l->prev = cb->newest;
        l->next = NULL;
        *(cb->newest ? &cb->newest->next : &cb->oldest) = l;
        cb->newest = l;
        cb->idle++;
        return;
    }
    *(l->prev ? &l->prev->next : &cb->oldest) = l->next;
    *(l->next ? &l->next->prev : &cb->newest) = l->prev;
    l->prev = l->next = NULL;
    cb->idle--;
}

/* L's connection no longer counts for its client. */
static void uncount(struct clients *t, struct client_link *l)
{
    if (!l->counted)
        return;
    l->counted = false;
    t->conns[l->bucket]--;
    t->giver_valid = false;
}

void clients_leave(struct clients *t, struct client_link *l)
{
    clients_set_idle(t, l, false);
    uncount(t, l);
}

unsigned clients_held(const struct clients *t, uint64_t id)
{
    return t->conns[bucket_of(id)];
}

/* The most connections any bucket holds, and the bucket holding the most
 * among those with an idle connection (-1: none has one). */
static long giver(struct clients *t, uint32_t *most)
{
    if (t->giver_valid) {
        *most = t->giver_most;
        return t->giver_bucket;
    }
    uint32_t top = 0, with_idle = 0;
    long found = -1;
    for (uint32_t b = 0; b < CLIENTS_BUCKETS; b++) {
        uint32_t n = t->conns[b];
        if (n > top)
            top = n;
        if (n > with_idle && t->bucket[b].idle > 0) {
            with_idle = n;
            found = b;
        }
    }
    *most = t->giver_most = top;
    t->giver_valid = true;
    return t->giver_bucket = found;
}

/* Takes the longest idle connection of bucket B out of its list and out
 * of its client's count: it closes, and the next newcomer of the same poll
 * must not find its client holding it still. */
static struct client_link *evict(struct clients *t, long b, enum clients_eviction why)
{
    struct client_link *l = t->bucket[b].oldest;
    clients_set_idle(t, l, false);
    uncount(t, l);
    t->bucket[b].evicted++;
    t->evicted[why]++;
    return l;
}

struct client_link *clients_make_room(struct clients *t, uint64_t id, enum clients_refusal *why)
{
    uint32_t own = bucket_of(id), held = t->conns[own], most;
    long b = giver(t, &most);
    if (b >= 0 && t->conns[b] >= held + 2)
        return evict(t, b, CLIENTS_FOR_LIMIT);
    *why = held >= 1 && held + 1 >= most ? CLIENTS_TOP_CLIENT : CLIENTS_FULL;
    t->bucket[own].refused++;
    t->refused[*why]++;
    return NULL;
}

struct client_link *clients_give_way(struct clients *t)
{
    uint32_t most;
    long b = giver(t, &most);
    if (b < 0 || t->conns[b] < 2)
        return NULL;
    return evict(t, b, CLIENTS_FOR_FDS);
}

/* ---- what /stats and /metrics show ---------------------------------------- */

static const struct snap_def refused_def = {
    .key = "refused", .merge = SNAP_TOTAL}; /* /metrics: the sum of the next */
static const struct snap_def refused_reason_def = {
    .metric = "unclog_connections_refused_total",
    .kind = SNAP_COUNTER,
    .name_label = "reason",
    .help = "Connections answered 503 and closed at max_connections, by reason: top_client (the "
            "newcomer's client held about the most connections), full (nobody held an idle "
            "connection to give up for it)."};
static const struct snap_def evicted_def = {.key = "evicted_idle",
                                            .merge = SNAP_TOTAL}; /* as refused */
static const struct snap_def evicted_reason_def = {
    .metric = "unclog_connections_evicted_idle_total",
    .kind = SNAP_COUNTER,
    .name_label = "reason",
    .help = "Idle keep-alive connections closed to make room, always the client's holding the "
            "most: for a newcomer at max_connections (max_connections), or for connections "
            "waiting while accept had no fd (fds)."};
/* The address is /stats' alone: as a label, every address that ever
 * reached the top would stay a series of its own in Prometheus. */
static const struct snap_def top_client_def = {
    .key = "client", .kind = SNAP_INFO, .merge = SNAP_OWN};
static const struct snap_def top_conns_def = {
    .key = "connections",
    .metric = "unclog_top_client_connections",
    .help = "Connections held now by the client at this rank (1: the largest sum of its shares of "
            "the pool's time, the bytes sent and the connections, in the last second); /stats "
            "names it. "
            "Clients whose addresses hash alike share a rank.",
    .merge = SNAP_OWN};
static const struct snap_def top_idle_def = {
    .key = "idle",
    .metric = "unclog_top_client_idle_connections",
    .help = "Of those, the idle ones: kept alive between requests, or waiting for a request "
            "head that is late (the first to close under pressure).",
    .merge = SNAP_OWN};
static const struct snap_def top_refused_def = {
    .key = "refused",
    .metric = "unclog_top_client_refused_connections",
    .help = "New connections of the client at this rank refused since it last held none.",
    .merge = SNAP_OWN};
static const struct snap_def top_evicted_def = {
    .key = "evicted",
    .metric = "unclog_top_client_evicted_connections",
    .help = "Idle connections of the client at this rank closed to make room since it last held "
            "none.",
    .merge = SNAP_OWN};

static const struct snap_def top_window_def = {
    .key = "top_window_ms",
    .metric = "unclog_top_clients_window_seconds",
    .unit = SNAP_MS,
    .help = "How long the top clients' last-second figures cover: the window running now and the "
            "whole one before it (1 to 2 s).",
    .merge = SNAP_SAME};
static const struct snap_def top_pool_def = {
    .key = "pool_us",
    .unit = SNAP_US,
    .metric = "unclog_top_client_pool_seconds",
    .help = "Threadpool time (jobs' run time on their threads) of the client at this rank in the "
            "last second (unclog_top_clients_window_seconds).",
    .merge = SNAP_OWN};
static const struct snap_def top_pool_share_def = {
    .key = "pool_permille",
    .unit = SNAP_PERMILLE,
    .metric = "unclog_top_client_pool_ratio",
    .help = "The client at this rank's share of every client's threadpool time in the last "
            "second.",
    .merge = SNAP_OWN};
static const struct snap_def top_sent_def = {
    .key = "bytes",
    .metric = "unclog_top_client_sent_bytes",
    .help = "Response body bytes handed to the sockets of the client at this rank in the last "
            "second.",
    .merge = SNAP_OWN};

static const struct snap_def top_memory_def = {
    .key = "memory_held",
    .metric = "unclog_top_client_memory_held_bytes",
    .help = "Buffer memory (max_buffer_memory) the responses of the client at this rank hold now.",
    .merge = SNAP_OWN};
static const char *const refusal_names[CLIENTS_REFUSALS] = {"full", "top_client"};
static const char *const eviction_names[CLIENTS_EVICTIONS] = {"max_connections", "fds"};
_Static_assert(CLIENTS_TEXT_MAX == SNAP_TEXT_MAX, "a peer's client is a snapshot's text");

static const char *const ranks[CLIENTS_TOP] = {"1", "2", "3", "4", "5", "6", "7", "8"};

/* ---- the last second ----------------------------------------------------- */

/* Bucket B's usage, rolled to the window running at NOW_MS: the window it
 * counted becomes the one before when it was the previous one, else both
 * are over. (The loop's clock never goes back; if it did, the figure
 * would count in the window it has.) */
static struct client_usage *usage_now(struct clients *t, uint32_t b, uint64_t now_ms)
{
    struct client_usage *u = &t->usage[b];
    uint64_t window = now_ms / CLIENTS_WINDOW_MS;
    if (window > u->window) {
        bool next = u->window + 1 == window;
        u->pool_ns[1] = next ? u->pool_ns[0] : 0;
        u->sent[1] = next ? u->sent[0] : 0;
        u->pool_ns[0] = u->sent[0] = 0;
        u->window = window;
    }
    return u;
}

void clients_ran(struct clients *t, uint64_t id, uint64_t ns, uint64_t now_ms)
{
    usage_now(t, bucket_of(id), now_ms)->pool_ns[0] += ns;
}

void clients_sent(struct clients *t, uint64_t id, uint64_t bytes, uint64_t now_ms)
{
    usage_now(t, bucket_of(id), now_ms)->sent[0] += bytes;
}

void clients_memory(struct clients *t, uint64_t id, size_t bytes, bool taken)
{
    uint64_t *m = &t->memory[bucket_of(id)];
    *m = taken ? *m + bytes : *m - bytes;
}

/* What bucket B used in the last second at WINDOW (now_ms /
 * CLIENTS_WINDOW_MS), without rolling it: a reader changes nothing. */
static void used(const struct clients *t, uint32_t b, uint64_t window, uint64_t *pool_ns,
                 uint64_t *sent)
{
    const struct client_usage *u = &t->usage[b];
    *pool_ns = *sent = 0;
    if (u->window == window) {
        *pool_ns = u->pool_ns[0] + u->pool_ns[1];
        *sent = u->sent[0] + u->sent[1];
    } else if (u->window + 1 == window) {
        *pool_ns = u->pool_ns[0];
        *sent = u->sent[0];
    }
}

/* PART of ALL in millionths (0 when ALL is 0). PART stays far below
 * 2^64 / 10^6: two seconds of run time of every thread, or of bytes. */
static uint32_t ppm(uint64_t part, uint64_t all)
{
    return all == 0 ? 0 : (uint32_t)(part * 1000000u / all);
}

/* Whether row A ranks before row B. */
static bool before(const struct clients_row *a, const struct clients_row *b)
{
    if (a->score_ppm != b->score_ppm)
        return a->score_ppm > b->score_ppm;
    if (a->pool_ns != b->pool_ns)
        return a->pool_ns > b->pool_ns;
    if (a->sent != b->sent)
        return a->sent > b->sent;
    return a->conns > b->conns;
}

/* Puts ROW in its place among the N rows of TOP (ranked); returns the new N. */
static unsigned insert(struct clients_row top[CLIENTS_TOP], unsigned n,
                       const struct clients_row *row)
{
    if (n == CLIENTS_TOP && !before(row, &top[n - 1]))
        return n;
    unsigned i = n < CLIENTS_TOP ? n++ : n - 1;
    for (; i > 0 && before(row, &top[i - 1]); i--)
        top[i] = top[i - 1];
    top[i] = *row;
    return n;
}

/* clients_top, with the sums of every client in ALL (pool, sent, conns). */
static unsigned top_of(const struct clients *t, uint64_t now_ms,
                       struct clients_row rows[CLIENTS_TOP], uint64_t all[3])
{
    uint64_t window = now_ms / CLIENTS_WINDOW_MS, all_pool = 0, all_sent = 0, all_conns = 0;
    for (uint32_t b = 0; b < CLIENTS_BUCKETS; b++) {
        uint64_t pool, sent;
        used(t, b, window, &pool, &sent);
        all_pool += pool;
        all_sent += sent;
        all_conns += t->conns[b];
    }
    unsigned n = 0;
    for (uint32_t b = 0; b < CLIENTS_BUCKETS; b++) {
        struct clients_row row = {.bucket = b, .conns = t->conns[b], .memory = t->memory[b]};
        used(t, b, window, &row.pool_ns, &row.sent);
        if (row.conns == 0 && row.pool_ns == 0 && row.sent == 0)
            continue;
        uint32_t shares[3] = {ppm(row.pool_ns, all_pool), ppm(row.sent, all_sent),
                              ppm(row.conns, all_conns)};
        row.pool_permille = shares[0] / 1000;
        row.score_ppm = shares[0] + shares[1] + shares[2];
        n = insert(rows, n, &row);
    }
    all[0] = all_pool;
    all[1] = all_sent;
    all[2] = all_conns;
    return n;
}

unsigned clients_top(const struct clients *t, uint64_t now_ms, struct clients_row rows[CLIENTS_TOP])
{
    uint64_t all[3];
    return top_of(t, now_ms, rows, all);
}

void clients_peer(const struct clients *t, uint64_t now_ms, struct clients_peer *out)
{
    struct clients_row top[CLIENTS_TOP];
    uint64_t all[3];
    out->n = top_of(t, now_ms, top, all);
    out->all_pool_ns = all[0];
    out->all_sent = all[1];
    out->all_conns = all[2];
    for (unsigned i = 0; i < out->n; i++) {
        const struct client_bucket *cb = &t->bucket[top[i].bucket];
        struct clients_peer_row *r = &out->row[i];
        client_format(&cb->addr, r->client, sizeof r->client);
        r->conns = top[i].conns;
        r->idle = cb->idle;
        r->refused = cb->refused;
        r->evicted = cb->evicted;
        r->pool_ns = top[i].pool_ns;
        r->sent = top[i].sent;
        r->memory = top[i].memory;
    }
}

/* The rows of every top summed by client, with the sums they are shares of. */
struct union_top {
    struct clients_peer_row *row; /* owned, or FIXED */
    unsigned n;
    uint64_t all[3];
    struct clients_peer_row fixed[CLIENTS_TOP];
};

static void union_add(struct union_top *u, const struct clients_peer *p)
{
    u->all[0] += p->all_pool_ns;
    u->all[1] += p->all_sent;
    u->all[2] += p->all_conns;
    for (unsigned i = 0; i < p->n; i++) {
        const struct clients_peer_row *r = &p->row[i];
        unsigned k = 0;
        while (k < u->n && strcmp(u->row[k].client, r->client) != 0)
            k++;
        if (k == u->n) {
            u->row[u->n++] = *r;
            continue;
        }
        struct clients_peer_row *to = &u->row[k];
        to->conns += r->conns;
        to->idle += r->idle;
        to->refused += r->refused;
        to->evicted += r->evicted;
        to->pool_ns += r->pool_ns;
        to->sent += r->sent;
        to->memory += r->memory;
    }
}

/* Ranks U's rows as clients_top does (into TOP: indexes in U); returns how
 * many (at most CLIENTS_TOP). */
static unsigned union_rank(const struct union_top *u, struct clients_row top[CLIENTS_TOP])
{
    unsigned n = 0;
    for (unsigned i = 0; i < u->n; i++) {
        const struct clients_peer_row *r = &u->row[i];
        struct clients_row row = {
            .bucket = i, .conns = r->conns, .pool_ns = r->pool_ns, .sent = r->sent};
        uint32_t shares[3] = {ppm(r->pool_ns, u->all[0]), ppm(r->sent, u->all[1]),
                              ppm(r->conns, u->all[2])};
        row.pool_permille = shares[0] / 1000;
        row.score_ppm = shares[0] + shares[1] + shares[2];
        n = insert(top, n, &row);
    }
    return n;
}

/* The top of T and of PEERS, ranked again over their rows together. Without
 * memory for every peer's rows, T's own top alone. */
static void top_stats(const struct clients *t, uint64_t now_ms, const struct clients_peer *peers,
                      unsigned npeers, struct snapshot *s)
{
    struct clients_peer own;
    clients_peer(t, now_ms, &own);
    struct union_top u = {0};
    u.row = u.fixed;
    if (npeers > 0) {
        struct clients_peer_row *rows = malloc((npeers + 1) * CLIENTS_TOP * sizeof *rows);
        u.row = rows != NULL ? rows : u.fixed;
        npeers = rows != NULL ? npeers : 0;
    }
    union_add(&u, &own);
    for (unsigned i = 0; i < npeers; i++)
        union_add(&u, &peers[i]);
    struct clients_row top[CLIENTS_TOP];
    unsigned n = union_rank(&u, top);
    snap_add(s, &top_window_def, CLIENTS_WINDOW_MS + now_ms % CLIENTS_WINDOW_MS);
    snap_open(s, "top_clients", NULL);
    for (unsigned i = 0; i < n; i++) {
        const struct clients_peer_row *r = &u.row[top[i].bucket];
        snap_open(s, ranks[i], "rank");
        snap_add_text(s, &top_client_def, NULL, r->client);
        snap_add(s, &top_conns_def, r->conns);
        snap_add(s, &top_idle_def, r->idle);
        snap_add(s, &top_pool_def, r->pool_ns / 1000);
        snap_add(s, &top_pool_share_def, top[i].pool_permille);
        snap_add(s, &top_sent_def, r->sent);
        snap_add(s, &top_memory_def, r->memory);
        snap_add(s, &top_refused_def, r->refused);
        snap_add(s, &top_evicted_def, r->evicted);
        snap_close(s);
    }
    snap_close(s);
    if (u.row != u.fixed)
        free(u.row);
}

/* SUM_DEF's total (/stats' alone), then in the object NAME the count of
 * each of the N reasons, named as NAMES. */
static void by_reason(struct snapshot *s, const struct snap_def *sum_def, const char *name,
                      const struct snap_def *def, const char *const *names, const uint64_t *counts,
                      unsigned n)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < n; i++)
        sum += counts[i];
    snap_add(s, sum_def, sum);
    snap_open(s, name, NULL);
    for (unsigned i = 0; i < n; i++)
        snap_add_named(s, def, names[i], counts[i]);
    snap_close(s);
}

void clients_stats(const struct clients *t, uint64_t now_ms, const struct clients_peer *peers,
                   unsigned npeers, struct snapshot *s)
{
    by_reason(s, &refused_def, "refused_by_reason", &refused_reason_def, refusal_names, t->refused,
              CLIENTS_REFUSALS);
    by_reason(s, &evicted_def, "evicted_idle_by_reason", &evicted_reason_def, eviction_names,
              t->evicted, CLIENTS_EVICTIONS);
    top_stats(t, now_ms, peers, npeers, s);
}
