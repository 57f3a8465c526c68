#ifndef UNCLOG_CLIENTS_H
#define UNCLOG_CLIENTS_H

/* Who holds the connections. A client is an address under a prefix (IPv4
 * /32 and IPv6 /64 by default, client_prefix); its id is that masked
 * address hashed. The table counts each client's connections in a fixed
 * number of buckets (CLIENTS_BUCKETS, by id: clients whose ids collide
 * share one, as the scheduler's flows do), so a million addresses cannot
 * grow it. Each bucket lists its idle keep-alive connections, oldest first.
 *
 * At max_connections the client holding the most gives way
 * (clients_make_room): an idle connection of the client that holds the
 * most among those with one closes for a newcomer whose client holds at
 * least two fewer, and a newcomer from the top itself is refused. Out of
 * fds, the same client gives an idle connection up for whoever waits
 * (clients_give_way). Refusals and evictions are counted by reason, in all
 * and per bucket.
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

/* Owned by the server; its connections link themselves in and out. */
struct clients {
    uint32_t conns[CLIENTS_BUCKETS]; /* apart from the buckets: what the top's search reads */
    struct client_bucket bucket[CLIENTS_BUCKETS];
    uint64_t refused[CLIENTS_REFUSALS];
    uint64_t evicted[CLIENTS_EVICTIONS];
};

/* Counts the connection L of client ID (at ADDR, shown by clients_stats)
 * until clients_leave. */
void clients_join(struct clients *t, struct client_link *l, uint64_t id,
                  const struct client_addr *addr);

/* L's connection is gone (idle or not). */
void clients_leave(struct clients *t, struct client_link *l);

/* L's connection became idle (between requests, kept alive), or busy again
 * or closing. */
void clients_set_idle(struct clients *t, struct client_link *l, bool idle);

/* max_connections are open and a connection of client ID arrives. Looks
 * for the client holding the most connections among those with an idle
 * one (the top itself when it has one). Returns that client's longest idle
 * connection for the caller to close, counted as an eviction for the
 * limit, when it holds at least two more than client ID (so the swap
 * leaves it no fewer than the newcomer's). Else returns NULL, the refusal
 * counted and its reason in *WHY: TOP_CLIENT when client ID holds at least
 * one connection and no fewer than the top less one, else FULL. Costs one
 * pass over the bucket counts (CLIENTS_BUCKETS of them, 16 KiB), and only
 * at the limit; the idle connection is the head of a list. */
struct client_link *clients_make_room(struct clients *t, uint64_t id, enum clients_refusal *why);

/* accept() ran out of fds: returns the longest idle connection of the
 * client clients_make_room would take one from, when it holds at least
 * two connections, for the caller to close (counted as an eviction for
 * fds); else NULL. */
struct client_link *clients_give_way(struct clients *t);

/* Connections of client ID's bucket now. */
unsigned clients_held(const struct clients *t, uint64_t id);

struct snapshot;

/* Adds, inside the caller's "connections" object: refused (the sum) and
 * refused_by_reason (full, top_client); evicted_idle (the sum) and
 * evicted_idle_by_reason (max_connections, fds); and top_clients, the
 * CLIENTS_TOP buckets holding the most connections now, ranked 1.. (the
 * client, its connections, idle ones, refusals and evictions). */
void clients_stats(const struct clients *t, struct snapshot *s);

#endif
