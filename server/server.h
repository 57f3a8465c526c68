#ifndef UNCLOG_SERVER_H
#define UNCLOG_SERVER_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <uv.h>

#include "server/pool/budget.h"
#include "server/base/config.h"
#include "server/base/timeline.h"
#include "server/pool/gateway.h"
#include "server/base/log.h"
#include "server/base/pass.h"
#include "server/http/clients.h"
#include "server/http/conn.h"
#include "server/http/conns.h"
#include "server/http/sender.h"
#include "server/http/writer.h"
#include "server/pool/pump.h"

#define SERVER_MODULES_MAX 8
#define SERVER_ROUTES_MAX  16

struct module;
struct route;

/* The core's configuration keys (server/keys.c). */
extern const struct config_table server_config_table;

/* Fills TABLES with the core's table and then each of MODULES' own, in
 * order, NULL-terminated: what config_load reads. */
void server_config_tables(const struct module *const *modules,
                          const struct config_table *tables[CONFIG_TABLES_MAX + 1]);

/* Request latency is kept apart for small and large responses (body bytes). */
#define SERVER_SMALL_MAX (64 * 1024)
enum server_size { SERVER_SMALL, SERVER_LARGE, SERVER_SIZES };

/* Responses by route and status class (1xx..5xx). */
struct route_row {
    const struct route *route; /* NULL: a request refused before routing */
    const char *label;         /* its path, or its module's name for a fallback */
    uint64_t by_class[5];
};

struct conn;
struct snapshot;
struct control;
struct server_change;
struct figures;

/* The listener and everything shared by its connections. Lives in main();
 * owns its handles, the access log and (through the list) every connection. */
struct server {
    uv_loop_t *loop;
    struct config *cfg; /* main()'s; replaced whole by a reload */
    int argc;           /* the command line, which a reload reads again */
    char **argv;
    unsigned worker;         /* 1..N under a master (workers > 1), else 0 */
    int listen_fd;           /* the listening socket; closed with accept_poll */
    uv_poll_t accept_poll;   /* listen_fd is readable: connections wait */
    uv_timer_t accept_pause; /* restarts accept_poll after EMFILE and friends */
    bool accept_paused;      /* accepting stopped for lack of fds or memory */
    /* The admin door (admin_listen): the dashboard, /settings and the
     * figures answer there, and files do not (router.c). */
    int admin_fd;              /* its listening socket, -1 when off; closed with admin_poll */
    uv_poll_t admin_poll;      /* admin_fd is readable */
    char admin_unix[108];      /* the path of a unix socket this process made and unlinks; "" */
    unsigned refused_logged;   /* 503s since the last tick: one log line per second */
    unsigned freed_since_tick; /* connections freed: the tick trims the heap after */
    uv_signal_t sigint, sigterm, sighup;
    uv_timer_t tick;   /* 1 s: refreshes the Date header, flushes the access log */
    uv_timer_t sample; /* HISTORY_PERIOD_MS: takes a sample into history */
    struct access_log access;
    struct gateway gateway;                 /* the one door to the threadpool */
    struct budget budget;                   /* what buffers may hold at once */
    struct zstates zstates;                 /* zlib's states between streams */
    struct pump_env pump_env;               /* what every response's pump shares */
    struct pass pass;                       /* the loop's passes: its check, idle, prepare */
    struct pump_stalled stalled;            /* responses that give way under pressure */
    struct sender sender;                   /* the loop's writes, shared by client */
    struct writer_env writer_env;           /* what every response's writer shares */
    struct conn_turns turns;                /* the loop's time, shared by client */
    struct conn_env conn_env;               /* what every connection reads; owns their list */
    struct clients clients;                 /* who holds the connections (conn_env's) */
    const struct module *const *modules;    /* main()'s list, NULL-terminated */
    void *module_state[SERVER_MODULES_MAX]; /* each module's own, by index */
    char root[PATH_MAX]; /* realpath of cfg->root: the boundary no request crosses */
    size_t root_len;
    char date[32];    /* "Sun, 06 Nov 1994 08:49:37 GMT", for date_time */
    time_t date_time; /* the second date[] shows */
    uint64_t accepted, requests;
    /* Connections served now, the public listener's (max_connections) and
     * the admin door's (CONN_ADMIN_MAX at most, apart: a
     * scraper or the dashboard at max_connections neither takes a client's
     * connection nor is refused). */
    uint64_t active, admin_active;
    uint64_t bytes_sent;                /* response body bytes handed to the kernel, as they go */
    struct writer_counts writer_counts; /* streamed bodies: buffered or by sendfile */
    struct route_row route_rows[SERVER_ROUTES_MAX];
    unsigned nroute_rows;
    /* From the first byte of a request to the last byte handed to the
     * kernel, in microseconds: the recent window, and since the start. */
    struct hist latency[SERVER_SIZES];
    struct hist_total latency_total[SERVER_SIZES];
    /* Per key (config_key_at's index): whether a live key was changed by
     * POST /settings or a reload since the start, and when (uptime, ms). */
    bool live_changed[CONFIG_KEYS_MAX];
    uint64_t live_changed_ms[CONFIG_KEYS_MAX];
    /* What the dashboard plots over the last two minutes, and the setting
     * changes (GET /stats/history). */
    struct history history;
    uint64_t started_ms, stop_deadline_ms; /* started_ms: the server's epoch with workers */
    /* workers > 1: the control plane the workers share (server/workers/control.h,
     * main()'s), else NULL and the three below are unused. */
    struct control *control;
    uv_poll_t control_poll;        /* this worker's eventfd: another published */
    uv_timer_t control_wait;       /* runs while changes wait for every worker */
    struct server_change *changes; /* those changes (their callers own them) */
    uint64_t generation;           /* of the shared settings this worker runs */
    uint64_t life;                 /* its life in its slot (control_join) */
    /* workers > 1: this worker's figures in its slot (server/workers/figures.h),
     * which the answering worker merges; NULL alone. */
    struct figures *figures;
    bool stopping;
};

/* Sets SRV up to serve CFG (kept, not copied) on LOOP with MODULES (a
 * NULL-terminated list, kept), started by the command line ARGC, ARGV:
 * resolves the root and runs each module's init. Opens no socket and no
 * handle (server_start does), so a test can drive connections by hand.
 * Returns 0, or logs and returns a negative errno after undoing itself. */
int server_init(struct server *srv, uv_loop_t *loop, struct config *cfg,
                const struct module *const *modules, int argc, char **argv);

/* After the loop has run dry: closes the access log and frees every
 * module's state. */
void server_fini(struct server *srv);

/* The route for TARGET's path (query ignored) on the public listener, or
 * on the admin door when ADMIN: the first module route with that exact
 * path, which is a 404 to every method when it answers on the other door
 * only (struct route's door: /settings on the public listener); else the
 * first fallback route that answers on this one; else a 404. Never NULL. */
const struct route *server_route(const struct server *srv, const char *target, bool admin);

/* Opens the listening socket for CFG's listen (config_parse_addr), its
 * backlog max_connections (at least 511; the kernel caps it at
 * net.core.somaxconn). Returns 0 with the fd in *FD, or logs and returns a
 * negative UV_E* code. */
int server_open_listener(const struct config *cfg, int *fd);

/* Opens the admin listener for CFG's admin_listen (listener.c): 0 with the
 * fd in *FD (-1 when off), and for a unix socket its path in UNIX_PATH
 * ("" else), which whoever made it unlinks once done (server_close_admin);
 * or logs and returns a negative UV_E* code. */
int server_open_admin(const struct config *cfg, int *fd, char unix_path[108]);

/* Closes FD (when >= 0) and unlinks UNIX_PATH (when not ""). */
void server_close_admin(int fd, const char *unix_path);

/* Starts serving: on LISTEN_FD and ADMIN_FD when LISTEN_FD is >= 0 (taken,
 * ADMIN_FD -1 when admin_listen is off; a worker's share of its master's
 * sockets), else on sockets of its own for cfg->listen and
 * cfg->admin_listen; and installs the signal handlers. Logs and returns a
 * negative UV_E* code on failure, after closing what it opened (run the
 * loop once more to let the close callbacks finish). */
int server_start(struct server *srv, int listen_fd, int admin_fd);

/* A response is complete: counts it under ROUTE (NULL: refused before
 * routing) and its status class, and its latency US by size. */
void server_count_response(struct server *srv, const struct route *route, int status,
                           uint64_t bytes, uint64_t us);

/* The figures the dashboard plots, as they are now: the one place the
 * history takes them from (server/readout.c). */
void server_sample(const struct server *srv, struct history_sample *out);

/* SIGHUP: reads the configuration again as startup did. Keys that can change
 * live take effect for new work at once; listen, root, threads and workers
 * keep their running value (logged); the access log file is reopened. A
 * configuration with an error changes nothing (the error is logged). */
void server_reload(struct server *srv);

/* workers > 1, before server_start: joins the control plane CTL as worker
 * srv->worker. The server's epoch becomes CTL's (so uptimes agree across
 * workers) and the shared live settings are applied, so that a worker
 * started again after a crash runs what the others run, not the file. */
void server_join_control(struct server *srv, struct control *ctl);

/* Graceful stop: no more accepting; idle connections close now, busy ones
 * after their response or at the deadline. The loop ends when all is closed. */
void server_stop(struct server *srv);

/* The Date header's value for the current second (formatted once per second). */
const char *server_date(struct server *srv);

/* A connection it counted as active (ADMIN: on the admin door) has been
 * freed (its conn_env's gone). */
void server_conn_gone(struct server *srv, bool admin);

#endif
