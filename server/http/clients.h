#ifndef UNCLOG_CLIENTS_H
#define UNCLOG_CLIENTS_H

/* Who holds the connections. A client is an address under a prefix (IPv4
 * /32 and IPv6 /64 by default, client_prefix); its id is that masked
 * address hashed. The table counts each client's connections in a fixed
 * number of buckets (CLIENTS_BUCKETS, by id: clients whose ids collide
 * share one, as the scheduler's flows do), so a million addresses cannot
 * grow it. Each bucket lists its idle connections, oldest first: those
 * kept alive between requests, or whose request head is late, silent or
 * slow (the connection decides, conn.c).
 *
 * At max_connections the client holding the most gives way
 * (clients_make_room): an idle connection of the client that holds the
 * most among those with one closes for a newcomer whose client holds at
 * least two fewer, and a newcomer from the top itself is refused. Out of
 * fds, the same client gives an idle connection up for whoever waits
 * (clients_give_way). Refusals and evictions are counted by reason, in all
 * and per bucket. Each bucket also counts its pool time and body bytes of
 * the last second (clients_ran, clients_sent): clients_top ranks who holds
 * the server.
 *
 * Pure: no libuv, no clock. A zeroed struct clients is an empty table. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define CLIENTS_BUCKETS 4096 /* a power of two */
#define CLIENTS_TOP     8    /* rows of clients_stats' table of the top clients */

/* A client: an address with only its first BITS kept. */
struct client_addr {
    uint8_t family; /* AF_INET or AF_INET6; 0: unknown (not an IP peer) */
    uint8_t bits;   /* the prefix length kept */
    uint8_t bytes[16];
};

/* The client SA belongs to: its first V4_BITS (IPv4, and IPv4 mapped into
 * IPv6 as ::ffff:a.b.c.d) or V6_BITS (IPv6), the rest zero, in *OUT when
 * OUT is not NULL. Returns the client's id: that masked address (family,
 * prefix length and bytes) hashed. Another family is one client of its own
 * (family 0). */
uint64_t client_of(const struct sockaddr *sa, unsigned v4_bits, unsigned v6_bits,
                   struct client_addr *out);

/* Writes A as text to BUF (LEN bytes): "127.0.0.2", or with its prefix
 * when bits were masked off ("10.1.2.0/24", "2001:db8:1:2::/64"); "-" for
 * an unknown family. */
void client_format(const struct client_addr *a, char *buf, size_t len);

/* One connection's place in the table: embedded in the connection. */
struct client_link {
    struct client_link *prev, *next; /* in its bucket's idle list, when idle */
    uint32_t bucket;
    bool idle;
    bool counted; /* in its bucket's count: from join until evicted or left */
};

/* Why a newcomer was refused, and why an idle connection was closed. */
enum clients_refusal {
    CLIENTS_FULL,       /* at the limit, and the top client has no idle connection */
    CLIENTS_TOP_CLIENT, /* at the limit, and the newcomer's client holds (about) the most */
    CLIENTS_REFUSALS
};
enum clients_eviction {
    CLIENTS_FOR_LIMIT, /* max_connections were open: room for a newcomer */
    CLIENTS_FOR_FDS,   /* accept ran out of fds */
    CLIENTS_EVICTIONS
};

struct client_bucket {
    uint32_t idle;                       /* connections in the idle list */
    uint32_t refused, evicted;           /* since the bucket last held no connection */
    struct client_link *oldest, *newest; /* the idle list */
    struct client_addr addr;             /* the last client that joined */
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
    uint32_t conns[CLIENTS_BUCKETS]; /* apart from the buckets: what the top's search reads */
    struct client_bucket bucket[CLIENTS_BUCKETS];
    uint64_t refused[CLIENTS_REFUSALS];
    uint64_t evicted[CLIENTS_EVICTIONS];
    struct client_usage usage[CLIENTS_BUCKETS]; /* pool time and bytes, last second */
    uint64_t memory[CLIENTS_BUCKETS];           /* bytes of the buffer budget held now */
    /* Who gives way, as the last pass over the counts found it, while no
     * count and no idle list has changed since: a connect flood refused at
     * the limit pays for one pass, not one each. */
    bool giver_valid;
    uint32_t giver_most; /* the most connections any bucket holds */
    long giver_bucket;   /* the bucket holding the most among those with an idle one, or -1 */
};

/* Counts the connection L of client ID (at ADDR, shown by clients_stats)
 * until clients_leave. */
void clients_join(struct clients *t, struct client_link *l, uint64_t id,
                  const struct client_addr *addr);

/* L's connection is gone (idle or not). An evicted one left its client's
 * count when it was chosen (see clients_make_room). */
void clients_leave(struct clients *t, struct client_link *l);

/* L's connection became idle (kept alive between requests, or its request
 * head late), or busy or closing. */
void clients_set_idle(struct clients *t, struct client_link *l, bool idle);

/* max_connections are open and a connection of client ID arrives. Looks
 * for the client holding the most connections among those with an idle
 * one (the top itself when it has one). Returns that client's longest idle
 * connection for the caller to close, counted as an eviction for the
 * limit, when it holds at least two more than client ID (so the swap
 * leaves it no fewer than the newcomer's); that connection no longer
 * counts for its client from then on, though it closes later, so that a
 * burst of newcomers in one poll stops at that swap. Else returns NULL, the refusal
 * counted and its reason in *WHY: TOP_CLIENT when client ID holds at least
 * one connection and no fewer than the top less one, else FULL. Costs one
 * pass over the bucket counts (CLIENTS_BUCKETS of them, 16 KiB), and only
 * at the limit and after a count or an idle list changed; the idle
 * connection is the head of a list. */
struct client_link *clients_make_room(struct clients *t, uint64_t id, enum clients_refusal *why);

/* accept() ran out of fds: returns the longest idle connection of the
 * client clients_make_room would take one from, when it holds at least
 * two connections, for the caller to close (counted as an eviction for
 * fds); else NULL. */
struct client_link *clients_give_way(struct clients *t);

/* Connections of client ID's bucket now. */
unsigned clients_held(const struct clients *t, uint64_t id);

/* A threadpool job of client ID ran NS nanoseconds on its thread and
 * completed at NOW_MS (the loop's clock). */
void clients_ran(struct clients *t, uint64_t id, uint64_t ns, uint64_t now_ms);

/* BYTES of a response body of client ID were handed to its socket at NOW_MS. */
void clients_sent(struct clients *t, uint64_t id, uint64_t bytes, uint64_t now_ms);

/* A response of client ID took (TAKEN) or gave back BYTES of the buffer
 * budget (max_buffer_memory). */
void clients_memory(struct clients *t, uint64_t id, size_t bytes, bool taken);

/* A row of the top: a bucket, what it holds now and what it used in "the
 * last second": the window running at NOW_MS and the whole one before it,
 * so at least the last CLIENTS_WINDOW_MS and at most twice that. */
struct clients_row {
    uint32_t bucket, conns;
    uint64_t pool_ns, sent;
    uint64_t memory;        /* of the buffer budget, held now */
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

/* A worker's top as another worker reads it (server/whole.c): each row's
 * client as text (client_format), what it holds and used, and the sums of
 * every client of that worker its shares are of. */
#define CLIENTS_TEXT_MAX 48
struct clients_peer_row {
    char client[CLIENTS_TEXT_MAX];
    uint32_t conns, idle, refused, evicted;
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
 * refused_by_reason (full, top_client); evicted_idle (the sum) and
 * evicted_idle_by_reason (max_connections, fds); top_window_ms, how long
 * the last second's figures cover at NOW_MS (1000..1999: this window and
 * the one before); and top_clients, clients_top's rows ranked 1.. (the
 * client, its connections, idle ones, pool time in µs and share of the
 * pool in thousandths, body bytes sent, buffer memory held now, refusals
 * and evictions).
 * With NPEERS other workers' tops (PEERS), the rows of every top are
 * summed by client and ranked again, each share of the sums of all. */
void clients_stats(const struct clients *t, uint64_t now_ms, const struct clients_peer *peers,
                   unsigned npeers, struct snapshot *s);

#endif
