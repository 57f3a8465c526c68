#include "handlers/files/cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "server/base/snapshot.h"

#define NBUCKETS     (sizeof((struct cache *)0)->by_key / sizeof(struct cache_entry *))
#define WATCH_EVENTS (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVE_SELF | IN_DELETE_SELF)

static uint32_t hash_key(const char *key)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)key; *p != '\0'; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

int cache_init(struct cache *cache, bool enabled, size_t max_file, size_t max_bytes)
{
    memset(cache, 0, sizeof *cache);
    cache->lru.lru_prev = cache->lru.lru_next = &cache->lru;
    cache->max_file = max_file;
    cache->max_bytes = max_bytes;
    cache->inotify_fd = -1;
    return cache_configure(cache, enabled, max_file, max_bytes);
}

static void unlink_chain(struct cache_entry **head, struct cache_entry *e, bool by_wd)
{
    for (struct cache_entry **p = head; *p != NULL; p = by_wd ? &(*p)->next_wd : &(*p)->next_key) {
        if (*p == e) {
            *p = by_wd ? e->next_wd : e->next_key;
            return;
        }
    }
}

static void evict(struct cache *cache, struct cache_entry *e, bool unwatch)
{
    unlink_chain(&cache->by_key[e->hash % NBUCKETS], e, false);
    unlink_chain(&cache->by_wd[(unsigned)e->wd % NBUCKETS], e, true);
    e->lru_prev->lru_next = e->lru_next;
    e->lru_next->lru_prev = e->lru_prev;
    if (unwatch)
        inotify_rm_watch(cache->inotify_fd, e->wd);
    cache->bytes -= (size_t)e->st.st_size;
    cache->count--;
    free(e->key);
    free(e->body);
    free(e);
}

static struct cache_entry *find_wd(struct cache *cache, int wd)
{
    struct cache_entry *e = cache->by_wd[(unsigned)wd % NBUCKETS];
    while (e != NULL && e->wd != wd)
        e = e->next_wd;
    return e;
}

/* Reads every queued event; a changed file's entry goes. */
static void drain(struct cache *cache)
{
    /* Aligned as inotify_event requires. */
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(cache->inotify_fd, buf, sizeof buf);
        if (n <= 0)
            return; /* EAGAIN: nothing more */
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)(void *)p;
            cache->changes++;
            if (ev->mask & IN_Q_OVERFLOW) {
                while (cache->lru.lru_next != &cache->lru)
                    evict(cache, cache->lru.lru_next, true);
            } else {
                struct cache_entry *e = find_wd(cache, ev->wd);
                /* IN_IGNORED: the kernel dropped the watch itself. */
                if (e != NULL)
                    evict(cache, e, (ev->mask & IN_IGNORED) == 0);
            }
            p += sizeof *ev + ev->len;
        }
    }
}

int cache_configure(struct cache *cache, bool enabled, size_t max_file, size_t max_bytes)
{
    int rc = 0;
    if (enabled && cache->inotify_fd < 0) {
        cache->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (cache->inotify_fd < 0)
            rc = -errno;
    }
    cache->enabled = enabled && cache->inotify_fd >= 0;
    cache->max_file = max_file;
    cache->max_bytes = max_bytes;
    for (struct cache_entry *e = cache->lru.lru_prev, *prev; e != &cache->lru; e = prev) {
        prev = e->lru_prev;
        if (!cache->enabled || (size_t)e->st.st_size > max_file)
            evict(cache, e, true);
    }
    while (cache->bytes > cache->max_bytes)
        evict(cache, cache->lru.lru_prev, true);
    return rc;
}

void cache_free(struct cache *cache)
{
    while (cache->lru.lru_next != &cache->lru)
        evict(cache, cache->lru.lru_next, false);
    if (cache->inotify_fd >= 0)
        close(cache->inotify_fd);
    cache->inotify_fd = -1;
    cache->enabled = false;
}

const struct cache_entry *cache_lookup(struct cache *cache, const char *key, uint64_t now_ms)
{
    if (!cache->enabled)
        return NULL;
    uint32_t h = hash_key(key);
    struct cache_entry *e = cache->by_key[h % NBUCKETS];
    while (e != NULL && (e->hash != h || strcmp(e->key, key) != 0))
        e = e->next_key;
    if (e != NULL && now_ms >= e->expires_ms) {
        evict(cache, e, true);
        e = NULL;
    }
    if (e == NULL) {
        cache->misses++;
        return NULL;
    }
    cache->hits++;
    e->lru_prev->lru_next = e->lru_next; /* move to the front */
    e->lru_next->lru_prev = e->lru_prev;
    e->lru_next = cache->lru.lru_next;
    e->lru_prev = &cache->lru;
    cache->lru.lru_next->lru_prev = e;
    cache->lru.lru_next = e;
    return e;
}

uint64_t cache_drain(struct cache *cache)
{
    if (cache->inotify_fd >= 0)
        drain(cache);
    return cache->changes;
}

int cache_watch(int inotify_fd, const char *path)
{
    return inotify_add_watch(inotify_fd, path, WATCH_EVENTS);
}

void cache_unwatch(struct cache *cache, int wd)
{
    if (find_wd(cache, wd) == NULL)
        inotify_rm_watch(cache->inotify_fd, wd);
}

void cache_insert(struct cache *cache, const char *key, int wd, const struct stat *st,
                  const char *type, bool hidden, char *body, uint64_t gen, uint64_t now_ms)
{
    size_t size = (size_t)st->st_size;
    bool shared = find_wd(cache, wd) != NULL; /* the same inode under another name */
    bool fits = size <= cache->max_file && size <= cache->max_bytes;
    struct cache_entry *e = NULL;
    if (cache->enabled && cache_drain(cache) == gen && !shared && fits)
        e = calloc(1, sizeof *e);
    if (e != NULL)
        e->key = strdup(key);
    if (e == NULL || e->key == NULL) {
        free(e);
        free(body);
        if (!shared)
            inotify_rm_watch(cache->inotify_fd, wd);
        return;
    }
    while (cache->bytes + size > cache->max_bytes)
        evict(cache, cache->lru.lru_prev, true); /* least recently used */
    e->hash = hash_key(key);
    e->wd = wd;
    e->st = *st;
    e->type = type;
    e->hidden = hidden;
    e->body = body;
    e->expires_ms = now_ms + CACHE_VALID_MS;
    e->next_key = cache->by_key[e->hash % NBUCKETS];
    cache->by_key[e->hash % NBUCKETS] = e;
    e->next_wd = cache->by_wd[(unsigned)wd % NBUCKETS];
    cache->by_wd[(unsigned)wd % NBUCKETS] = e;
    e->lru_next = cache->lru.lru_next;
    e->lru_prev = &cache->lru;
    cache->lru.lru_next->lru_prev = e;
    cache->lru.lru_next = e;
    cache->bytes += size;
    cache->count++;
}

static const struct snap_def cache_enabled = {
    .key = "enabled",
    .metric = "unclog_file_cache_enabled",
    .kind = SNAP_FLAG,
    .help = "Whether the small-file cache is on (file_cache, and inotify could be had)."};
static const struct snap_def cache_entries = {.key = "entries",
                                              .metric = "unclog_file_cache_entries",
                                              .help = "Files the small-file cache holds now."};
static const struct snap_def cache_bytes = {.key = "bytes",
                                            .metric = "unclog_file_cache_bytes",
                                            .help = "Bytes of file bodies the small-file cache "
                                                    "holds now (at most file_cache_size)."};
static const struct snap_def cache_hits = {
    .key = "hits",
    .metric = "unclog_file_cache_hits_total",
    .kind = SNAP_COUNTER,
    .help = "Lookups in the small-file cache that found a fresh entry."};
static const struct snap_def cache_misses = {
    .key = "misses",
    .metric = "unclog_file_cache_misses_total",
    .kind = SNAP_COUNTER,
    .help = "Lookups in the small-file cache, while it was on, that found no fresh entry."};

void cache_stats(const struct cache *cache, struct snapshot *s)
{
    snap_open(s, "file_cache", NULL);
    snap_add(s, &cache_enabled, cache->enabled);
    snap_add(s, &cache_entries, cache->count);
    snap_add(s, &cache_bytes, cache->bytes);
    snap_add(s, &cache_hits, cache->hits);
    snap_add(s, &cache_misses, cache->misses);
    snap_close(s);
}

bool cache_has_room(const struct cache *cache, size_t size)
{
    return cache->enabled && size <= cache->max_file && cache->bytes + size <= cache->max_bytes;
}
