#ifndef UNCLOG_CLIENTS_H
#define UNCLOG_CLIENTS_H

/* Who holds the connections. A client is an address under a prefix (IPv4
 * /32 and IPv6 /64 by default, client_prefix); its id is that masked
 * address hashed under a secret key. The table counts each client's
 * connections exactly, one entry per distinct client (its masked address),
 * found through a fixed number of buckets (CLIENTS_BUCKETS, by id, with
 * fairq_bucket_of's rule, as every table that shares by client): an entry
 * lives while the client holds a connection, so there are never more than
 * connections.
 * Each client lists its connections in ranked classes (enum client_class),
 * oldest first in each: the connection decides its class (conn.c).
 *
 * At max_connections the client holding the most gives way
 * (clients_make_room): for a newcomer whose client holds at least two
 * fewer, its connection that costs most for the least progress closes:
 * idle first, then a late head, then a body or response below min_rate,
 * then the one busy longest. A newcomer from the top itself is refused.
 * Out of fds, the same client gives up an idle, late or slow connection
 * for whoever waits (clients_give_way). Refusals and evictions are counted
 * by reason (and evictions by class), in all and per bucket. Each bucket
 * also counts its pool time and body bytes of the last second
 * (clients_ran, clients_sent): clients_top ranks who holds the server.
 *
 * Pure: no libuv, no clock; the key is set once at start. A zeroed struct
 * clients is an empty table; it allocates an entry per client and a heap
 * of them, freed as they go. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "server/base/util.h"

#define CLIENTS_BUCKETS 4096 /* a power of two */
#define CLIENTS_TOP     8    /* rows of clients_stats' table of the top clients */

/* Sets the key of client_of's hash (16 bytes, kept secret): called once
 * at start, before any worker forks, so that every worker gives a client
 * the same id. Until then the key is zeros. */
void clients_set_key(const uint8_t key[16]);

/* The client SA belongs to: its address under the prefix (addr_prefix_of)
 * in *OUT when OUT is not NULL. Returns the client's id: that masked
 * address (family, prefix length and bytes) hashed with SipHash under the
 * key (clients_set_key). Another family is one client of its own
 * (family 0). */
uint64_t client_of(const struct sockaddr *sa, unsigned v4_bits, unsigned v6_bits,
                   struct addr_prefix *out);

/* The classes a client's connections give way in, first first. */
enum client_class {
    CLIENT_NONE, /* in no list: not joined yet, or closing */
    CLIENT_IDLE, /* kept alive between requests, or silent and late for its first head */
    CLIENT_LATE, /* its request head begun, and late */
    CLIENT_SLOW, /* a body or response moving below min_rate (rate_meter_slow,
                    server/http/rate_meter.h) */
    CLIENT_BUSY, /* anything else: the one busy longest gives way first */
    CLIENT_CLASSES
};

struct client; /* one distinct client: clients.c's own */
struct budget; /* server/pool/budget.h */

/* One connection's place in the table: embedded in the connection. */
struct client_link {
    struct client_link *prev, *next; /* in its client's list of its class */
    struct client *client;           /* NULL until joined */
    uint32_t bucket;
    uint8_t class; /* enum client_class */
    bool counted;  /* in its client's count: from join until evicted or left */
};

/* Why a newcomer was refused, and why a connection was closed for another. */
enum clients_refusal {
    CLIENTS_FULL,       /* at the limit, and nobody holds two more than the newcomer's client */
    CLIENTS_TOP_CLIENT, /* at the limit, and the newcomer's client holds (about) the most */
    CLIENTS_SHARE,      /* at the limit, and the newcomer's client holds its share or more */
    CLIENTS_REFUSALS
};
enum clients_eviction {
    CLIENTS_FOR_LIMIT, /* max_connections were open: room for a newcomer */
    CLIENTS_FOR_FDS,   /* accept ran out of fds */
    CLIENTS_EVICTIONS
};

struct client_bucket {
    uint32_t idle;             /* its clients' connections in the classes IDLE and LATE */
    uint32_t addresses;        /* distinct clients in it (the chain) */
    uint32_t refused, evicted; /* since the bucket last held no connection */
    struct client *chain;      /* its clients */
    struct addr_prefix addr;   /* the last client that joined */
};

/* What a bucket's clients used in two windows of CLIENTS_WINDOW_MS: the
 * one running now (WINDOW, counted from the loop's clock at 0) and the one
 * before. Rolled when added to or read, so no timer runs per client. */
#define CLIENTS_WINDOW_MS 1000
struct client_usage {
    uint64_t window;     /* the window [0] is, as now_ms / CLIENTS_WINDOW_MS */
    uint64_t pool_ns[2]; /* threadpool run time: [0] that window, [1] the one before */
    uint64_t sent[2];    /* response body bytes handed to the socket, likewise */
};

/* Owned by the server; its connections link themselves in and out. */
struct clients {
    uint32_t conns[CLIENTS_BUCKETS]; /* each bucket's clients' sum: what the top's search reads */
    struct client_bucket bucket[CLIENTS_BUCKETS];
    uint64_t refused[CLIENTS_REFUSALS];
    uint64_t evicted[CLIENTS_EVICTIONS];
    uint64_t evicted_class[CLIENT_CLASSES];     /* the same evictions by the class they were in */
    uint32_t in_class[CLIENT_CLASSES];          /* connections in each class now */
    struct client_usage usage[CLIENTS_BUCKETS]; /* pool time and bytes, last second */
    /* The one ledger of buffer memory by client, which the top's memory
     * reads (server/pool/budget.h); NULL: none, the top shows 0. */
    const struct budget *budget;
    /* The clients holding a connection, in a max-heap by connections:
     * who gives way is its root. Owned, grown as needed, freed when empty. */
    struct client **heap;
    uint32_t nheap, heap_cap;
    uint32_t counted; /* connections counted for a client: the sum of conns[] */
};

/* Counts the connection L of client ID (the masked address ADDR, shown by
 * clients_stats) until clients_leave; L is in no class yet. Returns 0, or
 * -ENOMEM when a new client's entry cannot be allocated (L not joined). */
int clients_join(struct clients *t, struct client_link *l, uint64_t id,
                 const struct addr_prefix *addr);

/* L's connection is gone (listed or not). An evicted one left its client's
 * count when it was chosen (see clients_make_room). */
void clients_leave(struct clients *t, struct client_link *l);

/* L's connection is now in CLASS (the tail of its list), or in none
 * (CLIENT_NONE: closing). Nothing for a link that never joined. */
void clients_set_class(struct clients *t, struct client_link *l, enum client_class class);

/* max_connections are open and a connection of client ID (at ADDR)
 * arrives. When the client holding the most (the heap's root) holds at
 * least two more than client ID (so the swap leaves it no fewer than the
 * newcomer's), returns its first connection in the first class that has
 * one (idle, late, slow, busy) for the caller to close, counted as an
 * eviction for the limit; that connection no longer counts for its client
 * from then on, though it closes later, so that a burst of newcomers in
 * one poll stops at that swap. Else returns NULL, the refusal counted and
 * its reason in *WHY: TOP_CLIENT when client ID holds at least one
 * connection and no fewer than the top less one, else SHARE when it holds
 * its share or more, else FULL. Costs a look
 * along ID's bucket and the head of a list. */
struct client_link *clients_make_room(struct clients *t, uint64_t id,
                                      const struct addr_prefix *addr, enum clients_refusal *why);

/* The re-key behind a load balancer: L's connection counted as the
 * balancer's until its PROXY header named its client, ID at ADDR (the
 * balancer itself for a header that names none). It leaves the balancer's
 * count and is admitted as a new connection of ID would be now: when FULL
 * (it came at max_connections and max_connections others are open),
 * clients_make_room decides with L counted for nobody, its choice in
 * *EVICT for the caller to close; else nothing gives way (*EVICT NULL).
 * Returns 0 with L joined to ID; 1 when refused (counted, its reason in
 * *WHY); -ENOMEM when ID's entry cannot be allocated. On both failures L
 * counts for nobody and its connection is to close. */
int clients_rejoin(struct clients *t, struct client_link *l, uint64_t id,
                   const struct addr_prefix *addr, bool full, struct client_link **evict,
                   enum clients_refusal *why);

/* accept() ran out of fds: returns the first idle, late or slow connection
 * of the client holding the most, when it holds at least two, for the
 * caller to close (counted as an eviction for fds); else NULL. Not a busy
 * one: the connection waiting may be that client's own. */
struct client_link *clients_give_way(struct clients *t);

/* Connections of client ID (at ADDR) now. */
unsigned clients_held(const struct clients *t, uint64_t id, const struct addr_prefix *addr);

/* A threadpool job of client ID ran NS nanoseconds on its thread and
 * completed at NOW_MS (the loop's clock). */
void clients_ran(struct clients *t, uint64_t id, uint64_t ns, uint64_t now_ms);

/* BYTES of a response body of client ID were handed to its socket at NOW_MS. */
void clients_sent(struct clients *t, uint64_t id, uint64_t bytes, uint64_t now_ms);

/* A row of the top: a bucket, what it holds now and what it used in "the
 * last second": the window running at NOW_MS and the whole one before it,
 * so at least the last CLIENTS_WINDOW_MS and at most twice that. */
struct clients_row {
    uint32_t bucket, conns;
    uint64_t pool_ns, sent;
    uint64_t memory;        /* of the buffer budget, held now (by its bucket there) */
    uint32_t pool_permille; /* its share of every client's pool time then */
    uint32_t score_ppm;     /* its shares of pool time, bytes and connections, summed */
};

/* The top clients at NOW_MS into ROWS, first first; returns how many (at
 * most CLIENTS_TOP). A bucket is a candidate when it holds a connection or
 * used the pool or the socket in the last second. Each is ranked by the sum
 * of its three shares: its pool time of all pool time, its bytes of all
 * bytes, its connections of all connections (so a connection hog, a /gzip
 * flood and a bulk download all rank high, and an observer's one
 * connection at most a third); ties go to more pool time, then bytes, then
 * connections.
 * One pass over the buckets to sum, one to rank: only when shown. */
unsigned clients_top(const struct clients *t, uint64_t now_ms,
                     struct clients_row rows[CLIENTS_TOP]);

/* A worker's top as another worker reads it (server/workers/figures.c): each row's
 * client as text (addr_prefix_format), what it holds and used, and the sums of
 * every client of that worker its shares are of. */
#define CLIENTS_TEXT_MAX 48
struct clients_peer_row {
    char client[CLIENTS_TEXT_MAX];
    uint32_t conns, idle, refused, evicted;
    uint32_t addresses; /* distinct clients in its bucket */
    uint64_t pool_ns, sent, memory;
};
struct clients_peer {
    uint64_t all_pool_ns, all_sent, all_conns;
    unsigned n;
    struct clients_peer_row row[CLIENTS_TOP];
};

/* T's top at NOW_MS (clients_top) into OUT. */
void clients_peer(const struct clients *t, uint64_t now_ms, struct clients_peer *out);

struct snapshot;

/* Adds, inside the caller's "connections" object: refused (the sum) and
 * refused_by_reason (full, top_client); evicted (the sum),
 * evicted_by_reason (max_connections, fds) and evicted_by_class (idle,
 * late_head, slow, busy); by_class, the connections in each class now;
 * top_window_ms, how long
 * the last second's figures cover at NOW_MS (1000..1999: this window and
 * the one before); and top_clients, clients_top's rows ranked 1.. (the
 * client, its connections, idle ones, the addresses in its bucket, pool
 * time in µs and share of the pool in thousandths, body bytes sent, buffer
 * memory held now, refusals and evictions).
 * With NPEERS other workers' tops (PEERS), the rows of every top are
 * summed by client and ranked again, each share of the sums of all. */
void clients_stats(const struct clients *t, uint64_t now_ms, const struct clients_peer *peers,
                   unsigned npeers, struct snapshot *s);

#endif
