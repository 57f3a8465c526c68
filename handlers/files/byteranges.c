#include "handlers/files/byteranges.h"

#include "server/base/util.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#define PART_HEAD_MAX 256

/* Owns FD until the last read, and the part heads. Part COUNT is the
 * closing delimiter, which has a head and no bytes. */
struct parts {
    struct pump_source base;
    int fd;
    int count, part;  /* part being emitted */
    size_t head_done; /* bytes of its head already emitted */
    uint64_t pos;     /* next file offset of its range */
    struct range ranges[RANGE_MAX];
    char heads[RANGE_MAX + 1][PART_HEAD_MAX];
    size_t head_len[RANGE_MAX + 1];
};

static int parts_read(struct parts *p, char *buf, size_t want)
{
    int rc = pump_pread_all(p->fd, buf, want, p->pos);
    if (rc == 0)
        p->pos += want;
    return rc;
}

/* Up to PIECE bytes of the body, part heads included: what it reads is what
 * it sends. */
static int parts_fill(struct pump_source *src, size_t piece, char *buf, size_t cap, size_t *len,
                      bool *eof)
{
    struct parts *p = container_of(src, struct parts, base);
    size_t n = 0;
    while (n < piece && p->part <= p->count) {
        size_t head_left = p->head_len[p->part] - p->head_done;
        if (head_left > 0) {
            size_t k = head_left < piece - n ? head_left : piece - n;
            memcpy(buf + n, p->heads[p->part] + p->head_done, k);
            p->head_done += k;
            n += k;
            continue;
        }
        if (p->part == p->count) {
            p->part++;
            break;
        }
        uint64_t left = p->ranges[p->part].last + 1 - p->pos;
        if (left == 0) {
            p->part++;
            p->head_done = 0;
            if (p->part < p->count)
                p->pos = p->ranges[p->part].first;
            continue;
        }
        size_t k = left < piece - n ? (size_t)left : piece - n;
        int rc = parts_read(p, buf + n, k);
        if (rc < 0)
            return rc;
        n += k;
    }
    *len = n;
    src->remaining -= n;
    *eof = p->part > p->count;
    if (*eof && p->fd >= 0) {
        close(p->fd);
        p->fd = -1;
    }
    return 0;
}

static void parts_release(struct pump_source *src)
{
    struct parts *p = container_of(src, struct parts, base);
    if (p->fd >= 0)
        close(p->fd);
    free(p);
}

static const struct pump_source_ops parts_ops = {.fill = parts_fill, .release = parts_release};

struct pump_source *byteranges_source(int fd, uint64_t size, const struct range *ranges, int count,
                                      const char *type, uint64_t *length,
                                      char boundary[BYTERANGES_BOUNDARY_LEN])
{
    struct parts *p = calloc(1, sizeof *p);
    if (p == NULL) {
        close(fd);
        return NULL;
    }
    /* Unique enough: the boundary only has to be absent from the parts'
     * bytes, and a 64-bit clock value next to a fixed prefix is. */
    snprintf(boundary, BYTERANGES_BOUNDARY_LEN, "unclog%016llx", (unsigned long long)uv_hrtime());
    uint64_t total = 0;
    for (int i = 0; i <= count; i++) {
        int n;
        if (i < count)
            n = snprintf(
                p->heads[i], PART_HEAD_MAX,
                "\r\n--%s\r\nContent-Type: %s\r\nContent-Range: bytes %llu-%llu/%llu\r\n\r\n",
                boundary, type, (unsigned long long)ranges[i].first,
                (unsigned long long)ranges[i].last, (unsigned long long)size);
        else
            n = snprintf(p->heads[i], PART_HEAD_MAX, "\r\n--%s--\r\n", boundary);
        p->head_len[i] = n < 0 ? 0 : (size_t)n >= PART_HEAD_MAX ? PART_HEAD_MAX - 1 : (size_t)n;
        total += p->head_len[i];
        if (i < count) {
            p->ranges[i] = ranges[i];
            total += ranges[i].last - ranges[i].first + 1;
        }
    }
    p->fd = fd;
    p->count = count;
    p->pos = ranges[0].first;
    p->base = (struct pump_source){
        .ops = &parts_ops, .cls = GATEWAY_READ, .reads_file = true, .remaining = total};
    *length = total;
    return &p->base;
}
