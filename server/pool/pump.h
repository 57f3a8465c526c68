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
#include "server/pool/source.h"
#include "server/pool/zstates.h"

struct snapshot;

/* The chunked reader's producer. A pump fills slots with the bytes a
 * *source* produces on the threadpool (file reads, deflate slices) and
 * hands each filled slot up to the side that writes it to the client
 * (server/http/writer.c, which registers a struct pump_out):
 *
 *   fill slot A on the pool -> hand A up -> fill slot B -> hand B up -> ...
 *
 * At most one fill is in flight, and a fill starts only when a slot is free,
 * i.e. when the writer has said its previous contents are out of it
 * (pump_slot_sent). With two slots, a response never holds more than two
 * buffers of one piece each, however large the file and however slow the
 * client. The pump knows nothing of HTTP or sockets: the writer frames the
 * bytes and hands them to the kernel.
 *
 * The pump alone decides how much input each fill takes (its *piece*). For
 * a source that reads a file (a file range, a multipart byterange set, a
 * file deflated on the fly) it applies pump_piece to the partition as it is
 * at that fill; a source that reads no file (a request body) names its own
 * slice. A response's slots are sized when it starts, for the largest piece
 * the partition gives then; a later, larger partition is capped at that.
 *
 * A source that commits late (a request body, whose own failure deserves a
 * status) keeps its first slot back: its fills gather in it until it is
 * full or the source has ended, and only then is it handed up (with it
 * the writer sends the response's head).
 *
 * The memory comes from the server's budget (server/pool/budget.h): a response
 * starts once its source's own buffers and one slot are reserved, and uses
 * a second slot only when the budget has room for it then. Slots are freed
 * when the response ends, so an idle connection holds none. A source fed
 * from elsewhere (a request body) *reserves late*: nothing as it starts; it
 * asks for its buffers as its input arrives (pump_reserve), and its first
 * slot is reserved as its first fill is about to start. */

/* What every pump of a server shares: where fills and memory come from, and
 * the settings a live change makes reach responses in flight, read as each
 * fill starts. Owned by the server. */
struct pump_env {
    struct gateway *gateway;
    struct budget *budget;
    struct zstates *zstates;         /* deflate sources take their zlib state there */
    struct pump_partition partition; /* how file reads are cut now */
    struct disk_emulation disk;      /* emulate_disk now */
    struct pump_stalled *stalled;    /* who gives way under pressure; NULL: nobody */
};

/* Memory that gives way. The writer hands a slot of a source that can
 * rewind (a file) to the socket from the slot itself as far as the kernel
 * takes it, and copies only the next few bytes into a small buffer of its
 * own, which alone waits for the client (pump_blocked). The rest of the
 * slot stays free to give back: while another client waits for the budget
 * (budget_gives_way), a response of a client over its fair share whose
 * socket takes no more gives back the slots it filled and has not sent
 * (the writer drops them), its source rewinds that many bytes, and it
 * reserves again when its client catches up. A response whose next fill
 * still waits in the pool's queue takes it back and gives way too, its
 * socket busy or not (not: it asks for its slot again at once). A source
 * that cannot rewind (a deflate) keeps its slots. The responses whose
 * socket waits, or whose fill may, are listed here, the server's.
 * docs/design/memory.md has more. */
struct pump_stalled {
    struct pump *first;
    size_t count;
};

struct pump;

/* What a pump tells the side that writes its slots: registered with
 * pump_init by server/http/writer.c. Loop thread, each. */
struct pump_out {
    /* Slot SLOT (0 or 1) holds LEN bytes at BUF, LAST when the source ended
     * with them: they go after the slots handed up before. The slot stays
     * the writer's until pump_slot_sent, or until the pump drops it. */
    void (*filled)(struct pump *pump, unsigned slot, char *buf, size_t len, bool last);
    /* The bytes of the slots handed up that are not out of their buffers
     * yet and that a rewinding source may make again; SIZE_MAX when what is
     * left of them is not body bytes alone (a head, a chunk's frame). */
    size_t (*unsent)(const struct pump *pump);
    /* The slots handed up and not sent will not be (the response gives
     * way, failed or stops): the writer forgets them. */
    void (*drop)(struct pump *pump);
    /* The response is complete (STATUS 0: every slot was sent) or failed
     * (negative: the fill's error, such as -EIO for a file that shrank,
     * else UV_ECANCELED). */
    void (*done)(struct pump *pump, int status);
};

#define PUMP_SLOTS 2

struct pump_slot {
    char *buf; /* owned by the pump; reused across responses */
    size_t len;
    bool busy; /* being filled, or handed up and not sent yet */
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

/* Embedded in its writer. Owns its slots' buffers and, while running,
 * the source. */
struct pump {
    const struct pump_env *env;
    const struct pump_out *out; /* who writes what it fills */
    struct budget_waiter wait;  /* queued for the reservation */
    size_t held;                /* bytes of the budget this response holds */
    uint64_t wait_start;        /* uv_now() when the reservation started waiting */
    uint64_t client;            /* the client, for the gateway's shares */
    struct pump_source *src;    /* NULL when idle */
    struct pump_fill fill;
    struct pump_slot slots[PUMP_SLOTS];
    size_t asked;     /* a pump_reserve that waited: granted, not yet claimed */
    bool slot_held;   /* the first slot's memory is held (reserve_late: from the first fill) */
    size_t alloc;     /* size of each slot's buffer in this response */
    size_t piece_max; /* the largest piece those slots hold */
    int filling;      /* slot being filled, or -1 */
    /* commit_late, until the first slot is handed up: the slot whose bytes
     * gather (not busy between two fills) */
    struct pump_slot *gathering;
    bool handed; /* a slot of this response was handed up */
    bool eof, failed, stopping;
    bool waiting; /* for the budget */
    int error;    /* the failed fill's code, or 0 */
    bool blocked; /* the writer's socket takes no more: a write of it waits */
    struct pump *stall_prev, *stall_next; /* in env->stalled while it may give way */
    bool stall_listed;
    bool quiet;      /* re-reserving from inside give_way: no press */
    uint64_t reread; /* bytes given back that the next fills read again */
};

/* Prepares an idle pump in ENV whose filled slots go to OUT. */
void pump_init(struct pump *pump, const struct pump_env *env, const struct pump_out *out);

/* The client its fills run on behalf of, from now on. */
void pump_set_client(struct pump *pump, uint64_t client);

/* Streams SRC: fills its slots and hands them up. Takes ownership of SRC
 * even on failure. Returns 0, or a negative UV_E* code (done will not
 * run). */
int pump_start(struct pump *pump, struct pump_source *src);

/* True while a response runs (from pump_start until done). */
bool pump_running(const struct pump *pump);

/* True while a fill is on the pool, a slot is handed up and not sent, the
 * writer's socket is blocked or the response waits for the budget. */
bool pump_busy(const struct pump *pump);

/* Whether the response goes on: it runs, has not failed and is not
 * stopping. */
bool pump_going(const struct pump *pump);

/* Whether the running source can make its bytes again (rewind): the writer
 * then keeps the bytes the socket does not take in their slot. */
bool pump_rewinds(const struct pump *pump);

/* The writer is done with slot SLOT: its bytes are out of its buffer
 * (in the kernel's hands, or copied). A fill may take it. */
void pump_slot_sent(struct pump *pump, unsigned slot);

/* The writer's socket takes no more: a write waits for the client. STALLS:
 * its slots' rest may be given back meanwhile (the writer copied what
 * waits); a write that pins a slot does not. */
void pump_blocked(struct pump *pump, bool stalls);

/* The write that waited is back with STATUS (negative: the response
 * fails). The writer then hands on what it can and calls pump_wrote. */
void pump_unblocked(struct pump *pump, int status);

/* After pump_unblocked: IDLE when the writer holds no slot now. Starts the
 * next fill, or ends the response. */
void pump_wrote(struct pump *pump, bool idle);

/* A write to the socket failed: the response fails. */
void pump_fail(struct pump *pump);

/* The response fails or stops: the slots handed up are dropped. */
void pump_drop(struct pump *pump);

/* The writer handed something on (a slot's turn came): ends the response
 * if nothing is left in flight. */
void pump_settle(struct pump *pump);

/* The response stops (its connection closes, or another response goes
 * in its place): cancel what can be cancelled; done runs once the last
 * fill and write are back. */
void pump_stop(struct pump *pump);

/* Frees the slots' buffers (the budget is the response's to give back).
 * The pump must not be busy. */
void pump_free(struct pump *pump);

/* Loop thread: the piece rule for a plain read of a file that has
 * REMAINING bytes left, under ENV's partition now (pump_piece, short work
 * waiting as the gateway says). What the writer's sendfile pieces take. */
size_t pump_env_piece(const struct pump_env *env, uint64_t remaining);

/* Loop thread: emulate_disk as it is now, for a job to take a copy of. */
struct disk_emulation pump_env_disk(const struct pump_env *env);

/* If SRC is a plain range of a regular file (pump_source_ops.file): its
 * descriptor, still SRC's, with *OFFSET and *LEN set; else -1. */
int pump_source_file(struct pump_source *src, uint64_t *offset, uint64_t *len);

#endif
