#ifndef UNCLOG_ZSTATES_H
#define UNCLOG_ZSTATES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

struct budget;
struct snapshot;

/* zlib's deflate states, reused from one stream to the next. A state is
 * a few hundred KiB (window, hash, pending output); allocating and freeing
 * one per stream costs the allocator more than deflating a small body. So
 * a stream that ends hands its state back, and the next stream with the
 * same parameters takes it.
 *
 * A state belongs to one stream from zstates_take to zstates_give, on the
 * loop thread, whichever pool threads run its jobs in between; it is given
 * back only once no job of the stream is on the pool. Given back, it is
 * reset whole (deflateReset, and no input or output pointers left), so the
 * next stream starts a new gzip member from nothing; a state that fails to
 * reset is freed. At most `idle_max` states wait for a stream; the one
 * waiting longest gives way to a newer one, and each waiting state's
 * memory is kept in the budget (budget_keep), which frees them all when a
 * reservation needs the room (budget.reclaim). zstates_fini frees them at
 * the end.
 *
 * The stream charges the budget for its state itself (zstate_memory), as
 * it would without reuse. Loop thread only, but for zstate_begin. */

/* What a state is made with; a state is reused only for the same. */
struct zparams {
    int level;       /* Z_DEFAULT_COMPRESSION, 0..9 */
    int window_bits; /* as deflateInit2 takes them: 9..15, + 16 for a gzip wrapper */
    int mem_level;   /* 1..9 */
};

struct zstate {
    z_stream z; /* zlib points back at it: a state never moves */
    struct zparams params;
    bool ready;                 /* deflateInit2 succeeded: z holds zlib's memory */
    bool allocated;             /* zstate_begin allocated it for the stream holding it now */
    bool used;                  /* zstate_begin ran for that stream */
    struct zstate *next, *prev; /* while idle: most recently given first */
};

struct zstates {
    struct budget *budget; /* where idle states are kept; NULL: not counted */
    size_t idle_max;
    size_t idle;
    struct zstate *head, *tail; /* idle, most recently given first */
    /* counted as each stream gives its state back */
    uint64_t streams; /* streams that deflated */
    uint64_t reused;  /* of them, on a state another stream had used */
    uint64_t allocs;  /* states allocated (deflateInit2) */
    uint64_t freed;   /* states freed: too many idle, the budget short, a failed reset */
};

/* At most IDLE_MAX states wait between streams, kept in BUDGET (which may
 * be NULL: then they are counted nowhere). Sets BUDGET's reclaim. */
void zstates_init(struct zstates *zs, struct budget *budget, size_t idle_max);

/* Frees every idle state. No stream may hold one. */
void zstates_fini(struct zstates *zs);

/* Loop thread: a state for a stream with parameters P: an idle one, else
 * a new one that zstate_begin will allocate. NULL when out of memory. */
struct zstate *zstates_take(struct zstates *zs, const struct zparams *p);

/* Any thread, by the one job of the stream that runs: makes the state
 * ready to deflate (allocates zlib's memory the first time). Returns Z_OK
 * or zlib's error. */
int zstate_begin(struct zstate *s);

/* Loop thread: the stream holding S is over, and none of its jobs is on
 * the pool: S is reset and waits for the next stream, or is freed. */
void zstates_give(struct zstates *zs, struct zstate *s);

/* The bytes a state with parameters P holds (zlib's formula, and its own
 * structure): what a stream charges to the budget, and what an idle state
 * keeps there. */
size_t zstate_memory(const struct zparams *p);

/* Appends the figures (object "zlib") to S. */
void zstates_stats(const struct zstates *zs, struct snapshot *s);

#endif
