/* A response's writes: the head and an in-memory body through the sender
 * (at their client's turn), a pumped body started and its completion, and
 * a failure answered before the first byte. */
#include "server/http/conn.h"
#include "server/http/conn_internal.h"

#include <stdlib.h>
#include <string.h>

static void conn_on_write(uv_write_t *req, int status)
{
    struct conn *c = container_of(req, struct conn, write_req);
    /* Closing already: libuv still reports a write that had completed, with 0. */
    if (status < 0 || c->state >= CONN_CLOSING)
        conn__close(c, false);
    else
        conn__finish(c, true);
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
    rate_meter_add(&c->meter, len, uv_now(c->env->loop));
    *c->env->pump->bytes_sent += len;
    clients_sent(c->env->clients, c->flow, len, uv_now(c->env->loop));
    if (c->answering) {
        int w = uv_try_write((uv_stream_t *)&c->tcp, bufs, n);
        if (w < 0 && w != UV_EAGAIN) {
            conn__close(c, false);
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
        conn__close(c, false);
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
            conn__close(c, false);
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
    conn__drop_stream(c);
    c->keep_alive = false;
    conn_send_error(c, status, NULL);
}

void conn_send_source(struct conn *c, struct pump_source *src, long long len)
{
    bool chunked = conn__body_framing(c, len);
    if (!conn__head_finish(c) || c->req.head) {
        src->ops->release(src);
        conn__drop_stream(c);
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
void conn__on_pump_done(struct pump *pump, int status)
{
    struct conn *c = container_of(pump, struct conn, pump);
    c->bytes = pump->sent;
    if (c->state == CONN_REFUSING) {
        conn__enter(c, CONN_SEND);
        conn_send_error(c, c->error, c->route->allow);
    } else if (status < 0 && c->state < CONN_CLOSING && pump_unsent(pump)) {
        answer_failure(c, status, 500);
    } else if (status < 0 || c->state >= CONN_CLOSING) {
        conn__close(c, false);
    } else {
        conn__finish(c, true);
    }
    conn__maybe_free(c);
}
