#include "server/http/conn_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/server.h"

static void conn_on_timer(uv_timer_t *timer);

/* ---- small accessors ------------------------------------------------------ */

struct server *conn_server(struct conn *c)
{
    return c->srv;
}

uint64_t conn_flow(const struct conn *c)
{
    return c->flow;
}

bool conn_peer_loopback(const struct conn *c)
{
    return c->loopback;
}

/* FNV-1a of the peer's address: the same client, the same flow. */
static uint64_t hash_peer(const char *peer)
{
    uint64_t h = 14695981039346656037ull;
    for (const unsigned char *p = (const unsigned char *)peer; *p != '\0'; p++)
        h = (h ^ *p) * 1099511628211ull;
    return h;
}

const struct request *conn_request(const struct conn *c)
{
    return &c->req;
}

struct conn *conn_next(const struct conn *c)
{
    return c->next;
}

bool conn_closing(const struct conn *c)
{
    return c->closing;
}

void conn_set_state(struct conn *c, void *state, void (*free_fn)(void *))
{
    if (c->state != NULL && c->state_free != NULL)
        c->state_free(c->state);
    c->state = state;
    c->state_free = free_fn;
}

void *conn_state(struct conn *c)
{
    return c->state;
}

void *conn_take_state(struct conn *c)
{
    void *state = c->state;
    c->state = NULL;
    return state;
}

/* ---- lifetime -------------------------------------------------------------- */

void conn__maybe_free(struct conn *c)
{
    if (!c->closed || c->holds > 0 || c->pump.src != NULL)
        return;
    conn_set_state(c, NULL, NULL);
    pump_free(&c->pump);
    free(c->body);
    *c->pprev = c->next;
    if (c->next != NULL)
        c->next->pprev = c->pprev;
    struct server *srv = c->srv;
    free(c);
    server_conn_gone(srv);
}

static void conn_on_close(uv_handle_t *handle)
{
    struct conn *c = handle->data;
    if (--c->handles > 0)
        return;
    c->closed = true;
    conn__maybe_free(c);
}

/* RESET closes with SO_LINGER 0: an RST, and the kernel drops the unsent
 * bytes at once instead of retrying them to a client that reads nothing. */
void conn__close(struct conn *c, bool reset)
{
    if (c->closing)
        return;
    c->closing = true;
    pump_stop(&c->pump);
    uv_close((uv_handle_t *)&c->timer, conn_on_close);
    if (!reset || uv_tcp_close_reset(&c->tcp, conn_on_close) < 0)
        uv_close((uv_handle_t *)&c->tcp, conn_on_close);
}

void conn_hold(struct conn *c)
{
    c->holds++;
}

void conn_release(struct conn *c)
{
    c->holds--;
    conn__maybe_free(c);
}

void conn_stop(struct conn *c, bool force)
{
    if (force || !c->responding)
        conn__close(c, false);
}

/* ---- timeouts ------------------------------------------------------------------ */

/* One timer per connection, set when the phase changes. Progress inside a
 * phase (body bytes, bytes taken by the client) only moves c->deadline; the
 * timer, when it fires early, goes back to sleep until the new deadline. */

static void arm_timer(struct conn *c, uint64_t delay_ms)
{
    if (uv_timer_start(&c->timer, conn_on_timer, delay_ms, 0) < 0)
        conn__close(c, false); /* only when closing already */
}

void conn__set_phase(struct conn *c, enum phase phase, unsigned timeout_ms)
{
    c->phase = phase;
    c->deadline = uv_now(c->srv->loop) + timeout_ms;
    arm_timer(c, timeout_ms);
}

/* A client that reads nothing shows no change in the socket's queue, which
 * libuv empties as the kernel takes bytes. A check every quarter of the
 * timeout bounds the lateness of the cut to that quarter. */
static unsigned send_check_ms(const struct conn *c)
{
    return c->srv->cfg->send_timeout / 4 + 1;
}

void conn__start_sending(struct conn *c)
{
    c->sent_queue = 0;
    c->sent_pumped = c->pump.sent;
    c->phase = PHASE_SEND;
    c->deadline = uv_now(c->srv->loop) + c->srv->cfg->send_timeout;
    arm_timer(c, send_check_ms(c));
}

/* Whether the client took bytes since the last look: the queue shrank, or
 * the pump handed on another piece (it does so once an earlier piece has
 * been written). An empty queue means we are the slow side (the pool, the
 * disk): that is no fault of the client. */
static bool send_progressed(struct conn *c)
{
    size_t queued = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
    bool moved = queued == 0 || queued < c->sent_queue || c->pump.sent != c->sent_pumped;
    c->sent_queue = queued;
    c->sent_pumped = c->pump.sent;
    return moved;
}

static void time_out(struct conn *c)
{
    switch (c->phase) {
    case PHASE_HEAD:
    case PHASE_BODY:
        log_debug("timeout %s: request %s", c->peer, c->started ? "incomplete" : "never came");
        if (!c->started) {
            conn__close(c, false); /* no request, nothing to answer */
            return;
        }
        conn__stop_reading(c);
        c->in_len = 0;
        c->error = 408;
        conn__refuse_request(c, NULL);
        return;
    case PHASE_SEND:
        log_debug("timeout %s: the client stopped reading its response", c->peer);
        conn__close(c, true);
        return;
    case PHASE_IDLE:
    case PHASE_LINGER:
        conn__close(c, false);
        return;
    }
}

static void conn_on_timer(uv_timer_t *timer)
{
    struct conn *c = timer->data;
    if (c->parse_pending) {
        c->parse_pending = false;
        conn__parse_input(c);
        if (c->closing)
            return;
    }
    uint64_t now = uv_now(c->srv->loop);
    if (c->phase == PHASE_SEND && send_progressed(c))
        c->deadline = now + c->srv->cfg->send_timeout;
    if (now >= c->deadline) {
        time_out(c);
        return;
    }
    uint64_t wait = c->deadline - now;
    if (c->phase == PHASE_SEND && wait > send_check_ms(c))
        wait = send_check_ms(c);
    arm_timer(c, wait);
}

/* ---- reading --------------------------------------------------------------- */

void conn_body_window(struct conn *c, size_t bytes)
{
    if (!c->streaming || c->closing)
        return;
    bool was_open = c->body_window > 0;
    c->body_window = bytes;
    if (bytes == 0) {
        /* Now we wait on the pool, or on the client taking the response. */
        if (was_open)
            conn__start_sending(c);
        conn__stop_reading(c);
        return;
    }
    if (!was_open)
        conn__set_phase(c, PHASE_BODY, c->srv->cfg->body_timeout);
    if (c->in_len == 0) {
        conn__start_reading(c);
        return;
    }
    /* Input already read waits for the window: parse it from the loop, not
     * from inside the caller (a pump callback). */
    c->parse_pending = true;
    arm_timer(c, 0);
}

static void conn_on_alloc(uv_handle_t *handle, size_t hint, uv_buf_t *buf)
{
    struct conn *c = container_of(handle, struct conn, tcp);
    /* Reading runs only when every earlier byte has been parsed. */
    *buf = uv_buf_init(c->in, sizeof c->in);
}

static void conn_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = container_of(stream, struct conn, tcp);
    if (c->phase == PHASE_LINGER) {
        if (nread < 0)
            conn__close(c, false); /* the client is done: so are we */
        return;
    }
    if (nread == 0)
        return;
    if (nread < 0) {
        conn__close(c, false); /* EOF or reset: nothing half-parsed is worth an answer */
        return;
    }
    if (c->phase == PHASE_BODY)
        c->deadline = uv_now(c->srv->loop) + c->srv->cfg->body_timeout;
    c->in_off = 0;
    c->in_len = (size_t)nread;
    conn__parse_input(c);
}

void conn__start_reading(struct conn *c)
{
    if (c->reading || c->closing)
        return;
    if (uv_read_start((uv_stream_t *)&c->tcp, conn_on_alloc, conn_on_read) == 0)
        c->reading = true;
    else
        conn__close(c, false);
}

void conn__stop_reading(struct conn *c)
{
    if (c->reading)
        uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = false;
}

/* ---- accepting ------------------------------------------------------------------- */

int conn_accept(struct server *srv, int fd)
{
    struct conn *c = malloc(sizeof *c + srv->cfg->max_url + 1);
    if (c == NULL) {
        close(fd);
        return UV_ENOMEM;
    }
    memset(c, 0, offsetof(struct conn, values)); /* the big buffers need no zeroing */
    c->srv = srv;
    c->url_max = srv->cfg->max_url;
    int rc = uv_tcp_init(srv->loop, &c->tcp);
    if (rc < 0) {
        free(c);
        close(fd);
        return rc;
    }
    uv_timer_init(srv->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->handles = 2;
    c->next = srv->conns;
    if (c->next != NULL)
        c->next->pprev = &c->next;
    srv->conns = c;
    c->pprev = &srv->conns;
    srv->active++;
    pump_init(&c->pump, (uv_stream_t *)&c->tcp, &srv->pump_env, 0, conn__on_pump_done);
    /* llhttp_init leaves every lenient flag off: llhttp's strict mode. */
    llhttp_init(&c->parser, HTTP_REQUEST, &conn__parser_settings);
    strict_lines_init(&c->lines);
    conn__set_phase(c, PHASE_HEAD, srv->cfg->header_timeout);

    /* A bounded send buffer bounds what one write does inline on the loop
     * thread: on loopback the kernel's whole TCP path runs in write(). */
    int sndbuf = (int)srv->cfg->send_buffer;
    if (sndbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    rc = uv_tcp_open(&c->tcp, fd);
    if (rc < 0) {
        close(fd);
        conn__close(c, false);
        return rc;
    }
    srv->accepted++;
    uv_tcp_nodelay(&c->tcp, 1);
    struct sockaddr_storage addr;
    int addr_len = sizeof addr;
    snprintf(c->peer, sizeof c->peer, "-");
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&addr, &addr_len) == 0) {
        if (addr.ss_family == AF_INET6)
            uv_ip6_name((struct sockaddr_in6 *)&addr, c->peer, sizeof c->peer);
        else
            uv_ip4_name((struct sockaddr_in *)&addr, c->peer, sizeof c->peer);
        c->loopback = addr_is_loopback((const struct sockaddr *)&addr);
    }
    c->flow = c->pump.flow = hash_peer(c->peer);
    conn__start_reading(c);
    return 0;
}
