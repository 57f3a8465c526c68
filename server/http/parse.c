/* The parse loop (conn__parse): llhttp over a connection's buffered input,
 * the state brought up to what each step recorded (request.c), the request
 * dispatched to its route, a streamed body's end, the refusal of input that
 * is no request or of a request that may not be; and the server's stop.
 * Above send.c and proxy.c, below input.c (conn_internal.h). */
#include "server/http/conn.h"
#include "server/http/conn_internal.h"

#include <string.h>

/* Whether C answers a request now: a stop lets it finish. */
static bool responding(const struct conn *c)
{
    return c->state >= CONN_STREAM_OPEN && c->state <= CONN_REFUSING;
}

/* Hands the request to its route: it answers now or later, or returns a
 * status for us to answer. A streaming route gets it at its head. */
static void dispatch(struct conn *c)
{
    bool streams = conn__streams(c);
    if (streams)
        c->body_window = 0;
    c->answering = true;
    conn__enter(c, streams ? CONN_STREAM_SHUT : CONN_SEND);
    c->first_done = true;
    c->bytes = 0;
    c->keep_alive = c->req.keep_alive && !*c->env->stopping;
    int status = c->deferred ? c->deferred : c->route->on_request(c, &c->req);
    if (status >= 400) {
        conn__drop_stream(c);
        conn_send_error(c, status, c->route->allow);
    }
    c->answering = false;
    bool whole = c->written_now;
    c->written_now = false;
    /* The whole answer went out here (writer_answer): reading never stopped,
     * and the parse loop goes on with the next request. */
    if (whole && c->state < CONN_CLOSING)
        conn__finish(c, false);
}

/* A streaming route's body is in: from now on the client only has to read. */
static void end_stream(struct conn *c)
{
    c->body_window = 0;
    conn__enter(c, CONN_SEND);
    c->route->on_body_end(c);
}

/* Brings the state up to what llhttp has seen of the request. */
static void advance(struct conn *c)
{
    if ((c->state == CONN_NEW || c->state == CONN_IDLE) && c->parsed >= PARSED_BEGUN)
        conn__enter(c, CONN_HEAD);
    if (c->state == CONN_HEAD && c->parsed >= PARSED_HEAD) {
        if (conn__streams(c))
            dispatch(c);
        else if (c->parsed == PARSED_HEAD)
            conn__enter(c, CONN_BODY); /* a body follows, or the message were complete */
    }
    if (c->parsed == PARSED_ALL) {
        c->parsed = PARSED_NONE;
        if (c->state == CONN_HEAD || c->state == CONN_BODY)
            dispatch(c);
        else if (conn__streaming(c))
            end_stream(c);
        /* else a dropped stream: nobody is left to tell */
    } else if (c->state == CONN_STREAM_OPEN && c->body_window == 0) {
        conn__enter(c, CONN_STREAM_SHUT); /* we wait on the pool or on the client */
    }
}

/* Input that is no request (WHY, for the debug log): a PROXY header from a
 * peer not entitled to send one closes (the spec's abort), anything else
 * is answered. While a first request's bytes so far still begin as a
 * header, which it is waits for more of them: C reads on, parsing nothing,
 * until conn__sniff_verdict knows (conn__on_read comes back here), its
 * client stops sending, or its head's deadline (header_timeout) passes. */
void conn__refuse_input(struct conn *c, const char *why)
{
    c->in_len = 0;
    if (c->parsed == PARSED_NONE) {
        /* Refused before llhttp began a request (its line check): what C
         * holds is the last request's, which this is not (after a HEAD,
         * the 400 has its body, as when on_message_begin has run). */
        memset(&c->req, 0, sizeof c->req);
        c->url_len = 0;
    }
    int verdict = conn__sniff_verdict(c);
    if (verdict == 0) {
        c->sniff_wait = true;
        c->sniff_why = why;
        if (c->state == CONN_NEW)
            conn__enter(c, CONN_HEAD); /* as when its bytes came in pieces; NEW's deadline holds */
        return;
    }
    c->sniff_wait = false;
    if (verdict > 0)
        conn__close_unlisted(c);
    else
        conn__refuse(c, why);
}

/* The one way into llhttp: parses the buffered input as far as the state
 * lets it, acting on each step, then reads on if the buffer is spent and
 * the state wants more. Only through conn__resume, which keeps the turns: true
 * when a request was answered at once and more input waits, which asks
 * for its own turn. */
bool conn__parse(struct conn *c)
{
    while (c->in_len > 0 && conn__parsing(c)) {
        /* A streamed body goes in no faster than its route takes it. */
        size_t len = conn__streaming(c) && c->body_window < c->in_len ? c->body_window : c->in_len;
        if (len == 0)
            break;
        const char *start = c->in + c->in_off;
        size_t skip;
        if (conn__chunk_split(c, start, &len, &skip) < 0) {
            c->in_len = 0;
            conn__refuse(c, "chunk extension malformed or too long");
            break;
        }
        if (skip > 0) {
            c->in_off += skip; /* extensions: checked, never parsed by llhttp */
            c->in_len -= skip;
            continue;
        }
        c->scanned = start;
        llhttp_errno_t err = llhttp_execute(&c->parser, start, len);
        /* A route's on_body may have closed C (its pump failed to start a
         * job): nothing more to parse, nobody to answer. */
        if (c->state >= CONN_CLOSING)
            return false;
        size_t used = len;
        if (err == HPE_PAUSED) {
            /* At the end of a request, a streaming route's head or a
             * chunk-size line. */
            used = (size_t)(llhttp_get_error_pos(&c->parser) - start);
        } else if (err != HPE_OK) {
            c->in_len = 0;
            /* A head refused by a callback is answered as if its bytes had
             * come one by one: the line check of what came before it first,
             * on_headers_complete's refusals (405, 413, a route's) too. A
             * head that ended in an earlier input was checked then. */
            const char *at = llhttp_get_error_pos(&c->parser);
            /* And a byte llhttp refuses itself inside a span (the target,
             * a header) comes after the span's bytes before it, which reach
             * their callback first, as when the input ends there: llhttp
             * leaves them pending (_span_pos0) at its errors. */
            const char *span = c->parser._span_pos0;
            if (c->error == 0 && span != NULL && at != NULL && at > span) {
                typedef int (*span_cb)(llhttp_t *, const char *, const char *);
                span_cb cb; /* a function kept as void * (POSIX: same size) */
                _Static_assert(sizeof cb == sizeof c->parser._span_cb0, "span_cb");
                memcpy(&cb, &c->parser._span_cb0, sizeof cb);
                cb(&c->parser, span, at);
            }
            if (c->error && c->state <= CONN_HEAD && at != NULL && at >= c->scanned &&
                strict_lines_scan(&c->lines, c->scanned, (size_t)(at - c->scanned)) < 0) {
                /* Refused before the callback's byte: the head was never
                 * whole, and nothing on_headers_complete recorded holds (a
                 * HEAD's 400 has its body and no route, as in pieces). */
                c->error = 0;
                c->req.head = false;
                c->req.target = NULL;
                c->route = NULL;
            }
            conn__refuse_input(c, c->error ? NULL : llhttp_get_error_reason(&c->parser));
            break;
        }
        /* What llhttp took as framing must pass before anything is answered. */
        if (strict_lines_scan(&c->lines, c->scanned, (size_t)(start + used - c->scanned)) < 0) {
            c->in_len = 0;
            conn__refuse_input(c, "bare CR or LF, folded line, or no CRLF after chunk data");
            break;
        }
        c->in_off += used;
        c->in_len -= used;
        bool ended = c->parsed == PARSED_ALL;
        advance(c);
        if (err == HPE_PAUSED && !ended)
            llhttp_resume(&c->parser); /* the body follows; conn__finish() resumes after the end */
        if (ended && c->state == CONN_IDLE && c->in_len > 0)
            return true; /* answered at once; the input after it is kept */
    }
    if (c->state < CONN_CLOSING)
        conn__follow_input(c);
    return false;
}

/* A request that failed to parse (WHY says how, for the debug log), was
 * refused or timed out: answer it, then drain and close. */
void conn__refuse(struct conn *c, const char *why)
{
    int status = c->error ? c->error : 400;
    if (conn__streaming(c)) {
        /* A streamed body went bad after its response began. While none of
         * the response is out (a late head waits for its first slot to
         * fill), stop it and answer the refusal instead; after that no
         * status can be sent, and the response is cut short. */
        log_debug("request %s: %s (%d) while streaming", c->peer, why ? why : "refused", status);
        c->in_len = 0;
        if (writer_head_held(&c->writer)) {
            c->error = status;
            conn__enter(c, CONN_REFUSING);
            writer_stop(&c->writer);
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
    conn__enter(c, CONN_SEND);
    c->bytes = 0;
    c->keep_alive = false;
    conn_send_error(c, status, c->route ? c->route->allow : NULL);
}

void conn_stop_all(struct conn_env *env, bool force)
{
    /* conn__close unlinks a connection only later, from its close callback:
     * walking the list here is safe. */
    for (struct conn *c = env->conns; c != NULL; c = c->next) {
        if (force && conn__streaming(c) && writer_head_held(&c->writer)) {
            /* Its client has seen nothing yet: better told than dropped. */
            c->error = 503;
            conn__refuse(c, "stopping before its body was in");
        } else if (force || !responding(c)) {
            conn__close(c, false);
        }
    }
}
