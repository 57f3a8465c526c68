/* A socket becomes a connection (conn_accept): its options, its client
 * named (admit.c) and joined to the clients, its parser and pump, and the
 * handlers of its events wired (struct conn_events). The top of the
 * connection's files (conn_internal.h). */
#include "server/http/conn.h"
#include "server/http/conn_internal.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Serves FD on C's handle and names the client: for the access log, the
 * client and its place among the clients (*CLIENT), /settings. Returns 0 or
 * a negative UV_E* code (FD is not taken). */
static int open_socket(struct conn *c, int fd, struct addr_prefix *client)
{
    const struct config *cfg = conn__cfg(c);
    /* A fixed send buffer (send_buffer) turns the kernel's autotuning off;
     * TCP_NOTSENT_LOWAT (send_lowat) bounds only the unsent bytes, so one
     * write's work on the loop thread stays bounded (on loopback the
     * kernel's whole TCP path runs in write()) whatever the window. */
    int sndbuf = (int)cfg->send_buffer;
    if (sndbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    int lowat = (int)cfg->send_lowat;
    if (lowat > 0)
        setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof lowat);
    int rc = uv_tcp_open(&c->tcp, fd);
    if (rc < 0)
        return rc;
    uv_tcp_nodelay(&c->tcp, 1);
    struct sockaddr_storage addr = {.ss_family = AF_UNSPEC};
    int addr_len = sizeof addr;
    uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&addr, &addr_len);
    conn__name_client(c, (const struct sockaddr *)&addr, client);
    c->proxy_peer = c->proxy_wait =
        !c->admin && conn_relayed_from(cfg, (const struct sockaddr *)&addr);
    return 0;
}

/* The handlers of a connection's events, which the core reaches through
 * c->on. */
static const struct conn_events events = {
    .read = conn__on_read,
    .timer = conn__on_timer,
    .resume = conn__resume,
};

static int accept_fd(struct conn_env *env, int fd, bool at_limit, bool admin);

int conn_accept(struct conn_env *env, int fd, bool at_limit)
{
    return accept_fd(env, fd, at_limit, false);
}

int conn_accept_admin(struct conn_env *env, int fd)
{
    return accept_fd(env, fd, false, true);
}

/* Serves FD, accepted on the public listener or (ADMIN) on the admin door.
 * The admin door's may be a unix socket: its fd goes in the uv_tcp_t all
 * the same, as libuv's stream code is one for both, and what is TCP's alone
 * (nodelay, the socket options) fails harmlessly on it. */
static int accept_fd(struct conn_env *env, int fd, bool at_limit, bool admin)
{
    const struct config *cfg = *env->cfg;
    struct conn *c = malloc(sizeof *c + cfg->max_url + 1);
    if (c == NULL) {
        close(fd);
        return UV_ENOMEM;
    }
    memset(c, 0, offsetof(struct conn, values)); /* the big buffers need no zeroing */
    c->env = env;
    c->on = &events;
    c->url_max = cfg->max_url;
    int rc = uv_tcp_init(env->loop, &c->tcp);
    if (rc < 0) {
        free(c);
        close(fd);
        return rc;
    }
    uv_timer_init(env->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->handles = 2;
    writer_init(&c->writer, (uv_stream_t *)&c->tcp, env->writer, &conn__writer_ops);
    conn__parser_init(c);
    strict_lines_init(&c->lines);
    c->admin = admin;
    struct addr_prefix client;
    rc = open_socket(c, fd, &client);
    if (rc < 0) {
        close(fd);
        conn__close(c, false); /* not served: frees itself without a word to ENV */
        return rc;
    }
    c->at_limit = at_limit && c->proxy_peer;
    /* The admin door's connections are no client's (conn.h's CONN_ADMIN_MAX). */
    rc = admin ? 0 : clients_join(env->clients, &c->client, c->client_id, &client);
    if (rc < 0) {
        conn__close(c, false); /* the socket is the handle's now: it closes with it */
        return rc;
    }
    c->next = env->conns;
    if (c->next != NULL)
        c->next->pprev = &c->next;
    env->conns = c;
    c->pprev = &env->conns;
    /* Born in CONN_NEW (0, where memset left it): its timer and reading. */
    conn__arm_state(c, CONN_NEW);
    conn__follow_input(c);
    return 0;
}
