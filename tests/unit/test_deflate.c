/* The deflate source of a file (deflate_file_source, handlers/gzip.c: the
 * files handler's on-the-fly gzip), filled as the pump fills it: whatever
 * the piece, the output is one gzip member of the file's bytes; it ends
 * once, closes its file at the last read, counts what remains, holds a
 * window no larger than a small file needs, gives its zlib state back at
 * release, and fails (not a short body) when the file shrank. And
 * gzip_accepted, the Accept-Encoding rule both handlers use. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "handlers/deflate.h"
#include "server/pool/pump.h"
#include "server/pool/zstates.h"
#include "tests/tap.h"

#define BIG (300 * 1024 + 7)

static char content[BIG];
static char path[] = "/tmp/unclog-test-gzipXXXXXX";
static struct zstates zstates;
static struct pump_env env = {.zstates = &zstates};
static struct pump pump = {.env = &env};

static int file_of(size_t size)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, content, size) != (ssize_t)size || lseek(fd, 0, SEEK_SET) < 0)
        abort();
    return fd;
}

static bool fd_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

/* Whether OUT (LEN bytes) is one gzip member whose bytes are WANT (N). */
static bool gunzips_to(const char *out, size_t len, const char *want, size_t n)
{
    static char back[BIG + 1];
    z_stream in = {0};
    if (inflateInit2(&in, 15 + 16) != Z_OK)
        return false;
    in.next_in = (Bytef *)out;
    in.avail_in = (uInt)len;
    in.next_out = (Bytef *)back;
    in.avail_out = sizeof back;
    int rc = inflate(&in, Z_FINISH);
    bool good =
        rc == Z_STREAM_END && in.avail_in == 0 && in.total_out == n && memcmp(back, want, n) == 0;
    inflateEnd(&in);
    return good;
}

/* A file of SIZE bytes gzipped in pieces of PIECE input bytes. */
static void whole_file(size_t size, size_t piece, const char *desc)
{
    static char out[2 * BIG + 1024], *slot;
    int fd = file_of(size);
    struct pump_source *src = deflate_file_source(fd, size);
    ok(src != NULL, desc);
    src->pump = &pump;
    ok(src->reads_file && src->remaining == size, "  a file read: its size remains");
    size_t cap = src->ops->size(src, piece);
    ok(cap >= piece, "  a slot holds what a piece makes");
    slot = malloc(cap);
    ok(src->ops->ready(src), "  ready at once (a file's input is there)");
    size_t n = 0, fills = 0;
    bool eof = false, fine = true;
    uint64_t before = src->remaining;
    while (!eof && fills < 10000) {
        size_t len = 0;
        int rc = src->ops->fill(src, piece, slot, cap, &len, &eof);
        fills++;
        if (rc < 0 || len > cap || n + len > sizeof out || src->remaining > before) {
            fine = false;
            break;
        }
        before = src->remaining;
        memcpy(out + n, slot, len);
        n += len;
    }
    ok(fine && eof, "  filled to its end, each fill within the slot, remaining never growing");
    ok(size == 0 || fills >= (size + piece - 1) / piece, "  at least a fill per piece");
    is_int(src->remaining, 0, "  nothing remains");
    ok(gunzips_to(out, n, content, size), "  one gzip member of the file's bytes");
    /* An empty file has no read: its file waits for the release. */
    if (size > 0)
        ok(!fd_open(fd), "  its file closed after the last read");
    uint64_t streams = zstates.streams;
    src->ops->release(src);
    is_int(zstates.streams, streams + 1, "  release gives its zlib state back");
    ok(!fd_open(fd), "  its file is closed once released");
    free(slot);
}

static void windows(void)
{
    /* A 1000-byte file: a window of 2^10 bytes, memLevel 3 (and a
     * piece's buffer) is what it holds, not zlib's default 2^15. */
    int fd = file_of(1000);
    struct pump_source *src = deflate_file_source(fd, 1000);
    src->pump = &pump;
    src->ops->size(src, 4096);
    const struct zparams small = {Z_DEFAULT_COMPRESSION, 10 + 16, 3};
    const struct zparams large = {Z_DEFAULT_COMPRESSION, 15 + 16, 8};
    is_int(src->held, 4096 + zstate_memory(&small),
           "a small file holds a window no larger than itself, and a piece");
    src->ops->release(src);
    ok(!fd_open(fd), "released before any fill: its file is closed");

    fd = file_of(BIG);
    src = deflate_file_source(fd, BIG);
    src->pump = &pump;
    src->ops->size(src, 65536);
    is_int(src->held, 65536 + zstate_memory(&large), "a large one the largest window");
    src->ops->release(src);
}

static void shrunk(void)
{
    int fd = file_of(BIG);
    struct pump_source *src = deflate_file_source(fd, BIG);
    src->pump = &pump;
    size_t cap = src->ops->size(src, 65536);
    char *slot = malloc(cap);
    src->ops->ready(src);
    if (ftruncate(fd, 1000) < 0)
        abort();
    size_t len;
    bool eof = false;
    int rc = 0;
    for (int i = 0; i < 100 && rc == 0 && !eof; i++)
        rc = src->ops->fill(src, 65536, slot, cap, &len, &eof);
    is_int(rc, -EIO, "a file that shrank under it: the fill fails with EIO, no short member");
    ok(fd_open(fd), "  the file stays the source's");
    src->ops->release(src);
    ok(!fd_open(fd), "  release closes it");
    free(slot);
}

static void accepted(void)
{
    static const struct {
        const char *value;
        bool want;
    } cases[] = {
        {NULL, false},          {"", false},
        {"gzip", true},         {"GZip", true},
        {"x-gzip", true},       {"br, gzip;q=0.5", true},
        {"gzip;q=0", false},    {"gzip; q=0.000", false},
        {"gzip;q=0.001", true}, {"*", true},
        {"*;q=0", false},       {"br, *", true},
        {"gzip;q=0, *", false}, {"*, gzip;q=0", false},
        {"gzipx", false},       {"deflate, br", false},
        {"identity", false},    {" ,\tgzip ", true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char desc[96];
        snprintf(desc, sizeof desc, "Accept-Encoding %s%s%s: gzip %s", cases[i].value ? "\"" : "",
                 cases[i].value ? cases[i].value : "absent", cases[i].value ? "\"" : "",
                 cases[i].want ? "accepted" : "not accepted");
        is_int(gzip_accepted(cases[i].value), cases[i].want, desc);
    }
}

int main(void)
{
    /* Text-like bytes that compress, with some noise so that pieces differ. */
    unsigned x = 1;
    for (size_t i = 0; i < BIG; i++) {
        x = x * 1103515245u + 12345u;
        content[i] = (x >> 16) % 7 == 0 ? (char)(x >> 8) : "the quick brown fox "[i % 20];
    }
    int fd = mkstemp(path);
    if (fd < 0)
        abort();
    close(fd);
    zstates_init(&zstates, NULL, 4);
    whole_file(0, 65536, "an empty file");
    whole_file(1, 65536, "one byte");
    whole_file(1000, 65536, "1000 bytes in one piece");
    whole_file(BIG, 65536, "300 KiB in 64 KiB pieces");
    whole_file(BIG, 4096, "300 KiB in 4 KiB pieces");
    whole_file(BIG, BIG, "300 KiB whole");
    windows();
    shrunk();
    accepted();
    zstates_fini(&zstates);
    unlink(path);
    return tap_done();
}
