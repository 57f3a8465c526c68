/* The writer: a response's framing and every socket write of it, for an
 * answer from memory and for the slots a pump hands up. */
#include "server/http/writer.h"

#include <stdio.h>
#include <string.h>

#include "server/base/util.h"

static const char crlf[] = "\r\n";
static const char last_chunk[] = "0\r\n\r\n";

static void write_on(struct writer *w);

/* ---- a streamed body: the slots the pump hands up ------------------------- */

/* Whether SLOT's buffer holds B (its rest may point into it). */
static bool in_slot(const struct writer_slot *slot, const uv_buf_t *b)
{
    return slot->buf != NULL && b->base >= slot->buf && b->base <= slot->buf + slot->len;
}

/* The body bytes of the slot being handed out that are still in it, or
 * SIZE_MAX when what is left is not body alone (a head, a chunk's frame). */
static size_t out_rest(const struct writer *w)
{
    const struct writer_slot *slot = w->out;
    if (slot == NULL || slot->at == slot->nbufs)
        return 0;
    if (slot->nbufs - slot->at > 1 || !in_slot(slot, &slot->bufs[slot->at]))
        return SIZE_MAX;
    return slot->bufs[slot->at].len;
}

/* Decides what SLOT hands the socket: the head before the first piece,
 * the chunk framing around it. */
static void frame_slot(struct writer *w, struct writer_slot *slot)
{
    uv_buf_t *bufs = slot->bufs;
    unsigned n = 0;
    if (w->head != NULL) {
        bufs[n++] = uv_buf_init((char *)w->head, (unsigned)w->head_len);
        w->head = NULL;
    }
    if (w->chunked && slot->len > 0) {
        int len = snprintf(slot->frame, sizeof slot->frame, "%zx\r\n", slot->len);
        bufs[n++] = uv_buf_init(slot->frame, (unsigned)len);
    }
    if (slot->len > 0)
        bufs[n++] = uv_buf_init(slot->buf, (unsigned)slot->len);
    if (w->chunked && slot->len > 0)
        bufs[n++] = uv_buf_init((char *)crlf, 2);
    if (w->chunked && slot->last)
        bufs[n++] = uv_buf_init((char *)last_chunk, sizeof last_chunk - 1);
    slot->nbufs = n;
    slot->at = 0;
    slot->granted = false;
}

static size_t rest_of(const struct writer_slot *slot)
{
    size_t bytes = 0;
    for (unsigned i = slot->at; i < slot->nbufs; i++)
        bytes += slot->bufs[i].len;
    return bytes;
}

/* N bytes of SLOT's rest went to the kernel (or into the wire buffer, to
 * WIRE when not NULL): its body bytes count as sent. */
static void advance(struct writer *w, struct writer_slot *slot, size_t n, char *wire)
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
    w->sent += body;
    *w->env->bytes_sent += body;
    if (w->env->sent != NULL && body > 0)
        w->env->sent(w->env->sent_arg, w->client, body);
}

static void on_wire(uv_write_t *req, int status)
{
    struct writer *w = container_of(req, struct writer, wire_req);
    w->wire_busy = false;
    pump_unblocked(&w->pump, status);
    if (status >= 0)
        write_on(w);
    pump_wrote(&w->pump, w->out == NULL);
}

/* The kernel took less of a step than it was given: the next bytes, at
 * most WRITER_WIRE of WANT, go into the wire buffer and wait for the
 * socket; the slot's rest stays free to give back. */
static void write_wire(struct writer *w, struct writer_slot *slot, size_t want)
{
    size_t n = want < WRITER_WIRE ? want : WRITER_WIRE;
    advance(w, slot, n, w->wire);
    uv_buf_t buf = uv_buf_init(w->wire, (unsigned)n);
    if (uv_write(&w->wire_req, w->stream, &buf, 1, on_wire) < 0) {
        pump_fail(&w->pump);
        return;
    }
    w->wire_busy = true;
    pump_blocked(&w->pump, true); /* may give way: drops the slots handed up */
}

/* Hands the slots out, in the order they were handed up, each at its turn:
 * as far as the socket takes them now, the next bytes then into the wire. */
static void write_on(struct writer *w)
{
    struct sender *snd = w->env->sender;
    while (!w->wire_busy && w->out != NULL) {
        struct writer_slot *slot = w->out;
        if (!pump_going(&w->pump)) {
            pump_drop(&w->pump);
            return;
        }
        if (slot->send.item.node.queued)
            return; /* waits for its turn */
        size_t rest = rest_of(slot);
        if (rest == 0) {
            /* The slot is out: the next goes, and a fill may take this one. */
            w->out = w->queued;
            w->queued = NULL;
            if (w->out != NULL)
                frame_slot(w, w->out);
            pump_slot_sent(&w->pump, slot->index);
            continue;
        }
        /* A slot takes one turn, for all its bytes, however many writes
         * the socket needs for them. */
        if (!slot->granted && snd != NULL && !sender_admit(snd, &slot->send, w->client, rest))
            return;
        slot->granted = true;
        if (!pump_rewinds(&w->pump)) {
            /* A source that cannot make its bytes again keeps its slots:
             * the slot goes whole, pinned until the kernel took it all. */
            int rc = uv_write(&w->wire_req, w->stream, slot->bufs + slot->at,
                              slot->nbufs - slot->at, on_wire);
            if (rc < 0) {
                pump_fail(&w->pump);
                return;
            }
            w->wire_busy = true;
            pump_blocked(&w->pump, false);
            advance(w, slot, rest, NULL); /* uv_write copied the buffers' list */
            return;
        }
        int rc = uv_try_write(w->stream, slot->bufs + slot->at, slot->nbufs - slot->at);
        if (rc < 0 && rc != UV_EAGAIN) {
            pump_fail(&w->pump);
            return;
        }
        size_t took_now = rc > 0 ? (size_t)rc : 0;
        advance(w, slot, took_now, NULL);
        if (took_now < rest)
            write_wire(w, slot, rest - took_now);
    }
}

/* The slot's turn came: it goes on, which may end the response, even the
 * connection. */
static void slot_send(struct sender_wait *t)
{
    struct writer_slot *slot = container_of(t, struct writer_slot, send);
    struct writer *w = slot->w;
    slot->granted = true; /* its step goes now */
    write_on(w);
    pump_settle(&w->pump);
}

/* The pump handed slot INDEX up: it goes after the one being handed out. */
static void on_filled(struct pump *pump, unsigned index, char *buf, size_t len, bool last)
{
    struct writer *w = container_of(pump, struct writer, pump);
    struct writer_slot *slot = &w->slots[index];
    slot->buf = buf;
    slot->len = len;
    slot->last = last;
    if (w->out != NULL) {
        w->queued = slot;
        return;
    }
    w->out = slot;
    frame_slot(w, slot);
    write_on(w);
}

/* What the pump may take back: the body bytes not out of their slots yet,
 * unless a head or a frame is among what is left. */
static size_t on_unsent(const struct pump *pump)
{
    const struct writer *w = container_of(pump, const struct writer, pump);
    if (w->head != NULL && (w->out != NULL || w->queued != NULL))
        return SIZE_MAX;
    size_t rest = out_rest(w);
    if (rest == SIZE_MAX)
        return SIZE_MAX;
    return rest + (w->queued != NULL ? w->queued->len : 0);
}

/* The slots handed up will not go: they leave their turns. */
static void on_drop(struct pump *pump)
{
    struct writer *w = container_of(pump, struct writer, pump);
    struct writer_slot *slots[2] = {w->out, w->queued};
    for (int i = 0; i < 2; i++) {
        if (slots[i] != NULL && slots[i]->send.item.node.queued)
            sender_drop(w->env->sender, &slots[i]->send);
    }
    w->out = w->queued = NULL;
}

static void on_done(struct pump *pump, int status)
{
    struct writer *w = container_of(pump, struct writer, pump);
    w->ops->done(w, status);
}

static const struct pump_out writer_pump_out = {
    .filled = on_filled, .unsent = on_unsent, .drop = on_drop, .done = on_done};

int writer_start(struct writer *w, struct pump_source *src, const char *head, size_t head_len,
                 bool chunked)
{
    w->head = head;
    w->head_len = head_len;
    w->chunked = chunked;
    w->sent = 0;
    w->out = w->queued = NULL;
    return pump_start(&w->pump, src);
}

bool writer_head_held(const struct writer *w)
{
    return pump_running(&w->pump) && w->head != NULL;
}

bool writer_nothing_sent(const struct writer *w)
{
    return w->head != NULL;
}

bool writer_running(const struct writer *w)
{
    return pump_running(&w->pump);
}

unsigned long long writer_sent(const struct writer *w)
{
    return w->sent;
}

void writer_stop(struct writer *w)
{
    pump_stop(&w->pump);
}

/* ---- an answer from memory ------------------------------------------------ */

static void on_answer_written(uv_write_t *req, int status)
{
    struct writer *w = container_of(req, struct writer, answer_req);
    w->ops->written(w, status);
}

/* Hands the answer to the socket: at once if TRY_NOW and the kernel takes
 * it whole (returns 1), else its rest with a write (0); negative when the
 * socket failed. */
static int issue(struct writer *w, bool try_now)
{
    uv_buf_t *out = w->answer;
    unsigned n = w->answer_n;
    *w->env->bytes_sent += w->answer_len;
    w->ops->issuing(w, w->answer_len);
    if (try_now) {
        int rc = uv_try_write(w->stream, out, n);
        if (rc < 0 && rc != UV_EAGAIN)
            return rc;
        size_t done = rc > 0 ? (size_t)rc : 0;
        for (; n > 0 && done >= out->len; out++, n--)
            done -= out->len;
        if (n == 0) {
            if (w->env->sender != NULL)
                sender_count_whole(w->env->sender);
            return 1;
        }
        out->base += done;
        out->len -= done;
    }
    int rc = uv_write(&w->answer_req, w->stream, out, n, on_answer_written);
    return rc < 0 ? rc : 0;
}

/* The answer's turn with the sender came. */
static void answer_send(struct sender_wait *t)
{
    struct writer *w = container_of(t, struct writer, answer_send);
    int rc = issue(w, false);
    if (rc < 0)
        w->ops->written(w, rc);
}

int writer_answer(struct writer *w, char *head, size_t head_len, char *body, size_t len,
                  bool try_first)
{
    w->answer[0] = uv_buf_init(head, (unsigned)head_len);
    w->answer[1] = uv_buf_init(body, (unsigned)len);
    w->answer_n = len ? 2 : 1;
    w->answer_len = len;
    struct sender *snd = w->env->sender;
    if (snd != NULL && !sender_admit(snd, &w->answer_send, w->client, head_len + len))
        return 0;
    return issue(w, try_first);
}

/* ---- the writer ----------------------------------------------------------- */

void writer_init(struct writer *w, uv_stream_t *stream, const struct writer_env *env,
                 const struct writer_ops *ops)
{
    *w = (struct writer){.stream = stream, .env = env, .ops = ops};
    pump_init(&w->pump, env->pump, &writer_pump_out);
    w->answer_send.go = answer_send;
    for (unsigned i = 0; i < PUMP_SLOTS; i++) {
        w->slots[i].w = w;
        w->slots[i].index = i;
        w->slots[i].send.go = slot_send;
    }
}

void writer_set_client(struct writer *w, uint64_t client)
{
    w->client = client;
    pump_set_client(&w->pump, client);
}

void writer_close(struct writer *w)
{
    if (w->env->sender != NULL)
        sender_drop(w->env->sender, &w->answer_send);
    pump_stop(&w->pump);
}

void writer_free(struct writer *w)
{
    pump_free(&w->pump);
}
