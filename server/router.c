/* The module registry and the router: which route answers a target, each
 * module's state, the responses counted per route and status class, and
 * what a module may ask of the server (server/module.h), whose struct
 * stays the core's. */
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "server/server_internal.h"
#include "server/module.h"

/* For a target no module claims, with no fallback among the modules. */
static int not_found(struct conn *c, const struct request *req)
{
    return 404;
}

static const struct route no_route = {.methods = ~0ull, .on_request = not_found};

/* Counts responses per route: every route of every module, and the one
 * for targets nobody claims, get a row when the server starts. */
static void add_route_row(struct server *srv, const struct route *r, const char *label)
{
    if (srv->nroute_rows < SERVER_ROUTES_MAX)
        srv->route_rows[srv->nroute_rows++] = (struct route_row){.route = r, .label = label};
}

void server_count_response(struct server *srv, const struct route *route, int status,
                           uint64_t bytes, uint64_t us)
{
    srv->requests++;
    struct route_row *row = &srv->route_rows[0]; /* "none": refused before routing */
    for (unsigned i = 1; i < srv->nroute_rows; i++) {
        if (srv->route_rows[i].route == route)
            row = &srv->route_rows[i];
    }
    unsigned cls = status >= 100 && status < 600 ? (unsigned)status / 100 - 1 : 4;
    row->by_class[cls]++;
    if (route != NULL && route->instrument)
        return;
    enum server_size size = bytes <= SERVER_SMALL_MAX ? SERVER_SMALL : SERVER_LARGE;
    hist_add(&srv->latency[size], uv_now(srv->loop), us);
    hist_total_add(&srv->latency_total[size], us);
}

void *server_module_state(const struct server *srv, const struct module *m)
{
    for (size_t i = 0; srv->modules[i] != NULL; i++) {
        if (srv->modules[i] == m)
            return srv->module_state[i];
    }
    return NULL;
}

/* Whether R answers on the admin door (ADMIN) or on the public listener. */
static bool on_door(const struct route *r, bool admin)
{
    return r->door == ROUTE_BOTH || r->door == (admin ? ROUTE_ADMIN : ROUTE_PUBLIC);
}

const struct route *server_route(const struct server *srv, const char *target, bool admin)
{
    size_t len = strcspn(target, "?#");
    const struct route *fallback = &no_route;
    for (size_t i = 0; srv->modules[i] != NULL; i++) {
        const struct route *r = srv->modules[i]->routes;
        for (; r != NULL && r->on_request != NULL; r++) {
            bool here = on_door(r, admin);
            if (r->path == NULL && here && fallback == &no_route)
                fallback = r;
            else if (r->path != NULL && strlen(r->path) == len && memcmp(r->path, target, len) == 0)
                return here ? r : &no_route; /* the other door's: 404 to every method */
        }
    }
    return fallback;
}

void server__router_init(struct server *srv)
{
    add_route_row(srv, NULL, "none");
    add_route_row(srv, &no_route, "unrouted");
    for (size_t i = 0; srv->modules[i] != NULL; i++) {
        for (const struct route *r = srv->modules[i]->routes; r != NULL && r->on_request != NULL;
             r++)
            add_route_row(srv, r, r->path != NULL ? r->path : srv->modules[i]->name);
    }
}

/* ---- the module API (server/module.h) ---- */

const struct config *server_config(const struct server *srv)
{
    return srv->cfg;
}

const char *server_root(const struct server *srv, size_t *len)
{
    *len = srv->root_len;
    return srv->root;
}

uint64_t server_now_ms(const struct server *srv)
{
    return uv_now(srv->loop);
}

time_t server_date_time(const struct server *srv)
{
    return srv->date_time;
}

struct gateway *server_gateway(struct server *srv)
{
    return &srv->gateway;
}

size_t server_file_piece(struct server *srv, uint64_t size, bool on_pool)
{
    bool short_waiting = on_pool && gateway_short_waiting(&srv->gateway, false);
    return pump_piece(&srv->pump_env.partition, short_waiting, size, false);
}

bool server_memory_try(struct conn *c, size_t bytes)
{
    return budget_try(&conn_server(c)->budget, conn_client(c), bytes);
}

void server_memory_give(struct conn *c, size_t bytes)
{
    budget_give(&conn_server(c)->budget, conn_client(c), bytes);
}

struct zstate *server_zstate_take(struct server *srv, const struct zparams *p)
{
    return zstates_take(&srv->zstates, p);
}

void server_zstate_give(struct server *srv, struct zstate *s)
{
    zstates_give(&srv->zstates, s);
}

bool server_setting_changed(const struct server *srv, size_t key, uint64_t *uptime_ms)
{
    if (key >= CONFIG_KEYS_MAX || !srv->live_changed[key])
        return false;
    *uptime_ms = srv->live_changed_ms[key];
    return true;
}
