/* Who holds the connections: clients by masked address, each counted
 * exactly and found through fixed buckets, their connections in ranked
 * classes, a heap of who holds the most, and who gives way at the limit. */
#include "server/http/clients.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/base/fairq.h"
#include "server/base/siphash.h"
#include "server/base/snapshot.h"
#include "server/pool/budget.h"

/* ---- a client is an address ------------------------------------------- */

/* The key of client_of's hash: set before the first connection (and
 * before workers fork, so that they share it), read-only afterwards. */
static uint8_t client_key[SIPHASH_KEY_LEN];

void clients_set_key(const uint8_t key[SIPHASH_KEY_LEN])
{
    memcpy(client_key, key, sizeof client_key);
}

uint64_t client_of(const struct sockaddr *sa, unsigned v4_bits, unsigned v6_bits,
                   struct addr_prefix *out)
{
    struct addr_prefix a;
    addr_prefix_of(sa, v4_bits, v6_bits, &a);
    unsigned len = a.family == AF_INET ? 4 : a.family == AF_INET6 ? 16 : 0;
    /* What tells clients apart (the family, the prefix, the bytes), keyed:
     * without the key, nobody can pick an address that shares a bucket
     * with another's. */
    uint8_t text[2 + sizeof a.bytes] = {a.family, a.bits};
    memcpy(text + 2, a.bytes, len);
    if (out != NULL)
        *out = a;
    return siphash24(client_key, text, 2 + len);
}

/* ---- the table ----------------------------------------------------------- */

/* A distinct client: owned by the table, from its first connection's join
 * to its last one's leave. */
struct client {
    struct addr_prefix addr;
    uint64_t id;
    uint32_t conns;      /* counted connections */
    uint32_t links;      /* joined and not left: counted, or evicted and closing */
    uint32_t heap_at;    /* its index in the heap while conns > 0 */
    struct client *next; /* in its bucket's chain */
    struct {
        struct client_link *oldest, *newest;
    } list[CLIENT_CLASSES]; /* [CLIENT_NONE] unused */
};

/* Its bucket: the rule of every table that shares by client. */
static uint32_t bucket_of(uint64_t id)
{
    return fairq_bucket_of(id, CLIENTS_BUCKETS);
}

static bool same_addr(const struct addr_prefix *a, const struct addr_prefix *b)
{
    return a->family == b->family && a->bits == b->bits &&
           memcmp(a->bytes, b->bytes, sizeof a->bytes) == 0;
}

/* Client ID at ADDR, or NULL when it holds nothing. */
static struct client *find(const struct clients *t, uint64_t id, const struct addr_prefix *addr)
{
    struct client *c = t->bucket[bucket_of(id)].chain;
    while (c != NULL && !(c->id == id && same_addr(&c->addr, addr)))
        c = c->next;
    return c;
}

/* ---- the heap of clients by connections ---- */

static void heap_put(struct clients *t, uint32_t i, struct client *c)
{
    t->heap[i] = c;
    c->heap_at = i;
}

static void sift_up(struct clients *t, uint32_t i)
{
    struct client *c = t->heap[i];
    while (i > 0 && t->heap[(i - 1) / 2]->conns < c->conns) {
        heap_put(t, i, t->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_put(t, i, c);
}

static void sift_down(struct clients *t, uint32_t i)
{
    struct client *c = t->heap[i];
    for (;;) {
        uint32_t k = 2 * i + 1;
        if (k >= t->nheap)
            break;
        if (k + 1 < t->nheap && t->heap[k + 1]->conns > t->heap[k]->conns)
            k++;
        if (t->heap[k]->conns <= c->conns)
            break;
        heap_put(t, i, t->heap[k]);
        i = k;
    }
    heap_put(t, i, c);
}

/* Room for one more client in the heap: false when it cannot grow. */
static bool heap_reserve(struct clients *t)
{
    if (t->nheap < t->heap_cap)
        return true;
    uint32_t cap = t->heap_cap ? 2 * t->heap_cap : 64;
    struct client **grown = realloc(t->heap, cap * sizeof *grown);
    if (grown == NULL)
        return false;
    t->heap = grown;
    t->heap_cap = cap;
    return true;
}

static void heap_remove(struct clients *t, struct client *c)
{
    uint32_t i = c->heap_at;
    struct client *last = t->heap[--t->nheap];
    if (i < t->nheap) {
        heap_put(t, i, last);
        sift_up(t, i);
        sift_down(t, last->heap_at);
    }
    if (t->nheap == 0) {
        free(t->heap);
        t->heap = NULL;
        t->heap_cap = 0;
    }
}

/* ---- joining and leaving ---- */

int clients_join(struct clients *t, struct client_link *l, uint64_t id,
                 const struct addr_prefix *addr)
{
    uint32_t b = bucket_of(id);
    struct client_bucket *cb = &t->bucket[b];
    struct client *c = find(t, id, addr);
    /* Room in the heap first: a client in it cannot fail to count. */
    if ((c == NULL || c->conns == 0) && !heap_reserve(t))
        return -ENOMEM;
    if (c == NULL) {
        c = calloc(1, sizeof *c);
        if (c == NULL)
            return -ENOMEM;
        c->addr = *addr;
        c->id = id;
        c->next = cb->chain;
        cb->chain = c;
        cb->addresses++;
    }
    *l = (struct client_link){.client = c, .bucket = b, .counted = true};
    c->links++;
    if (c->conns++ == 0) {
        t->heap[t->nheap++] = c;
        c->heap_at = t->nheap - 1;
    }
    sift_up(t, c->heap_at);
    t->counted++;
    if (t->conns[b]++ == 0)
        cb->refused = cb->evicted = 0; /* a new holder: its own counts */
    cb->addr = *addr;
    return 0;
}

static bool counts_as_idle(unsigned class)
{
    return class == CLIENT_IDLE || class == CLIENT_LATE;
}

void clients_set_class(struct clients *t, struct client_link *l, enum client_class class)
{
    struct client *c = l->client;
    if (c == NULL || class == l->class)
        return;
    struct client_bucket *cb = &t->bucket[l->bucket];
    if (l->class != CLIENT_NONE) {
        *(l->prev ? &l->prev->next : &c->list[l->class].oldest) = l->next;
        *(l->next ? &l->next->prev : &c->list[l->class].newest) = l->prev;
        l->prev = l->next = NULL;
        cb->idle -= counts_as_idle(l->class);
        t->in_class[l->class]--;
    }
    l->class = (uint8_t) class;
    if (class == CLIENT_NONE)
        return;
    l->prev = c->list[class].newest;
    l->next = NULL;
    *(l->prev ? &l->prev->next : &c->list[class].oldest) = l;
    c->list[class].newest = l;
    cb->idle += counts_as_idle(class);
    t->in_class[class]++;
}

/* L's connection no longer counts for its client. */
static void uncount(struct clients *t, struct client_link *l)
{
    struct client *c = l->client;
    if (!l->counted)
        return;
    l->counted = false;
    t->conns[l->bucket]--;
    t->counted--;
    if (--c->conns == 0)
        heap_remove(t, c);
    else
        sift_down(t, c->heap_at);
}

void clients_leave(struct clients *t, struct client_link *l)
{
    struct client *c = l->client;
    if (c == NULL)
        return;
    clients_set_class(t, l, CLIENT_NONE);
    uncount(t, l);
    l->client = NULL;
    if (--c->links > 0)
        return;
    struct client_bucket *cb = &t->bucket[l->bucket];
    struct client **p = &cb->chain;
    while (*p != c)
        p = &(*p)->next;
    *p = c->next;
    cb->addresses--;
    free(c);
}

unsigned clients_held(const struct clients *t, uint64_t id, const struct addr_prefix *addr)
{
    const struct client *c = find(t, id, addr);
    return c != NULL ? c->conns : 0;
}

/* ---- who gives way ---- */

/* The first connection of C in the classes up to LAST, the first class first. */
static struct client_link *first_of(const struct client *c, enum client_class last)
{
    for (unsigned k = CLIENT_IDLE; k <= last; k++) {
        if (c->list[k].oldest != NULL)
            return c->list[k].oldest;
    }
    return NULL;
}

/* Takes L out of its list and out of its client's count: it closes, and
 * the next newcomer of the same poll must not find its client holding it
 * still. */
static struct client_link *evict(struct clients *t, struct client_link *l,
                                 enum clients_eviction why)
{
    t->evicted_class[l->class]++;
    clients_set_class(t, l, CLIENT_NONE);
    uncount(t, l);
    t->bucket[l->bucket].evicted++;
    t->evicted[why]++;
    return l;
}

struct client_link *clients_make_room(struct clients *t, uint64_t id,
                                      const struct addr_prefix *addr, enum clients_refusal *why)
{
    const struct client *own = find(t, id, addr);
    uint32_t held = own != NULL ? own->conns : 0;
    struct client *top = t->nheap > 0 ? t->heap[0] : NULL;
    uint32_t most = top != NULL ? top->conns : 0;
    /* The connections over the clients holding them, the newcomer's among
     * them: a client at its share takes none from another, so clients
     * that all hold about their share refuse each other's newcomers
     * rather than close each other's connections in turn. */
    uint32_t clients = t->nheap + (held == 0);
    bool within = (uint64_t)held * clients < t->counted;
    if (top != NULL && within && most >= held + 2) {
        struct client_link *l = first_of(top, CLIENT_BUSY);
        if (l != NULL)
            return evict(t, l, CLIENTS_FOR_LIMIT);
    }
    *why = held >= 1 && held + 1 >= most ? CLIENTS_TOP_CLIENT
           : within                      ? CLIENTS_FULL
                                         : CLIENTS_SHARE;
    t->bucket[bucket_of(id)].refused++;
    t->refused[*why]++;
    return NULL;
}

int clients_rejoin(struct clients *t, struct client_link *l, uint64_t id,
                   const struct addr_prefix *addr, bool full, struct client_link **evict,
                   enum clients_refusal *why)
{
    /* Out of the balancer's count first: the decision is the one for a
     * newcomer, which holds nothing yet. */
    clients_leave(t, l);
    *evict = full ? clients_make_room(t, id, addr, why) : NULL;
    if (full && *evict == NULL)
        return 1;
    return clients_join(t, l, id, addr);
}

struct client_link *clients_give_way(struct clients *t)
{
    struct client *top = t->nheap > 0 ? t->heap[0] : NULL;
    if (top == NULL || top->conns < 2)
        return NULL;
    struct client_link *l = first_of(top, CLIENT_SLOW);
    return l != NULL ? evict(t, l, CLIENTS_FOR_FDS) : NULL;
}

/* ---- what /stats and /metrics show ---------------------------------------- */

static const struct snap_def refused_def = {
    .key = "refused", .merge = SNAP_TOTAL}; /* /metrics: the sum of the next */
static const struct snap_def refused_reason_def = {
    .metric = "unclog_connections_refused_total",
    .kind = SNAP_COUNTER,
    .name_label = "reason",
    .help = "Connections answered 503 and closed at max_connections, by reason: top_client (the "
            "newcomer's client held about the most connections), share (it held its share, the "
            "connections over the clients holding them, or more), full (nobody held two more than "
            "its client)."};
static const struct snap_def evicted_def = {.key = "evicted", .merge = SNAP_TOTAL}; /* as refused */
static const struct snap_def evicted_reason_def = {
    .metric = "unclog_connections_evicted_total",
    .kind = SNAP_COUNTER,
    .name_label = "reason",
    .help = "Connections closed to make room, always of the client holding the most: for a "
            "newcomer at max_connections (max_connections), or for connections waiting while "
            "accept had no fd (fds)."};
static const struct snap_def evicted_class_def = {
    .metric = "unclog_connections_evicted_by_class_total",
    .kind = SNAP_COUNTER,
    .name_label = "class",
    .help = "The same evictions by what the connection was doing, the first to give way first: "
            "idle (kept alive, or silent and late for its first request), late_head (a request "
            "head begun and late), slow (a body or response moving below min_rate), busy (the "
            "one busy longest, at max_connections only)."};
static const struct snap_def class_now_def = {
    .metric = "unclog_connections_by_class",
    .name_label = "class",
    .help = "Connections now by what they are doing, in the order they give way: idle, "
            "late_head, slow (a body or response moving below min_rate), busy."};
/* The address is /stats' alone: as a label, every address that ever
 * reached the top would stay a series of its own in Prometheus. */
static const struct snap_def top_client_def = {
    .key = "client", .kind = SNAP_INFO, .merge = SNAP_OWN, .private = true};
static const struct snap_def top_conns_def = {
    .key = "connections",
    .metric = "unclog_top_client_connections",
    .help = "Connections held now by the client at this rank (1: the largest sum of its shares of "
            "the pool's time, the bytes sent and the connections, in the last second); /stats "
            "names it. "
            "Clients whose addresses hash alike share a rank (see addresses).",
    .merge = SNAP_OWN};
static const struct snap_def top_idle_def = {
    .key = "idle",
    .metric = "unclog_top_client_idle_connections",
    .help = "Of those, the idle ones: kept alive between requests, or waiting for a request "
            "head that is late (the first to close under pressure).",
    .merge = SNAP_OWN};
static const struct snap_def top_addresses_def = {
    .key = "addresses",
    .metric = "unclog_top_client_addresses",
    .help = "Distinct clients (addresses under client_prefix) sharing the rank: more than 1 when "
            "their addresses hash alike. Connections are counted and given up by client, "
            "exactly.",
    .merge = SNAP_OWN};
static const struct snap_def top_refused_def = {
    .key = "refused",
    .metric = "unclog_top_client_refused_connections",
    .help = "New connections of the client at this rank refused since it last held none.",
    .merge = SNAP_OWN};
static const struct snap_def top_evicted_def = {
    .key = "evicted",
    .metric = "unclog_top_client_evicted_connections",
    .help = "Connections of the client at this rank closed to make room since it last held none.",
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
    .help = "Buffer memory (max_buffer_memory) the responses of the client at this rank hold now, "
            "as the budget counts it (with any client sharing its bucket there).",
    .merge = SNAP_OWN};
static const char *const refusal_names[CLIENTS_REFUSALS] = {"full", "top_client", "share"};
static const char *const eviction_names[CLIENTS_EVICTIONS] = {"max_connections", "fds"};
/* [CLIENT_NONE] is never counted: an evicted connection was in a list. */
static const char *const class_names[CLIENT_CLASSES] = {"-", "idle", "late_head", "slow", "busy"};
_Static_assert(CLIENTS_TEXT_MAX == SNAP_TEXT_MAX, "a peer's client is a snapshot's text");
_Static_assert(CLIENTS_BUCKETS >= BUDGET_BUCKETS, "a bucket here folds into one of the budget's");

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
        struct clients_row row = {.bucket = b, .conns = t->conns[b]};
        used(t, b, window, &row.pool_ns, &row.sent);
        if (row.conns == 0 && row.pool_ns == 0 && row.sent == 0)
            continue;
        row.memory = t->budget != NULL ? budget_held_in(t->budget, b) : 0;
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
        addr_prefix_format(&cb->addr, r->client, sizeof r->client);
        r->conns = top[i].conns;
        r->idle = cb->idle;
        r->addresses = cb->addresses;
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
        to->addresses = to->addresses > r->addresses ? to->addresses : r->addresses;
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
        snap_add(s, &top_addresses_def, r->addresses);
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

/* SUM_DEF's total (/stats' alone) unless NULL, then in the object NAME the
 * count of each of the N reasons from the FIRST, named as NAMES. */
static void by_reason(struct snapshot *s, const struct snap_def *sum_def, const char *name,
                      const struct snap_def *def, const char *const *names, const uint64_t *counts,
                      unsigned first, unsigned n)
{
    uint64_t sum = 0;
    for (unsigned i = first; i < n; i++)
        sum += counts[i];
    if (sum_def != NULL)
        snap_add(s, sum_def, sum);
    snap_open(s, name, NULL);
    for (unsigned i = first; i < n; i++)
        snap_add_named(s, def, names[i], counts[i]);
    snap_close(s);
}

void clients_stats(const struct clients *t, uint64_t now_ms, const struct clients_peer *peers,
                   unsigned npeers, struct snapshot *s)
{
    by_reason(s, &refused_def, "refused_by_reason", &refused_reason_def, refusal_names, t->refused,
              0, CLIENTS_REFUSALS);
    by_reason(s, &evicted_def, "evicted_by_reason", &evicted_reason_def, eviction_names, t->evicted,
              0, CLIENTS_EVICTIONS);
    by_reason(s, NULL, "evicted_by_class", &evicted_class_def, class_names, t->evicted_class,
              CLIENT_IDLE, CLIENT_CLASSES);
    uint64_t now[CLIENT_CLASSES];
    for (unsigned k = 0; k < CLIENT_CLASSES; k++)
        now[k] = t->in_class[k];
    by_reason(s, NULL, "by_class", &class_now_def, class_names, now, CLIENT_IDLE, CLIENT_CLASSES);
    top_stats(t, now_ms, peers, npeers, s);
}
