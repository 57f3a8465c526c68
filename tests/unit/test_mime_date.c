/* MIME lookup and HTTP dates. */
#include "server/base/http_date.h"
#include "../../handlers/files/mime.c"
#include "tests/tap.h"

static void test_mime(void)
{
    static const struct {
        const char *path, *type;
    } cases[] = {
        {"index.html", "text/html; charset=utf-8"},
        {"a/b/STYLE.CSS", "text/css; charset=utf-8"},
        {"app.js", "text/javascript; charset=utf-8"},
        {"m.mjs", "text/javascript; charset=utf-8"},
        {"d.json", "application/json"},
        {"r.txt", "text/plain; charset=utf-8"},
        {"f.xml", "application/xml"},
        {"i.svg", "image/svg+xml"},
        {"i.png", "image/png"},
        {"i.jpg", "image/jpeg"},
        {"i.jpeg", "image/jpeg"},
        {"i.gif", "image/gif"},
        {"i.webp", "image/webp"},
        {"favicon.ico", "image/x-icon"},
        {"m.wasm", "application/wasm"},
        {"d.pdf", "application/pdf"},
        {"a.zip", "application/zip"},
        {"a.tar.gz", "application/gzip"},
        {"v.mp4", "video/mp4"},
        {"f.woff", "font/woff"},
        {"f.woff2", "font/woff2"},
        {"site.webmanifest", "application/manifest+json"},
        {"c.yaml", "application/yaml"},
        {"c.YML", "application/yaml"},
        {"i.avif", "image/avif"},
        {"app.js.map", "application/json"},
        {"README.md", "text/markdown; charset=utf-8"},
        {"noext", "application/octet-stream"},
        {"dir.d/noext", "application/octet-stream"},
        {"weird.", "application/octet-stream"},
        {"x.unknown", "application/octet-stream"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        is_str(mime_type(cases[i].path), cases[i].type, cases[i].path);

    /* bsearch finds nothing past an entry out of order: a new type must keep the table sorted. */
    for (size_t i = 1; i < sizeof table / sizeof table[0]; i++)
        ok(strcasecmp(table[i - 1].ext, table[i].ext) < 0, table[i].ext);
}

static void test_dates(void)
{
    char buf[HTTP_DATE_LEN];
    http_date_format(784111777, buf);
    is_str(buf, "Sun, 06 Nov 1994 08:49:37 GMT", "format");
    http_date_format(0, buf);
    is_str(buf, "Thu, 01 Jan 1970 00:00:00 GMT", "format epoch");
    http_date_format(253402300799, buf);
    is_str(buf, "Fri, 31 Dec 9999 23:59:59 GMT", "format the last second HTTP can write");
    http_date_format(253402300800, buf);
    is_str(buf, "Thu, 01 Jan 1970 00:00:00 GMT", "a later one: the epoch");
    /* Written by hand: every field read back as strftime's would be. */
    bool same = true;
    for (time_t t = 0; t < 86400LL * 365 * 200 && same; t += 86400 * 37 + 3607) {
        struct tm tm;
        char day[8], rest[64];
        gmtime_r(&t, &tm);
        strftime(day, sizeof day, "%d", &tm);
        strftime(rest, sizeof rest, " %Y %H:%M:%S GMT", &tm);
        http_date_format(t, buf);
        time_t back;
        same = strncmp(buf + 5, day, 2) == 0 && strcmp(buf + 11, rest) == 0 &&
               http_date_parse(buf, &back) && back == t;
        if (!same)
            printf("# %lld: %s, want %s ... %s\n", (long long)t, buf, day, rest);
    }
    ok(same, "formatted dates 1970-2170: as strftime's, and parsed back to the same second");

    static const struct {
        const char *text;
        bool ok;
    } cases[] = {
        {"Sun, 06 Nov 1994 08:49:37 GMT", true},
        {"Sunday, 06-Nov-94 08:49:37 GMT", true},
        {"Sun Nov  6 08:49:37 1994", true},
        {"Sun, 06 Nov 1994 08:49:37 UTC", false},
        {"Sun, 06 Nov 1994 08:49:37 GMT junk", false},
        {"Sun, 06 Foo 1994 08:49:37 GMT", false},
        {"Sun, 32 Nov 1994 08:49:37 GMT", false},
        {"Sun, 06 Nov 1994 25:49:37 GMT", false},
        {"", false},
        {"garbage", false},
        {"Sun, 06 Nov 99999999999 08:49:37 GMT", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        time_t t = 0;
        bool got = http_date_parse(cases[i].text, &t);
        ok(got == cases[i].ok, cases[i].text);
        if (got && cases[i].ok)
            is_int(t, 784111777, "  value");
    }
}

int main(void)
{
    test_mime();
    test_dates();
    return tap_done();
}
