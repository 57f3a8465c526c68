#ifndef UNCLOG_CONN_H
#define UNCLOG_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/pool/pump.h"

/* The version the Server header and the observers show. */
#define UNCLOG_VERSION "0.1.0"

struct conn;
struct server;

/* Request headers the handlers look at; others are counted and dropped. */
enum header {
    HEADER_EXPECT,
    HEADER_RANGE,
    HEADER_IF_RANGE,
    HEADER_IF_MATCH,
    HEADER_IF_NONE_MATCH,
    HEADER_IF_MODIFIED_SINCE,
    HEADER_IF_UNMODIFIED_SINCE,
    HEADER_ACCEPT_ENCODING,
    HEADER_HOST,
    HEADER_ORIGIN,
    HEADER_SEC_FETCH_SITE,
    HEADER_CONTENT_TYPE,
    HEADER_COUNT
};

/* The request being served. Strings are NUL-terminated and live in the
 * connection until the response is complete. */
struct request {
    int method;     /* llhttp_method_t */
    int http_minor; /* 0 or 1 (HTTP/1.x) */
    bool keep_alive;
    bool head; /* method is HEAD: send the head only */
    const char *target;
    size_t target_len;
    uint64_t content_length; /* when has_length */
    bool has_length, chunked;
    const char *headers[HEADER_COUNT]; /* NULL when absent; repeats joined by ", " */
};

/* What a route's callbacks return: 0 when the handler answers (now or
 * later), or an HTTP status >= 400 for the core to answer with a small body. */

struct route {
    const char *path;  /* exact path; NULL marks the fallback */
    uint64_t methods;  /* bit (1 << llhttp_method_t) per allowed method */
    const char *allow; /* the Allow header for 405 */
    /* Optional: headers are in; may refuse (413...) before the body is read. */
    int (*on_headers)(struct conn *c, const struct request *req);
    /* Optional: a piece of the decoded body; without it the body is dropped. */
    int (*on_body)(struct conn *c, const char *at, size_t len);
    /* The whole request is in: answer it. With on_body_end, the head is in:
     * answer as the body arrives. */
    int (*on_request)(struct conn *c, const struct request *req);
    /* Optional: makes the route stream its body. on_request runs once the
     * head is in and may start the response; on_body then gets the body
     * only while the handler's window is open (conn_body_window), and
     * on_body_end says the body is complete. A body that turns out bad
     * after the response started (too large, malformed chunks, a timeout)
     * ends the connection with a reset: the response is cut short. */
    void (*on_body_end)(struct conn *c);
    /* The server's own gauges (/stats, /metrics, /settings): counted, but
     * kept out of the request-latency figures, which are about the work
     * the server does for its clients, not about whoever watches it. */
    bool instrument;
};

/* A streaming route takes up to BYTES more of the body now (0: none until
 * the next call): reading the client pauses while the window is shut, and
 * the body timeout runs only while it is open. */
void conn_body_window(struct conn *c, size_t bytes);

/* Per-request state of a handler, freed by the core with FREE_FN (if not
 * NULL: owned elsewhere) when the request ends or the connection dies.
 * Replaces (and frees) any previous. */
void conn_set_state(struct conn *c, void *state, void (*free_fn)(void *));
void *conn_state(struct conn *c);
/* Hands the state back to the caller without freeing it. */
void *conn_take_state(struct conn *c);

struct server *conn_server(struct conn *c);
/* The client (its address under client_prefix, hashed: client_of): whose
 * share of the pool C's work uses. */
uint64_t conn_flow(const struct conn *c);
const struct request *conn_request(const struct conn *c);
/* Whether the client connected from this machine (127/8, ::1, ::ffff:127/104). */
bool conn_peer_loopback(const struct conn *c);

/* Keeps C alive across threadpool work the handler started; every hold is
 * matched by one conn_release, which may free C. conn_closing() says whether
 * the response is still wanted. */
void conn_hold(struct conn *c);
void conn_release(struct conn *c);
bool conn_closing(const struct conn *c);

/* Response head, built in the connection's buffer: status line, Date,
 * Server and Connection come from conn_head_start; handlers add the rest. */
void conn_head_start(struct conn *c, int status);
void conn_head_add(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sends the head alone (HEAD, 304, empty bodies). */
void conn_send_head(struct conn *c);
/* Sends the head, Content-Length and a copy of BODY. */
void conn_send_body(struct conn *c, const char *body, size_t len);
/* The same for a NUL-terminated TEXT. */
void conn_send_text(struct conn *c, const char *text);
/* Sends the head then SRC's bytes: with Content-Length LEN when known
 * (LEN >= 0), else chunked on HTTP/1.1 or close-delimited on 1.0. Takes SRC. */
void conn_send_source(struct conn *c, struct pump_source *src, long long len);
/* A complete small error response for STATUS (>= 400), with Allow for 405. */
void conn_send_error(struct conn *c, int status, const char *allow);

/* The reason phrase of STATUS ("Not Found"). */
const char *http_reason(int status);

/* ---- for the server module ---- */

struct access_log;
struct clients;
struct client_link;
struct config;

/* What every connection of a server reads and whom it tells, as the pump
 * has its pump_env: the connection knows no more of its server. Owned and
 * filled by the server, which must outlive its connections. */
struct conn_env {
    uv_loop_t *loop;
    struct server *owner; /* opaque here: what conn_server() hands the handlers */
    /* The limits and timeouts: the server's pointer, which a reload may
     * replace; read when a connection or a request needs them. */
    struct config *const *cfg;
    const struct pump_env *pump; /* every response's pump; its bytes_sent counts bodies */
    struct access_log *access;
    const bool *stopping; /* the server is stopping: no more keep-alive */
    /* The route for TARGET (query ignored); never NULL. */
    const struct route *(*route)(const struct server *owner, const char *target);
    /* The Date header's value for the current second. */
    const char *(*date)(struct server *owner);
    /* A response is complete: ROUTE (NULL: refused before routing), its
     * status, body BYTES and latency US from the request's first byte. */
    void (*response_done)(struct server *owner, const struct route *route, int status,
                          uint64_t bytes, uint64_t us);
    /* A connection conn_accept served has been freed. */
    void (*gone)(struct server *owner);
    struct conn *conns; /* the live connections: linked and unlinked by them */
    /* Who holds them: each connection counts itself in from conn_accept
     * until it is freed, and lists itself while idle. */
    struct clients *clients;
};

/* Serves the accepted socket FD as a new connection of ENV: starts reading
 * and the header timeout. Takes FD. Returns 0, and ENV's gone runs once
 * when the connection is freed; or a negative UV_E* code, FD closed and
 * gone never called (what was set up frees itself). */
int conn_accept(struct conn_env *env, int fd);

/* Closes the idle connection whose link L clients_make_room or
 * clients_give_way (server/http/clients.h) took out of its idle list, to
 * make room for another. */
void conn_evict(struct client_link *l);

/* The server is stopping: closes each connection of ENV now if it is
 * between requests, else after the response in progress (which then
 * lingers, as every end does). FORCE closes them all at once. */
void conn_stop_all(struct conn_env *env, bool force);

#endif
