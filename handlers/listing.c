#include "handlers/listing.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "handlers/path.h"

#define ENTRIES_MAX 100000 /* a bigger directory is listed in part */

struct entry {
    char *name;
    bool dir;
    long long size;
    time_t mtime;
};

/* A growing output buffer; FAILED sticks once an allocation fails. */
struct page {
    char *buf;
    size_t len, cap;
    bool failed;
};

static void add(struct page *pg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add(struct page *pg, const char *fmt, ...)
{
    for (int attempt = 0; attempt < 2 && !pg->failed; attempt++) {
        va_list ap;
        va_start(ap, fmt);
        /* NULL + 0 is undefined behaviour: the first call measures only. */
        int n = vsnprintf(pg->buf ? pg->buf + pg->len : NULL, pg->cap - pg->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            pg->failed = true;
            return;
        }
        if ((size_t)n < pg->cap - pg->len) {
            pg->len += (size_t)n;
            return;
        }
        size_t cap = (pg->cap + (size_t)n) * 2;
        char *grown = realloc(pg->buf, cap);
        if (grown == NULL)
            pg->failed = true;
        else {
            pg->buf = grown;
            pg->cap = cap;
        }
    }
}

static void add_escaped(struct page *pg, const char *text)
{
    for (const char *p = text; *p != '\0'; p++) {
        switch (*p) {
        case '<':
            add(pg, "&lt;");
            break;
        case '>':
            add(pg, "&gt;");
            break;
        case '&':
            add(pg, "&amp;");
            break;
        case '"':
            add(pg, "&quot;");
            break;
        case '\'':
            add(pg, "&#39;");
            break;
        default:
            add(pg, "%c", *p);
        }
    }
}

static int by_name(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    return strcmp(x->name, y->name);
}

/* Reads DIR's entries (all but "." and ".."). Returns the count or -errno. */
static long read_entries(const char *dir, struct entry **out)
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
        qsort(list, n, sizeof *list, by_name);
    *out = list;
    return (long)n;
}

char *listing_build(const char *dir, const char *url_path, size_t *len)
{
    struct entry *list = NULL;
    long n = read_entries(dir, &list);
    if (n < 0) {
        errno = (int)-n;
        return NULL;
    }
    struct page pg = {.buf = NULL, .len = 0, .cap = 0, .failed = false};
    add(&pg, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of ");
    add_escaped(&pg, url_path);
    add(&pg, "</title>\n<style>body{font-family:sans-serif}td{padding:0 1em}"
             "td.n{text-align:right}</style></head>\n<body><h1>Index of ");
    add_escaped(&pg, url_path);
    add(&pg, "</h1>\n<table>\n<tr><th>Name</th><th>Size</th><th>Modified (UTC)</th></tr>\n");
    if (strcmp(url_path, "/") != 0)
        add(&pg, "<tr><td><a href=\"../\">../</a></td><td></td><td></td></tr>\n");
    for (long i = 0; i < n; i++) {
        struct entry *e = &list[i];
        char href[3 * 1024], date[32] = "";
        if (!path_encode(e->name, href, sizeof href))
            snprintf(href, sizeof href, "#");
        /* A name with ':' would read as a URL scheme: "./" keeps it relative. */
        add(&pg, "<tr><td><a href=\"./");
        add_escaped(&pg, href);
        add(&pg, "%s\">", e->dir ? "/" : "");
        add_escaped(&pg, e->name);
        add(&pg, "%s</a></td><td class=\"n\">", e->dir ? "/" : "");
        if (!e->dir && e->size >= 0)
            add(&pg, "%lld", e->size);
        struct tm tm;
        if (e->size >= 0 && gmtime_r(&e->mtime, &tm) != NULL)
            strftime(date, sizeof date, "%Y-%m-%d %H:%M", &tm);
        add(&pg, "</td><td>%s</td></tr>\n", date);
        free(e->name);
    }
    free(list);
    add(&pg, "</table>\n</body></html>\n");
    if (pg.failed) {
        free(pg.buf);
        errno = ENOMEM;
        return NULL;
    }
    *len = pg.len;
    return pg.buf;
}
