/* Validators and conditional requests (RFC 9110 8.8 and 13). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "handlers/files/cond.h"
#include "server/base/http_date.h"
#include "tests/tap.h"

#define MTIME ((time_t)1000000000) /* Sun, 09 Sep 2001 01:46:40 GMT */

/* A valid entity-tag (RFC 9110 8.8.3): optional W/, DQUOTE, etagc, DQUOTE. */
static bool valid_etag(const char *t)
{
    if (strncmp(t, "W/", 2) == 0)
        t += 2;
    size_t len = strlen(t);
    if (len < 2 || t[0] != '"' || t[len - 1] != '"')
        return false;
    for (size_t i = 1; i + 1 < len; i++) {
        unsigned char ch = (unsigned char)t[i];
        if (ch < 0x21 || ch == '"' || ch == 0x7f)
            return false;
    }
    return true;
}

static void test_etag_make(void)
{
    /* exactly ETAG_LEN on the heap: ASan sees a write past it */
    char *a = malloc(ETAG_LEN), *b = malloc(ETAG_LEN);

    etag_make(1, 2, 3, "", a);
    ok(valid_etag(a), "etag_make: a valid strong entity-tag");
    if (!valid_etag(a))
        printf("#   got %s\n", a);
    ok(strncmp(a, "W/", 2) != 0, "  not weak");
    etag_make(1, 2, 3, "", b);
    is_str(b, a, "  the same inputs give the same tag");

    static const struct {
        uint64_t ino, size;
        int64_t mtime_ns;
        const char *what;
    } other[] = {
        {2, 2, 3, "another inode"},
        {1, 3, 3, "another size"},
        {1, 2, 4, "another mtime (1 ns later)"},
        {1, 2, 3000000003, "another mtime (1 s later)"},
    };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        char desc[96];
        etag_make(other[i].ino, other[i].size, other[i].mtime_ns, "", b);
        snprintf(desc, sizeof desc, "  %s: another tag", other[i].what);
        ok(strcmp(a, b) != 0, desc);
    }
    /* the fields must not run into each other: (0x12, 0x3) vs (0x1, 0x23) */
    etag_make(0x12, 0x3, 5, "", a);
    etag_make(0x1, 0x23, 5, "", b);
    ok(strcmp(a, b) != 0, "  fields are delimited");

    etag_make(1, 2, 3, "-gz", b);
    etag_make(1, 2, 3, "", a);
    ok(valid_etag(b), "with a suffix: still a valid entity-tag");
    ok(strcmp(a, b) != 0, "  another tag than without");
    size_t blen = strlen(b);
    ok(blen > 4 && strcmp(b + blen - 4, "-gz\"") == 0, "  the suffix is inside the quotes");

    etag_make(UINT64_MAX, UINT64_MAX, INT64_MAX, "-gzip", a);
    ok(valid_etag(a) && strlen(a) < ETAG_LEN, "largest values with a suffix fit ETAG_LEN");
    etag_make(UINT64_MAX, UINT64_MAX, INT64_MIN, "-gzip", a);
    ok(valid_etag(a) && strlen(a) < ETAG_LEN, "a negative mtime (before 1970) fits too");
    is_str(a, "\"ffffffffffffffff-ffffffffffffffff-8000000000000000-gzip\"",
           "  as hex: inode, size, mtime in ns, suffix");
    etag_make(0, 0, 0, "", a);
    ok(valid_etag(a), "all zero: valid");
    is_str(a, "\"0-0-0\"", "  \"0-0-0\"");
    etag_make(0x12, 0xabc, 1, "-gz", a);
    is_str(a, "\"12-abc-1-gz\"", "  \"12-abc-1-gz\"");
    free(a);
    free(b);
}

static void test_list_match(void)
{
    static const struct {
        const char *list, *etag;
        bool strong, want;
    } cases[] = {
        {"\"abc\"", "\"abc\"", false, true},
        {"\"abc\"", "\"abc\"", true, true},
        {"W/\"abc\"", "\"abc\"", false, true},
        {"W/\"abc\"", "\"abc\"", true, false},
        {"\"abc\"", "W/\"abc\"", false, true},
        {"\"abc\"", "W/\"abc\"", true, false},
        {"W/\"abc\"", "W/\"abc\"", false, true},
        {"W/\"abc\"", "W/\"abc\"", true, false},
        {"*", "\"abc\"", false, true},
        {"*", "\"abc\"", true, true},
        {" * ", "\"abc\"", false, true},
        {"*", "W/\"abc\"", false, true},
        {"\"x\", \"abc\"", "\"abc\"", false, true},
        {"\"x\",\"abc\"", "\"abc\"", false, true},
        {"\"x\" ,\t\"abc\" ", "\"abc\"", true, true},
        {"\"x\", W/\"abc\"", "\"abc\"", false, true},
        {"\"x\", W/\"abc\"", "\"abc\"", true, false},
        {"\"abc\", \"x\"", "\"abc\"", false, true},
        {"  \"abc\"  ", "\"abc\"", false, true},
        {"\"a,b\"", "\"a,b\"", false, true},
        {"\"a\", \"b\"", "\"a,b\"", false, false},
        /* empty list elements are allowed (RFC 9110 5.6.1.2) */
        {", \"abc\"", "\"abc\"", false, true},
        {"\"x\",, \"abc\"", "\"abc\"", false, true},
        {"\"x\", , \"abc\"", "\"abc\"", true, true},
        {"\"x\",", "\"abc\"", false, false},
        /* no match */
        {"\"ab\"", "\"abc\"", false, false},
        {"\"abcd\"", "\"abc\"", false, false},
        {"\"ABC\"", "\"abc\"", false, false},
        {"\"x\", \"y\"", "\"abc\"", false, false},
        {"\"\"", "\"abc\"", false, false},
        /* malformed: matches nothing */
        {"", "\"abc\"", false, false},
        {",", "\"abc\"", false, false},
        {"abc", "\"abc\"", false, false},
        {"\"abc", "\"abc\"", false, false},
        {"\"", "\"abc\"", false, false},
        {"W/", "\"abc\"", false, false},
        {"W/abc", "\"abc\"", false, false},
        {"w/\"abc\"", "\"abc\"", true, false},
        {"'abc'", "\"abc\"", false, false},
        {"**", "\"abc\"", false, false},
        {"*x", "\"abc\"", false, false},
        {"*, \"x\"", "\"abc\"", false, false},
        {"garbage, \"x\"", "\"abc\"", false, false},
        {"\"x\" garbage", "\"abc\"", false, false},
        {"\"x\"\"abc\"", "\"abc\"", true, false},
        {"\"x\", \"abc", "\"abc\"", false, false},
        {"\"x\", \"ab", "\"abc\"", false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char desc[160];
        snprintf(desc, sizeof desc, "list %s vs %s, %s: %s", cases[i].list, cases[i].etag,
                 cases[i].strong ? "strong" : "weak", cases[i].want ? "match" : "no match");
        is_int(etag_list_match(cases[i].list, cases[i].etag, cases[i].strong), cases[i].want, desc);
    }

    /* a long list: 1000 tags, ours last or absent */
    size_t cap = 1000 * 16 + 32;
    char *list = malloc(cap);
    size_t len = 0;
    for (int i = 0; i < 1000; i++)
        len += (size_t)snprintf(list + len, cap - len, "%s\"t%d\"", i ? ", " : "", i);
    ok(etag_list_match(list, "\"t999\"", true), "1000 tags, ours last: match");
    ok(!etag_list_match(list, "\"t1000\"", false), "1000 tags, not ours: no match");
    free(list);

    /* a tag of 1 MB, no closing quote */
    cap = 1000000 + 2;
    list = malloc(cap);
    list[0] = '"';
    memset(list + 1, 'a', cap - 2);
    list[cap - 1] = '\0';
    ok(!etag_list_match(list, "\"abc\"", false), "a 1 MB unterminated tag: no match");
    free(list);
}

/* HTTP-dates around MTIME. */
static char at[HTTP_DATE_LEN], before[HTTP_DATE_LEN], after[HTTP_DATE_LEN];

#define ETAG  "\"1-2-3\""
#define OTHER "\"9-9-9\""

static void test_cond_check(void)
{
    http_date_format(MTIME, at);
    http_date_format(MTIME - 1, before);
    http_date_format(MTIME + 1, after);
    is_str(at, "Sun, 09 Sep 2001 01:46:40 GMT", "the date the cases use");

    static const struct {
        const char *desc;
        const char *if_match, *if_unmodified_since, *if_none_match, *if_modified_since;
        bool get_or_head;
        int want;
    } cases[] = {
        {"no conditions", NULL, NULL, NULL, NULL, true, 0},
        {"no conditions, POST", NULL, NULL, NULL, NULL, false, 0},
        /* If-None-Match (13.1.2): weak comparison */
        {"INM ours", NULL, NULL, ETAG, NULL, true, 304},
        {"INM ours, not GET/HEAD", NULL, NULL, ETAG, NULL, false, 412},
        {"INM W/ours", NULL, NULL, "W/" ETAG, NULL, true, 304},
        {"INM another", NULL, NULL, OTHER, NULL, true, 0},
        {"INM list with ours", NULL, NULL, OTHER ", " ETAG, NULL, true, 304},
        {"INM list without ours", NULL, NULL, OTHER ", \"x\"", NULL, true, 0},
        {"INM *", NULL, NULL, "*", NULL, true, 304},
        {"INM *, not GET/HEAD", NULL, NULL, "*", NULL, false, 412},
        {"INM garbage", NULL, NULL, "garbage", NULL, true, 0},
        {"INM unterminated", NULL, NULL, "\"1-2-3", NULL, true, 0},
        /* If-Modified-Since (13.1.3) */
        {"IMS = mtime", NULL, NULL, NULL, at, true, 304},
        {"IMS after mtime", NULL, NULL, NULL, after, true, 304},
        {"IMS before mtime", NULL, NULL, NULL, before, true, 0},
        {"IMS = mtime, not GET/HEAD: ignored", NULL, NULL, NULL, at, false, 0},
        {"IMS in RFC 850 form", NULL, NULL, NULL, "Sunday, 09-Sep-01 01:46:40 GMT", true, 304},
        {"IMS in asctime form", NULL, NULL, NULL, "Sun Sep  9 01:46:40 2001", true, 304},
        {"IMS garbage: ignored", NULL, NULL, NULL, "garbage", true, 0},
        {"IMS empty: ignored", NULL, NULL, NULL, "", true, 0},
        {"IMS day 32: ignored", NULL, NULL, NULL, "Sun, 32 Sep 2001 01:46:40 GMT", true, 0},
        {"IMS hour 25: ignored", NULL, NULL, NULL, "Sun, 09 Sep 2001 25:46:40 GMT", true, 0},
        {"IMS month Foo: ignored", NULL, NULL, NULL, "Sun, 09 Foo 2001 01:46:40 GMT", true, 0},
        {"IMS not GMT: ignored", NULL, NULL, NULL, "Sun, 09 Sep 2001 01:46:40 PST", true, 0},
        {"IMS trailing junk: ignored", NULL, NULL, NULL, "Sun, 09 Sep 2001 01:46:40 GMTx", true, 0},
        {"IMS two dates: ignored", NULL, NULL, NULL,
         "Sun, 09 Sep 2001 01:46:40 GMT, Sun, 09 Sep 2001 01:46:40 GMT", true, 0},
        {"IMS a number: ignored", NULL, NULL, NULL, "1000000000", true, 0},
        {"IMS year 99999: ignored", NULL, NULL, NULL, "Sun, 09 Sep 99999 01:46:40 GMT", true, 0},
        /* If-None-Match takes precedence over If-Modified-Since (13.2.2 step 4) */
        {"INM another + IMS after: 200", NULL, NULL, OTHER, after, true, 0},
        {"INM ours + IMS before: 304", NULL, NULL, ETAG, before, true, 304},
        {"INM garbage + IMS after: 200", NULL, NULL, "garbage", after, true, 0},
        /* If-Match (13.1.1): strong comparison */
        {"IM ours", ETAG, NULL, NULL, NULL, true, 0},
        {"IM another", OTHER, NULL, NULL, NULL, true, 412},
        {"IM another, not GET/HEAD", OTHER, NULL, NULL, NULL, false, 412},
        {"IM W/ours (weak never matches)", "W/" ETAG, NULL, NULL, NULL, true, 412},
        {"IM *", "*", NULL, NULL, NULL, true, 0},
        {"IM list with ours", OTHER ", " ETAG, NULL, NULL, NULL, true, 0},
        {"IM garbage", "garbage", NULL, NULL, NULL, true, 412},
        {"IM empty", "", NULL, NULL, NULL, true, 412},
        /* If-Unmodified-Since (13.1.4) */
        {"IUS = mtime", NULL, at, NULL, NULL, true, 0},
        {"IUS after mtime", NULL, after, NULL, NULL, true, 0},
        {"IUS before mtime", NULL, before, NULL, NULL, true, 412},
        {"IUS before mtime, not GET/HEAD", NULL, before, NULL, NULL, false, 412},
        {"IUS garbage: ignored", NULL, "garbage", NULL, NULL, true, 0},
        {"IUS day 0: ignored", NULL, "Sun, 00 Sep 2001 01:46:40 GMT", NULL, NULL, true, 0},
        /* step 2 only when If-Match is absent */
        {"IM ours + IUS before: IUS ignored", ETAG, before, NULL, NULL, true, 0},
        {"IM another + IUS after: 412", OTHER, after, NULL, NULL, true, 412},
        /* steps 1-2 before 3-4 */
        {"IM another + INM ours: 412", OTHER, NULL, ETAG, NULL, true, 412},
        {"IUS before + IMS after: 412", NULL, before, NULL, after, true, 412},
        {"IM ours + INM ours: 304", ETAG, NULL, ETAG, NULL, true, 304},
        {"IM ours + INM another: 200", ETAG, NULL, OTHER, NULL, true, 0},
        {"IUS after + IMS after: 304", NULL, after, NULL, after, true, 304},
        {"all four pass, none modified: 304", ETAG, after, ETAG, after, true, 304},
        {"all four, nothing matches for INM: 200", ETAG, after, OTHER, before, true, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char desc[160];
        snprintf(desc, sizeof desc, "cond_check %s -> %d", cases[i].desc, cases[i].want);
        is_int(cond_check(cases[i].if_match, cases[i].if_unmodified_since, cases[i].if_none_match,
                          cases[i].if_modified_since, cases[i].get_or_head, ETAG, MTIME),
               cases[i].want, desc);
    }

    /* A weak ETag of ours (an on-the-fly encoding): If-None-Match still
     * matches it, If-Match never does. */
    is_int(cond_check(NULL, NULL, "W/" ETAG, NULL, true, "W/" ETAG, MTIME), 304,
           "weak ours, INM W/ours: 304");
    is_int(cond_check(NULL, NULL, ETAG, NULL, true, "W/" ETAG, MTIME), 304,
           "weak ours, INM ours without W/: 304");
    is_int(cond_check("W/" ETAG, NULL, NULL, NULL, true, "W/" ETAG, MTIME), 412,
           "weak ours, IM W/ours: 412");
    is_int(cond_check("*", NULL, NULL, NULL, true, "W/" ETAG, MTIME), 0, "weak ours, IM *: 0");
}

static void test_if_range(void)
{
    static const struct {
        const char *if_range, *etag;
        bool want;
    } cases[] = {
        {ETAG, ETAG, true},
        {" " ETAG, ETAG, true},
        {OTHER, ETAG, false},
        {"W/" ETAG, ETAG, false},
        {"W/" ETAG, "W/" ETAG, false},
        {ETAG, "W/" ETAG, false},
        {ETAG ", " ETAG, ETAG, false},
        {OTHER ", " ETAG, ETAG, false},
        {"*", ETAG, false},
        {"", ETAG, false},
        {"\"", ETAG, false},
        {"\"1-2-3", ETAG, false},
        {"garbage", ETAG, false},
        {"1000000000", ETAG, false},
        {at, ETAG, true},
        {before, ETAG, false},
        {after, ETAG, false},
        {"Sun Sep  9 01:46:40 2001", ETAG, true},
        {"Sunday, 09-Sep-01 01:46:40 GMT", ETAG, true},
        {"Sun, 09 Sep 2001 01:46:40 PST", ETAG, false},
        {"Sun, 32 Sep 2001 01:46:40 GMT", ETAG, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char desc[160];
        snprintf(desc, sizeof desc, "If-Range %s vs %s: %s", cases[i].if_range, cases[i].etag,
                 cases[i].want ? "range applies" : "whole file");
        is_int(cond_if_range(cases[i].if_range, cases[i].etag, MTIME), cases[i].want, desc);
    }
}

int main(void)
{
    test_etag_make();
    test_list_match();
    test_cond_check();
    test_if_range();
    return tap_done();
}
