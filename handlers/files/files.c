#include "handlers/files/files.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "handlers/files/byteranges.h"
#include "handlers/files/cache.h"
#include "handlers/files/cond.h"
#include "handlers/gzip.h"
#include "server/base/http_date.h"
#include "handlers/files/listing.h"
#include "handlers/files/mime.h"
#include "handlers/files/path.h"
#include "handlers/files/range.h"
#include "server/base/log.h"
#include "server/base/util.h"
#include "server/pool/zstates.h"

/* A file to send: open (FD), or its whole body in memory (BODY). */
struct file {
    struct stat st;
    int fd;           /* -1 when BODY holds the file, or once the response took it */
    const char *body; /* st.st_size bytes, or NULL */
    int gz_fd;        /* FILE.gz, or -1 */
    struct stat gz_st;
};

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

/* The module's state: the file cache, and what reads on the loop use. */
struct files_state {
    struct cache cache;
    int root_fd;   /* the root: what opens on the loop stay beneath; or -1 */
    char *scratch; /* a body read on the loop, until the response copies it */
    size_t scratch_cap;
    uint64_t cache_pass; /* the loop's pass whose first lookup drained the cache */
};

static struct files_state *state_of(const struct server *srv)
{
    return server_module_state(srv, &files_module);
}

static struct cache *file_cache(const struct server *srv)
{
    return &state_of(srv)->cache;
}

/* Opens REAL, a realpath() result that was judged, through no symlink: a
 * directory on it exchanged for a link since realpath() fails (ELOOP)
 * instead of leading somewhere unjudged (out of the root, or to .git/). A
 * kernel without openat2 gets O_NOFOLLOW, which guards the last component
 * only. O_NONBLOCK: a FIFO in the root must not hang a worker in open(). */
static int open_resolved(const char *real)
{
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW,
                           .resolve = RESOLVE_NO_SYMLINKS};
    long fd = syscall(SYS_openat2, AT_FDCWD, real, &how, sizeof how);
    if (fd < 0 && errno == ENOSYS)
        fd = open(real, (int)how.flags);
    return (int)fd;
}

/* realpath, refuse anything outside the root and, with dotfiles off,
 * anything hidden where it leads, open, fstat into FD and ST. */
static int open_beneath(struct open_job *j, const char *path, int *fd, struct stat *st)
{
    char *real = j->real;
    if (realpath(path, real) == NULL)
        return -errno;
    /* Symlinks are followed only while they stay under the root. */
    const char *relative = path_beneath(real, j->root, j->root_len);
    if (relative == NULL)
        return -EACCES;
    /* Hidden is where the path leads, not how it is spelled: a link to .env,
     * or through a link to .git/, is .env or .git/ (the loop checked only
     * the spelling). Absent, as the name itself would be. realpath() has
     * already walked every link, so knowing costs a scan of its result. */
    if (path_hidden(relative)) {
        if (!j->dotfiles)
            return -ENOENT;
        j->hidden = true;
    }
    *fd = open_resolved(real);
    if (*fd < 0)
        return -errno;
    if (fstat(*fd, st) < 0)
        return -errno;
    return 0;
}

static void drop(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* A directory: redirect "/dir" to "/dir/", else its index.html or listing. */
static void open_directory(struct open_job *j)
{
    drop(&j->f.fd);
    if (!j->want_dir) {
        j->redirect = true;
        return;
    }
    size_t len = strlen(j->path);
    if (len + sizeof "/index.html" > sizeof j->path) {
        j->err = -ENAMETOOLONG;
        return;
    }
    memcpy(j->path + len, "/index.html", sizeof "/index.html");
    j->err = open_beneath(j, j->path, &j->f.fd, &j->f.st);
    if (j->err == -ENOENT && j->want_listing) {
        j->path[len] = '\0';
        j->err = 0;
        j->stage = STAGE_LIST;
        return;
    }
    j->no_index = j->err == -ENOENT;
    if (j->err == 0 && S_ISDIR(j->f.st.st_mode))
        j->err = -ENOENT;
}

/* Whether PATH names the file that fstat described in ST. */
static bool names_file(const char *path, const struct stat *st)
{
    struct stat now;
    return stat(path, &now) == 0 && now.st_dev == st->st_dev && now.st_ino == st->st_ino;
}

/* Reads the whole body of a file no larger than the first piece, in the
 * open's job: the response needs no other crossing. A failure leaves the
 * body NULL and the pump reads the fd as for any file. */
static void read_first(struct open_job *j)
{
    size_t size = (size_t)j->f.st.st_size;
    char *body = malloc(size ? size : 1);
    uint64_t started = uv_hrtime();
    if (body != NULL && pump_pread_all(j->f.fd, body, size, 0) < 0) {
        free(body);
        body = NULL;
    }
    pump_emulate_disk(&j->disk, started, size); /* a file read like the pump's */
    j->body = body;
    if (body != NULL && !j->gzip_possible)
        drop(&j->f.fd); /* the body is all the response needs */
}

/* Reads a small file's body for the cache, watching the file first so that
 * any later change is reported; a failure just means no caching (the
 * response then comes from the fd).
 *
 * The watch goes on the path, the read on the fd opened by the open job,
 * and the file may have been renamed over in between (an atomic replace):
 * the watch would sit on the new file while the old one's bytes were
 * cached, and no event would ever come for them. So once the watch is in,
 * the path must still name the fd's file (device and inode), else nothing
 * is cached and the response comes from the fd. That is exact, in this
 * order (watch, check, read):
 * - a rename before the watch, even right after the open, leaves the path
 *   naming another file at the check: not cached;
 * - after the watch, every change to the watched file is an event, and any
 *   event from the open job's submit to the insert drops the fill
 *   (cache_insert's change count). That covers its content and the path
 *   being taken from it: renamed over or unlinked (its link count changes:
 *   IN_ATTRIB), renamed away (IN_MOVE_SELF). So when the check finds the
 *   fd's file, the watch is on that file, or the watched file left the path
 *   after the watch and its event drops the fill;
 * - the body is read after the check, so what is cached is what the path
 *   names, unless an event (which drops it) says otherwise.
 * As for any entry, a parent directory renamed is seen only at expiry. */
static void read_body(struct open_job *j)
{
    j->wd = cache_watch(j->inotify_fd, j->real);
    /* Stat again: a change between the first fstat and the watch went unseen. */
    if (j->wd < 0 || fstat(j->f.fd, &j->f.st) < 0 || (size_t)j->f.st.st_size > j->first_max)
        return;
    if (!names_file(j->real, &j->f.st))
        return; /* the path was renamed over: serve the fd, cache nothing */
    read_first(j);
}

/* A listing's deflate: a gzip wrapper, zlib's largest window and default
 * hash (a page of unknown size). */
static const struct zparams listing_zparams = {
    .level = Z_DEFAULT_COMPRESSION, .window_bits = 15 + 16, .mem_level = 8};

static void list_work(struct gateway_job *job)
{
    struct open_job *j = container_of(job, struct open_job, job);
    char shown[PATH_MAX + 2];
    snprintf(shown, sizeof shown, "/%s%s", j->relative, j->relative[0] ? "/" : "");
    j->listing = listing_build(j->path, shown, j->dotfiles ? NULL : j->root, &j->listing_len);
    j->err = j->listing ? 0 : -errno;
    if (j->listing == NULL || j->gzip_listing_min == 0 || j->listing_len < j->gzip_listing_min)
        return;
    /* Deflated here, whole: the page is in memory already, and this job is
     * the listing's own. Out of memory, it goes out as it is. */
    size_t gz_len;
    char *gz = j->zs != NULL && zstate_begin(j->zs) == Z_OK
                   ? listing_gzip(&j->zs->z, j->listing, j->listing_len, &gz_len)
                   : NULL;
    if (gz != NULL) {
        free(j->listing);
        j->listing = gz;
        j->listing_len = gz_len;
        j->listing_gz = true;
    }
}

static void open_work(struct gateway_job *job)
{
    struct open_job *j = container_of(job, struct open_job, job);
    j->err = open_beneath(j, j->path, &j->f.fd, &j->f.st);
    /* realpath() accepts "file/": a trailing slash must name a directory. */
    if (j->err == 0 && j->want_dir && !S_ISDIR(j->f.st.st_mode))
        j->err = -ENOTDIR;
    if (j->err == 0 && S_ISDIR(j->f.st.st_mode))
        open_directory(j);
    if (j->err == 0 && j->stage != STAGE_LIST && !j->redirect && !S_ISREG(j->f.st.st_mode))
        j->err = -EACCES;
    bool file = j->err == 0 && j->f.fd >= 0;
    if (file && j->want_gz) {
        char gz[PATH_MAX + 3];
        snprintf(gz, sizeof gz, "%s.gz", j->path);
        if (open_beneath(j, gz, &j->f.gz_fd, &j->f.gz_st) != 0 || !S_ISREG(j->f.gz_st.st_mode))
            drop(&j->f.gz_fd);
    }
    /* A file that fits the first piece: its body in this job too. */
    if (file && (size_t)j->f.st.st_size <= j->first_max) {
        if (j->inotify_fd >= 0)
            read_body(j);
        else
            read_first(j);
    }
    gateway_set_cost(&j->job, j->body != NULL ? (uint64_t)j->f.st.st_size : 0);
    if (j->err != 0) {
        drop(&j->f.fd);
        drop(&j->f.gz_fd);
    }
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

/* Is media TYPE (parameters ignored) listed in TYPES? A "text/STAR" entry matches any text. */
static bool compressible(const char *type, const char *types)
{
    size_t type_len = strcspn(type, ";");
    for (const char *p = types; *p != '\0';) {
        p += strspn(p, " ");
        size_t len = strcspn(p, " ");
        if (len >= 2 && p[len - 1] == '*' && p[len - 2] == '/') {
            if (type_len > len - 1 && strncasecmp(type, p, len - 1) == 0)
                return true;
        } else if (len > 0 && len == type_len && strncasecmp(type, p, len) == 0) {
            return true;
        }
        p += len;
    }
    return false;
}

/* The representation chosen for a response. */
struct rep {
    int fd;                /* what to read, or -1 */
    const struct stat *st; /* its stat */
    bool gzip_static, gzip_fly;
    char etag[ETAG_LEN + 2];
};

static const struct config_table files_config_table;

/* The running values of the module's keys. */
static const struct files_config *files_config_of(const struct server *srv)
{
    return config_block(server_config(srv), &files_config_table);
}

static void choose_rep(struct conn *c, struct file *f, const char *type, struct rep *rep,
                       bool *vary)
{
    const struct files_config *cfg = files_config_of(conn_server(c));
    const struct request *req = conn_request(c);
    *rep = (struct rep){.fd = f->fd, .st = &f->st};
    *vary = (cfg->gzip_files || cfg->gzip_static) && compressible(type, cfg->gzip_types);
    /* Ranges are served from the identity encoding only. */
    bool gzip_ok = *vary && req->headers[HEADER_RANGE] == NULL &&
                   gzip_accepted(req->headers[HEADER_ACCEPT_ENCODING]);
    if (gzip_ok && f->gz_fd >= 0) {
        rep->gzip_static = true;
        rep->fd = f->gz_fd;
        rep->st = &f->gz_st;
    } else if (gzip_ok && cfg->gzip_files && f->fd >= 0 &&
               (size_t)f->st.st_size >= cfg->gzip_min_size) {
        rep->gzip_fly = true;
    }
    etag_make((uint64_t)rep->st->st_ino, (uint64_t)rep->st->st_size,
              (int64_t)rep->st->st_mtim.tv_sec * 1000000000 + rep->st->st_mtim.tv_nsec,
              rep->gzip_fly ? "-gzip" : "", rep->etag + 2);
    /* Compressed on the fly: equivalent, not byte-identical across zlib versions. */
    if (rep->gzip_fly)
        memcpy(rep->etag, "W/", 2);
    else
        memmove(rep->etag, rep->etag + 2, strlen(rep->etag + 2) + 1);
}

/* Validators and the other headers every file response carries. */
static void file_headers(struct conn *c, const struct rep *rep, time_t mtime, bool vary)
{
    const struct files_config *cfg = files_config_of(conn_server(c));
    char modified[HTTP_DATE_LEN];
    time_t now = server_date_time(conn_server(c)); /* the second the Date header shows */
    /* A clock skewed into the future is not a modification date (RFC 9110 8.8.2.1). */
    http_date_format(mtime > now ? now : mtime, modified);
    conn_head_add(c, "ETag: %s\r\nLast-Modified: %s\r\n", rep->etag, modified);
    if (vary)
        conn_head_add(c, "Vary: Accept-Encoding\r\n");
    if (strcmp(cfg->cache_control, "off") != 0)
        conn_head_add(c, "Cache-Control: %s\r\n", cfg->cache_control);
}

static void send_ranges(struct conn *c, struct file *f, const char *type, struct range *r, int n)
{
    uint64_t size = (uint64_t)f->st.st_size;
    int fd = f->fd;
    f->fd = -1; /* the source takes it */
    if (n == 1) {
        conn_head_add(c, "Content-Type: %s\r\nContent-Range: bytes %llu-%llu/%llu\r\n", type,
                      (unsigned long long)r->first, (unsigned long long)r->last,
                      (unsigned long long)size);
        uint64_t len = r->last - r->first + 1;
        struct pump_source *src = pump_file_source(fd, r->first, len);
        if (src == NULL)
            conn_send_error(c, 500, NULL);
        else
            conn_send_source(c, src, (long long)len);
        return;
    }
    char boundary[BYTERANGES_BOUNDARY_LEN];
    uint64_t len;
    struct pump_source *src = byteranges_source(fd, size, r, n, type, &len, boundary);
    if (src == NULL) {
        conn_send_error(c, 500, NULL);
        return;
    }
    conn_head_add(c, "Content-Type: multipart/byteranges; boundary=%s\r\n", boundary);
    conn_send_source(c, src, (long long)len);
}

/* The body of a 200: from memory, or streamed by the pump (HEAD too builds
 * the source, so that conn_send_source writes exactly the head GET would). */
static void send_body(struct conn *c, struct file *f, const struct rep *rep)
{
    uint64_t size = (uint64_t)rep->st->st_size;
    struct pump_source *src;
    if (f->body != NULL && !rep->gzip_static && !rep->gzip_fly) {
        conn_send_body(c, f->body, (size_t)size);
        return;
    }
    if (size == 0) {
        conn_head_add(c, "Content-Length: 0\r\n");
        conn_send_head(c);
        return;
    }
    if (rep->gzip_fly) {
        src = gzip_file_source(rep->fd, size);
        f->fd = -1;
    } else {
        src = pump_file_source(rep->fd, 0, size);
        if (rep->gzip_static)
            f->gz_fd = -1;
        else
            f->fd = -1;
    }
    if (src == NULL)
        conn_send_error(c, 500, NULL);
    else
        conn_send_source(c, src, rep->gzip_fly ? -1 : (long long)size);
}

/* Preconditions, then 304, 412, 416, 206 or 200 (RFC 9110 13.2.2). Takes
 * the fds it sends; the caller closes what is left. */
static void send_file(struct conn *c, struct file *f, const char *type)
{
    const struct request *req = conn_request(c);
    struct rep rep;
    bool vary;
    choose_rep(c, f, type, &rep, &vary);
    time_t mtime = rep.st->st_mtime;
    int status = cond_check(req->headers[HEADER_IF_MATCH], req->headers[HEADER_IF_UNMODIFIED_SINCE],
                            req->headers[HEADER_IF_NONE_MATCH],
                            req->headers[HEADER_IF_MODIFIED_SINCE], true, rep.etag, mtime);
    if (status == 412) {
        conn_send_error(c, 412, NULL);
        return;
    }
    uint64_t size = (uint64_t)rep.st->st_size;
    struct range ranges[RANGE_MAX];
    int count = 0;
    enum range_result ranged = RANGE_IGNORE;
    const char *range = req->headers[HEADER_RANGE];
    const char *if_range = req->headers[HEADER_IF_RANGE];
    if (status == 0 && range != NULL && f->fd >= 0 &&
        (if_range == NULL || cond_if_range(if_range, rep.etag, mtime)))
        ranged = range_parse(range, size, ranges, &count);
    if (status == 0)
        status = ranged == RANGE_OK ? 206 : ranged == RANGE_UNSATISFIABLE ? 416 : 200;

    conn_head_start(c, status);
    conn_head_add(c, "X-Content-Type-Options: nosniff\r\n");
    file_headers(c, &rep, mtime, vary);
    if (status == 304) {
        conn_send_head(c);
    } else if (status == 416) {
        conn_head_add(c, "Content-Range: bytes */%llu\r\n", (unsigned long long)size);
        conn_head_add(c, "Content-Type: text/plain; charset=utf-8\r\n");
        conn_send_text(c, "416 Range Not Satisfiable\n");
    } else if (status == 206) {
        conn_head_add(c, "Accept-Ranges: bytes\r\n");
        send_ranges(c, f, type, ranges, count);
    } else {
        if (!rep.gzip_static && !rep.gzip_fly)
            conn_head_add(c, "Accept-Ranges: bytes\r\n");
        conn_head_add(c, "Content-Type: %s\r\n", type);
        if (rep.gzip_static || rep.gzip_fly)
            conn_head_add(c, "Content-Encoding: gzip\r\n");
        send_body(c, f, &rep);
    }
}

#define LISTING_TYPE "text/html; charset=utf-8"

/* Whether a listing may be gzipped, for a client that accepts it. */
static bool listing_varies(const struct server *srv)
{
    const struct files_config *cfg = files_config_of(srv);
    return cfg->gzip_files && compressible(LISTING_TYPE, cfg->gzip_types);
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
        send_file(c, &j->f, mime_type(j->path));
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
    struct gateway_cost cost = {.bytes = size, .remaining = size, .flow = conn_flow(j->conn)};
    /* A listing that may be gzipped takes a zlib state for its job (without
     * one, it goes out as it is). */
    if (j->gzip_listing_min > 0)
        j->zs = zstates_take(server_pump_env(srv)->zstates, &listing_zparams);
    int rc = gateway_submit(server_gateway(srv), &j->job, GATEWAY_LIST, cost, list_work,
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
    drop(&j->f.fd);
    drop(&j->f.gz_fd);
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
    budget_give(server_pump_env(srv)->budget, conn_flow(c), j->budgeted);
    if (j->zs != NULL) /* the list job is back */
        zstates_give(server_pump_env(srv)->zstates, j->zs);
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
    if (pump_loop_new_pass(server_pump_env(srv)->sender, &st->cache_pass))
        cache_drain(&st->cache);
    const struct cache_entry *e = cache_lookup(&st->cache, key, server_now_ms(srv));
    const struct files_config *cfg = files_config_of(srv);
    if (e == NULL || (gzip_possible && compressible(e->type, cfg->gzip_types)))
        return false;
    /* Kept while dotfiles was on (a reload turned it off): the pool refuses it. */
    if (e->hidden && !cfg->dotfiles)
        return false;
    struct file f = {.st = e->st, .fd = -1, .body = e->body, .gz_fd = -1};
    send_file(c, &f, e->type);
    return true;
}

/* The largest body read with the open when the cache does not want it:
 * the first piece the piece rule gives now, no larger than the cache's
 * largest file (the most a connection then holds in memory, as for a
 * cached body), and only while the budget has room for it (else the pump
 * reads the file). Takes that much of the budget for client FLOW; the
 * open gives it back. */
static size_t first_piece(struct server *srv, const struct files_config *cfg, uint64_t flow)
{
    struct pump_env *env = server_pump_env(srv);
    bool short_waiting = gateway_short_waiting(env->gateway, false);
    size_t piece = pump_piece(&env->partition, short_waiting, cfg->file_cache_max_file, false);
    return budget_try(env->budget, flow, piece) ? piece : 0;
}

/* Answers J on the loop when its file is in the page cache: opened there
 * (or found open by an earlier request in the same turn: pump_loop_open),
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
    struct pump_env *env = server_pump_env(srv);
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW,
                           .resolve = RESOLVE_CACHED | RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    /* With dotfiles off, where a link leads may be hidden: a path with a
     * link goes to the pool, whose realpath() knows (and the cache then
     * keeps what it allowed). Knowing here would cost every open on the
     * loop a readlink of /proc/self/fd/N; this costs nothing without links. */
    if (!cfg->dotfiles)
        how.resolve |= RESOLVE_NO_SYMLINKS;
    struct file f = {.gz_fd = -1};
    /* The turn's fd: not closed here, kept (pump_loop_keep) if the
     * response reads it later. */
    int fd = pump_loop_open(env->sender, st->root_fd, j->relative, &how, &f.st);
    /* A file the cache would take without evicting goes to the pool, which
     * fills it; once the cache is full, a miss read here costs less than a
     * crossing that would only evict another entry (a flood over more
     * files than it holds would otherwise cross the pool for every one). */
    if (fd < 0 || !S_ISREG(f.st.st_mode) || cache_has_room(file_cache(srv), (size_t)f.st.st_size))
        return false; /* the pool's: a status to decide, or a cache to fill */
    size_t size = (size_t)f.st.st_size;
    size_t first = pump_piece(&env->partition, false, cfg->file_cache_max_file, false);
    if (req->method == HTTP_GET && size <= PUMP_TURN_BODY && size <= first && size > 0) {
        /* Read with its file for the rest of the pass: the requests for it
         * after this one read nothing. */
        const char *body = pump_loop_body(env->sender, fd, size);
        if (body == NULL)
            return false;
        f.body = (char *)body;
        f.fd = -1;
    } else if (req->method == HTTP_GET && size <= first && size > 0) {
        if (size > st->scratch_cap) {
            char *grown = realloc(st->scratch, size);
            if (grown == NULL)
                return false;
            st->scratch = grown;
            st->scratch_cap = size;
        }
        if (!pump_loop_read(env->sender, fd, st->scratch, size))
            return false;
        f.body = st->scratch;
        f.fd = -1;
    } else {
        f.fd = pump_loop_keep(env->sender, fd); /* the response's: send_file takes it */
    }
    send_file(c, &f, mime_type(j->path));
    drop(&f.fd);
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
    if (simple && server_pump_env(srv)->sender->reads.on && serve_on_loop(c, j, req, cfg)) {
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
    bool fly =
        j->gzip_possible && cfg->gzip_files && compressible(mime_type(j->path), cfg->gzip_types);
    bool first = !cached && !ranged && !fly && req->method == HTTP_GET;
    j->budgeted = first ? first_piece(srv, cfg, conn_flow(c)) : 0;
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
        .bytes = j->first_max, .remaining = j->first_max, .flow = conn_flow(c)};
    rc = gateway_submit(server_gateway(srv), &j->job, GATEWAY_OPEN, cost, open_work,
                        open_after_work);
    if (rc < 0) {
        budget_give(server_pump_env(srv)->budget, conn_flow(c), j->budgeted);
        free(j);
        return 503;
    }
    conn_hold(c);
    return 0;
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
    if (st->root_fd < 0)
        server_pump_env(srv)->sender->reads.on = false; /* every open on the pool */
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
    if (st->root_fd < 0)
        server_pump_env(srv)->sender->reads.on = false;
    if (err < 0)
        log_warn("file cache off: inotify: %s", strerror(-err));
}

static void files_stats(const struct server *srv, const void *state, struct snapshot *out)
{
    const struct files_state *st = state;
    cache_stats(&st->cache, out);
}

static void files_fini(struct server *srv, void *state)
{
    struct files_state *st = state;
    cache_free(&st->cache);
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
    {"listing", CONFIG_BOOL, CONFIG_FIELD(struct files_config, listing), 0, 0, "off", "on|off",
     "HTML listing of directories without index.html", CONFIG_RELOAD, NULL},
    {"dotfiles", CONFIG_BOOL, CONFIG_FIELD(struct files_config, dotfiles), 0, 0, "off", "on|off",
     "serve and list names starting with '.' (off: 404, a symlink to one too, but /.well-known/ "
     "is served)",
     CONFIG_RELOAD, NULL},
    {"gzip_files", CONFIG_BOOL, CONFIG_FIELD(struct files_config, gzip_files), 0, 0, "on", "on|off",
     "gzip compressible files on the fly when the client accepts it", CONFIG_LIVE, NULL},
    {"gzip_static", CONFIG_BOOL, CONFIG_FIELD(struct files_config, gzip_static), 0, 0, "on",
     "on|off", "send FILE.gz instead of FILE when it exists", CONFIG_LIVE, NULL},
    {"gzip_min_size", CONFIG_SIZE, CONFIG_FIELD(struct files_config, gzip_min_size), 1, GIB, "1k",
     "SIZE", "smallest file compressed on the fly", CONFIG_RELOAD, NULL},
    {"gzip_types", CONFIG_STRING, CONFIG_FIELD(struct files_config, gzip_types), 0, 0,
     "text/* application/json application/javascript application/xml image/svg+xml "
     "application/wasm",
     "'TYPE ...'", "media types compressed on the fly (text/* matches any text/...)", CONFIG_RELOAD,
     NULL},
    {"cache_control", CONFIG_STRING, CONFIG_FIELD(struct files_config, cache_control), 0, 0, "off",
     "VALUE|off", "Cache-Control header of file responses", CONFIG_RELOAD, NULL},
    {"file_cache", CONFIG_BOOL, CONFIG_FIELD(struct files_config, file_cache), 0, 0, "on", "on|off",
     "keep small files in memory (kept fresh with inotify)", CONFIG_LIVE, NULL},
    {"file_cache_max_file", CONFIG_SIZE, CONFIG_FIELD(struct files_config, file_cache_max_file), 1,
     GIB, "64k", "SIZE", "largest file the cache keeps", CONFIG_RELOAD, NULL},
    {"file_cache_size", CONFIG_SIZE, CONFIG_FIELD(struct files_config, file_cache_size), 1, GIB,
     "32m", "SIZE", "memory for all cached files", CONFIG_RELOAD, NULL},
};

static const struct config_table files_config_table =
    CONFIG_TABLE("static", files_keys, struct files_config);

const struct module files_module = {
    .name = "static",
    .routes = files_routes,
    .config = &files_config_table,
    .init = files_init,
    .reload = files_reload,
    .stats = files_stats,
    .fini = files_fini,
};
