/* A connection of the core driven by a unit test through a socketpair: the
 * test plays the client (pair_exchange sends bytes and returns what the
 * server answered) and chooses the route every request gets (pair_route).
 * Only the public API of server/http/conn.h and the conn_env the server
 * would fill. Include once per test binary. */
#ifndef UNCLOG_CONN_PAIR_H
#define UNCLOG_CONN_PAIR_H

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/base/log.h"
#include "server/http/conn.h"
#include "server/server.h"

static uv_loop_t pair_loop;
static struct config pair_cfg;
static struct config *pair_cfg_ptr = &pair_cfg;
static bool pair_stopping;
static uint64_t pair_bytes_sent;
static struct pump_env pair_pump;
static struct writer_env pair_writer = {.pump = &pair_pump, .bytes_sent = &pair_bytes_sent};
static struct access_log pair_log;
static struct clients pair_clients;
static const struct route *pair_the_route;
static unsigned pair_gone;
static int pair_client = -1;
static char pair_out[64 * 1024]; /* what the server sent, NUL-terminated */
static size_t pair_out_len;

static const struct route *pair_find_route(const struct server *owner, const char *target,
                                           bool admin)
{
    return pair_the_route;
}

static const char *pair_date(struct server *owner)
{
    return "Thu, 01 Jan 2026 00:00:00 GMT";
}

static void pair_response_done(struct server *owner, const struct route *r, int status,
                               uint64_t bytes, uint64_t us)
{
}

static void pair_conn_gone(struct server *owner, bool admin)
{
    pair_gone++;
}

static struct conn_env pair_env = {.loop = &pair_loop,
                                   .cfg = &pair_cfg_ptr,
                                   .writer = &pair_writer,
                                   .access = &pair_log,
                                   .stopping = &pair_stopping,
                                   .route = pair_find_route,
                                   .date = pair_date,
                                   .response_done = pair_response_done,
                                   .gone = pair_conn_gone,
                                   .clients = &pair_clients};

/* Every request of the connections opened from now on gets ROUTE. */
static void pair_route(const struct route *route)
{
    pair_the_route = route;
}

/* The core's keys at their defaults; a loop and no access log. */
static void pair_init(void)
{
    signal(SIGPIPE, SIG_IGN);
    static const struct config_table *const core_keys[] = {&server_config_table, NULL};
    config_defaults(&pair_cfg, core_keys);
    if (uv_loop_init(&pair_loop) != 0 || access_log_open(&pair_log, &pair_loop, "off") != 0)
        abort();
    log_set_level(LOG_ERROR);
}

/* Runs the loop a while, collecting what the server sends (appended to
 * pair_out) until it closes its side or nothing more comes. Returns
 * whether it closed. */
static bool pair_collect(void)
{
    int quiet = 0;
    while (quiet < 50) {
        uv_run(&pair_loop, UV_RUN_NOWAIT);
        ssize_t n = recv(pair_client, pair_out + pair_out_len, sizeof pair_out - 1 - pair_out_len,
                         MSG_DONTWAIT);
        if (n == 0) {
            pair_out[pair_out_len] = '\0';
            return true;
        }
        if (n > 0) {
            pair_out_len += (size_t)n;
            quiet = 0;
        } else {
            quiet++;
        }
    }
    pair_out[pair_out_len] = '\0';
    return false;
}

/* A new connection, its server side accepted by the core. */
static void pair_open(void)
{
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) < 0)
        abort();
    pair_client = pair[1];
    if (conn_accept(&pair_env, pair[0], false) < 0)
        abort();
}

/* Sends TEXT (LEN bytes) as the client and returns all the server answered
 * to it; *CLOSED says whether the server closed its side. */
static const char *pair_exchange_len(const char *text, size_t len, bool *closed)
{
    pair_out_len = 0;
    if (len > 0 && send(pair_client, text, len, MSG_NOSIGNAL) < 0)
        abort();
    bool c = pair_collect();
    if (closed != NULL)
        *closed = c;
    return pair_out;
}

static const char *pair_exchange(const char *text, bool *closed)
{
    return pair_exchange_len(text, strlen(text), closed);
}

/* Hangs up as the client and runs the loop until the core freed the
 * connection. */
static void pair_close(void)
{
    unsigned before = pair_gone;
    shutdown(pair_client, SHUT_WR);
    for (int i = 0; i < 1000 && pair_gone == before; i++) {
        char buf[4096];
        while (recv(pair_client, buf, sizeof buf, MSG_DONTWAIT) > 0)
            ;
        uv_run(&pair_loop, UV_RUN_NOWAIT);
    }
    close(pair_client);
    pair_client = -1;
}

/* Closes what is left; returns uv_loop_close's answer (0: every handle closed). */
static int pair_done(void)
{
    conn_stop_all(&pair_env, true);
    access_log_close(&pair_log);
    uv_run(&pair_loop, UV_RUN_DEFAULT);
    return uv_loop_close(&pair_loop);
}

#endif
