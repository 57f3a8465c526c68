/* The files handler's jobs on the pool: the open (realpath, the checks
 * beneath the root and of hidden names, open, fstat, FILE.gz, a small
 * file's body, the cache's watch) and a directory's listing. Worker
 * threads only: they write their results in the job and nothing else. */
#include "handlers/files/open.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "handlers/files/cache.h"
#include "handlers/files/listing.h"
#include "handlers/files/path.h"
#include "server/base/util.h"
#include "server/pool/source.h"

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

void open_drop(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* A directory: redirect "/dir" to "/dir/", else its index.html or listing. */
static void open_directory(struct open_job *j)
{
    open_drop(&j->f.fd);
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
        open_drop(&j->f.fd); /* the body is all the response needs */
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

const struct zparams open_listing_zparams = {
    .level = Z_DEFAULT_COMPRESSION, .window_bits = 15 + 16, .mem_level = 8};

void open_list_work(struct gateway_job *job)
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

void open_work(struct gateway_job *job)
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
            open_drop(&j->f.gz_fd);
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
        open_drop(&j->f.fd);
        open_drop(&j->f.gz_fd);
    }
}
