#include "server/conn.h"

#include <llhttp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "handlers/routes.h"
#include "server/server.h"
#include "server/strict.h"

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Buffers. The limits on what a client may send (URL, header block, header
 * count, body) and the timeouts are in the configuration. */
#define IN_SIZE    (16 * 1024) /* one socket read */
#define VALUES_MAX (8 * 1024)  /* bytes of the headers we keep */
#define HEAD_MAX   2048        /* our response head */
/* After an error answer, how long input is drained before the close. */
#define LINGER_MS 2000

/* What a connection is waiting for; each phase has its own deadline. */
enum phase {
    PHASE_HEAD,   /* a request head: header_timeout from its first byte (or the accept) */
    PHASE_BODY,   /* a request body: body_timeout of silence */
    PHASE_SEND,   /* the client to take the response: send_timeout without progress */
    PHASE_IDLE,   /* keep-alive, the next request: keepalive_timeout */
    PHASE_LINGER, /* a refused client to stop sending: LINGER_MS */
};

/* Request fields llhttp leaves unchecked; reset for every request. */
struct framing {
    enum { FIELD_OTHER, FIELD_HOST, FIELD_TE } field; /* the field being read */
    unsigned hosts, tes;                              /* Host, Transfer-Encoding lines */
    size_t host_len, te_len;
    char te[24]; /* the Transfer-Encoding value, when it fits */
    bool te_long;
    bool trailers;     /* the head is done: fields now are trailers */
    uint64_t body_len; /* decoded body bytes so far */
    size_t ext_len;    /* chunk-extension bytes so far */
};

/* A connection: owned by the server's list; frees itself once its two
 * handles are closed, its pump idle and no handler holds it. */
struct conn {
    uv_tcp_t tcp;     /* closed exactly once, by conn_close, with the timer */
    uv_timer_t timer; /* fires at the phase's deadline */
    unsigned handles; /* of those two, not closed yet */
    struct server *srv;
    struct conn *next, **pprev;
    llhttp_t parser;
    const struct route *route;
    struct request req;

    /* request being parsed */
    size_t url_len;
    char field[32];
    size_t field_len;
    int header; /* enum header being collected, or -1 */
    size_t values_len;
    size_t header_bytes;
    unsigned header_count;
    int error;          /* status for a request refused while parsing */
    int deferred;       /* status to answer once a bodiless request is complete */
    bool request_ready; /* parsed in full, waiting for dispatch */
    struct framing framing;
    struct strict_lines lines; /* line discipline, across the connection's requests */
    const char *scanned;       /* framing bytes of the buffer in llhttp are checked up to here */

    /* timeouts */
    enum phase phase;
    bool started;      /* a byte of the current request has come */
    uint64_t deadline; /* uv_now() at which the phase times out */
    size_t sent_queue; /* PHASE_SEND: the socket's queue and the pump's count when last seen */
    unsigned long long sent_pumped;
    bool linger; /* drain input after the answer before closing */
    uv_shutdown_t shutdown_req;

    /* unparsed input (pipelined requests wait here while we answer one) */
    size_t in_off, in_len;
    bool reading;

    /* response */
    size_t head_len;
    bool head_overflow;
    int status;
    bool keep_alive;
    bool responding;
    char *body; /* copy sent by conn_send_body; owned, reused */
    size_t body_cap;
    unsigned long long bytes;
    uv_write_t write_req;
    uv_write_t continue_req;
    struct pump pump;

    void *state; /* the handler's per-request state, freed with state_free */
    void (*state_free)(void *);
    unsigned holds;
    bool closing, closed;
    char peer[64];

    /* The big buffers come last: conn_accept zeroes everything before them. */
    char values[VALUES_MAX];
    char in[IN_SIZE];
    char head[HEAD_MAX];
    char url[]; /* cfg->max_url + 1 bytes, allocated with the connection */
};

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

static void conn_close(struct conn *c);
static void parse_input(struct conn *c);
static void conn_on_timer(uv_timer_t *timer);
static void stop_reading(struct conn *c);

/* ---- small accessors ------------------------------------------------------ */

struct server *conn_server(struct conn *c)
{
    return c->srv;
}

const struct request *conn_request(const struct conn *c)
{
    return &c->req;
}

struct conn *conn_next(const struct conn *c)
{
    return c->next;
}

bool conn_closing(const struct conn *c)
{
    return c->closing;
}

void conn_set_state(struct conn *c, void *state, void (*free_fn)(void *))
{
    if (c->state != NULL)
        c->state_free(c->state);
    c->state = state;
    c->state_free = free_fn;
}

void *conn_state(struct conn *c)
{
    return c->state;
}

void *conn_take_state(struct conn *c)
{
    void *state = c->state;
    c->state = NULL;
    return state;
}

/* ---- lifetime -------------------------------------------------------------- */

static void conn_maybe_free(struct conn *c)
{
    if (!c->closed || c->holds > 0 || c->pump.src != NULL)
        return;
    conn_set_state(c, NULL, NULL);
    pump_free(&c->pump);
    free(c->body);
    *c->pprev = c->next;
    if (c->next != NULL)
        c->next->pprev = c->pprev;
    struct server *srv = c->srv;
    free(c);
    server_conn_gone(srv);
}

static void conn_on_close(uv_handle_t *handle)
{
    struct conn *c = handle->data;
    if (--c->handles > 0)
        return;
    c->closed = true;
    conn_maybe_free(c);
}

/* RESET closes with SO_LINGER 0: an RST, and the kernel drops the unsent
 * bytes at once instead of retrying them to a client that reads nothing. */
static void close_handles(struct conn *c, bool reset)
{
    if (c->closing)
        return;
    c->closing = true;
    pump_stop(&c->pump);
    uv_close((uv_handle_t *)&c->timer, conn_on_close);
    if (!reset || uv_tcp_close_reset(&c->tcp, conn_on_close) < 0)
        uv_close((uv_handle_t *)&c->tcp, conn_on_close);
}

static void conn_close(struct conn *c)
{
    close_handles(c, false);
}

void conn_hold(struct conn *c)
{
    c->holds++;
}

void conn_release(struct conn *c)
{
    c->holds--;
    conn_maybe_free(c);
}

void conn_shutdown(struct conn *c, bool force)
{
    if (force || !c->responding)
        conn_close(c);
}

/* ---- timeouts ------------------------------------------------------------------ */

/* One timer per connection, set when the phase changes. Progress inside a
 * phase (body bytes, bytes taken by the client) only moves c->deadline; the
 * timer, when it fires early, goes back to sleep until the new deadline. */

static void arm_timer(struct conn *c, uint64_t delay_ms)
{
    if (uv_timer_start(&c->timer, conn_on_timer, delay_ms, 0) < 0)
        conn_close(c); /* only when closing already */
}

static void set_phase(struct conn *c, enum phase phase, unsigned timeout_ms)
{
    c->phase = phase;
    c->deadline = uv_now(c->srv->loop) + timeout_ms;
    arm_timer(c, timeout_ms);
}

/* A client that reads nothing shows no change in the socket's queue, which
 * libuv empties as the kernel takes bytes. A check every quarter of the
 * timeout bounds the lateness of the cut to that quarter. */
static unsigned send_check_ms(const struct conn *c)
{
    return c->srv->cfg->send_timeout / 4 + 1;
}

static void start_sending(struct conn *c)
{
    c->sent_queue = 0;
    c->sent_pumped = c->pump.sent;
    c->phase = PHASE_SEND;
    c->deadline = uv_now(c->srv->loop) + c->srv->cfg->send_timeout;
    arm_timer(c, send_check_ms(c));
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

static void refuse_request(struct conn *c, const char *why);

static void time_out(struct conn *c)
{
    switch (c->phase) {
    case PHASE_HEAD:
    case PHASE_BODY:
        log_debug("timeout %s: request %s", c->peer, c->started ? "incomplete" : "never came");
        if (!c->started) {
            conn_close(c); /* no request, nothing to answer */
            return;
        }
        stop_reading(c);
        c->in_len = 0;
        c->error = 408;
        refuse_request(c, NULL);
        return;
    case PHASE_SEND:
        log_debug("timeout %s: the client stopped reading its response", c->peer);
        close_handles(c, true);
        return;
    case PHASE_IDLE:
    case PHASE_LINGER:
        conn_close(c);
        return;
    }
}

static void conn_on_timer(uv_timer_t *timer)
{
    struct conn *c = timer->data;
    uint64_t now = uv_now(c->srv->loop);
    if (c->phase == PHASE_SEND && send_progressed(c))
        c->deadline = now + c->srv->cfg->send_timeout;
    if (now >= c->deadline) {
        time_out(c);
        return;
    }
    uint64_t wait = c->deadline - now;
    if (c->phase == PHASE_SEND && wait > send_check_ms(c))
        wait = send_check_ms(c);
    arm_timer(c, wait);
}

/* ---- reading --------------------------------------------------------------- */

static void conn_on_alloc(uv_handle_t *handle, size_t hint, uv_buf_t *buf)
{
    struct conn *c = container_of(handle, struct conn, tcp);
    /* Reading runs only when every earlier byte has been parsed. */
    *buf = uv_buf_init(c->in, sizeof c->in);
}

static void conn_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = container_of(stream, struct conn, tcp);
    if (c->phase == PHASE_LINGER) {
        if (nread < 0)
            conn_close(c); /* the client is done: so are we */
        return;
    }
    if (nread == 0)
        return;
    if (nread < 0) {
        conn_close(c); /* EOF or reset: nothing half-parsed is worth an answer */
        return;
    }
    if (c->phase == PHASE_BODY)
        c->deadline = uv_now(c->srv->loop) + c->srv->cfg->body_timeout;
    c->in_off = 0;
    c->in_len = (size_t)nread;
    parse_input(c);
}

static void start_reading(struct conn *c)
{
    if (c->reading || c->closing)
        return;
    if (uv_read_start((uv_stream_t *)&c->tcp, conn_on_alloc, conn_on_read) == 0)
        c->reading = true;
    else
        conn_close(c);
}

static void stop_reading(struct conn *c)
{
    if (c->reading)
        uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = false;
}

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
        set_phase(c, PHASE_HEAD, c->srv->cfg->header_timeout);
    c->started = true;
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
    struct conn *c = parser_conn(p);
    if (len > c->srv->cfg->max_url - c->url_len)
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
    if (r->chunked || r->content_length > 0)
        set_phase(c, PHASE_BODY, c->srv->cfg->body_timeout);
    c->route = route_find(r->target);
    if ((c->route->methods & (1ull << r->method)) == 0) {
        /* Without a body nothing is left unread: answer and keep the connection. */
        if (r->chunked || (r->has_length && r->content_length > 0))
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
    bool body = r->chunked || (r->has_length && r->content_length > 0);
    if (body && expect != NULL && strcasecmp(expect, "100-continue") == 0 && r->http_minor == 1)
        send_continue(c);
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
    if (c->route->on_body == NULL)
        return 0;
    int status = c->route->on_body(c, at, len);
    return status >= 400 ? refuse(c, status) : 0;
}

static int on_message_complete(llhttp_t *p)
{
    struct conn *c = parser_conn(p);
    c->request_ready = true;
    /* Pipelined requests wait in the input buffer until this one is answered. */
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
    start_sending(c);
    c->bytes = 0;
    c->keep_alive = c->req.keep_alive && !c->srv->stopping;
    int status = c->deferred ? c->deferred : c->route->on_request(c, &c->req);
    if (status >= 400)
        conn_send_error(c, status, c->route->allow);
}

/* A request that failed to parse (WHY says how, for the debug log), was
 * refused or timed out: answer it, then drain and close. */
static void refuse_request(struct conn *c, const char *why)
{
    int status = c->error ? c->error : 400;
    if (why != NULL)
        log_debug("parse %s: %s", c->peer, why);
    if (c->url_len == 0)
        memcpy(c->url, "-", 2);
    else
        c->url[c->url_len] = '\0';
    c->responding = true;
    c->bytes = 0;
    c->keep_alive = false;
    c->linger = true;
    start_sending(c);
    conn_send_error(c, status, c->route ? c->route->allow : NULL);
}

static void parse_input(struct conn *c)
{
    while (c->in_len > 0 && !c->responding && !c->closing) {
        const char *start = c->in + c->in_off;
        c->scanned = start;
        llhttp_errno_t err = llhttp_execute(&c->parser, start, c->in_len);
        size_t used = c->in_len;
        if (err == HPE_PAUSED && c->request_ready) {
            used = (size_t)(llhttp_get_error_pos(&c->parser) - start);
        } else if (err != HPE_OK) {
            c->in_len = 0;
            refuse_request(c, c->error ? NULL : llhttp_get_error_reason(&c->parser));
            break;
        }
        /* What llhttp took as framing must pass before anything is answered. */
        if (strict_lines_scan(&c->lines, c->scanned, (size_t)(start + used - c->scanned)) < 0) {
            c->in_len = 0;
            refuse_request(c, "bare CR or LF, folded line, or no CRLF after chunk data");
            break;
        }
        c->in_off += used;
        c->in_len -= used;
        if (c->request_ready)
            dispatch(c);
    }
    if (c->responding)
        stop_reading(c);
    else
        start_reading(c);
}

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
    int n = vsnprintf(c->head + c->head_len, sizeof c->head - c->head_len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof c->head - c->head_len)
        c->head_overflow = true;
    else
        c->head_len += (size_t)n;
}

void conn_head_start(struct conn *c, int status)
{
    c->status = status;
    c->head_len = 0;
    c->head_overflow = false;
    conn_head_add(c, "HTTP/1.1 %d %s\r\nServer: unclog/" UNCLOG_VERSION "\r\nDate: %s\r\n", status,
                  http_reason(status), c->srv->date);
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
    return !c->head_overflow;
}

static void conn_on_shutdown(uv_shutdown_t *req, int status)
{
    /* Nothing to do: the drain ends at EOF or at the linger deadline. */
}

/* After an error answer the client may still be sending (a refused body,
 * more pipelined requests). Closing with input unread makes the kernel send
 * an RST, which can destroy the answer before the client reads it (RFC 9112
 * 9.6): half-close instead, drop what comes, and close at EOF or LINGER_MS. */
static void conn_linger(struct conn *c)
{
    c->in_len = 0;
    set_phase(c, PHASE_LINGER, LINGER_MS);
    if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, conn_on_shutdown) < 0) {
        conn_close(c);
        return;
    }
    start_reading(c);
}

/* The response has been handed to the socket in full. */
static void conn_finish(struct conn *c)
{
    struct server *srv = c->srv;
    const char *method = c->req.target ? llhttp_method_name(c->req.method) : "-";
    access_log_write(&srv->access, c->peer, (long)time(NULL), method, c->url, c->req.http_minor,
                     c->status, c->bytes);
    srv->requests++;
    c->responding = false;
    c->route = NULL;
    conn_set_state(c, NULL, NULL);
    if (!c->keep_alive || srv->stopping) {
        if ((c->linger || c->in_len > 0) && !srv->stopping)
            conn_linger(c);
        else
            conn_close(c);
        return;
    }
    c->started = false;
    set_phase(c, PHASE_IDLE, srv->cfg->keepalive_timeout);
    llhttp_resume(&c->parser);
    parse_input(c);
}

static void conn_on_write(uv_write_t *req, int status)
{
    struct conn *c = container_of(req, struct conn, write_req);
    if (status < 0)
        conn_close(c);
    else
        conn_finish(c);
}

static void write_out(struct conn *c, const char *body, size_t len)
{
    uv_buf_t bufs[2] = {uv_buf_init(c->head, (unsigned)c->head_len),
                        uv_buf_init((char *)body, (unsigned)len)};
    c->bytes = len;
    if (uv_write(&c->write_req, (uv_stream_t *)&c->tcp, bufs, len ? 2 : 1, conn_on_write) < 0)
        conn_close(c);
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
            conn_close(c);
            return;
        }
        c->body = grown;
        c->body_cap = len;
    }
    memcpy(c->body, body, len);
    write_out(c, c->body, len);
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
    if (c->head_overflow) {
        c->keep_alive = false;
        conn_head_start(c, 500);
    }
    conn_send_body(c, body, (size_t)len);
}

static void conn_on_pump_done(struct pump *pump, int status)
{
    struct conn *c = container_of(pump, struct conn, pump);
    c->bytes = pump->sent;
    if (status < 0 || c->closing)
        conn_close(c);
    else
        conn_finish(c);
    conn_maybe_free(c);
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
        if (c->head_overflow)
            conn_send_error(c, 500, NULL);
        else
            write_out(c, NULL, 0);
        return;
    }
    if (pump_start(&c->pump, src, c->head, c->head_len, chunked) < 0)
        conn_close(c);
}

/* ---- accepting ------------------------------------------------------------------- */

int conn_accept(struct server *srv, int fd)
{
    struct conn *c = malloc(sizeof *c + srv->cfg->max_url + 1);
    if (c == NULL) {
        close(fd);
        return UV_ENOMEM;
    }
    memset(c, 0, offsetof(struct conn, values)); /* the big buffers need no zeroing */
    c->srv = srv;
    int rc = uv_tcp_init(srv->loop, &c->tcp);
    if (rc < 0) {
        free(c);
        close(fd);
        return rc;
    }
    uv_timer_init(srv->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->handles = 2;
    c->next = srv->conns;
    if (c->next != NULL)
        c->next->pprev = &c->next;
    srv->conns = c;
    c->pprev = &srv->conns;
    srv->active++;
    pump_init(&c->pump, (uv_stream_t *)&c->tcp, conn_on_pump_done);
    /* llhttp_init leaves every lenient flag off: llhttp's strict mode. */
    llhttp_init(&c->parser, HTTP_REQUEST, &parser_settings);
    strict_lines_init(&c->lines);
    set_phase(c, PHASE_HEAD, srv->cfg->header_timeout);

    rc = uv_tcp_open(&c->tcp, fd);
    if (rc < 0) {
        close(fd);
        conn_close(c);
        return rc;
    }
    srv->accepted++;
    uv_tcp_nodelay(&c->tcp, 1);
    struct sockaddr_storage addr;
    int addr_len = sizeof addr;
    snprintf(c->peer, sizeof c->peer, "-");
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&addr, &addr_len) == 0) {
        if (addr.ss_family == AF_INET6)
            uv_ip6_name((struct sockaddr_in6 *)&addr, c->peer, sizeof c->peer);
        else
            uv_ip4_name((struct sockaddr_in *)&addr, c->peer, sizeof c->peer);
    }
    start_reading(c);
    return 0;
}
