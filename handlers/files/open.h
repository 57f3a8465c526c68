#ifndef UNCLOG_FILES_OPEN_H
#define UNCLOG_FILES_OPEN_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "handlers/files/reply.h"
#include "server/base/config.h"
#include "server/pool/gateway.h"
#include "server/pool/zstates.h"

/* What a request still needs from the pool after its open. */
enum stage { STAGE_NONE, STAGE_LIST };

/* One job on the pool (class open): open+fstat (and FILE.gz where asked)
 * and, for a file no larger than the first piece, its body, read in the
 * same job, so that a small file costs one crossing. A directory's listing
 * takes one more job (list). Owned by the handler from the first submit to
 * the last done; holds its connection. */
struct open_job {
    struct gateway_job job;
    struct conn *conn;
    const char *root; /* the server's realpath'ed root, immutable while running */
    size_t root_len;
    bool want_dir, want_gz, want_listing, gzip_possible;
    bool dotfiles;              /* hidden names served and listed */
    size_t gzip_listing_min;    /* a listing this big or bigger is gzipped (0: never) */
    struct zstate *zs;          /* the list job's zlib state, if it may gzip; or NULL */
    int inotify_fd;             /* the cache's, or -1: the body is not for the cache */
    size_t first_max;           /* largest body read with the open (0: none) */
    size_t budgeted;            /* of the memory budget, taken for that body */
    struct disk_emulation disk; /* emulate_disk when the job was submitted */
    uint64_t cache_gen;         /* the cache's change count at submit */
    /* results, written by the worker */
    enum stage stage;
    int err;
    bool redirect;
    bool no_index; /* a directory without index.html, and listing off */
    bool hidden;   /* a path it opened led to a hidden name (dotfiles on) */
    struct file f;
    int wd;        /* inotify watch on the file, or -1 */
    char *body;    /* its body, for the cache */
    char *listing; /* malloc'd HTML index, when the directory has no index.html */
    size_t listing_len;
    bool listing_gz;         /* the listing is gzipped */
    char path[PATH_MAX];     /* root + '/' + relative path; + "/index.html" for a dir */
    char real[PATH_MAX];     /* the last file opened, resolved */
    char relative[PATH_MAX]; /* decoded, normalised: redirects, listings, cache key */
};

/* Worker thread: J's open (GATEWAY_OPEN): the file, or a directory's
 * index.html, a redirect or the wish for a listing (stage), FILE.gz where
 * asked, and a body no larger than first_max (for the cache: watched
 * first). Sets the job's cost to what it read. */
void open_work(struct gateway_job *job);

/* Worker thread: J's directory listing (GATEWAY_LIST), gzipped whole with
 * J's zlib state when it is gzip_listing_min or larger. */
void open_list_work(struct gateway_job *job);

/* A listing's deflate: a gzip wrapper, zlib's largest window and default
 * hash (a page of unknown size). */
extern const struct zparams open_listing_zparams;

/* Closes *FD if it is open, and sets it to -1. */
void open_drop(int *fd);

#endif
