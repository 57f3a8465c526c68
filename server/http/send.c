/* A response's writes, through the connection's writer (writer.h): the
 * head and an in-memory body, a streamed body started and its completion,
 * and a failure answered before the first byte. */
#include "server/http/conn.h"
#include "server/http/conn_internal.h"

#include <stdlib.h>
#include <string.h>

/* An answer that did not go whole at once is in the kernel's hands. */
static void conn_on_written(struct writer *w, int status)
{
    struct conn *c = container_of(w, struct conn, writer);
    /* Closing already: libuv still reports a write that had completed, with 0. */
    if (status < 0 || c->state >= CONN_CLOSING)
        conn__close(c, false);
    else
        conn__finish(c, true);
}

/* An answer's LEN body bytes go to the socket: they count for C's rate
 * and its client. */
static void conn_on_issuing(struct writer *w, size_t len)
{
    struct conn *c = container_of(w, struct conn, writer);
    rate_meter_add(&c->meter, len, uv_now(c->env->loop));
    clients_sent(c->env->clients, c->client_id, len, uv_now(c->env->loop));
}

/* The head, and LEN bytes of body[] after it, through the writer: now, or
 * at its client's turn. Inside dispatch it first tries to write them at
 * once: an answer that goes out whole then ends there (written_now), with
 * no write request, callback or change to what the loop polls for. */
static void write_out(struct conn *c, size_t len)
{
    c->bytes = len;
    int rc = writer_answer(&c->writer, c->head, c->head_out.len, c->body, len, c->answering);
    if (rc < 0)
        conn__close(c, false);
    else if (rc > 0)
        c->written_now = true;
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
    c->rate_pumped = 0; /* the writer counts this response from 0 */
    int rc = writer_start(&c->writer, src, c->head, c->head_out.len, chunked);
    if (rc < 0)
        answer_failure(c, rc, 503);
}

/* The streamed response's completion: it is out (0) or failed. */
static void conn_on_streamed(struct writer *w, int status)
{
    struct conn *c = container_of(w, struct conn, writer);
    c->bytes = writer_sent(w);
    if (c->state == CONN_REFUSING) {
        conn__enter(c, CONN_SEND);
        conn_send_error(c, c->error, c->route->allow);
    } else if (status < 0 && c->state < CONN_CLOSING && writer_nothing_sent(w)) {
        answer_failure(c, status, 500);
    } else if (status < 0 || c->state >= CONN_CLOSING) {
        conn__close(c, false);
    } else {
        conn__finish(c, true);
    }
    conn__maybe_free(c);
}

const struct writer_ops conn__writer_ops = {
    .issuing = conn_on_issuing, .written = conn_on_written, .done = conn_on_streamed};
