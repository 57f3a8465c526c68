/* The deflate sources: gzip on the pool, a piece of input per job, for a
 * request body as it arrives (POST /gzip, handlers/gzip.c) and for a file
 * compressed on the fly (the files handler); and whether a client takes
 * gzip at all. */
#include "handlers/deflate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <zlib.h>

#include "server/base/util.h"
#include "server/pool/gateway.h"
#include "server/pool/source.h"
#include "server/pool/zstates.h"

/* zlib's window and hash sizes (windowBits 9..15, memLevel 1..9): the
 * defaults for input of unknown or large size; an input known to be small
 * gets a window no larger than itself (which loses nothing: a match can
 * never reach further back than the input's start) and a hash to match. */
/* Input bytes per deflate call (deflate_fill): small enough that a job
 * reaches gateway_give_way's check often, large enough that the call's own
 * cost stays small beside the deflating. Also the first size of a body's
 * input buffer (grow_input). */
#define GZIP_STEP       4096u
#define WINDOW_BITS_MAX 15
#define WINDOW_BITS_MIN 9
#define MEM_LEVEL_MAX   8

/* Deflates its input on the pool, one piece of input per job: a request
 * body as it arrives, in slices of gzip_partition (base.slice), or a file,
 * in the pieces the pump cuts it in (as for any file read). Owns the input
 * buffer and the file, and holds a zlib state (server/pool/zstates.h) from
 * its first ready with input to its release: one an earlier stream gave
 * back, else one its first job allocates (so that a response waiting for
 * the budget holds none of it). The budget is charged for the state either
 * way (zstate_memory): a file's as it starts, a body's as below. A body reserves
 * late: its input buffer grows with what arrives, zlib's state is
 * reserved once a slice is there to deflate (or the body has ended), and
 * the pump's slot as the first job starts, so that a slow upload holds no
 * more than the bytes it has sent until then. */
struct deflate_source {
    struct pump_source base;
    struct zstate *zs; /* taken on the loop, given back by release */
    bool z_held;       /* the budget holds the state's memory (a body's) */
    struct zparams params;
    char *in;        /* the input: allocated once the budget has it */
    size_t in_cap;   /* the largest piece */
    size_t in_size;  /* a body's: bytes of IN allocated (and held), up to in_cap */
    bool no_memory;  /* an allocation failed: the next job fails */
    bool last_slice; /* the input zlib has is the last */
    /* A request body, on the loop thread only: what has arrived and how far
     * the slices handed to jobs reach. A job runs with the window shut, so
     * nothing arrives under it. */
    struct conn *conn;                   /* NULL for a file */
    size_t (*partition)(struct conn *c); /* the body's slice now (a live key) */
    size_t in_len, in_pos;
    uint64_t body_len, body_max;
    uint64_t body_left; /* announced by Content-Length and not arrived yet */
    bool chunked, body_done;
    /* The slice the next job deflates, handed over by deflate_ready while
     * no job runs: all a job reads of the body. The job takes it (clears
     * slice_handed); until then no other is handed. */
    size_t slice_at, slice_len;
    bool slice_last, slice_handed;
    /* a file */
    int fd; /* until its last read, else -1 */
    uint64_t file_left, file_offset;
};

/* Worker thread: puts the next input in front of zlib: the body's slice
 * that deflate_ready handed over, or the next PIECE bytes of the file.
 * Returns 0 or -errno. */
static int next_slice(struct deflate_source *d, size_t piece)
{
    z_stream *z = &d->zs->z;
    if (d->conn != NULL) {
        /* An empty body has no bytes, and NULL + 0 is undefined behaviour. */
        z->next_in = d->slice_len ? (Bytef *)d->in + d->slice_at : Z_NULL;
        z->avail_in = (uInt)d->slice_len;
        d->last_slice = d->slice_last;
        d->slice_handed = false;
        return 0;
    }
    size_t got = d->file_left < piece ? (size_t)d->file_left : piece;
    int rc = pump_pread_all(d->fd, d->in, got, d->file_offset);
    if (rc < 0)
        return rc;
    d->file_offset += got;
    d->file_left -= got;
    z->next_in = (Bytef *)d->in;
    z->avail_in = (uInt)got;
    d->last_slice = d->file_left == 0;
    if (d->last_slice) {
        close(d->fd); /* on the worker, not the loop */
        d->fd = -1;
    }
    return 0;
}

static int deflate_fill(struct pump_source *src, size_t piece, char *buf, size_t cap, size_t *len,
                        bool *eof)
{
    struct deflate_source *d = container_of(src, struct deflate_source, base);
    if (d->no_memory || d->zs == NULL)
        return -ENOMEM;
    /* The first job of a stream on a new state allocates zlib's memory. */
    if (zstate_begin(d->zs) != Z_OK)
        return -ENOMEM;
    z_stream *z = &d->zs->z;
    if (z->avail_in == 0 && !d->last_slice) {
        int rc = next_slice(d, piece);
        if (rc < 0)
            return rc;
    }
    int flush = d->last_slice ? Z_FINISH : Z_NO_FLUSH;
    z->next_out = (Bytef *)buf;
    z->avail_out = (uInt)cap;
    int rc;
    /* GZIP_STEP of input per call, giving the CPU way between them: a
     * whole slice can deflate for longer than the kernel's time slice. */
    do {
        uInt avail = z->avail_in;
        uInt step = avail > GZIP_STEP ? GZIP_STEP : avail;
        z->avail_in = step;
        rc = deflate(z, step == avail ? flush : Z_NO_FLUSH);
        z->avail_in += avail - step;
        if (z->avail_in > 0)
            gateway_give_way();
    } while (rc == Z_OK && z->avail_out > 0 && (z->avail_in > 0 || flush == Z_FINISH));
    if (rc == Z_STREAM_ERROR)
        return -EIO;
    *len = cap - z->avail_out;
    *eof = rc == Z_STREAM_END;
    /* Input bytes not deflated yet: what the response still costs. A body's
     * is deflate_ready's to say, before each job. */
    if (d->conn == NULL)
        src->remaining = z->avail_in + d->file_left;
    return 0;
}

/* Loop thread, no job running: input zlib holds and has not deflated. */
static size_t zlib_input(const struct deflate_source *d)
{
    return d->zs != NULL ? d->zs->z.avail_in : 0;
}

/* Loop thread: the source holds a zlib state from now on. False when out
 * of memory (the next job fails, and the response with it). */
static bool take_state(struct deflate_source *d)
{
    if (d->zs == NULL)
        d->zs = pump_zstate_take(d->base.pump, &d->params);
    if (d->zs == NULL)
        d->no_memory = true;
    return d->zs != NULL;
}

/* Loop thread, no job running: hands the next job its slice of the body
 * (if zlib needs input and none waits: the pump may find no free slot and
 * start no job) and shuts the window, so that nothing arrives under the
 * job: the loop writes nothing a running job reads. */
static void hand_slice(struct deflate_source *d)
{
    /* What the response still costs, for the job about to start: its input
     * here, and the body still to come. A chunked body's rest is unknown
     * until its end: up to its limit, so a long upload is bulk work and
     * each slice is charged its bytes. */
    uint64_t rest = d->body_done ? 0 : d->chunked ? d->body_max - d->body_len : d->body_left;
    d->base.remaining = zlib_input(d) + (d->in_len - d->in_pos) + rest;
    if (zlib_input(d) == 0 && !d->last_slice && !d->slice_handed) {
        size_t have = d->in_len - d->in_pos;
        d->slice_at = d->in_pos;
        d->slice_len = have < d->base.slice ? have : d->base.slice;
        d->in_pos += d->slice_len;
        d->slice_last = d->body_done && d->in_pos == d->in_len;
        d->slice_handed = true;
    }
    conn_body_window(d->conn, 0);
}

/* Loop thread: a body's input buffer, full of what arrived, doubles (from
 * GZIP_STEP, up to in_cap); the budget holds what it adds. False while
 * the response waits for that memory. */
static bool grow_input(struct deflate_source *d)
{
    size_t size = d->in_size == 0 ? GZIP_STEP : 2 * d->in_size;
    if (size > d->in_cap)
        size = d->in_cap;
    if (!pump_reserve(d->base.pump, size - d->in_size))
        return false;
    char *in = realloc(d->in, size);
    if (in == NULL) {
        d->no_memory = true; /* the job fails, and the response with it */
        return true;
    }
    d->in = in;
    d->in_size = size;
    return true;
}

/* Loop thread, when the pump has a slot free: whether a job has input. A
 * body short of a slice opens the connection's window for the rest of it
 * (as far as its buffer has room), and reading pauses again once the slice
 * is there (or while a job runs, or the response waits for memory). */
static bool deflate_ready(struct pump_source *src)
{
    struct deflate_source *d = container_of(src, struct deflate_source, base);
    if (d->conn == NULL) {
        if (d->in == NULL && (d->in = malloc(d->in_cap)) == NULL)
            d->no_memory = true; /* the job fails, and the response with it */
        take_state(d);
        return true;
    }
    if (d->no_memory)
        return true;
    /* A live change of gzip_partition reaches the body's next slice, up to
     * the size of its buffer. */
    size_t now = d->partition(d->conn);
    d->base.slice = now < d->in_cap ? now : d->in_cap;
    if (zlib_input(d) > 0 || d->slice_handed || d->body_done ||
        d->in_len - d->in_pos >= d->base.slice) {
        /* A slice to deflate: now zlib's state is worth its memory. */
        size_t state = zstate_memory(&d->params);
        if (!d->z_held && !pump_reserve(d->base.pump, state)) {
            conn_body_window(d->conn, 0);
            return false;
        }
        d->z_held = true;
        if (take_state(d))
            hand_slice(d);
        else
            conn_body_window(d->conn, 0); /* the job fails at once */
        return true;
    }
    /* zlib has taken all it was given: what is left moves to the front. */
    if (d->in_pos > 0) {
        memmove(d->in, d->in + d->in_pos, d->in_len - d->in_pos);
        d->in_len -= d->in_pos;
        d->in_pos = 0;
    }
    if (d->in_len == d->in_size && !grow_input(d)) {
        conn_body_window(d->conn, 0);
        return false;
    }
    if (d->no_memory)
        return true;
    size_t room = d->in_size - d->in_len, rest = d->base.slice - d->in_len;
    conn_body_window(d->conn, rest < room ? rest : room);
    return false;
}

static void deflate_release(struct pump_source *src)
{
    struct deflate_source *d = container_of(src, struct deflate_source, base);
    if (d->fd >= 0)
        close(d->fd);
    /* The pump releases a source only once no fill of it is on the pool. */
    if (d->zs != NULL)
        pump_zstate_give(d->base.pump, d->zs);
    free(d->in);
    free(d);
}

/* Loop thread, as the response starts: an input buffer for pieces of up to
 * PIECE_MAX bytes, and output slots that hold what one piece makes. */
static size_t deflate_size(struct pump_source *src, size_t piece_max)
{
    struct deflate_source *d = container_of(src, struct deflate_source, base);
    d->in_cap = piece_max;
    /* A body reserves late (deflate_ready); a file all at once. */
    src->held = d->conn != NULL ? 0 : d->in_cap + zstate_memory(&d->params);
    /* A stream's bound without the stream: zlib's most conservative. */
    return deflateBound(Z_NULL, (uLong)piece_max) + 64;
}

static const struct pump_source_ops deflate_ops = {
    .fill = deflate_fill, .release = deflate_release, .ready = deflate_ready, .size = deflate_size};

/* A deflate source with a gzip wrapper for input of LEN bytes (UINT64_MAX:
 * unknown). Returns NULL when out of memory. */
static struct deflate_source *deflate_new(uint64_t len)
{
    struct deflate_source *d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    d->fd = -1;
    int window_bits = WINDOW_BITS_MIN;
    while (window_bits < WINDOW_BITS_MAX && ((uint64_t)1 << window_bits) < len)
        window_bits++;
    /* windowBits + 16: a gzip wrapper rather than zlib's. */
    d->params = (struct zparams){.level = Z_DEFAULT_COMPRESSION,
                                 .window_bits = window_bits + 16,
                                 .mem_level = window_bits == WINDOW_BITS_MAX ? MEM_LEVEL_MAX
                                                                             : window_bits - 7};
    d->base = (struct pump_source){.ops = &deflate_ops, .cls = GATEWAY_GZIP};
    return d;
}

struct deflate_source *deflate_body_source(struct conn *c, const struct request *req, size_t slice,
                                           uint64_t body_max, size_t (*partition)(struct conn *c))
{
    uint64_t len = req->has_length ? req->content_length : UINT64_MAX;
    struct deflate_source *d = deflate_new(len);
    if (d == NULL)
        return NULL;
    d->base.slice = slice;
    d->base.commit_late = true;
    d->base.reserve_late = true;
    d->conn = c;
    d->partition = partition;
    d->chunked = req->chunked;
    d->body_max = body_max;
    d->body_left = req->has_length ? req->content_length : 0;
    d->base.remaining = d->body_left;
    return d;
}

struct pump_source *deflate_pump_source(struct deflate_source *d)
{
    return &d->base;
}

void deflate_body_add(struct deflate_source *d, const char *at, size_t len)
{
    d->body_len += len; /* the core refused it past gzip_max_body */
    /* The window keeps LEN within the buffer. */
    memcpy(d->in + d->in_len, at, len);
    d->in_len += len;
    d->body_left -= d->body_left < len ? d->body_left : len;
    /* A full slice goes to the pool, and a full buffer grows. Not after the
     * last byte of a Content-Length body: llhttp completes the message
     * within this same call, and on_body_end starts that job (with
     * body_done set first). */
    bool full = d->in_len - d->in_pos >= d->base.slice || d->in_len == d->in_size;
    if (full && (d->chunked || d->body_left > 0))
        pump_kick(d->base.pump);
}

void deflate_body_end(struct deflate_source *d)
{
    d->body_done = true;
    pump_kick(d->base.pump);
}

struct pump_source *deflate_file_source(int fd, uint64_t size)
{
    struct deflate_source *d = deflate_new(size);
    if (d == NULL) {
        close(fd);
        return NULL;
    }
    d->fd = fd;
    d->base.reads_file = true;
    d->file_left = size;
    d->base.remaining = size;
    d->last_slice = size == 0;
    return &d->base;
}

bool gzip_accepted(const char *accept)
{
    bool star = false;
    for (const char *p = accept; p != NULL && *p != '\0';) {
        p += strspn(p, " \t,");
        size_t name = strcspn(p, " \t;,");
        const char *end = p + strcspn(p, ",");
        const char *q = memchr(p, ';', (size_t)(end - p));
        /* q=0 (and 0.0, 0.00...) refuses; any other weight accepts. */
        bool refused = false;
        if (q != NULL) {
            q += strspn(q, "; \t");
            if (strncasecmp(q, "q=", 2) == 0)
                refused = strtod(q + 2, NULL) <= 0.0;
        }
        if ((name == 4 && strncasecmp(p, "gzip", 4) == 0) ||
            (name == 6 && strncasecmp(p, "x-gzip", 6) == 0))
            return !refused;
        if (name == 1 && *p == '*')
            star = !refused;
        p = end;
    }
    return star;
}
