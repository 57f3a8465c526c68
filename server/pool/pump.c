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
    return pump->filling >= 0 || pump->slots[0].busy || pump->slots[1].busy || pump->waiting ||
           pump->wire_busy;
}

/* Frees the slots' buffers, keeping their size for the next fills. */
static void free_slots(struct pump *pump)
{
    for (int i = 0; i < 2; i++) {
        free(pump->slots[i].buf);
        pump->slots[i].buf = NULL;
    }
}

void pump_free(struct pump *pump)
{
    free_slots(pump);
    pump->alloc = 0;
}

/* The response takes BYTES the budget has granted it. */
static void took(struct pump *pump, size_t bytes)
{
    pump->held += bytes;
}

/* The response gives BYTES back to the budget, which may start others. */
static void give(struct pump *pump, size_t bytes)
{
    pump->held -= bytes;
    budget_give(pump->env->budget, pump->flow, bytes);
}

/* ---- memory that gives way ------------------------------------------------ */

static void stall_add(struct pump *pump)
{
    struct pump_stalled *list = pump->env->stalled;
    if (list == NULL || pump->stall_listed)
        return;
    pump->stall_prev = NULL;
    pump->stall_next = list->first;
    if (list->first != NULL)
        list->first->stall_prev = pump;
    list->first = pump;
    list->count++;
    pump->stall_listed = true;
}

static void stall_remove(struct pump *pump)
{
    struct pump_stalled *list = pump->env->stalled;
    if (!pump->stall_listed)
        return;
    if (pump->stall_prev != NULL)
        pump->stall_prev->stall_next = pump->stall_next;
    else
        list->first = pump->stall_next;
    if (pump->stall_next != NULL)
        pump->stall_next->stall_prev = pump->stall_prev;
    pump->stall_prev = pump->stall_next = NULL;
    list->count--;
    pump->stall_listed = false;
}

/* PUMP is listed while it might give way: its wire write waits, or a
 * fill it submitted may still wait in the gateway's queue (can_give_way
 * asks the gateway, when it matters, whether it still does). */
static void stall_update(struct pump *pump)
{
    if (pump->src != NULL && (pump->wire_busy || pump->filling >= 0))
        stall_add(pump);
    else
        stall_remove(pump);
}

/* Whether SLOT's buffer holds B (its rest may point into it). */
static bool in_slot(const struct pump_slot *slot, const uv_buf_t *b)
{
    return slot->buf != NULL && b->base >= slot->buf && b->base <= slot->buf + slot->len;
}

/* The body bytes of the slot being handed out that are still in it, or
 * SIZE_MAX when what is left is not body alone (a head, a chunk's frame). */
static size_t out_rest(const struct pump *pump)
{
    const struct pump_slot *slot = pump->out;
    if (slot == NULL || slot->at == slot->nbufs)
        return 0;
    if (slot->nbufs - slot->at > 1 || !in_slot(slot, &slot->bufs[slot->at]))
        return SIZE_MAX;
    return slot->bufs[slot->at].len;
}

/* Whether PUMP may give its slots back now: its slots hold memory of its
 * own, its source can make their bytes again (it rewinds, and has not
 * ended: a file source closes its file after the last piece), and either
 * its socket takes no more (a wire write waits) and nothing fills a slot,
 * or its fill still waits in the gateway's queue (give_way takes it back:
 * it read nothing). A response whose head has not gone may give way only
 * before anything is framed (its first fill waits). */
static bool can_give_way(const struct pump *pump)
{
    const struct pump_source *src = pump->src;
    bool queued_fill = pump->filling >= 0 && gateway_withdrawable(&pump->fill.job);
    bool idle_wire = pump->wire_busy && pump->filling < 0;
    bool framed = pump->head == NULL || (pump->out == NULL && pump->queued == NULL);
    return src != NULL && (queued_fill || idle_wire) && pump->slot_held && !pump->eof &&
           !pump->failed && !pump->stopping && src->ops->rewind != NULL &&
           pump->gathering == NULL && framed && out_rest(pump) != SIZE_MAX &&
           pump->held > src->held;
}

static void drop_waiting(struct pump *pump);

/* PUMP gives back every slot it filled and has not sent (the bytes in the
 * wire write go on): its source rewinds over them, and the next fill
 * reserves a slot again and reads them anew. */
static void give_way(struct pump *pump)
{
    struct budget *b = pump->env->budget;
    if (pump->filling >= 0) {
        /* Its fill has not started: taken back, it never runs (its done
         * callback neither), and the slot it was to fill is free. */
        if (gateway_withdraw(&pump->fill.job) < 0)
            return; /* can_give_way said it waits: not reached */
        pump->slots[pump->filling].busy = false;
        pump->filling = -1;
        b->fills_withdrawn++;
    }
    size_t unsent = out_rest(pump) + (pump->queued != NULL ? pump->queued->len : 0);
    drop_waiting(pump);
    if (unsent > 0)
        pump->src->ops->rewind(pump->src, unsent);
    pump->reread += unsent;
    b->given_back += (pump->slots[0].buf != NULL) + (pump->slots[1].buf != NULL);
    free_slots(pump);
    size_t bytes = pump->held - pump->src->held;
    b->given_back_bytes += bytes;
    pump->slot_held = false;
    stall_remove(pump);
    give(pump, bytes);
    if (!pump->wire_busy) {
        /* No wire write will come back to start the next fill: it asks for
         * its slot again now, and waits its turn (without pressing others:
         * this may run inside press). */
        pump->quiet = true;
        fill_next(pump);
        pump->quiet = false;
        stall_update(pump);
    }
}

/* PUMP's socket takes no more, or it just filled a slot while it did not:
 * if another client waits and PUMP's client is over its share, it gives
 * way at once. */
static void maybe_give_way(struct pump *pump)
{
    if (pump->env->budget->waiting > 0 && can_give_way(pump) &&
        budget_gives_way(pump->env->budget, pump->flow))
        give_way(pump);
}

/* Another client waits for the budget, CLIENT among them (or 0: any): the
 * stalled responses of clients over their fair share give way, until no
 * other client waits within its share (budget_gives_way). Never those of
 * CLIENT itself. */
static void press(const struct pump_env *env, uint64_t client)
{
    if (env->stalled == NULL)
        return;
    /* Worked out again only after a response gave way: a walk over
     * thousands of stalled responses costs a bit test each. */
    size_t above = budget_give_above(env->budget);
    for (struct pump *p = env->stalled->first; p != NULL && above != SIZE_MAX;) {
        struct pump *next = p->stall_next;
        if (p->flow != client && budget_gives(env->budget, above, p->flow) && can_give_way(p)) {
            give_way(p); /* may grant others, but removes only P from the list */
            above = budget_give_above(env->budget);
        }
        p = next;
    }
}

/* ---- handing slots to the socket ------------------------------------------ */

/* Ends the response once nothing is in flight; FAILED responses report an error. */
static void finish_if_idle(struct pump *pump)
{
    if (pump->src != NULL && (pump->failed || pump->stopping))
        drop_waiting(pump); /* what waits to be handed out will not be */
    if (pump->src == NULL || pump_busy(pump))
        return;
    if (!pump->eof && !pump->failed && !pump->stopping)
        return;
    stall_remove(pump);
    pump->src->ops->release(pump->src);
    pump->src = NULL;
    pump_free(pump);
    /* May start other responses that waited for this memory. */
    give(pump, pump->held);
    int status = pump->error < 0 ? pump->error : UV_ECANCELED;
    pump->done(pump, pump->failed || !pump->eof ? status : 0);
}

/* Writes of PUMP not handed out yet will not go: the response failed or
 * stops. */
static void drop_waiting(struct pump *pump)
{
    struct pump_slot *slots[2] = {pump->out, pump->queued};
    for (int i = 0; i < 2; i++) {
        if (slots[i] == NULL)
            continue;
        if (slots[i]->turn.item.node.queued)
            pump_sender_drop(pump->env->sender, &slots[i]->turn);
        slots[i]->busy = false;
    }
    pump->out = pump->queued = NULL;
}

/* Decides what SLOT hands the socket: the head before the first piece,
 * the chunk framing around it. */
static void frame_slot(struct pump *pump, struct pump_slot *slot)
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
    if (pump->chunked && slot->last)
        bufs[n++] = uv_buf_init((char *)last_chunk, sizeof last_chunk - 1);
    slot->nbufs = n;
    slot->at = 0;
    slot->granted = false;
}

static size_t rest_of(const struct pump_slot *slot)
{
    size_t bytes = 0;
    for (unsigned i = slot->at; i < slot->nbufs; i++)
        bytes += slot->bufs[i].len;
    return bytes;
}

/* N bytes of SLOT's rest went to the kernel (or into the wire buffer, to
 * WIRE when not NULL): its body bytes count as sent. */
static void advance(struct pump *pump, struct pump_slot *slot, size_t n, char *wire)
{
    size_t body = 0;
    while (n > 0 && slot->at < slot->nbufs) {
        uv_buf_t *b = &slot->bufs[slot->at];
        size_t k = n < b->len ? n : b->len;
        if (wire != NULL) {
            memcpy(wire, b->base, k);
            wire += k;
        }
        if (in_slot(slot, b))
            body += k;
        b->base += k;
        b->len -= k;
        n -= k;
        if (b->len == 0)
            slot->at++;
    }
    pump->sent += body;
    *pump->env->bytes_sent += body;
    if (pump->env->sent != NULL && body > 0)
        pump->env->sent(pump->env->sent_arg, pump->flow, body);
}

static void pump_on_wire(uv_write_t *req, int status);

/* The kernel took less of a step than it was given: the next bytes, at
 * most PUMP_WIRE of WANT, go into the wire buffer and wait for the socket;
 * the slot's rest stays free to give back. */
static void write_wire(struct pump *pump, struct pump_slot *slot, size_t want)
{
    size_t n = want < PUMP_WIRE ? want : PUMP_WIRE;
    advance(pump, slot, n, pump->wire);
    uv_buf_t buf = uv_buf_init(pump->wire, (unsigned)n);
    int rc = uv_write(&pump->wire_req, pump->stream, &buf, 1, pump_on_wire);
    if (rc < 0) {
        pump->failed = true;
        drop_waiting(pump);
        return;
    }
    pump->wire_busy = true;
    stall_add(pump);
    maybe_give_way(pump);
}

/* Hands the slots out, in the order they were filled, each at its turn:
 * as far as the socket takes them now, the next bytes then into the wire. */
static void write_on(struct pump *pump)
{
    struct pump_sender *snd = pump->env->sender;
    while (!pump->wire_busy && pump->out != NULL) {
        struct pump_slot *slot = pump->out;
        if (pump->failed || pump->stopping) {
            drop_waiting(pump);
            return;
        }
        if (slot->turn.item.node.queued)
            return; /* waits for its turn */
        size_t rest = rest_of(slot);
        if (rest == 0) {
            /* The slot is out: the next goes, and a fill may take this one. */
            slot->busy = false;
            pump->out = pump->queued;
            pump->queued = NULL;
            if (pump->out != NULL)
                frame_slot(pump, pump->out);
            if (!pump->eof)
                fill_next(pump);
            continue;
        }
        /* A slot takes one turn, for all its bytes, however many writes
         * the socket needs for them. */
        if (!slot->granted && snd != NULL && !pump_sender_admit(snd, &slot->turn, pump->flow, rest))
            return;
        slot->granted = true;
        if (pump->src->ops->rewind == NULL) {
            /* A source that cannot make its bytes again keeps its slots:
             * the slot goes whole, pinned until the kernel took it all. */
            int rc = uv_write(&pump->wire_req, pump->stream, slot->bufs + slot->at,
                              slot->nbufs - slot->at, pump_on_wire);
            if (rc < 0) {
                pump->failed = true;
                drop_waiting(pump);
                return;
            }
            pump->wire_busy = true;
            advance(pump, slot, rest, NULL); /* uv_write copied the buffers' list */
            return;
        }
        int rc = uv_try_write(pump->stream, slot->bufs + slot->at, slot->nbufs - slot->at);
        if (rc < 0 && rc != UV_EAGAIN) {
            pump->failed = true;
            drop_waiting(pump);
            return;
        }
        size_t took_now = rc > 0 ? (size_t)rc : 0;
        advance(pump, slot, took_now, NULL);
        if (took_now < rest)
            write_wire(pump, slot, rest - took_now);
    }
}

/* SLOT is filled: it goes after the one being handed out. */
static void write_slot(struct pump *pump, struct pump_slot *slot)
{
    if (pump->out != NULL) {
        pump->queued = slot;
        return;
    }
    pump->out = slot;
    frame_slot(pump, slot);
    write_on(pump);
}

static void pump_on_wire(uv_write_t *req, int status)
{
    struct pump *pump = container_of(req, struct pump, wire_req);
    pump->wire_busy = false;
    stall_update(pump);
    if (status < 0) {
        pump->failed = true;
        drop_waiting(pump);
        /* Nobody will read what a queued fill would produce. */
        if (pump->filling >= 0)
            gateway_cancel(&pump->fill.job);
    } else {
        write_on(pump);
        if (pump->out == NULL && !pump->eof && !pump->failed && !pump->stopping)
            fill_next(pump);
    }
    finish_if_idle(pump);
}

/* The slot's turn came: it goes on, which may end the response, even the
 * connection. */
static void slot_turn(struct pump_turn *t)
{
    struct pump_slot *slot = container_of(t, struct pump_slot, turn);
    struct pump *pump = slot->pump;
    slot->granted = true; /* its step goes now */
    write_on(pump);
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
    stall_update(pump);
    pump->gathering = NULL;
    if (status < 0 || pump->fill.rc < 0 || pump->stopping || pump->failed) {
        slot->busy = false;
        if (!pump->failed && !pump->stopping)
            pump->error = pump->fill.rc < 0 ? pump->fill.rc : status;
        pump->failed = true;
    } else {
        slot->len += pump->fill.len;
        slot->last = pump->eof = pump->fill.eof;
        if (pump->reread > 0) {
            size_t again = pump->fill.len < pump->reread ? pump->fill.len : pump->reread;
            pump->reread -= again;
            pump->env->budget->reread_bytes += again;
        }
        if (gathers(pump, slot)) {
            slot->busy = false;
            pump->gathering = slot;
        } else {
            write_slot(pump, slot);
        }
        if (!pump->eof && !pump->failed)
            fill_next(pump);
        if (pump->wire_busy)
            maybe_give_way(pump); /* a fill it could not give back is in */
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
        return;
    }
    if (src->ops->rewind != NULL)
        stall_update(pump); /* it may give way while its fill waits */
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
    pump->reread = 0;
    pump->out = pump->queued = NULL;
    pump->slot_held = !src->reserve_late;
    pump->error = 0;
    pump->wait.client = pump->flow; /* waiters take turns by client */
    if (!src->reserve_late) {
        size_t need = src->held + pump->alloc;
        if (!budget_take(pump->env->budget, &pump->wait, need, on_granted)) {
            pump->waiting = true;
            pump->wait_start = uv_now(pump->stream->loop);
            press(pump->env, pump->flow);
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
    /* A response that gave way asks for its slot again: others may give
     * way to it in turn. (Not from a source's ready: no re-entry there.) */
    if (pump->src->ops->ready == NULL && !pump->quiet)
        press(pump->env, pump->flow);
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

/* The last BYTES read were given back unsent: read them again. */
static void file_rewind(struct pump_source *src, size_t bytes)
{
    struct file_source *fs = container_of(src, struct file_source, base);
    fs->offset -= bytes;
    fs->left += bytes;
    src->remaining = fs->left;
}

static const struct pump_source_ops file_ops = {
    .fill = file_fill, .release = file_release, .rewind = file_rewind};

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
