#ifndef UNCLOG_SOURCE_H
#define UNCLOG_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/base/config.h"
#include "server/pool/gateway.h"

/* A source: what a response's pump (server/pool/pump.h) streams, as a
 * handler sees it. The handler fills in a struct pump_source with its ops
 * and hands it to conn_send_source; the pump then calls the ops, and the
 * source asks the pump (pump_kick, pump_reserve) through its `pump`. */

struct pump;
struct zparams;
struct zstate;

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
    /* Optional, loop thread, before the first fill: a source whose bytes
     * are a plain range of a regular file, sent as they are, says which:
     * returns the file's descriptor (still the source's, closed by its
     * release) and sets *OFFSET and *LEN; else -1. The writer may then move
     * them with sendfile(2) instead of running the pump
     * (docs/design/sendfile.md). */
    int (*file)(struct pump_source *src, uint64_t *offset, uint64_t *len);
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
    /* The first slot is handed up (and the head with it) only once it is
     * full or the source has ended. Its fills may then get a CAP smaller
     * than what their piece makes: they keep the rest of their input for
     * the next fill. */
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

/* The source has input again (see pump_source_ops.ready): fill if a slot
 * is free. */
void pump_kick(struct pump *pump);

/* Loop thread, from the ready of a source that reserves late: BYTES more
 * of the budget for the response, given back when it ends. True once they
 * are held. Else the response waits its turn for them (no fill starts
 * meanwhile), and ready is called again once they are granted: asking for
 * the same BYTES again then claims them. */
bool pump_reserve(struct pump *pump, size_t bytes);

/* Loop thread: a zlib deflate state with parameters P for a source of
 * PUMP, from the server's reused ones (server/pool/zstates.h); NULL when
 * out of memory. Given back (pump_zstate_give) once no fill of the source
 * is on the pool: at its release at the latest. */
struct zstate *pump_zstate_take(struct pump *pump, const struct zparams *p);
void pump_zstate_give(struct pump *pump, struct zstate *s);

/* Worker thread: makes a file read that started at STARTED_NS (uv_hrtime)
 * and got BYTES last at least as long as DISK says, by sleeping the rest.
 * Returns true when it slept. */
bool pump_emulate_disk(const struct disk_emulation *disk, uint64_t started_ns, size_t bytes);

/* Worker thread: reads exactly LEN bytes of FD at OFFSET into BUF, across
 * short reads and EINTR, PUMP_READ_STEP at a time, giving the CPU way
 * between steps (gateway_give_way: a 16 MiB piece copies for milliseconds).
 * Returns 0, a negative errno, or -EIO when the file ends first (it shrank
 * under us: a promised length would be a lie). */
#define PUMP_READ_STEP ((size_t)256 << 10)
int pump_pread_all(int fd, char *buf, size_t len, uint64_t offset);

#endif
