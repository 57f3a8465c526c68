#ifndef UNCLOG_WRITER_H
#define UNCLOG_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "server/http/sender.h"
#include "server/pool/pump.h"

/* The writer: every byte of a response goes to the socket here, one per
 * connection. It owns the response's HTTP framing (the head, chunked
 * framing: each chunk's size line, its CRLF, the last chunk) and every
 * socket write, each at its client's turn with the sender (sender.h):
 *
 * - an answer from memory (a head, and a body the connection holds):
 *   writer_answer, which tries the kernel at once while the request is
 *   dispatched;
 * - a streamed body: writer_start runs the writer's pump
 *   (server/pool/pump.h), which fills slots on the pool and hands each up
 *   filled; the writer frames it and hands it to the socket, and tells the
 *   pump when the slot is free again.
 *
 * A slot of a source that can rewind (a file) goes from the slot itself as
 * far as the kernel takes it at once (uv_try_write); when it takes less,
 * the next few bytes are copied into the writer's small wire buffer, which
 * alone uv_write pins until the client reads, and the pump is told its
 * socket is blocked: the slot's rest may be given back meanwhile
 * (docs/design/memory.md). A slot of a source that cannot rewind (a
 * deflate) goes whole with uv_write.
 *
 * With sendfile on, a streamed body that is a plain range of a regular
 * file (pump_source_file) and needs no framing skips the pump: after its
 * head, the writer moves it from the file to the socket with sendfile(2),
 * a piece at a time (the pump's piece rule), each piece at its client's
 * turn and run on the pool through the gateway. When the socket takes
 * less, it waits for the socket to be writable, holding no buffer and no
 * thread (docs/design/sendfile.md). */

/* What every writer of a server shares. Owned by the server. */
struct writer_env {
    const struct pump_env *pump; /* where the writers' pumps fill from */
    struct sender *sender;       /* whose turn it is to write; NULL: every write goes at once */
    uint64_t *bytes_sent;        /* the server's count of body bytes, added to as they go */
    /* Told of each streamed piece as it is written: its client and its
     * body bytes. NULL: nobody. */
    void (*sent)(void *arg, uint64_t client, size_t bytes);
    void *sent_arg;               /* its argument */
    struct gateway *gateway;      /* where sendfile pieces run */
    bool sendfile;                /* sendfile = auto: file ranges move by sendfile(2) */
    struct writer_counts *counts; /* the server's counts of the two paths */
};

/* How the server's streamed bodies went: written from slots the pump
 * filled, or moved by sendfile. Loop thread. */
struct writer_counts {
    uint64_t buffered_bytes;     /* body bytes written from the pump's slots */
    uint64_t sendfile_bytes;     /* body bytes moved by sendfile */
    uint64_t sendfile_responses; /* responses that took the sendfile path */
    uint64_t sendfile_pieces;    /* sendfile pieces run (on the pool) */
    uint64_t sendfile_waits;     /* times a piece found the socket full: it waits to be writable */
    uint64_t sendfile_emulated;  /* pieces emulate_disk made slower */
    uint64_t sendfile_truncated; /* responses whose file ended before its promised length */
    uint64_t sendfile_waiting;   /* responses waiting for their socket now (a gauge) */
};

struct writer;

/* What a writer tells its connection. Loop thread, each. */
struct writer_ops {
    /* An answer from memory is about to go to the socket with LEN body
     * bytes (now, or at its turn). */
    void (*issuing)(struct writer *w, size_t len);
    /* An answer from memory that did not go whole at once is in the
     * kernel's hands (STATUS 0) or failed (negative). */
    void (*written)(struct writer *w, int status);
    /* A streamed response ended: 0 when every byte is in the kernel's
     * hands, else negative (the fill's error, else UV_ECANCELED). After a
     * failure the connection must be closed, unless writer_nothing_sent:
     * then another response may still go in its place. */
    void (*done)(struct writer *w, int status);
};

/* The bytes a blocked stream copies to wait for its client. */
#define WRITER_WIRE ((size_t)2 << 10)

/* A slot the pump handed up, as the writer hands it to the socket. */
struct writer_slot {
    struct writer *w;
    char *buf; /* the pump's */
    size_t len;
    unsigned index;          /* in the pump */
    bool last;               /* the source's last */
    bool granted;            /* its turn came: the rest of its bytes go without asking */
    char frame[24];          /* the chunk-size line when chunked */
    struct sender_wait send; /* waiting for its turn to be written */
    uv_buf_t bufs[5];        /* what it hands the socket, set as it starts: the rest from AT */
    unsigned nbufs, at;
};

/* The socket's own descriptor, for sendfile: a dup() of the stream's, so
 * that it stays valid while a piece runs on the pool whatever becomes of
 * the stream, and so that a uv_poll_t may watch it (a descriptor libuv's
 * stream watches already cannot be watched twice). Allocated for each
 * sendfile response; freed by its poll's close callback, which closes fd. */
struct writer_sock {
    uv_poll_t poll;
    struct writer *w;
    int fd;
    bool polling; /* waits for the socket to be writable */
};

/* A response moved by sendfile (docs/design/sendfile.md). */
struct writer_file {
    struct pump_source *src; /* owns the file; NULL unless this path runs */
    struct writer_sock *sock;
    int fd;                /* the file: src's */
    uint64_t offset, left; /* what is still to go */
    uint64_t paid_to;      /* emulate_disk: the bytes before it were paid for at its rate */
    struct sender_wait send;
    bool stopping, in_pool, head_busy;
    int error; /* the first failure, or 0 */
    /* One piece on the pool: what its work reads and writes. */
    struct gateway_job job;
    int job_sock, job_fd;
    uint64_t job_offset;
    size_t piece;
    size_t pay; /* emulate_disk: the bytes of the piece not "read" before */
    struct disk_emulation disk;
    size_t moved;  /* bytes sendfile moved */
    int rc;        /* 0, UV_EAGAIN (the socket is full), or a negative errno */
    bool ended;    /* the file ended before the piece did */
    bool emulated; /* emulate_disk slept */
};

/* Embedded in its connection. */
struct writer {
    uv_stream_t *stream;
    const struct writer_env *env;
    const struct writer_ops *ops;
    uint64_t client; /* the client, for the sender's turns */
    struct pump pump;
    /* A streamed response: its head (sent with the first slot; NULL once
     * it is framed), framing, and the body bytes handed to the socket. */
    const char *head;
    size_t head_len;
    bool chunked;
    unsigned long long sent;
    struct writer_slot slots[PUMP_SLOTS];
    /* The slot being handed to the socket, and the one handed up after it. */
    struct writer_slot *out, *queued;
    uv_write_t wire_req; /* a write of wire[] (or a pinned slot) waits for the socket */
    bool wire_busy;
    char wire[WRITER_WIRE];
    /* An answer from memory, waiting for its turn or its write. */
    uv_write_t answer_req;
    struct sender_wait answer_send;
    uv_buf_t answer[2];
    unsigned answer_n;
    size_t answer_len;
    struct writer_file file; /* a response moved by sendfile */
};

/* Prepares an idle writer to STREAM in ENV, telling OPS. */
void writer_init(struct writer *w, uv_stream_t *stream, const struct writer_env *env,
                 const struct writer_ops *ops);

/* The client its writes and fills count for, from now on. */
void writer_set_client(struct writer *w, uint64_t client);

/* HEAD and LEN bytes of BODY (neither copied: they must live until the
 * write is done) to the socket, at the client's turn. TRY_FIRST: if the
 * turn is now, the kernel is tried at once. Returns 1 when the kernel took
 * them whole now (nothing follows), 0 when they wait for their turn or a
 * write (written follows), or a negative UV_E* code. */
int writer_answer(struct writer *w, char *head, size_t head_len, char *body, size_t len,
                  bool try_first);

/* Streams SRC after HEAD (not copied: it must live until done), with
 * Transfer-Encoding chunked framing if CHUNKED. HEAD goes out with the
 * first slot. Takes ownership of SRC even on failure. Returns 0, or a
 * negative UV_E* code (done will not run). */
int writer_start(struct writer *w, struct pump_source *src, const char *head, size_t head_len,
                 bool chunked);

/* True while a streamed response runs and no byte of it has been framed:
 * it may still be stopped and another response sent in its place. */
bool writer_head_held(const struct writer *w);

/* After done: true when no byte of the streamed response went out, its
 * head included. */
bool writer_nothing_sent(const struct writer *w);

/* True while a streamed response runs (until done). */
bool writer_running(const struct writer *w);

/* The body bytes of the streamed response handed to the socket so far. */
unsigned long long writer_sent(const struct writer *w);

/* Bytes that wait for the client to read: the stream's write queue, or 1
 * while a response moved by sendfile waits for its socket. */
size_t writer_queued(const struct writer *w);

/* The streamed response stops: done runs once its fill and writes are
 * back. */
void writer_stop(struct writer *w);

/* The connection closes: the answer waiting for its turn will not go, and
 * the streamed response stops. */
void writer_close(struct writer *w);

struct snapshot;

/* Adds the two paths' counts C to S: "buffered_bytes", and the object
 * "sendfile". */
void writer_stats(const struct writer_counts *c, struct snapshot *s);

/* Frees what the writer keeps between responses. Not while it runs. */
void writer_free(struct writer *w);

#endif
