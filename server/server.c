#include "server/server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "handlers/http_date.h"
#include "server/conn.h"

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* How long a graceful stop waits for responses in progress. */
#define STOP_GRACE_MS 5000
#define BACKLOG       511

static void refresh_date(struct server *srv)
{
    http_date_format(time(NULL), srv->date);
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

static void server_on_tick(uv_timer_t *timer)
{
    struct server *srv = timer->data;
    refresh_date(srv);
    access_log_flush(&srv->access);
    if (srv->stopping && uv_now(srv->loop) >= srv->stop_deadline_ms) {
        for (struct conn *c = srv->conns; c != NULL; c = conn_next(c))
            conn_shutdown(c, true);
    }
}

static void server_on_connection(uv_stream_t *listener, int status)
{
    struct server *srv = container_of(listener, struct server, listener);
    if (status < 0) {
        log_warn("accept: %s", uv_strerror(status));
        return;
    }
    int rc = conn_accept(srv);
    if (rc < 0)
        log_warn("accept: %s", uv_strerror(rc));
}

static void server_on_signal(uv_signal_t *sig, int signum)
{
    struct server *srv = sig->data;
    log_info("signal %d: stopping", signum);
    server_stop(srv);
}

void server_conn_gone(struct server *srv)
{
    srv->active--;
    if (srv->stopping && srv->active == 0)
        close_handle(srv, (uv_handle_t *)&srv->tick);
}

void server_stop(struct server *srv)
{
    if (srv->stopping)
        return;
    srv->stopping = true;
    srv->stop_deadline_ms = uv_now(srv->loop) + STOP_GRACE_MS;
    close_handle(srv, (uv_handle_t *)&srv->listener);
    close_handle(srv, (uv_handle_t *)&srv->sigint);
    close_handle(srv, (uv_handle_t *)&srv->sigterm);
    /* conn_shutdown may unlink the connection it is given, but only later,
     * from its close callback: walking the list here is safe. */
    for (struct conn *c = srv->conns; c != NULL; c = conn_next(c))
        conn_shutdown(c, false);
    if (srv->active == 0)
        close_handle(srv, (uv_handle_t *)&srv->tick);
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

static void print_url(struct server *srv)
{
    struct sockaddr_storage addr;
    int len = sizeof addr;
    char host[64] = "?";
    int port = 0;
    if (uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&addr, &len) == 0) {
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

int server_start(struct server *srv, uv_loop_t *loop, const struct config *cfg)
{
    memset(srv, 0, sizeof *srv);
    srv->loop = loop;
    srv->cfg = cfg;
    srv->started_ms = uv_now(loop);
    refresh_date(srv);

    if (realpath(cfg->root, srv->root) == NULL) {
        log_error("root \"%s\": %s", cfg->root, strerror(errno));
        return -errno;
    }
    srv->root_len = strlen(srv->root);
    int rc = access_log_open(&srv->access, cfg->access_log);
    if (rc < 0) {
        log_error("access log \"%s\": %s", cfg->access_log, strerror(-rc));
        return rc;
    }
    struct sockaddr_storage addr;
    rc = parse_listen(cfg->listen, &addr);
    if (rc < 0) {
        log_error("listen \"%s\": not ADDR:PORT", cfg->listen);
        goto fail_close_log;
    }
    uv_tcp_init(loop, &srv->listener);
    uv_signal_init(loop, &srv->sigint);
    uv_signal_init(loop, &srv->sigterm);
    uv_timer_init(loop, &srv->tick);
    srv->open_handles = 4;
    srv->sigint.data = srv->sigterm.data = srv->tick.data = srv;

    rc = uv_tcp_bind(&srv->listener, (struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv->listener, BACKLOG, server_on_connection);
    if (rc < 0) {
        log_error("listen on %s: %s", cfg->listen, uv_strerror(rc));
        goto fail_close_handles;
    }
    if ((rc = uv_signal_start(&srv->sigint, server_on_signal, SIGINT)) < 0 ||
        (rc = uv_signal_start(&srv->sigterm, server_on_signal, SIGTERM)) < 0 ||
        (rc = uv_timer_start(&srv->tick, server_on_tick, 1000, 1000)) < 0) {
        log_error("start: %s", uv_strerror(rc));
        goto fail_close_handles;
    }
    print_url(srv);
    return 0;

fail_close_handles:
    srv->stopping = true;
    close_handle(srv, (uv_handle_t *)&srv->listener);
    close_handle(srv, (uv_handle_t *)&srv->sigint);
    close_handle(srv, (uv_handle_t *)&srv->sigterm);
    close_handle(srv, (uv_handle_t *)&srv->tick);
fail_close_log:
    access_log_close(&srv->access);
    return rc;
}
