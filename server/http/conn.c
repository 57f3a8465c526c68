/* A connection's core, the bottom of its files (conn_internal.h): its
 * states (listed at enum conn_state) and the one move between them, the
 * timer armed and reading set for each, its class among its client's, the
 * handler's per-request state, its close and free, a streamed body's
 * window and the end of a response. It calls none of the connection's
 * other files: a read, the timer's expiry and the input that waits after
 * a response go up through c->on, wired at the accept. */
#include "server/http/conn.h"
#include "server/http/conn_internal.h"

#include <stdlib.h>
#include <time.h>

static void turn_leave(struct conn *c);

/* ---- small accessors ------------------------------------------------------ */

struct server *conn_server(struct conn *c)
{
    return c->env->owner;
}

uint64_t conn_client(const struct conn *c)
{
    return c->client_id;
}

bool conn_peer_loopback(const struct conn *c)
{
    return c->loopback;
}

bool conn_admin(const struct conn *c)
{
    return c->admin;
}

const struct addr_prefix *conn_peer_addr(const struct conn *c)
{
    return &c->addr;
}

bool conn_closing(const struct conn *c)
{
    return c->state >= CONN_CLOSING;
}

/* ---- the handler's per-request state ------------------------------------- */

void conn_set_handler_state(struct conn *c, void *state, void (*free_fn)(void *))
{
    if (c->handler_state != NULL && c->state_free != NULL)
        c->state_free(c->handler_state);
    c->handler_state = state;
    c->state_free = free_fn;
}

void *conn_handler_state(struct conn *c)
{
    return c->handler_state;
}

void *conn_take_handler_state(struct conn *c)
{
    void *state = c->handler_state;
    c->handler_state = NULL;
    return state;
}
/* ---- the transition -------------------------------------------------------- */

#define TO(s) (1u << (s))

/* The table at enum conn_state, as conn__enter() checks it. */
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

/* Starts or stops reading to match the state and the buffer, and places C
 * among its client's connections. */
void conn__follow_input(struct conn *c)
{
    conn__place(c);
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
    } else if (uv_read_start((uv_stream_t *)&c->tcp, conn_on_alloc, c->on->read) == 0) {
        c->reading = true;
    } else {
        conn__close(c, false);
    }
}

/* The one place the state changes: checks the move against the table, arms
 * the new state's timer and reads or not to match. */
void conn__enter(struct conn *c, enum conn_state state)
{
    enum conn_state from = c->state;
    if ((next_states[from] & TO(state)) == 0)
        abort(); /* a move the table does not have: a bug */
    c->state = state;
    if (state == CONN_IDLE)
        c->head_late = false; /* the next request's head is due anew */
    if (from == CONN_HEAD && conn__rated(c)) {
        /* A request's body or response begins: its progress is measured,
         * and its body is due within body_max_time. */
        uint64_t now = uv_now(c->env->loop);
        rate_meter_start(&c->meter, now);
        c->rate_pumped = writer_sent(&c->writer);
        c->body_end = now + conn__cfg(c)->body_max_time;
    }
    conn__arm_state(c, from);
    conn__follow_input(c);
}

/* ---- the timer, armed for each state ------------------------------------- */

/* Whether C waits on its client rather than on us: for (more of) its body,
 * or for it to take the bytes queued on its socket. */
static bool waits_on_client(const struct conn *c)
{
    if (c->in_len > 0)
        return false; /* input waits for its turn or its window */
    if (c->state == CONN_BODY || c->state == CONN_STREAM_OPEN)
        return true;
    return writer_queued(&c->writer) > 0;
}

/* Adds the response bytes the pump handed on since the last look to C's
 * meter; says whether C is slow: it moves below min_rate while it waits
 * on its client. */
static bool slow(struct conn *c)
{
    uint64_t now = uv_now(c->env->loop), min_rate = conn__cfg(c)->min_rate;
    /* The timer looks at the start of every window: the pump's bytes since
     * the last look count in that look's window, not in the one just begun. */
    rate_meter_add(&c->meter, writer_sent(&c->writer) - c->rate_pumped,
                   c->meter.window * RATE_METER_WINDOW_MS);
    c->rate_pumped = writer_sent(&c->writer);
    return min_rate > 0 && waits_on_client(c) && rate_meter_slow(&c->meter, min_rate, now);
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
    return conn__rated(c) && slow(c) ? CLIENT_SLOW : CLIENT_BUSY;
}

/* Puts C in its class among its client's connections. */
void conn__place(struct conn *c)
{
    enum client_class class = give_way_class(c);
    if (class != c->client.class)
        clients_set_class(c->env->clients, &c->client, class);
}

/* One timer per connection, set as the state changes. Progress inside a
 * state (body bytes, bytes taken by the client) only moves c->deadline; the
 * timer, when it fires early, goes back to sleep until the new deadline.
 * A timer already set for no later than DELAY_MS is left as it is (three
 * states a request, each re-setting it, cost a heap's remove and insert
 * each): it fires early and sleeps again until c->wake_at. */
void conn__arm_timer(struct conn *c, uint64_t delay_ms)
{
    c->wake_at = uv_now(c->env->loop) + delay_ms;
    if (uv_is_active((uv_handle_t *)&c->timer) && uv_timer_get_due_in(&c->timer) <= delay_ms)
        return;
    if (uv_timer_start(&c->timer, c->on->timer, delay_ms, 0) < 0)
        conn__close(c, false); /* only when closing already */
}

/* A client that reads nothing shows no change in the socket's queue, which
 * libuv empties as the kernel takes bytes. A check every quarter of the
 * timeout bounds the lateness of the cut to that quarter. */
unsigned conn__send_check_ms(const struct conn *c)
{
    return conn__cfg(c)->send_timeout / 4 + 1;
}

/* How long until C's meter starts its next window, when its progress is
 * measured (rated, min_rate on); else MS. Whether it went slow is looked
 * at then. */
uint64_t conn__rate_check(const struct conn *c, uint64_t ms)
{
    if (!conn__rated(c) || conn__cfg(c)->min_rate == 0)
        return ms;
    uint64_t left = RATE_METER_WINDOW_MS - uv_now(c->env->loop) % RATE_METER_WINDOW_MS;
    return left < ms ? left : ms;
}

/* A body's deadline at NOW: body_timeout of silence, within body_max_time
 * of its start. */
uint64_t conn__body_deadline(const struct conn *c, uint64_t now)
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
void conn__arm_state(struct conn *c, enum conn_state from)
{
    unsigned timeout_ms = state_timeout(c, from);
    if (timeout_ms == 0)
        return;
    uint64_t now = uv_now(c->env->loop);
    c->deadline = now + timeout_ms;
    if (c->state == CONN_BODY || c->state == CONN_STREAM_OPEN)
        c->deadline = conn__body_deadline(c, now);
    if (conn__sending(c)) {
        c->sent_queue = 0;
        c->sent_pumped = writer_sent(&c->writer);
    }
    /* A head's first wake-up comes early: it makes the head late. */
    uint64_t left = c->deadline > now ? c->deadline - now : 0;
    uint64_t first = conn__awaits_head(c) ? timeout_ms / CONN_LATE_PART + 1 : left;
    /* A resume that is due keeps its turn at once; the deadline holds. */
    conn__arm_timer(
        c,
        c->resume_due ? 0 : conn__rate_check(c, conn__sending(c) ? conn__send_check_ms(c) : first));
}

/* ---- lifetime -------------------------------------------------------------- */

/* Frees C once its handles are closed, its pump idle and nothing holds it. */
void conn__maybe_free(struct conn *c)
{
    if (c->state != CONN_CLOSED || c->holds > 0 || writer_running(&c->writer))
        return;
    conn_set_handler_state(c, NULL, NULL);
    writer_free(&c->writer);
    free(c->body);
    struct conn_env *env = c->env;
    bool served = c->pprev != NULL, admin = c->admin;
    if (served) {
        *c->pprev = c->next;
        if (c->next != NULL)
            c->next->pprev = c->pprev;
        clients_leave(env->clients, &c->client);
    }
    free(c);
    if (served)
        env->gone(env->owner, admin);
}

static void conn_on_close(uv_handle_t *handle)
{
    struct conn *c = handle->data;
    if (--c->handles > 0)
        return;
    conn__enter(c, CONN_CLOSED);
    conn__maybe_free(c);
}

/* Closes both handles; RESET closes with SO_LINGER 0: an RST, and the
 * kernel drops the unsent bytes at once instead of retrying them to a
 * client that reads nothing. */
void conn__close(struct conn *c, bool reset)
{
    if (c->state >= CONN_CLOSING)
        return;
    conn__enter(c, CONN_CLOSING);
    turn_leave(c);
    writer_close(&c->writer);
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

void conn_evict(struct client_link *l)
{
    struct conn *c = container_of(l, struct conn, client);
    bool idle = c->state == CONN_IDLE || conn__awaits_head(c);
    log_debug("closing %s %s: its client holds the most connections", idle ? "idle" : "busy",
              c->peer);
    /* A request under way gets a reset: the kernel drops what is unsent
     * instead of retrying it to a client that may read nothing. */
    conn__close(c, !idle);
}

static void turn_leave(struct conn *c)
{
    if (c->env->turns != NULL)
        turns_remove(&c->env->turns->policy, &c->turn);
}

/* ---- reading ------------------------------------------------------------- */

static void conn_on_alloc(uv_handle_t *handle, size_t hint, uv_buf_t *buf)
{
    struct conn *c = container_of(handle, struct conn, tcp);
    /* Only when every earlier byte has been parsed; else none (UV_ENOBUFS):
     * reading was left on by conn__follow_input, and stops now. */
    *buf = wants_input(c) ? uv_buf_init(c->in, sizeof c->in) : uv_buf_init(NULL, 0);
}

/* ---- streaming request bodies ---------------------------------------------- */

void conn_body_window(struct conn *c, size_t bytes)
{
    if (!conn__streaming(c))
        return;
    c->body_window = bytes;
    if (bytes == 0) {
        if (c->state == CONN_STREAM_OPEN)
            conn__enter(c, CONN_STREAM_SHUT);
        return;
    }
    if (c->state == CONN_STREAM_SHUT)
        conn__enter(c, CONN_STREAM_OPEN);
    if (c->in_len > 0) {
        /* Input already read waits for the window: parse it from the loop,
         * not from inside the caller (a pump callback). */
        c->resume_due = true;
        conn__arm_timer(c, 0);
    }
}

/* A streaming request's body has nowhere to go any more (refused, its
 * source gone, or its response over): the rest stays unread, the route is
 * not called again, and the connection closes after the response. */
void conn__drop_stream(struct conn *c)
{
    if (conn__streaming(c)) {
        c->keep_alive = false;
        conn__enter(c, CONN_SEND);
    }
}

/* ---- the end of a response ------------------------------------------------ */

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
        conn__close(c, false);
        return;
    }
    conn__enter(c, CONN_LINGER);
}

/* The response has been handed to the socket in full; PARSE_NEXT: parse
 * what input waits (else the caller's parse loop goes on). */
void conn__finish(struct conn *c, bool parse_next)
{
    struct conn_env *env = c->env;
    const char *method = c->req.target ? llhttp_method_name(c->req.method) : "-";
    access_log_write(env->access, c->peer, (long)time(NULL), method, c->url, c->req.http_minor,
                     c->status, c->bytes);
    uint64_t us = c->started_ns ? (uv_hrtime() - c->started_ns) / 1000 : 0;
    env->response_done(env->owner, c->route, c->status, c->bytes, us);
    c->route = NULL;
    conn_set_handler_state(c, NULL, NULL);
    conn__drop_stream(c); /* a response that ended before its body did */
    /* Between responses a connection keeps no large answer's copy: idle
     * keep-alive connections would otherwise hold, outside the buffer
     * budget, the largest body each was last sent. */
    if (c->body_cap > CONN_BODY_KEEP) {
        free(c->body);
        c->body = NULL;
        c->body_cap = 0;
    }
    if (!c->keep_alive || *env->stopping) {
        /* Always: bytes the client sent meanwhile may wait unread in the
         * kernel even when our buffer is empty (reading stops while we
         * answer), and the stop's deadline bounds the wait. */
        linger(c);
        return;
    }
    conn__enter(c, CONN_IDLE);
    llhttp_resume(&c->parser);
    if (parse_next)
        c->on->resume(c);
}
