#ifndef UNCLOG_LOOP_READS_H
#define UNCLOG_LOOP_READS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "server/base/pass.h"

struct open_how;
struct snapshot;

/* Opens and reads on the loop of files already in the kernel's caches
 * (loop_reads): they cannot block, since they fail with EAGAIN instead
 * (openat2 RESOLVE_CACHED, preadv2 RWF_NOWAIT), and the pool then does
 * them. A pass of the loop (server/base/pass.h) reads at most send_turn
 * bytes so (the read that would cross it goes to the pool, as a write
 * waits).
 *
 * The pass's files: a file opened on the loop stays open for the rest of
 * the pass, its fd and fstat serving every request for the same path, and
 * a body of up to LOOP_READS_BODY bytes read there is kept with it. The
 * requests one poll brought for the same file are answered as if they had
 * come at the same instant, with one open and one read. The files close as
 * the pass ends (pass.h: before the poll, or once the loop's clock has
 * moved), so a file replaced on disk is seen from the next pass on, and an
 * idle server holds none open. */

/* Why a file's open or read did not run on the loop and went to the pool. */
enum loop_reads_fallback {
    LOOP_READS_OPEN_WOULD_BLOCK, /* openat2(RESOLVE_CACHED): the path is not all in the dcache */
    LOOP_READS_READ_WOULD_BLOCK, /* preadv2(RWF_NOWAIT): some byte is not in the page cache */
    LOOP_READS_UNSUPPORTED,      /* the kernel or the file system lacks the flag */
    LOOP_READS_OVER_PASS,        /* the pass's reads on the loop reached send_turn bytes */
    LOOP_READS_FALLBACKS
};

#define LOOP_READS_OPENS 8           /* the pass's files at most */
#define LOOP_READS_BODY  (16 * 1024) /* the largest body a pass keeps with its file */

/* A file opened in this pass. */
struct loop_reads_open {
    int dir, fd;
    struct stat st;
    char *body;      /* LOOP_READS_BODY bytes once needed, kept for the slot's next files */
    size_t body_len; /* of them read in this pass (0: none yet) */
    char path[PATH_MAX];
};

/* Owned by the files handler, one per server; subscribed to its passes. */
struct loop_reads {
    struct pass_sub sub;
    struct pass *pass;
    bool supported;    /* the kernel has openat2(RESOLVE_CACHED): probed at start */
    bool on;           /* supported, and loop_reads is on (the files handler's to set) */
    size_t pass_bytes; /* send_turn: the most read on the loop in a pass */
    size_t used;       /* bytes read on the loop in this pass */
    struct loop_reads_open opens[LOOP_READS_OPENS];
    unsigned n_opens, next_open; /* opens[] in use; the next to reuse once all are */
    uint64_t served, bytes, opens_shared, bodies_shared, fallbacks[LOOP_READS_FALLBACKS];
};

/* Prepares R, subscribed to PASS, off until loop_reads_set: probes (once,
 * blocking: call it at start) whether the kernel serves
 * openat2(RESOLVE_CACHED) on DIR, and so, since it is newer,
 * preadv2(RWF_NOWAIT). */
void loop_reads_init(struct loop_reads *r, struct pass *pass, const char *dir);

/* On when WANTED (loop_reads, and the handler can open beneath its root)
 * and the kernel serves it; a pass reads at most PASS_BYTES. */
void loop_reads_set(struct loop_reads *r, bool wanted, size_t pass_bytes);

/* Logs whether files are opened and read on the loop, CONFIGURED being
 * the loop_reads key: a debug line; an info line only when the kernel
 * turns off what the configuration asked for. */
void loop_reads_log(const struct loop_reads *r, bool configured);

/* Loop thread: opens PATH under DIR as HOW says (which must include
 * RESOLVE_CACHED) and fstats it into *ST, or finds it open already in this
 * pass. Returns the fd, the pass's: valid until the pass ends or the next
 * call, not to be closed (loop_reads_keep takes it for longer); or -1: the
 * pool opens it, the fallback counted when the open would block or the
 * kernel lacks the flags. */
int loop_reads_open(struct loop_reads *r, int dir, const char *path, const struct open_how *how,
                    struct stat *st);

/* Loop thread: the first LEN bytes (at most LOOP_READS_BODY) of FD, from
 * loop_reads_open in this pass: read on the loop as loop_reads_read does,
 * or found read already by an earlier request for the same file. Returns
 * them, valid as long as FD is; NULL when the pool must read them. */
const char *loop_reads_body(struct loop_reads *r, int fd, size_t len);

/* Loop thread: reads LEN bytes of FD from its start into BUF, if all of
 * them are in the page cache and this pass may still read on the loop.
 * Returns true when it did; else false, the fallback counted, and the pool
 * must read. */
bool loop_reads_read(struct loop_reads *r, int fd, char *buf, size_t len);

/* Loop thread: FD, from loop_reads_open, is the caller's now, to close;
 * the pass forgets it (a later request in the pass opens the file again). */
int loop_reads_keep(struct loop_reads *r, int fd);

/* Closes the pass's files, frees their bodies and leaves the pass service. */
void loop_reads_close(struct loop_reads *r);

/* Adds R's counters to S, as the object "loop_reads". */
void loop_reads_stats(const struct loop_reads *r, struct snapshot *s);

#endif
