/* Request-target -> path under the root. */
#include <errno.h>
#include <string.h>

#include "handlers/files/path.h"
#include "tests/tap.h"

int main(void)
{
    static const struct {
        const char *target;
        int rc;
        const char *path;
        bool dir;
    } cases[] = {
        {"/", 0, "", true},
        {"/a.txt", 0, "a.txt", false},
        {"/a/b/", 0, "a/b", true},
        {"//a///b", 0, "a/b", false},
        {"/./a/./b", 0, "a/b", false},
        {"/a/../b", 0, "b", false},
        {"/a/b/../../c", 0, "c", false},
        {"/a/..", 0, "", false},
        {"/a%20b.txt", 0, "a b.txt", false},
        {"/%41%62c", 0, "Abc", false},
        {"/x.txt?v=1&y=/../..", 0, "x.txt", false},
        {"/x.txt#frag", 0, "x.txt", false},
        {"/..", -EACCES, NULL, false},
        {"/../etc/passwd", -EACCES, NULL, false},
        {"/a/../../etc/passwd", -EACCES, NULL, false},
        {"/%2e%2e/%2e%2e/etc/passwd", -EACCES, NULL, false},
        {"/..%2fetc%2fpasswd", -EACCES, NULL, false},
        {"/%2E%2E/x", -EACCES, NULL, false},
        {"/a%00b", -EINVAL, NULL, false},
        {"/a%", -EINVAL, NULL, false},
        {"/a%4", -EINVAL, NULL, false},
        {"/a%zz", -EINVAL, NULL, false},
        {"/...", 0, "...", false},
        {"/.hidden", 0, ".hidden", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[256], desc[128];
        bool dir = false;
        int rc = path_resolve(cases[i].target, out, sizeof out, &dir);
        snprintf(desc, sizeof desc, "%s -> %d", cases[i].target, cases[i].rc);
        is_int(rc, cases[i].rc, desc);
        if (rc == 0 && cases[i].rc == 0) {
            is_str(out, cases[i].path, "  path");
            is_int(dir, cases[i].dir, "  dir");
        }
    }
    char small[4];
    bool dir;
    is_int(path_resolve("/abcdef", small, sizeof small, &dir), -ENAMETOOLONG, "too long for OUT");

    static const struct {
        const char *relative;
        bool hidden;
    } hidden[] = {
        {"", false},
        {"a.txt", false},
        {"a/b.c/d", false},
        {"a.", false},
        {".env", true},
        {".git/config", true},
        {"a/.htaccess", true},
        {"a/b/.x/c", true},
        {"...", true},
        {".well-known", false},
        {".well-known/security.txt", false},
        {".well-known/acme/x", false},
        {".well-known/.x", true},
        {".well-knownx", true},
        {".well-known.txt", true},
        {"a/.well-known/x", true},
    };
    for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++) {
        char desc[128];
        snprintf(desc, sizeof desc, "\"%s\" %s", hidden[i].relative,
                 hidden[i].hidden ? "hidden" : "not hidden");
        is_int(path_hidden(hidden[i].relative), hidden[i].hidden, desc);
    }

    static const struct {
        const char *real, *root, *relative; /* NULL: not under the root */
    } beneath[] = {
        {"/srv/www", "/srv/www", ""},
        {"/srv/www/a", "/srv/www", "a"},
        {"/srv/www/.git/config", "/srv/www", ".git/config"},
        {"/srv/wwwx", "/srv/www", NULL},
        {"/srv/wwwx/a", "/srv/www", NULL},
        {"/srv", "/srv/www", NULL},
        {"/etc/passwd", "/srv/www", NULL},
        {"/", "/", ""},
        {"/.env", "/", ".env"},
        {"/a/b", "/", "a/b"},
    };
    for (size_t i = 0; i < sizeof beneath / sizeof beneath[0]; i++) {
        char desc[128];
        const char *rel = path_beneath(beneath[i].real, beneath[i].root, strlen(beneath[i].root));
        snprintf(desc, sizeof desc, "\"%s\" under \"%s\": %s", beneath[i].real, beneath[i].root,
                 beneath[i].relative ? beneath[i].relative : "(not under)");
        if (beneath[i].relative == NULL)
            ok(rel == NULL, desc);
        else
            is_str(rel ? rel : "(not under)", beneath[i].relative, desc);
    }

    char enc[64];
    ok(path_encode("a b/ü\"<x>", enc, sizeof enc), "encode fits");
    is_str(enc, "a%20b/%C3%BC%22%3Cx%3E", "  encoded");
    ok(!path_encode("abcdef", enc, 4), "encode refuses a short buffer");
    return tap_done();
}
