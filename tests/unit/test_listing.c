/* Directory listings (handlers/files/listing.c) of a real directory: the
 * order (directories first, then files, by name), names HTML-escaped and
 * links percent-encoded and kept relative, sizes as a reader takes them
 * with the exact count in a title, hidden names and symlinks to them left
 * out unless dotfiles are on, a parent link except at the root, a missing
 * directory's errno; and the page gzipped in one go, read back. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "handlers/files/listing.h"
#include "tests/tap.h"

static char root[] = "/tmp/unclog-test-listingXXXXXX";

static void make(const char *name, off_t size)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, size) < 0)
        abort();
    close(fd);
}

static const char *at(const char *page, const char *text)
{
    const char *p = strstr(page, text);
    return p != NULL ? p : page + strlen(page) + 1; /* after everything: "absent" */
}

static bool has(const char *page, const char *text)
{
    return strstr(page, text) != NULL;
}

static void listing(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/zdir", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/.git", root);
    mkdir(path, 0755);
    make("b.txt", 512);
    make("a&<x>\".txt", 8192);
    make("mega", 1048575);
    make("c:d", 0);
    make("sp ace", 1);
    make(".env", 3);
    snprintf(path, sizeof path, "%s/to-env", root);
    if (symlink(".env", path) < 0)
        abort();

    size_t len = 0;
    char *page = listing_build(root, "/sub/", root, &len);
    ok(page != NULL && len == strlen(page), "a page, its length");
    if (page == NULL)
        return;
    ok(has(page, "<title>Index of /sub/</title>") && has(page, "<h1>Index of /sub/</h1>"),
       "titled by its URL path");
    ok(has(page, "<a href=\"../\">../</a>"), "a parent link below the root");
    ok(at(page, ">zdir/</a>") < at(page, ">a&amp;") && at(page, ">a&amp;") < at(page, ">b.txt<") &&
           at(page, ">b.txt<") < at(page, ">c:d<") && at(page, ">c:d<") < at(page, ">mega<") &&
           at(page, ">mega<") < at(page, ">sp ace<"),
       "the directory first, then the files by name");
    ok(has(page, "<a href=\"./zdir/\">zdir/</a></td><td></td>"),
       "a directory: marked with '/', no size");
    ok(has(page, ">a&amp;&lt;x&gt;&quot;.txt</a>"), "a name HTML-escaped");
    ok(has(page, "href=\"./a&amp;%3Cx%3E%22.txt\""),
       "  its link percent-encoded ('&' is a path character: escaped)");
    ok(has(page, "href=\"./sp%20ace\""), "a space in a link is %20");
    ok(has(page, "href=\"./c:d\""), "a name with ':' stays relative behind ./");
    ok(has(page, "<td class=\"n\" title=\"512 bytes\">512 B</td>"), "512 bytes: 512 B");
    ok(has(page, "<td class=\"n\" title=\"8192 bytes\">8.0 KiB</td>"), "8192 bytes: 8.0 KiB");
    ok(has(page, "<td class=\"n\" title=\"1048575 bytes\">1.0 MiB</td>"),
       "a byte short of a MiB reads 1.0 MiB, not 1024.0 KiB");
    ok(has(page, "title=\"0 bytes\">0 B</td>"), "an empty file: 0 B");
    ok(!has(page, ".env") && !has(page, ".git"), "hidden names are left out");
    ok(!has(page, "to-env"), "  and a symlink that leads to one");
    ok(strcmp(page + len - 24, "</table>\n</body></html>\n") == 0, "the page ends complete");

    z_stream z = {0};
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        abort();
    size_t gz_len = 0;
    char *gz = listing_gzip(&z, page, len, &gz_len);
    ok(gz != NULL && gz_len > 18 && gz_len < len, "gzipped in one go, smaller");
    z_stream in = {0};
    inflateInit2(&in, 15 + 16);
    char *back = malloc(len + 1);
    in.next_in = (Bytef *)gz;
    in.avail_in = (uInt)gz_len;
    in.next_out = (Bytef *)back;
    in.avail_out = (uInt)len + 1;
    int rc = inflate(&in, Z_FINISH);
    ok(rc == Z_STREAM_END && in.total_out == len && memcmp(back, page, len) == 0,
       "  a gzip stream that reads back as the page, to its end");
    inflateEnd(&in);
    free(gz);
    deflateReset(&z);
    gz = listing_gzip(&z, "", 0, &gz_len);
    ok(gz != NULL && gz_len == 20, "an empty page: an empty gzip member (20 bytes)");
    free(gz);
    deflateEnd(&z);
    free(back);
    free(page);

    page = listing_build(root, "/", NULL, &len);
    ok(page != NULL && !has(page, "href=\"../\""), "at the root: no parent link");
    ok(page != NULL && has(page, ">.env</a>") && has(page, ">.git/</a>") && has(page, ">to-env<"),
       "dotfiles on (no root to hide under): every name listed");
    free(page);

    snprintf(path, sizeof path, "%s/none", root);
    errno = 0;
    ok(listing_build(path, "/none/", root, &len) == NULL && errno == ENOENT,
       "a missing directory: NULL, ENOENT");
    snprintf(path, sizeof path, "%s/b.txt", root);
    errno = 0;
    ok(listing_build(path, "/b.txt/", root, &len) == NULL && errno == ENOTDIR,
       "a file: NULL, ENOTDIR");
}

int main(void)
{
    if (mkdtemp(root) == NULL)
        abort();
    listing();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd) != 0)
        return 1;
    return tap_done();
}
