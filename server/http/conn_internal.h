#ifndef UNCLOG_CONN_INTERNAL_H
#define UNCLOG_CONN_INTERNAL_H

/* The inside of a connection, shared by the three files that make it:
 * conn.c (lifetime, timeouts, reading, accepting), request.c (llhttp glue,
 * limits, dispatch) and response.c (heads, bodies, the end of a response).
 * No other file includes it. */

#include <llhttp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "server/http/conn.h"
#include "server/http/strict.h"
#include "server/base/util.h"

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
    uv_tcp_t tcp;     /* closed exactly once, by conn__close, with the timer */
    uv_timer_t timer; /* fires at the phase's deadline */
    unsigned handles; /* of those two, not closed yet */
    struct server *srv;
    struct conn *next, **pprev;
    llhttp_t parser;
    const struct route *route;
    struct request req;

    /* request being parsed */
    size_t url_len;
    size_t url_max; /* url[]'s size less the NUL: max_url when the connection came */
    char field[32];
    size_t field_len;
    int header; /* enum header being collected, or -1 */
    size_t values_len;
    size_t header_bytes;
    unsigned header_count;
    int error;          /* status for a request refused while parsing */
    int deferred;       /* status to answer once a bodiless request is complete */
    bool request_ready; /* parsed in full, waiting for dispatch */
    bool streaming;     /* answered at its head; its body still arriving */
    size_t body_window; /* streaming: body bytes the route takes now */
    bool parse_pending; /* the window opened on unparsed input: parse at the next tick */
    bool refusing;      /* a refusal (c->error) waits for the pump to stop */
    struct framing framing;
    struct strict_lines lines; /* line discipline, across the connection's requests */
    const char *scanned;       /* framing bytes of the buffer in llhttp are checked up to here */

    /* timeouts */
    enum phase phase;
    bool started;        /* a byte of the current request has come */
    uint64_t started_ns; /* uv_hrtime() then: where its latency starts */
    uint64_t deadline;   /* uv_now() at which the phase times out */
    size_t sent_queue;   /* PHASE_SEND: the socket's queue and the pump's count when last seen */
    unsigned long long sent_pumped;
    uv_shutdown_t shutdown_req;

    /* unparsed input (pipelined requests wait here while we answer one) */
    size_t in_off, in_len;
    bool reading;

    /* response */
    struct buf head_out; /* over head[] */
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
    bool loopback; /* the peer is this machine */
    uint64_t flow; /* the peer's address, hashed */

    /* The big buffers come last: conn_accept zeroes everything before them. */
    char values[VALUES_MAX];
    char in[IN_SIZE];
    char head[HEAD_MAX];
    char url[]; /* cfg->max_url + 1 bytes, allocated with the connection */
};

/* Shared by conn.c, request.c and response.c only: the conn__ prefix marks
 * what handlers must not call (their API is conn.h). */

/* conn.c */
/* Closes both handles; RESET sends an RST and drops unsent bytes at once. */
void conn__close(struct conn *c, bool reset);
/* Frees C once its handles are closed, its pump idle and nothing holds it. */
void conn__maybe_free(struct conn *c);
/* Enters PHASE, due TIMEOUT_MS from now. */
void conn__set_phase(struct conn *c, enum phase phase, unsigned timeout_ms);
/* Enters PHASE_SEND: the client must keep taking the response. */
void conn__start_sending(struct conn *c);
void conn__start_reading(struct conn *c);
void conn__stop_reading(struct conn *c);

/* request.c */
extern const llhttp_settings_t conn__parser_settings;
/* Parses the buffered input, dispatching each complete request; reads on
 * when the buffer is spent and no response is in progress. */
void conn__parse_input(struct conn *c);
/* Answers a request refused while parsing (c->error, else 400), then
 * drains and closes. WHY goes to the debug log. */
void conn__refuse_request(struct conn *c, const char *why);

/* response.c */
/* A streaming request's body has nowhere to go any more (refused, its
 * source gone, or its response over): the rest stays unread, the route is
 * not called again, and the connection closes after the response. */
void conn__drop_stream(struct conn *c);
/* The pump's completion: the response is out (0) or failed. */
void conn__on_pump_done(struct pump *pump, int status);

#endif
