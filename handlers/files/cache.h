#ifndef UNCLOG_CACHE_H
#define UNCLOG_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* The small-file cache: bodies of small files kept in memory, so that a hot
 * file costs no threadpool round trip and no syscall but the socket's.
 *
 * Freshness comes from inotify, without a timer or a stat per request: the
 * pool job that fills an entry adds a watch on the file *before* reading it
 * and checks that the path still names the file it opened (files.c's
 * read_body says why that is exact), and the first lookup after each poll
 * of the loop drains the (non-blocking) inotify queue, evicting entries
 * whose file changed (the caller does: cache_drain, pass_new).
 * A change that completed before the poll that brought a request is
 * therefore seen, as the files opened on the loop see it (one read of the
 * queue a pass, not one a request). A pass ends at the prepare phase, and
 * also when the loop's clock has moved: after a full batch of 1,024 events
 * libuv polls again at once, with no prepare phase between, and such a
 * batch takes more than the clock's millisecond to go through. What inotify cannot see (a
 * parent directory renamed, a symlink retargeted) is seen when the entry
 * expires, after CACHE_VALID_MS. Loop thread only, except cache_watch(). */

#define CACHE_VALID_MS 10000

struct cache_entry {
    char *key; /* the request's resolved path; owned */
    uint32_t hash;
    int wd;                                  /* inotify watch: one per entry, removed with it */
    struct cache_entry *next_key, *next_wd;  /* hash chains */
    struct cache_entry *lru_prev, *lru_next; /* most recently used first */
    uint64_t expires_ms;
    struct stat st;
    const char *type; /* Content-Type, from the static MIME table */
    bool hidden;      /* the file's resolved path is hidden: served only with dotfiles on */
    char *body;       /* st.st_size bytes; owned */
};

struct cache {
    bool enabled;   /* lookups and inserts happen */
    int inotify_fd; /* -1 until the cache is first enabled; then open until cache_free */
    size_t max_file, max_bytes, bytes, count;
    uint64_t changes; /* inotify events seen: a fill that saw one is dropped */
    uint64_t hits, misses;
    struct cache_entry *by_key[1024], *by_wd[1024];
    struct cache_entry lru; /* sentinel */
};

/* Sets up an empty cache for files up to MAX_FILE bytes, MAX_BYTES in all;
 * ENABLED false (or no inotify) leaves it off. Returns 0 or a negative errno. */
int cache_init(struct cache *cache, bool enabled, size_t max_file, size_t max_bytes);

/* A reload: applies ENABLED, MAX_FILE and MAX_BYTES, evicting what no
 * longer fits (everything when off). The inotify fd stays open while off,
 * since fills already on the pool may still add watches to it. Returns 0, or
 * a negative errno when inotify cannot be had (the cache is then off). */
int cache_configure(struct cache *cache, bool enabled, size_t max_file, size_t max_bytes);

/* Frees every entry and closes the inotify fd. */
void cache_free(struct cache *cache);

/* The fresh entry for KEY, or NULL, as of the last cache_drain(). */
const struct cache_entry *cache_lookup(struct cache *cache, const char *key, uint64_t now_ms);

/* Applies every pending change event (evicting what changed) and returns
 * the count of changes seen so far: handed to cache_insert(), it keeps a
 * fill started now only if no change is seen before the fill ends. */
uint64_t cache_drain(struct cache *cache);

/* Worker thread: watches the file at PATH (resolved, no symlinks) for
 * changes. Returns the watch descriptor or -1. Call before reading it, and
 * cache only if PATH still names the file read after the watch is in. */
int cache_watch(int inotify_fd, const char *path);

/* Adds KEY -> BODY (taken) with the file's ST, TYPE, HIDDEN (its resolved
 * path is hidden) and watch WD, unless a change was seen since GEN, WD
 * already belongs to another entry, or it does not fit; then BODY is freed
 * (and WD unwatched when unused). */
void cache_insert(struct cache *cache, const char *key, int wd, const struct stat *st,
                  const char *type, bool hidden, char *body, uint64_t gen, uint64_t now_ms);

/* Whether a body of SIZE bytes would be cached, and evict nothing: the
 * cache is on, takes files that large, and has that much room. */
bool cache_has_room(const struct cache *cache, size_t size);

/* Removes watch WD of a fill that was not kept, unless an entry uses it. */
void cache_unwatch(struct cache *cache, int wd);

struct snapshot;

/* Appends the cache's figures to S ("file_cache": whether it is on, its
 * entries and bytes, its hits and misses). */
void cache_stats(const struct cache *cache, struct snapshot *s);

#endif
