/* A connection's timer fired (conn.c arms it for each state): the state's
 * timeout, the progress of a response its client takes, and at each wake
 * a look at its pace (min_rate) and its class among its client's. */
#include "server/http/conn_internal.h"

/* Whether the client took bytes since the last look: the queue shrank, or
 * the pump handed on another piece (it does so once an earlier piece has
 * been written). An empty queue means we are the slow side (the pool, the
 * disk): that is no fault of the client. */
static bool send_progressed(struct conn *c)
{
    size_t queued = writer_queued(&c->writer);
    bool moved = queued == 0 || queued < c->sent_queue || writer_sent(&c->writer) != c->sent_pumped;
    c->sent_queue = queued;
    c->sent_pumped = writer_sent(&c->writer);
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
