#ifndef UNCLOG_CONN_INTERNAL_H
#define UNCLOG_CONN_INTERNAL_H

/* The inside of a connection, shared by the files that make it. They
 * stand in layers: a file calls the files below it, never one above, so
 * each reads without the files that use it (tests/integration/51_calls.t
 * finds no call circle among them). From the bottom:
 *
 *   conn.c      the core: the states and the one move between them
 *               (conn__enter), the timer armed and reading set for each,
 *               the close and the free, the end of a response
 *   request.c   llhttp's callbacks: what a request says and whether it may
 *   response.c  the response head; nothing is sent
 *   admit.c     who a connection serves, and the 503 at max_connections
 *   send.c      a response's writes, and the pump's completion
 *   proxy.c     a balancer's PROXY header, and one a client may not send
 *   parse.c     the parse loop: llhttp run, the state moved, dispatch,
 *               refusals
 *   input.c     a read, and when its input is parsed: the turns
 *   timer.c     the timer's expiry: the timeouts
 *   accept.c    a socket becomes a connection
 *
 * request.c and response.c record, and the others act. What the core
 * needs from above (the handlers of a read, of the timer's expiry and of
 * the input that waits after a response) it reaches through c->on
 * (struct conn_events), which accept.c wires. No other file includes this
 * one. */

#include <llhttp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "server/base/config.h"
#include "server/base/log.h"
#include "server/base/util.h"
#include "server/http/clients.h"
#include "server/http/conns.h"
#include "server/http/turns.h"
#include "server/http/http.h"
#include "server/http/proxy_header.h"
#include "server/http/writer.h"
#include "server/http/rate_meter.h"
#include "server/pool/pump.h"
#include "server/http/strict.h"

/* Buffers. The limits on what a client may send (URL, header block, header
 * count, body) and the timeouts are in the configuration. */
#define IN_SIZE    (16 * 1024) /* one socket read */
#define VALUES_MAX (8 * 1024)  /* bytes of the headers we keep */
#define HEAD_MAX   2048        /* our response head */
/* After an error answer, how long input is drained before the close. */
#define LINGER_MS 2000
/* A connection that has waited this part of header_timeout for a request
 * head (silent, or sending it slowly) is one of the first that may close
 * for another client's newcomer at max_connections (clients.h). */
#define CONN_LATE_PART 10
/* The first bytes of a connection kept to tell whether they began a PROXY
 * header (its fixed part, in either version). */
#define PROXY_SNIFF 16

/* What a connection is doing: one state, changed only by conn.c's conn__enter(),
 * which arms the state's timer and starts or stops reading to match.
 *
 *  state        timer (on expiry)                     reads   may go to
 *  NEW          header_timeout from the accept (close) yes     HEAD SEND* CLOSING
 *  IDLE         keepalive_timeout (close)              yes     HEAD SEND* CLOSING
 *  HEAD         header_timeout (408)                   yes     BODY SEND STREAM_SHUT CLOSING
 *  BODY         body_timeout of silence (408)          yes     SEND CLOSING
 *  STREAM_OPEN  body_timeout of silence (408 or reset) yes     STREAM_SHUT SEND REFUSING CLOSING
 *  STREAM_SHUT  send_timeout without progress (reset)  no      STREAM_OPEN SEND REFUSING CLOSING
 *  SEND         send_timeout without progress (reset)  no      IDLE LINGER CLOSING
 *  REFUSING     send_timeout without progress (reset)  no      SEND CLOSING
 *  LINGER       LINGER_MS (close)                      drops   CLOSING
 *  CLOSING      none (the timer is closing)            no      CLOSED
 *  CLOSED       none                                   no      (freed)
 *
 * NEW -> HEAD keeps the accept's deadline: a connection's first head is due
 * header_timeout after the accept, a later one after its first byte. NEW's
 * and HEAD's timer also wakes once a tenth of the way (CONN_LATE_PART): from
 * then on the head is late, and the connection idle to its client's count
 * (as IDLE is) while nothing waits unparsed in its buffer.
 * BODY's and STREAM_OPEN's deadline is also never later than body_max_time
 * from the end of the head. From BODY to REFUSING the bytes moved are
 * measured (min_rate), the timer waking at each window's end to look.
 * SEND*: a refusal of input that never made a request head.
 * "reads" holds only while no input waits unparsed in the buffer.
 * The order counts: the states up to STREAM_OPEN take input, STREAM_OPEN to
 * REFUSING answer a request (a stop lets them finish), CLOSING on are done. */
enum conn_state {
    CONN_NEW,         /* accepted; no byte of a request yet */
    CONN_IDLE,        /* keep-alive: a response is done, no byte of the next request yet */
    CONN_HEAD,        /* a request head is arriving */
    CONN_BODY,        /* a request body is arriving; the route answers once it is in */
    CONN_STREAM_OPEN, /* a streaming route answers while its body arrives; window open */
    CONN_STREAM_SHUT, /* the same with the window shut: waiting on the pool or the client */
    CONN_SEND,        /* the request is in (or dropped): the client takes the response */
    CONN_REFUSING,    /* a streamed body went bad: its response stops, the refusal follows */
    CONN_LINGER,      /* half-closed after the last response: input is drained, then close */
    CONN_CLOSING,     /* both handles are closing */
    CONN_CLOSED,      /* both are closed: freed once the pump is idle and nothing holds it */
    CONN_STATES
};

/* How far llhttp has got in the current request: request.c's callbacks
 * record it, and parse.c brings the state up to it after llhttp_execute. */
enum parsed { PARSED_NONE, PARSED_BEGUN, PARSED_HEAD, PARSED_ALL };

/* Request fields llhttp leaves unchecked; reset for every request. */
struct framing {
    enum { FIELD_OTHER, FIELD_HOST, FIELD_TE, FIELD_CONNECTION } field; /* the field being read */
    unsigned hosts, tes; /* Host, Transfer-Encoding lines */
    size_t host_len, te_len;
    char te[24]; /* the Transfer-Encoding value, when it fits */
    bool te_long;
    struct strict_close close; /* Connection: close */
    bool trailers;             /* the head is done: fields now are trailers */
    uint64_t body_len;         /* decoded body bytes so far */
    uint64_t body_max;         /* the route's limit on them, as the head came */
    const char *body_key;      /* the key that sets it: max_body or the route's */
    bool over_max;             /* refused with 413 for going over body_max */
    struct strict_chunk chunk; /* where llhttp is in a chunk-size line */
    bool last_chunk;           /* the chunk of size 0 has begun: no chunk-size line follows */
    size_t ext_len;            /* chunk-extension bytes so far */
};

/* The most of conn_send_body's copy a connection keeps between responses. */
#define CONN_BODY_KEEP ((size_t)4 << 10)

/* What the core (conn.c) calls above itself: the handlers of a
 * connection's events, wired by accept.c at the accept. */

struct conn_events {
    uv_read_cb read;                /* input.c: a read came */
    uv_timer_cb timer;              /* timer.c: the timer fired */
    void (*resume)(struct conn *c); /* input.c: parse the input that waits, at its turn */
};

/* A connection: owned by its server's list (conn_env.conns); frees itself
 * once its two handles are closed, its pump idle and no handler holds it. */
struct conn {
    uv_tcp_t tcp;     /* closed exactly once, by conn.c's conn__close, with the timer */
    uv_timer_t timer; /* fires at the state's deadline, or for a resume that is due */
    uint64_t wake_at; /* when the timer is wanted (loop ms); it may be set earlier */
    unsigned handles; /* of those two, not closed yet */
    struct conn_env *env;
    const struct conn_events *on; /* set at the accept */
    struct conn *next, **pprev;   /* pprev is NULL until conn_accept has served it */
    enum conn_state state;
    llhttp_t parser;
    const struct route *route;
    struct request req;

    /* request being parsed */
    enum parsed parsed;
    size_t url_len;
    size_t url_max; /* url[]'s size less the NUL: max_url when the connection came */
    char field[32];
    size_t field_len;
    int header; /* enum header being collected, or -1 */
    size_t values_len;
    size_t value_start; /* where values[] holds the value being collected */
    size_t header_bytes;
    unsigned header_count;
    int error;          /* status for a request refused while parsing */
    int deferred;       /* status to answer once a bodiless request is complete */
    size_t body_window; /* CONN_STREAM_*: body bytes the route takes now */
    struct framing framing;
    struct strict_lines lines; /* line discipline, across the connection's requests */
    const char *scanned;       /* framing bytes of the buffer in llhttp are checked up to here */

    /* timeouts */
    uint64_t started_ns; /* uv_hrtime() at the request's first byte: where its latency starts */
    uint64_t deadline;   /* uv_now() at which the state times out */
    size_t sent_queue;   /* sending: the socket's queue and the writer's count when last seen */
    unsigned long long sent_pumped;
    uv_shutdown_t shutdown_req;

    /* unparsed input (pipelined requests wait here while we answer one) */
    size_t in_off, in_len;
    /* Not state: whether libuv reads now (it refuses a second start), which
     * follows the state and whether in[] is spent. */
    bool reading;
    /* Not state: a window opened on buffered input inside a pump callback,
     * where llhttp cannot be re-entered; the timer resumes parsing at once. */
    bool resume_due;
    /* Not state: inside dispatch, whose answer may go out whole at once
     * (uv_try_write): reading stops only once it did not (follow_input),
     * and written_now says it did: finish runs when dispatch returns. */
    bool answering, written_now;
    /* NEW, HEAD: the request head is late (CONN_LATE_PART), so the
     * connection may give way to another client's newcomer as an idle one. */
    bool head_late;
    /* BODY to REFUSING: the bytes of the body and the response moved, in
     * windows (min_rate), and the writer's count when last added. */
    struct rate_meter meter;
    unsigned long long rate_pumped;
    uint64_t body_end; /* uv_now() by which the body must be in (body_max_time) */

    /* response */
    struct buf head_out; /* over head[] */
    int status;
    /* Not state: how this response ends (keep-alive or close), decided as it
     * is built, whatever the state it is built in. */
    bool keep_alive;
    char *body; /* copy sent by conn_send_body; owned, reused up to CONN_BODY_KEEP */
    size_t body_cap;
    unsigned long long bytes;
    uv_write_t continue_req;
    struct writer writer; /* every write of a response; its pump streams bodies */

    void *handler_state; /* the handler's per-request state, freed with state_free */
    void (*state_free)(void *);
    unsigned holds;
    char peer[64];
    bool loopback;           /* the peer is this machine */
    bool admin;              /* came through the admin door (conn_accept_admin) */
    struct addr_prefix addr; /* the peer's whole address (family 0: not an IP peer) */
    uint64_t client_id; /* the client: the peer's address under client_prefix, hashed (client_of) */
    struct client_link client; /* its place in env->clients: counted, and listed while IDLE */
    /* Not state: queued in env->turns while its input waits for its client's turn. */
    struct fairq_node turn;
    /* The PROXY protocol. From a peer under proxy_protocol_from
     * (proxy_peer), input goes to proxy_in[] until its header is whole
     * (while proxy_wait); then, or from any other peer, proxy_in[] keeps
     * the first bytes of the client's first request (PROXY_SNIFF), to tell
     * a PROXY header it was not entitled to send. */
    bool proxy_peer, proxy_wait;
    /* Came from a balancer while max_connections were open: admitted as a
     * connection of its client once the header names it (conn_accept). */
    bool at_limit;
    bool first_done; /* the connection's first request was dispatched */
    /* Its first request failed while its first bytes still began as a PROXY
     * header: it reads on until they are one or are not (conn__sniff_verdict),
     * and is then refused for WHY (sniff_why), or closed. */
    bool sniff_wait;
    const char *sniff_why;
    size_t proxy_len;

    /* The big buffers come last: conn_accept zeroes everything before them. */
    char values[VALUES_MAX];
    uint8_t proxy_in[PROXY_HEADER_MAX];
    char in[IN_SIZE];
    char head[HEAD_MAX];
    char url[]; /* cfg->max_url + 1 bytes, allocated with the connection */
};

/* The configuration the connection's server runs now. */
static inline const struct config *conn__cfg(const struct conn *c)
{
    return *c->env->cfg;
}

/* Whether C waits for (the rest of) a request head. */
static inline bool conn__awaits_head(const struct conn *c)
{
    return c->state == CONN_NEW || c->state == CONN_HEAD;
}

/* Whether C's state moves a body or a response, measured against min_rate. */
static inline bool conn__rated(const struct conn *c)
{
    return c->state >= CONN_BODY && c->state <= CONN_REFUSING;
}

/* Whether a streaming route takes C's body now (its window open or shut). */
static inline bool conn__streaming(const struct conn *c)
{
    return c->state == CONN_STREAM_OPEN || c->state == CONN_STREAM_SHUT;
}

/* Whether C's state takes input: a request, or a streamed body. */
static inline bool conn__parsing(const struct conn *c)
{
    return c->state <= CONN_STREAM_OPEN;
}

/* Whether the client, not the request, is what the state waits on. */
static inline bool conn__sending(const struct conn *c)
{
    return c->state == CONN_SEND || c->state == CONN_STREAM_SHUT || c->state == CONN_REFUSING;
}

/* conn.c: the core. */
/* The one place the state changes: checks the move against the table, arms
 * the new state's timer and reads or not to match. */
void conn__enter(struct conn *c, enum conn_state state);
/* Starts or stops reading to match the state and the buffer, and places C
 * among its client's connections. */
void conn__follow_input(struct conn *c);
/* Arms the timer for the state C has just entered from FROM. */
void conn__arm_state(struct conn *c, enum conn_state from);
/* Wakes C's timer in DELAY_MS (or sooner, if it is set so already). */
void conn__arm_timer(struct conn *c, uint64_t delay_ms);
/* A body's deadline at NOW: body_timeout of silence, within body_max_time
 * of its start. */
uint64_t conn__body_deadline(const struct conn *c, uint64_t now);
/* Puts C in its class among its client's connections. */
void conn__place(struct conn *c);
/* While sending, how often the timer looks whether the client took bytes. */
unsigned conn__send_check_ms(const struct conn *c);
/* How long until C's meter starts its next window, when its progress is
 * measured; else MS. */
uint64_t conn__rate_check(const struct conn *c, uint64_t ms);
/* Closes both handles; RESET closes with SO_LINGER 0 (an RST). */
void conn__close(struct conn *c, bool reset);
/* Frees C once its handles are closed, its pump idle and nothing holds it. */
void conn__maybe_free(struct conn *c);
/* A streaming request's body has nowhere to go any more: the rest stays
 * unread, and the connection closes after the response. */
void conn__drop_stream(struct conn *c);
/* The response has been handed to the socket in full; PARSE_NEXT: parse
 * what input waits (c->on->resume; else the caller's parse loop goes on). */
void conn__finish(struct conn *c, bool parse_next);

/* request.c: llhttp's callbacks record the request in C (parsed, req,
 * route, error, deferred) and hand a streaming route its body; they change
 * no state. */
/* Readies C's parser (llhttp in its strict mode) with these callbacks. */
void conn__parser_init(struct conn *c);
/* Whether C's request goes to a streaming route, answered at its head. */
bool conn__streams(const struct conn *c);
/* Keeps chunk extensions from llhttp (strict.h): of the LEN bytes at P, the
 * next input, either llhttp takes the first *LEN (lowered), or the first
 * *SKIP are extensions, checked, to drop. Returns 0, or -1 when the request
 * is refused (c->error). */
int conn__chunk_split(struct conn *c, const char *p, size_t *len, size_t *skip);

/* response.c: heads in the connection's buffer; nothing is sent. */
/* Adds Connection and the blank line. Returns false if the head overflowed. */
bool conn__head_finish(struct conn *c);
/* Builds the head of an error response for STATUS (>= 400, with Allow for
 * 405) and its body in BODY (CAP bytes). Returns the body's length. */
size_t conn__error_head(struct conn *c, int status, const char *allow, char *body, size_t cap);
/* Adds the framing of a body of LEN bytes (< 0: unknown) and says whether
 * it is chunked; an unknown length on HTTP/1.0 ends the connection. */
bool conn__body_framing(struct conn *c, long long len);

/* admit.c: who a connection serves, and the 503 at max_connections. */
/* Names C's client SA, for everything that tells clients apart, and its
 * place among the clients (*CLIENT). */
void conn__name_client(struct conn *c, const struct sockaddr *sa, struct addr_prefix *client);
/* C's peer as a client, in *CLIENT; C's names are left as they are. */
void conn__peer_client(struct conn *c, struct addr_prefix *client);
/* C came at max_connections and its client, CLIENT, is refused (WHY): the
 * 503 a direct connection of that client gets, and the close. */
void conn__refuse_at_limit(struct conn *c, const struct addr_prefix *client,
                           enum clients_refusal why);

/* send.c: a response's writes. */
/* What the connection's writer tells it (send.c). */
extern const struct writer_ops conn__writer_ops;

/* proxy.c: the PROXY protocol's intake. */
/* C's peer is a load balancer and its header is not whole yet: takes what
 * in[] holds of it. Returns whether the rest of in[] is to be parsed as
 * HTTP. */
bool conn__take_proxy_header(struct conn *c);
/* Keeps the first bytes of C's first request, to tell a PROXY header its
 * client sends unentitled. */
void conn__sniff_first(struct conn *c);
/* Whether C's failed first request began as a PROXY header: 1 it did (it
 * is closed, unanswered), -1 it did not (it is answered), 0 not known yet
 * (more of its first PROXY_SNIFF bytes are wanted). */
int conn__sniff_verdict(const struct conn *c);
/* Closes C, whose client sent a PROXY header of its own, or began one and
 * sent no more: unanswered, counted under refused.unlisted. */
void conn__close_unlisted(struct conn *c);

/* parse.c: the parse loop. */
/* Parses the buffered input as far as the state lets it; true when a
 * request was answered at once and more input waits. Only through
 * conn__resume, which keeps the turns. */
bool conn__parse(struct conn *c);
/* Input that is no request (WHY, for the debug log): refused, or closed
 * when it began a PROXY header C's client may not send. */
void conn__refuse_input(struct conn *c, const char *why);
/* A request that failed to parse (WHY, for the debug log), was refused or
 * timed out: answers it, then drains and closes. */
void conn__refuse(struct conn *c, const char *why);

/* input.c: a read, and its client's turn. */
/* A read of C's socket came (libuv's read callback). */
void conn__on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);
/* Input to parse: now if its client has time left in this turn, else at a
 * later turn. */
void conn__resume(struct conn *c);

/* timer.c: the timer's expiry. */
/* C's timer fired (libuv's timer callback). */
void conn__on_timer(uv_timer_t *timer);

#endif
