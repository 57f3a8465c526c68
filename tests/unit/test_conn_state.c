/* The connection's states, driven through a socketpair with an env of our
 * own: which state each piece of input leads to, and which transitions
 * restart the deadline (a first head keeps the accept's, a later one starts
 * at its first byte). No timing: deadlines are compared with markers. */
#include "../../server/http/conn.c"

#include <errno.h>
#include <signal.h>

#include "server/server.h"
#include "tests/tap.h"

#define MARK 12345 /* a deadline no transition computes */

static uv_loop_t loop;
static struct config cfg;
static struct config *cfg_ptr = &cfg;
static bool stopping;
static uint64_t bytes_sent;
static struct pump_env pump_env;
static struct writer_env writer_env = {.pump = &pump_env, .bytes_sent = &bytes_sent};
static struct access_log access_log;
static struct clients clients;
static unsigned responses, gone;
static int client = -1;

static int answer(struct conn *c, const struct request *req)
{
    conn_head_start(c, 200);
    conn_send_text(c, "hi\n");
    return 0;
}

static const struct route route = {.methods = ~0ull, .on_request = answer};

/* A streaming route that takes its body 4 bytes at a time, as a pump's
 * source would, and answers once it is in. */
static size_t body_got;

static int stream_start(struct conn *c, const struct request *req)
{
    body_got = 0;
    conn_body_window(c, 4);
    return 0;
}

static int stream_body(struct conn *c, const char *at, size_t len)
{
    body_got += len;
    return 0;
}

static void stream_end(struct conn *c)
{
    conn_head_start(c, 200);
    conn_send_text(c, "done\n");
}

static const struct route stream_route = {.methods = ~0ull,
                                          .on_request = stream_start,
                                          .on_body = stream_body,
                                          .on_body_end = stream_end};

static const struct route *find_route(const struct server *owner, const char *target, bool admin)
{
    return strcmp(target, "/s") == 0 ? &stream_route : &route;
}

static const char *date(struct server *owner)
{
    return "Thu, 01 Jan 2026 00:00:00 GMT";
}

static void response_done(struct server *owner, const struct route *r, int status, uint64_t bytes,
                          uint64_t us)
{
    responses++;
}

static void conn_gone(struct server *owner, bool admin)
{
    gone++;
}

static struct conn_env env = {.loop = &loop,
                              .cfg = &cfg_ptr,
                              .writer = &writer_env,
                              .access = &access_log,
                              .stopping = &stopping,
                              .route = find_route,
                              .date = date,
                              .response_done = response_done,
                              .gone = conn_gone,
                              .clients = &clients};

/* Sends TEXT as the client, drops what the server sent so far, and runs the
 * loop until C is in STATE (or 1000 turns have passed). */
static enum conn_state feed(struct conn *c, const char *text, enum conn_state state)
{
    if (*text != '\0' && send(client, text, strlen(text), MSG_NOSIGNAL) < 0)
        abort();
    for (int i = 0; i < 1000 && c->state != state; i++) {
        char buf[4096];
        while (recv(client, buf, sizeof buf, MSG_DONTWAIT) > 0)
            ;
        uv_run(&loop, UV_RUN_NOWAIT);
    }
    return c->state;
}

static struct conn *accept_one(void)
{
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) < 0)
        abort();
    client = pair[1];
    if (conn_accept(&env, pair[0], false) < 0)
        abort();
    return env.conns;
}

/* Closes the client's side and runs the loop until the connection is freed. */
static void hang_up(unsigned gone_before)
{
    shutdown(client, SHUT_WR);
    for (int i = 0; i < 1000 && gone == gone_before; i++) {
        char buf[4096];
        while (recv(client, buf, sizeof buf, MSG_DONTWAIT) > 0)
            ;
        uv_run(&loop, UV_RUN_NOWAIT);
    }
    close(client);
}

static void keep_alive_and_pipelining(void)
{
    struct conn *c = accept_one();
    is_int(c->state, CONN_NEW, "accepted: NEW");
    c->deadline = MARK;
    is_int(feed(c, "GET / HT", CONN_HEAD), CONN_HEAD, "first bytes: HEAD");
    is_int(c->deadline, MARK, "NEW -> HEAD keeps the accept's deadline");
    is_int(feed(c, "TP/1.1\r\nHost: x\r\n\r\n", CONN_IDLE), CONN_IDLE, "answered: IDLE");
    is_int(responses, 1, "one response");
    c->deadline = MARK;
    is_int(feed(c, "PO", CONN_HEAD), CONN_HEAD, "a second request: HEAD");
    ok(c->deadline != MARK, "IDLE -> HEAD starts a new deadline");
    is_int(feed(c, "ST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nab", CONN_BODY), CONN_BODY,
           "a body follows its head: BODY");
    is_int(feed(c, "cde", CONN_IDLE), CONN_IDLE, "body in, answered: IDLE");
    is_int(responses, 2, "two responses");
    is_int(feed(c,
                "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                CONN_LINGER),
           CONN_LINGER, "two pipelined, the last with close: LINGER");
    is_int(responses, 4, "both answered in turn");
    unsigned before = gone;
    hang_up(before);
    is_int(gone, before + 1, "EOF in LINGER: closed and freed, gone once");
}

static void streaming_body(void)
{
    struct conn *c = accept_one();
    unsigned before = responses;
    is_int(feed(c, "POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\n", CONN_STREAM_OPEN),
           CONN_STREAM_OPEN, "a streaming head: dispatched, its window open");
    is_int(feed(c, "abcdef", CONN_STREAM_SHUT), CONN_STREAM_SHUT, "the window used up: SHUT");
    is_int(body_got, 4, "no more than the window went in");
    ok(!c->reading, "shut, and input waits: not reading");
    conn_body_window(c, 4);
    is_int(c->state, CONN_STREAM_OPEN, "the window opens again: OPEN");
    for (int i = 0; i < 1000 && body_got < 6; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    is_int(body_got, 6, "what waited in the buffer goes in from the loop");
    is_int(feed(c, "gh", CONN_IDLE), CONN_IDLE, "the body ends, the answer is out: IDLE");
    is_int(body_got, 8, "the whole body went in");
    is_int(responses, before + 1, "one response");
    unsigned gone_before = gone;
    hang_up(gone_before);
    is_int(gone, gone_before + 1, "freed");
}

static void refusal(void)
{
    struct conn *c = accept_one();
    unsigned before = responses;
    is_int(feed(c, "\x01\r\n\r\n", CONN_LINGER), CONN_LINGER, "garbage: refused, LINGER");
    is_int(responses, before + 1, "the refusal is a response");
    unsigned gone_before = gone;
    hang_up(gone_before);
    is_int(gone, gone_before + 1, "freed");
}

static void stop(void)
{
    struct conn *c = accept_one();
    is_int(feed(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", CONN_IDLE), CONN_IDLE, "answered: IDLE");
    unsigned before = gone;
    conn_stop_all(&env, false);
    ok(c->state >= CONN_CLOSING, "a stop closes an idle connection at once");
    hang_up(before);
    is_int(gone, before + 1, "freed");
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    static const struct config_table *const core_keys[] = {&server_config_table, NULL};
    config_defaults(&cfg, core_keys);
    cfg.header_timeout = 50000;
    cfg.keepalive_timeout = 20000;
    if (uv_loop_init(&loop) != 0 || access_log_open(&access_log, &loop, "off") != 0)
        abort();
    log_set_level(LOG_ERROR);
    keep_alive_and_pipelining();
    streaming_body();
    refusal();
    stop();
    access_log_close(&access_log);
    uv_run(&loop, UV_RUN_DEFAULT);
    is_int(uv_loop_close(&loop), 0, "every handle closed");
    return tap_done();
}
