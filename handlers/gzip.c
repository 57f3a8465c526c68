#include "handlers/gzip.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "server/config.h"
#include "server/server.h"

#define BODY_CHUNK (64 * 1024)

/* The request body, owned by the connection's state until the request is
 * complete, then by the deflate source. */
struct body {
    char *data;
    size_t len, cap, max;
};

/* Deflates a body in slices on the pool; owns the body and the z_stream. */
struct deflate_source {
    struct pump_source base;
    z_stream z;
    struct body body;
    size_t slice;     /* input bytes per job */
    size_t slice_end; /* end of the slice being deflated */
};

static void body_free(void *state)
{
    struct body *b = state;
    free(b->data);
    free(b);
}

int gzip_on_headers(struct conn *c, const struct request *req)
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

int gzip_on_body(struct conn *c, const char *at, size_t len)
{
    struct body *b = conn_state(c);
    if (len > b->max - b->len)
        return 413;
    if (b->len + len > b->cap) {
        const struct request *req = conn_request(c);
        size_t want = req->has_length ? (size_t)req->content_length : b->cap * 2;
        if (want < b->len + len)
            want = b->len + len + BODY_CHUNK;
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

static int deflate_fill(struct pump_source *src, char *buf, size_t cap, size_t *len, bool *eof)
{
    struct deflate_source *d = (struct deflate_source *)src;
    z_stream *z = &d->z;
    if (z->avail_in == 0) {
        size_t pos = d->slice_end;
        size_t left = d->body.len - pos;
        d->slice_end = pos + (left < d->slice ? left : d->slice);
        z->next_in = (Bytef *)d->body.data + pos;
        z->avail_in = (uInt)(d->slice_end - pos);
    }
    int flush = d->slice_end == d->body.len ? Z_FINISH : Z_NO_FLUSH;
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
    return 0;
}

static void deflate_release(struct pump_source *src)
{
    struct deflate_source *d = (struct deflate_source *)src;
    deflateEnd(&d->z);
    free(d->body.data);
    free(d);
}

static const struct pump_source_ops deflate_ops = {deflate_fill, deflate_release};

int gzip_on_request(struct conn *c, const struct request *req)
{
    struct deflate_source *d = calloc(1, sizeof *d);
    if (d == NULL)
        return 503;
    /* windowBits 15 + 16: a gzip wrapper rather than zlib's. */
    if (deflateInit2(&d->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK) {
        free(d);
        return 500;
    }
    struct body *b = conn_take_state(c);
    d->body = *b;
    free(b);
    size_t partition = conn_server(c)->cfg->gzip_partition;
    d->slice = partition == CONFIG_WHOLE || partition > d->body.len ? d->body.len : partition;
    if (d->slice == 0)
        d->slice = 1;
    d->base = (struct pump_source){
        .ops = &deflate_ops,
        .cls = GATEWAY_GZIP,
        /* Room for one slice's output: one job per slice in the common case. */
        .buf_size = deflateBound(&d->z, (uLong)d->slice) + 64,
    };
    conn_head_start(c, 200);
    conn_head_add(c, "Content-Type: application/gzip\r\n");
    conn_send_source(c, &d->base, -1);
    return 0;
}
