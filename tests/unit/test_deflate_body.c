/* The deflate source of a request body (deflate_body_source,
 * handlers/deflate.c: POST /gzip's), driven as the connection and the pump
 * drive it, with no loop and no pool: the body arrives in pieces of one
 * size (a byte, odd sizes, all of it at once), never more than the
 * source's window lets in; after each kick, and after each fill, the pump
 * asks ready and runs a fill (here, on the test's thread) into a slot of
 * the size the source asked for, the first slot gathering until it is full
 * or the body has ended (the source commits late). Memory is granted at
 * once or, in some runs, only after a wait.
 *
 * The fills' bytes, in order, are one gzip member that inflates to exactly
 * the body (the source makes no framing: the pump adds the chunked one, so
 * each fill is checked to fit the room it was given); no piece of the body
 * outgrows the buffer the source holds, which never outgrows a slice; the
 * source holds exactly that buffer and one zlib state; release gives the
 * state back and frees the rest (ASan's leak check). The empty body too.
 *
 * The source calls three functions of the connection and the pump; the
 * test includes deflate.c with those names bound to its own stand-ins. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "handlers/deflate.h"
#include "server/base/util.h"
#include "server/pool/gateway.h"
#include "server/pool/pump.h"
#include "server/pool/zstates.h"
#include "tests/tap.h"

/* ---- the connection and the pump, as the source sees them ------------------ */

static size_t window;         /* body bytes the connection passes on now */
static int kicks;             /* pump_kick calls */
static bool waiting;          /* the pump waits for memory: it asks ready nothing */
static size_t asked;          /* what waits, claimed by asking again once granted */
static bool wait_first;       /* each new reservation waits once */
static size_t reserved;       /* bytes granted to the source */
static int waits;             /* reservations of the source that waited */
static size_t gzip_partition; /* gzip_partition now */

static void stub_body_window(struct conn *c, size_t bytes)
{
    window = bytes;
}

static void stub_kick(struct pump *p)
{
    kicks++;
}

/* As pump_reserve: a reservation that waited is claimed by asking for the
 * same bytes again once it is granted. */
static bool stub_reserve(struct pump *p, size_t bytes)
{
    if (waiting)
        return false;
    if (asked > 0) {
        bool same = asked == bytes;
        asked = 0;
        if (same) {
            reserved += bytes;
            return true;
        }
    }
    if (wait_first) {
        asked = bytes;
        waiting = true;
        waits++;
        return false;
    }
    reserved += bytes;
    return true;
}

static size_t partition_now(struct conn *c)
{
    return gzip_partition;
}

#define conn_body_window stub_body_window
#define pump_kick        stub_kick
#define pump_reserve     stub_reserve
#include "../../handlers/deflate.c"
#undef conn_body_window
#undef pump_kick
#undef pump_reserve

/* ---- the driver ------------------------------------------------------------ */

#define BODY_MAX ((uint64_t)16 << 20) /* gzip_max_body's default */
#define MIB      ((size_t)1 << 20)

static char body[MIB];
static struct zstates zstates;
static struct pump_env env = {.zstates = &zstates};
static struct pump pump = {.env = &env};
static char conn_stand_in;
#define CONN ((struct conn *)(void *)&conn_stand_in)

struct feed {
    const char *desc;
    size_t len;       /* bytes of body[] */
    size_t arrive;    /* the most one on_body call brings */
    bool chunked;     /* no Content-Length: the end comes as a last chunk */
    size_t partition; /* gzip_partition as the response starts */
    size_t later;     /* gzip_partition once LATER_AT bytes are in (a live change); 0: none */
    size_t later_at;  /* body bytes in when it changes */
    bool wait;        /* each reservation waits once */
};

/* What the pump does with the source's fills. */
struct run {
    struct deflate_source *d;
    struct pump_source *src;
    size_t piece_max, alloc;
    bool slot_asked, slot_held; /* the pump's own reservation of its first slot */
    bool committed;             /* the first slot went out, head and all */
    size_t gathered;            /* bytes in the first slot until then */
    char *out;                  /* every fill's bytes, in order */
    size_t out_len, out_cap;
    size_t fills, gathering_fills;
    size_t fills_max, out_max; /* more is a source that never ends */
    bool eof, failed, overflowed, in_bounds, window_shut_waiting;
};

/* fill_next, as the pump has it (with every slot free: the socket takes
 * what is written at once): while no fill runs and the budget is not
 * awaited, a ready source gets a fill, the first slot's memory taken
 * before the first. */
static void fill_next(struct run *r)
{
    while (!r->eof && !r->failed && !waiting && r->src->ops->ready(r->src)) {
        if (r->fills == r->fills_max) {
            r->failed = true;
            break;
        }
        if (!r->slot_held) {
            if (wait_first && !r->slot_asked) {
                r->slot_asked = waiting = true;
                break;
            }
            r->slot_held = true;
        }
        size_t cap = r->committed ? r->alloc : r->alloc - r->gathered;
        if (r->out_len + cap > r->out_cap) {
            r->out_cap = 2 * (r->out_len + cap);
            r->out = realloc(r->out, r->out_cap);
            if (r->out == NULL)
                abort();
        }
        size_t piece = r->src->slice < r->piece_max ? r->src->slice : r->piece_max;
        size_t len = 0;
        bool eof = false;
        if (r->src->ops->fill(r->src, piece, r->out + r->out_len, cap, &len, &eof) < 0 ||
            len > cap) {
            r->failed = true;
            break;
        }
        r->out_len += len;
        r->fills++;
        if (r->out_len > r->out_max) {
            r->failed = true;
            break;
        }
        if (!r->committed) {
            r->gathering_fills++;
            r->gathered += len;
            r->committed = r->gathered == r->alloc || eof;
        }
        r->eof = eof;
    }
    if (waiting && window != 0)
        r->window_shut_waiting = false;
}

/* Whether OUT (LEN bytes) is one gzip member of exactly WANT (N bytes). */
static bool gunzips_to(const char *out, size_t len, const char *want, size_t n)
{
    char *back = malloc(n + 1);
    z_stream in = {0};
    if (back == NULL || inflateInit2(&in, 15 + 16) != Z_OK)
        abort();
    in.next_in = (Bytef *)out;
    in.avail_in = (uInt)len;
    in.next_out = (Bytef *)back;
    in.avail_out = (uInt)(n + 1);
    int rc = inflate(&in, Z_FINISH);
    bool good =
        rc == Z_STREAM_END && in.avail_in == 0 && in.total_out == n && memcmp(back, want, n) == 0;
    inflateEnd(&in);
    free(back);
    return good;
}

/* The body ends: llhttp says so (on_body_end), and the pump is kicked. */
static void body_end(struct run *r)
{
    kicks = 0;
    deflate_body_end(r->d);
    if (kicks > 0)
        fill_next(r);
}

static void drive(const struct feed *f)
{
    window = 0;
    waiting = false;
    asked = 0;
    reserved = 0;
    waits = 0;
    wait_first = f->wait;
    gzip_partition = f->partition;
    /* gzip_on_request's slice: no larger than a body of known length; a
     * chunked body's `whole` is one byte past the limit. */
    struct request req = {
        .has_length = !f->chunked, .content_length = f->len, .chunked = f->chunked};
    struct pump_partition slices = {.size = f->partition};
    size_t slice = !f->chunked                    ? pump_piece(&slices, false, f->len, true)
                   : f->partition == CONFIG_WHOLE ? BODY_MAX + 1
                                                  : f->partition;
    /* A few fills a slice of the smallest, and no more output than zlib's
     * bound for the body: more is a source that never ends. */
    size_t smallest = f->later != 0 && f->later < slice ? f->later : slice;
    struct run r = {.in_bounds = true,
                    .window_shut_waiting = true,
                    .fills_max = 4 * (f->len / smallest + 1) + 100,
                    .out_max = deflateBound(Z_NULL, (uLong)f->len) + 64};
    r.d = deflate_body_source(CONN, &req, slice, BODY_MAX, partition_now);
    ok(r.d != NULL, f->desc);
    r.src = deflate_pump_source(r.d);
    /* pump_start */
    r.src->pump = &pump;
    r.piece_max = r.src->slice;
    r.alloc = r.src->ops->size(r.src, r.piece_max);
    ok(r.src->commit_late && r.src->reserve_late && r.src->held == 0,
       "  it commits late and reserves late: it holds nothing as it starts");
    fill_next(&r);

    size_t in = 0;
    bool ended = false;
    if (!f->chunked && f->len == 0) {
        /* The head completes the message: the body ends at once. */
        body_end(&r);
        ended = true;
    }
    bool stuck = false;
    /* Each step brings a byte at least, or a grant, or the end. */
    for (uint64_t steps = 0; !r.eof && !r.failed && !r.overflowed; steps++) {
        if (steps > 4 * (uint64_t)f->len + 100) {
            stuck = true;
            break;
        }
        if (waiting) {
            /* The budget grants what waited: the pump asks ready again. */
            waiting = false;
            if (r.slot_asked)
                r.slot_held = true;
            fill_next(&r);
        } else if (window > 0 && in < f->len) {
            size_t n = f->len - in;
            n = n < window ? n : window;
            n = n < f->arrive ? n : f->arrive;
            if (r.d->in_len + n > r.d->in_size) {
                r.overflowed = true; /* the window let in more than its buffer holds */
                break;
            }
            window -= n;
            kicks = 0;
            deflate_body_add(r.d, body + in, n);
            in += n;
            if (f->later != 0 && in >= f->later_at)
                gzip_partition = f->later;
            if (kicks > 0)
                fill_next(&r);
            if (!f->chunked && in == f->len) {
                /* llhttp completes the message in the same call. */
                body_end(&r);
                ended = true;
            }
        } else if (f->chunked && !ended && in == f->len && window > 0) {
            /* The last chunk is read only while the window is open. */
            body_end(&r);
            ended = true;
        } else {
            stuck = true; /* nothing would ever happen again: the response hangs */
            break;
        }
        if (r.d->in_size > r.d->in_cap)
            r.in_bounds = false;
    }
    ok(!stuck && !r.failed && r.eof, "  the body goes in and its fills run to the end");
    ok(r.fills >= (f->len + r.piece_max - 1) / r.piece_max, "  at least a fill per slice");
    if (f->wait)
        ok(waits > 0, "  its reservations waited for the budget");
    ok(!r.overflowed, "  the window never lets in more than the input buffer holds");
    ok(r.in_bounds, "  the input buffer never outgrows a slice");
    ok(r.window_shut_waiting, "  while the response waits for memory, the window is shut");
    ok(gunzips_to(r.out, r.out_len, body, f->len),
       "  the fills' bytes are one gzip member of exactly the body");
    if (f->len > 0 && r.alloc < f->len / 2)
        ok(r.gathering_fills > 1, "  the first slot gathered several fills before it went out");
    is_int(reserved, r.d->in_size + zstate_memory(&r.d->params),
           "  it reserved exactly its input buffer and one zlib state");
    uint64_t streams = zstates.streams;
    r.src->ops->release(r.src);
    is_int(zstates.streams, streams + 1, "  release gives its zlib state back");
    free(r.out);
}

int main(void)
{
    /* Text that compresses, with noise so that slices differ. */
    unsigned x = 7;
    for (size_t i = 0; i < sizeof body; i++) {
        x = x * 1103515245u + 12345u;
        body[i] = (x >> 16) % 5 == 0 ? (char)(x >> 8) : "a body to gzip, slice by slice; "[i % 32];
    }
    zstates_init(&zstates, NULL, 4);
    static const struct feed feeds[] = {
        {"an empty body (Content-Length: 0)", .arrive = 1, .partition = 64 << 10},
        {"an empty chunked body", .arrive = 1, .chunked = true, .partition = 64 << 10},
        {"an empty chunked body, memory after a wait", .arrive = 1, .chunked = true,
         .partition = 64 << 10, .wait = true},
        {"one byte", .len = 1, .arrive = 1, .partition = 64 << 10},
        {"1 MiB a byte at a time, 64 KiB slices", .len = MIB, .arrive = 1, .partition = 64 << 10},
        {"1 MiB chunked in 777-byte pieces, 1000-byte slices", .len = MIB, .arrive = 777,
         .chunked = true, .partition = 1000},
        {"1 MiB in 4099-byte pieces, 65537-byte slices, memory after a wait", .len = MIB,
         .arrive = 4099, .partition = 65537, .wait = true},
        {"1 MiB at once, whole", .len = MIB, .arrive = MIB, .partition = CONFIG_WHOLE},
        {"1 MiB chunked at once, whole", .len = MIB, .arrive = MIB, .chunked = true,
         .partition = CONFIG_WHOLE},
        {"1 MiB chunked at once, 64 KiB slices, memory after a wait", .len = MIB, .arrive = MIB,
         .chunked = true, .partition = 64 << 10, .wait = true},
        {"1 MiB in 3001-byte pieces, slices live from 64 KiB to 5000 bytes halfway", .len = MIB,
         .arrive = 3001, .partition = 64 << 10, .later = 5000, .later_at = MIB / 2},
        {"1 MiB in 3001-byte pieces, slices live from 64 KiB to 5000 bytes as the last fills",
         .len = MIB, .arrive = 3001, .partition = 64 << 10, .later = 5000, .later_at = MIB - 100},
        {"1 MiB chunked in 3001-byte pieces, slices live from 4 KiB to 1 MiB (capped)", .len = MIB,
         .arrive = 3001, .chunked = true, .partition = 4096, .later = MIB, .later_at = MIB / 2},
        {"64 KiB chunked in 5-byte pieces, 7-byte slices, memory after a wait", .len = 64 << 10,
         .arrive = 5, .chunked = true, .partition = 7, .wait = true},
    };
    for (size_t i = 0; i < sizeof feeds / sizeof feeds[0]; i++)
        drive(&feeds[i]);
    zstates_fini(&zstates);
    return tap_done();
}
