/* zlib's states between streams: a state given back is reused for the same
 * parameters only, and every stream on it makes a whole gzip member of its
 * own input, also after a stream given back in the middle (input and output
 * still pointed at); at most idle_max wait, the oldest giving way; their
 * memory is kept in the budget, which takes it back when it needs room. */
#include "../../server/pool/zstates.c"
#include "tests/tap.h"

#define GZIP(bits) ((bits) + 16)

static const struct zparams big = {Z_DEFAULT_COMPRESSION, GZIP(15), 8};
static const struct zparams small = {Z_DEFAULT_COMPRESSION, GZIP(10), 3};

static unsigned char input[256 * 1024], out[300 * 1024], back[256 * 1024];

/* Runs one whole stream of LEN bytes of input on S (begin, deflate to the
 * end); true when the output gunzips to exactly the input. */
static bool whole_stream(struct zstate *s, size_t len)
{
    if (zstate_begin(s) != Z_OK)
        return false;
    z_stream *z = &s->z;
    z->next_in = input;
    z->avail_in = (uInt)len;
    z->next_out = out;
    z->avail_out = sizeof out;
    if (deflate(z, Z_FINISH) != Z_STREAM_END)
        return false;
    size_t made = sizeof out - z->avail_out;
    z_stream in = {0};
    if (inflateInit2(&in, 16 + 15) != Z_OK)
        return false;
    in.next_in = out;
    in.avail_in = (uInt)made;
    in.next_out = back;
    in.avail_out = sizeof back;
    int rc = inflate(&in, Z_FINISH);
    /* One member, and nothing after it. */
    bool good = rc == Z_STREAM_END && in.avail_in == 0 && in.total_out == len &&
                memcmp(back, input, len) == 0;
    inflateEnd(&in);
    return good;
}

/* A stream cut short: some input taken, some left in front of zlib, output
 * pending, as a client that vanished leaves it. */
static void cut_stream(struct zstate *s)
{
    zstate_begin(s);
    z_stream *z = &s->z;
    z->next_in = input;
    z->avail_in = sizeof input;
    z->next_out = out;
    z->avail_out = 100;
    deflate(z, Z_NO_FLUSH);
}

static void test_reuse(void)
{
    struct zstates zs;
    zstates_init(&zs, NULL, 2);
    struct zstate *a = zstates_take(&zs, &big);
    ok(a != NULL && !a->ready, "the first stream gets a new state");
    ok(whole_stream(a, 100000), "its output gunzips to its input");
    zstates_give(&zs, a);
    is_int(zs.idle, 1, "given back: it waits");
    struct zstate *b = zstates_take(&zs, &big);
    ok(b == a, "the next stream with the same parameters takes it");
    ok(whole_stream(b, 5000), "and makes a whole member of its own input on it");
    zstates_give(&zs, b);
    struct zstate *c = zstates_take(&zs, &small);
    ok(c != a, "other parameters: another state");
    ok(whole_stream(c, 1000), "which works too");
    zstates_give(&zs, c);
    is_int(zs.idle, 2, "both wait");
    is_int(zs.streams, 3, "three streams");
    is_int(zs.allocs, 2, "two states allocated");
    is_int(zs.reused, 1, "one reused");

    struct zstate *d = zstates_take(&zs, &big);
    ok(d == a, "the big one again");
    cut_stream(d);
    ok(d->z.avail_in > 0, "a stream cut short leaves input in front of zlib");
    zstates_give(&zs, d);
    ok(d->z.next_in == Z_NULL && d->z.avail_in == 0 && d->z.next_out == Z_NULL &&
           d->z.avail_out == 0 && d->z.total_in == 0 && d->z.total_out == 0,
       "given back: no input or output left, the counts at zero");
    struct zstate *e = zstates_take(&zs, &big);
    ok(e == d, "the next stream takes it");
    ok(whole_stream(e, sizeof input), "and its output is a whole member of its input alone");
    zstates_give(&zs, e);

    struct zstate *f = zstates_take(&zs, &big);
    zstates_give(&zs, f);
    is_int(zs.streams, 5, "a stream that never began is not counted");
    is_int(zs.idle, 2, "its state, unused, waits again");

    struct zstate *g = zstates_take(&zs, &(struct zparams){Z_DEFAULT_COMPRESSION, GZIP(12), 5});
    ok(whole_stream(g, 3000), "a third kind of state");
    zstates_give(&zs, g);
    is_int(zs.idle, 2, "at most idle_max wait");
    struct zstate *h = zstates_take(&zs, &small);
    ok(h != c, "the one waiting longest gave way");
    is_int(zs.freed, 1, "and was freed");
    zstates_give(&zs, h);
    zstates_fini(&zs);
    is_int(zs.idle, 0, "fini frees what waits");
}

static void test_budget(void)
{
    struct budget b;
    struct zstates zs;
    size_t one = zstate_memory(&big);
    ok(one > 256 * 1024 && one < 300 * 1024, "a default state is counted at about 270 KiB");
    budget_init(&b, 3 * one);
    zstates_init(&zs, &b, 4);
    struct zstate *s[3];
    for (int i = 0; i < 3; i++) {
        s[i] = zstates_take(&zs, &big);
        whole_stream(s[i], 1000);
    }
    for (int i = 0; i < 3; i++)
        zstates_give(&zs, s[i]);
    is_int(zs.idle, 3, "three wait");
    is_int(b.kept, 3 * one, "their memory is kept in the budget");
    struct zstate *t = zstates_take(&zs, &big);
    is_int(b.kept, 2 * one, "one taken: no longer kept");
    struct budget_waiter w = {.client = 1};
    ok(budget_take(&b, &w, 2 * one + 1, NULL), "a reservation that needs their room goes at once");
    is_int(zs.idle, 0, "the waiting states were freed for it");
    is_int(b.kept, 0, "nothing kept");
    whole_stream(t, 1000);
    zstates_give(&zs, t);
    is_int(zs.idle, 0, "a state given back while the budget is full is freed");
    budget_give(&b, 1, 2 * one + 1);
    zstates_fini(&zs);
    ok(b.reclaim == NULL, "fini leaves the budget alone");
}

int main(void)
{
    uint32_t x = 1;
    for (size_t i = 0; i < sizeof input; i++) {
        x = x * 1103515245u + 12345u; /* half noise, half text: deflate has work */
        input[i] = i % 2048 < 1024 ? (unsigned char)(x >> 24) : (unsigned char)('a' + i % 26);
    }
    test_reuse();
    test_budget();
    return tap_done();
}
