/* The source of a plain file response: a range of a file read on the pool
 * in the pieces the pump cuts, and read again where memory was given back
 * unsent (rewind). */
#include "handlers/files/file_source.h"

#include <stdlib.h>
#include <unistd.h>

#include "server/base/util.h"

struct file_source {
    struct pump_source base;
    int fd;
    unsigned long long offset, left;
};

static int file_fill(struct pump_source *src, size_t piece, char *buf, size_t cap, size_t *len,
                     bool *eof)
{
    struct file_source *fs = container_of(src, struct file_source, base);
    size_t got = fs->left < piece ? (size_t)fs->left : piece;
    int rc = pump_pread_all(fs->fd, buf, got, fs->offset);
    if (rc < 0)
        return rc;
    fs->offset += got;
    fs->left -= got;
    src->remaining = fs->left;
    *len = got;
    *eof = fs->left == 0;
    if (*eof) {
        close(fs->fd); /* here, not on the loop thread */
        fs->fd = -1;
    }
    return 0;
}

static void file_release(struct pump_source *src)
{
    struct file_source *fs = container_of(src, struct file_source, base);
    if (fs->fd >= 0)
        close(fs->fd);
    free(fs);
}

/* The last BYTES read were given back unsent: read them again. */
static void file_rewind(struct pump_source *src, size_t bytes)
{
    struct file_source *fs = container_of(src, struct file_source, base);
    fs->offset -= bytes;
    fs->left += bytes;
    src->remaining = fs->left;
}

/* The range as it stands, for the writer's sendfile (before any fill). */
static int file_range(struct pump_source *src, uint64_t *offset, uint64_t *len)
{
    struct file_source *fs = container_of(src, struct file_source, base);
    *offset = fs->offset;
    *len = fs->left;
    return fs->fd;
}

static const struct pump_source_ops file_ops = {
    .fill = file_fill, .release = file_release, .rewind = file_rewind, .file = file_range};

struct pump_source *file_range_source(int fd, unsigned long long offset, unsigned long long len)
{
    struct file_source *fs = malloc(sizeof *fs);
    if (fs == NULL) {
        close(fd);
        return NULL;
    }
    *fs = (struct file_source){
        .base = {.ops = &file_ops, .cls = GATEWAY_READ, .reads_file = true, .remaining = len},
        .fd = fd,
        .offset = offset,
        .left = len,
    };
    return &fs->base;
}
