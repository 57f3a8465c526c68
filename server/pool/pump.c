#include "server/pool/pump.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "server/base/config.h"
#include "server/base/snapshot.h"
#include "server/base/util.h"

static const char crlf[] = "\r\n";
static const char last_chunk[] = "0\r\n\r\n";

static void fill_next(struct pump *pump);
static void slot_turn(struct pump_turn *t);

void pump_init(struct pump *pump, uv_stream_t *stream, const struct pump_env *env, uint64_t flow,
               pump_done_fn done)
{
    *pump = (struct pump){.stream = stream, .env = env, .flow = flow, .done = done, .filling = -1};
    for (int i = 0; i < 2; i++) {
        pump->slots[i].pump = pump;
        pump->slots[i].turn.go = slot_turn;
    }
}

bool pump_head_held(const struct pump *pump)
{
    return pump->src != NULL && pump->head != NULL;
}

bool pump_unsent(const struct pump *pump)
{
    return pump->head != NULL;
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

/* The response takes BYTES the budget has granted it: told to the env. */
static void took(struct pump *pump, size_t bytes)
{
    pump->held += bytes;
    if (pump->env->held != NULL)
        pump->env->held(pump->env->sent_arg, pump->flow, bytes, true);
}

/* The response gives BYTES back to the budget, which may start others. */
static void give(struct pump *pump, size_t bytes)
{
    pump->held -= bytes;
    if (pump->env->held != NULL)
        pump->env->held(pump->env->sent_arg, pump->flow, bytes, false);
    budget_give(pump->env->budget, pump->flow, bytes);
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
    /* May start other responses that waited for this memory. */
    give(pump, pump->held);
    int status = pump->error < 0 ? pump->error : UV_ECANCELED;
    pump->done(pump, pump->failed || !pump->eof ? status : 0);
}

/* Writes of PUMP still waiting for their turn will not go: the response
 * failed or stops. */
static void drop_waiting(struct pump *pump)
{
    for (int i = 0; i < 2; i++) {
        struct pump_slot *slot = &pump->slots[i];
        if (slot->turn.item.node.queued) {
            pump_sender_drop(pump->env->sender, &slot->turn);
            slot->busy = false;
        }
    }
}

static void pump_on_write(uv_write_t *req, int status)
{
    struct pump_slot *slot = container_of(req, struct pump_slot, req);
    struct pump *pump = slot->pump;
    slot->busy = false;
    if (status < 0) {
        pump->failed = true;
        drop_waiting(pump);
        /* Nobody will read what a queued fill would produce. */
        if (pump->filling >= 0)
            gateway_cancel(&pump->fill.job);
    } else if (!pump->eof && !pump->failed && !pump->stopping) {
        fill_next(pump);
    }
    finish_if_idle(pump);
}

/* Hands SLOT's bytes, decided by write_slot, to the socket; not those of
 * a response that failed while they waited. */
static void issue(struct pump *pump, struct pump_slot *slot)
{
    if (pump->failed || pump->stopping) {
        slot->busy = false;
        return;
    }
    pump->sent += slot->len;
    *pump->env->bytes_sent += slot->len;
    if (pump->env->sent != NULL)
        pump->env->sent(pump->env->sent_arg, pump->flow, slot->len);
    int rc = uv_write(&slot->req, pump->stream, slot->bufs, slot->nbufs, pump_on_write);
    if (rc < 0) {
        slot->busy = false;
        pump->failed = true;
    }
}

/* Decides what SLOT's write hands the socket: the head before the first
 * piece, the chunk framing around it. Returns its bytes. */
static size_t frame_slot(struct pump *pump, struct pump_slot *slot)
{
    uv_buf_t *bufs = slot->bufs;
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
    slot->nbufs = n;
    size_t bytes = 0;
    for (unsigned i = 0; i < n; i++)
        bytes += bufs[i].len;
    return bytes;
}

/* Hands SLOT's piece to the socket, now or at its turn (the slot stays
 * busy while it waits). */
static void write_slot(struct pump *pump, struct pump_slot *slot)
{
    size_t bytes = frame_slot(pump, slot);
    if (bytes == 0) {
        slot->busy = false;
        return;
    }
    struct pump_sender *snd = pump->env->sender;
    if (snd != NULL && !pump_sender_admit(snd, &slot->turn, pump->flow, bytes))
        return;
    issue(pump, slot);
}

/* SLOT's turn came: it goes, which may end the response, even the
 * connection. */
static void slot_turn(struct pump_turn *t)
{
    struct pump_slot *slot = container_of(t, struct pump_slot, turn);
    struct pump *pump = slot->pump;
    issue(pump, slot);
    finish_if_idle(pump);
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
        if (!pump->failed && !pump->stopping)
            pump->error = pump->fill.rc < 0 ? pump->fill.rc : status;
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
    if (!first && !budget_try(pump->env->budget, pump->flow, pump->alloc))
        return NULL;
    if (!first)
        took(pump, pump->alloc);
    slot->buf = malloc(pump->alloc);
    if (slot->buf == NULL) {
        if (!first)
            give(pump, pump->alloc);
        pump->failed = true;
        return NULL;
    }
    return slot;
}

size_t pump_piece(const struct pump_partition *partition, bool short_waiting, uint64_t remaining,
                  bool deflates)
{
    size_t piece = partition->size;
    /* auto: small pieces while short work waits, so that it finds a thread
     * soon; large ones otherwise, for throughput. A read's rest that is short
     * work itself goes in one piece: cut, it would still be short work, and
     * each cut costs the response a pass through the loop. A deflate's stays
     * cut: its pieces are CPU time, which other clients' deflates wait for. */
    if (piece == CONFIG_AUTO_SIZE) {
        size_t large = partition->max > partition->min ? partition->max : partition->min;
        bool cut = short_waiting && (deflates || remaining > SCHED_SHORT_BYTES);
        piece = cut ? partition->min : large;
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
        bool deflates = src->cls == GATEWAY_GZIP;
        bool short_waiting = gateway_short_waiting(pump->env->gateway, deflates);
        piece = pump_piece(&pump->env->partition, short_waiting, src->remaining, deflates);
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
    if (!pump->slot_held) {
        if (!pump_reserve(pump, pump->alloc))
            return;
        pump->slot_held = true;
    }
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
    took(pump, w->bytes);
    fill_next(pump);
    finish_if_idle(pump);
}

int pump_start(struct pump *pump, struct pump_source *src, const char *head, size_t head_len,
               bool chunked)
{
    /* The slots are sized for the largest piece the partition gives now,
     * and no larger than the budget: a `whole` file bigger than
     * max_buffer_memory is read in pieces of that size, or it could start
     * only once nothing else held any memory, which a steady flow of small
     * responses may never leave. */
    size_t piece_max = src->reads_file
                           ? pump_piece(&pump->env->partition, false, src->remaining, false)
                           : src->slice;
    if (src->reads_file && piece_max > pump->env->budget->max)
        piece_max = pump->env->budget->max;
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
    pump->asked = 0;
    pump->slot_held = !src->reserve_late;
    pump->error = 0;
    pump->wait.client = pump->flow; /* waiters take turns by client */
    if (!src->reserve_late) {
        size_t need = src->held + pump->alloc;
        if (!budget_take(pump->env->budget, &pump->wait, need, on_granted)) {
            pump->waiting = true;
            pump->wait_start = uv_now(pump->stream->loop);
            return 0;
        }
        took(pump, need);
    }
    fill_next(pump);
    if (pump->failed) {
        pump->src = NULL;
        src->ops->release(src);
        pump_free(pump);
        give(pump, pump->held);
        return UV_ENOMEM;
    }
    return 0;
}

bool pump_reserve(struct pump *pump, size_t bytes)
{
    if (pump->waiting)
        return false;
    if (pump->asked > 0) {
        /* What waited was granted: the caller asks for it again. */
        bool same = pump->asked == bytes;
        pump->asked = 0;
        if (same)
            return true;
    }
    if (budget_take(pump->env->budget, &pump->wait, bytes, on_granted)) {
        took(pump, bytes);
        return true;
    }
    pump->asked = bytes;
    pump->waiting = true;
    pump->wait_start = uv_now(pump->stream->loop);
    return false;
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
    drop_waiting(pump);
    if (pump->waiting) {
        pump->waiting = false;
        budget_cancel(pump->env->budget, &pump->wait);
    }
    if (pump->filling >= 0)
        gateway_cancel(&pump->fill.job);
    finish_if_idle(pump);
}

/* ---- the sender: the loop's writes, by client, a pass at a time ---------- */

/* A pass begins after each poll: the writes that wait get theirs, as far
 * as it goes. */
static void sender_begin(struct pass_sub *sub)
{
    struct pump_sender *snd = container_of(sub, struct pump_sender, sub);
    share_new_pass(&snd->share);
    struct share_item *item;
    while ((item = share_next(&snd->share)) != NULL) {
        struct pump_turn *t = container_of(item, struct pump_turn, item);
        t->go(t);
    }
}

static bool sender_waiting(const struct pass_sub *sub)
{
    return share_waiting(&container_of(sub, const struct pump_sender, sub)->share);
}

/* A write that waits keeps the loop from blocking until its turn comes. */
bool pump_sender_admit(struct pump_sender *snd, struct pump_turn *t, uint64_t client, size_t bytes)
{
    t->item.client = client;
    t->item.bytes = bytes;
    bool now = share_admit(&snd->share, &t->item);
    if (!now)
        pass_wake(snd->pass);
    return now;
}

void pump_sender_drop(struct pump_sender *snd, struct pump_turn *t)
{
    share_remove(&snd->share, &t->item);
}

void pump_sender_init(struct pump_sender *snd, struct pass *pass, size_t pass_bytes)
{
    *snd = (struct pump_sender){
        .sub = {.begin = sender_begin, .waiting = sender_waiting},
        .pass = pass,
    };
    share_init(&snd->share, pass_bytes);
    pass_subscribe(pass, &snd->sub);
}

void pump_sender_set_pass_bytes(struct pump_sender *snd, size_t pass_bytes)
{
    share_set_pass_bytes(&snd->share, pass_bytes);
}

static const struct snap_def send_turn_def = {
    .key = "turn_bytes",
    .metric = "unclog_send_turn_bytes",
    .help = "Bytes the loop hands the kernel per pass before the writes that wait take turns by "
            "client (send_turn).",
    .merge = SNAP_SAME};
static const struct snap_def send_at_once_def = {
    .key = "at_once",
    .metric = "unclog_send_writes_at_once_total",
    .kind = SNAP_COUNTER,
    .help =
        "Response writes handed to the kernel as they came: nothing waited, the pass had room."};
static const struct snap_def send_whole_def = {
    .key = "whole_at_once",
    .metric = "unclog_send_whole_at_once_total",
    .kind = SNAP_COUNTER,
    .help = "Answers from memory that the kernel took whole as the request was dispatched: no "
            "write request, no pause in reading the connection."};
static const struct snap_def send_deferred_def = {
    .key = "deferred",
    .metric = "unclog_send_writes_deferred_total",
    .kind = SNAP_COUNTER,
    .help = "Response writes that waited for a later pass of the loop, in their client's queue."};
static const struct snap_def send_contended_def = {
    .key = "contended",
    .metric = "unclog_send_writes_contended_total",
    .kind = SNAP_COUNTER,
    .help = "Waiting writes handed out while two clients or more had writes waiting."};
static const struct snap_def send_turns_def = {
    .key = "turns",
    .metric = "unclog_send_turns_total",
    .kind = SNAP_COUNTER,
    .help = "Passes of the loop that began with writes waiting."};
static const struct snap_def send_waiting_def = {
    .key = "waiting_clients",
    .metric = "unclog_send_waiting_clients",
    .help = "Clients (hash buckets) with writes waiting now."};
static const struct snap_def send_clients_max_def = {
    .key = "waiting_clients_max",
    .metric = "unclog_send_waiting_clients_max",
    .help = "Most clients (hash buckets) with writes waiting at once: a client's connections "
            "wait in one queue.",
    .merge = SNAP_MAX};
static const struct snap_def send_lag_def = {
    .key = "lag_max",
    .metric = "unclog_send_lag_max_bytes",
    .help = "Most bytes one client with writes waiting was handed beyond another waiting one, "
            "counted from when both waited: at most a quantum (64 KiB) and one write.",
    .merge = SNAP_MAX};

void pump_sender_stats(const struct pump_sender *snd, struct snapshot *s)
{
    const struct share *sh = &snd->share;
    snap_open(s, "send", NULL);
    snap_add(s, &send_turn_def, sh->pass_bytes);
    snap_add(s, &send_at_once_def, sh->counters.at_once);
    snap_add(s, &send_whole_def, snd->whole_at_once);
    snap_add(s, &send_deferred_def, sh->counters.deferred);
    snap_add(s, &send_contended_def, sh->counters.contended);
    snap_add(s, &send_turns_def, sh->counters.passes);
    snap_add(s, &send_waiting_def, sh->queue.active);
    snap_add(s, &send_clients_max_def, sh->counters.clients_max);
    snap_add(s, &send_lag_def, sh->counters.lag_max);
    snap_close(s);
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
        size_t step = len - got < PUMP_READ_STEP ? len - got : PUMP_READ_STEP;
        ssize_t n = pread(fd, buf + got, step, (off_t)(offset + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        got += (size_t)n;
        if (got < len)
            gateway_give_way();
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
