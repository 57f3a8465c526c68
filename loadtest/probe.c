/*
 * probe: a constant-rate HTTP latency probe for unclog's load tests.
 *
 * Requests are scheduled at fixed intervals (--rate per second) for a bounded
 * --duration, after --warmup seconds of the same, sent and not counted: a
 * new probe process's first few hundred milliseconds are slow here, whatever
 * the server (its first requests took 3-8 ms against a 15-line Python
 * server that answers the rest in 0.5). Each latency runs from the
 * request's *scheduled* send time to the last byte of its response, so time
 * spent waiting for a free connection or behind a clogged server is
 * counted, never hidden (no coordinated omission). A request goes out on an
 * idle keep-alive connection, or on a new one up to --max-conns, so one
 * stuck response does not hold back the next send.
 *
 * Only the project's own test hosts are reachable: 127.0.0.1 by default, and
 * with --host an address in 127/8 or in 192.0.2.0/24 (TEST-NET-1, never
 * routed: the addresses make loadtest-cluster gives the hosts it makes in
 * network namespaces). This is a load-test tool, not a client.
 *
 * Responses are parsed with llhttp, the server's own parser, in strict mode.
 *
 * Output: one JSON line of counts and percentiles on stdout, and the body
 * bytes that came within the schedule's --duration as mb_s (a paced download:
 * what the client got of the rate it asked for); with --csv, one
 * row per scheduled request (scheduled time, latency, outcome, status).
 * With --every S, also a JSON line every S seconds, as it goes, of the
 * requests that ended in that window (by the time they ended).
 *
 * --flood N is the other mode: N connections each GET the path (or POST /gzip)
 * again as soon as the last response has ended, as fast as the server lets
 * them, counting body bytes (a wrk -cN for machines without wrk; make demo
 * uses it there).
 *
 * --hog N holds N keep-alive connections and sends one GET on each every
 * --hog-interval seconds; a connection the server closes is opened again at
 * its next send: a client that takes connections rather than bandwidth (not
 * a connect flood). With --hog-silent it never sends, and opens a slot the
 * server closed again at once: it holds connections and asks nothing.
 *
 * For the attacks between clients: --from binds every connection to a
 * source address in 127/8 (or 192.0.2.0/24), so that the server sees
 * distinct clients (several, comma-separated: connection slot i binds to
 * the (i mod n)-th, so that one process, one CPU's worth of load, attacks
 * from many addresses);
 * --files K replaces the path's '*' with 0 .. K-1 in turn (a flood over K
 * distinct files); --close asks for a new connection per request.
 */
#include <errno.h>
#include <inttypes.h>
#include <llhttp.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#define NS_PER_MS  1000000ull
#define NS_PER_SEC 1000000000ull
#define MAX_CONNS  16384

enum mode { MODE_GET, MODE_GZIP, MODE_FLOOD, MODE_HOG };

struct options {
    enum mode mode;
    int port;
    const char *path;
    double rate;     /* requests per second */
    double duration; /* seconds of sending */
    double warmup;   /* seconds of sending at the rate before the measured ones */
    double timeout;  /* seconds from scheduled send to giving up */
    int conns;       /* connections opened up front */
    int max_conns;   /* upper bound when all are busy */
    size_t body_size;
    const char *csv;
    double every;        /* seconds between progress lines; 0: none */
    int flood;           /* MODE_FLOOD: connections */
    int hog;             /* MODE_HOG: connections held */
    double hog_interval; /* MODE_HOG: seconds between one connection's requests */
    bool hog_silent;     /* MODE_HOG: never send; reopen what closes at once */
    bool post;           /* POST /gzip (--gzip), in any mode */
    bool close;          /* Connection: close on every request */
    long files;          /* > 0: the path's '*' is 0 .. files-1 in turn */
    const char *from;    /* source address, or NULL for the kernel's choice */
    const char *host;    /* the server's address (default 127.0.0.1) */
};

enum outcome { OUTCOME_PENDING, OUTCOME_OK, OUTCOME_ERROR, OUTCOME_TIMEOUT };

struct sample {
    uint64_t latency_ns;
    uint64_t lag_ns; /* scheduled time to the write call: the probe's own delay */
    int status;      /* HTTP status, 0 when none arrived */
    enum outcome outcome;
};

/* One keep-alive connection. Owned by probe->slots[slot]; freed in conn_on_close. */
struct conn {
    uv_tcp_t tcp;
    uv_connect_t connect_req;
    uv_write_t write_req;
    llhttp_t parser; /* reset for each request */
    struct probe *probe;
    struct conn *next_idle; /* link in probe->idle while idle */
    int slot;
    bool connected;
    bool closing;
    bool idle;
    long req;           /* request in flight, -1 when none */
    int status;         /* its response's status, 0 until the head is in */
    bool complete;      /* its response has ended */
    bool close_after;   /* the server closes after it: no reuse */
    bool writing;       /* write_req is with libuv until conn_on_write */
    bool write_due;     /* a request waits for write_req to come back */
    uint64_t next_ns;   /* MODE_HOG: when its next request is due */
    uv_buf_t out;       /* what conn_write sends: the probe's request, or out_buf */
    char out_buf[1024]; /* --files: this request's own head */
};

struct probe {
    struct options opt;
    uv_loop_t *loop;
    uv_timer_t timer; /* checks timeouts every 10 ms */
    uv_async_t due;   /* woken by the clock thread at each scheduled time */
    uv_thread_t clock;
    uv_buf_t request; /* the one request every send writes; lives until exit */
    uint64_t start_ns, interval_ns, timeout_ns;
    uint64_t end_ns, stop_ns; /* a flood's end, or the schedule's; when the run stopped */
    long warm;                /* requests of the warm-up, first in the schedule, not counted */
    uint64_t measure_ns;      /* when the measured schedule starts: sched_ns(warm) */
    long total;               /* requests scheduled in all */
    long next;                /* next request to send */
    long done;                /* requests with an outcome */
    long *backlog;            /* due requests waiting for a connection, FIFO */
    long backlog_head, backlog_tail;
    struct sample *samples;
    struct conn **slots; /* opt.max_conns of them */
    uint64_t *reopen_ns; /* MODE_HOG: when each empty slot opens again */
    struct conn *idle;
    int live; /* connections not closing */
    long opened;
    bool stopping;
    uint64_t bytes;                       /* response body bytes, all run */
    uint64_t bytes_in_time;               /* of those, the ones from measure_ns to end_ns */
    long flood_ok, flood_errors, refused; /* refused: 503 answers */
    long server_closed;                   /* connections the server ended */
    long file_next;                       /* --files: the next number */
    struct sockaddr_in *from;             /* --from's addresses, nfrom of them */
    int nfrom;
    /* --every: what ended since the last progress line */
    uv_timer_t every;
    uint64_t win_start_ns, win_bytes;
    uint64_t *win; /* latencies of the requests that ended */
    long win_n, win_cap, win_ok, win_errors, win_timeouts;
};

static char read_buf[65536];

static void conn_close(struct conn *c);
static void conn_send(struct conn *c, long req);
static void pump(struct probe *p);
static void window_print(struct probe *p);

static void usage(FILE *out)
{
    fprintf(out,
            "usage: probe --port N [--get PATH | --gzip] [options]\n"
            "       probe --port N --flood CONNS [--get PATH | --gzip] [--duration S] [--every S]\n"
            "       probe --port N --hog CONNS --get PATH [--hog-interval S | --hog-silent] "
            "[--duration S]\n"
            "  --rate R         requests per second (default 200)\n"
            "  --duration S     seconds of sending (default 10)\n"
            "  --warmup S       first send S seconds at the rate, not counted (default 0)\n"
            "  --timeout S      give up on a request S seconds after its schedule (default 10)\n"
            "  --conns N        connections opened up front (default 4)\n"
            "  --max-conns N    connections at most, opened when all are busy (default 64)\n"
            "  --body-size B    POST /gzip body bytes (default 1024)\n"
            "  --csv FILE       one row per request: sched_s,latency_ms,outcome,status\n"
            "  --every S        a JSON line every S seconds: what ended in that window\n"
            "  --flood CONNS    no schedule: CONNS connections GET PATH back to back\n"
            "  --hog CONNS      hold CONNS connections, one GET on each every --hog-interval\n"
            "  --hog-interval S seconds between a held connection's requests (default 3)\n"
            "  --hog-silent     hold them without a request; reopen what closes at once\n"
            "  --host ADDR      the server's address: 127.x.y.z (default 127.0.0.1) or\n"
            "                   192.0.2.x (the test hosts of make loadtest-cluster)\n"
            "  --from ADDR      bind connections to this source address (127.x.y.z or\n"
            "                   192.0.2.x); ADDR,ADDR,...: connection i to the (i mod n)-th\n"
            "  --files K        the path's '*' becomes 0 .. K-1 in turn: K distinct files\n"
            "  --close          Connection: close on each request (a new connection each)\n");
}

static uint64_t sched_ns(const struct probe *p, long req)
{
    return p->start_ns + (uint64_t)req * p->interval_ns;
}

static void window_add(struct probe *p, enum outcome outcome, uint64_t latency_ns)
{
    p->win_ok += outcome == OUTCOME_OK;
    p->win_errors += outcome == OUTCOME_ERROR;
    p->win_timeouts += outcome == OUTCOME_TIMEOUT;
    if (p->opt.every <= 0 || p->opt.mode == MODE_FLOOD || outcome == OUTCOME_ERROR) {
        return;
    }
    if (p->win_n == p->win_cap) {
        long cap = p->win_cap ? 2 * p->win_cap : 1024;
        uint64_t *win = realloc(p->win, sizeof *win * (size_t)cap);
        if (win == NULL) {
            return; /* the line shows fewer requests; nothing worse */
        }
        p->win = win;
        p->win_cap = cap;
    }
    p->win[p->win_n++] = latency_ns;
}

static void record(struct probe *p, long req, enum outcome outcome, int status)
{
    if (p->opt.mode == MODE_FLOOD || p->opt.mode == MODE_HOG) {
        p->refused += status == 503;
        p->flood_ok += outcome == OUTCOME_OK;
        p->flood_errors += outcome != OUTCOME_OK;
        window_add(p, outcome, 0);
        return;
    }
    struct sample *s = &p->samples[req];
    if (s->outcome != OUTCOME_PENDING) {
        return;
    }
    uint64_t now = uv_hrtime();
    uint64_t due = sched_ns(p, req);
    s->latency_ns = now > due ? now - due : 0;
    s->outcome = outcome;
    s->status = status;
    p->done++;
    if (req < p->warm) {
        return; /* warming up: not counted */
    }
    p->refused += status == 503;
    window_add(p, outcome, s->latency_ns);
}

/* ---- connections ---------------------------------------------------------- */

static void idle_remove(struct probe *p, struct conn *c)
{
    for (struct conn **link = &p->idle; *link != NULL; link = &(*link)->next_idle) {
        if (*link == c) {
            *link = c->next_idle;
            break;
        }
    }
    c->idle = false;
    c->next_idle = NULL;
}

static void idle_push(struct probe *p, struct conn *c)
{
    c->idle = true;
    c->next_idle = p->idle;
    p->idle = c;
}

static void conn_on_close(uv_handle_t *handle)
{
    struct conn *c = handle->data;
    struct probe *p = c->probe;
    p->slots[c->slot] = NULL;
    if (p->opt.mode == MODE_HOG) {
        p->reopen_ns[c->slot] =
            uv_hrtime() + (p->opt.hog_silent ? 0 : (uint64_t)(p->opt.hog_interval * NS_PER_SEC));
    }
    free(c);
}

static void conn_close(struct conn *c)
{
    struct probe *p = c->probe;
    if (c->closing) {
        return;
    }
    c->closing = true;
    p->live--;
    if (c->idle) {
        idle_remove(p, c);
    }
    uv_close((uv_handle_t *)&c->tcp, conn_on_close);
}

/* The request in flight failed: count it and drop the connection. */
static void conn_fail(struct conn *c)
{
    if (c->req >= 0) {
        record(c->probe, c->req, OUTCOME_ERROR, c->status);
        c->req = -1;
    }
    conn_close(c);
}

static void conn_finish(struct conn *c)
{
    struct probe *p = c->probe;
    int ok = c->status >= 200 && c->status < 300;
    record(p, c->req, ok ? OUTCOME_OK : OUTCOME_ERROR, c->status);
    c->req = -1;
    if (c->close_after) {
        conn_close(c); /* a flood's or hog's next tick opens another */
    } else if (p->opt.mode == MODE_FLOOD) {
        conn_send(c, 0);
    } else if (p->opt.mode == MODE_HOG) {
        /* held idle until its next_ns */
    } else {
        idle_push(p, c);
    }
    pump(p);
}

static void conn_on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    /* One loop thread, and every read is consumed before the next: one buffer. */
    (void)handle;
    (void)suggested;
    buf->base = read_buf;
    buf->len = sizeof read_buf;
}

static int on_headers_complete(llhttp_t *parser)
{
    struct conn *c = parser->data;
    c->status = parser->status_code;
    c->close_after = !llhttp_should_keep_alive(parser);
    return 0;
}

/* Pauses the parser, so that what follows the response in the same read shows. */
static int on_message_complete(llhttp_t *parser)
{
    struct conn *c = parser->data;
    c->complete = true;
    return HPE_PAUSED;
}

static int on_body(llhttp_t *parser, const char *at, size_t len)
{
    struct conn *c = parser->data;
    (void)at;
    c->probe->bytes += len;
    c->probe->win_bytes += len;
    uint64_t now = uv_hrtime();
    if (now >= c->probe->measure_ns && now < c->probe->end_ns) {
        c->probe->bytes_in_time += len;
    }
    return 0;
}

static const llhttp_settings_t parser_settings = {
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/*
 * Consumes response bytes. Returns 1 when the response is complete, 0 when
 * more is needed, -1 on a malformed response or bytes beyond its end.
 */
static int feed(struct conn *c, const char *data, size_t n)
{
    llhttp_errno_t err = llhttp_execute(&c->parser, data, n);
    if (err == HPE_OK) {
        return 0;
    }
    if (err == HPE_PAUSED && c->complete) {
        return llhttp_get_error_pos(&c->parser) == data + n ? 1 : -1;
    }
    return -1;
}

static void conn_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = stream->data;
    if (c->closing) {
        return;
    }
    if (nread == UV_EOF && c->req >= 0) {
        /* A body that runs to the close ends here; anything else is cut short. */
        llhttp_finish(&c->parser);
        if (c->complete) {
            conn_finish(c);
            return;
        }
    }
    if (nread < 0) {
        c->probe->server_closed++;
        conn_fail(c);
        pump(c->probe);
        return;
    }
    if (nread == 0) {
        return;
    }
    if (c->req < 0) {
        /* bytes nobody asked for: a 503 written at accept is a refusal */
        c->probe->refused += strncmp(buf->base, "HTTP/1.1 503", 12) == 0 && nread >= 12;
        conn_close(c);
        return;
    }
    int r = feed(c, buf->base, (size_t)nread);
    if (r < 0) {
        conn_fail(c);
        pump(c->probe);
    } else if (r > 0) {
        conn_finish(c);
    }
}

static void conn_write(struct conn *c);

static void conn_on_write(uv_write_t *req, int status)
{
    struct conn *c = req->data;
    c->writing = false;
    if (c->closing) {
        return;
    }
    if (status < 0) {
        conn_fail(c);
        pump(c->probe);
    } else if (c->write_due) {
        c->write_due = false;
        conn_write(c);
    }
}

/*
 * Writes C's request. A response can end, and the next request be sent,
 * before libuv has called back for the previous write (libuv reads up to 32
 * times in one go, and a fast server answers within them): then the write
 * waits for that callback, since write_req is still libuv's.
 */
static void conn_write(struct conn *c)
{
    struct probe *p = c->probe;
    if (c->writing) {
        c->write_due = true;
        return;
    }
    uint64_t now = uv_hrtime();
    uint64_t due = sched_ns(p, c->req);
    if (p->opt.mode != MODE_FLOOD && p->opt.mode != MODE_HOG) {
        p->samples[c->req].lag_ns = now > due ? now - due : 0;
    }
    c->write_req.data = c;
    c->writing = true;
    if (uv_write(&c->write_req, (uv_stream_t *)&c->tcp, &c->out, 1, conn_on_write) < 0) {
        c->writing = false;
        conn_fail(c);
    }
}

static void conn_on_connect(uv_connect_t *req, int status)
{
    struct conn *c = req->data;
    if (c->closing) {
        return;
    }
    if (status < 0) {
        conn_fail(c);
        pump(c->probe);
        return;
    }
    c->connected = true;
    if (uv_read_start((uv_stream_t *)&c->tcp, conn_on_alloc, conn_on_read) < 0) {
        conn_fail(c);
        pump(c->probe);
        return;
    }
    if (c->req >= 0) {
        conn_write(c);
    }
}

/*
 * Binds C to --from's address. The port is left to connect
 * (IP_BIND_ADDRESS_NO_PORT), which picks it for the whole address pair: a
 * port bound first would have to be free for every peer, and the thousands
 * of sockets a hog or --close leaves in TIME_WAIT would run them out.
 */
static int bind_from(struct conn *c)
{
    uv_os_fd_t fd;
    int one = 1;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0)
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    const struct probe *p = c->probe;
    return uv_tcp_bind(&c->tcp, (const struct sockaddr *)&p->from[c->slot % p->nfrom], 0);
}

/* --from's comma-separated addresses into p->from. Returns 0, or -1 with
 * the error printed. */
static int parse_from(struct probe *p)
{
    p->nfrom = 1;
    for (const char *s = p->opt.from; *s != '\0'; s++)
        p->nfrom += *s == ',';
    p->from = calloc((size_t)p->nfrom, sizeof *p->from);
    if (p->from == NULL)
        return -1;
    const char *s = p->opt.from;
    for (int i = 0; i < p->nfrom; i++) {
        size_t len = strcspn(s, ",");
        char one[64] = "";
        if (len < sizeof one)
            memcpy(one, s, len);
        if (len >= sizeof one || uv_ip4_addr(one, 0, &p->from[i]) < 0) {
            fprintf(stderr, "probe: --from %.*s: not an IPv4 address\n", (int)len, s);
            return -1;
        }
        s += len + (s[len] == ',');
    }
    return 0;
}

/* Opens a connection in SLOT, which is free; returns NULL on error. */
static struct conn *conn_open_at(struct probe *p, int slot)
{
    struct conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
        return NULL;
    }
    c->probe = p;
    c->slot = slot;
    c->req = -1;
    if (uv_tcp_init_ex(p->loop, &c->tcp, AF_INET) < 0) {
        free(c);
        return NULL;
    }
    c->tcp.data = c;
    c->connect_req.data = c;
    p->slots[slot] = c;
    p->live++;
    p->opened++;
    uv_tcp_nodelay(&c->tcp, 1);
    struct sockaddr_in addr;
    uv_ip4_addr(p->opt.host, p->opt.port, &addr);
    if (p->opt.from != NULL && bind_from(c) < 0) {
        conn_close(c);
        return NULL;
    }
    if (uv_tcp_connect(&c->connect_req, &c->tcp, (const struct sockaddr *)&addr, conn_on_connect) <
        0) {
        conn_close(c);
        return NULL;
    }
    return c;
}

/* --files: the request's head with the path's '*' replaced by the next number. */
static void conn_build(struct conn *c)
{
    struct probe *p = c->probe;
    const char *req = p->request.base;
    const char *star = memchr(req, '*', p->request.len);
    size_t before = (size_t)(star - req);
    size_t after = p->request.len - before - 1;
    int n = snprintf(c->out_buf, sizeof c->out_buf, "%.*s%ld", (int)before, req, p->file_next);
    p->file_next = (p->file_next + 1) % p->opt.files;
    if (n < 0 || (size_t)n + after > sizeof c->out_buf) {
        c->out = p->request; /* cannot happen: parse_args bounds the path */
        return;
    }
    memcpy(c->out_buf + n, star + 1, after);
    c->out = uv_buf_init(c->out_buf, (unsigned)((size_t)n + after));
}

/* Opens a connection in a free slot; returns NULL when none is free or on error. */
static struct conn *conn_open(struct probe *p)
{
    for (int i = 0; i < p->opt.max_conns; i++) {
        if (p->slots[i] == NULL) {
            return conn_open_at(p, i);
        }
    }
    return NULL;
}

static void conn_send(struct conn *c, long req)
{
    c->out = c->probe->request;
    if (c->probe->opt.files > 0) {
        conn_build(c);
    }
    c->req = req;
    c->status = 0;
    c->complete = false;
    c->close_after = false;
    llhttp_init(&c->parser, HTTP_RESPONSE, &parser_settings);
    c->parser.data = c;
    if (c->connected) {
        conn_write(c);
    }
}

/* ---- schedule --------------------------------------------------------------- */

/* Hands due requests from the backlog to idle or new connections. */
static void pump(struct probe *p)
{
    while (p->backlog_head < p->backlog_tail && !p->stopping) {
        struct conn *c = p->idle;
        if (c != NULL) {
            idle_remove(p, c);
        } else if (p->live < p->opt.max_conns) {
            c = conn_open(p);
        }
        if (c == NULL) {
            return;
        }
        conn_send(c, p->backlog[p->backlog_head++]);
    }
}

static void expire(struct probe *p, uint64_t now)
{
    while (p->backlog_head < p->backlog_tail) {
        long req = p->backlog[p->backlog_head];
        if (now - sched_ns(p, req) < p->timeout_ns) {
            break;
        }
        record(p, req, OUTCOME_TIMEOUT, 0);
        p->backlog_head++;
    }
    for (int i = 0; i < p->opt.max_conns; i++) {
        struct conn *c = p->slots[i];
        if (c != NULL && !c->closing && c->req >= 0 && now - sched_ns(p, c->req) >= p->timeout_ns) {
            record(p, c->req, OUTCOME_TIMEOUT, c->status);
            c->req = -1;
            conn_close(c); /* its late response must not be taken for the next one's */
        }
    }
}

static void stop(struct probe *p)
{
    p->stopping = true;
    p->stop_ns = uv_hrtime();
    if (p->opt.every > 0 && p->win_ok + p->win_errors + p->win_timeouts + p->win_bytes > 0) {
        window_print(p); /* the last, partial window */
    }
    uv_timer_stop(&p->timer);
    uv_close((uv_handle_t *)&p->timer, NULL);
    uv_close((uv_handle_t *)&p->every, NULL);
    uv_close((uv_handle_t *)&p->due, NULL);
    for (int i = 0; i < p->opt.max_conns; i++) {
        if (p->slots[i] != NULL) {
            conn_close(p->slots[i]);
        }
    }
}

/* Sends what is due, gives up on what is overdue, and stops once all is done. */
static void advance(struct probe *p)
{
    if (p->stopping) {
        return;
    }
    uint64_t now = uv_hrtime();
    while (p->next < p->total && sched_ns(p, p->next) <= now) {
        p->backlog[p->backlog_tail++] = p->next++;
    }
    pump(p);
    expire(p, now);
    pump(p);
    if (p->done == p->total) {
        stop(p);
    }
}

static void probe_on_due(uv_async_t *async)
{
    advance(async->data);
}

/* A flood's tick: stops when its time is up, else opens what it lacks of its connections. */
static void flood_tick(struct probe *p)
{
    if (p->stopping) {
        return;
    }
    if (uv_hrtime() >= p->end_ns) {
        stop(p);
        return;
    }
    while (p->live < p->opt.flood) {
        struct conn *c = conn_open(p);
        if (c == NULL) {
            return; /* a slot frees when a closing connection's callback runs */
        }
        conn_send(c, 0);
    }
}

/*
 * A hog's tick: stops when its time is up, opens each empty slot whose time
 * has come (all at the start, at most 256 a tick; then one the server closed
 * at what would have been its next send), and sends on each idle connection
 * whose time has come.
 */
static void hog_tick(struct probe *p)
{
    if (p->stopping) {
        return;
    }
    uint64_t now = uv_hrtime();
    if (now >= p->end_ns) {
        stop(p);
        return;
    }
    uint64_t interval = (uint64_t)(p->opt.hog_interval * NS_PER_SEC);
    int opened = 0;
    for (int i = 0; i < p->opt.hog; i++) {
        struct conn *c = p->slots[i];
        if (c == NULL) {
            if (opened == 256 || now < p->reopen_ns[i]) {
                continue;
            }
            c = conn_open_at(p, i);
            opened++;
            if (c != NULL) {
                /* spread over the interval, so that the sends do not come in one burst */
                c->next_ns = now + interval * (uint64_t)i / (uint64_t)p->opt.hog;
            }
            continue;
        }
        if (!p->opt.hog_silent && c->connected && !c->closing && c->req < 0 && now >= c->next_ns) {
            c->next_ns = now + interval;
            conn_send(c, 0);
        }
    }
}

static void probe_on_timer(uv_timer_t *timer)
{
    struct probe *p = timer->data;
    if (p->opt.mode == MODE_FLOOD) {
        flood_tick(p);
    } else if (p->opt.mode == MODE_HOG) {
        hog_tick(p);
    } else {
        advance(p);
    }
}

static void probe_on_every(uv_timer_t *timer)
{
    window_print(timer->data);
}

/*
 * The clock thread: sleeps until each scheduled time and wakes the loop.
 * libuv timers have millisecond resolution and fire up to a millisecond
 * late; an absolute nanosleep plus uv_async_send is accurate to tens of
 * microseconds, so the probe's own lag stays out of the latencies. It
 * touches only the read-only schedule and the async handle.
 */
static void clock_run(void *arg)
{
    struct probe *p = arg;
    for (long i = 0; i < p->total; i++) {
        uint64_t due = sched_ns(p, i);
        struct timespec ts = {.tv_sec = (time_t)(due / NS_PER_SEC),
                              .tv_nsec = (long)(due % NS_PER_SEC)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
        uv_async_send(&p->due);
    }
}

/* ---- results ---------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array, in milliseconds. */
static double pct_ms(const uint64_t *v, long n, double pct)
{
    if (n == 0) {
        return 0;
    }
    long rank = (long)(pct / 100.0 * (double)n + 0.999999);
    rank = rank < 1 ? 1 : rank;
    rank = rank > n ? n : rank;
    return (double)v[rank - 1] / (double)NS_PER_MS;
}

/* --every: one JSON line of what ended since the last one; "t" is CLOCK_MONOTONIC seconds. */
static void window_print(struct probe *p)
{
    uint64_t now = uv_hrtime();
    double secs = (double)(now - p->win_start_ns) / NS_PER_SEC;
    long n = p->win_n;
    qsort(p->win, (size_t)n, sizeof *p->win, cmp_u64);
    printf("{\"t\":%.3f,\"window_s\":%.3f,\"ok\":%ld,\"errors\":%ld,\"timeouts\":%ld,"
           "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,\"bytes\":%" PRIu64 ",\"mb_s\":%.1f}\n",
           (double)now / NS_PER_SEC, secs, p->win_ok, p->win_errors, p->win_timeouts,
           pct_ms(p->win, n, 50), pct_ms(p->win, n, 99),
           n > 0 ? (double)p->win[n - 1] / NS_PER_MS : 0.0, p->win_bytes,
           secs > 0 ? (double)p->win_bytes / secs / 1e6 : 0.0);
    fflush(stdout);
    p->win_start_ns = now;
    p->win_n = p->win_ok = p->win_errors = p->win_timeouts = 0;
    p->win_bytes = 0;
}

static const char *outcome_name(enum outcome o)
{
    switch (o) {
    case OUTCOME_OK:
        return "ok";
    case OUTCOME_ERROR:
        return "error";
    case OUTCOME_TIMEOUT:
        return "timeout";
    default:
        return "unsent";
    }
}

static int write_csv(const struct probe *p)
{
    FILE *f = fopen(p->opt.csv, "w");
    if (f == NULL) {
        fprintf(stderr, "probe: open %s: %s\n", p->opt.csv, strerror(errno));
        return -1;
    }
    fprintf(f, "sched_s,latency_ms,outcome,status\n");
    for (long i = p->warm; i < p->total; i++) {
        const struct sample *s = &p->samples[i];
        fprintf(f, "%.6f,%.3f,%s,%d\n",
                (double)((uint64_t)(i - p->warm) * p->interval_ns) / NS_PER_SEC,
                (double)s->latency_ns / NS_PER_MS, outcome_name(s->outcome), s->status);
    }
    return fclose(f) == 0 ? 0 : -1;
}

/*
 * Timed-out requests count in the percentiles at the time they were given
 * up (a lower bound); leaving them out would flatter exactly the tail we
 * measure. Errors (refused, reset, non-2xx) are counted, not timed.
 */
static int report(const struct probe *p)
{
    if (p->opt.mode == MODE_FLOOD || p->opt.mode == MODE_HOG) {
        bool hog = p->opt.mode == MODE_HOG;
        double secs = (double)(p->stop_ns - p->start_ns) / NS_PER_SEC;
        printf("{\"mode\":\"%s\",\"path\":\"%s\",\"conns\":%d,\"duration\":%.3f,"
               "\"requests\":%ld,\"errors\":%ld,\"refused\":%ld,\"conns_opened\":%ld,"
               "\"server_closed\":%ld,\"req_s\":%.1f,\"bytes\":%" PRIu64 ",\"mb_s\":%.1f}\n",
               hog ? "hog" : "flood", p->opt.path, hog ? p->opt.hog : p->opt.flood, secs,
               p->flood_ok, p->flood_errors, p->refused, p->opened, p->server_closed,
               secs > 0 ? (double)p->flood_ok / secs : 0.0, p->bytes,
               secs > 0 ? (double)p->bytes / secs / 1e6 : 0.0);
        return 0;
    }
    uint64_t *lat = malloc(sizeof *lat * (size_t)(p->total + 1));
    if (lat == NULL) {
        return -1;
    }
    long n = 0, ok = 0, errors = 0, timeouts = 0;
    double sum = 0, lag_sum = 0, lag_max = 0;
    for (long i = p->warm; i < p->total; i++) {
        const struct sample *s = &p->samples[i];
        ok += s->outcome == OUTCOME_OK;
        errors += s->outcome == OUTCOME_ERROR || s->outcome == OUTCOME_PENDING;
        timeouts += s->outcome == OUTCOME_TIMEOUT;
        if (s->outcome == OUTCOME_OK || s->outcome == OUTCOME_TIMEOUT) {
            double lag = (double)s->lag_ns / NS_PER_MS;
            lat[n++] = s->latency_ns;
            sum += (double)s->latency_ns / NS_PER_MS;
            lag_sum += lag;
            lag_max = lag > lag_max ? lag : lag_max;
        }
    }
    qsort(lat, (size_t)n, sizeof *lat, cmp_u64);
    printf("{\"mode\":\"%s\",\"path\":\"%s\",\"rate\":%g,\"duration\":%g,"
           "\"scheduled\":%ld,\"ok\":%ld,\"errors\":%ld,\"timeouts\":%ld,\"refused\":%ld,"
           "\"conns_opened\":%ld,"
           "\"mean_ms\":%.3f,\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"p999_ms\":%.3f,"
           "\"max_ms\":%.3f,\"send_lag_mean_ms\":%.3f,\"send_lag_max_ms\":%.3f,"
           "\"start_s\":%.6f,\"bytes_in_time\":%" PRIu64 ",\"mb_s\":%.1f}\n",
           p->opt.mode == MODE_GZIP ? "gzip" : "get", p->opt.path, p->opt.rate, p->opt.duration,
           p->total - p->warm, ok, errors, timeouts, p->refused, p->opened,
           n > 0 ? sum / (double)n : 0.0, pct_ms(lat, n, 50), pct_ms(lat, n, 90),
           pct_ms(lat, n, 99), pct_ms(lat, n, 99.9), n > 0 ? (double)lat[n - 1] / NS_PER_MS : 0.0,
           n > 0 ? lag_sum / (double)n : 0.0, lag_max, (double)p->measure_ns / NS_PER_SEC,
           p->bytes_in_time, (double)p->bytes_in_time / p->opt.duration / 1e6);
    free(lat);
    if (p->opt.csv != NULL) {
        return write_csv(p);
    }
    return 0;
}

/* ---- setup -------------------------------------------------------------------- */

/* A 1 KiB-ish body of words, so deflate has something realistic to chew on. */
static char *make_body(size_t size)
{
    static const char *const words[] = {"static", "file", "server", "thread", "pool", "fair",
                                        "clog",   "read", "chunk",  "libuv",  "gzip", "the"};
    char *body = malloc(size + 1);
    if (body == NULL) {
        return NULL;
    }
    uint32_t x = 2463534242u;
    size_t at = 0;
    while (at < size) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        const char *w = words[x % (sizeof words / sizeof words[0])];
        for (size_t i = 0; w[i] != '\0' && at < size; i++) {
            body[at++] = w[i];
        }
        if (at < size) {
            body[at++] = (x >> 8) % 7 == 0 ? '\n' : ' ';
        }
    }
    return body;
}

static int build_request(struct probe *p)
{
    const struct options *o = &p->opt;
    size_t cap = 512 + strlen(o->path) + o->body_size;
    char *req = malloc(cap);
    if (req == NULL) {
        return -1;
    }
    int len;
    const char *conn = o->close ? "Connection: close\r\n" : "";
    if (!o->post) {
        len = snprintf(req, cap,
                       "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: unclog-probe\r\n%s\r\n",
                       o->path, conn);
    } else {
        len = snprintf(req, cap,
                       "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: unclog-probe\r\n%s"
                       "Content-Type: text/plain\r\nContent-Length: %zu\r\n\r\n",
                       o->path, conn, o->body_size);
        char *body = make_body(o->body_size);
        if (body == NULL) {
            free(req);
            return -1;
        }
        memcpy(req + len, body, o->body_size);
        len += (int)o->body_size;
        free(body);
    }
    p->request = uv_buf_init(req, (unsigned)len);
    return 0;
}

static bool parse_number(const char *s, double min, double max, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
        return false;
    }
    *out = v;
    return true;
}

/* Whether ADDR is one of the test hosts the probe may reach or bind: 127/8, 192.0.2.0/24. */
static bool test_host(const char *addr)
{
    return strncmp(addr, "127.", 4) == 0 || strncmp(addr, "192.0.2.", 8) == 0;
}

static int parse_args(int argc, char **argv, struct options *o)
{
    *o = (struct options){.mode = MODE_GET,
                          .path = "/",
                          .host = "127.0.0.1",
                          .rate = 200,
                          .duration = 10,
                          .timeout = 10,
                          .conns = 4,
                          .max_conns = 64,
                          .body_size = 1024,
                          .hog_interval = 3};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        double x;
        bool takes_value = true;
        bool ok = true;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--gzip") == 0) {
            o->mode = MODE_GZIP;
            o->path = "/gzip";
            o->post = true;
            takes_value = false;
        } else if (strcmp(a, "--close") == 0) {
            o->close = true;
            takes_value = false;
        } else if (strcmp(a, "--hog-silent") == 0) {
            o->hog_silent = true;
            takes_value = false;
        } else if (v == NULL) {
            ok = false;
        } else if (strcmp(a, "--get") == 0) {
            o->mode = MODE_GET;
            o->path = v;
            ok = v[0] == '/';
        } else if (strcmp(a, "--port") == 0 && (ok = parse_number(v, 1, 65535, &x))) {
            o->port = (int)x;
        } else if (strcmp(a, "--rate") == 0 && (ok = parse_number(v, 0.1, 100000, &x))) {
            o->rate = x;
        } else if (strcmp(a, "--duration") == 0 && (ok = parse_number(v, 0.01, 86400, &x))) {
            o->duration = x;
        } else if (strcmp(a, "--warmup") == 0 && (ok = parse_number(v, 0, 60, &x))) {
            o->warmup = x;
        } else if (strcmp(a, "--timeout") == 0 && (ok = parse_number(v, 0.01, 600, &x))) {
            o->timeout = x;
        } else if (strcmp(a, "--conns") == 0 && (ok = parse_number(v, 1, MAX_CONNS, &x))) {
            o->conns = (int)x;
        } else if (strcmp(a, "--max-conns") == 0 && (ok = parse_number(v, 1, MAX_CONNS, &x))) {
            o->max_conns = (int)x;
        } else if (strcmp(a, "--body-size") == 0 && (ok = parse_number(v, 0, 1 << 26, &x))) {
            o->body_size = (size_t)x;
        } else if (strcmp(a, "--csv") == 0) {
            o->csv = v;
        } else if (strcmp(a, "--every") == 0 && (ok = parse_number(v, 0.01, 3600, &x))) {
            o->every = x;
        } else if (strcmp(a, "--flood") == 0 && (ok = parse_number(v, 1, MAX_CONNS, &x))) {
            o->flood = (int)x;
        } else if (strcmp(a, "--hog") == 0 && (ok = parse_number(v, 1, MAX_CONNS, &x))) {
            o->hog = (int)x;
        } else if (strcmp(a, "--hog-interval") == 0 && (ok = parse_number(v, 0.01, 3600, &x))) {
            o->hog_interval = x;
        } else if (strcmp(a, "--files") == 0 && (ok = parse_number(v, 1, 1e9, &x))) {
            o->files = (long)x;
        } else if (strcmp(a, "--from") == 0) {
            o->from = v;
            ok = test_host(v);
        } else if (strcmp(a, "--host") == 0) {
            o->host = v;
            ok = test_host(v);
        } else {
            ok = false;
        }
        if (!ok) {
            fprintf(stderr, "probe: bad argument: %s%s%s\n", a, v != NULL ? " " : "",
                    v != NULL && takes_value ? v : "");
            return -1;
        }
        i += takes_value;
    }
    if (o->port == 0) {
        fprintf(stderr, "probe: --port is required\n");
        return -1;
    }
    if (o->files > 0 && (strchr(o->path, '*') == NULL || strlen(o->path) > 512)) {
        fprintf(stderr, "probe: --files needs a path with one '*' (at most 512 bytes)\n");
        return -1;
    }
    if (o->flood > 0 && o->hog > 0) {
        fprintf(stderr, "probe: --flood or --hog, not both\n");
        return -1;
    }
    if (o->flood > 0 || o->hog > 0) {
        if (o->mode == MODE_GET && strcmp(o->path, "/") == 0) {
            fprintf(stderr, "probe: --flood and --hog need --get PATH (or --gzip for a flood)\n");
            return -1;
        }
        if (o->hog > 0 && o->post) {
            fprintf(stderr, "probe: --hog sends GETs\n");
            return -1;
        }
        o->mode = o->hog > 0 ? MODE_HOG : MODE_FLOOD;
        o->max_conns = o->hog > 0 ? o->hog : o->flood; /* the slots its connections take */
        o->conns = 0;                                  /* opened by its first tick */
    }
    if (o->conns > o->max_conns) {
        o->conns = o->max_conns;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static struct probe probe;
    struct probe *p = &probe;
    if (parse_args(argc, argv, &p->opt) < 0) {
        usage(stderr);
        return 2;
    }
    /* A server closing mid-write must surface as EPIPE, not kill the probe. */
    signal(SIGPIPE, SIG_IGN);
    p->loop = uv_default_loop();
    struct sockaddr_in host;
    if (uv_ip4_addr(p->opt.host, 0, &host) < 0) {
        fprintf(stderr, "probe: --host %s: not an IPv4 address\n", p->opt.host);
        return 2;
    }
    if (p->opt.from != NULL && parse_from(p) < 0)
        return 2;
    bool flood = p->opt.mode == MODE_FLOOD || p->opt.mode == MODE_HOG;
    p->total = flood ? 1 : (long)(p->opt.rate * p->opt.duration);
    p->total = p->total < 1 ? 1 : p->total;
    p->warm = flood ? 0 : (long)(p->opt.rate * p->opt.warmup);
    p->total += p->warm;
    p->interval_ns = (uint64_t)((double)NS_PER_SEC / p->opt.rate);
    p->timeout_ns = (uint64_t)(p->opt.timeout * NS_PER_SEC);
    p->samples = calloc((size_t)p->total, sizeof *p->samples);
    p->backlog = calloc((size_t)p->total, sizeof *p->backlog);
    p->slots = calloc((size_t)p->opt.max_conns, sizeof *p->slots);
    p->reopen_ns = calloc((size_t)p->opt.max_conns, sizeof *p->reopen_ns);
    if (p->samples == NULL || p->backlog == NULL || p->slots == NULL || p->reopen_ns == NULL ||
        build_request(p) < 0) {
        fprintf(stderr, "probe: out of memory\n");
        return 1;
    }
    for (int i = 0; i < p->opt.conns; i++) {
        struct conn *c = conn_open(p);
        if (c != NULL) {
            idle_push(p, c);
        }
    }
    /* Give the first connections a moment to be established before the clock starts. */
    p->start_ns = uv_hrtime() + (flood ? 0 : 50 * NS_PER_MS);
    p->measure_ns = sched_ns(p, p->warm);
    p->end_ns = p->measure_ns + (uint64_t)(p->opt.duration * NS_PER_SEC);
    if (uv_timer_init(p->loop, &p->timer) < 0 || uv_timer_init(p->loop, &p->every) < 0 ||
        uv_async_init(p->loop, &p->due, probe_on_due) < 0) {
        fprintf(stderr, "probe: loop setup failed\n");
        return 1;
    }
    p->timer.data = p;
    p->every.data = p;
    p->due.data = p;
    uv_timer_start(&p->timer, probe_on_timer, 10, 10);
    if (p->opt.every > 0) {
        uint64_t ms = (uint64_t)(p->opt.every * 1000);
        p->win_start_ns = uv_hrtime();
        uv_timer_start(&p->every, probe_on_every, ms, ms);
    }
    if (p->opt.mode == MODE_FLOOD) {
        flood_tick(p);
    } else if (p->opt.mode == MODE_HOG) {
        hog_tick(p);
    } else if (uv_thread_create(&p->clock, clock_run, p) < 0) {
        fprintf(stderr, "probe: cannot start the clock thread\n");
        return 1;
    }
    uv_run(p->loop, UV_RUN_DEFAULT);
    if (!flood) {
        uv_thread_join(&p->clock);
    }
    int rc = report(p);
    free(p->samples);
    free(p->backlog);
    free(p->slots);
    free(p->from);
    free(p->reopen_ns);
    free(p->win);
    free(p->request.base);
    if (uv_loop_close(p->loop) != 0) {
        fprintf(stderr, "probe: loop not closed cleanly\n");
        rc = -1;
    }
    return rc == 0 ? 0 : 1;
}
