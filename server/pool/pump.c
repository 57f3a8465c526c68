/* The pump: fills a response's slots on the pool, through the gateway
 * and the budget, and hands them up to its writer; gives memory way under
 * pressure. And the file source. */
#include "server/pool/pump.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/base/config.h"
#include "server/base/util.h"

static void fill_next(struct pump *pump);

void pump_init(struct pump *pump, const struct pump_env *env, const struct pump_out *out)
{
    *pump = (struct pump){.env = env, .out = out, .filling = -1};
}

void pump_set_client(struct pump *pump, uint64_t client)
{
    pump->client = client;
}

bool pump_running(const struct pump *pump)
{
    return pump->src != NULL;
}

bool pump_going(const struct pump *pump)
{
    return pump->src != NULL && !pump->failed && !pump->stopping;
}

bool pump_rewinds(const struct pump *pump)
{
    return pump->src != NULL && pump->src->ops->rewind != NULL;
}

bool pump_busy(const struct pump *pump)
{
    return pump->filling >= 0 || pump->slots[0].busy || pump->slots[1].busy || pump->waiting ||
           pump->blocked;
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
    budget_give(pump->env->budget, pump->client, bytes);
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

/* PUMP is listed while it might give way: its writer's socket is blocked,
 * or a fill it submitted may still wait in the gateway's queue
 * (can_give_way asks the gateway, when it matters, whether it still does). */
static void stall_update(struct pump *pump)
{
    if (pump->src != NULL && (pump->blocked || pump->filling >= 0))
        stall_add(pump);
    else
        stall_remove(pump);
}

/* Whether PUMP may give its slots back now: its slots hold memory of its
 * own, its source can make their bytes again (it rewinds, and has not
 * ended: a file source closes its file after the last piece), and either
 * its socket takes no more (a write waits) and nothing fills a slot, or
 * its fill still waits in the gateway's queue (give_way takes it back: it
 * read nothing). And what its writer holds of it is body bytes alone (the
 * writer's unsent). */
static bool can_give_way(const struct pump *pump)
{
    const struct pump_source *src = pump->src;
    bool queued_fill = pump->filling >= 0 && gateway_withdrawable(&pump->fill.job);
    bool idle_wire = pump->blocked && pump->filling < 0;
    return src != NULL && (queued_fill || idle_wire) && pump->slot_held && !pump->eof &&
           !pump->failed && !pump->stopping && src->ops->rewind != NULL &&
           pump->gathering == NULL && pump->held > src->held && pump->out->unsent(pump) != SIZE_MAX;
}

static void drop_waiting(struct pump *pump);

/* PUMP gives back every slot it filled and has not sent (the bytes its
 * writer copied go on): its source rewinds over them, and the next fill
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
    size_t unsent = pump->out->unsent(pump);
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
    if (!pump->blocked) {
        /* No write will come back to start the next fill: it asks for its
         * slot again now, and waits its turn (without pressing others:
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
        budget_gives_way(pump->env->budget, pump->client))
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
        if (p->client != client && budget_gives(env->budget, above, p->client) && can_give_way(p)) {
            give_way(p); /* may grant others, but removes only P from the list */
            above = budget_give_above(env->budget);
        }
        p = next;
    }
}

/* ---- what the writer tells the pump ------------------------------------- */

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
    pump->out->done(pump, pump->failed || !pump->eof ? status : 0);
}

/* The slots handed up and not sent will not go: the response failed,
 * stops or gives way. The writer forgets them; only a slot being filled
 * stays busy. */
static void drop_waiting(struct pump *pump)
{
    pump->out->drop(pump);
    for (int i = 0; i < PUMP_SLOTS; i++) {
        if (i != pump->filling)
            pump->slots[i].busy = false;
    }
}

void pump_drop(struct pump *pump)
{
    drop_waiting(pump);
}

void pump_fail(struct pump *pump)
{
    pump->failed = true;
    drop_waiting(pump);
}

void pump_settle(struct pump *pump)
{
    finish_if_idle(pump);
}

void pump_slot_sent(struct pump *pump, unsigned slot)
{
    pump->slots[slot].busy = false;
    if (!pump->eof)
        fill_next(pump);
}

void pump_blocked(struct pump *pump, bool stalls)
{
    pump->blocked = true;
    if (stalls) {
        stall_add(pump);
        maybe_give_way(pump);
    }
}

void pump_unblocked(struct pump *pump, int status)
{
    pump->blocked = false;
    stall_update(pump);
    if (status < 0) {
        pump_fail(pump);
        /* Nobody will read what a queued fill would produce. */
        if (pump->filling >= 0)
            gateway_cancel(&pump->fill.job);
    }
}

void pump_wrote(struct pump *pump, bool idle)
{
    if (idle && pump->src != NULL && !pump->eof && !pump->failed && !pump->stopping)
        fill_next(pump);
    finish_if_idle(pump);
}

/* SLOT is filled: up it goes, after those handed up before. */
static void hand_up(struct pump *pump, struct pump_slot *slot, bool last)
{
    pump->handed = true;
    pump->out->filled(pump, (unsigned)(slot - pump->slots), slot->buf, slot->len, last);
}

bool pump_emulate_disk(const struct disk_emulation *disk, uint64_t started_ns, size_t bytes)
{
    if (disk->latency_ms == 0 && disk->bytes_per_s == 0)
        return false;
    uint64_t want = (uint64_t)disk->latency_ms * 1000000;
    if (disk->bytes_per_s > 0)
        want += (uint64_t)((double)bytes * 1e9 / (double)disk->bytes_per_s);
    uint64_t spent = uv_hrtime() - started_ns;
    if (want <= spent)
        return false;
    uint64_t rest = want - spent;
    struct timespec ts = {.tv_sec = (time_t)(rest / 1000000000),
                          .tv_nsec = (long)(rest % 1000000000)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
    return true;
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

/* Whether SLOT, just filled, waits for more before it goes up: the first
 * slot of a source that commits late waits to be full, or for the end. */
static bool gathers(const struct pump *pump, const struct pump_slot *slot)
{
    return pump->src->commit_late && !pump->handed && !pump->eof && slot->len < pump->alloc;
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
        pump->eof = pump->fill.eof;
        if (pump->reread > 0) {
            size_t again = pump->fill.len < pump->reread ? pump->fill.len : pump->reread;
            pump->reread -= again;
            pump->env->budget->reread_bytes += again;
        }
        if (gathers(pump, slot)) {
            slot->busy = false;
            pump->gathering = slot;
        } else {
            hand_up(pump, slot, pump->eof);
        }
        if (!pump->eof && !pump->failed)
            fill_next(pump);
        if (pump->blocked)
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
    if (!first && !budget_try(pump->env->budget, pump->client, pump->alloc))
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

size_t pump_env_piece(const struct pump_env *env, uint64_t remaining)
{
    return pump_piece(&env->partition, gateway_short_waiting(env->gateway, false), remaining,
                      false);
}

struct disk_emulation pump_env_disk(const struct pump_env *env)
{
    return env->disk;
}

int pump_source_file(struct pump_source *src, uint64_t *offset, uint64_t *len)
{
    return src->ops->file != NULL ? src->ops->file(src, offset, len) : -1;
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
    struct gateway_cost c = {.bytes = cost, .remaining = src->remaining, .client = pump->client};
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
    uint64_t now = uv_now(pump->env->gateway->loop);
    pump->env->budget->waited_ms += now - pump->wait_start;
    pump->waiting = false;
    took(pump, w->bytes);
    fill_next(pump);
    finish_if_idle(pump);
}

int pump_start(struct pump *pump, struct pump_source *src)
{
    /* The slots are sized for the largest piece the partition gives now,
     * and no larger than the budget: a `whole` file bigger than
     * max_buffer_memory is read in pieces of that size, or it could start
     * only once nothing else held any memory, which a steady stream of small
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
    pump->gathering = NULL;
    pump->handed = false;
    pump->eof = pump->failed = pump->stopping = false;
    pump->asked = 0;
    pump->reread = 0;
    pump->slot_held = !src->reserve_late;
    pump->error = 0;
    pump->wait.client = pump->client; /* waiters take turns by client */
    if (!src->reserve_late) {
        size_t need = src->held + pump->alloc;
        if (!budget_take(pump->env->budget, &pump->wait, need, on_granted)) {
            pump->waiting = true;
            pump->wait_start = uv_now(pump->env->gateway->loop);
            press(pump->env, pump->client);
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
    pump->wait_start = uv_now(pump->env->gateway->loop);
    /* A response that gave way asks for its slot again: others may give
     * way to it in turn. (Not from a source's ready: no re-entry there.) */
    if (pump->src->ops->ready == NULL && !pump->quiet)
        press(pump->env, pump->client);
    return false;
}

struct zstate *pump_zstate_take(struct pump *pump, const struct zparams *p)
{
    return zstates_take(pump->env->zstates, p);
}

void pump_zstate_give(struct pump *pump, struct zstate *s)
{
    zstates_give(pump->env->zstates, s);
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

/* ---- the file source ------------------------------------------------------ */

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
