#include "handlers/gzip.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "server/server.h"
#include "server/util.h"

#define BODY_CHUNK (64 * 1024)

/* The request body, owned by the connection's state until the request is
 * complete, then by the deflate source. */
struct body {
    char *data;
    size_t len, cap, max;
};

/* Deflates its input in slices on the pool, one slice per job: a request
 * body in memory, or a file read a slice at a time. Owns the input, the
 * file and the z_stream. */
struct deflate_source {
    struct pump_source base;
    z_stream z;
    struct body body;   /* the input: a request body, or the file's read buffer */
    bool from_file;     /* input read from fd, else the body */
    int fd;             /* the file until its last read, else -1 */
    uint64_t file_left; /* file bytes not read yet */
    uint64_t file_offset;
    size_t slice;     /* input bytes per job */
    size_t slice_end; /* end of the slice being deflated, within body */
    bool last_slice;
};

static void body_free(void *state)
{
    struct body *b = state;
    free(b->data);
    free(b);
}

static int gzip_on_headers(struct conn *c, const struct request *req)
{
    size_t max = conn_server(c)->cfg->gzip_max_body;
    if (req->has_length && req->content_length > max)
        return 413;
    struct body *b = calloc(1, sizeof *b);
    if (b == NULL)
        return 503;
    b->max = max;
    conn_set_state(c, b, body_free);
    return 0;
}

static int gzip_on_body(struct conn *c, const char *at, size_t len)
{
    struct body *b = conn_state(c);
    if (len > b->max - b->len)
        return 413;
    if (b->len + len > b->cap) {
        /* Grow with what arrives, not with what Content-Length promises: a
         * client announcing 16m and sending a trickle costs a trickle. */
        size_t want = b->cap * 2 > BODY_CHUNK ? b->cap * 2 : BODY_CHUNK;
        if (want < b->len + len)
            want = b->len + len;
        if (want > b->max)
            want = b->max;
        char *grown = realloc(b->data, want);
        if (grown == NULL)
            return 503;
        b->data = grown;
        b->cap = want;
    }
    memcpy(b->data + b->len, at, len);
    b->len += len;
    return 0;
}

/* Puts the next slice of input in front of zlib: the next part of the
 * body, or the next read of the file. Returns 0 or a negative errno. */
static int next_slice(struct deflate_source *d)
{
    z_stream *z = &d->z;
    if (!d->from_file) {
        size_t pos = d->slice_end;
        size_t left = d->body.len - pos;
        d->slice_end = pos + (left < d->slice ? left : d->slice);
        /* An empty body has no buffer, and NULL + 0 is undefined behaviour. */
        z->next_in = d->body.data ? (Bytef *)d->body.data + pos : Z_NULL;
        z->avail_in = (uInt)(d->slice_end - pos);
        d->last_slice = d->slice_end == d->body.len;
        return 0;
    }
    size_t got = d->file_left < d->slice ? (size_t)d->file_left : d->slice;
    int rc = pump_pread_all(d->fd, d->body.data, got, d->file_offset);
    if (rc < 0)
        return rc;
    d->file_offset += got;
    d->file_left -= got;
    z->next_in = (Bytef *)d->body.data;
    z->avail_in = (uInt)got;
    d->last_slice = d->file_left == 0;
    if (d->last_slice) {
        close(d->fd); /* on the worker, not the loop */
        d->fd = -1;
    }
    return 0;
}

static int deflate_fill(struct pump_source *src, char *buf, size_t cap, size_t *len, bool *eof)
{
    struct deflate_source *d = container_of(src, struct deflate_source, base);
    z_stream *z = &d->z;
    if (z->avail_in == 0 && !d->last_slice) {
        int rc = next_slice(d);
        if (rc < 0)
            return rc;
    }
    int flush = d->last_slice ? Z_FINISH : Z_NO_FLUSH;
    z->next_out = (Bytef *)buf;
    z->avail_out = (uInt)cap;
    int rc;
    do {
        rc = deflate(z, flush);
    } while (rc == Z_OK && z->avail_out > 0 && (z->avail_in > 0 || flush == Z_FINISH));
    if (rc == Z_STREAM_ERROR)
        return -EIO;
    *len = cap - z->avail_out;
    *eof = rc == Z_STREAM_END;
    /* Input bytes not deflated yet: what the response still costs. */
    src->remaining = z->avail_in + (d->from_file ? d->file_left : d->body.len - d->slice_end);
    return 0;
}

static void deflate_release(struct pump_source *src)
{
    struct deflate_source *d = container_of(src, struct deflate_source, base);
    if (d->fd >= 0)
        close(d->fd);
    deflateEnd(&d->z);
    free(d->body.data);
    free(d);
}

static const struct pump_source_ops deflate_ops = {.fill = deflate_fill,
                                                   .release = deflate_release};

/* A deflate source with a gzip wrapper, slices of SLICE input bytes and
 * output slots sized for one slice. Returns NULL when out of memory. */
static struct deflate_source *deflate_new(size_t slice)
{
    struct deflate_source *d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    /* windowBits 15 + 16: a gzip wrapper rather than zlib's. */
    if (deflateInit2(&d->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK) {
        free(d);
        return NULL;
    }
    d->fd = -1;
    d->slice = slice;
    d->base = (struct pump_source){
        .ops = &deflate_ops,
        .cls = GATEWAY_GZIP,
        .buf_size = deflateBound(&d->z, (uLong)d->slice) + 64,
    };
    return d;
}

static int gzip_on_request(struct conn *c, const struct request *req)
{
    struct body *b = conn_state(c);
    struct deflate_source *d = deflate_new(pump_piece(conn_server(c)->cfg->gzip_partition, b->len));
    if (d == NULL)
        return 503;
    conn_take_state(c);
    d->body = *b;
    d->base.remaining = b->len;
    free(b);
    conn_head_start(c, 200);
    conn_head_add(c, "Content-Type: application/gzip\r\n");
    conn_send_source(c, &d->base, -1);
    return 0;
}

struct pump_source *gzip_file_source(int fd, uint64_t size, size_t partition)
{
    struct deflate_source *d = deflate_new(pump_piece(partition, size));
    if (d != NULL)
        d->body.data = malloc(d->slice);
    if (d == NULL || d->body.data == NULL) {
        if (d != NULL)
            deflate_release(&d->base);
        close(fd);
        return NULL;
    }
    d->from_file = true;
    d->fd = fd;
    d->file_left = size;
    d->base.remaining = size;
    d->last_slice = size == 0;
    return &d->base;
}

static const struct route gzip_routes[] = {
    {"/gzip", ROUTE_METHOD(HTTP_POST), "POST", gzip_on_headers, gzip_on_body, gzip_on_request},
    {0},
};

const struct module gzip_module = {.name = "gzip", .routes = gzip_routes};
