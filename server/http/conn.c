/* A connection's state machine (the states are listed at enum conn_state):
 * the events that move it (input, writes done, the pump done), the one
 * transition function, its lifetime, the parse loop, dispatch and
 * refusals, and the end of a response. The other files of the connection
 * (conn_internal.h): timer.c (its timer, deadlines and pace), send.c (a
 * response's writes), accept.c (a socket becomes a connection), proxy.c
 * (a balancer's PROXY header); request.c and response.c fill in what a
 * request says and what a head holds. */
#include "server/http/conn.h"
#include "server/http/conn_internal.h"
#include "server/base/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void turn_leave(struct conn *c);

/* ---- small accessors ------------------------------------------------------ */

struct server *conn_server(struct conn *c)
{
    return c->env->owner;
}

uint64_t conn_flow(const struct conn *c)
{
    return c->flow;
}

bool conn_peer_loopback(const struct conn *c)
{
    return c->loopback;
}

bool conn_admin(const struct conn *c)
{
    return c->admin;
}

const struct addr_prefix *conn_peer_addr(const struct conn *c)
{
    return &c->addr;
}

bool conn_closing(const struct conn *c)
{
    return c->state >= CONN_CLOSING;
}

/* Whether C answers a request now: a stop lets it finish. */
static bool responding(const struct conn *c)
{
    return c->state >= CONN_STREAM_OPEN && c->state <= CONN_REFUSING;
}

/* ---- the transition -------------------------------------------------------- */

#define TO(s) (1u << (s))

/* The table at enum conn_state, as conn__enter() checks it. */
static const unsigned next_states[CONN_STATES] = {
    [CONN_NEW] = TO(CONN_HEAD) | TO(CONN_SEND) | TO(CONN_CLOSING),
    [CONN_IDLE] = TO(CONN_HEAD) | TO(CONN_SEND) | TO(CONN_CLOSING),
    [CONN_HEAD] = TO(CONN_BODY) | TO(CONN_SEND) | TO(CONN_STREAM_SHUT) | TO(CONN_CLOSING),
    [CONN_BODY] = TO(CONN_SEND) | TO(CONN_CLOSING),
    [CONN_STREAM_OPEN] =
        TO(CONN_STREAM_SHUT) | TO(CONN_SEND) | TO(CONN_REFUSING) | TO(CONN_CLOSING),
    [CONN_STREAM_SHUT] =
        TO(CONN_STREAM_OPEN) | TO(CONN_SEND) | TO(CONN_REFUSING) | TO(CONN_CLOSING),
    [CONN_SEND] = TO(CONN_IDLE) | TO(CONN_LINGER) | TO(CONN_CLOSING),
    [CONN_REFUSING] = TO(CONN_SEND) | TO(CONN_CLOSING),
    [CONN_LINGER] = TO(CONN_CLOSING),
    [CONN_CLOSING] = TO(CONN_CLOSED),
};

/* Whether C reads its socket in its state: only when every byte read so
 * far has been parsed (one buffer), and in LINGER to drop what comes. */
static bool wants_input(const struct conn *c)
{
    switch (c->state) {
    case CONN_NEW:
    case CONN_IDLE:
    case CONN_HEAD:
    case CONN_BODY:
    case CONN_STREAM_OPEN:
    case CONN_LINGER:
        return c->in_len == 0;
    default:
        return false;
    }
}

static void conn_on_alloc(uv_handle_t *handle, size_t hint, uv_buf_t *buf);

/* Starts or stops reading to match the state and the buffer, and places C
 * among its client's connections. */
void conn__follow_input(struct conn *c)
{
    conn__place(c);
    bool want = wants_input(c);
    if (want == c->reading)
        return;
    if (!want) {
        /* Not yet inside dispatch: its answer may go out at once. Nor while
         * its input waits for its turn: the client has no more to say
         * before its answer, and anything it sends stops reading then
         * (conn_on_alloc). Either way the poll's interest stays as it is. */
        if (c->answering || c->turn.queued)
            return;
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    } else if (uv_read_start((uv_stream_t *)&c->tcp, conn_on_alloc, c->on->read) == 0) {
        c->reading = true;
    } else {
        conn__close(c, false);
    }
}

/* The one place the state changes: checks the move against the table, arms
 * the new state's timer and reads or not to match. */
void conn__enter(struct conn *c, enum conn_state state)
{
    enum conn_state from = c->state;
    if ((next_states[from] & TO(state)) == 0)
        abort(); /* a move the table does not have: a bug */
    c->state = state;
    if (state == CONN_IDLE)
        c->head_late = false; /* the next request's head is due anew */
    if (from == CONN_HEAD && conn__rated(c)) {
        /* A request's body or response begins: its progress is measured,
         * and its body is due within body_max_time. */
        uint64_t now = uv_now(c->env->loop);
        rate_meter_start(&c->meter, now);
        c->rate_pumped = c->pump.sent;
        c->body_end = now + conn__cfg(c)->body_max_time;
    }
    conn__arm_state(c, from);
    conn__follow_input(c);
}

/* ---- lifetime -------------------------------------------------------------- */

/* Frees C once its handles are closed, its pump idle and nothing holds it. */
void conn__maybe_free(struct conn *c)
{
    if (c->state != CONN_CLOSED || c->holds > 0 || c->pump.src != NULL)
        return;
    conn_set_handler_state(c, NULL, NULL);
    pump_free(&c->pump);
    free(c->body);
    struct conn_env *env = c->env;
    bool served = c->pprev != NULL, admin = c->admin;
    if (served) {
        *c->pprev = c->next;
        if (c->next != NULL)
            c->next->pprev = c->pprev;
        clients_leave(env->clients, &c->client);
    }
    free(c);
    if (served)
        env->gone(env->owner, admin);
}

static void conn_on_close(uv_handle_t *handle)
{
    struct conn *c = handle->data;
    if (--c->handles > 0)
        return;
    conn__enter(c, CONN_CLOSED);
    conn__maybe_free(c);
}

/* Closes both handles; RESET closes with SO_LINGER 0: an RST, and the
 * kernel drops the unsent bytes at once instead of retrying them to a
 * client that reads nothing. */
void conn__close(struct conn *c, bool reset)
{
    if (c->state >= CONN_CLOSING)
        return;
    conn__enter(c, CONN_CLOSING);
    turn_leave(c);
    if (c->env->pump->sender != NULL)
        pump_sender_drop(c->env->pump->sender, &c->send);
    pump_stop(&c->pump);
    uv_close((uv_handle_t *)&c->timer, conn_on_close);
    if (!reset || uv_tcp_close_reset(&c->tcp, conn_on_close) < 0)
        uv_close((uv_handle_t *)&c->tcp, conn_on_close);
}

void conn_hold(struct conn *c)
{
    c->holds++;
}

void conn_release(struct conn *c)
{
    c->holds--;
    conn__maybe_free(c);
}

void conn_evict(struct client_link *l)
{
    struct conn *c = container_of(l, struct conn, client);
    bool idle = c->state == CONN_IDLE || conn__awaits_head(c);
    log_debug("closing %s %s: its client holds the most connections", idle ? "idle" : "busy",
              c->peer);
    /* A request under way gets a reset: the kernel drops what is unsent
     * instead of retrying it to a client that may read nothing. */
    conn__close(c, !idle);
}

void conn_stop_all(struct conn_env *env, bool force)
{
    /* conn__close unlinks a connection only later, from its close callback:
     * walking the list here is safe. */
    for (struct conn *c = env->conns; c != NULL; c = c->next) {
        if (force && conn__streaming(c) && pump_head_held(&c->pump)) {
            /* Its client has seen nothing yet: better told than dropped. */
            c->error = 503;
            conn__refuse(c, "stopping before its body was in");
        } else if (force || !responding(c)) {
            conn__close(c, false);
        }
    }
}

/* ---- reading and parsing --------------------------------------------------- */

static void conn_on_alloc(uv_handle_t *handle, size_t hint, uv_buf_t *buf)
{
    struct conn *c = container_of(handle, struct conn, tcp);
    /* Only when every earlier byte has been parsed; else none (UV_ENOBUFS):
     * reading was left on by conn__follow_input, and stops now. */
    *buf = wants_input(c) ? uv_buf_init(c->in, sizeof c->in) : uv_buf_init(NULL, 0);
}

void conn__on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = container_of(stream, struct conn, tcp);
    if (nread == UV_ENOBUFS) {
        uv_read_stop(stream); /* conn_on_alloc: input waits unparsed */
        c->reading = false;
        return;
    }
    if (c->state == CONN_LINGER) {
        if (nread < 0)
            conn__close(c, false); /* the client is done: so are we */
        return;
    }
    if (nread == 0)
        return;
    if (nread < 0) {
        if (c->proxy_wait && c->proxy_len > 0) {
            c->env->proxy.truncated++;
            log_debug("proxy %s: the PROXY header was cut short", c->peer);
        }
        if (c->sniff_wait)
            conn__close_unlisted(c); /* a header of its own, as far as it went */
        else
            conn__close(c, false); /* EOF or reset: nothing half-parsed is worth an answer */
        return;
    }
    c->in_off = 0;
    c->in_len = (size_t)nread;
    if (c->proxy_peer && c->proxy_wait && !conn__take_proxy_header(c))
        return;
    conn__sniff_first(c);
    if (c->sniff_wait) {
        conn__refuse_input(c, c->sniff_why); /* its first request failed: more of its first bytes */
        return;
    }
    if (c->state == CONN_BODY || c->state == CONN_STREAM_OPEN) {
        uint64_t now = uv_now(c->env->loop);
        c->deadline = conn__body_deadline(c, now);
        rate_meter_add(&c->meter, (uint64_t)nread, now);
    }
    conn__place(c); /* a request came, or more of it */
    conn__resume(c);
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
    /* The whole answer went out here (send.c's issue_out): reading never stopped,
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

/* ---- turns: the loop's time, shared by client (turns.h) ------------------- */

/* Parses C's input now, its time charged to its client's turn; says
 * whether more waits (conn__parse). */
static bool run_turn(struct conn *c, struct conn_turns *ct)
{
    uint64_t flow = c->flow, t0 = uv_hrtime();
    bool again = conn__parse(c);
    turns_charge(&ct->policy, flow, uv_hrtime() - t0);
    return again;
}

static void turn_leave(struct conn *c)
{
    if (c->env->turns != NULL)
        turns_remove(&c->env->turns->policy, &c->turn);
}

static void turn_wait(struct conn *c, struct conn_turns *ct)
{
    turns_wait(&ct->policy, &c->turn, c->flow);
    pass_wake(ct->pass);
    conn__follow_input(c); /* input waits in the buffer: reading stops */
}

/* Input to parse: now if its client has time left in this pass, else it
 * waits for its turn in a later pass, after those waiting already. Each
 * request answered at once asks again for the input after it. */
void conn__resume(struct conn *c)
{
    struct conn_turns *ct = c->env->turns;
    bool again;
    do {
        if (ct == NULL || ct->policy.share_ns == 0 || c->in_len == 0 || !conn__parsing(c)) {
            again = conn__parse(c);
        } else if (c->turn.queued) {
            return; /* it waits already; its turn resumes it */
        } else if (turns_admit(&ct->policy, c->flow, false)) {
            again = run_turn(c, ct);
        } else {
            turn_wait(c, ct);
            return;
        }
    } while (again);
}

/* A pass begins after each poll (while the share is on: else those
 * waiting go at the next idle phase). */
static void turns_begin(struct pass_sub *sub)
{
    struct conn_turns *ct = container_of(sub, struct conn_turns, sub);
    if (ct->policy.share_ns > 0)
        turns_new_pass(&ct->policy);
}

static bool turns_pending(const struct pass_sub *sub)
{
    return turns_waiting(&container_of(sub, const struct conn_turns, sub)->policy) > 0;
}

/* Before the poll: the waiting requests, clients in turn, as far as each
 * client's share and the pass's bound go. Each is out of the queue before
 * it runs, so that whatever it closes leaves the queue whole. */
static void turns_run(struct pass_sub *sub)
{
    struct conn_turns *ct = container_of(sub, struct conn_turns, sub);
    if (turns_waiting(&ct->policy) > 0)
        ct->policy.counters.passes++;
    struct fairq_node *node;
    while ((node = turns_next_waiting(&ct->policy)) != NULL) {
        /* Its state may have moved on meanwhile (a timeout): then it only
         * reads on. */
        struct conn *c = container_of(node, struct conn, turn);
        if (run_turn(c, ct))
            conn__resume(c);
    }
}

void conn_turns_init(struct conn_turns *ct, struct pass *pass, uint64_t share_ns)
{
    *ct = (struct conn_turns){
        .sub = {.begin = turns_begin, .run = turns_run, .waiting = turns_pending},
        .pass = pass,
    };
    turns_init(&ct->policy, share_ns);
    pass_subscribe(pass, &ct->sub);
}

void conn_turns_set_share(struct conn_turns *ct, uint64_t share_ns)
{
    turns_set_share(&ct->policy, share_ns);
}

void conn_turns_charge(struct conn_turns *ct, uint64_t client, uint64_t ns)
{
    turns_charge(&ct->policy, client, ns);
}

static const struct snap_def turns_share_def = {
    .key = "share_us",
    .metric = "unclog_turn_share_seconds",
    .unit = SNAP_US,
    .help = "Loop time a client's requests and pool callbacks may take per pass of the loop "
            "before its next requests wait for a later pass (turn_share; 0: no bound).",
    .merge = SNAP_SAME};
static const struct snap_def turns_at_once_def = {
    .key = "at_once",
    .metric = "unclog_turn_requests_at_once_total",
    .kind = SNAP_COUNTER,
    .help = "Request inputs parsed in the pass of the loop that brought them."};
static const struct snap_def turns_deferred_def = {
    .key = "deferred",
    .metric = "unclog_turn_requests_deferred_total",
    .kind = SNAP_COUNTER,
    .help = "Request inputs that waited for a later pass: their client had spent its share."};
static const struct snap_def turns_turns_def = {
    .key = "turns",
    .metric = "unclog_turn_turns_waited_total",
    .kind = SNAP_COUNTER,
    .help = "Passes of the loop that began with request inputs waiting."};
static const struct snap_def turns_waiting_def = {
    .key = "waiting",
    .metric = "unclog_turn_waiting_connections",
    .help = "Connections whose input waits for their client's turn now."};

void conn_turns_stats(const struct conn_turns *ct, struct snapshot *s)
{
    snap_open(s, "turns", NULL);
    snap_add(s, &turns_share_def, ct->policy.share_ns / 1000);
    snap_add(s, &turns_at_once_def, ct->policy.counters.at_once);
    snap_add(s, &turns_deferred_def, ct->policy.counters.deferred);
    snap_add(s, &turns_turns_def, ct->policy.counters.passes);
    snap_add(s, &turns_waiting_def, turns_waiting(&ct->policy));
    snap_close(s);
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
        if (pump_head_held(&c->pump)) {
            c->error = status;
            conn__enter(c, CONN_REFUSING);
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
    conn__enter(c, CONN_SEND);
    c->bytes = 0;
    c->keep_alive = false;
    conn_send_error(c, status, c->route ? c->route->allow : NULL);
}

/* ---- streaming request bodies ---------------------------------------------- */

void conn_body_window(struct conn *c, size_t bytes)
{
    if (!conn__streaming(c))
        return;
    c->body_window = bytes;
    if (bytes == 0) {
        if (c->state == CONN_STREAM_OPEN)
            conn__enter(c, CONN_STREAM_SHUT);
        return;
    }
    if (c->state == CONN_STREAM_SHUT)
        conn__enter(c, CONN_STREAM_OPEN);
    if (c->in_len > 0) {
        /* Input already read waits for the window: parse it from the loop,
         * not from inside the caller (a pump callback). */
        c->resume_due = true;
        conn__arm_timer(c, 0);
    }
}

/* A streaming request's body has nowhere to go any more (refused, its
 * source gone, or its response over): the rest stays unread, the route is
 * not called again, and the connection closes after the response. */
void conn__drop_stream(struct conn *c)
{
    if (conn__streaming(c)) {
        c->keep_alive = false;
        conn__enter(c, CONN_SEND);
    }
}

/* ---- the end of a response ------------------------------------------------ */

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
    if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, conn_on_shutdown) < 0) {
        conn__close(c, false);
        return;
    }
    conn__enter(c, CONN_LINGER);
}

/* The response has been handed to the socket in full; PARSE_NEXT: parse
 * what input waits (else the caller's parse loop goes on). */
void conn__finish(struct conn *c, bool parse_next)
{
    struct conn_env *env = c->env;
    const char *method = c->req.target ? llhttp_method_name(c->req.method) : "-";
    access_log_write(env->access, c->peer, (long)time(NULL), method, c->url, c->req.http_minor,
                     c->status, c->bytes);
    uint64_t us = c->started_ns ? (uv_hrtime() - c->started_ns) / 1000 : 0;
    env->response_done(env->owner, c->route, c->status, c->bytes, us);
    c->route = NULL;
    conn_set_handler_state(c, NULL, NULL);
    conn__drop_stream(c); /* a response that ended before its body did */
    if (!c->keep_alive || *env->stopping) {
        /* Always: bytes the client sent meanwhile may wait unread in the
         * kernel even when our buffer is empty (reading stops while we
         * answer), and the stop's deadline bounds the wait. */
        linger(c);
        return;
    }
    conn__enter(c, CONN_IDLE);
    llhttp_resume(&c->parser);
    if (parse_next)
        c->on->resume(c);
}
