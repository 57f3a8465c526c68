/* The writer: a response's framing and every socket write of it, for an
 * answer from memory and for the slots a pump hands up. */
#include "server/http/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "server/base/snapshot.h"
#include "server/base/util.h"

static const char crlf[] = "\r\n";
static const char last_chunk[] = "0\r\n\r\n";

static void write_on(struct writer *w);
static bool file_start(struct writer *w, struct pump_source *src);
static void file_stop(struct writer *w);
static void file_send(struct sender_wait *t);

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
    if (w->env->counts != NULL)
        w->env->counts->buffered_bytes += body;
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
    if (!chunked && w->env->sendfile && file_start(w, src))
        return 0;
    return pump_start(&w->pump, src);
}

bool writer_head_held(const struct writer *w)
{
    return writer_running(w) && w->head != NULL;
}

bool writer_nothing_sent(const struct writer *w)
{
    return w->head != NULL;
}

bool writer_running(const struct writer *w)
{
    return pump_running(&w->pump) || w->file.src != NULL;
}

size_t writer_queued(const struct writer *w)
{
    size_t queued = uv_stream_get_write_queue_size(w->stream);
    if (w->file.sock != NULL && w->file.sock->polling)
        queued++;
    return queued;
}

unsigned long long writer_sent(const struct writer *w)
{
    return w->sent;
}

void writer_stop(struct writer *w)
{
    if (w->file.src != NULL)
        file_stop(w);
    pump_stop(&w->pump);
}

/* ---- a file moved by sendfile --------------------------------------------- */

/* Worker thread: one piece, as far as the socket takes it now. The socket
 * does not block (its O_NONBLOCK is the stream's), so this waits only for
 * the disk: sendfile returns EAGAIN when the socket is full. */
static void file_work(struct gateway_job *job)
{
    struct writer_file *f = container_of(job, struct writer_file, job);
    /* emulate_disk: every piece is a pool read of the file, and waits for
     * the "disk" before its bytes go: its latency, and its new bytes at its
     * rate (bytes a piece the socket cut short had paid for are not paid
     * again). */
    f->emulated = pump_emulate_disk(&f->disk, uv_hrtime(), f->pay);
    off_t at = (off_t)f->job_offset;
    f->moved = 0;
    f->rc = 0;
    f->ended = false;
    while (f->moved < f->piece) {
        size_t step = f->piece - f->moved;
        if (step > PUMP_READ_STEP)
            step = PUMP_READ_STEP;
        ssize_t n = sendfile(f->job_sock, f->job_fd, &at, step);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            f->rc = errno == EAGAIN ? UV_EAGAIN : -errno;
            break;
        }
        if (n == 0) {
            f->ended = true; /* the file is shorter than it was */
            break;
        }
        f->moved += (size_t)n;
        if ((size_t)n < step) {
            f->rc = UV_EAGAIN; /* the socket took less: it is full */
            break;
        }
        if (f->moved < f->piece)
            gateway_give_way();
    }
}

static void file_next(struct writer *w);
static void file_head_written(uv_write_t *req, int status);
static void on_writable(uv_poll_t *poll, int status, int events);

static void sock_closed(uv_handle_t *h)
{
    struct writer_sock *sock = container_of((uv_poll_t *)h, struct writer_sock, poll);
    close(sock->fd);
    free(sock);
}

/* The response ends once nothing of it is in flight: its file and socket
 * descriptor go, and the connection is told. */
static void file_finish(struct writer *w)
{
    struct writer_file *f = &w->file;
    if (f->src == NULL || f->in_pool || f->head_busy || f->send.item.node.queued ||
        (f->sock != NULL && f->sock->polling))
        return;
    if (f->error == 0 && !f->stopping && f->left > 0)
        return; /* goes on */
    uv_close((uv_handle_t *)&f->sock->poll, sock_closed);
    f->sock = NULL;
    f->src->ops->release(f->src); /* closes the file */
    f->src = NULL;
    int status = f->error < 0 ? f->error : f->left > 0 ? UV_ECANCELED : 0;
    w->ops->done(w, status);
}

static void file_fail(struct writer *w, int error)
{
    if (w->file.error == 0)
        w->file.error = error;
}

static void file_after(struct gateway_job *job, int status)
{
    struct writer_file *f = container_of(job, struct writer_file, job);
    struct writer *w = container_of(f, struct writer, file);
    struct writer_counts *counts = w->env->counts;
    f->in_pool = false;
    if (status < 0) {
        file_fail(w, status);
        file_finish(w);
        return;
    }
    counts->sendfile_pieces++;
    if (f->emulated)
        counts->sendfile_emulated++;
    if (f->moved > 0) {
        f->offset += f->moved;
        f->left -= f->moved;
        w->sent += f->moved;
        *w->env->bytes_sent += f->moved;
        counts->sendfile_bytes += f->moved;
        if (w->env->sent != NULL)
            w->env->sent(w->env->sent_arg, w->client, f->moved);
    }
    if (f->ended && f->left > 0) {
        /* The length was promised: the connection closes. */
        counts->sendfile_truncated++;
        file_fail(w, -EIO);
    } else if (f->rc < 0 && f->rc != UV_EAGAIN) {
        file_fail(w, f->rc);
    }
    if (f->error == 0 && !f->stopping && f->rc == UV_EAGAIN && f->left > 0) {
        /* Wait for the client, holding nothing but the descriptors. */
        counts->sendfile_waits++;
        counts->sendfile_waiting++;
        int rc = uv_poll_start(&f->sock->poll, UV_WRITABLE, on_writable);
        if (rc == 0) {
            f->sock->polling = true;
            return;
        }
        counts->sendfile_waiting--;
        file_fail(w, rc);
    }
    file_next(w);
}

/* The piece's turn: the head first, if it has not gone, then the piece to
 * the pool. */
static void file_go(struct writer *w)
{
    struct writer_file *f = &w->file;
    if (f->error != 0 || f->stopping) {
        file_finish(w);
        return;
    }
    if (w->head != NULL) {
        /* Through the stream, like any write: after what it holds already
         * (uv_try_write takes nothing while its queue is not empty). */
        uv_buf_t buf = uv_buf_init((char *)w->head, (unsigned)w->head_len);
        w->head = NULL;
        int rc = uv_try_write(w->stream, &buf, 1);
        if (rc < 0 && rc != UV_EAGAIN) {
            file_fail(w, rc);
            file_finish(w);
            return;
        }
        size_t took = rc > 0 ? (size_t)rc : 0;
        if (took < buf.len) {
            buf.base += took;
            buf.len -= took;
            rc = uv_write(&w->wire_req, w->stream, &buf, 1, file_head_written);
            if (rc < 0) {
                file_fail(w, rc);
                file_finish(w);
                return;
            }
            f->head_busy = true; /* the piece follows once the head is out */
            return;
        }
    }
    f->job_sock = f->sock->fd;
    f->job_fd = f->fd;
    f->job_offset = f->offset;
    f->disk = pump_env_disk(w->env->pump);
    uint64_t end = f->offset + f->piece;
    f->pay =
        end > f->paid_to ? (size_t)(end - (f->offset > f->paid_to ? f->offset : f->paid_to)) : 0;
    if (end > f->paid_to)
        f->paid_to = end;
    struct gateway_cost cost = {.bytes = f->piece, .remaining = f->left, .client = w->client};
    int rc = gateway_submit(w->env->gateway, &f->job, GATEWAY_READ, cost, file_work, file_after);
    if (rc < 0) {
        file_fail(w, rc);
        file_finish(w);
        return;
    }
    f->in_pool = true;
}

static void file_head_written(uv_write_t *req, int status)
{
    struct writer *w = container_of(req, struct writer, wire_req);
    w->file.head_busy = false;
    if (status < 0) {
        file_fail(w, status);
        file_finish(w);
        return;
    }
    file_go(w);
}

static void file_send(struct sender_wait *t)
{
    struct writer_file *f = container_of(t, struct writer_file, send);
    file_go(container_of(f, struct writer, file));
}

/* The next piece, at its turn with the sender, charged its bytes (and the
 * head's, with the first). */
static void file_next(struct writer *w)
{
    struct writer_file *f = &w->file;
    if (f->error != 0 || f->stopping || f->left == 0) {
        file_finish(w);
        return;
    }
    f->piece = pump_env_piece(w->env->pump, f->left);
    size_t bytes = f->piece + (w->head != NULL ? w->head_len : 0);
    struct sender *snd = w->env->sender;
    if (snd != NULL && !sender_admit(snd, &f->send, w->client, bytes))
        return; /* file_send follows */
    file_go(w);
}

static void on_writable(uv_poll_t *poll, int status, int events)
{
    (void)events;
    struct writer_sock *sock = container_of(poll, struct writer_sock, poll);
    struct writer *w = sock->w;
    uv_poll_stop(poll);
    sock->polling = false;
    w->env->counts->sendfile_waiting--;
    if (status < 0)
        file_fail(w, status);
    file_next(w);
}

/* Starts SRC on the sendfile path if it is a plain range of a file and the
 * socket's descriptor can be had. Returns false (nothing taken) else. */
static bool file_start(struct writer *w, struct pump_source *src)
{
    struct writer_file *f = &w->file;
    uint64_t offset, len;
    int fd = pump_source_file(src, &offset, &len);
    uv_os_fd_t sock_fd;
    if (fd < 0 || len == 0 || w->env->gateway == NULL || w->env->counts == NULL ||
        uv_fileno((uv_handle_t *)w->stream, &sock_fd) < 0)
        return false;
    struct writer_sock *sock = malloc(sizeof *sock);
    if (sock == NULL)
        return false;
    sock->fd = fcntl(sock_fd, F_DUPFD_CLOEXEC, 0);
    sock->polling = false;
    sock->w = w;
    if (sock->fd < 0 || uv_poll_init_socket(w->stream->loop, &sock->poll, sock->fd) < 0) {
        if (sock->fd >= 0)
            close(sock->fd);
        free(sock);
        return false; /* the pump takes it */
    }
    *f = (struct writer_file){.src = src,
                              .sock = sock,
                              .fd = fd,
                              .offset = offset,
                              .left = len,
                              .paid_to = offset,
                              .send = {.go = file_send}};
    w->env->counts->sendfile_responses++;
    file_next(w);
    return true;
}

/* The response stops: what waits is dropped, a piece on the pool
 * cancelled if it has not started; done runs once nothing is in flight. */
static void file_stop(struct writer *w)
{
    struct writer_file *f = &w->file;
    f->stopping = true;
    if (f->send.item.node.queued)
        sender_drop(w->env->sender, &f->send);
    if (f->sock != NULL && f->sock->polling) {
        uv_poll_stop(&f->sock->poll);
        f->sock->polling = false;
        w->env->counts->sendfile_waiting--;
    }
    if (f->in_pool)
        gateway_cancel(&f->job);
    file_finish(w);
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
    w->file.send.go = file_send;
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
    if (w->file.src != NULL)
        file_stop(w);
    pump_stop(&w->pump);
}

void writer_free(struct writer *w)
{
    pump_free(&w->pump);
}

/* ---- the two paths' figures ----------------------------------------------- */

static const struct snap_def buffered_bytes_def = {
    .key = "buffered_bytes",
    .metric = "unclog_streamed_buffered_bytes_total",
    .kind = SNAP_COUNTER,
    .help = "Streamed response body bytes written from buffers the pool filled (the pump)."};
static const struct snap_def sendfile_bytes_def = {
    .key = "bytes",
    .metric = "unclog_sendfile_bytes_total",
    .kind = SNAP_COUNTER,
    .help = "Response body bytes moved from a file to the socket by sendfile (sendfile = auto)."};
static const struct snap_def sendfile_responses_def = {
    .key = "responses",
    .metric = "unclog_sendfile_responses_total",
    .kind = SNAP_COUNTER,
    .help = "Responses whose body went by sendfile."};
static const struct snap_def sendfile_pieces_def = {
    .key = "pieces",
    .metric = "unclog_sendfile_pieces_total",
    .kind = SNAP_COUNTER,
    .help = "sendfile pieces run on the threadpool (at most partition bytes each)."};
static const struct snap_def sendfile_waits_def = {
    .key = "waits",
    .metric = "unclog_sendfile_waits_total",
    .kind = SNAP_COUNTER,
    .help = "Times a sendfile piece found its socket full and the response waited for it to be "
            "writable, holding no buffer and no thread."};
static const struct snap_def sendfile_waiting_def = {
    .key = "waiting",
    .metric = "unclog_sendfile_waiting",
    .help = "Responses moved by sendfile that wait for their socket now."};
static const struct snap_def sendfile_emulated_def = {
    .key = "emulated",
    .metric = "unclog_sendfile_emulated_total",
    .kind = SNAP_COUNTER,
    .help = "sendfile pieces that emulate_disk made last longer."};
static const struct snap_def sendfile_truncated_def = {
    .key = "truncated",
    .metric = "unclog_sendfile_truncated_total",
    .kind = SNAP_COUNTER,
    .help = "Responses moved by sendfile whose file ended before the length their head promised: "
            "the connection closed."};

void writer_stats(const struct writer_counts *c, struct snapshot *s)
{
    snap_add(s, &buffered_bytes_def, c->buffered_bytes);
    snap_open(s, "sendfile", NULL);
    snap_add(s, &sendfile_bytes_def, c->sendfile_bytes);
    snap_add(s, &sendfile_responses_def, c->sendfile_responses);
    snap_add(s, &sendfile_pieces_def, c->sendfile_pieces);
    snap_add(s, &sendfile_waits_def, c->sendfile_waits);
    snap_add(s, &sendfile_waiting_def, c->sendfile_waiting);
    snap_add(s, &sendfile_emulated_def, c->sendfile_emulated);
    snap_add(s, &sendfile_truncated_def, c->sendfile_truncated);
    snap_close(s);
}
