#include "handlers/files/loop_reads.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "server/base/log.h"
#include "server/base/snapshot.h"
#include "server/base/util.h"

/* The pass's files are closed: the next pass opens them anew. */
static void close_opens(struct loop_reads *r)
{
    for (unsigned i = 0; i < r->n_opens; i++) {
        close(r->opens[i].fd);
        r->opens[i].body_len = 0;
    }
    r->n_opens = r->next_open = 0;
}

/* A pass begins: the loop may read its bytes again. */
static void reads_begin(struct pass_sub *sub)
{
    container_of(sub, struct loop_reads, sub)->used = 0;
}

/* The pass ends (before the poll, which may wait for the client's next
 * request, or the clock moved): a file opened in it (by a poll callback,
 * a request that waited for its turn, a timer) is not kept across it, so
 * a file replaced meanwhile is opened anew and an idle server holds none. */
static void reads_end(struct pass_sub *sub)
{
    close_opens(container_of(sub, struct loop_reads, sub));
}

static bool probe(const char *dir)
{
    struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_CACHED};
    long fd = syscall(SYS_openat2, AT_FDCWD, dir, &how, sizeof how);
    if (fd >= 0)
        close((int)fd);
    /* EAGAIN: supported, the path just was not cached. */
    return fd >= 0 || errno == EAGAIN;
}

void loop_reads_init(struct loop_reads *r, struct pass *pass, const char *dir)
{
    *r = (struct loop_reads){
        .sub = {.begin = reads_begin, .end = reads_end},
        .pass = pass,
        .supported = probe(dir),
    };
    pass_subscribe(pass, &r->sub);
}

void loop_reads_set(struct loop_reads *r, bool wanted, size_t pass_bytes)
{
    r->on = r->supported && wanted;
    r->pass_bytes = pass_bytes;
}

void loop_reads_log(const struct loop_reads *r, bool configured)
{
    if (!r->supported && configured)
        log_info("loop reads: off: the kernel lacks openat2 RESOLVE_CACHED");
    else
        log_debug("loop reads: %s", configured ? "on (openat2 RESOLVE_CACHED, preadv2 RWF_NOWAIT)"
                                               : "off (loop_reads = off)");
}

static void fallback(struct loop_reads *r, enum loop_reads_fallback why)
{
    r->fallbacks[why]++;
}

int loop_reads_keep(struct loop_reads *r, int fd)
{
    for (unsigned i = 0; i < r->n_opens; i++) {
        if (r->opens[i].fd == fd) {
            /* Forgotten, not closed; its slot's body buffer stays, at the end. */
            struct loop_reads_open gone = r->opens[i];
            r->opens[i] = r->opens[--r->n_opens];
            r->opens[r->n_opens] = gone;
            r->next_open = 0;
            break;
        }
    }
    return fd;
}

int loop_reads_open(struct loop_reads *r, int dir, const char *path, const struct open_how *how,
                    struct stat *st)
{
    size_t len = strlen(path);
    if (len >= PATH_MAX)
        return -1;
    pass_now(r->pass); /* the clock rule: a pass that ended closed its files */
    for (unsigned i = 0; i < r->n_opens; i++) {
        struct loop_reads_open *o = &r->opens[i];
        if (o->dir == dir && strcmp(o->path, path) == 0) {
            r->opens_shared++;
            *st = o->st;
            return o->fd;
        }
    }
    long fd = syscall(SYS_openat2, dir, path, how, sizeof *how);
    if (fd < 0) {
        if (errno == EAGAIN)
            fallback(r, LOOP_READS_OPEN_WOULD_BLOCK);
        else if (errno == ENOSYS || errno == EINVAL || errno == E2BIG)
            fallback(r, LOOP_READS_UNSUPPORTED);
        return -1;
    }
    /* fstat of an open file reads its inode, already in memory. */
    if (fstat((int)fd, st) < 0) {
        close((int)fd);
        return -1;
    }
    struct loop_reads_open *o;
    if (r->n_opens < LOOP_READS_OPENS) {
        o = &r->opens[r->n_opens++];
    } else {
        /* All in use: the oldest goes (no caller holds one past its call). */
        o = &r->opens[r->next_open];
        r->next_open = (r->next_open + 1) % LOOP_READS_OPENS;
        close(o->fd);
    }
    o->body_len = 0;
    o->dir = dir;
    o->fd = (int)fd;
    o->st = *st;
    memcpy(o->path, path, len + 1);
    return (int)fd;
}

const char *loop_reads_body(struct loop_reads *r, int fd, size_t len)
{
    struct loop_reads_open *o = NULL;
    for (unsigned i = 0; i < r->n_opens && o == NULL; i++)
        o = r->opens[i].fd == fd ? &r->opens[i] : NULL;
    if (o == NULL || len == 0 || len > LOOP_READS_BODY)
        return NULL;
    if (o->body_len == len) {
        r->served++;
        r->bodies_shared++;
        return o->body;
    }
    if (o->body == NULL && (o->body = malloc(LOOP_READS_BODY)) == NULL)
        return NULL;
    if (!loop_reads_read(r, fd, o->body, len))
        return NULL;
    o->body_len = len;
    return o->body;
}

bool loop_reads_read(struct loop_reads *r, int fd, char *buf, size_t len)
{
    if (r->used > 0 && r->used + len > r->pass_bytes) {
        fallback(r, LOOP_READS_OVER_PASS);
        return false;
    }
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    /* preadv2 by number: glibc declares it only under _GNU_SOURCE. */
    long n;
    do
        n = syscall(SYS_preadv2, fd, &iov, 1, 0L, 0L, RWF_NOWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno != EAGAIN) {
        fallback(r, LOOP_READS_UNSUPPORTED); /* EOPNOTSUPP, EINVAL: the file system */
        return false;
    }
    if (n != (long)len) {
        fallback(r, LOOP_READS_READ_WOULD_BLOCK); /* a short read: part is on disk */
        return false;
    }
    r->used += len;
    r->served++;
    r->bytes += len;
    return true;
}

void loop_reads_close(struct loop_reads *r)
{
    close_opens(r);
    for (unsigned i = 0; i < LOOP_READS_OPENS; i++) {
        free(r->opens[i].body);
        r->opens[i].body = NULL;
    }
    pass_unsubscribe(r->pass, &r->sub);
}

static const struct snap_def on_def = {
    .key = "on",
    .metric = "unclog_loop_reads_on",
    .help = "Whether files already in the page cache are opened and read on the loop "
            "(loop_reads, and the kernel has openat2 RESOLVE_CACHED).",
    .merge = SNAP_SAME};
static const struct snap_def served_def = {
    .key = "served",
    .metric = "unclog_loop_reads_total",
    .kind = SNAP_COUNTER,
    .help = "Files read on the loop from the page cache, with no pool job."};
static const struct snap_def bytes_def = {.key = "bytes",
                                          .metric = "unclog_loop_read_bytes_total",
                                          .kind = SNAP_COUNTER,
                                          .help = "Bytes read on the loop from the page cache."};
static const struct snap_def opens_shared_def = {
    .key = "opens_shared",
    .metric = "unclog_loop_read_opens_shared_total",
    .kind = SNAP_COUNTER,
    .help = "Requests on the loop that found their file opened already in the same turn of the "
            "loop, by another request: no open, no fstat."};
static const struct snap_def bodies_shared_def = {
    .key = "bodies_shared",
    .metric = "unclog_loop_read_bodies_shared_total",
    .kind = SNAP_COUNTER,
    .help = "Requests on the loop that found their file's body read already in the same turn "
            "of the loop, by another request: no read."};
static const struct snap_def fallback_def = {
    .key = "count",
    .metric = "unclog_loop_read_fallbacks_total",
    .kind = SNAP_COUNTER,
    .help = "Opens and reads that went to the pool instead of the loop, by reason."};
static const char *const fallback_names[LOOP_READS_FALLBACKS] = {
    "open_would_block", "read_would_block", "unsupported", "over_turn"};

void loop_reads_stats(const struct loop_reads *r, struct snapshot *s)
{
    snap_open(s, "loop_reads", NULL);
    snap_add(s, &on_def, r->on);
    snap_add(s, &served_def, r->served);
    snap_add(s, &bytes_def, r->bytes);
    snap_add(s, &opens_shared_def, r->opens_shared);
    snap_add(s, &bodies_shared_def, r->bodies_shared);
    snap_open(s, "fallbacks", NULL);
    for (int i = 0; i < LOOP_READS_FALLBACKS; i++) {
        snap_open(s, fallback_names[i], "reason");
        snap_add(s, &fallback_def, r->fallbacks[i]);
        snap_close(s);
    }
    snap_close(s);
    snap_close(s);
}
