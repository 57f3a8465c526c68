/* The loop's pass service over a real loop: each subscriber's callbacks
 * once a pass, in the order pass.h documents (run, then end, then begin;
 * subscribers in the order they subscribed), the idle handle active
 * exactly while some subscriber has work waiting, the clock rule, and
 * pass_new once a pass. */
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "server/base/pass.h"
#include "server/base/util.h"
#include "tests/tap.h"

struct sub {
    struct pass_sub s;
    char name;
    int waiting; /* runs of work left */
};

static char calls[256];

static void note(char what, const struct pass_sub *s)
{
    size_t len = strlen(calls);
    snprintf(calls + len, sizeof calls - len, "%s%c%c", len ? " " : "", what,
             container_of(s, const struct sub, s)->name);
}

static void begin(struct pass_sub *s)
{
    note('B', s);
}

static void end(struct pass_sub *s)
{
    note('E', s);
}

static void run(struct pass_sub *s)
{
    struct sub *x = container_of(s, struct sub, s);
    note('R', s);
    x->waiting--;
}

static bool waiting(const struct pass_sub *s)
{
    return container_of(s, const struct sub, s)->waiting > 0;
}

/* One iteration of the loop, the poll not waiting; what it called. */
static const char *one_pass(uv_loop_t *loop)
{
    calls[0] = '\0';
    uv_run(loop, UV_RUN_NOWAIT);
    return calls;
}

static void never(uv_timer_t *t)
{
    (void)t;
}

int main(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    /* The service's handles keep no loop alive: a far timer does. */
    uv_timer_t alive;
    uv_timer_init(&loop, &alive);
    uv_timer_start(&alive, never, 3600 * 1000, 0);

    struct pass p;
    pass_init(&p, &loop);
    struct sub a = {.s = {.begin = begin, .run = run, .waiting = waiting, .end = end}, .name = 'a'};
    struct sub b = {.s = {.begin = begin, .waiting = waiting}, .name = 'b'}; /* runs in begin */
    struct sub c = {.s = {.begin = begin, .run = run, .waiting = waiting, .end = end}, .name = 'c'};
    pass_subscribe(&p, &a.s);
    pass_subscribe(&p, &b.s);
    pass_subscribe(&p, &c.s);

    is_str(one_pass(&loop), "Ea Ec Ba Bb Bc",
           "a pass: every end (prepare), then every begin (check), in the order subscribed");
    ok(!uv_is_active((uv_handle_t *)&p.idle), "  nothing waits: the idle handle is stopped");
    is_str(one_pass(&loop), "Ea Ec Ba Bb Bc", "  once each per pass, pass after pass");

    /* Work waits: the idle runs it before the prepare, each waiting one in
     * order, and stays active while any still waits. */
    c.waiting = 2;
    a.waiting = 1;
    pass_wake(&p);
    ok(uv_is_active((uv_handle_t *)&p.idle), "work waits, woken: the idle handle is active");
    is_str(one_pass(&loop), "Ra Rc Ea Ec Ba Bb Bc",
           "  the waiting ones run first (idle), in order, then the pass ends and begins");
    ok(uv_is_active((uv_handle_t *)&p.idle), "  c still waits: the idle stays active");
    is_str(one_pass(&loop), "Rc Ea Ec Ba Bb Bc", "  only the one that waits runs");
    ok(!uv_is_active((uv_handle_t *)&p.idle), "  none waits after its run: the idle stopped");
    is_str(one_pass(&loop), "Ea Ec Ba Bb Bc", "  and runs nothing the pass after");

    /* A subscriber without run (the send share, whose waiting writes go at
     * the pass's begin) still keeps the idle, and so the poll, awake. */
    b.waiting = 1;
    pass_wake(&p);
    one_pass(&loop);
    ok(uv_is_active((uv_handle_t *)&p.idle), "a waiting subscriber with no run keeps the idle");
    b.waiting = 0;
    one_pass(&loop);
    ok(!uv_is_active((uv_handle_t *)&p.idle), "  until it waits no more");

    /* The clock rule: the pass also ends when the clock has moved. */
    uint64_t n = pass_now(&p);
    calls[0] = '\0';
    is_int(pass_now(&p), n, "pass_now with the clock where it was: the same pass");
    is_str(calls, "", "  nothing ends");
    p.clock_ms = uv_now(&loop) - 1; /* as if the clock had moved since it looked */
    is_int(pass_now(&p), n + 1, "the clock moved: a pass ended");
    is_str(calls, "Ea Ec", "  its end callbacks ran, in order");

    /* Once a pass. */
    uint64_t seen = UINT64_MAX;
    ok(pass_new(&p, &seen), "pass_new: the first call is new");
    ok(!pass_new(&p, &seen), "  the second in the same pass is not");
    one_pass(&loop);
    ok(pass_new(&p, &seen), "  after the loop polled, it is new again");
    ok(!pass_new(&p, &seen), "  once");

    pass_unsubscribe(&p, &b.s);
    is_str(one_pass(&loop), "Ea Ec Ba Bc", "unsubscribed: called no more, the others in order");

    pass_close(&p);
    pass_close(&p); /* once */
    pass_wake(&p);  /* nothing on a closing service */
    ok(pass_new(&p, &seen), "closing: pass_new says yes");
    uv_timer_stop(&alive);
    uv_close((uv_handle_t *)&alive, NULL);
    is_str(one_pass(&loop), "", "closed: no callback runs");
    is_int(uv_loop_close(&loop), 0, "every handle closed");
    return tap_done();
}
