/* Requests: llhttp's callbacks, the limits and strict checks on what a
 * client sends, its route, and the request as handlers read it. The
 * callbacks record how far the request got (c->parsed) or why it is refused
 * (c->error); parse.c, which runs llhttp, acts on that. */
#include "server/http/conn.h"
#include "server/http/conn_internal.h"

#include <string.h>
#include <strings.h>

static const char *const header_names[HEADER_COUNT] = {
    [HEADER_EXPECT] = "expect",
    [HEADER_RANGE] = "range",
    [HEADER_IF_RANGE] = "if-range",
    [HEADER_IF_MATCH] = "if-match",
    [HEADER_IF_NONE_MATCH] = "if-none-match",
    [HEADER_IF_MODIFIED_SINCE] = "if-modified-since",
    [HEADER_IF_UNMODIFIED_SINCE] = "if-unmodified-since",
    [HEADER_ACCEPT_ENCODING] = "accept-encoding",
    [HEADER_HOST] = "host",
    [HEADER_ORIGIN] = "origin",
    [HEADER_SEC_FETCH_SITE] = "sec-fetch-site",
    [HEADER_CONTENT_TYPE] = "content-type",
};

/* Headers a proxy adds to what it passes on: a request that carries one
 * came from elsewhere, whatever the peer's address. Kept as a flag, not
 * as values. */
static const char *const proxy_headers[] = {"Forwarded", "X-Forwarded-For", "X-Real-IP", "Via"};

/* ---- llhttp callbacks -------------------------------------------------------- */

static struct conn *parser_conn(llhttp_t *p)
{
    return container_of(p, struct conn, parser);
}

static int refuse(struct conn *c, int status)
{
    c->error = status;
    return -1;
}

static int on_message_begin(llhttp_t *p)
{
    struct conn *c = parser_conn(p);
    c->url_len = 0;
    c->field_len = 0;
    c->header = -1;
    c->values_len = 0;
    c->header_bytes = 0;
    c->header_count = 0;
    c->error = 0;
    c->deferred = 0;
    c->route = NULL;
    memset(&c->req, 0, sizeof c->req);
    memset(&c->framing, 0, sizeof c->framing);
    c->parsed = PARSED_BEGUN;
    c->started_ns = uv_hrtime();
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
    struct conn *c = parser_conn(p);
    /* The request line up to here first, then what follows the target:
     * the same checks in the same order however the line is split. */
    if (strict_lines_scan(&c->lines, c->scanned, (size_t)(at - c->scanned)) < 0)
        return refuse(c, 400);
    strict_lines_target(&c->lines);
    c->scanned = at + len;
    /* Byte by byte, a character refused before max_url is reached comes
     * first, and none after it is looked at. */
    size_t room = c->url_max - c->url_len;
    if (!strict_target_chars(at, len < room ? len : room))
        return refuse(c, 400);
    if (len > room)
        return refuse(c, 414);
    memcpy(c->url + c->url_len, at, len);
    c->url_len += len;
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
    struct conn *c = parser_conn(p);
    if (!strict_token(at, len))
        return refuse(c, 400);
    c->header_bytes += len;
    if (c->header_bytes > conn__cfg(c)->max_header_size)
        return refuse(c, 431);
    /* Names longer than ours are of no interest: keep counting, stop copying. */
    if (c->field_len < sizeof c->field)
        memcpy(c->field + c->field_len, at,
               len < sizeof c->field - c->field_len ? len : sizeof c->field - c->field_len);
    c->field_len += len;
    return 0;
}

static bool field_is(const struct conn *c, const char *name)
{
    return strlen(name) == c->field_len && c->field_len <= sizeof c->field &&
           strncasecmp(name, c->field, c->field_len) == 0;
}

static int on_header_field_complete(llhttp_t *p)
{
    struct conn *c = parser_conn(p);
    struct framing *f = &c->framing;
    if (c->field_len == 0)
        return refuse(c, 400);
    c->header_bytes += 4; /* ": " and CRLF */
    if (++c->header_count > conn__cfg(c)->max_headers)
        return refuse(c, 431);
    c->header = -1;
    f->field = FIELD_OTHER;
    /* RFC 9110 6.5.1: trailers are never merged into the header section. */
    if (!f->trailers) {
        if (field_is(c, "host")) {
            f->field = FIELD_HOST;
            f->hosts++;
        } else if (field_is(c, "transfer-encoding")) {
            f->field = FIELD_TE;
            f->tes++;
        } else if (field_is(c, "connection")) {
            f->field = FIELD_CONNECTION;
        }
        for (int i = 0; i < HEADER_COUNT; i++) {
            if (field_is(c, header_names[i]))
                c->header = i;
        }
        for (size_t i = 0; i < ARRAY_SIZE(proxy_headers) && c->req.proxied_by == NULL; i++) {
            if (field_is(c, proxy_headers[i]))
                c->req.proxied_by = proxy_headers[i];
        }
    }
    c->field_len = 0;
    if (c->header < 0)
        return 0;
    /* A repeated header joins the earlier value as a list (RFC 9110 5.3). */
    const char *prev = c->req.headers[c->header];
    size_t prev_len = prev ? strlen(prev) : 0;
    if (prev_len + 3 > VALUES_MAX - c->values_len)
        return refuse(c, 431);
    char *start = c->values + c->values_len;
    if (prev != NULL) {
        memmove(start, prev, prev_len);
        memcpy(start + prev_len, ", ", 2);
        c->values_len += prev_len + 2;
    }
    c->req.headers[c->header] = start;
    c->value_start = c->values_len;
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    struct conn *c = parser_conn(p);
    struct framing *f = &c->framing;
    c->header_bytes += len;
    if (c->header_bytes > conn__cfg(c)->max_header_size)
        return refuse(c, 431);
    if (f->field == FIELD_TE) {
        if (len < sizeof f->te - f->te_len) {
            memcpy(f->te + f->te_len, at, len);
            f->te_len += len;
        } else {
            f->te_long = true;
        }
    } else if (f->field == FIELD_CONNECTION) {
        strict_close_scan(&f->close, at, len);
    }
    if (c->header < 0)
        return 0;
    if (len + 1 > VALUES_MAX - c->values_len)
        return refuse(c, 431);
    memcpy(c->values + c->values_len, at, len);
    c->values_len += len;
    return 0;
}

/* The value just collected, less the white space around it (RFC 9110 5.5),
 * is the one handlers read; a Host value (always collected) is judged on it. */
static int end_value(struct conn *c)
{
    char *value = c->values + c->value_start;
    size_t len = c->values_len - c->value_start;
    const char *trimmed = strict_trim_ows(value, &len);
    memmove(value, trimmed, len);
    c->values_len = c->value_start + len;
    c->values[c->values_len++] = '\0';
    if (c->framing.field != FIELD_HOST)
        return 0;
    if (!strict_host_chars(value, len))
        return refuse(c, 400);
    c->framing.host_len = len;
    return 0;
}

static int on_header_value_complete(llhttp_t *p)
{
    struct conn *c = parser_conn(p);
    if (c->header >= 0 && end_value(c) < 0)
        return -1;
    c->header = -1;
    if (c->framing.field == FIELD_CONNECTION)
        strict_close_end(&c->framing.close);
    return 0;
}

/* RFC 9112 3.2: HTTP/1.1 requires one Host, and a server must not guess at
 * several; 6.1: only a final "chunked" frames a request body, and never in
 * HTTP/1.0. llhttp itself refuses Content-Length with Transfer-Encoding and
 * a repeated Content-Length. */
static bool framing_ok(const struct conn *c, const llhttp_t *p)
{
    const struct framing *f = &c->framing;
    if (f->hosts > 1 || (f->hosts == 1 && f->host_len == 0) ||
        (f->hosts == 0 && p->http_minor == 1))
        return false;
    if (f->tes > 0 && (f->tes > 1 || f->te_long || p->http_minor == 0 || !strict_chunked(f->te)))
        return false;
    return true;
}

static void send_continue(struct conn *c)
{
    static const char msg[] = "HTTP/1.1 100 Continue\r\n\r\n";
    uv_buf_t buf = uv_buf_init((char *)msg, sizeof msg - 1);
    /* Best effort: a failure shows up again on the final response. */
    (void)uv_write(&c->continue_req, (uv_stream_t *)&c->tcp, &buf, 1, NULL);
}

/* Whether a body follows the head: chunked, or a Content-Length above 0. */
static bool has_body(const struct request *r)
{
    return r->chunked || (r->has_length && r->content_length > 0);
}

/* The limit on the request's body: the key its route names, else max_body.
 * Read as the head comes: a reload halfway through a body does not move
 * the limit under it. */
static void set_body_max(struct conn *c)
{
    struct framing *f = &c->framing;
    const struct config *cfg = conn__cfg(c);
    const char *key = c->route->max_body_key;
    f->body_key = "max_body";
    f->body_max = cfg->max_body;
    if (key != NULL && config_number(cfg, key, &f->body_max) == 0)
        f->body_key = key;
}

/* 413 for a body over its limit, which the error's text names. */
static int refuse_body(struct conn *c)
{
    c->framing.over_max = true;
    return refuse(c, 413);
}

static int on_headers_complete(llhttp_t *p)
{
    struct conn *c = parser_conn(p);
    struct request *r = &c->req;
    c->url[c->url_len] = '\0';
    r->method = llhttp_get_method(p);
    r->http_minor = p->http_minor;
    /* RFC 9112 9.6: once close is seen, no further request is read. */
    r->keep_alive = llhttp_should_keep_alive(p) && !p->upgrade && !c->framing.close.seen;
    r->head = r->method == HTTP_HEAD;
    r->chunked = (p->flags & F_CHUNKED) != 0;
    r->has_length = (p->flags & F_CONTENT_LENGTH) != 0;
    r->content_length = p->content_length;
    c->framing.trailers = true;
    if (p->http_major != 1)
        return refuse(c, 505);
    /* Origin-form, or absolute-form for the methods a proxy would forward. */
    r->target = strict_target_path(c->url, r->method == HTTP_GET || r->head, &r->authority,
                                   &r->authority_len);
    if (r->target == NULL || !framing_ok(c, p))
        return refuse(c, 400);
    r->target_len = strlen(r->target);
    /* Routed first, so that the route's own limit applies and a refusal
     * counts under the route. */
    c->route = c->env->route(c->env->owner, r->target, c->admin);
    set_body_max(c);
    if (r->has_length && r->content_length > c->framing.body_max)
        return refuse_body(c);
    c->parsed = PARSED_HEAD;
    if ((c->route->methods & (1ull << r->method)) == 0) {
        /* Without a body nothing is left unread: answer and keep the connection. */
        if (has_body(r))
            return refuse(c, 405);
        c->deferred = 405;
        return 0;
    }
    if (c->route->on_headers != NULL) {
        int status = c->route->on_headers(c, r);
        if (status >= 400)
            return refuse(c, status);
    }
    const char *expect = r->headers[HEADER_EXPECT];
    if (has_body(r) && expect != NULL && strcasecmp(expect, "100-continue") == 0 &&
        r->http_minor == 1)
        send_continue(c);
    /* A streaming route answers at its head: pause there for parse.c to
     * dispatch it, and the body goes in only as fast as the route's window
     * lets it. A chunked body pauses at each chunk-size line, for parse.c to
     * keep its extensions from llhttp. Without a body, the message
     * completes as this returns. */
    if (r->chunked)
        strict_chunk_line(&c->framing.chunk);
    return (conn__streams(c) && has_body(r)) || r->chunked ? HPE_PAUSED : 0;
}

bool conn__streams(const struct conn *c)
{
    return c->route != NULL && c->route->on_body_end != NULL && c->deferred == 0;
}

int conn__chunk_split(struct conn *c, const char *p, size_t *len, size_t *skip)
{
    struct framing *f = &c->framing;
    size_t take;
    if (strict_chunk_scan(&f->chunk, p, *len, &take, skip) < 0)
        return refuse(c, 400);
    /* Extensions are ignored, but not read without end: all of a request's
     * count like a header block. */
    f->ext_len += *skip;
    if (f->ext_len > conn__cfg(c)->max_header_size)
        return refuse(c, 400);
    if (take > 0)
        *len = take;
    return 0;
}

static int on_chunk_header(llhttp_t *p)
{
    if (p->content_length == 0)
        parser_conn(p)->framing.last_chunk = true; /* trailers follow, not a chunk */
    return 0;
}

/* After a chunk's data and CRLF: pause at the next chunk-size line. */
static int on_chunk_complete(llhttp_t *p)
{
    struct conn *c = parser_conn(p);
    if (c->framing.last_chunk)
        return 0;
    strict_chunk_line(&c->framing.chunk);
    return HPE_PAUSED;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    struct conn *c = parser_conn(p);
    /* The framing before this data is checked now; the data is not framing. */
    if (strict_lines_scan(&c->lines, c->scanned, (size_t)(at - c->scanned)) < 0)
        return refuse(c, 400);
    strict_lines_body(&c->lines, c->req.chunked && p->content_length == 0);
    c->scanned = at + len;
    c->framing.body_len += len;
    if (c->framing.body_len > c->framing.body_max)
        return refuse_body(c);
    /* Never below 0: parse.c feeds llhttp no more than the window. */
    if (c->state == CONN_STREAM_OPEN || c->state == CONN_STREAM_SHUT)
        c->body_window -= len;
    if (c->route->on_body == NULL)
        return 0;
    int status = c->route->on_body(c, at, len);
    return status >= 400 ? refuse(c, status) : 0;
}

/* Pipelined requests wait in the input buffer until this one is answered;
 * a streaming route's body is complete. */
static int on_message_complete(llhttp_t *p)
{
    parser_conn(p)->parsed = PARSED_ALL;
    return HPE_PAUSED;
}

static const llhttp_settings_t parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_chunk_header = on_chunk_header,
    .on_chunk_complete = on_chunk_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

void conn__parser_init(struct conn *c)
{
    /* llhttp_init leaves every lenient flag off: llhttp's strict mode. */
    llhttp_init(&c->parser, HTTP_REQUEST, &parser_settings);
}

/* ---- the request, as handlers read it ---------------------------------------- */

const struct request *conn_request(const struct conn *c)
{
    return &c->req;
}
