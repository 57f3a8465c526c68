#ifndef UNCLOG_PUMP_H
#define UNCLOG_PUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <limits.h>
#include <sys/stat.h>
#include <uv.h>

#include "server/pool/budget.h"
#include "server/base/config.h"
#include "server/base/pass.h"
#include "server/pool/gateway.h"
#include "server/pool/share.h"
#include "server/pool/zstates.h"

struct snapshot;

/* The chunked reader. A pump moves bytes that a *source* produces on the
 * threadpool (file reads, deflate slices) to a connection's socket:
 *
 *   fill slot A on the pool -> write A -> fill slot B -> write B -> fill A ...
 *
 * At most one fill is in flight, and a fill starts only when a slot is free,
 * i.e. when its previous contents have been written to the socket. With two
 * slots, a response never holds more than two buffers of one piece each,
 * however large the file and however slow the client.
 *
 * The pump alone decides how much input each fill takes (its *piece*). For
 * a source that reads a file (a file range, a multipart byterange set, a
 * file deflated on the fly) it applies pump_piece to the partition as it is
 * at that fill; a source that reads no file (a request body) names its own
 * slice. A response's slots are sized when it starts, for the largest piece
 * the partition gives then; a later, larger partition is capped at that.
 *
 * The head goes out in the same write as the first slot. A source that
 * commits late (a request body, whose own failure deserves a status) keeps
 * it back longer: its fills gather in the first slot until the slot is full
 * or the source has ended, and only then do head and slot go out together.
 *
 * The memory comes from the server's budget (server/pool/budget.h): a response
 * starts once its source's own buffers and one slot are reserved, and uses
 * a second slot only when the budget has room for it then. Slots are freed
 * when the response ends, so an idle connection holds none. A source fed
 * from elsewhere (a request body) *reserves late*: nothing as it starts; it
 * asks for its buffers as its input arrives (pump_reserve), and its first
 * slot is reserved as its first fill is about to start. */

struct pump_source;

struct pump_source_ops {
    /* Worker thread: takes at most PIECE bytes of input (the pump's choice:
     * bytes of the file, or of the body slice; never more than the PIECE_MAX
     * given to size) and writes what they make into BUF (CAP bytes); sets
     * *LEN and, after the last piece, *EOF. Returns 0 or a negative errno.
     * Touches only the source. */
    int (*fill)(struct pump_source *src, size_t piece, char *buf, size_t cap, size_t *len,
                bool *eof);
    /* Loop thread: release everything the source owns, itself included. */
    void (*release)(struct pump_source *src);
    /* Optional, loop thread: whether a fill would have input now. A source
     * fed from elsewhere (a request body) says no until it has some, and
     * then calls pump_kick. */
    bool (*ready)(struct pump_source *src);
    /* Optional, loop thread, once as the response starts: pieces will be at
     * most PIECE_MAX input bytes. Sets `held` for that and returns the bytes
     * a slot needs. Without it a slot holds PIECE_MAX: what the source reads
     * is what it sends. */
    size_t (*size)(struct pump_source *src, size_t piece_max);
    /* Optional, loop thread, with no fill in flight and before the last
     * piece: the last BYTES the source made were not sent and their memory
     * is given back (give_way, below): the next fills make them again.
     * Only a source that can (a file read); without it, a response keeps
     * what it filled. */
    void (*rewind)(struct pump_source *src, size_t bytes);
};

/* What a source tells the pump. */
struct pump_source {
    const struct pump_source_ops *ops;
    enum gateway_class cls; /* the job class its fills are counted under */
    bool reads_file;        /* its fills read a file: cut by pump_piece, emulate_disk applies */
    size_t slice;           /* a source that reads no file: the input a fill takes, its own */
    uint64_t remaining;     /* bytes still to take in (read or deflate); fill keeps it current */
    size_t held;            /* bytes the source itself holds (input, zlib): budgeted */
    struct pump *pump;      /* the pump running it, for pump_kick */
    /* The head waits until the first slot is full or the source has ended.
     * Its fills may then get a CAP smaller than what their piece makes:
     * they keep the rest of their input for the next fill. */
    bool commit_late;
    /* Nothing is reserved as it starts (held is 0): ready asks pump_reserve
     * for what the source needs as it needs it, and the first slot is
     * reserved once ready first says yes. */
    bool reserve_late;
};

/* The partition file reads are cut by: a size in bytes, CONFIG_WHOLE, or
 * CONFIG_AUTO_SIZE, whose pieces are MIN while short work waits for the
 * pool (but a read's short rest goes whole) and MAX otherwise. */
struct pump_partition {
    size_t size, min, max;
};

/* The largest piece of a file: `whole` of a file over 4 GiB still fits
 * uv_buf_t's 32-bit length (it then takes a few reads). */
#define PUMP_PIECE_MAX ((size_t)1 << 30)

/* The piece rule: the bytes of a file the next fill reads, when REMAINING
 * are left, cut by PARTITION, SHORT_WAITING telling whether short work
 * waits for the pool, DEFLATES whether the piece is deflated as it is read.
 * A size: that size; whole: all that is left; auto: min while short work
 * waits and more than SCHED_SHORT_BYTES remain (or the piece deflates),
 * else max (or min, if larger). Never more than REMAINING or PUMP_PIECE_MAX,
 * and at least 1. Pure. */
size_t pump_piece(const struct pump_partition *partition, bool short_waiting, uint64_t remaining,
                  bool deflates);

/* The loop's writes, shared by client (server/pool/share.h): owns the
 * share, whose passes the loop's pass service (server/base/pass.h) begins;
 * a write that waits wakes the service, so that the loop does not block
 * while it waits. Owned by the server, one per loop. */
struct pump_sender {
    struct share share;
    struct pass_sub sub; /* subscribed to the pass service */
    struct pass *pass;
    uint64_t whole_at_once; /* answers written whole at once (conn.c's issue_out) */
};

/* A write that takes its turn through the sender: embedded in its owner
 * (a pump slot, a connection's in-memory response), which GO hands to the
 * socket when its turn comes. */
struct pump_turn {
    struct share_item item; /* item.node.queued: it waits */
    void (*go)(struct pump_turn *t);
};

/* Loop thread: T, BYTES of CLIENT, wants to be written. Returns true when
 * it goes now (the caller writes it); else it waits, and T->go runs at its
 * turn. */
bool pump_sender_admit(struct pump_sender *snd, struct pump_turn *t, uint64_t client, size_t bytes);

/* T, waiting, will not be written (its owner stops): it leaves the queue.
 * Nothing when it does not wait. */
void pump_sender_drop(struct pump_sender *snd, struct pump_turn *t);

/* Prepares SND, subscribed to PASS, its passes handing the kernel
 * PASS_BYTES. */
void pump_sender_init(struct pump_sender *snd, struct pass *pass, size_t pass_bytes);

/* Changes the bytes of a pass (send_turn), from the next write on. */
void pump_sender_set_pass_bytes(struct pump_sender *snd, size_t pass_bytes);

/* Adds SND's counters to S, as the object "send". */
void pump_sender_stats(const struct pump_sender *snd, struct snapshot *s);

/* What every pump of a server shares: where fills and memory come from, and
 * the settings a live change makes reach responses in flight, read as each
 * fill starts. Owned by the server. */
struct pump_env {
    struct gateway *gateway;
    struct budget *budget;
    struct zstates *zstates;         /* deflate sources take their zlib state there */
    struct pump_partition partition; /* how file reads are cut now */
    struct disk_emulation disk;      /* emulate_disk now */
    uint64_t *bytes_sent;            /* the server's count, added to as each piece is written */
    /* Told of each piece as it is written: its client (the pump's flow) and
     * its body bytes. NULL: nobody. */
    void (*sent)(void *arg, uint64_t flow, size_t bytes);
    void *sent_arg;               /* its argument */
    struct pump_sender *sender;   /* whose turn it is to write; NULL: every write goes at once */
    struct pump_stalled *stalled; /* who gives way under pressure; NULL: nobody */
};

/* Memory that gives way. A slot of a source that can rewind (a file) is
 * handed to the socket at its turn: what the kernel takes at once goes
 * from the slot itself (uv_try_write), and when it takes less, the next
 * few bytes are copied into the pump's own small wire buffer, which alone
 * uv_write pins until the client reads. The rest of the slot stays free to
 * give back: while another client waits for the budget
 * (budget_gives_way), a response of a client over its fair share whose
 * socket takes no more (its wire write waits) gives back the slots it
 * filled and has not sent, its source rewinds that many bytes, and it
 * reserves again when its client catches up. A response whose next fill
 * still waits in the pool's queue takes it back and gives way too, its
 * socket busy or not (not: it asks for its slot again at once). A source
 * that cannot rewind
 * (a deflate) keeps its slots and writes each whole with uv_write. The
 * responses whose wire write waits, or whose fill may, are listed here,
 * the server's.
 * docs/design/memory.md has more. */
#define PUMP_WIRE ((size_t)2 << 10)
struct pump_stalled {
    struct pump *first;
    size_t count;
};

struct pump;

/* Tells the owner that the response is complete (STATUS 0: every byte is in
 * the socket's hands) or failed (negative: the fill's error, such as -EIO
 * for a file that shrank, else UV_ECANCELED). After a failure the
 * connection must be closed, unless pump_unsent: then another response may
 * still go in its place. */
typedef void (*pump_done_fn)(struct pump *pump, int status);

struct pump_slot {
    uv_write_t req;
    struct pump *pump;
    char *buf; /* owned by the pump; reused across responses */
    size_t len;
    char frame[24]; /* chunk-size line when chunked */
    bool busy;      /* being filled, waiting for its turn, or written and not yet confirmed */
    struct pump_turn turn; /* waiting for its turn to be written */
    uv_buf_t bufs[5];      /* what it hands the socket, set as it starts: the rest from AT */
    unsigned nbufs, at;
    bool last;    /* its fill was the source's last */
    bool granted; /* its turn came: the rest of its bytes go without asking */
};

/* One fill on the pool: all that the work half may touch. */
struct pump_fill {
    struct gateway_job job;
    struct pump_source *src;
    size_t piece; /* input bytes it takes */
    char *buf;
    size_t cap;
    struct disk_emulation disk; /* for a file read: how slow to make it */
    size_t len;                 /* results, written by the worker */
    bool eof;
    int rc;
};

/* Embedded in its connection. Owns its slots' buffers and, while running,
 * the source. */
struct pump {
    uv_stream_t *stream;
    const struct pump_env *env;
    struct budget_waiter wait; /* queued for the reservation */
    size_t held;               /* bytes of the budget this response holds */
    uint64_t wait_start;       /* uv_now() when the reservation started waiting */
    uint64_t flow;             /* the client, for the gateway's shares */
    pump_done_fn done;
    struct pump_source *src; /* NULL when idle */
    struct pump_fill fill;
    struct pump_slot slots[2];
    size_t asked;     /* a pump_reserve that waited: granted, not yet claimed */
    bool slot_held;   /* the first slot's memory is held (reserve_late: from the first fill) */
    size_t alloc;     /* size of each slot's buffer in this response */
    size_t piece_max; /* the largest piece those slots hold */
    int filling;      /* slot being filled, or -1 */
    /* commit_late, until the head is out: the slot whose bytes wait for it
     * (not busy between two fills) */
    struct pump_slot *gathering;
    const char *head; /* response head, sent with the first slot; NULL once it is */
    size_t head_len;
    unsigned long long sent; /* body bytes handed to the socket (framing excluded) */
    bool chunked, eof, failed, stopping;
    bool waiting; /* for the budget */
    int error;    /* the failed fill's code, or 0 */
    /* The slot being handed to the socket, and the one filled after it. */
    struct pump_slot *out, *queued;
    uv_write_t wire_req; /* a write of WIRE waits for the socket */
    bool wire_busy;
    char wire[PUMP_WIRE];
    struct pump *stall_prev, *stall_next; /* in env->stalled while wire_busy */
    bool stall_listed;
    bool quiet;      /* re-reserving from inside give_way: no press */
    uint64_t reread; /* bytes given back that the next fills read again */
};

/* Prepares an idle pump writing to STREAM in ENV, its fills run on behalf
 * of client FLOW. */
void pump_init(struct pump *pump, uv_stream_t *stream, const struct pump_env *env, uint64_t flow,
               pump_done_fn done);

/* Streams SRC after HEAD (not copied: it must live until DONE) with
 * Transfer-Encoding chunked framing if CHUNKED. HEAD goes out with the first
 * slot (see commit_late). Takes ownership of SRC even on failure. Returns 0,
 * or a negative UV_E* code (DONE will not run). */
int pump_start(struct pump *pump, struct pump_source *src, const char *head, size_t head_len,
               bool chunked);

/* True while a response runs and no byte of it has gone to the socket: it
 * may still be stopped and another response sent in its place. */
bool pump_head_held(const struct pump *pump);

/* After DONE: true when no byte of the response went to the socket, its
 * head included. */
bool pump_unsent(const struct pump *pump);

/* True while a fill is on the pool, a write is in the socket's queue or the
 * response waits for the budget. */
bool pump_busy(const struct pump *pump);

/* The source has input again (see pump_source_ops.ready): fill if a slot
 * is free. */
void pump_kick(struct pump *pump);

/* Loop thread, from the ready of a source that reserves late: BYTES more
 * of the budget for the response, given back when it ends. True once they
 * are held. Else the response waits its turn for them (no fill starts
 * meanwhile), and ready is called again once they are granted: asking for
 * the same BYTES again then claims them. */
bool pump_reserve(struct pump *pump, size_t bytes);

/* The connection is closing: cancel what can be cancelled; DONE runs once
 * the last fill and write are back. */
void pump_stop(struct pump *pump);

/* Frees the slots' buffers (the budget is the response's to give back).
 * The pump must not be busy. */
void pump_free(struct pump *pump);

/* Worker thread: makes a file read that started at STARTED_NS (uv_hrtime)
 * and got BYTES last at least as long as DISK says, by sleeping the rest. */
void pump_emulate_disk(const struct disk_emulation *disk, uint64_t started_ns, size_t bytes);

/* Worker thread: reads exactly LEN bytes of FD at OFFSET into BUF, across
 * short reads and EINTR, PUMP_READ_STEP at a time, giving the CPU way
 * between steps (gateway_give_way: a 16 MiB piece copies for milliseconds).
 * Returns 0, a negative errno, or -EIO when the file ends first (it shrank
 * under us: a promised length would be a lie). */
#define PUMP_READ_STEP ((size_t)256 << 10)
int pump_pread_all(int fd, char *buf, size_t len, uint64_t offset);

/* A source that reads [OFFSET, OFFSET+LEN) of FD, closing FD after the last
 * piece. Takes ownership of FD. Returns NULL when out of memory (FD is then
 * closed). */
struct pump_source *pump_file_source(int fd, unsigned long long offset, unsigned long long len);

#endif
