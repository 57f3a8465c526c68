/* A connection's one timer and what it watches: each state's deadline (the
 * timeouts), the progress of a response its client takes, the pace of a
 * body or response (min_rate), and the connection's class among its
 * client's (who gives way at max_connections). */
#include "server/http/conn_internal.h"

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
    rate_meter_add(&c->meter, c->pump.sent - c->rate_pumped,
                   c->meter.window * RATE_METER_WINDOW_MS);
    c->rate_pumped = c->pump.sent;
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
        c->sent_pumped = c->pump.sent;
    }
    /* A head's first wake-up comes early: it makes the head late. */
    uint64_t left = c->deadline > now ? c->deadline - now : 0;
    uint64_t first = conn__awaits_head(c) ? timeout_ms / CONN_LATE_PART + 1 : left;
    /* A resume that is due keeps its turn at once; the deadline holds. */
    conn__arm_timer(
        c,
        c->resume_due ? 0 : conn__rate_check(c, conn__sending(c) ? conn__send_check_ms(c) : first));
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
    switch (c->state) {
    case CONN_NEW:
        if (c->proxy_wait && c->proxy_len > 0)
            c->env->proxy.truncated++;
        log_debug("timeout %s: %s never came", c->peer,
                  c->proxy_wait ? "the PROXY header" : "request");
        conn__close(c, false); /* no request, nothing to answer */
        return;
    case CONN_HEAD:
        if (c->sniff_wait) {
            conn__close_unlisted(c); /* a header of its own, as far as it went */
            return;
        }
        /* fall through */
    case CONN_BODY:
    case CONN_STREAM_OPEN:
        log_debug("timeout %s: request incomplete%s", c->peer,
                  c->state != CONN_HEAD && uv_now(c->env->loop) >= c->body_end
                      ? " within body_max_time"
                      : "");
        c->in_len = 0;
        c->error = 408;
        conn__refuse(c, NULL);
        return;
    case CONN_STREAM_SHUT:
    case CONN_SEND:
    case CONN_REFUSING:
        log_debug("timeout %s: the client stopped reading its response", c->peer);
        conn__close(c, true);
        return;
    default: /* IDLE, LINGER */
        conn__close(c, false);
        return;
    }
}

void conn__on_timer(uv_timer_t *timer)
{
    struct conn *c = timer->data;
    uint64_t now = uv_now(c->env->loop);
    if (now < c->wake_at) { /* set for an earlier wake than the one now wanted */
        conn__arm_timer(c, c->wake_at - now);
        return;
    }
    if (c->resume_due) {
        c->resume_due = false;
        conn__resume(c);
        if (c->state >= CONN_CLOSING)
            return;
    } else if (conn__awaits_head(c) && !c->head_late) {
        c->head_late = true; /* woken early in conn__arm_state */
        conn__follow_input(c);
    }
    conn__place(c); /* a window of its progress may have ended */
    if (conn__sending(c) && send_progressed(c))
        c->deadline = now + conn__cfg(c)->send_timeout;
    if (now >= c->deadline) {
        time_out(c);
        return;
    }
    uint64_t wait = c->deadline - now;
    if (conn__sending(c) && wait > conn__send_check_ms(c))
        wait = conn__send_check_ms(c);
    conn__arm_timer(c, conn__rate_check(c, wait));
}
