#include "handlers/files/listing.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <zlib.h>

#include "handlers/files/path.h"
#include "server/base/util.h"

#define ENTRIES_MAX 100000 /* a bigger directory is listed in part */

struct entry {
    char *name;
    bool dir;
    long long size;
    time_t mtime;
};

static void add_escaped(struct buf *pg, const char *text)
{
    for (const char *p = text; *p != '\0'; p++) {
        switch (*p) {
        case '<':
            buf_printf(pg, "&lt;");
            break;
        case '>':
            buf_printf(pg, "&gt;");
            break;
        case '&':
            buf_printf(pg, "&amp;");
            break;
        case '"':
            buf_printf(pg, "&quot;");
            break;
        case '\'':
            buf_printf(pg, "&#39;");
            break;
        default:
            buf_printf(pg, "%c", *p);
        }
    }
}

/* Directories first, then files; each group by name. */
static int by_kind_then_name(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->dir != y->dir)
        return x->dir ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* SIZE as a reader takes it in ("512 B", "8.0 KiB", "1.2 MiB"), the exact
 * count in the cell's title. */
static void add_size(struct buf *pg, long long size)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    buf_printf(pg, "<td class=\"n\" title=\"%lld bytes\">", size);
    if (size < 1024) {
        buf_printf(pg, "%lld B</td>", size);
        return;
    }
    double value = (double)size / 1024;
    size_t unit = 0;
    /* 1023.96 KiB would print as "1024.0 KiB": the next unit reads better. */
    while (value >= 1023.95 && unit + 1 < sizeof units / sizeof units[0]) {
        value /= 1024;
        unit++;
    }
    buf_printf(pg, "%.1f %s</td>", value, units[unit]);
}

/* Whether the entry NAME of the directory shown as URL_PATH is hidden
 * (path_hidden of its path under the root). */
static bool hidden(const char *url_path, const char *name)
{
    if (name[0] != '.')
        return false;
    char relative[PATH_MAX];
    int n = snprintf(relative, sizeof relative, "%s%s", url_path + 1, name);
    return n < 0 || (size_t)n >= sizeof relative || path_hidden(relative);
}

/* Whether entry DE of directory DIR is a symlink that leads to a hidden
 * name under ROOT (a link to .env, to .git/, to another such link). One
 * that leads nowhere or out of the root is judged by its name alone:
 * serving it fails anyway. */
static bool leads_hidden(const char *dir, const struct dirent *de, const char *root)
{
    if (de->d_type != DT_LNK && de->d_type != DT_UNKNOWN)
        return false;
    char path[PATH_MAX], real[PATH_MAX];
    size_t dir_len = strlen(dir);
    const char *sep = dir_len > 0 && dir[dir_len - 1] == '/' ? "" : "/";
    int n = snprintf(path, sizeof path, "%s%s%s", dir, sep, de->d_name);
    if (n < 0 || (size_t)n >= sizeof path)
        return true;
    struct stat st;
    if (de->d_type == DT_UNKNOWN && (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode)))
        return false;
    if (realpath(path, real) == NULL)
        return false;
    const char *relative = path_beneath(real, root, strlen(root));
    return relative != NULL && path_hidden(relative);
}

/* Reads DIR's entries (all but "." and "..", and hidden ones unless
 * HIDE_ROOT is NULL). Returns the count or -errno. */
static long read_entries(const char *dir, const char *url_path, const char *hide_root,
                         struct entry **out)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -errno;
    struct entry *list = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    long rc = 0;
    while (n < ENTRIES_MAX && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (hide_root != NULL && (hidden(url_path, de->d_name) || leads_hidden(dir, de, hide_root)))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            struct entry *grown = realloc(list, cap * sizeof *list);
            if (grown == NULL) {
                rc = -ENOMEM;
                break;
            }
            list = grown;
        }
        struct stat st;
        struct entry *e = &list[n];
        e->name = strdup(de->d_name);
        if (e->name == NULL) {
            rc = -ENOMEM;
            break;
        }
        bool ok = fstatat(dirfd(d), de->d_name, &st, 0) == 0;
        e->dir = ok && S_ISDIR(st.st_mode);
        e->size = ok ? (long long)st.st_size : -1;
        e->mtime = ok ? st.st_mtime : 0;
        n++;
    }
    closedir(d);
    if (rc < 0) {
        for (size_t i = 0; i < n; i++)
            free(list[i].name);
        free(list);
        return rc;
    }
    if (n > 1) /* qsort(NULL, 0, ...) is undefined */
        qsort(list, n, sizeof *list, by_kind_then_name);
    *out = list;
    return (long)n;
}

char *listing_build(const char *dir, const char *url_path, const char *hide_root, size_t *len)
{
    struct entry *list = NULL;
    long n = read_entries(dir, url_path, hide_root, &list);
    if (n < 0) {
        errno = (int)-n;
        return NULL;
    }
    struct buf pg;
    buf_init_growing(&pg);
    buf_printf(&pg, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of ");
    add_escaped(&pg, url_path);
    buf_printf(&pg, "</title>\n<style>body{font-family:sans-serif}td{padding:0 1em}"
                    "td.n{text-align:right}</style></head>\n<body><h1>Index of ");
    add_escaped(&pg, url_path);
    buf_printf(&pg, "</h1>\n<table>\n<tr><th>Name</th><th>Size</th><th>Modified (UTC)</th></tr>\n");
    if (strcmp(url_path, "/") != 0)
        buf_printf(&pg, "<tr><td><a href=\"../\">../</a></td><td></td><td></td></tr>\n");
    for (long i = 0; i < n; i++) {
        struct entry *e = &list[i];
        char href[3 * 1024], date[32] = "";
        if (!path_encode(e->name, href, sizeof href))
            snprintf(href, sizeof href, "#");
        /* A name with ':' would read as a URL scheme: "./" keeps it relative. */
        buf_printf(&pg, "<tr><td><a href=\"./");
        add_escaped(&pg, href);
        buf_printf(&pg, "%s\">", e->dir ? "/" : "");
        add_escaped(&pg, e->name);
        buf_printf(&pg, "%s</a></td>", e->dir ? "/" : "");
        if (!e->dir && e->size >= 0)
            add_size(&pg, e->size);
        else
            buf_printf(&pg, "<td></td>");
        struct tm tm;
        if (e->size >= 0 && gmtime_r(&e->mtime, &tm) != NULL)
            strftime(date, sizeof date, "%Y-%m-%d %H:%M", &tm);
        buf_printf(&pg, "<td>%s</td></tr>\n", date);
        free(e->name);
    }
    free(list);
    buf_printf(&pg, "</table>\n</body></html>\n");
    if (pg.failed) {
        free(pg.data);
        errno = ENOMEM;
        return NULL;
    }
    *len = pg.len;
    return pg.data;
}

char *listing_gzip(z_stream *z, const char *page, size_t len, size_t *gz_len)
{
    if (len > UINT_MAX) {
        errno = EFBIG;
        return NULL;
    }
    /* deflateBound of a stream set up counts the wrapper: one call finishes. */
    uLong cap = deflateBound(z, (uLong)len);
    char *out = malloc(cap);
    if (out == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    z->next_in = (Bytef *)page;
    z->avail_in = (uInt)len;
    z->next_out = (Bytef *)out;
    z->avail_out = (uInt)cap;
    int rc = deflate(z, Z_FINISH);
    *gz_len = z->total_out;
    if (rc != Z_STREAM_END) {
        free(out);
        errno = ENOMEM;
        return NULL;
    }
    char *shrunk = realloc(out, *gz_len);
    return shrunk != NULL ? shrunk : out;
}
