/* The piece rule (pump_piece): fixed sizes, whole, auto with and without
 * short work waiting, the end of a file, the one-GiB bound. And a late
 * head (commit_late), over a real loop, gateway and socket (the writer,
 * server/http/writer.c, writes what the pump fills): the fills
 * gather in the first slot, the last with only the room left, and nothing
 * is written until the slot is full or the source has ended; a stop before
 * then leaves no byte in the socket. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/base/util.h"
#include "server/http/writer.h"
#include "server/pool/pump.h"
#include "tests/tap.h"

#define K ((size_t)1 << 10)
#define M ((size_t)1 << 20)
#define G ((uint64_t)1 << 30)

static const struct {
    size_t size, min, max; /* the partition */
    bool short_waiting;
    uint64_t remaining;
    size_t want;
    const char *desc;
} cases[] = {
    {4 * K, 0, 0, false, 16 * M, 4 * K, "4k: 4k"},
    {4 * K, 0, 0, true, 16 * M, 4 * K, "4k: 4k whether short work waits or not"},
    {4 * K, 0, 0, false, 100, 100, "4k: no more than is left"},
    {4 * K, 0, 0, false, 0, 1, "nothing left: at least 1"},
    {CONFIG_WHOLE, 0, 0, false, 16 * M + 7, 16 * M + 7, "whole: all that is left"},
    {CONFIG_WHOLE, 0, 0, true, 16 * M + 7, 16 * M + 7, "whole: whether short work waits or not"},
    {CONFIG_WHOLE, 0, 0, false, 5 * G, (size_t)G, "whole of 5 GiB: one GiB at a time"},
    {2 * (size_t)G, 0, 0, false, 5 * G, (size_t)G, "a size over a GiB: one GiB"},
    {CONFIG_AUTO_SIZE, 64 * K, M, false, 16 * M, M, "auto, no short work waits: max"},
    {CONFIG_AUTO_SIZE, 64 * K, M, true, 16 * M, 64 * K, "auto, short work waits: min"},
    {CONFIG_AUTO_SIZE, 64 * K, M, false, 100 * K, 100 * K, "auto near the end: what is left"},
    {CONFIG_AUTO_SIZE, 64 * K, M, true, 10 * K, 10 * K, "auto, short work, less than min left"},
    {CONFIG_AUTO_SIZE, 64 * K, M, true, 96 * K, 96 * K,
     "auto, short work waits, a rest that is short itself: one piece"},
    {CONFIG_AUTO_SIZE, 64 * K, M, true, 256 * K, 256 * K, "auto, short work, 256k left: one piece"},
    {CONFIG_AUTO_SIZE, 64 * K, M, true, 256 * K + 1, 64 * K, "auto, short work, a byte more: min"},
    {CONFIG_AUTO_SIZE, M, 64 * K, false, 16 * M, M, "auto with min over max: min"},
    {CONFIG_AUTO_SIZE, M, 64 * K, true, 16 * M, M, "auto with min over max, short work: min"},
};

/* A source fed from elsewhere, as a request body is: each unit fed makes
 * MADE bytes (a running count, so that order shows), which a fill writes
 * as far as its CAP lets it, keeping the rest for the next fill. */
#define SLOT 10
#define MADE 4

struct fed_source {
    struct pump_source base;
    int fed;     /* units of input fed and not taken yet */
    bool ended;  /* nothing more will be fed */
    size_t owed; /* bytes made and not written yet */
    char next;   /* the next byte's value */
    size_t caps[8];
    unsigned fills;
};

static int fed_fill(struct pump_source *src, size_t piece, char *buf, size_t cap, size_t *len,
                    bool *eof)
{
    struct fed_source *f = container_of(src, struct fed_source, base);
    if (f->owed == 0 && f->fed > 0) {
        f->fed--;
        f->owed = MADE;
    }
    if (f->fills < sizeof f->caps / sizeof f->caps[0])
        f->caps[f->fills] = cap;
    f->fills++;
    *len = f->owed < cap ? f->owed : cap;
    for (size_t i = 0; i < *len; i++)
        buf[i] = f->next++;
    f->owed -= *len;
    *eof = f->ended && f->fed == 0 && f->owed == 0;
    return 0;
}

static bool fed_ready(struct pump_source *src)
{
    struct fed_source *f = container_of(src, struct fed_source, base);
    return f->owed > 0 || f->fed > 0 || f->ended;
}

static size_t fed_size(struct pump_source *src, size_t piece_max)
{
    return SLOT;
}

static void fed_release(struct pump_source *src)
{
}

static const struct pump_source_ops fed_ops = {
    .fill = fed_fill, .release = fed_release, .ready = fed_ready, .size = fed_size};

static uv_loop_t loop;
static int done_status, done_count;
static int peer = -1; /* the client's end of the socket */

static void on_done(struct writer *w, int status)
{
    done_status = status;
    done_count++;
}

/* Feeds N units (and the end, if END) and runs the loop until the fills
 * they allow are done. */
static void feed(struct writer *w, struct fed_source *f, int n, bool end)
{
    f->fed += n;
    f->ended = end;
    pump_kick(&w->pump);
    uv_run(&loop, UV_RUN_DEFAULT);
}

/* What the client can read now. */
static size_t drain(char *buf, size_t cap)
{
    ssize_t n = recv(peer, buf, cap, MSG_DONTWAIT);
    return n > 0 ? (size_t)n : 0;
}

static const char want_bytes[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};

static void late_head(struct writer *w)
{
    char got[64];
    struct fed_source f = {
        .base = {.ops = &fed_ops, .cls = GATEWAY_GZIP, .slice = 1, .commit_late = true}};
    is_int(writer_start(w, &f.base, "HEAD", 4, false), 0, "late head: started");
    ok(writer_head_held(w), "no input yet: the head is held");
    feed(w, &f, 1, false);
    feed(w, &f, 1, false);
    is_int(f.fills, 2, "two fills");
    is_int(f.caps[1], SLOT - MADE, "the second fill gets the room the first one left");
    is_int(drain(got, sizeof got), 0, "8 bytes of a 10-byte slot: nothing is written");
    ok(writer_head_held(w), "the head is still held");
    feed(w, &f, 1, false);
    is_int(f.caps[2], SLOT - 2 * MADE, "the third fill gets the 2 bytes left");
    is_int(f.fills, 4, "the slot full, the rest of its input goes to a fresh slot");
    is_int(f.caps[3], SLOT, "... with all of its room");
    ok(!writer_head_held(w), "the head is out");
    size_t n = drain(got, sizeof got);
    ok(n == 4 + 12 && memcmp(got, "HEAD", 4) == 0 && memcmp(got + 4, want_bytes, 12) == 0,
       "the client has the head, then the 12 bytes in order");
    feed(w, &f, 0, true);
    is_int(done_count, 1, "the end: done");
    is_int(done_status, 0, "... with success");
}

static void late_head_stopped(struct writer *w)
{
    char got[64];
    struct fed_source f = {
        .base = {.ops = &fed_ops, .cls = GATEWAY_GZIP, .slice = 1, .commit_late = true}};
    done_count = 0;
    is_int(writer_start(w, &f.base, "HEAD", 4, false), 0, "stopped: started");
    feed(w, &f, 2, false);
    is_int(f.fills, 2, "two fills gathered");
    writer_stop(w);
    uv_run(&loop, UV_RUN_DEFAULT);
    is_int(done_count, 1, "a stop with the head held: done");
    is_int(done_status, UV_ECANCELED, "... cancelled");
    is_int(drain(got, sizeof got), 0, "and the client has had nothing");
    is_int(w->pump.env->budget->held, 0, "the budget is given back");
}

static void early_head(struct writer *w)
{
    char got[64];
    struct fed_source f = {.base = {.ops = &fed_ops, .cls = GATEWAY_READ, .slice = 1}};
    done_count = 0;
    is_int(writer_start(w, &f.base, "HEAD", 4, false), 0, "early head: started");
    feed(w, &f, 1, false);
    is_int(drain(got, sizeof got), 4 + MADE,
           "without commit_late the head goes with the first fill");
    feed(w, &f, 0, true);
    is_int(done_status, 0, "and the response ends");
}

static void pump_over_socket(void)
{
    setenv("UV_THREADPOOL_SIZE", "1", 1);
    uv_loop_init(&loop);
    struct gateway gw;
    gateway_init(&gw, &loop, SCHED_MODE_FIFO, 1);
    struct budget budget;
    budget_init(&budget, 1 << 20);
    uint64_t bytes_sent = 0;
    struct pump_env env = {.gateway = &gw, .budget = &budget};
    struct writer_env wenv = {.pump = &env, .bytes_sent = &bytes_sent};
    static const struct writer_ops ops = {.done = on_done};
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) < 0)
        abort();
    peer = fds[1];
    uv_pipe_t pipe;
    uv_pipe_init(&loop, &pipe, 0);
    uv_pipe_open(&pipe, fds[0]);
    struct writer w;
    writer_init(&w, (uv_stream_t *)&pipe, &wenv, &ops);
    writer_set_client(&w, 1);

    late_head(&w);
    late_head_stopped(&w);
    early_head(&w);

    writer_free(&w);
    uv_close((uv_handle_t *)&pipe, NULL);
    gateway_close(&gw);
    uv_run(&loop, UV_RUN_DEFAULT);
    is_int(uv_loop_close(&loop), 0, "the loop closes clean");
    close(peer);
}

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct pump_partition p = {.size = cases[i].size, .min = cases[i].min, .max = cases[i].max};
        is_int(pump_piece(&p, cases[i].short_waiting, cases[i].remaining, false), cases[i].want,
               cases[i].desc);
    }
    struct pump_partition deflating = {.size = CONFIG_AUTO_SIZE, .min = 64 * K, .max = M};
    is_int(pump_piece(&deflating, true, 96 * K, true), 64 * K,
           "auto, short work waits, a deflate's short rest: min (its pieces are CPU time)");
    is_int(pump_piece(&deflating, false, 96 * K, true), 96 * K,
           "auto, no short work waits, a deflate's rest: all of it");
    pump_over_socket();
    return tap_done();
}
