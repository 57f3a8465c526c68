/* Settings that change while the server runs: a reload (SIGHUP) and
 * POST /settings both end in server_apply. With workers, a change is also
 * published through the control plane (server/workers/control.h) and every other
 * worker applies it from its own loop. */
#include <string.h>
#include <unistd.h>

#include "server/base/util.h"
#include "server/workers/control.h"
#include "server/workers/figures.h"
#include "server/server.h"
#include "server/server_internal.h"
#include "server/module.h"

/* While changes wait for the other workers, how often they look. */
#define CHANGE_CHECK_MS 5

/* The settings responses in flight read at each piece. */
void server__apply_to_pumps(struct server *srv)
{
    const struct config *cfg = srv->cfg;
    srv->pump_env.partition = (struct pump_partition){
        .size = cfg->partition, .min = cfg->partition_min, .max = cfg->partition_max};
    srv->pump_env.disk = cfg->emulate_disk;
    srv->writer_env.sendfile = cfg->sendfile != 0;
    sender_set_pass_bytes(&srv->sender, cfg->send_turn);
    conn_turns_set_share(&srv->turns, (uint64_t)cfg->turn_share * 1000);
}

/* Reopens the access log for a reload: the new one is opened before the old
 * one is closed, so a failure changes nothing. Standard output is a libuv
 * handle that cannot be swapped under its pending writes: switching to or
 * from "-" waits for a restart. Returns 0 or a negative errno. */
static int reopen_access_log(struct server *srv, struct config *next)
{
    const char *cur = srv->cfg->access_log;
    if (strcmp(cur, "-") == 0 || strcmp(next->access_log, "-") == 0) {
        if (strcmp(cur, next->access_log) != 0) {
            log_warn("reload: access_log changes to or from standard output after a restart; "
                     "keeping %s",
                     cur);
            memcpy(next->access_log, cur, strlen(cur) + 1);
        }
        return 0;
    }
    struct access_log fresh;
    int rc = access_log_open(&fresh, srv->loop, next->access_log);
    if (rc < 0)
        return rc;
    access_log_close(&srv->access);
    srv->access = fresh; /* a file or nothing: no libuv handle moves */
    return 0;
}

void server_apply(struct server *srv, const struct config *next)
{
    uint64_t now = uv_now(srv->loop) - srv->started_ms;
    const struct config_key *k;
    for (size_t i = 0; (k = config_key_at(next, i)) != NULL; i++) {
        char was[1024], is[1024]; /* a string key whole, so that any change shows */
        /* A restart key keeps its value; the reload says so itself. */
        if (k->when == CONFIG_RESTART)
            continue;
        config_get(srv->cfg, k->name, was, sizeof was);
        config_get(next, k->name, is, sizeof is);
        if (strcmp(was, is) != 0)
            log_info("%s: %s -> %s", k->name, was, is);
        if (k->when == CONFIG_LIVE && strcmp(was, is) != 0) {
            srv->live_changed[i] = true;
            srv->live_changed_ms[i] = now;
            if (srv->control == NULL) /* with workers, control_publish marks */
                history_add_marker(&srv->history, now, k->name, is);
        }
    }
    *srv->cfg = *next;
    log_set_level(next->log_level);
    if (gateway_set_bulk_nice(&srv->gateway, (int)next->bulk_nice) < 0)
        log_warn("bulk_nice %u: off (needs root, or LimitNICE=20 to set threads back)",
                 next->bulk_nice);
    if (next->scheduler != srv->gateway.sched.mode)
        gateway_set_mode(&srv->gateway, (enum sched_mode)next->scheduler);
    budget_set_max(&srv->budget, next->max_buffer_memory);
    server__apply_to_pumps(srv);
    for (size_t i = 0; srv->modules[i] != NULL; i++) {
        if (srv->modules[i]->reload != NULL)
            srv->modules[i]->reload(srv, srv->module_state[i]);
    }
}

/* ---- the control plane: one set of live settings for every worker ---- */

/* When each live key last changed is the plane's, so that every worker
 * says the same. */
static void take_changed(struct server *srv, const struct control_view *v)
{
    memcpy(srv->live_changed, v->changed, sizeof srv->live_changed);
    memcpy(srv->live_changed_ms, v->changed_ms, sizeof srv->live_changed_ms);
    srv->generation = v->generation;
    control_applied(srv->control, srv->worker, v->generation);
}

/* Runs the shared settings V: the live keys' values over the running
 * configuration, applied as a local change would be. */
static void adopt(struct server *srv, const struct control_view *v)
{
    struct config next = *srv->cfg;
    const struct config_key *k;
    for (size_t i = 0; (k = config_key_at(&next, i)) != NULL; i++) {
        char err[CONFIG_ERR_MAX];
        if (k->when == CONFIG_LIVE && config_set_live(&next, k->name, v->value[i], err) != 0)
            log_error("control: shared %s refused: %s", k->name, err);
    }
    server_apply(srv, &next);
    take_changed(srv, v);
}

/* Publishes NEXT (see control_publish for BASE), wakes the other workers
 * if that moved the generation, and runs the result here. */
static void publish(struct server *srv, const struct config *next, const struct config *base)
{
    struct control_view v;
    uint64_t now = uv_now(srv->loop) - srv->started_ms;
    if (control_publish(srv->control, next, base, now, &v))
        control_wake_others(srv->control, srv->worker);
    if (base != NULL)
        adopt(srv, &v); /* NEXT, plus what others published meanwhile */
    else
        take_changed(srv, &v); /* NEXT is running and is what was published */
}

static void server_on_control(uv_poll_t *poll, int status, int events)
{
    struct server *srv = poll->data;
    control_drain(srv->control, srv->worker);
    struct control_view v;
    control_read(srv->control, &v);
    if (v.generation != srv->generation)
        adopt(srv, &v);
    if (srv->figures != NULL)
        figures_answer(srv->figures);
}

/* Whether every running worker has applied GENERATION. */
static bool applied_everywhere(const struct server *srv, uint64_t generation)
{
    for (unsigned i = 1; i <= control_workers(srv->control); i++) {
        if (control_worker_state(srv->control, i, generation) == 0)
            return false;
    }
    return true;
}

static void server_on_change_wait(uv_timer_t *timer)
{
    struct server *srv = timer->data;
    uint64_t now = uv_now(srv->loop);
    struct server_change **link = &srv->changes;
    while (*link != NULL) {
        struct server_change *ch = *link;
        bool all = applied_everywhere(srv, ch->generation);
        if (!all && now < ch->deadline_ms) {
            link = &ch->next;
            continue;
        }
        *link = ch->next; /* out of the list before DONE, which may free it */
        ch->done(ch, all);
    }
    if (srv->changes == NULL)
        uv_timer_stop(timer);
}

bool server_change(struct server *srv, const struct config *next, struct server_change *change,
                   server_change_fn done)
{
    if (srv->control == NULL) {
        server_apply(srv, next);
        return false;
    }
    publish(srv, next, srv->cfg);
    if (applied_everywhere(srv, srv->generation))
        return false;
    *change = (struct server_change){.next = srv->changes,
                                     .generation = srv->generation,
                                     .deadline_ms = uv_now(srv->loop) + SERVER_CHANGE_WAIT_MS,
                                     .done = done};
    if (srv->changes == NULL && uv_timer_start(&srv->control_wait, server_on_change_wait,
                                               CHANGE_CHECK_MS, CHANGE_CHECK_MS) < 0)
        return false; /* only while closing: nobody is left to wait for */
    srv->changes = change;
    return true;
}

void server_join_control(struct server *srv, struct control *ctl)
{
    srv->control = ctl;
    /* uv_now may read a coarser clock than CLOCK_MONOTONIC, a tick behind. */
    uint64_t epoch = control_epoch_ms(ctl), now = uv_now(srv->loop);
    srv->started_ms = epoch < now ? epoch : now;
    struct control_view v;
    srv->life = control_join(ctl, srv->worker, &v);
    adopt(srv, &v);
}

int server__control_start(struct server *srv)
{
    int rc = uv_poll_init(srv->loop, &srv->control_poll, control_fd(srv->control, srv->worker));
    if (rc < 0)
        return rc;
    uv_timer_init(srv->loop, &srv->control_wait);
    srv->control_poll.data = srv->control_wait.data = srv;
    rc = uv_poll_start(&srv->control_poll, UV_READABLE, server_on_control);
    if (rc < 0)
        server__control_close(srv);
    return rc;
}

void server__control_close(struct server *srv)
{
    if (srv->control == NULL)
        return;
    handle_close((uv_handle_t *)&srv->control_poll);
    handle_close((uv_handle_t *)&srv->control_wait);
}

unsigned server_workers(const struct server *srv)
{
    return srv->control != NULL ? control_workers(srv->control) : 0;
}

unsigned server_worker(const struct server *srv)
{
    return srv->worker;
}

uint64_t server_settings_generation(const struct server *srv)
{
    return srv->control != NULL ? srv->generation : 0;
}

int server_worker_applied(const struct server *srv, unsigned index, uint64_t generation)
{
    return srv->control != NULL ? control_worker_state(srv->control, index, generation) : -1;
}

/* ---- a reload ---- */

void server_reload(struct server *srv)
{
    struct config next;
    char err[CONFIG_ERR_MAX], kept[256];
    enum config_action action;
    if (config_load(&next, srv->cfg->tables, srv->argc, srv->argv, &action, err) != 0) {
        log_error("reload refused, the running configuration is kept: %s", err);
        return;
    }
    config_keep_restart_keys(&next, srv->cfg, kept, sizeof kept);
    if (kept[0] != '\0')
        log_warn("reload: %s changed; a restart applies that, the running value is kept", kept);
    int rc = reopen_access_log(srv, &next);
    if (rc < 0) {
        log_error("reload refused, the running configuration is kept: access log \"%s\": %s",
                  next.access_log, strerror(-rc));
        return;
    }
    server_apply(srv, &next);
    char part[32];
    config_format_size(next.partition, part, sizeof part);
    log_info("reloaded the configuration (partition %s)", part);
    if (srv->control != NULL)
        publish(srv, srv->cfg, NULL);
}
