/* A connection's input: what a read brings (a balancer's PROXY header, the
 * first bytes kept to tell one its client may not send, a request), and
 * when it is parsed: now, or at its client's turn (the turns: the loop's
 * time shared by client, turns.h, run by the pass service). */
#include "server/http/conn.h"
#include "server/http/conn_internal.h"
#include "server/base/snapshot.h"

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

/* ---- turns: the loop's time, shared by client (turns.h) ------------------ */

/* Parses C's input now, its time charged to its client's turn; says
 * whether more waits (conn__parse). */
static bool run_turn(struct conn *c, struct conn_turns *ct)
{
    uint64_t client = c->client_id, t0 = uv_hrtime();
    bool again = conn__parse(c);
    turns_charge(&ct->policy, client, uv_hrtime() - t0);
    return again;
}

static void turn_wait(struct conn *c, struct conn_turns *ct)
{
    turns_wait(&ct->policy, &c->turn, c->client_id);
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
        } else if (turns_admit(&ct->policy, c->client_id, false)) {
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
