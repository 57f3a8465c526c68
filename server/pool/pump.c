#include "server/pool/pump.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "server/base/config.h"
#include "server/base/util.h"

static const char crlf[] = "\r\n";
static const char last_chunk[] = "0\r\n\r\n";

static void fill_next(struct pump *pump);

void pump_init(struct pump *pump, uv_stream_t *stream, const struct pump_env *env, uint64_t flow,
               pump_done_fn done)
{
    *pump = (struct pump){.stream = stream, .env = env, .flow = flow, .done = done, .filling = -1};
    for (int i = 0; i < 2; i++)
        pump->slots[i].pump = pump;
}

bool pump_head_held(const struct pump *pump)
{
    return pump->src != NULL && pump->head != NULL;
}

bool pump_busy(const struct pump *pump)
{
    return pump->filling >= 0 || pump->slots[0].busy || pump->slots[1].busy || pump->waiting;
}

void pump_free(struct pump *pump)
{
    for (int i = 0; i < 2; i++) {
        free(pump->slots[i].buf);
        pump->slots[i].buf = NULL;
    }
    pump->alloc = 0;
}

/* Ends the response once nothing is in flight; FAILED responses report an error. */
static void finish_if_idle(struct pump *pump)
{
    if (pump->src == NULL || pump_busy(pump))
        return;
    if (!pump->eof && !pump->failed && !pump->stopping)
        return;
    pump->src->ops->release(pump->src);
    pump->src = NULL;
    pump_free(pump);
    size_t held = pump->held;
    pump->held = 0;
    /* May start other responses that waited for this memory. */
    budget_give(pump->env->budget, held);
    pump->done(pump, pump->failed || !pump->eof ? UV_ECANCELED : 0);
}

static void pump_on_write(uv_write_t *req, int status)
{
    struct pump_slot *slot = container_of(req, struct pump_slot, req);
    struct pump *pump = slot->pump;
    slot->busy = false;
    if (status < 0) {
        pump->failed = true;
        /* Nobody will read what a queued fill would produce. */
        if (pump->filling >= 0)
            gateway_cancel(&pump->fill.job);
    } else if (!pump->eof && !pump->failed && !pump->stopping) {
        fill_next(pump);
    }
    finish_if_idle(pump);
}

/* Hands SLOT's piece to the socket, with the head before the first piece
 * and the chunk framing around it. */
static void write_slot(struct pump *pump, struct pump_slot *slot)
{
    uv_buf_t bufs[5];
    unsigned n = 0;
    if (pump->head != NULL) {
        bufs[n++] = uv_buf_init((char *)pump->head, (unsigned)pump->head_len);
        pump->head = NULL;
    }
    if (pump->chunked && slot->len > 0) {
        int len = snprintf(slot->frame, sizeof slot->frame, "%zx\r\n", slot->len);
        bufs[n++] = uv_buf_init(slot->frame, (unsigned)len);
    }
    if (slot->len > 0)
        bufs[n++] = uv_buf_init(slot->buf, (unsigned)slot->len);
    if (pump->chunked && slot->len > 0)
        bufs[n++] = uv_buf_init((char *)crlf, 2);
    if (pump->chunked && pump->eof)
        bufs[n++] = uv_buf_init((char *)last_chunk, sizeof last_chunk - 1);
    if (n == 0) {
        slot->busy = false;
        return;
    }
    pump->sent += slot->len;
    *pump->env->bytes_sent += slot->len;
    if (pump->env->sent != NULL)
        pump->env->sent(pump->env->sent_arg, pump->flow, slot->len);
    int rc = uv_write(&slot->req, pump->stream, bufs, n, pump_on_write);
    if (rc < 0) {
        slot->busy = false;
        pump->failed = true;
    }
}

void pump_emulate_disk(const struct disk_emulation *disk, uint64_t started_ns, size_t bytes)
{
    if (disk->latency_ms == 0 && disk->bytes_per_s == 0)
        return;
    uint64_t want = (uint64_t)disk->latency_ms * 1000000;
    if (disk->bytes_per_s > 0)
        want += (uint64_t)((double)bytes * 1e9 / (double)disk->bytes_per_s);
    uint64_t spent = uv_hrtime() - started_ns;
    if (want <= spent)
        return;
    uint64_t rest = want - spent;
    struct timespec ts = {.tv_sec = (time_t)(rest / 1000000000),
                          .tv_nsec = (long)(rest % 1000000000)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static void fill_work(struct gateway_job *job)
{
    struct pump_fill *f = container_of(job, struct pump_fill, job);
    uint64_t started = uv_hrtime();
    f->len = 0;
    f->eof = false;
    f->rc = f->src->ops->fill(f->src, f->piece, f->buf, f->cap, &f->len, &f->eof);
    if (f->src->reads_file)
        pump_emulate_disk(&f->disk, started, f->len);
}

/* Whether SLOT, just filled, waits for more before it goes out: the head
 * of a source that commits late waits for a full slot or the end. */
static bool gathers(const struct pump *pump, const struct pump_slot *slot)
{
    return pump->src->commit_late && pump->head != NULL && !pump->eof && slot->len < pump->alloc;
}

static void fill_after_work(struct gateway_job *job, int status)
{
    struct pump *pump = container_of(job, struct pump, fill.job);
    struct pump_slot *slot = &pump->slots[pump->filling];
    pump->filling = -1;
    pump->gathering = NULL;
    if (status < 0 || pump->fill.rc < 0 || pump->stopping || pump->failed) {
        slot->busy = false;
        pump->failed = true;
    } else {
        slot->len += pump->fill.len;
        pump->eof = pump->fill.eof;
        if (gathers(pump, slot)) {
            slot->busy = false;
            pump->gathering = slot;
        } else {
            write_slot(pump, slot);
        }
        if (!pump->eof && !pump->failed)
            fill_next(pump);
    }
    finish_if_idle(pump);
}

/* A free slot with a buffer: the first slot's memory came with the
 * reservation, the second's only if the budget has room now (else the
 * response goes on with one slot). Returns NULL when none is free. */
static struct pump_slot *free_slot(struct pump *pump)
{
    struct pump_slot *s = pump->slots, *slot = NULL;
    for (int i = 0; i < 2; i++) {
        if (!s[i].busy && (slot == NULL || (slot->buf == NULL && s[i].buf != NULL)))
            slot = &s[i];
    }
    if (slot == NULL || slot->buf != NULL)
        return slot;
    bool first = s[0].buf == NULL && s[1].buf == NULL;
    if (!first && !budget_try(pump->env->budget, pump->alloc))
        return NULL;
    slot->buf = malloc(pump->alloc);
    if (slot->buf == NULL) {
        if (!first)
            budget_give(pump->env->budget, pump->alloc);
        pump->failed = true;
        return NULL;
    }
    if (!first)
        pump->held += pump->alloc;
    return slot;
}

size_t pump_piece(const struct pump_partition *partition, bool short_waiting, uint64_t remaining)
{
    size_t piece = partition->size;
    /* auto: small pieces while short work waits, so that it finds a thread
     * soon; large ones otherwise, for throughput. */
    if (piece == CONFIG_AUTO_SIZE) {
        size_t large = partition->max > partition->min ? partition->max : partition->min;
        piece = short_waiting ? partition->min : large;
    }
    if (piece == CONFIG_WHOLE || piece > remaining)
        piece = remaining < PUMP_PIECE_MAX ? (size_t)remaining : PUMP_PIECE_MAX;
    if (piece > PUMP_PIECE_MAX)
        piece = PUMP_PIECE_MAX;
    return piece ? piece : 1;
}

/* The input the next fill takes. A file read follows the partition as it
 * is now, so a live change reaches responses in flight at their next piece;
 * never more than their slots hold (a larger piece waits for the next
 * response). */
static size_t next_piece(const struct pump *pump)
{
    const struct pump_source *src = pump->src;
    size_t piece = src->slice;
    if (src->reads_file) {
        bool short_waiting = gateway_short_waiting(pump->env->gateway);
        piece = pump_piece(&pump->env->partition, short_waiting, src->remaining);
    }
    return piece < pump->piece_max ? piece : pump->piece_max;
}

/* Starts a fill, if none is in flight and the source has input, into the
 * slot gathering the first bytes, else into a free slot if there is one. */
static void fill_next(struct pump *pump)
{
    if (pump->filling >= 0 || pump->waiting)
        return;
    struct pump_source *src = pump->src;
    if (src->ops->ready != NULL && !src->ops->ready(src))
        return;
    struct pump_slot *slot = pump->gathering;
    if (slot == NULL) {
        slot = free_slot(pump);
        if (slot == NULL)
            return;
        slot->len = 0;
    }
    int i = (int)(slot - pump->slots);
    slot->busy = true;
    pump->filling = i;
    pump->fill.src = pump->src;
    pump->fill.buf = slot->buf + slot->len;
    pump->fill.cap = pump->alloc - slot->len;
    pump->fill.piece = next_piece(pump);
    pump->fill.disk = pump->env->disk;
    /* The job's cost is the input it takes. */
    uint64_t cost = pump->fill.piece < src->remaining ? pump->fill.piece : src->remaining;
    struct gateway_cost c = {.bytes = cost, .remaining = src->remaining, .flow = pump->flow};
    int rc = gateway_submit(pump->env->gateway, &pump->fill.job, src->cls, c, fill_work,
                            fill_after_work);
    if (rc < 0) {
        slot->busy = false;
        pump->filling = -1;
        pump->failed = true;
    }
}

static void on_granted(struct budget_waiter *w)
{
    struct pump *pump = container_of(w, struct pump, wait);
    uint64_t now = uv_now(pump->stream->loop);
    pump->env->budget->waited_ms += now - pump->wait_start;
    pump->waiting = false;
    pump->held = w->bytes;
    fill_next(pump);
    finish_if_idle(pump);
}

int pump_start(struct pump *pump, struct pump_source *src, const char *head, size_t head_len,
               bool chunked)
{
    /* The slots are sized for the largest piece the partition gives now. */
    size_t piece_max =
        src->reads_file ? pump_piece(&pump->env->partition, false, src->remaining) : src->slice;
    pump->piece_max = piece_max ? piece_max : 1;
    pump->alloc = src->ops->size ? src->ops->size(src, pump->piece_max) : pump->piece_max;
    pump->src = src;
    src->pump = pump;
    pump->head = head;
    pump->head_len = head_len;
    pump->gathering = NULL;
    pump->sent = 0;
    pump->chunked = chunked;
    pump->eof = pump->failed = pump->stopping = false;
    size_t need = src->held + pump->alloc;
    pump->wait.flow = pump->flow; /* waiters take turns by client */
    if (!budget_take(pump->env->budget, &pump->wait, need, on_granted)) {
        pump->waiting = true;
        pump->wait_start = uv_now(pump->stream->loop);
        return 0;
    }
    pump->held = need;
    fill_next(pump);
    if (pump->failed) {
        pump->src = NULL;
        src->ops->release(src);
        pump_free(pump);
        budget_give(pump->env->budget, pump->held);
        pump->held = 0;
        return UV_ENOMEM;
    }
    return 0;
}

void pump_kick(struct pump *pump)
{
    if (pump->src == NULL || pump->eof || pump->failed || pump->stopping)
        return;
    fill_next(pump);
    finish_if_idle(pump);
}

void pump_stop(struct pump *pump)
{
    if (pump->src == NULL)
        return;
    pump->stopping = true;
    if (pump->waiting) {
        pump->waiting = false;
        budget_cancel(pump->env->budget, &pump->wait);
    }
    if (pump->filling >= 0)
        gateway_cancel(&pump->fill.job);
    finish_if_idle(pump);
}

/* ---- the file source ------------------------------------------------------ */

struct file_source {
    struct pump_source base;
    int fd;
    unsigned long long offset, left;
};

int pump_pread_all(int fd, char *buf, size_t len, uint64_t offset)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, buf + got, len - got, (off_t)(offset + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        got += (size_t)n;
    }
    return 0;
}

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

static const struct pump_source_ops file_ops = {.fill = file_fill, .release = file_release};

struct pump_source *pump_file_source(int fd, unsigned long long offset, unsigned long long len)
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
