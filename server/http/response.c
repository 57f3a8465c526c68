/* Responses: the head, small bodies, streamed bodies through the pump, and
 * what follows a response (the next pipelined request, keep-alive, close). */
#include "server/http/conn_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"

/* ---- responses ------------------------------------------------------------------ */

const char *http_reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 301:
        return "Moved Permanently";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 411:
        return "Length Required";
    case 412:
        return "Precondition Failed";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 416:
        return "Range Not Satisfiable";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Unknown";
    }
}

void conn_head_add(struct conn *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&c->head_out, fmt, ap);
    va_end(ap);
}

void conn_head_start(struct conn *c, int status)
{
    c->status = status;
    buf_init_fixed(&c->head_out, c->head, sizeof c->head);
    conn_head_add(c, "HTTP/1.1 %d %s\r\nServer: unclog/" UNCLOG_VERSION "\r\nDate: %s\r\n", status,
                  http_reason(status), server_date(c->srv));
}

/* Adds Connection and the blank line. Returns false if the head overflowed. */
static bool head_finish(struct conn *c)
{
    /* A stop may have begun since dispatch (an open job was in flight). */
    if (c->srv->stopping)
        c->keep_alive = false;
    if (!c->keep_alive)
        conn_head_add(c, "Connection: close\r\n");
    else if (c->req.http_minor == 0)
        conn_head_add(c, "Connection: keep-alive\r\n");
    conn_head_add(c, "\r\n");
    return !c->head_out.failed;
}

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
    conn__set_phase(c, PHASE_LINGER, LINGER_MS);
    if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, conn_on_shutdown) < 0) {
        conn__close(c, false);
        return;
    }
    conn__start_reading(c);
}

/* The response has been handed to the socket in full. */
static void conn_finish(struct conn *c)
{
    struct server *srv = c->srv;
    const char *method = c->req.target ? llhttp_method_name(c->req.method) : "-";
    access_log_write(&srv->access, c->peer, (long)time(NULL), method, c->url, c->req.http_minor,
                     c->status, c->bytes);
    uint64_t us = c->started_ns ? (uv_hrtime() - c->started_ns) / 1000 : 0;
    server_count_response(srv, c->route, c->status, c->bytes, us);
    c->responding = false;
    c->route = NULL;
    conn_set_state(c, NULL, NULL);
    conn__drop_stream(c); /* a response that ended before its body did */
    if (!c->keep_alive || srv->stopping) {
        /* Always: bytes the client sent meanwhile may wait unread in the
         * kernel even when our buffer is empty (reading stops while we
         * answer), and the stop's deadline bounds the wait. */
        linger(c);
        return;
    }
    c->started = false;
    conn__set_phase(c, PHASE_IDLE, srv->cfg->keepalive_timeout);
    llhttp_resume(&c->parser);
    conn__parse_input(c);
}

static void conn_on_write(uv_write_t *req, int status)
{
    struct conn *c = container_of(req, struct conn, write_req);
    if (status < 0)
        conn__close(c, false);
    else
        conn_finish(c);
}

static void write_out(struct conn *c, const char *body, size_t len)
{
    uv_buf_t bufs[2] = {uv_buf_init(c->head, (unsigned)c->head_out.len),
                        uv_buf_init((char *)body, (unsigned)len)};
    c->bytes = len;
    c->srv->bytes_sent += len;
    if (uv_write(&c->write_req, (uv_stream_t *)&c->tcp, bufs, len ? 2 : 1, conn_on_write) < 0)
        conn__close(c, false);
}

void conn_send_head(struct conn *c)
{
    if (!head_finish(c)) {
        conn_send_error(c, 500, NULL);
        return;
    }
    write_out(c, NULL, 0);
}

void conn_send_body(struct conn *c, const char *body, size_t len)
{
    conn_head_add(c, "Content-Length: %zu\r\n", len);
    if (!head_finish(c)) {
        conn_send_error(c, 500, NULL);
        return;
    }
    if (c->req.head || len == 0) {
        write_out(c, NULL, 0);
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
    write_out(c, c->body, len);
}

void conn_send_text(struct conn *c, const char *text)
{
    conn_send_body(c, text, strlen(text));
}

void conn_send_error(struct conn *c, int status, const char *allow)
{
    char body[128];
    int len = snprintf(body, sizeof body, "%d %s\n", status, http_reason(status));
    /* After a refused request the rest of its bytes are unread: close. */
    if (c->error != 0 || status == 400 || status == 408 || status == 413 || status == 414 ||
        status == 431)
        c->keep_alive = false;
    conn_head_start(c, status);
    if (status == 405 && allow != NULL)
        conn_head_add(c, "Allow: %s\r\n", allow);
    conn_head_add(c, "Content-Type: text/plain; charset=utf-8\r\n");
    if (c->head_out.failed) {
        c->keep_alive = false;
        conn_head_start(c, 500);
    }
    conn_send_body(c, body, (size_t)len);
}

void conn__on_pump_done(struct pump *pump, int status)
{
    struct conn *c = container_of(pump, struct conn, pump);
    c->bytes = pump->sent;
    if (c->refusing && !c->closing) {
        c->refusing = false;
        conn_send_error(c, c->error, c->route->allow);
    } else if (status < 0 || c->closing)
        conn__close(c, false);
    else
        conn_finish(c);
    conn__maybe_free(c);
}

void conn__drop_stream(struct conn *c)
{
    if (c->streaming) {
        c->streaming = false;
        c->keep_alive = false;
    }
}

void conn_send_source(struct conn *c, struct pump_source *src, long long len)
{
    bool chunked = false;
    if (len >= 0)
        conn_head_add(c, "Content-Length: %lld\r\n", len);
    else if (c->req.http_minor == 1)
        chunked = true;
    else
        c->keep_alive = false; /* HTTP/1.0: the end of the body is the end of the connection */
    if (chunked)
        conn_head_add(c, "Transfer-Encoding: chunked\r\n");
    if (!head_finish(c) || c->req.head) {
        src->ops->release(src);
        conn__drop_stream(c);
        if (c->head_out.failed)
            conn_send_error(c, 500, NULL);
        else
            write_out(c, NULL, 0);
        return;
    }
    if (pump_start(&c->pump, src, c->head, c->head_out.len, chunked) < 0) {
        conn__drop_stream(c);
        conn__close(c, false);
    }
}
