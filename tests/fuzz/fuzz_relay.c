/* libFuzzer target: a load balancer's connection. The input is what a peer
 * under proxy_protocol_from sends: a PROXY header (or not), then the
 * client's bytes, through the intake (the header's reads, the client it
 * names or not, the sniff for a header of the client's own) and on through
 * the parser, the limits, the router and the files and gzip handlers.
 *
 * The seam is the socket, as in fuzz_conn.c, but a socketpair has no
 * address: here each input connects over TCP on loopback, from 127.0.0.1,
 * to one of our listening sockets, and the accepted end goes to
 * conn_accept(), so getpeername() names a peer under proxy_protocol_from.
 *
 * And the answers must not depend on how the bytes arrive: every input is
 * sent twice, once whole and once in pieces (a byte at a time through the
 * longest PROXY header, then pieces of 1 to 64 bytes), each piece only once
 * the server has read the one before, and the two runs' answers must be the
 * same bytes (the clock's aside: Date, a multipart boundary; up to a reset,
 * which drops what is in flight by design). The routes whose answers are
 * the server's own figures or settings (/stats, /metrics, /settings, the
 * dashboard) change with every request, so this server has only the files
 * and gzip routes; fuzz_conn.c has them all.
 *
 * The comparison is on (FUZZ_RELAY_SPLIT=0 in the environment turns it
 * off; both runs are still made, under ASan). Its finds so far, all fixed:
 * a head refused by a parser callback was answered before the line check
 * of the bytes before it ("GET /x" CR LF CR LF: 505 whole, 400 in pieces;
 * seed split-http09-head); a long target's 414 came after that check in
 * pieces, before it whole; and a client's failed first request that
 * begins as a PROXY signature was closed unanswered or answered 400 as the
 * bytes in when its parse failed said ("PROX" in pieces, the whole line at
 * once: "PROXY TCP4" CR CR was closed in pieces and answered 400 whole;
 * seed split-proxy-signature): it now reads on until its first bytes are a
 * header or are not (conn__sniff_verdict); once on, it found a HEAD's bare
 * LF refused with its body in pieces and without it whole (seed
 * split-head-bare-lf), a bad line in a head that on_headers_complete
 * refuses, 400 in pieces and 405 whole (split-bad-line-refused-head), and
 * a bad character before max_url in a longer target, 400 in pieces and
 * 414 whole (split-url-tab-past-max), a control character past max_url,
 * 414 in pieces and 400 whole (split-url-past-max-then-ctl), and a bare CR
 * after a HEAD's answer refused without its body in pieces
 * (split-head-then-bare-cr). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "handlers/files/files.h"
#include "handlers/gzip.h"
#include "server/http/conn.h"
#include "server/http/proxy_header.h"
#include "server/server.h"
#include "tests/fuzz/fuzz_server.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uv_loop_t loop;
static struct config cfg;
static struct server srv;
/* Listeners taken in turn: the server mostly closes first, and each
 * connection it closed holds its address pair in TIME_WAIT for a minute;
 * a new connection from a port whose pair waits so has its SYN answered
 * late (relay_connect). With one listener, a few minutes of inputs meet
 * such pairs often; with many, seldom. */
#define LISTENERS 16
static int listen_fd[LISTENERS];
static struct sockaddr_in listen_addr[LISTENERS];
static unsigned next_listener;

static const struct module *const relay_modules[] = {&gzip_module, &files_module, NULL};

/* What one run's client received: the first OUT_MAX bytes, and how it ended. */
#define OUT_MAX (1024 * 1024)
struct client {
    uv_poll_t poll;
    int fd;
    uint8_t *out;
    size_t len, total;
    bool done, reset;
};

static void client_on_poll(uv_poll_t *poll, int status, int events)
{
    struct client *cl = poll->data;
    uint8_t buf[64 * 1024];
    ssize_t n = recv(cl->fd, buf, sizeof buf, 0);
    if (n > 0) {
        size_t keep = cl->len + (size_t)n <= OUT_MAX ? (size_t)n : OUT_MAX - cl->len;
        memcpy(cl->out + cl->len, buf, keep);
        cl->len += keep;
        cl->total += (size_t)n;
    } else if (n == 0 || errno != EAGAIN) {
        cl->reset = n < 0;
        cl->done = true;
        uv_poll_stop(poll);
    }
}

/* How many bytes the server's end of the connection holds unread (0 once
 * it is closed). */
static int unread(int fd)
{
    int n = 0;
    return ioctl(fd, FIONREAD, &n) == 0 ? n : 0;
}

/* The length of the piece at POS: a byte at a time through the longest
 * header, then 1 to 64 bytes as the input's own bytes say. */
static size_t piece(const uint8_t *data, size_t size, size_t pos)
{
    size_t len = pos < PROXY_HEADER_MAX ? 1 : 1 + data[pos] % 64;
    return len < size - pos ? len : size - pos;
}

/* A connection from 127.0.0.1 to our listener: returns the client's end
 * (non-blocking), *SERVER_FD the accepted one (non-blocking too). */
static int relay_connect(int *server_fd)
{
    unsigned l = next_listener++ % LISTENERS;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        abort();
    /* Non-blocking: a connect that takes a while (its SYN met one of our
     * earlier pairs in TIME_WAIT and is sent again a second later) would
     * be cut short by libFuzzer's SIGALRM. And the loopback's ephemeral
     * ports may all be taken a while (a load test beside us). Neither is
     * a find. */
    int tries = 0, err = 0;
    while (connect(fd, (struct sockaddr *)&listen_addr[l], sizeof listen_addr[l]) < 0) {
        if (errno == EINPROGRESS) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
                ;
            socklen_t len = sizeof err;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
            break;
        }
        if (errno != EADDRNOTAVAIL || ++tries == 600) {
            err = errno;
            break;
        }
        usleep(100 * 1000);
    }
    if (err != 0) {
        fprintf(stderr, "fuzz_relay: connect: %s\n", strerror(err));
        abort();
    }
    int sfd;
    while ((sfd = accept(listen_fd[l], NULL, NULL)) < 0 && errno == EINTR)
        ;
    if (sfd < 0)
        abort();
    /* Closed with a reset: no TIME_WAIT of the client's own. */
    struct linger lin = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lin, sizeof lin);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ioctl(fd, FIONBIO, &one);
    ioctl(sfd, FIONBIO, &one);
    ioctl(sfd, FIOCLEX);
    *server_fd = sfd;
    return fd;
}

/* Sends DATA (in pieces with SPLIT) on a new connection, then EOF, and
 * keeps what comes back in *CL until the connection has been freed. */
static void relay_run(const uint8_t *data, size_t size, bool split, struct client *cl)
{
    int sfd;
    cl->fd = relay_connect(&sfd);
    if (conn_accept(&srv.conn_env, sfd, false) < 0)
        abort();
    srv.active++; /* as the listener counts it, until the connection's gone */
    uv_poll_init_socket(&loop, &cl->poll, cl->fd);
    cl->poll.data = cl;
    uv_poll_start(&cl->poll, UV_READABLE, client_on_poll);
    size_t pos = 0;
    while (pos < size && srv.active > 0) {
        size_t len = split ? piece(data, size, pos) : size - pos;
        ssize_t n = send(cl->fd, data + pos, len, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN)
            break; /* the server closed: the rest is not wanted */
        if (n > 0)
            pos += (size_t)n;
        /* A piece goes only once the server has read the one before (the
         * loop is the server's and the client's: one thread). sfd is open
         * while the connection is counted: close_conn closes it, and only
         * then does the count drop. */
        do
            uv_run(&loop, UV_RUN_ONCE);
        while (split && srv.active > 0 && unread(sfd) > 0);
    }
    shutdown(cl->fd, SHUT_WR);
    while (srv.active > 0)
        uv_run(&loop, UV_RUN_ONCE);
    while (!cl->done)
        uv_run(&loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&cl->poll, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    close(cl->fd);
}

/* Blanks in P[0..LEN) the VALUE_LEN bytes after every NAME. */
static void mask_after(uint8_t *p, size_t len, const char *name, size_t value_len)
{
    size_t name_len = strlen(name);
    for (size_t i = 0; i + name_len + value_len <= len; i++) {
        if (memcmp(p + i, name, name_len) == 0)
            memset(p + i + name_len, 'x', value_len);
    }
}

/* Blanks what the clock writes into answers: the Date header's value (an
 * IMF-fixdate) and a multipart/byteranges boundary (the time in hex). */
static void mask_clock(uint8_t *p, size_t len)
{
    mask_after(p, len, "\r\nDate: ", 29);
    mask_after(p, len, "boundary=unclog", 16);
    mask_after(p, len, "\r\n--unclog", 16);
}

static bool compare_splits;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *split = getenv("FUZZ_RELAY_SPLIT");
    compare_splits = split == NULL || strcmp(split, "0") != 0;
    /* Every run ends at the client's EOF, not at a timeout; and a head
     * sent a byte at a time must not meet header_timeout (from the accept)
     * on a busy machine when it did not whole. */
    static const char *const relay[][2] = {{"proxy_protocol_from", "127.0.0.1"},
                                           {"header_timeout", "60s"}};
    fuzz_server_init(&srv, &loop, &cfg, relay_modules, relay, 2);
    for (unsigned l = 0; l < LISTENERS; l++) {
        struct sockaddr_in *addr = &listen_addr[l];
        listen_fd[l] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        addr->sin_family = AF_INET;
        addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof *addr;
        if (listen_fd[l] < 0 || bind(listen_fd[l], (struct sockaddr *)addr, len) < 0 ||
            listen(listen_fd[l], 16) < 0 ||
            getsockname(listen_fd[l], (struct sockaddr *)addr, &len))
            abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t out[2][OUT_MAX];
    struct client whole = {.out = out[0]}, split = {.out = out[1]};
    relay_run(data, size, false, &whole);
    relay_run(data, size, true, &split);
    if (!compare_splits)
        return 0;
    mask_clock(whole.out, whole.len);
    mask_clock(split.out, split.len);
    size_t common = whole.len < split.len ? whole.len : split.len;
    bool same = memcmp(whole.out, split.out, common) == 0;
    if (!whole.reset && !split.reset)
        same = same && whole.total == split.total;
    if (!same) {
        size_t at = 0;
        while (at < common && whole.out[at] == split.out[at])
            at++;
        int show = common - at < 60 ? (int)(common - at) : 60;
        fprintf(stderr,
                "fuzz_relay: %zu bytes whole%s, %zu in pieces%s: the answers differ at byte "
                "%zu:\n  whole:  %.*s\n  pieces: %.*s\n",
                whole.total, whole.reset ? " (reset)" : "", split.total,
                split.reset ? " (reset)" : "", at, show, (const char *)whole.out + at, show,
                (const char *)split.out + at);
        abort();
    }
    return 0;
}
