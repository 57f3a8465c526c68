/* Requests: llhttp's callbacks, the limits and strict checks on what a
 * client sends, and the dispatch of each complete request to its route. */
#include "server/http/conn_internal.h"

#include <string.h>
#include <strings.h>

#include "server/server.h"

static const char *const header_names[HEADER_COUNT] = {
    [HEADER_EXPECT] = "expect",
    [HEADER_RANGE] = "range",
    [HEADER_IF_RANGE] = "if-range",
    [HEADER_IF_MATCH] = "if-match",
    [HEADER_IF_NONE_MATCH] = "if-none-match",
    [HEADER_IF_MODIFIED_SINCE] = "if-modified-since",
    [HEADER_IF_UNMODIFIED_SINCE] = "if-unmodified-since",
    [HEADER_ACCEPT_ENCODING] = "accept-encoding",
};

static void dispatch(struct conn *c);

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
    /* A connection's first head is due header_timeout after the accept, a
     * later one header_timeout after its first byte. */
    if (c->phase == PHASE_IDLE)
        conn__set_phase(c, PHASE_HEAD, c->srv->cfg->header_timeout);
    c->started = true;
    c->started_ns = uv_hrtime();
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
    struct conn *c = parser_conn(p);
    if (len > c->url_max - c->url_len)
        return refuse(c, 414);
    if (!strict_target_chars(at, len))
        return refuse(c, 400);
    /* The request line up to here, then what follows the target. */
    if (strict_lines_scan(&c->lines, c->scanned, (size_t)(at - c->scanned)) < 0)
        return refuse(c, 400);
    strict_lines_target(&c->lines);
    c->scanned = at + len;
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
    if (c->header_bytes > c->srv->cfg->max_header_size)
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
    if (++c->header_count > c->srv->cfg->max_headers)
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
        }
        for (int i = 0; i < HEADER_COUNT; i++) {
            if (field_is(c, header_names[i]))
                c->header = i;
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
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    struct conn *c = parser_conn(p);
    struct framing *f = &c->framing;
    c->header_bytes += len;
    if (c->header_bytes > c->srv->cfg->max_header_size)
        return refuse(c, 431);
    if (f->field == FIELD_HOST) {
        if (!strict_host_chars(at, len))
            return refuse(c, 400);
        f->host_len += len;
    } else if (f->field == FIELD_TE) {
        if (len < sizeof f->te - f->te_len) {
            memcpy(f->te + f->te_len, at, len);
            f->te_len += len;
        } else {
            f->te_long = true;
        }
    }
    if (c->header < 0)
        return 0;
    if (len + 1 > VALUES_MAX - c->values_len)
        return refuse(c, 431);
    memcpy(c->values + c->values_len, at, len);
    c->values_len += len;
    return 0;
}

static int on_header_value_complete(llhttp_t *p)
{
    struct conn *c = parser_conn(p);
    if (c->header >= 0)
        c->values[c->values_len++] = '\0';
    c->header = -1;
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

static int on_headers_complete(llhttp_t *p)
{
    struct conn *c = parser_conn(p);
    struct request *r = &c->req;
    c->url[c->url_len] = '\0';
    r->method = llhttp_get_method(p);
    r->http_minor = p->http_minor;
    r->keep_alive = llhttp_should_keep_alive(p) && !p->upgrade;
    r->head = r->method == HTTP_HEAD;
    r->chunked = (p->flags & F_CHUNKED) != 0;
    r->has_length = (p->flags & F_CONTENT_LENGTH) != 0;
    r->content_length = p->content_length;
    c->framing.trailers = true;
    if (p->http_major != 1)
        return refuse(c, 505);
    /* Origin-form, or absolute-form for the methods a proxy would forward. */
    r->target = strict_target_path(c->url, r->method == HTTP_GET || r->head);
    if (r->target == NULL || !framing_ok(c, p))
        return refuse(c, 400);
    r->target_len = strlen(r->target);
    if (r->has_length && r->content_length > c->srv->cfg->max_body)
        return refuse(c, 413);
    if (has_body(r))
        conn__set_phase(c, PHASE_BODY, c->srv->cfg->body_timeout);
    c->route = server_route(c->srv, r->target);
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
    if (c->route->on_body_end != NULL) {
        /* A streaming route answers now. llhttp pauses here, and the body
         * goes in only as fast as the route's window lets it. Without a
         * body, the message completes as this callback returns. */
        c->streaming = true;
        c->body_window = 0;
        dispatch(c);
        return has_body(r) && c->streaming ? HPE_PAUSED : 0;
    }
    return 0;
}

/* Chunk extensions are ignored, but not read without end: they count like
 * a header block. */
static int on_chunk_extension(llhttp_t *p, const char *at, size_t len)
{
    struct conn *c = parser_conn(p);
    c->framing.ext_len += len;
    return c->framing.ext_len > c->srv->cfg->max_header_size ? refuse(c, 400) : 0;
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
    if (c->framing.body_len > c->srv->cfg->max_body)
        return refuse(c, 413);
    if (c->streaming) {
        c->body_window -= len; /* never below 0: parsing is held to the window */
        /* Shut: now we wait on the pool or on the client taking the response. */
        if (c->body_window == 0)
            conn__start_sending(c);
    }
    if (c->route->on_body == NULL)
        return 0;
    int status = c->route->on_body(c, at, len);
    return status >= 400 ? refuse(c, status) : 0;
}

static int on_message_complete(llhttp_t *p)
{
    struct conn *c = parser_conn(p);
    if (c->responding) {
        /* Answered at its head (a streaming route): from now on the client
         * only has to read. A stream that was dropped (refused, or its
         * source could not start) has nobody left to tell. */
        if (c->streaming) {
            c->streaming = false;
            c->body_window = 0;
            conn__start_sending(c);
            c->route->on_body_end(c);
        }
        return HPE_PAUSED;
    }
    c->request_ready = true;
    /* Pipelined requests wait in the input buffer until this one is answered. */
    return HPE_PAUSED;
}

const llhttp_settings_t conn__parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_chunk_extension_name = on_chunk_extension,
    .on_chunk_extension_value = on_chunk_extension,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- dispatch ----------------------------------------------------------------- */

static void dispatch(struct conn *c)
{
    c->request_ready = false;
    c->responding = true;
    conn__start_sending(c);
    c->bytes = 0;
    c->keep_alive = c->req.keep_alive && !c->srv->stopping;
    int status = c->deferred ? c->deferred : c->route->on_request(c, &c->req);
    if (status >= 400) {
        conn__drop_stream(c);
        conn_send_error(c, status, c->route->allow);
    }
}

/* A request that failed to parse (WHY says how, for the debug log), was
 * refused or timed out: answer it, then drain and close. */
void conn__refuse_request(struct conn *c, const char *why)
{
    int status = c->error ? c->error : 400;
    if (c->responding) {
        /* A streamed body went bad after its response began. While none of
         * the response is out, stop it and answer the refusal instead;
         * after that no status can be sent, and the response is cut short. */
        log_debug("request %s: %s (%d) while streaming", c->peer, why ? why : "refused", status);
        c->streaming = false;
        c->in_len = 0;
        conn__stop_reading(c);
        if (c->pump.src != NULL && c->pump.head != NULL) {
            c->error = status;
            c->refusing = true;
            pump_stop(&c->pump);
        } else {
            conn__close(c, true);
        }
        return;
    }
    if (why != NULL)
        log_debug("parse %s: %s", c->peer, why);
    if (c->url_len == 0)
        memcpy(c->url, "-", 2);
    else
        c->url[c->url_len] = '\0';
    c->responding = true;
    c->bytes = 0;
    c->keep_alive = false;
    conn__start_sending(c);
    conn_send_error(c, status, c->route ? c->route->allow : NULL);
}

void conn__parse_input(struct conn *c)
{
    while (c->in_len > 0 && !c->closing && (!c->responding || c->streaming)) {
        /* A streamed body goes in no faster than its route takes it. */
        size_t len = c->streaming && c->body_window < c->in_len ? c->body_window : c->in_len;
        if (len == 0)
            break;
        const char *start = c->in + c->in_off;
        c->scanned = start;
        llhttp_errno_t err = llhttp_execute(&c->parser, start, len);
        size_t used = len;
        if (err == HPE_PAUSED) {
            /* At the end of a request, or at a streaming route's head. */
            used = (size_t)(llhttp_get_error_pos(&c->parser) - start);
            if (c->streaming)
                llhttp_resume(&c->parser);
        } else if (err != HPE_OK) {
            c->in_len = 0;
            conn__refuse_request(c, c->error ? NULL : llhttp_get_error_reason(&c->parser));
            break;
        }
        /* What llhttp took as framing must pass before anything is answered. */
        if (strict_lines_scan(&c->lines, c->scanned, (size_t)(start + used - c->scanned)) < 0) {
            c->in_len = 0;
            conn__refuse_request(c, "bare CR or LF, folded line, or no CRLF after chunk data");
            break;
        }
        c->in_off += used;
        c->in_len -= used;
        if (c->request_ready)
            dispatch(c);
    }
    if (c->in_len == 0 && (!c->responding || (c->streaming && c->body_window > 0)))
        conn__start_reading(c);
    else
        conn__stop_reading(c);
}
