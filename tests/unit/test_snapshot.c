/* The snapshot: objects nest and label what they hold, figures keep their
 * name and value, and what cannot be rendered truthfully fails the whole. */
#include <string.h>

#include "server/base/config.h"
#include "server/base/snapshot.h"
#include "tests/tap.h"

static const struct snap_def count_def = {.key = "count", .metric = "x_count_total"};
static const struct snap_def code_def = {.metric = "x_code_total", .name_label = "code"};
static const struct snap_def info_def = {.key = "mode", .kind = SNAP_INFO};

static void test_tree(void)
{
    struct snapshot s;
    snap_init(&s);
    snap_add(&s, &count_def, 7);
    snap_open(&s, "jobs", NULL);
    snap_open(&s, "open", "class");
    snap_add_named(&s, &code_def, "2xx", 3);
    snap_close(&s);
    snap_close(&s);
    snap_add_size(&s, &count_def, CONFIG_WHOLE);
    snap_add_text(&s, &info_def, NULL, "fair");
    ok(snap_complete(&s), "balanced objects: complete");
    is_int(s.len, 8, "8 entries: 4 figures, 2 objects opened and closed");
    is_int(s.entry[0].parent, SNAP_TOP, "the first figure is at the top");
    is_str(s.entry[0].name, "count", "a figure is named by its definition's key");
    is_int(s.entry[0].value, 7, "with its value");
    is_int(s.entry[2].parent, 1, "\"open\" is in \"jobs\"");
    is_str(s.entry[2].label, "class", "and labels what it holds class=...");
    is_int(s.entry[3].parent, 2, "the named figure is in \"open\"");
    is_str(s.entry[3].name, "2xx", "named by the name it was added with");
    ok(s.entry[4].type == SNAP_CLOSE && s.entry[5].type == SNAP_CLOSE, "two closes");
    is_int(s.entry[6].parent, SNAP_TOP, "after them, the top again");
    ok(s.entry[6].value == 0 && s.entry[6].text[0] == '\0',
       "a size of whole: 0 bytes, no word (one type per figure)");
    is_str(s.entry[7].text, "fair", "an info figure's text, copied");
    snap_free(&s);
    is_int(s.len, 0, "freed: empty");
}

static void test_failures(void)
{
    struct snapshot s;
    snap_init(&s);
    snap_open(&s, "open", NULL);
    ok(!snap_complete(&s), "an object left open: not complete");
    snap_free(&s);

    snap_close(&s);
    ok(!snap_complete(&s), "a close with nothing open fails");
    snap_add(&s, &count_def, 1);
    is_int(s.len, 0, "and nothing is added after");
    snap_free(&s);

    for (int i = 0; i <= SNAP_DEPTH; i++)
        snap_open(&s, "deep", NULL);
    ok(s.failed, "objects deeper than SNAP_DEPTH fail");
    snap_free(&s);

    char long_text[SNAP_TEXT_MAX + 1];
    memset(long_text, 'x', SNAP_TEXT_MAX);
    long_text[SNAP_TEXT_MAX] = '\0';
    snap_add_text(&s, &info_def, NULL, long_text);
    ok(s.failed, "a text too long fails rather than be cut short");
    snap_free(&s);
}

static void test_growth(void)
{
    struct snapshot s;
    snap_init(&s);
    for (int i = 0; i < 1000; i++)
        snap_add(&s, &count_def, (uint64_t)i);
    ok(snap_complete(&s) && s.len == 1000, "1000 figures: the list grows");
    is_int(s.entry[999].value, 999, "and keeps every value");
    snap_free(&s);
}

/* A figure's key is its path: the same in two snapshots built alike, and
 * apart for the same definition under another object or name. */
static void fill_keys(struct snapshot *s, const char *route, uint64_t *keys)
{
    snap_init(s);
    snap_add(s, &count_def, 1);
    snap_open(s, route, "route");
    snap_add_named(s, &code_def, "2xx", 1);
    snap_add_named(s, &code_def, "4xx", 1);
    snap_close(s);
    snap_keys(s, keys);
}

static void test_keys(void)
{
    struct snapshot a, b;
    uint64_t ka[5], kb[5];
    fill_keys(&a, "/gzip", ka);
    fill_keys(&b, "/gzip", kb);
    ok(memcmp(ka, kb, sizeof ka) == 0, "two snapshots built alike: the same keys");
    ok(ka[2] != ka[3], "two names of one definition in one object: two keys");
    snap_free(&b);
    fill_keys(&b, "/stats", kb);
    ok(ka[0] == kb[0] && ka[2] != kb[2], "the same figure under another object: another key");
    snap_free(&a);
    snap_free(&b);
    ok(snap_merge_of(&count_def) == SNAP_SUM && snap_merge_of(&info_def) == SNAP_SAME,
       "merge by kind: a gauge is summed, a text kept");
}

int main(void)
{
    test_keys();
    test_tree();
    test_failures();
    test_growth();
    return tap_done();
}
