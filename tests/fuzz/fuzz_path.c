/* libFuzzer target: path_resolve and path_encode (handlers/files/path.c).
 *
 * Input: one byte choosing the size of the output buffer, then the target.
 * Beyond "no crash", a resolved path must be clean (no empty, "." or ".."
 * segment, no leading '/', no NUL) and must survive a round trip: encoded
 * again and resolved again, it is the same path. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "handlers/files/path.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_clean(const char *path)
{
    if (path[0] == '/')
        abort();
    for (const char *seg = path; *seg != '\0';) {
        size_t len = strcspn(seg, "/");
        if (len == 0 || (len == 1 && seg[0] == '.') || (len == 2 && memcmp(seg, "..", 2) == 0))
            abort();
        seg += len;
        if (*seg == '/')
            seg++;
        if (*seg == '\0' && seg[-1] == '/')
            abort(); /* a trailing '/' */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t out_size = data[0] % 2 ? 4096 : data[0] / 2; /* small buffers too */
    char *target = malloc(size);
    char *out = malloc(out_size + 1);
    memcpy(target, data + 1, size - 1);
    target[size - 1] = '\0';
    bool dir;
    int rc = path_resolve(target, out, out_size, &dir);
    if (rc == 0) {
        if (strlen(out) >= out_size)
            abort();
        check_clean(out);
        char encoded[3 * 4096 + 2] = "/";
        if (path_encode(out, encoded + 1, sizeof encoded - 1)) {
            char again[4096];
            bool dir2;
            if (path_resolve(encoded, again, sizeof again, &dir2) != 0 || strcmp(again, out) != 0)
                abort();
        }
    }
    free(out);
    free(target);
    return 0;
}
