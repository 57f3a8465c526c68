/* A connection's state machine (the states are listed at enum conn_state):
 * the events that move it (input, the timer, writes done, the pump done),
 * the one transition function, the parse loop, dispatch and refusals, the
 * writes, and the end of a response. request.c and response.c fill in what
 * a request says and what a head holds; only this file acts. */
#include "server/http/conn.h"
#include "server/http/conn_internal.h"
#include "server/base/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void conn_on_timer(uv_timer_t *timer);
static void resume(struct conn *c);
static void turn_leave(struct conn *c);
static void turns_on_idle(uv_idle_t *idle);
static void drop_stream(struct conn *c);
static void name_client(struct conn *c, const struct sockaddr *sa, struct addr_prefix *client);
static void peer_client(struct conn *c, struct addr_prefix *client);

/* ---- small accessors ------------------------------------------------------ */

struct server *conn_server(struct conn *c)
{
    return c->env->owner;
}

uint64_t conn_flow(const struct conn *c)
{
    return c->flow;
}

bool conn_peer_loopback(const struct conn *c)
{
    return c->loopback;
}

const struct addr_prefix *conn_peer_addr(const struct conn *c)
{
    return &c->addr;
}

bool conn_closing(const struct conn *c)
{
    return c->state >= CONN_CLOSING;
}

/* Whether C answers a request now: a stop lets it finish. */
static bool responding(const struct conn *c)
{
    return c->state >= CONN_STREAM_OPEN && c->state <= CONN_REFUSING;
}

static bool streaming(const struct conn *c)
{
    return c->state == CONN_STREAM_OPEN || c->state == CONN_STREAM_SHUT;
}

/* ---- the transition -------------------------------------------------------- */

#define TO(s) (1u << (s))

/* The table at enum conn_state, as enter() checks it. */
static const unsigned next_states[CONN_STATES] = {
    [CONN_NEW] = TO(CONN_HEAD) | TO(CONN_SEND) | TO(CONN_CLOSING),
    [CONN_IDLE] = TO(CONN_HEAD) | TO(CONN_SEND) | TO(CONN_CLOSING),
    [CONN_HEAD] = TO(CONN_BODY) | TO(CONN_SEND) | TO(CONN_STREAM_SHUT) | TO(CONN_CLOSING),
    [CONN_BODY] = TO(CONN_SEND) | TO(CONN_CLOSING),
    [CONN_STREAM_OPEN] =
        TO(CONN_STREAM_SHUT) | TO(CONN_SEND) | TO(CONN_REFUSING) | TO(CONN_CLOSING),
    [CONN_STREAM_SHUT] =
        TO(CONN_STREAM_OPEN) | TO(CONN_SEND) | TO(CONN_REFUSING) | TO(CONN_CLOSING),
    [CONN_SEND] = TO(CONN_IDLE) | TO(CONN_LINGER) | TO(CONN_CLOSING),
    [CONN_REFUSING] = TO(CONN_SEND) | TO(CONN_CLOSING),
    [CONN_LINGER] = TO(CONN_CLOSING),
    [CONN_CLOSING] = TO(CONN_CLOSED),
};

/* Whether C reads its socket in its state: only when every byte read so
 * far has been parsed (one buffer), and in LINGER to drop what comes. */
static bool wants_input(const struct conn *c)
{
    switch (c->state) {
    case CONN_NEW:
    case CONN_IDLE:
    case CONN_HEAD:
    case CONN_BODY:
    case CONN_STREAM_OPEN:
    case CONN_LINGER:
        return c->in_len == 0;
    default:
        return false;
    }
}

static void conn_on_alloc(uv_handle_t *handle, size_t hint, uv_buf_t *buf);
static void conn_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);
static void close_conn(struct conn *c, bool reset);

/* Whether C waits for (the rest of) a request head. */
static bool awaits_head(const struct conn *c)
{
    return c->state == CONN_NEW || c->state == CONN_HEAD;
}

/* Whether C's state moves a body or a response, measured against min_rate. */
static bool rated(const struct conn *c)
{
    return c->state >= CONN_BODY && c->state <= CONN_REFUSING;
}

/* Whether C waits on its client rather than on us: for (more of) its body,
 * or for it to take the bytes queued on its socket. */
static bool waits_on_client(const struct conn *c)
{
    if (c->in_len > 0)
        return false; /* input waits for its turn or its window */
    if (c->state == CONN_BODY || c->state == CONN_STREAM_OPEN)
        return true;
    return uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp) > 0;
}

/* Adds the response bytes the pump handed on since the last look to C's
 * meter; says whether C is slow: it moves below min_rate while it waits
 * on its client. */
static bool slow(struct conn *c)
{
    uint64_t now = uv_now(c->env->loop), min_rate = conn__cfg(c)->min_rate;
    /* The timer looks at the start of every window: the pump's bytes since
     * the last look count in that look's window, not in the one just begun. */
    client_meter_add(&c->meter, c->pump.sent - c->rate_pumped,
                     c->meter.window * CLIENTS_RATE_WINDOW_MS);
    c->rate_pumped = c->pump.sent;
    return min_rate > 0 && waits_on_client(c) && client_meter_slow(&c->meter, min_rate, now);
}

/* In which order C may close for another client's newcomer (clients.h):
 * first when kept alive between requests or silent and late for its first
 * head (a tenth of header_timeout), then a late head (silent or slow to
 * come), then a body or response moving below min_rate, else busy. Idle
 * or late only with no input unparsed in its buffer. Not a new connection
 * sooner: a request may be in its socket, not yet read. */
static enum client_class give_way_class(struct conn *c)
{
    if (c->state >= CONN_CLOSING)
        return CLIENT_NONE;
    if (c->in_len == 0 && (c->state == CONN_IDLE || (c->state == CONN_NEW && c->head_late)))
        return CLIENT_IDLE;
    if (c->in_len == 0 && c->state == CONN_HEAD && c->head_late)
        return CLIENT_LATE;
    return rated(c) && slow(c) ? CLIENT_SLOW : CLIENT_BUSY;
}

/* Puts C in its class among its client's connections. */
static void place(struct conn *c)
{
    enum client_class class = give_way_class(c);
    if (class != c->client.class)
        clients_set_class(c->env->clients, &c->client, class);
}

/* Starts or stops reading to match the state and the buffer, and places C
 * among its client's connections. */
static void follow_input(struct conn *c)
{
    place(c);
    bool want = wants_input(c);
    if (want == c->reading)
        return;
    if (!want) {
        /* Not yet inside dispatch: its answer may go out at once. Nor while
         * its input waits for its turn: the client has no more to say
         * before its answer, and anything it sends stops reading then
         * (conn_on_alloc). Either way the poll's interest stays as it is. */
        if (c->answering || c->turn.queued)
            return;
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    } else if (uv_read_start((uv_stream_t *)&c->tcp, conn_on_alloc, conn_on_read) == 0) {
        c->reading = true;
    } else {
        close_conn(c, false);
    }
}

/* One timer per connection, set as the state changes. Progress inside a
 * state (body bytes, bytes taken by the client) only moves c->deadline; the
 * timer, when it fires early, goes back to sleep until the new deadline.
 * A timer already set for no later than DELAY_MS is left as it is (three
 * states a request, each re-setting it, cost a heap's remove and insert
 * each): it fires early and sleeps again until c->wake_at. */
static void arm_timer(struct conn *c, uint64_t delay_ms)
{
    c->wake_at = uv_now(c->env->loop) + delay_ms;
    if (uv_is_active((uv_handle_t *)&c->timer) && uv_timer_get_due_in(&c->timer) <= delay_ms)
        return;
    if (uv_timer_start(&c->timer, conn_on_timer, delay_ms, 0) < 0)
        close_conn(c, false); /* only when closing already */
}

/* Whether the client, not the request, is what the state waits on. */
static bool sending(const struct conn *c)
{
    return c->state == CONN_SEND || c->state == CONN_STREAM_SHUT || c->state == CONN_REFUSING;
}

/* A client that reads nothing shows no change in the socket's queue, which
 * libuv empties as the kernel takes bytes. A check every quarter of the
 * timeout bounds the lateness of the cut to that quarter. */
static unsigned send_check_ms(const struct conn *c)
{
    return conn__cfg(c)->send_timeout / 4 + 1;
}

/* How long until C's meter starts its next window, when its progress is
 * measured (rated, min_rate on); else MS. Whether it went slow is looked
 * at then. */
static uint64_t rate_check(const struct conn *c, uint64_t ms)
{
    if (!rated(c) || conn__cfg(c)->min_rate == 0)
        return ms;
    uint64_t left = CLIENTS_RATE_WINDOW_MS - uv_now(c->env->loop) % CLIENTS_RATE_WINDOW_MS;
    return left < ms ? left : ms;
}

/* A body's deadline at NOW: body_timeout of silence, within body_max_time
 * of its start. */
static uint64_t body_deadline(const struct conn *c, uint64_t now)
{
    uint64_t silence = now + conn__cfg(c)->body_timeout;
    return silence < c->body_end ? silence : c->body_end;
}

/* The timeout of each state that has one (0: none, or kept). */
static unsigned state_timeout(const struct conn *c, enum conn_state from)
{
    const struct config *cfg = conn__cfg(c);
    switch (c->state) {
    case CONN_NEW:
        return cfg->header_timeout;
    case CONN_IDLE:
        return cfg->keepalive_timeout;
    case CONN_HEAD:
        return from == CONN_NEW ? 0 : cfg->header_timeout; /* NEW's deadline holds */
    case CONN_BODY:
    case CONN_STREAM_OPEN:
        return cfg->body_timeout;
    case CONN_STREAM_SHUT:
    case CONN_SEND:
    case CONN_REFUSING:
        return cfg->send_timeout;
    case CONN_LINGER:
        return LINGER_MS;
    default:
        return 0;
    }
}

/* Arms the timer for the state C has just entered from FROM. */
static void arm_state(struct conn *c, enum conn_state from)
{
    unsigned timeout_ms = state_timeout(c, from);
    if (timeout_ms == 0)
        return;
    uint64_t now = uv_now(c->env->loop);
    c->deadline = now + timeout_ms;
    if (c->state == CONN_BODY || c->state == CONN_STREAM_OPEN)
        c->deadline = body_deadline(c, now);
    if (sending(c)) {
        c->sent_queue = 0;
        c->sent_pumped = c->pump.sent;
    }
    /* A head's first wake-up comes early: it makes the head late. */
    uint64_t left = c->deadline > now ? c->deadline - now : 0;
    uint64_t first = awaits_head(c) ? timeout_ms / CONN_LATE_PART + 1 : left;
    /* A resume that is due keeps its turn at once; the deadline holds. */
    arm_timer(c, c->resume_due ? 0 : rate_check(c, sending(c) ? send_check_ms(c) : first));
}

/* The one place the state changes: checks the move against the table, arms
 * the new state's timer and reads or not to match. */
static void enter(struct conn *c, enum conn_state state)
{
    enum conn_state from = c->state;
    if ((next_states[from] & TO(state)) == 0)
        abort(); /* a move the table does not have: a bug */
    c->state = state;
    if (state == CONN_IDLE)
        c->head_late = false; /* the next request's head is due anew */
    if (from == CONN_HEAD && rated(c)) {
        /* A request's body or response begins: its progress is measured,
         * and its body is due within body_max_time. */
        uint64_t now = uv_now(c->env->loop);
        client_meter_start(&c->meter, now);
        c->rate_pumped = c->pump.sent;
        c->body_end = now + conn__cfg(c)->body_max_time;
    }
    arm_state(c, from);
    follow_input(c);
}

/* ---- lifetime -------------------------------------------------------------- */

/* Frees C once its handles are closed, its pump idle and nothing holds it. */
static void maybe_free(struct conn *c)
{
    if (c->state != CONN_CLOSED || c->holds > 0 || c->pump.src != NULL)
        return;
    conn_set_handler_state(c, NULL, NULL);
    pump_free(&c->pump);
    free(c->body);
    struct conn_env *env = c->env;
    bool served = c->pprev != NULL;
    if (served) {
        *c->pprev = c->next;
        if (c->next != NULL)
            c->next->pprev = c->pprev;
        clients_leave(env->clients, &c->client);
    }
    free(c);
    if (served)
        env->gone(env->owner);
}

static void conn_on_close(uv_handle_t *handle)
{
    struct conn *c = handle->data;
    if (--c->handles > 0)
        return;
    enter(c, CONN_CLOSED);
    maybe_free(c);
}

/* Closes both handles; RESET closes with SO_LINGER 0: an RST, and the
 * kernel drops the unsent bytes at once instead of retrying them to a
 * client that reads nothing. */
static void close_conn(struct conn *c, bool reset)
{
    if (c->state >= CONN_CLOSING)
        return;
    enter(c, CONN_CLOSING);
    turn_leave(c);
    if (c->env->pump->sender != NULL)
        pump_sender_drop(c->env->pump->sender, &c->send);
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
    maybe_free(c);
}

void conn_evict(struct client_link *l)
{
    struct conn *c = container_of(l, struct conn, client);
    bool idle = c->state == CONN_IDLE || awaits_head(c);
    log_debug("closing %s %s: its client holds the most connections", idle ? "idle" : "busy",
              c->peer);
    /* A request under way gets a reset: the kernel drops what is unsent
     * instead of retrying it to a client that may read nothing. */
    close_conn(c, !idle);
}

static void refuse(struct conn *c, const char *why);
static void finish(struct conn *c, bool parse_next);

void conn_stop_all(struct conn_env *env, bool force)
{
    /* close_conn unlinks a connection only later, from its close callback:
     * walking the list here is safe. */
    for (struct conn *c = env->conns; c != NULL; c = c->next) {
        if (force && streaming(c) && pump_head_held(&c->pump)) {
            /* Its client has seen nothing yet: better told than dropped. */
            c->error = 503;
            refuse(c, "stopping before its body was in");
        } else if (force || !responding(c)) {
            close_conn(c, false);
        }
    }
}

/* ---- timeouts -------------------------------------------------------------- */

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
    switch (c->state) {
    case CONN_NEW:
        if (c->proxy_wait && c->proxy_len > 0)
            c->env->proxy.truncated++;
        log_debug("timeout %s: %s never came", c->peer,
                  c->proxy_wait ? "the PROXY header" : "request");
        close_conn(c, false); /* no request, nothing to answer */
        return;
    case CONN_HEAD:
    case CONN_BODY:
    case CONN_STREAM_OPEN:
        log_debug("timeout %s: request incomplete%s", c->peer,
                  c->state != CONN_HEAD && uv_now(c->env->loop) >= c->body_end
                      ? " within body_max_time"
                      : "");
        c->in_len = 0;
        c->error = 408;
        refuse(c, NULL);
        return;
    case CONN_STREAM_SHUT:
    case CONN_SEND:
    case CONN_REFUSING:
        log_debug("timeout %s: the client stopped reading its response", c->peer);
        close_conn(c, true);
        return;
    default: /* IDLE, LINGER */
        close_conn(c, false);
        return;
    }
}

static void conn_on_timer(uv_timer_t *timer)
{
    struct conn *c = timer->data;
    uint64_t now = uv_now(c->env->loop);
    if (now < c->wake_at) { /* set for an earlier wake than the one now wanted */
        arm_timer(c, c->wake_at - now);
        return;
    }
    if (c->resume_due) {
        c->resume_due = false;
        resume(c);
        if (c->state >= CONN_CLOSING)
            return;
    } else if (awaits_head(c) && !c->head_late) {
        c->head_late = true; /* woken early in arm_state */
        follow_input(c);
    }
    place(c); /* a window of its progress may have ended */
    if (sending(c) && send_progressed(c))
        c->deadline = now + conn__cfg(c)->send_timeout;
    if (now >= c->deadline) {
        time_out(c);
        return;
    }
    uint64_t wait = c->deadline - now;
    if (sending(c) && wait > send_check_ms(c))
        wait = send_check_ms(c);
    arm_timer(c, rate_check(c, wait));
}

/* ---- reading and parsing --------------------------------------------------- */

static void conn_on_alloc(uv_handle_t *handle, size_t hint, uv_buf_t *buf)
{
    struct conn *c = container_of(handle, struct conn, tcp);
    /* Only when every earlier byte has been parsed; else none (UV_ENOBUFS):
     * reading was left on by follow_input, and stops now. */
    *buf = wants_input(c) ? uv_buf_init(c->in, sizeof c->in) : uv_buf_init(NULL, 0);
}

/* ---- the PROXY protocol ---------------------------------------------------- */

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
                                       : "nobody holds two more connections than its client");
}

void conn_refuse(struct conn_env *env, int fd, const struct addr_prefix *client,
                 enum clients_refusal why)
{
    /* A new socket's send buffer is empty: the write is whole or fails, and
     * either way the connection is closed. */
    (void)send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
    log_refusal(env, client, why);
}

/* C came at max_connections and its client, CLIENT, is refused: it gets
 * what a direct connection of that client gets at the accept (conn_refuse),
 * through the balancer, and closes at once, so that it holds no slot
 * while the balancer takes its time to close. */
static void refuse_at_limit(struct conn *c, const struct addr_prefix *client,
                            enum clients_refusal why)
{
    /* Nothing was sent on C yet: its send buffer has room for it all. */
    uv_buf_t out = uv_buf_init((char *)busy, sizeof busy - 1);
    (void)uv_try_write((uv_stream_t *)&c->tcp, &out, 1);
    c->in_len = 0;
    close_conn(c, false);
    log_refusal(c->env, client, why);
}

/* A load balancer's PROXY header names C's client, CLIENT (the balancer
 * itself for one that names none): the connection moves from the
 * balancer's place among the clients to its client's, and one that came at
 * max_connections is admitted now as a direct connection of its client
 * would be (clients_rejoin). Returns whether C is served: else it is
 * answered 503, or closes (no memory). */
static bool move_to_client(struct conn *c, const struct addr_prefix *client)
{
    /* At the limit is as a direct newcomer sees it: max_connections open
     * without C, which the server counts since its accept. */
    bool full = c->at_limit && *c->env->active > conn__cfg(c)->max_connections;
    c->at_limit = false;
    struct client_link *evict;
    enum clients_refusal why;
    int rc = clients_rejoin(c->env->clients, &c->client, c->flow, client, full, &evict, &why);
    if (evict != NULL)
        conn_evict(evict);
    if (rc > 0)
        refuse_at_limit(c, client, why);
    else if (rc < 0)
        close_conn(c, false); /* it counts for nobody */
    else
        place(c);
    return rc == 0;
}

/* C's peer is a load balancer and its header is not whole yet: takes what
 * in[] holds of it. Returns whether the rest of in[] is to be parsed as
 * HTTP: false while more of the header is wanted (in[] spent), and when C
 * was refused and closes. */
static bool take_proxy_header(struct conn *c)
{
    size_t had = c->proxy_len, take = PROXY_HEADER_MAX - had;
    if (take > c->in_len)
        take = c->in_len;
    memcpy(c->proxy_in + had, c->in + c->in_off, take);
    c->proxy_len += take;
    struct proxy_header h;
    int n = proxy_header_parse(c->proxy_in, c->proxy_len, &h);
    if (n == 0) {
        c->in_len = 0; /* the parser refuses at PROXY_HEADER_MAX: there is room for more */
        return false;
    }
    if (n < 0) {
        c->env->proxy.malformed++;
        log_debug("proxy %s: not a PROXY header; closing", c->peer);
        close_conn(c, false);
        return false;
    }
    c->proxy_wait = false;
    c->proxy_len = 0; /* proxy_in[] now keeps the client's first bytes (sniff_first) */
    c->in_off += (size_t)n - had;
    c->in_len -= (size_t)n - had;
    struct addr_prefix client;
    if (h.local) {
        /* No client named (a health check, or a client the balancer cannot
         * name, such as one on its unix socket): served, and counted as
         * the balancer's own connection, but with none of the balancer's
         * rights: who is behind it is unknown, so it is neither loopback
         * nor under stats_from. */
        c->env->proxy.local++;
        c->loopback = false;
        c->addr.family = 0;
        if (!c->at_limit)
            return true;
        peer_client(c, &client);
        return move_to_client(c, &client);
    }
    c->env->proxy.clients++;
    name_client(c, (const struct sockaddr *)&h.source, &client);
    return move_to_client(c, &client);
}

/* C's client (its peer, or the one a balancer's header named) sends no
 * header of its own: keeps the first bytes of its first request, to tell
 * one it sends anyway when its request fails to parse. */
static void sniff_first(struct conn *c)
{
    if (c->first_done || c->proxy_len >= PROXY_SNIFF)
        return;
    size_t take = PROXY_SNIFF - c->proxy_len;
    if (take > c->in_len)
        take = c->in_len;
    memcpy(c->proxy_in + c->proxy_len, c->in + c->in_off, take);
    c->proxy_len += take;
}

/* Whether C's failed first request began as a PROXY header: from a client
 * not entitled to send one (a peer not under proxy_protocol_from, or a
 * client behind a balancer, after the balancer's header) it is refused,
 * not answered. */
static bool sent_unlisted_header(struct conn *c)
{
    struct proxy_header h;
    return !c->first_done && c->proxy_len > 0 &&
           proxy_header_parse(c->proxy_in, c->proxy_len, &h) >= 0;
}

static void conn_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = container_of(stream, struct conn, tcp);
    if (nread == UV_ENOBUFS) {
        uv_read_stop(stream); /* conn_on_alloc: input waits unparsed */
        c->reading = false;
        return;
    }
    if (c->state == CONN_LINGER) {
        if (nread < 0)
            close_conn(c, false); /* the client is done: so are we */
        return;
    }
    if (nread == 0)
        return;
    if (nread < 0) {
        if (c->proxy_wait && c->proxy_len > 0) {
            c->env->proxy.truncated++;
            log_debug("proxy %s: the PROXY header was cut short", c->peer);
        }
        close_conn(c, false); /* EOF or reset: nothing half-parsed is worth an answer */
        return;
    }
    c->in_off = 0;
    c->in_len = (size_t)nread;
    if (c->proxy_peer && c->proxy_wait && !take_proxy_header(c))
        return;
    sniff_first(c);
    if (c->state == CONN_BODY || c->state == CONN_STREAM_OPEN) {
        uint64_t now = uv_now(c->env->loop);
        c->deadline = body_deadline(c, now);
        client_meter_add(&c->meter, (uint64_t)nread, now);
    }
    place(c); /* a request came, or more of it */
    resume(c);
}

/* Hands the request to its route: it answers now or later, or returns a
 * status for us to answer. A streaming route gets it at its head. */
static void dispatch(struct conn *c)
{
    bool streams = conn__streams(c);
    if (streams)
        c->body_window = 0;
    c->answering = true;
    enter(c, streams ? CONN_STREAM_SHUT : CONN_SEND);
    c->first_done = true;
    c->bytes = 0;
    c->keep_alive = c->req.keep_alive && !*c->env->stopping;
    int status = c->deferred ? c->deferred : c->route->on_request(c, &c->req);
    if (status >= 400) {
        drop_stream(c);
        conn_send_error(c, status, c->route->allow);
    }
    c->answering = false;
    bool whole = c->written_now;
    c->written_now = false;
    /* The whole answer went out here (issue_out): reading never stopped,
     * and the parse loop goes on with the next request. */
    if (whole && c->state < CONN_CLOSING)
        finish(c, false);
}

/* A streaming route's body is in: from now on the client only has to read. */
static void end_stream(struct conn *c)
{
    c->body_window = 0;
    enter(c, CONN_SEND);
    c->route->on_body_end(c);
}

/* Brings the state up to what llhttp has seen of the request. */
static void advance(struct conn *c)
{
    if ((c->state == CONN_NEW || c->state == CONN_IDLE) && c->parsed >= PARSED_BEGUN)
        enter(c, CONN_HEAD);
    if (c->state == CONN_HEAD && c->parsed >= PARSED_HEAD) {
        if (conn__streams(c))
            dispatch(c);
        else if (c->parsed == PARSED_HEAD)
            enter(c, CONN_BODY); /* a body follows, or the message were complete */
    }
    if (c->parsed == PARSED_ALL) {
        c->parsed = PARSED_NONE;
        if (c->state == CONN_HEAD || c->state == CONN_BODY)
            dispatch(c);
        else if (streaming(c))
            end_stream(c);
        /* else a dropped stream: nobody is left to tell */
    } else if (c->state == CONN_STREAM_OPEN && c->body_window == 0) {
        enter(c, CONN_STREAM_SHUT); /* we wait on the pool or on the client */
    }
}

/* Whether C's state takes input: a request, or a streamed body. */
static bool parsing(const struct conn *c)
{
    return c->state <= CONN_STREAM_OPEN;
}

/* Input that is no request: a PROXY header from a peer not entitled to
 * send one closes (the spec's abort), anything else is answered. */
static void refuse_input(struct conn *c, const char *why)
{
    if (sent_unlisted_header(c)) {
        c->env->proxy.unlisted++;
        log_debug("proxy %s: a PROXY header from a peer not under proxy_protocol_from; closing",
                  c->peer);
        close_conn(c, false);
        return;
    }
    refuse(c, why);
}

/* The one way into llhttp: parses the buffered input as far as the state
 * lets it, acting on each step, then reads on if the buffer is spent and
 * the state wants more. Only through resume, which keeps the turns: true
 * when a request was answered at once and more input waits, which asks
 * for its own turn. */
static bool parse_input(struct conn *c)
{
    while (c->in_len > 0 && parsing(c)) {
        /* A streamed body goes in no faster than its route takes it. */
        size_t len = streaming(c) && c->body_window < c->in_len ? c->body_window : c->in_len;
        if (len == 0)
            break;
        const char *start = c->in + c->in_off;
        size_t skip;
        if (conn__chunk_split(c, start, &len, &skip) < 0) {
            c->in_len = 0;
            refuse(c, "chunk extension malformed or too long");
            break;
        }
        if (skip > 0) {
            c->in_off += skip; /* extensions: checked, never parsed by llhttp */
            c->in_len -= skip;
            continue;
        }
        c->scanned = start;
        llhttp_errno_t err = llhttp_execute(&c->parser, start, len);
        /* A route's on_body may have closed C (its pump failed to start a
         * job): nothing more to parse, nobody to answer. */
        if (c->state >= CONN_CLOSING)
            return false;
        size_t used = len;
        if (err == HPE_PAUSED) {
            /* At the end of a request, a streaming route's head or a
             * chunk-size line. */
            used = (size_t)(llhttp_get_error_pos(&c->parser) - start);
        } else if (err != HPE_OK) {
            c->in_len = 0;
            /* A head refused by a callback is answered as if its bytes had
             * come one by one: the line check of what came before it first. */
            const char *at = llhttp_get_error_pos(&c->parser);
            if (c->error && c->parsed < PARSED_HEAD && at != NULL && at >= c->scanned &&
                strict_lines_scan(&c->lines, c->scanned, (size_t)(at - c->scanned)) < 0)
                c->error = 0;
            refuse_input(c, c->error ? NULL : llhttp_get_error_reason(&c->parser));
            break;
        }
        /* What llhttp took as framing must pass before anything is answered. */
        if (strict_lines_scan(&c->lines, c->scanned, (size_t)(start + used - c->scanned)) < 0) {
            c->in_len = 0;
            refuse_input(c, "bare CR or LF, folded line, or no CRLF after chunk data");
            break;
        }
        c->in_off += used;
        c->in_len -= used;
        bool ended = c->parsed == PARSED_ALL;
        advance(c);
        if (err == HPE_PAUSED && !ended)
            llhttp_resume(&c->parser); /* the body follows; finish() resumes after the end */
        if (ended && c->state == CONN_IDLE && c->in_len > 0)
            return true; /* answered at once; the input after it is kept */
    }
    if (c->state < CONN_CLOSING)
        follow_input(c);
    return false;
}

/* ---- turns: the loop's time, shared by client (turns.h) ------------------- */

/* Parses C's input now, its time charged to its client's turn; says
 * whether more waits (parse_input). */
static bool run_turn(struct conn *c, struct conn_turns *ct)
{
    uint64_t flow = c->flow, t0 = uv_hrtime();
    bool again = parse_input(c);
    turns_charge(&ct->policy, flow, uv_hrtime() - t0);
    return again;
}

static void turn_leave(struct conn *c)
{
    if (c->env->turns != NULL)
        turns_remove(&c->env->turns->policy, &c->turn);
}

static void turn_wait(struct conn *c, struct conn_turns *ct)
{
    turns_wait(&ct->policy, &c->turn, c->flow);
    uv_idle_start(&ct->idle, turns_on_idle);
    follow_input(c); /* input waits in the buffer: reading stops */
}

/* Input to parse: now if its client has time left in this turn, else it
 * waits for a later turn, after those waiting already. Each request
 * answered at once asks again for the input after it. */
static void resume(struct conn *c)
{
    struct conn_turns *ct = c->env->turns;
    bool again;
    do {
        if (ct == NULL || ct->policy.share_ns == 0 || c->in_len == 0 || !parsing(c)) {
            again = parse_input(c);
        } else if (c->turn.queued) {
            return; /* it waits already; its turn resumes it */
        } else if (turns_admit(&ct->policy, c->flow, false)) {
            again = run_turn(c, ct);
        } else {
            turn_wait(c, ct);
            return;
        }
    } while (again);
}

/* A turn begins after each poll. */
static void turns_on_check(uv_check_t *check)
{
    struct conn_turns *ct = container_of(check, struct conn_turns, check);
    turns_next(&ct->policy);
}

/* Before the poll: the waiting requests, clients in turn, as far as each
 * client's share and the turn's bound go. Each is out of the queue before
 * it runs, so that whatever it closes leaves the queue whole. */
static void turns_on_idle(uv_idle_t *idle)
{
    struct conn_turns *ct = container_of(idle, struct conn_turns, idle);
    if (turns_waiting(&ct->policy) > 0)
        ct->policy.counters.turns++;
    struct fairq_node *node;
    while ((node = turns_next_waiting(&ct->policy)) != NULL) {
        /* Its state may have moved on meanwhile (a timeout): then it only
         * reads on. */
        struct conn *c = container_of(node, struct conn, turn);
        if (run_turn(c, ct))
            resume(c);
    }
    if (turns_waiting(&ct->policy) == 0)
        uv_idle_stop(&ct->idle);
}

void conn_turns_init(struct conn_turns *ct, uv_loop_t *loop, uint64_t share_ns)
{
    *ct = (struct conn_turns){0};
    turns_init(&ct->policy, share_ns);
    uv_check_init(loop, &ct->check); /* cannot fail */
    uv_idle_init(loop, &ct->idle);
    /* They run for the connections, which keep the loop alive. */
    uv_unref((uv_handle_t *)&ct->check);
    uv_unref((uv_handle_t *)&ct->idle);
    conn_turns_set_share(ct, share_ns);
}

void conn_turns_set_share(struct conn_turns *ct, uint64_t share_ns)
{
    turns_set_share(&ct->policy, share_ns);
    if (share_ns > 0)
        uv_check_start(&ct->check, turns_on_check);
    else
        uv_check_stop(&ct->check); /* those waiting go at the next idle */
}

void conn_turns_charge(struct conn_turns *ct, uint64_t client, uint64_t ns)
{
    turns_charge(&ct->policy, client, ns);
}

void conn_turns_close(struct conn_turns *ct)
{
    if (ct->closing)
        return;
    ct->closing = true;
    uv_close((uv_handle_t *)&ct->check, NULL);
    uv_close((uv_handle_t *)&ct->idle, NULL);
}

static const struct snap_def turns_share_def = {
    .key = "share_us",
    .metric = "unclog_turn_share_seconds",
    .unit = SNAP_US,
    .help = "Loop time a client's requests and pool callbacks may take per turn of the loop "
            "before its next requests wait for a later turn (turn_share; 0: no bound).",
    .merge = SNAP_SAME};
static const struct snap_def turns_at_once_def = {
    .key = "at_once",
    .metric = "unclog_turn_requests_at_once_total",
    .kind = SNAP_COUNTER,
    .help = "Request inputs parsed in the turn of the loop that brought them."};
static const struct snap_def turns_deferred_def = {
    .key = "deferred",
    .metric = "unclog_turn_requests_deferred_total",
    .kind = SNAP_COUNTER,
    .help = "Request inputs that waited for a later turn: their client had spent its share."};
static const struct snap_def turns_turns_def = {
    .key = "turns",
    .metric = "unclog_turn_turns_waited_total",
    .kind = SNAP_COUNTER,
    .help = "Turns of the loop that began with request inputs waiting."};
static const struct snap_def turns_waiting_def = {
    .key = "waiting",
    .metric = "unclog_turn_waiting_connections",
    .help = "Connections whose input waits for their client's turn now."};

void conn_turns_stats(const struct conn_turns *ct, struct snapshot *s)
{
    snap_open(s, "turns", NULL);
    snap_add(s, &turns_share_def, ct->policy.share_ns / 1000);
    snap_add(s, &turns_at_once_def, ct->policy.counters.at_once);
    snap_add(s, &turns_deferred_def, ct->policy.counters.deferred);
    snap_add(s, &turns_turns_def, ct->policy.counters.turns);
    snap_add(s, &turns_waiting_def, turns_waiting(&ct->policy));
    snap_close(s);
}

/* A request that failed to parse (WHY says how, for the debug log), was
 * refused or timed out: answer it, then drain and close. */
static void refuse(struct conn *c, const char *why)
{
    int status = c->error ? c->error : 400;
    if (streaming(c)) {
        /* A streamed body went bad after its response began. While none of
         * the response is out (a late head waits for its first slot to
         * fill), stop it and answer the refusal instead; after that no
         * status can be sent, and the response is cut short. */
        log_debug("request %s: %s (%d) while streaming", c->peer, why ? why : "refused", status);
        c->in_len = 0;
        if (pump_head_held(&c->pump)) {
            c->error = status;
            enter(c, CONN_REFUSING);
            pump_stop(&c->pump);
        } else {
            close_conn(c, true);
        }
        return;
    }
    if (why != NULL)
        log_debug("parse %s: %s", c->peer, why);
    if (c->url_len == 0)
        memcpy(c->url, "-", 2);
    else
        c->url[c->url_len] = '\0';
    enter(c, CONN_SEND);
    c->bytes = 0;
    c->keep_alive = false;
    conn_send_error(c, status, c->route ? c->route->allow : NULL);
}

/* ---- streaming request bodies ---------------------------------------------- */

void conn_body_window(struct conn *c, size_t bytes)
{
    if (!streaming(c))
        return;
    c->body_window = bytes;
    if (bytes == 0) {
        if (c->state == CONN_STREAM_OPEN)
            enter(c, CONN_STREAM_SHUT);
        return;
    }
    if (c->state == CONN_STREAM_SHUT)
        enter(c, CONN_STREAM_OPEN);
    if (c->in_len > 0) {
        /* Input already read waits for the window: parse it from the loop,
         * not from inside the caller (a pump callback). */
        c->resume_due = true;
        arm_timer(c, 0);
    }
}

/* A streaming request's body has nowhere to go any more (refused, its
 * source gone, or its response over): the rest stays unread, the route is
 * not called again, and the connection closes after the response. */
static void drop_stream(struct conn *c)
{
    if (streaming(c)) {
        c->keep_alive = false;
        enter(c, CONN_SEND);
    }
}

/* ---- responses ------------------------------------------------------------- */

static void conn_on_shutdown(uv_shutdown_t *req, int status)
{
    /* Nothing to do: the drain ends at EOF or at the linger deadline. */
}

/* Ends a connection after its last response. The client may still be
 * sending (a refused body, more pipelined requests), and closing with input
 * unread makes the kernel send an RST, which can destroy the response before
 * the client reads it (RFC 9112 9.6): half-close instead, drop what comes,
 * and close at EOF or LINGER_MS. */
static void linger(struct conn *c)
{
    c->in_len = 0;
    if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, conn_on_shutdown) < 0) {
        close_conn(c, false);
        return;
    }
    enter(c, CONN_LINGER);
}

/* The response has been handed to the socket in full; PARSE_NEXT: parse
 * what input waits (else the caller's parse loop goes on). */
static void finish(struct conn *c, bool parse_next)
{
    struct conn_env *env = c->env;
    const char *method = c->req.target ? llhttp_method_name(c->req.method) : "-";
    access_log_write(env->access, c->peer, (long)time(NULL), method, c->url, c->req.http_minor,
                     c->status, c->bytes);
    uint64_t us = c->started_ns ? (uv_hrtime() - c->started_ns) / 1000 : 0;
    env->response_done(env->owner, c->route, c->status, c->bytes, us);
    c->route = NULL;
    conn_set_handler_state(c, NULL, NULL);
    drop_stream(c); /* a response that ended before its body did */
    if (!c->keep_alive || *env->stopping) {
        /* Always: bytes the client sent meanwhile may wait unread in the
         * kernel even when our buffer is empty (reading stops while we
         * answer), and the stop's deadline bounds the wait. */
        linger(c);
        return;
    }
    enter(c, CONN_IDLE);
    llhttp_resume(&c->parser);
    if (parse_next)
        resume(c);
}

static void conn_on_write(uv_write_t *req, int status)
{
    struct conn *c = container_of(req, struct conn, write_req);
    /* Closing already: libuv still reports a write that had completed, with 0. */
    if (status < 0 || c->state >= CONN_CLOSING)
        close_conn(c, false);
    else
        finish(c, true);
}

/* Hands the head and the c->bytes of body[] to the socket. Inside
 * dispatch it first tries to write them at once: an answer that goes out
 * whole then ends there (written_now), with no write request, callback or
 * change to what the loop polls for; the rest of one that does not is
 * queued as any write. */
static void issue_out(struct conn *c)
{
    size_t len = c->bytes;
    uv_buf_t bufs[2] = {uv_buf_init(c->head, (unsigned)c->head_out.len),
                        uv_buf_init(c->body, (unsigned)len)};
    uv_buf_t *out = bufs;
    unsigned n = len ? 2 : 1;
    client_meter_add(&c->meter, len, uv_now(c->env->loop));
    *c->env->pump->bytes_sent += len;
    clients_sent(c->env->clients, c->flow, len, uv_now(c->env->loop));
    if (c->answering) {
        int w = uv_try_write((uv_stream_t *)&c->tcp, bufs, n);
        if (w < 0 && w != UV_EAGAIN) {
            close_conn(c, false);
            return;
        }
        size_t done = w > 0 ? (size_t)w : 0;
        for (; n > 0 && done >= out->len; out++, n--)
            done -= out->len;
        if (n == 0) {
            c->written_now = true;
            if (c->env->pump->sender != NULL)
                c->env->pump->sender->whole_at_once++;
            return;
        }
        out->base += done;
        out->len -= done;
    }
    if (uv_write(&c->write_req, (uv_stream_t *)&c->tcp, out, n, conn_on_write) < 0)
        close_conn(c, false);
}

/* The in-memory response's turn with the sender came. */
static void send_turn(struct pump_turn *t)
{
    issue_out(container_of(t, struct conn, send));
}

/* The head, and LEN bytes of body[] after it, through the sender as any
 * pumped write: now, or at its client's turn. */
static void write_out(struct conn *c, size_t len)
{
    c->bytes = len;
    struct pump_sender *snd = c->env->pump->sender;
    c->send.go = send_turn;
    if (snd != NULL && !pump_sender_admit(snd, &c->send, c->flow, c->head_out.len + len))
        return;
    issue_out(c);
}

void conn_send_head(struct conn *c)
{
    if (!conn__head_finish(c)) {
        conn_send_error(c, 500, NULL);
        return;
    }
    write_out(c, 0);
}

void conn_send_body(struct conn *c, const char *body, size_t len)
{
    conn_head_add(c, "Content-Length: %zu\r\n", len);
    if (!conn__head_finish(c)) {
        conn_send_error(c, 500, NULL);
        return;
    }
    if (c->req.head || len == 0) {
        write_out(c, 0);
        return;
    }
    if (len > c->body_cap) {
        char *grown = realloc(c->body, len);
        if (grown == NULL) {
            close_conn(c, false);
            return;
        }
        c->body = grown;
        c->body_cap = len;
    }
    memcpy(c->body, body, len);
    write_out(c, len);
}

void conn_send_text(struct conn *c, const char *text)
{
    conn_send_body(c, text, strlen(text));
}

void conn_send_error(struct conn *c, int status, const char *allow)
{
    char body[128];
    size_t len = conn__error_head(c, status, allow, body, sizeof body);
    conn_send_body(c, body, len);
}

/* A response failed (RC) before any byte of it went out: STATUS says so in
 * its place, and the connection closes after it (a streamed body's rest
 * stays unread). */
static void answer_failure(struct conn *c, int rc, int status)
{
    log_error("response %s %s: %s before its first byte, answered %d", c->peer, c->url,
              uv_strerror(rc), status);
    drop_stream(c);
    c->keep_alive = false;
    conn_send_error(c, status, NULL);
}

void conn_send_source(struct conn *c, struct pump_source *src, long long len)
{
    bool chunked = conn__body_framing(c, len);
    if (!conn__head_finish(c) || c->req.head) {
        src->ops->release(src);
        drop_stream(c);
        if (c->head_out.failed)
            conn_send_error(c, 500, NULL);
        else
            write_out(c, 0);
        return;
    }
    c->rate_pumped = 0; /* the pump counts this response from 0 */
    int rc = pump_start(&c->pump, src, c->head, c->head_out.len, chunked);
    if (rc < 0)
        answer_failure(c, rc, 503);
}

/* The pump's completion: the response is out (0) or failed. */
static void conn_on_pump_done(struct pump *pump, int status)
{
    struct conn *c = container_of(pump, struct conn, pump);
    c->bytes = pump->sent;
    if (c->state == CONN_REFUSING) {
        enter(c, CONN_SEND);
        conn_send_error(c, c->error, c->route->allow);
    } else if (status < 0 && c->state < CONN_CLOSING && pump_unsent(pump)) {
        answer_failure(c, status, 500);
    } else if (status < 0 || c->state >= CONN_CLOSING) {
        close_conn(c, false);
    } else {
        finish(c, true);
    }
    maybe_free(c);
}

/* ---- accepting ------------------------------------------------------------- */

/* Names C's client SA (family AF_UNSPEC: unknown), for everything that
 * tells clients apart: the access log (peer), /settings and /stats
 * (loopback, addr), the flow, and its place among the clients (*CLIENT).
 * The one place a connection learns who it serves: its peer at the
 * accept, or the client a load balancer's PROXY header names. */
static void name_client(struct conn *c, const struct sockaddr *sa, struct addr_prefix *client)
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
static void peer_client(struct conn *c, struct addr_prefix *client)
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
    name_client(c, (const struct sockaddr *)&addr, client);
    c->proxy_peer = c->proxy_wait = conn_relayed_from(cfg, (const struct sockaddr *)&addr);
    return 0;
}

int conn_accept(struct conn_env *env, int fd, bool at_limit)
{
    const struct config *cfg = *env->cfg;
    struct conn *c = malloc(sizeof *c + cfg->max_url + 1);
    if (c == NULL) {
        close(fd);
        return UV_ENOMEM;
    }
    memset(c, 0, offsetof(struct conn, values)); /* the big buffers need no zeroing */
    c->env = env;
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
    pump_init(&c->pump, (uv_stream_t *)&c->tcp, env->pump, 0, conn_on_pump_done);
    /* llhttp_init leaves every lenient flag off: llhttp's strict mode. */
    llhttp_init(&c->parser, HTTP_REQUEST, &conn__parser_settings);
    strict_lines_init(&c->lines);
    struct addr_prefix client;
    rc = open_socket(c, fd, &client);
    if (rc < 0) {
        close(fd);
        close_conn(c, false); /* not served: frees itself without a word to ENV */
        return rc;
    }
    c->at_limit = at_limit && c->proxy_peer;
    rc = clients_join(env->clients, &c->client, c->flow, &client);
    if (rc < 0) {
        close_conn(c, false); /* the socket is the handle's now: it closes with it */
        return rc;
    }
    c->next = env->conns;
    if (c->next != NULL)
        c->next->pprev = &c->next;
    env->conns = c;
    c->pprev = &env->conns;
    /* Born in CONN_NEW (0, where memset left it): its timer and reading. */
    arm_state(c, CONN_NEW);
    follow_input(c);
    return 0;
}
