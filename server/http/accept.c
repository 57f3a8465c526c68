/* A socket becomes a connection (conn_accept): its options, its client
 * named and joined to the clients; and the 503 at max_connections, at the
 * accept or once a balancer's PROXY header names the client. */
#include "server/http/conn.h"
#include "server/http/conn_internal.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The answer to a connection refused at max_connections, direct or
 * relayed: short, and sent before a byte of the request is looked at. */
static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\n"
                           "Content-Type: text/plain; charset=utf-8\r\n"
                           "Content-Length: 24\r\n"
                           "Retry-After: 1\r\n"
                           "Connection: close\r\n\r\n"
                           "503 Service Unavailable\n";

/* A warning for the first refusal of each second (ENV's refused_logged). */
static void log_refusal(struct conn_env *env, const struct addr_prefix *client,
                        enum clients_refusal why)
{
    if ((*env->refused_logged)++ > 0)
        return;
    char text[64];
    addr_prefix_format(client, text, sizeof text);
    log_warn("max_connections (%u) reached: 503 to %s (%s)", (*env->cfg)->max_connections, text,
             why == CLIENTS_TOP_CLIENT ? "its client holds the most connections"
             : why == CLIENTS_SHARE    ? "its client holds its share of connections"
                                       : "nobody holds two more connections than its client");
}

/* A new socket's send buffer is empty: the write is whole or fails, and
 * either way FD is closed. */
static void answer_busy(int fd)
{
    (void)send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
}

void conn_refuse(struct conn_env *env, int fd, const struct addr_prefix *client,
                 enum clients_refusal why)
{
    answer_busy(fd);
    log_refusal(env, client, why);
}

void conn_refuse_admin(struct conn_env *env, int fd)
{
    answer_busy(fd);
    if ((*env->refused_logged)++ == 0)
        log_warn("admin door: %u connections open: 503", CONN_ADMIN_MAX);
}

/* C came at max_connections and its client, CLIENT, is refused: it gets
 * what a direct connection of that client gets at the accept (conn_refuse),
 * through the balancer, and closes at once, so that it holds no slot
 * while the balancer takes its time to close. */
void conn__refuse_at_limit(struct conn *c, const struct addr_prefix *client,
                           enum clients_refusal why)
{
    /* Nothing was sent on C yet: its send buffer has room for it all. */
    uv_buf_t out = uv_buf_init((char *)busy, sizeof busy - 1);
    (void)uv_try_write((uv_stream_t *)&c->tcp, &out, 1);
    c->in_len = 0;
    conn__close(c, false);
    log_refusal(c->env, client, why);
}

/* Names C's client SA (family AF_UNSPEC: unknown), for everything that
 * tells clients apart: the access log (peer), /settings and /stats
 * (loopback, addr), the flow, and its place among the clients (*CLIENT).
 * The one place a connection learns who it serves: its peer at the
 * accept, or the client a load balancer's PROXY header names. */
void conn__name_client(struct conn *c, const struct sockaddr *sa, struct addr_prefix *client)
{
    const struct config *cfg = conn__cfg(c);
    snprintf(c->peer, sizeof c->peer, "-");
    if (sa->sa_family == AF_INET6)
        uv_ip6_name((const struct sockaddr_in6 *)sa, c->peer, sizeof c->peer);
    else if (sa->sa_family == AF_INET)
        uv_ip4_name((const struct sockaddr_in *)sa, c->peer, sizeof c->peer);
    c->loopback = addr_is_loopback(sa);
    addr_prefix_of(sa, 32, 128, &c->addr);
    c->flow = c->pump.flow = client_of(sa, cfg->client_prefix.v4, cfg->client_prefix.v6, client);
}

bool conn_relayed_from(const struct config *cfg, const struct sockaddr *sa)
{
    struct addr_prefix addr;
    addr_prefix_of(sa, 32, 128, &addr);
    for (unsigned i = 0; i < cfg->proxy_protocol_from.n; i++) {
        if (addr_prefix_contains(&cfg->proxy_protocol_from.prefix[i], &addr))
            return true;
    }
    return false;
}

/* C's peer as a client (client_of): its address under client_prefix in
 * *CLIENT; C's names are left as they are. */
void conn__peer_client(struct conn *c, struct addr_prefix *client)
{
    const struct config *cfg = conn__cfg(c);
    struct sockaddr_storage addr = {.ss_family = AF_UNSPEC};
    int addr_len = sizeof addr;
    uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&addr, &addr_len);
    client_of((const struct sockaddr *)&addr, cfg->client_prefix.v4, cfg->client_prefix.v6, client);
}

/* Serves FD on C's handle and names the client: for the access log, the
 * flow and its place among the clients (*CLIENT), /settings. Returns 0 or
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
    pump_init(&c->pump, (uv_stream_t *)&c->tcp, env->pump, 0, conn__on_pump_done);
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
    rc = admin ? 0 : clients_join(env->clients, &c->client, c->flow, &client);
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
