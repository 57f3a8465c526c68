/* Who a connection serves, and the answer when it may not be served: its
 * client named (at the accept, or once a balancer's PROXY header names it)
 * and the short 503 at max_connections (at the accept, at the admin door,
 * or once the header names a client that gets no room). */
#include "server/http/conn.h"
#include "server/http/conn_internal.h"

#include <netinet/in.h>
#include <stdio.h>
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
 * (loopback, addr), the client, and its place among the clients (*CLIENT).
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
    c->client_id = client_of(sa, cfg->client_prefix.v4, cfg->client_prefix.v6, client);
    writer_set_client(&c->writer, c->client_id);
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
