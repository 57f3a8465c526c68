#ifndef UNCLOG_CONN_H
#define UNCLOG_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/http/route.h"

/* What a handler does with a connection. What the server does with the
 * connections (accept, refuse, evict, stop, the turns) is in conns.h. */

struct pump_source;
struct server;

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
uint64_t conn_client(const struct conn *c);
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

#endif
