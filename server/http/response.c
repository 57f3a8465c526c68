/* Response heads: the status line, the fields every response has, a
 * body's framing and the small error responses, built in the connection's
 * buffer. Nothing here sends: send.c writes what is built. */
#include "server/http/conn.h"
#include "server/http/conn_internal.h"

#include <stdarg.h>
#include <stdio.h>

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
                  http_reason(status), c->env->date(c->env->owner));
}

bool conn__head_finish(struct conn *c)
{
    /* A stop may have begun since dispatch (an open job was in flight). */
    if (*c->env->stopping)
        c->keep_alive = false;
    if (!c->keep_alive)
        conn_head_add(c, "Connection: close\r\n");
    else if (c->req.http_minor == 0)
        conn_head_add(c, "Connection: keep-alive\r\n");
    conn_head_add(c, "\r\n");
    return !c->head_out.failed;
}

size_t conn__error_head(struct conn *c, int status, const char *allow, char *body, size_t cap)
{
    int len;
    if (status == 413 && c->framing.over_max) {
        char size[24];
        config_format_size((size_t)c->framing.body_max, size, sizeof size);
        len = snprintf(body, cap, "%d %s: request body over %s (%s)\n", status, http_reason(status),
                       c->framing.body_key, size);
    } else {
        len = snprintf(body, cap, "%d %s\n", status, http_reason(status));
    }
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
    return (size_t)len;
}

bool conn__body_framing(struct conn *c, long long len)
{
    if (len >= 0) {
        conn_head_add(c, "Content-Length: %lld\r\n", len);
        return false;
    }
    if (c->req.http_minor == 0) {
        c->keep_alive = false; /* HTTP/1.0: the end of the body is the end of the connection */
        return false;
    }
    conn_head_add(c, "Transfer-Encoding: chunked\r\n");
    return true;
}
