#ifndef UNCLOG_ROUTE_H
#define UNCLOG_ROUTE_H

/* What a handler is given: the request being served and the route it
 * answers on. Types only, apart from the connection's functions (conn.h),
 * so that the inside of a connection (conn_internal.h, through http.h) can
 * use them without including the header of the unit that includes it. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct conn;

/* Request headers the handlers look at; others are counted and dropped. */
enum header {
    HEADER_EXPECT,
    HEADER_RANGE,
    HEADER_IF_RANGE,
    HEADER_IF_MATCH,
    HEADER_IF_NONE_MATCH,
    HEADER_IF_MODIFIED_SINCE,
    HEADER_IF_UNMODIFIED_SINCE,
    HEADER_ACCEPT_ENCODING,
    HEADER_HOST,
    HEADER_ORIGIN,
    HEADER_SEC_FETCH_SITE,
    HEADER_CONTENT_TYPE,
    HEADER_COUNT
};

/* The request being served. Strings are NUL-terminated and live in the
 * connection until the response is complete. */
struct request {
    int method;     /* llhttp_method_t */
    int http_minor; /* 0 or 1 (HTTP/1.x) */
    bool keep_alive;
    bool head;          /* method is HEAD: send the head only */
    const char *target; /* the path and query: an absolute-form target's authority is apart */
    size_t target_len;
    const char *authority; /* absolute-form: its host[:port], not NUL-terminated; else NULL */
    size_t authority_len;
    /* The first of Forwarded, X-Forwarded-For, X-Real-IP and Via it carries
     * (the name), or NULL: whether a proxy says it passed the request on. */
    const char *proxied_by;
    uint64_t content_length; /* when has_length */
    bool has_length, chunked;
    const char *headers[HEADER_COUNT]; /* NULL when absent; repeats joined by ", " */
};

/* What a route's callbacks return: 0 when the handler answers (now or
 * later), or an HTTP status >= 400 for the core to answer with a small body. */

struct route {
    const char *path;  /* exact path; NULL marks the fallback */
    uint64_t methods;  /* bit (1 << llhttp_method_t) per allowed method */
    const char *allow; /* the Allow header for 405 */
    /* Optional: the size key that limits the route's request body in place
     * of max_body (its module's, e.g. "gzip_max_body"), larger or smaller. */
    const char *max_body_key;
    /* Optional: headers are in; may refuse (413...) before the body is read. */
    int (*on_headers)(struct conn *c, const struct request *req);
    /* Optional: a piece of the decoded body; without it the body is dropped. */
    int (*on_body)(struct conn *c, const char *at, size_t len);
    /* The whole request is in: answer it. With on_body_end, the head is in:
     * answer as the body arrives. */
    int (*on_request)(struct conn *c, const struct request *req);
    /* Optional: makes the route stream its body. on_request runs once the
     * head is in and may start the response; on_body then gets the body
     * only while the handler's window is open (conn_body_window), and
     * on_body_end says the body is complete. A body that turns out bad
     * after the response started (too large, malformed chunks, a timeout)
     * ends the connection with a reset: the response is cut short. */
    void (*on_body_end)(struct conn *c);
    /* The server's own gauges (/stats, /metrics, /settings): counted, but
     * kept out of the request-latency figures, which are about the work
     * the server does for its clients, not about whoever watches it. */
    bool instrument;
    /* The listener it answers on (server/listener.c): the public one
     * (ROUTE_PUBLIC, the default: files, /gzip), the admin door only
     * (ROUTE_ADMIN: the dashboard, /settings), or both (ROUTE_BOTH: the
     * figures, which the public listener shows only to stats_from). */
    enum route_door { ROUTE_PUBLIC, ROUTE_ADMIN, ROUTE_BOTH } door;
};

#endif
