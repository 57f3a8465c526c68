#define _GNU_SOURCE /* accept4 */
/* The listening socket: bind, accept in batches, pause while fds or memory
 * run out, and at max_connections make room or answer a short 503: the
 * client holding the most gives way first (server/http/clients.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/base/util.h"
#include "server/http/conn.h"
#include "server/module.h"
#include "server/server.h"
#include "server/server_internal.h"

#define BACKLOG 511
/* Connections taken per wakeup: enough to drain a burst, few enough that the
 * connections already open keep their turn while a flood arrives. */
#define ACCEPT_BATCH 64
/* How long accepting rests when the process is out of fds or memory: the
 * waiting connections stay queued in the kernel meanwhile. */
#define ACCEPT_PAUSE_MS 100

void server__close_listener(struct server *srv)
{
    if (srv->listen_fd < 0)
        return;
    handle_close((uv_handle_t *)&srv->accept_poll);
    handle_close((uv_handle_t *)&srv->accept_pause);
    /* uv_close has stopped the poll: the fd is no longer watched. */
    close(srv->listen_fd);
    srv->listen_fd = -1;
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

/* max_connections are open: the client holding the most gives way (its
 * idle, late, slow or longest busy connection closes, the first there is)
 * unless the newcomer's own client holds about as many; else the newcomer
 * gets a 503. Returns whether FD, from
 * ADDR, is to be served. */
static bool make_room(struct server *srv, int fd, const struct sockaddr *addr)
{
    const struct config *cfg = srv->cfg;
    enum clients_refusal why;
    struct addr_prefix client;
    uint64_t id = client_of(addr, cfg->client_prefix.v4, cfg->client_prefix.v6, &client);
    struct client_link *giver = clients_make_room(&srv->clients, id, &client, &why);
    if (giver == NULL) {
        conn_refuse(&srv->conn_env, fd, &client, why); /* a short 503, and the close */
        return false;
    }
    conn_evict(giver);
    return true;
}

/* At max_connections a load balancer's connection is admitted before its
 * client is known, and decided once its PROXY header names the client
 * (conn_accept): room made now would be for the balancer, not for the
 * client, and a refusal would fall on all the balancer's clients. At most
 * max_connections at once over the limit (each header is due within
 * header_timeout); beyond, the rule for a direct connection of the peer. */
static bool admit_at_header(const struct server *srv, const struct sockaddr *addr)
{
    return srv->active < 2ull * srv->cfg->max_connections && conn_relayed_from(srv->cfg, addr);
}

/* Out of fds: an idle, late or slow connection of the client holding the
 * most closes for whoever waits in the backlog. Returns whether one did. */
static bool give_way_for_fds(struct server *srv, int errnum)
{
    if (errnum != EMFILE && errnum != ENFILE)
        return false;
    struct client_link *idle = clients_give_way(&srv->clients);
    if (idle == NULL)
        return false;
    /* uv_close closes a socket's fd at once: the next accept() can have it. */
    conn_evict(idle);
    return true;
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
    /* One eviction per accept() that ran out of fds: if the next fails too,
     * the fd went elsewhere, and accepting rests instead. */
    bool gave_way = false;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        struct sockaddr_storage addr = {.ss_family = AF_UNSPEC};
        socklen_t addr_len = sizeof addr;
        int fd = accept4(srv->listen_fd, (struct sockaddr *)&addr, &addr_len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int errnum = errno;
            if (errnum == EAGAIN || errnum == EWOULDBLOCK)
                return;
            if (!gave_way && give_way_for_fds(srv, errnum)) {
                gave_way = true;
                continue;
            }
            if (!accept_error_transient(errnum)) {
                pause_accepting(srv, -errnum);
                return;
            }
            continue;
        }
        gave_way = false;
        if (srv->accept_paused) {
            log_info("accepting connections again");
            srv->accept_paused = false;
        }
        const struct sockaddr *peer = (const struct sockaddr *)&addr;
        bool full = srv->active >= srv->cfg->max_connections;
        bool later = full && admit_at_header(srv, peer);
        if (full && !later && !make_room(srv, fd, peer))
            continue;
        int rc = conn_accept(&srv->conn_env, fd, later);
        if (rc < 0) {
            log_warn("accept: %s", uv_strerror(rc));
            continue;
        }
        srv->active++; /* until the connection's gone */
        srv->accepted++;
    }
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
    char part[32];
    config_format_size(srv->cfg->partition, part, sizeof part);
    /* The pages for people the modules bring: ", dashboard http://...".
     * A wildcard is no address to browse to, and a page's switch answers
     * only a loopback Host: a wildcard bind names the loopback one. */
    const char *page_host = strcmp(host, "0.0.0.0") == 0 ? "127.0.0.1"
                            : strcmp(host, "[::]") == 0  ? "[::1]"
                                                         : host;
    char pages[256] = "";
    size_t n = 0;
    for (size_t i = 0; srv->modules[i] != NULL; i++) {
        const struct module *m = srv->modules[i];
        if (m->page != NULL && n < sizeof pages)
            n += (size_t)snprintf(pages + n, sizeof pages - n, ", %s http://%s:%d%s", m->name,
                                  page_host, port, m->page);
    }
    /* Where the settings came from: conf/unclog.conf is read only when the
     * working directory holds it. */
    char conf[PATH_MAX + 8] = "no config file";
    if (srv->cfg->file[0] != '\0')
        snprintf(conf, sizeof conf, "config %s", srv->cfg->file);
    log_info("listening on http://%s:%d/ serving %s (partition %s, threads %u), %s%s", host, port,
             srv->root, part, srv->cfg->threads, conf, pages);
}

int server_open_listener(const char *listen, int *fd)
{
    struct sockaddr_storage addr;
    /* The configuration checked it when it was read (an error there is
     * exit status 2, with its place); this is only a guard. */
    int rc = config_parse_addr(listen, &addr);
    if (rc < 0) {
        log_error("listen \"%s\": not an address", listen);
        return rc;
    }
    rc = bind_listener((struct sockaddr *)&addr, fd);
    if (rc == UV_EADDRINUSE)
        log_error("listen on %s: %s: another program holds the port; --listen ADDR:0 takes "
                  "any free one (make run RUN_ARGS='--listen 127.0.0.1:0')",
                  listen, uv_strerror(rc));
    else if (rc < 0)
        log_error("listen on %s: %s", listen, uv_strerror(rc));
    return rc;
}

int server__listener_open(struct server *srv, int listen_fd)
{
    int rc;
    srv->listen_fd = listen_fd;
    if (listen_fd < 0 && (rc = server_open_listener(srv->cfg->listen, &srv->listen_fd)) < 0)
        return rc;
    rc = uv_poll_init_socket(srv->loop, &srv->accept_poll, srv->listen_fd);
    if (rc < 0) {
        log_error("listen on %s: %s", srv->cfg->listen, uv_strerror(rc));
        close(srv->listen_fd);
        srv->listen_fd = -1;
        return rc;
    }
    /* Timers cannot fail to initialise. */
    uv_timer_init(srv->loop, &srv->accept_pause);
    srv->accept_pause.data = srv;
    return 0;
}

int server__listener_start(struct server *srv)
{
    int rc = uv_poll_start(&srv->accept_poll, UV_READABLE, server_on_acceptable);
    if (rc < 0)
        return rc;
    print_url(srv);
    raise_fd_limit(srv->cfg);
    return 0;
}
