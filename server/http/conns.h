#ifndef UNCLOG_CONNS_H
#define UNCLOG_CONNS_H

/* The connections as the server sees them: the turns it owns, the accept,
 * the refusals, evictions and the stop. Handlers see a connection through
 * conn.h alone. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "server/base/pass.h"
#include "server/http/clients.h"
#include "server/http/http.h"
#include "server/http/turns.h"

struct addr_prefix;
struct snapshot;

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
