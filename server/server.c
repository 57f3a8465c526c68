#define _GNU_SOURCE /* accept4 */
#include "server/server.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/conn.h"
#include "server/http_date.h"
#include "server/util.h"

/* How long a graceful stop waits for responses in progress. */
#define STOP_GRACE_MS 5000
#define BACKLOG       511
/* Connections taken per wakeup: enough to drain a burst, few enough that the
 * connections already open keep their turn while a flood arrives. */
#define ACCEPT_BATCH 64
/* How long accepting rests when the process is out of fds or memory: the
 * waiting connections stay queued in the kernel meanwhile. */
#define ACCEPT_PAUSE_MS 100

const char *server_date(struct server *srv)
{
    time_t now = time(NULL); /* vDSO: no syscall */
    if (now != srv->date_time) {
        srv->date_time = now;
        http_date_format(now, srv->date);
    }
    return srv->date;
}

static void server_on_handle_closed(uv_handle_t *handle)
{
    struct server *srv = handle->data;
    srv->open_handles--;
}

static void close_handle(struct server *srv, uv_handle_t *handle)
{
    if (uv_is_closing(handle))
        return;
    handle->data = srv;
    uv_close(handle, server_on_handle_closed);
}

static void close_listener(struct server *srv)
{
    if (srv->listen_fd < 0)
        return;
    close_handle(srv, (uv_handle_t *)&srv->accept_poll);
    close_handle(srv, (uv_handle_t *)&srv->accept_pause);
    /* uv_close has stopped the poll: the fd is no longer watched. */
    close(srv->listen_fd);
    srv->listen_fd = -1;
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
    if (srv->stopping && uv_now(srv->loop) >= srv->stop_deadline_ms) {
        for (struct conn *c = srv->conns; c != NULL; c = conn_next(c))
            conn_stop(c, true);
    }
}

static void server_on_acceptable(uv_poll_t *poll, int status, int events);

static void server_on_accept_resume(uv_timer_t *timer)
{
    struct server *srv = timer->data;
    int rc = uv_poll_start(&srv->accept_poll, UV_READABLE, server_on_acceptable);
    if (rc < 0)
        log_error("accept: %s", uv_strerror(rc));
}

/* Out of fds (EMFILE, ENFILE) or memory, accept() fails at once for as long
 * as the condition lasts, and the level-triggered poll would call us back at
 * once: rest instead. Nothing is lost, the connections wait in the backlog. */
static void pause_accepting(struct server *srv, int err)
{
    if (!srv->accept_paused)
        log_warn("accept: %s; pausing new connections", uv_strerror(err));
    srv->accept_paused = true;
    uv_poll_stop(&srv->accept_poll);
    uv_timer_start(&srv->accept_pause, server_on_accept_resume, ACCEPT_PAUSE_MS, 0);
}

/* Over max_connections: a short 503 and close, so that the connections
 * already served keep their share. */
static void refuse_connection(struct server *srv, int fd)
{
    static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\n"
                               "Content-Type: text/plain; charset=utf-8\r\n"
                               "Content-Length: 24\r\n"
                               "Retry-After: 1\r\n"
                               "Connection: close\r\n\r\n"
                               "503 Service Unavailable\n";
    /* A new socket's send buffer is empty: the write is whole or fails, and
     * either way the connection is closed. */
    (void)send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
    srv->refused++;
    if (srv->refused_logged++ == 0)
        log_warn("max_connections (%u) reached: refusing new connections with 503",
                 srv->cfg->max_connections);
}

/* The errors accept() reports for one connection that went away (man 2
 * accept: Linux passes pending network errors on): skip it. */
static bool accept_error_transient(int errnum)
{
    switch (errnum) {
    case EINTR:
    case ECONNABORTED:
    case EPROTO:
    case ENETDOWN:
    case ENONET:
    case EHOSTDOWN:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ENOPROTOOPT:
    case EOPNOTSUPP:
    case EPERM:
        return true;
    default:
        return false;
    }
}

static void server_on_acceptable(uv_poll_t *poll, int status, int events)
{
    struct server *srv = container_of(poll, struct server, accept_poll);
    if (status < 0) {
        pause_accepting(srv, status);
        return;
    }
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int errnum = errno;
            if (errnum == EAGAIN || errnum == EWOULDBLOCK)
                return;
            if (!accept_error_transient(errnum)) {
                pause_accepting(srv, -errnum);
                return;
            }
            continue;
        }
        if (srv->accept_paused) {
            log_info("accepting connections again");
            srv->accept_paused = false;
        }
        if (srv->active >= srv->cfg->max_connections) {
            refuse_connection(srv, fd);
            continue;
        }
        int rc = conn_accept(srv, fd);
        if (rc < 0)
            log_warn("accept: %s", uv_strerror(rc));
    }
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
        for (struct conn *c = srv->conns; c != NULL; c = conn_next(c))
            conn_stop(c, true);
        return;
    }
    log_info("signal %d: stopping", signum);
    server_stop(srv);
}

/* The last connection is gone after a stop: close what is left. */
static void server_finish(struct server *srv)
{
    close_handle(srv, (uv_handle_t *)&srv->tick);
    close_handle(srv, (uv_handle_t *)&srv->sigint);
    close_handle(srv, (uv_handle_t *)&srv->sigterm);
    close_handle(srv, (uv_handle_t *)&srv->sighup);
    gateway_close(&srv->gateway);
    access_log_close(&srv->access);
}

void server_conn_gone(struct server *srv)
{
    srv->active--;
    srv->freed_since_tick++;
    if (srv->stopping && srv->active == 0)
        server_finish(srv);
}

void server_stop(struct server *srv)
{
    if (srv->stopping)
        return;
    srv->stopping = true;
    srv->stop_deadline_ms = uv_now(srv->loop) + STOP_GRACE_MS;
    close_listener(srv);
    /* The signal handlers stay for a second signal, but no longer keep the
     * loop alive; server_finish closes them. */
    uv_unref((uv_handle_t *)&srv->sigint);
    uv_unref((uv_handle_t *)&srv->sigterm);
    uv_unref((uv_handle_t *)&srv->sighup);
    /* conn_stop may unlink the connection it is given, but only later,
     * from its close callback: walking the list here is safe. */
    for (struct conn *c = srv->conns; c != NULL; c = conn_next(c))
        conn_stop(c, false);
    if (srv->active == 0)
        server_finish(srv);
}

/* Parses "1.2.3.4:80" or "[::1]:80" into ADDR. */
static int parse_listen(const char *text, struct sockaddr_storage *addr)
{
    char host[64];
    const char *colon = strrchr(text, ':');
    if (colon == NULL || colon == text || colon[1] == '\0')
        return UV_EINVAL;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port < 0 || port > 65535)
        return UV_EINVAL;
    size_t len = (size_t)(colon - text);
    if (text[0] == '[' && colon[-1] == ']') {
        text++;
        len -= 2;
    }
    if (len >= sizeof host)
        return UV_EINVAL;
    memcpy(host, text, len);
    host[len] = '\0';
    if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)addr) == 0)
        return 0;
    return uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)addr);
}

/* A listening socket of our own rather than uv_listen: libuv's accept loop
 * cannot be paused, and when its reserve-fd trick is spent an EMFILE makes
 * it retry at once, forever. Returns 0 or a negative errno. */
static int bind_listener(const struct sockaddr *addr, int *fd_out)
{
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int on = 1, off = 0;
    socklen_t len = sizeof(struct sockaddr_in);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (addr->sa_family == AF_INET6) {
        /* "[::]:80" takes IPv4 too, as with uv_tcp_bind. */
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
        len = sizeof(struct sockaddr_in6);
    }
    if (bind(fd, addr, len) < 0 || listen(fd, BACKLOG) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    *fd_out = fd;
    return 0;
}

/* Every connection is an fd, and so is every file it sends: take the hard
 * limit when the soft one is lower (often 1024 of 1048576), and say when
 * max_connections still cannot fit, since accepting then pauses at EMFILE. */
static void raise_fd_limit(const struct config *cfg)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
        return;
    rlim_t want = lim.rlim_max < (1u << 20) ? lim.rlim_max : (1u << 20);
    if (lim.rlim_cur < want) {
        struct rlimit raised = {.rlim_cur = want, .rlim_max = lim.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0)
            lim.rlim_cur = want;
    }
    unsigned long long need = 2ull * cfg->max_connections + 32;
    if (need > lim.rlim_cur)
        log_warn("max_connections %u may need %llu fds but the limit is %llu: accepting pauses "
                 "while fds run out",
                 cfg->max_connections, need, (unsigned long long)lim.rlim_cur);
}

static void print_url(struct server *srv)
{
    struct sockaddr_storage addr;
    char host[64] = "?";
    int port = 0;
    socklen_t len = sizeof addr;
    if (getsockname(srv->listen_fd, (struct sockaddr *)&addr, &len) == 0) {
        if (addr.ss_family == AF_INET6) {
            struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&addr;
            host[0] = '[';
            uv_ip6_name(a6, host + 1, sizeof host - 2);
            strcat(host, "]");
            port = ntohs(a6->sin6_port);
        } else {
            struct sockaddr_in *a4 = (struct sockaddr_in *)&addr;
            uv_ip4_name(a4, host, sizeof host);
            port = ntohs(a4->sin_port);
        }
    }
    char part[32], gzpart[32];
    config_format_size(srv->cfg->partition, part, sizeof part);
    config_format_size(srv->cfg->gzip_partition, gzpart, sizeof gzpart);
    log_info("listening on http://%s:%d/ serving %s (partition %s, gzip_partition %s, threads %u)",
             host, port, srv->root, part, gzpart, srv->cfg->threads);
}

int server_open_listener(const char *listen, int *fd)
{
    struct sockaddr_storage addr;
    int rc = parse_listen(listen, &addr);
    if (rc < 0) {
        log_error("listen \"%s\": not ADDR:PORT", listen);
        return rc;
    }
    rc = bind_listener((struct sockaddr *)&addr, fd);
    if (rc < 0)
        log_error("listen on %s: %s", listen, uv_strerror(rc));
    return rc;
}

/* For a target no module claims, with no fallback among the modules. */
static int not_found(struct conn *c, const struct request *req)
{
    return 404;
}

static const struct route no_route = {.methods = ~0ull, .on_request = not_found};

/* The settings responses in flight read at each piece. */
static void apply_to_pumps(struct server *srv)
{
    const struct config *cfg = srv->cfg;
    srv->pump_env.files = pump_pieces(cfg->partition, cfg->partition_min, cfg->partition_max);
    srv->pump_env.disk = cfg->emulate_disk;
}

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

int server_init(struct server *srv, uv_loop_t *loop, struct config *cfg,
                const struct module *const *modules, int argc, char **argv)
{
    memset(srv, 0, sizeof *srv);
    srv->listen_fd = -1;
    srv->loop = loop;
    srv->cfg = cfg;
    srv->modules = modules;
    srv->argc = argc;
    srv->argv = argv;
    srv->started_ms = uv_now(loop);
    server_date(srv);
    if (realpath(cfg->root, srv->root) == NULL) {
        int err = -errno;
        log_error("root \"%s\": %s", cfg->root, strerror(-err));
        return err;
    }
    srv->root_len = strlen(srv->root);
    gateway_init(&srv->gateway, loop, (enum sched_mode)cfg->scheduler, cfg->threads);
    budget_init(&srv->budget, cfg->max_buffer_memory);
    srv->pump_env = (struct pump_env){
        .gateway = &srv->gateway, .budget = &srv->budget, .bytes_sent = &srv->bytes_sent};
    apply_to_pumps(srv);
    if (gateway_set_bulk_nice(&srv->gateway, (int)cfg->bulk_nice) < 0)
        log_warn("bulk_nice %u: off (needs root, or LimitNICE=20 to set threads back)",
                 cfg->bulk_nice);
    add_route_row(srv, NULL, "none");
    add_route_row(srv, &no_route, "unrouted");
    for (size_t i = 0; modules[i] != NULL; i++) {
        for (const struct route *r = modules[i]->routes; r != NULL && r->on_request != NULL; r++)
            add_route_row(srv, r, r->path != NULL ? r->path : modules[i]->name);
    }
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
            gateway_close(&srv->gateway);
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
}

void *server_module_state(const struct server *srv, const struct module *m)
{
    for (size_t i = 0; srv->modules[i] != NULL; i++) {
        if (srv->modules[i] == m)
            return srv->module_state[i];
    }
    return NULL;
}

const struct route *server_route(const struct server *srv, const char *target)
{
    size_t len = strcspn(target, "?#");
    const struct route *fallback = &no_route;
    for (size_t i = 0; srv->modules[i] != NULL; i++) {
        const struct route *r = srv->modules[i]->routes;
        for (; r != NULL && r->on_request != NULL; r++) {
            if (r->path == NULL && fallback == &no_route)
                fallback = r;
            else if (r->path != NULL && strlen(r->path) == len && memcmp(r->path, target, len) == 0)
                return r;
        }
    }
    return fallback;
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

const char *const server_live_keys[SERVER_LIVE_KEYS] = {
    "partition",  "gzip_partition", "scheduler",  "emulate_disk",
    "gzip_files", "gzip_static",    "file_cache",
};

void server_apply(struct server *srv, const struct config *next)
{
    uint64_t now = uv_now(srv->loop) - srv->started_ms;
    for (int i = 0; i < SERVER_LIVE_KEYS; i++) {
        char was[64], is[64];
        config_get(srv->cfg, server_live_keys[i], was, sizeof was);
        config_get(next, server_live_keys[i], is, sizeof is);
        if (strcmp(was, is) != 0) {
            srv->live_changed[i] = true;
            srv->live_changed_ms[i] = now;
            log_info("%s: %s -> %s", server_live_keys[i], was, is);
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
    apply_to_pumps(srv);
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
    if (config_load(&next, srv->argc, srv->argv, &action, err) != 0) {
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
    char part[32], gzpart[32];
    config_format_size(next.partition, part, sizeof part);
    config_format_size(next.gzip_partition, gzpart, sizeof gzpart);
    log_info("reloaded the configuration (partition %s, gzip_partition %s)", part, gzpart);
}

int server_start(struct server *srv, int listen_fd)
{
    uv_loop_t *loop = srv->loop;
    const struct config *cfg = srv->cfg;
    int rc = access_log_open(&srv->access, loop, cfg->access_log);
    if (rc < 0) {
        log_error("access log \"%s\": %s", cfg->access_log, strerror(-rc));
        goto fail_close_fd;
    }
    srv->listen_fd = listen_fd;
    if (listen_fd < 0 && (rc = server_open_listener(cfg->listen, &srv->listen_fd)) < 0)
        goto fail_close_log;
    rc = uv_poll_init_socket(loop, &srv->accept_poll, srv->listen_fd);
    if (rc < 0) {
        log_error("listen on %s: %s", cfg->listen, uv_strerror(rc));
        close(srv->listen_fd);
        goto fail_close_log;
    }
    /* Timers cannot fail to initialise. The first signal handle can: it
     * creates the loop's signal pipe, which the second one then shares. */
    uv_timer_init(loop, &srv->accept_pause);
    uv_timer_init(loop, &srv->tick);
    srv->open_handles = 3;
    srv->accept_pause.data = srv->tick.data = srv;
    rc = uv_signal_init(loop, &srv->sigint);
    if (rc < 0) {
        log_error("signal handler: %s", uv_strerror(rc));
        srv->stopping = true;
        close_listener(srv);
        close_handle(srv, (uv_handle_t *)&srv->tick);
        goto fail_close_log;
    }
    uv_signal_init(loop, &srv->sigterm);
    uv_signal_init(loop, &srv->sighup);
    srv->open_handles = 6;
    srv->sigint.data = srv->sigterm.data = srv->sighup.data = srv;

    if ((rc = uv_poll_start(&srv->accept_poll, UV_READABLE, server_on_acceptable)) < 0 ||
        (rc = uv_signal_start(&srv->sigint, server_on_signal, SIGINT)) < 0 ||
        (rc = uv_signal_start(&srv->sigterm, server_on_signal, SIGTERM)) < 0 ||
        (rc = uv_signal_start(&srv->sighup, server_on_signal, SIGHUP)) < 0 ||
        (rc = uv_timer_start(&srv->tick, server_on_tick, 1000, 1000)) < 0) {
        log_error("start: %s", uv_strerror(rc));
        goto fail_close_handles;
    }
    print_url(srv);
    raise_fd_limit(cfg);
    return 0;

fail_close_handles:
    srv->stopping = true;
    close_listener(srv);
    close_handle(srv, (uv_handle_t *)&srv->sigint);
    close_handle(srv, (uv_handle_t *)&srv->sigterm);
    close_handle(srv, (uv_handle_t *)&srv->sighup);
    close_handle(srv, (uv_handle_t *)&srv->tick);
fail_close_log:
    access_log_close(&srv->access);
    gateway_close(&srv->gateway);
    return rc;
fail_close_fd:
    if (listen_fd >= 0)
        close(listen_fd);
    gateway_close(&srv->gateway);
    return rc;
}
