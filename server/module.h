#ifndef UNCLOG_MODULE_H
#define UNCLOG_MODULE_H

#include <llhttp.h>

#include "server/http/conn.h"
#include "server/base/util.h"

struct server;
struct snapshot;

/* A route's method set: ROUTE_METHOD(HTTP_GET) | ROUTE_METHOD(HTTP_HEAD). */
#define ROUTE_METHOD(m) (1ull << (m))

/* A handler module: its routes, and the hooks through which the core sets
 * up, reloads, reports and frees the module's own state. main() lists the
 * modules; the core knows no handler by name. Every hook is optional and
 * runs on the loop thread. */
struct module {
    const char *name;
    /* Exact paths first; a route whose path is NULL is the fallback for
     * every target no module claims (the first such route wins). Ends with
     * an all-zero row; NULL for a module with no routes. */
    const struct route *routes;
    /* Sets up the state the module keeps for SRV in *STATE. Returns 0, or
     * a negative errno and the server does not start. */
    int (*init)(struct server *srv, void **state);
    /* A reload has replaced srv->cfg: apply what concerns the module. */
    void (*reload)(struct server *srv, void *state);
    /* Appends the module's figures to OUT (server/base/snapshot.h), in an
     * object of its own ("file_cache"): /stats and /metrics show them. */
    void (*stats)(const struct server *srv, const void *state, struct snapshot *out);
    /* Frees STATE: the loop has stopped. */
    void (*fini)(struct server *srv, void *state);
};

#endif
