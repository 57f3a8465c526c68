/* Requests (server/http/request.c) as a route sees them: the target and the
 * headers it keeps (repeats joined, white space trimmed, names in any
 * case), the framing checks and limits that refuse a request before the
 * route runs, the route's own refusal, 100-continue, and the handler's
 * per-request state. Driven through a socketpair (tests/conn_pair.h). */
#include <llhttp.h>
#include <stdio.h>

#include "tests/conn_pair.h"
#include "tests/tap.h"

/* What the last request looked like to the route. */
static struct {
    unsigned calls;
    char target[256];
    int method, http_minor;
    bool keep_alive, head, chunked, has_length;
    unsigned long long content_length;
    char headers[HEADER_COUNT][256];
    bool present[HEADER_COUNT];
    const char *proxied_by;
    size_t body;
} seen;

static void record(const struct request *req)
{
    seen.calls++;
    snprintf(seen.target, sizeof seen.target, "%.*s", (int)req->target_len, req->target);
    seen.method = req->method;
    seen.http_minor = req->http_minor;
    seen.keep_alive = req->keep_alive;
    seen.head = req->head;
    seen.chunked = req->chunked;
    seen.has_length = req->has_length;
    seen.content_length = req->content_length;
    seen.proxied_by = req->proxied_by;
    for (int i = 0; i < HEADER_COUNT; i++) {
        seen.present[i] = req->headers[i] != NULL;
        snprintf(seen.headers[i], sizeof seen.headers[i], "%s",
                 req->headers[i] ? req->headers[i] : "");
    }
}

static int answer(struct conn *c, const struct request *req)
{
    record(req);
    conn_head_start(c, 200);
    conn_send_text(c, "ok\n");
    return 0;
}

static int count_body(struct conn *c, const char *at, size_t len)
{
    seen.body += len;
    return 0;
}

static int refuse_at_head(struct conn *c, const struct request *req)
{
    record(req);
    return 415;
}

static const struct route plain = {.methods = (1ull << HTTP_GET) | (1ull << HTTP_HEAD) |
                                              (1ull << HTTP_POST),
                                   .allow = "GET, HEAD, POST",
                                   .on_body = count_body,
                                   .on_request = answer};
static const struct route get_only = {
    .methods = 1ull << HTTP_GET, .allow = "GET", .on_request = answer};
static const struct route limited = {.methods = 1ull << HTTP_POST,
                                     .max_body_key = "max_url", /* a size key: 8k */
                                     .on_body = count_body,
                                     .on_request = answer};
static const struct route picky = {
    .methods = 1ull << HTTP_POST, .on_headers = refuse_at_head, .on_request = answer};

static int status_of(const char *out)
{
    int status = 0;
    return sscanf(out, "HTTP/1.1 %d", &status) == 1 ? status : 0;
}

/* Opens a connection with ROUTE, sends TEXT, and returns the status of
 * the (first) answer; *CLOSED whether the server closed. */
static int one(const struct route *route, const char *text, bool *closed)
{
    pair_route(route);
    memset(&seen, 0, sizeof seen);
    pair_open();
    int status = status_of(pair_exchange(text, closed));
    pair_close();
    return status;
}

static void what_the_route_sees(void)
{
    bool closed;
    int status = one(&plain,
                     "GET /a/b?x=1 HTTP/1.1\r\nhOsT: example\r\n"
                     "Accept-Encoding: gzip \r\nX-Other: y\r\naccept-encoding:\t br\r\n"
                     "RANGE: bytes=0-1\r\nX-Forwarded-For: 10.0.0.1\r\nVia: 1.1 p\r\n\r\n",
                     &closed);
    is_int(status, 200, "a GET is answered");
    ok(!closed, "  and the connection kept");
    is_int(seen.calls, 1, "the route ran once");
    is_str(seen.target, "/a/b?x=1", "it sees the target with its query");
    is_int(seen.method, HTTP_GET, "  the method");
    is_int(seen.http_minor, 1, "  HTTP/1.1");
    ok(seen.keep_alive && !seen.head, "  keep-alive, not HEAD");
    is_str(seen.headers[HEADER_ACCEPT_ENCODING], "gzip, br",
           "a repeated header is one list, each value trimmed, names in any case");
    is_str(seen.headers[HEADER_RANGE], "bytes=0-1", "an upper-case name is found");
    is_str(seen.headers[HEADER_HOST], "example", "Host is kept");
    ok(!seen.present[HEADER_IF_RANGE], "an absent header is NULL");
    is_str(seen.proxied_by, "X-Forwarded-For", "the first proxy header is named");

    status = one(&plain, "GET http://example:8080/p HTTP/1.1\r\nHost: example:8080\r\n\r\n", NULL);
    is_int(status, 200, "an absolute-form GET is answered");
    is_str(seen.target, "/p", "  its target is the path alone");
    ok(seen.proxied_by == NULL, "  no proxy header: proxied_by is NULL");

    status = one(&plain, "HEAD / HTTP/1.0\r\n\r\n", &closed);
    is_int(seen.http_minor, 0, "HTTP/1.0 without Host is read");
    ok(seen.head && !seen.keep_alive, "  HEAD, not keep-alive");
    ok(closed, "  and the connection closes after it");
    is_int(status_of(pair_out), 200, "  its answer is a 200");
    ok(strstr(pair_out, "ok\n") == NULL, "  with no body");

    status = one(&plain, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &closed);
    ok(status == 200 && !seen.keep_alive && closed, "Connection: close ends it after the answer");
}

static void framing(void)
{
    bool closed;
    is_int(one(&plain, "GET / HTTP/1.1\r\n\r\n", &closed), 400, "HTTP/1.1 without Host: 400");
    ok(closed && seen.calls == 0, "  closed, the route never ran");
    is_int(one(&plain, "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", NULL), 400,
           "two Hosts: 400");
    is_int(one(&plain, "GET / HTTP/1.1\r\nHost:\r\n\r\n", NULL), 400, "an empty Host: 400");
    is_int(one(&plain, "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", NULL), 400,
           "Transfer-Encoding in HTTP/1.0: 400");
    is_int(one(&plain,
               "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n"
               "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
               NULL),
           400, "Transfer-Encoding twice: 400");
    is_int(one(&plain, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", NULL), 400,
           "a body not framed by a final chunked: 400");
    is_int(one(&plain, "GET / HTTP/2.0\r\nHost: x\r\n\r\n", NULL), 505, "HTTP/2.0 in text: 505");
    is_int(one(&plain, "GET x HTTP/1.1\r\nHost: x\r\n\r\n", NULL), 400,
           "a target neither origin- nor absolute-form: 400");

    is_int(one(&plain,
               "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               "3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n",
               NULL),
           200, "a chunked body with an extension is read");
    ok(seen.chunked && !seen.has_length, "  the request says chunked");
    is_int(seen.body, 5, "  the route got the decoded body, extensions left out");
    is_int(one(&plain, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd", NULL), 200,
           "a body with Content-Length is read");
    ok(seen.has_length && seen.content_length == 4 && seen.body == 4, "  all four bytes");
}

static void limits(void)
{
    static char text[64 * 1024];
    bool closed;

    int n = snprintf(text, sizeof text, "GET /");
    memset(text + n, 'a', pair_cfg.max_url);
    snprintf(text + n + pair_cfg.max_url, sizeof text - (size_t)n - pair_cfg.max_url,
             " HTTP/1.1\r\nHost: x\r\n\r\n");
    is_int(one(&plain, text, &closed), 414, "a target over max_url: 414");
    ok(closed, "  and the connection closes");
    n = snprintf(text, sizeof text, "GET /");
    memset(text + n, 'a', pair_cfg.max_url - 2);
    snprintf(text + n + pair_cfg.max_url - 2, sizeof text - (size_t)n - pair_cfg.max_url + 2,
             " HTTP/1.1\r\nHost: x\r\n\r\n");
    is_int(one(&plain, text, NULL), 200, "a target of max_url bytes less one is answered");

    n = snprintf(text, sizeof text, "GET / HTTP/1.1\r\nHost: x\r\n");
    for (unsigned i = 0; i < pair_cfg.max_headers; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, "X-%u: v\r\n", i);
    snprintf(text + n, sizeof text - (size_t)n, "\r\n");
    is_int(one(&plain, text, NULL), 431, "more than max_headers fields: 431");
    n = snprintf(text, sizeof text, "GET / HTTP/1.1\r\nHost: x\r\n");
    for (unsigned i = 1; i < pair_cfg.max_headers; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, "X-%u: v\r\n", i);
    snprintf(text + n, sizeof text - (size_t)n, "\r\n");
    is_int(one(&plain, text, NULL), 200, "max_headers fields exactly: answered");

    n = snprintf(text, sizeof text, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(text + n, 'v', pair_cfg.max_header_size);
    snprintf(text + n + pair_cfg.max_header_size,
             sizeof text - (size_t)n - pair_cfg.max_header_size, "\r\n\r\n");
    is_int(one(&plain, text, NULL), 431, "a field over max_header_size: 431");

    snprintf(text, sizeof text, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
             pair_cfg.max_url + 1);
    is_int(one(&limited, text, &closed), 413, "a Content-Length over the route's key: 413");
    ok(strstr(pair_out, "max_url") != NULL, "  the answer names the route's key");
    ok(closed && seen.calls == 0, "  closed, the route never ran");
    snprintf(text, sizeof text, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
             pair_cfg.max_url + 1);
    is_int(one(&plain, text, &closed), 0,
           "the same length on a route without its own key fits max_body: not refused");
    ok(!closed, "  the server waits for the body, the connection open");

    /* A chunked body has no length up front: refused as it grows. */
    n = snprintf(text, sizeof text,
                 "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%zx\r\n",
                 pair_cfg.max_url + 1);
    memset(text + n, 'b', pair_cfg.max_url + 1);
    snprintf(text + n + pair_cfg.max_url + 1, sizeof text - (size_t)n - pair_cfg.max_url - 1,
             "\r\n0\r\n\r\n");
    is_int(one(&limited, text, NULL), 413, "a chunked body growing over the route's key: 413");
}

static void methods_and_refusals(void)
{
    bool closed;
    is_int(one(&get_only, "DELETE /x HTTP/1.1\r\nHost: x\r\n\r\nGET /y HTTP/1.1\r\nHost: x\r\n\r\n",
               &closed),
           405, "a method the route lacks: 405");
    ok(strstr(pair_out, "Allow: GET\r\n") != NULL, "  with the route's Allow");
    ok(!closed && strstr(pair_out, "Allowed\nHTTP/1.1 200") != NULL &&
           strcmp(pair_out + pair_out_len - 7, "\r\n\r\nok\n") == 0,
       "  without a body nothing is unread: the next request is answered");
    is_str(seen.target, "/y", "  the next request is the one the route saw");
    is_int(one(&get_only, "PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab", &closed),
           405, "with a body: 405");
    ok(closed, "  and the connection closes");

    is_int(one(&picky, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", &closed), 415,
           "on_headers refuses: its status is the answer");
    ok(closed && seen.calls == 1, "  at the head (once), and the connection closes");

    pair_route(&plain);
    memset(&seen, 0, sizeof seen);
    pair_open();
    const char *out = pair_exchange(
        "POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n", NULL);
    is_str(out, "HTTP/1.1 100 Continue\r\n\r\n", "Expect: 100-continue is answered at the head");
    out = pair_exchange("ab", NULL);
    is_int(status_of(out), 200, "  the final answer comes after the body");
    out = pair_exchange("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n", NULL);
    is_int(status_of(out), 200, "without a body: no 100, the answer at once");
    pair_close();
    pair_open();
    out = pair_exchange("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nab",
                        NULL);
    ok(strstr(out, "100 Continue") == NULL, "HTTP/1.0: no 100 Continue");
    pair_close();
}

static unsigned freed;

static void free_state(void *state)
{
    freed++;
}

static int stateful(struct conn *c, const struct request *req)
{
    static int a, b;
    is_int(conn_handler_state(c) == NULL, 1, "  a request begins without handler state");
    conn_set_handler_state(c, &a, free_state);
    conn_set_handler_state(c, &b, free_state);
    is_int(freed, 1, "  replacing the state frees the previous one");
    ok(conn_handler_state(c) == &b, "  conn_state returns the last set");
    ok(conn_take_handler_state(c) == &b && conn_handler_state(c) == NULL,
       "  conn_take_handler_state hands it back");
    conn_set_handler_state(c, &a, free_state);
    conn_set_handler_state(c, &b, NULL);
    is_int(freed, 2, "  a state replaced is freed by its own free_fn");
    conn_set_handler_state(c, &a, free_state);
    ok(conn_request(c) == req, "conn_request is the request the route got");
    conn_head_start(c, 204);
    conn_send_head(c);
    return 0;
}

static void handler_state(void)
{
    static const struct route route = {.methods = ~0ull, .on_request = stateful};
    freed = 0;
    is_int(one(&route, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", NULL), 204, "a route with state");
    is_int(freed, 3, "the state left at the end of the request is freed by the core");
}

int main(void)
{
    pair_init();
    what_the_route_sees();
    framing();
    limits();
    methods_and_refusals();
    handler_state();
    is_int(pair_done(), 0, "every handle closed");
    return tap_done();
}
