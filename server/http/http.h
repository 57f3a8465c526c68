#ifndef UNCLOG_HTTP_H
#define UNCLOG_HTTP_H

/* What every connection of a server shares (struct conn_env), apart from
 * the connection's functions (conn.h, conns.h), so that the inside of a
 * connection (conn_internal.h) can use it without including the header of
 * the unit that includes it. A request and a route, which handlers see,
 * are in route.h. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "server/http/route.h"

/* The version the Server header and the observers show. */
#define UNCLOG_VERSION "0.1.0"

struct conn;
struct server;

struct access_log;
struct clients;
struct conn_turns;
struct client_link;
struct config;
struct writer_env;

/* What every connection of a server reads and whom it tells, as the writer
 * has its writer_env: the connection knows no more of its server. Owned and
 * filled by the server, which must outlive its connections. */
struct conn_env {
    uv_loop_t *loop;
    struct server *owner; /* opaque here: what conn_server() hands the handlers */
    /* The limits and timeouts: the server's pointer, which a reload may
     * replace; read when a connection or a request needs them. */
    struct config *const *cfg;
    const struct writer_env *writer; /* every response's writer; its bytes_sent counts bodies */
    struct access_log *access;
    const bool *stopping; /* the server is stopping: no more keep-alive */
    /* The route for TARGET (query ignored) on the public listener, or on
     * the admin door when ADMIN; never NULL. */
    const struct route *(*route)(const struct server *owner, const char *target, bool admin);
    /* The Date header's value for the current second. */
    const char *(*date)(struct server *owner);
    /* A response is complete: ROUTE (NULL: refused before routing), its
     * status, body BYTES and latency US from the request's first byte. */
    void (*response_done)(struct server *owner, const struct route *route, int status,
                          uint64_t bytes, uint64_t us);
    /* A connection conn_accept (ADMIN: conn_accept_admin) served has been
     * freed. */
    void (*gone)(struct server *owner, bool admin);
    /* The server's count of connections served (max_connections), each
     * from its accept until it is freed, and of its 503s at the limit since
     * its last tick (one warning a second): the listener's and a relayed
     * connection's, whose client its PROXY header names (admit.c). */
    const uint64_t *active;
    unsigned *refused_logged;
    struct conn *conns; /* the live connections: linked and unlinked by them */
    /* Who holds them: each connection counts itself in from conn_accept
     * until it is freed, and lists itself while idle. */
    struct clients *clients;
    /* Whose turn it is to use the loop (conn.h); NULL: nobody waits. */
    struct conn_turns *turns;
    /* The PROXY protocol (proxy_protocol_from): headers that named a
     * client, that were the balancer's own (LOCAL, UNKNOWN), and the
     * connections refused for one (not a header, cut short, or from a peer
     * not listed). Counted here, shown by the server's stats. */
    struct {
        uint64_t clients, local, malformed, truncated, unlisted;
    } proxy;
};

#endif
