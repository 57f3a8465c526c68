/* Response heads (server/http/response.c), as the client reads them: the
 * status line and the fields every response has, Connection by version and
 * keep-alive, a body's framing (Content-Length, chunked, or the close), the
 * small error responses, and a head too large for its buffer. Driven
 * through a socketpair (tests/conn_pair.h). */
#include <llhttp.h>
#include <stdio.h>

#include "tests/conn_pair.h"
#include "tests/tap.h"

static int released;

static void release(struct pump_source *src)
{
    released++;
}

static const struct pump_source_ops stub_ops = {.release = release};
static struct pump_source stub = {.ops = &stub_ops};

/* What the next request's route does. */
static enum { TEXT, SOURCE_UNKNOWN, SOURCE_KNOWN, ERROR_405, ERROR_404, HUGE } action;

static int respond(struct conn *c, const struct request *req)
{
    switch (action) {
    case TEXT:
        conn_head_start(c, 200);
        conn_head_add(c, "X-Test: %d\r\n", 7);
        conn_send_text(c, "hello\n");
        break;
    case SOURCE_UNKNOWN: /* HEAD only: a body would need the pump */
    case SOURCE_KNOWN:
        conn_head_start(c, 200);
        conn_send_source(c, &stub, action == SOURCE_KNOWN ? 1234 : -1);
        break;
    case ERROR_405:
        conn_send_error(c, 405, "GET, HEAD");
        break;
    case ERROR_404:
        conn_send_error(c, 404, NULL);
        break;
    case HUGE:
        conn_head_start(c, 200);
        for (int i = 0; i < 200; i++)
            conn_head_add(c, "X-Filler-%03d: %0100d\r\n", i, i);
        conn_send_text(c, "never\n");
        break;
    }
    return 0;
}

static const struct route route = {.methods = ~0ull, .on_request = respond};

static const char *ask(const char *text, bool *closed)
{
    pair_open();
    const char *out = pair_exchange(text, closed);
    pair_close();
    return out;
}

static void reasons(void)
{
    is_str(http_reason(200), "OK", "200 OK");
    is_str(http_reason(206), "Partial Content", "206 Partial Content");
    is_str(http_reason(304), "Not Modified", "304 Not Modified");
    is_str(http_reason(413), "Content Too Large", "413 by RFC 9110's name");
    is_str(http_reason(416), "Range Not Satisfiable", "416 Range Not Satisfiable");
    is_str(http_reason(431), "Request Header Fields Too Large", "431");
    is_str(http_reason(505), "HTTP Version Not Supported", "505");
    is_str(http_reason(299), "Unknown", "a status without a phrase: Unknown");
    is_str(http_reason(-1), "Unknown", "  nor a negative one");
}

static void heads(void)
{
    bool closed;
    action = TEXT;
    const char *out = ask("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    is_str(out,
           "HTTP/1.1 200 OK\r\nServer: unclog/" UNCLOG_VERSION
           "\r\nDate: Thu, 01 Jan 2026 00:00:00 GMT\r\n"
           "X-Test: 7\r\nContent-Length: 6\r\n\r\nhello\n",
           "HTTP/1.1: status line, Server, Date, the handler's fields, the length, the body");
    ok(!closed, "  kept open, no Connection field");

    out = ask("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &closed);
    ok(strstr(out, "\r\nConnection: keep-alive\r\n") != NULL && !closed,
       "HTTP/1.0 keep-alive: the head says so, the connection stays");
    out = ask("GET / HTTP/1.0\r\n\r\n", &closed);
    ok(strstr(out, "\r\nConnection: close\r\n") != NULL && closed,
       "HTTP/1.0 without keep-alive: Connection: close, then closed");
    out = ask("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &closed);
    ok(strstr(out, "\r\nConnection: close\r\n") != NULL && closed,
       "HTTP/1.1 asking close: Connection: close, then closed");

    pair_stopping = true;
    out = ask("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    pair_stopping = false;
    ok(strstr(out, "\r\nConnection: close\r\n") != NULL && closed,
       "while the server stops: Connection: close on a keep-alive request");

    out = ask("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    ok(strstr(out, "Content-Length: 6\r\n\r\n") != NULL &&
           strcmp(out + strlen(out) - 4, "\r\n\r\n") == 0,
       "HEAD: the length of the body it would have, and no body");
}

static void framing(void)
{
    bool closed;
    released = 0;
    action = SOURCE_UNKNOWN;
    const char *out = ask("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    ok(strstr(out, "\r\nTransfer-Encoding: chunked\r\n") != NULL &&
           strstr(out, "Content-Length") == NULL,
       "a body of unknown length on HTTP/1.1: chunked");
    ok(!closed, "  the connection stays");
    is_int(released, 1, "  HEAD: the source is released unread");

    out = ask("HEAD / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &closed);
    ok(strstr(out, "Transfer-Encoding") == NULL && strstr(out, "Content-Length") == NULL,
       "on HTTP/1.0: neither chunked nor a length");
    ok(strstr(out, "\r\nConnection: close\r\n") != NULL && closed,
       "  the close ends the body, although the client asked keep-alive");
    is_int(released, 2, "  released");

    action = SOURCE_KNOWN;
    out = ask("HEAD / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &closed);
    ok(strstr(out, "\r\nContent-Length: 1234\r\n") != NULL &&
           strstr(out, "Transfer-Encoding") == NULL && !closed,
       "a known length: Content-Length, and HTTP/1.0 keep-alive holds");
}

static void errors(void)
{
    bool closed;
    action = ERROR_405;
    const char *out = ask("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    ok(strncmp(out, "HTTP/1.1 405 Method Not Allowed\r\n", 33) == 0, "405's status line");
    ok(strstr(out, "\r\nAllow: GET, HEAD\r\n") != NULL, "  Allow as given");
    ok(strstr(out, "\r\nContent-Type: text/plain; charset=utf-8\r\n") != NULL, "  plain text");
    ok(strstr(out, "\r\nContent-Length: 23\r\n\r\n405 Method Not Allowed\n") != NULL,
       "  its body is the status and reason, with its length");
    ok(!closed, "  a 405 keeps the connection");

    action = ERROR_404;
    out = ask("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    ok(strstr(out, "Allow") == NULL && strstr(out, "\r\n\r\n404 Not Found\n") != NULL && !closed,
       "404: no Allow, its body, kept open");

    action = HUGE;
    out = ask("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    ok(strncmp(out, "HTTP/1.1 500 Internal Server Error\r\n", 36) == 0,
       "a head too large for its buffer: a 500 in its place");
    ok(strstr(out, "X-Filler") == NULL && strstr(out, "never") == NULL,
       "  with nothing of the failed head nor its body");
    ok(strstr(out, "\r\n\r\n500 Internal Server Error\n") != NULL && !closed,
       "  a complete 500: the connection may go on");
}

int main(void)
{
    pair_init();
    pair_route(&route);
    reasons();
    heads();
    framing();
    errors();
    is_int(pair_done(), 0, "every handle closed");
    return tap_done();
}
