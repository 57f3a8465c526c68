/* Settings that change while the server runs: a reload (SIGHUP) and
 * POST /settings both end in server_apply. */
#include <string.h>

#include "server/server.h"
#include "server/server_internal.h"
#include "server/module.h"

/* The settings responses in flight read at each piece. */
void server__apply_to_pumps(struct server *srv)
{
    const struct config *cfg = srv->cfg;
    srv->pump_env.partition = (struct pump_partition){
        .size = cfg->partition, .min = cfg->partition_min, .max = cfg->partition_max};
    srv->pump_env.disk = cfg->emulate_disk;
    pump_sender_set_turn(&srv->sender, cfg->send_turn);
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
        char was[64], is[64];
        if (k->when != CONFIG_LIVE)
            continue;
        config_get(srv->cfg, k->name, was, sizeof was);
        config_get(next, k->name, is, sizeof is);
        if (strcmp(was, is) != 0) {
            srv->live_changed[i] = true;
            srv->live_changed_ms[i] = now;
            history_add_marker(&srv->history, now, k->name, is);
            log_info("%s: %s -> %s", k->name, was, is);
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
}
