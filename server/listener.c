#define _GNU_SOURCE /* accept4 */
/* The listening sockets: bind, accept in batches, pause while fds or memory
 * run out, and at max_connections make room or answer a short 503: the
 * client holding the most gives way first (server/http/clients.h). Two
 * doors: the public listener (listen), and the admin door (admin_listen),
 * a loopback port or a unix socket where the dashboard, /settings and the
 * figures answer, so that no reverse proxy in front of the public port can
 * reach them, whatever it says of its clients (router.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "server/base/util.h"
#include "server/http/conn.h"
#include "server/module.h"
#include "server/server.h"
#include "server/server_internal.h"

/* The admin door's backlog, and the least of the public one's. */
#define BACKLOG 511
/* Connections taken per wakeup: enough to drain a burst, few enough that the
 * connections already open keep their turn while a flood arrives. */
#define ACCEPT_BATCH 64
/* How long accepting rests when the process is out of fds or memory: the
 * waiting connections stay queued in the kernel meanwhile. */
#define ACCEPT_PAUSE_MS 100

void server_close_admin(int fd, const char *unix_path)
{
    if (fd >= 0)
        close(fd);
    if (unix_path[0] != '\0')
        unlink(unix_path);
}

void server__close_listener(struct server *srv)
{
    if (srv->listen_fd < 0)
        return;
    handle_close((uv_handle_t *)&srv->accept_poll);
    handle_close((uv_handle_t *)&srv->accept_pause);
    /* uv_close has stopped the poll: the fd is no longer watched. */
    close(srv->listen_fd);
    srv->listen_fd = -1;
    if (srv->admin_fd >= 0)
        handle_close((uv_handle_t *)&srv->admin_poll);
    server_close_admin(srv->admin_fd, srv->admin_unix);
    srv->admin_fd = -1;
    srv->admin_unix[0] = '\0';
}

static void server_on_acceptable(uv_poll_t *poll, int status, int events);
static void server_on_admin_acceptable(uv_poll_t *poll, int status, int events);

/* Watches both doors (the admin one when there is one). */
static int start_polls(struct server *srv)
{
    int rc = uv_poll_start(&srv->accept_poll, UV_READABLE, server_on_acceptable);
    if (rc == 0 && srv->admin_fd >= 0)
        rc = uv_poll_start(&srv->admin_poll, UV_READABLE, server_on_admin_acceptable);
    return rc;
}

static void server_on_accept_resume(uv_timer_t *timer)
{
    struct server *srv = timer->data;
    int rc = start_polls(srv);
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
    if (srv->admin_fd >= 0)
        uv_poll_stop(&srv->admin_poll);
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

/* Takes the connections waiting on LISTEN_FD, the admin door's when ADMIN. */
static void accept_batch(struct server *srv, int listen_fd, bool admin)
{
    /* One eviction per accept() that ran out of fds: if the next fails too,
     * the fd went elsewhere, and accepting rests instead. */
    bool gave_way = false;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        struct sockaddr_storage addr = {.ss_family = AF_UNSPEC};
        socklen_t addr_len = sizeof addr;
        int fd =
            accept4(listen_fd, (struct sockaddr *)&addr, &addr_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
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
        if (admin && srv->admin_active >= CONN_ADMIN_MAX) {
            conn_refuse_admin(&srv->conn_env, fd);
            continue;
        }
        bool full = !admin && srv->active >= srv->cfg->max_connections;
        /* The admin door takes no PROXY header: its peers are its own. */
        bool later = full && !admin && admit_at_header(srv, peer);
        if (full && !later && !make_room(srv, fd, peer))
            continue;
        int rc =
            admin ? conn_accept_admin(&srv->conn_env, fd) : conn_accept(&srv->conn_env, fd, later);
        if (rc < 0) {
            log_warn("accept: %s", uv_strerror(rc));
            continue;
        }
        *(admin ? &srv->admin_active : &srv->active) += 1; /* until the connection's gone */
        srv->accepted++;
    }
}

static void server_on_acceptable(uv_poll_t *poll, int status, int events)
{
    struct server *srv = container_of(poll, struct server, accept_poll);
    if (status < 0)
        pause_accepting(srv, status);
    else
        accept_batch(srv, srv->listen_fd, false);
}

static void server_on_admin_acceptable(uv_poll_t *poll, int status, int events)
{
    struct server *srv = container_of(poll, struct server, admin_poll);
    if (status < 0)
        pause_accepting(srv, status);
    else
        accept_batch(srv, srv->admin_fd, true);
}

/* A listening socket of our own rather than uv_listen: libuv's accept loop
 * cannot be paused, and when its reserve-fd trick is spent an EMFILE makes
 * it retry at once, forever. BACKLOG connections wait for accept() (the
 * kernel caps it at net.core.somaxconn). Returns 0 or a negative errno. */
static int bind_listener(const struct sockaddr *addr, int backlog, int *fd_out)
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
    if (bind(fd, addr, len) < 0 || listen(fd, backlog) < 0) {
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

/* FD's bound address as a URL's host and port ("127.0.0.1", "[::1]"); a
 * unix socket's path in HOST and port 0. */
static int bound_name(int fd, char *host, size_t len)
{
    struct sockaddr_storage addr;
    socklen_t addr_len = sizeof addr;
    snprintf(host, len, "?");
    if (getsockname(fd, (struct sockaddr *)&addr, &addr_len) != 0)
        return 0;
    if (addr.ss_family == AF_UNIX) {
        snprintf(host, len, "%s", ((struct sockaddr_un *)&addr)->sun_path);
        return 0;
    }
    if (addr.ss_family == AF_INET6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&addr;
        host[0] = '[';
        uv_ip6_name(a6, host + 1, len - 2);
        strcat(host, "]");
        return ntohs(a6->sin6_port);
    }
    struct sockaddr_in *a4 = (struct sockaddr_in *)&addr;
    uv_ip4_name(a4, host, len);
    return ntohs(a4->sin_port);
}

/* The startup line's end: where the admin door is, and the pages for
 * people the modules bring there (", dashboard http://..."). A unix
 * socket is no address to browse to: its path, for curl --unix-socket. */
static void admin_urls(const struct server *srv, char *out, size_t len)
{
    if (srv->admin_fd < 0) {
        snprintf(out, len, ", admin off");
        return;
    }
    char host[128];
    int port = bound_name(srv->admin_fd, host, sizeof host);
    if (port == 0) {
        snprintf(out, len, ", admin unix:%s", host);
        return;
    }
    /* A wildcard is no address to browse to, and a page's switch answers
     * only a loopback Host: a wildcard bind names the loopback one. */
    const char *page_host = strcmp(host, "0.0.0.0") == 0 ? "127.0.0.1"
                            : strcmp(host, "[::]") == 0  ? "[::1]"
                                                         : host;
    size_t n = (size_t)snprintf(out, len, ", admin http://%s:%d/", page_host, port);
    for (size_t i = 0; srv->modules[i] != NULL; i++) {
        const struct module *m = srv->modules[i];
        if (m->page != NULL && n < len)
            n += (size_t)snprintf(out + n, len - n, ", %s http://%s:%d%s", m->name, page_host, port,
                                  m->page);
    }
}

static void print_url(struct server *srv)
{
    char host[128];
    int port = bound_name(srv->listen_fd, host, sizeof host);
    char part[32];
    config_format_size(srv->cfg->partition, part, sizeof part);
    char admin[384];
    admin_urls(srv, admin, sizeof admin);
    /* Where the settings came from: conf/unclog.conf is read only when the
     * working directory holds it. */
    char conf[PATH_MAX + 8] = "no config file";
    if (srv->cfg->file[0] != '\0')
        snprintf(conf, sizeof conf, "config %s", srv->cfg->file);
    log_info("listening on http://%s:%d/ serving %s (partition %s, threads %u), %s%s", host, port,
             srv->root, part, srv->cfg->threads, conf, admin);
}

/* The public door's backlog: a full house of connections arriving at once
 * (max_connections) waits for accept() rather than having its handshakes
 * dropped, each retried a second later (the first SYN retransmit), as
 * HAProxy sizes a frontend's by its maxconn. */
static int public_backlog(const struct config *cfg)
{
    /* max_connections is at most 1,000,000 (keys.c): an int. */
    return cfg->max_connections > BACKLOG ? (int)cfg->max_connections : BACKLOG;
}

int server_open_listener(const struct config *cfg, int *fd)
{
    const char *listen = cfg->listen;
    struct sockaddr_storage addr;
    /* The configuration checked it when it was read (an error there is
     * exit status 2, with its place); this is only a guard. */
    int rc = config_parse_addr(listen, &addr);
    if (rc < 0) {
        log_error("listen \"%s\": not an address", listen);
        return rc;
    }
    rc = bind_listener((struct sockaddr *)&addr, public_backlog(cfg), fd);
    if (rc == UV_EADDRINUSE)
        log_error("listen on %s: %s: another program holds the port; --listen ADDR:0 takes "
                  "any free one (make run RUN_ARGS='--listen 127.0.0.1:0')",
                  listen, uv_strerror(rc));
    else if (rc < 0)
        log_error("listen on %s: %s", listen, uv_strerror(rc));
    return rc;
}

/* admin_listen = auto for LISTEN (a listen value): a loopback address
 * (LISTEN's own when it is one, so that servers on 127.0.0.2 and 127.0.0.3
 * keep apart; else 127.0.0.1 or [::1] by its family) and LISTEN's port
 * + 1, or 0 (any free port) when LISTEN's is 0 or 65535. */
static void admin_auto(const char *listen, struct sockaddr_storage *addr)
{
    config_parse_addr(listen, addr); /* checked when it was read */
    bool loopback = addr_is_loopback((const struct sockaddr *)addr);
    in_port_t *port;
    if (addr->ss_family == AF_INET6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)addr;
        if (!loopback)
            a6->sin6_addr = in6addr_loopback;
        port = &a6->sin6_port;
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)addr;
        if (!loopback)
            a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        port = &a4->sin_port;
    }
    unsigned p = ntohs(*port);
    *port = htons(p == 0 || p == 65535 ? 0 : (in_port_t)(p + 1));
}

/* Whether the unix socket at SUN is left over from a process that is gone:
 * nothing accepts on it. A live one is never taken over. */
static bool unix_stale(const struct sockaddr_un *sun)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool stale =
        connect(fd, (const struct sockaddr *)sun, sizeof *sun) < 0 && errno == ECONNREFUSED;
    close(fd);
    return stale;
}

/* A unix socket at PATH, for its owner only (0600: a socket's mode is
 * what lets a process connect); one left over by a process that is gone is
 * replaced. Returns 0 with the fd in *FD_OUT, or a negative errno. */
static int bind_unix(const char *path, int *fd_out)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sun.sun_path)
        return -ENAMETOOLONG; /* the configuration checked it */
    memcpy(sun.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int rc = bind(fd, (struct sockaddr *)&sun, sizeof sun);
    if (rc < 0 && errno == EADDRINUSE && unix_stale(&sun) && unlink(path) == 0)
        rc = bind(fd, (struct sockaddr *)&sun, sizeof sun);
    /* Nobody can connect before listen(): the mode is set in time. */
    if (rc < 0 || chmod(path, 0600) < 0 || listen(fd, BACKLOG) < 0) {
        int err = -errno;
        if (rc == 0)
            unlink(path);
        close(fd);
        return err;
    }
    *fd_out = fd;
    return 0;
}

int server_open_admin(const struct config *cfg, int *fd, char unix_path[108])
{
    const char *want = cfg->admin_listen;
    unix_path[0] = '\0';
    *fd = -1;
    if (strcmp(want, "off") == 0)
        return 0;
    if (strncmp(want, "unix:", 5) == 0) {
        int rc = bind_unix(want + 5, fd);
        if (rc < 0) {
            log_error("admin_listen %s: %s%s", want, strerror(-rc),
                      rc == -EADDRINUSE ? ": another server accepts on it" : "");
            return uv_translate_sys_error(-rc);
        }
        snprintf(unix_path, 108, "%s", want + 5);
        return 0;
    }
    struct sockaddr_storage addr;
    bool automatic = strcmp(want, "auto") == 0;
    if (automatic)
        admin_auto(cfg->listen, &addr);
    else if (config_parse_addr(want, &addr) < 0)
        return UV_EINVAL; /* checked when it was read */
    int rc = bind_listener((struct sockaddr *)&addr, BACKLOG, fd);
    if (rc == UV_EADDRINUSE && automatic) {
        /* The port next to listen's is another program's: any free one,
         * which the startup line names. */
        if (addr.ss_family == AF_INET6)
            ((struct sockaddr_in6 *)&addr)->sin6_port = 0;
        else
            ((struct sockaddr_in *)&addr)->sin_port = 0;
        rc = bind_listener((struct sockaddr *)&addr, BACKLOG, fd);
    }
    if (rc < 0) {
        log_error("admin_listen %s: %s", want, uv_strerror(rc));
        return rc;
    }
    if (!automatic && !addr_is_loopback((const struct sockaddr *)&addr))
        log_warn("admin_listen %s: beyond loopback, whoever reaches it reads every figure "
                 "(client addresses, pid) and, with admin = on, changes settings: firewall it",
                 want);
    return 0;
}

int server__listener_open(struct server *srv, int listen_fd, int admin_fd)
{
    int rc;
    srv->listen_fd = listen_fd;
    srv->admin_fd = admin_fd;
    srv->admin_unix[0] = '\0';
    if (listen_fd < 0) {
        if ((rc = server_open_listener(srv->cfg, &srv->listen_fd)) < 0)
            return rc;
        if ((rc = server_open_admin(srv->cfg, &srv->admin_fd, srv->admin_unix)) < 0) {
            close(srv->listen_fd);
            srv->listen_fd = -1;
            return rc;
        }
    }
    rc = uv_poll_init_socket(srv->loop, &srv->accept_poll, srv->listen_fd);
    if (rc < 0) {
        log_error("listen on %s: %s", srv->cfg->listen, uv_strerror(rc));
        close(srv->listen_fd);
        srv->listen_fd = -1;
        server_close_admin(srv->admin_fd, srv->admin_unix);
        srv->admin_fd = -1;
        return rc;
    }
    if (srv->admin_fd >= 0 &&
        (rc = uv_poll_init_socket(srv->loop, &srv->admin_poll, srv->admin_fd)) < 0) {
        log_error("admin_listen %s: %s", srv->cfg->admin_listen, uv_strerror(rc));
        handle_close((uv_handle_t *)&srv->accept_poll);
        close(srv->listen_fd);
        srv->listen_fd = -1;
        server_close_admin(srv->admin_fd, srv->admin_unix);
        srv->admin_fd = -1;
        return rc;
    }
    /* Timers cannot fail to initialise. */
    uv_timer_init(srv->loop, &srv->accept_pause);
    srv->accept_pause.data = srv;
    return 0;
}

int server__listener_start(struct server *srv)
{
    int rc = start_polls(srv);
    if (rc < 0)
        return rc;
    print_url(srv);
    raise_fd_limit(srv->cfg);
    return 0;
}
