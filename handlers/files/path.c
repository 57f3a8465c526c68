#include "handlers/files/path.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes %XX escapes of the path part of TARGET into OUT. */
static int decode(const char *target, char *out, size_t size)
{
    size_t n = 0;
    for (const char *p = target; *p != '\0' && *p != '?' && *p != '#'; p++) {
        char c = *p;
        if (c == '%') {
            int hi = hex(p[1]), lo = hi < 0 ? -1 : hex(p[2]);
            if (lo < 0)
                return -EINVAL;
            c = (char)(hi * 16 + lo);
            p += 2;
        }
        if (c == '\0')
            return -EINVAL;
        if (n + 1 >= size)
            return -ENAMETOOLONG;
        out[n++] = c;
    }
    out[n] = '\0';
    return 0;
}

int path_resolve(const char *target, char *out, size_t size, bool *dir)
{
    char decoded[4096];
    int rc = decode(target, decoded, sizeof decoded);
    if (rc < 0)
        return rc;
    size_t len = strlen(decoded);
    *dir = len == 0 || decoded[len - 1] == '/';

    size_t n = 0; /* bytes of OUT in use; segments are joined by '/' */
    for (char *seg = decoded, *next; seg != NULL; seg = next) {
        next = strchr(seg, '/');
        if (next != NULL)
            *next++ = '\0';
        if (seg[0] == '\0' || strcmp(seg, ".") == 0)
            continue;
        if (strcmp(seg, "..") == 0) {
            if (n == 0)
                return -EACCES;
            while (n > 0 && out[n - 1] != '/')
                n--;
            if (n > 0)
                n--; /* the '/' before the dropped segment */
            continue;
        }
        size_t seg_len = strlen(seg);
        if (n + (n > 0) + seg_len + 1 > size)
            return -ENAMETOOLONG;
        if (n > 0)
            out[n++] = '/';
        memcpy(out + n, seg, seg_len);
        n += seg_len;
    }
    if (size == 0)
        return -ENAMETOOLONG;
    out[n] = '\0';
    return 0;
}

bool path_hidden(const char *relative)
{
    static const char well_known[] = ".well-known";
    const char *seg = relative;
    if (strncmp(seg, well_known, sizeof well_known - 1) == 0 &&
        (seg[sizeof well_known - 1] == '/' || seg[sizeof well_known - 1] == '\0'))
        seg += sizeof well_known - 1;
    for (; *seg != '\0'; seg++) {
        if (*seg == '.' && (seg == relative || seg[-1] == '/'))
            return true;
    }
    return false;
}

const char *path_beneath(const char *real, const char *root, size_t root_len)
{
    if (strncmp(real, root, root_len) != 0)
        return NULL;
    if (root_len == 1) /* "/": every absolute path is under it */
        return real + 1;
    if (real[root_len] == '\0')
        return real + root_len;
    return real[root_len] == '/' ? real + root_len + 1 : NULL;
}

bool path_encode(const char *path, char *out, size_t size)
{
    static const char safe[] = "-._~/!$&'()*+,;=:@";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)path; *p != '\0'; p++) {
        bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                     (*p >= '0' && *p <= '9') || strchr(safe, *p) != NULL;
        if (n + (plain ? 1 : 3) >= size)
            return false;
        if (plain)
            out[n++] = (char)*p;
        else
            n += (size_t)snprintf(out + n, 4, "%%%02X", *p);
    }
    if (size == 0)
        return false;
    out[n] = '\0';
    return true;
}
