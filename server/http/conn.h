#ifndef UNCLOG_CONN_H
#define UNCLOG_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/base/pass.h"
#include "server/http/clients.h"
#include "server/http/http.h"
#include "server/http/turns.h"
#include "server/pool/pump.h"

/* A streaming route takes up to BYTES more of the body now (0: none until
 * the next call): reading the client pauses while the window is shut, and
 * the body timeout runs only while it is open. */
void conn_body_window(struct conn *c, size_t bytes);

/* Per-request state of a handler, freed by the core with FREE_FN (if not
 * NULL: owned elsewhere) when the request ends or the connection dies.
 * Replaces (and frees) any previous. */
void conn_set_handler_state(struct conn *c, void *state, void (*free_fn)(void *));
void *conn_handler_state(struct conn *c);
/* Hands the state back to the caller without freeing it. */
void *conn_take_handler_state(struct conn *c);

struct server *conn_server(struct conn *c);
/* The client (its address under client_prefix, hashed: client_of): whose
 * share of the pool C's work uses. */
uint64_t conn_flow(const struct conn *c);
const struct request *conn_request(const struct conn *c);
/* Whether the client connected from this machine (127/8, ::1, ::ffff:127/104):
 * never for a balancer's connection whose PROXY header names no client. */
bool conn_peer_loopback(const struct conn *c);
/* Whether C came through the admin door (admin_listen): its requests are
 * routed among the admin routes, and its client may see every figure. */
bool conn_admin(const struct conn *c);
struct addr_prefix;
/* The client's whole address (an IPv4 one mapped into IPv6 as IPv4), for
 * matching it against prefixes (addr_prefix_contains); family 0 when the
 * peer is not an IP one, or a balancer's PROXY header names no client. */
const struct addr_prefix *conn_peer_addr(const struct conn *c);

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

/* The loop's time, shared by client (server/http/turns.h): owns the policy,
 * which queues the connections whose input waits for their client's turn,
 * subscribed to the loop's pass service (server/base/pass.h), which begins
 * the policy's passes and runs the waiting requests before the poll. Owned
 * by the server, one per loop. */
struct conn_turns {
    struct turns policy;
    struct pass_sub sub;
    struct pass *pass;
};

/* Prepares CT, subscribed to PASS, each client's share of a pass SHARE_NS
 * (0: off). */
void conn_turns_init(struct conn_turns *ct, struct pass *pass, uint64_t share_ns);
/* Changes the share, from the next request on. */
void conn_turns_set_share(struct conn_turns *ct, uint64_t share_ns);
/* Work of CLIENT done outside a request's parse (a pool job's callback)
 * took NS of the loop's time in this pass. */
void conn_turns_charge(struct conn_turns *ct, uint64_t client, uint64_t ns);
/* Adds CT's counters to S, as the object "turns". */
void conn_turns_stats(const struct conn_turns *ct, struct snapshot *s);

struct config;
/* Whether a connection from SA comes through a load balancer listed in
 * CFG's proxy_protocol_from: it begins with a PROXY header that names its
 * client. */
bool conn_relayed_from(const struct config *cfg, const struct sockaddr *sa);

/* Serves the accepted socket FD as a new connection of ENV: starts reading
 * and the header timeout. AT_LIMIT: FD, from a load balancer, came while
 * max_connections were open, and is admitted as its client's once its
 * PROXY header names it (the client gets room, or a 503 and the close).
 * Takes FD. Returns 0, and ENV's gone runs once when the connection is
 * freed; or a negative UV_E* code, FD closed and gone never called (what
 * was set up frees itself). */
int conn_accept(struct conn_env *env, int fd, bool at_limit);

/* As conn_accept, for FD accepted on the admin door (a TCP or a unix
 * socket): never a PROXY header; routed as conn_admin says. */
int conn_accept_admin(struct conn_env *env, int fd);

/* The admin door serves this many connections at once, counted apart from
 * max_connections and from the clients (it never takes a client's
 * connection, nor gives one up); beyond, a short 503. */
#define CONN_ADMIN_MAX 64

/* The admin door has CONN_ADMIN_MAX connections open: answers FD a short
 * 503 and closes it, with a warning for the first of each second. */
void conn_refuse_admin(struct conn_env *env, int fd);

/* At max_connections nobody gives way for FD's connection, of CLIENT (its
 * reason WHY): answers it a short 503 and closes it (takes FD), with a
 * warning for the first of each second. A relayed connection refused once
 * its PROXY header names its client gets the same answer. */
void conn_refuse(struct conn_env *env, int fd, const struct addr_prefix *client,
                 enum clients_refusal why);

/* Closes the connection whose link L clients_make_room or clients_give_way
 * (server/http/clients.h) chose, to make room for another: idle ones
 * quietly, one with a request under way with a reset. */
void conn_evict(struct client_link *l);

/* The server is stopping: closes each connection of ENV now if it is
 * between requests, else after the response in progress (which then
 * lingers, as every end does). FORCE closes them all at once, but for a
 * streamed response whose status is still held: that one is answered 503
 * with Connection: close in its place. */
void conn_stop_all(struct conn_env *env, bool force);

#endif
