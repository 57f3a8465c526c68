/* The multipart/byteranges source (handlers/files/byteranges.c), filled as
 * the pump would fill it: the body is the parts' heads and bytes in order
 * whatever the piece size, the length it announces is the length it makes,
 * it ends once (at the closing delimiter) and closes its file then, and a
 * file that shrank under it is an error, not a short body. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handlers/files/byteranges.h"
#include "tests/tap.h"

#define SIZE 100000

static char content[SIZE];
static char path[] = "/tmp/unclog-test-byterangesXXXXXX";

static int open_file(void)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        abort();
    return fd;
}

/* The body RFC 9110 14.6 asks for, written out by the test. */
static size_t expected(char *out, size_t cap, const struct range *r, int count,
                       const char *boundary)
{
    size_t n = 0;
    for (int i = 0; i < count; i++) {
        n += (size_t)snprintf(out + n, cap - n,
                              "\r\n--%s\r\nContent-Type: text/plain\r\n"
                              "Content-Range: bytes %llu-%llu/%d\r\n\r\n",
                              boundary, (unsigned long long)r[i].first,
                              (unsigned long long)r[i].last, SIZE);
        size_t len = (size_t)(r[i].last - r[i].first + 1);
        memcpy(out + n, content + r[i].first, len);
        n += len;
    }
    n += (size_t)snprintf(out + n, cap - n, "\r\n--%s--\r\n", boundary);
    return n;
}

static bool fd_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

/* Fills SRC in pieces of PIECE until it says EOF; returns the bytes, or
 * the error of a fill. *FILLS counts the fills, *EOFS the EOFs seen. */
static long long drain(struct pump_source *src, size_t piece, char *out, size_t cap, int *fills)
{
    size_t n = 0;
    bool eof = false;
    *fills = 0;
    static char buf[1 << 17];
    while (!eof && *fills < 100000) {
        size_t len = 0;
        int rc = src->ops->fill(src, piece, buf, sizeof buf, &len, &eof);
        (*fills)++;
        if (rc < 0)
            return rc;
        if (len > piece || n + len > cap)
            return -E2BIG;
        memcpy(out + n, buf, len);
        n += len;
    }
    return (long long)n;
}

static void body(const struct range *r, int count, size_t piece, const char *desc)
{
    static char got[3 * SIZE], want[3 * SIZE];
    char boundary[BYTERANGES_BOUNDARY_LEN];
    uint64_t length = 0;
    int fd = open_file();
    struct pump_source *src =
        byteranges_source(fd, SIZE, r, count, "text/plain", &length, boundary);
    ok(src != NULL, desc);
    ok(strncmp(boundary, "unclog", 6) == 0 && strlen(boundary) == 22 &&
           strspn(boundary + 6, "0123456789abcdef") == 16,
       "  the boundary: a fixed prefix and 16 hex digits");
    size_t want_len = expected(want, sizeof want, r, count, boundary);
    is_int(length, want_len, "  the length announced is the body's");
    is_int(src->remaining, want_len, "  and what remains to fill");
    ok(src->reads_file, "  its fills read a file (the partition cuts them)");
    int fills;
    long long n = drain(src, piece, got, sizeof got, &fills);
    is_int(n, want_len, "  the fills make that many bytes, none over the piece");
    ok(n == (long long)want_len && memcmp(got, want, want_len) == 0,
       "  the parts' heads and bytes in order, then the closing delimiter");
    is_int(src->remaining, 0, "  nothing remains");
    ok(!fd_open(fd), "  its file is closed after the last read");
    src->ops->release(src);
}

static void bodies(void)
{
    const struct range one[] = {{0, 0}};
    const struct range three[] = {{10, 19}, {500, 70000}, {SIZE - 1, SIZE - 1}};
    const struct range last[] = {{0, 99}, {SIZE - 100, SIZE - 1}};
    body(one, 1, 65536, "one byte, in one piece");
    body(three, 3, 1, "three ranges, a byte per fill (heads cut anywhere)");
    body(three, 3, 7, "three ranges, seven bytes per fill");
    body(three, 3, 65536, "three ranges, 64 KiB per fill");
    body(last, 2, 100, "the first and last hundred bytes, a part per fill");
}

static void shrunk(void)
{
    const struct range r[] = {{0, 9}, {SIZE - 10, SIZE - 1}};
    char boundary[BYTERANGES_BOUNDARY_LEN];
    uint64_t length;
    int fd = open_file();
    struct pump_source *src = byteranges_source(fd, SIZE, r, 2, "text/plain", &length, boundary);
    if (truncate(path, SIZE / 2) < 0)
        abort();
    static char got[3 * SIZE];
    int fills;
    long long n = drain(src, 65536, got, sizeof got, &fills);
    is_int(n, -EIO, "a file shorter than its ranges: the fill fails with EIO");
    ok(fd_open(fd), "  its file is still open (the source owns it)");
    src->ops->release(src);
    ok(!fd_open(fd), "  release closes it");
}

static void released_early(void)
{
    const struct range r[] = {{0, 9}, {20, 29}};
    char boundary[BYTERANGES_BOUNDARY_LEN];
    uint64_t length;
    int fd = open_file();
    struct pump_source *src = byteranges_source(fd, SIZE, r, 2, "text/plain", &length, boundary);
    char buf[16];
    size_t len;
    bool eof;
    is_int(src->ops->fill(src, sizeof buf, buf, sizeof buf, &len, &eof), 0, "a first fill");
    ok(len == sizeof buf && !eof, "  a piece's worth, not the end");
    src->ops->release(src);
    ok(!fd_open(fd), "released before its end: the file is closed");
}

int main(void)
{
    for (int i = 0; i < SIZE; i++)
        content[i] = (char)('a' + (i * 7 + i / 251) % 26);
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, content, SIZE) != SIZE)
        abort();
    close(fd);
    bodies();
    released_early();
    shrunk();
    unlink(path);
    return tap_done();
}
