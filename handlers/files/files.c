/* The files module: GET/HEAD of a file under the root. On the loop, the
 * request's path, the small-file cache and reads of page-cached files (the
 * loop and cache path); else the open job's submission (its work is
 * open.c's) and its answer. reply.c builds every file response. */
#include "handlers/files/files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handlers/deflate.h"
#include "handlers/files/cache.h"
#include "handlers/files/loop_reads.h"
#include "handlers/files/mime.h"
#include "handlers/files/open.h"
#include "handlers/files/path.h"
#include "handlers/files/reply.h"
#include "server/base/log.h"
#include "server/base/util.h"
#include "server/pool/zstates.h"

/* The module's state: the file cache, and what reads on the loop use. */
struct files_state {
    struct cache cache;
    int root_fd;   /* the root: what opens on the loop stay beneath; or -1 */
    char *scratch; /* a body read on the loop, until the response copies it */
    size_t scratch_cap;
    uint64_t cache_pass;     /* the loop's pass whose first lookup drained the cache */
    struct loop_reads reads; /* files opened and read on the loop */
};

static struct files_state *state_of(const struct server *srv)
{
    return server_module_state(srv, &files_module);
}

static struct cache *file_cache(const struct server *srv)
{
    return &state_of(srv)->cache;
}

static const struct config_table files_config_table;

/* The running values of the module's keys. */
static const struct files_config *files_config_of(const struct server *srv)
{
    return config_block(server_config(srv), &files_config_table);
}

/* errno -> status, and a log line where the admin should look. */
static int status_for(int err, const char *path)
{
    switch (err) {
    case -ENOENT:
    case -ENOTDIR:
    case -ENAMETOOLONG:
        return 404;
    case -EACCES:
    case -EPERM:
    case -ELOOP:
        return 403;
    case -EMFILE:
    case -ENFILE:
        log_warn("open \"%s\": %s", path, strerror(-err));
        return 503;
    default:
        log_error("open \"%s\": %s", path, strerror(-err));
        return 500;
    }
}

static void redirect(struct conn *c, struct open_job *j)
{
    const struct request *req = conn_request(c);
    char location[PATH_MAX * 3];
    location[0] = '/';
    if (!path_encode(j->relative, location + 1, sizeof location - 2)) {
        conn_send_error(c, 414, NULL);
        return;
    }
    const char *query = strchr(req->target, '?');
    conn_head_start(c, 301);
    conn_head_add(c, "Location: %s/%s\r\n", location, query ? query : "");
    conn_head_add(c, "Content-Type: text/plain; charset=utf-8\r\n");
    conn_send_text(c, "301 Moved Permanently\n");
}

#define LISTING_TYPE "text/html; charset=utf-8"

/* The largest body read on the loop and answered from memory: short work
 * (SCHED_SHORT_BYTES), which a pool read would not cut either. */
#define LOOP_ANSWER_MAX ((size_t)256 << 10)

/* Whether a listing may be gzipped, for a client that accepts it. */
static bool listing_varies(const struct server *srv)
{
    const struct files_config *cfg = files_config_of(srv);
    return cfg->gzip_files && reply_compressible(LISTING_TYPE, cfg->gzip_types);
}

static void respond(struct conn *c, struct open_job *j)
{
    if (j->no_index) {
        conn_head_start(c, 404);
        conn_head_add(c, "Content-Type: text/plain; charset=utf-8\r\n");
        conn_send_text(c, "404 Not Found: this directory has no index.html "
                          "(listing = on would list it)\n");
    } else if (j->err != 0) {
        conn_send_error(c, status_for(j->err, j->path), NULL);
    } else if (j->redirect) {
        redirect(c, j);
    } else if (j->listing != NULL) {
        conn_head_start(c, 200);
        conn_head_add(c,
                      "Content-Type: %s\r\n"
                      "X-Content-Type-Options: nosniff\r\nCache-Control: no-cache\r\n%s%s",
                      LISTING_TYPE,
                      listing_varies(conn_server(c)) ? "Vary: Accept-Encoding\r\n" : "",
                      j->listing_gz ? "Content-Encoding: gzip\r\n" : "");
        conn_send_body(c, j->listing, j->listing_len);
    } else {
        j->f.body = j->body;
        reply_file(c, files_config_of(conn_server(c)), &j->f, mime_type(j->path));
    }
}

/* The cache key of a resolved request path: "dir/" and "dir" differ. */
static void cache_key(const struct open_job *j, char *key, size_t size)
{
    size_t len = strlen(j->relative);
    if (len + 2 > size) { /* not with a PATH_MAX + 2 key from a PATH_MAX path */
        key[0] = '\0';
        return;
    }
    memcpy(key, j->relative, len);
    key[len] = '/';
    key[len + (j->want_dir ? 1 : 0)] = '\0';
}

static void open_after_work(struct gateway_job *job, int status);

/* A directory's listing on the pool, if the open found one is wanted:
 * returns true when it was submitted (the job lives on). */
static bool next_stage(struct open_job *j, struct server *srv)
{
    enum stage stage = j->stage;
    j->stage = STAGE_NONE;
    if (stage == STAGE_NONE || j->err != 0 || conn_closing(j->conn))
        return false;
    /* A directory's own size grows with its entries: the listing's cost. */
    uint64_t size = (uint64_t)j->f.st.st_size;
    struct gateway_cost cost = {.bytes = size, .remaining = size, .client = conn_client(j->conn)};
    /* A listing that may be gzipped takes a zlib state for its job (without
     * one, it goes out as it is). */
    if (j->gzip_listing_min > 0)
        j->zs = server_zstate_take(srv, &open_listing_zparams);
    int rc = gateway_submit(server_gateway(srv), &j->job, GATEWAY_LIST, cost, open_list_work,
                            open_after_work);
    if (rc < 0)
        j->err = -EMFILE; /* 503 */
    return rc == 0;
}

/* Nothing cancels these jobs (STATUS is always 0): a connection that closes
 * meanwhile waits for them, and they skip the response. */
static void open_after_work(struct gateway_job *job, int status)
{
    struct open_job *j = container_of(job, struct open_job, job);
    struct conn *c = j->conn;
    struct server *srv = conn_server(c);
    if (next_stage(j, srv))
        return;
    if (!conn_closing(c))
        respond(c, j);
    /* What the response did not take: HEAD, 304, errors, the unused variant. */
    open_drop(&j->f.fd);
    open_drop(&j->f.gz_fd);
    if (j->wd >= 0) {
        char key[PATH_MAX + 2];
        cache_key(j, key, sizeof key);
        if (j->err == 0 && j->body != NULL)
            cache_insert(file_cache(srv), key, j->wd, &j->f.st, mime_type(j->path), j->hidden,
                         j->body, j->cache_gen, server_now_ms(srv));
        else
            cache_unwatch(file_cache(srv), j->wd);
    } else {
        free(j->body);
    }
    server_memory_give(c, j->budgeted);
    if (j->zs != NULL) /* the list job is back */
        server_zstate_give(srv, j->zs);
    free(j->listing);
    free(j);
    conn_release(c);
}

/* Answers from the cache when a fresh entry fits the request: no Range
 * (served from the fd), and no gzip variant that the client could get. */
static bool send_cached(struct conn *c, struct open_job *j, bool gzip_possible)
{
    struct server *srv = conn_server(c);
    char key[PATH_MAX + 2];
    cache_key(j, key, sizeof key);
    struct files_state *st = state_of(srv);
    if (pass_new(server_pass(srv), &st->cache_pass))
        cache_drain(&st->cache);
    const struct cache_entry *e = cache_lookup(&st->cache, key, server_now_ms(srv));
    const struct files_config *cfg = files_config_of(srv);
    if (e == NULL || (gzip_possible && reply_compressible(e->type, cfg->gzip_types)))
        return false;
    /* Kept while dotfiles was on (a reload turned it off): the pool refuses it. */
    if (e->hidden && !cfg->dotfiles)
        return false;
    struct file f = {.st = e->st, .fd = -1, .body = e->body, .gz_fd = -1};
    reply_file(c, cfg, &f, e->type);
    return true;
}

/* The largest body read with the open when the cache does not want it:
 * the first piece the piece rule gives now, no larger than the cache's
 * largest file (the most a connection then holds in memory, as for a
 * cached body), and only while the budget has room for it (else the pump
 * reads the file). Takes that much of the budget for C's client; the
 * open gives it back. */
static size_t first_piece(struct conn *c, const struct files_config *cfg)
{
    size_t piece = server_file_piece(conn_server(c), cfg->file_cache_max_file, true);
    return server_memory_try(c, piece) ? piece : 0;
}

/* Buffer memory the budget lends a response answered from memory, given
 * back as the response ends (its handler state's free). */
struct lent {
    struct conn *c;
    size_t bytes;
};

static void lent_give(void *state)
{
    struct lent *l = state;
    server_memory_give(l->c, l->bytes);
    free(l);
}

/* Borrows BYTES for C's response from the budget, now or not at all. */
static bool lend(struct conn *c, size_t bytes)
{
    struct lent *l = malloc(sizeof *l);
    if (l == NULL)
        return false;
    if (!server_memory_try(c, bytes)) {
        free(l);
        return false;
    }
    *l = (struct lent){.c = c, .bytes = bytes};
    conn_set_handler_state(c, l, lent_give);
    return true;
}

/* Answers J on the loop when its file is in the page cache: opened there
 * (or found open by an earlier request in the same pass: loop_reads_open),
 * with the pool's rules: beneath the root, a symlink followed only while
 * it stays there, none at the end (the pool decides those), and none at
 * all with dotfiles off, no FIFO waited for; and its body read there if it
 * fits the first piece (a larger one goes to the pump, which reads it on
 * the pool). Returns true when it answered; else the pool opens the file
 * (an error is the pool's to answer, with its status and log line). */
static bool serve_on_loop(struct conn *c, struct open_job *j, const struct request *req,
                          const struct files_config *cfg)
{
    struct server *srv = conn_server(c);
    struct files_state *st = state_of(srv);
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW,
                           .resolve = RESOLVE_CACHED | RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    /* With dotfiles off, where a link leads may be hidden: a path with a
     * link goes to the pool, whose realpath() knows (and the cache then
     * keeps what it allowed). Knowing here would cost every open on the
     * loop a readlink of /proc/self/fd/N; this costs nothing without links. */
    if (!cfg->dotfiles)
        how.resolve |= RESOLVE_NO_SYMLINKS;
    struct file f = {.gz_fd = -1};
    /* The pass's fd: not closed here, kept (loop_reads_keep) if the
     * response reads it later. */
    int fd = loop_reads_open(&st->reads, st->root_fd, j->relative, &how, &f.st);
    /* A file the cache would take without evicting goes to the pool, which
     * fills it; once the cache is full, a miss read here costs less than a
     * crossing that would only evict another entry (a flood over more
     * files than it holds would otherwise cross the pool for every one). */
    if (fd < 0 || !S_ISREG(f.st.st_mode) || cache_has_room(file_cache(srv), (size_t)f.st.st_size))
        return false; /* the pool's: a status to decide, or a cache to fill */
    size_t size = (size_t)f.st.st_size;
    size_t first = server_file_piece(srv, cfg->file_cache_max_file, false);
    /* A larger body, up to LOOP_ANSWER_MAX, is read here too when the
     * budget lends it for the response (lend): no pool read and no pass
     * back for it, and the copy its connection keeps until the client has
     * it counts in the client's share. */
    /* Not one to gzip on the fly: that reads its file, never a body. */
    bool fly = j->gzip_possible && cfg->gzip_files &&
               reply_compressible(mime_type(j->path), cfg->gzip_types);
    bool lent =
        req->method == HTTP_GET && !fly && size > first && size <= LOOP_ANSWER_MAX && lend(c, size);
    if (lent)
        first = size;
    if (req->method == HTTP_GET && size <= LOOP_READS_BODY && size <= first && size > 0) {
        /* Read with its file for the rest of the pass: the requests for it
         * after this one read nothing. */
        const char *body = loop_reads_body(&st->reads, fd, size);
        if (body == NULL)
            return false;
        f.body = (char *)body;
        f.fd = -1;
    } else if (req->method == HTTP_GET && size <= first && size > 0) {
        bool room = size <= st->scratch_cap;
        if (!room) {
            char *grown = realloc(st->scratch, size);
            if (grown != NULL) {
                st->scratch = grown;
                st->scratch_cap = size;
                room = true;
            }
        }
        if (!room || !loop_reads_read(&st->reads, fd, st->scratch, size)) {
            if (lent)
                conn_set_handler_state(c, NULL, NULL); /* gives it back */
            return false;
        }
        f.body = st->scratch;
        f.fd = -1;
    } else {
        f.fd = loop_reads_keep(&st->reads, fd); /* the response's: reply_file takes it */
    }
    reply_file(c, cfg, &f, mime_type(j->path));
    open_drop(&f.fd);
    return true;
}

static int files_on_request(struct conn *c, const struct request *req)
{
    struct server *srv = conn_server(c);
    const struct files_config *cfg = files_config_of(srv);
    struct open_job *j = malloc(sizeof *j);
    if (j == NULL)
        return 503;
    int rc = path_resolve(req->target, j->relative, sizeof j->relative, &j->want_dir);
    if (rc < 0) {
        free(j);
        return rc == -EINVAL ? 400 : rc == -EACCES ? 403 : 414;
    }
    /* Hidden as if absent: a project's .git/ or .env is no one's business. */
    if (!cfg->dotfiles && path_hidden(j->relative)) {
        free(j);
        return 404;
    }
    bool ranged = req->headers[HEADER_RANGE] != NULL;
    j->gzip_possible = (cfg->gzip_static || cfg->gzip_files) &&
                       gzip_accepted(req->headers[HEADER_ACCEPT_ENCODING]);
    struct cache *cache = file_cache(srv);
    bool cached = cache->enabled && !ranged;
    if (cached && send_cached(c, j, j->gzip_possible)) {
        free(j);
        return 0;
    }
    size_t root_len;
    const char *root = server_root(srv, &root_len);
    size_t rel_len = strlen(j->relative);
    if (root_len + 1 + rel_len >= sizeof j->path) {
        free(j);
        return 414;
    }
    memcpy(j->path, root, root_len);
    j->path[root_len] = '/';
    memcpy(j->path + root_len + 1, j->relative, rel_len + 1);
    /* On the loop when it needs nothing the pool's open adds: FILE.gz,
     * a directory, a range. */
    bool simple = !j->want_dir && j->relative[0] != '\0' && !ranged &&
                  !(cfg->gzip_static && j->gzip_possible);
    if (simple && state_of(srv)->reads.on && serve_on_loop(c, j, req, cfg)) {
        free(j);
        return 0;
    }
    j->conn = c;
    j->root = root;
    j->root_len = root_len;
    j->want_gz = cfg->gzip_static && j->gzip_possible && !ranged;
    j->want_listing = cfg->listing;
    j->dotfiles = cfg->dotfiles;
    j->inotify_fd = cached ? cache->inotify_fd : -1;
    /* A HEAD or a Range needs no body, nor one that will be gzipped on the
     * fly (its source reads the file); the cache wants its whole file. */
    bool fly = j->gzip_possible && cfg->gzip_files &&
               reply_compressible(mime_type(j->path), cfg->gzip_types);
    bool first = !cached && !ranged && !fly && req->method == HTTP_GET;
    j->budgeted = first ? first_piece(c, cfg) : 0;
    j->first_max = cached ? cfg->file_cache_max_file : j->budgeted;
    j->disk = server_config(srv)->emulate_disk;
    j->cache_gen = cached ? cache_drain(cache) : 0;
    j->f = (struct file){.fd = -1, .gz_fd = -1};
    j->wd = -1;
    j->body = NULL;
    j->err = 0;
    j->redirect = false;
    j->no_index = false;
    j->hidden = false;
    j->listing = NULL;
    j->listing_gz = false;
    j->gzip_listing_min = j->gzip_possible && listing_varies(srv) ? cfg->gzip_min_size : 0;
    j->zs = NULL;
    j->stage = STAGE_NONE;
    /* Its cost: the most it reads; it tells what it read. */
    struct gateway_cost cost = {
        .bytes = j->first_max, .remaining = j->first_max, .client = conn_client(c)};
    rc = gateway_submit(server_gateway(srv), &j->job, GATEWAY_OPEN, cost, open_work,
                        open_after_work);
    if (rc < 0) {
        server_memory_give(c, j->budgeted);
        free(j);
        return 503;
    }
    conn_hold(c);
    return 0;
}

/* The one writer of the loop_reads switch (and of its pass's bytes): at
 * start and at each reload, from the running configuration. On only while
 * the root's fd is open, since every open on the loop is beneath it. */
static void set_loop_reads(struct server *srv, struct files_state *st)
{
    const struct config *core = server_config(srv);
    loop_reads_set(&st->reads, core->loop_reads && st->root_fd >= 0, core->send_turn);
}

static int files_init(struct server *srv, void **state)
{
    const struct files_config *cfg = files_config_of(srv);
    struct files_state *st = malloc(sizeof *st);
    if (st == NULL)
        return -ENOMEM;
    st->scratch = NULL;
    st->scratch_cap = 0;
    st->cache_pass = UINT64_MAX;
    size_t root_len;
    st->root_fd = open(server_root(srv, &root_len), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    loop_reads_init(&st->reads, server_pass(srv), server_root(srv, &root_len));
    set_loop_reads(srv, st);
    int err =
        cache_init(&st->cache, cfg->file_cache, cfg->file_cache_max_file, cfg->file_cache_size);
    if (err < 0)
        log_warn("file cache off: inotify: %s", strerror(-err));
    *state = st;
    return 0;
}

static void files_reload(struct server *srv, void *state)
{
    const struct files_config *cfg = files_config_of(srv);
    struct files_state *st = state;
    int err = cache_configure(&st->cache, cfg->file_cache, cfg->file_cache_max_file,
                              cfg->file_cache_size);
    set_loop_reads(srv, st);
    if (err < 0)
        log_warn("file cache off: inotify: %s", strerror(-err));
}

static void files_stats(const struct server *srv, const void *state, struct snapshot *out)
{
    const struct files_state *st = state;
    cache_stats(&st->cache, out);
    loop_reads_stats(&st->reads, out);
}

static void files_started(struct server *srv, void *state)
{
    const struct files_state *st = state;
    loop_reads_log(&st->reads, server_config(srv)->loop_reads);
}

static void files_fini(struct server *srv, void *state)
{
    struct files_state *st = state;
    cache_free(&st->cache);
    loop_reads_close(&st->reads);
    if (st->root_fd >= 0)
        close(st->root_fd);
    free(st->scratch);
    free(st);
}

static const struct route files_routes[] = {
    {.path = NULL,
     .methods = ROUTE_METHOD(HTTP_GET) | ROUTE_METHOD(HTTP_HEAD),
     .allow = "GET, HEAD",
     .on_request = files_on_request},
    {0},
};

static const struct config_key files_keys[] = {
    CONFIG_ONOFF(struct files_config, listing, "off",
                 "HTML listing of directories without index.html", CONFIG_RELOAD),
    CONFIG_ONOFF(
        struct files_config, dotfiles, "off",
        "serve and list names starting with '.' (off: 404, a symlink to one too, but /.well-known/ "
        "is served)",
        CONFIG_RELOAD),
    CONFIG_ONOFF(struct files_config, gzip_files, "on",
                 "gzip compressible files on the fly when the client accepts it", CONFIG_LIVE),
    CONFIG_ONOFF(struct files_config, gzip_static, "on",
                 "send FILE.gz instead of FILE when it exists", CONFIG_LIVE),
    CONFIG_BYTES(struct files_config, gzip_min_size, 1, GIB, "1k",
                 "smallest file compressed on the fly", CONFIG_RELOAD),
    {"gzip_types", CONFIG_STRING, CONFIG_FIELD(struct files_config, gzip_types), 0, 0,
     "text/* application/json application/javascript application/xml image/svg+xml "
     "application/wasm",
     "'TYPE ...'", "media types compressed on the fly (text/* matches any text/...)", CONFIG_RELOAD,
     NULL},
    {"cache_control", CONFIG_STRING, CONFIG_FIELD(struct files_config, cache_control), 0, 0, "off",
     "VALUE|off", "Cache-Control header of file responses", CONFIG_RELOAD, NULL},
    CONFIG_ONOFF(struct files_config, file_cache, "on",
                 "keep small files in memory (kept fresh with inotify)", CONFIG_LIVE),
    CONFIG_BYTES(struct files_config, file_cache_max_file, 1, GIB, "64k",
                 "largest file the cache keeps", CONFIG_RELOAD),
    CONFIG_BYTES(struct files_config, file_cache_size, 1, GIB, "32m", "memory for all cached files",
                 CONFIG_RELOAD),
};

static const struct config_table files_config_table =
    CONFIG_TABLE("static", files_keys, struct files_config);

const struct module files_module = {
    .name = "static",
    .routes = files_routes,
    .config = &files_config_table,
    .init = files_init,
    .reload = files_reload,
    .started = files_started,
    .stats = files_stats,
    .fini = files_fini,
};
