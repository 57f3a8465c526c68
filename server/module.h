#ifndef UNCLOG_MODULE_H
#define UNCLOG_MODULE_H

#include <llhttp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "server/base/config.h"
#include "server/base/timeline.h"
#include "server/http/conn.h"
#include "server/base/snapshot.h"
#include "server/base/util.h"
#include "server/pool/gateway.h"
#include "server/workers/figures.h"

struct server;
struct snapshot;
struct pass;
struct zparams;
struct zstate;

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
    /* The path of a page for people among the routes (the dashboard), which
     * the startup line names with its URL; NULL for none. */
    const char *page;
    /* The module's configuration keys and the block they fill (read it
     * with config_block), or NULL for a module with none. */
    const struct config_table *config;
    /* Sets up the state the module keeps for SRV in *STATE. Returns 0, or
     * a negative errno and the server does not start. */
    int (*init)(struct server *srv, void **state);
    /* A reload has replaced srv->cfg: apply what concerns the module. */
    void (*reload)(struct server *srv, void *state);
    /* The server listens (its line is out): what the module says of how it
     * runs, for the log. NULL: nothing. */
    void (*started)(struct server *srv, void *state);
    /* Appends the module's figures to OUT (server/base/snapshot.h), in an
     * object of its own ("file_cache"): /stats and /metrics show them. */
    void (*stats)(const struct server *srv, const void *state, struct snapshot *out);
    /* Frees STATE: the loop has stopped. */
    void (*fini)(struct server *srv, void *state);
};

/* ---- what a module may ask of the server (struct server is the core's) ---- */

/* The running configuration: the core's keys, and each module's block
 * (config_block). Replaced whole by a reload or a live change, between
 * callbacks: do not keep the pointer across one. */
const struct config *server_config(const struct server *srv);

/* The realpath of the root, which no request may leave, and its length. */
const char *server_root(const struct server *srv, size_t *len);

/* The loop's clock (uv_now), in milliseconds. */
uint64_t server_now_ms(const struct server *srv);

/* The second the Date header of responses shows now. */
time_t server_date_time(const struct server *srv);

/* The one door to the threadpool (server/pool/gateway.h). */
struct gateway *server_gateway(struct server *srv);

/* ---- what a handler's own work takes: pieces, buffer memory, zlib ----
 * (a response's pump takes its own: server/pool/pump.h) */

/* The bytes of a file of SIZE bytes a read takes now, by the partition as
 * it is now (pump_piece's rule, server/pool/pump.h): ON_POOL for a read in
 * a pool job, cut short (partition = auto) while short work waits for the
 * pool; a read on the loop is not. */
size_t server_file_piece(struct server *srv, uint64_t size, bool on_pool);

/* BYTES of buffer memory (max_buffer_memory) for a response of C's
 * client, taken only if the budget has room now and nobody waits (an
 * extra, such as a small body read with its open): never queued. True
 * when taken; they count for the client (the one ledger: /stats' top
 * clients) until server_memory_give gives them back. */
bool server_memory_try(struct conn *c, size_t bytes);
void server_memory_give(struct conn *c, size_t bytes);

/* A zlib deflate state with parameters P (server/pool/zstates.h), reused
 * between streams; NULL when out of memory. Given back (server_zstate_give)
 * once no job of the stream is on the pool. */
struct zstate *server_zstate_take(struct server *srv, const struct zparams *p);
void server_zstate_give(struct server *srv, struct zstate *s);

/* The loop's pass service (server/base/pass.h), for what a module does
 * once a pass. */
struct pass *server_pass(struct server *srv);

/* The state module M keeps for SRV (what its init stored), or NULL. */
void *server_module_state(const struct server *srv, const struct module *m);

/* Whether the live key at index KEY (config_key_at) changed since the
 * start, by POST /settings or a reload; when, in *UPTIME_MS. */
bool server_setting_changed(const struct server *srv, size_t key, uint64_t *uptime_ms);

/* What the dashboard plots over the last two minutes and the last setting
 * changes (server/base/timeline.h), sampled every HISTORY_PERIOD_MS. */
const struct history *server_history(struct server *srv);

/* Appends every figure the server shows to S (server/base/snapshot.h):
 * its identity and settings, requests, responses and their latency,
 * connections, the memory budget, each module's figures (its stats hook),
 * the scheduler and the jobs per class. What /stats and /metrics render. */
void server_snapshot(const struct server *srv, struct snapshot *s);

/* Makes NEXT the running configuration (a copy of server_config's with
 * live keys changed): the scheduler, the budget, what responses in flight
 * read at their next piece, and each module's reload hook. */
void server_apply(struct server *srv, const struct config *next);

/* A live change on its way to every worker (server_change). The caller
 * embeds it in state it keeps until DONE has run. */
struct server_change;
typedef void (*server_change_fn)(struct server_change *change, bool everywhere);
struct server_change {
    struct server_change *next; /* the server's list of waiting changes */
    uint64_t generation;        /* the settings' generation that carries it */
    uint64_t deadline_ms;       /* uv_now: when DONE runs anyway */
    server_change_fn done;
};

/* How long a change waits for the other workers before DONE says that
 * some have not applied it yet. */
#define SERVER_CHANGE_WAIT_MS 2000

/* A live change, NEXT (a copy of server_config's with live keys changed):
 * applied here at once (server_apply), and with workers published to every
 * worker, each of which applies it from its own loop. Returns false when
 * nothing is left to wait for (alone, or every running worker has applied
 * it already; DONE never runs). Else returns true, and DONE(CHANGE, all)
 * runs later on the loop, once every running worker has applied it (ALL
 * true) or after SERVER_CHANGE_WAIT_MS (ALL false); CHANGE must stay valid
 * until then. */
bool server_change(struct server *srv, const struct config *next, struct server_change *change,
                   server_change_fn done);

/* A wait for the other workers' figures (server_refresh). The caller
 * embeds it in state it keeps until DONE has run. */
struct server_refresh;
typedef void (*server_refresh_fn)(struct server_refresh *refresh);
struct server_refresh {
    struct figures_wait wait; /* the server's */
    server_refresh_fn done;
};

/* How long a refresh waits for the other workers: a /stats answer is late
 * by at most this. A woken worker answers at once; the bound is past the
 * workers' own publication period (FIGURES_PUBLISH_MS), so that a worker
 * late to wake on a busy machine still answers with its periodic
 * publication and the totals stay exact. */
#define SERVER_REFRESH_WAIT_MS 300

/* With workers: asks every other running worker to publish its figures now
 * (they otherwise do so every FIGURES_PUBLISH_MS), so that a server_snapshot
 * taken in DONE counts all each had done when asked. Returns false when
 * there is nothing to wait for (alone; DONE never runs). Else returns true,
 * and DONE(REFRESH) runs later on the loop, once every running worker has
 * published or after SERVER_REFRESH_WAIT_MS; REFRESH must stay valid until
 * then. */
bool server_refresh(struct server *srv, struct server_refresh *refresh, server_refresh_fn done);

/* With workers (> 1): how many there are (their indexes are 1..N), and
 * which one this is; 0 and 0 for a server alone. */
unsigned server_workers(const struct server *srv);
unsigned server_worker(const struct server *srv);

/* With workers: the generation of the live settings this worker runs (each
 * published change moves it by one, across the workers); 0 alone. */
uint64_t server_settings_generation(const struct server *srv);

/* With workers: -1 when no worker runs in slot INDEX (1..N), else 1 when it
 * has applied GENERATION (or a later one) and 0 when not yet. */
int server_worker_applied(const struct server *srv, unsigned index, uint64_t generation);

#endif
