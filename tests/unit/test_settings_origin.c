/* Which requests the admin switch answers: settings_refusal, the same-origin
 * rules of /settings, on a table of Host, Origin, Sec-Fetch-Site and
 * Content-Type values a browser, curl or an attacker's page may send. */
#include <llhttp.h>
#include <stdio.h>
#include <string.h>

#include "handlers/observe/settings.h"
#include "tests/tap.h"

enum rule { PASS, HOST, ORIGIN_NULL, ORIGIN, FETCH_SITE, TYPE };

/* The start of each rule's sentence in the 403 body. */
static const char *const rule_start[] = {
    [HOST] = "Host must be",     [ORIGIN_NULL] = "Origin: null",
    [ORIGIN] = "Origin must be", [FETCH_SITE] = "Sec-Fetch-Site must be",
    [TYPE] = "a POST must be",
};

struct origin_case {
    int method;
    const char *host, *origin, *fetch_site, *content_type;
    enum rule want;
    const char *what;
};

#define FORM "application/x-www-form-urlencoded"

static const struct origin_case cases[] = {
    /* Host: the server's names as a loopback client reaches it. */
    {HTTP_GET, "localhost:8080", NULL, NULL, NULL, PASS, "Host localhost:8080"},
    {HTTP_GET, "localhost", NULL, NULL, NULL, PASS, "Host localhost, no port"},
    {HTTP_GET, "LOCALHOST", NULL, NULL, NULL, PASS, "Host LOCALHOST (names have no case)"},
    {HTTP_GET, "LocalHost:80", NULL, NULL, NULL, PASS, "Host LocalHost:80"},
    {HTTP_GET, "127.0.0.1", NULL, NULL, NULL, PASS, "Host 127.0.0.1"},
    {HTTP_GET, "127.1.2.3:80", NULL, NULL, NULL, PASS, "Host 127.1.2.3:80"},
    {HTTP_GET, "127.255.255.255:65535", NULL, NULL, NULL, PASS, "Host 127.255.255.255:65535"},
    {HTTP_GET, "[::1]:8080", NULL, NULL, NULL, PASS, "Host [::1]:8080"},
    {HTTP_GET, "[::1]", NULL, NULL, NULL, PASS, "Host [::1]"},
    {HTTP_GET, " 127.0.0.1:8080 ", NULL, NULL, NULL, PASS, "Host with spaces around it"},
    {HTTP_GET, "evil.example", NULL, NULL, NULL, HOST, "Host evil.example"},
    {HTTP_GET, "evil.example:8080", NULL, NULL, NULL, HOST, "Host evil.example:8080"},
    {HTTP_GET, "127.0.0.1.evil.example", NULL, NULL, NULL, HOST, "Host 127.0.0.1.evil.example"},
    {HTTP_GET, "localhost.evil.example", NULL, NULL, NULL, HOST, "Host localhost.evil.example"},
    {HTTP_GET, "localhost.", NULL, NULL, NULL, HOST, "Host localhost. (trailing dot)"},
    {HTTP_GET, "localhostx", NULL, NULL, NULL, HOST, "Host localhostx"},
    {HTTP_GET, "", NULL, NULL, NULL, HOST, "Host empty"},
    {HTTP_GET, NULL, NULL, NULL, NULL, HOST, "no Host (HTTP/1.0)"},
    {HTTP_GET, "128.0.0.1", NULL, NULL, NULL, HOST, "Host 128.0.0.1"},
    {HTTP_GET, "10.0.0.1:8080", NULL, NULL, NULL, HOST, "Host 10.0.0.1:8080"},
    {HTTP_GET, "127.0.0", NULL, NULL, NULL, HOST, "Host 127.0.0 (three parts)"},
    {HTTP_GET, "127.1", NULL, NULL, NULL, HOST, "Host 127.1 (short form)"},
    {HTTP_GET, "127.0.0.1.", NULL, NULL, NULL, HOST, "Host 127.0.0.1. (trailing dot)"},
    {HTTP_GET, "127.0.0.256", NULL, NULL, NULL, HOST, "Host 127.0.0.256"},
    {HTTP_GET, "127.0.0.01", NULL, NULL, NULL, HOST, "Host 127.0.0.01 (leading zero)"},
    {HTTP_GET, "0x7f.0.0.1", NULL, NULL, NULL, HOST, "Host 0x7f.0.0.1"},
    {HTTP_GET, "2130706433", NULL, NULL, NULL, HOST, "Host 2130706433 (127.0.0.1 as one number)"},
    {HTTP_GET, "[::2]", NULL, NULL, NULL, HOST, "Host [::2]"},
    {HTTP_GET, "[::1", NULL, NULL, NULL, HOST, "Host [::1 (unclosed)"},
    {HTTP_GET, "[::1]x", NULL, NULL, NULL, HOST, "Host [::1]x"},
    {HTTP_GET, "[::ffff:127.0.0.1]", NULL, NULL, NULL, HOST, "Host [::ffff:127.0.0.1]"},
    {HTTP_GET, "localhost:", NULL, NULL, NULL, HOST, "Host localhost: (empty port)"},
    {HTTP_GET, "localhost:0", NULL, NULL, NULL, HOST, "Host localhost:0"},
    {HTTP_GET, "localhost:65536", NULL, NULL, NULL, HOST, "Host localhost:65536"},
    {HTTP_GET, "localhost:123456", NULL, NULL, NULL, HOST, "Host localhost:123456"},
    {HTTP_GET, "localhost:80a", NULL, NULL, NULL, HOST, "Host localhost:80a"},
    {HTTP_GET, "localhost:8080:80", NULL, NULL, NULL, HOST, "Host localhost:8080:80"},
    {HTTP_GET, "user@localhost", NULL, NULL, NULL, HOST, "Host user@localhost"},
    {HTTP_GET, "localhost, evil.example", NULL, NULL, NULL, HOST, "two Hosts joined"},

    /* Origin: exactly http:// and the Host. */
    {HTTP_POST, "127.0.0.1:8080", "http://127.0.0.1:8080", NULL, FORM, PASS,
     "Origin http:// + Host"},
    {HTTP_POST, "localhost:8080", "http://localhost:8080", NULL, FORM, PASS,
     "Origin http://localhost:8080"},
    {HTTP_POST, "[::1]:8080", "http://[::1]:8080", NULL, FORM, PASS, "Origin http://[::1]:8080"},
    {HTTP_POST, "localhost:8080", "HTTP://LOCALHOST:8080", NULL, FORM, PASS,
     "Origin in capitals (scheme and name have no case)"},
    {HTTP_POST, "127.0.0.1:8080", "http://evil.example", NULL, FORM, ORIGIN,
     "Origin of another site"},
    {HTTP_POST, "127.0.0.1:8080", "https://127.0.0.1:8080", NULL, FORM, ORIGIN,
     "Origin https:// (another scheme)"},
    {HTTP_POST, "127.0.0.1:8080", "http://127.0.0.1:9090", NULL, FORM, ORIGIN,
     "Origin on another port"},
    {HTTP_POST, "127.0.0.1:8080", "http://127.0.0.1", NULL, FORM, ORIGIN,
     "Origin without the port"},
    {HTTP_POST, "127.0.0.1", "http://127.0.0.1:80", NULL, FORM, ORIGIN,
     "Origin with a port the Host has not"},
    {HTTP_POST, "127.0.0.1:8080", "http://localhost:8080", NULL, FORM, ORIGIN,
     "Origin under the other name"},
    {HTTP_POST, "127.0.0.1:8080", "http://127.0.0.1:8080/", NULL, FORM, ORIGIN,
     "Origin with a path"},
    {HTTP_POST, "127.0.0.1:8080", "http://127.0.0.1:80800", NULL, FORM, ORIGIN,
     "Origin that starts with the Host"},
    {HTTP_POST, "127.0.0.1:8080", "", NULL, FORM, ORIGIN, "Origin empty"},
    {HTTP_POST, "127.0.0.1:8080", "http://127.0.0.1:8080, http://127.0.0.1:8080", NULL, FORM,
     ORIGIN, "two Origins joined"},
    {HTTP_POST, "127.0.0.1:8080", "null", NULL, FORM, ORIGIN_NULL, "Origin null"},
    {HTTP_GET, "127.0.0.1:8080", "null", NULL, NULL, ORIGIN_NULL, "Origin null on a GET"},
    {HTTP_GET, "evil.example", "http://evil.example", NULL, NULL, HOST,
     "a rebound name with its own Origin: Host first"},

    /* Sec-Fetch-Site: same-origin or none. */
    {HTTP_GET, "127.0.0.1:8080", NULL, "same-origin", NULL, PASS, "Sec-Fetch-Site same-origin"},
    {HTTP_GET, "127.0.0.1:8080", NULL, "none", NULL, PASS, "Sec-Fetch-Site none (typed address)"},
    {HTTP_GET, "127.0.0.1:8080", NULL, "cross-site", NULL, FETCH_SITE, "Sec-Fetch-Site cross-site"},
    {HTTP_GET, "127.0.0.1:8080", NULL, "same-site", NULL, FETCH_SITE,
     "Sec-Fetch-Site same-site (another port of localhost)"},
    {HTTP_POST, "127.0.0.1:8080", NULL, "cross-site", FORM, FETCH_SITE,
     "a POST with Sec-Fetch-Site cross-site and no Origin"},
    {HTTP_GET, "127.0.0.1:8080", NULL, "", NULL, FETCH_SITE, "Sec-Fetch-Site empty"},
    {HTTP_GET, "127.0.0.1:8080", NULL, "same-origin, cross-site", NULL, FETCH_SITE,
     "two Sec-Fetch-Sites joined"},

    /* Content-Type of a POST: the dashboard's form. */
    {HTTP_POST, "localhost", NULL, NULL, FORM, PASS, "POST form-urlencoded (curl -d)"},
    {HTTP_POST, "localhost", NULL, NULL, FORM ";charset=UTF-8", PASS, "with ;charset=UTF-8"},
    {HTTP_POST, "localhost", NULL, NULL, FORM " ; charset=UTF-8", PASS, "with ' ; charset'"},
    {HTTP_POST, "localhost", NULL, NULL, "Application/X-WWW-Form-URLEncoded", PASS,
     "in capitals (media types have no case)"},
    {HTTP_POST, "localhost", NULL, NULL, NULL, TYPE, "POST without Content-Type"},
    {HTTP_POST, "localhost", NULL, NULL, "text/plain", TYPE, "POST text/plain"},
    {HTTP_POST, "localhost", NULL, NULL, "multipart/form-data; boundary=x", TYPE,
     "POST multipart/form-data"},
    {HTTP_POST, "localhost", NULL, NULL, FORM "x", TYPE, "POST " FORM "x"},
    {HTTP_POST, "localhost", NULL, NULL, FORM ", text/plain", TYPE, "two Content-Types joined"},
    {HTTP_GET, "localhost", NULL, NULL, "text/plain", PASS, "a GET's Content-Type is not read"},
    {HTTP_HEAD, "localhost", "http://evil.example", NULL, NULL, ORIGIN,
     "HEAD follows the same rules"},

    /* What the dashboard sends from its own page. */
    {HTTP_GET, "127.0.0.1:8080", NULL, "same-origin", NULL, PASS, "dashboard's GET"},
    {HTTP_POST, "127.0.0.1:8080", "http://127.0.0.1:8080", "same-origin", FORM, PASS,
     "dashboard's POST from http://127.0.0.1:8080"},
    {HTTP_POST, "localhost:8080", "http://localhost:8080", "same-origin", FORM, PASS,
     "dashboard's POST from http://localhost:8080"},
    /* What a page of another origin sends. */
    {HTTP_POST, "127.0.0.1:8080", "http://localhost:9090", "same-site", FORM, ORIGIN,
     "a form POST from http://localhost:9090"},
    {HTTP_POST, "127.0.0.1:8080", NULL, "cross-site", "text/plain;charset=UTF-8", FETCH_SITE,
     "a no-cors fetch that sent no Origin"},
};

/* A request a proxy carried, and absolute-form targets: refused for what
 * they carry, whatever their Host. */
static void proxied(void)
{
    static const char *const proxy[] = {"Forwarded", "X-Forwarded-For", "X-Real-IP", "Via"};
    struct request req;
    char desc[160];
    for (size_t i = 0; i < sizeof proxy / sizeof proxy[0]; i++) {
        memset(&req, 0, sizeof req);
        req.method = HTTP_GET;
        req.headers[HEADER_HOST] = "127.0.0.1:8080";
        req.proxied_by = proxy[i];
        const char *got = settings_refusal(&req);
        snprintf(desc, sizeof desc, "a GET a proxy carried (%s) under Host 127.0.0.1:8080",
                 proxy[i]);
        ok(got != NULL && strncmp(got, "a proxied request", 17) == 0, desc);
    }
    static const struct {
        const char *authority;
        bool pass;
    } targets[] = {
        {"example.com", false},   {"example.com:8080", false}, {"10.0.0.1", false},
        {"127.0.0.1:8080", true}, {"localhost", true},         {"[::1]:80", true},
    };
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        memset(&req, 0, sizeof req);
        req.method = HTTP_GET;
        req.headers[HEADER_HOST] = "127.0.0.1:8080";
        req.authority = targets[i].authority;
        req.authority_len = strlen(targets[i].authority);
        const char *got = settings_refusal(&req);
        snprintf(desc, sizeof desc, "GET http://%s/settings under Host 127.0.0.1:8080: %s",
                 targets[i].authority, targets[i].pass ? "answered" : "refused");
        if (targets[i].pass)
            ok(got == NULL, desc);
        else
            ok(got != NULL && strncmp(got, "an absolute-form target", 23) == 0, desc);
    }
}

int main(void)
{
    proxied();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct origin_case *t = &cases[i];
        struct request req;
        memset(&req, 0, sizeof req);
        req.method = t->method;
        req.head = t->method == HTTP_HEAD;
        req.headers[HEADER_HOST] = t->host;
        req.headers[HEADER_ORIGIN] = t->origin;
        req.headers[HEADER_SEC_FETCH_SITE] = t->fetch_site;
        req.headers[HEADER_CONTENT_TYPE] = t->content_type;
        const char *got = settings_refusal(&req);
        char desc[160];
        snprintf(desc, sizeof desc, "%s: %s", t->what,
                 t->want == PASS ? "answered" : rule_start[t->want]);
        if (t->want == PASS) {
            if (!ok(got == NULL, desc))
                printf("#   refused: %s\n", got);
        } else {
            const char *start = rule_start[t->want];
            if (!ok(got != NULL && strncmp(got, start, strlen(start)) == 0, desc))
                printf("#   got: %s\n", got ? got : "(answered)");
        }
    }
    return tap_done();
}
