/* The small-file cache (handlers/files/cache.c) over real files and a real
 * inotify: a hit returns what was inserted, a change to the file evicts it
 * at the next drain, a fill during which a change was seen is not kept, an
 * entry expires, the least recently used goes first when room is short,
 * the limits and a reload evict what no longer fits, and one inode under
 * two names is kept once. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handlers/files/cache.h"
#include "tests/tap.h"

static char dir[] = "/tmp/unclog-test-cacheXXXXXX";

/* Writes a file of SIZE bytes of C under dir; returns its path. */
static const char *make_file(const char *name, size_t size, char c)
{
    static char paths[8][256];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, 256, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        abort();
    for (size_t i = 0; i < size; i++)
        fputc(c, f);
    fclose(f);
    return path;
}

/* What a fill does: watch the file, read it, insert it with the generation
 * drained before it started. */
static void fill(struct cache *cache, const char *path, uint64_t gen, uint64_t now_ms)
{
    int wd = cache_watch(cache->inotify_fd, path);
    struct stat st;
    if (wd < 0 || stat(path, &st) < 0)
        abort();
    char *body = malloc((size_t)st.st_size + 1);
    FILE *f = fopen(path, "r");
    if (body == NULL || f == NULL || fread(body, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        abort();
    fclose(f);
    cache_insert(cache, path, wd, &st, "text/plain", false, body, gen, now_ms);
}

static void hit_and_change(void)
{
    struct cache cache;
    is_int(cache_init(&cache, true, 1024, 4096), 0, "a cache of 4 KiB, files up to 1 KiB");
    const char *a = make_file("a.txt", 100, 'a');
    ok(cache_lookup(&cache, a, 0) == NULL, "an empty cache: a miss");
    fill(&cache, a, cache_drain(&cache), 0);
    const struct cache_entry *e = cache_lookup(&cache, a, 1);
    ok(e != NULL && e->st.st_size == 100 && e->body[0] == 'a' && e->body[99] == 'a',
       "after a fill: a hit, with the file's size and bytes");
    ok(e != NULL && strcmp(e->type, "text/plain") == 0 && !e->hidden, "  its type and flags");
    ok(cache.count == 1 && cache.bytes == 100, "  one entry of 100 bytes");
    ok(cache.hits == 1 && cache.misses == 1, "  a hit and a miss counted");
    ok(cache_lookup(&cache, a, CACHE_VALID_MS - 1) != NULL, "still fresh just before it expires");
    ok(cache_lookup(&cache, a, CACHE_VALID_MS) == NULL, "expired after CACHE_VALID_MS");
    is_int(cache.count, 0, "  and evicted");

    fill(&cache, a, cache_drain(&cache), 0);
    ok(cache_lookup(&cache, a, 1) != NULL, "filled again");
    make_file("a.txt", 50, 'b');
    ok(cache_lookup(&cache, a, 2) != NULL, "a change is not seen before the drain");
    uint64_t gen = cache_drain(&cache);
    ok(cache_lookup(&cache, a, 3) == NULL, "after the drain the changed file's entry is gone");
    ok(cache.bytes == 0 && cache.count == 0, "  its bytes freed");

    /* A fill that races a change: its generation is older than the drain's. */
    const char *b = make_file("b.txt", 10, 'b');
    gen = cache_drain(&cache);
    int wd = cache_watch(cache.inotify_fd, b);
    make_file("b.txt", 20, 'c'); /* changes while "read" */
    struct stat st;
    stat(b, &st);
    char *body = calloc(1, (size_t)st.st_size);
    cache_insert(&cache, b, wd, &st, "text/plain", false, body, gen, 0);
    ok(cache_lookup(&cache, b, 1) == NULL, "a fill during which the file changed is not kept");
    fill(&cache, b, cache_drain(&cache), 0);
    ok(cache_lookup(&cache, b, 1) != NULL, "  the next fill is");
    cache_free(&cache);
    is_int(cache.inotify_fd, -1, "cache_free closes inotify");
}

static void room(void)
{
    struct cache cache;
    cache_init(&cache, true, 1024, 2500);
    const char *f1 = make_file("1", 1000, '1'), *f2 = make_file("2", 1000, '2'),
               *f3 = make_file("3", 1000, '3'), *big = make_file("big", 1025, 'x');
    char alias[300]; /* a second name of f1, made before any watch */
    snprintf(alias, sizeof alias, "%s/alias", dir);
    if (link(f1, alias) < 0)
        abort();
    ok(!cache_has_room(&cache, 1025), "no room for a file over max_file");
    fill(&cache, big, cache_drain(&cache), 0);
    ok(cache_lookup(&cache, big, 1) == NULL, "  and a fill of it is not kept");
    ok(cache_has_room(&cache, 1024), "room for max_file in an empty cache");
    fill(&cache, f1, cache_drain(&cache), 0);
    fill(&cache, f2, cache_drain(&cache), 0);
    ok(!cache_has_room(&cache, 1000), "2000 of 2500 bytes held: no room for 1000 more");
    ok(cache_has_room(&cache, 500), "  room for 500");
    ok(cache_lookup(&cache, f1, 1) != NULL, "the first file used again");
    fill(&cache, f3, cache_drain(&cache), 0);
    ok(cache_lookup(&cache, f2, 2) == NULL, "a third evicts the least recently used (the second)");
    ok(cache_lookup(&cache, f1, 2) != NULL && cache_lookup(&cache, f3, 2) != NULL,
       "  the first and third stay");
    ok(cache.bytes == 2000 && cache.count == 2, "  2000 bytes in two entries");

    /* One inode under two names: the second name's fill is not kept. */
    fill(&cache, alias, cache_drain(&cache), 0);
    ok(cache_lookup(&cache, alias, 3) == NULL, "a second name of a cached inode is not kept");
    make_file("1", 10, 'z');
    cache_drain(&cache);
    ok(cache_lookup(&cache, f1, 4) == NULL, "  and the watch the first name uses still works");

    is_int(cache_configure(&cache, true, 999, 2500), 0, "a reload lowers max_file to 999");
    ok(cache_lookup(&cache, f3, 5) == NULL && cache.count == 0, "  the 1000-byte entry goes");
    fill(&cache, f2, cache_drain(&cache), 0);
    fill(&cache, f1, cache_drain(&cache), 0);
    ok(cache_lookup(&cache, f1, 6) != NULL, "a 10-byte file fits");
    cache_configure(&cache, false, 999, 2500);
    ok(!cache.enabled && cache.count == 0 && cache.bytes == 0, "off: every entry goes");
    uint64_t misses = cache.misses;
    ok(cache_lookup(&cache, f1, 7) == NULL && cache.misses == misses,
       "  a lookup while off finds nothing and counts no miss");
    ok(cache.inotify_fd >= 0, "  inotify stays open for fills in flight");
    fill(&cache, f1, cache_drain(&cache), 0);
    ok(cache.count == 0, "  a fill ending while off is not kept");
    cache_configure(&cache, true, 999, 2500);
    fill(&cache, f1, cache_drain(&cache), 0);
    ok(cache_lookup(&cache, f1, 8) != NULL, "on again: kept");
    cache_configure(&cache, true, 999, 5);
    ok(cache.count == 0 && cache.bytes == 0, "a reload lowering max_bytes evicts to fit");
    cache_free(&cache);
    unlink(alias);
}

int main(void)
{
    if (mkdtemp(dir) == NULL)
        abort();
    hit_and_change();
    room();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return tap_done();
}
