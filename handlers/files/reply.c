/* A file's response: which representation it sends (the file, FILE.gz or
 * the file gzipped on the fly), its validators and headers, the
 * preconditions and ranges, and its body. On the loop thread. */
#include "handlers/files/reply.h"

#include <string.h>
#include <strings.h>
#include <time.h>

#include "handlers/deflate.h"
#include "handlers/files/byteranges.h"
#include "handlers/files/cond.h"
#include "handlers/files/file_source.h"
#include "handlers/files/range.h"
#include "server/base/http_date.h"
#include "server/module.h"

bool reply_compressible(const char *type, const char *types)
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

static void choose_rep(struct conn *c, const struct files_config *cfg, struct file *f,
                       const char *type, struct rep *rep, bool *vary)
{
    const struct request *req = conn_request(c);
    *rep = (struct rep){.fd = f->fd, .st = &f->st};
    *vary = (cfg->gzip_files || cfg->gzip_static) && reply_compressible(type, cfg->gzip_types);
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
static void file_headers(struct conn *c, const struct files_config *cfg, const struct rep *rep,
                         time_t mtime, bool vary)
{
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
        struct pump_source *src = file_range_source(fd, r->first, len);
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
        src = deflate_file_source(rep->fd, size);
        f->fd = -1;
    } else {
        src = file_range_source(rep->fd, 0, size);
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

void reply_file(struct conn *c, const struct files_config *cfg, struct file *f, const char *type)
{
    const struct request *req = conn_request(c);
    struct rep rep;
    bool vary;
    choose_rep(c, cfg, f, type, &rep, &vary);
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
    file_headers(c, cfg, &rep, mtime, vary);
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
