#include "handlers/static.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handlers/http_date.h"
#include "handlers/mime.h"
#include "handlers/path.h"
#include "server/server.h"

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* One open+fstat on the pool. Owned by the handler from submit to done;
 * holds its connection alive in between. */
struct open_job {
    struct gateway_job job;
    struct conn *conn;
    const char *root; /* the server's realpath'ed root, immutable while running */
    size_t root_len;
    bool want_dir, head;
    /* results, written by the worker */
    int err;
    int fd;
    bool redirect;
    struct stat st;
    char path[PATH_MAX];     /* root + '/' + relative path; + "/index.html" for a dir */
    char relative[PATH_MAX]; /* for the redirect */
};

/* realpath, refuse anything outside the root, open, fstat. */
static int open_beneath(struct open_job *j)
{
    char real[PATH_MAX];
    if (realpath(j->path, real) == NULL)
        return -errno;
    /* Symlinks are followed only while they stay under the root. */
    bool inside = strncmp(real, j->root, j->root_len) == 0 &&
                  (real[j->root_len] == '/' || real[j->root_len] == '\0' || j->root_len == 1);
    if (!inside)
        return -EACCES;
    /* O_NONBLOCK: a FIFO in the root must not hang a worker in open(). */
    j->fd = open(real, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
    if (j->fd < 0)
        return -errno;
    if (fstat(j->fd, &j->st) < 0)
        return -errno;
    return 0;
}

static void drop_fd(struct open_job *j)
{
    if (j->fd >= 0)
        close(j->fd);
    j->fd = -1;
}

static void open_work(struct gateway_job *job)
{
    struct open_job *j = container_of(job, struct open_job, job);
    j->err = open_beneath(j);
    /* realpath() accepts "file/": a trailing slash must name a directory. */
    if (j->err == 0 && j->want_dir && !S_ISDIR(j->st.st_mode))
        j->err = -ENOTDIR;
    if (j->err == 0 && S_ISDIR(j->st.st_mode)) {
        drop_fd(j);
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
        j->err = open_beneath(j);
        if (j->err == 0 && S_ISDIR(j->st.st_mode))
            j->err = -ENOENT;
    }
    if (j->err == 0 && !S_ISREG(j->st.st_mode))
        j->err = -EACCES;
    if (j->err != 0 || j->head || j->st.st_size == 0)
        drop_fd(j);
}

/* errno -> status, and whether it is worth an error log line. */
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
    conn_send_body(c, "301 Moved Permanently\n", 22);
}

static void respond(struct conn *c, struct open_job *j)
{
    if (j->err != 0) {
        conn_send_error(c, status_for(j->err, j->path), NULL);
        return;
    }
    if (j->redirect) {
        redirect(c, j);
        return;
    }
    char modified[HTTP_DATE_LEN];
    http_date_format(j->st.st_mtime, modified);
    conn_head_start(c, 200);
    conn_head_add(c, "Content-Type: %s\r\nLast-Modified: %s\r\n", mime_type(j->path), modified);
    unsigned long long size = (unsigned long long)j->st.st_size;
    if (j->fd < 0) {
        conn_head_add(c, "Content-Length: %llu\r\n", size);
        conn_send_head(c);
        return;
    }
    struct pump_source *src = pump_file_source(j->fd, 0, size, conn_server(c)->cfg->partition);
    j->fd = -1;
    if (src == NULL) {
        conn_send_error(c, 500, NULL);
        return;
    }
    conn_send_source(c, src, (long long)size);
}

static void open_after_work(struct gateway_job *job, int status)
{
    struct open_job *j = container_of(job, struct open_job, job);
    struct conn *c = j->conn;
    if (status < 0)
        j->err = status == UV_ECANCELED ? -ECANCELED : -EIO;
    if (!conn_closing(c))
        respond(c, j);
    drop_fd(j);
    free(j);
    conn_release(c);
}

int static_on_request(struct conn *c, const struct request *req)
{
    struct server *srv = conn_server(c);
    struct open_job *j = malloc(sizeof *j);
    if (j == NULL)
        return 503;
    int rc = path_resolve(req->target, j->relative, sizeof j->relative, &j->want_dir);
    if (rc < 0) {
        free(j);
        return rc == -EINVAL ? 400 : rc == -EACCES ? 403 : 414;
    }
    int n = snprintf(j->path, sizeof j->path, "%s/%s", srv->root, j->relative);
    if (n < 0 || (size_t)n >= sizeof j->path) {
        free(j);
        return 414;
    }
    j->conn = c;
    j->root = srv->root;
    j->root_len = srv->root_len;
    j->head = req->head;
    j->fd = -1;
    j->err = 0;
    j->redirect = false;
    rc = gateway_submit(srv->loop, &j->job, GATEWAY_OPEN, open_work, open_after_work);
    if (rc < 0) {
        free(j);
        return 503;
    }
    conn_hold(c);
    return 0;
}
