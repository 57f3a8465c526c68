/* The strict request checks llhttp 8.1 leaves to us (server/http/strict.c). */
#include "server/http/strict.h"

#include <stdio.h>
#include <string.h>

#include "tests/tap.h"

/* Scans TEXT as framing bytes, in one piece and one byte at a time: the
 * verdict must not depend on how the socket split the stream. BODY marks
 * (with '|') where chunk data sat: "5\r\n|\r\n0..." means the data of a chunk
 * was skipped there, and '^' where a request-target was. */
static int scan(const char *text, bool split)
{
    struct strict_lines s;
    strict_lines_init(&s);
    for (const char *p = text; *p != '\0';) {
        if (*p == '|') {
            strict_lines_body(&s, true);
            p++;
            continue;
        }
        if (*p == '^') {
            strict_lines_target(&s);
            p++;
            continue;
        }
        size_t len = split ? 1 : strcspn(p, "|^");
        if (strict_lines_scan(&s, p, len) < 0)
            return -1;
        p += len;
    }
    return 0;
}

static void test_lines(void)
{
    static const struct {
        const char *text;
        int rc;
    } cases[] = {
        {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", 0},
        /* '^' marks the end of a request-target */
        {"GET ^ HTTP/1.1\r\nHost: a\r\n\r\n", 0},
        {"GET ^ HTTP/1.0\r\n\r\n", 0},
        {"GET ^ RTSP/1.0\r\n\r\n", -1},
        {"SOURCE ^ ICE/1.0\r\n\r\n", -1},
        {"GET ^\r\n\r\n", 0}, /* HTTP/0.9: llhttp reports it, answered 505 */
        {"GET ^\n\r\n", -1},
        {"GET ^ HTTP\r\n\r\n", -1},
        {"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 0}, /* an empty line first is allowed */
        {"GET / HTTP/1.1\r\nX: a\tb\r\n\r\n", 0},
        {"GET / HTTP/1.1\nHost: a\r\n\r\n", -1},         /* bare LF */
        {"GET / HTTP/1.1\r\nHost: a\r\n\n", -1},         /* bare LF at the end */
        {"GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", -1}, /* bare CR */
        {"GET / HTTP/1.1\r\nHost: a\r\n\rX", -1},        /* CR then not LF */
        {"GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", -1},    /* obs-fold */
        {"GET / HTTP/1.1\r\nX: a\r\n\tb\r\n\r\n", -1},   /* obs-fold with a tab */
        {"\nGET / HTTP/1.1\r\n\r\n", -1},
        /* chunked framing around skipped data */
        {"5\r\n|\r\n0\r\n\r\n", 0},
        {"5;a=b\r\n|\r\n3\r\n|\r\n0\r\nT: x\r\n\r\n", 0},
        {"5\r\n|XX0\r\n\r\n", -1}, /* no CRLF after the data */
        {"5\r\n|\rX0\r\n\r\n", -1},
        {"5\r\n|\n0\r\n\r\n", -1},
        {"5\rX|\r\n0\r\n\r\n", -1}, /* size line ended by CR and any byte */
        {"0\r\n\n", -1},
        {"0\r\n\rX", -1},
        {"0\r\nT: a\r\n b\r\n\r\n", -1}, /* folded trailer */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char desc[160];
        for (int split = 0; split < 2; split++) {
            snprintf(desc, sizeof desc, "lines case %zu (%s)%s", i, cases[i].rc ? "bad" : "good",
                     split ? ", byte by byte" : "");
            is_int(scan(cases[i].text, split), cases[i].rc, desc);
        }
    }
}

static void test_tokens(void)
{
    ok(strict_token("Content-Length", 14), "Content-Length is a token");
    ok(strict_token("x!#$%&'*+-.^_`|~9", 17), "every tchar is a token");
    ok(!strict_token("X Y", 3), "a space is not");
    ok(!strict_token("Host ", 5), "nor a trailing space");
    ok(!strict_token("a\0b", 3), "nor NUL");
    ok(!strict_token("a:b", 3), "nor ':'");
    ok(!strict_token("\xe9", 1), "nor a byte >= 0x80");
    ok(!strict_token("a\x7f", 2), "nor DEL");
    ok(strict_target_chars("/a?b=c&d=%20", 12), "a target");
    ok(strict_target_chars("/caf\xc3\xa9", 6), "raw UTF-8 in a target (as nginx)");
    ok(!strict_target_chars("/a\tb", 4), "a tab in a target");
    ok(!strict_target_chars("/a#b", 4), "a fragment in a target");
    ok(!strict_target_chars("/a\x7f", 3), "DEL in a target");
    ok(!strict_target_chars("/a\x01", 3), "a control byte in a target");
    ok(strict_host_chars("example.com:8080", 16), "host:port");
    ok(strict_host_chars("[::1]:80", 8), "an IPv6 literal");
    ok(!strict_host_chars("a/b", 3), "'/' in a host");
    ok(!strict_host_chars("u@h", 3), "userinfo in a host");
    ok(!strict_host_chars("a b", 3), "a space in a host");
}

static void test_targets(void)
{
    static const struct {
        const char *target;
        bool absolute_ok;
        const char *path; /* NULL: refused */
    } cases[] = {
        {"/", false, "/"},          {"/x?y", false, "/x?y"},
        {"http://h/x", true, "/x"}, {"HTTP://h:80/x?q", true, "/x?q"},
        {"https://h/", true, "/"},  {"http://h", true, "/"},
        {"http://h", false, NULL},  {"http://h?q", true, NULL},
        {"http:///x", true, NULL},  {"http://u@h/x", true, NULL},
        {"ftp://h/x", true, NULL},  {"*", true, NULL},
        {"h:443", true, NULL},      {"x/y", true, NULL},
        {"", true, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char desc[160];
        const char *authority;
        size_t authority_len;
        const char *got =
            strict_target_path(cases[i].target, cases[i].absolute_ok, &authority, &authority_len);
        snprintf(desc, sizeof desc, "target \"%s\"%s -> %s", cases[i].target,
                 cases[i].absolute_ok ? " (absolute allowed)" : "",
                 cases[i].path ? cases[i].path : "refused");
        if (cases[i].path == NULL)
            ok(got == NULL, desc);
        else
            is_str(got, cases[i].path, desc);
    }
    const char *authority;
    size_t len;
    strict_target_path("HTTP://example.com:8080/settings?x", true, &authority, &len);
    ok(authority != NULL && len == 16 && strncmp(authority, "example.com:8080", len) == 0,
       "absolute-form: its authority, example.com:8080");
    strict_target_path("http://127.0.0.1", true, &authority, &len);
    ok(authority != NULL && len == 9 && strncmp(authority, "127.0.0.1", len) == 0,
       "absolute-form without a path: its authority, 127.0.0.1");
    strict_target_path("/settings", true, &authority, &len);
    ok(authority == NULL && len == 0, "origin-form: no authority");
}

static void test_chunked(void)
{
    ok(strict_chunked("chunked"), "chunked");
    ok(strict_chunked("Chunked \t"), "Chunked with white space");
    ok(!strict_chunked("gzip, chunked"), "gzip, chunked: not decoded here");
    ok(!strict_chunked("chunked, chunked"), "chunked twice");
    ok(!strict_chunked("chunked;q=1"), "chunked with a parameter");
    ok(!strict_chunked("chunkedx"), "chunkedx");
    ok(!strict_chunked(""), "empty");
}

/* A value keeps what lies between its first and last byte that is not SP
 * or HTAB: the trim moves its start by OFF and leaves LEFT bytes. */
static void test_ows(void)
{
    static const struct {
        const char *value;
        size_t len, off, left;
    } cases[] = {
        {"localhost", 9, 0, 9}, {"localhost ", 10, 0, 9}, {"localhost\t", 10, 0, 9},
        {" \t5 \t ", 6, 2, 1},  {"5 5", 3, 0, 3},         {"a b ", 4, 0, 3},
        {"", 0, 0, 0},          {" \t ", 3, 3, 0},        {"a\r ", 3, 0, 2},
        {"a\0 ", 3, 0, 2},      {"\va\v", 3, 0, 3},       {"\ta\tb\t", 5, 1, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char desc[80];
        size_t len = cases[i].len;
        const char *got = strict_trim_ows(cases[i].value, &len);
        snprintf(desc, sizeof desc, "OWS trim of case %zu: from byte %zu, %zu bytes", i,
                 cases[i].off, cases[i].left);
        ok(got == cases[i].value + cases[i].off && len == cases[i].left, desc);
    }
}

/* Whether the Connection VALUES ('|' between two lines) hold close, read
 * whole or one byte at a time. */
static bool close_in(const char *values, bool split)
{
    struct strict_close s = {0};
    for (const char *p = values; *p != '\0';) {
        size_t len = split ? 1 : strcspn(p, "|");
        if (*p == '|') {
            strict_close_end(&s);
            p++;
            continue;
        }
        strict_close_scan(&s, p, len);
        p += len;
    }
    strict_close_end(&s);
    return s.seen;
}

static void test_close(void)
{
    static const struct {
        const char *values;
        bool close;
    } cases[] = {
        {"close", true},
        {"Close", true},
        {"CLOSE", true},
        {"keep-alive, close", true},
        {"close, keep-alive", true},
        {"keep-alive|close", true}, /* a second line */
        {"close|keep-alive", true},
        {"foo,\t close \t, bar", true},
        {"close\t", true},
        {",,close,,", true},
        {"keep-alive", false},
        {"", false},
        {"closed", false},
        {"xclose", false},
        {"clo se", false},
        {"close x", false},
        {"close;x", false},
        {"clo|se", false}, /* a member does not span two lines */
        {"keep-alive, closer", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char desc[160];
        for (int split = 0; split < 2; split++) {
            snprintf(desc, sizeof desc, "Connection: %s%s: %s", cases[i].values,
                     split ? " (byte by byte)" : "", cases[i].close ? "close" : "no close");
            ok(close_in(cases[i].values, split) == cases[i].close, desc);
        }
    }
}

/* Splits the chunk-size line LINE (and what follows it) as the connection
 * does, in pieces of at most STEP bytes: what llhttp is given goes to OUT.
 * Returns -1 where the extensions are refused. */
static int chunk_split(const char *line, size_t step, char *out, size_t cap)
{
    struct strict_chunk s = {0};
    strict_chunk_line(&s);
    size_t n = 0, len = strlen(line);
    for (size_t i = 0; i < len;) {
        size_t piece = len - i < step ? len - i : step, take, skip;
        if (strict_chunk_scan(&s, line + i, piece, &take, &skip) < 0)
            return -1;
        if ((take == 0) == (skip == 0) || take + skip > piece || n + take >= cap)
            return -2;
        memcpy(out + n, line + i, take);
        n += take;
        i += take + skip;
    }
    out[n] = '\0';
    return 0;
}

static void test_chunk_ext(void)
{
    static const struct {
        const char *line, *llhttp; /* what llhttp sees, or NULL: refused */
    } cases[] = {
        {"5\r\nhello", "5\r\nhello"},
        {"a;x\r\n", "a\r\n"},
        {"3;a;b\r\nabc", "3\r\nabc"},
        {"3;a=\"x\\\"y\"\r\n", "3\r\n"},
        {"3;a=b;c\r\n", "3\r\n"},
        {"3;a=b;c=\"d e\";f\r\n", "3\r\n"},
        {"3 ; a = b ;\tc\r\n", "3\r\n"}, /* BWS */
        {"3;a=\"\"\r\n", "3\r\n"},       /* an empty quoted string */
        {"3;a=\"\\\\\"\r\n", "3\r\n"},
        {"3;a=\"caf\xc3\xa9\"\r\n", "3\r\n"}, /* obs-text */
        {"0;end=1\r\nT: x\r\n\r\n", "0\r\nT: x\r\n\r\n"},
        {"00ff;q\r\n", "00ff\r\n"},
        /* llhttp refuses what follows a size it cannot take */
        {"zz\r\n", "zz\r\n"},
        {"0x5\r\n", "0x5\r\n"},
        {";a\r\n", ";a\r\n"},
        /* refused here */
        {"5;\r\n", NULL},
        {"5 \r\n", NULL},
        {"5 x\r\n", NULL},
        {"5;a=\r\n", NULL},
        {"5;a=;b\r\n", NULL},
        {"5;\"x\"\r\n", NULL},
        {"5;=x\r\n", NULL},
        {"5;a \r\n", NULL},
        {"5;a=b \r\n", NULL},
        {"5;a=\"x\r\n", NULL},
        {"5;a=\"x\"y\r\n", NULL},
        {"5;a=\"x\\\r\n", NULL},
        {"5;a=\x01\r\n", NULL},
        {"5;a\x01\r\n", NULL},
        {"5;a=\"\x01\"\r\n", NULL},
        {"5;a=\"\x7f\"\r\n", NULL},
        {"5;a\nhello", NULL},
        {"5;a=b\nhello", NULL},
        {"5;a=\"b\nc\"\r\n", NULL},
        {"5;a=b c\r\n", NULL},
        {"5;a b\r\n", NULL},
        {"5;a=b=c\r\n", NULL},
        {"5;a,b\r\n", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        static const size_t steps[] = {1000, 1, 2, 3};
        for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
            char desc[200], out[64];
            int rc = chunk_split(cases[i].line, steps[k], out, sizeof out);
            snprintf(desc, sizeof desc, "chunk line case %zu, pieces of %zu: %s", i, steps[k],
                     cases[i].llhttp ? "llhttp gets the size and the rest" : "refused");
            if (cases[i].llhttp == NULL)
                is_int(rc, -1, desc);
            else if (rc != 0)
                is_int(rc, 0, desc);
            else
                is_str(out, cases[i].llhttp, desc);
        }
    }
}

int main(void)
{
    test_lines();
    test_tokens();
    test_targets();
    test_chunked();
    test_close();
    test_ows();
    test_chunk_ext();
    return tap_done();
}
