#include "server/server.h"
#include "server/server_internal.h"
#include "server/module.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/http/conn.h"
#include "server/base/http_date.h"
#include "server/base/util.h"
#include "server/workers/control.h"
#include "server/workers/figures.h"

/* How long a graceful stop waits for responses in progress. */
#define STOP_GRACE_MS 5000

const char *server_date(struct server *srv)
{
    time_t now = time(NULL); /* vDSO: no syscall */
    if (now != srv->date_time) {
        srv->date_time = now;
        http_date_format(now, srv->date);
    }
    return srv->date;
}

static void server_on_tick(uv_timer_t *timer)
{
    struct server *srv = timer->data;
    server_date(srv);
    srv->refused_logged = 0;
    /* glibc gives back only the top of the heap by itself: one connection
     * still open up there keeps a burst's worth of freed buffers resident.
     * Once a second, if connections went, return every free page. */
    if (srv->freed_since_tick > 0)
        malloc_trim(0);
    srv->freed_since_tick = 0;
    access_log_flush(&srv->access);
    if (srv->stopping && uv_now(srv->loop) >= srv->stop_deadline_ms)
        conn_stop_all(&srv->conn_env, true);
}

/* Every HISTORY_PERIOD_MS: what the dashboard would see now, into the ring. */
static void server_on_sample(uv_timer_t *timer)
{
    struct server *srv = timer->data;
    struct history_sample s;
    server_sample(srv, &s);
    if (srv->control != NULL)
        control_history_sample(srv->control, &s);
    else
        history_add_sample(&srv->history, &s);
}

static void server_on_signal(uv_signal_t *sig, int signum)
{
    struct server *srv = sig->data;
    if (signum == SIGHUP) {
        if (!srv->stopping)
            server_reload(srv);
        return;
    }
    if (srv->stopping) {
        /* A second signal: stop waiting for responses in progress. */
        log_info("signal %d: closing every connection now", signum);
        conn_stop_all(&srv->conn_env, true);
        return;
    }
    log_info("signal %d: stopping", signum);
    server_stop(srv);
}

/* The last connection is gone after a stop: close what is left. */
/* The gateway's and the writers' reports, to the clients table: who used
 * the pool and the socket in the last second (clients.h). */
static void server_on_job_ran(void *arg, uint64_t client, uint64_t ns, uint64_t loop_ns)
{
    struct server *srv = arg;
    clients_ran(&srv->clients, client, ns, uv_now(srv->loop));
    conn_turns_charge(&srv->turns, client, loop_ns);
}

static void server_on_sent(void *arg, uint64_t client, size_t bytes)
{
    struct server *srv = arg;
    clients_sent(&srv->clients, client, bytes, uv_now(srv->loop));
}

/* Closes the core under the handles: the access log, the pool's door, the
 * loop's pass service (the sender's and the turns' passes). The one way
 * they close, on every path: the end of a stop, a start that failed, an
 * init that failed. */
static void close_core(struct server *srv)
{
    access_log_close(&srv->access);
    gateway_close(&srv->gateway);
    pass_close(&srv->pass);
}

static void server_finish(struct server *srv)
{
    handle_close((uv_handle_t *)&srv->tick);
    handle_close((uv_handle_t *)&srv->sample);
    figures_close(srv->figures);
    handle_close((uv_handle_t *)&srv->sigint);
    handle_close((uv_handle_t *)&srv->sigterm);
    handle_close((uv_handle_t *)&srv->sighup);
    server__control_close(srv);
    close_core(srv);
}

void server_conn_gone(struct server *srv, bool admin)
{
    *(admin ? &srv->admin_active : &srv->active) -= 1;
    srv->freed_since_tick++;
    if (srv->stopping && srv->active + srv->admin_active == 0)
        server_finish(srv);
}

void server_stop(struct server *srv)
{
    if (srv->stopping)
        return;
    srv->stopping = true;
    srv->stop_deadline_ms = uv_now(srv->loop) + STOP_GRACE_MS;
    server__close_listener(srv);
    /* The signal handlers stay for a second signal, but no longer keep the
     * loop alive; server_finish closes them. */
    uv_unref((uv_handle_t *)&srv->sigint);
    uv_unref((uv_handle_t *)&srv->sigterm);
    uv_unref((uv_handle_t *)&srv->sighup);
    conn_stop_all(&srv->conn_env, false);
    if (srv->active + srv->admin_active == 0)
        server_finish(srv);
}

int server_init(struct server *srv, uv_loop_t *loop, struct config *cfg,
                const struct module *const *modules, int argc, char **argv)
{
    memset(srv, 0, sizeof *srv);
    srv->listen_fd = -1;
    srv->admin_fd = -1;
    srv->loop = loop;
    srv->cfg = cfg;
    srv->modules = modules;
    srv->argc = argc;
    srv->argv = argv;
    srv->started_ms = uv_now(loop);
    server_date(srv);
    struct stat st;
    if (realpath(cfg->root, srv->root) == NULL || stat(srv->root, &st) < 0) {
        int err = -errno;
        /* Run outside the repository, the default root (static/) is not there. */
        log_error("root \"%s\": %s%s", cfg->root, strerror(-err),
                  err == -ENOENT ? ": name the directory to serve, as in: unclog DIR" : "");
        return err;
    }
    if (!S_ISDIR(st.st_mode)) {
        log_error("root \"%s\": not a directory: unclog serves a directory (unclog DIR), "
                  "and its files by their paths",
                  cfg->root);
        return -ENOTDIR;
    }
    srv->root_len = strlen(srv->root);
    gateway_init(&srv->gateway, loop, (enum sched_mode)cfg->scheduler, cfg->threads);
    srv->gateway.ran = server_on_job_ran;
    srv->gateway.ran_arg = srv;
    budget_init(&srv->budget, cfg->max_buffer_memory);
    /* One ledger: the top clients' memory is read from the budget's. */
    srv->clients.budget = &srv->budget;
    /* As many idle zlib states as the pool has threads to deflate at once. */
    zstates_init(&srv->zstates, &srv->budget, cfg->threads);
    pass_init(&srv->pass, loop);
    sender_init(&srv->sender, &srv->pass, cfg->send_turn);
    conn_turns_init(&srv->turns, &srv->pass, (uint64_t)cfg->turn_share * 1000);
    srv->pump_env = (struct pump_env){.gateway = &srv->gateway,
                                      .budget = &srv->budget,
                                      .zstates = &srv->zstates,
                                      .stalled = &srv->stalled};
    srv->writer_env = (struct writer_env){.pump = &srv->pump_env,
                                          .sender = &srv->sender,
                                          .bytes_sent = &srv->bytes_sent,
                                          .sent = server_on_sent,
                                          .sent_arg = srv,
                                          .gateway = &srv->gateway,
                                          .counts = &srv->writer_counts};
    server__apply_to_pumps(srv);
    srv->conn_env = (struct conn_env){.loop = loop,
                                      .owner = srv,
                                      .cfg = &srv->cfg,
                                      .writer = &srv->writer_env,
                                      .access = &srv->access,
                                      .stopping = &srv->stopping,
                                      .route = server_route,
                                      .date = server_date,
                                      .response_done = server_count_response,
                                      .gone = server_conn_gone,
                                      .active = &srv->active,
                                      .refused_logged = &srv->refused_logged,
                                      .clients = &srv->clients,
                                      .turns = &srv->turns};
    if (gateway_set_bulk_nice(&srv->gateway, (int)cfg->bulk_nice) < 0)
        log_warn("bulk_nice %u: off (needs root, or LimitNICE=20 to set threads back)",
                 cfg->bulk_nice);
    server__router_init(srv);
    for (size_t i = 0; modules[i] != NULL; i++) {
        if (i == SERVER_MODULES_MAX)
            abort(); /* a longer list in main() is a bug */
        int err = modules[i]->init ? modules[i]->init(srv, &srv->module_state[i]) : 0;
        if (err < 0) {
            log_error("module %s: %s", modules[i]->name, strerror(-err));
            while (i-- > 0) {
                if (modules[i]->fini != NULL)
                    modules[i]->fini(srv, srv->module_state[i]);
            }
            close_core(srv);
            return err;
        }
    }
    return 0;
}

void server_fini(struct server *srv)
{
    access_log_close(&srv->access);
    for (size_t i = 0; srv->modules[i] != NULL; i++) {
        if (srv->modules[i]->fini != NULL)
            srv->modules[i]->fini(srv, srv->module_state[i]);
        srv->module_state[i] = NULL;
    }
    zstates_fini(&srv->zstates);
    figures_free(srv->figures);
    srv->figures = NULL;
}

/* With workers: this worker's figures in its slot, which the answering
 * worker merges. Without memory for them, it answers for itself. */
static void attach_figures(struct server *srv)
{
    const struct figures_env env = {.loop = srv->loop,
                                    .control = srv->control,
                                    .worker = srv->worker,
                                    .life = srv->life,
                                    .requests = &srv->requests,
                                    .clients = &srv->clients,
                                    .own = server__snapshot_own,
                                    .arg = srv};
    srv->figures = figures_attach(&env);
    if (srv->figures == NULL)
        log_warn("whole-server figures: out of memory (this worker answers for itself)");
}

struct pass *server_pass(struct server *srv)
{
    return &srv->pass;
}

int server_start(struct server *srv, int listen_fd, int admin_fd)
{
    uv_loop_t *loop = srv->loop;
    const struct config *cfg = srv->cfg;
    if (srv->control != NULL)
        attach_figures(srv);
    int rc = access_log_open(&srv->access, loop, cfg->access_log);
    if (rc < 0) {
        log_error("access log \"%s\": %s", cfg->access_log, strerror(-rc));
        goto fail_close_fd;
    }
    if ((rc = server__listener_open(srv, listen_fd, admin_fd)) < 0)
        goto fail_close_log;
    /* Timers cannot fail to initialise. The first signal handle can: it
     * creates the loop's signal pipe, which the second one then shares. */
    uv_timer_init(loop, &srv->tick);
    uv_timer_init(loop, &srv->sample);
    srv->tick.data = srv->sample.data = srv;
    rc = uv_signal_init(loop, &srv->sigint);
    if (rc < 0) {
        log_error("signal handler: %s", uv_strerror(rc));
        srv->stopping = true;
        server__close_listener(srv);
        handle_close((uv_handle_t *)&srv->tick);
        handle_close((uv_handle_t *)&srv->sample);
        goto fail_close_log;
    }
    uv_signal_init(loop, &srv->sigterm);
    uv_signal_init(loop, &srv->sighup);
    srv->sigint.data = srv->sigterm.data = srv->sighup.data = srv;

    if ((rc = uv_signal_start(&srv->sigint, server_on_signal, SIGINT)) < 0 ||
        (rc = uv_signal_start(&srv->sigterm, server_on_signal, SIGTERM)) < 0 ||
        (rc = uv_signal_start(&srv->sighup, server_on_signal, SIGHUP)) < 0 ||
        (rc = uv_timer_start(&srv->tick, server_on_tick, 1000, 1000)) < 0 ||
        (rc = uv_timer_start(&srv->sample, server_on_sample, HISTORY_PERIOD_MS,
                             HISTORY_PERIOD_MS)) < 0 ||
        (srv->figures != NULL && (rc = figures_start(srv->figures)) < 0) ||
        (rc = server__listener_start(srv)) < 0) {
        log_error("start: %s", uv_strerror(rc));
        goto fail_close_handles;
    }
    for (size_t i = 0; srv->modules[i] != NULL; i++) {
        if (srv->modules[i]->started != NULL)
            srv->modules[i]->started(srv, srv->module_state[i]);
    }
    if (srv->control != NULL && (rc = server__control_start(srv)) < 0) {
        log_error("control plane: %s", uv_strerror(rc));
        goto fail_close_handles;
    }
    return 0;

fail_close_handles:
    srv->stopping = true;
    server__close_listener(srv);
    handle_close((uv_handle_t *)&srv->sigint);
    handle_close((uv_handle_t *)&srv->sigterm);
    handle_close((uv_handle_t *)&srv->sighup);
    handle_close((uv_handle_t *)&srv->tick);
    handle_close((uv_handle_t *)&srv->sample);
    figures_close(srv->figures);
fail_close_log:
    close_core(srv);
    return rc;
fail_close_fd:
    if (listen_fd >= 0)
        close(listen_fd);
    if (admin_fd >= 0)
        close(admin_fd);
    close_core(srv);
    return rc;
}
